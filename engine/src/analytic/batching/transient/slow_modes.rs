//! The chain's slow relaxation modes: bisection on Sturm counts and inverse iteration
//! (with a tridiagonal solve) for the few eigenpairs of the symmetrised generator whose
//! `e^{−γT}` is still above double precision at the horizon.

/// Most relaxation modes below θ for which [`slow_mode_law`] is used (each costs a
/// bisection of about 50 Sturm counts).
const SLOW_MODES_MAX: usize = 16;

/// `p(T) = e^{QT}·p(0)` from the chain's slow modes, `p(0)` the law `start`: with
/// `y = p/√π` the chain is `y' = S·y`, S symmetric tridiagonal, so
/// `p_n(T) = π_n + √π_n·Σ_k e^{−γ_k T}·u_k(n)·(u_k·y(0))` over
/// the eigenpairs `(γ_k, u_k)` of −S; the modes with `γ_k ≥ θ` are below double precision
/// at T (see [`super::occupancy_integral`]) and the `slow − 1` others are found by bisection on
/// Sturm counts and two steps of inverse iteration. `None` (use [`super::chebyshev::transient_law`]) when
/// there are too many, or they are too close to each other or to 0 to separate.
#[allow(clippy::too_many_arguments)]
pub(super) fn slow_mode_law(
    pi: &[f64],
    start: &[f64],
    births: &[f64],
    deaths: &[f64],
    top: usize,
    horizon: f64,
    theta: f64,
    slow: usize,
) -> Option<Vec<f64>> {
    if slow > SLOW_MODES_MAX {
        return None;
    }
    let m = top + 1;
    let b = |n: usize| if n < top { births[n] } else { 0.0 };
    let (diag, off) = super::minus_s(births, deaths, top);
    let off2: Vec<f64> = (0..top).map(|n| b(n) * deaths[n + 1]).collect();
    let l = (0..m)
        .map(|n| {
            diag[n] + if n > 0 { off[n - 1] } else { 0.0 } + if n < top { off[n] } else { 0.0 }
        })
        .fold(0.0f64, f64::max);
    // Eigenvalues of −S below x.
    let count = |x: f64| {
        let mut q = diag[0] - x;
        let mut c = 0;
        for n in 0..m {
            if n > 0 {
                q = diag[n] - x - off2[n - 1] / q;
            }
            if q == 0.0 {
                q = -1e-300;
            }
            if q < 0.0 {
                c += 1;
            }
        }
        c
    };
    let neg_off: Vec<f64> = off.iter().map(|o| -o).collect();
    let tol = 1e-15 * l;
    let y0 = super::symmetrised(start, pi);
    let mut y: Vec<f64> = pi.iter().map(|p| libm::sqrt(*p)).collect();
    let mut modes: Vec<Vec<f64>> = vec![pi.iter().map(|p| libm::sqrt(*p)).collect()];
    let mut prev = 0.0;
    for j in 1..slow {
        // γ_j: count(lo) ≤ j < count(hi).
        let (mut lo, mut hi) = (0.0, theta);
        for _ in 0..200 {
            if hi - lo <= tol {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if count(mid) > j {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let gamma = 0.5 * (lo + hi);
        // Separable from 0 and from the previous mode?
        if gamma < 1e-9 * l || gamma - prev < 1e-9 * l {
            return None;
        }
        prev = gamma;
        // Inverse iteration (tridiagonal LU with partial pivoting), orthogonalised against
        // the modes found so far.
        let dg: Vec<f64> = diag.iter().map(|d| d - gamma).collect();
        let mut v = vec![1.0; m];
        for _ in 0..3 {
            solve_tridiagonal(&neg_off, &dg, &neg_off, &mut v);
            for u in &modes {
                let dot: f64 = u.iter().zip(&v).map(|(a, b)| a * b).sum();
                v.iter_mut().zip(u).for_each(|(x, a)| *x -= dot * a);
            }
            let norm = libm::sqrt(v.iter().map(|x| x * x).sum::<f64>());
            if !(norm > 0.0 && norm.is_finite()) {
                return None;
            }
            v.iter_mut().for_each(|x| *x /= norm);
        }
        // Residual check: ‖(−S − γ)v‖∞ small against the spectrum's width.
        let resid = (0..m)
            .map(|n| {
                let mut r = dg[n] * v[n];
                if n > 0 {
                    r -= off[n - 1] * v[n - 1];
                }
                if n < top {
                    r -= off[n] * v[n + 1];
                }
                r.abs()
            })
            .fold(0.0f64, f64::max);
        if resid > 1e-9 * l {
            return None;
        }
        let c = libm::exp(-gamma * horizon) * v.iter().zip(&y0).map(|(a, b)| a * b).sum::<f64>();
        y.iter_mut().zip(&v).for_each(|(yv, u)| *yv += c * u);
        modes.push(v);
    }
    Some(y.iter().zip(pi).map(|(v, p)| v * libm::sqrt(*p)).collect())
}

/// Solves `A·x = rhs` in place for the tridiagonal A with sub-, main and super-diagonals
/// `dl`, `d`, `du` (Gaussian elimination with partial pivoting, as LAPACK's `dgtsv`; an
/// exactly singular pivot is replaced by a tiny one, as inverse iteration wants).
fn solve_tridiagonal(dl: &[f64], d: &[f64], du: &[f64], x: &mut [f64]) {
    let n = d.len();
    let tiny = 1e-300;
    let mut d = d.to_vec();
    let mut du = du.to_vec();
    let mut du2 = vec![0.0; n];
    for i in 0..n.saturating_sub(1) {
        let sub = dl[i];
        if d[i].abs() >= sub.abs() {
            if d[i] == 0.0 {
                d[i] = tiny;
            }
            let f = sub / d[i];
            d[i + 1] -= f * du[i];
            x[i + 1] -= f * x[i];
        } else {
            // Swap rows i and i + 1.
            let f = d[i] / sub;
            d[i] = sub;
            let old_du = du[i];
            du[i] = d[i + 1];
            d[i + 1] = old_du - f * d[i + 1];
            if i + 2 < n {
                du2[i] = du[i + 1];
                du[i + 1] *= -f;
            }
            x.swap(i, i + 1);
            x[i + 1] -= f * x[i];
        }
    }
    if d[n - 1] == 0.0 {
        d[n - 1] = tiny;
    }
    x[n - 1] /= d[n - 1];
    if n > 1 {
        x[n - 2] = (x[n - 2] - du[n - 2] * x[n - 1]) / d[n - 2];
    }
    for i in (0..n.saturating_sub(2)).rev() {
        x[i] = (x[i] - du[i] * x[i + 1] - du2[i] * x[i + 2]) / d[i];
    }
}

#[cfg(test)]
mod tests {
    use super::super::chebyshev::transient_law;
    use super::*;

    #[test]
    fn slow_modes_match_chebyshev() {
        // Near-critical chains at a short horizon: several modes still move at T.
        for (b, d, n, t) in [
            (0.98, 1.0, 60, 300.0),
            (0.6, 1.0, 40, 60.0),
            (1.5, 1.0, 50, 100.0),
        ] {
            let births: Vec<f64> = (0..n).map(|i| if i + 1 < n { b } else { 0.0 }).collect();
            let deaths: Vec<f64> = (0..n).map(|i| if i == 0 { 0.0 } else { d }).collect();
            let top = n - 1;
            let mut pi = vec![1.0; n];
            for i in 1..n {
                pi[i] = pi[i - 1] * births[i - 1] / deaths[i];
            }
            let z: f64 = pi.iter().sum();
            pi.iter_mut().for_each(|p| *p /= z);
            let amp_ln = 0.5 * libm::log(pi.iter().fold(0.0f64, |a, &p| a.max(p)) / pi[0]);
            let theta = (37.0 + amp_ln) / t;
            let slow = (1..=n).find(|&k| {
                k == n || {
                    // Count of eigenvalues below θ, as occupancy_integral does it.
                    let mut q = births[0] - theta;
                    let mut c = usize::from(q < 0.0);
                    for i in 1..n {
                        let bi = if i < top { births[i] } else { 0.0 };
                        q = bi + deaths[i] - theta - births[i - 1] * deaths[i] / q;
                        c += usize::from(q < 0.0);
                    }
                    c == k
                }
            });
            let slow = slow.unwrap();
            assert!(slow >= 2, "{slow}");
            let mut start = vec![0.0; n];
            start[0] = 1.0;
            let got = slow_mode_law(&pi, &start, &births, &deaths, top, t, theta, slow).unwrap();
            let want = transient_law(&pi, &start, &births, &deaths, top, t);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-10, "{g} vs {w}");
            }
        }
    }

    #[test]
    fn tridiagonal_solve_with_pivoting() {
        // A small pivot forces a row swap.
        let (dl, d, du) = (
            vec![2.0, 1.0, 3.0],
            vec![1e-12, 4.0, 1.0, 2.0],
            vec![1.0, 1.0, 5.0],
        );
        let x_true = [1.0, -2.0, 3.0, 0.5];
        let mut x: Vec<f64> = (0..4)
            .map(|i| {
                let mut r = d[i] * x_true[i];
                if i > 0 {
                    r += dl[i - 1] * x_true[i - 1];
                }
                if i < 3 {
                    r += du[i] * x_true[i + 1];
                }
                r
            })
            .collect();
        solve_tridiagonal(&dl, &d, &du, &mut x);
        for (a, b) in x.iter().zip(&x_true) {
            assert!((a - b).abs() < 1e-9, "{x:?}");
        }
    }
}
