//! An opt-in event log of a run: what the server did, iteration by iteration, for an
//! animation or a step-by-step check of a short run (docs/model.md, "Event log").
//!
//! The event loop holds a [`Sink`]; when it is off (every run but [`simulate_logged`]'s)
//! each hook is one branch on `None` and nothing else, so the simulator's speed is
//! unchanged. When it is on, a jumped run of `k` identical decode iterations is expanded
//! into its `k` iterations, each with its own start and end time and, in paged mode, the
//! blocks each sequence holds in that iteration (the event loop itself takes a run's
//! blocks when the run starts). Memory grows with iterations × batch width: meant for runs
//! of a few hundred requests.
//!
//! Times are the server's: an arrival is logged at its *entry* (arrival + overhead), the
//! instant the server sees it. A log replayed up to and including time `t` gives the state
//! that the run's time series ([`super::TimePoint`]) samples at `t` (waiting and running
//! counts).

use super::{Sim, SimReport};
use crate::config::SimConfig;
use crate::scheduler::{with_scheduler, Seq};
use crate::workload::Request;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// What a running sequence does in one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// A prefill chunk of this many prompt tokens (the whole prompt without chunking).
    Prefill(u32),
    /// One decode token.
    Decode,
    /// In the running set but not scheduled this iteration (a chunked budget ran out).
    Idle,
}

/// One running sequence in one iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// The request's id ([`crate::record::RequestRecord::id`]).
    pub id: u64,
    pub phase: Phase,
    /// KV blocks it holds (paged) or has reserved (reserve) in this iteration.
    pub kv_blocks: u64,
    /// Prefix cache: of `kv_blocks`, the leading ones held through the cache (its hits,
    /// and its own full blocks the cache took in), which other requests may share; 0
    /// with the cache off.
    #[serde(default)]
    pub cached_blocks: u64,
}

/// One iteration of the server: `slots` in running-set (admission) order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    /// Start and end [s].
    pub start_s: f64,
    pub end_s: f64,
    pub slots: Vec<Slot>,
    /// Prefix cache, during the iteration: cached blocks running requests hold (each
    /// counted once, however many share it) and cached blocks no one holds (free, kept
    /// until evicted); 0 with the cache off. KV in use = Σ (`kv_blocks` −
    /// `cached_blocks`) over the slots + `cached_held_blocks`.
    #[serde(default)]
    pub cached_held_blocks: u64,
    #[serde(default)]
    pub cached_idle_blocks: u64,
}

/// Something that happened in the server, at a time [s].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A request entered the server: queued (`admitted`) or refused. In reserve mode an
    /// admitted request reserves `reserved_blocks` at once.
    Arrival {
        t_s: f64,
        id: u64,
        admitted: bool,
        reserved_blocks: u64,
    },
    /// A queued request joined the running set (again, after a preemption).
    Admitted { t_s: f64, id: u64 },
    /// An iteration (logged when it starts; every event of its end comes after it).
    Iteration(Iteration),
    /// A request's first output token.
    FirstToken { t_s: f64, id: u64 },
    /// A request finished and released its KV.
    Finished { t_s: f64, id: u64 },
    /// A request lost its KV and went back to the queue (paged, recompute).
    Preempted { t_s: f64, id: u64 },
}

impl Event {
    /// When it happened (an iteration: when it started) [s].
    pub fn t_s(&self) -> f64 {
        match self {
            Event::Arrival { t_s, .. }
            | Event::Admitted { t_s, .. }
            | Event::FirstToken { t_s, .. }
            | Event::Finished { t_s, .. }
            | Event::Preempted { t_s, .. } => *t_s,
            Event::Iteration(it) => it.start_s,
        }
    }
}

/// Simulates `cfg` on `requests` (sorted by arrival) as [`super::simulate_requests`] does,
/// and returns the run's event log with its report. The report is the one the run gives
/// without the log.
pub fn simulate_logged<I: Iterator<Item = Request>>(
    cfg: &SimConfig,
    requests: I,
) -> (SimReport, Vec<Event>) {
    let hint = requests.size_hint().0;
    let mut events = Vec::new();
    let report = with_scheduler!(cfg.server.policy, sched => {
        let mut sim = Sim::new(
            cfg,
            sched,
            hint,
            crate::limits::Limits::default().max_drain_horizons,
        );
        sim.log = Sink::to(&mut events);
        sim.run(requests)
    });
    (report, events)
}

/// Where the event loop's hooks write: nowhere (`None`), or a log.
#[derive(Debug, Default)]
pub(super) struct Sink<'a> {
    log: Option<&'a mut Vec<Event>>,
    /// Requests in the running set (a policy may reorder the unprefilled part on
    /// admission, so newcomers are told by id, not by position).
    running: HashSet<u64>,
}

