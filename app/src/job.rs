//! The work the page hands to its sweep workers, and what comes back — plain serde types
//! sent as JSON strings — plus [`run`], which does the work (natively testable).
//!
//! Work is split by arrival rate: each worker gets a share of the [`Task`]s of one
//! [`Job`]; a task at one rate runs every seed and replies with one aggregated point.

use crate::chart::{Span, StatePoint};
use crate::curves::CurvePoint;
use crate::fleet::{FleetDetail, FleetModel, FleetState};
use crate::learn::{LessonOutput, LessonState};
use crate::params::Params;
use crate::plan::work::{PlanPart, PlanScreen};
use crate::plan::PlanState;
use engine::analytic::{
    capacity_bounds, predict, predict_prefix_cache, slo_capacity, CapacityBounds, ModelKind,
    Predicted, Prediction, PrefixPrediction,
};
use engine::fleet::RouterKind;
use engine::limits::Limits;
use engine::metrics::{PrefixSummary, Summary};
use engine::plan::Confirmed;
use engine::record::Outcome;
use engine::sim::{simulate, simulate_requests};
use engine::sweep::StandIns;
use engine::workload::{Request, Workload};
use engine::SimConfig;
use serde::{Deserialize, Serialize};

/// One unit of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Task {
    /// Every seed at one rate of the load curve.
    Curve { rate: f64 },
    /// Every seed at one (rate, B, K) of the reference grid (the benchmark).
    Grid {
        rate: f64,
        max_batch: u32,
        kv_tokens: u64,
    },
    /// One seed at the chosen rate with records and time series: CDF, over-time, timeline.
    Detail { rate: f64 },
    /// The analytical models at these rates, the capacity bounds and the SLO capacity.
    Models { rates: Vec<f64> },
    /// One lesson's experiment (the Learn view); the job's `params` are not used.
    Lesson { state: LessonState },
    /// A short run at the chosen rate with its event log (the Watch view): one server's,
    /// or a fleet's with more than one replica.
    Watch {
        requests: u32,
        seed: u64,
        replicas: u32,
        router: engine::fleet::RouterKind,
    },
    /// Every seed of a fleet at one fleet-wide rate, for each router (the Fleet view).
    FleetCurve {
        fleet: FleetState,
        routers: Vec<RouterKind>,
        rate: f64,
    },
    /// One run of the fleet at its chosen rate, per replica.
    FleetDetail { fleet: FleetState },
    /// The analytical fleet model at these rates.
    FleetModel { fleet: FleetState, rates: Vec<f64> },
    /// Every seed of one file's benchmark as it was run, replied as a point at `rate`.
    Benchmark { item: Box<crate::as_run::Item> },
    /// A worker's share of a plan (the Plan view): the screen if `screen`, the
    /// finalists of these ranks and the first `splits` disaggregated splits confirmed.
    Plan {
        plan: PlanState,
        screen: bool,
        ranks: Vec<u32>,
        splits: u32,
    },
}

impl Task {
    /// Runs this task costs, for progress (simulation runs; models count as one).
    pub fn runs(&self, seeds: u32) -> u32 {
        match self {
            Task::Curve { .. } | Task::Grid { .. } => seeds,
            Task::Benchmark { item } => crate::as_run::seeds_of(&item.run, seeds),
            Task::FleetCurve { routers, .. } => seeds * routers.len() as u32,
            Task::FleetDetail { .. } | Task::FleetModel { .. } => 1,
            Task::Plan {
                screen,
                ranks,
                splits,
                ..
            } => u32::from(*screen) + ranks.len() as u32 + splits,
            Task::Detail { .. }
            | Task::Models { .. }
            | Task::Lesson { .. }
            | Task::Watch { .. } => 1,
        }
    }
}

/// A batch of tasks for one worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Identifies the request, so stale replies are dropped.
    pub id: u64,
    pub params: Params,
    pub tasks: Vec<Task>,
}

impl Job {
    /// One job per worker's share of the tasks, all under `id` with `params`.
    pub fn per_share(id: u64, params: &Params, shares: Vec<Vec<Task>>) -> Vec<Job> {
        shares
            .into_iter()
            .map(|tasks| Job {
                id,
                params: params.clone(),
                tasks,
            })
            .collect()
    }
}

/// The detail views' data at the chosen rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Detail {
    pub rate: f64,
    /// TTFT of completed requests [s].
    pub ttft: Vec<f64>,
    pub series: Vec<StatePoint>,
    /// The first requests of the run (timeline).
    pub spans: Vec<Span>,
    /// The run's first token comes after the first decode step (reference rules), so the
    /// timeline's "prefill" phase includes that step.
    #[serde(default)]
    pub first_token_after_decode: bool,
    pub kv_capacity: f64,
    /// What the prefix cache did in this run (None: off).
    #[serde(default)]
    pub prefix: Option<Box<PrefixSummary>>,
}

