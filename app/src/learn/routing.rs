//! Lesson 8, "Routing": N copies of lesson 5's server behind a router. Random routing
//! splits a Poisson stream into N Poisson streams, so each replica is an M/G/1 queue and
//! Pollaczek–Khinchine holds exactly; round-robin sends every N-th request, smoother
//! (Erlang-N gaps, c_a² = 1/N; Kingman); power of two choices and least outstanding look
//! at the queues and come close to one shared queue of N servers (Allen–Cunneen's M/G/N).

use super::ci::{ms, Check};
use super::variance::{service_moments, variance_params};
use super::{fmt_num, mean_of, quantile, reading, series, Control, LessonOutput};
use crate::chart::{Corner, XyPanel};
use crate::params::Params;
use engine::analytic::{AllenCunneen, Kingman, Mg1};
use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
use engine::metrics::Aggregate;
use engine::record::Outcome;

pub(super) const TEXT: &str = "N copies of lesson 5's server (one request at a time, lognormal outputs, c_s² ≈ 1.7) stand behind a router and share one Poisson stream, at utilisation ρ each; the router decides how long requests wait. A random router thins the stream into N Poisson streams, so every replica is an M/G/1 queue and Pollaczek–Khinchine gives its mean wait exactly: W_q = ρ/(1 − ρ) · (1 + c_s²)/2 · E[S]. Round-robin sends each replica every N-th request, whose gaps are Erlang-N (c_a² = 1/N), smoother than Poisson, and Kingman's formula with that c_a² says it waits less. Power of two choices asks two replicas and picks the shorter queue, least outstanding asks all of them, and both come close to the best a router can do: one shared queue feeding N servers (M/G/N, Allen–Cunneen's approximation).";

pub(super) const TRY: &str = "At N = 4 and ρ = 0.8, random routing waits about as long as one lone server at ρ = 0.8 — splitting the stream buys nothing, and P–K sits in the simulation's interval. Round-robin waits less, power of two choices much less, and least outstanding nearly matches the shared queue. Now raise N to 8: random stays where it was (each replica is still an M/G/1 at ρ), while the routers that look at the queues pull further ahead — pooling gains with N. Lower ρ to 0.5 and every router waits little: routing matters most when the replicas are busy.";

const NS: &[f64] = &[2.0, 4.0, 8.0];
const RHOS: &[f64] = &[0.5, 0.7, 0.8, 0.9];
/// Requests per replica in each run.
const PER_REPLICA: f64 = 1000.0;
const SIGMA: f64 = 1.0;
const CURVE_SEEDS: u64 = 2;
const CHECK_SEEDS: u64 = 16;

pub(super) const CONTROLS: &[Control] = &[
    Control {
        key: "n",
        label: "replicas N",
        steps: NS,
        default: 4.0,
    },
    Control {
        key: "rho",
        label: "utilisation ρ of each replica",
        steps: RHOS,
        default: 0.8,
    },
];

/// The routers of the lesson: (router, legend name, colour).
const ROUTERS: [(RouterKind, &str, u8); 4] = [
    (RouterKind::Random, "random", 0),
    (RouterKind::RoundRobin, "round-robin", 6),
    (RouterKind::PowerOfD { d: 2 }, "power of two choices", 7),
    (RouterKind::LeastOutstanding, "least outstanding", 8),
];

/// Each replica's server (lesson 5's at σ = 1), the fleet's stream at ρ per replica,
/// over a horizon of about [`PER_REPLICA`] requests per replica.
fn fleet(n: u32, rho: f64, router: RouterKind, es: f64, seed: u64) -> FleetConfig {
    let p: Params = variance_params(SIGMA);
    let mut cfg = p.sim_config(n as f64 * rho / es, seed);
    cfg.horizon_s = PER_REPLICA * es / rho;
    cfg.keep_records = true;
    FleetConfig::uniform(cfg, n, router)
}

/// Mean and p99 wait (arrival → admitted) of one seed's fleet run [s].
fn waits(cfg: &FleetConfig, runs: &mut u32) -> Result<(Option<f64>, Option<f64>), String> {
    *runs += 1;
    let rep = simulate_fleet(cfg).map_err(|e| e.to_string())?;
    let w: Vec<f64> = rep
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter_map(|r| r.admitted_s.map(|a| a - r.arrival_s))
        .collect();
    Ok((mean_of(w.iter().copied()), quantile(&w, 0.99)))
}

