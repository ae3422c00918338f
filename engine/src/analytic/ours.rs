//! Our model: a size-aware, stall-aware, finite-horizon model of a continuous-batching
//! server, fixing what the reference models ignore.
//!
//! # Method
//! 1. **Lengths**: the joint (prompt, output) distribution as ~1000 atoms with tail-refined
//!    quantile bins (see `lengths.rs`), not just the means.
//! 2. **KV occupancy** (reserve mode): given n in system, the reserved tokens are the sum of
//!    n i.i.d. sizes drawn from the *in-system* composition, which by Little's law per size
//!    is the arrival distribution weighted by the hold time `W̄ + S(P, O)` (size-biased by
//!    output length, through the service), truncated at K (product-form knapsack,
//!    Kaufman–Roberts style, on a ≤ 256-unit grid). The acceptance probability of an
//!    arrival finding n, `a(n) = P(R_n + size ≤ K)`, uses the arrival sizes, so small
//!    requests are admitted more often (size-biased admission), and the accepted requests'
//!    mean prompt/output — hence the service rate — follow from it.
//! 3. **Stalls**: every joiner's prefill stalls the whole batch. With n ≤ B running, the
//!    decode rate is slowed by the arrival-driven prefill fraction `λ a(n) δ`; with a queue,
//!    each departure brings a joiner, so the full-batch departure rate is
//!    `D = B / (E[O]·decode(B) + B·δ(B))`, δ the joiner's prefill (continuous) or the extra
//!    cost of the mixed iteration (chunked).
//! 4. **Transient**: the birth–death chain on n (births λ a(n), deaths D(n)) is integrated
//!    from an empty server over the horizon (`∫₀ᵀ p dt` from the law at T by the flux
//!    identity, see [`occupancy_integral`]), so near-critical loads
//!    whose queue fills over hundreds of seconds, and the cut horizon's unfinished
//!    requests, are accounted for; PASTA uses the time-averaged distribution. Goodput with
//!    a cut horizon is `Σ_n D(n)·∫p_n dt / T` (accepted minus those still in system at T).
//!    **Service variability**: with a queue (n > B) the number in system moves like a
//!    diffusion of drift `λ a(n) − D` and variance `λ a(n) + c²·D`, c² the service-time
//!    SCV (also the long-run dispersion of B superposed departure streams); an exponential
//!    chain has variance `λ a(n) + D` and so spreads the queue too wide when c² < 1 (here
//!    c² ≈ 0.6: +12–16 % mean TTFT at B = 1, λ = 0.5). Each queueing state cancels
//!    `θ = min((1 − c²)·D/2, λ a(n)/2)` from both its birth and death: the drift — hence
//!    throughput = accepted arrivals and the transient's pace — is kept, the variance
//!    matched. For M/G/1 the chain's mean queue is then exactly Pollaczek–Khinchine's
//!    (unit test), for M/G/c Allen–Cunneen's; in overload (KV-limited B = 1) it piles
//!    the queue nearer the KV limit, as the diffusion does. Departures are read with the
//!    real D(n).
//! 5. **TTFT**: an accepted arrival finding n < B waits the residual of the current
//!    iteration (length-biased: a prefill iteration's over the prompt distribution), its
//!    prefill `prefill(n+1, P)` (P from the accepted prompt distribution given n) and, in
//!    reference mode, its first decode plus the prefills of requests joining in between
//!    (Poisson: one, with the joiner's prompt in four groups of its distribution, or two); finding n ≥ B it waits for `n − B + 1` departures, a gamma
//!    with the exact residual of the first departure (B = 1) or the minimum of B equilibrium
//!    residuals (B > 1, two moments from the length atoms) and the service-time variance
//!    (length variance) for the rest. The departures' time scale is state-dependent: the
//!    KV convolution carries the mean output of the requests in system given n (crowded,
//!    KV-limited states hold smaller requests), normalised so the mean wait is unchanged,
//!    and the variance of their summed output given n (the KV limit truncates the sum, so
//!    crowded states wait a much less variable time than n i.i.d. services).
//!    Quantiles invert the mixture CDF.
//! 6. **Paged** (queueing) mode: no reservation loss; the running set is limited by B and by
//!    the KV the running requests occupy on average (prompt + half the output); unstable
//!    (explicit) when λ exceeds the full-batch departure rate.
//!
//! # Validity
//! Poisson arrivals; `continuous` and `chunked` policies; any cost model (evaluated at the
//! batch's size); first-token convention and horizon/end rule from the configuration.
//! The variance matching needs θ < λ a(n), so it is capped at half the birth rate: at
//! light load (λ a(n) < (1 − c²)·D/2) the queue is only partly narrowed, which matters
//! little as queueing states are then rare. Known limits (reference grid): in KV-limited
//! overload at B = 1 the accepted requests are smaller than the product-form composition
//! says (blocking +1.1–1.5 points, goodput −2–3 %); with B > 1 and no queue, the residual
//! of the iteration in progress is uniform (over twice its length-biased mean) and a
//! second joiner adds the mean prefill, so p99 TTFT is still low by 13–19 % where other
//! joiners' prefills dominate the tail (B = 8, λ ≥ 2, against 200-seed simulations); with
//! B = 4 and K = 2048 (λ ≥ 2) it is high by 34–39 %.
//!
//! # Cost
//! The KV convolution (n-fold, ≤ 129-unit grid) is rebuilt only while the waiting share
//! of the hold time α = W̄/(W̄ + E[S]) moves by more than 0.01 between fixed-point passes,
//! and convolves only the size distribution: by symmetry of the n i.i.d. sizes, the two
//! moments of the summed output given n are dot products of the (n−1)- and (n−2)-fold
//! convolutions with prefix sums of the output-weighted sizes;
//! the transient's `∫₀ᵀ p dt` is O(states) when the chain has relaxed by T (the law at
//! T is then the stationary one), else the law at T from the few relaxation modes still
//! alive at T (bisection on Sturm counts and inverse iteration; a Chebyshev expansion of
//! `e^{QT}`, about `√(90·T·Λ)` tridiagonal products instead of uniformisation's `T·Λ`
//! steps, when they are many or clustered); quantiles use safeguarded Halley steps on the
//! log-odds of the mixture CDF (with its density and the density's slope), starting from
//! the quantiles of a gamma with the mixture's two moments (3–5 evaluations each), and a
//! gamma component is not evaluated where a bound on its tail, times its weight, is below
//! 4e-18 of the mixture.

use super::lengths::{atoms, fast_moments, Atom};
use super::reference_mmc::{prefill_tokens, LEVELS};
use super::special::gamma_cdf_mean_scv;
use super::{AnalyticError, Predicted, Prediction};
use crate::config::{EndRule, FirstToken, KvMode, Policy, SimConfig};
use crate::cost::BatchShape;
use crate::workload::{ArrivalProcess, LengthMoments};

/// Grid resolution of the KV occupancy [units of K].
const GRID: f64 = 128.0;
/// Bins per length marginal.
const BINS: usize = 32;

/// Our model, bound to one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Ours {
    cfg: SimConfig,
    atoms: Vec<Atom>,
    moments: LengthMoments,
}

