//! `continuous`: iteration-level batching with prefill priority (Orca / vLLM v0, the
//! profiler study's "eager"). New requests join at iteration boundaries while fewer than
//! B run; their whole prefill runs as its own iteration and stalls decoding.

use super::{Fifo, Plan, PlanCtx, Scheduler, Seq};

#[derive(Debug, Default)]
pub struct Continuous {
    waiting: Fifo,
}

impl Scheduler for Continuous {
    super::fifo_queue!();
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        let limit = ctx.max_batch;
        self.waiting.admit_while(ctx, limit);
        ctx.plan_prefill_priority()
    }

    #[inline]
    fn plans_pure_decode(&self, running: usize, prefilled: usize, max_batch: usize) -> bool {
        // Nothing to prefill, and admission has no one to admit or no room.
        prefilled == running && running > 0 && (self.waiting.is_empty() || running >= max_batch)
    }
}
