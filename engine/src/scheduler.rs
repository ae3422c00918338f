//! Scheduling policies. [`Scheduler`] is the seam: each policy owns its waiting queue and
//! decides, at every iteration boundary, who joins the running set and what each running
//! sequence does in the next iteration (a prefill chunk, one decode token, or nothing).
//! The event loop in [`crate::sim`] executes the plan and never looks at the policy.
//!
//! The running set is kept in admission order and always has the shape
//! `[prefilled… | not yet prefilled…]` (admissions append, preemption pops the most recent,
//! and prefill is served in admission order), so a plan is described by two numbers: the
//! first [`Plan::decode_seqs`] running sequences decode, and the unprefilled suffix carries
//! its prefill chunks in [`Seq::chunk`]. Planning therefore costs O(joiners), not O(B).

mod chunked;
mod continuous;
mod llama_cpp;
mod serial;
mod sjf;
mod static_batch;

pub use chunked::Chunked;
pub use continuous::Continuous;
pub use llama_cpp::LlamaCpp;
pub use serial::Serial;
pub use sjf::Sjf;
pub use static_batch::StaticBatch;

use crate::kv_cache::KvCache;
use crate::workload::Request;
use std::collections::VecDeque;

/// A request inside the server.
///
/// While a sequence is in the simulator's decode set (see [`crate::sim`]), `generated`,
/// `kv_tokens`, `last_token`, `max_gap` and `stalls` hold their values at decode tick
/// `tick0`; the simulator brings them up to date when it needs them. Policies only read
/// the prefill fields, which are always exact.
#[derive(Clone, Debug)]
pub struct Seq {
    pub req: Request,
    /// Output tokens emitted so far.
    pub generated: u32,
    /// Tokens to prefill on this admission (prompt, or prompt + generated after preemption).
    pub prefill_target: u32,
    /// Tokens of `prefill_target` already computed.
    pub prefilled: u32,
    /// Tokens in KV (computed context).
    pub kv_tokens: u64,
    /// Blocks held (paged) or reserved (reserve).
    pub blocks: u64,
    /// First output token [s] (NaN: none yet; a plain f64 keeps `Seq` small to move).
    pub first_token: f64,
    pub last_token: f64,
    pub max_gap: f64,
    pub stalls: u32,
    pub preemptions: u32,
    /// This iteration: prefill tokens scheduled.
    pub chunk: u32,
    /// Admission number (0, 1, 2… over the run; a re-admission after preemption gets a
    /// new one): the running set is sorted by it.
    pub admit_seq: u64,
    /// When the request first entered the running set [s] (NaN: not yet).
    pub admitted: f64,
    /// When the server saw the request: its arrival + the front-end delay
    /// (`ServerConfig::entry_delay`) [s]; the simulator sets it, `new` sets the arrival.
    pub entered: f64,
    /// Simulator bookkeeping: the decode tick and the stall count at which the lazy
    /// fields were last brought up to date.
    pub tick0: u64,
    pub stall0: u64,
    /// Prefix cache: leading blocks held through the cache (hits, and own blocks it
    /// took in); the other `blocks` are the sequence's own.
    pub cached: u32,
    /// Prefix cache: prompt tokens the first admission found cached (its prefill skipped
    /// them).
    pub hit_tokens: u32,
}

impl Seq {
    pub fn new(req: Request, reserved_blocks: u64) -> Seq {
        Seq {
            req,
            generated: 0,
            prefill_target: req.prompt,
            prefilled: 0,
            kv_tokens: 0,
            blocks: reserved_blocks,
            first_token: f64::NAN,
            last_token: f64::NAN,
            max_gap: 0.0,
            stalls: 0,
            preemptions: 0,
            chunk: 0,
            admit_seq: 0,
            admitted: f64::NAN,
            entered: req.arrival,
            tick0: 0,
            stall0: 0,
            cached: 0,
            hit_tokens: 0,
        }
    }

    /// Whether the prefill of this admission is complete.
    #[inline]
    pub fn prefill_done(&self) -> bool {
        self.prefilled >= self.prefill_target
    }

    /// Output tokens still to produce.
    #[inline]
    pub fn remaining(&self) -> u32 {
        self.req.output - self.generated
    }

    /// Total length used by SJF.
    #[inline]
    pub fn total_len(&self) -> u64 {
        self.req.total_tokens()
    }
}

/// The running set: boxed, so that removing a sequence from the middle (a completion in
/// admission order) moves pointers, not whole sequences.
#[allow(clippy::vec_box)]
pub type Running = Vec<Box<Seq>>;

