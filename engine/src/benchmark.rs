//! A benchmark as it was run — N prompts, their lengths in order, the client's rate,
//! burstiness and concurrency cap — and the same benchmark simulated.
//!
//! A load generator such as `vllm bench serve` does not offer an open arrival process
//! over a horizon: it sends a fixed number of prompts, spaced by its own schedule, keeps
//! at most `max_concurrency` in flight, waits for the last answer, and reports metrics
//! over its own window (first send to last token). [`BenchmarkRun`] describes such a run
//! whatever file it was read from ([`vllm`] reads vLLM's result JSON); [`simulate`] runs
//! it on a server for one seed of the arrival process and summarises it with
//! [`crate::metrics`] over that window.
//!
//! Warm-up requests are part of the description but not of the simulation: the client
//! waits for them before its first measured send, and the engine keeps nothing from a
//! finished request (no cross-request cache without [`crate::workload::Workload::shared`]),
//! so the measured requests meet the same empty server either way.
//!
//! # Examples
//!
//! ```
//! use engine::benchmark::{simulate, BenchmarkRun, Schedule};
//! use engine::SimConfig;
//!
//! let run = BenchmarkRun {
//!     requests: 50,
//!     warmups: 1,
//!     rate: 2.0,
//!     burstiness: 1.0,
//!     schedule: Schedule::VllmNormalized,
//!     max_concurrency: Some(4),
//!     lengths: vec![(32, 16); 50],
//!     fixed_times: None,
//! };
//! let summary = simulate(&run, &SimConfig::vllm_like(1.0), 0).unwrap();
//! assert_eq!(summary.completed, 50);
//! ```

pub mod vllm;

use crate::config::{EndRule, SimConfig};
use crate::error::ConfigError;
use crate::fleet::{Client, FleetConfig, RouterKind};
use crate::metrics::Summary;
use crate::record::RequestRecord;
use crate::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use serde::{Deserialize, Serialize};

/// Why a benchmark cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum BenchmarkError {
    /// The description is inconsistent; the message names the field to fix.
    #[error("{0}")]
    Invalid(String),
    /// The engine refuses the server's configuration; its message says what to change.
    #[error(transparent)]
    Engine(#[from] ConfigError),
}

/// How the client spaced its sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// `vllm bench serve`: gamma gaps (shape = burstiness, mean 1/rate) summed, then
    /// scaled so that the last request is sent at exactly N / rate.
    VllmNormalized,
    /// `bench-native run`: the engine's own arrival process from the run's seed on.
    Renewal,
}

/// A benchmark as it was run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkRun {
    /// Measured requests (warm-ups excluded).
    pub requests: usize,
    /// Warm-up requests sent, and answered, before the first measured one.
    pub warmups: u32,
    /// Request rate [req/s]; infinite = every request at t = 0 (`"inf"` in JSON).
    #[serde(with = "number_or_inf")]
    pub rate: f64,
    /// Gamma shape of the gaps (1 = Poisson, infinite = evenly spaced; `"inf"` in JSON).
    #[serde(with = "number_or_inf")]
    pub burstiness: f64,
    pub schedule: Schedule,
    /// Client-side cap on requests in flight (a closed loop); `None`: no cap.
    pub max_concurrency: Option<u32>,
    /// (prompt, output) tokens of every measured request, in send order.
    pub lengths: Vec<(u32, u32)>,
    /// Send times fixed by the run itself (a trace) [s]: every seed uses them.
    pub fixed_times: Option<Vec<f64>>,
}

impl BenchmarkRun {
    /// Whether the send times depend on the arrival seed (a finite rate, no fixed
    /// times): otherwise one seed is the whole prediction.
    pub fn is_random(&self) -> bool {
        self.fixed_times.is_none() && self.rate.is_finite()
    }

    /// Checks that the run can be simulated.
    ///
    /// # Errors
    /// A message naming the field: no requests, lengths that are not one pair per
    /// request, a rate or burstiness that is not > 0, a cap of 0, fixed send times that
    /// are not one per request.
    pub fn check(&self) -> Result<(), String> {
        if self.requests == 0 {
            return Err("the benchmark has no requests".into());
        }
        if self.lengths.len() != self.requests {
            return Err(format!(
                "{} request lengths for {} requests: give one (prompt, output) pair per request",
                self.lengths.len(),
                self.requests
            ));
        }
        if self.rate.is_nan() || self.rate <= 0.0 {
            return Err(format!(
                "the request rate is {}: expected > 0 or inf",
                self.rate
            ));
        }
        if self.burstiness.is_nan() || self.burstiness <= 0.0 {
            return Err(format!(
                "the burstiness is {}: expected > 0 or inf",
                self.burstiness
            ));
        }
        if self.max_concurrency == Some(0) {
            return Err("max_concurrency is 0: expected at least 1, or no cap".into());
        }
        if let Some(t) = &self.fixed_times {
            if t.len() != self.requests || t.iter().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(format!(
                    "{} fixed send times for {} requests: expected one finite time >= 0 per request",
                    t.len(),
                    self.requests
                ));
            }
        }
        Ok(())
    }
}

/// A number that may be `+∞`, written `"inf"` as vLLM writes it (JSON has no infinity).
mod number_or_inf {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        if *x == f64::INFINITY {
            s.serialize_str("inf")
        } else {
            s.serialize_f64(*x)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum N {
            F(f64),
            S(String),
        }
        match N::deserialize(d)? {
            N::F(x) => Ok(x),
            N::S(s) if s.eq_ignore_ascii_case("inf") => Ok(f64::INFINITY),
            N::S(s) => Err(D::Error::custom(format!(
                "expected a number or \"inf\", got \"{s}\""
            ))),
        }
    }
}

