//! The reference study's multi-class CTMC, reproduced.
//!
//! # Formula
//! `M` equal-probability size classes (by prompt + output; default 2), class k with mean
//! prompt `P_k`, output `O_k` and KV demand `d_k = ⌈(P_k + O_k)/16⌉` pages; states are the
//! class-count vectors x with `Σ x_k d_k ≤ ⌊K/16⌋`. Arrivals of class k at `λ/M` join if
//! they fit (else blocked); completions are processor sharing over the batch: class k
//! leaves at `(x_k/n) · min(n, B) / s_k(min(n, B))`, `s_k(b) = prefill(b, P_k) + O_k
//! decode(b)`. The stationary distribution solves `πQ = 0, Σπ = 1` (`π_0 = 1`, the other
//! balance equations, then normalised) directly with faer's supernodal sparse LU with
//! partial pivoting: the matrix is assembled straight into compressed columns, and the
//! columns are eliminated in mixed-radix order with the class of fewest counts varying
//! fastest, which keeps the factors inside a band as wide as that class's range (for the
//! default two classes the short side of the triangle of states); faer does the symbolic
//! analysis for that order (no fill-reducing reordering pass). The pattern depends only on
//! the class sizes and the KV pages, not on λ or B, so each thread keeps the symbolic
//! analysis (and factor storage) of its last four patterns and refactorises numerically
//! only; results do not depend on whether it was kept. When the band of the state order
//! is too wide (~states × band² work), the sparse BiCGSTAB solver of `sprs` is used
//! instead (Jacobi-scaled; power iteration on the uniformised chain as a fallback); every
//! answer is checked by its balance residual. Read-outs as the chain: blocking by PASTA,
//! mean TTFT `L_q/λ_eff + s_ft`, quantiles from the Erlang(n + 1 − B, B/s(B)) wait
//! mixture by bisection. The mixture
//! weights are merged per n, and each CDF evaluation gets every order's Erlang CDF from one
//! pass over the Poisson masses (`P(k, x) = Σ_{j ≥ k} p_j`) instead of one incomplete-gamma
//! series per state.
//!
//! # Known defects (kept on purpose)
//! Coarse classes (within-class variance lost), processor sharing instead of FIFO slots,
//! joiner prefill stalls ignored, exponential service; the state space grows like
//! `K^M`, so `M` is kept small.

use super::lengths::{atoms, size_classes};
use super::reference_mmc::{prefill_tokens, RefParams, LEVELS};
use super::special::invert_monotone;
use super::{AnalyticError, Predicted, Prediction};
use crate::config::SimConfig;
use sprs::linalg::bicgstab::BiCGSTAB;
use sprs::{CsVec, TriMat};
use statrs::function::factorial::ln_factorial;

/// KV page size of the reference CTMC [tokens].
pub const PAGE_TOKENS: f64 = 16.0;

/// The reference multi-class CTMC.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceCtmc {
    params: RefParams,
    /// (probability, pages, service at each batch size 0..=B) per class.
    classes: Vec<(f64, u32)>,
    /// Class-count vectors, `classes.len()` per state, in mixed-radix order.
    states: Vec<u32>,
    pi: Vec<f64>,
    /// Per state: probability an arrival is accepted.
    accept: Vec<f64>,
}

impl ReferenceCtmc {
    /// The default 2-class model.
    ///
    /// # Errors
    /// As [`ReferenceCtmc::with_classes`].
    pub fn from_config(cfg: &SimConfig) -> Result<ReferenceCtmc, AnalyticError> {
        Self::with_classes(cfg, 2)
    }

