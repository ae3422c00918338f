//! TTFT: the time to first token of an accepted arrival by the state it finds. Finding
//! n < B it waits the residual of the iteration in progress, its own prefill and, when
//! the first token comes after the first decode, the prefills of requests joining in
//! between; finding n ≥ B it waits for `n − B + 1` departures, a gamma whose first
//! departure is the exact residual (B = 1) or the minimum of B equilibrium residuals
//! (B > 1) and whose time scale depends on the requests in system given n. The result is
//! a mixture of components per state ([`super::mixture`]).

use super::kv_occupancy::{ceil_nonneg, StateInfo};
use super::mixture::Comp;
use super::service::Service;
use crate::analytic::lengths::Atom;
use crate::analytic::special::renewal_at_least;

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

/// What the TTFT read-out takes from one fixed-point pass.
pub(super) struct TtftInputs<'a> {
    pub svc: &'a Service<'a>,
    pub states: &'a [StateInfo],
    /// Time-average law of the number in system.
    pub avg: &'a [f64],
    /// Death rates D(n) [1/s].
    pub deaths: &'a [f64],
    /// Full-batch departure rate [1/s].
    pub d_full: f64,
    /// Prefill iteration and stall by batch size for the accepted mean prompt [s].
    pub pf_new: &'a [f64],
    pub st_new: &'a [f64],
    /// Accepted output's first two moments [tokens, tokens²].
    pub new_o: f64,
    pub new_o2: f64,
    /// Whether the first token comes after the first decode.
    pub after_decode: bool,
    /// [`min_residual_moments`] at the running-set cap.
    pub min_res: (f64, f64),
    /// Variance of the prompt length [tokens²].
    pub var_p: f64,
    /// Prefill-time slope per prompt token at the full batch [s/token].
    pub slope: f64,
    /// `E[X²]/E[X]²` of the prefill iteration by batch size.
    pub pf_bias: &'a [f64],
    /// Prompt bins: (lower edge, upper edge, mean) [tokens].
    pub pbin_range: &'a [(f64, f64, f64)],
    /// SCV of the gaps between the arrivals this server sees (1 for Poisson; below 1 for
    /// a stream a router has smoothed).
    pub arrival_scv: f64,
    /// The joint queue of pooled servers, when the chain follows several.
    pub joint: Option<JointQueue<'a>>,
}

/// The queue of `servers` pooled servers (a router joining the fewest requests): an
/// arrival that finds all their slots busy and `i` requests waiting joins a server with
/// `⌊i/servers⌋` waiting and waits for `⌊i/servers⌋ + 1` of that server's departures.
pub(super) struct JointQueue<'a> {
    pub servers: usize,
    /// The probability of finding all slots busy and `i` waiting, by `i`.
    pub seen: &'a [f64],
}

/// The departures a queued arrival waits for: the first one's two moments, the spacing
/// of the rest and the reference output that normalises the state-dependent time scale.
struct Departures {
    first_mean: f64,
    first_var: f64,
    /// Departure rate of the full batch with a queue [1/s].
    rate: f64,
    /// SCV of the spacing of the departures after the first.
    scv_s: f64,
    /// Wait-weighted mean output of the requests in system over the queueing states.
    sys_ref: f64,
}

/// Per state, the TTFT read-out: arrivals that start at once and queued ones (as
/// `(weight, mean [s], scv)`), with the mean TTFT and mean wait (unnormalised) and the
/// total weight of accepted arrivals.
pub(super) struct TtftParts {
    starts: Vec<StartState>,
    queued: Vec<(f64, f64, f64)>,
    pub mean_ttft: f64,
    pub wait_sum: f64,
    pub wsum: f64,
}