/// Mean lengths standing in for per-request ones: `total_in / n`, `total_out / n`, each
/// rounded and ≥ 1, `n` requests of them.
pub fn mean_lengths(n: usize, total_in: f64, total_out: f64) -> Vec<(u32, u32)> {
    let k = n.max(1) as f64;
    let p = ((total_in / k).round() as u32).max(1);
    let o = ((total_out / k).round() as u32).max(1);
    vec![(p, o); n]
}

/// Send times of the benchmark's requests for arrival seed `seed` [s]: the gaps of the
/// engine's arrival process (gamma with shape = burstiness, Poisson at 1, evenly spaced
/// at an infinite burstiness) summed from 0; for [`Schedule::VllmNormalized`] scaled so
/// that the last send is at N / rate. An infinite rate sends everything at 0.
pub fn send_times(b: &BenchmarkRun, seed: u64) -> Vec<f64> {
    let n = b.requests;
    if let Some(t) = &b.fixed_times {
        return t.clone();
    }
    if !b.rate.is_finite() {
        return vec![0.0; n];
    }
    let arrivals = if !b.burstiness.is_finite() {
        ArrivalProcess::Deterministic { rate: b.rate }
    } else if b.burstiness == 1.0 {
        ArrivalProcess::Poisson { rate: b.rate }
    } else {
        ArrivalProcess::Gamma {
            rate: b.rate,
            burstiness: b.burstiness,
        }
    };
    let w = Workload {
        arrivals,
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
        shared: None,
    };
    // Far past the N-th arrival: the stream stops at N, not at the horizon.
    let horizon = (n as f64 / b.rate) * 1e3 + 1e3;
    let mut t: Vec<f64> = match w.stream(seed, horizon) {
        Ok(s) => s.take(n).map(|r| r.arrival).collect(),
        Err(_) => Vec::new(),
    };
    if t.len() < n {
        // Only if the process cannot be sampled (checked by the reader): even spacing.
        t = (1..=n).map(|i| i as f64 / b.rate).collect();
    }
    if b.schedule == Schedule::VllmNormalized {
        // vLLM's get_request: the cumulative delays are scaled so that the last one is
        // N / rate (the first request waits its own scaled delay too).
        let last = t.last().copied().unwrap_or(0.0);
        if last > 0.0 {
            let f = n as f64 / b.rate / last;
            for x in &mut t {
                *x *= f;
            }
        }
    }
    t
}

/// The simulation of one seed: the requests in order, at their send times, on the server
/// of `base` (its workload replaced), drained.
pub fn sim_config(b: &BenchmarkRun, base: &SimConfig, seed: u64) -> SimConfig {
    let times = send_times(b, seed);
    let requests: Vec<TraceRequest> = times
        .iter()
        .zip(&b.lengths)
        .map(|(&arrival, &(prompt, output))| TraceRequest {
            arrival,
            prompt,
            output,
            class: 0,
        })
        .collect();
    let last = times.last().copied().unwrap_or(0.0);
    let mut c = base.clone();
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace { requests },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: base.workload.max_model_len,
        shared: None,
    };
    c.end = EndRule::Drain;
    // Arrivals end with the trace; a horizon past the last send lets every request in.
    c.horizon_s = (last * 1.01).max(last + 1.0);
    c.metrics.warmup_s = 0.0;
    c.keep_records = true;
    c.timeseries_points = 0;
    c.seed = seed;
    c
}

/// The records of `b` simulated on the server of `base` for arrival seed `seed`, and the
/// configuration that ran: every measured request, timed from its send (after the
/// client's gate when it has a `max_concurrency`, as `vllm bench serve` times it).
///
/// # Errors
/// [`BenchmarkError::Invalid`] when the run does not [`BenchmarkRun::check`],
/// [`BenchmarkError::Engine`] when the engine refuses the configuration.
pub fn simulate_records(
    b: &BenchmarkRun,
    base: &SimConfig,
    seed: u64,
) -> Result<(Vec<RequestRecord>, SimConfig), BenchmarkError> {
    b.check().map_err(BenchmarkError::Invalid)?;
    let cfg = sim_config(b, base, seed);
    cfg.validate()?;
    let records = match b.max_concurrency {
        None => crate::sim::simulate(&cfg)?.records,
        Some(max) => {
            // The client's gate: one server behind a client that keeps at most `max`
            // requests in flight, each timed from its send (crate::fleet).
            let mut fleet = FleetConfig::uniform(cfg.clone(), 1, RouterKind::RoundRobin);
            fleet.client = Client::MaxConcurrency { max };
            crate::fleet::simulate_fleet(&fleet)?.records
        }
    };
    Ok((records, cfg))
}

/// The summary of simulated `records` over the benchmark's window: from the first send
/// (t = 0) to the last token, as the client measures its duration.
pub fn summarize(records: &[RequestRecord], cfg: &SimConfig) -> Summary {
    let end = records
        .iter()
        .filter_map(|r| r.finish_s.or(r.first_token_s))
        .fold(0.0f64, f64::max);
    crate::metrics::summarize(records, &cfg.metrics, end)
}

/// `b` simulated on the server of `base` for arrival seed `seed`, summarised over the
/// benchmark's window ([`summarize`]).
///
/// # Errors
/// As [`simulate_records`].
pub fn simulate(b: &BenchmarkRun, base: &SimConfig, seed: u64) -> Result<Summary, BenchmarkError> {
    let (records, cfg) = simulate_records(b, base, seed)?;
    Ok(summarize(&records, &cfg))
}

#[cfg(test)]
mod tests;