    /// The model with `m` size classes (1–4).
    ///
    /// # Errors
    /// [`AnalyticError::Invalid`] for `m` outside 1–4, a bad rate, or a KV cache smaller than
    /// the smallest class; [`AnalyticError::NoConvergence`] if the solver fails.
    pub fn with_classes(cfg: &SimConfig, m: usize) -> Result<ReferenceCtmc, AnalyticError> {
        if !(1..=4).contains(&m) {
            return Err(AnalyticError::Invalid {
                name: "classes",
                value: m as f64,
                why: "must be 1 to 4",
            });
        }
        let params = RefParams::from_config(cfg)?;
        let raw = size_classes(&atoms(&cfg.workload.lengths, 24), m);
        // Fewer lengths than classes (fixed lengths: one) give fewer classes.
        let m = raw.len();
        let k_pages = libm::floor(params.k_tokens / PAGE_TOKENS) as u32;
        let b = params.b;
        let mut classes = Vec::new();
        let mut service = Vec::new();
        for &(w, p, o) in &raw {
            let pages = libm::ceil((p + o) / PAGE_TOKENS) as u32;
            classes.push((w, pages));
            let s: Vec<f64> = (0..=b)
                .map(|bb| {
                    prefill_tokens(&params.cost, bb.max(1), p)
                        + o * params.cost.decode_step(bb.max(1), 0)
                })
                .collect();
            service.push(s);
        }
        let min_pages = classes.iter().map(|c| c.1).min().unwrap_or(1);
        if min_pages > k_pages {
            return Err(AnalyticError::Invalid {
                name: "kv_tokens",
                value: params.k_tokens,
                why: "smaller than the smallest size class; raise the KV capacity",
            });
        }
        let maxes: Vec<u32> = classes.iter().map(|c| k_pages / c.1).collect();
        // Too big for either solver? Decided before enumerating (which can take longer than
        // a supported solve): in the elimination order the fastest digit's range is a lower
        // bound on the band (the first state and its arrival of the next class are that far
        // apart), so this rejects only what the band test below would send to the iterative
        // solver, and that solver's state limit then rejects.
        let pages: Vec<u32> = classes.iter().map(|c| c.1).collect();
        let ns_count = count_states(&pages, k_pages, ITERATIVE_MAX_STATES.saturating_mul(64));
        let band_lo = maxes.iter().min().map_or(1, |&x| x as usize + 1);
        if m > 1
            && ns_count > ITERATIVE_MAX_STATES
            && (ns_count as f64) * (band_lo as f64).powi(2) > BAND_FLOPS
        {
            return Err(too_many_states(ns_count, params.k_tokens));
        }
        // Enumerate feasible count vectors (mixed radix).
        let mut radix = vec![1usize; m];
        for i in 1..m {
            radix[i] = radix[i - 1] * (maxes[i - 1] as usize + 1);
        }
        let size = radix[m - 1] * (maxes[m - 1] as usize + 1);
        let mut index = vec![usize::MAX; size];
        // Count vectors, `m` per state, in increasing mixed-radix code.
        let mut states: Vec<u32> = Vec::new();
        let mut x = vec![0u32; m];
        loop {
            let used: u32 = x.iter().zip(&classes).map(|(xi, c)| xi * c.1).sum();
            if used <= k_pages {
                let code: usize = x.iter().zip(&radix).map(|(xi, r)| *xi as usize * r).sum();
                index[code] = states.len() / m;
                states.extend_from_slice(&x);
            }
            if !next_digits(&mut x, &maxes, 0..m) {
                break;
            }
        }
        let ns = states.len() / m;
        let lambda = params.lambda;
        let mut diag = vec![0.0f64; ns];
        let mut accept = vec![0.0f64; ns];
        // Generator transposed: A[j][i] = q(i → j). Edges grouped by source state, targets
        // in increasing order (departures of the classes with the largest radix first, then
        // arrivals); the exit rate sums arrival and departure of each class in class order.
        let mut out_edges: Vec<(usize, usize, f64)> = Vec::with_capacity(2 * m * ns);
        for (si, xs) in states.chunks_exact(m).enumerate() {
            let used: u32 = xs.iter().zip(&classes).map(|(xi, c)| xi * c.1).sum();
            let n: u32 = xs.iter().sum();
            let code: usize = xs.iter().zip(&radix).map(|(xi, r)| *xi as usize * r).sum();
            let mut up = [0.0f64; 4];
            let mut down = [0.0f64; 4];
            for (k, c) in classes.iter().enumerate() {
                if used + c.1 <= k_pages {
                    up[k] = lambda * c.0;
                    accept[si] += c.0;
                    diag[si] += up[k];
                }
                if xs[k] > 0 {
                    let bb = n.min(b);
                    down[k] = xs[k] as f64 / n as f64 * bb as f64 / service[k][bb as usize];
                    diag[si] += down[k];
                }
            }
            for k in (0..m).rev() {
                if xs[k] > 0 {
                    out_edges.push((si, index[code - radix[k]], down[k]));
                }
            }
            for k in 0..m {
                if used + classes[k].1 <= k_pages {
                    out_edges.push((si, index[code + radix[k]], up[k]));
                }
            }
        }
        // Direct sparse LU first, eliminating the states in mixed-radix order with the
        // classes of fewest counts varying fastest: every transition then stays within the
        // product of the faster classes' ranges, and the factors' fill within that band (for
        // two classes, the short side of the triangle of states). Iterative solvers only
        // when the band in that elimination order is too wide. (The band used to be
        // measured in the enumeration order, where the class with the most counts can vary
        // fastest: a short/long mixture of 2,676 states then went to BiCGSTAB and took 4–6 s
        // instead of milliseconds.)
        let mut digits: Vec<usize> = (0..m).collect();
        digits.sort_by_key(|&k| maxes[k]);
        let mut order: Vec<usize> = Vec::with_capacity(ns);
        x.iter_mut().for_each(|xi| *xi = 0);
        loop {
            let code: usize = x.iter().zip(&radix).map(|(xi, r)| *xi as usize * r).sum();
            if index[code] != usize::MAX {
                order.push(index[code]);
            }
            if !next_digits(&mut x, &maxes, digits.iter().copied()) {
                break;
            }
        }
        let bw = states_bandwidth(&out_edges, &order);
        let direct = if (ns as f64) * (bw as f64).powi(2) <= BAND_FLOPS {
            // The pattern is fixed by the class sizes and the KV pages.
            let mut pattern: Vec<u32> = classes.iter().map(|c| c.1).collect();
            pattern.push(k_pages);
            direct_stationary(ns, &out_edges, &diag, &order, pattern)
        } else {
            None
        };
        if let Some(mut pi) = direct {
            let total: f64 = pi.iter().sum();
            pi.iter_mut().for_each(|p| *p /= total);
            let residual = balance_residual(&pi, &out_edges, &diag);
            if residual.is_finite() && residual < 1e-8 && pi.iter().all(|p| *p > -1e-12) {
                pi.iter_mut().for_each(|p| *p = p.max(0.0));
                return Ok(ReferenceCtmc {
                    params,
                    classes,
                    states,
                    pi,
                    accept,
                });
            }
        } else if ns > ITERATIVE_MAX_STATES {
            return Err(too_many_states(ns, params.k_tokens));
        }
        // Jacobi-scaled balance equations, the first replaced by Σπ = 1.
        let mut tri = TriMat::new((ns, ns));
        let scale: Vec<f64> = diag
            .iter()
            .map(|d| if *d > 0.0 { 1.0 / d } else { 1.0 })
            .collect();
        for &(i, j, r) in &out_edges {
            if j != 0 {
                tri.add_triplet(j, i, r * scale[j]);
            }
        }
        for (i, d) in diag.iter().enumerate() {
            if i != 0 {
                tri.add_triplet(i, i, -d * scale[i]);
            }
        }
        for i in 0..ns {
            tri.add_triplet(0, i, 1.0);
        }
        let a = tri.to_csr::<usize>();
        let all: Vec<usize> = (0..ns).collect();
        let mut rhs = vec![0.0; ns];
        rhs[0] = 1.0;
        let bvec = CsVec::new(ns, all.clone(), rhs);
        let x0 = CsVec::new(ns, all, vec![1.0 / ns as f64; ns]);
        let solved = BiCGSTAB::<'_, f64, _, _>::solve(a.view(), x0.view(), bvec.view(), 1e-10, 300);
        let mut pi = match solved {
            Ok(s) => s.x().to_dense().to_vec(),
            Err(s) => s.x().to_dense().to_vec(),
        };
        // Verify the balance residual; fall back to power iteration if needed.
        let residual = balance_residual(&pi, &out_edges, &diag);
        if residual.is_nan() || residual >= 1e-8 || pi.iter().any(|p| *p < -1e-9) {
            pi = power_iteration(ns, &out_edges, &diag);
            let r = balance_residual(&pi, &out_edges, &diag);
            if r.is_nan() || r >= 1e-7 {
                return Err(AnalyticError::NoConvergence {
                    what: "multi-class CTMC stationary solve",
                    residual: r,
                });
            }
        }
        pi.iter_mut().for_each(|p| *p = p.max(0.0));
        let total: f64 = pi.iter().sum();
        pi.iter_mut().for_each(|p| *p /= total);
        Ok(ReferenceCtmc {
            params,
            classes,
            states,
            pi,
            accept,
        })
    }

