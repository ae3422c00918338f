//! `bench-native compare`: the simulator against every analytical model on a grid, as an
//! error table (markdown + CSV) and a per-configuration CSV.
//!
//! # Errors reported (`docs/model.md`, Metrics)
//! * TTFT (mean, p50, p95, p99) and goodput (a): relative error `|a − s| / |s|`, averaged
//!   over the configurations the model predicted (MRE). The simulated value is the mean of
//!   the per-seed metrics, as in the reference sweep.
//! * Goodput is also reported against the *arrival-normalised* simulated goodput
//!   (each seed's goodput × λ·window / realised arrivals): a control variate that removes
//!   the Poisson noise of the arrival count, which the model cannot predict. Both columns
//!   are printed; neither replaces the other.
//! * Blocking: mean absolute error over configurations (MAE), and in the per-config CSV a
//!   relative error where the simulated blocking is ≥ 1 % and an absolute error below.
//! * The yardstick's own noise (`--noise-floor SEEDS`): the simulator's mean over other
//!   seeds is scored like a model, row `simulator`. It predicts the expectation without any
//!   model error, so its errors are what the yardstick's finite seeds alone cost any model.
//! * An error is never forced to zero: a config whose simulated value is missing (no
//!   completions) has no error for that metric and is counted as such; an unstable or
//!   unsupported prediction is counted per model, never silently dropped.

use crate::args::limits::{self, Scope};
use crate::args::{self, GridArgs, GridDefaults, ModelArgs, Seeds};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use engine::analytic::{predict, AnalyticError, ModelKind, Predicted, Prediction};
use engine::fleet::RouterKind;
use engine::sweep::{SweepPoint, SweepSpec};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub mod fleet;

/// Simulated blocking below this is compared with an absolute error (`docs/model.md`,
/// Metrics).
pub const BLOCKING_ABS_BELOW: f64 = 0.01;

/// An analytical model on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelArg {
    ReferenceMmc,
    ReferenceChain,
    ReferenceCtmc,
    /// The batching model (`ours` is accepted as its former name).
    #[value(alias = "ours")]
    Batching,
}

impl From<ModelArg> for ModelKind {
    fn from(m: ModelArg) -> ModelKind {
        match m {
            ModelArg::ReferenceMmc => ModelKind::ReferenceMmc,
            ModelArg::ReferenceChain => ModelKind::ReferenceChain,
            ModelArg::ReferenceCtmc => ModelKind::ReferenceCtmc,
            ModelArg::Batching => ModelKind::Batching,
        }
    }
}

/// Arguments of `compare`.
#[derive(Debug, Args)]
#[command(
    after_help = "With no flags: the 48-config comparison grid in reference mode (λ 0.5,1,2,3 × B 1,4,8 ×\n\
K 2048,4096,8192,16384 × seeds 0-4 × 1000 s) against every analytical model; writes\n\
results/compare/compare.md, compare.csv (per model) and compare_configs.csv (per config).\n\n\
Examples:\n  \
    bench-native compare\n  \
    bench-native compare --name reference_grid --noise-floor 5-204   # + the 5-seed yardstick's own noise\n  \
    bench-native compare --rates 1,3 --batches 8 --kv 4096 --seeds 0 --horizon 200 --out /tmp/cmp\n  \
    bench-native compare --models batching,reference-chain --rates 0.5,1,2,3\n  \
    bench-native compare --preset vllm --kv-mode paged --rates 1,2,4,8 --batches 16,64 --kv 16384,65536 --name sharegpt_paged\n  \
    bench-native compare --fleet --horizon 100   # fleet models vs the fleet simulator → results/fleet/fleet.md"
)]
pub struct CompareArgs {
    #[command(flatten)]
    pub grid: GridArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Analytical models to evaluate (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub models: Vec<ModelArg>,
    /// Output directory.
    #[arg(long, default_value = "results/compare")]
    pub out: PathBuf,
    /// Stem of the output files: <name>.md, <name>.csv, <name>_configs.csv.
    #[arg(long, default_value = "compare")]
    pub name: String,
    /// Worker threads for the simulations (0 = all cores; 1 = single-threaded).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Also score the simulator's own mean over these seeds (disjoint from --seeds, e.g.
    /// `5-204`) as if it were a model: the row `simulator` is the error a perfect model
    /// of the expectation makes against this yardstick, i.e. the yardstick's noise floor.
    #[arg(long, value_name = "SEEDS", value_parser = Seeds::parse)]
    pub noise_floor: Option<Seeds>,
    /// Score the fleet models (`predict_fleet`, batching model per replica) against the
    /// fleet simulator instead, on --fleet-replicas × --fleet-routers × --fleet-loads with
    /// one server (--batches, --kv; default B 8, K 8192) and --seeds (default 0-199).
    #[arg(long)]
    pub fleet: bool,
    /// Replica counts of the fleet grid.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    pub fleet_replicas: Vec<u32>,
    /// Routers of the fleet grid (round_robin, random, least_outstanding, least_tokens,
    /// power_of_D, kv_aware).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = parse_router,
        default_value = "round_robin,random,least_outstanding,least_tokens,power_of_2,kv_aware"
    )]
    pub fleet_routers: Vec<RouterKind>,
    /// Loads of the fleet grid, as fractions of the fleet's capacity.
    #[arg(long, value_delimiter = ',', default_value = "0.3,0.6,0.9")]
    pub fleet_loads: Vec<f64>,
}

