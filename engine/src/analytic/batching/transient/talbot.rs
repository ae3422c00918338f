//! The law at the horizon, `e^{QT}·p(0)`, by Talbot quadrature of the Bromwich integral:
//! a rational approximation of `e^x` on the negative real axis whose cost does not grow
//! with `T·Λ`: [`NODES`]/2 complex tridiagonal solves, against the Chebyshev expansion's
//! `√(90·T·Λ)` products.

/// Quadrature nodes on the contour (pairs of complex conjugates, so half as many solves).
/// The error falls like `3.89^{−N}`; rounding grows like `e^{0.171·N}`: 24 balances them
/// near 1e-14 of the start vector's norm in symmetrised coordinates.
const NODES: usize = 24;

/// `p(T) = e^{QT}·p(0)` for the birth–death chain on `0..=top` with stationary law `pi`,
/// `p(0)` the law `start`.
///
/// # Formula
/// With `y = p/√π` the chain is `y' = S·y`, S symmetric tridiagonal with spectrum in
/// `(−∞, 0]`, and `e^{ST} = (1/2πi)∮ e^z (z − ST)^{−1} dz` over a contour around that
/// spectrum. On Talbot's contour optimised by Trefethen, Weideman & Schmelzer (2006),
/// `z(θ) = N·(0.5017·θ·cot(0.6407·θ) − 0.6122 + 0.2645·iθ)`, the trapezoidal rule with N
/// nodes `θ_k = −π + (k + ½)·2π/N` gives `e^{ST}·y ≈ (1/iN)·Σ_k e^{z_k}·z'_k·(z_k − ST)^{−1}·y`,
/// and the nodes pair into conjugates: twice the real part of the sum over `θ_k > 0`.
pub(super) fn transient_law(
    pi: &[f64],
    start: &[f64],
    births: &[f64],
    deaths: &[f64],
    top: usize,
    horizon: f64,
) -> Vec<f64> {
    let m = top + 1;
    // −S·T: diagonal and off-diagonal (the matrix's, so −T times S's).
    let (mut diag, mut off) = super::minus_s(births, deaths, top);
    diag.iter_mut().for_each(|d| *d *= horizon);
    off.iter_mut().for_each(|o| *o *= -horizon);
    let y0 = super::symmetrised(start, pi);
    let nf = NODES as f64;
    let h = 2.0 * std::f64::consts::PI / nf;
    let mut y = vec![0.0; m];
    let mut x = vec![C::default(); m];
    for k in NODES / 2..NODES {
        let th = -std::f64::consts::PI + (k as f64 + 0.5) * h;
        let (s, c) = (libm::sin(0.6407 * th), libm::cos(0.6407 * th));
        let cot = c / s;
        let z = C(nf * (0.5017 * th * cot - 0.6122), nf * 0.2645 * th);
        let dz = C(
            nf * (0.5017 * cot - 0.5017 * 0.6407 * th / (s * s)),
            nf * 0.2645,
        );
        // (z + (−ST))·x = y0.
        x.iter_mut().zip(&y0).for_each(|(x, v)| *x = C(*v, 0.0));
        solve(&off, &diag, z, &mut x);
        // Weight 2·(1/iN)·e^z·z'.
        let w = C(
            libm::exp(z.0) * libm::cos(z.1),
            libm::exp(z.0) * libm::sin(z.1),
        )
        .mul(dz);
        let w = C(2.0 * w.1 / nf, -2.0 * w.0 / nf);
        for (yv, xv) in y.iter_mut().zip(&x) {
            *yv += w.0 * xv.0 - w.1 * xv.1;
        }
    }
    y.iter().zip(pi).map(|(v, p)| v * libm::sqrt(*p)).collect()
}

/// A complex number.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct C(f64, f64);

impl C {
    fn add(self, o: C) -> C {
        C(self.0 + o.0, self.1 + o.1)
    }
    fn sub(self, o: C) -> C {
        C(self.0 - o.0, self.1 - o.1)
    }
    fn mul(self, o: C) -> C {
        C(self.0 * o.0 - self.1 * o.1, self.0 * o.1 + self.1 * o.0)
    }
    fn scale(self, r: f64) -> C {
        C(self.0 * r, self.1 * r)
    }
    fn div(self, o: C) -> C {
        // Smith's algorithm.
        if o.0.abs() >= o.1.abs() {
            let r = o.1 / o.0;
            let d = o.0 + o.1 * r;
            C((self.0 + self.1 * r) / d, (self.1 - self.0 * r) / d)
        } else {
            let r = o.0 / o.1;
            let d = o.0 * r + o.1;
            C((self.0 * r + self.1) / d, (self.1 * r - self.0) / d)
        }
    }
    fn abs1(self) -> f64 {
        self.0.abs() + self.1.abs()
    }
}

