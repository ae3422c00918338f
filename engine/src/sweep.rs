//! Sweeps: a grid of (arrival rate × batch width × KV budget) × seeds, aggregated per grid
//! point, written as the reference study's summary CSV (plus our columns, units in their
//! names), a per-request CSV and JSON.
//!
//! Common random numbers: for each (rate, seed) the requests are generated once and
//! replayed against every (B, K), so configurations are compared on identical requests.
//! The engine stays single-threaded; with the `parallel` feature (native only) the
//! (rate, seed) tasks run on rayon's pool.

use crate::config::ServerConfig;
use crate::config::SimConfig;
use crate::error::ConfigError;
use crate::limits::{LimitError, Limits, MAX_GRID_POINTS, MAX_SEEDS};
use crate::metrics::{Aggregate, PrefixSummary, Summary};
use crate::record::RequestRecord;
use crate::sim::{run_also_holds_for, simulate_requests_with, RunStats};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// A grid × seeds around a base configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    pub base: SimConfig,
    /// Arrival rates [req/s].
    pub rates: Vec<f64>,
    /// Batch widths B.
    pub max_batches: Vec<u32>,
    /// KV capacities [tokens].
    pub kv_tokens: Vec<u64>,
    pub seeds: Vec<u64>,
    /// Reuse a simulated run for every other (B, K) of the same rate and seed that it
    /// provably stands for ([`run_also_holds_for`]) instead of simulating it again. The
    /// results are identical either way; `false` simulates every run (for timing the
    /// engine itself).
    #[serde(default = "yes")]
    pub reuse: bool,
}

fn yes() -> bool {
    true
}

impl SweepSpec {
    /// The reference study's default sweep: λ 0.5,1,2,3,4,5,6,8 × B 1,2,4,8,16 ×
    /// K 2048,4096,8192,16384 × seeds 0–4 × 1000 s, reference-compatible mode (800 runs).
    pub fn reference_default() -> SweepSpec {
        SweepSpec {
            base: SimConfig::reference(1.0, 1, 2048),
            rates: vec![0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0],
            max_batches: vec![1, 2, 4, 8, 16],
            kv_tokens: vec![2048, 4096, 8192, 16384],
            seeds: (0..5).collect(),
            reuse: true,
        }
    }

    /// The 48-configuration comparison grid: λ 0.5,1,2,3 × B 1,4,8 × the same K.
    pub fn reference_compare() -> SweepSpec {
        SweepSpec {
            rates: vec![0.5, 1.0, 2.0, 3.0],
            max_batches: vec![1, 4, 8],
            ..SweepSpec::reference_default()
        }
    }

    /// Grid points in output order (rate-major, then B, then K).
    pub fn points(&self) -> Vec<(f64, u32, u64)> {
        let mut v =
            Vec::with_capacity(self.rates.len() * self.max_batches.len() * self.kv_tokens.len());
        for &r in &self.rates {
            for &b in &self.max_batches {
                for &k in &self.kv_tokens {
                    v.push((r, b, k));
                }
            }
        }
        v
    }

    /// Number of simulation runs.
    pub fn runs(&self) -> usize {
        self.points().len() * self.seeds.len()
    }

    /// The configuration of one run.
    pub fn config(&self, rate: f64, max_batch: u32, kv_tokens: u64, seed: u64) -> SimConfig {
        let mut c = self.base.clone();
        c.workload = c.workload.with_rate(rate);
        c.server.max_batch = max_batch;
        c.server.kv_tokens = kv_tokens;
        c.seed = seed;
        c
    }