/// What an admission gets from the KV cache ([`PlanCtx::take_blocks_for`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Blocks the sequence holds (paged) or reserved at arrival (reserve).
    pub blocks: u64,
    /// Leading blocks found in the prefix cache (their prefill is skipped).
    pub hit: u32,
}

/// What the next iteration contains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Prefill tokens over all chunks [tokens].
    pub prefill_tokens: u64,
    /// Sequences with a prefill chunk (all in the unprefilled suffix).
    pub prefill_seqs: u32,
    /// The first `decode_seqs` running sequences (all prefilled) decode one token each.
    pub decode_seqs: u32,
    /// Micro-batches the decodes are split into ([`crate::cost::BatchShape::decode_ubatches`];
    /// 0 = not tracked by the policy).
    pub decode_ubatches: u32,
}

impl Plan {
    /// An iteration in which every running sequence decodes and nothing prefills.
    #[inline]
    pub fn is_pure_decode(&self, running: usize) -> bool {
        self.prefill_seqs == 0 && self.decode_seqs as usize == running && running > 0
    }

    pub fn is_empty(&self) -> bool {
        self.prefill_seqs == 0 && self.decode_seqs == 0
    }
}

/// What a policy sees when planning.
#[derive(Debug)]
pub struct PlanCtx<'a> {
    /// Running set in admission order (the last is the most recently admitted).
    pub running: &'a mut Running,
    pub kv: &'a mut KvCache,
    /// B.
    pub max_batch: usize,
    /// Token budget per iteration (chunked).
    pub token_budget: u32,
    /// `running[..prefilled]` have finished their prefill, `running[prefilled..]` have not.
    pub prefilled: usize,
    /// Current time [s], stamped on a sequence's first admission.
    pub now: f64,
    /// Admission number the next admitted sequence gets.
    pub next_admit: u64,
}

impl PlanCtx<'_> {
    /// Whether the KV cache lets `head` (still at the head of its queue) in now: paged,
    /// takes its prefill's blocks above the watermark (with the prefix cache, the blocks
    /// it finds cached are held instead, [`KvCache::admit_paged`]); reserve, its blocks
    /// were reserved at arrival. Returns the grant to pass to [`PlanCtx::admit`].
    pub fn take_blocks_for(&mut self, head: &Seq) -> Option<Grant> {
        if self.kv.mode() == crate::config::KvMode::Paged {
            let (blocks, hit) =
                self.kv
                    .admit_paged(&head.req, head.prefill_target, head.preemptions > 0)?;
            Some(Grant { blocks, hit })
        } else {
            Some(Grant {
                blocks: head.blocks,
                hit: 0,
            })
        }
    }

    /// Moves `seq` into the running set with `grant` (from
    /// [`PlanCtx::take_blocks_for`]): a prefix-cache hit starts its prefill after the
    /// cached blocks.
    pub fn admit(&mut self, mut seq: Seq, grant: Grant) {
        seq.blocks = grant.blocks;
        if grant.hit > 0 {
            let tokens = grant.hit * self.kv.block_size() as u32;
            seq.cached = grant.hit;
            seq.prefilled = tokens;
            seq.kv_tokens = tokens as u64;
            if seq.admitted.is_nan() {
                seq.hit_tokens = tokens;
            }
        }
        seq.chunk = 0;
        seq.admit_seq = self.next_admit;
        self.next_admit += 1;
        if seq.admitted.is_nan() {
            seq.admitted = self.now;
        }
        self.running.push(Box::new(seq));
    }

    /// Plan under the token budget: the prefilled prefix decodes (a token each, while the
    /// budget lasts), then the unprefilled suffix gets prefill chunks in its order.
    /// Returns the plan and the budget left. O(unprefilled).
    pub fn plan_budgeted(&mut self) -> (Plan, u32) {
        let mut budget = self.token_budget;
        let mut plan = Plan::default();
        let decodes = self.prefilled.min(budget as usize);
        plan.decode_seqs = decodes as u32;
        budget -= decodes as u32;
        for s in &mut self.running[self.prefilled..] {
            if budget == 0 {
                break;
            }
            s.chunk = (s.prefill_target - s.prefilled).min(budget);
            budget -= s.chunk;
            plan.prefill_tokens += s.chunk as u64;
            plan.prefill_seqs += 1;
        }
        (plan, budget)
    }

    /// Plan in which every prefilled running sequence decodes and every unprefilled one
    /// prefills its whole remaining target (prefill priority: if anything prefills,
    /// nothing decodes). O(unprefilled).
    pub fn plan_prefill_priority(&mut self) -> Plan {
        let mut plan = Plan::default();
        for s in &mut self.running[self.prefilled..] {
            s.chunk = s.prefill_target - s.prefilled;
            plan.prefill_tokens += s.chunk as u64;
            plan.prefill_seqs += 1;
        }
        if plan.prefill_seqs == 0 {
            plan.decode_seqs = self.running.len() as u32;
        }
        plan
    }
}

