//! `bench-native compare --fleet`: the analytical fleet models
//! (`engine::analytic::predict_fleet`) against the fleet simulator on a grid of replica
//! counts × routers × loads (`docs/accuracy.md`, Fleets).
//!
//! Each grid point is a fleet of N copies of the base server at a fraction of the
//! fleet's capacity (N × the server's binding capacity bound). The yardstick is what the
//! model predicts: the mean and p99 TTFT of a request in a run of the horizon from an
//! empty fleet, read from every seed's requests pooled (one distribution, not a mean of
//! per-seed p99s: a seed's p99 over a few hundred requests is biased low, and the more so
//! the fewer requests a seed has). Its own noise is the relative standard error of the
//! pooled values from [`GROUPS`] groups of seeds, each pooled alike (the groups' standard
//! deviation / √groups / value), the error a perfect model of the expectation would still
//! show on average. The seeds' mean of their own mean and p99 TTFT is kept beside it.

use super::{fmt_time, pct};
use anyhow::Context;
use engine::analytic::{capacity_bounds, predict_fleet, ModelKind, Prediction};
use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
use engine::metrics::Accumulator;
use engine::{KvMode, SimConfig};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

/// The fleet grid of `compare --fleet`.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetGrid {
    pub replicas: Vec<u32>,
    pub routers: Vec<RouterKind>,
    /// Fractions of the fleet's capacity.
    pub loads: Vec<f64>,
    pub seeds: Vec<u64>,
}

/// Groups of seeds the yardstick's noise is estimated from (seed i in group i mod 10).
pub const GROUPS: usize = 10;

/// One grid point: the yardstick's pooled and per-seed values and the model's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetRow {
    pub replicas: u32,
    pub router: RouterKind,
    pub load: f64,
    pub rate: f64,
    /// Per seed: (mean TTFT, p99 TTFT) [s] (seeds with no completion left out).
    pub sim: Vec<(f64, f64)>,
    /// Every seed's completed requests pooled: (mean TTFT, p99 TTFT) [s].
    pub pooled: Option<(f64, f64)>,
    /// The same per group of seeds (groups with no completion left out).
    pub groups: Vec<(f64, f64)>,
    /// (mean, p99) TTFT [s], or why there is none.
    pub model: Result<(f64, f64), String>,
    /// Seconds per `predict_fleet` call.
    pub model_s: f64,
}

impl FleetRow {
    /// The pooled (mean TTFT, p99 TTFT), each with its relative standard error from the
    /// groups of seeds (at least two groups needed).
    pub fn yardstick(&self) -> Option<[(f64, f64); 2]> {
        let (mean, p99) = self.pooled?;
        let [(_, m_rse), (_, p_rse)] = mean_and_rse(&self.groups)?;
        Some([(mean, m_rse), (p99, p_rse)])
    }

    /// The seeds' mean of their own (mean TTFT, p99 TTFT), each with its relative
    /// standard error (at least two seeds needed).
    pub fn seed_mean(&self) -> Option<[(f64, f64); 2]> {
        mean_and_rse(&self.sim)
    }

    /// Relative errors of the model's (mean, p99) against the yardstick.
    pub fn errors(&self) -> Option<(f64, f64)> {
        Some(rel_errors(self.yardstick()?, self.model.as_ref().ok()?))
    }

    /// Relative errors of the model's (mean, p99) against the seeds' mean of their own.
    pub fn seed_mean_errors(&self) -> Option<(f64, f64)> {
        Some(rel_errors(self.seed_mean()?, self.model.as_ref().ok()?))
    }
}

fn rel_errors(y: [(f64, f64); 2], model: &(f64, f64)) -> (f64, f64) {
    let [(m, _), (p, _)] = y;
    let (am, ap) = model;
    ((am - m).abs() / m, (ap - p).abs() / p)
}

