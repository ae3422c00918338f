//! The workload: when requests arrive and how long they are.
//!
//! Arrival process and length distribution are separate, orthogonal pieces
//! ([`ArrivalProcess`], [`LengthDist`]). A [`Workload`] draws them from two independent
//! random streams derived from one seed, so for a given seed the lengths are identical
//! whatever the rate, and the arrival times of a renewal process are the same unit stream
//! scaled by 1/λ: **common random numbers** across every configuration of a sweep.

mod arrivals;
pub mod import;
mod lengths;

pub use arrivals::{ArrivalProcess, TraceRequest};
pub use lengths::{LengthDist, LengthMoments, MixtureClass};

use arrivals::GapSampler;
use lengths::LengthSampler;

use crate::error::{positive, ConfigError};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// One request offered to the server.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Index in arrival order, from 0.
    pub id: u64,
    /// Arrival time [s].
    pub arrival: f64,
    /// Prompt length [tokens], ≥ 1.
    pub prompt: u32,
    /// Output length [tokens], ≥ 1.
    pub output: u32,
    /// Class label (mixtures and traces); 0 otherwise.
    pub class: u16,
}

impl Request {
    /// Prompt + output [tokens]: what the request occupies in KV at its end.
    pub fn total_tokens(&self) -> u64 {
        self.prompt as u64 + self.output as u64
    }
}

/// A request generator: arrival process × length distribution, with an optional
/// max-model-length cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub arrivals: ArrivalProcess,
    pub lengths: LengthDist,
    /// If set, prompts are cut to `cap − 1` and outputs so that prompt + output ≤ cap
    /// [tokens] (what a server's `max_model_len` enforces).
    #[serde(default)]
    pub max_model_len: Option<u32>,
}

impl Default for Workload {
    /// The reference study's workload: Poisson 1 req/s, lognormal prompt (median 256, σ 0.55)
    /// and output (median 128, σ 0.70).
    fn default() -> Self {
        Workload {
            arrivals: ArrivalProcess::Poisson { rate: 1.0 },
            lengths: LengthDist::reference(),
            max_model_len: None,
        }
    }
}

/// Salt that separates the arrival stream from the length stream of a seed.
const ARRIVAL_STREAM: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834;
const LENGTH_STREAM: u128 = 0xd1b5_4a32_d192_ed03_8bb7_2f2c_4d1c_1f6b;

pub(crate) fn stream_rng(seed: u64, salt: u128) -> Pcg64Mcg {
    // Pcg64Mcg is portable: identical natively and in wasm32.
    Pcg64Mcg::new((((seed as u128) << 64) | (seed as u128 ^ 0x5851_f42d_4c95_7f2d)) ^ salt | 1)
}

impl Workload {
    /// Checks every parameter; call before generating.
    ///
    /// # Errors
    /// The first invalid parameter, as a [`ConfigError`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.arrivals.validate()?;
        self.lengths.validate()?;
        if let Some(cap) = self.max_model_len {
            if cap < 2 {
                return Err(ConfigError::OutOfRange {
                    name: "max_model_len",
                    value: cap as f64,
                    why: "must be >= 2",
                });
            }
        }
        Ok(())
    }

    /// The same workload at another mean arrival rate [req/s] (renewal processes only;
    /// a trace keeps its timestamps).
    pub fn with_rate(&self, rate: f64) -> Workload {
        Workload {
            arrivals: self.arrivals.with_rate(rate),
            ..self.clone()
        }
    }

    /// Mean arrival rate [req/s].
    pub fn rate(&self) -> f64 {
        self.arrivals.rate()
    }

    /// Streams the requests arriving in `[0, horizon]` for `seed`, lazily (constant memory).
    ///
    /// # Errors
    /// As [`Workload::validate`], and for a non-positive horizon.
    pub fn stream(&self, seed: u64, horizon: f64) -> Result<RequestStream<'_>, ConfigError> {
        self.validate()?;
        positive("horizon", horizon)?;
        Ok(RequestStream {
            workload: self,
            gaps: self.arrivals.gap_sampler(),
            lengths: self.lengths.sampler(),
            horizon,
            arrival_rng: stream_rng(seed, ARRIVAL_STREAM),
            length_rng: stream_rng(seed, LENGTH_STREAM),
            t: 0.0,
            next_id: 0,
            ticks: 0,
        })
    }

    /// All requests arriving in `[0, horizon]` for `seed`.
    ///
    /// # Errors
    /// As [`Workload::stream`].
    pub fn generate(&self, seed: u64, horizon: f64) -> Result<Vec<Request>, ConfigError> {
        Ok(self.stream(seed, horizon)?.collect())
    }

    fn cap(&self, prompt: u32, output: u32) -> (u32, u32) {
        match self.max_model_len {
            Some(cap) => {
                let p = prompt.min(cap - 1);
                (p, output.min(cap - p).max(1))
            }
            None => (prompt, output),
        }
    }
}

