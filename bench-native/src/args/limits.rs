//! How much work a command may start, by the engine's one policy (`engine::limits`,
//! `docs/model.md`, Limits): the expected requests of a run or of every run of a sweep,
//! checked before anything runs, so that `--horizon 1e12` or `--rate 1e308` ends at once
//! with the estimate instead of running for days. `--max-requests` raises (or lowers) the
//! limit the command is bounded by; the message names it.

use super::ArgError;
pub use engine::limits::{
    Limits, Scope, MAX_BATCH, MAX_HORIZON_S, MAX_KV_TOKENS, MAX_RATE, MIN_BURSTINESS,
};

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
/// `compare` (whose single runs may then be as large).
pub fn work_limits(max: Option<u64>, scope: Scope) -> Limits {
    let d = Limits::default();
    match (max, scope) {
        (None, _) => d,
        (Some(n), Scope::Run) => Limits {
            max_requests_per_run: n as f64,
            ..d
        },
        (Some(n), Scope::Sweep) => Limits {
            max_requests_per_run: (n as f64).max(d.max_requests_per_run),
            max_requests_per_sweep: n as f64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_engines_unless_raised_and_named_when_refused() {
        let d = Limits::default();
        assert_eq!(work_limits(None, Scope::Run), d);
        assert_eq!(work_limits(Some(5), Scope::Run).max_requests_per_run, 5.0);
        let s = work_limits(Some(1_000_000_000), Scope::Sweep);
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
