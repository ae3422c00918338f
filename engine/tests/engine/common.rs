//! Shared by the native and the wasm test binaries.
#![allow(dead_code)]

use engine::config::{KvMode, Policy, SimConfig};
use engine::workload::LengthDist;

/// A configuration exercising chunked prefill, paging, preemption and the table cost.
pub fn wasm_digest_config() -> SimConfig {
    let mut cfg = SimConfig::vllm_like(9.0);
    cfg.workload.lengths = LengthDist::sharegpt();
    cfg.server.policy = Policy::Chunked;
    cfg.server.kv_mode = KvMode::Paged;
    cfg.server.kv_tokens = 8192;
    cfg.server.max_batch = 32;
    cfg.server.token_budget = 512;
    cfg.horizon_s = 60.0;
    cfg.seed = 42;
    cfg.keep_records = true;
    cfg
}

/// FNV digest of the records of [`wasm_digest_config`], computed natively.
pub const GOLDEN_DIGEST: u64 = 7_354_201_203_709_329_507;