    /// Checks every configuration of the grid, and that the sweep fits the default
    /// [`Limits`].
    ///
    /// # Errors
    /// An empty axis, too many seeds or grid points ([`MAX_SEEDS`], [`MAX_GRID_POINTS`]),
    /// the first invalid configuration, or more requests than the limits allow.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_with(&Limits::default())
    }

    /// [`SweepSpec::validate`] against other work limits.
    ///
    /// # Errors
    /// As [`SweepSpec::validate`].
    pub fn validate_with(&self, limits: &Limits) -> Result<(), ConfigError> {
        if self.rates.is_empty()
            || self.max_batches.is_empty()
            || self.kv_tokens.is_empty()
            || self.seeds.is_empty()
        {
            return Err(ConfigError::Empty {
                what: "sweep axis (rates, batch widths, KV budgets or seeds)",
            });
        }
        if self.seeds.len() > MAX_SEEDS {
            return Err(LimitError::AboveMax {
                name: "seeds",
                value: self.seeds.len() as f64,
                max: MAX_SEEDS as f64,
                why: "a summary is kept per seed and grid point",
            }
            .into());
        }
        let points = self
            .rates
            .len()
            .checked_mul(self.max_batches.len())
            .and_then(|n| n.checked_mul(self.kv_tokens.len()))
            .unwrap_or(usize::MAX);
        if points > MAX_GRID_POINTS {
            return Err(LimitError::AboveMax {
                name: "grid points",
                value: points as f64,
                max: MAX_GRID_POINTS as f64,
                why: "the grid is listed in memory",
            }
            .into());
        }
        for (r, b, k) in self.points() {
            self.config(r, b, k, self.seeds[0]).validate_with(limits)?;
        }
        let per_run = self.rates.iter().map(|&r| self.rate_requests(r));
        limits.check_sweep(per_run, self.expected_requests())?;
        Ok(())
    }

    /// Requests one run at rate `r` is expected to simulate [requests].
    fn rate_requests(&self, r: f64) -> f64 {
        crate::limits::expected_requests(&self.base.workload.with_rate(r), self.base.horizon_s)
    }

    /// Requests every run of the sweep together is expected to simulate: each rate's
    /// expected arrivals × seeds × batch widths × KV capacities (an upper bound: reused
    /// runs cost nothing) [requests].
    pub fn expected_requests(&self) -> f64 {
        let per_rate: f64 = self.rates.iter().map(|&r| self.rate_requests(r)).sum();
        per_rate
            * self.seeds.len() as f64
            * self.max_batches.len() as f64
            * self.kv_tokens.len() as f64
    }

    /// The subset of grid points for shard `i` of `n` (round-robin), as a new spec is not
    /// possible for arbitrary subsets: returns the point indices.
    pub fn shard_points(&self, i: usize, n: usize) -> Vec<usize> {
        (0..self.points().len())
            .filter(|p| n > 0 && p % n == i)
            .collect()
    }
}

/// One grid point: per-seed summaries and their aggregates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub rate: f64,
    pub max_batch: u32,
    pub kv_tokens: u64,
    pub seeds: Vec<u64>,
    pub summaries: Vec<Summary>,
    /// How many of the seeds were simulated; the others reused a run of another (B, K)
    /// that provably stands for this one ([`SweepSpec::reuse`]).
    #[serde(default)]
    pub simulated_seeds: u32,
    /// Per-seed prefix-cache summaries, when the cache is on (docs/model.md, Prefix
    /// caching); empty, and not written out, when it is off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<PrefixSummary>,
}

/// Aggregates over seeds of the metrics a sweep reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointAggregate {
    pub mean_ttft: Aggregate,
    pub p50_ttft: Aggregate,
    pub p95_ttft: Aggregate,
    pub p99_ttft: Aggregate,
    pub goodput: Aggregate,
    pub blocking: Aggregate,
    pub mean_tpot: Aggregate,
    pub p99_tpot: Aggregate,
    pub mean_e2e: Aggregate,
    pub p99_e2e: Aggregate,
    pub output_tokens_per_s: Aggregate,
    pub slo_goodput: Aggregate,
    pub slo_attainment: Aggregate,
    pub preemptions: Aggregate,
    pub p99_itl_max: Aggregate,
    pub stalls: Aggregate,
}

impl SweepPoint {
    pub fn aggregate(&self) -> PointAggregate {
        PointAggregate::of(&self.summaries)
    }
}

impl PointAggregate {
    /// Aggregates per-seed (or per-run) summaries.
    pub fn of(s: &[Summary]) -> PointAggregate {
        let ag = |f: &dyn Fn(&Summary) -> Option<f64>| Aggregate::of(s.iter().map(f));
        PointAggregate {
            mean_ttft: ag(&|x| x.ttft.mean),
            p50_ttft: ag(&|x| x.ttft.p50),
            p95_ttft: ag(&|x| x.ttft.p95),
            p99_ttft: ag(&|x| x.ttft.p99),
            goodput: ag(&|x| Some(x.throughput_rps)),
            blocking: ag(&|x| Some(x.blocking_probability)),
            mean_tpot: ag(&|x| x.tpot.mean),
            p99_tpot: ag(&|x| x.tpot.p99),
            mean_e2e: ag(&|x| x.e2e.mean),
            p99_e2e: ag(&|x| x.e2e.p99),
            output_tokens_per_s: ag(&|x| Some(x.output_tokens_per_s)),
            slo_goodput: ag(&|x| Some(x.slo_goodput_rps)),
            slo_attainment: ag(&|x| x.slo_attainment),
            preemptions: ag(&|x| Some(x.preemptions as f64)),
            p99_itl_max: ag(&|x| x.itl_max.p99),
            stalls: ag(&|x| Some(x.stalls as f64)),
        }
    }
}

