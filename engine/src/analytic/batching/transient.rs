//! The transient: the birth–death chain on the number in system, integrated from an empty
//! server over the horizon. `∫₀ᵀ p dt` follows from the law at T by the flux identity
//! ([`occupancy_integral`]); the law at T is the stationary one once the chain has relaxed,
//! else it comes from the few relaxation modes still alive at T ([`slow_modes`]), or when
//! those are many or clustered from Talbot's quadrature of `e^{QT}` ([`talbot`]) or, where
//! its rounding would show, a Chebyshev expansion ([`chebyshev`]). A chain that starts
//! deep in its stationary tail is first stepped (uniformised) until its law leaves it.

mod chebyshev;
mod slow_modes;
mod talbot;

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
/// threshold); otherwise it is `e^{QT}·e_0` from the slow modes, Talbot's quadrature or a
/// Chebyshev expansion of the symmetrised generator ([`Chain::law_at`]). A chain started
/// deep in π's tail (`π_0 < 1e-12·π_max`) would amplify their rounding by `√(π_n/π_0)`:
/// it is stepped (uniformised) until its law `p(t₁)` has left the tail, and the rest of
/// the horizon follows from `p(t₁)` the same way ([`Chain::flux_integral`]).
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
    if top == 0 {
        x[0] = horizon;
        return x;
    }
    let chain = Chain::new(&births[..=top], &deaths[..=top]);
    let mut start = vec![0.0; top + 1];
    start[0] = 1.0;
    let mut pre = vec![0.0; top + 1];
    let (from, to, span) = match chain.law_at(&start, horizon) {
        Some(p_t) => (start, p_t, horizon),
        None => {
            // Started deep in π's tail and still moving at T: the symmetrised expansion
            // would amplify its rounding by √(π_n/π_0), so step the (positive) uniformised
            // chain until its law has left the tail (or to T), and expand from there.
            let (head, p, elapsed) =
                uniformised_integral(&births[..=top], &deaths[..=top], horizon, |p| {
                    chain.amplification(p) < TALBOT_AMP_LN_MAX
                });
            pre = head;
            let span = horizon - elapsed;
            match (span > 0.0).then(|| chain.law_at(&p, span)).flatten() {
                Some(p_t) => (p, p_t, span),
                None => {
                    // Settled (or at T): the rest of the horizon is spent at p.
                    pre.iter_mut()
                        .zip(&p)
                        .for_each(|(a, x)| *a += x * span.max(0.0));
                    x[..=top].copy_from_slice(&pre);
                    return x;
                }
            }
        }
    };
    let occ = chain.flux_integral(&from, &to, span);
    for n in 0..=top {
        x[n] = pre[n] + occ[n];
    }
    x
}

/// `−S`, S the chain's generator symmetrised by `√π`: its diagonal `b_n + d_n` and
/// off-diagonal `√(b_n·d_{n+1})` (births at `top` ignored).
fn minus_s(births: &[f64], deaths: &[f64], top: usize) -> (Vec<f64>, Vec<f64>) {
    let b = |n: usize| if n < top { births[n] } else { 0.0 };
    let diag = (0..=top)
        .map(|n| b(n) + if n > 0 { deaths[n] } else { 0.0 })
        .collect();
    let off = (0..top).map(|n| libm::sqrt(b(n) * deaths[n + 1])).collect();
    (diag, off)
}

/// The law `p` in symmetrised coordinates, `p/√π` (0 where `p` has no mass).
fn symmetrised(p: &[f64], pi: &[f64]) -> Vec<f64> {
    p.iter()
        .zip(pi)
        .map(|(x, q)| if *x > 0.0 { x / libm::sqrt(*q) } else { 0.0 })
        .collect()
}

/// A birth–death chain on `0..=top` (births at `top` ignored) and its stationary law.
struct Chain<'a> {
    births: &'a [f64],
    deaths: &'a [f64],
    top: usize,
    pi: Vec<f64>,
    pi_max: f64,
}

