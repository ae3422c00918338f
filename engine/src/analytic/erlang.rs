//! Erlang B, Erlang C, M/M/c and M/M/c/K.
//!
//! # Formula
//! Offered load `A = λ/μ` [Erlang], `ρ = A/c`.
//! * Erlang B (M/M/c/c blocking), by the numerically stable recursion
//!   `B(0) = 1`, `B(k) = A·B(k−1) / (k + A·B(k−1))`.
//! * Erlang C (M/M/c probability of waiting) `C = c·B / (c − A(1 − B))`, ρ < 1.
//! * M/M/c: `Wq = C / (cμ − λ)`, `P(Wq > t) = C e^{−(cμ−λ)t}`.
//! * M/M/c/K: `p_n ∝ Aⁿ/n!` (n ≤ c), `Aⁿ/(c! c^{n−c})` (c < n ≤ K); blocking `p_K`.
//!
//! # Validity
//! Poisson arrivals, exponential service, identical servers, FIFO. Erlang B is insensitive
//! to the service distribution (any mean-1/μ service). M/M/c needs ρ < 1; M/M/c/K is
//! always stable (finite).

use super::{check_level, check_non_negative, check_positive, AnalyticError, Stability};

/// Erlang B: blocking probability of an M/G/c/c loss system with offered load `a`.
///
/// # Errors
/// [`AnalyticError::Invalid`] for a negative or non-finite load. `c = 0` gives 1 (all lost).
pub fn erlang_b(c: u32, a: f64) -> Result<f64, AnalyticError> {
    check_non_negative("offered load", a)?;
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    Ok(b)
}

/// Erlang C: probability an arrival waits in an M/M/c queue with offered load `a`.
///
/// # Errors
/// [`AnalyticError::Invalid`] for c = 0 or a bad load; the [`Stability::Unstable`] case
/// is returned as `Ok(Err(stability))`.
pub fn erlang_c(c: u32, a: f64) -> Result<Result<f64, Stability>, AnalyticError> {
    if c == 0 {
        return Err(AnalyticError::Invalid {
            name: "servers",
            value: 0.0,
            why: "must be at least 1",
        });
    }
    let b = erlang_b(c, a)?;
    let rho = a / c as f64;
    if rho >= 1.0 {
        return Ok(Err(Stability::Unstable { rho }));
    }
    Ok(Ok(c as f64 * b / (c as f64 - a * (1.0 - b))))
}

/// An M/M/c queue (infinite FIFO queue).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mmc {
    lambda: f64,
    mu: f64,
    c: u32,
}

impl Mmc {
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0, μ ≤ 0 or c = 0.
    pub fn new(lambda: f64, mu: f64, c: u32) -> Result<Mmc, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        check_positive("service rate", mu)?;
        if c == 0 {
            return Err(AnalyticError::Invalid {
                name: "servers",
                value: 0.0,
                why: "must be at least 1",
            });
        }
        Ok(Mmc { lambda, mu, c })
    }

    /// `ρ = λ/(cμ)`.
    pub fn stability(&self) -> Stability {
        Stability::of(self.lambda / (self.c as f64 * self.mu))
    }

    /// Erlang C, the probability of waiting.
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn p_wait(&self) -> Result<f64, Stability> {
        erlang_c(self.c, self.lambda / self.mu).unwrap_or(Ok(1.0))
    }

    /// Mean wait in queue `Wq = C/(cμ − λ)` [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_wait(&self) -> Result<f64, Stability> {
        let pw = self.p_wait()?;
        Ok(pw / (self.c as f64 * self.mu - self.lambda))
    }

    /// Mean sojourn `W = Wq + 1/μ` [s].
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_sojourn(&self) -> Result<f64, Stability> {
        Ok(self.mean_wait()? + 1.0 / self.mu)
    }

    /// Mean number waiting `Lq = λ Wq`.
    ///
    /// # Errors
    /// [`Stability::Unstable`] when ρ ≥ 1.
    pub fn mean_queue(&self) -> Result<f64, Stability> {
        Ok(self.lambda * self.mean_wait()?)
    }

    /// q-quantile of the wait in queue: `max(0, ln(C/(1−q)) / (cμ − λ))` [s].
    ///
    /// # Errors
    /// `Err(Ok(stability))` when unstable, `Err(Err(e))` for q outside (0, 1).
    pub fn wait_quantile(&self, q: f64) -> Result<f64, Result<Stability, AnalyticError>> {
        check_level(q).map_err(Err)?;
        let pw = self.p_wait().map_err(Ok)?;
        if pw <= 1.0 - q {
            return Ok(0.0);
        }
        Ok(libm::log(pw / (1.0 - q)) / (self.c as f64 * self.mu - self.lambda))
    }
}

/// An M/M/c/K queue: c servers, at most K in system (K ≥ c); arrivals to a full system
/// are lost.
#[derive(Clone, Debug, PartialEq)]
pub struct Mmck {
    lambda: f64,
    c: u32,
    p: Vec<f64>,
}