/// Lazy iterator over a workload's requests; see [`Workload::stream`].
#[derive(Debug)]
pub struct RequestStream<'a> {
    workload: &'a Workload,
    /// The arrival process's gap sampler (renewal processes only).
    gaps: Option<GapSampler>,
    lengths: LengthSampler<'a>,
    horizon: f64,
    arrival_rng: Pcg64Mcg,
    length_rng: Pcg64Mcg,
    t: f64,
    next_id: u64,
    ticks: u64,
}

impl Iterator for RequestStream<'_> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let id = self.next_id;
        let (arrival, fixed) = match &self.workload.arrivals {
            ArrivalProcess::Timestamps { times } => (*times.get(id as usize)?, None),
            ArrivalProcess::Trace { requests } => {
                let r = requests.get(id as usize)?;
                (r.arrival, Some((r.prompt, r.output, r.class)))
            }
            ArrivalProcess::Deterministic { rate } => {
                self.ticks += 1;
                (self.ticks as f64 / rate, None)
            }
            _ => {
                let gaps = self
                    .gaps
                    .as_ref()
                    .expect("a renewal process has a gap sampler");
                self.t += gaps.sample(&mut self.arrival_rng);
                (self.t, None)
            }
        };
        if arrival > self.horizon {
            return None;
        }
        let (prompt, output, class) = match fixed {
            Some(f) => f,
            None => self.lengths.sample(&mut self.length_rng),
        };
        let (prompt, output) = self.workload.cap(prompt, output);
        self.next_id += 1;
        Some(Request {
            id,
            arrival,
            prompt,
            output,
            class,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_random_numbers_across_rates() {
        let w1 = Workload::default().with_rate(1.0);
        let w2 = Workload::default().with_rate(4.0);
        let a = w1.generate(7, 100.0).unwrap();
        let b = w2.generate(7, 25.0).unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.prompt, x.output), (y.prompt, y.output));
            assert!((x.arrival - 4.0 * y.arrival).abs() < 1e-9);
        }
    }

    #[test]
    fn poisson_rate_and_reference_lengths() {
        let reqs = Workload::default()
            .with_rate(5.0)
            .generate(1, 20_000.0)
            .unwrap();
        let n = reqs.len() as f64;
        assert!((n / 20_000.0 - 5.0).abs() < 0.05, "rate {}", n / 20_000.0);
        let mean_p = reqs.iter().map(|r| r.prompt as f64).sum::<f64>() / n;
        let mean_o = reqs.iter().map(|r| r.output as f64).sum::<f64>() / n;
        // The shipped pairs' means: 297.8 and 163.5 (before flooring: floor lowers each by ~0.5).
        assert!((mean_p - 297.3).abs() < 3.0, "{mean_p}");
        assert!((mean_o - 163.0).abs() < 2.5, "{mean_o}");
    }

    #[test]
    fn cap_applies() {
        let w = Workload {
            max_model_len: Some(300),
            ..Workload::default()
        };
        for r in w.generate(3, 200.0).unwrap() {
            assert!(r.total_tokens() <= 300 && r.prompt >= 1 && r.output >= 1);
        }
    }

    #[test]
    fn invalid_is_error() {
        assert!(Workload::default().with_rate(0.0).generate(0, 1.0).is_err());
        assert!(Workload::default()
            .with_rate(f64::NAN)
            .generate(0, 1.0)
            .is_err());
        assert!(Workload::default().generate(0, -1.0).is_err());
    }
}
