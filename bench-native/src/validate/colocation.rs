//! Replicas that share a machine slow each other down. Two llama-server replicas on one
//! 2-core host each run their steps ~35 % slower while the other one works (shared
//! caches, memory bandwidth, the host's scheduling of the vCPUs), which a microbenchmark
//! of one replica alone does not see.
//!
//! `validate --mb-beside URL,…` measures it. Right after the microbenchmark alone, the
//! same microbenchmark runs again while every listed server is kept busy (as many
//! streamed generations as the replica has slots, restarted as they end); the median
//! ratio of the two over their common points is the slowdown `s` beside busy neighbours.
//!
//! The fleet prediction then scales each replica's cost by `1 + (s − 1)·ρ`, ρ the
//! replicas' simulated busy fraction at that rate: a mean-field approximation, in which
//! a replica's neighbours are busy that fraction of the time whatever it is doing. ρ
//! itself grows with the factor, so the pair is found by fixed-point iteration from
//! ρ at `s` = 1. At saturation every replica is busy and the factor is `s`.

use super::errors::median;
use crate::client::{Endpoint, EndpointConfig};
use crate::microbench::{self, MicrobenchConfig, MicrobenchResult};
use crate::run::RunError;
use indicatif::ProgressBar;
use std::time::Duration;
use tokio::time::Instant;

/// What the microbenchmark beside busy neighbours measured, against the one alone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slowdown {
    /// Median ratio (beside / alone) of the prefill latencies.
    pub prefill: f64,
    /// Median ratio of the decode steps.
    pub decode: f64,
    /// Median ratio over every common point: `s`.
    pub factor: f64,
}

/// The slowdown of `beside` against `alone`, over the points both measured (prefills of
/// the same length, decodes of the same streams, slots and context); `None` if they
/// share none.
pub fn slowdown(alone: &MicrobenchResult, beside: &MicrobenchResult) -> Option<Slowdown> {
    let (prefill, decode) = ratios(alone, beside);
    let all: Vec<f64> = prefill.iter().chain(&decode).copied().collect();
    Some(Slowdown {
        prefill: median(prefill),
        decode: median(decode),
        factor: median(all),
    })
    .filter(|s| s.factor.is_finite())
}

/// How far the machine's speed moved between two microbenchmarks of the same points:
/// the median |b / a − 1| over their common points (0 if they share none).
pub fn drift(a: &MicrobenchResult, b: &MicrobenchResult) -> f64 {
    let (prefill, decode) = ratios(a, b);
    let d = median(
        prefill
            .iter()
            .chain(&decode)
            .map(|r| (r - 1.0).abs())
            .collect(),
    );
    if d.is_finite() {
        d
    } else {
        0.0
    }
}

/// The ratios b / a of the prefill latencies and of the decode steps at the points both
/// measured.
fn ratios(alone: &MicrobenchResult, beside: &MicrobenchResult) -> (Vec<f64>, Vec<f64>) {
    let prefill: Vec<f64> = alone
        .prefill
        .iter()
        .filter_map(|a| {
            let b = beside
                .prefill
                .iter()
                .find(|b| b.prompt_tokens == a.prompt_tokens)?;
            ratio(b.latency_s, a.latency_s)
        })
        .collect();
    let decode: Vec<f64> = alone
        .decode
        .iter()
        .filter_map(|a| {
            let b = beside.decode.iter().find(|b| {
                b.streams == a.streams
                    && b.slots == a.slots
                    && (b.context_tokens - a.context_tokens).abs() <= 0.1 * a.context_tokens
            })?;
            ratio(b.step_s, a.step_s)
        })
        .collect();
    (prefill, decode)
}

fn ratio(beside: f64, alone: f64) -> Option<f64> {
    let r = beside / alone;
    (r.is_finite() && r > 0.0).then_some(r)
}

/// The cost factor `f = 1 + (s − 1)·ρ(f)` and the busy fraction ρ it leaves, by
/// fixed-point iteration from `f` = 1; `busy(f)` is the replicas' mean simulated busy
/// fraction with the cost scaled by `f`. `s` = 1 gives (1, ρ(1)).
///
/// # Errors
/// Whatever `busy` returns.
pub fn factor(
    s: f64,
    mut busy: impl FnMut(f64) -> anyhow::Result<f64>,
) -> anyhow::Result<(f64, f64)> {
    let mut f = 1.0;
    let mut rho = busy(f)?;
    // ρ(f) rises with f and saturates at 1, so the map is a contraction for any
    // slowdown a shared machine produces; a few rounds settle it to 0.1 %.
    for _ in 0..8 {
        let next = 1.0 + (s - 1.0) * rho.clamp(0.0, 1.0);
        if (next - f).abs() < 1e-3 * f {
            return Ok((next, rho));
        }
        f = next;
        rho = busy(f)?;
    }
    Ok((f, rho))
}

