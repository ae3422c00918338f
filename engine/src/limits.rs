//! Resource limits: the one policy for what the simulator agrees to run, shared by the
//! command line and the page (docs/model.md, Limits).
//!
//! Three kinds of bound:
//! - **Structural bounds**, constants below ([`MAX_BATCH`], [`MAX_KV_TOKENS`],
//!   [`MAX_RATE`], [`MIN_BURSTINESS`], …): values the simulator cannot allocate for or
//!   represent. [`SimConfig::validate`] and [`SweepSpec::validate`] enforce them, so every
//!   entry point (`simulate`, `run_sweep`, the analytical models) returns an error
//!   instead of exhausting memory or looping.
//! - **Work limits**, a [`Limits`] value with stated defaults: how many requests a run or
//!   a sweep would simulate, estimated before it starts ([`crate::SimConfig::expected_requests`],
//!   [`crate::sweep::SweepSpec::expected_requests`]). A caller may raise them ([`SimConfig::validate_with`],
//!   [`crate::sim::simulate_with`], [`crate::sweep::run_sweep_with`]).
//! - **The drain cap** ([`MAX_DRAIN_HORIZONS`]): a drained run whose clock runs away (a
//!   saturated server that cannot empty its queue, or a cost model of astronomic
//!   iterations) stops there and reports it ([`crate::sim::RunStats::unstable`]).
//!
//! # Examples
//! ```
//! use engine::limits::{LimitError, Limits};
//! use engine::{ConfigError, SimConfig};
//!
//! let mut cfg = SimConfig::reference(4.0, 8, 8192);
//! cfg.horizon_s = 1e8;
//! let Err(ConfigError::Limit(LimitError::TooManyRequests { estimate, limit, .. })) =
//!     cfg.validate()
//! else {
//!     panic!("4e8 requests are over the limit");
//! };
//! assert_eq!((estimate, limit), (4e8, Limits::default().max_requests_per_run));
//! // A caller may raise the limit (here without running it).
//! let raised = Limits { max_requests_per_run: 1e9, ..Limits::default() };
//! assert!(cfg.validate_with(&raised).is_ok());
//! ```

use crate::workload::{ArrivalProcess, Workload};
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Largest batch width B [requests]. The event loop precomputes an iteration cost per
/// batch size up to B, the `llama_cpp` policy keeps state per slot and the analytical
/// models size their state spaces by B, so B must be a size worth allocating; 65,536
/// sequences is far beyond any server (vLLM's `max_num_seqs` defaults to 256).
pub const MAX_BATCH: u32 = 1 << 16;

/// Largest KV capacity K [tokens], 2^40 ≈ 1.1e12: petabytes of KV for any real model.
/// Block counts and token sums stay far from u64 overflow, and exact in an f64 (< 2^53),
/// where the metrics and the analytical models convert them.
pub const MAX_KV_TOKENS: u64 = 1 << 40;

/// Highest arrival rate [req/s]: one request per nanosecond. Gaps of 1/λ stay normal
/// f64 numbers that advance the arrival clock; past ~1e300 they underflow and the
/// arrival stream stops advancing. (How many requests a run holds is the work limit's
/// business, λ·T.)
pub const MAX_RATE: f64 = 1e9;

/// Smallest gamma burstiness k (shape; squared coefficient of variation 1/k). A gap is
/// `Gamma(k+1)·U^(1/k)/(kλ)`, which underflows to exactly 0 unless U > (1e-308·k)^k: at
/// k = 1e-6 over 99.9 % of gaps are 0 (bursts of ~1,400 simultaneous arrivals), and at
/// k = 1e-300 every gap is, so the arrival clock never reaches the horizon. Below this
/// bound the float process no longer resembles the gamma process it stands for.
pub const MIN_BURSTINESS: f64 = 1e-6;

/// Longest horizon [s], about 32 years. A drained run may go on to
/// `(1 + MAX_DRAIN_HORIZONS)` horizons, and there the clock's resolution (its ulp,
/// 1.5e-5 s at 1e12 s) must stay below an iteration's duration for time to advance.
pub const MAX_HORIZON_S: f64 = 1e9;

/// A drained run stops, reported unstable ([`crate::sim::RunStats::unstable`]), once its
/// clock passes `horizon × (1 + MAX_DRAIN_HORIZONS)`: the server then needs over a
/// thousand times the arrival window to empty its queue, so it is saturated (or each
/// iteration takes ages), and the rest of the run would only grow the clock. Requests
/// still in the system are recorded as unfinished.
pub const MAX_DRAIN_HORIZONS: f64 = 1000.0;

/// Most replicas in a fleet.
pub const MAX_REPLICAS: usize = 4096;

/// Most seeds in one sweep: a sweep keeps one summary per seed and grid point.
pub const MAX_SEEDS: usize = 10_000;

/// Most grid points (rates × batch widths × KV capacities) in one sweep; the grid is
/// listed in memory.
pub const MAX_GRID_POINTS: usize = 1_000_000;

