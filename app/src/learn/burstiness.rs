//! Lesson 7, "Burstiness": gamma arrivals of squared coefficient of variation c_a² at a
//! one-request-at-a-time server, Kingman's G/G/1 formula for the mean wait, and the tail:
//! why p99 moves more than the mean.

use super::ci::{ms, Check};
use super::variance::{service_moments, variance_params};
use super::{fmt_num, mean_of, quantile, reading, series, sim, Control, LessonOutput};
use crate::chart::{Corner, XyPanel};
use crate::params::{Arrivals, Params};
use engine::analytic::{ca2_from_burstiness, Kingman};
use engine::metrics::Aggregate;
use engine::record::Outcome;

pub(super) const TEXT: &str = "Requests rarely arrive like a Poisson process: a batch job, a retry storm or a busy hour makes them bunch up. Kingman's formula for a single server says how much that costs: W_q ≈ ρ/(1 − ρ) · (c_a² + c_s²)/2 · E[S], where c_a² measures the arrivals' variability as c_s² does the service's (Poisson: c_a² = 1, the Pollaczek–Khinchine case). Here arrivals are gamma with c_a² from 0.25 (smoother than Poisson) to 8 (bursts), and the server of lesson 5 serves one request at a time with lognormal outputs (c_s² ≈ 1.7). The wait's tail is about exponential, so its p99 is a multiple of its mean: every millisecond the mean gains, the p99 gains several.";

pub(super) const TRY: &str = "Start at c_a² = 1 (Poisson): Kingman is exactly Pollaczek–Khinchine and sits in the simulation's interval. Move to c_a² = 4: the mean wait about doubles, as (c_a² + c_s²)/2 says, but the p99 climbs by several seconds — the same bursts, seen in the tail. Go down to 0.25: arrivals smoother than Poisson wait less, and Kingman, a heavy-traffic approximation, now errs on the safe side. Then raise ρ to 0.9 and watch every curve steepen.";

const CA2S: &[f64] = &[0.25, 0.5, 1.0, 2.0, 4.0, 8.0];
const RHOS: &[f64] = &[0.5, 0.6, 0.7, 0.8, 0.9];

pub(super) const CONTROLS: &[Control] = &[
    Control {
        key: "ca2",
        label: "arrival burstiness c_a² (gamma shape k = 1/c_a²)",
        steps: CA2S,
        default: 1.0,
    },
    Control {
        key: "rho",
        label: "utilisation ρ",
        steps: RHOS,
        default: 0.8,
    },
];

/// Lognormal σ of the outputs (lesson 5's server at this spread).
const SIGMA: f64 = 1.0;
const CURVE_SEEDS: u64 = 3;
const CHECK_SEEDS: u64 = 16;

/// Lesson 7's server and traffic: lesson 5's server, gamma arrivals of shape 1/c_a² at
/// utilisation `rho`.
pub(super) fn burstiness_params(ca2: f64, rho: f64) -> Params {
    let p = variance_params(SIGMA);
    let es = service_moments(&p).0;
    Params {
        arrivals: Arrivals::Gamma,
        burstiness: 1.0 / ca2,
        rate: rho / es,
        ..p
    }
}

/// Mean and p99 wait (arrival → admitted) of one seed's run [s].
fn waits(p: &Params, seed: u64, runs: &mut u32) -> Result<(Option<f64>, Option<f64>), String> {
    let mut cfg = p.sim_config(p.rate, seed);
    cfg.keep_records = true;
    let rep = sim(&cfg, runs)?;
    let w: Vec<f64> = rep
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter_map(|r| r.admitted_s.map(|a| a - r.arrival_s))
        .collect();
    Ok((mean_of(w.iter().copied()), quantile(&w, 0.99)))
}