/// Runs the microbenchmark `cfg` while every server of `neighbours` decodes `streams`
/// streamed generations of `tokens` tokens each, started again as they end, so they are
/// never idle; the neighbours' load stops when the microbenchmark ends (requests in
/// flight are dropped, which the server cancels).
///
/// # Errors
/// A neighbour that cannot be reached, or the microbenchmark's own errors.
pub async fn beside(
    cfg: &MicrobenchConfig,
    neighbours: &[String],
    streams: u32,
    tokens: u32,
) -> Result<MicrobenchResult, RunError> {
    let t0 = Instant::now();
    let mut load = Vec::new();
    for url in neighbours {
        let ep = Endpoint::connect(&EndpointConfig {
            url: url.clone(),
            ..cfg.endpoint.clone()
        })
        .await?;
        for i in 0..streams.max(1) {
            let body = ep.body(&format!("kvqueue neighbour {i}: keep decoding."), tokens);
            let (ep, timeout) = (ep.clone(), cfg.timeout);
            load.push(tokio::spawn(async move {
                loop {
                    let r = ep.stream(t0, &body, timeout).await;
                    if r.error.is_some() {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }));
        }
    }
    // the neighbours past their prompts and decoding before the first point
    tokio::time::sleep(Duration::from_millis(500)).await;
    // no idle probe: the neighbours keep the machine busy, and the wake-up is the
    // replica's own, measured alone
    let cfg = cfg.without_idle_probe();
    let result = microbench::microbench(&cfg, &ProgressBar::hidden()).await;
    for task in &load {
        task.abort();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microbench::{DecodePoint, PrefillPoint};

    fn mb(scale: f64) -> MicrobenchResult {
        MicrobenchResult {
            prefill: [16, 64, 224]
                .iter()
                .map(|&n| PrefillPoint {
                    prompt_tokens: n,
                    latency_s: 1e-3 * f64::from(n) * scale,
                    samples_s: Vec::new(),
                    server_prompt_s: None,
                })
                .collect(),
            decode: [1, 2]
                .iter()
                .map(|&n| DecodePoint {
                    streams: n,
                    step_s: 4e-3 * scale * (1.0 + 0.2 * f64::from(n)),
                    step_p50_s: 0.0,
                    gaps: 40,
                    context_tokens: 40.0 * f64::from(n),
                    slots: Vec::new(),
                    ubatches: 1,
                })
                .collect(),
            mixed: Vec::new(),
            cached: Vec::new(),
            idle: Vec::new(),
            budget: None,
            metadata: serde_json::Value::Null,
        }
    }

    #[test]
    fn the_slowdown_is_the_median_ratio_over_common_points() {
        let s = slowdown(&mb(1.0), &mb(1.4)).unwrap();
        assert!((s.factor - 1.4).abs() < 1e-12, "{s:?}");
        assert!((s.prefill - 1.4).abs() < 1e-12 && (s.decode - 1.4).abs() < 1e-12);
        // a point measured only beside (another context) is not compared
        let mut other = mb(1.4);
        other.decode[0].context_tokens = 400.0;
        other.decode[0].step_s = 1.0;
        other.prefill.clear();
        let s = slowdown(&mb(1.0), &other).unwrap();
        assert!((s.factor - 1.4).abs() < 1e-12, "{s:?}");
        // nothing in common: no slowdown, no drift
        other.decode.clear();
        assert_eq!(slowdown(&mb(1.0), &other), None);
        assert_eq!(drift(&mb(1.0), &other), 0.0);
        // the machine 10 % faster afterwards, then 10 % slower
        assert!((drift(&mb(1.0), &mb(0.9)) - 0.1).abs() < 1e-12);
        assert!((drift(&mb(1.0), &mb(1.1)) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn the_factor_solves_f_equals_one_plus_s_minus_one_times_rho() {
        // ρ rising with f: ρ = 0.5·f (capped at 1)
        let (f, rho) = factor(1.4, |f| Ok((0.5 * f).min(1.0))).unwrap();
        // f = 1 + 0.4·0.5·f → f = 1 / 0.8
        assert!((f - 1.25).abs() < 2e-3, "{f}");
        assert!((1.0 + 0.4 * rho - f).abs() < 2e-3 * f, "{f} {rho}");
        // no slowdown: the cost stays as fitted, one simulation
        let mut calls = 0;
        let (f, _) = factor(1.0, |_| {
            calls += 1;
            Ok(0.7)
        })
        .unwrap();
        assert_eq!((f, calls), (1.0, 1));
        // always busy: the full slowdown
        let (f, _) = factor(1.4, |_| Ok(1.0)).unwrap();
        assert!((f - 1.4).abs() < 1e-9);
    }
}