/// Most time-series points per horizon (`timeseries_points`). A run keeps at most twice
/// as many samples whatever its length: past that the grid is thinned to every other
/// instant (see [`crate::sim::TimePoint`]).
pub const MAX_TIMESERIES_POINTS: u32 = 1_000_000;

/// Work limits, checked before a run or sweep starts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Most requests one run may simulate (its expected arrivals, [`crate::SimConfig::expected_requests`]).
    /// Default 2e7: the documented 10 M-request run (λ 8 × 1.25e6 s) fits twice over; a
    /// run's materialised requests (32 B each) then stay under 640 MB and its kept
    /// records under 2 GB, inside a wasm32 page's 4 GB [requests].
    pub max_requests_per_run: f64,
    /// Most requests a sweep may simulate over all its runs (every grid point × seed,
    /// [`crate::sweep::SweepSpec::expected_requests`]). Default 1e8: the default grid (800 runs, ~3 M requests)
    /// fits 33 times over, and so does the 1000-seed comparison of the analytical models
    /// (7.8e7); 1e8 requests are 10–20 s of simulation on one core [requests].
    pub max_requests_per_sweep: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_requests_per_run: 2e7,
            max_requests_per_sweep: 1e8,
        }
    }
}

/// What a work estimate is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One simulation run.
    Run,
    /// Every run of a sweep.
    Sweep,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Run => "run",
            Scope::Sweep => "sweep",
        })
    }
}

/// A configuration over a limit.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LimitError {
    /// The run or sweep would simulate more requests than the limit named `limit_name`
    /// allows. Shorten the horizon, lower the rate, use fewer seeds or grid points, or
    /// raise the limit.
    #[error(
        "this {scope} would simulate ≈ {estimate:.1e} requests, over the limit of {limit:.1e} ({limit_name})"
    )]
    TooManyRequests {
        scope: Scope,
        /// Expected requests [requests].
        estimate: f64,
        /// The limit [requests].
        limit: f64,
        /// The [`Limits`] field it comes from.
        limit_name: &'static str,
    },
    /// A value above a structural bound of the simulator. Use a smaller one.
    #[error("{name} = {} is above the simulator's bound of {}: {why}", Num(*.value), Num(*.max))]
    AboveMax {
        name: &'static str,
        value: f64,
        max: f64,
        why: &'static str,
    },
    /// A value below a structural bound of the simulator. Use a larger one.
    #[error("{name} = {} is below the simulator's bound of {}: {why}", Num(*.value), Num(*.min))]
    BelowMin {
        name: &'static str,
        value: f64,
        min: f64,
        why: &'static str,
    },
}

/// A number as a reader wants it: integers below 1e10 in full, other very large or very
/// small numbers in scientific notation (`1e308`, not 309 digits).
struct Num(f64);

impl fmt::Display for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        let a = x.abs();
        if (x.fract() == 0.0 && a < 1e10) || (1e-3..1e10).contains(&a) || a == 0.0 {
            write!(f, "{x}")
        } else {
            write!(f, "{x:e}")
        }
    }
}

/// Requests a workload is expected to generate in `[0, horizon]` [requests].
///
/// # Formula
/// Poisson: λT. Gamma renewal of shape k: λT + max(0, (1/k − 1)/2), the renewal
/// theorem's second term (a bursty stream front-loads arrivals). Deterministic: ⌊λT⌋.
/// Timestamps and traces: their length.
pub fn expected_requests(w: &Workload, horizon_s: f64) -> f64 {
    match &w.arrivals {
        ArrivalProcess::Poisson { rate } => rate * horizon_s,
        ArrivalProcess::Gamma { rate, burstiness } => {
            rate * horizon_s + ((1.0 / burstiness - 1.0) / 2.0).max(0.0)
        }
        ArrivalProcess::Deterministic { rate } => (rate * horizon_s).floor(),
        ArrivalProcess::Timestamps { times } => times.len() as f64,
        ArrivalProcess::Trace { requests } => requests.len() as f64,
    }
}

impl Limits {
    /// No work limit: every configuration within the structural bounds runs.
    pub fn unlimited() -> Limits {
        Limits {
            max_requests_per_run: f64::INFINITY,
            max_requests_per_sweep: f64::INFINITY,
        }
    }

    /// Checks one run's expected requests ([`crate::SimConfig::expected_requests`])
    /// against [`Limits::max_requests_per_run`].
    ///
    /// # Errors
    /// [`LimitError::TooManyRequests`] with the estimate and the limit.
    pub fn check_run(&self, estimate: f64) -> Result<(), LimitError> {
        over(
            Scope::Run,
            estimate,
            self.max_requests_per_run,
            "max_requests_per_run",
        )
    }

    /// Checks a sweep: each of its runs (`per_run`, one estimate per rate: the largest
    /// run of that rate) against [`Limits::max_requests_per_run`], then all of them
    /// (`total`, [`crate::sweep::SweepSpec::expected_requests`]) against
    /// [`Limits::max_requests_per_sweep`].
    ///
    /// # Errors
    /// [`LimitError::TooManyRequests`] with the estimate and the limit.
    pub fn check_sweep(
        &self,
        per_run: impl IntoIterator<Item = f64>,
        total: f64,
    ) -> Result<(), LimitError> {
        for estimate in per_run {
            self.check_run(estimate)?;
        }
        over(
            Scope::Sweep,
            total,
            self.max_requests_per_sweep,
            "max_requests_per_sweep",
        )
    }
}