impl<'a> Chain<'a> {
    fn new(births: &'a [f64], deaths: &'a [f64]) -> Chain<'a> {
        let top = births.len() - 1;
        let b = |n: usize| if n < top { births[n] } else { 0.0 };
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
        Chain {
            births,
            deaths,
            top,
            pi,
            pi_max,
        }
    }

    fn b(&self, n: usize) -> f64 {
        if n < self.top {
            self.births[n]
        } else {
            0.0
        }
    }

    /// `ln(‖p/√π‖·√π_max)`: how much the symmetrised coordinates amplify rounding in the
    /// law started at `p` (`0.5·ln(π_max/π_0)` from the empty state). Infinite when `p`
    /// has mass where π underflows.
    fn amplification(&self, p: &[f64]) -> f64 {
        let mut norm2 = 0.0;
        for (x, pi) in p.iter().zip(&self.pi) {
            if *x > 0.0 {
                if *pi <= 0.0 {
                    return f64::INFINITY;
                }
                norm2 += x * x / pi;
            }
        }
        0.5 * libm::log(norm2 * self.pi_max)
    }

    /// The law after `span` from `start`, or None when the chain is still moving then and
    /// the symmetrised expansion from `start` would amplify its rounding too much.
    fn law_at(&self, start: &[f64], span: f64) -> Option<Vec<f64>> {
        // |p_n(T) − π_n| ≤ e^{−γ₁T}·‖p/√π‖·√π_n: slow modes matter only below this rate.
        let amp_ln = self.amplification(start);
        let theta = (37.0 + amp_ln.max(0.0)) / span;
        // Number of eigenvalues of −Q (as a symmetric tridiagonal) below θ; one is the 0 of π.
        let slow = {
            // Pivots of the LDLᵀ factorisation of −Q − θI (Sturm count).
            let mut q = self.b(0) - theta;
            if q == 0.0 {
                q = -1e-300;
            }
            let mut count = usize::from(q < 0.0);
            for (n, &d) in self.deaths.iter().enumerate().take(self.top + 1).skip(1) {
                q = self.b(n) + d - theta - self.b(n - 1) * d / q;
                if q == 0.0 {
                    q = -1e-300;
                }
                if q < 0.0 {
                    count += 1;
                }
            }
            count
        };
        if slow <= 1 {
            return Some(self.pi.clone());
        }
        if amp_ln >= AMP_LN_MAX {
            return None;
        }
        let (pi, top, births, deaths) = (&self.pi, self.top, self.births, self.deaths);
        Some(
            slow_mode_law(pi, start, births, deaths, top, span, theta, slow).unwrap_or_else(|| {
                if amp_ln < TALBOT_AMP_LN_MAX {
                    talbot::transient_law(pi, start, births, deaths, top, span)
                } else {
                    chebyshev::transient_law(pi, start, births, deaths, top, span)
                }
            }),
        )
    }

    /// `∫ p dt` over `span` for the chain going from law `from` to law `to`.
    ///
    /// # Formula
    /// Integrating `p' = Qp` gives `QX = p(T) − p(0)`; summed over the states `0..=n` this
    /// is the flux balance across the cut above n, `d_{n+1}·X_{n+1} − b_n·X_n =
    /// S_n(0) − S_n(T)`, `S_n(t) = P(N(t) > n)`. With `b_n·π_n = d_{n+1}·π_{n+1} =: f_n` and
    /// `X_n = π_n·(T + z_n)`, that is `z_{n+1} = z_n − (S_n(T) − S_n(0))/f_n`, and
    /// `Σ X_n = T` fixes `z_0`.
    fn flux_integral(&self, from: &[f64], to: &[f64], span: f64) -> Vec<f64> {
        let (pi, top) = (&self.pi, self.top);
        // Change of the tail mass above each state.
        let mut tail = vec![0.0; top + 1];
        let mut acc = 0.0;
        for n in (0..top).rev() {
            acc += to[n + 1].max(0.0) - from[n + 1];
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
            let f = self.b(n) * pi[n];
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
        (0..=top)
            .map(|n| (pi[n] * (span + z) + pi[n] * c[n]).max(0.0))
            .collect()
    }
}

/// Largest amplification ([`Chain::amplification`]) for which Talbot's quadrature
/// ([`talbot::transient_law`]) is used: its error, about 1e-14 of the start's norm in
/// symmetrised coordinates, stays below 1e-11 in the law.
const TALBOT_AMP_LN_MAX: f64 = 6.9;

/// Largest `ln √(π_max/π_0)` for which the Chebyshev expansion of [`chebyshev::transient_law`] is used
/// (its rounding, ~1e-16 in the symmetrised coordinates, grows by `√(π_n/π_0)`).
const AMP_LN_MAX: f64 = 13.8;

/// `∫₀ᵗ p dt`, the law at t and t, stepping the uniformised chain from state 0 (births at
/// the last state ignored) until `leave(p)` holds (checked every 8 steps) or T. Once the
/// law no longer moves, the rest of the horizon is spent there (t = T). Positive
/// throughout, so accurate where π spans many orders of magnitude; costs up to `T·Λ`
/// passes.
fn uniformised_integral(
    births: &[f64],
    deaths: &[f64],
    horizon: f64,
    leave: impl Fn(&[f64]) -> bool,
) -> (Vec<f64>, Vec<f64>, f64) {
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
    let mut settled = false;
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
                settled = true;
                break;
            }
            if leave(&p[1..=top + 1]) {
                break;
            }
        }
    }
    if settled {
        let rest = horizon - elapsed;
        for (a, x) in avg.iter_mut().zip(&p) {
            *a += x * rest;
        }
        elapsed = horizon;
    }
    (
        avg[1..=top + 1].to_vec(),
        p[1..=top + 1].to_vec(),
        elapsed.min(horizon),
    )
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
            // A wide batch (B = 128, π_0/π_max ~ 1e-50) whose queue is still relaxing at T:
            // uniformised out of π's tail, then expanded from there.
            (
                (0..480).map(|n| if n < 479 { 15.0 } else { 0.0 }).collect(),
                (0..480).map(|n| n.min(128) as f64 / 7.7).collect(),
                600.0,
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
