//! The law at the horizon, `e^{QT}·p(0)`, by a Chebyshev expansion of the symmetrised
//! generator: about `√(90·T·Λ)` tridiagonal products instead of uniformisation's `T·Λ`
//! steps.

/// `p(T) = e^{QT}·p(0)` for the birth–death chain on `0..=top` with stationary law `pi`,
/// `p(0)` the law `start`.
///
/// # Formula
/// With `y = p/√π` the chain is `y' = S·y`, S symmetric tridiagonal (diagonal
/// `−(b_n + d_n)`, off-diagonal `√(b_n·d_{n+1})`), spectrum in `[−L, 0]` by Gershgorin.
/// Writing `−S = (L/2)(B + I)`, `e^{ST} = e^{−a}·e^{−aB}` with `a = TL/2`, and
/// `e^{−ax} = Σ_k ε_k (−1)^k I_k(a) T_k(x)` (ε_0 = 1, else 2): the scaled Bessel values
/// `e^{−a}I_k(a)` come from Miller's backward recurrence normalised by
/// `I_0 + 2ΣI_k = e^a`, and fall below 1e-18 by `k ≈ √(90a)`.
pub(super) fn transient_law(
    pi: &[f64],
    start: &[f64],
    births: &[f64],
    deaths: &[f64],
    top: usize,
    horizon: f64,
) -> Vec<f64> {
    let m = top + 1;
    let (diag, off) = super::minus_s(births, deaths, top);
    let l = (0..m)
        .map(|n| {
            diag[n] + if n > 0 { off[n - 1] } else { 0.0 } + if n < top { off[n] } else { 0.0 }
        })
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let a = horizon * l / 2.0;
    // Scaled Bessel values e^{−a}·I_k(a), k = 0..=k_top, by Miller's algorithm.
    let k_top = (libm::sqrt(90.0 * a) + 60.0) as usize;
    let mut r = vec![0.0; k_top + 2];
    r[k_top] = 1e-300;
    for k in (1..=k_top).rev() {
        r[k - 1] = 2.0 * k as f64 / a * r[k] + r[k + 1];
        if r[k - 1] > 1e250 {
            r[k - 1..].iter_mut().for_each(|v| *v *= 1e-250);
        }
    }
    let norm = r[0] + 2.0 * r[1..].iter().sum::<f64>();
    let k_max = r
        .iter()
        .rposition(|&v| v / norm > 1e-18)
        .unwrap_or(0)
        .max(1);
    // B = (2/L)(−S) − I, state n at index n + 1 with a zero on either side so that the
    // three-term recurrence t_{k+1} = 2B·t_k − t_{k−1} is one branch-free pass.
    let w = m + 2;
    let mut bd = vec![0.0; w];
    let mut lo = vec![0.0; w];
    let mut up = vec![0.0; w];
    for n in 0..m {
        bd[n + 1] = 2.0 * diag[n] / l - 1.0;
        if n > 0 {
            lo[n + 1] = -2.0 * off[n - 1] / l;
        }
        if n < top {
            up[n + 1] = -2.0 * off[n] / l;
        }
    }
    let mut t0 = vec![0.0; w];
    t0[1..=m].copy_from_slice(&super::symmetrised(start, pi));
    let mut t1 = vec![0.0; w];
    for i in 1..w - 1 {
        t1[i] = bd[i] * t0[i] + lo[i] * t0[i - 1] + up[i] * t0[i + 1];
    }
    let mut y: Vec<f64> = t0
        .iter()
        .zip(&t1)
        .map(|(a, b)| a * r[0] / norm - 2.0 * r[1] / norm * b)
        .collect();
    let mut t2 = vec![0.0; w];
    for (k, rk) in r.iter().enumerate().take(k_max + 1).skip(2) {
        let ck = if k % 2 == 0 { 2.0 } else { -2.0 } * rk / norm;
        let (v0, v1, out, yv) = (&t0[..w], &t1[..w], &mut t2[..w], &mut y[..w]);
        let (bd, lo, up) = (&bd[..w], &lo[..w], &up[..w]);
        for i in 1..w - 1 {
            let t = 2.0 * (bd[i] * v1[i] + lo[i] * v1[i - 1] + up[i] * v1[i + 1]) - v0[i];
            out[i] = t;
            yv[i] += ck * t;
        }
        std::mem::swap(&mut t0, &mut t1);
        std::mem::swap(&mut t1, &mut t2);
    }
    y[1..=m]
        .iter()
        .zip(pi)
        .map(|(v, p)| v * libm::sqrt(*p))
        .collect()
}
