//! "Watch the server": a short run of the engine (at most [`MAX_REQUESTS`] requests),
//! recorded with its event log ([`engine::sim::events`]) and replayed as an animation.
//!
//! Plain Rust, tested natively: [`WatchState`] (the parameters and the view's URL state),
//! [`record`] (the run, done in a Web Worker: the page's main thread only replays it),
//! [`Tape`] (the run in a compact form), [`replay`] (the server's state at any instant) and
//! [`scene`] (the drawing, generic over plotters' backend). The page glue is `watch_ui`.
//!
//! A fleet (N replicas behind a router, [`engine::fleet`]) is watched the same way:
//! [`fleet`] records it with every replica's event log, replays each replica and the
//! whole fleet, and [`fleet_scene`] draws the router and the replicas side by side.

pub mod fleet;
pub mod fleet_scene;
pub mod replay;
pub mod scene;

use crate::fleet::MAX_PAGE_REPLICAS;
use crate::params::{fmt_num, Params};
use engine::config::{EndRule, KvMode};
use engine::fleet::RouterKind;
use engine::record::RequestRecord;
use engine::sim::events::{Event, Phase};
use engine::sim::{simulate_logged, TimePoint};
use serde::{Deserialize, Serialize};

/// Requests watched by default, and at most.
pub const DEFAULT_REQUESTS: u32 = 200;
pub const MAX_REQUESTS: u32 = 500;
/// Playback speeds [simulated s per wall-clock s].
pub const SPEEDS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
/// Time-series points of a watched run.
pub const WATCH_POINTS: u32 = 400;

/// What the Watch view shows: the calculator's parameters at their chosen rate
/// ([`Params::rate`]), how many requests, which seed, and the playback position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchState {
    pub params: Params,
    /// Requests in the run (the first `requests` of the workload's stream).
    pub requests: u32,
    pub seed: u64,
    /// Playback position [s] and speed [simulated s per s].
    pub at_s: f64,
    pub speed: f64,
    /// Replicas behind `router`: 1 watches one server; more watch a fleet whose
    /// fleet-wide arrival rate is the parameters' rate.
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default)]
    pub router: RouterKind,
}

fn one() -> u32 {
    1
}

impl Default for WatchState {
    fn default() -> Self {
        WatchState::of(Params::default())
    }
}

/// URL keys of the Watch view (besides the calculator's).
const KEYS: [&str; 6] = ["n", "seed", "at", "speed", "replicas", "router"];

impl WatchState {
    /// Watching `params` at their chosen rate, from the start.
    pub fn of(params: Params) -> WatchState {
        WatchState {
            params,
            requests: DEFAULT_REQUESTS,
            seed: 0,
            at_s: 0.0,
            speed: 1.0,
            replicas: 1,
            router: RouterKind::RoundRobin,
        }
    }

    /// Watching a fleet of `replicas` copies of `params`' server behind `router`, at the
    /// fleet-wide rate `rate` [req/s], from the start.
    pub fn of_fleet(params: Params, rate: f64, replicas: u32, router: RouterKind) -> WatchState {
        WatchState {
            replicas,
            router,
            ..WatchState::of(Params { rate, ..params })
        }
    }

    /// Whether it watches a fleet (more than one replica).
    pub fn is_fleet(&self) -> bool {
        self.replicas > 1
    }

    /// Whether `other` is the same run (playback position and speed aside).
    pub fn same_run(&self, other: &WatchState) -> bool {
        self.params == other.params
            && self.requests == other.requests
            && self.seed == other.seed
            && self.replicas == other.replicas
            && (self.replicas == 1 || self.router == other.router)
    }

    /// The URL query (without `?`): `view=watch`, the run's keys (a fleet's replicas and
    /// router among them) and the calculator's.
    pub fn to_query(&self) -> String {
        let fleet = if self.is_fleet() {
            format!("&replicas={}&router={}", self.replicas, self.router.name())
        } else {
            String::new()
        };
        format!(
            "view=watch&n={}&seed={}&at={}&speed={}{fleet}&{}",
            self.requests,
            self.seed,
            fmt_num((self.at_s * 1e4).round() / 1e4),
            fmt_num(self.speed),
            self.params.to_query()
        )
    }

