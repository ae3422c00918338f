//! Arrival processes: Poisson, gamma renewal (burstiness), deterministic, timestamps and
//! scripted traces.

use crate::error::{positive, ConfigError};
use rand::Rng;
use rand_distr::{Distribution, Exp1, Gamma};
use serde::{Deserialize, Serialize};

/// One scripted request of a trace: its own arrival time and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceRequest {
    /// Arrival [s].
    pub arrival: f64,
    /// Prompt [tokens].
    pub prompt: u32,
    /// Output [tokens].
    pub output: u32,
    /// Class label.
    #[serde(default)]
    pub class: u16,
}

/// When requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArrivalProcess {
    /// Poisson process of `rate` [req/s] (exponential gaps).
    Poisson { rate: f64 },
    /// Gamma renewal process: shape `burstiness` k, mean gap 1/rate; squared coefficient of
    /// variation 1/k (vLLM's `--burstiness`; k = 1 is Poisson, k < 1 burstier).
    Gamma { rate: f64, burstiness: f64 },
    /// Evenly spaced arrivals at 1/rate, 2/rate, …
    Deterministic { rate: f64 },
    /// Explicit arrival times [s], non-decreasing; lengths come from the length distribution.
    Timestamps { times: Vec<f64> },
    /// A scripted trace: each request with its own time and lengths.
    Trace { requests: Vec<TraceRequest> },
}

impl ArrivalProcess {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            ArrivalProcess::Poisson { rate } | ArrivalProcess::Deterministic { rate } => {
                positive("arrival rate", *rate)?;
            }
            ArrivalProcess::Gamma { rate, burstiness } => {
                positive("arrival rate", *rate)?;
                positive("burstiness", *burstiness)?;
            }
            ArrivalProcess::Timestamps { times } => check_times(times.iter().copied())?,
            ArrivalProcess::Trace { requests } => {
                check_times(requests.iter().map(|r| r.arrival))?;
                if requests.iter().any(|r| r.prompt == 0 || r.output == 0) {
                    return Err(ConfigError::Zero {
                        name: "trace prompt/output tokens",
                        value: 0,
                    });
                }
            }
        }
        Ok(())
    }

    /// The same process at another rate [req/s]; explicit timestamps are kept.
    pub fn with_rate(&self, rate: f64) -> ArrivalProcess {
        match self {
            ArrivalProcess::Poisson { .. } => ArrivalProcess::Poisson { rate },
            ArrivalProcess::Gamma { burstiness, .. } => ArrivalProcess::Gamma {
                rate,
                burstiness: *burstiness,
            },
            ArrivalProcess::Deterministic { .. } => ArrivalProcess::Deterministic { rate },
            other => other.clone(),
        }
    }

    /// Mean rate [req/s] (for explicit timestamps: count / last time).
    pub fn rate(&self) -> f64 {
        match self {
            ArrivalProcess::Poisson { rate }
            | ArrivalProcess::Deterministic { rate }
            | ArrivalProcess::Gamma { rate, .. } => *rate,
            ArrivalProcess::Timestamps { times } => span_rate(times.len(), times.last().copied()),
            ArrivalProcess::Trace { requests } => {
                span_rate(requests.len(), requests.last().map(|r| r.arrival))
            }
        }
    }

    /// Squared coefficient of variation of the inter-arrival gaps (c_a²).
    pub fn scv(&self) -> f64 {
        match self {
            ArrivalProcess::Poisson { .. } => 1.0,
            ArrivalProcess::Gamma { burstiness, .. } => 1.0 / burstiness,
            ArrivalProcess::Deterministic { .. } => 0.0,
            _ => 1.0,
        }
    }

    /// The gap sampler of a renewal process (`None` for the others), prepared once per
    /// stream.
    pub(crate) fn gap_sampler(&self) -> Option<GapSampler> {
        match self {
            ArrivalProcess::Poisson { rate } => Some(GapSampler::Poisson { rate: *rate }),
            ArrivalProcess::Gamma { rate, burstiness } => Some(GapSampler::Gamma {
                rate: *rate,
                unit: Gamma::new(*burstiness, 1.0 / burstiness).expect("validated shape"),
            }),
            _ => None,
        }
    }
}

/// Draws the gaps of a renewal process: a unit-mean draw scaled by 1/rate, so the same
/// seed gives the same unit stream at every rate.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GapSampler {
    Poisson {
        rate: f64,
    },
    /// `unit` has mean 1 (shape k, scale 1/k).
    Gamma {
        rate: f64,
        unit: Gamma<f64>,
    },
}

impl GapSampler {
    /// Next gap [s].
    #[inline]
    pub(crate) fn sample<R: Rng>(&self, rng: &mut R) -> f64 {
        match self {
            GapSampler::Poisson { rate } => {
                let e: f64 = Exp1.sample(rng);
                e / rate
            }
            GapSampler::Gamma { rate, unit } => unit.sample(rng) / rate,
        }
    }
}

fn span_rate(n: usize, last: Option<f64>) -> f64 {
    match last {
        Some(t) if t > 0.0 => n as f64 / t,
        _ => 0.0,
    }
}

fn check_times(times: impl Iterator<Item = f64>) -> Result<(), ConfigError> {
    let mut prev = 0.0;
    let mut n = 0;
    for (row, t) in times.enumerate() {
        if !t.is_finite() || t < prev {
            return Err(ConfigError::BadTimestamps { row });
        }
        prev = t;
        n += 1;
    }
    if n == 0 {
        return Err(ConfigError::Empty {
            what: "arrival trace",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::stream_rng;

    #[test]
    fn gamma_scv_is_one_over_k() {
        let p = ArrivalProcess::Gamma {
            rate: 2.0,
            burstiness: 0.25,
        };
        let mut rng = stream_rng(1, 0);
        let gaps = p.gap_sampler().unwrap();
        let xs: Vec<f64> = (0..200_000).map(|_| gaps.sample(&mut rng)).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
        assert!((m - 0.5).abs() < 0.01, "{m}");
        assert!((v / (m * m) - 4.0).abs() < 0.15, "{}", v / (m * m));
    }

    #[test]
    fn bad_timestamps() {
        assert!(ArrivalProcess::Timestamps {
            times: vec![1.0, 0.5]
        }
        .validate()
        .is_err());
        assert!(ArrivalProcess::Timestamps { times: vec![] }
            .validate()
            .is_err());
        assert!(ArrivalProcess::Timestamps {
            times: vec![f64::NAN]
        }
        .validate()
        .is_err());
        assert!(ArrivalProcess::Gamma {
            rate: 1.0,
            burstiness: 0.0
        }
        .validate()
        .is_err());
    }
}