fn parse_router(s: &str) -> Result<RouterKind, String> {
    RouterKind::parse(s).ok_or_else(|| {
        format!(
            "unknown router {s:?}: use round_robin, random, least_outstanding, least_tokens, \
             power_of_D (e.g. power_of_2) or kv_aware"
        )
    })
}

/// `compare --fleet`'s default server and seeds (one server; the rate is set per load).
pub const FLEET_GRID: GridDefaults = GridDefaults {
    rates: &[1.0],
    batches: &[8],
    kv: &[8192],
    seeds: (0, 199),
};

/// `compare`'s default grid: 48 configurations of the reference study's.
pub const DEFAULT_GRID: GridDefaults = GridDefaults {
    rates: &[0.5, 1.0, 2.0, 3.0],
    batches: &[1, 4, 8],
    kv: &[2048, 4096, 8192, 16384],
    seeds: (0, 4),
};

/// Metrics compared, in column order.
pub const METRICS: [&str; 6] = [
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "goodput_rps",
    "blocking",
];

/// The simulator's seed-averaged values at one grid point (`None`: no seed had a value).
#[derive(Clone, Debug, PartialEq)]
pub struct SimValues {
    pub values: [Option<f64>; 6],
    /// Goodput with each seed rescaled to the expected arrival count [req/s].
    pub goodput_normalised: Option<f64>,
    pub arrivals: u64,
}

impl SimValues {
    fn of(p: &SweepPoint) -> SimValues {
        let a = p.aggregate();
        let window_rate: Vec<f64> = p
            .summaries
            .iter()
            .filter(|s| s.arrivals > 0)
            .map(|s| s.throughput_rps * p.rate * s.window_s / s.arrivals as f64)
            .collect();
        SimValues {
            values: [
                a.mean_ttft.mean,
                a.p50_ttft.mean,
                a.p95_ttft.mean,
                a.p99_ttft.mean,
                a.goodput.mean,
                a.blocking.mean,
            ],
            goodput_normalised: (!window_rate.is_empty())
                .then(|| window_rate.iter().sum::<f64>() / window_rate.len() as f64),
            arrivals: p.summaries.iter().map(|s| s.arrivals).sum(),
        }
    }
}

/// Who predicts: an analytical model, or the simulator's mean over other seeds.
#[derive(Clone, Debug, PartialEq)]
pub enum Predictor {
    Model(ModelKind),
    /// The simulator averaged over other seeds (`--noise-floor`; the markdown names them).
    Simulator,
}

impl Predictor {
    /// Row name in the tables.
    pub fn name(&self) -> &'static str {
        match self {
            Predictor::Model(k) => k.as_str(),
            Predictor::Simulator => "simulator",
        }
    }
}

/// What one predictor said at one grid point.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Values in [`METRICS`] order (`None`: the predictor has no value for that metric).
    Predicted([Option<f64>; 6]),
    Unstable {
        rho: f64,
    },
    Unsupported(String),
}

impl Outcome {
    fn status(&self) -> &'static str {
        match self {
            Outcome::Predicted(_) => "predicted",
            Outcome::Unstable { .. } => "unstable",
            Outcome::Unsupported(_) => "unsupported",
        }
    }
}

