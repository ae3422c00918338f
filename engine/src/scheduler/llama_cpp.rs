//! `llama_cpp`: the slot scheduling of llama.cpp's `llama-server -np SLOTS -b BATCH`.
//!
//! What the server does (`tools/server/server-context.cpp` of the llama.cpp that
//! llama-cpp-python 0.3.36 vendors, the build `scripts/llama-server.sh` makes):
//! * A request waits in the task queue until a slot is idle, then takes the idle slot that
//!   was **released longest ago** (`get_available_slot`: the loop keeps a slot whose
//!   `t_last_used <= t_last`, so among slots never used, or released together, the one with
//!   the **highest index** wins). Before that the server looks for an idle slot whose
//!   cached tokens share more than 10 % of the new prompt (`--slot-prompt-similarity`,
//!   first best wins, so the lowest index among equals). With the slot cache on
//!   ([`crate::config::PrefixCache::Slot`]) the simulator applies that rule as written,
//!   the common prefix from what the workload shares ([`crate::kv_cache::slot_common_prefix`]),
//!   and the request reuses the chosen slot's cached prefix. With it off, prompts are
//!   taken to share only their first token (BOS) with a used slot's cache, as
//!   bench-native's do without `--system-prompt`: a prompt of fewer than
//!   [`SHORT_PROMPT`] tokens takes the **lowest-index idle slot that has served
//!   before**, and a longer one the LRU slot.
//! * With per-slot KV the batch is cut into micro-batches of consecutive slot ids
//!   (`split_equal(…, sequential = true)`): the plan reports how many runs of
//!   consecutive slots the decoding sequences form ([`Plan::decode_ubatches`]), each a
//!   separate forward pass.
//! * Tasks are assigned to slots before each batch is built (`update_slots`), whether or
//!   not the batch has room for their prompt yet.
//! * The batch takes one token for every generating slot, then prompt tokens **slot by
//!   slot in index order** until it holds `-b` tokens. So with several prompts in
//!   progress, the lowest slot's goes first — on a fresh server, the latest arrival's.
//!
//! In the simulator: B = SLOTS, the token budget = `-b`. The running set's unprefilled
//! suffix is kept in slot order (its admission numbers are reassigned in that order, so
//! the running set keeps the shape the event loop relies on: a prefilled prefix, then
//! the rest by admission number). A slot is released when its request leaves the running
//! set; releases seen at the same plan are ordered by slot index (the server frees
//! finished slots in one pass over the slots). The per-slot context split (each slot owns
//! CTX / SLOTS tokens) is the KV configuration of [`crate::ServerConfig::llama_cpp`].

use super::{Fifo, Grant, Plan, PlanCtx, Scheduler, Seq};
use crate::kv_cache::{KvCache, SIMILARITY};

/// Prompts shorter than this take a used slot by prompt similarity: a shared BOS is
/// 1/n of an n-token prompt, above llama-server's 10 % threshold for n < 10 [tokens].
pub const SHORT_PROMPT: u32 = 10;

#[derive(Debug, Default)]
pub struct LlamaCpp {
    waiting: Fifo,
    /// Per slot: the id of the request it serves.
    occupant: Vec<Option<u64>>,
    /// Per slot: when it was last released, as a release count (−1: never).
    last_used: Vec<i64>,
    releases: i64,
    busy: usize,
}

impl LlamaCpp {
    /// Frees the slots whose request has left the running set (completed or preempted).
    fn release_gone(&mut self, running: &[Box<Seq>]) {
        if running.len() == self.busy {
            return;
        }
        for (occ, last) in self.occupant.iter_mut().zip(&mut self.last_used) {
            if occ.is_some_and(|id| !running.iter().any(|s| s.req.id == id)) {
                *occ = None;
                *last = self.releases;
                self.releases += 1;
                self.busy -= 1;
            }
        }
    }

    /// The idle slot `head` takes: by prompt similarity (with the slot cache, the idle
    /// slot whose cached tokens share the largest fraction of its `prefill_target`, if
    /// above [`SIMILARITY`], the lowest index among equals; without it, for a short
    /// prompt the lowest-index idle slot that has served before), otherwise the one
    /// released longest ago, ties to the highest index.
    fn pick_slot(&self, kv: &KvCache, head: &Seq) -> Option<usize> {
        if kv.slot_cache_on() {
            let n = head.prefill_target;
            let mut best: Option<(usize, f32)> = None;
            for i in (0..self.occupant.len()).filter(|&i| self.occupant[i].is_none()) {
                let Some(lcp) = kv.slot_common_prefix(i, &head.req, n) else {
                    continue;
                };
                // As the server computes it: float(lcp) / prompt size, in f32.
                let sim = lcp as f32 / n.max(1) as f32;
                if sim > best.map_or(0.0, |b| b.1) && sim > SIMILARITY {
                    best = Some((i, sim));
                }
            }
            if let Some((i, _)) = best {
                return Some(i);
            }
        } else if head.req.prompt < SHORT_PROMPT {
            let used = (0..self.occupant.len())
                .find(|&i| self.occupant[i].is_none() && self.last_used[i] >= 0);
            if used.is_some() {
                return used;
            }
        }
        let mut best: Option<usize> = None;
        for (i, occ) in self.occupant.iter().enumerate() {
            if occ.is_none() && best.is_none_or(|b| self.last_used[i] <= self.last_used[b]) {
                best = Some(i);
            }
        }
        best
    }

