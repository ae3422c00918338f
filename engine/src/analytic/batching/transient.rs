//! The transient: the birth–death chain on the number in system, integrated from an empty
//! server over the horizon. `∫₀ᵀ p dt` follows from the law at T by the flux identity
//! ([`occupancy_integral`]); the law at T is the stationary one once the chain has relaxed,
//! else it comes from the few relaxation modes still alive at T ([`slow_modes`]), from a
//! Chebyshev expansion of `e^{QT}` ([`chebyshev`]) when those are many or clustered, or
//! from stepping the uniformised chain when the chain starts deep in its stationary tail.

mod chebyshev;
mod slow_modes;

use chebyshev::transient_law;
use slow_modes::slow_mode_law;

/// Time spent in each state over `[0, T]`, `X_n = ∫₀ᵀ p_n(t) dt` [s], for the birth–death
/// chain with the given birth and death rates [1/s] started empty (`births` at the last
/// state is ignored: the chain reflects there).
///
/// # Formula
/// Integrating `p' = Qp` over `[0, T]` gives `QX = p(T) − p(0)`; summed over the states
/// `0..=n` this is the cumulative flux balance across the cut above n,
/// `d_{n+1}·X_{n+1} − b_n·X_n = −S_n(T)`, `S_n(T) = P(N(T) > n)`. With the stationary law π
/// (`b_n·π_n = d_{n+1}·π_{n+1} =: f_n`) and `X_n = π_n·(T + z_n)`, that is
/// `z_{n+1} = z_n − S_n(T)/f_n`, a sum of positive terms, and `Σ X_n = T` fixes `z_0`.
/// `p(T)` is π itself when every non-zero relaxation rate γ of the chain has `e^{−γT}`
/// below double precision (one Sturm count of the symmetrised generator shifted by that
/// threshold); otherwise it is `e^{QT}·e_0`, by a Chebyshev expansion of the symmetrised
/// generator (Bessel coefficients; about `√(90·T·Λ)` products with the tridiagonal matrix,
/// Λ the largest total rate, against uniformisation's `T·Λ`), unless the chain starts
/// deep in π's tail (`π_0 < 1e-12·π_max`), where only uniformisation stays accurate.
pub(super) fn occupancy_integral(births: &[f64], deaths: &[f64], horizon: f64) -> Vec<f64> {
    let len = births.len();
    let mut x = vec![0.0; len];
    if len == 0 {
        return x;
    }
    // Reachable states: up to the first zero birth rate (or the last state).
    let top = births[..len - 1]
        .iter()
        .position(|&b| b <= 0.0)
        .unwrap_or(len - 1);
    let b = |n: usize| if n < top { births[n] } else { 0.0 };
    if top == 0 {
        x[0] = horizon;
        return x;
    }
    // Stationary law (rescaled on the way if it grows large).
    let mut pi = vec![0.0; top + 1];
    pi[0] = 1.0;
    for n in 0..top {
        pi[n + 1] = pi[n] * b(n) / deaths[n + 1];
        if pi[n + 1] > 1e200 {
            pi[..=n + 1].iter_mut().for_each(|v| *v *= 1e-200);
        }
    }
    let total: f64 = pi.iter().sum();
    pi.iter_mut().for_each(|v| *v /= total);
    let pi_max = pi.iter().fold(0.0f64, |a, &v| a.max(v));
    // |p_n(T) − π_n| ≤ e^{−γ₁T}·√(π_n/π_0): slow modes matter only below this rate.
    let amp_ln = 0.5 * libm::log(pi_max / pi[0].max(1e-300));
    let theta = (37.0 + amp_ln) / horizon;
    // Number of eigenvalues of −Q (as a symmetric tridiagonal) below θ; one is the 0 of π.
    let slow = {
        // Pivots of the LDLᵀ factorisation of −Q − θI (Sturm count).
        let mut q = b(0) - theta;
        if q == 0.0 {
            q = -1e-300;
        }
        let mut count = usize::from(q < 0.0);
        for (n, &d) in deaths.iter().enumerate().take(top + 1).skip(1) {
            q = b(n) + d - theta - b(n - 1) * d / q;
            if q == 0.0 {
                q = -1e-300;
            }
            if q < 0.0 {
                count += 1;
            }
        }
        count
    };
    // Tail mass above each state at T.
    let mut tail = vec![0.0; top + 1];
    let p_t = if slow <= 1 {
        pi.clone()
    } else if amp_ln < AMP_LN_MAX {
        slow_mode_law(&pi, births, deaths, top, horizon, theta, slow)
            .unwrap_or_else(|| transient_law(&pi, births, deaths, top, horizon))
    } else {
        // Started deep in π's tail and still moving at T: the symmetrised expansion would
        // amplify its rounding by √(π_n/π_0), so step the (positive) uniformised chain.
        let mut x = uniformised_integral(&births[..=top], &deaths[..=top], horizon);
        x.resize(len, 0.0);
        return x;
    };
    let mut acc = 0.0;
    for n in (0..top).rev() {
        acc += p_t[n + 1].max(0.0);
        tail[n] = acc;
    }
    // z_n − z_mode, anchored at the stationary mode so that π_n·(z_n − z_mode) stays of
    // the order of the time spent in n (no cancellation where π is tiny), then the
    // constant from Σ X = T.
    let mode = pi
        .iter()
        .enumerate()
        .fold(0, |best, (n, &v)| if v > pi[best] { n } else { best });
    let step = |n: usize| {
        let f = b(n) * pi[n];
        if f > 0.0 {
            tail[n] / f
        } else {
            0.0
        }
    };
    let mut c = vec![0.0; top + 1];
    for n in mode..top {
        c[n + 1] = c[n] - step(n);
    }
    for n in (0..mode).rev() {
        c[n] = c[n + 1] + step(n);
    }
    let z = -pi.iter().zip(&c).map(|(p, c)| p * c).sum::<f64>();
    for n in 0..=top {
        x[n] = (pi[n] * (horizon + z) + pi[n] * c[n]).max(0.0);
    }
    x
}