fn model_values(m: &Predicted) -> [Option<f64>; 6] {
    [
        m.ttft_mean_s,
        m.ttft_p50_s,
        m.ttft_p95_s,
        m.ttft_p99_s,
        m.goodput_rps,
        m.blocking,
    ]
    .map(Some)
}

/// Error of `a` against the simulated `s` for metric index `j`, and whether it is
/// relative. Blocking below [`BLOCKING_ABS_BELOW`] and any |s| below 1e-9 are absolute.
pub fn error(j: usize, a: f64, s: f64) -> (f64, bool) {
    let near_zero = if METRICS[j] == "blocking" {
        s.abs() < BLOCKING_ABS_BELOW
    } else {
        s.abs() < 1e-9
    };
    if near_zero {
        ((a - s).abs(), false)
    } else {
        ((a - s).abs() / s.abs(), true)
    }
}

/// One grid point: simulator values and every model's outcome and time.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigRow {
    pub rate: f64,
    pub max_batch: u32,
    pub kv_tokens: u64,
    pub sim: SimValues,
    /// (predictor, outcome, seconds per evaluation).
    pub models: Vec<(Predictor, Outcome, f64)>,
}

/// Per-model error summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelSummary {
    pub model: Option<Predictor>,
    pub predicted: usize,
    pub unstable: usize,
    pub unsupported: usize,
    /// MRE of mean/p50/p95/p99 TTFT and goodput (index as [`METRICS`] 0..5) and the number
    /// of configurations each averages over.
    pub mre: [Option<f64>; 5],
    pub mre_n: [usize; 5],
    /// MRE of goodput against the arrival-normalised simulated goodput.
    pub goodput_normalised_mre: Option<f64>,
    pub blocking_mae: Option<f64>,
    /// Worst relative error of p99 TTFT.
    pub p99_max_re: Option<f64>,
    /// Mean and worst time per configuration [s].
    pub time_mean_s: f64,
    pub time_max_s: f64,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Summarises every predictor over the rows (each row lists the same predictors).
pub fn summarise(rows: &[ConfigRow]) -> Vec<ModelSummary> {
    let predictors = rows.first().map_or(&[][..], |r| &r.models[..]);
    predictors
        .iter()
        .enumerate()
        .map(|(i, (who, _, _))| {
            let mut s = ModelSummary {
                model: Some(who.clone()),
                ..ModelSummary::default()
            };
            let mut errs: [Vec<f64>; 5] = Default::default();
            let (mut gn, mut blk, mut times) = (Vec::new(), Vec::new(), Vec::new());
            for r in rows {
                let (_, out, t) = &r.models[i];
                times.push(*t);
                match out {
                    Outcome::Predicted(m) => {
                        s.predicted += 1;
                        let a = *m;
                        for (j, e) in errs.iter_mut().enumerate() {
                            if let (Some(aj), Some(sv)) = (a[j], r.sim.values[j]) {
                                e.push(error(j, aj, sv).0);
                            }
                        }
                        if let (Some(a4), Some(g)) = (a[4], r.sim.goodput_normalised) {
                            gn.push(error(4, a4, g).0);
                        }
                        if let (Some(a5), Some(b)) = (a[5], r.sim.values[5]) {
                            blk.push((a5 - b).abs());
                        }
                    }
                    Outcome::Unstable { .. } => s.unstable += 1,
                    Outcome::Unsupported(_) => s.unsupported += 1,
                }
            }
            for (j, e) in errs.iter().enumerate() {
                s.mre[j] = mean(e);
                s.mre_n[j] = e.len();
            }
            s.p99_max_re = errs[3].iter().copied().reduce(f64::max);
            s.goodput_normalised_mre = mean(&gn);
            s.blocking_mae = mean(&blk);
            s.time_mean_s = mean(&times).unwrap_or(0.0);
            s.time_max_s = times.iter().copied().fold(0.0, f64::max);
            s
        })
        .collect()
}

