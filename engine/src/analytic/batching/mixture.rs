//! The TTFT distribution as a mixture and its quantiles: components (sums of two uniforms,
//! gammas, point masses) with their CDFs, densities and slopes, and the inversion of the
//! mixture CDF by safeguarded Halley steps on its log-odds.

use crate::analytic::reference_mmc::LEVELS;
use crate::analytic::special::gamma_cdf_mean_scv;
use statrs::function::gamma::ln_gamma;

/// One mixture component of the TTFT distribution.
#[derive(Clone, Copy, Debug)]
pub(super) enum Comp {
    /// `base + U(0, w1) + U(0, w2)` with weight w.
    Uniform { w: f64, base: f64, w1: f64, w2: f64 },
    /// Gamma with the given mean [s] and SCV, weight w; shape `a = 1/scv`, rate
    /// `a/mean` [1/s], `lga = ln Γ(a)` and `ln_a1 = ln((a + 1)/a)` fixed per component;
    /// `cut` the log-tail below which the tail, times w, is under 4e-18 of the mixture.
    Gamma {
        w: f64,
        mean: f64,
        scv: f64,
        a: f64,
        rate: f64,
        lga: f64,
        ln_a1: f64,
        cut: f64,
    },
    /// A point mass at `at` [s] with weight w.
    Step { w: f64, at: f64 },
}

impl Comp {
    /// Gamma with the given mean [s] and SCV (a point mass where either degenerates), weight
    /// w of the mixture's `total`.
    pub(super) fn gamma(w: f64, mean: f64, scv: f64, total: f64) -> Comp {
        if mean <= 0.0 {
            Comp::Step { w, at: 0.0 }
        } else if scv <= 1e-12 {
            Comp::Step { w, at: mean }
        } else {
            let a = 1.0 / scv;
            Comp::Gamma {
                w,
                mean,
                scv,
                a,
                rate: a / mean,
                lga: ln_gamma(a),
                ln_a1: libm::log((a + 1.0) / a),
                cut: 40.0 + libm::log(w / total),
            }
        }
    }

    /// Weighted CDF, density [1/s] and its derivative [1/s²] at t.
    pub(super) fn cdf_pdf(&self, t: f64) -> (f64, f64, f64) {
        match *self {
            Comp::Uniform { w, base, w1, w2 } => {
                let (c, d, e) = uniform_sum_cdf_pdf(t - base, w1.max(0.0), w2.max(0.0));
                (w * c, w * d, w * e)
            }
            Comp::Gamma {
                w,
                mean,
                scv,
                a,
                rate,
                lga,
                ln_a1,
                cut,
            } => {
                let x = t * rate;
                if x <= 0.0 {
                    return (0.0, 0.0, 0.0);
                }
                // ln of x^a e^{−x}/Γ(a); the tails are bounded by it: for x < a, the series
                // gives P(a, x) ≤ e^{ln_pre}/a · (a + 1)/(a + 1 − x) ≤ e^{ln_pre}·(a + 1)/a;
                // for x ≥ a, Q(a, x) ≤ x^{a−1}e^{−x}/Γ(a) · x/(x − a + 1) ≤ e^{ln_pre} when
                // a > 1, and ≤ e^{ln_pre}/x when a ≤ 1 (the density decreases).
                let ln_x = libm::log(x);
                let ln_pre = a * ln_x - x - lga;
                let tail = if x < a {
                    ln_pre + ln_a1
                } else if a > 1.0 {
                    ln_pre
                } else {
                    ln_pre - ln_x
                };
                if tail < -cut {
                    return (if x < a { 0.0 } else { w }, 0.0, 0.0);
                }
                let pdf = libm::exp(ln_pre) / t;
                (
                    w * gamma_cdf_mean_scv(mean, scv, t),
                    w * pdf,
                    w * pdf * ((a - 1.0) / t - rate),
                )
            }
            Comp::Step { w, at } => (if t >= at { w } else { 0.0 }, 0.0, 0.0),
        }
    }

    /// Weighted first and second moments [s, s²].
    pub(super) fn moments(&self) -> (f64, f64) {
        match *self {
            Comp::Uniform { w, base, w1, w2 } => {
                let m = base + 0.5 * (w1 + w2);
                (w * m, w * (m * m + (w1 * w1 + w2 * w2) / 12.0))
            }
            Comp::Gamma { w, mean, scv, .. } => (w * mean, w * mean * mean * (1.0 + scv)),
            Comp::Step { w, at } => (w * at, w * at * at),
        }
    }
}

/// The mixture's CDF, density [1/s] and density slope [1/s²] at t, for components whose
/// weights sum to `total`.
pub(super) fn mixture_cdf_pdf(comps: &[Comp], total: f64, t: f64) -> (f64, f64, f64) {
    let (c, d, e) = comps.iter().fold((0.0, 0.0, 0.0), |(c, d, e), comp| {
        let (x, y, z) = comp.cdf_pdf(t);
        (c + x, d + y, e + z)
    });
    (c / total, d / total, e / total)
}

