//! The batching model: a size-aware, stall-aware, finite-horizon model of a
//! continuous-batching server. Where the reference models see mean lengths, an
//! exponential server and the stationary regime, it follows the length distribution into
//! the KV cache, charges every joiner's prefill to the batch it stalls, and integrates the
//! queue from an empty server over the run's horizon (`docs/model.md`, Analytical models).
//!
//! # Method
//! 1. **Lengths**: the joint (prompt, output) distribution as ~1000 atoms with tail-refined
//!    quantile bins (see `lengths.rs`), not just the means.
//! 2. **KV occupancy** (reserve mode, [`kv_occupancy`]): given n in system, the reserved
//!    tokens are the sum of n i.i.d. sizes drawn from the *in-system* composition, which by
//!    Little's law per size is the arrival distribution weighted by the hold time
//!    `W̄ + S(P, O)` (size-biased by output length, through the service), truncated at K
//!    (product-form knapsack, Kaufman–Roberts style, on a ≤ 129-unit grid). The acceptance
//!    probability of an arrival finding n, `a(n) = P(R_n + size ≤ K)`, uses the arrival
//!    sizes, so small requests are admitted more often (size-biased admission), and the
//!    accepted requests' mean prompt/output — hence the service rate — follow from it.
//! 3. **Stalls** ([`service`]): every joiner's prefill stalls the whole batch. With n ≤ B
//!    running, the decode rate is slowed by the arrival-driven prefill fraction `λ a(n) δ`;
//!    with a queue, each departure brings a joiner, so the full-batch departure rate is
//!    `D = B / (E[O]·decode(B) + B·δ(B))`, δ the joiner's prefill (continuous) or the extra
//!    cost of the mixed iteration (chunked).
//! 4. **Transient** ([`transient`]): the birth–death chain on n (births λ a(n), deaths
//!    D(n)) is integrated from an empty server over the horizon (`∫₀ᵀ p dt` from the law at
//!    T by the flux identity), so near-critical loads whose queue fills over hundreds of
//!    seconds, and the cut horizon's unfinished requests, are accounted for. Poisson
//!    arrivals find the time-averaged law (PASTA); smoother ones find it as departures
//!    alone leave it after `τ = (1 − c_a²)/(2λ)` ([`arrival_seen`]). Goodput with a cut horizon is `Σ_n D(n)·∫p_n dt / T`
//!    (accepted minus those still in system at T).
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
//!    real D(n). For arrivals smoother than Poisson the departures' variance is their
//!    dispersion `c_O²·(1 − δD)²` instead (each departure's joiner stalls the batch, so a
//!    burst of departures slows the next ones; `Rates::departure_dispersion`), the
//!    queue's geometric law starts at the cap, and a queued arrival's later departures
//!    are spaced by that dispersion, each in proportion to `1 − c_a²` (Poisson keeps c²
//!    and Allen–Cunneen's edge). Pooled over M servers (a router joining the fewest
//!    requests, [`BatchingModel::pooled`]) the chain follows the M servers together on a
//!    lattice of 1/M of a request per server, so the queue of their M·B slots builds as
//!    in Halfin–Whitt's regime.
//! 5. **TTFT** ([`ttft`]): an accepted arrival finding n < B waits the residual of the
//!    current iteration (length-biased: a prefill iteration's over the prompt
//!    distribution), its prefill `prefill(n+1, P)` (P from the accepted prompt
//!    distribution given n) and, in reference mode, its first decode plus the prefills of
//!    requests joining in between (Poisson: one, with the joiner's prompt in four groups
//!    of its distribution, or two); finding n ≥ B it waits for `n − B + 1` departures, a
//!    gamma with the exact residual of the first departure (B = 1) or the minimum of B
//!    equilibrium residuals (B > 1, two moments from the length atoms) and the
//!    service-time variance (length variance) for the rest. The departures' time scale is
//!    state-dependent: the KV convolution carries the mean output of the requests in
//!    system given n (crowded, KV-limited states hold smaller requests), normalised so the
//!    mean wait is unchanged, and the variance of their summed output given n (the KV
//!    limit truncates the sum, so crowded states wait a much less variable time than n
//!    i.i.d. services). Quantiles invert the mixture CDF ([`mixture`]).
//! 6. **Paged** (queueing) mode ([`paged`]): no reservation loss; the running set is
//!    limited by B and by the KV the running requests occupy on average (prompt + half the
//!    output); unstable (explicit) when λ exceeds the full-batch departure rate.
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
//! alive at T (bisection on Sturm counts and inverse iteration; when they are many or
//! clustered, Talbot's quadrature of `e^{QT}`, 12 complex tridiagonal solves, or a
//! Chebyshev expansion, about `√(90·T·Λ)` tridiagonal products, where rounding needs it;
//! a chain started deep in its stationary tail is first uniformised until its law leaves
//! the tail); quantiles use safeguarded Halley steps on the
//! log-odds of the mixture CDF (with its density and the density's slope), starting from
//! the quantiles of a gamma with the mixture's two moments (3–5 evaluations each), and a
//! gamma component is not evaluated where a bound on its tail, times its weight, is below
//! 4e-18 of the mixture.