    /// Number of states.
    pub fn state_count(&self) -> usize {
        self.states.len() / self.classes.len()
    }

    /// The prediction.
    pub fn prediction(&self, cfg: &SimConfig) -> Prediction {
        let p = &self.params;
        let b = p.b;
        let mut pb = 0.0;
        let mut lq = 0.0;
        let mut busy = 0.0;
        let mut norm = 0.0;
        let mut n_top = 0u32;
        // The wait of an accepted arrival depends on the state only through n: weights per
        // Erlang order k = n + 1 − B (index k − 1), and `w0` for n < B (no wait).
        let mut w0 = 0.0;
        let mut wk: Vec<f64> = Vec::new();
        let m = self.classes.len();
        for ((x, pi), acc) in self.states.chunks_exact(m).zip(&self.pi).zip(&self.accept) {
            let n: u32 = x.iter().sum();
            pb += pi * (1.0 - acc);
            lq += pi * n.saturating_sub(b) as f64;
            busy += pi * n.min(b) as f64;
            let w = pi * acc;
            norm += w;
            n_top = n_top.max(n);
            if n < b {
                w0 += w;
            } else {
                let k = (n + 1 - b) as usize;
                if wk.len() < k {
                    wk.resize(k, 0.0);
                }
                wk[k - 1] += w;
            }
        }
        let lam_eff = p.lambda * (1.0 - pb);
        let c = b.min(p.n_max().max(1));
        let sft = p.first_token(c);
        let mu_b = b as f64 / p.service(b);
        let mix = WaitMixture::new(w0, wk, mu_b);
        let mut masses = Vec::new();
        let mut wait_cdf = |t: f64| -> f64 { mix.cdf(t, &mut masses) / norm };
        let scale = (n_top as f64 + 1.0) / mu_b;
        let tpot = p.decode(c);
        let slo = &cfg.metrics;
        let meets = if tpot <= slo.slo_tpot_s && slo.slo_ttft_s >= sft {
            wait_cdf(slo.slo_ttft_s - sft)
        } else {
            0.0
        };
        let mut quant = |q: f64| sft + invert_monotone(&mut wait_cdf, q, 0.0, scale);
        let _ = &self.classes;
        Prediction::Stable(Predicted {
            ttft_mean_s: lq / lam_eff + sft,
            ttft_p50_s: quant(LEVELS[0]),
            ttft_p95_s: quant(LEVELS[1]),
            ttft_p99_s: quant(LEVELS[2]),
            tpot_mean_s: tpot,
            goodput_rps: lam_eff,
            blocking: pb,
            utilisation: busy / b as f64,
            slo_attainment: (1.0 - pb) * meets,
        })
    }
}

