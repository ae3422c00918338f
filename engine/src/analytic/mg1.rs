//! M/G/1: Poisson arrivals, general service, one FIFO server (Pollaczek–Khinchine).
//!
//! # Formula
//! `ρ = λ E[S]`, `Wq = λ E[S²] / (2(1 − ρ))`, `W = Wq + E[S]`, `L = λ W`.
//!
//! # Validity
//! Poisson arrivals, i.i.d. service independent of arrivals, work-conserving FIFO;
//! ρ < 1 (otherwise [`Stability::Unstable`]). `E[S²] ≥ E[S]²` is required.

use super::{check_non_negative, check_positive, AnalyticError, Stability};

/// An M/G/1 queue given the first two service moments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mg1 {
    lambda: f64,
    es: f64,
    es2: f64,
}

impl Mg1 {
    /// `es` = E[S] [s], `es2` = E[S²] [s²].
    ///
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0, E[S] ≤ 0 or E[S²] < E[S]².
    pub fn new(lambda: f64, es: f64, es2: f64) -> Result<Mg1, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        check_positive("mean service time", es)?;
        check_positive("second service moment", es2)?;
        if es2 < es * es * (1.0 - 1e-12) {
            return Err(AnalyticError::Invalid {
                name: "second service moment",
                value: es2,
                why: "must be >= E[S]^2",
            });
        }
        Ok(Mg1 { lambda, es, es2 })
    }

    /// `ρ = λ E[S]`.
    pub fn stability(&self) -> Stability {
        Stability::of(self.lambda * self.es)
    }

    /// Mean wait in queue (Pollaczek–Khinchine) [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_wait(&self) -> Result<f64, Stability> {
        match self.stability() {
            Stability::Stable { rho } => Ok(self.lambda * self.es2 / (2.0 * (1.0 - rho))),
            s => Err(s),
        }
    }

    /// Mean sojourn time [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_sojourn(&self) -> Result<f64, Stability> {
        Ok(self.mean_wait()? + self.es)
    }

    /// Mean number in system.
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_in_system(&self) -> Result<f64, Stability> {
        Ok(self.lambda * self.mean_sojourn()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pk_formula() {
        // Exponential service reduces to M/M/1: λ = 0.8, μ = 1 → Wq = 4.
        let q = Mg1::new(0.8, 1.0, 2.0).unwrap();
        assert!((q.mean_wait().unwrap() - 4.0).abs() < 1e-12);
        // Deterministic (M/D/1): Wq = ρ/(2μ(1−ρ)) = 2.
        let q = Mg1::new(0.8, 1.0, 1.0).unwrap();
        assert!((q.mean_wait().unwrap() - 2.0).abs() < 1e-12);
        assert!((q.mean_in_system().unwrap() - 0.8 * 3.0).abs() < 1e-12);
        assert!(matches!(
            Mg1::new(1.2, 1.0, 1.0).unwrap().mean_wait(),
            Err(Stability::Unstable { .. })
        ));
        assert!(Mg1::new(0.5, 1.0, 0.5).is_err());
    }
}