mod kv_occupancy;
mod mixture;
mod paged;
mod service;
mod transient;
mod ttft;

use super::lengths::{fast_moments, shared_atoms, Atom};
use super::{AnalyticError, Predicted, Prediction};
use crate::config::{EndRule, FirstToken, KvMode, Policy, SimConfig};
use crate::workload::{ArrivalProcess, LengthMoments};
use kv_occupancy::{reserve_states, Hold, KvGrid, StateInfo};
use mixture::{mixture_cdf_pdf, quantiles};
use paged::{paged_states, running_cap, Unstable};
use service::{variance_matched, Costs, Rates, Service, Variability};
use std::borrow::Cow;
use transient::occupancy_integral;
use ttft::{min_residual_moments, JointQueue, TtftInputs};

/// Bins per length marginal.
const BINS: usize = 32;

/// The most slots (servers × B) whose joint queue a pooled chain follows
/// ([`BatchingModel::pooled`]): its lattice then has no more states than one server of
/// B 128. Over N 2–1,024, B 4–128 and loads 0.3–0.99 a prediction takes 1.2 ms on
/// average, worst 18 ms; at 256 slots, worst 41 ms (B 128 near saturation); at 512,
/// 0.3 s for 1,024 servers of B 8 at 0.9 load.
const POOLED_SLOTS: usize = 128;
/// Fixed-point passes at most.
const ITERS: usize = 4;

/// The batching model, bound to one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchingModel {
    cfg: SimConfig,
    atoms: std::sync::Arc<[Atom]>,
    moments: LengthMoments,
    /// The arrivals' squared coefficient of variation (1 for Poisson).
    arrival_scv: f64,
    /// How many servers the queue is pooled over (1 alone; see [`BatchingModel::pooled`]).
    pooled: f64,
    /// Routed to the least outstanding work rather than the fewest requests (see
    /// [`BatchingModel::routed_by_work`]).
    by_work: bool,
}

/// What one configuration fixes before the fixed point: the KV grid, the cost tables and
/// the prompt bins.
struct Setup<'a> {
    cfg: &'a SimConfig,
    atoms: &'a [Atom],
    m: LengthMoments,
    b_max: u32,
    reserve: bool,
    grid: KvGrid,
    svc: Service<'a>,
    /// [`min_residual_moments`] at the running-set cap.
    min_res: (f64, f64),
    /// Prompt bins: (lower edge, upper edge, mean) [tokens], and their weights.
    pbin_range: Vec<(f64, f64, f64)>,
    pbin_w: Vec<f64>,
    /// `E[X²]/E[X]²` of the prefill iteration X over the prompts, by batch size.
    pf_bias: Vec<f64>,
    /// Prefill of each atom alone [s] (the service part of its hold time); atoms sharing
    /// a prompt bin share the prompt.
    pf1: Vec<f64>,
    /// `(Σ w·pf, Σ w·O, Σ w)` over the atoms that fit: the mean service part of the hold
    /// time of an arrival that does not wait is `(Σ w·pf + τ·Σ w·O) / Σ w`.
    hold: (f64, f64, f64),
    /// Prefill-time slope per prompt token at the full batch [s/token].
    slope: f64,
    /// As [`BatchingModel`]'s.
    arrival_scv: f64,
    pooled: f64,
    /// Servers whose joint queue the chain follows: ⌊pooled⌋, at most [`POOLED_SLOTS`] / B
    /// (1 alone).
    lattice: usize,
    /// SCV of an outstanding request's work when routed by work, else `None`.
    work_scv: Option<f64>,
}

/// The fixed point over the accepted means, the mean wait and the states.
struct FixedPoint {
    /// Accepted mean prompt, mean and second moment of the output [tokens, tokens²].
    acc_p: f64,
    acc_o: f64,
    acc_o2: f64,
    /// Mean wait of an accepted arrival [s].
    mean_wait: f64,
    states: Vec<StateInfo>,
    /// The waiting share of the hold time the KV composition was last built for.
    kv_alpha: Option<f64>,
}

/// Acceptance-weighted means over the time-average law: (accepted share, mean prompt,
/// mean output, mean squared output) of the accepted arrivals.
/// The law of the number in system that arrivals find. Poisson arrivals find the
/// time-averaged law (PASTA); a smoother stream's arrival comes a whole gap after the one
/// before, where the time average looks on average `E[A²]/(2E[A]) = (1 + c_a²)/(2λ)`
/// after it, so arrivals find the system as it is after `τ = (1 − c_a²)/(2λ)` more of
/// departures alone: the time-averaged law carried forward by the pure-death flow of the
/// real departure rates over τ. Burstier streams (c_a² ≥ 1) keep the time average.
fn arrival_seen(avg: &[f64], deaths: &[f64], lambda: f64, arrival_scv: f64) -> Vec<f64> {
    let mut q = avg.to_vec();
    if arrival_scv.is_nan() || arrival_scv >= 1.0 || lambda.is_nan() || lambda <= 0.0 {
        return q;
    }
    let tau = 0.5 * (1.0 - arrival_scv) / lambda;
    let d_max = deaths.iter().copied().fold(0.0, f64::max);
    let steps = (d_max * tau / 0.1).ceil().clamp(1.0, 1000.0) as usize;
    let dt = tau / steps as f64;
    for _ in 0..steps {
        let mut carry = 0.0;
        for n in (0..q.len()).rev() {
            let out = (deaths[n] * dt).min(1.0) * q[n];
            q[n] += carry - out;
            carry = out;
        }
        // A death from state 0 cannot happen (deaths[0] = 0); `carry` is then 0.
    }
    q
}