/// The wait law of an accepted arrival: no wait with weight `w0`, Erlang(k, `rate`) with
/// weight `wk[k − 1]`; weights unnormalised.
struct WaitMixture {
    w0: f64,
    wk: Vec<f64>,
    rate: f64,
    /// `ln j!` for `j < wk.len()`.
    ln_fact: Vec<f64>,
}

impl WaitMixture {
    fn new(w0: f64, wk: Vec<f64>, rate: f64) -> WaitMixture {
        let ln_fact = (0..wk.len()).map(|j| ln_factorial(j as u64)).collect();
        WaitMixture {
            w0,
            wk,
            rate,
            ln_fact,
        }
    }

    /// `w0 + Σ_k wk · P(k, rate·t)` (P the regularized lower incomplete gamma, the Erlang
    /// CDF). All orders at once from the Poisson(x = rate·t) masses `p_j`, since
    /// `P(k, x) = Σ_{j ≥ k} p_j`: `1 − Σ_{j < k} p_j` for `k ≤ x`, and for `k > x` the upward
    /// tail `P(k + 1, x) + p_k`, started at the highest order by summing `p_j` upwards until
    /// the terms vanish. Each side sums positive terms, so this agrees with calling
    /// `erlang_cdf` per order to round-off, at one `exp` and one `log` per evaluation
    /// instead of an incomplete-gamma series per order. `p` is scratch space.
    fn cdf(&self, t: f64, p: &mut Vec<f64>) -> f64 {
        let kmax = self.wk.len();
        let x = self.rate * t;
        if kmax == 0 || x <= 0.0 {
            return self.w0;
        }
        if !x.is_finite() {
            return self.w0 + self.wk.iter().sum::<f64>();
        }
        // Poisson masses p_0..p_{kmax−1} by the ratio recurrence from j* = min(⌊x⌋, kmax − 1),
        // the largest of them (underflow far from j* only drops negligible terms).
        let top = libm::floor(x).min((kmax - 1) as f64) as usize;
        p.clear();
        p.resize(kmax, 0.0);
        p[top] = libm::exp(top as f64 * libm::log(x) - x - self.ln_fact[top]);
        for j in (0..top).rev() {
            p[j] = p[j + 1] * (j + 1) as f64 / x;
        }
        for j in top + 1..kmax {
            p[j] = p[j - 1] * x / j as f64;
        }
        let mut acc = self.w0;
        // Orders k ≤ x.
        let lower = (libm::floor(x).min(kmax as f64)) as usize;
        let mut below = 0.0;
        for k in 1..=lower {
            below += p[k - 1];
            acc += self.wk[k - 1] * (1.0 - below);
        }
        // Orders k > x, downward from kmax; P(kmax, x) = Σ_{j ≥ kmax} p_j, whose terms
        // shrink geometrically (ratio x/(j + 1) < 1).
        if lower < kmax {
            let mut term = p[kmax - 1];
            let mut tail = 0.0;
            for j in kmax..kmax + 10_000 {
                term *= x / j as f64;
                tail += term;
                if term <= tail * 1e-17 {
                    break;
                }
            }
            acc += self.wk[kmax - 1] * tail;
            for k in (lower + 1..kmax).rev() {
                tail += p[k];
                acc += self.wk[k - 1] * tail;
            }
        }
        acc
    }
}