/// Mean and relative standard error of the mean (sd / √n / mean) of each component.
fn mean_and_rse(v: &[(f64, f64)]) -> Option<[(f64, f64); 2]> {
    let n = v.len();
    if n < 2 {
        return None;
    }
    let stat = |f: fn(&(f64, f64)) -> f64| {
        let m = v.iter().map(f).sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (f(x) - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        (m, (var / n as f64).sqrt() / m)
    };
    Some([stat(|x| x.0), stat(|x| x.1)])
}

/// (mean, p99) TTFT [s] of what `acc` has counted.
fn ttft_of(acc: Accumulator) -> Option<(f64, f64)> {
    let t = acc.finish(0.0).ttft;
    t.mean.zip(t.p99)
}

/// One grid point's simulations: per seed (mean, p99) TTFT, the seeds' requests pooled
/// and pooled per group of seeds.
struct Simulated {
    per_seed: Vec<(f64, f64)>,
    pooled: Option<(f64, f64)>,
    groups: Vec<(f64, f64)>,
}

/// Simulates `f` on every seed, the groups of seeds in parallel.
fn simulate_point(f: &FleetConfig, seeds: &[u64]) -> Result<Simulated, engine::ConfigError> {
    let groups = GROUPS.min(seeds.len());
    let parts = (0..groups)
        .into_par_iter()
        .map(|g| {
            let mut acc = Accumulator::new(f.base.metrics.clone());
            let mut per_seed = Vec::new();
            for &seed in seeds.iter().skip(g).step_by(groups) {
                let mut one = f.clone();
                one.base.seed = seed;
                one.base.keep_records = true;
                let r = simulate_fleet(&one)?;
                per_seed.extend(r.summary.ttft.mean.zip(r.summary.ttft.p99));
                for rec in &r.records {
                    acc.push(rec);
                }
            }
            Ok((per_seed, acc))
        })
        .collect::<Result<Vec<_>, engine::ConfigError>>()?;
    let mut all = Accumulator::new(f.base.metrics.clone());
    let mut out = Simulated {
        per_seed: Vec::new(),
        pooled: None,
        groups: Vec::new(),
    };
    for (per_seed, acc) in parts {
        all.merge(&acc);
        out.per_seed.extend(per_seed);
        out.groups.extend(ttft_of(acc));
    }
    out.pooled = ttft_of(all);
    Ok(out)
}

/// Simulates and predicts every grid point (`base` is the one-server configuration; its
/// rate is replaced).
///
/// # Errors
/// A configuration the fleet simulator rejects.
pub fn evaluate(base: &SimConfig, grid: &FleetGrid) -> anyhow::Result<Vec<FleetRow>> {
    let cap = capacity_bounds(base)
        .context("capacity of the base server")?
        .max_rps();
    let mut points = Vec::new();
    for &router in &grid.routers {
        for &n in &grid.replicas {
            for &load in &grid.loads {
                let rate = load * cap * f64::from(n);
                let mut one = base.clone();
                one.workload = one.workload.with_rate(rate);
                if router == RouterKind::KvAware {
                    one.server.kv_mode = KvMode::Paged;
                }
                points.push((n, router, load, rate, FleetConfig::uniform(one, n, router)));
            }
        }
    }
    let sims = points
        .par_iter()
        .map(|p| simulate_point(&p.4, &grid.seeds))
        .collect::<Result<Vec<_>, engine::ConfigError>>()?;
    let rows: Vec<FleetRow> = points
        .iter()
        .zip(sims)
        .map(|((n, router, load, rate, f), sim)| {
            let t = Instant::now();
            let model = match predict_fleet(ModelKind::Batching, f) {
                Ok(p) => match p.fleet {
                    Prediction::Stable(m) => Ok((m.ttft_mean_s, m.ttft_p99_s)),
                    Prediction::Unstable { rho } => Err(format!("unstable: ρ = {rho:.3}")),
                },
                Err(e) => Err(e.to_string()),
            };
            FleetRow {
                replicas: *n,
                router: *router,
                load: *load,
                rate: *rate,
                sim: sim.per_seed,
                pooled: sim.pooled,
                groups: sim.groups,
                model,
                model_s: t.elapsed().as_secs_f64(),
            }
        })
        .collect();
    Ok(rows)
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// The markdown tables: per router, then mean-TTFT and p99 errors by router × N.
pub fn markdown(rows: &[FleetRow], grid: &FleetGrid) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| router | predicted | mean TTFT MRE | p99 TTFT MRE | p99 max RE | yardstick noise (mean / p99) | MRE against the seeds' mean (mean / p99) | time / config (mean) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for &router in &grid.routers {
        let of: Vec<&FleetRow> = rows.iter().filter(|r| r.router == router).collect();
        let errs: Vec<(f64, f64)> = of.iter().filter_map(|r| r.errors()).collect();
        let noise: Vec<[(f64, f64); 2]> = of.iter().filter_map(|r| r.yardstick()).collect();
        let seed_errs: Vec<(f64, f64)> = of.iter().filter_map(|r| r.seed_mean_errors()).collect();
        let _ = writeln!(
            s,
            "| {} | {}/{} | {} | {} | {} | {} / {} | {} / {} | {} |",
            router.name(),
            errs.len(),
            of.len(),
            pct(mean(errs.iter().map(|e| e.0))),
            pct(mean(errs.iter().map(|e| e.1))),
            pct(errs.iter().map(|e| e.1).reduce(f64::max)),
            pct(mean(noise.iter().map(|y| y[0].1))),
            pct(mean(noise.iter().map(|y| y[1].1))),
            pct(mean(seed_errs.iter().map(|e| e.0))),
            pct(mean(seed_errs.iter().map(|e| e.1))),
            fmt_time(mean(of.iter().map(|r| r.model_s)).unwrap_or(0.0)),
        );
    }
    for (title, pick) in [("mean TTFT", 0usize), ("p99 TTFT", 1usize)] {
        let _ = write!(s, "\n{title} MRE by replicas N:\n\n| router |");
        for n in &grid.replicas {
            let _ = write!(s, " N = {n} |");
        }
        let _ = write!(s, "\n|---|");
        for _ in &grid.replicas {
            let _ = write!(s, "---:|");
        }
        s.push('\n');
        for &router in &grid.routers {
            let _ = write!(s, "| {} |", router.name());
            for &n in &grid.replicas {
                let e = mean(
                    rows.iter()
                        .filter(|r| r.router == router && r.replicas == n)
                        .filter_map(|r| r.errors())
                        .map(|e| if pick == 0 { e.0 } else { e.1 }),
                );
                let _ = write!(s, " {} |", pct(e));
            }
            s.push('\n');
        }
    }
    s
}

