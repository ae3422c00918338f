//! Fleets: N servers behind a router, sharing one request stream (docs/model.md,
//! "Fleets").
//!
//! Each server is the one-server simulator, stepped: the router hands it requests in
//! arrival order and, before each decision, sees every server it looks at as it stands at
//! that instant. A server is only moved forward when a router looks at it, and never
//! past what it can know, so routers that look at nothing (round-robin, random) leave
//! each server to run as one undisturbed simulation, and every server's run is the same,
//! record for record, as its own requests simulated alone.
//!
//! ```
//! use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
//! let one = engine::SimConfig::reference(6.0, 8, 8192);
//! let fleet = FleetConfig::uniform(one, 4, RouterKind::LeastOutstanding);
//! let report = simulate_fleet(&fleet).unwrap();
//! assert_eq!(report.replicas.len(), 4);
//! assert!(report.summary.ttft.mean.unwrap() > 0.0);
//! ```

mod gate;
mod router;
mod users;

pub use router::RouterKind;

use crate::config::ServerConfig;
use crate::config::{EndRule, KvMode, SimConfig};
use crate::cost::CostModel;
use crate::error::ConfigError;
use crate::kv_cache::PrefixCounts;
use crate::limits::{Limits, MAX_REPLICAS};
use crate::metrics::{Accumulator, PrefixAccumulator, PrefixSummary, Summary};
use crate::record::RequestRecord;
use crate::sim::events::Event;
use crate::sim::{logged_server, server, RunStats, Server, ServerView, Streaming, TimePoint};
use crate::workload::{Request, UserSource};
use serde::{Deserialize, Serialize};

/// One server of a fleet: its settings and cost model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    pub server: ServerConfig,
    pub cost: CostModel,
}

/// How the client sends requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Client {
    /// Each request at its arrival time (open loop).
    #[default]
    Open,
    /// At most `max` requests in flight: a request is sent at its arrival time or, if
    /// `max` are in flight, when one of them ends, in arrival order (`vllm bench serve
    /// --max-concurrency`). Its latencies count from when it is sent.
    MaxConcurrency { max: u32 },
    /// `users` closed-loop users, each sending its next request a think time (exponential,
    /// mean `think_s`; 0 at once) after the answer to its last one ends, until the horizon
    /// (docs/model.md, Closed-loop users). The workload's lengths and conversations are
    /// kept; its arrival process is not used.
    Users { users: u32, think_s: f64 },
}

/// A fleet: the workload and run settings of `base`, N servers and a router.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetConfig {
    /// The workload, horizon, seed, end rule, metrics and outputs of the whole fleet.
    /// Its server and cost are not used: each replica has its own.
    pub base: SimConfig,
    pub replicas: Vec<Replica>,
    pub router: RouterKind,
    #[serde(default)]
    pub client: Client,
}

impl FleetConfig {
    /// `n` replicas, each with `base`'s server and cost.
    pub fn uniform(base: SimConfig, n: u32, router: RouterKind) -> FleetConfig {
        let one = Replica {
            server: base.server.clone(),
            cost: base.cost.clone(),
        };
        FleetConfig {
            replicas: vec![one; n as usize],
            base,
            router,
            client: Client::Open,
        }
    }