/// SCV of the outstanding work (prompt + remaining output) of a request in system, over
/// time: each request weighted by its time in system (∝ its output) with its remaining
/// output uniform over its run.
fn outstanding_work_scv(atoms: &[Atom]) -> f64 {
    let (mut m0, mut m1, mut m2) = (0.0, 0.0, 0.0);
    for a in atoms {
        let (p, o) = (a.prompt, a.output.max(1.0));
        m0 += a.w * o;
        m1 += a.w * (p * o + o * o / 2.0);
        m2 += a.w * (p * p * o + p * o * o + o * o * o / 3.0);
    }
    let mean = m1 / m0;
    ((m2 / m0) / (mean * mean) - 1.0).max(0.0)
}

/// The count an arrival finds when the router balances work, not requests: servers
/// holding the same work hold counts spread as a renewal count, variance `n̄·c_u²` at a
/// mean count n̄ (c_u² the SCV of one request's outstanding work), around the count of
/// the pooled queue.
fn dispersed_by_work(seen: &[f64], c2: f64) -> Vec<f64> {
    let n_bar: f64 = seen.iter().enumerate().map(|(n, q)| n as f64 * q).sum();
    let sd = (n_bar * c2).sqrt();
    if sd < 1e-6 || seen.len() < 2 {
        return seen.to_vec();
    }
    let top = seen.len() - 1;
    let reach = (6.0 * sd).ceil() as i64;
    let phi = super::special::normal_cdf;
    let kernel: Vec<f64> = (-reach..=reach)
        .map(|k| phi((k as f64 + 0.5) / sd) - phi((k as f64 - 0.5) / sd))
        .collect();
    let mut out = vec![0.0; seen.len()];
    for (n, &q) in seen.iter().enumerate() {
        if q == 0.0 {
            continue;
        }
        for (j, &w) in kernel.iter().enumerate() {
            let m = (n as i64 + j as i64 - reach).clamp(0, top as i64) as usize;
            out[m] += q * w;
        }
    }
    let scale = seen.iter().sum::<f64>() / out.iter().sum::<f64>();
    out.iter_mut().for_each(|x| *x *= scale);
    out
}

/// The chain of `m` pooled servers on a lattice of 1/m of a request per server: state k
/// holds ⌊k/m⌋ requests on m − (k mod m) servers and one more on the others, so its
/// departure rate is theirs summed, and an arrival joins one of the fewest (births
/// `m·births[⌊k/m⌋]`). While some slot is free (k < m·B) arrivals join and stall the
/// servers holding them, the full ones among them too: those depart at `full_stalled`
/// ([`Rates::death_at_cap_pooled`]), not at the unstalled `deaths[b_cap]` of a full
/// server whose arrivals queue.
fn fine_lattice(
    births: &[f64],
    deaths: &[f64],
    m: usize,
    b_cap: usize,
    full_stalled: f64,
) -> (Vec<f64>, Vec<f64>) {
    let top = (births.len() - 1) * m;
    let mf = m as f64;
    (0..=top)
        .map(|k| {
            let (n, j) = (k / m, (k % m) as f64);
            let d_hi = if n + 1 == b_cap {
                full_stalled
            } else {
                deaths.get(n + 1).copied().unwrap_or(deaths[n])
            };
            (mf * births[n], (mf - j) * deaths[n] + j * d_hi)
        })
        .unzip()
}

/// One server's law from the lattice's: state k puts (m − j)/m of its mass on ⌊k/m⌋ and
/// j/m on one more (j = k mod m).
fn per_server(fine: &[f64], m: usize, len: usize) -> Vec<f64> {
    let mut out = vec![0.0; len];
    let mf = m as f64;
    for (k, x) in fine.iter().enumerate() {
        let (n, j) = (k / m, (k % m) as f64);
        out[n] += x * (mf - j) / mf;
        if j > 0.0 {
            out[(n + 1).min(len - 1)] += x * j / mf;
        }
    }
    out
}

fn accepted_means(avg: &[f64], states: &[StateInfo]) -> (f64, f64, f64, f64) {
    let accepted: f64 = avg.iter().zip(states).map(|(x, s)| x * s.accept).sum();
    let mean = |f: fn(&StateInfo) -> f64| {
        avg.iter()
            .zip(states)
            .map(|(x, s)| x * s.accept * f(s))
            .sum::<f64>()
            / accepted
    };
    (
        accepted,
        mean(|s| s.acc_prompt),
        mean(|s| s.acc_output),
        mean(|s| s.acc_output2),
    )
}