/// Largest `ln √(π_max/π_0)` for which the Chebyshev expansion of [`transient_law`] is used
/// (its rounding, ~1e-16 in the symmetrised coordinates, grows by `√(π_n/π_0)`).
const AMP_LN_MAX: f64 = 13.8;

/// `∫₀ᵀ p dt` by stepping the uniformised chain from state 0 (births at the last state
/// ignored), stopping once the law no longer moves (the rest of the horizon is spent
/// there). Positive throughout, so accurate where π spans many orders of magnitude; costs
/// up to `T·Λ` passes.
fn uniformised_integral(births: &[f64], deaths: &[f64], horizon: f64) -> Vec<f64> {
    let top = births.len() - 1;
    let big = births[..top]
        .iter()
        .chain(&[0.0])
        .zip(deaths)
        .map(|(a, d)| a + d)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.02;
    let dt = 1.0 / big;
    let steps = libm::ceil(horizon / dt) as usize;
    // p[n] is stored at index n + 1 with a zero on either side, so the update is one
    // branch-free pass.
    let w = top + 3;
    let (mut stay, mut up, mut down) = (vec![0.0; w], vec![0.0; w], vec![0.0; w]);
    for n in 0..=top {
        let b = if n < top { births[n] } else { 0.0 };
        stay[n + 1] = 1.0 - (b + deaths[n]) * dt;
        up[n + 1] = b * dt;
        down[n + 1] = deaths[n] * dt;
    }
    let mut p = vec![0.0; w];
    p[1] = 1.0;
    let mut next = vec![0.0; w];
    let mut avg = vec![0.0; w];
    let mut elapsed = 0.0;
    for step in 0..steps {
        let h = if step + 1 == steps {
            horizon - dt * (steps - 1) as f64
        } else {
            dt
        };
        for (a, x) in avg.iter_mut().zip(&p) {
            *a += x * h;
        }
        elapsed += h;
        // next[i] = p[i]·stay[i] + p[i−1]·up[i−1] + p[i+1]·down[i+1], i in 1..=top+1, as
        // zipped slices: no bounds checks, and the compiler vectorises it.
        let flows = p[1..=top + 1]
            .iter()
            .zip(&stay[1..=top + 1])
            .zip(p[..=top].iter().zip(&up[..=top]))
            .zip(p[2..].iter().zip(&down[2..]));
        for (o, (((pc, s), (pl, u)), (pr, d))) in next[1..=top + 1].iter_mut().zip(flows) {
            *o = pc * s + pl * u + pr * d;
        }
        std::mem::swap(&mut p, &mut next);
        if step % 8 == 7 {
            let diff: f64 = p.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
            if diff < 1e-13 {
                break;
            }
        }
    }
    let rest = horizon - elapsed;
    if rest > 0.0 {
        for (a, x) in avg.iter_mut().zip(&p) {
            *a += x * rest;
        }
    }
    avg[1..=top + 1].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{DiscreteCDF, Poisson};

    /// Uniformisation, exactly: `∫₀ᵀ p dt = Σ_k P^k p_0 · P(N_{ΛT} > k)/Λ`, N Poisson.
    fn uniformised(births: &[f64], deaths: &[f64], horizon: f64) -> Vec<f64> {
        let n = births.len();
        let big = births
            .iter()
            .zip(deaths)
            .map(|(a, d)| a + d)
            .fold(0.0, f64::max)
            * 1.1;
        let mu = big * horizon;
        let k_max = (mu + 20.0 * mu.sqrt() + 50.0) as usize;
        let mut p = vec![0.0; n];
        p[0] = 1.0;
        let mut avg = vec![0.0; n];
        let poisson = Poisson::new(mu).unwrap();
        for k in 0..k_max {
            let w = poisson.sf(k as u64) / big;
            let mut next = p.clone();
            for i in 0..n {
                let up = if i + 1 < n { births[i] } else { 0.0 };
                avg[i] += w * p[i];
                next[i] -= (up + deaths[i]) / big * p[i];
                if i + 1 < n {
                    next[i + 1] += up / big * p[i];
                }
                if i > 0 {
                    next[i - 1] += deaths[i] / big * p[i];
                }
            }
            p = next;
        }
        avg
    }

    #[test]
    fn occupancy_integral_matches_uniformisation() {
        let cases: Vec<(Vec<f64>, Vec<f64>, f64)> = vec![
            // Light M/M/1-like, converged long before T.
            (
                vec![0.5; 30],
                (0..30).map(|n| if n == 0 { 0.0 } else { 1.0 }).collect(),
                200.0,
            ),
            // Near-critical: slow filling, not converged at T.
            (
                vec![0.98; 60],
                (0..60).map(|n| if n == 0 { 0.0 } else { 1.0 }).collect(),
                300.0,
            ),
            // Overloaded: piles at the top (π_0 astronomically small).
            (
                (0..70).map(|n| if n < 69 { 3.0 } else { 0.0 }).collect(),
                (0..70).map(|n| if n == 0 { 0.0 } else { 0.9 }).collect(),
                500.0,
            ),
            // Overloaded into a slowly relaxing mode (ShareGPT-like, B = 1): π_0/π_max
            // ~ 1e-40, still moving at T.
            (
                (0..160)
                    .map(|n| {
                        if n < 159 {
                            3.0 / (1.0 + (n as f64 / 60.0).powi(3))
                        } else {
                            0.0
                        }
                    })
                    .collect(),
                (0..160).map(|n| if n == 0 { 0.0 } else { 0.57 }).collect(),
                1000.0,
            ),
            // Overloaded by 1.5× with a slow front (√(π_max/π_0) ~ 2e5, Chebyshev).
            (
                (0..61).map(|n| if n < 60 { 0.3 } else { 0.0 }).collect(),
                (0..61).map(|n| if n == 0 { 0.0 } else { 0.2 }).collect(),
                1000.0,
            ),
            // Mildly overloaded, transient still moving at T.
            (
                vec![1.02; 50],
                (0..50).map(|n| if n == 0 { 0.0 } else { 1.0 }).collect(),
                400.0,
            ),
        ];
        for (bi, de, t) in cases {
            let got = occupancy_integral(&bi, &de, t);
            let want = uniformised(&bi, &de, t);
            let sum: f64 = got.iter().sum();
            assert!((sum - t).abs() < 1e-9 * t, "{sum} vs {t}");
            for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() < 1e-9 * t, "state {n}: {g} vs {w}");
            }
        }
    }
}