/// A scheduling policy.
pub trait Scheduler {
    /// A new arrival joins the waiting queue.
    fn enqueue(&mut self, seq: Seq);
    /// A preempted sequence goes back to the head of the queue.
    fn requeue_preempted(&mut self, seq: Seq);
    /// Requests waiting.
    fn waiting_len(&self) -> usize;
    /// Admits from the queue and plans the next iteration.
    fn plan(&mut self, ctx: &mut PlanCtx<'_>) -> Plan;
    /// Whether an arrival could change the plan of a running pure-decode batch (lets the
    /// event loop jump over runs of identical iterations).
    fn arrival_can_join(&self, running: usize, max_batch: usize) -> bool {
        running < max_batch
    }
    /// Whether [`Scheduler::plan`] would admit nothing and plan every running sequence to
    /// decode (`running[..prefilled]` are prefilled), so the event loop can skip planning.
    /// `false` is always correct; the simulator checks a `true` against `plan` in debug
    /// builds.
    #[inline]
    fn plans_pure_decode(&self, _running: usize, _prefilled: usize, _max_batch: usize) -> bool {
        false
    }
    /// Empties the queue (end of a cut run).
    fn drain(&mut self) -> Vec<Seq>;
}

/// A FIFO waiting queue shared by the FCFS policies.
#[derive(Debug, Default)]
pub struct Fifo {
    q: VecDeque<Seq>,
}

impl Fifo {
    pub fn push_back(&mut self, s: Seq) {
        self.q.push_back(s);
    }

    pub fn push_front(&mut self, s: Seq) {
        self.q.push_front(s);
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Admits from the head while `room` allows and the KV cache accepts (head-of-line
    /// blocking: stops at the first refusal, as vLLM's FCFS does).
    pub fn admit_while(&mut self, ctx: &mut PlanCtx<'_>, limit: usize) {
        while ctx.running.len() < limit {
            let Some(blocks) = self.q.front().and_then(|s| ctx.take_blocks_for(s)) else {
                break;
            };
            let s = self.q.pop_front().expect("the head was just seen");
            ctx.admit(s, blocks);
        }
    }

    pub fn drain(&mut self) -> Vec<Seq> {
        self.q.drain(..).collect()
    }

    pub fn front(&self) -> Option<&Seq> {
        self.q.front()
    }

    pub fn pop_front(&mut self) -> Option<Seq> {
        self.q.pop_front()
    }
}

/// The queue half of a FIFO policy (a `waiting: Fifo` field): arrivals join the back,
/// preempted requests go back to the front.
macro_rules! fifo_queue {
    () => {
        fn enqueue(&mut self, seq: Seq) {
            self.waiting.push_back(seq);
        }
        fn requeue_preempted(&mut self, seq: Seq) {
            self.waiting.push_front(seq);
        }
        fn waiting_len(&self) -> usize {
            self.waiting.len()
        }
        fn drain(&mut self) -> Vec<Seq> {
            self.waiting.drain()
        }
    };
}
pub(crate) use fifo_queue;

/// Builds the scheduler for a policy and runs `f` with it, monomorphised.
macro_rules! with_scheduler {
    ($policy:expr, $s:ident => $body:expr) => {
        match $policy {
            $crate::config::Policy::Serial => {
                let $s = $crate::scheduler::Serial::default();
                $body
            }
            $crate::config::Policy::Static => {
                let $s = $crate::scheduler::StaticBatch::default();
                $body
            }
            $crate::config::Policy::Continuous => {
                let $s = $crate::scheduler::Continuous::default();
                $body
            }
            $crate::config::Policy::Chunked => {
                let $s = $crate::scheduler::Chunked::default();
                $body
            }
            $crate::config::Policy::Sjf => {
                let $s = $crate::scheduler::Sjf::default();
                $body
            }
            $crate::config::Policy::LlamaCpp => {
                let $s = $crate::scheduler::LlamaCpp::default();
                $body
            }
        }
    };
}
pub(crate) use with_scheduler;
