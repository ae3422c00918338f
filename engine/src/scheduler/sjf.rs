//! `sjf`: like `continuous`, but the waiting queue is ordered by total length
//! (prompt + output, an oracle; the reference study's "srpt"). Preempted requests go
//! first. Ties break by arrival order.

use super::{Plan, PlanCtx, Scheduler, Seq};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug)]
struct Entry {
    key: (u64, u64),
    seq: Seq,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

#[derive(Debug, Default)]
pub struct Sjf {
    heap: BinaryHeap<Reverse<Entry>>,
}

impl Scheduler for Sjf {
    fn enqueue(&mut self, seq: Seq) {
        self.heap.push(Reverse(Entry {
            key: (seq.total_len(), seq.req.id),
            seq,
        }));
    }
    fn requeue_preempted(&mut self, seq: Seq) {
        self.heap.push(Reverse(Entry {
            key: (0, seq.req.id),
            seq,
        }));
    }
    fn waiting_len(&self) -> usize {
        self.heap.len()
    }
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan {
        while ctx.running.len() < ctx.max_batch {
            let Some(blocks) = self.heap.peek().and_then(|e| ctx.take_blocks_for(&e.0.seq)) else {
                break;
            };
            let Reverse(e) = self.heap.pop().expect("the head was just seen");
            ctx.admit(e.seq, blocks);
        }
        ctx.plan_prefill_priority()
    }
    fn drain(&mut self) -> Vec<Seq> {
        self.heap.drain().map(|Reverse(e)| e.seq).collect()
    }
}
