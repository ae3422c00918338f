//! Prefix-cache metrics (docs/model.md, Prefix caching), defined once:
//!
//! * block hit rate = blocks found / full prompt blocks looked up, over admissions
//!   (a re-admission after preemption looks up again);
//! * token hit rate = prompt tokens found cached / prompt tokens to prefill at those
//!   admissions (vLLM's `prefix_cache_hits / prefix_cache_queries`);
//! * prefill tokens saved = the tokens found cached;
//! * TTFT of hits and of misses: completed requests (after warm-up) whose first
//!   admission found at least one block cached, and the others.

use super::{Dist, Quantiles};
use crate::kv_cache::PrefixCounts;
use crate::record::{Outcome, RequestRecord};
use serde::{Deserialize, Serialize};

/// What a run's prefix cache did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixSummary {
    /// Admissions that looked their prompt up, and those that hit at least one block.
    pub lookups: u64,
    pub hit_lookups: u64,
    /// Full prompt blocks looked up, and found.
    pub query_blocks: u64,
    pub hit_blocks: u64,
    /// Prompt tokens to prefill before the cache, and those found cached (= prefill
    /// tokens saved) [tokens].
    pub query_tokens: u64,
    pub saved_tokens: u64,
    /// hit_blocks / query_blocks (None: nothing looked up).
    pub block_hit_rate: Option<f64>,
    /// saved_tokens / query_tokens (None: nothing looked up).
    pub token_hit_rate: Option<f64>,
    /// TTFT of completed requests whose first admission hit, and of the others [s].
    pub ttft_hit: Dist,
    pub ttft_miss: Dist,
    /// Idle cached blocks evicted to make room.
    pub evictions: u64,
    /// Most blocks in the cache at once, and at the end of the run.
    pub peak_cached_blocks: u64,
    pub cached_blocks_at_end: u64,
    /// Cached blocks still held by a request at the end (0 after a drained run).
    pub held_blocks_at_end: u64,
}

/// `hits / queries`, or `None` with no queries.
pub fn hit_rate(hits: u64, queries: u64) -> Option<f64> {
    (queries > 0).then(|| hits as f64 / queries as f64)
}

/// Streams completed requests' TTFTs, split by hit and miss.
#[derive(Debug, Default)]
pub struct PrefixAccumulator {
    warmup_s: f64,
    hit: Quantiles,
    miss: Quantiles,
}

impl PrefixAccumulator {
    /// Ignores records arriving before `warmup_s` [s], as [`super::Accumulator`] does.
    pub fn new(warmup_s: f64) -> PrefixAccumulator {
        PrefixAccumulator {
            warmup_s,
            ..PrefixAccumulator::default()
        }
    }

    /// Adds a record whose first admission found `hit_tokens` prompt tokens cached.
    pub fn push(&mut self, r: &RequestRecord, hit_tokens: u32) {
        if r.arrival_s < self.warmup_s || r.outcome != Outcome::Completed {
            return;
        }
        if let Some(x) = r.ttft() {
            if hit_tokens > 0 {
                self.hit.push(x);
            } else {
                self.miss.push(x);
            }
        }
    }

    /// Adds another server's records (a fleet's replicas, summed).
    pub fn merge(&mut self, other: &PrefixAccumulator) {
        self.hit.merge(&other.hit);
        self.miss.merge(&other.miss);
    }

    /// The summary, with the KV manager's counts and its cached blocks at the end.
    pub fn finish(self, c: PrefixCounts, cached_at_end: u64, held_at_end: u64) -> PrefixSummary {
        PrefixSummary {
            lookups: c.lookups,
            hit_lookups: c.hit_lookups,
            query_blocks: c.query_blocks,
            hit_blocks: c.hit_blocks,
            query_tokens: c.query_tokens,
            saved_tokens: c.hit_tokens,
            block_hit_rate: hit_rate(c.hit_blocks, c.query_blocks),
            token_hit_rate: hit_rate(c.hit_tokens, c.query_tokens),
            ttft_hit: self.hit.dist(),
            ttft_miss: self.miss.dist(),
            evictions: c.evictions,
            peak_cached_blocks: c.peak_cached_blocks,
            cached_blocks_at_end: cached_at_end,
            held_blocks_at_end: held_at_end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_split() {
        assert_eq!(hit_rate(0, 0), None);
        assert_eq!(hit_rate(3, 4), Some(0.75));
        let rec = |arrival_s: f64, ttft: f64, outcome| RequestRecord {
            id: 0,
            class: 0,
            arrival_s,
            first_token_s: Some(arrival_s + ttft),
            finish_s: Some(arrival_s + 1.0),
            prompt_tokens: 10,
            output_tokens: 2,
            max_gap_s: 0.0,
            stalls: 0,
            preemptions: 0,
            outcome,
            admitted_s: None,
            cached_tokens: 0,
        };
        let mut a = PrefixAccumulator::new(1.0);
        a.push(&rec(0.5, 9.0, Outcome::Completed), 16); // warm-up
        a.push(&rec(2.0, 0.1, Outcome::Completed), 16);
        a.push(&rec(2.0, 0.3, Outcome::Completed), 0);
        a.push(&rec(2.0, 0.5, Outcome::Completed), 0);
        a.push(&rec(2.0, 0.7, Outcome::Unfinished), 0);
        let c = PrefixCounts {
            query_blocks: 8,
            hit_blocks: 2,
            query_tokens: 200,
            hit_tokens: 32,
            ..PrefixCounts::default()
        };
        let s = a.finish(c, 5, 0);
        assert_eq!(s.ttft_hit.n, 1);
        assert_eq!(s.ttft_miss.n, 2);
        assert!((s.ttft_miss.mean.unwrap() - 0.4).abs() < 1e-12);
        assert_eq!(s.block_hit_rate, Some(0.25));
        assert_eq!(s.token_hit_rate, Some(0.16));
        assert_eq!(s.saved_tokens, 32);
    }
}
