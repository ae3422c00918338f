//! `bench-native sweep` and `merge`: grids of simulations written to `results/`.

use crate::args::limits::{self, Limits, Scope};
use crate::args::{self, FleetArgs, GridArgs, GridDefaults, ModelArgs};
use anyhow::Context;
use clap::Args;
use engine::metrics::Summary;
use engine::sweep::{records_csv, summary_csv, PointAggregate, SweepSpec, RECORD_COLUMNS};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

pub mod merge;

/// Arguments of `sweep`.
#[derive(Debug, Args)]
#[command(
    after_help = "With no flags: the reference study's default grid in reference mode (λ 0.5,1,2,3,4,5,6,8 × B 1,2,4,8,16 ×\n\
K 2048,4096,8192,16384 × seeds 0-4 × 1000 s = 800 runs), written to results/.\n\n\
Examples:\n  \
    bench-native sweep\n  \
    bench-native sweep --threads 1                      # the single-core timing\n  \
    bench-native sweep --threads 1 --no-reuse           # the same, simulating every run\n  \
    bench-native sweep --rates 1,2,4 --batches 8 --kv 4096,8192 --seeds 0-9 --out results/small\n  \
    bench-native sweep --shard 0/4 --out results/shard0 # one job of a 4-way job array; then `merge`\n  \
    bench-native sweep --preset vllm --rates 0.5,1,2,4,8 --batches 64,128 --kv 104336 --horizon 600\n  \
    bench-native sweep --max-in-system 8 --out /tmp/threshold   # threshold admission at every grid point\n  \
    bench-native sweep --preset vllm --rates 2,4,8 --batches 64 --kv 16384,65536 --horizon 600 --system-prompt 16:0.8:1024:1 --prefix-cache apc --out /tmp/apc   # adds hit-rate columns\n  \
    bench-native sweep --trace results/validate_llama/sim/trace-2.5.json --preset llama-cpp --batches 2,4 --kv 8192 --budget 512 --out /tmp/trace\n  \
    bench-native sweep --horizon 100000 --max-requests 1000000000 --out /tmp/long   # past the default limit\n\n\
Fleets (--rates are the whole fleet's; writes fleet_summary.csv and fleet_replicas.csv instead):\n  \
    bench-native sweep --rates 8,16,24 --batches 8 --kv 8192 --seeds 0-4 --replicas 4 --router jsq --out /tmp/fleet\n  \
    bench-native sweep --rates 10,20 --batches 8 --kv 8192 --fleet fleet.json --out /tmp/mixed"
)]
pub struct SweepArgs {
    #[command(flatten)]
    pub grid: GridArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Output directory.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
    /// Run only shard i of n (`--shard 2/8`): grid points round-robin.
    #[arg(long)]
    pub shard: Option<String>,
    /// Worker threads (0 = all cores; 1 = single-threaded).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Also write the per-request CSV (one row per request per run; large).
    #[arg(long)]
    pub per_request: bool,
    /// Simulate every run, even one a run of another (B, K) at the same rate and seed
    /// provably stands for (reserve mode: B or K never binding). Results are identical;
    /// this only times the engine on every run.
    #[arg(long)]
    pub no_reuse: bool,
}

/// Arguments of `merge`.
#[derive(Debug, Args)]
#[command(
    after_help = "Every row of every input is checked against the summary CSV's columns; any problem is\n\
reported with its file, line and column, and nothing is written.\n\n\
Example:\n  bench-native merge results/shard*/sweep_summary.csv -o results/sweep_summary.csv"
)]
pub struct MergeArgs {
    /// Summary CSVs written by `sweep --shard`.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Merged output.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// `sweep.json`: the spec, every grid point with its aggregates and per-seed summaries,
/// and the timing. Serialised straight from the engine's types (no `serde_json::Value`
/// tree in between: building one cost about as much as a tenth of the default grid).
#[derive(Debug, Serialize)]
struct SweepJson<'a> {
    spec: &'a SweepSpec,
    points: Vec<PointJson<'a>>,
    timing: Timing,
}

/// One grid point of `sweep.json`.
#[derive(Debug, Serialize)]
struct PointJson<'a> {
    /// [req/s]
    rate: f64,
    max_batch: u32,
    /// [tokens]
    kv_tokens: u64,
    seeds: &'a [u64],
    aggregate: PointAggregate,
    summaries: &'a [Summary],
}

/// How long the sweep took.
#[derive(Debug, Serialize)]
struct Timing {
    runs: usize,
    /// Runs simulated; the rest reused a run that provably stands for them.
    simulated: usize,
    requests: u64,
    /// Wall time of the simulations [s].
    seconds: f64,
    threads: usize,
}

