//! KV occupancy in reserve mode: given n in system, the reserved tokens are the sum of n
//! i.i.d. sizes drawn from the in-system composition (the arrival sizes weighted by their
//! hold time), truncated at K, on a grid of at most `GRID + 1` units. From it, per n: the
//! acceptance probability of an arrival, the accepted requests' mean prompt and output,
//! and the two moments of the summed output of the requests in system.

use super::service::{Rates, Service};
use crate::analytic::lengths::Atom;
use crate::analytic::AnalyticError;

/// Grid resolution of the KV occupancy [units of K].
const GRID: f64 = 128.0;

/// Per-state quantities.
#[derive(Clone, Debug, Default)]
pub(super) struct StateInfo {
    /// Acceptance probability of an arrival finding n.
    pub accept: f64,
    /// Mean prompt / output of accepted arrivals finding n.
    pub acc_prompt: f64,
    pub acc_output: f64,
    pub acc_output2: f64,
    /// Weight of each prompt bin among accepted arrivals finding n (sums to `accept`);
    /// empty for n ≥ B, whose arrivals queue.
    pub prompt_bins: Vec<f64>,
    /// Mean output length of the requests in system given n (reserve mode; KV-limited
    /// states hold smaller requests).
    pub sys_output: f64,
    /// Variance of the summed output of the n requests in system, relative to n times the
    /// unconditional per-request variance (below 1 where the KV limit truncates the sum).
    pub sys_var_ratio: f64,
    /// Prefill iteration of the accepted mean prompt [s]: joining the running set it finds
    /// (n + 1 for n < B) and at the full batch (queued arrivals).
    pub pf_start: f64,
    pub pf_queued: f64,
}