    /// Reads a Watch URL: its own keys, then the calculator's. Returns the state and the
    /// problems found (bad values are reported and skipped).
    pub fn from_query(query: &str) -> (WatchState, Vec<String>) {
        let query = query.trim_start_matches('?');
        let mut rest = Vec::new();
        let mut errs = Vec::new();
        let mut own = Vec::new();
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            if k == "view" {
                continue;
            }
            if KEYS.contains(&k) {
                own.push((k, v));
            } else {
                rest.push(kv);
            }
        }
        let (params, bad) = Params::from_query(&rest.join("&"));
        errs.extend(bad);
        let mut s = WatchState::of(params);
        for (k, v) in own {
            let ok = match k {
                "n" => v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_REQUESTS).contains(n))
                    .map(|n| s.requests = n)
                    .is_some(),
                "seed" => v.parse::<u64>().ok().map(|x| s.seed = x).is_some(),
                "replicas" => v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE_REPLICAS).contains(n))
                    .map(|n| s.replicas = n)
                    .is_some(),
                "router" => RouterKind::parse(v).map(|r| s.router = r).is_some(),
                "at" => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(|x| s.at_s = x)
                    .is_some(),
                _ => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .map(|x| s.speed = nearest_speed(x))
                    .is_some(),
            };
            if !ok {
                errs.push(match k {
                    "n" => format!("ignored n={v}: the number of requests is 1 to {MAX_REQUESTS}"),
                    "replicas" => format!(
                        "ignored replicas={v}: the page watches 1 to {MAX_PAGE_REPLICAS} replicas"
                    ),
                    _ => format!("ignored URL parameter {k}={v}"),
                });
            }
        }
        (s, errs)
    }
}

/// The speed step nearest to `x`.
pub fn nearest_speed(x: f64) -> f64 {
    SPEEDS
        .iter()
        .copied()
        .min_by(|a, b| (a.ln() - x.ln()).abs().total_cmp(&(b.ln() - x.ln()).abs()))
        .unwrap_or(1.0)
}

/// Whether a query asks for the Watch view (`view=watch`).
pub fn wants_watch(query: &str) -> bool {
    query
        .trim_start_matches('?')
        .split('&')
        .any(|kv| kv == "view=watch")
}

/// The URL query that opens the Watch view on `params` (at their chosen rate).
pub fn watch_query(params: &Params) -> String {
    WatchState::of(params.clone()).to_query()
}

/// One running sequence in one iteration: request id, phase (−1 decode, 0 idle, n > 0 a
/// prefill chunk of n tokens), KV blocks held and, of them, those held through the prefix
/// cache (shared). A tuple, so the worker's reply stays small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TSlot(pub u32, pub i32, pub u32, pub u32);

impl TSlot {
    pub fn id(self) -> u32 {
        self.0
    }
    pub fn phase(self) -> Phase {
        match self.1 {
            -1 => Phase::Decode,
            0 => Phase::Idle,
            n => Phase::Prefill(n.unsigned_abs()),
        }
    }
    pub fn blocks(self) -> u32 {
        self.2
    }
    /// Blocks held through the prefix cache (counted once for the whole server).
    pub fn cached(self) -> u32 {
        self.3
    }
    /// Blocks the sequence holds alone.
    pub fn own(self) -> u32 {
        self.2.saturating_sub(self.3)
    }
}

/// One iteration of the watched run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TIteration {
    pub start_s: f64,
    pub end_s: f64,
    pub slots: Vec<TSlot>,
    /// Prefix cache: cached blocks the running requests hold (once each), and cached
    /// blocks no one holds (evictable).
    #[serde(default)]
    pub cached_held: u64,
    #[serde(default)]
    pub cached_idle: u64,
}

/// What happened to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarkKind {
    /// Entered the server and joined the queue.
    Arrival,
    /// Refused at entry.
    Rejected,
    /// Joined the running set.
    Admitted,
    FirstToken,
    Finished,
    /// Lost its KV and went back to the queue.
    Preempted,
    /// Its first admission found prompt tokens in the prefix cache (their prefill is
    /// skipped).
    Hit,
}