/// `sweep`'s default grid: the reference study's.
pub const DEFAULT_GRID: GridDefaults = GridDefaults {
    rates: &[0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0],
    batches: &[1, 2, 4, 8, 16],
    kv: &[2048, 4096, 8192, 16384],
    seeds: (0, 4),
};

/// `i/n` with i < n.
///
/// # Errors
/// Not of that form, or i ≥ n; the message names `--shard`.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("'{s}' is not i/n with 0 <= i < n, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

/// `--shard i/n`: (i, n).
pub type Shard = (usize, usize);

/// The checked sweep of `a` (every grid point checked against its flags, the work against
/// `--max-requests`) and the runs it makes.
///
/// # Errors
/// [`args::ArgError`] naming the flag; what the engine still refuses.
pub fn spec(a: &SweepArgs) -> anyhow::Result<(SweepSpec, Option<Shard>, usize)> {
    let (spec, _) = args::sweep_spec(&a.grid, &DEFAULT_GRID, &a.model, !a.no_reuse)?;
    let shard = a
        .shard
        .as_deref()
        .map(parse_shard)
        .transpose()
        .map_err(|e| args::ArgError::Conflict(format!("--shard {e}")))?;
    let all = spec.points();
    let points: Vec<(f64, u32, u64)> = match shard {
        Some((i, n)) => spec
            .shard_points(i, n)
            .into_iter()
            .map(|j| all[j])
            .collect(),
        None => all,
    };
    let share = points.len() as f64 / spec.points().len().max(1) as f64;
    limits::check(
        "sweep",
        spec.expected_requests() * share,
        &format!("{} runs × rate × horizon", points.len() * spec.seeds.len()),
        a.model.work_limits(Scope::Sweep).max_requests_per_sweep,
    )?;
    let runs = points.len() * spec.seeds.len();
    Ok((spec, shard, runs))
}

pub fn execute(a: SweepArgs) -> anyhow::Result<()> {
    let threads = args::threads(a.threads)?;
    let (spec, shard, runs) = spec(&a)?;
    if let Some(fleet) = a.fleet.resolve(&a.model)? {
        return execute_fleet(&a, &fleet, &spec, shard, threads);
    }
    // all runs were checked above, by the shard's share
    let work = Limits {
        max_requests_per_sweep: f64::INFINITY,
        ..a.model.work_limits(Scope::Sweep)
    };
    let bar = indicatif::ProgressBar::new(runs as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} sweep [{bar:30}] {pos}/{len} runs {elapsed_precise} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let t = Instant::now();
    let points = if threads == 1 {
        engine::sweep::run_sweep_with(&spec, shard, &work, &mut |d, _| {
            if d % 16 == 0 {
                bar.set_position(d as u64);
            }
            true
        })?
        .expect("never cancelled")
    } else {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        pool.install(|| {
            engine::sweep::run_sweep_parallel_with(&spec, shard, &work, &|d, _| {
                bar.set_position(d as u64)
            })
        })?
    };
    let secs = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let requests: u64 = points
        .iter()
        .flat_map(|p| p.summaries.iter())
        .map(|s| s.arrivals)
        .sum();
    let simulated: usize = points.iter().map(|p| p.simulated_seeds as usize).sum();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let summary_path = a.out.join("sweep_summary.csv");
    std::fs::write(&summary_path, summary_csv(&points, &spec.base))?;
    let json_path = a.out.join("sweep.json");
    let json = SweepJson {
        spec: &spec,
        points: points
            .iter()
            .map(|p| PointJson {
                rate: p.rate,
                max_batch: p.max_batch,
                kv_tokens: p.kv_tokens,
                seeds: &p.seeds,
                aggregate: p.aggregate(),
                summaries: &p.summaries,
            })
            .collect(),
        timing: Timing {
            runs,
            simulated,
            requests,
            seconds: secs,
            threads,
        },
    };
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(&json_path)
            .with_context(|| format!("creating {}", json_path.display()))?,
    );
    serde_json::to_writer_pretty(&mut w, &json)?;
    w.flush()?;
    if a.per_request {
        let path = a.out.join("sweep_requests.csv");
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        writeln!(
            w,
            "arrival_rate,max_batch_size,kv_budget,seed,{RECORD_COLUMNS}"
        )?;
        for p in &points {
            for &seed in &p.seeds {
                let mut cfg = spec.config(p.rate, p.max_batch, p.kv_tokens, seed);
                cfg.keep_records = true;
                let rep = engine::sim::simulate_with(&cfg, &work)?;
                w.write_all(
                    records_csv(
                        &rep.records,
                        &format!("{:?},{},{},{seed},", p.rate, p.max_batch, p.kv_tokens),
                    )
                    .as_bytes(),
                )?;
            }
        }
        eprintln!("wrote {}", path.display());
    }
    eprintln!(
        "wrote {} and {}",
        summary_path.display(),
        json_path.display()
    );
    println!(
        "sweep: {runs} runs ({simulated} simulated, {} reused), {requests} requests in {secs:.3} s on {threads} thread(s) ({:.2} M requests/s)",
        runs - simulated,
        requests as f64 / secs / 1e6
    );
    Ok(())
}