/// `libm::ceil` for x ≥ 0, without the call where x fits an integer exactly.
pub(super) fn ceil_nonneg(x: f64) -> f64 {
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

/// The KV grid and the arrival-size tables over the free space x [units]: prefix sums of
/// the acceptance, `E[P·1]`, `E[O·1]`, `E[O²·1]` and the weight per prompt bin of the
/// arrivals whose size is at most x.
#[derive(Clone, Debug)]
pub(super) struct KvGrid {
    /// Capacity in grid units.
    pub k_u: usize,
    /// Each atom's reserved size (prompt + output, rounded up to blocks) [units].
    pub size_u: Vec<usize>,
    f_acc: Vec<f64>,
    f_p: Vec<f64>,
    f_o: Vec<f64>,
    f_o2: Vec<f64>,
    f_bin: Vec<Vec<f64>>,
}

impl KvGrid {
    /// The grid for a capacity of `k_tok` tokens in blocks of `block` tokens.
    ///
    /// # Errors
    /// [`AnalyticError::Invalid`] when no request fits the capacity.
    pub fn new(
        atoms: &[Atom],
        k_tok: f64,
        block: f64,
        n_pbins: usize,
    ) -> Result<KvGrid, AnalyticError> {
        let unit = (k_tok / GRID).max(1.0);
        let k_u = libm::floor(k_tok / unit) as usize;
        let size_tok: Vec<f64> = atoms
            .iter()
            .map(|a| ceil_nonneg((a.prompt + a.output) / block) * block)
            .collect();
        let size_u: Vec<usize> = size_tok
            .iter()
            .map(|&t| round_nonneg(t / unit) as usize)
            .collect();
        let mut f_acc = vec![0.0; k_u + 1];
        let mut f_p = vec![0.0; k_u + 1];
        let mut f_o = vec![0.0; k_u + 1];
        let mut f_o2 = vec![0.0; k_u + 1];
        let mut f_bin = vec![vec![0.0; k_u + 1]; n_pbins];
        for ((a, &s), &tok) in atoms.iter().zip(&size_u).zip(&size_tok) {
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
        Ok(KvGrid {
            k_u,
            size_u,
            f_acc,
            f_p,
            f_o,
            f_o2,
            f_bin,
        })
    }
}

/// The hold-time-weighted size composition of the requests in system: mass `g[s]` per
/// size and, as prefix sums, the output sums `G_u[s] = Σ h·O`, `G_uu[s] = Σ h·O²` and the
/// self-convolution `G_u ⊛ G_u` (all over the total weight).
struct Composition {
    /// Sizes with non-zero mass, in increasing order, with their mass.
    support: Vec<(usize, f64)>,
    g_o: Vec<f64>,
    g_o2: Vec<f64>,
    gg: Vec<f64>,
    /// Variance of the output of one request in system [tokens²].
    g_var_o: f64,
}

impl Composition {
    /// Weights `h = w·(W̄ + prefill + O·τ)`: the hold time of an atom that waits `mean_wait`,
    /// prefills in `pf1` and decodes at `tau` per token.
    fn new(atoms: &[Atom], grid: &KvGrid, pf1: &[f64], mean_wait: f64, tau: f64) -> Composition {
        let k_u = grid.k_u;
        let mut g = vec![0.0; k_u + 1];
        let mut g_o = vec![0.0; k_u + 1];
        let mut g_o2 = vec![0.0; k_u + 1];
        let mut gsum = 0.0;
        for ((a, &s), pf) in atoms.iter().zip(&grid.size_u).zip(pf1) {
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
        // The summed output of the n requests in system, by symmetry of the n i.i.d.
        // sizes: Σ_j conv_o_n[j] = n·Σ_{j≤K} (G^{*(n−1)} ⊛ G_u)[j] and
        // Σ_j conv_o2_n[j] = n·Σ (G^{*(n−1)} ⊛ G_uu) + n(n−1)·Σ (G^{*(n−2)} ⊛ G_u ⊛ G_u),
        // each sum a dot product with the prefix sums below: only the size distribution
        // itself is convolved per n.
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
        Composition {
            support,
            g_o,
            g_o2,
            gg,
            g_var_o,
        }
    }
}

/// The n-, (n − 1)- and (n − 2)-fold convolutions of the composition, each normalised to
/// mass 1; `tot1` / `tot2` the normalisers that made `conv` and `conv1`.
struct Convolutions {
    conv: Vec<f64>,
    conv1: Vec<f64>,
    conv2: Vec<f64>,
    tot1: f64,
    tot2: f64,
}

impl Convolutions {
    fn new(k_u: usize) -> Convolutions {
        let mut conv = vec![0.0; k_u + 1];
        conv[0] = 1.0;
        Convolutions {
            conv,
            conv1: vec![0.0; k_u + 1],
            conv2: vec![0.0; k_u + 1],
            tot1: 1.0,
            tot2: 1.0,
        }
    }

    /// One more i.i.d. size, into the oldest buffer (support sorted by size; contiguous
    /// slices so the inner loop vectorises). `false` when nothing fits any more.
    fn add_one(&mut self, support: &[(usize, f64)], k_u: usize) -> bool {
        std::mem::swap(&mut self.conv2, &mut self.conv1);
        std::mem::swap(&mut self.conv1, &mut self.conv);
        let (conv, conv1) = (&mut self.conv, &self.conv1);
        conv.iter_mut().for_each(|x| *x = 0.0);
        // Below its first non-zero entry the (n)-fold convolution is empty.
        let first = conv1.iter().position(|&c| c != 0.0).unwrap_or(k_u + 1);
        for &(s, w) in support {
            if s + first > k_u {
                break;
            }
            for (x, &c) in conv[s + first..].iter_mut().zip(&conv1[first..]) {
                *x += c * w;
            }
        }
        let tot: f64 = conv.iter().sum();
        if tot <= 0.0 {
            return false;
        }
        conv.iter_mut().for_each(|x| *x /= tot);
        self.tot2 = self.tot1;
        self.tot1 = tot;
        true
    }
}

/// The read-out of state n from the convolutions (before the acceptance normalisation):
/// the requests in system (`sys_output`, `sys_var_ratio`) and the arrivals' unnormalised
/// acceptance-weighted means. Prompt bins only shape the TTFT of arrivals that start at
/// once (n < B); queued arrivals use the mean prompt.
fn read_state(
    grid: &KvGrid,
    comp: &Composition,
    cv: &Convolutions,
    n: usize,
    b_max: u32,
    n_pbins: usize,
) -> StateInfo {
    let (conv, conv1, conv2) = (&cv.conv, &cv.conv1, &cv.conv2);
    let (tot1, tot2) = (cv.tot1, cv.tot2);
    let mass: f64 = conv.iter().sum();
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
        let e1 = nf * tail_dot(conv1, &comp.g_o) / tot1 / mass;
        let mut e2 = nf * tail_dot(conv1, &comp.g_o2) / tot1;
        if n > 1 {
            e2 += nf * (nf - 1.0) * tail_dot(conv2, &comp.gg) / (tot1 * tot2);
        }
        e2 /= mass;
        info.sys_output = e1 / nf;
        info.sys_var_ratio = ((e2 - e1 * e1).max(0.0) / (nf * comp.g_var_o)).min(1.0);
    }
    if mass > 0.0 {
        // An arrival finding j units taken sees k_u − j free.
        info.accept = tail_dot(conv, &grid.f_acc) / mass;
        info.acc_prompt = tail_dot(conv, &grid.f_p) / mass;
        info.acc_output = tail_dot(conv, &grid.f_o) / mass;
        info.acc_output2 = tail_dot(conv, &grid.f_o2) / mass;
        for (pb, fb) in info.prompt_bins.iter_mut().zip(&grid.f_bin) {
            *pb = tail_dot(conv, fb) / mass;
        }
    }
    info
}

/// Inputs of the reserve-mode states that change between fixed-point passes.
pub(super) struct Hold<'a> {
    /// Prefill of each atom alone [s] (the service part of its hold time).
    pub pf1: &'a [f64],
    /// Mean wait of an accepted arrival [s].
    pub mean_wait: f64,
    /// Decode time per token in the hold time [s].
    pub tau: f64,
}

/// The states `0..=top` of reserve mode, built by adding one i.i.d. size at a time until
/// no arrival is accepted, n exceeds 4000, or the stationary weight of the chain built so
/// far is negligible: the chain started empty is stochastically below its stationary law,
/// so states beyond a negligible stationary tail are never reached (truncate there). The
/// last state accepts nothing.
pub(super) fn reserve_states(
    atoms: &[Atom],
    grid: &KvGrid,
    hold: &Hold,
    svc: &Service,
    rates: &Rates,
    b_max: u32,
    n_pbins: usize,
) -> Vec<StateInfo> {
    let (k_u, b_cap, lambda) = (grid.k_u, svc.b_cap, svc.lambda);
    let comp = Composition::new(atoms, grid, hold.pf1, hold.mean_wait, hold.tau);
    let mut cv = Convolutions::new(k_u);
    let mut states: Vec<StateInfo> = Vec::new();
    // Unnormalised stationary weight of the birth–death chain built so far.
    let (mut pi, mut pi_max, mut prev_birth) = (1.0f64, 1.0f64, 0.0f64);
    loop {
        let n = states.len();
        let mut info = read_state(grid, &comp, &cv, n, b_max, n_pbins);
        if n > 0 {
            pi *= prev_birth / rates.death_at(svc, n, info.accept).max(1e-300);
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
                info.pf_start = svc.costs.prefill_iter(n as u32 + 1, info.acc_prompt);
            } else {
                info.pf_queued = svc.costs.prefill_iter(b_cap, info.acc_prompt);
            }
        }
        states.push(info);
        if done {
            break;
        }
        if !cv.add_one(&comp.support, k_u) {
            if let Some(s) = states.last_mut() {
                s.accept = 0.0;
            }
            break;
        }
    }
    if let Some(last) = states.last_mut() {
        last.accept = 0.0;
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