/// One event of a request: when, what, which request, and the blocks an arrival reserved
/// (reserve mode) or the prompt tokens a hit found cached.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub t_s: f64,
    pub kind: MarkKind,
    pub id: u32,
    pub blocks: u32,
}

/// A watched run: its iterations and request events in time order, its records and time
/// series, and the server's sizes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tape {
    /// B, the KV pool [blocks] and a block [tokens].
    pub max_batch: u32,
    pub kv_blocks: u64,
    pub block_size: u64,
    pub paged: bool,
    /// Whether the prefix cache is on.
    #[serde(default)]
    pub prefix_cache: bool,
    /// The policy and KV mode, as the page names them.
    pub policy: String,
    pub rate: f64,
    pub iterations: Vec<TIteration>,
    /// In time order (the event loop's order among equal times).
    pub marks: Vec<Mark>,
    /// The engine's records, by id.
    pub records: Vec<RequestRecord>,
    /// The engine's time series of the run (queue, batch, KV at regular instants).
    pub timeseries: Vec<TimePoint>,
    /// The run's end [s].
    pub end_s: f64,
    /// A fleet's router and replicas (None: one server). A fleet's own `marks` are every
    /// replica's, merged in time order, its `iterations` empty, its sizes a replica's.
    #[serde(default)]
    pub fleet: Option<fleet::FleetTape>,
}

/// Simulates the first `requests` requests of `params`' workload at its chosen rate with
/// `seed`, with the event log on. The run drains (every admitted request finishes), so the
/// animation ends with an empty server.
///
/// # Errors
/// A readable message for parameters the page or the engine refuses.
pub fn record(params: &Params, requests: u32, seed: u64) -> Result<Tape, String> {
    let (cfg, reqs) = watched_requests(params, requests, seed)?;
    cfg.validate().map_err(|e| e.to_string())?;
    let (report, events) = simulate_logged(&cfg, reqs.into_iter());
    let mut tape = Tape::new(params, &cfg, &report.records, events, report.stats.end_s);
    tape.records = report.records;
    tape.timeseries = report.timeseries;
    Ok(tape)
}

/// A watched run: one server's ([`record`]) or, with more than one replica, a fleet's
/// ([`fleet::record_fleet`]).
///
/// # Errors
/// As [`record`] and [`fleet::record_fleet`].
pub fn record_run(
    params: &Params,
    requests: u32,
    seed: u64,
    replicas: u32,
    router: RouterKind,
) -> Result<Tape, String> {
    if replicas > 1 {
        fleet::record_fleet(params, requests, seed, replicas, router)
    } else {
        record(params, requests, seed)
    }
}

/// The configuration of a watched run (drained, records and time series kept, the horizon
/// at the last arrival) and its first `requests` requests.
fn watched_requests(
    params: &Params,
    requests: u32,
    seed: u64,
) -> Result<(engine::SimConfig, Vec<engine::workload::Request>), String> {
    if !(1..=MAX_REQUESTS).contains(&requests) {
        return Err(format!(
            "watch: {requests} requests; the animation takes 1 to {MAX_REQUESTS}"
        ));
    }
    params.check().map_err(|e| e.message)?;
    let mut cfg = params.sim_config(params.rate, seed);
    let mut reqs = Vec::with_capacity(requests as usize);
    // The stream is lazy: only the watched requests are drawn from it.
    let stream = cfg
        .workload
        .stream(seed, f64::MAX)
        .map_err(|e| e.to_string())?;
    reqs.extend(stream.take(requests as usize));
    let last = reqs.last().map_or(1.0, |r| r.arrival);
    // The horizon is the last arrival: the time series spans the arrivals (and the drain
    // after them), and a drained run is cut only if it is unstable far beyond.
    cfg.horizon_s = last.max(1e-3);
    cfg.end = EndRule::Drain;
    cfg.keep_records = true;
    cfg.timeseries_points = WATCH_POINTS;
    Ok((cfg, reqs))
}