/// Times `predict` (repeating fast models so the clock resolves them) [s per call].
fn timed_predict(kind: ModelKind, cfg: &engine::SimConfig) -> (Outcome, f64) {
    let eval = || match predict(kind, cfg) {
        Ok(Prediction::Stable(m)) => Outcome::Predicted(model_values(&m)),
        Ok(Prediction::Unstable { rho }) => Outcome::Unstable { rho },
        Err(e @ AnalyticError::Unsupported { .. }) => Outcome::Unsupported(e.to_string()),
        Err(e) => Outcome::Unsupported(format!("error: {e}")),
    };
    let t = Instant::now();
    let out = eval();
    let mut elapsed = t.elapsed().as_secs_f64();
    if elapsed < 2e-3 {
        let reps = ((2e-3 / elapsed.max(1e-7)) as usize).clamp(1, 200);
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(eval());
        }
        elapsed = t.elapsed().as_secs_f64() / reps as f64;
    }
    (out, elapsed)
}

/// Evaluates every model at every simulated grid point; with `noise` (the same grid
/// simulated on other seeds, and the simulation time per configuration), the simulator's
/// mean there is scored too, as the last predictor.
pub fn evaluate(
    spec: &SweepSpec,
    points: &[SweepPoint],
    models: &[ModelKind],
    noise: Option<(&[SweepPoint], f64)>,
) -> Vec<ConfigRow> {
    points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let cfg = spec.config(p.rate, p.max_batch, p.kv_tokens, spec.seeds[0]);
            let mut models: Vec<(Predictor, Outcome, f64)> = models
                .iter()
                .map(|&k| {
                    let (o, t) = timed_predict(k, &cfg);
                    (Predictor::Model(k), o, t)
                })
                .collect();
            if let Some((other, secs)) = noise {
                let q = &other[i];
                debug_assert!(
                    (q.rate, q.max_batch, q.kv_tokens) == (p.rate, p.max_batch, p.kv_tokens)
                );
                let values = SimValues::of(q).values;
                models.push((Predictor::Simulator, Outcome::Predicted(values), secs));
            }
            ConfigRow {
                rate: p.rate,
                max_batch: p.max_batch,
                kv_tokens: p.kv_tokens,
                sim: SimValues::of(p),
                models,
            }
        })
        .collect()
}

fn pct(x: Option<f64>) -> String {
    x.map_or("–".into(), |v| format!("{:.2} %", 100.0 * v))
}

fn num(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v}"))
}

fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

/// For each model that predicted only some configurations, the `simulator` row's errors
/// over just those, so that a model's errors and the yardstick's noise can be read over
/// the same configurations (markdown sentences; empty when every model predicted all).
pub fn noise_floor_like_for_like(rows: &[ConfigRow]) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let Some(sim) = first
        .models
        .iter()
        .position(|(p, _, _)| *p == Predictor::Simulator)
    else {
        return String::new();
    };
    let mut parts = Vec::new();
    for (i, (who, _, _)) in first.models.iter().enumerate() {
        let on: Vec<ConfigRow> = rows
            .iter()
            .filter(|r| matches!(r.models[i].1, Outcome::Predicted(_)))
            .cloned()
            .collect();
        if i == sim || on.is_empty() || on.len() == rows.len() {
            continue;
        }
        let m = &summarise(&on)[sim];
        parts.push(format!(
            "on the {} configurations `{}` predicted, mean TTFT {}, p50 {}, p95 {}, p99 {}, goodput {}",
            on.len(),
            who.name(),
            pct(m.mre[0]),
            pct(m.mre[1]),
            pct(m.mre[2]),
            pct(m.mre[3]),
            pct(m.mre[4]),
        ));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "\nThe `simulator` row over the same configurations as a model that predicted fewer \
(like for like): {}.\n",
        parts.join("; ")
    )
}

/// The markdown error table.
pub fn markdown(summaries: &[ModelSummary], n_configs: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| model | predicted | unstable | unsupported | mean TTFT MRE | p50 MRE | p95 MRE | p99 MRE | p99 max RE | goodput MRE | goodput MRE (arrival-normalised) | blocking MAE | time / config (mean) | time / config (max) |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for m in summaries {
        let _ = writeln!(
            s,
            "| {} | {}/{n_configs} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.model.as_ref().map_or("?", Predictor::name),
            m.predicted,
            m.unstable,
            m.unsupported,
            pct(m.mre[0]),
            pct(m.mre[1]),
            pct(m.mre[2]),
            pct(m.mre[3]),
            pct(m.p99_max_re),
            pct(m.mre[4]),
            pct(m.goodput_normalised_mre),
            m.blocking_mae.map_or("–".into(), |v| format!("{v:.4}")),
            fmt_time(m.time_mean_s),
            fmt_time(m.time_max_s),
        );
    }
    s
}