/// Solves `(z·I + A)·x = rhs` in place, A real symmetric tridiagonal with diagonal `d` and
/// off-diagonal `e` (Gaussian elimination with partial pivoting, as LAPACK's `zgtsv`).
fn solve(e: &[f64], d: &[f64], z: C, x: &mut [C]) {
    let n = d.len();
    let mut dg: Vec<C> = d.iter().map(|v| z.add(C(*v, 0.0))).collect();
    let mut du: Vec<C> = e.iter().map(|v| C(*v, 0.0)).collect();
    let mut du2 = vec![C::default(); n];
    for i in 0..n.saturating_sub(1) {
        let sub = C(e[i], 0.0);
        if dg[i].abs1() >= sub.abs1() {
            let f = sub.div(dg[i]);
            dg[i + 1] = dg[i + 1].sub(f.mul(du[i]));
            x[i + 1] = x[i + 1].sub(f.mul(x[i]));
        } else {
            // Swap rows i and i + 1.
            let f = dg[i].div(sub);
            dg[i] = sub;
            let old_du = du[i];
            du[i] = dg[i + 1];
            dg[i + 1] = old_du.sub(f.mul(dg[i + 1]));
            if i + 2 < n {
                du2[i] = du[i + 1];
                du[i + 1] = du[i + 1].scale(-1.0).mul(f);
            }
            x.swap(i, i + 1);
            x[i + 1] = x[i + 1].sub(f.mul(x[i]));
        }
    }
    x[n - 1] = x[n - 1].div(dg[n - 1]);
    if n > 1 {
        x[n - 2] = x[n - 2].sub(du[n - 2].mul(x[n - 1])).div(dg[n - 2]);
    }
    for i in (0..n.saturating_sub(2)).rev() {
        x[i] = x[i]
            .sub(du[i].mul(x[i + 1]))
            .sub(du2[i].mul(x[i + 2]))
            .div(dg[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::chebyshev;
    use super::*;

    /// Stationary law of the chain.
    fn stationary(births: &[f64], deaths: &[f64]) -> Vec<f64> {
        let n = births.len();
        let mut pi = vec![1.0; n];
        for i in 1..n {
            pi[i] = pi[i - 1] * births[i - 1] / deaths[i];
        }
        let z: f64 = pi.iter().sum();
        pi.iter().map(|p| p / z).collect()
    }

    #[test]
    fn talbot_matches_chebyshev() {
        // (births, deaths, horizon, start state): near-critical, overloaded, a wide batch,
        // from the empty state and from a state near the mode.
        let wide_b: Vec<f64> = (0..300).map(|n| if n < 299 { 15.0 } else { 0.0 }).collect();
        let wide_d: Vec<f64> = (0..300).map(|n| n.min(128) as f64 / 7.7).collect();
        let cases: Vec<(Vec<f64>, Vec<f64>, f64, usize)> = vec![
            (
                (0..60).map(|i| if i < 59 { 0.98 } else { 0.0 }).collect(),
                (0..60).map(|i| if i == 0 { 0.0 } else { 1.0 }).collect(),
                300.0,
                0,
            ),
            (
                (0..61).map(|n| if n < 60 { 0.3 } else { 0.0 }).collect(),
                (0..61).map(|n| if n == 0 { 0.0 } else { 0.2 }).collect(),
                1000.0,
                0,
            ),
            (wide_b.clone(), wide_d.clone(), 600.0, 115),
            (wide_b, wide_d, 20.0, 100),
        ];
        for (births, deaths, t, at) in cases {
            let n = births.len();
            let pi = stationary(&births, &deaths);
            let mut start = vec![0.0; n];
            start[at] = 1.0;
            let got = transient_law(&pi, &start, &births, &deaths, n - 1, t);
            let want = chebyshev::transient_law(&pi, &start, &births, &deaths, n - 1, t);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() < 1e-11, "state {i}: {g} vs {w} (T {t})");
            }
            let total: f64 = got.iter().sum();
            assert!((total - 1.0).abs() < 1e-11, "{total}");
        }
    }
}