/// Per-state quantities.
#[derive(Clone, Debug, Default)]
struct StateInfo {
    /// Acceptance probability of an arrival finding n.
    accept: f64,
    /// Mean prompt / output of accepted arrivals finding n.
    acc_prompt: f64,
    acc_output: f64,
    acc_output2: f64,
    /// Weight of each prompt bin among accepted arrivals finding n (sums to `accept`);
    /// empty for n ≥ B, whose arrivals queue.
    prompt_bins: Vec<f64>,
    /// Mean output length of the requests in system given n (reserve mode; KV-limited
    /// states hold smaller requests).
    sys_output: f64,
    /// Variance of the summed output of the n requests in system, relative to n times the
    /// unconditional per-request variance (below 1 where the KV limit truncates the sum).
    sys_var_ratio: f64,
    /// Prefill iteration of the accepted mean prompt [s]: joining the running set it finds
    /// (n + 1 for n < B) and at the full batch (queued arrivals).
    pf_start: f64,
    pf_queued: f64,
}

/// `libm::ceil` for x ≥ 0, without the call where x fits an integer exactly.
fn ceil_nonneg(x: f64) -> f64 {
    if (0.0..4.5e15).contains(&x) {
        let t = x as i64 as f64;
        if t < x {
            t + 1.0
        } else {
            t
        }
    } else {
        libm::ceil(x)
    }
}

/// `libm::round` (halves away from zero) for x ≥ 0, without the call where x fits an
/// integer exactly.
fn round_nonneg(x: f64) -> f64 {
    if (0.0..4.5e15).contains(&x) {
        let t = x as i64 as f64;
        if x - t >= 0.5 {
            t + 1.0
        } else {
            t
        }
    } else {
        libm::round(x)
    }
}

/// `Σ_{i+s≤K} c[i]·x[s]` for x given by its prefix sums `cx` (`cx.len() = c.len() = K + 1`).
fn tail_dot(c: &[f64], cx: &[f64]) -> f64 {
    c.iter().zip(cx.iter().rev()).map(|(a, b)| a * b).sum()
}

/// An arrival that finds n < B running and starts at once: its TTFT read-out.
struct StartState {
    n: usize,
    /// Time-average probability of n.
    x: f64,
    /// First decode after the prefill [s] (0 for the first-token-after-prefill convention).
    dec: f64,
    /// Mean residual of the iteration in progress [s].
    res_mean: f64,
    /// Probability that another joiner's prefill delays the first token, and by how much [s].
    q: f64,
    /// Probability that two joiners' prefills delay it (included in `q`).
    q2: f64,
    delta: f64,
    /// The joiner's delay by prompt group: (probability, delay [s]), mean `delta`.
    joiners: [(f64, f64); JOINER_GROUPS],
}

/// Groups of the joiner's prompt distribution (cumulative shares below): a joiner's
/// prefill is as random as its prompt, and its large prompts set the TTFT tail.
const JOINER_GROUPS: usize = 4;
const JOINER_CUTS: [f64; JOINER_GROUPS] = [0.5, 0.8, 0.95, 1.0];

impl Ours {
    /// # Errors
    /// [`AnalyticError::Config`] for an invalid configuration; [`AnalyticError::Unsupported`]
    /// for policies other than continuous/chunked, or non-Poisson arrivals.
    pub fn from_config(cfg: &SimConfig) -> Result<Ours, AnalyticError> {
        cfg.validate()?;
        if !matches!(
            cfg.server.policy,
            Policy::Continuous | Policy::Chunked | Policy::LlamaCpp
        ) {
            return Err(AnalyticError::Unsupported {
                model: "ours",
                what: format!("policy {}", cfg.server.policy.as_str()),
            });
        }
        if !matches!(cfg.workload.arrivals, ArrivalProcess::Poisson { .. }) {
            return Err(AnalyticError::Unsupported {
                model: "ours",
                what: "non-Poisson arrivals".into(),
            });
        }
        Ok(Ours {
            cfg: cfg.clone(),
            atoms: atoms(&cfg.workload.lengths, BINS),
            moments: fast_moments(&cfg.workload.lengths),
        })
    }

    fn cost_ctx(&self, b: u32) -> u64 {
        let m = &self.moments;
        (b as f64 * (m.prompt.0 + m.output.0 / 2.0)) as u64
    }

    fn decode(&self, b: u32) -> f64 {
        self.cfg.cost.decode_step(b.max(1), self.cost_ctx(b))
    }

    /// The iteration that prefills `tokens` for a joiner with `b` running [s].
    fn prefill_iter(&self, b: u32, tokens: f64) -> f64 {
        match self.cfg.server.policy {
            Policy::Chunked | Policy::LlamaCpp => {
                let lo = libm::floor(tokens.max(0.0));
                let it = |t: u64| {
                    self.cfg.cost.iteration(&BatchShape {
                        running: b.max(1),
                        prefill_tokens: t,
                        prefill_seqs: 1,
                        decode_seqs: b.saturating_sub(1),
                        context_tokens: self.cost_ctx(b),
                        prefill_attn: self.cfg.cost.prefill_attn(0, t as u32),
                        decode_ubatches: 0,
                        max_context_tokens: 0,
                    })
                };
                let (t0, t1) = (it(lo as u64), it(lo as u64 + 1));
                t0 + (tokens - lo) * (t1 - t0)
            }
            _ => prefill_tokens(&self.cfg.cost, b, tokens),
        }
    }

