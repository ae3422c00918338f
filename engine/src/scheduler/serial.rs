//! `serial`: one request at a time, run to completion (the profiler study's FCFS). B is
//! ignored.

use super::{Fifo, Plan, PlanCtx, Scheduler, Seq};

#[derive(Debug, Default)]
pub struct Serial {
    waiting: Fifo,
}

impl Scheduler for Serial {
    super::fifo_queue!();
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        self.waiting.admit_while(ctx, 1);
        ctx.plan_prefill_priority()
    }
    fn arrival_can_join(&self, running: usize, _max_batch: usize) -> bool {
        running == 0
    }
}
