//! Run reuse: when one simulated run is, exactly, also the run of another batch width or
//! KV capacity, so a sweep can take its result instead of simulating again.

use crate::config::{KvMode, Policy, ServerConfig};
use crate::sim::RunStats;

/// Whether the run of a configuration with server `s` (its bookkeeping `stats`) is,
/// exactly, also the run of the same configuration with batch width `max_batch` and KV
/// capacity `kv_tokens` instead — every decision, time and record the same — so a sweep
/// can reuse it rather than simulate again ([`crate::sweep::StandIns`]).
///
/// Reserve mode only, under the policies whose only use of B is to cap the running set
/// (serial, static, continuous, chunked, SJF); elsewhere only the same (B, K) qualifies.
/// - **Width.** B only ever limits how many waiting requests join. If the system never
///   held more than B′ requests (waiting + running), no request ever waited for a slot
///   under a width of B′ or more, and the runs agree step for step: the cost of an
///   iteration depends on the running count, never on B.
/// - **KV.** In reserve mode K enters only the admission test (reserved + need ≤ K). If
///   every arrival that reached the test needed at most K′ blocks in use, each is
///   admitted under K′ exactly as it was, and nothing else changes.
pub fn run_also_holds_for(
    s: &ServerConfig,
    stats: &RunStats,
    max_batch: u32,
    kv_tokens: u64,
) -> bool {
    let bs = u64::from(s.block_size.max(1));
    let (have, want) = (s.kv_tokens / bs, kv_tokens / bs);
    let caps_only = s.kv_mode == KvMode::Reserve
        && matches!(
            s.policy,
            Policy::Serial | Policy::Static | Policy::Continuous | Policy::Chunked | Policy::Sjf
        );
    if !caps_only {
        return max_batch == s.max_batch && have == want;
    }
    let width =
        max_batch == s.max_batch || stats.peak_in_system <= u64::from(max_batch.min(s.max_batch));
    let kv = have == want || stats.peak_kv_demand_blocks <= have.min(want);
    width && kv
}