    /// The prediction.
    ///
    /// # Errors
    /// None on a validated configuration; kept fallible for future numerical checks.
    pub fn prediction(&self) -> Result<Prediction, AnalyticError> {
        let cfg = &self.cfg;
        let lambda = cfg.workload.rate();
        let b_max = cfg.server.max_batch;
        let k_tok = cfg.server.kv_tokens as f64;
        let block = cfg.server.block_size.max(1) as f64;
        let reserve = cfg.server.kv_mode == KvMode::Reserve;
        let after_decode = cfg.first_token == FirstToken::AfterFirstDecode;
        let m = self.moments;
        let n_pbins = self.atoms.iter().map(|a| a.prompt_bin).max().unwrap_or(0) + 1;
        let mut pbin_range = vec![(f64::INFINITY, 0.0f64, 0.0f64); n_pbins];
        for a in &self.atoms {
            let r = &mut pbin_range[a.prompt_bin];
            r.0 = r.0.min(a.prompt_lo);
            r.1 = r.1.max(a.prompt_hi);
            r.2 = a.prompt;
        }

        // KV grid.
        let unit = (k_tok / GRID).max(1.0);
        let k_u = libm::floor(k_tok / unit) as usize;
        let size_tok: Vec<f64> = self
            .atoms
            .iter()
            .map(|a| ceil_nonneg((a.prompt + a.output) / block) * block)
            .collect();
        let size_u: Vec<usize> = size_tok
            .iter()
            .map(|&t| round_nonneg(t / unit) as usize)
            .collect();
        // Arrival-size tables over the free space x (units): acceptance, E[P·1], E[O·1],
        // E[O²·1], per prompt bin.
        let mut f_acc = vec![0.0; k_u + 1];
        let mut f_p = vec![0.0; k_u + 1];
        let mut f_o = vec![0.0; k_u + 1];
        let mut f_o2 = vec![0.0; k_u + 1];
        let mut f_bin = vec![vec![0.0; k_u + 1]; n_pbins];
        for ((a, &s), &tok) in self.atoms.iter().zip(&size_u).zip(&size_tok) {
            if s <= k_u && tok <= k_tok {
                f_acc[s] += a.w;
                f_p[s] += a.w * a.prompt;
                f_o[s] += a.w * a.output;
                f_o2[s] += a.w * a.output * a.output;
                f_bin[a.prompt_bin][s] += a.w;
            }
        }
        if !f_acc.iter().any(|&w| w > 0.0) {
            // Nothing is ever admitted: every metric but blocking would be 0/0.
            return Err(AnalyticError::Invalid {
                name: "kv_tokens",
                value: k_tok,
                why: "smaller than every request (prompt + output): nothing fits, every request is rejected",
            });
        }
        for x in 1..=k_u {
            f_acc[x] += f_acc[x - 1];
            f_p[x] += f_p[x - 1];
            f_o[x] += f_o[x - 1];
            f_o2[x] += f_o2[x - 1];
            for fb in f_bin.iter_mut() {
                fb[x] += fb[x - 1];
            }
        }

        // Running-set cap: B, and in paged mode the KV the running requests occupy.
        let b_cap0 = if reserve {
            b_max
        } else {
            let per = m.prompt.0 + m.output.0 / 2.0;
            b_max.min((libm::floor(k_tok * (1.0 - cfg.server.watermark) / per) as u32).max(1))
        };
        let min_res = if b_cap0 > 1 {
            min_residual_moments(&self.atoms, &size_u, k_u, b_cap0)
        } else {
            (1.0, 1.0)
        };
        // Cost-model values by running-set size b (decode for all b; prefill and stall for a
        // given prompt length, tabulated once per fixed-point pass). The stall a joiner adds
        // to the batch is its prefill iteration (continuous), or what that iteration costs
        // beyond a decode of the others (chunked).
        let b_hi = b_max.max(b_cap0) + 1;
        let dec: Vec<f64> = (0..=b_hi).map(|b| self.decode(b)).collect();
        // A joiner's stall of the batch it joins (b) given its prefill iteration `pf`:
        // the whole iteration (continuous), or what it adds to a decode step (chunked).
        let stall = |b: usize, pf: f64| -> f64 {
            match cfg.server.policy {
                Policy::Chunked | Policy::LlamaCpp => {
                    (pf - dec[b.saturating_sub(1).max(1)]).max(0.0)
                }
                _ => pf,
            }
        };
        let cost_row = |tokens: f64| -> (Vec<f64>, Vec<f64>) {
            let pf: Vec<f64> = (0..=b_hi).map(|b| self.prefill_iter(b, tokens)).collect();
            let st = pf.iter().enumerate().map(|(b, &x)| stall(b, x)).collect();
            (pf, st)
        };
        let stall_of = |b: u32, tokens: f64| stall(b as usize, self.prefill_iter(b, tokens));
        // An arrival that lands in a prefill iteration lands in a long one more often: the
        // iteration's residual has mean E[X²]/(2E[X]), X the prefill over the prompts;
        // `pf_bias[n]` = E[X²]/E[X]² at batch n.
        let pbin_w: Vec<f64> = {
            let mut w = vec![0.0; n_pbins];
            for a in &self.atoms {
                w[a.prompt_bin] += a.w;
            }
            w
        };
        let pf_bias: Vec<f64> = (0..=b_hi)
            .map(|b| {
                let (mut m1, mut m2, mut wt) = (0.0, 0.0, 0.0);
                for (w, r) in pbin_w.iter().zip(&pbin_range) {
                    let x = self.prefill_iter(b, r.2);
                    m1 += w * x;
                    m2 += w * x * x;
                    wt += w;
                }
                if m1 > 0.0 {
                    m2 * wt / (m1 * m1)
                } else {
                    1.0
                }
            })
            .collect();
        // Fixed point over accepted means, waits and acceptance.
        let mut acc_p = m.prompt.0;
        let mut acc_o = m.output.0;
        let mut acc_o2 = m.output.1;
        let mut mean_wait = 0.0;
        let mut states: Vec<StateInfo> = Vec::new();
        let mut kv_alpha: Option<f64> = None;
        // Prefill of each atom alone [s] (the service part of its hold time); atoms sharing
        // a prompt bin share the prompt.
        let pf_bin: Vec<f64> = pbin_range
            .iter()
            .map(|r| self.prefill_iter(1, r.2))
            .collect();
        let pf1: Vec<f64> = self.atoms.iter().map(|a| pf_bin[a.prompt_bin]).collect();
        // Mean service part of the hold time of an arrival (no wait) [s]:
        // (Σ w·pf + τ·Σ w·O) / Σ w over the sizes that fit.
        let (hold_pf, hold_o, hold_w) = self.atoms.iter().zip(&size_u).zip(&pf1).fold(
            (0.0, 0.0, 0.0),
            |(a, o, b), ((at, &s), pf)| {
                if s <= k_u {
                    (a + at.w * pf, o + at.w * at.output, b + at.w)
                } else {
                    (a, o, b)
                }
            },
        );
        let hold_service = |tau: f64| (hold_pf + tau * hold_o) / hold_w.max(1e-300);
        // Prefill-time slope per prompt token at the full batch [s/token].
        let slope = (self.prefill_iter(b_cap0, 1000.0) - self.prefill_iter(b_cap0, 0.0)) / 1000.0;
        let mut result = None;
        const ITERS: usize = 4;
        for iter in 0..ITERS {
            // Departure rates.
            let (pf_acc, st_acc) = cost_row(acc_p);
            let bm = b_max as usize;
            let d_full = b_max as f64 / (acc_o * dec[bm] + b_max as f64 * st_acc[bm]);
            let service_b = |b: usize, sigma: f64| pf_acc[b] + acc_o * dec[b] / (1.0 - sigma);
            let b_cap = b_cap0;
            let death_at = |n: usize, accept: f64| {
                if n == 0 {
                    return 0.0;
                }
                let b = n.min(b_cap as usize);
                if (n as u32) > b_cap {
                    return b as f64 / (acc_o * dec[b] + b as f64 * st_acc[b]);
                }
                let sigma = if (n as u32) < b_cap {
                    (lambda * accept * st_acc[b + 1]).min(0.9)
                } else {
                    0.0
                };
                b as f64 / service_b(b, sigma)
            };
            // Occupancy composition and conditional occupancy per n (reserve).
            let n_top: usize;
            // The KV composition depends on the wait only through the share of the hold
            // time spent waiting, α = W̄ / (W̄ + E[S]): once that settles, reuse it.
            let tau = dec[b_max.min(4) as usize];
            let alpha = mean_wait / (mean_wait + hold_service(tau));
            if reserve && kv_alpha.is_some_and(|a: f64| (a - alpha).abs() < 0.01) {
                n_top = states.len() - 1;
            } else if reserve {
                kv_alpha = Some(alpha);
                states.clear();
                // Hold-time-weighted size composition: mass G[s], output sums G_u[s] =
                // Σ h·O and G_uu[s] = Σ h·O² per size (all over the total weight).
                let mut g = vec![0.0; k_u + 1];
                let mut g_o = vec![0.0; k_u + 1];
                let mut g_o2 = vec![0.0; k_u + 1];
                let mut gsum = 0.0;
                for ((a, &s), pf) in self.atoms.iter().zip(&size_u).zip(&pf1) {
                    if s <= k_u {
                        let h = a.w * (mean_wait + pf + a.output * tau);
                        g[s] += h;
                        g_o[s] += h * a.output;
                        g_o2[s] += h * a.output * a.output;
                        gsum += h;
                    }
                }
                let g_mean_o = g_o.iter().sum::<f64>() / gsum;
                let g_var_o = (g_o2.iter().sum::<f64>() / gsum - g_mean_o * g_mean_o).max(1e-9);
                for ((x, xo), xo2) in g.iter_mut().zip(g_o.iter_mut()).zip(g_o2.iter_mut()) {
                    *x /= gsum;
                    *xo /= gsum;
                    *xo2 /= gsum;
                }
                let support: Vec<(usize, f64)> = g
                    .iter()
                    .enumerate()
                    .filter(|(_, w)| **w > 0.0)
                    .map(|(i, w)| (i, *w))
                    .collect();
                // The summed output of the n requests in system, by symmetry of the n
                // i.i.d. sizes: Σ_j conv_o_n[j] = n·Σ_{j≤K} (G^{*(n−1)} ⊛ G_u)[j] and
                // Σ_j conv_o2_n[j] = n·Σ (G^{*(n−1)} ⊛ G_uu) + n(n−1)·Σ (G^{*(n−2)} ⊛ G_u ⊛ G_u),
                // each sum a dot product with the prefix sums below: only the size
                // distribution itself is convolved per n.
                let mut gg = vec![0.0; k_u + 1];
                for (s, &w) in g_o.iter().enumerate() {
                    if w != 0.0 {
                        for (x, &y) in gg[s..].iter_mut().zip(&g_o) {
                            *x += w * y;
                        }
                    }
                }
                let prefix = |v: &mut [f64]| {
                    for x in 1..v.len() {
                        v[x] += v[x - 1];
                    }
                };
                prefix(&mut g_o);
                prefix(&mut g_o2);
                prefix(&mut gg);
                // Σ_{i+s≤K} c[i]·x[s] for x given by its prefix sums.
                // conv (this n), conv1 (n − 1), conv2 (n − 2), each normalised to mass 1;
                // tot1 / tot2 the normalisers that made conv and conv1.
                let mut conv = vec![0.0; k_u + 1];
                let mut conv1 = vec![0.0; k_u + 1];
                let mut conv2 = vec![0.0; k_u + 1];
                let (mut tot1, mut tot2) = (1.0f64, 1.0f64);
                // Unnormalised stationary weight of the birth–death chain built so far: the
                // chain started empty is stochastically below its stationary law, so states
                // beyond a negligible stationary tail are never reached (truncate there).
                let (mut pi, mut pi_max, mut prev_birth) = (1.0f64, 1.0f64, 0.0f64);
                conv[0] = 1.0;
                loop {
                    let n = states.len();
                    let mass: f64 = conv.iter().sum();
                    // Prompt bins only shape the TTFT of arrivals that start at once (n < B);
                    // queued arrivals use the mean prompt.
                    let mut info = StateInfo {
                        prompt_bins: if n < b_max as usize {
                            vec![0.0; n_pbins]
                        } else {
                            Vec::new()
                        },
                        ..StateInfo::default()
                    };
                    if mass > 0.0 && n > 0 {
                        let nf = n as f64;
                        let e1 = nf * tail_dot(&conv1, &g_o) / tot1 / mass;
                        let mut e2 = nf * tail_dot(&conv1, &g_o2) / tot1;
                        if n > 1 {
                            e2 += nf * (nf - 1.0) * tail_dot(&conv2, &gg) / (tot1 * tot2);
                        }
                        e2 /= mass;
                        info.sys_output = e1 / nf;
                        info.sys_var_ratio = ((e2 - e1 * e1).max(0.0) / (nf * g_var_o)).min(1.0);
                    }
                    if mass > 0.0 {
                        // An arrival finding j units taken sees k_u − j free.
                        info.accept = tail_dot(&conv, &f_acc) / mass;
                        info.acc_prompt = tail_dot(&conv, &f_p) / mass;
                        info.acc_output = tail_dot(&conv, &f_o) / mass;
                        info.acc_output2 = tail_dot(&conv, &f_o2) / mass;
                        for (pb, fb) in info.prompt_bins.iter_mut().zip(&f_bin) {
                            *pb = tail_dot(&conv, fb) / mass;
                        }
                    }
                    if n > 0 {
                        pi *= prev_birth / death_at(n, info.accept).max(1e-300);
                        pi_max = pi_max.max(pi);
                    }
                    prev_birth = lambda * info.accept;
                    let negligible = n > b_cap as usize + 1 && pi < 1e-16 * pi_max;
                    let done = info.accept < 1e-9 || n > 4000 || negligible;
                    if info.accept > 0.0 {
                        info.acc_prompt /= info.accept;
                        info.acc_output /= info.accept;
                        info.acc_output2 /= info.accept;
                        // Fixed with the state, so tabulated once per rebuild.
                        if (n as u32) < b_cap {
                            info.pf_start = self.prefill_iter(n as u32 + 1, info.acc_prompt);
                        } else {
                            info.pf_queued = self.prefill_iter(b_cap, info.acc_prompt);
                        }
                    }
                    states.push(info);
                    if done {
                        break;
                    }
                    // One more i.i.d. size, into the oldest buffer (support sorted by size;
                    // contiguous slices so the inner loop vectorises).
                    std::mem::swap(&mut conv2, &mut conv1);
                    std::mem::swap(&mut conv1, &mut conv);
                    conv.iter_mut().for_each(|x| *x = 0.0);
                    // Below its first non-zero entry the (n)-fold convolution is empty.
                    let first = conv1.iter().position(|&c| c != 0.0).unwrap_or(k_u + 1);
                    for &(s, w) in &support {
                        if s + first > k_u {
                            break;
                        }
                        for (x, &c) in conv[s + first..].iter_mut().zip(&conv1[first..]) {
                            *x += c * w;
                        }
                    }
                    let tot: f64 = conv.iter().sum();
                    if tot <= 0.0 {
                        if let Some(s) = states.last_mut() {
                            s.accept = 0.0;
                        }
                        break;
                    }
                    conv.iter_mut().for_each(|x| *x /= tot);
                    tot2 = tot1;
                    tot1 = tot;
                }
                if let Some(last) = states.last_mut() {
                    last.accept = 0.0;
                }
                n_top = states.len() - 1;
            } else {
                states.clear();
                // Paged: unbounded queue unless capped; stable only below the full rate.
                let rho = lambda / d_full;
                let cap = cfg.server.queue_cap.map(|q| q as usize + b_max as usize);
                if cap.is_none() && rho >= 1.0 {
                    return Ok(Prediction::Unstable { rho });
                }
                let top = cap.unwrap_or_else(|| {
                    let r = rho.max(1e-9);
                    b_max as usize + (libm::log(1e-12) / libm::log(r)).min(20_000.0) as usize + 8
                });
                let mut bins = vec![0.0; n_pbins];
                for a in &self.atoms {
                    bins[a.prompt_bin] += a.w;
                }
                let pf_queued = self.prefill_iter(b_cap, m.prompt.0);
                for n in 0..=top {
                    states.push(StateInfo {
                        accept: if n == top && cap.is_some() { 0.0 } else { 1.0 },
                        acc_prompt: m.prompt.0,
                        acc_output: m.output.0,
                        acc_output2: m.output.1,
                        prompt_bins: if n < b_max as usize {
                            bins.clone()
                        } else {
                            Vec::new()
                        },
                        sys_output: 0.0,
                        sys_var_ratio: 1.0,
                        pf_start: if (n as u32) < b_cap {
                            self.prefill_iter(n as u32 + 1, m.prompt.0)
                        } else {
                            0.0
                        },
                        pf_queued,
                    });
                }
                n_top = top;
            }
            // Death rates D(n).
            let deaths: Vec<f64> = (0..=n_top).map(|n| death_at(n, states[n].accept)).collect();
            // Transient birth–death from empty over the horizon.
            let horizon = cfg.horizon_s;
            let births: Vec<f64> = states.iter().map(|s| lambda * s.accept).collect();
            // Service variability: with a queue, the number in system moves like a
            // diffusion of drift λ_n − D and variance λ_n + c²·D (c² the service-time SCV,
            // also the asymptotic dispersion of B superposed departure streams), not the
            // λ_n + D of an exponential chain. Cancelling a rate θ_n from both the birth and
            // the death of each queueing state keeps the drift (so throughput = accepted
            // arrivals and the transient's pace) and matches the variance; for M/G/1 the
            // chain's mean queue is then Pollaczek–Khinchine's exactly, for M/G/c
            // Allen–Cunneen's.
            let bc = b_cap as usize;
            let scv_dep = {
                let pf = pf_acc[bc];
                let per_tok = dec[bc] + st_acc[bc] * (b_cap as f64 - 1.0) / acc_o.max(1.0);
                let var_o = (acc_o2 - acc_o * acc_o).max(0.0);
                var_o * per_tok * per_tok / (pf + acc_o * per_tok).powi(2)
            };
            let (births_ch, deaths_ch): (Vec<f64>, Vec<f64>) = births
                .iter()
                .zip(&deaths)
                .enumerate()
                .map(|(n, (&bn, &dn))| {
                    if n as u32 > b_cap {
                        // c² > 1 adds variance (θ < 0) the same way.
                        let theta = (0.5 * (1.0 - scv_dep) * dn).min(0.5 * bn);
                        (bn - theta, dn - theta)
                    } else {
                        (bn, dn)
                    }
                })
                .unzip();
            let mut avg = occupancy_integral(&births_ch, &deaths_ch, horizon);
            let departed: f64 = avg.iter().zip(&deaths).map(|(x, d)| x * d).sum();
            avg.iter_mut().for_each(|x| *x /= horizon);
            // Read-outs.
            let accepted: f64 = avg.iter().zip(&states).map(|(x, s)| x * s.accept).sum();
            let blocking = (1.0 - accepted).max(0.0);
            let goodput = match cfg.end {
                EndRule::Cut => departed / horizon,
                EndRule::Drain => lambda * accepted,
            };
            let new_p = avg
                .iter()
                .zip(&states)
                .map(|(x, s)| x * s.accept * s.acc_prompt)
                .sum::<f64>()
                / accepted;
            let new_o = avg
                .iter()
                .zip(&states)
                .map(|(x, s)| x * s.accept * s.acc_output)
                .sum::<f64>()
                / accepted;
            let new_o2 = avg
                .iter()
                .zip(&states)
                .map(|(x, s)| x * s.accept * s.acc_output2)
                .sum::<f64>()
                / accepted;
            // TTFT components.
            let (pf_new, st_new) = cost_row(new_p);
            let dec_full = dec[bc];
            let s_mean = pf_new[bc]
                + new_o * (dec_full + (b_cap as f64 - 1.0) * st_new[bc] / new_o.max(1.0));
            let var_o = (new_o2 - new_o * new_o).max(0.0);
            let per_tok = s_mean / new_o.max(1e-9);
            let s2 = s_mean * s_mean + var_o * per_tok * per_tok;
            let s3_over = {
                // E[S³] for a gamma-shaped S with the same two moments.
                let scv = (s2 / (s_mean * s_mean) - 1.0).max(0.0);
                s_mean * s_mean * s_mean * (1.0 + scv) * (1.0 + 2.0 * scv)
            };
            let dfull_n = if n_top as u32 > b_cap {
                deaths[n_top.min(b_cap as usize + 1)]
            } else {
                d_full
            };
            let (first_mean, first_var) = if b_cap == 1 {
                let r1 = s2 / (2.0 * s_mean);
                let r2 = s3_over / (3.0 * s_mean);
                (r1, (r2 - r1 * r1).max(0.0))
            } else {
                // The first departure is the minimum of b_cap equilibrium residuals (not
                // an exponential): its two moments relative to the mean spacing 1/D.
                let (rm, rv) = min_res;
                let mu = 1.0 / dfull_n;
                (rm * mu, rv * mu * mu)
            };
            let scv_s = (s2 / (s_mean * s_mean) - 1.0).max(0.0);
            // Reference output mean: the wait-weighted mean over queueing states, so the
            // state dependence reshapes the wait distribution without moving its mean
            // (the chain's departure rate already carries the accepted mean).
            let sys_ref = {
                let (mut a, mut b) = (0.0, 0.0);
                for (n, (x, s)) in avg.iter().zip(&states).enumerate() {
                    if n as u32 >= b_cap && s.sys_output > 0.0 {
                        let md = (n as u32 - b_cap + 1) as f64;
                        a += x * s.accept * s.sys_output * md;
                        b += x * s.accept * md;
                    }
                }
                if b > 0.0 {
                    a / b
                } else {
                    new_o
                }
            };
            // Per state: arrivals starting at once (n < B) become one uniform-sum component
            // per prompt bin, queued ones a gamma; the components are built only once the
            // fixed point has settled.
            let mut starts: Vec<StartState> = Vec::new();
            let mut queued: Vec<(f64, f64, f64)> = Vec::new();
            let mut mean_ttft = 0.0;
            let mut wait_sum = 0.0;
            let mut wsum = 0.0;
            let var_p = (m.prompt.1 - m.prompt.0 * m.prompt.0).max(0.0);
            for (n, (x, s)) in avg.iter().zip(&states).enumerate() {
                let w_state = x * s.accept;
                if w_state <= 0.0 {
                    continue;
                }
                let nb = n as u32;
                if nb < b_cap {
                    let b = n + 1;
                    let dec_b = if after_decode { dec[b] } else { 0.0 };
                    let sigma = (lambda * s.accept * st_new[b]).min(0.9);
                    let res_mean = if n == 0 {
                        0.0
                    } else {
                        (1.0 - sigma) * dec[n] / 2.0 + sigma * pf_new[n] * pf_bias[n] / 2.0
                    };
                    let pf_mean = s.pf_start;
                    let (q, q2, delta) = if after_decode && (b as u32) < b_cap {
                        let rate = lambda * states.get(n + 1).map_or(0.0, |t| t.accept);
                        let delta = st_new[b + 1];
                        // Joiners before the first decode: Poisson over the wait, which a
                        // first joiner lengthens by its prefill.
                        let mu = rate * (res_mean + pf_mean);
                        let mu2 = rate * (res_mean + pf_mean + delta);
                        let q2 = if (b as u32) + 1 < b_cap {
                            1.0 - libm::exp(-mu2) * (1.0 + mu2)
                        } else {
                            0.0
                        };
                        let q = 1.0 - libm::exp(-mu);
                        (q, q2.min(q), delta)
                    } else {
                        (0.0, 0.0, 0.0)
                    };
                    let joiners = if q > 0.0 {
                        joiner_groups(&states[n + 1].prompt_bins, &pbin_range, delta, |p| {
                            stall_of(b as u32 + 1, p)
                        })
                    } else {
                        [(0.0, 0.0); JOINER_GROUPS]
                    };
                    mean_ttft += w_state * (res_mean + pf_mean + dec_b + (q + q2) * delta);
                    starts.push(StartState {
                        n,
                        x: *x,
                        dec: dec_b,
                        res_mean,
                        q,
                        q2,
                        delta,
                        joiners,
                    });
                } else {
                    let mdep = (nb - b_cap + 1) as f64;
                    // State-dependent service: KV-limited crowded states hold smaller
                    // requests, so their departures come faster (mean-preserving).
                    let r = if s.sys_output > 0.0 {
                        s.sys_output / sys_ref
                    } else {
                        1.0
                    };
                    let wmean = r * (first_mean + (mdep - 1.0) / dfull_n);
                    let f = if s.sys_output > 0.0 {
                        s.sys_var_ratio
                    } else {
                        1.0
                    };
                    let wvar = r * r * (first_var + f * (mdep - 1.0) * scv_s / (dfull_n * dfull_n));
                    let dec_b = if after_decode { dec_full } else { 0.0 };
                    let ft = s.pf_queued + dec_b;
                    let total_mean = wmean + ft;
                    let total_var = wvar + slope * slope * var_p;
                    mean_ttft += w_state * total_mean;
                    wait_sum += w_state * wmean;
                    queued.push((w_state, total_mean, total_var / (total_mean * total_mean)));
                }
                wsum += w_state;
            }
            mean_ttft /= wsum;
            let new_wait = wait_sum / wsum;
            // Converged fixed point (or the last pass): only then read out the quantiles.
            let last = iter + 1 == ITERS
                || ((new_wait - mean_wait).abs() <= 1e-3 * new_wait.max(1e-3)
                    && (new_p - acc_p).abs() <= 1e-3 * acc_p
                    && (new_o - acc_o).abs() <= 1e-3 * acc_o);
            mean_wait = new_wait;
            acc_p = new_p;
            acc_o = new_o;
            acc_o2 = new_o2;
            if !last {
                continue;
            }
            let busy: f64 = avg
                .iter()
                .enumerate()
                .map(|(n, x)| x * (n as u32).min(b_cap) as f64)
                .sum();
            let tpot: f64 = avg
                .iter()
                .enumerate()
                .skip(1)
                .map(|(n, x)| {
                    let b = (n as u32).min(b_cap);
                    let stall_rate = if (n as u32) > b_cap {
                        deaths[n]
                    } else {
                        lambda * states[n].accept
                    };
                    x * b as f64 * dec[b as usize] * (1.0 + stall_rate * st_new[b as usize])
                })
                .sum::<f64>()
                / busy.max(1e-300);
            let mut comps: Vec<Comp> =
                Vec::with_capacity(2 * starts.len() * n_pbins + queued.len());
            for st in &starts {
                let s = &states[st.n];
                let b = st.n as u32 + 1;
                for (pb, &wb) in s.prompt_bins.iter().enumerate() {
                    if wb <= 0.0 {
                        continue;
                    }
                    let (lo, hi, _) = pbin_range[pb];
                    let (t_lo, t_hi) = (
                        self.prefill_iter(b, lo) + st.dec,
                        self.prefill_iter(b, hi) + st.dec,
                    );
                    comps.push(Comp::Uniform {
                        w: st.x * wb * (1.0 - st.q),
                        base: t_lo,
                        w1: 2.0 * st.res_mean,
                        w2: t_hi - t_lo,
                    });
                    if st.q > 0.0 {
                        for &(gw, d) in &st.joiners {
                            if gw > 0.0 {
                                comps.push(Comp::Uniform {
                                    w: st.x * wb * (st.q - st.q2) * gw,
                                    base: t_lo + d,
                                    w1: 2.0 * st.res_mean,
                                    w2: t_hi - t_lo,
                                });
                            }
                        }
                        if st.q2 > 0.0 {
                            comps.push(Comp::Uniform {
                                w: st.x * wb * st.q2,
                                base: t_lo + 2.0 * st.delta,
                                w1: 2.0 * st.res_mean,
                                w2: t_hi - t_lo,
                            });
                        }
                    }
                }
            }
            comps.extend(
                queued
                    .iter()
                    .map(|&(w, mean, scv)| Comp::gamma(w, mean, scv, wsum)),
            );
            let cdf_pdf = |t: f64| {
                let (c, d, e) = comps.iter().fold((0.0, 0.0, 0.0), |(c, d, e), comp| {
                    let (x, y, z) = comp.cdf_pdf(t);
                    (c + x, d + y, e + z)
                });
                (c / wsum, d / wsum, e / wsum)
            };
            // Starting points: the quantiles of a gamma with the mixture's two moments
            // (Wilson–Hilferty), each level scaled by where the one below actually fell.
            let gamma_q = {
                let (m1, m2) = comps.iter().fold((0.0, 0.0), |(a, b), c| {
                    let (x, y) = c.moments();
                    (a + x, b + y)
                });
                let (m1, m2) = (m1 / wsum, m2 / wsum);
                let scv = ((m2 - m1 * m1) / (m1 * m1)).clamp(0.0, 4.0);
                move |z: f64| {
                    m1 * (1.0 - scv / 9.0 + z * libm::sqrt(scv) / 3.0)
                        .max(0.05)
                        .powi(3)
                }
            };
            let (g50, g95, g99) = (gamma_q(0.0), gamma_q(1.644_853_6), gamma_q(2.326_347_9));
            let q50 = invert_cdf(cdf_pdf, LEVELS[0], 0.0, g50.max(1e-6), 1e-6);
            let q95 = invert_cdf(cdf_pdf, LEVELS[1], q50, q50 * g95 / g50, 1e-6);
            let q99 = invert_cdf(cdf_pdf, LEVELS[2], q95, q95 * g99 / g95, 1e-6);
            let slo = &cfg.metrics;
            let meets = if tpot <= slo.slo_tpot_s {
                cdf_pdf(slo.slo_ttft_s).0
            } else {
                0.0
            };
            result = Some(Predicted {
                ttft_mean_s: mean_ttft,
                ttft_p50_s: q50,
                ttft_p95_s: q95,
                ttft_p99_s: q99,
                tpot_mean_s: if busy > 0.0 { tpot } else { self.decode(1) },
                goodput_rps: goodput,
                blocking,
                utilisation: busy / b_cap as f64,
                slo_attainment: (1.0 - blocking) * meets,
            });
            break;
        }
        match result {
            Some(r) => Ok(Prediction::Stable(r)),
            None => Err(AnalyticError::NoConvergence {
                what: "ours fixed point",
                residual: f64::NAN,
            }),
        }
    }
}

