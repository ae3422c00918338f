//! The end of a run: the sequences still in the system recorded as unfinished, the
//! accumulator and its window, the prefix cache's parts, and a sequence as its record.

use super::clock::count_f64;
use super::{RunStats, Sim, SimReport, TimePoint};
use crate::metrics::{Accumulator, PrefixAccumulator, PrefixSummary};
use crate::num::max_f64;
use crate::record::{Outcome, RequestRecord};
use crate::scheduler::{Running, Scheduler, Seq};
use crate::workload::Request;

impl<S: Scheduler> Sim<'_, S> {
    pub(super) fn finish<I: Iterator<Item = Request>>(self, requests: I) -> SimReport {
        let (acc, window, records, timeseries, mut stats, prefix) = self.finish_parts(requests);
        stats.prefix = prefix.map(PrefixParts::finish);
        SimReport {
            summary: acc.finish(window),
            records,
            timeseries,
            stats,
        }
    }

    /// [`Sim::finish`] before summarising: the accumulator and its window, so a fleet can
    /// merge its servers' accumulators.
    #[allow(clippy::type_complexity)]
    pub(super) fn finish_parts<I: Iterator<Item = Request>>(
        mut self,
        requests: I,
    ) -> (
        Accumulator,
        f64,
        Vec<RequestRecord>,
        Vec<TimePoint>,
        RunStats,
        Option<PrefixParts>,
    ) {
        if self.cut || self.stats.unstable {
            // Arrivals up to the horizon are still admitted or rejected (no releases).
            for r in requests {
                self.arrive(r);
            }
            // An unstable run ends where it stopped (or at its last entry, if later).
            let h = if self.cut {
                self.cfg.horizon_s
            } else {
                max_f64(self.t, self.area_t)
            };
            self.area += count_f64(self.in_system) * (h - self.area_t).max(0.0);
            self.area_t = h;
            for s in &mut self.running[..self.attached] {
                self.clock.sync(s);
            }
            // The state at the end, still holding the unfinished requests.
            self.sample_through(h);
            let mut left: Running = std::mem::take(&mut self.running);
            left.extend(self.sched.drain().into_iter().map(Box::new));
            left.sort_by_key(|s| s.req.id);
            for s in left {
                let rec = record_of(&s, None, Outcome::Unfinished);
                self.record(rec);
            }
            self.t = h;
        }
        let end = if self.cut {
            self.cfg.horizon_s
        } else {
            self.t.max(self.last_event)
        };
        self.sample_through(end);
        if self.cfg.keep_records {
            self.records.sort_by_key(|r| r.id);
        }
        self.stats.end_s = end;
        self.stats.kv_capacity_tokens = self.kv.total_blocks() * self.kv.block_size();
        self.stats.kv_peak_tokens = self.kv.peak_blocks() * self.kv.block_size();
        self.stats.kv_used_at_end_tokens = self.kv.used_blocks() * self.kv.block_size();
        self.stats.time_avg_in_system = if end > 0.0 { self.area / end } else { 0.0 };
        let prefix = match (self.prefix_acc.take(), self.kv.prefix_counts()) {
            (Some(acc), Some(counts)) => {
                let held = self.kv.held_cached_blocks();
                Some(PrefixParts {
                    acc,
                    counts,
                    cached_at_end: self.kv.idle_cached_blocks() + held,
                    held_at_end: held,
                })
            }
            _ => None,
        };
        let window = (end - self.cfg.metrics.warmup_s).max(0.0);
        (
            self.acc,
            window,
            self.records,
            self.ts.points,
            self.stats,
            prefix,
        )
    }
}

/// What a run's prefix cache leaves to summarise: its TTFT samples, the KV manager's
/// counts, and its cached and still-held blocks at the end.
#[derive(Debug)]
pub(crate) struct PrefixParts {
    pub acc: PrefixAccumulator,
    pub counts: crate::kv_cache::PrefixCounts,
    pub cached_at_end: u64,
    pub held_at_end: u64,
}

impl PrefixParts {
    pub fn finish(self) -> PrefixSummary {
        self.acc
            .finish(self.counts, self.cached_at_end, self.held_at_end)
    }
}

pub(super) fn record_of(s: &Seq, finish: Option<f64>, outcome: Outcome) -> RequestRecord {
    RequestRecord {
        id: s.req.id,
        class: s.req.class,
        arrival_s: s.req.arrival,
        first_token_s: (!s.first_token.is_nan()).then_some(s.first_token),
        finish_s: finish,
        prompt_tokens: s.req.prompt,
        output_tokens: s.generated,
        max_gap_s: s.max_gap,
        stalls: s.stalls,
        preemptions: s.preemptions,
        outcome,
        admitted_s: (!s.admitted.is_nan()).then_some(s.admitted),
        cached_tokens: s.hit_tokens,
    }
}