impl BatchingModel {
    /// # Errors
    /// [`AnalyticError::Config`] for an invalid configuration; [`AnalyticError::Unsupported`]
    /// for policies other than continuous/chunked, or arrivals that are not a Poisson,
    /// gamma or deterministic stream.
    pub fn from_config(cfg: &SimConfig) -> Result<BatchingModel, AnalyticError> {
        cfg.validate()?;
        if !matches!(
            cfg.server.policy,
            Policy::Continuous | Policy::Chunked | Policy::LlamaCpp
        ) {
            return Err(AnalyticError::Unsupported {
                model: "batching",
                what: format!("policy {}", cfg.server.policy.as_str()),
            });
        }
        if !matches!(
            cfg.workload.arrivals,
            ArrivalProcess::Poisson { .. }
                | ArrivalProcess::Gamma { .. }
                | ArrivalProcess::Deterministic { .. }
        ) {
            return Err(AnalyticError::Unsupported {
                model: "batching",
                what: "arrivals from timestamps or a trace".into(),
            });
        }
        Ok(BatchingModel {
            cfg: cfg.clone(),
            atoms: shared_atoms(&cfg.workload.lengths, BINS),
            moments: fast_moments(&cfg.workload.lengths),
            arrival_scv: cfg.workload.arrivals.scv(),
            pooled: 1.0,
            by_work: false,
        })
    }

    /// The model of one of `n` servers whose queues move as one (join the shortest queue
    /// in heavy traffic, `docs/model.md`, Fleets): the fleet's queue is a diffusion with
    /// the arrival variance of the whole stream and the departure variance of n servers,
    /// so each server's share moves with both SCVs divided by n (n ≥ 1, may be fractional
    /// for a partial pooling).
    ///
    /// For n ≥ 2 the chain follows M = ⌊n⌋ servers (at most [`POOLED_SLOTS`] / B of
    /// them) together on a lattice of 1/M of a request per server (state k: ⌊k/M⌋
    /// requests on each server, one more on k mod M of them), with the M servers' own
    /// SCVs divided by n/M. One server's unit lattice
    /// cannot hold a share whose spread is below a request: narrowing its
    /// infinite-server states to variance m/n cuts the binomial's support below B, and
    /// waiting vanishes at once (between 8 and 16 servers of B = 8 at 0.9 load), where
    /// the M·B slots' queue (Halfin–Whitt, β = (1 − ρ)·√(M·B)) thins smoothly. An
    /// arrival joins a server with the fewest; with all slots busy and i waiting it
    /// waits for ⌊i/M⌋ + 1 departures of its own server. While slots are free, the
    /// joiners stall the servers they join, so a full server there departs as one below
    /// the cap does ([`Rates::death_at_cap_pooled`]); once every slot is busy arrivals
    /// queue and it departs unstalled. Routed by work ([`BatchingModel::routed_by_work`])
    /// it keeps one server's lattice.
    pub(crate) fn pooled(mut self, n: f64) -> BatchingModel {
        self.pooled = n.max(1.0);
        self
    }

    /// The model of one of the pooled servers when the router picks the least outstanding
    /// work (prompt + remaining output tokens) instead of the fewest requests: servers
    /// that hold the same work hold different counts, so the count an arrival finds is
    /// the pooled queue's spread by the renewal count's variance `n̄·c_u²` (n̄ its mean,
    /// c_u² the SCV of one request's outstanding work, [`outstanding_work_scv`]), times
    /// `1 − 1/n` for a deviation from the mean of the n servers' counts (none for n = 1).
    pub(crate) fn routed_by_work(mut self, yes: bool) -> BatchingModel {
        self.by_work = yes;
        self
    }

    /// The prediction.
    ///
    /// # Errors
    /// [`AnalyticError::Invalid`] when no request fits the KV cache; otherwise none on a
    /// validated configuration (kept fallible for future numerical checks).
    pub fn prediction(&self) -> Result<Prediction, AnalyticError> {
        let setup = self.setup()?;
        let m = self.moments;
        let mut fp = FixedPoint {
            acc_p: m.prompt.0,
            acc_o: m.output.0,
            acc_o2: m.output.1,
            mean_wait: 0.0,
            states: Vec::new(),
            kv_alpha: None,
        };
        for iter in 0..ITERS {
            if let Some(p) = setup.pass(&mut fp, iter + 1 == ITERS) {
                return Ok(p);
            }
        }
        Err(AnalyticError::NoConvergence {
            what: "batching-model fixed point",
            residual: f64::NAN,
        })
    }

