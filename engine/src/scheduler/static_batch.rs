//! `static`: take up to B waiting requests, prefill them together, decode until **all**
//! of them finish, then take the next batch (FasterTransformer-style request-level
//! batching). Finished requests leave at once; nobody joins a batch in flight.

use super::{Fifo, Plan, PlanCtx, Scheduler, Seq};

#[derive(Debug, Default)]
pub struct StaticBatch {
    waiting: Fifo,
}

impl Scheduler for StaticBatch {
    super::fifo_queue!();
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        if ctx.running.is_empty() {
            let limit = ctx.max_batch;
            self.waiting.admit_while(ctx, limit);
        }
        ctx.plan_prefill_priority()
    }
    fn arrival_can_join(&self, running: usize, _max_batch: usize) -> bool {
        running == 0
    }
}