/// The mixture's p50, p95 and p99 ([`LEVELS`]) [s]. Each inversion starts from the
/// quantile of a gamma with the mixture's two moments (Wilson–Hilferty), scaled by where
/// the level below actually fell.
pub(super) fn quantiles(comps: &[Comp], total: f64) -> [f64; 3] {
    let levels = LEVELS;
    let gamma_q = {
        let (m1, m2) = comps.iter().fold((0.0, 0.0), |(a, b), c| {
            let (x, y) = c.moments();
            (a + x, b + y)
        });
        let (m1, m2) = (m1 / total, m2 / total);
        let scv = ((m2 - m1 * m1) / (m1 * m1)).clamp(0.0, 4.0);
        move |z: f64| {
            m1 * (1.0 - scv / 9.0 + z * libm::sqrt(scv) / 3.0)
                .max(0.05)
                .powi(3)
        }
    };
    let cdf_pdf = |t: f64| mixture_cdf_pdf(comps, total, t);
    let (g50, g95, g99) = (gamma_q(0.0), gamma_q(1.644_853_6), gamma_q(2.326_347_9));
    let q50 = invert_cdf(cdf_pdf, levels[0], 0.0, g50.max(1e-6), 1e-6);
    let q95 = invert_cdf(cdf_pdf, levels[1], q50, q50 * g95 / g50, 1e-6);
    let q99 = invert_cdf(cdf_pdf, levels[2], q95, q95 * g99 / g95, 1e-6);
    [q50, q95, q99]
}

/// Smallest t ≥ `lo` with `F(t) ≥ target` for a non-decreasing F on [0, ∞) given with its
/// density and the density's slope (`f` returns all three), `F(lo) < target`, to a relative
/// tolerance `rel` (the model is not more accurate than 1e-6), `0 < target < 1`. Halley's
/// step (cubic) on the log-odds from `start`, else Newton's, kept inside the bracket found
/// so far and replaced by bisection
/// (or doubling, before an upper end is known) when it would leave it or stops halving the
/// step, as in Numerical Recipes' `rtsafe`; 2–4 evaluations on the smooth mixture CDFs,
/// and the bracket still closes on a jump.
pub(super) fn invert_cdf(
    f: impl Fn(f64) -> (f64, f64, f64),
    target: f64,
    lo: f64,
    start: f64,
    rel: f64,
) -> f64 {
    let (mut lo, mut hi) = (lo.max(0.0), f64::INFINITY);
    let mut t = if start > lo {
        start
    } else {
        lo.max(1e-9) * 2.0
    };
    let mut last_step = f64::INFINITY;
    let logit_target = libm::log(target / (1.0 - target));
    for _ in 0..200 {
        let (c, d, e) = f(t);
        let g = c - target;
        if g >= 0.0 {
            hi = t;
        } else {
            lo = t;
        }
        if hi.is_finite() && hi - lo <= rel * hi {
            return hi;
        }
        // Steps on the log-odds L = ln(F/(1 − F)), nearly linear in t in either tail
        // (where F itself bends sharply): Newton's step −(L − L*)/L', corrected by Halley's
        // factor when the curvature is mild.
        let q = 1.0 - c;
        // The step, and the error a Newton step of that size leaves (|L''/2L'|·step²;
        // Halley's is of higher order).
        let (step, left) = if d > 0.0 && c > 0.0 && q > 0.0 {
            let pq = c * q;
            let h = libm::log(c / q) - logit_target;
            let l1 = d / pq;
            let l2 = e / pq - d * d * (q - c) / (pq * pq);
            let newton = -h / l1;
            let corr = 1.0 - 0.5 * newton * l2 / l1;
            let step = if (0.5..=2.0).contains(&corr) {
                newton / corr
            } else {
                newton
            };
            (step, (0.5 * l2 / l1).abs() * step * step)
        } else {
            (f64::NAN, f64::NAN)
        };
        let next = t + step;
        if next > lo && next < hi && step.abs() < 0.5 * last_step {
            if step.abs() <= rel * t || left <= 0.01 * rel * t {
                // Converged to well below rel once this step is taken.
                return next;
            }
            last_step = step.abs();
            t = next;
        } else {
            let next = if hi.is_finite() {
                0.5 * (lo + hi)
            } else {
                2.0 * t
            };
            last_step = (next - t).abs();
            t = next;
        }
    }
    hi.min(t)
}

