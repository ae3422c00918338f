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
}