pub(super) fn run(ca2: f64, rho: f64) -> Result<LessonOutput, String> {
    let mut runs = 0;
    let p0 = variance_params(SIGMA);
    let (es, es2) = service_moments(&p0);
    let cs2 = es2 / (es * es) - 1.0;
    let (mut s_mean, mut s_p99, mut k_mean, mut k_p99) = (vec![], vec![], vec![], vec![]);
    let mut chosen = None;
    for &c in CA2S {
        let p = burstiness_params(c, rho);
        let seeds = if c == ca2 { CHECK_SEEDS } else { CURVE_SEEDS };
        let mut m = Vec::new();
        let mut q = Vec::new();
        for seed in 0..seeds {
            let (a, b) = waits(&p, seed, &mut runs)?;
            m.push(a);
            q.push(b);
        }
        let mean = Aggregate::of(m);
        let p99 = Aggregate::of(q);
        let ca2_k = ca2_from_burstiness(p.burstiness).map_err(|e| e.to_string())?;
        let kingman = Kingman::new(p.rate, es, ca2_k, cs2)
            .ok()
            .and_then(|k| k.mean_wait().ok());
        if let (Some(a), Some(b)) = (mean.mean, p99.mean) {
            s_mean.push((c, a));
            s_p99.push((c, b));
        }
        if let Some(w) = kingman {
            k_mean.push((c, w));
            // An exponential tail: P(W > x) ≈ ρ e^(−ρx/W_q), so p99 ≈ (W_q/ρ) ln(100 ρ).
            k_p99.push((c, w / rho * (100.0 * rho).ln()));
        }
        if c == ca2 {
            chosen = Some((mean, p99, kingman));
        }
    }
    let (mean, p99, kingman) =
        chosen.ok_or_else(|| format!("c_a² = {ca2} is not one of the lesson's steps"))?;
    let base = s_mean.iter().find(|x| x.0 == 1.0).copied();
    let base99 = s_p99.iter().find(|x| x.0 == 1.0).copied();
    let mut readings = vec![
        reading("service: E[S], c_s²", format!("{es:.2} s, {cs2:.2}")),
        reading(
            format!("mean wait at c_a² = {}", fmt_num(ca2)),
            format!(
                "{} simulated · {} Kingman",
                mean.mean.map(ms).unwrap_or_default(),
                kingman.map(ms).unwrap_or_else(|| "—".into())
            ),
        ),
        reading(
            format!("p99 wait at c_a² = {}", fmt_num(ca2)),
            p99.mean.map(ms).unwrap_or_default(),
        ),
    ];
    if let (Some(b), Some(b99), Some(m), Some(q)) = (base, base99, mean.mean, p99.mean) {
        readings.push(reading(
            "change from Poisson (c_a² = 1)",
            format!(
                "mean {:+.0} ms · p99 {:+.0} ms",
                (m - b.1) * 1e3,
                (q - b99.1) * 1e3
            ),
        ));
    }
    let check = kingman.map(|k| {
        Check {
            what: format!("mean wait at c_a² = {}, ρ = {rho}", fmt_num(ca2)),
            sim: mean,
            formula: ("Kingman".into(), k),
            fmt: ms,
            why_not: Some(if ca2 == 1.0 {
                "with Poisson arrivals Kingman is the exact P–K formula, so only chance (one check in twenty) puts it outside"
            } else {
                "Kingman's formula is a heavy-traffic approximation, exact only for Poisson arrivals (where it is P–K) or as ρ → 1; at moderate ρ it overstates the wait of smooth arrivals and misses some of the bursts' effect"
            }),
        }
        .verdict()
    });
    Ok(LessonOutput {
        panels: vec![XyPanel {
            x_desc: "arrival burstiness c_a²".into(),
            y_desc: "wait (arrival → admitted) [s]".into(),
            series: vec![
                series(
                    &format!("mean wait (simulation, {CURVE_SEEDS} seeds)"),
                    0,
                    s_mean,
                    false,
                    true,
                ),
                series("Kingman", 1, k_mean, true, false),
                series(
                    &format!("p99 wait (simulation, {CURVE_SEEDS} seeds)"),
                    6,
                    s_p99,
                    false,
                    true,
                ),
                series(
                    "exponential tail from Kingman: (W_q/ρ)·ln(100ρ)",
                    2,
                    k_p99,
                    true,
                    false,
                ),
            ],
            vlines: vec![(format!("c_a² = {}", fmt_num(ca2)), ca2)],
            x_log2: true,
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
    fn burstiness_lesson_checks_kingman_and_the_tail_moves_more() {
        let poisson = run(&LessonState::new(Lesson::Burstiness)).unwrap();
        let (ok, text) = poisson.check.clone().unwrap();
        assert!(ok, "Kingman = P–K at c_a² = 1: {text}");
        let s = &poisson.panels[0].series;
        let at = |i: usize, x: f64| s[i].points.iter().find(|p| p.0 == x).unwrap().1;
        // From Poisson to c_a² = 4 the p99 gains more than the mean.
        let dm = at(0, 4.0) - at(0, 1.0);
        let dq = at(2, 4.0) - at(2, 1.0);
        assert!(dm > 0.0 && dq > 2.0 * dm, "mean +{dm}, p99 +{dq}");
    }
}
