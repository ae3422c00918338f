//! Temporary entry point of the `run` honesty tests until they join the crate's single
//! integration-test binary (tests/bench_native.rs) as `mod run_honesty;`.

#[path = "bench_native/run_honesty.rs"]
mod run_honesty;