    /// Runs of consecutive slot ids among the slots of `decoding` (one micro-batch each).
    fn decode_runs(&self, decoding: &[Box<Seq>]) -> u32 {
        if decoding.len() <= 1 {
            return decoding.len() as u32;
        }
        let mut ids: Vec<u64> = Vec::new();
        let all = decoding.len() == self.busy;
        if !all {
            ids = decoding.iter().map(|s| s.req.id).collect();
            ids.sort_unstable();
        }
        let (mut runs, mut prev) = (0, false);
        for occ in &self.occupant {
            let on = occ.is_some_and(|id| all || ids.binary_search(&id).is_ok());
            runs += (on && !prev) as u32;
            prev = on;
        }
        runs
    }

    fn slot_of(&self, id: u64) -> usize {
        self.occupant
            .iter()
            .position(|o| *o == Some(id))
            .unwrap_or(usize::MAX)
    }
}

impl Scheduler for LlamaCpp {
    super::fifo_queue!();
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        if self.occupant.len() != ctx.max_batch {
            self.occupant = vec![None; ctx.max_batch];
            self.last_used = vec![-1; ctx.max_batch];
        }
        self.release_gone(ctx.running);
        // Queued requests take idle slots.
        let mut admitted = false;
        while ctx.running.len() < ctx.max_batch {
            let Some(head) = self.waiting.front() else {
                break;
            };
            let Some(slot) = self.pick_slot(ctx.kv, head) else {
                break;
            };
            let grant = if ctx.kv.slot_cache_on() {
                ctx.kv
                    .admit_slot(slot, &head.req, head.prefill_target)
                    .map(|(blocks, hit)| Grant { blocks, hit })
            } else {
                ctx.take_blocks_for(head)
            };
            let Some(grant) = grant else {
                break;
            };
            let s = self.waiting.pop_front().expect("the head was just seen");
            self.occupant[slot] = Some(s.req.id);
            self.busy += 1;
            ctx.admit(s, grant);
            admitted = true;
        }
        // Prompts in progress, in slot order.
        let suffix = &mut ctx.running[ctx.prefilled..];
        if admitted && suffix.len() > 1 {
            let numbers: Vec<u64> = suffix.iter().map(|s| s.admit_seq).collect();
            suffix.sort_by_cached_key(|s| self.slot_of(s.req.id));
            for (s, n) in suffix.iter_mut().zip(numbers) {
                s.admit_seq = n;
            }
        }
        // The batch: a token for every generating slot, then prompt tokens slot by slot.
        let mut plan = ctx.plan_budgeted().0;
        plan.decode_ubatches = self.decode_runs(&ctx.running[..plan.decode_seqs as usize]);
        plan
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{EndRule, FirstToken, Policy, SimConfig};
    use crate::record::RequestRecord;
    use crate::sim::simulate;
    use crate::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};

    /// Requests at the given (time, prompt, output), on 4 slots with `-b 16`.
    fn run(trace: &[(f64, u32, u32)], policy: Policy) -> Vec<RequestRecord> {
        let mut cfg = SimConfig::llama_cpp(1.0, 4, 4 * 1024, 16);
        cfg.server.policy = policy;
        cfg.workload = Workload {
            arrivals: ArrivalProcess::Trace {
                requests: trace
                    .iter()
                    .map(|&(t, p, o)| TraceRequest {
                        arrival: t,
                        prompt: p,
                        output: o,
                        class: 0,
                    })
                    .collect(),
            },
            lengths: LengthDist::Fixed {
                prompt: 1,
                output: 1,
            },
            max_model_len: None,
            shared: None,
        };
        cfg.first_token = FirstToken::AfterPrefill;
        cfg.end = EndRule::Drain;
        cfg.keep_records = true;
        simulate(&cfg).unwrap().records
    }

    #[test]
    fn the_latest_prompt_goes_first_on_a_fresh_server() {
        // Three 64-token prompts at once, 16 prompt tokens per iteration: the first
        // arrival takes slot 3, the next slot 2, the last slot 1, and slot 1's prompt is
        // served first.
        let trace = [(0.0, 64, 4), (0.0, 64, 4), (0.0, 64, 4)];
        let r = run(&trace, Policy::LlamaCpp);
        let ft = |i: usize| r[i].first_token_s.unwrap();
        assert!(
            ft(2) < ft(1) && ft(1) < ft(0),
            "{:?}",
            (ft(0), ft(1), ft(2))
        );
        // The same trace in admission order is the `chunked` policy.
        let c = run(&trace, Policy::Chunked);
        let fc = |i: usize| c[i].first_token_s.unwrap();
        assert!(fc(0) < fc(1) && fc(1) < fc(2));
    }

    #[test]
    fn a_released_slot_goes_to_the_back_of_the_line() {
        // Requests 0 and 1 take slots 3 and 2 and finish before t = 1 (released in slot
        // order: 2, then 3). Of the four arrivals at t = 1, request 2 takes slot 1 (never
        // used, highest index), 3 slot 0, 4 slot 2 (released first), 5 slot 3. Prompts
        // then go in slot order: 3, 2, 4, 5. (Were slots simply taken highest index
        // first, the order would be 5, 4, 3, 2.)
        let mut trace = vec![(0.0, 4, 2), (0.0, 4, 2)];
        trace.extend([(1.0, 64, 4); 4]);
        let r = run(&trace, Policy::LlamaCpp);
        assert!(r[0].finish_s.unwrap() < 1.0 && r[1].finish_s.unwrap() < 1.0);
        let ft = |i: usize| r[i].first_token_s.unwrap();
        assert!(
            ft(3) < ft(2) && ft(2) < ft(4) && ft(4) < ft(5),
            "{:?}",
            (2..6).map(ft).collect::<Vec<_>>()
        );
    }
}
