//! Special functions and distributions shared by the models, from `statrs`: the gamma CDF
//! by mean and SCV, the Erlang CDF, Poisson tails and the standard normal CDF and
//! quantile; and a monotone root finder for mixture quantiles. statrs evaluates with the
//! platform's `f64` functions, so native and wasm predictions can differ in the last bits
//! (the simulator's records do not use these functions).

use statrs::distribution::{
    Continuous, ContinuousCDF, DiscreteCDF, Erlang, Gamma, Normal, Poisson,
};

/// CDF of a gamma distribution with the given mean and squared coefficient of variation
/// at `t` (a point mass at the mean when `scv` is 0).
pub(crate) fn gamma_cdf_mean_scv(mean: f64, scv: f64, t: f64) -> f64 {
    if mean <= 0.0 {
        return if t >= 0.0 { 1.0 } else { 0.0 };
    }
    if scv <= 1e-12 {
        return if t >= mean { 1.0 } else { 0.0 };
    }
    let shape = 1.0 / scv;
    match Gamma::new(shape, shape / mean) {
        Ok(g) => g.cdf(t),
        // A shape or rate that overflows: all the mass at the mean.
        Err(_) => f64::from(t >= mean),
    }
}

/// CDF of Erlang(k, rate) at `t`.
pub(crate) fn erlang_cdf(k: u32, rate: f64, t: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    let x = rate * t;
    if x <= 0.0 {
        return 0.0;
    }
    if !x.is_finite() {
        return 1.0;
    }
    Erlang::new(u64::from(k), rate).map_or(0.0, |e| e.cdf(t))
}

/// `P(N ≥ k)` for N Poisson with the given mean (0 for a mean of 0).
pub(crate) fn poisson_at_least(k: u64, mean: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    Poisson::new(mean).map_or(0.0, |p| p.sf(k - 1))
}

/// `P(N(w) ≥ k)` for the arrivals N(w) in a window w just after an arrival of a renewal
/// stream whose gaps have SCV `scv`, with `mean` = rate × w: the k-th next arrival, a sum
/// of k gaps (a gamma of mean k and SCV scv / k in units of the mean gap), comes within w.
/// Poisson's tail for an SCV of 1.
pub(crate) fn renewal_at_least(k: u64, mean: f64, scv: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if (scv - 1.0).abs() < 1e-9 {
        return poisson_at_least(k, mean);
    }
    gamma_cdf_mean_scv(k as f64, scv / k as f64, mean)
}

/// Standard normal CDF.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    Normal::standard().cdf(z)
}

/// Inverse standard normal CDF (−∞ at 0, ∞ at 1).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let n = Normal::standard();
    let x = n.inverse_cdf(p);
    // One Halley step on the CDF: statrs' inverse alone misses the 1e-12 round trip
    // F(F⁻¹(p)) = p of the test below; the step restores it.
    let e = n.cdf(x) - p;
    let u = e / n.pdf(x);
    x - u / (1.0 + x * u / 2.0)
}
/// Smallest `t` in `[lo, hi]` with `f(t) ≥ target` for a non-decreasing `f`, by bisection
/// (to a relative width of 1e-10). Returns `hi` if even `f(hi) < target`.
pub(crate) fn invert_monotone(
    mut f: impl FnMut(f64) -> f64,
    target: f64,
    mut lo: f64,
    mut hi: f64,
) -> f64 {
    // Expand the upper end until it brackets the target.
    let mut guard = 0;
    while f(hi) < target && guard < 200 {
        lo = hi;
        hi *= 2.0;
        guard += 1;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) >= target {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo <= 1e-10 * hi.abs().max(1e-12) {
            break;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_tails_are_poissons_at_scv_1_and_thinner_for_smoother_streams() {
        for k in [1u64, 2, 3] {
            for mu in [0.01, 0.3, 2.0] {
                let p = poisson_at_least(k, mu);
                let g = gamma_cdf_mean_scv(k as f64, 1.0 / k as f64, mu);
                assert!((p - g).abs() < 1e-12, "k {k} mu {mu}: {p} vs {g}");
                // Within a short window a smoother stream brings fewer arrivals, a
                // burstier one more; past k mean gaps the order turns.
                if mu < 0.5 * k as f64 {
                    assert!(renewal_at_least(k, mu, 0.25) < p, "k {k} mu {mu}");
                    assert!(renewal_at_least(k, mu, 4.0) > p, "k {k} mu {mu}");
                } else if mu > 1.5 * k as f64 {
                    assert!(renewal_at_least(k, mu, 0.25) > p, "k {k} mu {mu}");
                }
            }
        }
        // Deterministic gaps: the next arrival comes exactly one gap later.
        assert_eq!(renewal_at_least(1, 0.99, 0.0), 0.0);
        assert_eq!(renewal_at_least(1, 1.0, 0.0), 1.0);
    }

    #[test]
    fn gamma_and_normal_known_values() {
        // Gamma of shape 1 (SCV 1) is exponential: 1 − e^{−t/mean}.
        for x in [0.1, 1.0, 3.0, 10.0] {
            assert!((gamma_cdf_mean_scv(2.0, 1.0, 2.0 * x) - (1.0 - (-x).exp())).abs() < 1e-13);
        }
        // Erlang(3, 1) at 2: 1 − e^{−2}(1 + 2 + 2) = 0.3233235838.
        assert!((erlang_cdf(3, 1.0, 2.0) - 0.323_323_583_8).abs() < 1e-9);
        assert_eq!(erlang_cdf(0, 1.0, 2.0), 1.0);
        // Shape ½ (SCV 2): P(½, x) = erf(√x), at x = t·shape/mean.
        assert!((gamma_cdf_mean_scv(0.25, 2.0, 1.0) - libm::erf(2f64.sqrt())).abs() < 1e-12);
        // Point masses where the SCV or the mean degenerates.
        assert_eq!(gamma_cdf_mean_scv(3.0, 0.0, 2.9), 0.0);
        assert_eq!(gamma_cdf_mean_scv(3.0, 0.0, 3.0), 1.0);
        assert_eq!(gamma_cdf_mean_scv(0.0, 1.0, 0.0), 1.0);
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-9);
        for p in [1e-6, 0.01, 0.3, 0.5, 0.9, 0.999] {
            let e = normal_cdf(normal_quantile(p)) - p;
            assert!(e.abs() < 1e-12, "{p}: {e}");
        }
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        // Poisson tails: P(N ≥ 1) = 1 − e^{−μ}, P(N ≥ 2) = 1 − e^{−μ}(1 + μ).
        for mu in [1e-3f64, 0.2, 1.0, 7.5] {
            let e = (-mu).exp();
            assert!((poisson_at_least(1, mu) - (1.0 - e)).abs() < 1e-12 * (1.0 - e));
            assert!((poisson_at_least(2, mu) - (1.0 - e * (1.0 + mu))).abs() < 1e-12);
        }
        assert_eq!(poisson_at_least(1, 0.0), 0.0);
        assert_eq!(poisson_at_least(0, 0.0), 1.0);
    }

    #[test]
    fn inversion() {
        let t = invert_monotone(|t| 1.0 - libm::exp(-t), 0.99, 0.0, 1.0);
        assert!((t - 100f64.ln()).abs() < 1e-8);
    }
}