/// One fleet run of a sweep: its configuration and (rate, B, K, seed).
pub type FleetRun = (engine::fleet::FleetConfig, (f64, u32, u64, u64));

/// Every checked fleet of the grid (shard `shard`), in grid order, with its point.
///
/// # Errors
/// The first grid point a replica or the fleet is refused at.
pub fn fleet_runs(
    fleet: &args::Fleet,
    spec: &SweepSpec,
    shard: Option<Shard>,
) -> anyhow::Result<Vec<FleetRun>> {
    let all = spec.points();
    let idx: Vec<usize> = match shard {
        Some((i, n)) => spec.shard_points(i, n),
        None => (0..all.len()).collect(),
    };
    let mut out = Vec::new();
    for j in idx {
        let (r, b, k) = all[j];
        for &seed in &spec.seeds {
            let base = spec.config(r, b, k, seed);
            let p = args::Point {
                rate: r,
                batch: b,
                kv: k,
                seed,
            };
            let cfg = fleet
                .config(&base, p, args::LISTS, Scope::Sweep)
                .with_context(|| {
                    format!("at --rates {r:?} --batches {b} --kv {k} --seeds {seed}")
                })?;
            out.push((cfg, (r, b, k, seed)));
        }
    }
    Ok(out)
}

fn execute_fleet(
    a: &SweepArgs,
    fleet: &args::Fleet,
    spec: &SweepSpec,
    shard: Option<Shard>,
    threads: usize,
) -> anyhow::Result<()> {
    use rayon::prelude::*;
    let runs = fleet_runs(fleet, spec, shard)?;
    let t = Instant::now();
    let one = |(cfg, p): &FleetRun| {
        let stream = cfg
            .base
            .workload
            .stream(cfg.base.seed, cfg.base.horizon_s)?;
        let rep = crate::fleet::run(cfg, stream);
        Ok::<_, anyhow::Error>((
            crate::fleet::summary_row(cfg, &rep, *p),
            crate::fleet::replica_rows(&rep, *p),
            rep.summary.arrivals,
        ))
    };
    let rows: Vec<(String, String, u64)> = if threads == 1 {
        runs.iter().map(one).collect::<anyhow::Result<_>>()?
    } else {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?
            .install(|| runs.par_iter().map(one).collect::<anyhow::Result<_>>())?
    };
    let secs = t.elapsed().as_secs_f64();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut summary = format!("{}\n", crate::fleet::SUMMARY_COLUMNS);
    let mut replicas = format!("{}\n", crate::fleet::REPLICA_COLUMNS);
    let mut requests = 0;
    for (s, r, n) in &rows {
        summary += s;
        summary.push('\n');
        replicas += r;
        requests += n;
    }
    let sp = a.out.join("fleet_summary.csv");
    let rp = a.out.join("fleet_replicas.csv");
    std::fs::write(&sp, summary).with_context(|| format!("writing {}", sp.display()))?;
    std::fs::write(&rp, replicas).with_context(|| format!("writing {}", rp.display()))?;
    eprintln!("wrote {} and {}", sp.display(), rp.display());
    println!(
        "sweep: {} fleet runs of {} replicas ({}), {requests} requests in {secs:.3} s on {threads} thread(s) ({:.2} M requests/s)",
        rows.len(),
        fleet.len(),
        fleet.router.name(),
        requests as f64 / secs.max(1e-9) / 1e6
    );
    Ok(())
}

/// `merge`: every input checked row by row ([`merge::check_summary`]); on any problem
/// nothing is written. The output is written beside itself and renamed into place, so it
/// is either the whole merge or untouched.
pub fn merge(a: MergeArgs) -> anyhow::Result<()> {
    let inputs: Vec<(String, String)> = a
        .inputs
        .iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            Ok((p.display().to_string(), text))
        })
        .collect::<anyhow::Result<_>>()?;
    let merged = merge::merge_checked(&inputs)?;
    let mut tmp = a.output.clone().into_os_string();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, merged).with_context(|| format!("writing {}", tmp.display()))?;
    if let Err(e) = std::fs::rename(&tmp, &a.output) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", a.output.display()));
    }
    eprintln!(
        "merged {} files into {}",
        a.inputs.len(),
        a.output.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards() {
        assert_eq!(parse_shard("2/8").unwrap(), (2, 8));
        assert!(parse_shard("8/8").is_err());
        assert!(parse_shard("x").is_err());
    }
}