impl Tape {
    /// The tape of one server's event log; `records` are the run's, by id (a fleet's
    /// whole), and the tape's own records and time series are left empty.
    fn new(
        params: &Params,
        cfg: &engine::SimConfig,
        records: &[RequestRecord],
        events: Vec<Event>,
        end_s: f64,
    ) -> Tape {
        let bs = u64::from(cfg.server.block_size.max(1));
        let mut iterations = Vec::new();
        let mut marks = Vec::new();
        let mut hit_seen = std::collections::HashSet::new();
        // Events come in the event loop's order; the marks and iterations each need time
        // order, kept stable among equal times.
        for e in events {
            let mark = |t_s: f64, kind, id: u64, blocks: u64| Mark {
                t_s,
                kind,
                id: id as u32,
                blocks: blocks.min(u32::MAX as u64) as u32,
            };
            match e {
                Event::Iteration(it) => iterations.push(TIteration {
                    start_s: it.start_s,
                    end_s: it.end_s,
                    slots: it
                        .slots
                        .iter()
                        .map(|s| {
                            let phase = match s.phase {
                                Phase::Decode => -1,
                                Phase::Idle => 0,
                                Phase::Prefill(n) => n.min(i32::MAX as u32) as i32,
                            };
                            let n = |b: u64| b.min(u32::MAX as u64) as u32;
                            TSlot(s.id as u32, phase, n(s.kv_blocks), n(s.cached_blocks))
                        })
                        .collect(),
                    cached_held: it.cached_held_blocks,
                    cached_idle: it.cached_idle_blocks,
                }),
                Event::Arrival {
                    t_s,
                    id,
                    admitted,
                    reserved_blocks,
                } => marks.push(mark(
                    t_s,
                    if admitted {
                        MarkKind::Arrival
                    } else {
                        MarkKind::Rejected
                    },
                    id,
                    reserved_blocks,
                )),
                Event::Admitted { t_s, id } => {
                    marks.push(mark(t_s, MarkKind::Admitted, id, 0));
                    // A hit shows at the first admission, as the record counts it.
                    let hit = records
                        .get(id as usize)
                        .filter(|r| r.admitted_s == Some(t_s))
                        .map_or(0, |r| r.cached_tokens);
                    if hit > 0 && hit_seen.insert(id) {
                        marks.push(mark(t_s, MarkKind::Hit, id, u64::from(hit)));
                    }
                }
                Event::FirstToken { t_s, id } => marks.push(mark(t_s, MarkKind::FirstToken, id, 0)),
                Event::Finished { t_s, id } => marks.push(mark(t_s, MarkKind::Finished, id, 0)),
                Event::Preempted { t_s, id } => marks.push(mark(t_s, MarkKind::Preempted, id, 0)),
            }
        }
        marks.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        iterations.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        Tape {
            max_batch: cfg.server.max_batch,
            kv_blocks: cfg.server.kv_tokens / bs,
            block_size: bs,
            paged: cfg.server.kv_mode == KvMode::Paged,
            prefix_cache: cfg.server.prefix_cache != engine::config::PrefixCache::Off,
            policy: format!(
                "{} · {} KV",
                cfg.server.policy.as_str(),
                if cfg.server.kv_mode == KvMode::Paged {
                    "paged"
                } else {
                    "reserve"
                }
            ),
            rate: params.rate,
            iterations,
            marks,
            end_s,
            records: Vec::new(),
            timeseries: Vec::new(),
            fleet: None,
        }
    }

    /// The first iteration boundary after `t` (the end of the iteration under way at `t`,
    /// or of the next one), or the run's end.
    pub fn next_boundary(&self, t: f64) -> f64 {
        if let Some(f) = &self.fleet {
            return f.next_boundary(t, self.end_s);
        }
        let i = self.iterations.partition_point(|it| it.end_s <= t);
        self.iterations.get(i).map_or(self.end_s, |it| it.end_s)
    }

    /// The last iteration boundary before `t` (0 if none).
    pub fn previous_boundary(&self, t: f64) -> f64 {
        if let Some(f) = &self.fleet {
            return f.previous_boundary(t);
        }
        let i = self.iterations.partition_point(|it| it.end_s < t);
        i.checked_sub(1)
            .and_then(|i| self.iterations.get(i))
            .map_or(0.0, |it| it.end_s)
    }
}

#[cfg(test)]
mod tests;