pub(super) fn run(n: f64, rho: f64) -> Result<LessonOutput, String> {
    let n = n.round().max(1.0) as u32;
    let mut runs = 0;
    let (es, es2) = service_moments(&variance_params(SIGMA));
    let cs2 = es2 / (es * es) - 1.0;
    let mut panels_series = Vec::new();
    let mut chosen = Vec::new();
    for (router, name, color) in ROUTERS {
        let mut pts = Vec::new();
        for &r in RHOS {
            let seeds = if router == RouterKind::Random && r == rho {
                CHECK_SEEDS
            } else {
                CURVE_SEEDS
            };
            let mut m = Vec::new();
            let mut q = Vec::new();
            for seed in 0..seeds {
                let (a, b) = waits(&fleet(n, r, router, es, seed), &mut runs)?;
                m.push(a);
                q.push(b);
            }
            let (mean, p99) = (Aggregate::of(m), Aggregate::of(q));
            if let Some(w) = mean.mean {
                pts.push((r, w));
            }
            if r == rho {
                chosen.push((name, mean, p99));
            }
        }
        panels_series.push(series(
            &format!("{name} (simulation, {CURVE_SEEDS} seeds)"),
            color,
            pts,
            false,
            true,
        ));
    }
    // The formulas, per replica at λ/N = ρ/E[S].
    let lambda1 = |r: f64| r / es;
    let pk = |r: f64| {
        Mg1::new(lambda1(r), es, es2)
            .ok()
            .and_then(|m| m.mean_wait().ok())
    };
    let kingman = |r: f64| {
        Kingman::new(lambda1(r), es, 1.0 / n as f64, cs2)
            .ok()
            .and_then(|k| k.mean_wait().ok())
    };
    let pooled = |r: f64| {
        AllenCunneen::new(n as f64 * lambda1(r), es, n, 1.0, cs2)
            .ok()
            .and_then(|m| m.mean_wait().ok())
    };
    let line = |f: &dyn Fn(f64) -> Option<f64>| -> Vec<(f64, f64)> {
        RHOS.iter().filter_map(|&r| f(r).map(|w| (r, w))).collect()
    };
    panels_series.push(series(
        "random: P–K (M/G/1 per replica)",
        1,
        line(&pk),
        true,
        false,
    ));
    panels_series.push(series(
        &format!("round-robin: Kingman, c_a² = 1/{n}"),
        2,
        line(&kingman),
        true,
        false,
    ));
    panels_series.push(series(
        &format!("one shared queue: M/G/{n} (Allen–Cunneen)"),
        3,
        line(&pooled),
        true,
        false,
    ));

    let mut readings = vec![reading(
        "each replica: E[S], c_s²",
        format!("{es:.2} s, {cs2:.2}"),
    )];
    for (name, mean, p99) in &chosen {
        readings.push(reading(
            format!("{name}: mean / p99 wait at ρ = {}", fmt_num(rho)),
            format!(
                "{} / {}",
                mean.mean.map(ms).unwrap_or_else(|| "—".into()),
                p99.mean.map(ms).unwrap_or_else(|| "—".into())
            ),
        ));
    }
    readings.push(reading(
        format!("formulas at ρ = {}: P–K · Kingman · M/G/{n}", fmt_num(rho)),
        [pk(rho), kingman(rho), pooled(rho)]
            .iter()
            .map(|w| w.map(ms).unwrap_or_else(|| "—".into()))
            .collect::<Vec<_>>()
            .join(" · "),
    ));
    let check = match (chosen.first(), pk(rho)) {
        (Some((_, mean, _)), Some(w)) => Some(
            Check {
                what: format!("random routing over N = {n}, mean wait at ρ = {}", fmt_num(rho)),
                sim: *mean,
                formula: ("P–K".into(), w),
                fmt: ms,
                why_not: Some(
                    "the interval is 95 %, so about one check in twenty misses by chance; another seed set would land elsewhere",
                ),
            }
            .verdict(),
        ),
        _ => None,
    };
    Ok(LessonOutput {
        panels: vec![XyPanel {
            x_desc: "utilisation ρ of each replica".into(),
            y_desc: "mean wait W_q (arrival → admitted) [s]".into(),
            series: panels_series,
            vlines: vec![(format!("ρ = {}", fmt_num(rho)), rho)],
            x_from_zero: false,
            legend: Corner::UpperLeft,
            ..XyPanel::default()
        }],
        readings,
        check,
        runs,
        ..LessonOutput::default()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{run, Lesson, LessonState};

    #[test]
    fn routing_lesson_checks_pollaczek_khinchine_and_orders_the_routers() {
        let out = run(&LessonState::new(Lesson::Routing)).unwrap();
        let (ok, text) = out.check.clone().unwrap();
        assert!(ok, "random routing is M/G/1 per replica: {text}");
        let s = &out.panels[0].series;
        let at = |i: usize| s[i].points.iter().find(|p| p.0 == 0.8).unwrap().1;
        let (random, rr, p2c, lor) = (at(0), at(1), at(2), at(3));
        assert!(
            random > rr && rr > p2c && p2c > lor,
            "random {random}, round-robin {rr}, p2c {p2c}, least outstanding {lor}"
        );
        // Least outstanding comes within reach of the shared queue's wait.
        let pooled = s[6].points.iter().find(|p| p.0 == 0.8).unwrap().1;
        assert!(
            lor < 2.0 * pooled && lor > 0.5 * pooled,
            "{lor} vs {pooled}"
        );
    }
}