/// Simulated runs of one request stream, each kept with its bookkeeping, so a
/// configuration that one of them provably stands for ([`run_also_holds_for`]: the same
/// server but for a B or K that never bound) can take its result instead of simulating.
#[derive(Debug)]
pub struct StandIns<T> {
    runs: Vec<(ServerConfig, RunStats, T)>,
}

impl<T> Default for StandIns<T> {
    fn default() -> Self {
        StandIns { runs: Vec::new() }
    }
}

impl<T> StandIns<T> {
    /// Keeps a run of `server` on this stream, with what it should give back.
    pub fn push(&mut self, server: ServerConfig, stats: RunStats, result: T) {
        self.runs.push((server, stats, result));
    }

    /// The result of a kept run that is also the run of `server` on this stream.
    pub fn find(&self, server: &ServerConfig) -> Option<&T> {
        let (b, k) = (server.max_batch, server.kv_tokens);
        self.runs
            .iter()
            .find(|(ran, stats, _)| {
                // Nothing but B and K may differ.
                let same_rest = ServerConfig {
                    max_batch: ran.max_batch,
                    kv_tokens: ran.kv_tokens,
                    ..server.clone()
                } == *ran;
                same_rest && run_also_holds_for(ran, stats, b, k)
            })
            .map(|(_, _, r)| r)
    }

    pub fn clear(&mut self) {
        self.runs.clear();
    }
}

/// Runs every seed of the grid points `which` (indices into [`SweepSpec::points`]) for one
/// rate, reusing each seed's requests across (B, K). `on_run` is called after each run
/// and returns `false` to cancel.
fn run_rate(
    spec: &SweepSpec,
    rate: f64,
    which: &[usize],
    limits: &Limits,
    on_run: &mut dyn FnMut() -> bool,
) -> Option<Vec<SweepPoint>> {
    let pts = spec.points();
    let mut out: Vec<SweepPoint> = which
        .iter()
        .map(|&i| SweepPoint {
            rate,
            max_batch: pts[i].1,
            kv_tokens: pts[i].2,
            seeds: spec.seeds.clone(),
            summaries: Vec::new(),
            simulated_seeds: 0,
            prefix: Vec::new(),
        })
        .collect();
    let wl = spec.base.workload.with_rate(rate);
    // This seed's simulated runs, by index into `out`.
    let mut ran: StandIns<usize> = StandIns::default();
    for &seed in &spec.seeds {
        let reqs = wl.generate(seed, spec.base.horizon_s).ok()?;
        ran.clear();
        for j in 0..out.len() {
            let cfg = spec.config(rate, out[j].max_batch, out[j].kv_tokens, seed);
            let same = if spec.reuse {
                ran.find(&cfg.server).copied()
            } else {
                None
            };
            let (summary, prefix) = match same {
                Some(i) => (
                    out[i].summaries.last().expect("ran this seed").clone(),
                    out[i].prefix.last().cloned(),
                ),
                None => {
                    let mut rep = simulate_requests_with(&cfg, reqs.iter().copied(), limits);
                    let prefix = rep.stats.prefix.take();
                    ran.push(cfg.server, rep.stats, j);
                    out[j].simulated_seeds += 1;
                    (rep.summary, prefix)
                }
            };
            out[j].summaries.push(summary);
            out[j].prefix.extend(prefix);
            if !on_run() {
                return None;
            }
        }
    }
    Some(out)
}