impl<'a> Sink<'a> {
    /// A sink that writes into `log`.
    pub(super) fn to(log: &'a mut Vec<Event>) -> Sink<'a> {
        Sink {
            log: Some(log),
            running: HashSet::new(),
        }
    }

    #[inline]
    pub(super) fn arrival(&mut self, id: u64, t_s: f64, admitted: bool, reserved_blocks: u64) {
        if let Some(log) = &mut self.log {
            log.push(Event::Arrival {
                t_s,
                id,
                admitted,
                reserved_blocks: if admitted { reserved_blocks } else { 0 },
            });
        }
    }

    /// `unprefilled`: the running set's unprefilled part after planning, where the
    /// policy put the sequences it admitted.
    #[inline]
    pub(super) fn admitted(&mut self, unprefilled: &[Box<Seq>], t_s: f64) {
        if let Some(log) = &mut self.log {
            for s in unprefilled {
                if self.running.insert(s.req.id) {
                    log.push(Event::Admitted { t_s, id: s.req.id });
                }
            }
        }
    }

    /// One iteration from `start` to `end` [s]: `running[..decoders]` decode, the chunks
    /// of `running[prefilled..]` prefill. Call it once the iteration's blocks are taken.
    #[inline]
    pub(super) fn iteration(
        &mut self,
        (start_s, end_s): (f64, f64),
        running: &[Box<Seq>],
        (decoders, prefilled): (usize, usize),
        emit_at_prefill: bool,
        cache: (u64, u64),
    ) {
        if let Some(log) = &mut self.log {
            log_iteration(
                log,
                (start_s, end_s),
                running,
                (decoders, prefilled),
                emit_at_prefill,
                cache,
            );
        }
    }

    /// A jumped run of `k` pure-decode iterations of the whole running set, iteration `i`
    /// ending at `at(i)`. Paged (`block_size` given): iteration `i` holds the blocks for
    /// the sequence's context + `i` tokens. `cache`: the prefix cache's (held, idle)
    /// blocks, which a decode run does not change.
    #[inline]
    pub(super) fn decode_run(
        &mut self,
        at: &impl Fn(u64) -> f64,
        k: u64,
        running: &[Box<Seq>],
        block_size: Option<u64>,
        cache: (u64, u64),
    ) {
        if let Some(log) = &mut self.log {
            log_decode_run(log, at, k, running, block_size, cache);
        }
    }

    #[inline]
    pub(super) fn finished(&mut self, id: u64, t_s: f64) {
        if let Some(log) = &mut self.log {
            self.running.remove(&id);
            log.push(Event::Finished { t_s, id });
        }
    }

    #[inline]
    pub(super) fn preempted(&mut self, id: u64, t_s: f64) {
        if let Some(log) = &mut self.log {
            self.running.remove(&id);
            log.push(Event::Preempted { t_s, id });
        }
    }
}

#[cold]
fn log_iteration(
    log: &mut Vec<Event>,
    (start_s, end_s): (f64, f64),
    running: &[Box<Seq>],
    (decoders, prefilled): (usize, usize),
    emit_at_prefill: bool,
    (cached_held_blocks, cached_idle_blocks): (u64, u64),
) {
    let mut firsts = Vec::new();
    let slots = running
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let phase = if i < decoders {
                Phase::Decode
            } else if i >= prefilled && s.chunk > 0 {
                Phase::Prefill(s.chunk)
            } else {
                Phase::Idle
            };
            let first = match phase {
                Phase::Decode => true,
                Phase::Prefill(c) => emit_at_prefill && s.prefilled + c >= s.prefill_target,
                Phase::Idle => false,
            };
            // Only sequences outside the lazy decode set can lack a first token, and their
            // fields are exact.
            if first && s.first_token.is_nan() {
                firsts.push(Event::FirstToken {
                    t_s: end_s,
                    id: s.req.id,
                });
            }
            Slot {
                id: s.req.id,
                phase,
                kv_blocks: s.blocks,
                cached_blocks: u64::from(s.cached),
            }
        })
        .collect();
    log.push(Event::Iteration(Iteration {
        start_s,
        end_s,
        slots,
        cached_held_blocks,
        cached_idle_blocks,
    }));
    log.append(&mut firsts);
}

#[cold]
fn log_decode_run(
    log: &mut Vec<Event>,
    at: &impl Fn(u64) -> f64,
    k: u64,
    running: &[Box<Seq>],
    block_size: Option<u64>,
    (cached_held_blocks, cached_idle_blocks): (u64, u64),
) {
    for i in 1..=k {
        let slots = running
            .iter()
            .map(|s| Slot {
                id: s.req.id,
                phase: Phase::Decode,
                // Paged runs keep every field exact: kv_tokens is the context before the run.
                kv_blocks: block_size.map_or(s.blocks, |b| (s.kv_tokens + i).div_ceil(b)),
                cached_blocks: u64::from(s.cached),
            })
            .collect();
        let (start_s, end_s) = (at(i - 1), at(i));
        log.push(Event::Iteration(Iteration {
            start_s,
            end_s,
            slots,
            cached_held_blocks,
            cached_idle_blocks,
        }));
        if i == 1 {
            log.extend(running.iter().filter(|s| s.first_token.is_nan()).map(|s| {
                Event::FirstToken {
                    t_s: end_s,
                    id: s.req.id,
                }
            }));
        }
    }
}
