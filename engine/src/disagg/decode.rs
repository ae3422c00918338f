//! A decode-pool server (docs/model.md, Disaggregated prefill and decode): requests arrive
//! with their prompt's KV already computed, wait in a first-come-first-served queue, are
//! admitted while fewer than B run and their KV fits in the paged cache, and then decode
//! one token per iteration. A running request that needs a new block when none is free
//! preempts the most recently admitted one (vLLM's recompute preemption): its blocks are
//! freed, it goes back to the head of the queue, and when it is admitted again its whole
//! context is prefilled anew in that iteration.
//!
//! Stepped from outside as a fleet's server is ([`crate::fleet`]): it starts an iteration
//! only when every arrival before the iteration's start is known, and applies an
//! iteration's tokens only once the router's clock has reached its end, so what a router
//! sees is what it could know.

use crate::config::ServerConfig;
use crate::cost::{BatchShape, CostModel, PreparedCost};
use crate::record::{Outcome, RequestRecord};
use crate::sim::ServerView;
use std::collections::VecDeque;

/// A request as it reaches the decode pool.
#[derive(Clone, Debug)]
pub(crate) struct Arrival {
    /// Its record so far: arrival, prefill admission, the first token if the prefill pool
    /// emitted it, the tokens emitted, preemptions in the prefill pool.
    pub record: RequestRecord,
    /// When its KV reached this pool [s].
    pub at_s: f64,
    /// Output tokens the request has in all [tokens].
    pub output: u32,
}

struct Job {
    rec: RequestRecord,
    at_s: f64,
    /// Tokens still to emit here.
    left: u32,
    /// Tokens of context (in KV, or to recompute when `recompute`).
    kv: u64,
    blocks: u64,
    recompute: bool,
    admitted: bool,
}

/// What a finished decode server hands back.
pub(crate) struct DecodeFinished {
    pub records: Vec<RequestRecord>,
    /// When each request was first admitted here, by id.
    pub admitted: Vec<(u64, f64)>,
    pub busy_s: f64,
    /// ∫ requests in this server dt, and the last event's instant [s].
    pub area: f64,
    pub last_event_s: f64,
    pub departed: u64,
    pub sojourn_sum_s: f64,
    pub peak_blocks: u64,
    pub total_blocks: u64,
    pub block_size: u64,
    pub unstable: bool,
}

pub(crate) struct DecodeServer {
    cost: PreparedCost,
    max_batch: usize,
    block_size: u64,
    total_blocks: u64,
    used_blocks: u64,
    peak_blocks: u64,
    stall_s: f64,
    waiting: VecDeque<Job>,
    running: Vec<Job>,
    /// Time up to which the server has run [s]; an iteration in flight ends at `busy_until`.
    t: f64,
    busy_until: Option<f64>,
    /// Requests in this server (waiting + running), the work a router sees.
    in_system: u64,
    work_tokens: u64,
    area: f64,
    last_event_s: f64,
    busy_s: f64,
    departed: u64,
    sojourn_sum_s: f64,
    cap_s: f64,
    unstable: bool,
    records: Vec<RequestRecord>,
    admitted: Vec<(u64, f64)>,
}

impl DecodeServer {
    /// A server with `server`'s B, paged KV and step overhead and `cost`'s iterations;
    /// it stops at `cap_s` if requests are still in it (unstable). `stall_s`: the stall
    /// threshold of the metrics.
    pub fn new(server: &ServerConfig, cost: &CostModel, stall_s: f64, cap_s: f64) -> Self {
        let block_size = u64::from(server.block_size.max(1));
        DecodeServer {
            cost: PreparedCost::new(cost, server.max_batch)
                .with_step_overhead(server.step_overhead_s),
            max_batch: server.max_batch as usize,
            block_size,
            total_blocks: server.kv_tokens / block_size,
            used_blocks: 0,
            peak_blocks: 0,
            stall_s,
            waiting: VecDeque::new(),
            running: Vec::new(),
            t: 0.0,
            busy_until: None,
            in_system: 0,
            work_tokens: 0,
            area: 0.0,
            last_event_s: 0.0,
            busy_s: 0.0,
            departed: 0,
            sojourn_sum_s: 0.0,
            cap_s,
            unstable: false,
            records: Vec::new(),
            admitted: Vec::new(),
        }
    }