/// One row per grid point.
pub fn configs_csv(rows: &[FleetRow]) -> String {
    let mut s = String::from(
        "router,replicas,load,rate_rps,seeds,sim_ttft_mean_s,sim_ttft_mean_rse,sim_ttft_p99_s,sim_ttft_p99_rse,seed_mean_ttft_mean_s,seed_mean_ttft_p99_s,model_ttft_mean_s,model_ttft_p99_s,model_status\n",
    );
    for r in rows {
        let y = r.yardstick();
        let sm = r.seed_mean();
        let f = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
        let (am, ap, status) = match &r.model {
            Ok((m, p)) => (Some(*m), Some(*p), "predicted".to_string()),
            Err(e) => (None, None, format!("\"{}\"", e.replace('"', "'"))),
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.router.name(),
            r.replicas,
            r.load,
            r.rate,
            r.sim.len(),
            f(y.map(|y| y[0].0)),
            f(y.map(|y| y[0].1)),
            f(y.map(|y| y[1].0)),
            f(y.map(|y| y[1].1)),
            f(sm.map(|y| y[0].0)),
            f(sm.map(|y| y[1].0)),
            f(am),
            f(ap),
            status,
        );
    }
    s
}

/// Runs the fleet comparison and writes `<name>.md` and `<name>_configs.csv` to `out`.
///
/// # Errors
/// An invalid grid or an unwritable output directory.
pub fn execute(
    base: &SimConfig,
    grid: &FleetGrid,
    threads: usize,
    out: &Path,
    name: &str,
    cmd: &str,
) -> anyhow::Result<()> {
    if grid.replicas.contains(&0) {
        anyhow::bail!("--fleet-replicas: a fleet has at least 1 replica, got 0");
    }
    if let Some(l) = grid.loads.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
        anyhow::bail!("--fleet-loads: each load is a fraction of capacity > 0, got {l}");
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let t = Instant::now();
    let rows = pool.install(|| evaluate(base, grid))?;
    let secs = t.elapsed().as_secs_f64();
    let cap = capacity_bounds(base)?.max_rps();
    let mut md = format!(
        "# Fleet models vs the fleet simulator: {name}\n\nCommand: `{cmd}`\n\n\
Grid: N {:?} replicas × routers {} × load {:?} of the fleet's capacity (N × {cap:.3} req/s, \
the server's binding capacity bound) = {} configs; seeds {}–{} ({}); horizon {} s; server B {}, \
K {} tokens, policy {}, KV mode {:?} (paged for kv_aware). Model: the batching model per \
replica behind `predict_fleet`.\n\n\
Simulated values are the mean and p99 TTFT of every seed's completed requests pooled (what \
the model predicts: a request's TTFT in a run of the horizon from an empty fleet). MRE = mean \
over predicted configs of |model − sim| / |sim|. Yardstick noise = mean over configs of the \
pooled values' relative standard error, from {GROUPS} groups of seeds pooled alike (sd / \
√groups / value): what a perfect model of the expectation would still miss by on average. \
\"Against the seeds' mean\": the MRE against the mean over seeds of each seed's own mean and \
p99 TTFT instead, biased low for p99 when a seed has few requests.\n\n",
        grid.replicas,
        grid.routers
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(", "),
        grid.loads,
        rows.len(),
        grid.seeds.iter().min().unwrap_or(&0),
        grid.seeds.iter().max().unwrap_or(&0),
        grid.seeds.len(),
        base.horizon_s,
        base.server.max_batch,
        base.server.kv_tokens,
        base.server.policy.as_str(),
        base.server.kv_mode,
    );
    md.push_str(&markdown(&rows, grid));
    let runs = rows.len() * grid.seeds.len();
    let _ = writeln!(
        md,
        "\nSimulation and models: {runs} fleet runs in {secs:.1} s on {threads} thread(s)."
    );
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let md_path = out.join(format!("{name}.md"));
    let cfg_path = out.join(format!("{name}_configs.csv"));
    std::fs::write(&md_path, &md).with_context(|| format!("writing {}", md_path.display()))?;
    std::fs::write(&cfg_path, configs_csv(&rows))
        .with_context(|| format!("writing {}", cfg_path.display()))?;
    println!("{md}");
    eprintln!("wrote {} and {}", md_path.display(), cfg_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fleet_grid_is_simulated_and_scored() {
        let mut base = SimConfig::reference(1.0, 8, 8192);
        base.horizon_s = 50.0;
        let grid = FleetGrid {
            replicas: vec![1, 2],
            routers: vec![RouterKind::RoundRobin, RouterKind::LeastOutstanding],
            loads: vec![0.5],
            seeds: vec![0, 1, 2],
        };
        let rows = evaluate(&base, &grid).unwrap();
        assert_eq!(rows.len(), 4);
        for r in &rows {
            assert_eq!(r.sim.len(), 3, "{r:?}");
            let (em, ep) = r.errors().expect("predicted and simulated");
            assert!(em.is_finite() && ep.is_finite());
            // Three seeds make three groups of one: each group's pooled records give
            // that seed's own summary (the mean summed in another order).
            let mut groups = r.groups.clone();
            let mut seeds = r.sim.clone();
            groups.sort_by(|a, b| a.0.total_cmp(&b.0));
            seeds.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (g, s) in groups.iter().zip(&seeds) {
                assert!((g.0 - s.0).abs() < 1e-12 * s.0 && g.1 == s.1, "{g:?} {s:?}");
            }
            // The pooled p99 lies within the seeds' p99s; the pooled mean is the seeds'
            // means weighted by their requests, so within them too.
            let (m, p) = r.pooled.unwrap();
            let within = |x: f64, f: fn(&(f64, f64)) -> f64| {
                let lo = r.sim.iter().map(f).fold(f64::INFINITY, f64::min);
                let hi = r.sim.iter().map(f).fold(0.0, f64::max);
                lo <= x && x <= hi
            };
            assert!(within(m, |x| x.0) && within(p, |x| x.1), "{r:?}");
            assert!(r.seed_mean_errors().is_some());
        }
        // One replica: every router is the same simulation and the same model.
        assert_eq!(rows[0].sim, rows[2].sim);
        assert_eq!(rows[0].model, rows[2].model);
        let md = markdown(&rows, &grid);
        assert!(md.contains("| round_robin | 2/2 |"), "{md}");
        let csv = configs_csv(&rows);
        assert_eq!(csv.lines().count(), 5);
        assert!(csv
            .lines()
            .all(|l| l.split(',').count() == csv.lines().next().unwrap().split(',').count()));
    }
}
