//! Little's law.
//!
//! # Formula
//! `L = λ W`: mean number in a system = arrival rate × mean time in it.
//!
//! # Validity
//! Any stationary system (no distributional assumption), with λ the rate of customers
//! that actually enter (accepted arrivals in a loss system) and L, W over the same
//! boundary (queue only, service only or the whole system).

use super::{check_non_negative, AnalyticError};

/// Little's law over one system boundary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Little {
    /// Rate of customers entering [1/s].
    pub lambda: f64,
}

impl Little {
    /// # Errors
    /// [`AnalyticError::Invalid`] for a negative or non-finite rate.
    pub fn new(lambda: f64) -> Result<Little, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        Ok(Little { lambda })
    }

    /// Mean number in system `L = λ W` from the mean time `w` [s].
    pub fn number(&self, w: f64) -> f64 {
        self.lambda * w
    }

    /// Mean time in system `W = L / λ` [s]; `None` when λ = 0 (no customers, W undefined).
    pub fn time(&self, l: f64) -> Option<f64> {
        (self.lambda > 0.0).then(|| l / self.lambda)
    }

    /// Relative violation |L − λW| / max(L, λW) of a measured triple (0 when both are 0).
    pub fn discrepancy(&self, l: f64, w: f64) -> f64 {
        let lw = self.lambda * w;
        let m = l.abs().max(lw.abs());
        if m == 0.0 {
            0.0
        } else {
            (l - lw).abs() / m
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_law() {
        let l = Little::new(2.0).unwrap();
        assert_eq!(l.number(3.0), 6.0);
        assert_eq!(l.time(6.0), Some(3.0));
        assert_eq!(Little::new(0.0).unwrap().time(1.0), None);
        assert!(l.discrepancy(6.0, 3.0) < 1e-15);
        assert!(Little::new(-1.0).is_err());
        assert!(Little::new(f64::NAN).is_err());
    }
}