/// One model's predictions across rates (`None`: unstable at that rate).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelResult {
    pub kind: ModelKind,
    pub points: Vec<(f64, Option<Predicted>)>,
}

/// What the models say about the configuration as a whole.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Models {
    pub curves: Vec<ModelResult>,
    /// Models that do not cover this configuration, with the reason.
    pub skipped: Vec<(String, String)>,
    pub bounds: Option<CapacityBounds>,
    /// SLO capacity (≥ 90 % attainment) [req/s], with the model that gave it.
    pub slo_capacity: Option<(String, f64)>,
    /// Utilisation predicted at the chosen rate.
    pub utilisation: Option<f64>,
    /// With the prefix cache on: Che's approximation at each rate
    /// ([`engine::analytic::predict_prefix_cache`]; empty when it does not apply).
    #[serde(default)]
    pub che: Vec<(f64, PrefixPrediction)>,
}

/// Legend name of Che's approximation.
pub const CHE: &str = "Che's approximation (LRU)";

impl Models {
    /// Che's approximation of a prefix-cache metric across rates, as a chart curve.
    pub fn che_curve(&self, m: crate::metric::Metric) -> Option<crate::curves::ModelCurve> {
        use crate::metric::Metric as M;
        let pick = |x: &PrefixPrediction| match m {
            M::PrefixHitRate => Some(x.token_hit_rate),
            M::PrefixBlockHitRate => Some(x.block_hit_rate),
            _ => None,
        };
        (!self.che.is_empty() && m.is_prefix()).then(|| crate::curves::ModelCurve {
            name: CHE.into(),
            slot: ModelKind::ALL.len(),
            points: self
                .che
                .iter()
                .map(|(r, x)| (*r, pick(x).filter(|v| v.is_finite())))
                .collect(),
        })
    }
}

/// A message from a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// The worker has loaded and accepts jobs.
    Ready,
    /// `done` runs of this worker's share are finished.
    Progress {
        id: u64,
        done: u32,
    },
    Point {
        id: u64,
        grid: Option<(u32, u64)>,
        point: CurvePoint,
    },
    Detail {
        id: u64,
        detail: Detail,
    },
    Models {
        id: u64,
        models: Models,
    },
    Lesson {
        id: u64,
        output: LessonOutput,
    },
    Watch {
        id: u64,
        tape: Box<crate::watch::Tape>,
    },
    /// A fleet's curve points at one rate, one per router.
    FleetPoints {
        id: u64,
        points: Vec<(RouterKind, CurvePoint)>,
    },
    FleetDetail {
        id: u64,
        detail: FleetDetail,
    },
    FleetModel {
        id: u64,
        model: FleetModel,
    },
    PlanScreen {
        id: u64,
        screen: Box<PlanScreen>,
    },
    /// The finalist of `rank` simulated (None: the screen has fewer), or the split of
    /// `rank` (`split`).
    PlanConfirmed {
        id: u64,
        rank: u32,
        confirmed: Option<Box<Confirmed>>,
        split: Option<Box<engine::plan::ConfirmedDisagg>>,
    },
    /// This worker's share is finished.
    Done {
        id: u64,
    },
    Error {
        id: u64,
        message: String,
    },
}

impl Reply {
    /// A plan share's part as the reply of job `id`.
    fn plan(id: u64, part: PlanPart) -> Reply {
        match part {
            PlanPart::Screen(screen) => Reply::PlanScreen { id, screen },
            PlanPart::Confirmed {
                rank,
                confirmed,
                split,
            } => Reply::PlanConfirmed {
                id,
                rank,
                confirmed,
                split,
            },
        }
    }
}

/// Number of requests shown in the timeline.
pub const TIMELINE_REQUESTS: usize = 40;
/// Target SLO attainment for capacity (DistServe: 90 %).
pub const SLO_TARGET: f64 = 0.9;

