//! How a prediction is scored against a measurement: the compared metrics, relative
//! errors, the medians the report gives, and the pooling of two microbenchmarks.

use super::colocation::Slowdown;
use crate::microbench::{DecodePoint, MicrobenchResult, MixedPoint, PrefillPoint};
use engine::metrics::Summary;
use std::path::PathBuf;

/// Reads one metric from a summary.
pub type Getter = fn(&Summary) -> Option<f64>;

/// The metrics compared, with how to read them from a summary.
pub const METRICS: [(&str, Getter); 6] = [
    ("ttft_mean_s", |s| s.ttft.mean),
    ("ttft_p50_s", |s| s.ttft.p50),
    ("ttft_p99_s", |s| s.ttft.p99),
    ("tpot_mean_s", |s| s.tpot.mean),
    ("e2e_mean_s", |s| s.e2e.mean),
    ("throughput_rps", |s| Some(s.throughput_rps)),
];

/// The metrics a fleet prediction is scored on (`--replicas` > 1): mean and p99 of TTFT
/// and of TPOT.
pub const FLEET_METRICS: [(&str, Getter); 4] = [
    ("ttft_mean_s", |s| s.ttft.mean),
    ("ttft_p99_s", |s| s.ttft.p99),
    ("tpot_mean_s", |s| s.tpot.mean),
    ("tpot_p99_s", |s| s.tpot.p99),
];

/// One rate's comparison.
#[derive(Clone, Debug)]
pub struct RateResult {
    pub rate: f64,
    /// Rate / predicted saturation throughput.
    pub load: f64,
    pub predicted: Summary,
    /// The prediction of the other cost model.
    pub predicted_alt: Summary,
    pub measured: Summary,
    /// The same trace measured again, in later rounds (`--rounds`).
    pub repeats: Vec<Summary>,
    /// With `--mb-beside`: (cost factor, the replicas' simulated busy fraction) of the
    /// co-location model at this rate (`validate::colocation`).
    pub colocation: Option<(f64, f64)>,
}

impl RateResult {
    /// (metric, predicted, measured, relative error) for every compared metric.
    pub fn errors(&self, alt: bool) -> Vec<(&'static str, f64, f64, f64)> {
        let p = if alt {
            &self.predicted_alt
        } else {
            &self.predicted
        };
        relative_differences(p, &self.measured).collect()
    }

    /// |relative difference| of every later round from the first, over every metric
    /// ((repeat − first) / first, as a prediction's error would be).
    pub fn repeat_differences(&self) -> Vec<f64> {
        let first = &self.measured;
        self.repeats
            .iter()
            .flat_map(|rep| relative_differences(rep, first).map(|c| c.3.abs()))
            .collect()
    }

    /// |relative error| of the prediction against every later round, over every metric.
    pub fn errors_against_repeats(&self) -> Vec<f64> {
        self.repeats
            .iter()
            .flat_map(|rep| relative_differences(&self.predicted, rep).map(|c| c.3.abs()))
            .collect()
    }
}