/// Per-model CSV (one row per model).
pub fn summary_csv(summaries: &[ModelSummary]) -> String {
    let mut s = String::from(
        "model,predicted,unstable,unsupported,ttft_mean_mre,ttft_p50_mre,ttft_p95_mre,ttft_p99_mre,ttft_p99_max_re,goodput_mre,goodput_normalised_mre,blocking_mae,n_ttft_mean,n_goodput,time_per_config_mean_s,time_per_config_max_s\n",
    );
    for m in summaries {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            m.model.as_ref().map_or("?", Predictor::name),
            m.predicted,
            m.unstable,
            m.unsupported,
            num(m.mre[0]),
            num(m.mre[1]),
            num(m.mre[2]),
            num(m.mre[3]),
            num(m.p99_max_re),
            num(m.mre[4]),
            num(m.goodput_normalised_mre),
            num(m.blocking_mae),
            m.mre_n[0],
            m.mre_n[4],
            m.time_mean_s,
            m.time_max_s
        );
    }
    s
}

/// Per-config CSV: one row per (config, model) with the simulated value, the model's value
/// and the error of each metric (`err_kind` r = relative, a = absolute, empty = no value).
pub fn configs_csv(rows: &[ConfigRow]) -> String {
    let mut s = String::from(
        "arrival_rate,max_batch_size,kv_budget,sim_arrivals,model,status,time_per_eval_s",
    );
    for m in METRICS {
        let _ = write!(s, ",sim_{m},model_{m},err_{m},err_kind_{m}");
    }
    s.push_str(",sim_goodput_normalised_rps,err_goodput_normalised,detail\n");
    for r in rows {
        for (who, out, t) in &r.models {
            let _ = write!(
                s,
                "{:?},{},{},{},{},{},{t}",
                r.rate,
                r.max_batch,
                r.kv_tokens,
                r.sim.arrivals,
                who.name(),
                out.status()
            );
            let vals = match out {
                Outcome::Predicted(v) => Some(*v),
                _ => None,
            };
            for j in 0..METRICS.len() {
                let sv = r.sim.values[j];
                let a = vals.and_then(|v| v[j]);
                let (e, k) = match (a, sv) {
                    (Some(a), Some(sv)) => {
                        let (e, rel) = error(j, a, sv);
                        (format!("{e}"), if rel { "r" } else { "a" })
                    }
                    _ => (String::new(), ""),
                };
                let _ = write!(s, ",{},{},{e},{k}", num(sv), num(a));
            }
            let gn = match (vals.and_then(|v| v[4]), r.sim.goodput_normalised) {
                (Some(v), Some(g)) => format!("{}", error(4, v, g).0),
                _ => String::new(),
            };
            let detail = match out {
                Outcome::Predicted(_) => String::new(),
                Outcome::Unstable { rho } => format!("rho={rho:.4}"),
                Outcome::Unsupported(why) => why.replace([',', '\n'], ";"),
            };
            let _ = writeln!(s, ",{},{gn},{detail}", num(r.sim.goodput_normalised));
        }
    }
    s
}

/// The command as typed, with the program shown as `bench-native` (for the top of result files).
pub(crate) fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    let prog = Path::new(args.first().map_or("bench-native", String::as_str))
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("bench-native")
        .to_string();
    let mut v = vec![if prog.starts_with("bench-native") {
        "bench-native".to_string()
    } else {
        prog
    }];
    v.extend(
        args.into_iter()
            .skip(1)
            .map(|a| if a.contains(' ') { format!("'{a}'") } else { a }),
    );
    v.join(" ")
}