/// Runs a job, sending every reply to `send`. Never panics on bad parameters: they come
/// back as [`Reply::Error`].
pub fn run(job: &Job, send: &mut dyn FnMut(Reply)) {
    let id = job.id;
    let p = &job.params;
    let mut out = Progress {
        id,
        done: 0,
        sent: 0,
        last_ms: clock_ms(),
        send,
    };
    let mut streams = Streams::default();
    for task in &job.tasks {
        let result = match task {
            Task::Curve { rate } => curve_point(p, *rate, None, &mut streams, &mut out),
            Task::Grid {
                rate,
                max_batch,
                kv_tokens,
            } => curve_point(
                p,
                *rate,
                Some((*max_batch, *kv_tokens)),
                &mut streams,
                &mut out,
            ),
            Task::Detail { rate } => detail(p, *rate).map(|detail| Reply::Detail { id, detail }),
            Task::Benchmark { item } => crate::as_run::point(p, item.rate, &item.run, &mut || {
                out.tick()
            })
            .map(|point| Reply::Point {
                id,
                grid: None,
                point,
            }),
            Task::Models { rates } => Ok(Reply::Models {
                id,
                models: models(p, rates),
            }),
            Task::Lesson { state } => {
                crate::learn::run(state).map(|output| Reply::Lesson { id, output })
            }
            Task::FleetCurve {
                fleet,
                routers,
                rate,
            } => crate::fleet::curve_points(fleet, p, *rate, routers, &mut || out.tick())
                .map(|points| Reply::FleetPoints { id, points }),
            Task::FleetDetail { fleet } => {
                crate::fleet::detail(fleet, p).map(|detail| Reply::FleetDetail { id, detail })
            }
            Task::FleetModel { fleet, rates } => Ok(Reply::FleetModel {
                id,
                model: crate::fleet::model(fleet, p, rates),
            }),
            Task::Plan {
                plan,
                screen,
                ranks,
                splits,
            } => crate::plan::work::share(plan, p, *screen, ranks, *splits, &mut |r| match r {
                Some(r) => (out.send)(Reply::plan(id, r)),
                None => out.tick(),
            })
            .map(|r| Reply::plan(id, r)),
            Task::Watch {
                requests,
                seed,
                replicas,
                router,
            } => crate::watch::record_run(p, *requests, *seed, *replicas, *router).map(|tape| {
                Reply::Watch {
                    id,
                    tape: Box::new(tape),
                }
            }),
        };
        if matches!(
            task,
            Task::Detail { .. }
                | Task::Models { .. }
                | Task::Lesson { .. }
                | Task::Watch { .. }
                | Task::FleetDetail { .. }
                | Task::FleetModel { .. }
        ) {
            out.tick();
        }
        match result {
            Ok(r) => (out.send)(r),
            Err(message) => {
                (out.send)(Reply::Error { id, message });
                return;
            }
        }
    }
    out.flush();
    (out.send)(Reply::Done { id });
}

/// Progress replies are sent at most this often [ms]: every message costs the page's main
/// thread a parse and a re-render, and on a 2-core machine that time is taken from the
/// workers (one per run made the 800-run grid's 800 messages compete with the sweep).
pub const PROGRESS_EVERY_MS: f64 = 50.0;

/// Where a job's replies go, with its count of finished runs for progress.
struct Progress<'a> {
    id: u64,
    done: u32,
    /// The count last sent, and when [ms].
    sent: u32,
    last_ms: f64,
    send: &'a mut dyn FnMut(Reply),
}

impl Progress<'_> {
    /// One more run finished: reported if [`PROGRESS_EVERY_MS`] have passed since the
    /// last report.
    fn tick(&mut self) {
        self.done += 1;
        if clock_ms() - self.last_ms >= PROGRESS_EVERY_MS {
            self.flush();
        }
    }

    /// Reports the count now if it changed since the last report.
    fn flush(&mut self) {
        if self.done != self.sent {
            self.sent = self.done;
            self.last_ms = clock_ms();
            (self.send)(Reply::Progress {
                id: self.id,
                done: self.done,
            });
        }
    }
}

/// Each seed's requests for the last workload simulated: consecutive points with the same
/// workload (the grid's B × K at one rate) reuse them instead of regenerating (common
/// random numbers, as the native sweep does; results are identical). With them, each
/// seed's simulated runs, so a point that one of them provably stands for
/// ([`StandIns`]: B or K never binding, reserve mode) reuses its summary.
#[derive(Default)]
struct Streams {
    key: Option<(Workload, f64)>,
    by_seed: Vec<Vec<Request>>,
    runs: Vec<StandIns<(Summary, Option<PrefixSummary>)>>,
}

impl Streams {
    fn get(&mut self, cfg: &SimConfig, seed: u64) -> Result<&[Request], String> {
        let same = self
            .key
            .as_ref()
            .is_some_and(|(w, h)| *w == cfg.workload && *h == cfg.horizon_s);
        if !same {
            self.key = Some((cfg.workload.clone(), cfg.horizon_s));
            self.by_seed.clear();
            self.runs.clear();
        }
        let i = seed as usize;
        while self.by_seed.len() <= i {
            let s = self.by_seed.len() as u64;
            let reqs = cfg
                .workload
                .generate(s, cfg.horizon_s)
                .map_err(|e| e.to_string())?;
            self.by_seed.push(reqs);
            self.runs.push(StandIns::default());
        }
        Ok(&self.by_seed[i])
    }