/// Largest band (work ~ states × band²) solved directly [flops].
const BAND_FLOPS: f64 = 4e7;
/// Largest state space handed to the iterative solver when the band is too wide.
const ITERATIVE_MAX_STATES: usize = 20_000;

/// Advances the count vector `x` (digit `k` from 0 to `maxes[k]`) to the next in mixed-radix
/// order, `digits` listed from the fastest; `false` after the last.
fn next_digits(x: &mut [u32], maxes: &[u32], digits: impl IntoIterator<Item = usize>) -> bool {
    for k in digits {
        x[k] += 1;
        if x[k] <= maxes[k] {
            return true;
        }
        x[k] = 0;
    }
    false
}

/// The error for a state space above the iterative solver's limit.
fn too_many_states(ns: usize, k_tokens: f64) -> AnalyticError {
    AnalyticError::Unsupported {
        model: "reference_ctmc",
        what: format!(
            "{ns} states (KV {k_tokens} tokens in 16-token pages): above the {ITERATIVE_MAX_STATES}-state solver limit"
        ),
    }
}

/// Class-count vectors with `Σ x_k pages_k ≤ k_pages`, counted without listing them
/// (the last class in closed form); stops counting past `cap` (returns a number > cap).
fn count_states(pages: &[u32], k_pages: u32, cap: usize) -> usize {
    fn go(pages: &[u32], left: u32, cap: usize) -> usize {
        match pages {
            [] => 1,
            [last] => (left / last) as usize + 1,
            [first, rest @ ..] => {
                let mut n = 0usize;
                let mut used = 0u32;
                while used <= left {
                    n += go(rest, left - used, cap);
                    if n > cap {
                        break;
                    }
                    used += first;
                }
                n
            }
        }
    }
    go(pages, k_pages, cap)
}

/// Half-bandwidth of the generator with the states taken in `order` (the elimination
/// order).
fn states_bandwidth(edges: &[(usize, usize, f64)], order: &[usize]) -> usize {
    let mut pos = vec![0usize; order.len()];
    for (p, &s) in order.iter().enumerate() {
        pos[s] = p;
    }
    edges
        .iter()
        .map(|&(i, j, _)| pos[i].abs_diff(pos[j]))
        .max()
        .unwrap_or(0)
}