    /// Checks the fleet within `limits`.
    ///
    /// # Errors
    /// No replicas (or more than [`MAX_REPLICAS`]), a router that cannot apply to these
    /// servers, or any replica's or the workload's own error.
    pub fn validate_with(&self, limits: &Limits) -> Result<(), ConfigError> {
        let n = self.replicas.len();
        if n == 0 {
            return Err(ConfigError::Zero {
                name: "replicas",
                value: 0,
            });
        }
        if n > MAX_REPLICAS {
            return Err(ConfigError::OutOfRange {
                name: "replicas",
                value: n as f64,
                why: "a fleet has at most 4096 replicas",
            });
        }
        // The fleet's whole stream against the work limits; each replica, with its share
        // of the stream, against its own (its drain estimate among them).
        let whole = SimConfig {
            end: EndRule::Cut,
            ..self.base.clone()
        };
        whole.validate_with(limits)?;
        let share = self.base.workload.rate() / n as f64;
        // Identical neighbours are checked once (a uniform fleet: one check).
        for (i, r) in self.replicas.iter().enumerate() {
            if i > 0 && self.replicas[i - 1] == *r {
                continue;
            }
            let cfg = SimConfig {
                server: r.server.clone(),
                cost: r.cost.clone(),
                workload: self.base.workload.with_rate(share),
                ..self.base.clone()
            };
            cfg.validate_with(limits)?;
        }
        match self.router {
            RouterKind::KvAware
                if self
                    .replicas
                    .iter()
                    .any(|r| r.server.kv_mode != KvMode::Paged) =>
            {
                return Err(ConfigError::Fleet(
                    "the kv_aware router needs paged servers (a reserve-mode server reports \
                     reservations, not use); use --kv-mode paged or another router"
                        .into(),
                ))
            }
            RouterKind::PowerOfD { d: 0 } => {
                return Err(ConfigError::Zero {
                    name: "power-of-d choices d",
                    value: 0,
                })
            }
            _ => {}
        }
        match self.client {
            Client::MaxConcurrency { max: 0 } => {
                return Err(ConfigError::Zero {
                    name: "max_concurrency",
                    value: 0,
                })
            }
            Client::Users { users, think_s } => {
                // The same checks as the source's own.
                UserSource::new(&self.base.workload, self.base.seed, users, think_s)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Each replica as a one-server configuration (the fleet's workload and settings with
    /// the replica's server and cost).
    pub fn replica_configs(&self) -> Vec<SimConfig> {
        self.replicas
            .iter()
            .map(|r| SimConfig {
                server: r.server.clone(),
                cost: r.cost.clone(),
                ..self.base.clone()
            })
            .collect()
    }
}

/// One replica's share of a fleet run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaReport {
    pub summary: Summary,
    pub stats: RunStats,
    /// Fraction of the fleet's run the replica spent running iterations.
    pub utilisation: f64,
    /// Requests the router sent it.
    pub routed: u64,
    /// Queue / batch / KV samples, when `timeseries_points > 0`.
    pub timeseries: Vec<TimePoint>,
}

/// What a fleet run returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// Over every request of the fleet.
    pub summary: Summary,
    pub replicas: Vec<ReplicaReport>,
    /// Every request's record in id order, when `keep_records` was set.
    pub records: Vec<RequestRecord>,
    /// The replica each request went to, by id, when `keep_records` was set.
    pub routed_to: Vec<u32>,
    /// Load imbalance: the time average of the most outstanding requests at any replica
    /// over the time average of the mean, sampled at 1,000 instants over the arrivals
    /// (1 is perfectly even; N is all load on one replica). 1 for one replica.
    pub imbalance: f64,
    /// Fleet-wide: requests in the system on average over the run (Little's L), the
    /// departures and their mean sojourn (W), over `end_s`.
    pub time_avg_in_system: f64,
    pub departed: u64,
    pub mean_sojourn_s: f64,
    pub end_s: f64,
    /// Some replica's drained run stopped at its cap (see [`RunStats::unstable`]).
    pub unstable: bool,
    /// What the replicas' prefix caches did together, when on (each replica's own is
    /// in its `stats.prefix`): counts summed, hit rates of the sums, TTFT of hits and
    /// misses over every replica's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<PrefixSummary>,
}

/// Simulates a fleet, within the default [`Limits`].
///
/// # Errors
/// As [`FleetConfig::validate_with`].
pub fn simulate_fleet(cfg: &FleetConfig) -> Result<FleetReport, ConfigError> {
    simulate_fleet_with(cfg, &Limits::default())
}

/// [`simulate_fleet`] within other work limits.
///
/// # Errors
/// As [`FleetConfig::validate_with`].
pub fn simulate_fleet_with(cfg: &FleetConfig, limits: &Limits) -> Result<FleetReport, ConfigError> {
    cfg.validate_with(limits)?;
    let stream = cfg
        .base
        .workload
        .stream(cfg.base.seed, cfg.base.horizon_s)?;
    Ok(run(cfg, stream, limits.max_drain_horizons, None))
}

/// Simulates a fleet on an explicit request sequence (sorted by arrival); `cfg` must be
/// valid ([`FleetConfig::validate_with`]). The workload in `cfg` is ignored.
pub fn simulate_fleet_requests<I: Iterator<Item = Request>>(
    cfg: &FleetConfig,
    requests: I,
) -> FleetReport {
    run(cfg, requests, Limits::default().max_drain_horizons, None)
}

/// [`simulate_fleet_requests`] with every replica's event log on ([`crate::sim::events`]):
/// the report, which is the one the run gives without the logs, and each replica's log
/// by replica index. Times in a replica's log are its own (an arrival at its entry).
/// Meant for short runs (a log grows with iterations × batch width).
pub fn simulate_fleet_logged<I: Iterator<Item = Request>>(
    cfg: &FleetConfig,
    requests: I,
) -> (FleetReport, Vec<Vec<Event>>) {
    let mut logs = vec![Vec::new(); cfg.replicas.len()];
    let report = run(
        cfg,
        requests,
        Limits::default().max_drain_horizons,
        Some(&mut logs),
    );
    (report, logs)
}

/// The fleet's event loop; `logs`, when given, holds one event log per replica.
fn run<I: Iterator<Item = Request>>(
    cfg: &FleetConfig,
    requests: I,
    drain_horizons: f64,
    logs: Option<&mut Vec<Vec<Event>>>,
) -> FleetReport {
    let configs = cfg.replica_configs();
    let n = configs.len();
    let expected = (cfg.base.workload.rate() * cfg.base.horizon_s / n as f64).min(1e7) as usize;
    let mut servers: Vec<Box<dyn Server + '_>> = match logs {
        None => configs
            .iter()
            .map(|c| server(c, expected, drain_horizons))
            .collect(),
        Some(logs) => configs
            .iter()
            .zip(logs.iter_mut())
            .map(|(c, log)| logged_server(c, expected, drain_horizons, log))
            .collect(),
    };
    let mut router = cfg.router.build(cfg.base.seed);
    let mut fleet = Fleet {
        routed: vec![0; n],
        routed_to: Vec::new(),
        keep: cfg.base.keep_records,
        imbalance: Imbalance::new(cfg.base.horizon_s, n),
        // Only the open loop leaves the servers to the router alone; a gated client moves
        // them itself (gate.rs), so its router looks at them directly.
        seen: matches!(cfg.client, Client::Open).then(|| Seen::new(&servers, cfg.router)),
        reads_kv: cfg.router.reads_kv(),
    };
    match cfg.client {
        Client::Open => {
            for r in requests {
                fleet.send(&mut servers, router.as_mut(), r);
            }
        }
        Client::MaxConcurrency { max } => gate::run(
            &mut fleet,
            &mut servers,
            router.as_mut(),
            requests,
            max as usize,
        ),
        Client::Users { users, think_s } => {
            let mut source = UserSource::new(&cfg.base.workload, cfg.base.seed, users, think_s)
                .expect("validated");
            users::run(
                &mut fleet,
                &mut servers,
                router.as_mut(),
                &mut source,
                cfg.base.horizon_s,
            );
        }
    }
    fleet.finish(cfg, servers)
}

/// The router's side of a run: where each request went, and the imbalance samples.
struct Fleet {
    routed: Vec<u64>,
    routed_to: Vec<u32>,
    keep: bool,
    imbalance: Imbalance,
    /// What the router last saw of each server, when nothing but [`Fleet::send`] moves
    /// them (the open loop).
    seen: Option<Seen>,
    /// Whether the router reads the servers' KV use ([`RouterKind::reads_kv`]).
    reads_kv: bool,
}

impl Fleet {
    /// Routes `r` (arriving now) and sends it.
    fn send(&mut self, servers: &mut [Box<dyn Server + '_>], router: &mut dyn Route, r: Request) {
        let t = r.arrival;
        let n = servers.len();
        let i = match &mut self.seen {
            Some(seen) => {
                self.imbalance
                    .sample_before(t, |at, i| seen.look(&mut *servers[i], i, at).outstanding);
                let i = if n == 1 {
                    0
                } else if router.looks_at_all() {
                    seen.look_all(servers, t);
                    seen.tell(router);
                    router.pick_all(&r, &seen.views)
                } else {
                    router.pick(&r, n, &mut |i| seen.look(&mut *servers[i], i, t))
                };
                servers[i].push(r);
                seen.refresh(&mut *servers[i], i, t);
                i
            }
            None => {
                let kv = self.reads_kv;
                self.imbalance
                    .sample_before(t, |at, i| look(&mut *servers[i], at, kv).outstanding);
                let i = if n == 1 {
                    0
                } else {
                    router.pick(&r, n, &mut |i| look(&mut *servers[i], t, kv))
                };
                servers[i].push(r);
                i
            }
        };
        self.routed[i] += 1;
        if self.keep {
            self.routed_to.push(i as u32);
        }
    }

    fn finish(self, cfg: &FleetConfig, servers: Vec<Box<dyn Server + '_>>) -> FleetReport {
        let finished: Vec<_> = servers.into_iter().map(|s| s.finish()).collect();
        let end = match cfg.base.end {
            EndRule::Cut => cfg.base.horizon_s,
            EndRule::Drain => finished.iter().map(|f| f.stats.end_s).fold(0.0, f64::max),
        };
        let window = (end - cfg.base.metrics.warmup_s).max(0.0);
        let mut acc = Accumulator::new(cfg.base.metrics.clone());
        let mut records = Vec::new();
        let (mut area, mut departed, mut sojourn) = (0.0, 0, 0.0);
        let mut replicas = Vec::with_capacity(finished.len());
        let mut prefix: Option<(PrefixAccumulator, PrefixCounts, u64, u64)> = None;
        for (mut f, routed) in finished.into_iter().zip(self.routed) {
            if let Some(p) = f.prefix.take() {
                match &mut prefix {
                    None => {
                        let mut acc = PrefixAccumulator::new(cfg.base.metrics.warmup_s);
                        acc.merge(&p.acc);
                        prefix = Some((acc, p.counts, p.cached_at_end, p.held_at_end));
                    }
                    Some((acc, counts, cached, held)) => {
                        acc.merge(&p.acc);
                        *counts = *counts + p.counts;
                        *cached += p.cached_at_end;
                        *held += p.held_at_end;
                    }
                }
                f.stats.prefix = Some(p.finish());
            }
            area += f.stats.time_avg_in_system * f.stats.end_s;
            departed += f.stats.departed;
            sojourn += f.stats.sojourn_sum_s;
            let mut own = Accumulator::new(cfg.base.metrics.clone());
            own.merge(&f.acc);
            acc.merge(&f.acc);
            records.extend(f.records);
            replicas.push(ReplicaReport {
                summary: own.finish(f.window_s),
                utilisation: if end > 0.0 { f.stats.busy_s / end } else { 0.0 },
                stats: f.stats,
                routed,
                timeseries: f.timeseries,
            });
        }
        records.sort_by_key(|r| r.id);
        FleetReport {
            summary: acc.finish(window),
            unstable: replicas.iter().any(|r| r.stats.unstable),
            replicas,
            records,
            routed_to: self.routed_to,
            imbalance: self.imbalance.value(),
            time_avg_in_system: if end > 0.0 { area / end } else { 0.0 },
            departed,
            mean_sojourn_s: if departed > 0 {
                sojourn / departed as f64
            } else {
                0.0
            },
            end_s: end,
            prefix: prefix.map(|(acc, counts, cached, held)| acc.finish(counts, cached, held)),
        }
    }
}

/// Server `s` as a router sees it at `t`: moved forward to `t` first, less the tokens
/// streamed by `t` by the decode run it has worked out ([`Server::streaming`]), and,
/// when the router reads KV use (`kv`), with the blocks its iterations scheduled by `t`
/// have taken.
fn look(s: &mut dyn Server, t: f64, kv: bool) -> ServerView {
    s.advance(t);
    let mut view = s.view();
    if let Some(run) = s.streaming() {
        let passed = run.passed(t);
        view.work_tokens -= run.per_boundary() * passed;
        if kv {
            view.kv_used_blocks += s.kv_streamed(passed);
        }
    }
    view
}

/// Each server's view and wake as they stood after the fleet last pushed to it or moved
/// it. A server changes only when a request is pushed to it or it is moved to a limit at
/// or after its wake, so [`Seen::look`] is [`look`] without calling a server that cannot
/// have changed: the same servers are moved at the same instants, and the router sees the
/// same views. For a router that reads the servers' reports as they stream ([`Streams`]),
/// a server's view also changes at each boundary of the decode run it has worked out:
/// `wakes` is then the sooner of the server's wake and that boundary, and a server whose
/// own wake is not due has its view's work brought down here without moving it (and its
/// KV use, for a router that reads it, brought up by the blocks it says the run has
/// taken).
struct Seen {
    views: Vec<ServerView>,
    wakes: Vec<f64>,
    streams: Option<Streams>,
    /// The servers whose view changed since the router was last told ([`Seen::tell`]),
    /// a bit each.
    changed: Vec<u64>,
}

/// What [`Seen`] keeps of each server for a router that reads the servers' reports as
/// they stream ([`RouterKind::reads_streams`]).
struct Streams {
    /// The server's own wake.
    wakes: Vec<f64>,
    /// Its outstanding work as it last reported it.
    works: Vec<u64>,
    /// Its KV blocks in use as it last reported them, for a router that reads them
    /// ([`RouterKind::reads_kv`]).
    kv_used: Option<Vec<u64>>,
    /// The decode run it has worked out and how many of its boundaries have passed.
    runs: Vec<Option<(Streaming, u64)>>,
}

/// `BIT[j]` is bit j.
const BIT: [u64; 64] = {
    let mut bits = [0; 64];
    let mut j = 0;
    while j < 64 {
        bits[j] = 1 << j;
        j += 1;
    }
    bits
};

impl Seen {
    fn new(servers: &[Box<dyn Server + '_>], router: RouterKind) -> Seen {
        let n = servers.len();
        // Every view is news to the router.
        let mut changed = vec![0u64; n.div_ceil(64)];
        for i in 0..n {
            changed[i / 64] |= 1 << (i % 64);
        }
        let views: Vec<ServerView> = servers.iter().map(|s| s.view()).collect();
        let wakes: Vec<f64> = servers.iter().map(|s| s.wake()).collect();
        let streams = router.reads_streams().then(|| Streams {
            wakes: wakes.clone(),
            works: views.iter().map(|v| v.work_tokens).collect(),
            kv_used: router
                .reads_kv()
                .then(|| views.iter().map(|v| v.kv_used_blocks).collect()),
            runs: vec![None; n],
        });
        Seen {
            views,
            wakes,
            streams,
            changed,
        }
    }

    /// [`look`] at server `s`, the `i`-th.
    #[inline]
    fn look(&mut self, s: &mut dyn Server, i: usize, t: f64) -> ServerView {
        if t >= self.wakes[i] {
            self.advance(s, i, t);
        }
        self.views[i]
    }

    /// [`Seen::look`] at every server (in index order, as a router scanning them all).
    fn look_all(&mut self, servers: &mut [Box<dyn Server + '_>], t: f64) {
        for c in 0..self.wakes.len().div_ceil(64) {
            // The servers of this block of 64 that can have changed, as a bit mask (the
            // bits from a table, so the loop is a vector compare, mask and or).
            let mut due = self.wakes[c * 64..]
                .iter()
                .zip(&BIT)
                .fold(0, |due, (&w, &bit)| due | if t >= w { bit } else { 0 });
            while due != 0 {
                let i = c * 64 + due.trailing_zeros() as usize;
                due &= due - 1;
                self.advance(&mut *servers[i], i, t);
            }
        }
    }

    /// Moves server `s`, the `i`-th, to `t` and takes its view and wake.
    #[inline]
    fn advance(&mut self, s: &mut dyn Server, i: usize, t: f64) {
        let view = &mut self.views[i];
        match &mut self.streams {
            None => self.wakes[i] = s.advance_into(t, view),
            Some(st) => {
                if t >= st.wakes[i] {
                    st.wakes[i] = s.advance_into(t, view);
                    st.took(s, i, view, t);
                }
                self.wakes[i] = st.stream_to(s, i, view, t);
            }
        }
        self.changed[i / 64] |= 1 << (i % 64);
    }

    /// Takes the view of server `s`, the `i`-th, after a request was pushed to it at `t`.
    #[inline]
    fn refresh(&mut self, s: &mut dyn Server, i: usize, t: f64) {
        let view = &mut self.views[i];
        match &mut self.streams {
            None => self.wakes[i] = s.look_into(view),
            Some(st) => {
                st.wakes[i] = s.look_into(view);
                st.took(s, i, view, t);
                self.wakes[i] = st.stream_to(s, i, view, t);
            }
        }
        self.changed[i / 64] |= 1 << (i % 64);
    }

    /// Tells the router every view that changed since it was last told.
    fn tell(&mut self, router: &mut dyn Route) {
        for (c, word) in self.changed.iter_mut().enumerate() {
            while *word != 0 {
                let i = c * 64 + word.trailing_zeros() as usize;
                *word &= *word - 1;
                router.view_changed(i, &self.views[i]);
            }
        }
    }
}

impl Streams {
    /// Keeps the work server `s`, the `i`-th, reported in `view` just taken at `t`, and
    /// the decode run it has worked out.
    #[inline]
    fn took(&mut self, s: &dyn Server, i: usize, view: &ServerView, t: f64) {
        self.works[i] = view.work_tokens;
        if let Some(kv) = &mut self.kv_used {
            kv[i] = view.kv_used_blocks;
        }
        self.runs[i] = s.streaming().map(|run| (run, run.passed(t)));
    }

    /// Server `s`'s (the `i`-th) `view` at `t`: its reported work less what its decode
    /// run has streamed by `t`, and, when read, its reported KV use with the blocks the
    /// run's iterations scheduled by `t` have taken. Returns when that next changes (the
    /// run's next boundary, or the server's wake).
    #[inline]
    fn stream_to(&mut self, s: &mut dyn Server, i: usize, view: &mut ServerView, t: f64) -> f64 {
        let (passed, streamed, next) = match &mut self.runs[i] {
            None => (0, 0, f64::INFINITY),
            Some((run, passed)) => {
                let next = run.pass_to(passed, t);
                (*passed, run.per_boundary() * *passed, next)
            }
        };
        view.work_tokens = self.works[i] - streamed;
        if let Some(kv) = &self.kv_used {
            view.kv_used_blocks = kv[i] + s.kv_streamed(passed);
        }
        next.min(self.wakes[i])
    }
}

pub(crate) use router::Route;

/// Samples of the most and the mean outstanding requests at fixed instants.
struct Imbalance {
    step: f64,
    next: f64,
    left: u32,
    sum_max: f64,
    sum_mean: f64,
    n: usize,
}

impl Imbalance {
    const SAMPLES: u32 = 1000;

    fn new(horizon: f64, n: usize) -> Imbalance {
        let step = horizon / f64::from(Self::SAMPLES);
        Imbalance {
            step,
            next: step * 0.5,
            left: if n > 1 { Self::SAMPLES } else { 0 },
            sum_max: 0.0,
            sum_mean: 0.0,
            n,
        }
    }

    /// Takes the samples due before an arrival at `t`; `outstanding(at, i)` is server i's
    /// outstanding requests at `at` (the servers are moved there, which changes nothing in
    /// their runs).
    #[inline]
    fn sample_before(&mut self, t: f64, mut outstanding: impl FnMut(f64, usize) -> u64) {
        while self.left > 0 && self.next < t {
            let (mut max, mut sum) = (0u64, 0u64);
            for i in 0..self.n {
                let o = outstanding(self.next, i);
                max = max.max(o);
                sum += o;
            }
            self.sum_max += max as f64;
            self.sum_mean += sum as f64 / self.n as f64;
            self.left -= 1;
            self.next += self.step;
        }
    }

    fn value(&self) -> f64 {
        if self.sum_mean > 0.0 {
            self.sum_max / self.sum_mean
        } else {
            1.0
        }
    }
}
