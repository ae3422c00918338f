//! # kvqueue engine
//!
//! A discrete-event simulator and queueing models of a continuous-batching LLM inference
//! server with a finite, paged KV cache. Pure computation: no I/O, no clock, no threads,
//! no OS randomness — the same code runs natively and in the browser (wasm32).
//!
//! ## A tour in five steps
//!
//! 1. Describe the **workload** ([`workload`]): an arrival process and a length
//!    distribution, drawn from two seeded streams (common random numbers across
//!    configurations).
//! 2. Describe the **server** ([`config::ServerConfig`]): policy ([`Policy`]), batch width
//!    B, KV capacity and block size, token budget, KV mode ([`KvMode`]).
//! 3. Pick a **cost model** ([`cost::CostModel`]): the reference formula, a linear fit, a
//!    measured table or a GPU × model roofline.
//! 4. **Simulate** ([`sim::simulate`]) and read the [`metrics::Summary`] — TTFT, TPOT,
//!    E2E, inter-token gaps, throughput, goodput, blocking, preemptions, defined once in
//!    [`metrics`] — or sweep a grid over seeds ([`sweep`]).
//! 5. **Predict** the same metrics analytically in microseconds ([`analytic`]) and compare.
//!
//! ```
//! use engine::{KvMode, Policy, SimConfig};
//! use engine::workload::LengthDist;
//!
//! // The reference study's simulator at 2 req/s, B = 8, K = 8192 tokens…
//! let cfg = SimConfig::reference(2.0, 8, 8192);
//! let rep = engine::sim::simulate(&cfg).unwrap();
//! let ttft = rep.summary.ttft.mean.unwrap();
//! assert!(ttft > 0.0 && ttft < 1.0);
//!
//! // …and a vLLM-like server: chunked prefill, paged KV, ShareGPT lengths.
//! let mut v = SimConfig::vllm_like(4.0);
//! v.server.policy = Policy::Chunked;
//! v.server.kv_mode = KvMode::Paged;
//! v.workload.lengths = LengthDist::sharegpt();
//! v.horizon_s = 60.0;
//! let rep = engine::sim::simulate(&v).unwrap();
//! assert_eq!(rep.summary.rejected, 0);
//!
//! // Bad input is an error, never a panic.
//! assert!(engine::sim::simulate(&SimConfig::reference(-1.0, 8, 8192)).is_err());
//! ```
//!
//! `cargo run --release -p engine --example quick` prints a few such runs;
//! `--example a10g_prediction` predicts a real deployment (vLLM on an A10G). Runs are
//! bounded by [`limits`]: too much work for one run or sweep is an error before it
//! starts, and a drained run that cannot empty its queue stops and says so.
pub mod analytic;
pub mod benchmark;
pub mod config;
pub mod cost;
pub mod data;
pub mod disagg;
pub mod error;
pub mod fleet;
pub mod kv_cache;
pub mod limits;
pub mod metrics;
mod num;
pub mod plan;
pub mod plan_profile;
pub mod record;
pub mod scheduler;
pub mod sim;
pub mod sweep;
pub mod workload;
pub use config::{
    Admission, EndRule, FirstToken, KvMode, Policy, PrefixCache, ServerConfig, SimConfig,
};
pub use error::ConfigError;
pub use limits::Limits;