fn over(
    scope: Scope,
    estimate: f64,
    limit: f64,
    limit_name: &'static str,
) -> Result<(), LimitError> {
    // NaN counts as over: a run whose size cannot be estimated does not start.
    if estimate <= limit {
        Ok(())
    } else {
        Err(LimitError::TooManyRequests {
            scope,
            estimate,
            limit,
            limit_name,
        })
    }
}

/// Checks `value ≤ max`.
pub(crate) fn at_most(
    name: &'static str,
    value: f64,
    max: f64,
    why: &'static str,
) -> Result<(), LimitError> {
    if value <= max {
        Ok(())
    } else {
        Err(LimitError::AboveMax {
            name,
            value,
            max,
            why,
        })
    }
}

/// Checks `value ≥ min`.
pub(crate) fn at_least(
    name: &'static str,
    value: f64,
    min: f64,
    why: &'static str,
) -> Result<(), LimitError> {
    if value >= min {
        Ok(())
    } else {
        Err(LimitError::BelowMin {
            name,
            value,
            min,
            why,
        })
    }
}

/// The structural bounds of one configuration that size memory or the arrival process:
/// B, K, time-series points, burstiness. Checked before the work estimate, which a tiny
/// burstiness would make astronomic.
///
/// # Errors
/// The first value past its bound.
pub(crate) fn check_sizes(
    max_batch: u32,
    kv_tokens: u64,
    timeseries_points: u32,
    arrivals: &ArrivalProcess,
) -> Result<(), LimitError> {
    at_most(
        "max_batch",
        max_batch as f64,
        MAX_BATCH as f64,
        "state is kept per batch slot",
    )?;
    at_most(
        "kv_tokens",
        kv_tokens as f64,
        MAX_KV_TOKENS as f64,
        "KV counts must stay exact",
    )?;
    at_most(
        "timeseries_points",
        timeseries_points as f64,
        MAX_TIMESERIES_POINTS as f64,
        "every sample is kept in memory",
    )?;
    if let ArrivalProcess::Gamma { burstiness, .. } = arrivals {
        at_least(
            "burstiness",
            *burstiness,
            MIN_BURSTINESS,
            "smaller shapes make almost every gap exactly 0",
        )?;
    }
    Ok(())
}

/// The structural bounds of the clock: the arrival rate and the horizon. Checked after
/// the work estimate, so that a run of too many requests says so first.
///
/// # Errors
/// The first value past its bound.
pub(crate) fn check_clock(horizon_s: f64, arrivals: &ArrivalProcess) -> Result<(), LimitError> {
    at_most(
        "horizon_s",
        horizon_s,
        MAX_HORIZON_S,
        "the clock must resolve an iteration",
    )?;
    match arrivals {
        ArrivalProcess::Poisson { rate }
        | ArrivalProcess::Deterministic { rate }
        | ArrivalProcess::Gamma { rate, .. } => at_most(
            "arrival rate",
            *rate,
            MAX_RATE,
            "gaps of 1/rate must advance the clock",
        ),
        ArrivalProcess::Timestamps { .. } | ArrivalProcess::Trace { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{sweep::SweepSpec, SimConfig};

    #[test]
    fn the_default_grid_and_the_documented_long_run_fit() {
        let spec = SweepSpec::reference_default();
        let n = spec.expected_requests();
        assert!((2.9e6..3.0e6).contains(&n), "{n}");
        spec.validate().unwrap();
        let mut long = SimConfig::reference(8.0, 16, 16384);
        long.horizon_s = 1.25e6;
        assert_eq!(long.expected_requests(), 1e7);
        Limits::default()
            .check_run(long.expected_requests())
            .unwrap();
        long.horizon_s = 1e12;
        assert!(Limits::default()
            .check_run(long.expected_requests())
            .is_err());
        assert!(long.validate().is_err());
        Limits::unlimited()
            .check_run(long.expected_requests())
            .unwrap();
    }

    #[test]
    fn the_message_carries_the_numbers() {
        let mut cfg = SimConfig::reference(4.0, 8, 8192);
        cfg.horizon_s = 1e12;
        let e = Limits::default()
            .check_run(cfg.expected_requests())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "this run would simulate ≈ 4.0e12 requests, over the limit of 2.0e7 (max_requests_per_run)"
        );
    }

    #[test]
    fn bursty_streams_count_their_front_load() {
        let w = Workload::default().with_rate(1.0);
        let g = Workload {
            arrivals: ArrivalProcess::Gamma {
                rate: 1.0,
                burstiness: 1e-300,
            },
            ..w.clone()
        };
        assert_eq!(expected_requests(&w, 100.0), 100.0);
        assert!(expected_requests(&g, 100.0) > 1e299);
    }
}