/// CDF of `U(0, a) + U(0, b)` at y (degenerate widths allowed).
fn uniform_sum_cdf(y: f64, a: f64, b: f64) -> f64 {
    let (w1, w2) = if a <= b { (a, b) } else { (b, a) };
    if y <= 0.0 {
        return 0.0;
    }
    if y >= w1 + w2 {
        return 1.0;
    }
    if w2 <= 1e-15 {
        return 1.0;
    }
    if w1 <= 1e-15 {
        return (y / w2).min(1.0);
    }
    if y < w1 {
        y * y / (2.0 * w1 * w2)
    } else if y < w2 {
        (y - w1 / 2.0) / w2
    } else {
        1.0 - (w1 + w2 - y) * (w1 + w2 - y) / (2.0 * w1 * w2)
    }
}

/// CDF, density and the density's slope of `U(0, a) + U(0, b)` at y (degenerate widths
/// allowed; a point mass has density 0).
pub(super) fn uniform_sum_cdf_pdf(y: f64, a: f64, b: f64) -> (f64, f64, f64) {
    let (w1, w2) = if a <= b { (a, b) } else { (b, a) };
    let c = uniform_sum_cdf(y, a, b);
    let (d, e) = if y <= 0.0 || y >= w1 + w2 || w2 <= 1e-15 {
        (0.0, 0.0)
    } else if w1 <= 1e-15 {
        (1.0 / w2, 0.0)
    } else if y < w1 {
        (y / (w1 * w2), 1.0 / (w1 * w2))
    } else if y < w2 {
        (1.0 / w2, 0.0)
    } else {
        ((w1 + w2 - y) / (w1 * w2), -1.0 / (w1 * w2))
    };
    (c, d, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_sum() {
        assert!((uniform_sum_cdf(1.0, 1.0, 1.0) - 0.5).abs() < 1e-12);
        assert!((uniform_sum_cdf(0.5, 0.0, 1.0) - 0.5).abs() < 1e-12);
        assert_eq!(uniform_sum_cdf(3.0, 1.0, 1.0), 1.0);
    }

    #[test]
    fn inversion_finds_exponential_quantiles() {
        let exp2 = |t: f64| {
            let e = libm::exp(-2.0 * t);
            (1.0 - e, 2.0 * e, -4.0 * e)
        };
        for level in [0.5, 0.95, 0.99, 0.999] {
            let exact = -libm::log(1.0 - level) / 2.0;
            for start in [0.01, 0.1, 10.0] {
                let t = invert_cdf(exp2, level, 0.0, start, 1e-9);
                assert!((t - exact).abs() <= 1e-8 * exact, "{level}: {t} vs {exact}");
            }
        }
        // A step CDF (an atom): the smallest t reaching the level.
        let step = |t: f64| (if t >= 3.0 { 1.0 } else { 0.0 }, 0.0, 0.0);
        let t = invert_cdf(step, 0.5, 0.0, 1.0, 1e-9);
        assert!((t - 3.0).abs() < 1e-8, "{t}");
        // A mixture with a plateau: half at 0.06 ± 0.01, half exponential of mean 5.
        let mix = |t: f64| {
            let (c, d, s) = uniform_sum_cdf_pdf(t - 0.05, 0.0, 0.02);
            let e = libm::exp(-t / 5.0);
            (
                0.5 * c + 0.5 * (1.0 - e),
                0.5 * d + 0.1 * e,
                0.5 * s - 0.02 * e,
            )
        };
        for level in [0.3, 0.5, 0.95, 0.99] {
            let t = invert_cdf(mix, level, 0.0, 2.5, 1e-9);
            let lo = mix(t * (1.0 - 1e-8)).0;
            assert!(
                mix(t).0 >= level - 1e-9 && lo <= level + 1e-9,
                "{level}: {t}"
            );
        }
    }

    #[test]
    fn gamma_component_density_and_tails() {
        for (mean, scv) in [
            (0.5, 3.0),
            (2.0, 1.0),
            (10.0, 0.25),
            (40.0, 0.02),
            (90.0, 0.001),
        ] {
            let c = Comp::gamma(1.0, mean, scv, 1.0);
            for r in [0.01, 0.3, 0.9, 1.0, 1.1, 2.0, 5.0] {
                let t = r * mean;
                let (p, d, e) = c.cdf_pdf(t);
                let exact = gamma_cdf_mean_scv(mean, scv, t);
                assert!(
                    (p - exact).abs() < 1e-16,
                    "{mean} {scv} {t}: {p} vs {exact}"
                );
                let h = 1e-6 * t;
                let num = (gamma_cdf_mean_scv(mean, scv, t + h)
                    - gamma_cdf_mean_scv(mean, scv, t - h))
                    / (2.0 * h);
                assert!(
                    (d - num).abs() < 1e-5 * num + 1e-12,
                    "{mean} {scv} {t}: {d} vs {num}"
                );
                let slope = (c.cdf_pdf(t + h).1 - c.cdf_pdf(t - h).1) / (2.0 * h);
                assert!(
                    (e - slope).abs() < 1e-4 * slope.abs() + 1e-9,
                    "{mean} {scv} {t}: {e} vs {slope}"
                );
            }
        }
    }
}
