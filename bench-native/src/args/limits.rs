//! How much work a command may start, by the engine's one policy (`engine::limits`,
//! `docs/model.md`, Limits): the expected requests of a run or of every run of a sweep,
//! checked before anything runs, so that `--horizon 1e12` or `--rate 1e308` ends at once
//! with the estimate instead of running for days. `--max-requests` raises (or lowers) the
//! limit the command is bounded by; the message names it. A drained run whose backlog
//! would take longer to serve than the drain cap, even at the server's best case, is
//! refused the same way, naming `--max-drain-horizons`.

use super::ArgError;
pub use engine::limits::{
    Limits, Scope, MAX_BATCH, MAX_DRAINED_CLOCK_S, MAX_HORIZON_S, MAX_KV_TOKENS, MAX_RATE,
    MIN_BURSTINESS,
};
use engine::SimConfig;

/// Checks `--burstiness` (finite, ≥ [`MIN_BURSTINESS`]: below it the gamma sampler's gaps
/// underflow to 0 and the arrival clock stops).
///
/// # Errors
/// [`ArgError::Range`] naming `--burstiness`.
pub fn check_burstiness(k: f64) -> Result<(), ArgError> {
    if k.is_finite() && k >= MIN_BURSTINESS {
        Ok(())
    } else {
        Err(ArgError::range(
            "--burstiness",
            "a finite number >= 1e-6 (c_a² = 1/k at most 1e6)",
            super::num(k),
        ))
    }
}

/// The engine's default limits with `--max-requests` (`max`) in place of the one a
/// command of `scope` is bounded by: a run's for `simulate`, all runs' for `sweep` and
/// `compare` (whose single runs may then be as large); and `--max-drain-horizons`
/// (`drain`) in place of the drain cap.
pub fn work_limits(max: Option<u64>, drain: Option<f64>, scope: Scope) -> Limits {
    let d = Limits {
        max_drain_horizons: drain.unwrap_or(Limits::default().max_drain_horizons),
        ..Limits::default()
    };
    match (max, scope) {
        (None, _) => d,
        (Some(n), Scope::Run) => Limits {
            max_requests_per_run: n as f64,
            ..d
        },
        (Some(n), Scope::Sweep) => Limits {
            max_requests_per_run: (n as f64).max(d.max_requests_per_run),
            max_requests_per_sweep: n as f64,
            ..d
        },
    }
}

/// Refuses `estimate` requests (`what`: how it was counted, for the message) above
/// `limit`, naming `--max-requests`.
///
/// # Errors
/// [`ArgError::TooMuchWork`] with the estimate, the limit and what to change.
pub fn check(command: &str, estimate: f64, what: &str, limit: f64) -> Result<(), ArgError> {
    if estimate.is_finite() && estimate <= limit {
        return Ok(());
    }
    let about = if estimate.is_finite() {
        format!("about {estimate:.3e}")
    } else {
        "an unbounded number of".to_string()
    };
    Err(ArgError::TooMuchWork(format!(
        "{command}: {about} requests to simulate ({what}), more than --max-requests {limit:.0}; \
         shorten --horizon, lower the rate, or raise --max-requests"
    )))
}

/// Checks `--max-drain-horizons`: a finite number ≥ 0.
///
/// # Errors
/// [`ArgError::Range`] naming the flag.
pub fn check_drain_horizons(h: Option<f64>) -> Result<(), ArgError> {
    match h {
        Some(h) if !(h.is_finite() && h >= 0.0) => Err(ArgError::range(
            "--max-drain-horizons",
            "a finite number >= 0 [horizons]",
            super::num(h),
        )),
        _ => Ok(()),
    }
}

/// Refuses a drained run (`command`: how the message names it) whose backlog would take
/// longer to serve than `limit` horizons even at the server's best case
/// (`SimConfig::drain_estimate`, docs/model.md, Limits), naming `--max-drain-horizons`;
/// and a cap that would take the drained clock past what it resolves.
///
/// # Errors
/// [`ArgError::TooMuchWork`] with the estimate, the limit and what to change;
/// [`ArgError::Range`] for a cap too large for the horizon.
pub fn check_drain(command: &str, c: &SimConfig, limit: f64) -> Result<(), ArgError> {
    if c.end != engine::config::EndRule::Drain {
        return Ok(());
    }
    if c.horizon_s * (1.0 + limit) > MAX_DRAINED_CLOCK_S {
        return Err(ArgError::Range {
            flag: "--max-drain-horizons",
            what:
                "at most 1.001e12 s / --horizon - 1 (the drained clock must resolve an iteration)",
            value: super::num(limit),
        });
    }
    let Some(e) = c.drain_estimate() else {
        return Ok(());
    };
    if e.drain_s <= limit * c.horizon_s {
        return Ok(());
    }
    Err(ArgError::TooMuchWork(format!(
        "{command}: it is drained, and at the server's best case (≈ {mu} req/s from the cost model, \
         against {offered} req/s offered) ≈ {backlog:.3e} requests would still wait at the horizon; \
         serving them takes ≈ {drain} s, {horizons} horizons, more than --max-drain-horizons {limit}; \
         lower the rate, use --cut, or raise --max-drain-horizons",
        mu = super::num(sig(e.capacity_rps)),
        offered = super::num(sig(e.offered_rps)),
        backlog = e.backlog,
        drain = super::num(sig(e.drain_s)),
        horizons = super::num(sig(e.drain_s / c.horizon_s)),
        limit = super::num(limit),
    )))
}

/// `x` to three significant digits.
fn sig(x: f64) -> f64 {
    if !(x.is_finite() && x != 0.0) {
        return x;
    }
    let scale = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_engines_unless_raised_and_named_when_refused() {
        let d = Limits::default();
        assert_eq!(work_limits(None, None, Scope::Run), d);
        assert_eq!(
            work_limits(Some(5), None, Scope::Run).max_requests_per_run,
            5.0
        );
        assert_eq!(
            work_limits(Some(5), Some(7.0), Scope::Sweep).max_drain_horizons,
            7.0
        );
        let s = work_limits(Some(1_000_000_000), None, Scope::Sweep);
        assert_eq!(
            (s.max_requests_per_sweep, s.max_requests_per_run),
            (1e9, 1e9)
        );
        assert!(check("simulate", 2000.0, "one run", 2000.0).is_ok());
        let e = check("simulate", 2e12, "one run", 2e7)
            .unwrap_err()
            .to_string();
        assert!(e.contains("about 2.000e12 requests"), "{e}");
        assert!(e.contains("--max-requests 20000000"), "{e}");
        assert!(check("simulate", f64::INFINITY, "one run", f64::INFINITY).is_err());
        assert!(check_burstiness(1e-300).is_err());
        assert!(check_burstiness(0.5).is_ok());
    }
}
