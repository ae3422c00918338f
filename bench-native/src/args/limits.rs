//! How much work a command may start: the expected number of simulated requests, checked
//! against `--max-requests` before anything runs, so that `--horizon 1e12` or `--rate 1e308`
//! ends at once with the estimate instead of running for days (`docs/model.md`, Limits).

use super::ArgError;
use engine::config::SimConfig;
use engine::workload::ArrivalProcess;

/// `--max-requests` unless given: 100 M requests, about half a minute of one core (the
/// documented 10 M-request run takes ≈ 3 s).
pub const DEFAULT_MAX_REQUESTS: u64 = 100_000_000;

/// The smallest gamma shape `--burstiness` accepts. A gap is `Gamma(k+1)·U^(1/k)/(kλ)`,
/// which underflows to exactly 0 unless U > (1e-308·k)^k: at k = 1e-6 most gaps are 0
/// (bursts of over a thousand simultaneous arrivals), at k = 1e-300 every gap is, and the
/// arrival clock never reaches the horizon.
pub const MIN_BURSTINESS: f64 = 1e-6;

/// Checks `--burstiness` (finite, ≥ [`MIN_BURSTINESS`]).
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

/// Expected requests of one run: rate × horizon for a renewal process (plus the gamma
/// renewal's front-loaded (1/k − 1)/2), the timestamps before the horizon for a trace.
pub fn requests_per_run(c: &SimConfig) -> f64 {
    match &c.workload.arrivals {
        ArrivalProcess::Gamma { rate, burstiness } => {
            rate * c.horizon_s + ((1.0 / burstiness - 1.0) / 2.0).max(0.0)
        }
        ArrivalProcess::Trace { requests } => requests
            .iter()
            .take_while(|r| r.arrival <= c.horizon_s)
            .count() as f64,
        ArrivalProcess::Timestamps { times } => {
            times.iter().take_while(|&&t| t <= c.horizon_s).count() as f64
        }
        a => a.rate() * c.horizon_s,
    }
}

/// Refuses `estimate` requests (`what`: how it was counted, for the message) above `max`.
///
/// # Errors
/// [`ArgError::TooMuchWork`] with the estimate, the limit and what to change.
pub fn check(command: &str, estimate: f64, what: &str, max: u64) -> Result<(), ArgError> {
    if estimate.is_finite() && estimate <= max as f64 {
        return Ok(());
    }
    let about = if estimate.is_finite() {
        format!("about {estimate:.3e}")
    } else {
        "an unbounded number of".to_string()
    };
    Err(ArgError::TooMuchWork(format!(
        "{command}: {about} requests to simulate ({what}), more than --max-requests {max}; \
         shorten --horizon, lower the rate, or raise --max-requests"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_is_rate_times_horizon_and_refused_above_the_limit() {
        let mut c = SimConfig::reference(2.0, 8, 8192);
        assert_eq!(requests_per_run(&c), 2000.0);
        assert!(check("simulate", 2000.0, "one run", 2000).is_ok());
        c.horizon_s = 1e12;
        let e = check(
            "simulate",
            requests_per_run(&c),
            "one run",
            DEFAULT_MAX_REQUESTS,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("about 2.000e12 requests"), "{e}");
        assert!(e.contains("--max-requests 100000000"), "{e}");
        assert!(check("simulate", f64::INFINITY, "one run", u64::MAX).is_err());
        assert!(check_burstiness(1e-300).is_err());
        assert!(check_burstiness(0.5).is_ok());
    }
}