/// Stationary vector from `π_0 = 1` and the balance equations of states 1.., solved by
/// faer's supernodal sparse LU (partial pivoting) with the unknowns eliminated in the state
/// `order` given (state 0, first in it, is not an unknown); unnormalised. The matrix and its
/// transpose are assembled directly in compressed columns from `edges` (grouped by source,
/// targets increasing), and the symbolic analysis (column elimination tree, column counts,
/// supernodes) is faer's for that column order. `None` if the factorisation fails (a
/// singular system).
fn direct_stationary(
    ns: usize,
    edges: &[(usize, usize, f64)],
    diag: &[f64],
    order: &[usize],
    pattern: Vec<u32>,
) -> Option<Vec<f64>> {
    use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
    use faer::perm::PermRef;
    use faer::sparse::linalg::lu::supernodal;
    use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
    use faer::{Conj, MatMut, Par};
    if ns == 1 {
        return Some(vec![1.0]);
    }
    // Unknowns x = π_1..π_{ns−1}; equation for state j ≥ 1: Σ_i π_i q(i→j) − π_j d_j = 0.
    // Column i − 1 holds state i's outflows (rows j − 1) and −d_i on the diagonal.
    let n = ns - 1;
    let mut col_ptr = Vec::with_capacity(ns);
    let mut row_idx = Vec::with_capacity(edges.len() + n);
    let mut val = Vec::with_capacity(edges.len() + n);
    let mut rhs = vec![0.0f64; n];
    let mut e = 0;
    while e < edges.len() && edges[e].0 == 0 {
        let (_, j, r) = edges[e];
        if j != 0 {
            rhs[j - 1] -= r;
        }
        e += 1;
    }
    col_ptr.push(0usize);
    for (i, d) in diag.iter().enumerate().skip(1) {
        let mut diagonal = false;
        while e < edges.len() && edges[e].0 == i {
            let (_, j, r) = edges[e];
            if j > i && !diagonal {
                row_idx.push(i - 1);
                val.push(-d);
                diagonal = true;
            }
            if j != 0 {
                row_idx.push(j - 1);
                val.push(r);
            }
            e += 1;
        }
        if !diagonal {
            row_idx.push(i - 1);
            val.push(-d);
        }
        col_ptr.push(row_idx.len());
    }
    let a = SparseColMatRef::new(
        SymbolicSparseColMatRef::new_checked(n, n, &col_ptr, None, &row_idx),
        &val,
    );
    // The transpose (rows of A as columns), by counting.
    let mut t_ptr = vec![0usize; n + 1];
    for &r in &row_idx {
        t_ptr[r + 1] += 1;
    }
    for r in 0..n {
        t_ptr[r + 1] += t_ptr[r];
    }
    let mut next = t_ptr.clone();
    let mut t_idx = vec![0usize; row_idx.len()];
    let mut t_val = vec![0.0f64; row_idx.len()];
    for c in 0..n {
        for p in col_ptr[c]..col_ptr[c + 1] {
            let r = row_idx[p];
            t_idx[next[r]] = c;
            t_val[next[r]] = val[p];
            next[r] += 1;
        }
    }
    let at = SparseColMatRef::new(
        SymbolicSparseColMatRef::new_checked(n, n, &t_ptr, None, &t_idx),
        &t_val,
    );
    if order.first() != Some(&0) {
        return None;
    }
    let col_fwd: Vec<usize> = order[1..].iter().map(|s| s - 1).collect();
    let mut col_inv = vec![0usize; n];
    for (p, &c) in col_fwd.iter().enumerate() {
        col_inv[c] = p;
    }
    // The symbolic analysis depends only on the pattern (the state space, not λ or B):
    // reused from this thread's last few patterns, together with the factor storage.
    let cached = ANALYSES.with_borrow_mut(|c| {
        c.iter()
            .position(|f| f.pattern == pattern && f.nnz == row_idx.len())
            .map(|p| c.remove(p))
    });
    let mut f = match cached {
        Some(f) => f,
        None => analyse(a, at, col_fwd, col_inv)?,
    };
    let col_perm = PermRef::new_checked(&f.col_fwd, &f.col_inv, n);
    let mut row_fwd = vec![0usize; n];
    let mut row_inv = vec![0usize; n];
    let mut mem = MemBuffer::new(StackReq::any_of(&[
        supernodal::factorize_supernodal_numeric_lu_scratch::<usize, f64>(
            &f.symbolic,
            Default::default(),
        ),
        supernodal::solve_in_place_scratch::<usize, f64>(n, 1, Par::Seq),
    ]));
    let stack = MemStack::new(&mut mem);
    supernodal::factorize_supernodal_numeric_lu(
        &mut row_fwd,
        &mut row_inv,
        &mut f.lu,
        a,
        at,
        col_perm,
        &f.symbolic,
        Par::Seq,
        stack,
        Default::default(),
    )
    .ok()?;
    f.lu.solve_in_place_with_conj(
        PermRef::new_checked(&row_fwd, &row_inv, n),
        col_perm,
        Conj::No,
        MatMut::from_column_major_slice_mut(&mut rhs, n, 1),
        Par::Seq,
        stack,
    );
    f.pattern = pattern;
    f.nnz = row_idx.len();
    ANALYSES.with_borrow_mut(|c| {
        c.insert(0, f);
        c.truncate(ANALYSES_KEPT);
    });
    let mut pi = Vec::with_capacity(ns);
    pi.push(1.0);
    pi.extend_from_slice(&rhs);
    Some(pi)
}

/// Patterns whose symbolic analysis is kept per thread (the reference grid has four).
const ANALYSES_KEPT: usize = 4;