    /// `cfg` run on its seed's requests, or the summary of a run that stands for it
    /// (within a job only B, K and the rate vary, and the rate is in the workload).
    fn simulate(
        &mut self,
        cfg: &SimConfig,
        seed: u64,
    ) -> Result<(Summary, Option<PrefixSummary>), String> {
        self.get(cfg, seed)?;
        let i = seed as usize;
        if let Some(run) = self.runs[i].find(&cfg.server) {
            return Ok(run.clone());
        }
        let rep = simulate_requests(cfg, self.by_seed[i].iter().copied());
        let run = (rep.summary, rep.stats.prefix.clone());
        self.runs[i].push(cfg.server.clone(), rep.stats, run.clone());
        Ok(run)
    }
}

/// Every seed at one rate: at the job's own (B, K), or at a grid point's, which the reply
/// then names.
fn curve_point(
    p: &Params,
    rate: f64,
    grid: Option<(u32, u64)>,
    streams: &mut Streams,
    out: &mut Progress<'_>,
) -> Result<Reply, String> {
    let (max_batch, kv_tokens) = grid.unwrap_or((p.max_batch, p.kv_tokens));
    let mut summaries = Vec::with_capacity(p.seeds as usize);
    let mut prefixes = Vec::with_capacity(p.seeds as usize);
    for seed in 0..p.seeds as u64 {
        let mut cfg = p.sim_config(rate, seed);
        cfg.server.max_batch = max_batch;
        cfg.server.kv_tokens = kv_tokens;
        p.resolve_admission(&mut cfg);
        cfg.validate().map_err(|e| e.to_string())?;
        if seed == 0 {
            held_in_memory(p.seeds, &cfg)?;
        }
        let (summary, prefix) = streams.simulate(&cfg, seed)?;
        summaries.push(summary);
        prefixes.push(prefix);
        out.tick();
    }
    Ok(Reply::Point {
        id: out.id,
        grid,
        point: CurvePoint::from_runs(rate, &summaries, &prefixes),
    })
}

/// Checks that `seeds` runs of `cfg`'s workload fit in the worker's memory: [`Streams`]
/// keeps every seed's requests for a rate, so the page's sweep limit
/// ([`Limits::max_requests_per_sweep`]) bounds them ([`Params::check`] says so first).
fn held_in_memory(seeds: u32, cfg: &SimConfig) -> Result<(), String> {
    let held = seeds as f64 * cfg.expected_requests();
    let limit = Limits::default().max_requests_per_sweep;
    if held <= limit {
        Ok(())
    } else {
        Err(format!(
            "{seeds} seeds would hold ≈ {held:.1e} requests in memory, over the limit of {limit:.1e} (max_requests_per_sweep)"
        ))
    }
}

fn detail(p: &Params, rate: f64) -> Result<Detail, String> {
    let mut cfg = p.sim_config(rate, 0);
    cfg.keep_records = true;
    // enough samples that the "Over time" view's shortest window (5 %) still has 150
    cfg.timeseries_points = crate::params::DETAIL_POINTS;
    let rep = simulate(&cfg).map_err(|e| e.to_string())?;
    let ttft = rep
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter_map(|r| r.ttft())
        .collect();
    let series = rep
        .timeseries
        .iter()
        .map(|t| StatePoint {
            t: t.t_s,
            waiting: t.waiting as f64,
            running: t.running as f64,
            kv_used: t.kv_used_tokens as f64,
            kv_cached: t.kv_cached_tokens as f64,
        })
        .collect();
    let spans = rep
        .records
        .iter()
        .take(TIMELINE_REQUESTS)
        .map(Span::of)
        .collect();
    Ok(Detail {
        rate,
        ttft,
        series,
        spans,
        first_token_after_decode: p.reference_rules,
        kv_capacity: p.kv_tokens as f64,
        prefix: rep.stats.prefix.clone().map(Box::new),
    })
}

/// Milliseconds on a monotonic clock (performance.now in a worker, Instant natively).
fn clock_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
            * 1e3
    }
}

/// A model whose single evaluation takes longer than this is left out of the live page
/// (its curve would hold up the sweep) [ms].
pub const MODEL_BUDGET_MS: f64 = 150.0;

