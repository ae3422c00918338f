//! Temporary entry point of the soak test until it joins the crate's single
//! integration-test binary (tests/bench_native.rs) as `mod live;` and `mod soak;`.

mod common;
#[path = "bench_native/live.rs"]
mod live;
#[path = "bench_native/soak.rs"]
mod soak;