/// Runs the sweep (or the points of one shard), single-threaded, within the default
/// [`Limits`]. `progress(done_runs, total_runs)` returns `false` to cancel; a cancelled
/// sweep returns `Ok(None)`.
///
/// # Errors
/// As [`SweepSpec::validate`].
pub fn run_sweep(
    spec: &SweepSpec,
    shard: Option<(usize, usize)>,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<Option<Vec<SweepPoint>>, ConfigError> {
    run_sweep_with(spec, shard, &Limits::default(), progress)
}

/// [`run_sweep`] within other work limits.
///
/// # Errors
/// As [`SweepSpec::validate_with`].
pub fn run_sweep_with(
    spec: &SweepSpec,
    shard: Option<(usize, usize)>,
    limits: &Limits,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<Option<Vec<SweepPoint>>, ConfigError> {
    spec.validate_with(limits)?;
    let selected = selected_points(spec, shard);
    let total = selected.len() * spec.seeds.len();
    let mut done = 0;
    let mut out = Vec::with_capacity(selected.len());
    for (rate, which) in by_rate(spec, &selected) {
        let mut tick = || {
            done += 1;
            progress(done, total)
        };
        match run_rate(spec, rate, &which, limits, &mut tick) {
            Some(p) => out.extend(p),
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

/// Like [`run_sweep`] on rayon's pool (native `parallel` feature): (rate, seed) tasks in
/// parallel; identical output.
///
/// # Errors
/// As [`SweepSpec::validate`].
#[cfg(all(feature = "parallel", not(target_arch = "wasm32")))]
pub fn run_sweep_parallel(
    spec: &SweepSpec,
    shard: Option<(usize, usize)>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<SweepPoint>, ConfigError> {
    run_sweep_parallel_with(spec, shard, &Limits::default(), progress)
}

/// [`run_sweep_parallel`] within other work limits.
///
/// # Errors
/// As [`SweepSpec::validate_with`].
#[cfg(all(feature = "parallel", not(target_arch = "wasm32")))]
pub fn run_sweep_parallel_with(
    spec: &SweepSpec,
    shard: Option<(usize, usize)>,
    limits: &Limits,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<SweepPoint>, ConfigError> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    spec.validate_with(limits)?;
    let selected = selected_points(spec, shard);
    let total = selected.len() * spec.seeds.len();
    let done = AtomicUsize::new(0);
    let groups = by_rate(spec, &selected);
    let tasks: Vec<(usize, u64)> = (0..groups.len())
        .flat_map(|g| spec.seeds.iter().map(move |&s| (g, s)))
        .collect();
    let results: Vec<Vec<SweepPoint>> = tasks
        .par_iter()
        .map(|&(g, seed)| {
            let one = SweepSpec {
                seeds: vec![seed],
                ..spec.clone()
            };
            let mut tick = || {
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                true
            };
            run_rate(&one, groups[g].0, &groups[g].1, limits, &mut tick).unwrap_or_default()
        })
        .collect();
    // Reassemble: tasks are ordered (group, seed), so seeds stay in order per point.
    let mut out: Vec<SweepPoint> = Vec::new();
    for (ti, pts) in results.into_iter().enumerate() {
        let (g, _) = tasks[ti];
        let first_of_group = spec.seeds.iter().position(|&s| s == tasks[ti].1) == Some(0);
        if first_of_group {
            out.extend(pts);
        } else {
            let base = out.len() - groups[g].1.len();
            for (j, p) in pts.into_iter().enumerate() {
                out[base + j].summaries.extend(p.summaries);
                out[base + j].prefix.extend(p.prefix);
                out[base + j].simulated_seeds += p.simulated_seeds;
            }
        }
    }
    for p in &mut out {
        p.seeds = spec.seeds.clone();
    }
    Ok(out)
}

fn selected_points(spec: &SweepSpec, shard: Option<(usize, usize)>) -> Vec<usize> {
    match shard {
        Some((i, n)) => spec.shard_points(i, n),
        None => (0..spec.points().len()).collect(),
    }
}

/// Selected point indices grouped by rate, in order.
fn by_rate(spec: &SweepSpec, selected: &[usize]) -> Vec<(f64, Vec<usize>)> {
    let pts = spec.points();
    let mut groups: Vec<(f64, Vec<usize>)> = Vec::new();
    for &i in selected {
        let r = pts[i].0;
        match groups.last_mut() {
            Some((gr, v)) if *gr == r => v.push(i),
            _ => groups.push((r, vec![i])),
        }
    }
    groups
}

/// The reference study's summary columns.
pub const REFERENCE_COLUMNS: &str = "arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,mean_ttft_std,p50_ttft_mean,p50_ttft_std,p95_ttft_mean,p95_ttft_std,p99_ttft_mean,p99_ttft_std,goodput_mean,goodput_std,blocking_probability_mean,blocking_probability_std";

/// Our extra columns, after the reference ones.
pub const EXTRA_COLUMNS: &str = "mean_ttft_ci95_s,p99_ttft_ci95_s,goodput_ci95_rps,blocking_probability_ci95,mean_tpot_s_mean,mean_tpot_s_std,p99_tpot_s_mean,mean_e2e_s_mean,p99_e2e_s_mean,output_tokens_per_s_mean,slo_goodput_rps_mean,slo_attainment_mean,preemptions_mean,p99_itl_max_s_mean,stalls_mean,policy,kv_mode,block_size_tokens,token_budget_tokens,horizon_s";

/// The full summary CSV header.
pub fn summary_header() -> String {
    format!("{REFERENCE_COLUMNS},{EXTRA_COLUMNS}")
}

/// Summary CSV columns added after [`EXTRA_COLUMNS`] when the prefix cache is on: means
/// over seeds of [`PrefixSummary`]'s rates, saved tokens and TTFT of hits and misses.
pub const PREFIX_COLUMNS: &str = "block_hit_rate_mean,token_hit_rate_mean,block_hit_rate_ci95,prefill_tokens_saved_mean,mean_ttft_hit_s_mean,mean_ttft_miss_s_mean,p99_ttft_hit_s_mean,p99_ttft_miss_s_mean";

/// The [`PREFIX_COLUMNS`] of a grid point (no leading comma).
pub fn prefix_cols(p: &[PrefixSummary]) -> String {
    let of = |g: &dyn Fn(&PrefixSummary) -> Option<f64>| Aggregate::of(p.iter().map(g));
    let block = of(&|x| x.block_hit_rate);
    [
        f(block.mean),
        f(of(&|x| x.token_hit_rate).mean),
        f(block.ci95),
        f(of(&|x| Some(x.saved_tokens as f64)).mean),
        f(of(&|x| x.ttft_hit.mean).mean),
        f(of(&|x| x.ttft_miss.mean).mean),
        f(of(&|x| x.ttft_hit.p99).mean),
        f(of(&|x| x.ttft_miss.p99).mean),
    ]
    .join(",")
}

fn f(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

/// The descriptive columns at the end of a summary row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowLabels<'a> {
    /// Policy name, or e.g. `measured` for a real server.
    pub policy: &'a str,
    pub kv_mode: &'a str,
    pub block_size: u32,
    pub token_budget: u32,
    pub horizon_s: f64,
}

/// One summary CSV row (no newline) of a grid point.
pub fn summary_row(p: &SweepPoint, base: &SimConfig) -> String {
    let s = &base.server;
    let labels = RowLabels {
        policy: s.policy.as_str(),
        kv_mode: match s.kv_mode {
            crate::config::KvMode::Reserve => "reserve",
            crate::config::KvMode::Paged => "paged",
        },
        block_size: s.block_size,
        token_budget: s.token_budget,
        horizon_s: base.horizon_s,
    };
    summary_row_of(p.rate, p.max_batch, p.kv_tokens, &p.aggregate(), &labels)
}

/// One summary CSV row from aggregates — shared by simulated sweeps and measured runs
/// (`bench-native run` writes its summary with it: one "seed", the measured run).
pub fn summary_row_of(
    rate: f64,
    max_batch: u32,
    kv_tokens: u64,
    a: &PointAggregate,
    labels: &RowLabels<'_>,
) -> String {
    let mut cols: Vec<String> = vec![
        format!("{rate:?}"),
        max_batch.to_string(),
        kv_tokens.to_string(),
        a.mean_ttft.n.max(a.goodput.n).to_string(),
    ];
    for g in [
        &a.mean_ttft,
        &a.p50_ttft,
        &a.p95_ttft,
        &a.p99_ttft,
        &a.goodput,
        &a.blocking,
    ] {
        cols.extend([f(g.mean), f(g.std)]);
    }
    cols.extend([
        f(a.mean_ttft.ci95),
        f(a.p99_ttft.ci95),
        f(a.goodput.ci95),
        f(a.blocking.ci95),
    ]);
    cols.extend([f(a.mean_tpot.mean), f(a.mean_tpot.std)]);
    for g in [
        &a.p99_tpot,
        &a.mean_e2e,
        &a.p99_e2e,
        &a.output_tokens_per_s,
        &a.slo_goodput,
        &a.slo_attainment,
        &a.preemptions,
        &a.p99_itl_max,
        &a.stalls,
    ] {
        cols.push(f(g.mean));
    }
    cols.extend([
        labels.policy.to_string(),
        labels.kv_mode.to_string(),
        labels.block_size.to_string(),
        labels.token_budget.to_string(),
        format!("{:?}", labels.horizon_s),
    ]);
    cols.join(",")
}

/// The whole summary CSV.
pub fn summary_csv(points: &[SweepPoint], base: &SimConfig) -> String {
    let prefix = !base.server.prefix_cache.is_off();
    let mut s = summary_header();
    if prefix {
        s.push(',');
        s.push_str(PREFIX_COLUMNS);
    }
    s.push('\n');
    for p in points {
        s.push_str(&summary_row(p, base));
        if prefix {
            s.push(',');
            s.push_str(&prefix_cols(&p.prefix));
        }
        s.push('\n');
    }
    s
}

/// Per-request CSV header (simulated and measured runs share these leading columns).
pub const RECORD_COLUMNS: &str =
    "id,class,arrival_s,first_token_s,finish_s,ttft_s,tpot_s,e2e_s,prompt_tokens,output_tokens,max_gap_s,stalls,preemptions,outcome";

/// Per-request CSV rows for one run, optionally prefixed by `prefix` columns.
pub fn records_csv(records: &[RequestRecord], prefix: &str) -> String {
    let mut s = String::with_capacity(records.len() * 96);
    for r in records {
        let _ = writeln!(
            s,
            "{prefix}{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.id,
            r.class,
            r.arrival_s,
            f(r.first_token_s),
            f(r.finish_s),
            f(r.ttft()),
            f(r.tpot()),
            f(r.e2e()),
            r.prompt_tokens,
            r.output_tokens,
            r.max_gap_s,
            r.stalls,
            r.preemptions,
            r.outcome.as_str()
        );
    }
    s
}

/// Merges summary CSVs (e.g. shards) into one, sorted by (rate, B, K), checking the
/// headers agree and rejecting duplicate grid points.
///
/// # Errors
/// [`ConfigError::Parse`] for mismatched headers, malformed rows or duplicates.
pub fn merge_summary_csvs(parts: &[&str]) -> Result<String, ConfigError> {
    let mut header: Option<&str> = None;
    let mut rows: Vec<((f64, u64, u64), &str)> = Vec::new();
    for part in parts {
        let mut lines = part.lines().filter(|l| !l.trim().is_empty());
        let Some(h) = lines.next() else { continue };
        match header {
            None => header = Some(h),
            Some(h0) if h0 != h => {
                return Err(ConfigError::Parse {
                    what: "sweep summary",
                    why: "the files have different headers".into(),
                })
            }
            _ => {}
        }
        for l in lines {
            let mut it = l.split(',');
            let mut num = |name: &str| -> Result<f64, ConfigError> {
                it.next()
                    .and_then(|x| x.parse::<f64>().ok())
                    .ok_or_else(|| ConfigError::Parse {
                        what: "sweep summary",
                        why: format!("bad {name} in row '{l}'"),
                    })
            };
            let key = (
                num("arrival_rate")?,
                num("max_batch_size")? as u64,
                num("kv_budget")? as u64,
            );
            rows.push((key, l));
        }
    }
    let header = header.ok_or(ConfigError::Empty {
        what: "sweep summaries",
    })?;
    rows.sort_by(|a, b| {
        a.0 .0
            .total_cmp(&b.0 .0)
            .then(a.0 .1.cmp(&b.0 .1))
            .then(a.0 .2.cmp(&b.0 .2))
    });
    if let Some(w) = rows.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(ConfigError::Parse {
            what: "sweep summary",
            why: format!("grid point {:?} appears twice", w[0].0),
        });
    }
    let mut out = String::from(header);
    out.push('\n');
    for (_, l) in rows {
        out.push_str(l);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> SweepSpec {
        let mut s = SweepSpec::reference_default();
        s.rates = vec![1.0, 4.0];
        s.max_batches = vec![1, 8];
        s.kv_tokens = vec![2048, 8192];
        s.seeds = vec![0, 1, 2];
        s.base.horizon_s = 100.0;
        s
    }

    #[test]
    fn header_snapshot() {
        assert_eq!(
            summary_header(),
            "arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,mean_ttft_std,p50_ttft_mean,p50_ttft_std,p95_ttft_mean,p95_ttft_std,p99_ttft_mean,p99_ttft_std,goodput_mean,goodput_std,blocking_probability_mean,blocking_probability_std,mean_ttft_ci95_s,p99_ttft_ci95_s,goodput_ci95_rps,blocking_probability_ci95,mean_tpot_s_mean,mean_tpot_s_std,p99_tpot_s_mean,mean_e2e_s_mean,p99_e2e_s_mean,output_tokens_per_s_mean,slo_goodput_rps_mean,slo_attainment_mean,preemptions_mean,p99_itl_max_s_mean,stalls_mean,policy,kv_mode,block_size_tokens,token_budget_tokens,horizon_s"
        );
        assert_eq!(RECORD_COLUMNS.split(',').count(), 14);
    }

    #[test]
    fn rows_have_as_many_fields_as_the_header() {
        let spec = small();
        let pts = run_sweep(&spec, None, &mut |_, _| true).unwrap().unwrap();
        assert_eq!(pts.len(), 8);
        let csv = summary_csv(&pts, &spec.base);
        let n = summary_header().split(',').count();
        for l in csv.lines() {
            assert_eq!(l.split(',').count(), n, "{l}");
        }
        assert!(csv.lines().nth(1).unwrap().starts_with("1.0,1,2048,3,"));
    }

    #[test]
    fn sweep_equals_single_runs_and_shards_merge() {
        let spec = small();
        let all = run_sweep(&spec, None, &mut |_, _| true).unwrap().unwrap();
        let p = &all[5];
        let single =
            crate::sim::simulate(&spec.config(p.rate, p.max_batch, p.kv_tokens, 2)).unwrap();
        assert_eq!(p.summaries[2], single.summary);
        let a = run_sweep(&spec, Some((0, 3)), &mut |_, _| true)
            .unwrap()
            .unwrap();
        let b = run_sweep(&spec, Some((1, 3)), &mut |_, _| true)
            .unwrap()
            .unwrap();
        let c = run_sweep(&spec, Some((2, 3)), &mut |_, _| true)
            .unwrap()
            .unwrap();
        let merged = merge_summary_csvs(&[
            &summary_csv(&c, &spec.base),
            &summary_csv(&a, &spec.base),
            &summary_csv(&b, &spec.base),
        ])
        .unwrap();
        assert_eq!(merged, summary_csv(&all, &spec.base));
        assert!(
            merge_summary_csvs(&[&summary_csv(&a, &spec.base), &summary_csv(&a, &spec.base)])
                .is_err()
        );
    }

    #[test]
    fn reusing_runs_changes_nothing_but_the_work() {
        let mut spec = small();
        spec.max_batches = vec![1, 8, 16];
        spec.kv_tokens = vec![2048, 8192, 16384];
        let with = run_sweep(&spec, None, &mut |_, _| true).unwrap().unwrap();
        let plain = SweepSpec {
            reuse: false,
            ..spec.clone()
        };
        let without = run_sweep(&plain, None, &mut |_, _| true).unwrap().unwrap();
        let simulated = |pts: &[SweepPoint]| -> u32 { pts.iter().map(|p| p.simulated_seeds).sum() };
        assert_eq!(simulated(&without), 54);
        // At λ 1 the system seldom holds more than 8 requests or 8192 tokens: some seeds
        // of (16, ·) and (·, 16384) are runs of (8, ·) and (·, 8192).
        let n = simulated(&with);
        assert!((30..54).contains(&n), "{n} runs simulated");
        for (a, b) in with.iter().zip(&without) {
            assert_eq!(
                a.summaries, b.summaries,
                "λ {} B {} K {}",
                a.rate, a.max_batch, a.kv_tokens
            );
        }
    }

    #[test]
    fn cancel_stops() {
        let spec = small();
        let mut n = 0;
        let r = run_sweep(&spec, None, &mut |_, _| {
            n += 1;
            n < 3
        })
        .unwrap();
        assert!(r.is_none());
        assert_eq!(n, 3);
    }

    #[cfg(feature = "parallel")]
    #[test]
    fn parallel_equals_sequential() {
        let spec = small();
        let a = run_sweep(&spec, None, &mut |_, _| true).unwrap().unwrap();
        let b = run_sweep_parallel(&spec, None, &|_, _| {}).unwrap();
        assert_eq!(a, b);
    }
}
