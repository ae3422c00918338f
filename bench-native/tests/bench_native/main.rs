//! bench-native's integration tests, one binary (`cargo test -p bench-native --test
//! bench_native`). Two tiers:
//!
//! * hermetic (the default): the CLI's parsing and validation, `compare`, `validate
//!   --replay` of recorded runs (`tests/fixtures/`), the load generator against an
//!   in-process fake server, the PGO script's commands. No network, no external server.
//! * live, `#[ignore = "live: …"]`: against a real llama-server or vLLM that the test
//!   starts itself (`scripts/setup.sh server` / `scripts/setup.sh vllm` install them).
//!   Run with `-- --include-ignored`; a missing server is then a failure, never a skip.
//!
//! A module per subject; add a file here and one `mod` line below.

mod balancer;
mod cache_live;
mod cli;
mod client_capability;
mod common;
mod compare;
mod disagg;
mod like;
mod live;
mod merge;
mod pgo_script;
mod plan;
mod prefix_live;
mod real_server;
mod run_honesty;
mod run_users;
mod server_sweep;
mod slot_live;
mod slurm;
mod soak;
mod validate;
mod vllm_live;
mod vllm_server;