    fn setup(&self) -> Result<Setup<'_>, AnalyticError> {
        let cfg = &self.cfg;
        let b_max = cfg.server.max_batch;
        let k_tok = cfg.server.kv_tokens as f64;
        let block = cfg.server.block_size.max(1) as f64;
        let reserve = cfg.server.kv_mode == KvMode::Reserve;
        let m = self.moments;
        let n_pbins = self.atoms.iter().map(|a| a.prompt_bin).max().unwrap_or(0) + 1;
        let mut pbin_range = vec![(f64::INFINITY, 0.0f64, 0.0f64); n_pbins];
        for a in self.atoms.iter() {
            let r = &mut pbin_range[a.prompt_bin];
            r.0 = r.0.min(a.prompt_lo);
            r.1 = r.1.max(a.prompt_hi);
            r.2 = a.prompt;
        }
        let grid = KvGrid::new(&self.atoms, k_tok, block, n_pbins)?;
        // Running-set cap: B, and in paged mode the KV the running requests occupy.
        let b_cap = if reserve { b_max } else { running_cap(cfg, &m) };
        let min_res = if b_cap > 1 {
            min_residual_moments(&self.atoms, &grid.size_u, grid.k_u, b_cap)
        } else {
            (1.0, 1.0)
        };
        // Routing by work spreads one server's count around the pooled one
        // ([`dispersed_by_work`]): it keeps one server's lattice.
        let lattice = if self.pooled >= 2.0 && !self.by_work {
            (self.pooled.floor() as usize).min((POOLED_SLOTS / b_cap.max(1) as usize).max(1))
        } else {
            1
        };
        let costs = Costs { cfg, moments: m };
        let svc = Service::new(costs, cfg.workload.rate(), b_max, b_cap);
        let mut pbin_w = vec![0.0; n_pbins];
        for a in self.atoms.iter() {
            pbin_w[a.prompt_bin] += a.w;
        }
        let pf_bias = svc.prefill_bias(&pbin_w, &pbin_range);
        let pf_bin: Vec<f64> = pbin_range
            .iter()
            .map(|r| costs.prefill_iter(1, r.2))
            .collect();
        let pf1: Vec<f64> = self.atoms.iter().map(|a| pf_bin[a.prompt_bin]).collect();
        let hold = self.atoms.iter().zip(&grid.size_u).zip(&pf1).fold(
            (0.0, 0.0, 0.0),
            |(a, o, b), ((at, &s), pf)| {
                if s <= grid.k_u {
                    (a + at.w * pf, o + at.w * at.output, b + at.w)
                } else {
                    (a, o, b)
                }
            },
        );
        let slope = (costs.prefill_iter(b_cap, 1000.0) - costs.prefill_iter(b_cap, 0.0)) / 1000.0;
        Ok(Setup {
            cfg,
            atoms: &self.atoms,
            m,
            b_max,
            reserve,
            grid,
            svc,
            min_res,
            pbin_range,
            pbin_w,
            pf_bias,
            pf1,
            hold,
            slope,
            arrival_scv: self.arrival_scv,
            pooled: self.pooled,
            lattice,
            work_scv: self.by_work.then(|| outstanding_work_scv(&self.atoms)),
        })
    }
}

