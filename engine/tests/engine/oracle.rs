//! Oracle tests: the simulator against closed forms where they are exact (M/M/1, M/D/1,
//! Erlang B), tolerances from `tol`.

use super::*;

/// Oracle workload: a single server whose service time is (output − 1) decode steps of
/// `d`, prefill free, first token at prefill: TTFT is exactly the M/G/1 queueing delay.
fn mg1_config(pairs: Vec<(u32, u32)>, rate: f64, d: f64, horizon: f64) -> SimConfig {
    SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths: LengthDist::Empirical { pairs },
            max_model_len: None,
            shared: None,
        },
        server: ServerConfig {
            policy: Policy::Serial,
            max_batch: 1,
            kv_tokens: 1 << 40,
            ..ServerConfig::default()
        },
        cost: CostModel::Table(TableCost {
            decode: vec![(1.0, d)],
            prefill: vec![(0.0, 0.0)],
        }),
        horizon_s: horizon,
        end: EndRule::Drain,
        first_token: FirstToken::AfterPrefill,
        metrics: MetricsConfig::default(),
        seed: 3,
        keep_records: false,
        timeseries_points: 0,
    }
}

/// Pollaczek–Khinchine mean wait for service S = (out − 1)·d.
fn pk_wait(pairs: &[(u32, u32)], rate: f64, d: f64) -> f64 {
    let n = pairs.len() as f64;
    let s1 = pairs.iter().map(|p| (p.1 - 1) as f64 * d).sum::<f64>() / n;
    let s2 = pairs
        .iter()
        .map(|p| ((p.1 - 1) as f64 * d).powi(2))
        .sum::<f64>()
        / n;
    let rho = rate * s1;
    assert!(rho < 1.0);
    rate * s2 / (2.0 * (1.0 - rho))
}

#[test]
fn oracle_mm1_mean_wait() {
    // Geometric output (mean 200) ≈ exponential service with mean ~1 s; ρ = 0.6.
    let n = 4000;
    let p = 1.0 / 200.0;
    let pairs: Vec<(u32, u32)> = (0..n)
        .map(|i| {
            let u = (i as f64 + 0.5) / n as f64;
            (1, 2 + ((1.0 - u).ln() / (1.0f64 - p).ln()).floor() as u32)
        })
        .collect();
    let (rate, d) = (0.6, 0.005);
    let cfg = mg1_config(pairs.clone(), rate, d, 200_000.0);
    let rep = simulate(&cfg).unwrap();
    let want = pk_wait(&pairs, rate, d);
    let got = rep.summary.ttft.mean.unwrap();
    assert!(
        (got - want).abs() / want < tol::ORACLE_MEAN_REL,
        "M/M/1 wait: sim {got} vs exact {want}"
    );
    // M/M/1: the wait is 0 with probability 1 − ρ, so the median TTFT is ~0 at ρ = 0.6... and
    // P(W > t) = ρ e^{−(μ−λ)t}: the p95 is ln(ρ/0.05)/(μ−λ).
    let mean_s: f64 = pairs.iter().map(|p| (p.1 - 1) as f64 * d).sum::<f64>() / n as f64;
    let rho = rate * mean_s;
    let p95 = (rho / 0.05).ln() / (1.0 / mean_s - rate);
    let got95 = rep.summary.ttft.p95.unwrap();
    assert!(
        (got95 - p95).abs() / p95 < 0.08,
        "M/M/1 p95 wait: sim {got95} vs {p95}"
    );
}

#[test]
fn oracle_md1_mean_wait() {
    let pairs = vec![(1, 201)]; // deterministic 1 s service
    let (rate, d) = (0.7, 0.005);
    let rep = simulate(&mg1_config(pairs.clone(), rate, d, 30_000.0)).unwrap();
    let want = pk_wait(&pairs, rate, d); // ρ/(2μ(1−ρ)) = 0.7/(2·0.3) = 1.1667
    let got = rep.summary.ttft.mean.unwrap();
    assert!((want - 7.0 / 6.0).abs() < 1e-9);
    assert!(
        (got - want).abs() / want < tol::ORACLE_MEAN_REL,
        "M/D/1 wait: sim {got} vs exact {want}"
    );
}

fn erlang_b(c: u32, a: f64) -> f64 {
    (1..=c).fold(1.0, |b, k| a * b / (k as f64 + a * b))
}

#[test]
fn oracle_erlang_b_reserve_loss() {
    // Each request reserves 100 tokens; K = 400 → c = 4 "servers"; B large so nobody waits.
    // Decode step constant (flat table), prefill free: holding time = (out − 1)·d plus the
    // wait for the next iteration boundary (d/2 on average). Erlang B is insensitive to the
    // holding-time distribution.
    let (c, d, out) = (4u32, 0.01, 100u32);
    let rate = 3.0;
    let cfg = SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths: LengthDist::Fixed {
                prompt: 1,
                output: out - 1,
            },
            max_model_len: None,
            shared: None,
        },
        server: ServerConfig {
            policy: Policy::Continuous,
            max_batch: 64,
            kv_tokens: 400,
            ..ServerConfig::default()
        },
        cost: CostModel::Table(TableCost {
            decode: vec![(1.0, d)],
            prefill: vec![(0.0, 0.0)],
        }),
        horizon_s: 40_000.0,
        ..mg1_config(vec![(1, 2)], rate, d, 1.0)
    };
    let rep = simulate(&cfg).unwrap();
    let hold = (out - 2) as f64 * d + d / 2.0;
    let want = erlang_b(c, rate * hold);
    let got = rep.summary.blocking_probability;
    assert!(
        (got - want).abs() < tol::ERLANG_B_ABS,
        "Erlang B: sim {got} vs exact {want}"
    );
}