pub fn execute(a: CompareArgs) -> anyhow::Result<()> {
    let threads = args::threads(a.threads)?;
    if a.fleet {
        return execute_fleet(&a, threads);
    }
    let (spec, seeds_text) = args::sweep_spec(&a.grid, &DEFAULT_GRID, &a.model, true)?;
    let noise_spec = match &a.noise_floor {
        None => None,
        Some(text) => {
            let seeds = text.seeds.clone();
            if let Some(s) = seeds.iter().find(|s| spec.seeds.contains(s)) {
                bail!(
                    "--noise-floor {text}: seed {s} is also a yardstick seed (--seeds {}); \
                     the noise floor needs other seeds, e.g. --noise-floor {}-{}",
                    seeds_text,
                    spec.seeds.iter().max().map_or(0, |m| m + 1),
                    spec.seeds.iter().max().map_or(0, |m| m + 200),
                );
            }
            Some(SweepSpec {
                seeds,
                ..spec.clone()
            })
        }
    };
    let models: Vec<ModelKind> = if a.models.is_empty() {
        ModelKind::ALL.to_vec()
    } else {
        a.models.iter().map(|&m| m.into()).collect()
    };
    let noise_runs = noise_spec.as_ref().map_or(0, SweepSpec::runs);
    let work = a.model.work_limits(Scope::Sweep);
    limits::check(
        "compare",
        spec.expected_requests() + noise_spec.as_ref().map_or(0.0, |s| s.expected_requests()),
        &format!("{} runs × rate × horizon", spec.runs() + noise_runs),
        work.max_requests_per_sweep,
    )?;
    let bar = indicatif::ProgressBar::new((spec.runs() + noise_runs) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} simulate [{bar:30}] {pos}/{len} runs {elapsed_precise} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let t = Instant::now();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let points = pool.install(|| {
        engine::sweep::run_sweep_parallel_with(&spec, None, &work, &|d, _| {
            bar.set_position(d as u64)
        })
    })?;
    let sim_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let noise_points = match &noise_spec {
        None => None,
        Some(ns) => {
            let done = spec.runs();
            Some(pool.install(|| {
                engine::sweep::run_sweep_parallel_with(ns, None, &work, &|d, _| {
                    bar.set_position((done + d) as u64)
                })
            })?)
        }
    };
    let noise_secs = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let t = Instant::now();
    let per_config = noise_secs * threads as f64 / points.len().max(1) as f64;
    let rows = evaluate(
        &spec,
        &points,
        &models,
        noise_points.as_deref().map(|n| (n, per_config)),
    );
    let model_secs = t.elapsed().as_secs_f64();
    let summaries = summarise(&rows);

    let cmd = command_line();
    let b = &spec.base;
    let mut md = format!(
        "# Analytical models vs simulator: {}\n\nCommand: `{cmd}`\n\n\
Grid: λ {:?} req/s × B {:?} × K {:?} tokens = {} configs; seeds {:?}; horizon {} s; \
policy {}, KV mode {:?}, block {} tokens, end rule {:?}, first token {:?}.\n\n\
Simulated values are means of per-seed metrics. MRE = mean over predicted configs of \
|model − sim| / |sim|; blocking MAE = mean |model − sim| (absolute, as blocking is often \
below 1 %). \"arrival-normalised\" rescales each seed's simulated goodput by λ·T / realised \
arrivals (removes the Poisson noise of the arrival count). Unstable / unsupported \
predictions are counted, not scored. Times are per `predict` call on one core.\n\n",
        a.name,
        spec.rates,
        spec.max_batches,
        spec.kv_tokens,
        rows.len(),
        spec.seeds,
        b.horizon_s,
        b.server.policy.as_str(),
        b.server.kv_mode,
        b.server.block_size,
        b.end,
        b.first_token,
    );
    md.push_str(&markdown(&summaries, rows.len()));
    if let Some(ns) = &noise_spec {
        let _ = writeln!(
            md,
            "\nRow `simulator`: the simulator itself, averaged over {} other seeds ({}–{}), scored \
like a model against the yardstick's {} seed(s). It has no model error, so its errors are the \
yardstick's own noise: no model of the expected values can be expected to score below them. \
Its time is simulation time per configuration over those seeds (× {threads} thread(s)).",
            ns.seeds.len(),
            ns.seeds.iter().min().copied().unwrap_or(0),
            ns.seeds.iter().max().copied().unwrap_or(0),
            spec.seeds.len(),
        );
        md.push_str(&noise_floor_like_for_like(&rows));
    }
    let _ = writeln!(
        md,
        "\nSimulation: {} runs in {sim_secs:.2} s on {threads} thread(s){}; models: {model_secs:.2} s in total (with timing repeats).",
        spec.runs(),
        if noise_runs > 0 {
            format!(", noise floor: {noise_runs} runs in {noise_secs:.2} s")
        } else {
            String::new()
        }
    );
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let md_path = a.out.join(format!("{}.md", a.name));
    let csv_path = a.out.join(format!("{}.csv", a.name));
    let cfg_path = a.out.join(format!("{}_configs.csv", a.name));
    std::fs::write(&md_path, &md).with_context(|| format!("writing {}", md_path.display()))?;
    std::fs::write(&csv_path, summary_csv(&summaries))?;
    std::fs::write(&cfg_path, configs_csv(&rows))?;
    println!("{md}");
    eprintln!(
        "wrote {}, {} and {}",
        md_path.display(),
        csv_path.display(),
        cfg_path.display()
    );
    Ok(())
}

