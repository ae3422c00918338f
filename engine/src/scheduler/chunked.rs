//! `chunked`: chunked prefill with a per-iteration token budget C (vLLM v1 /
//! Sarathi-Serve). Each iteration: every running decode first (1 token each), then
//! prefill chunks of partly prefilled running requests in admission order, then new
//! requests from the waiting queue (FCFS) while fewer than B run, the budget lasts and
//! the KV cache admits them. Prefill and decode share iterations.

use super::{Fifo, Plan, PlanCtx, Scheduler, Seq};

#[derive(Debug, Default)]
pub struct Chunked {
    waiting: Fifo,
}

impl Scheduler for Chunked {
    super::fifo_queue!();
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        // 1. decodes: the prefilled prefix, in admission order, while the budget lasts;
        // 2. partly prefilled running requests (the unprefilled suffix)
        let (mut plan, mut budget) = ctx.plan_budgeted();
        // 3. new requests
        while budget > 0 && ctx.running.len() < ctx.max_batch {
            let Some(blocks) = self.waiting.front().and_then(|s| ctx.take_blocks_for(s)) else {
                break;
            };
            let s = self.waiting.pop_front().expect("the head was just seen");
            ctx.admit(s, blocks);
            let s = ctx.running.last_mut().expect("just admitted");
            s.chunk = (s.prefill_target - s.prefilled).min(budget);
            budget -= s.chunk;
            plan.prefill_tokens += s.chunk as u64;
            plan.prefill_seqs += 1;
        }
        plan
    }
}