/// The joiner's delay split by its prompt: the accepted prompt bins `bins` (weights) cut
/// into [`JOINER_CUTS`] shares, each group's delay `stall(mean prompt of the group)`,
/// scaled so the groups' mean delay is `mean` (the mean TTFT is unchanged). Groups as
/// (probability, delay [s]).
fn joiner_groups(
    bins: &[f64],
    ranges: &[(f64, f64, f64)],
    mean: f64,
    stall: impl Fn(f64) -> f64,
) -> [(f64, f64); JOINER_GROUPS] {
    let total: f64 = bins.iter().sum();
    let mut out = [(0.0, 0.0); JOINER_GROUPS];
    if total <= 0.0 {
        out[0] = (1.0, mean);
        return out;
    }
    // Each bin joins the group its cumulative midpoint falls in.
    let (mut g, mut cum) = (0, 0.0);
    let mut tok = [0.0; JOINER_GROUPS];
    for (&w, r) in bins.iter().zip(ranges) {
        let share = w / total;
        while g + 1 < JOINER_GROUPS && cum + share / 2.0 >= JOINER_CUTS[g] {
            g += 1;
        }
        out[g].0 += share;
        tok[g] += share * r.2;
        cum += share;
    }
    let mut avg = 0.0;
    for (o, t) in out.iter_mut().zip(tok) {
        if o.0 > 0.0 {
            o.1 = stall(t / o.0);
            avg += o.0 * o.1;
        }
    }
    if avg > 0.0 {
        out.iter_mut().for_each(|o| o.1 *= mean / avg);
    }
    out
}

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
fn occupancy_integral(births: &[f64], deaths: &[f64], horizon: f64) -> Vec<f64> {
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

/// Most relaxation modes below θ for which [`slow_mode_law`] is used (each costs a
/// bisection of about 50 Sturm counts).
const SLOW_MODES_MAX: usize = 16;

/// `p(T) = e^{QT}·e_0` from the chain's slow modes: with `y = p/√π` the chain is `y' = S·y`,
/// S symmetric tridiagonal, so `p_n(T) = π_n + √(π_n/π_0)·Σ_k e^{−γ_k T}·u_k(n)·u_k(0)` over
/// the eigenpairs `(γ_k, u_k)` of −S; the modes with `γ_k ≥ θ` are below double precision
/// at T (see [`occupancy_integral`]) and the `slow − 1` others are found by bisection on
/// Sturm counts and two steps of inverse iteration. `None` (use [`transient_law`]) when
/// there are too many, or they are too close to each other or to 0 to separate.
fn slow_mode_law(
    pi: &[f64],
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
    let diag: Vec<f64> = (0..m)
        .map(|n| b(n) + if n > 0 { deaths[n] } else { 0.0 })
        .collect();
    let off2: Vec<f64> = (0..top).map(|n| b(n) * deaths[n + 1]).collect();
    let off: Vec<f64> = off2.iter().map(|&x| libm::sqrt(x)).collect();
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
    let mut y: Vec<f64> = pi.iter().map(|p| libm::sqrt(p * pi[0])).collect();
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
        let c = libm::exp(-gamma * horizon) * v[0];
        y.iter_mut().zip(&v).for_each(|(yv, u)| *yv += c * u);
        modes.push(v);
    }
    let s0 = libm::sqrt(pi[0]);
    Some(
        y.iter()
            .zip(pi)
            .map(|(v, p)| v * libm::sqrt(*p) / s0)
            .collect(),
    )
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

/// `p(T) = e^{QT}·e_0` for the birth–death chain on `0..=top` with stationary law `pi`.
///
/// # Formula
/// With `y = p/√π` the chain is `y' = S·y`, S symmetric tridiagonal (diagonal
/// `−(b_n + d_n)`, off-diagonal `√(b_n·d_{n+1})`), spectrum in `[−L, 0]` by Gershgorin.
/// Writing `−S = (L/2)(B + I)`, `e^{ST} = e^{−a}·e^{−aB}` with `a = TL/2`, and
/// `e^{−ax} = Σ_k ε_k (−1)^k I_k(a) T_k(x)` (ε_0 = 1, else 2): the scaled Bessel values
/// `e^{−a}I_k(a)` come from Miller's backward recurrence normalised by
/// `I_0 + 2ΣI_k = e^a`, and fall below 1e-18 by `k ≈ √(90a)`.
fn transient_law(pi: &[f64], births: &[f64], deaths: &[f64], top: usize, horizon: f64) -> Vec<f64> {
    let m = top + 1;
    let b = |n: usize| if n < top { births[n] } else { 0.0 };
    let off: Vec<f64> = (0..top).map(|n| libm::sqrt(b(n) * deaths[n + 1])).collect();
    let diag: Vec<f64> = (0..m)
        .map(|n| b(n) + if n > 0 { deaths[n] } else { 0.0 })
        .collect();
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
    t0[1] = 1.0;
    let mut t1 = vec![0.0; w];
    t1[1] = bd[1];
    t1[2] = lo[2];
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
    let y = &y[1..=m];
    let s0 = libm::sqrt(pi[0]);
    y.iter()
        .zip(pi)
        .map(|(v, p)| v * libm::sqrt(*p) / s0)
        .collect()
}

/// Mean and variance of the minimum of `b` i.i.d. equilibrium residuals of the output
/// length (accepted sizes), both relative to the mean spacing `E[O]/b` (so an exponential
/// would give (1, 1)).
fn min_residual_moments(atoms: &[Atom], size_u: &[usize], k_u: usize, b: u32) -> (f64, f64) {
    let fits = || {
        atoms
            .iter()
            .zip(size_u)
            .filter(move |(_, &s)| s <= k_u)
            .map(|(a, _)| (a.output, a.w))
    };
    let (wsum, wo, o_max) = fits().fold((0.0, 0.0, f64::NEG_INFINITY), |(w, wo, m), (o, x)| {
        (w + x, wo + x * o, m.max(o))
    });
    let mean_o = wo / wsum.max(1e-300);
    if wsum <= 0.0 || mean_o <= 0.0 {
        return (1.0, 1.0);
    }
    // Quadrature points t_k = o_max·(k/N)², k = 1..=N. Each atom goes to the first k with
    // O ≤ t_k, so the atoms above t_k (whose sums g(t) needs) are those of buckets > k: a
    // counting pass instead of a sort.
    const N: usize = 600;
    let ts: Vec<f64> = (0..=N)
        .map(|k| {
            let u = k as f64 / N as f64;
            o_max * u * u
        })
        .collect();
    let mut bucket_w = vec![0.0; N + 1];
    let mut bucket_wo = vec![0.0; N + 1];
    for (o, w) in fits() {
        // k = ⌈N·√(O/o_max)⌉ up to rounding, then exact against the table.
        let mut k = (ceil_nonneg(N as f64 * libm::sqrt((o / o_max).max(0.0))) as usize).clamp(1, N);
        while k > 1 && o <= ts[k - 1] {
            k -= 1;
        }
        while k < N && o > ts[k] {
            k += 1;
        }
        bucket_w[k] += w;
        bucket_wo[k] += w * o;
    }
    // Suffix sums over buckets > k: w and w·o above t_k.
    let (mut suf_w, mut suf_wo) = (0.0, 0.0);
    let mut above = vec![(0.0, 0.0); N + 1];
    for k in (1..=N).rev() {
        above[k] = (suf_w, suf_wo);
        suf_w += bucket_w[k];
        suf_wo += bucket_wo[k];
    }
    let mut prev = (0.0, 1.0f64);
    let (mut m1, mut m2) = (0.0, 0.0);
    for (&(sw, swo), &t) in above.iter().zip(&ts).skip(1) {
        let g = ((swo - t * sw) / (mean_o * wsum)).clamp(0.0, 1.0);
        let gb = g.powi(b as i32);
        let dt = t - prev.0;
        m1 += 0.5 * dt * (prev.1 + gb);
        m2 += dt * (prev.0 * prev.1 + t * gb);
        prev = (t, gb);
    }
    let spacing = mean_o / b as f64;
    let var = (m2 - m1 * m1).max(0.0);
    (m1 / spacing, var / (spacing * spacing))
}

/// One mixture component of the TTFT distribution.
#[derive(Clone, Copy, Debug)]
enum Comp {
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
    fn gamma(w: f64, mean: f64, scv: f64, total: f64) -> Comp {
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
                lga: libm::lgamma(a),
                ln_a1: libm::log((a + 1.0) / a),
                cut: 40.0 + libm::log(w / total),
            }
        }
    }

    /// Weighted CDF, density [1/s] and its derivative [1/s²] at t.
    fn cdf_pdf(&self, t: f64) -> (f64, f64, f64) {
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
    fn moments(&self) -> (f64, f64) {
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

/// Smallest t ≥ `lo` with `F(t) ≥ target` for a non-decreasing F on [0, ∞) given with its
/// density and the density's slope (`f` returns all three), `F(lo) < target`, to a relative
/// tolerance `rel` (the model is not more accurate than 1e-6), `0 < target < 1`. Halley's
/// step (cubic) on the log-odds from `start`, else Newton's, kept inside the bracket found
/// so far and replaced by bisection
/// (or doubling, before an upper end is known) when it would leave it or stops halving the
/// step, as in Numerical Recipes' `rtsafe`; 2–4 evaluations on the smooth mixture CDFs,
/// and the bracket still closes on a jump.
fn invert_cdf(
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
fn uniform_sum_cdf_pdf(y: f64, a: f64, b: f64) -> (f64, f64, f64) {
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
    fn a_kv_cache_that_fits_no_request_is_an_error_not_nan() {
        for (mode, k) in [(KvMode::Reserve, 10), (KvMode::Paged, 16)] {
            let mut cfg = SimConfig::reference(1.0, 8, k);
            cfg.server.kv_mode = mode;
            let got = Ours::from_config(&cfg).and_then(|o| o.prediction());
            match got {
                Err(AnalyticError::Invalid { name, why, .. }) => {
                    assert_eq!(name, "kv_tokens");
                    assert!(why.contains("every request is rejected"), "{why}");
                }
                other => panic!("K = {k} ({mode:?}): {other:?}"),
            }
        }
        // One token more than the smallest request class still predicts finite numbers.
        let ok = Ours::from_config(&SimConfig::reference(1.0, 8, 2048))
            .and_then(|o| o.prediction())
            .unwrap();
        let m = ok.metrics().unwrap();
        assert!(m.ttft_mean_s.is_finite() && m.slo_attainment.is_finite());
    }

    #[test]
    fn joiner_groups_split_the_prompt_distribution_and_keep_the_mean() {
        // 10 equal bins of prompts 100, 200, … 1000; stall linear in the prompt.
        let bins = vec![0.1; 10];
        let ranges: Vec<(f64, f64, f64)> = (1..=10)
            .map(|i| {
                (
                    i as f64 * 100.0 - 50.0,
                    i as f64 * 100.0 + 50.0,
                    i as f64 * 100.0,
                )
            })
            .collect();
        let stall = |p: f64| 0.004 + 8e-5 * p;
        let mean = stall(550.0);
        let g = joiner_groups(&bins, &ranges, mean, stall);
        let total: f64 = g.iter().map(|x| x.0).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // Shares by the bins' midpoints: 50 %, 30 %, 10 %, 10 %.
        for (got, want) in g.iter().zip([0.5, 0.3, 0.1, 0.1]) {
            assert!((got.0 - want).abs() < 1e-9, "{g:?}");
        }
        let avg: f64 = g.iter().map(|x| x.0 * x.1).sum();
        assert!((avg - mean).abs() < 1e-12 * mean);
        assert!(g.windows(2).all(|w| w[0].1 < w[1].1), "{g:?}");
        // The top group holds the 1000-token prompts' stall.
        assert!((g[3].1 - stall(1000.0)).abs() < 1e-9);
        // No accepted joiner: all the mean in one group.
        assert_eq!(
            joiner_groups(&[0.0; 3], &ranges[..3], mean, stall)[0],
            (1.0, mean)
        );
    }

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
        let mut cdf = 0.0;
        for k in 0..k_max {
            let ln_pmf = -mu + k as f64 * mu.ln() - libm::lgamma(k as f64 + 1.0);
            cdf += ln_pmf.exp();
            let w = (1.0 - cdf).max(0.0) / big;
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
            let got = slow_mode_law(&pi, &births, &deaths, top, t, theta, slow).unwrap();
            let want = transient_law(&pi, &births, &deaths, top, t);
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

    #[test]
    fn rounding_matches_libm() {
        for x in [
            0.0,
            0.2,
            0.5,
            0.49999999999999994,
            1.0,
            1.5,
            2.5,
            7.999999999,
            1e15 + 0.5,
            3e16,
        ] {
            assert_eq!(ceil_nonneg(x), libm::ceil(x), "{x}");
            assert_eq!(round_nonneg(x), libm::round(x), "{x}");
        }
    }

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

    /// B = 1 without KV pressure is M/G/1: the diffusion-matched chain must give
    /// Pollaczek–Khinchine's mean wait, W = λ·E[S²] / (2(1 − ρ)), not the exponential
    /// chain's ρ·E[S]/(1 − ρ)-type queue (12–16 % too long for these lengths).
    #[test]
    fn single_server_mean_ttft_is_pollaczek_khinchine() {
        let mut cfg = SimConfig::reference(0.5, 1, 1 << 20);
        cfg.horizon_s = 1e5;
        let m = fast_moments(&cfg.workload.lengths);
        let pf = |tokens: f64| prefill_tokens(&cfg.cost, 1, tokens);
        let slope = pf(1000.0) - pf(0.0);
        let d = cfg.cost.decode_step(1, 0);
        let var_p = m.prompt.1 - m.prompt.0 * m.prompt.0;
        let var_o = m.output.1 - m.output.0 * m.output.0;
        let es = pf(m.prompt.0) + m.output.0 * d;
        let es2 = es * es + var_p * (slope / 1000.0).powi(2) + var_o * d * d;
        let rho = 0.5 * es;
        let pk = 0.5 * es2 / (2.0 * (1.0 - rho)) + pf(m.prompt.0) + d;
        let got = Ours::from_config(&cfg)
            .unwrap()
            .prediction()
            .unwrap()
            .metrics()
            .unwrap()
            .ttft_mean_s;
        assert!((got - pk).abs() < 0.03 * pk, "model {got} vs P-K {pk}");
    }

    #[test]
    fn ours_is_finite_on_the_grid_corners() {
        for (lam, b, k) in [
            (0.5, 1, 2048),
            (3.0, 1, 16384),
            (3.0, 8, 2048),
            (1.0, 4, 8192),
        ] {
            let cfg = SimConfig::reference(lam, b, k);
            let p = Ours::from_config(&cfg).unwrap().prediction().unwrap();
            let m = p.metrics().unwrap();
            assert!(m.ttft_mean_s.is_finite() && m.ttft_mean_s > 0.0, "{m:?}");
            assert!(
                m.ttft_p50_s <= m.ttft_p95_s && m.ttft_p95_s <= m.ttft_p99_s,
                "{m:?}"
            );
            assert!(
                (0.0..1.0).contains(&m.blocking) && m.goodput_rps > 0.0,
                "{m:?}"
            );
        }
    }

    #[test]
    fn paged_overload_is_explicit() {
        let mut cfg = SimConfig::reference(3.0, 1, 16384);
        cfg.server.kv_mode = KvMode::Paged;
        assert!(matches!(
            Ours::from_config(&cfg).unwrap().prediction().unwrap(),
            Prediction::Unstable { .. }
        ));
        cfg.workload = cfg.workload.with_rate(0.3);
        assert!(Ours::from_config(&cfg)
            .unwrap()
            .prediction()
            .unwrap()
            .metrics()
            .is_some());
    }
}