/// `compare --fleet`.
fn execute_fleet(a: &CompareArgs, threads: usize) -> anyhow::Result<()> {
    let (spec, _) = args::sweep_spec(&a.grid, &FLEET_GRID, &a.model, true)?;
    if spec.max_batches.len() != 1 || spec.kv_tokens.len() != 1 {
        bail!("--fleet compares one server: give one --batches and one --kv value");
    }
    let base = spec.config(
        spec.rates[0],
        spec.max_batches[0],
        spec.kv_tokens[0],
        spec.seeds[0],
    );
    let grid = fleet::FleetGrid {
        replicas: a.fleet_replicas.clone(),
        routers: a.fleet_routers.clone(),
        loads: a.fleet_loads.clone(),
        seeds: spec.seeds.clone(),
    };
    let name = if a.name == "compare" {
        "fleet"
    } else {
        &a.name
    };
    let out = if a.out == Path::new("results/compare") {
        Path::new("results/fleet")
    } else {
        a.out.as_path()
    };
    fleet::execute(&base, &grid, threads, out, name, &command_line())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_relative_unless_near_zero() {
        assert_eq!(error(0, 1.1, 1.0), (0.10000000000000009, true));
        let (e, rel) = error(5, 0.004, 0.001);
        assert!(!rel && (e - 0.003).abs() < 1e-15);
        let (e, rel) = error(5, 0.0, 0.0);
        assert!(!rel && e == 0.0);
        let (e, rel) = error(5, 0.11, 0.1);
        assert!(rel && (e - 0.1).abs() < 1e-12);
        // Never zero when the simulator says zero but the model does not.
        assert!(error(5, 0.002, 0.0).0 > 0.0);
    }

    #[test]
    fn noise_floor_is_also_scored_on_a_models_configurations() {
        // Three configurations; `batching` is unstable on the third, where the simulator's
        // other seeds are far off (50 %), so the like-for-like figure must leave it out.
        let row = |sim: f64, noise: f64, batching: Outcome| ConfigRow {
            rate: 1.0,
            max_batch: 8,
            kv_tokens: 4096,
            sim: SimValues {
                values: [
                    Some(sim),
                    Some(sim),
                    Some(sim),
                    Some(sim),
                    Some(1.0),
                    Some(0.0),
                ],
                goodput_normalised: Some(1.0),
                arrivals: 100,
            },
            models: vec![
                (Predictor::Model(ModelKind::Batching), batching, 1e-4),
                (
                    Predictor::Simulator,
                    Outcome::Predicted([Some(noise); 6].map(|x| x.map(|v| v * sim))),
                    0.1,
                ),
            ],
        };
        let ok = |v: f64| Outcome::Predicted([Some(v); 6]);
        let rows = vec![
            row(1.0, 1.02, ok(1.0)),
            row(2.0, 1.04, ok(2.0)),
            row(4.0, 1.5, Outcome::Unstable { rho: 1.2 }),
        ];
        let all = &summarise(&rows)[1];
        assert!((all.mre[0].unwrap() - (0.02 + 0.04 + 0.5) / 3.0).abs() < 1e-12);
        let text = noise_floor_like_for_like(&rows);
        assert!(
            text.contains("on the 2 configurations `batching` predicted, mean TTFT 3.00 %"),
            "{text}"
        );
        // Nothing to add when every model predicted every configuration.
        assert_eq!(noise_floor_like_for_like(&rows[..2]), "");
    }
}