    fn blocks(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.block_size)
    }

    fn count(&mut self, t: f64, delta: i64) {
        self.area += self.in_system as f64 * (t - self.last_event_s);
        self.last_event_s = t;
        self.in_system = (self.in_system as i64 + delta) as u64;
    }

    /// A request whose KV arrives at `a.at_s` (arrivals in time order, after
    /// [`DecodeServer::advance`] to that instant).
    pub fn push(&mut self, a: Arrival) {
        let prompt = u64::from(a.record.prompt_tokens);
        let left = a.output - a.record.output_tokens;
        // More than the whole cache at its end: it could never finish here.
        if self.blocks(prompt + u64::from(a.output)) > self.total_blocks {
            let mut rec = a.record;
            rec.outcome = Outcome::Rejected;
            rec.finish_s = None;
            rec.first_token_s = None;
            self.records.push(rec);
            return;
        }
        self.count(a.at_s, 1);
        self.work_tokens += prompt + u64::from(left);
        self.waiting.push_back(Job {
            rec: a.record,
            at_s: a.at_s,
            left,
            kv: prompt,
            blocks: 0,
            recompute: false,
            admitted: false,
        });
    }

    pub fn view(&self) -> ServerView {
        ServerView {
            outstanding: self.in_system,
            work_tokens: self.work_tokens,
            kv_used_blocks: self.used_blocks,
            kv_total_blocks: self.total_blocks,
        }
    }

    /// Runs every iteration that starts before `limit` and applies every one that ends
    /// by it.
    pub fn advance(&mut self, limit: f64) {
        loop {
            if let Some(end) = self.busy_until {
                if end > limit {
                    return;
                }
                self.complete(end);
                continue;
            }
            let start = if self.running.is_empty() {
                match self.waiting.front() {
                    Some(j) => j.at_s.max(self.t),
                    None => return,
                }
            } else {
                self.t
            };
            if start >= limit {
                return;
            }
            if start >= self.cap_s {
                self.stop(start);
                return;
            }
            self.begin(start);
        }
    }

    /// Plans and starts the iteration at `start`: running requests first take the blocks
    /// their next token needs (preempting from the most recently admitted), then, if none
    /// was preempted, waiting requests join in order while B and the KV allow.
    fn begin(&mut self, start: f64) {
        self.t = start;
        let mut preempted = false;
        loop {
            let need: u64 = self
                .running
                .iter()
                .map(|j| self.blocks(j.kv + 1) - j.blocks)
                .sum();
            if self.used_blocks + need <= self.total_blocks || self.running.is_empty() {
                break;
            }
            let mut j = self.running.pop().expect("non-empty");
            self.used_blocks -= j.blocks;
            j.blocks = 0;
            j.recompute = true;
            j.rec.preemptions += 1;
            self.waiting.push_front(j);
            preempted = true;
        }
        for i in 0..self.running.len() {
            let need = self.blocks(self.running[i].kv + 1);
            self.used_blocks += need - self.running[i].blocks;
            self.running[i].blocks = need;
        }
        if !preempted {
            while self.running.len() < self.max_batch {
                let Some(j) = self.waiting.front() else { break };
                if j.at_s > start {
                    break;
                }
                let need = self.blocks(j.kv + 1);
                if self.used_blocks + need > self.total_blocks {
                    break;
                }
                let mut j = self.waiting.pop_front().expect("non-empty");
                self.used_blocks += need;
                j.blocks = need;
                if !j.admitted {
                    j.admitted = true;
                    self.admitted.push((j.rec.id, start));
                }
                self.running.push(j);
            }
        }
        self.peak_blocks = self.peak_blocks.max(self.used_blocks);
        if self.running.is_empty() {
            // Nothing fits yet (cannot happen: a lone request always fits); wait.
            return;
        }
        let mut shape = BatchShape {
            running: self.running.len() as u32,
            ..BatchShape::default()
        };
        for j in &self.running {
            if j.recompute {
                shape.prefill_seqs += 1;
                shape.prefill_tokens += j.kv;
                shape.prefill_attn += self
                    .cost
                    .prefill_attn(0, j.kv.min(u64::from(u32::MAX)) as u32);
            } else {
                shape.decode_seqs += 1;
                shape.context_tokens += j.kv;
            }
        }
        let d = self.cost.iteration(&shape);
        self.busy_s += d;
        self.busy_until = Some(start + d);
    }

    /// Applies the iteration ending at `end`: one token for every running request.
    fn complete(&mut self, end: f64) {
        self.busy_until = None;
        self.t = end;
        let mut i = 0;
        while i < self.running.len() {
            let j = &mut self.running[i];
            j.recompute = false;
            j.kv += 1;
            j.left -= 1;
            let rec = &mut j.rec;
            match rec.first_token_s {
                None => rec.first_token_s = Some(end),
                Some(first) => {
                    let last = rec.finish_s.unwrap_or(first);
                    let gap = end - last;
                    rec.max_gap_s = rec.max_gap_s.max(gap);
                    if gap > self.stall_s {
                        rec.stalls += 1;
                    }
                }
            }
            rec.finish_s = Some(end);
            rec.output_tokens += 1;
            self.work_tokens -= 1;
            if j.left == 0 {
                let j = self.running.remove(i);
                self.used_blocks -= j.blocks;
                self.work_tokens -= u64::from(j.rec.prompt_tokens);
                self.departed += 1;
                self.sojourn_sum_s += end - j.at_s;
                self.count(end, -1);
                let mut rec = j.rec;
                rec.outcome = Outcome::Completed;
                self.records.push(rec);
            } else {
                i += 1;
            }
        }
    }

    /// Stops at the drain cap: what is left is unfinished.
    fn stop(&mut self, at: f64) {
        self.unstable = true;
        self.t = at;
        let left: Vec<Job> = self
            .running
            .drain(..)
            .chain(self.waiting.drain(..))
            .collect();
        for j in left {
            self.count(at, -1);
            let mut rec = j.rec;
            rec.outcome = Outcome::Unfinished;
            rec.finish_s = None;
            self.records.push(rec);
        }
        self.used_blocks = 0;
    }

    pub fn finish(mut self) -> DecodeFinished {
        self.advance(f64::INFINITY);
        DecodeFinished {
            records: self.records,
            admitted: self.admitted,
            busy_s: self.busy_s,
            area: self.area,
            last_event_s: self.last_event_s,
            departed: self.departed,
            sojourn_sum_s: self.sojourn_sum_s,
            peak_blocks: self.peak_blocks,
            total_blocks: self.total_blocks,
            block_size: self.block_size,
            unstable: self.unstable,
        }
    }
}