/// faer's symbolic supernodal LU analysis of one pattern (in the elimination order), with
/// the factor storage of its last numeric factorisation.
struct Analysis {
    /// Class pages and KV pages, which fix the state space and so the pattern.
    pattern: Vec<u32>,
    nnz: usize,
    col_fwd: Vec<usize>,
    col_inv: Vec<usize>,
    symbolic: faer::sparse::linalg::lu::supernodal::SymbolicSupernodalLu<usize>,
    lu: faer::sparse::linalg::lu::supernodal::SupernodalLu<usize, f64>,
}

std::thread_local! {
    static ANALYSES: core::cell::RefCell<Vec<Analysis>> =
        const { core::cell::RefCell::new(Vec::new()) };
}

/// The symbolic analysis (column elimination tree, column counts, supernodes) of `a` for
/// the column order `col_fwd` (`col_inv` its inverse); `at` is `a` transposed. The pattern
/// fields are left empty for the caller.
fn analyse(
    a: faer::sparse::SparseColMatRef<'_, usize, f64>,
    at: faer::sparse::SparseColMatRef<'_, usize, f64>,
    col_fwd: Vec<usize>,
    col_inv: Vec<usize>,
) -> Option<Analysis> {
    use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
    use faer::perm::PermRef;
    use faer::sparse::linalg::lu::supernodal::{self, SupernodalLu};
    use faer::sparse::linalg::{qr, SymbolicSupernodalParams};
    let n = a.ncols();
    let col_perm = PermRef::new_checked(&col_fwd, &col_inv, n);
    let mut etree = vec![0usize; n];
    let mut post = vec![0usize; n];
    let mut col_counts = vec![0usize; n];
    let mut min_col = vec![0usize; n];
    let mut mem = MemBuffer::new(StackReq::any_of(&[
        qr::col_etree_scratch::<usize>(n, n),
        qr::postorder_scratch::<usize>(n),
        qr::column_counts_aat_scratch::<usize>(n, n),
        supernodal::factorize_supernodal_symbolic_lu_scratch::<usize>(n, n),
    ]));
    let stack = MemStack::new(&mut mem);
    let etree = qr::col_etree(a.symbolic(), Some(col_perm), &mut etree, stack);
    qr::postorder(&mut post, etree, stack);
    qr::column_counts_ata(
        &mut col_counts,
        &mut min_col,
        at.symbolic(),
        Some(col_perm),
        etree,
        &post,
        stack,
    );
    let symbolic = supernodal::factorize_supernodal_symbolic_lu(
        a.symbolic(),
        Some(col_perm),
        &min_col,
        etree,
        &col_counts,
        stack,
        SymbolicSupernodalParams::default(),
    )
    .ok()?;
    Some(Analysis {
        pattern: Vec::new(),
        nnz: 0,
        col_fwd,
        col_inv,
        symbolic,
        lu: SupernodalLu::new(),
    })
}

/// Max |inflow − outflow| relative to total flow.
fn balance_residual(pi: &[f64], edges: &[(usize, usize, f64)], diag: &[f64]) -> f64 {
    let mut net: Vec<f64> = pi.iter().zip(diag).map(|(p, d)| -p * d).collect();
    for &(i, j, r) in edges {
        net[j] += pi[i] * r;
    }
    let flow: f64 = pi
        .iter()
        .zip(diag)
        .map(|(p, d)| (p * d).abs())
        .sum::<f64>()
        .max(1e-300);
    let sum: f64 = pi.iter().sum();
    net.iter().map(|x| x.abs()).sum::<f64>() / flow + (sum - 1.0).abs()
}

