//! One server of a fleet, stepped from outside: a router hands it arrivals in time order
//! and looks at its state between them (docs/model.md, "Fleets").
//!
//! The server is the one-server event loop ([`Sim`]) reading from an [`Inbox`]. It runs a
//! step only when every arrival that could fall inside it is known, and never cuts a step
//! short, so a server stepped this way makes the same run, record for record, as the same
//! requests simulated in one go.

use super::events::{Event, Sink};
use super::source::Inbox;
use super::{Halt, RunStats, Sim, Streaming, TimePoint};
use crate::config::SimConfig;
use crate::metrics::Accumulator;
use crate::record::RequestRecord;
use crate::scheduler::{with_scheduler, Scheduler};
use crate::workload::Request;

/// What a router can see of a server: what it has sent and not yet seen finish, and what
/// the server last reported.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ServerView {
    /// Requests sent and not yet finished or refused.
    pub outstanding: u64,
    /// Prompt + output − streamed tokens of those requests (a client knows `max_tokens`),
    /// as of the last step the server ran; a router reading the streams counts a run's
    /// tokens out as its iterations end ([`Server::streaming`]).
    pub work_tokens: u64,
    /// KV blocks in use and in all, as of the last step the server ran (a run of
    /// identical decode iterations reports at its end); a router reading the servers'
    /// reports counts a paged run's blocks in as its iterations are scheduled
    /// ([`Server::kv_streamed`]).
    pub kv_used_blocks: u64,
    pub kv_total_blocks: u64,
}

/// A finished server's results, before summarising.
#[derive(Debug)]
pub(crate) struct Finished {
    pub acc: Accumulator,
    /// Its own measurement window [s].
    pub window_s: f64,
    pub records: Vec<RequestRecord>,
    pub timeseries: Vec<TimePoint>,
    pub stats: RunStats,
    /// The prefix cache's parts, when on (its summary is not yet in `stats`).
    pub prefix: Option<super::PrefixParts>,
}

/// A server stepped by a fleet (object-safe, so servers of different policies mix).
pub(crate) trait Server {
    /// Sends a request (arrivals in time order, across calls).
    fn push(&mut self, r: Request);
    /// Runs every step that needs no arrival at or after `limit` [s].
    fn advance(&mut self, limit: f64);
    /// The earliest limit at which [`Server::advance`] can change anything [s].
    fn wake(&self) -> f64;
    /// Whether the server has nothing to do and no request waiting to enter.
    fn idle(&self) -> bool;
    fn view(&self) -> ServerView {
        let mut view = ServerView::default();
        self.look_into(&mut view);
        view
    }
    /// Writes [`Server::view`] into `view` and returns [`Server::wake`]: one call for
    /// both, writing each field in place.
    fn look_into(&self, view: &mut ServerView) -> f64;
    /// [`Server::advance`] to `limit`, then [`Server::look_into`].
    fn advance_into(&mut self, limit: f64, view: &mut ServerView) -> f64 {
        self.advance(limit);
        self.look_into(view)
    }
    /// The decode run the server has worked out and not yet run, if any: the tokens it
    /// streams at its boundaries before the wake are not yet out of
    /// [`ServerView::work_tokens`] ([`Streaming::passed`]).
    fn streaming(&self) -> Option<Streaming>;
    /// Paged: the KV blocks that run has taken by the time `passed` of its boundaries are
    /// past, not yet in [`ServerView::kv_used_blocks`] (0 without a run).
    fn kv_streamed(&mut self, passed: u64) -> u64;
    /// From now on, keep (id, instant) of every request that leaves.
    fn log_departures(&mut self);
    /// Moves the departures logged so far into `out`.
    fn take_departures(&mut self, out: &mut Vec<(u64, f64)>);
    /// Whether departures are logged and not yet taken.
    fn has_departures(&self) -> bool;
    /// Runs to the end and returns the results.
    fn finish(self: Box<Self>) -> Finished;
}

struct Stepped<'a, S: Scheduler> {
    sim: Sim<'a, S>,
    inbox: Inbox,
    halt: Halt,
}

/// A stepped server for `cfg` (its workload, horizon and seed are not used: the fleet's
/// router supplies the requests). `expected`: about how many requests it will get;
/// `drain_horizons`: its drain cap ([`crate::limits::Limits::max_drain_horizons`]).
pub(crate) fn server<'a>(
    cfg: &'a SimConfig,
    expected: usize,
    drain_horizons: f64,
) -> Box<dyn Server + 'a> {
    with_scheduler!(cfg.server.policy, sched => Box::new(Stepped {
        sim: Sim::new(cfg, sched, expected, drain_horizons),
        inbox: Inbox::new(cfg.server.overhead_s, cfg.server.overhead_per_token_s),
        halt: Halt::Idle,
    }))
}

/// [`server`] with its event log on, written into `log` ([`super::events`]).
pub(crate) fn logged_server<'a>(
    cfg: &'a SimConfig,
    expected: usize,
    drain_horizons: f64,
    log: &'a mut Vec<Event>,
) -> Box<dyn Server + 'a> {
    with_scheduler!(cfg.server.policy, sched => {
        let mut sim = Sim::new(cfg, sched, expected, drain_horizons);
        sim.log = Sink::to(log);
        Box::new(Stepped {
            sim,
            inbox: Inbox::new(cfg.server.overhead_s, cfg.server.overhead_per_token_s),
            halt: Halt::Idle,
        })
    })
}

impl<S: Scheduler> Server for Stepped<'_, S> {
    fn push(&mut self, r: Request) {
        self.sim
            .sent(&r, self.inbox.entry(&r), self.inbox.len() == 0);
        self.inbox.push(r);
    }

    #[inline]
    fn advance(&mut self, limit: f64) {
        if limit >= self.sim.wake {
            self.halt = self.sim.advance(&mut self.inbox, limit);
        }
    }

    fn wake(&self) -> f64 {
        self.sim.wake
    }

    fn idle(&self) -> bool {
        self.halt == Halt::Idle && self.inbox.len() == 0
    }

    #[inline]
    fn look_into(&self, view: &mut ServerView) -> f64 {
        let sim = &self.sim;
        view.outstanding = sim.in_system + self.inbox.len() as u64;
        view.work_tokens = sim.work_tokens + self.inbox.work_tokens;
        view.kv_used_blocks = sim.kv.used_blocks();
        view.kv_total_blocks = sim.kv.total_blocks();
        sim.wake
    }

    fn streaming(&self) -> Option<Streaming> {
        self.sim.streaming()
    }

    fn kv_streamed(&mut self, passed: u64) -> u64 {
        self.sim.kv_streamed(passed)
    }

    fn log_departures(&mut self) {
        self.sim.departures.get_or_insert_with(Vec::new);
    }

    fn take_departures(&mut self, out: &mut Vec<(u64, f64)>) {
        if let Some(d) = &mut self.sim.departures {
            out.append(d);
        }
    }

    fn has_departures(&self) -> bool {
        self.sim.departures.as_ref().is_some_and(|d| !d.is_empty())
    }

    fn finish(mut self: Box<Self>) -> Finished {
        self.sim.advance(&mut self.inbox, f64::INFINITY);
        let Stepped { sim, inbox, .. } = *self;
        let (acc, window_s, records, timeseries, stats, prefix) = sim.finish_parts(inbox);
        Finished {
            acc,
            window_s,
            records,
            timeseries,
            stats,
            prefix,
        }
    }
}
