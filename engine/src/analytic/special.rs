//! Special functions shared by the models: regularized incomplete gamma (Erlang and gamma
//! CDFs), the normal CDF, and a monotone root finder for mixture quantiles. libm only, so
//! native and wasm results are identical.

/// Regularized lower incomplete gamma `P(a, x)` for `a > 0`, `x ≥ 0`.
///
/// # Formula
/// Series `P = e^{−x} x^a / Γ(a+1) Σ x^n / ((a+1)…(a+n))` for `x < a + 1`, Lentz's
/// continued fraction for `Q = 1 − P` otherwise (Numerical Recipes §6.2).
pub(crate) fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if !x.is_finite() {
        return 1.0;
    }
    let ln_pre = a * libm::log(x) - x - libm::lgamma(a);
    if x < a + 1.0 {
        let mut ap = a;
        let mut sum = 1.0 / a;
        let mut del = sum;
        for _ in 0..10_000 {
            ap += 1.0;
            del *= x / ap;
            sum += del;
            if del.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (sum * libm::exp(ln_pre)).clamp(0.0, 1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (1.0 - libm::exp(ln_pre) * h).clamp(0.0, 1.0)
    }
}

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
    gamma_p(shape, t * shape / mean)
}

/// CDF of Erlang(k, rate) at `t`.
pub(crate) fn erlang_cdf(k: u32, rate: f64, t: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    gamma_p(k as f64, rate * t)
}

/// Standard normal CDF.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / core::f64::consts::SQRT_2)
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
    fn gamma_p_known_values() {
        // P(1, x) = 1 − e^{−x}.
        for x in [0.1, 1.0, 3.0, 10.0] {
            assert!((gamma_p(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-13);
        }
        // Erlang(3, 1) at 2: 1 − e^{−2}(1 + 2 + 2) = 0.3233235838.
        assert!((erlang_cdf(3, 1.0, 2.0) - 0.323_323_583_8).abs() < 1e-9);
        // P(0.5, x) = erf(√x).
        assert!((gamma_p(0.5, 2.0) - libm::erf(2f64.sqrt())).abs() < 1e-12);
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-9);
    }

    #[test]
    fn inversion() {
        let t = invert_monotone(|t| 1.0 - libm::exp(-t), 0.99, 0.0, 1.0);
        assert!((t - 100f64.ln()).abs() < 1e-8);
    }
}