impl Setup<'_> {
    /// The states for this pass: in reserve mode rebuilt only while the waiting share of
    /// the hold time, α = W̄ / (W̄ + E[S]), moves by 0.01 or more (the KV composition
    /// depends on the wait only through it); in paged mode rebuilt every pass.
    fn update_states(&self, fp: &mut FixedPoint, rates: &Rates) -> Result<(), Unstable> {
        if !self.reserve {
            fp.states = paged_states(&self.svc, rates.d_full, &self.pbin_w, &self.m)?;
            return Ok(());
        }
        let tau = self.svc.dec[self.b_max.min(4) as usize];
        let (hold_pf, hold_o, hold_w) = self.hold;
        let hold_service = (hold_pf + tau * hold_o) / hold_w.max(1e-300);
        let alpha = fp.mean_wait / (fp.mean_wait + hold_service);
        if fp.kv_alpha.is_some_and(|a: f64| (a - alpha).abs() < 0.01) {
            return Ok(());
        }
        fp.kv_alpha = Some(alpha);
        let hold = Hold {
            pf1: &self.pf1,
            mean_wait: fp.mean_wait,
            tau,
        };
        let n_pbins = self.pbin_range.len();
        fp.states = reserve_states(
            self.atoms, &self.grid, &hold, &self.svc, rates, self.b_max, n_pbins,
        );
        Ok(())
    }

    /// One fixed-point pass: rates, states, the transient chain and its read-outs. The
    /// prediction once the fixed point has settled (or on the `final_pass`), else `None`
    /// with `fp` updated.
    fn pass(&self, fp: &mut FixedPoint, final_pass: bool) -> Option<Prediction> {
        let (cfg, svc) = (self.cfg, &self.svc);
        let (lambda, b_cap) = (svc.lambda, svc.b_cap);
        let rates = Rates::new(svc, self.b_max, fp.acc_p, fp.acc_o);
        if let Err(Unstable { rho }) = self.update_states(fp, &rates) {
            return Some(Prediction::Unstable { rho });
        }
        let states = &fp.states;
        // Transient birth–death chain from empty over the horizon, variance-matched.
        let deaths: Vec<f64> = (0..states.len())
            .map(|n| rates.death_at(svc, n, states[n].accept))
            .collect();
        let horizon = cfg.horizon_s;
        let births: Vec<f64> = states.iter().map(|s| lambda * s.accept).collect();
        // The chain runs on a lattice of 1/M of a request per server: M servers pooled
        // (M = ⌊pooled⌋, at most [`POOLED_SLOTS`] / B; one server alone is the plain chain).
        // Its SCVs are those of the M servers' joint queue, divided by what pooling remains
        // beyond M.
        let lat = self.lattice;
        let spare = self.pooled / lat as f64;
        let service = rates.departure_scv(svc, fp.acc_o2) / spare;
        let arrival = self.arrival_scv / spare;
        // A smooth stream's queue moves with the departures' dispersion and starts
        // geometric at the cap; Poisson's keeps the service-time SCV and Allen–Cunneen's
        // edge. Between the two, in proportion to 1 − c_a² (`Variability`).
        let smooth = (1.0 - arrival).clamp(0.0, 1.0);
        let departures = if smooth > 0.0 {
            let dispersion = rates.departure_dispersion(svc, fp.acc_o2) / spare;
            service - smooth * (service - dispersion)
        } else {
            service
        };
        let v = Variability {
            arrival,
            service,
            departures,
            edge: smooth,
        };
        // One server alone runs on `births` and `deaths` themselves.
        let fine = (lat > 1).then(|| {
            let bc = b_cap as usize;
            let full_stalled = rates.death_at_cap_pooled(svc, states[bc - 1].accept);
            fine_lattice(&births, &deaths, lat, bc, full_stalled)
        });
        let (births_f, deaths_f) = fine
            .as_ref()
            .map_or((&births[..], &deaths[..]), |(b, d)| (&b[..], &d[..]));
        let cap_f = b_cap * lat as u32;
        let (births_ch, deaths_ch) = variance_matched(births_f, deaths_f, cap_f, v);
        let mut avg_f = occupancy_integral(&births_ch, &deaths_ch, horizon);
        let departed: f64 =
            avg_f.iter().zip(deaths_f).map(|(x, d)| x * d).sum::<f64>() / lat as f64;
        avg_f.iter_mut().for_each(|x| *x /= horizon);
        let avg = if lat > 1 {
            Cow::Owned(per_server(&avg_f, lat, states.len()))
        } else {
            Cow::Borrowed(&avg_f[..])
        };
        // Read-outs.
        let (accepted, new_p, new_o, new_o2) = accepted_means(&avg, states);
        let blocking = (1.0 - accepted).max(0.0);
        let goodput = match cfg.end {
            EndRule::Cut => departed / horizon,
            EndRule::Drain => lambda * accepted,
        };
        let (pf_new, st_new) = svc.cost_row(new_p);
        let m = self.m;
        let lf = lat as f64;
        let mut seen_f = arrival_seen(&avg_f, deaths_f, lf * lambda, arrival);
        if let Some(c2) = self.work_scv {
            // The spread of one server's count, in lattice units.
            seen_f = dispersed_by_work(&seen_f, c2 * (1.0 - 1.0 / self.pooled) * lf);
        }
        // An arrival joins a server holding ⌊k/M⌋ (the fewest); with all M·B slots busy it
        // waits in the joint queue.
        let (seen, queued) = if lat > 1 {
            let (free, busy) = seen_f.split_at((cap_f as usize).min(seen_f.len()));
            let mut seen = vec![0.0; states.len()];
            for (k, x) in free.iter().enumerate() {
                seen[k / lat] += x;
            }
            (Cow::Owned(seen), busy)
        } else {
            (Cow::Borrowed(&seen_f[..]), &[][..])
        };
        let inputs = TtftInputs {
            svc,
            states,
            avg: &seen,
            deaths: &deaths,
            d_full: rates.d_full,
            pf_new: &pf_new,
            st_new: &st_new,
            new_o,
            new_o2,
            after_decode: cfg.first_token == FirstToken::AfterFirstDecode,
            min_res: self.min_res,
            var_p: (m.prompt.1 - m.prompt.0 * m.prompt.0).max(0.0),
            slope: self.slope,
            pf_bias: &self.pf_bias,
            pbin_range: &self.pbin_range,
            arrival_scv: self.arrival_scv / self.pooled,
            joint: (lat > 1).then_some(JointQueue {
                servers: lat,
                seen: queued,
            }),
        };
        let parts = inputs.parts();
        let wsum = parts.wsum;
        let mean_ttft = parts.mean_ttft / wsum;
        let new_wait = parts.wait_sum / wsum;
        // Converged fixed point (or the last pass): only then read out the quantiles.
        let last = final_pass
            || ((new_wait - fp.mean_wait).abs() <= 1e-3 * new_wait.max(1e-3)
                && (new_p - fp.acc_p).abs() <= 1e-3 * fp.acc_p
                && (new_o - fp.acc_o).abs() <= 1e-3 * fp.acc_o);
        if !last {
            fp.mean_wait = new_wait;
            fp.acc_p = new_p;
            fp.acc_o = new_o;
            fp.acc_o2 = new_o2;
            return None;
        }
        let (busy, tpot) = svc.tpot(&avg, &births, &deaths, &st_new);
        let comps = inputs.mixture(&parts);
        let [q50, q95, q99] = quantiles(&comps, wsum);
        let slo = &cfg.metrics;
        let meets = if tpot <= slo.slo_tpot_s {
            mixture_cdf_pdf(&comps, wsum, slo.slo_ttft_s).0
        } else {
            0.0
        };
        Some(Prediction::Stable(Predicted {
            ttft_mean_s: mean_ttft,
            ttft_p50_s: q50,
            ttft_p95_s: q95,
            ttft_p99_s: q99,
            tpot_mean_s: if busy > 0.0 {
                tpot
            } else {
                svc.costs.decode(1)
            },
            goodput_rps: goodput,
            blocking,
            utilisation: busy / b_cap as f64,
            slo_attainment: (1.0 - blocking) * meets,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prompt p and output o fixed: the outstanding work is p + U·o with U uniform, mean
    /// p + o/2 and variance o²/12.
    #[test]
    fn outstanding_work_of_fixed_lengths_is_uniform_over_the_output() {
        let atom = Atom {
            prompt: 300.0,
            output: 120.0,
            w: 1.0,
            prompt_lo: 300.0,
            prompt_hi: 300.0,
            prompt_bin: 0,
        };
        let want = (120.0f64 * 120.0 / 12.0) / (360.0f64 * 360.0);
        let got = outstanding_work_scv(&[atom]);
        assert!((got - want).abs() < 1e-12, "{got} {want}");
    }

    /// m pooled servers on the 1/m lattice: state k = n·m + j departs at the rate of
    /// m − j servers holding n and j holding n + 1; a full server next to free slots is
    /// stalled; a random server's law keeps the mass and the mean k/m.
    #[test]
    fn the_pooled_lattice_sums_its_servers() {
        let births = vec![2.0; 4];
        let deaths = vec![0.0, 1.0, 1.5, 2.5];
        let (b, d) = fine_lattice(&births, &deaths, 4, 2, 1.8);
        assert_eq!(b.len(), 13);
        assert!(b.iter().all(|&x| x == 8.0));
        // k = 5: three servers at 1, one at 2 (full, stalled by the joiners).
        assert!((d[5] - (3.0 * 1.0 + 1.8)).abs() < 1e-12, "{}", d[5]);
        // k = 8: all full, arrivals queue: unstalled.
        assert!((d[8] - 4.0 * 1.5).abs() < 1e-12);
        // k = 10: two full, two with one waiting.
        assert!((d[10] - (2.0 * 1.5 + 2.0 * 2.5)).abs() < 1e-12);
        assert_eq!(d[0], 0.0);
        let fine: Vec<f64> = (0..13).map(|k| 1.0 + k as f64).collect();
        let one = per_server(&fine, 4, 4);
        let total: f64 = fine.iter().sum();
        assert!((one.iter().sum::<f64>() - total).abs() < 1e-12);
        let mean_fine = fine
            .iter()
            .enumerate()
            .map(|(k, x)| k as f64 / 4.0 * x)
            .sum::<f64>();
        let mean_one = one
            .iter()
            .enumerate()
            .map(|(n, x)| n as f64 * x)
            .sum::<f64>();
        assert!(
            (mean_fine - mean_one).abs() < 1e-9,
            "{mean_fine} {mean_one}"
        );
    }

    /// The spread keeps the mass and, away from the ends, the mean, and adds its variance.
    #[test]
    fn the_spread_by_work_adds_its_variance_and_keeps_the_mean() {
        let mut seen = vec![0.0; 41];
        seen[19] = 0.25;
        seen[20] = 0.5;
        seen[21] = 0.25;
        let moments = |q: &[f64]| {
            let m0: f64 = q.iter().sum();
            let m1: f64 = q.iter().enumerate().map(|(n, x)| n as f64 * x).sum();
            let m2: f64 = q.iter().enumerate().map(|(n, x)| (n * n) as f64 * x).sum();
            (m0, m1 / m0, m2 / m0 - (m1 / m0).powi(2))
        };
        let c2 = 0.2;
        let out = dispersed_by_work(&seen, c2);
        let (m0, mean, var) = moments(&out);
        assert!(
            (m0 - 1.0).abs() < 1e-12 && (mean - 20.0).abs() < 1e-9,
            "{m0} {mean}"
        );
        // Binned normal: variance σ² + 1/12 (Sheppard), σ² = n̄·c² = 4.
        assert!((var - (0.5 + 4.0 + 1.0 / 12.0)).abs() < 1e-3, "{var}");
        assert_eq!(dispersed_by_work(&seen, 0.0), seen);
    }
    use crate::analytic::reference_mmc::prefill_tokens;

    /// D/M/1 (deterministic arrivals at λ, exponential service at μ): the time-averaged
    /// law is `p_0 = 1 − ρ`, `p_n = ρ(1 − σ)σ^(n−1)`, and arrivals find `(1 − σ)σ^n`
    /// exactly, σ the root of `σ = exp(−(1 − σ)/ρ)`. The departure flow over τ = 1/(2λ)
    /// takes off all but a few percent of the time average's excess over the mean
    /// arrivals find, and keeps the mass; Poisson arrivals and
    /// burstier ones are left at the time average.
    #[test]
    fn arrivals_find_what_the_departure_flow_leaves_d_m_1() {
        for rho in [0.5_f64, 0.7, 0.9] {
            let (lambda, mu) = (rho, 1.0);
            let mut sigma = rho;
            for _ in 0..200 {
                sigma = (-(1.0 - sigma) / rho).exp();
            }
            let n_max = 400;
            let avg: Vec<f64> = (0..n_max)
                .map(|n| match n {
                    0 => 1.0 - rho,
                    _ => rho * (1.0 - sigma) * sigma.powi(n - 1),
                })
                .collect();
            let deaths: Vec<f64> = (0..n_max).map(|n| if n == 0 { 0.0 } else { mu }).collect();
            let seen = arrival_seen(&avg, &deaths, lambda, 0.0);
            let mass: f64 = seen.iter().sum();
            let total: f64 = avg.iter().sum();
            assert!(
                (mass - total).abs() < 1e-12,
                "ρ {rho}: mass {mass} vs {total}"
            );
            let mean = |q: &[f64]| q.iter().enumerate().map(|(n, x)| n as f64 * x).sum::<f64>();
            let exact = sigma / (1.0 - sigma);
            let (got, time_avg) = (mean(&seen), mean(&avg));
            assert!(
                time_avg > exact * 1.1,
                "ρ {rho}: the time average is no test"
            );
            let excess = time_avg - exact;
            assert!(
                (got - exact).abs() < 0.06 * excess,
                "ρ {rho}: {got} vs exact {exact} (time average {time_avg})"
            );
            for scv in [1.0, 2.0] {
                assert_eq!(arrival_seen(&avg, &deaths, lambda, scv), avg);
            }
        }
    }

    /// Near capacity (0.9 of B = 8's bound), a smooth stream's queue follows the
    /// departures' dispersion: the mean and p99 TTFT fall as the stream smooths (the
    /// simulator, 5 seeds × 1000 s at c_a² = 1/16: 0.178 s and 1.00 s), and a stream just
    /// smoother than Poisson is predicted as Poisson is (no jump at c_a² = 1).
    #[test]
    fn smooth_streams_move_continuously_from_poisson() {
        let ttft = |k: Option<f64>| {
            let mut cfg = SimConfig::reference(4.77, 8, 8192);
            if let Some(burstiness) = k {
                cfg.workload.arrivals = ArrivalProcess::Gamma {
                    rate: 4.77,
                    burstiness,
                };
            }
            let p = BatchingModel::from_config(&cfg)
                .unwrap()
                .prediction()
                .unwrap();
            let m = p.metrics().unwrap();
            (m.ttft_mean_s, m.ttft_p99_s)
        };
        let poisson = ttft(None);
        assert_eq!(ttft(Some(1.0)), poisson);
        let near = ttft(Some(1.0 / 0.999));
        assert!(
            (near.0 - poisson.0).abs() < 0.01 * poisson.0
                && (near.1 - poisson.1).abs() < 0.01 * poisson.1,
            "{near:?} vs {poisson:?}"
        );
        let (k4, k16) = (ttft(Some(4.0)), ttft(Some(16.0)));
        assert!(
            k4.0 < poisson.0 && k16.0 < k4.0,
            "{poisson:?} {k4:?} {k16:?}"
        );
        assert!(
            k4.1 < poisson.1 && k16.1 < k4.1,
            "{poisson:?} {k4:?} {k16:?}"
        );
        assert!((k16.0 - 0.178).abs() < 0.2 * 0.178, "{k16:?}");
        assert!((k16.1 - 1.00).abs() < 0.1 * 1.00, "{k16:?}");
    }

    #[test]
    fn a_kv_cache_that_fits_no_request_is_an_error_not_nan() {
        for (mode, k) in [(KvMode::Reserve, 10), (KvMode::Paged, 16)] {
            let mut cfg = SimConfig::reference(1.0, 8, k);
            cfg.server.kv_mode = mode;
            let got = BatchingModel::from_config(&cfg).and_then(|o| o.prediction());
            match got {
                Err(AnalyticError::Invalid { name, why, .. }) => {
                    assert_eq!(name, "kv_tokens");
                    assert!(why.contains("every request is rejected"), "{why}");
                }
                other => panic!("K = {k} ({mode:?}): {other:?}"),
            }
        }
        // One token more than the smallest request class still predicts finite numbers.
        let ok = BatchingModel::from_config(&SimConfig::reference(1.0, 8, 2048))
            .and_then(|o| o.prediction())
            .unwrap();
        let m = ok.metrics().unwrap();
        assert!(m.ttft_mean_s.is_finite() && m.slo_attainment.is_finite());
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
        let got = BatchingModel::from_config(&cfg)
            .unwrap()
            .prediction()
            .unwrap()
            .metrics()
            .unwrap()
            .ttft_mean_s;
        assert!((got - pk).abs() < 0.03 * pk, "model {got} vs P-K {pk}");
    }

    #[test]
    fn the_batching_model_is_finite_on_the_grid_corners() {
        for (lam, b, k) in [
            (0.5, 1, 2048),
            (3.0, 1, 16384),
            (3.0, 8, 2048),
            (1.0, 4, 8192),
        ] {
            let cfg = SimConfig::reference(lam, b, k);
            let p = BatchingModel::from_config(&cfg)
                .unwrap()
                .prediction()
                .unwrap();
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
            BatchingModel::from_config(&cfg)
                .unwrap()
                .prediction()
                .unwrap(),
            Prediction::Unstable { .. }
        ));
        cfg.workload = cfg.workload.with_rate(0.3);
        assert!(BatchingModel::from_config(&cfg)
            .unwrap()
            .prediction()
            .unwrap()
            .metrics()
            .is_some());
    }
}