impl Mmck {
    /// # Errors
    /// [`AnalyticError::Invalid`] for λ < 0, μ ≤ 0, c = 0 or K < c.
    pub fn new(lambda: f64, mu: f64, c: u32, k: u32) -> Result<Mmck, AnalyticError> {
        check_non_negative("arrival rate", lambda)?;
        check_positive("service rate", mu)?;
        if c == 0 {
            return Err(AnalyticError::Invalid {
                name: "servers",
                value: 0.0,
                why: "must be at least 1",
            });
        }
        if k < c {
            return Err(AnalyticError::Invalid {
                name: "capacity K",
                value: k as f64,
                why: "must be >= servers c",
            });
        }
        // Unnormalised p_n by the product of birth/death ratios, rescaled to avoid overflow.
        let mut p = Vec::with_capacity(k as usize + 1);
        p.push(1.0);
        for n in 1..=k {
            let death = mu * n.min(c) as f64;
            let next = p[n as usize - 1] * lambda / death;
            p.push(next);
            if next > 1e200 {
                p.iter_mut().for_each(|x| *x *= 1e-200);
            }
        }
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        Ok(Mmck { lambda, c, p })
    }

    /// Stationary `P(N = n)`, n = 0..=K.
    pub fn probabilities(&self) -> &[f64] {
        &self.p
    }

    /// Blocking probability `p_K` (PASTA).
    pub fn blocking(&self) -> f64 {
        *self.p.last().unwrap_or(&0.0)
    }

    /// Mean number in system L.
    pub fn mean_in_system(&self) -> f64 {
        self.p.iter().enumerate().map(|(n, p)| n as f64 * p).sum()
    }

    /// Mean number waiting Lq.
    pub fn mean_queue(&self) -> f64 {
        self.p
            .iter()
            .enumerate()
            .map(|(n, p)| n.saturating_sub(self.c as usize) as f64 * p)
            .sum()
    }

    /// Mean sojourn of accepted customers `W = L / (λ(1 − p_K))` [s] (`None` when λ = 0).
    pub fn mean_sojourn(&self) -> Option<f64> {
        let eff = self.lambda * (1.0 - self.blocking());
        (eff > 0.0).then(|| self.mean_in_system() / eff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_b_published() {
        // Standard Erlang B table values.
        assert!((erlang_b(10, 5.0).unwrap() - 0.01838).abs() < 5e-6);
        assert!((erlang_b(1, 1.0).unwrap() - 0.5).abs() < 1e-15);
        assert!((erlang_b(5, 2.0).unwrap() - 0.03670).abs() < 5e-6);
        assert!((erlang_b(20, 15.0).unwrap() - 0.04561).abs() < 5e-5);
        // Stable for large c where the direct formula overflows.
        let b = erlang_b(2000, 1900.0).unwrap();
        assert!(b.is_finite() && b > 0.0 && b < 0.05);
        assert_eq!(erlang_b(0, 3.0).unwrap(), 1.0);
    }

    #[test]
    fn erlang_c_published() {
        assert!((erlang_c(2, 1.0).unwrap().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // c = 1 reduces to ρ.
        assert!((erlang_c(1, 0.7).unwrap().unwrap() - 0.7).abs() < 1e-12);
        // Call-centre textbook example: c = 10, A = 8 → C ≈ 0.4092.
        assert!((erlang_c(10, 8.0).unwrap().unwrap() - 0.4092).abs() < 5e-4);
        assert_eq!(
            erlang_c(2, 2.0).unwrap(),
            Err(Stability::Unstable { rho: 1.0 })
        );
    }

    #[test]
    fn mmc_values() {
        // M/M/2 with λ = 1, μ = 1: Wq = C/(2−1) = 1/3, W = 4/3.
        let q = Mmc::new(1.0, 1.0, 2).unwrap();
        assert!((q.mean_wait().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!((q.mean_sojourn().unwrap() - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(q.wait_quantile(0.5).unwrap(), 0.0);
        assert!((q.wait_quantile(0.9).unwrap() - (1.0f64 / 3.0 / 0.1).ln()).abs() < 1e-12);
        assert!(matches!(
            Mmc::new(3.0, 1.0, 2).unwrap().mean_wait(),
            Err(Stability::Unstable { .. })
        ));
        assert!(Mmc::new(1.0, 1.0, 0).is_err());
    }

    #[test]
    fn mmck_reduces_to_known_cases() {
        // M/M/c/c blocking is Erlang B.
        let q = Mmck::new(5.0, 1.0, 10, 10).unwrap();
        assert!((q.blocking() - erlang_b(10, 5.0).unwrap()).abs() < 1e-12);
        // M/M/1/K: p_K = (1−ρ)ρ^K/(1−ρ^{K+1}).
        let (rho, k) = (0.9f64, 5);
        let q = Mmck::new(0.9, 1.0, 1, k).unwrap();
        let pk = (1.0 - rho) * rho.powi(k as i32) / (1.0 - rho.powi(k as i32 + 1));
        assert!((q.blocking() - pk).abs() < 1e-12);
        // Overload is fine for a finite system.
        let q = Mmck::new(10.0, 1.0, 2, 6).unwrap();
        assert!(q.blocking() > 0.7 && q.mean_sojourn().unwrap().is_finite());
        assert!(Mmck::new(1.0, 1.0, 3, 2).is_err());
    }
}
