//! M/M/1: Poisson arrivals, exponential service, one server, infinite FIFO queue.
//!
//! # Formula
//! `ρ = λ/μ`, `L = ρ/(1−ρ)`, `W = 1/(μ−λ)`, `Wq = ρ/(μ−λ)`, `P(N = n) = (1−ρ)ρⁿ`,
//! sojourn `T ~ Exp(μ−λ)`, wait `P(Wq > t) = ρ e^{−(μ−λ)t}`.
//!
//! # Validity
//! λ ≥ 0, μ > 0; steady state only for ρ < 1, otherwise [`Stability::Unstable`].

use super::{check_level, check_non_negative, check_positive, AnalyticError, Stability};

/// An M/M/1 queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mm1 {
    lambda: f64,
    mu: f64,
}

impl Mm1 {
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0 or μ ≤ 0 (or non-finite values).
    pub fn new(lambda: f64, mu: f64) -> Result<Mm1, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        check_positive("service rate", mu)?;
        Ok(Mm1 { lambda, mu })
    }

    /// `ρ = λ/μ`, stable iff < 1.
    pub fn stability(&self) -> Stability {
        Stability::of(self.lambda / self.mu)
    }

    fn stable_rho(&self) -> Result<f64, Stability> {
        match self.stability() {
            Stability::Stable { rho } => Ok(rho),
            s => Err(s),
        }
    }

    /// Mean number in system L.
    ///
    /// # Errors
    /// The [`Stability::Unstable`] value when ρ ≥ 1.
    pub fn mean_in_system(&self) -> Result<f64, Stability> {
        let r = self.stable_rho()?;
        Ok(r / (1.0 - r))
    }

    /// Mean sojourn time W [s].
    ///
    /// # Errors
    /// The [`Stability::Unstable`] value when ρ ≥ 1.
    pub fn mean_sojourn(&self) -> Result<f64, Stability> {
        self.stable_rho()?;
        Ok(1.0 / (self.mu - self.lambda))
    }

    /// Mean wait in queue Wq [s].
    ///
    /// # Errors
    /// The [`Stability::Unstable`] value when ρ ≥ 1.
    pub fn mean_wait(&self) -> Result<f64, Stability> {
        let r = self.stable_rho()?;
        Ok(r / (self.mu - self.lambda))
    }

    /// `P(N = n)`.
    ///
    /// # Errors
    /// The [`Stability::Unstable`] value when ρ ≥ 1.
    pub fn p_n(&self, n: u32) -> Result<f64, Stability> {
        let r = self.stable_rho()?;
        Ok((1.0 - r) * libm::pow(r, n as f64))
    }

    /// q-quantile of the sojourn time [s].
    ///
    /// # Errors
    /// `Err(Ok(stability))` when unstable, `Err(Err(e))` for q outside (0, 1).
    pub fn sojourn_quantile(&self, q: f64) -> Result<f64, Result<Stability, AnalyticError>> {
        check_level(q).map_err(Err)?;
        self.stable_rho().map_err(Ok)?;
        Ok(-libm::log(1.0 - q) / (self.mu - self.lambda))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_values() {
        // λ = 0.8, μ = 1: L = 4, W = 5, Wq = 4, P0 = 0.2.
        let q = Mm1::new(0.8, 1.0).unwrap();
        assert!((q.mean_in_system().unwrap() - 4.0).abs() < 1e-12);
        assert!((q.mean_sojourn().unwrap() - 5.0).abs() < 1e-12);
        assert!((q.mean_wait().unwrap() - 4.0).abs() < 1e-12);
        assert!((q.p_n(0).unwrap() - 0.2).abs() < 1e-12);
        assert!((q.sojourn_quantile(0.5).unwrap() - 5.0 * 2f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn unstable_is_explicit() {
        let q = Mm1::new(1.3, 1.0).unwrap();
        assert_eq!(q.mean_sojourn(), Err(Stability::Unstable { rho: 1.3 }));
        assert_eq!(q.stability().to_string(), "unstable: ρ = 1.300");
        assert!(Mm1::new(1.0, 0.0).is_err());
        assert!(Mm1::new(f64::NAN, 1.0).is_err());
    }
}