/// (metric, a, b, (a − b) / b) for every compared metric (NaN where either has no value).
fn relative_differences<'a>(
    a: &'a Summary,
    b: &'a Summary,
) -> impl Iterator<Item = (&'static str, f64, f64, f64)> + 'a {
    relative_differences_over(&METRICS, a, b)
}

/// (metric, a, b, (a − b) / b) for each of `metrics`.
pub fn relative_differences_over<'a>(
    metrics: &'a [(&'static str, Getter)],
    a: &'a Summary,
    b: &'a Summary,
) -> impl Iterator<Item = (&'static str, f64, f64, f64)> + 'a {
    metrics.iter().map(move |(name, get)| {
        let (x, y) = (get(a).unwrap_or(f64::NAN), get(b).unwrap_or(f64::NAN));
        (*name, x, y, (x - y) / y)
    })
}

/// Everything `validate` produced.
#[derive(Clone, Debug)]
pub struct ValidateReport {
    pub rates: Vec<RateResult>,
    /// Predicted saturation throughput [req/s].
    pub capacity_rps: f64,
    /// Median |relative error| over every (rate, metric) cell, chosen / other cost model.
    pub median_abs_rel_error: f64,
    pub median_abs_rel_error_alt: f64,
    /// With `--rounds` ≥ 2: median |relative difference| of the later rounds' measurements
    /// from the first's, and the prediction's median |relative error| against them.
    pub repeat_noise: Option<(f64, f64)>,
    /// With `--mb-beside`: how much slower the replica ran beside busy neighbours.
    pub slowdown: Option<Slowdown>,
    /// How far the machine's speed moved between the microbenchmarks before and after
    /// the measurement (median |after / before − 1| over their points): the fitted
    /// cost's own uncertainty on this machine.
    pub drift: f64,
    pub out: PathBuf,
}

impl ValidateReport {
    /// Median |relative error| of the prediction against the first round, over `metrics`
    /// at every rate.
    pub fn median_error_over(&self, metrics: &[(&'static str, Getter)]) -> f64 {
        median(
            self.rates
                .iter()
                .flat_map(|r| {
                    relative_differences_over(metrics, &r.predicted, &r.measured).map(|c| c.3.abs())
                })
                .collect(),
        )
    }

    /// Median |relative difference| of the later rounds from the first, over `metrics` at
    /// every rate: the measurement's own noise (None with one round).
    pub fn noise_over(&self, metrics: &[(&'static str, Getter)]) -> Option<f64> {
        let d: Vec<f64> = self
            .rates
            .iter()
            .flat_map(|r| {
                r.repeats.iter().flat_map(|rep| {
                    relative_differences_over(metrics, rep, &r.measured).map(|c| c.3.abs())
                })
            })
            .collect();
        (!d.is_empty()).then(|| median(d))
    }
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    engine::metrics::percentile_type7(&v, 0.5).unwrap_or(f64::NAN)
}

/// Two microbenchmarks of the same points as one: prefill = median of all samples,
/// decode = gap-weighted mean step (machine load drifts; pooling averages it out).
pub fn pool(a: &MicrobenchResult, b: &MicrobenchResult) -> MicrobenchResult {
    let prefill = a
        .prefill
        .iter()
        .zip(&b.prefill)
        .map(|(x, y)| {
            let samples: Vec<f64> = x.samples_s.iter().chain(&y.samples_s).copied().collect();
            PrefillPoint {
                prompt_tokens: x.prompt_tokens,
                latency_s: median(samples.clone()),
                samples_s: samples,
                server_prompt_s: x
                    .server_prompt_s
                    .zip(y.server_prompt_s)
                    .map(|(p, q)| (p + q) / 2.0),
            }
        })
        .collect();
    let decode = a
        .decode
        .iter()
        .zip(&b.decode)
        .map(|(x, y)| {
            let n = (x.gaps + y.gaps).max(1) as f64;
            DecodePoint {
                streams: x.streams,
                step_s: (x.step_s * x.gaps as f64 + y.step_s * y.gaps as f64) / n,
                step_p50_s: (x.step_p50_s + y.step_p50_s) / 2.0,
                gaps: x.gaps + y.gaps,
                ..x.clone()
            }
        })
        .collect();
    let mixed = if a.mixed.len() == b.mixed.len() {
        a.mixed
            .iter()
            .zip(&b.mixed)
            .map(|(x, y)| MixedPoint {
                step_s: (x.step_s * x.gaps as f64 + y.step_s * y.gaps as f64)
                    / (x.gaps + y.gaps).max(1) as f64,
                gaps: x.gaps + y.gaps,
                ..x.clone()
            })
            .collect()
    } else {
        a.mixed.iter().chain(&b.mixed).cloned().collect()
    };
    MicrobenchResult {
        prefill,
        decode,
        mixed,
        cached: a.cached.iter().chain(&b.cached).cloned().collect(),
        idle: a.idle.iter().chain(&b.idle).cloned().collect(),
        budget: a.budget,
        metadata: a.metadata.clone(),
    }
}
