//! Two-moment approximations: Kingman (G/G/1) and Allen–Cunneen (G/G/c).
//!
//! # Formula
//! * Kingman: `Wq ≈ (ρ/(1−ρ)) · ((c_a² + c_s²)/2) · E[S]`.
//! * Allen–Cunneen: `Wq ≈ (C(c, A) / (cμ − λ)) · (c_a² + c_s²)/2`, the M/M/c wait
//!   (Erlang C) scaled by the variability factor.
//!
//! `c_a²` is the arrivals' squared coefficient of variation: 1 for Poisson, `1/k` for
//! gamma renewal arrivals with burstiness (shape) k (vLLM's `--burstiness`); `c_s²` that
//! of the service time.
//!
//! # Validity
//! Renewal arrivals, i.i.d. service, FIFO, ρ < 1 (otherwise [`Stability::Unstable`]);
//! approximations, exact for M/M/1 / M/M/c and asymptotically exact in heavy traffic.

use super::erlang::Mmc;
use super::{check_non_negative, check_positive, AnalyticError, Stability};

/// Squared coefficient of variation of gamma renewal arrivals with burstiness `k`.
///
/// # Errors
/// [`AnalyticError::Invalid`] for k ≤ 0.
pub fn ca2_from_burstiness(k: f64) -> Result<f64, AnalyticError> {
    Ok(1.0 / check_positive("burstiness", k)?)
}

/// Kingman's G/G/1 approximation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kingman {
    lambda: f64,
    es: f64,
    ca2: f64,
    cs2: f64,
}

impl Kingman {
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0, E[S] ≤ 0 or negative SCVs.
    pub fn new(lambda: f64, es: f64, ca2: f64, cs2: f64) -> Result<Kingman, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        check_positive("mean service time", es)?;
        check_non_negative("arrival SCV", ca2)?;
        check_non_negative("service SCV", cs2)?;
        Ok(Kingman {
            lambda,
            es,
            ca2,
            cs2,
        })
    }

    pub fn stability(&self) -> Stability {
        Stability::of(self.lambda * self.es)
    }

    /// Mean wait in queue [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_wait(&self) -> Result<f64, Stability> {
        match self.stability() {
            Stability::Stable { rho } => {
                Ok(rho / (1.0 - rho) * 0.5 * (self.ca2 + self.cs2) * self.es)
            }
            s => Err(s),
        }
    }
}

/// Allen–Cunneen's G/G/c approximation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllenCunneen {
    mmc: Mmc,
    ca2: f64,
    cs2: f64,
}

impl AllenCunneen {
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0, E[S] ≤ 0, c = 0 or negative SCVs.
    pub fn new(
        lambda: f64,
        es: f64,
        c: u32,
        ca2: f64,
        cs2: f64,
    ) -> Result<AllenCunneen, AnalyticError> {
        check_positive("mean service time", es)?;
        check_non_negative("arrival SCV", ca2)?;
        check_non_negative("service SCV", cs2)?;
        Ok(AllenCunneen {
            mmc: Mmc::new(lambda, 1.0 / es, c)?,
            ca2,
            cs2,
        })
    }

    pub fn stability(&self) -> Stability {
        self.mmc.stability()
    }

    /// Mean wait in queue [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_wait(&self) -> Result<f64, Stability> {
        Ok(self.mmc.mean_wait()? * 0.5 * (self.ca2 + self.cs2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kingman_exact_cases() {
        // M/M/1 (c_a² = c_s² = 1): exact, Wq = 4 at ρ = 0.8.
        assert!(
            (Kingman::new(0.8, 1.0, 1.0, 1.0)
                .unwrap()
                .mean_wait()
                .unwrap()
                - 4.0)
                .abs()
                < 1e-12
        );
        // M/D/1: Kingman equals P-K, 2.
        assert!(
            (Kingman::new(0.8, 1.0, 1.0, 0.0)
                .unwrap()
                .mean_wait()
                .unwrap()
                - 2.0)
                .abs()
                < 1e-12
        );
        // D/D/1 never waits.
        assert_eq!(
            Kingman::new(0.8, 1.0, 0.0, 0.0)
                .unwrap()
                .mean_wait()
                .unwrap(),
            0.0
        );
        assert!(matches!(
            Kingman::new(1.0, 1.0, 1.0, 1.0).unwrap().mean_wait(),
            Err(Stability::Unstable { .. })
        ));
    }

    #[test]
    fn allen_cunneen() {
        // Poisson + exponential is exact M/M/2: Wq = 1/3.
        let q = AllenCunneen::new(1.0, 1.0, 2, 1.0, 1.0).unwrap();
        assert!((q.mean_wait().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // Burstiness k = 4 → c_a² = 0.25, deterministic service: factor 0.125.
        let ca2 = ca2_from_burstiness(4.0).unwrap();
        let q = AllenCunneen::new(1.0, 1.0, 2, ca2, 0.0).unwrap();
        assert!((q.mean_wait().unwrap() - 0.125 / 3.0).abs() < 1e-12);
        assert!(ca2_from_burstiness(0.0).is_err());
    }
}
