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
//! - **The drain cap** ([`Limits::max_drain_horizons`], default [`MAX_DRAIN_HORIZONS`]):
//!   before a drained run starts, the time it needs to empty its queue is estimated from
//!   the cost model ([`drain_estimate`]), and a run that even at the server's best case
//!   would need longer is refused. A drained run whose clock still runs away (a saturated
//!   server that cannot empty its queue) stops at the cap and reports it
//!   ([`crate::sim::RunStats::unstable`]).
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

use crate::cost::{BatchShape, CostModel};
use crate::workload::{ArrivalProcess, LengthDist, Workload};
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
    /// The drain cap: a drained run may go on for this many horizons after its last
    /// arrival window. A run whose best-case drain ([`drain_estimate`]) needs longer is
    /// refused before it starts; one whose clock still gets there stops, reported
    /// unstable. Default [`MAX_DRAIN_HORIZONS`]; at most what keeps the drained clock
    /// within [`MAX_DRAINED_CLOCK_S`] [horizons].
    #[serde(default = "default_drain_horizons")]
    pub max_drain_horizons: f64,
}

fn default_drain_horizons() -> f64 {
    MAX_DRAIN_HORIZONS
}

/// Latest time a drained run's clock may reach [s]: the longest horizon
/// ([`MAX_HORIZON_S`]) with the default drain cap after it. The clock's resolution there
/// (its ulp, 1.2e-4 s at 1e12 s) stays below an iteration's duration.
pub const MAX_DRAINED_CLOCK_S: f64 = MAX_HORIZON_S * (1.0 + MAX_DRAIN_HORIZONS);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_requests_per_run: 2e7,
            max_requests_per_sweep: 1e8,
            max_drain_horizons: MAX_DRAIN_HORIZONS,
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
    /// A drained run would need longer to empty its queue than the drain cap allows,
    /// even at the server's best case ([`drain_estimate`]). Lower the rate, cut the run at
    /// the horizon instead of draining it, or raise the cap.
    #[error(
        "this drained run offers ≈ {} req/s to a server whose best case is ≈ {} req/s: its backlog of ≈ {:.1e} requests would take ≈ {} s to drain, {} horizons, over the limit of {} (max_drain_horizons)",
        Num3(.estimate.offered_rps), Num3(.estimate.capacity_rps), .estimate.backlog,
        Num3(.estimate.drain_s), Num3(.estimate.drain_s / .horizon_s), Num(*.limit)
    )]
    DrainTooLong {
        estimate: DrainEstimate,
        /// The run's horizon [s].
        horizon_s: f64,
        /// The limit [horizons].
        limit: f64,
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

/// An estimate for a reader: at most three decimals, in scientific notation (three
/// significant digits) when large or small.
struct Num3(f64);

impl fmt::Display for Num3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0.abs();
        if (1e-2..1e5).contains(&a) || a == 0.0 {
            let s = format!("{:.3}", self.0);
            f.write_str(s.trim_end_matches('0').trim_end_matches('.'))
        } else {
            write!(f, "{:.2e}", self.0)
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

/// A drained run's length, estimated before it starts (docs/model.md, Limits).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DrainEstimate {
    /// Offered load: expected arrivals over the arrival window [req/s].
    pub offered_rps: f64,
    /// The server's best-case service rate ([`best_case_capacity`]) [req/s].
    pub capacity_rps: f64,
    /// Requests still in the system when arrivals stop, at best: arrivals − capacity ×
    /// window [requests].
    pub backlog: f64,
    /// Time to serve that backlog at the best-case rate [s].
    pub drain_s: f64,
}

/// Mean prompt and output lengths of a workload [tokens], in closed form (never summed
/// over a distribution's support, so any valid parameters cost the same).
fn mean_lengths(w: &Workload) -> (f64, f64) {
    fn of(d: &LengthDist) -> (f64, f64) {
        match d {
            // E[max(1, ⌊X⌋)] ≈ E[X] − ½ for a lognormal X of median m: m·e^(σ²/2) − ½.
            LengthDist::Lognormal {
                prompt_median,
                prompt_sigma,
                output_median,
                output_sigma,
            } => (
                prompt_median * libm::exp(prompt_sigma * prompt_sigma / 2.0) - 0.5,
                output_median * libm::exp(output_sigma * output_sigma / 2.0) - 0.5,
            ),
            LengthDist::Empirical { pairs } => mean_pairs(pairs.iter().copied()),
            LengthDist::Fixed { prompt, output } => (*prompt as f64, *output as f64),
            LengthDist::Mixture { classes } => {
                let total: f64 = classes.iter().map(|c| c.weight).sum();
                classes.iter().fold((0.0, 0.0), |(p, o), c| {
                    let (cp, co) = of(&c.lengths);
                    (p + c.weight / total * cp, o + c.weight / total * co)
                })
            }
        }
    }
    let (p, o) = match &w.arrivals {
        ArrivalProcess::Trace { requests } => {
            mean_pairs(requests.iter().map(|r| (r.prompt, r.output)))
        }
        _ => of(&w.lengths),
    };
    let cap = w.max_model_len.map_or(u32::MAX as f64, f64::from);
    let clamp = |x: f64| if x.is_nan() { cap } else { x.clamp(1.0, cap) };
    (clamp(p), clamp(o))
}

fn mean_pairs(pairs: impl Iterator<Item = (u32, u32)>) -> (f64, f64) {
    let (mut n, mut p, mut o) = (0.0, 0.0, 0.0);
    for (a, b) in pairs {
        n += 1.0;
        p += a as f64;
        o += b as f64;
    }
    if n > 0.0 {
        (p / n, o / n)
    } else {
        (1.0, 1.0)
    }
}

/// The server's best-case service rate [req/s]: what it completes per second if every
/// request had the workload's mean lengths and batching were perfect.
///
/// # Formula
/// b = min(B, max(1, ⌊K / E[P]⌋)) requests (as many as the batch width and, each holding
/// at least its prompt, the KV cache allow) are served together: prefilled in one
/// iteration of b·E[P] tokens, then decoded together for E[O] − 1 steps with no
/// attention context, so
///
/// μ = b / (c(prefill b·E[P] tokens of b sequences) + (E[O] − 1) · c(decode b, context 0))
///
/// with c the cost model's iteration time. No real schedule beats it by much (chunked
/// prefill overlaps prefills with decodes, which this charges separately), so it is an
/// optimistic rate and the drain time estimated from it ([`drain_estimate`]) a short one.
pub fn best_case_capacity(w: &Workload, max_batch: u32, kv_tokens: u64, cost: &CostModel) -> f64 {
    let (p, o) = mean_lengths(w);
    let b = (max_batch as f64)
        .min((kv_tokens as f64 / p).floor())
        .max(1.0) as u32;
    let tokens = (b as f64 * p).round() as u64;
    let prefill = cost.iteration(&BatchShape {
        running: b,
        prefill_tokens: tokens,
        prefill_seqs: b,
        ..BatchShape::default()
    });
    let decode = cost.decode_step(b, 0);
    let per_batch = prefill + (o - 1.0).max(0.0) * decode;
    if per_batch > 0.0 {
        b as f64 / per_batch
    } else {
        f64::INFINITY
    }
}

/// A drained run's backlog and drain time, estimated before it starts: `None` when the
/// offered load stays within the best-case capacity ([`best_case_capacity`]). `hold` is
/// the most requests the server lets into the system at once (a threshold admission
/// rule's n, what a reserve-mode cache can reserve, a queue cap; infinite if nothing
/// bounds it) [requests]: arrivals beyond it are rejected, not queued.
///
/// # Formula
/// With N expected arrivals ([`expected_requests`]) over the window W (the horizon T, or a
/// trace's last arrival if earlier) and μ the best-case capacity: backlog = min(N − μW,
/// hold), drain time = backlog / μ. Both are lower bounds, as μ is optimistic.
pub fn drain_estimate(
    w: &Workload,
    horizon_s: f64,
    (max_batch, kv_tokens, hold): (u32, u64, f64),
    cost: &CostModel,
) -> Option<DrainEstimate> {
    let n = expected_requests(w, horizon_s);
    let window = match &w.arrivals {
        ArrivalProcess::Trace { requests } => requests
            .last()
            .map_or(horizon_s, |r| r.arrival.min(horizon_s)),
        ArrivalProcess::Timestamps { times } => {
            times.last().map_or(horizon_s, |t| t.min(horizon_s))
        }
        _ => horizon_s,
    };
    let mu = best_case_capacity(w, max_batch, kv_tokens, cost);
    if mu == f64::INFINITY {
        return None;
    }
    let backlog = (n - mu * window).min(hold);
    // NaN (an unusable estimate) counts as a backlog, as the limits count it as over.
    if backlog <= 0.0 {
        return None;
    }
    Some(DrainEstimate {
        offered_rps: if window > 0.0 {
            n / window
        } else {
            f64::INFINITY
        },
        capacity_rps: mu,
        backlog,
        drain_s: backlog / mu,
    })
}

impl Limits {
    /// No work limit: every configuration within the structural bounds runs (drained
    /// runs within the default drain cap).
    pub fn unlimited() -> Limits {
        Limits {
            max_requests_per_run: f64::INFINITY,
            max_requests_per_sweep: f64::INFINITY,
            max_drain_horizons: MAX_DRAIN_HORIZONS,
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

    /// Checks a drained run's estimated drain ([`drain_estimate`], `None`: no backlog)
    /// against [`Limits::max_drain_horizons`] × its horizon.
    ///
    /// # Errors
    /// [`LimitError::DrainTooLong`] with the estimate and the limit.
    pub fn check_drain(
        &self,
        estimate: Option<DrainEstimate>,
        horizon_s: f64,
    ) -> Result<(), LimitError> {
        match estimate {
            // NaN counts as over, as in the other checks.
            Some(e) if e.drain_s.is_nan() || e.drain_s > self.max_drain_horizons * horizon_s => {
                Err(LimitError::DrainTooLong {
                    estimate: e,
                    horizon_s,
                    limit: self.max_drain_horizons,
                })
            }
            _ => Ok(()),
        }
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

/// The drain cap's bound: a drained clock may reach `horizon × (1 + drain_horizons)`,
/// which must stay within [`MAX_DRAINED_CLOCK_S`].
///
/// # Errors
/// [`LimitError::AboveMax`] naming `max_drain_horizons`.
pub(crate) fn check_drained_clock(horizon_s: f64, drain_horizons: f64) -> Result<(), LimitError> {
    at_least(
        "max_drain_horizons",
        drain_horizons,
        0.0,
        "a drained run goes on at least until its horizon",
    )?;
    at_most(
        "max_drain_horizons",
        drain_horizons,
        MAX_DRAINED_CLOCK_S / horizon_s - 1.0,
        "horizon × (1 + max_drain_horizons) must stay within 1.001e12 s, where the clock resolves an iteration",
    )
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