/// Stationary vector of the uniformised chain by power iteration (sparse matrix–vector
/// products with `sprs`).
fn power_iteration(ns: usize, edges: &[(usize, usize, f64)], diag: &[f64]) -> Vec<f64> {
    let lam = diag.iter().cloned().fold(0.0, f64::max) * 1.05 + 1e-12;
    let mut tri = TriMat::new((ns, ns));
    for &(i, j, r) in edges {
        tri.add_triplet(j, i, r / lam);
    }
    for (i, d) in diag.iter().enumerate() {
        tri.add_triplet(i, i, 1.0 - d / lam);
    }
    let pt = tri.to_csr::<usize>();
    let mut v = vec![1.0 / ns as f64; ns];
    for _ in 0..50_000 {
        let mut next = vec![0.0; ns];
        sprs::prod::mul_acc_mat_vec_csr(pt.view(), &v[..], &mut next[..]);
        let diff: f64 = next.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
        v = next;
        if diff < 1e-13 {
            break;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::special::erlang_cdf;
    use super::*;

    #[test]
    fn fixed_lengths_make_one_size_class() {
        let mut cfg = SimConfig::reference(1.0, 8, 8192);
        cfg.workload.lengths = crate::workload::LengthDist::Fixed {
            prompt: 128,
            output: 64,
        };
        assert!(ReferenceCtmc::from_config(&cfg).is_ok());
    }

    #[test]
    fn states_are_counted_as_enumerated() {
        for (pages, k) in [
            (vec![6u32, 34], 1024u32),
            (vec![3, 5, 7], 60),
            (vec![20], 100),
            (vec![4, 9, 13, 40], 200),
        ] {
            let mut brute = 0;
            let mut x = vec![0u32; pages.len()];
            let maxes: Vec<u32> = pages.iter().map(|p| k / p).collect();
            loop {
                let used: u32 = x.iter().zip(&pages).map(|(a, b)| a * b).sum();
                brute += usize::from(used <= k);
                if !next_digits(&mut x, &maxes, 0..pages.len()) {
                    break;
                }
            }
            assert_eq!(count_states(&pages, k, usize::MAX), brute, "{pages:?} {k}");
            assert!(count_states(&pages, k, 10) > 10 || brute <= 10);
        }
    }

    #[test]
    fn a_huge_state_space_is_refused_before_it_is_listed() {
        // 457,067 KV tokens (an H100's at 90 %): ≈ 550 k states.
        let cfg = SimConfig::reference(1.0, 8, 457_067);
        let e = ReferenceCtmc::from_config(&cfg).unwrap_err().to_string();
        assert!(e.contains("above the 20000-state solver limit"), "{e}");
    }

    #[test]
    fn ctmc_solves_and_orders() {
        for (lam, b, k) in [(0.5, 1, 2048), (3.0, 8, 16384), (2.0, 4, 4096)] {
            let cfg = SimConfig::reference(lam, b, k);
            let c = ReferenceCtmc::from_config(&cfg).unwrap();
            assert!(c.state_count() > 1);
            let m = *c.prediction(&cfg).metrics().unwrap();
            assert!(m.blocking >= 0.0 && m.blocking < 1.0, "{m:?}");
            assert!(m.ttft_p50_s <= m.ttft_p99_s && m.ttft_mean_s.is_finite());
        }
    }

    #[test]
    fn kept_analysis_gives_the_same_answer() {
        // Cold, then after another λ/B on the same state space, then after other state
        // spaces: bit-identical.
        let cfg = SimConfig::reference(2.0, 4, 8192);
        let first = ReferenceCtmc::from_config(&cfg).unwrap();
        let _ = ReferenceCtmc::from_config(&SimConfig::reference(0.5, 8, 8192)).unwrap();
        let again = ReferenceCtmc::from_config(&cfg).unwrap();
        assert_eq!(first, again);
        for k in [2048, 4096, 16384, 12288, 6144] {
            let _ = ReferenceCtmc::from_config(&SimConfig::reference(1.0, 1, k)).unwrap();
        }
        assert_eq!(first, ReferenceCtmc::from_config(&cfg).unwrap());
    }

    #[test]
    fn wait_mixture_matches_per_order_erlang_cdfs() {
        let wk: Vec<f64> = (1..=60).map(|k| 1.0 / k as f64).collect();
        for w0 in [0.0, 0.3] {
            let mix = WaitMixture::new(w0, wk.clone(), 2.5);
            for t in [0.0, 1e-3, 0.4, 3.0, 11.7, 23.99, 24.0, 40.0, 200.0, 1e4] {
                let per_order = w0
                    + wk.iter()
                        .enumerate()
                        .map(|(i, w)| w * erlang_cdf(i as u32 + 1, 2.5, t))
                        .sum::<f64>();
                let got = mix.cdf(t, &mut Vec::new());
                assert!(
                    (got - per_order).abs() <= 1e-12 * per_order.abs(),
                    "t = {t}: {got} vs {per_order}"
                );
            }
        }
    }

    #[test]
    fn one_class_matches_a_birth_death_chain() {
        // One class: a birth–death chain on n with the PS rates; check blocking = p_top.
        let cfg = SimConfig::reference(2.0, 1, 2048);
        let c = ReferenceCtmc::with_classes(&cfg, 1).unwrap();
        let top = c.pi.last().copied().unwrap();
        let m = c.prediction(&cfg);
        assert!((m.metrics().unwrap().blocking - top).abs() < 1e-9);
    }
}