impl TtftInputs<'_> {
    fn departures(&self) -> Departures {
        let (b_cap, new_o, new_o2) = (self.svc.b_cap, self.new_o, self.new_o2);
        let bc = b_cap as usize;
        let n_top = self.states.len() - 1;
        let dec_full = self.svc.dec[bc];
        let s_mean = self.pf_new[bc]
            + new_o * (dec_full + (b_cap as f64 - 1.0) * self.st_new[bc] / new_o.max(1.0));
        let var_o = (new_o2 - new_o * new_o).max(0.0);
        let per_tok = s_mean / new_o.max(1e-9);
        let s2 = s_mean * s_mean + var_o * per_tok * per_tok;
        let s3_over = {
            // E[S³] for a gamma-shaped S with the same two moments.
            let scv = (s2 / (s_mean * s_mean) - 1.0).max(0.0);
            s_mean * s_mean * s_mean * (1.0 + scv) * (1.0 + 2.0 * scv)
        };
        let dfull_n = if n_top as u32 > b_cap {
            self.deaths[n_top.min(b_cap as usize + 1)]
        } else {
            self.d_full
        };
        let (first_mean, first_var) = if b_cap == 1 {
            let r1 = s2 / (2.0 * s_mean);
            let r2 = s3_over / (3.0 * s_mean);
            (r1, (r2 - r1 * r1).max(0.0))
        } else {
            // The first departure is the minimum of b_cap equilibrium residuals (not an
            // exponential): its two moments relative to the mean spacing 1/D.
            let (rm, rv) = self.min_res;
            let mu = 1.0 / dfull_n;
            (rm * mu, rv * mu * mu)
        };
        // The spacing of the later departures: a service time's SCV for Poisson arrivals;
        // for a smooth stream the departures' dispersion, which the joiners' stalls make
        // more regular (`Rates::departure_dispersion`), linear in c_a² between, as the
        // chain's queueing states are matched.
        let scv_s = (s2 / (s_mean * s_mean) - 1.0).max(0.0);
        let smooth = (1.0 - self.arrival_scv).clamp(0.0, 1.0);
        let scv_s = if smooth > 0.0 {
            let dispersion = var_o * dec_full * dec_full / (s_mean * s_mean);
            scv_s - smooth * (scv_s - dispersion)
        } else {
            scv_s
        };
        // Reference output mean: the wait-weighted mean over queueing states, so the state
        // dependence reshapes the wait distribution without moving its mean (the chain's
        // departure rate already carries the accepted mean).
        let (mut a, mut b) = (0.0, 0.0);
        self.for_each_queued(|x, s, later| {
            if s.sys_output > 0.0 {
                let md = later + 1.0;
                a += x * s.accept * s.sys_output * md;
                b += x * s.accept * md;
            }
        });
        let sys_ref = if b > 0.0 { a / b } else { new_o };
        Departures {
            first_mean,
            first_var,
            rate: dfull_n,
            scv_s,
            sys_ref,
        }
    }

    /// An arrival finding n < B: it starts at once. Returns the state's read-out and its
    /// mean TTFT [s].
    fn start_state(&self, n: usize, x: f64, s: &StateInfo) -> (StartState, f64) {
        let (svc, dec, st_new) = (self.svc, &self.svc.dec, self.st_new);
        let (lambda, b_cap, after_decode) = (svc.lambda, svc.b_cap, self.after_decode);
        let b = n + 1;
        let dec_b = if after_decode { dec[b] } else { 0.0 };
        let sigma = (lambda * s.accept * st_new[b]).min(0.9);
        let res_mean = if n == 0 {
            0.0
        } else {
            (1.0 - sigma) * dec[n] / 2.0 + sigma * self.pf_new[n] * self.pf_bias[n] / 2.0
        };
        let pf_mean = s.pf_start;
        let (q, q2, delta) = if after_decode && (b as u32) < b_cap {
            let rate = lambda * self.states.get(n + 1).map_or(0.0, |t| t.accept);
            let delta = st_new[b + 1];
            // Joiners before the first decode: the arrivals after this one within the
            // wait, which a first joiner lengthens by its prefill (Poisson counts for
            // Poisson arrivals; a smoother stream's next arrival is further off).
            let scv = self.arrival_scv;
            let mu = rate * (res_mean + pf_mean);
            let mu2 = rate * (res_mean + pf_mean + delta);
            let q2 = if (b as u32) + 1 < b_cap {
                renewal_at_least(2, mu2, scv)
            } else {
                0.0
            };
            let q = renewal_at_least(1, mu, scv);
            (q, q2.min(q), delta)
        } else {
            (0.0, 0.0, 0.0)
        };
        let joiners = if q > 0.0 {
            joiner_groups(
                &self.states[n + 1].prompt_bins,
                self.pbin_range,
                delta,
                |p| svc.stall_of(b as u32 + 1, p),
            )
        } else {
            [(0.0, 0.0); JOINER_GROUPS]
        };
        let mean = res_mean + pf_mean + dec_b + (q + q2) * delta;
        let st = StartState {
            n,
            x,
            dec: dec_b,
            res_mean,
            q,
            q2,
            delta,
            joiners,
        };
        (st, mean)
    }

    /// An arrival finding `later + 1` departures ahead of it (n − B + 1 of one server at
    /// n ≥ B; of the joint queue when pooled), in a state `s`. Returns its mean wait, mean
    /// TTFT [s] and the TTFT's variance [s²].
    fn queued_state(&self, later: f64, s: &StateInfo, dep: &Departures) -> (f64, f64, f64) {
        let b_cap = self.svc.b_cap;
        // State-dependent service: KV-limited crowded states hold smaller requests, so
        // their departures come faster (mean-preserving).
        let r = if s.sys_output > 0.0 {
            s.sys_output / dep.sys_ref
        } else {
            1.0
        };
        let wmean = r * (dep.first_mean + later / dep.rate);
        let f = if s.sys_output > 0.0 {
            s.sys_var_ratio
        } else {
            1.0
        };
        let wvar = r * r * (dep.first_var + f * later * dep.scv_s / (dep.rate * dep.rate));
        let dec_b = if self.after_decode {
            self.svc.dec[b_cap as usize]
        } else {
            0.0
        };
        let ft = s.pf_queued + dec_b;
        let total_mean = wmean + ft;
        let total_var = wvar + self.slope * self.slope * self.var_p;
        (wmean, total_mean, total_var)
    }

    /// The read-out of every state an accepted arrival can find.
    pub fn parts(&self) -> TtftParts {
        let dep = self.departures();
        let mut out = TtftParts {
            starts: Vec::new(),
            queued: Vec::new(),
            mean_ttft: 0.0,
            wait_sum: 0.0,
            wsum: 0.0,
        };
        let starts = self.avg.iter().zip(self.states).enumerate();
        for (n, (x, s)) in starts.take(self.svc.b_cap as usize) {
            let w_state = x * s.accept;
            if w_state <= 0.0 {
                continue;
            }
            let (st, mean) = self.start_state(n, *x, s);
            out.mean_ttft += w_state * mean;
            out.starts.push(st);
            out.wsum += w_state;
        }
        self.for_each_queued(|x, s, later| {
            let w_state = x * s.accept;
            if w_state <= 0.0 {
                return;
            }
            let (wmean, total_mean, total_var) = self.queued_state(later, s, &dep);
            out.mean_ttft += w_state * total_mean;
            out.wait_sum += w_state * wmean;
            out.queued
                .push((w_state, total_mean, total_var / (total_mean * total_mean)));
            out.wsum += w_state;
        });
        out
    }

    /// Every queueing state an arrival can find, as (its probability, the state's
    /// read-out, the departures it waits for beyond the first), in order: one server's
    /// states n ≥ B (n − B beyond the first), or, pooled, the joint queue's arrivals that
    /// find q waiting at every server (q·M ≤ i < (q + 1)·M waiting in all, q beyond the
    /// first), which wait alike.
    fn for_each_queued(&self, mut f: impl FnMut(f64, &StateInfo, f64)) {
        let b_cap = self.svc.b_cap as usize;
        match &self.joint {
            Some(j) => {
                let top = self.states.len() - 1;
                for (q, block) in j.seen.chunks(j.servers).enumerate() {
                    let s = &self.states[(b_cap + q).min(top)];
                    f(block.iter().sum::<f64>(), s, q as f64);
                }
            }
            None => {
                for (n, (x, s)) in self.avg.iter().zip(self.states).enumerate().skip(b_cap) {
                    f(*x, s, (n - b_cap) as f64);
                }
            }
        }
    }

    /// The TTFT distribution as mixture components (weights summing to `parts.wsum`):
    /// arrivals starting at once become one uniform-sum component per prompt bin (and per
    /// joiner group delaying them), queued ones a gamma.
    pub fn mixture(&self, parts: &TtftParts) -> Vec<Comp> {
        let n_pbins = self.pbin_range.len();
        let mut comps: Vec<Comp> =
            Vec::with_capacity(2 * parts.starts.len() * n_pbins + parts.queued.len());
        for st in &parts.starts {
            let s = &self.states[st.n];
            let b = st.n as u32 + 1;
            for (pb, &wb) in s.prompt_bins.iter().enumerate() {
                if wb <= 0.0 {
                    continue;
                }
                let (lo, hi, _) = self.pbin_range[pb];
                let (t_lo, t_hi) = (
                    self.svc.costs.prefill_iter(b, lo) + st.dec,
                    self.svc.costs.prefill_iter(b, hi) + st.dec,
                );
                let uniform = |w: f64, base: f64| Comp::Uniform {
                    w,
                    base,
                    w1: 2.0 * st.res_mean,
                    w2: t_hi - t_lo,
                };
                comps.push(uniform(st.x * wb * (1.0 - st.q), t_lo));
                if st.q > 0.0 {
                    for &(gw, d) in &st.joiners {
                        if gw > 0.0 {
                            comps.push(uniform(st.x * wb * (st.q - st.q2) * gw, t_lo + d));
                        }
                    }
                    if st.q2 > 0.0 {
                        comps.push(uniform(st.x * wb * st.q2, t_lo + 2.0 * st.delta));
                    }
                }
            }
        }
        comps.extend(
            parts
                .queued
                .iter()
                .map(|&(w, mean, scv)| Comp::gamma(w, mean, scv, parts.wsum)),
        );
        comps
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

/// Mean and variance of the minimum of `b` i.i.d. equilibrium residuals of the output
/// length (accepted sizes), both relative to the mean spacing `E[O]/b` (so an exponential
/// would give (1, 1)).
pub(super) fn min_residual_moments(
    atoms: &[Atom],
    size_u: &[usize],
    k_u: usize,
    b: u32,
) -> (f64, f64) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