fn models(p: &Params, rates: &[f64]) -> Models {
    let mut out = Models::default();
    let base = p.sim_config(p.rate, 0);
    let mut fast = Vec::new();
    for kind in ModelKind::ALL {
        let mut pts = Vec::with_capacity(rates.len());
        let mut failure = None;
        for &r in rates {
            let cfg = p.sim_config(r, 0);
            let t0 = clock_ms();
            let mut got = predict(kind, &cfg);
            let mut dt = clock_ms() - t0;
            if dt > MODEL_BUDGET_MS {
                // Once more before judging: a first call can pay one-off costs (the browser
                // compiling the model's code, a garbage collection in the page), which made
                // a 1 µs model "too slow" on some page loads and not on others.
                let t1 = clock_ms();
                got = predict(kind, &cfg);
                dt = clock_ms() - t1;
            }
            match got {
                Ok(Prediction::Stable(m)) if m.is_finite() => pts.push((r, Some(m))),
                Ok(Prediction::Stable(_)) => {
                    failure = Some(format!("no finite prediction at λ = {r}"));
                    break;
                }
                Ok(Prediction::Unstable { .. }) => pts.push((r, None)),
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
            if dt > MODEL_BUDGET_MS {
                failure = Some(format!(
                    "an evaluation took {dt:.0} ms (twice over {MODEL_BUDGET_MS:.0} ms), too slow for the live page"
                ));
                break;
            }
        }
        match failure {
            Some(e) => out.skipped.push((kind.label().to_string(), e)),
            None => {
                fast.push(kind);
                out.curves.push(ModelResult { kind, points: pts });
            }
        }
    }
    if !p.prefix_cache.is_off() {
        let che: Result<Vec<_>, _> = rates
            .iter()
            .map(|&r| predict_prefix_cache(&p.sim_config(r, 0)).map(|x| (r, x)))
            .collect();
        match che {
            Ok(v) => out.che = v,
            Err(e) => out.skipped.push((CHE.to_string(), e.to_string())),
        }
    }
    out.bounds = capacity_bounds(&base).ok();
    // SLO capacity by the best model that is fast enough: the batching model, else the reference chain.
    let cap_model = [
        ModelKind::Batching,
        ModelKind::ReferenceChain,
        ModelKind::ReferenceMmc,
    ]
    .into_iter()
    .find(|k| fast.contains(k));
    if let Some(k) = cap_model {
        out.slo_capacity = slo_capacity(k, &base, SLO_TARGET)
            .ok()
            .map(|c| (k.label().to_string(), c.rate_rps));
        out.utilisation = predict(k, &base)
            .ok()
            .and_then(|x| x.metrics().map(|m| m.utilisation));
    }
    out
}

/// Splits tasks into `n` shares by the Prouhet–Thue–Morse sequence: task `i` goes to share
/// (sum of the base-`n` digits of `i`) mod `n`. For tasks whose cost changes smoothly
/// along the list (rates, then B, then K) this is the classic fair division: on the
/// reference grid the two shares get every (rate, K) pair equally often, where plain
/// interleaving (`i mod n`) gave one worker both K = 16384 and 4096 and the other 8192 and
/// 2048 — 4 % more simulation time on one side, measured natively.
pub fn shard(tasks: Vec<Task>, n: usize) -> Vec<Vec<Task>> {
    let n = n.max(1);
    let mut out = vec![Vec::new(); n];
    for (i, t) in tasks.into_iter().enumerate() {
        out[thue_morse(i, n)].push(t);
    }
    out
}

/// The generalised Thue–Morse sequence: the digit sum of `i` in base `n`, mod `n`.
fn thue_morse(mut i: usize, n: usize) -> usize {
    if n < 2 {
        return 0;
    }
    let mut sum = 0;
    while i > 0 {
        sum += i % n;
        i /= n;
    }
    sum % n
}

/// The reference study's default grid: 8 rates × 5 B × 4 K.
pub fn reference_grid() -> Vec<Task> {
    let mut v = Vec::new();
    for rate in [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0] {
        for max_batch in [1, 2, 4, 8, 16] {
            for kv_tokens in [2048, 4096, 8192, 16384] {
                v.push(Task::Grid {
                    rate,
                    max_batch,
                    kv_tokens,
                });
            }
        }
    }
    v
}

/// The reference grid at a 100th of its horizon (10 s instead of 1000 s): run once by each
/// worker when it first falls idle (see `src/bin/worker.rs`), so that the browser has
/// optimised the code the grid makes hot before the page's first grid run. V8 runs
/// WebAssembly first from a quick baseline compile and recompiles a function in the
/// background once it has run enough; code that runs once per simulation (setup,
/// summaries, percentiles, replies) only gets there after hundreds of runs, so without
/// this the page's first grid paid ≈ 0.1 s of CPU for those recompilations (measured
/// with `e2e/grid_trace.mjs`) and ran slower baseline code until they were done. What
/// counts is the number of runs, not their length.
pub fn warm_up_job() -> Job {
    Job {
        id: 0,
        params: Params {
            horizon_s: Params::default().horizon_s / 100.0,
            ..Params::default()
        },
        tasks: reference_grid(),
    }
}

/// The chosen metric as predicted by each model, as chart curves (models that do not
/// predict this metric are left out).
pub fn model_curves(models: &Models, m: crate::metric::Metric) -> Vec<crate::curves::ModelCurve> {
    use crate::metric::Metric as M;
    let pick = |x: &Predicted, rate: f64| -> Option<f64> {
        match m {
            M::MeanTtft => Some(x.ttft_mean_s),
            M::P50Ttft => Some(x.ttft_p50_s),
            M::P95Ttft => Some(x.ttft_p95_s),
            M::P99Ttft => Some(x.ttft_p99_s),
            M::MeanTpot => Some(x.tpot_mean_s),
            M::Goodput => Some(x.goodput_rps),
            M::SloGoodput => Some(x.slo_attainment * rate),
            M::Blocking => Some(x.blocking),
            M::P99Tpot | M::MeanE2e | M::Preemptions => None,
            M::PrefixHitRate | M::PrefixBlockHitRate => None,
        }
    };
    if m.is_prefix() {
        return models.che_curve(m).into_iter().collect();
    }
    if matches!(m, M::P99Tpot | M::MeanE2e | M::Preemptions) {
        return Vec::new();
    }
    models
        .curves
        .iter()
        .map(|c| crate::curves::ModelCurve {
            name: c.kind.label().to_string(),
            slot: ModelKind::ALL
                .iter()
                .position(|k| *k == c.kind)
                .unwrap_or(0),
            points: c
                .points
                .iter()
                .map(|(r, x)| {
                    (
                        *r,
                        x.as_ref()
                            .and_then(|x| pick(x, *r))
                            .filter(|v| v.is_finite()),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Rates at which the models are drawn: `n` even steps up to the top swept rate.
pub fn model_rates(rates: &[f64], n: usize) -> Vec<f64> {
    let top = rates.iter().copied().fold(0.0, f64::max);
    (1..=n).map(|i| top * i as f64 / n as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Metric;

    #[test]
    fn grid_points_that_reuse_a_run_equal_their_own_simulation() {
        // The grid at a tenth of its horizon, one worker's share: reused runs must give
        // exactly what simulating the point gives.
        let job = Job {
            params: Params {
                horizon_s: Params::default().horizon_s / 10.0,
                ..Params::default()
            },
            ..warm_up_job()
        };
        let p = &job.params;
        let mut checked = 0;
        for share in shard(job.tasks.clone(), 2) {
            let part = Job {
                tasks: share,
                ..job.clone()
            };
            run(&part, &mut |r| {
                if let Reply::Point {
                    grid: Some((b, k)),
                    point,
                    ..
                } = r
                {
                    let own: Vec<Summary> = (0..p.seeds as u64)
                        .map(|seed| {
                            let mut cfg = p.sim_config(point.rate, seed);
                            cfg.server.max_batch = b;
                            cfg.server.kv_tokens = k;
                            p.resolve_admission(&mut cfg);
                            simulate(&cfg).unwrap().summary
                        })
                        .collect();
                    assert_eq!(
                        point,
                        CurvePoint::from_summaries(point.rate, &own),
                        "B {b} K {k}"
                    );
                    checked += 1;
                }
            });
        }
        assert_eq!(checked, 160);
    }

    #[test]
    fn the_warm_up_job_is_the_grid_at_a_hundredth_of_its_horizon() {
        let job = warm_up_job();
        assert!(job.params.validate().is_ok());
        assert!(job.tasks.iter().all(|t| matches!(t, Task::Grid { .. })));
        let mut points = 0;
        let mut done = false;
        run(&job, &mut |r| match r {
            Reply::Point { grid: Some(_), .. } => points += 1,
            Reply::Done { .. } => done = true,
            Reply::Error { message, .. } => panic!("{message}"),
            _ => {}
        });
        assert_eq!(points, job.tasks.len());
        assert!(done);
        let runs: u32 = job.tasks.iter().map(|t| t.runs(job.params.seeds)).sum();
        assert_eq!(runs, 800);
        assert!(job.params.horizon_s * 100.0 <= Params::default().horizon_s);
    }

    #[test]
    fn a_prefix_cache_job_gives_hit_rates_the_caches_occupancy_and_che() {
        use crate::metric::Metric;
        let (params, errs) = Params::from_query(
            "kv=paged&block=16&K=16384&pc=apc&sp=1&spg=4&sps=0.8&spt=256&len=fixed&fp=128&fo=64\
             &rates=1,2&rate=2&T=200&seeds=2&refrules=0",
        );
        assert!(errs.is_empty(), "{errs:?}");
        params.validate().unwrap();
        let job = Job {
            id: 3,
            params,
            tasks: vec![
                Task::Curve { rate: 2.0 },
                Task::Detail { rate: 2.0 },
                Task::Models {
                    rates: vec![1.0, 2.0],
                },
            ],
        };
        let (mut point, mut detail, mut models) = (None, None, None);
        run(&job, &mut |r| match r {
            Reply::Point { point: p, .. } => point = Some(p),
            Reply::Detail { detail: d, .. } => detail = Some(d),
            Reply::Models { models: m, .. } => models = Some(m),
            Reply::Error { message, .. } => panic!("{message}"),
            _ => {}
        });
        let point = point.unwrap();
        let hit = point.get(Metric::PrefixHitRate);
        assert_eq!(hit.n, 2);
        // 80 % of prompts carry 256 of their 384 tokens from one of 4 groups, the others
        // 128 of their own: every system prompt hitting is 204.8 / 332.8 = 0.615 of them.
        let h = hit.mean.unwrap();
        assert!((0.4..=0.616).contains(&h), "{h}");
        assert!(point.get(Metric::PrefixBlockHitRate).mean.unwrap() > 0.3);
        let detail = detail.unwrap();
        let pre = detail.prefix.unwrap();
        assert!(pre.saved_tokens > 0 && pre.ttft_hit.n > 0 && pre.ttft_miss.n > 0);
        assert!(detail.series.iter().any(|s| s.kv_cached > 0.0));
        let che = models.unwrap().che_curve(Metric::PrefixHitRate).unwrap();
        assert_eq!(che.points.len(), 2);
        let at2 = che.points[1].1.unwrap();
        assert!(
            (at2 - h).abs() < 0.1,
            "Che {at2} against the simulation's {h}"
        );
        // With the cache off the metric has no value, and no model line.
        let mut off = job.params.clone();
        off.prefix_cache = engine::config::PrefixCache::Off;
        let mut none = None;
        run(
            &Job {
                id: 4,
                params: off,
                tasks: vec![Task::Curve { rate: 2.0 }],
            },
            &mut |r| {
                if let Reply::Point { point, .. } = r {
                    none = Some(point.get(Metric::PrefixHitRate).n);
                }
            },
        );
        assert_eq!(none, Some(0));
    }

    #[test]
    fn a_small_job_replies_with_points_detail_models_and_done() {
        let params = Params {
            horizon_s: 100.0,
            seeds: 2,
            ..Params::default()
        };
        let job = Job {
            id: 7,
            params,
            tasks: vec![
                Task::Curve { rate: 1.0 },
                Task::Curve { rate: 6.0 },
                Task::Detail { rate: 2.0 },
                Task::Models {
                    rates: vec![1.0, 6.0],
                },
            ],
        };
        let mut replies = Vec::new();
        run(&job, &mut |r| replies.push(r));
        let points: Vec<&CurvePoint> = replies
            .iter()
            .filter_map(|r| {
                if let Reply::Point { point, .. } = r {
                    Some(point)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(points.len(), 2);
        let (lo, hi) = (
            points[0].get(Metric::P99Ttft),
            points[1].get(Metric::P99Ttft),
        );
        assert_eq!(lo.n, 2);
        assert!(
            hi.mean.unwrap() > lo.mean.unwrap(),
            "p99 TTFT grows with load"
        );
        assert!(replies.iter().any(|r| matches!(r, Reply::Detail { detail, .. } if !detail.ttft.is_empty() && !detail.spans.is_empty())));
        assert!(replies.iter().any(|r| matches!(r, Reply::Models { .. })));
        assert_eq!(replies.last(), Some(&Reply::Done { id: 7 }));
        // Progress is throttled, but counts only grow and the final one is always sent.
        let counts: Vec<u32> = replies
            .iter()
            .filter_map(|r| match r {
                Reply::Progress { done, .. } => Some(*done),
                _ => None,
            })
            .collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
        assert_eq!(counts.last(), Some(&6));
        // Replies survive the JSON trip to the page.
        for r in &replies {
            let s = serde_json::to_string(r).unwrap();
            let back = serde_json::from_str::<Reply>(&s).unwrap();
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(r));
        }
    }

    #[test]
    fn bad_parameters_come_back_as_an_error() {
        let job = Job {
            id: 1,
            params: Params {
                max_batch: 0,
                ..Params::default()
            },
            tasks: vec![Task::Curve { rate: 1.0 }],
        };
        let mut replies = Vec::new();
        run(&job, &mut |r| replies.push(r));
        assert!(
            matches!(&replies[0], Reply::Error { message, .. } if message.contains("max_batch"))
        );
    }

    #[test]
    fn a_sweep_too_big_for_the_workers_memory_comes_back_as_an_error() {
        // 40 seeds × 4e6 requests: each run is within the engine's limit, the seeds the
        // worker keeps at one rate are not.
        let job = Job {
            id: 2,
            params: Params {
                seeds: 40,
                horizon_s: 1e5,
                ..Params::default()
            },
            tasks: vec![Task::Curve { rate: 40.0 }],
        };
        assert!(job.params.sim_config(40.0, 0).validate().is_ok());
        let mut replies = Vec::new();
        run(&job, &mut |r| replies.push(r));
        assert!(
            matches!(&replies[..], [Reply::Error { id: 2, message }] if message.contains("max_requests_per_sweep")),
            "{replies:?}"
        );
    }

    #[test]
    fn a_lesson_job_replies_with_its_output() {
        let job = Job {
            id: 3,
            params: Params::default(),
            tasks: vec![Task::Lesson {
                state: LessonState::new(crate::learn::Lesson::HeadOfLine),
            }],
        };
        let mut replies = Vec::new();
        run(&job, &mut |r| replies.push(r));
        let out = replies
            .iter()
            .find_map(|r| match r {
                Reply::Lesson { id: 3, output } => Some(output.clone()),
                _ => None,
            })
            .expect("a lesson reply");
        assert_eq!(out.lesson, crate::learn::Lesson::HeadOfLine);
        assert!(!out.panels.is_empty() && !out.readings.is_empty());
        let text = serde_json::to_string(&Reply::Lesson {
            id: 3,
            output: out.clone(),
        })
        .unwrap();
        let Reply::Lesson { output: back, .. } = serde_json::from_str(&text).unwrap() else {
            panic!("not a lesson reply");
        };
        assert_eq!(back.readings, out.readings, "survives the JSON trip");
        assert_eq!(back.panels.len(), out.panels.len());
        assert_eq!(replies.last(), Some(&Reply::Done { id: 3 }));
    }

    #[test]
    fn detail_spans_have_three_phases() {
        let params = Params {
            horizon_s: 60.0,
            reference_rules: false,
            ..Params::default()
        };
        let d = detail(&params, 6.0).unwrap();
        assert!(!d.first_token_after_decode);
        let admitted: Vec<&Span> = d.spans.iter().filter(|s| !s.rejected).collect();
        assert!(!admitted.is_empty());
        for s in admitted {
            let (a, f) = (s.admitted.unwrap(), s.first_token.unwrap());
            assert!(s.arrival <= a && a < f && f <= s.finish.unwrap(), "{s:?}");
        }
        assert!(
            d.spans
                .iter()
                .any(|s| s.admitted.unwrap_or(0.0) > s.arrival),
            "someone waited at λ = 6"
        );
    }

    #[test]
    fn shards_are_fair() {
        assert_eq!(
            (0..8).map(|i| thue_morse(i, 2)).collect::<Vec<_>>(),
            [0, 1, 1, 0, 1, 0, 0, 1]
        );
        let s = shard(reference_grid(), 2);
        assert_eq!((s[0].len(), s[1].len()), (80, 80));
        // Every (rate, K) pair equally often on each side.
        let count = |share: &[Task], r: f64, k: u64| {
            share
                .iter()
                .filter(|t| {
                    matches!(t, Task::Grid { rate, kv_tokens, .. } if *rate == r && *kv_tokens == k)
                })
                .count()
        };
        for r in [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0] {
            for k in [2048, 4096, 8192, 16384] {
                let (a, b) = (count(&s[0], r, k), count(&s[1], r, k));
                assert!(a.abs_diff(b) <= 1, "rate {r} K {k}: {a} vs {b}");
            }
        }
        for n in [1, 3, 4] {
            let s = shard(reference_grid(), n);
            assert_eq!(s.iter().map(Vec::len).sum::<usize>(), 160);
            assert!(s.iter().all(|x| x.len().abs_diff(160 / n) <= 2), "n = {n}");
        }
    }
}
