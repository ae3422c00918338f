//! Stalls and service rates: the cost model evaluated at the batch's size, the stall a
//! joiner's prefill adds to the batch it joins, the departure rates of the birth–death
//! chain and the variance matching of its queueing states (`docs/model.md`, Analytical
//! models).

use crate::analytic::reference_mmc::prefill_tokens;
use crate::config::{Policy, SimConfig};
use crate::cost::BatchShape;
use crate::workload::LengthMoments;

/// The configuration's cost model at the batch's size.
#[derive(Clone, Copy, Debug)]
pub(super) struct Costs<'a> {
    pub cfg: &'a SimConfig,
    pub moments: LengthMoments,
}

impl Costs<'_> {
    /// Context the running set holds at batch `b` [tokens]: each request its prompt and
    /// half its output.
    fn cost_ctx(&self, b: u32) -> u64 {
        let m = &self.moments;
        (b as f64 * (m.prompt.0 + m.output.0 / 2.0)) as u64
    }

    /// One decode iteration at batch `b` [s].
    pub fn decode(&self, b: u32) -> f64 {
        self.cfg.cost.decode_step(b.max(1), self.cost_ctx(b))
    }

    /// The iteration that prefills `tokens` for a joiner with `b` running [s].
    pub fn prefill_iter(&self, b: u32, tokens: f64) -> f64 {
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
}

/// What [`Service::prefill_bias`] depends on.
#[derive(Clone, Debug, PartialEq)]
struct BiasKey {
    cost: crate::cost::CostModel,
    policy: Policy,
    /// Mean prompt and output [tokens] (the context at each batch size).
    means: (f64, f64),
    b_hi: u32,
    /// Each prompt bin's weight and mean prompt [tokens].
    bins: Vec<(f64, f64)>,
}

/// How many [`Service::prefill_bias`] results are kept.
const BIAS_KEPT: usize = 8;

thread_local! {
    static BIAS: std::cell::RefCell<Vec<(BiasKey, Vec<f64>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Cost-model values by running-set size b: decode for all b, and the stall a joiner adds
/// to the batch it joins, its prefill iteration (continuous) or what that iteration costs
/// beyond a decode of the others (chunked).
#[derive(Clone, Debug)]
pub(super) struct Service<'a> {
    pub costs: Costs<'a>,
    /// Arrival rate [1/s].
    pub lambda: f64,
    /// Running-set cap (B, or fewer where paged KV limits it).
    pub b_cap: u32,
    /// Largest batch tabulated.
    pub b_hi: u32,
    /// Decode iteration by batch size [s], `0..=b_hi`.
    pub dec: Vec<f64>,
}

impl<'a> Service<'a> {
    pub fn new(costs: Costs<'a>, lambda: f64, b_max: u32, b_cap: u32) -> Service<'a> {
        let b_hi = b_max.max(b_cap) + 1;
        let dec = (0..=b_hi).map(|b| costs.decode(b)).collect();
        Service {
            costs,
            lambda,
            b_cap,
            b_hi,
            dec,
        }
    }

    /// A joiner's stall of the batch it joins (b) given its prefill iteration `pf` [s]:
    /// the whole iteration (continuous), or what it adds to a decode step (chunked).
    pub fn stall(&self, b: usize, pf: f64) -> f64 {
        match self.costs.cfg.server.policy {
            Policy::Chunked | Policy::LlamaCpp => {
                (pf - self.dec[b.saturating_sub(1).max(1)]).max(0.0)
            }
            _ => pf,
        }
    }

    /// Prefill iteration and stall by batch size for a prompt of `tokens` [s].
    pub fn cost_row(&self, tokens: f64) -> (Vec<f64>, Vec<f64>) {
        let pf: Vec<f64> = (0..=self.b_hi)
            .map(|b| self.costs.prefill_iter(b, tokens))
            .collect();
        let st = pf
            .iter()
            .enumerate()
            .map(|(b, &x)| self.stall(b, x))
            .collect();
        (pf, st)
    }

    /// The stall of a joiner with a prompt of `tokens` at batch `b` [s].
    pub fn stall_of(&self, b: u32, tokens: f64) -> f64 {
        self.stall(b as usize, self.costs.prefill_iter(b, tokens))
    }

    /// `E[X²]/E[X]²` of the prefill iteration X over the prompt bins (weights `pbin_w`, mean
    /// prompt `ranges[i].2`) by batch size: an arrival that lands in a prefill iteration
    /// lands in a long one more often, and waits a residual of mean `E[X²]/(2E[X])`.
    ///
    /// It depends on the cost model, the policy, the lengths and the batch sizes, not on
    /// the arrivals, so the last few are kept (per thread): a plan or a sweep asks for the
    /// same one at every rate and replica count.
    pub fn prefill_bias(&self, pbin_w: &[f64], ranges: &[(f64, f64, f64)]) -> Vec<f64> {
        let key = BiasKey {
            cost: self.costs.cfg.cost.clone(),
            policy: self.costs.cfg.server.policy,
            means: (self.costs.moments.prompt.0, self.costs.moments.output.0),
            b_hi: self.b_hi,
            bins: pbin_w.iter().zip(ranges).map(|(w, r)| (*w, r.2)).collect(),
        };
        BIAS.with(|keep| {
            let mut keep = keep.borrow_mut();
            if let Some(i) = keep.iter().position(|(k, _)| *k == key) {
                let hit = keep.remove(i);
                let out = hit.1.clone();
                keep.insert(0, hit);
                return out;
            }
            let out = self.prefill_bias_of(pbin_w, ranges);
            keep.insert(0, (key, out.clone()));
            keep.truncate(BIAS_KEPT);
            out
        })
    }

    fn prefill_bias_of(&self, pbin_w: &[f64], ranges: &[(f64, f64, f64)]) -> Vec<f64> {
        (0..=self.b_hi)
            .map(|b| {
                let (mut m1, mut m2, mut wt) = (0.0, 0.0, 0.0);
                for (w, r) in pbin_w.iter().zip(ranges) {
                    let x = self.costs.prefill_iter(b, r.2);
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
            .collect()
    }

    /// Mean decode time per token of a request at the full running set, its prefill
    /// excluded: the decode iteration plus the other requests' joiners' stalls [s].
    fn per_token(&self, st: &[f64], output: f64) -> f64 {
        let bc = self.b_cap as usize;
        self.dec[bc] + st[bc] * (self.b_cap as f64 - 1.0) / output.max(1.0)
    }

    /// Mean running-set size and mean TPOT [s] over the time-average law `avg`: each
    /// state's decode iteration slowed by the stall rate, arrivals (`births`) below the
    /// full batch and departures (`deaths`) above it, weighted by the requests decoding.
    pub fn tpot(&self, avg: &[f64], births: &[f64], deaths: &[f64], st: &[f64]) -> (f64, f64) {
        let b_cap = self.b_cap;
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
                    births[n]
                };
                x * b as f64 * self.dec[b as usize] * (1.0 + stall_rate * st[b as usize])
            })
            .sum::<f64>()
            / busy.max(1e-300);
        (busy, tpot)
    }
}

/// The departure rates for the accepted requests' mean prompt and output.
#[derive(Clone, Debug)]
pub(super) struct Rates {
    /// Prefill iteration and stall by batch size for the accepted mean prompt [s].
    pub pf_acc: Vec<f64>,
    pub st_acc: Vec<f64>,
    /// Accepted mean output [tokens].
    pub acc_o: f64,
    /// Departure rate of a full batch whose departures each bring a joiner [1/s]:
    /// `D = B / (E[O]·decode(B) + B·δ(B))`.
    pub d_full: f64,
}

impl Rates {
    pub fn new(svc: &Service, b_max: u32, acc_p: f64, acc_o: f64) -> Rates {
        let (pf_acc, st_acc) = svc.cost_row(acc_p);
        let bm = b_max as usize;
        let d_full = b_max as f64 / (acc_o * svc.dec[bm] + b_max as f64 * st_acc[bm]);
        Rates {
            pf_acc,
            st_acc,
            acc_o,
            d_full,
        }
    }

    /// Death rate D(n) of the chain [1/s], for an arrival acceptance `accept` at n: below
    /// the cap the decode is slowed by the arrival-driven prefill fraction `λ a(n) δ`;
    /// with a queue each departure brings a joiner.
    pub fn death_at(&self, svc: &Service, n: usize, accept: f64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        let b_cap = svc.b_cap;
        let (st_acc, acc_o, dec) = (&self.st_acc, self.acc_o, &svc.dec);
        let b = n.min(b_cap as usize);
        if (n as u32) > b_cap {
            return b as f64 / (acc_o * dec[b] + b as f64 * st_acc[b]);
        }
        let stall = if (n as u32) < b_cap {
            svc.lambda * accept * st_acc[b + 1]
        } else {
            0.0
        };
        self.stalled(svc, b, stall)
    }

    /// Death rate with b running whose decodes are stalled by prefills `stall` of the time
    /// (at most 0.9) [1/s].
    fn stalled(&self, svc: &Service, b: usize, stall: f64) -> f64 {
        let sigma = stall.min(0.9);
        b as f64 / (self.pf_acc[b] + self.acc_o * svc.dec[b] / (1.0 - sigma))
    }

    /// Death rate at the cap of one of several pooled servers with no queue [1/s]: the
    /// joiners the router sends to the fleet's free slots stall the servers that hold
    /// them, λ a δ of the time per server on average whichever servers they join, so a
    /// full server's departures are slowed as those below the cap are (`accept` the
    /// acceptance of the joiner), not left unstalled as a lone server's are until a
    /// departure lets a joiner in.
    pub fn death_at_cap_pooled(&self, svc: &Service, accept: f64) -> f64 {
        let b = svc.b_cap as usize;
        self.stalled(svc, b, svc.lambda * accept * self.st_acc[b])
    }

    /// The service-time SCV of a departure at the full running set (output `acc_o2` its
    /// second moment), from the output-length variance.
    pub fn departure_scv(&self, svc: &Service, acc_o2: f64) -> f64 {
        let (acc_o, bc) = (self.acc_o, svc.b_cap as usize);
        let pf = self.pf_acc[bc];
        let per_tok = svc.per_token(&self.st_acc, acc_o);
        let var_o = (acc_o2 - acc_o * acc_o).max(0.0);
        var_o * per_tok * per_tok / (pf + acc_o * per_tok).powi(2)
    }

    /// The long-run dispersion (variance over mean of the count) of the departures of the
    /// full running set with a queue, output `acc_o2` its second moment.
    ///
    /// On the decode clock (the decode iterations alone) the B slots' departures are B
    /// superposed renewal streams of output-length gaps, dispersion `c_O²`. Every
    /// departure brings a joiner whose stall δ stops the whole batch, so the wall clock
    /// runs `t = τ + δ·N(τ)`: a burst of departures slows the next ones down. A count
    /// `N(τ) = r₀τ + X` becomes `N(t) = rt + X/(1 + δr₀)`, so the dispersion is
    /// `c_O²/(1 + δr₀)² = c_O²·(1 − δD)²`, D the full-batch departure rate and δD the
    /// stalled share of the time, not the service-time SCV [`Rates::departure_scv`], which
    /// counts the other joiners' stalls as if they grew with a request's own output.
    ///
    /// # Formula
    /// `Var[O]·decode(B)² / E[S]²`, `E[S] = prefill + E[O]·decode(B) + (B − 1)·δ` the mean
    /// time a slot holds a request.
    pub fn departure_dispersion(&self, svc: &Service, acc_o2: f64) -> f64 {
        let (acc_o, bc) = (self.acc_o, svc.b_cap as usize);
        let pf = self.pf_acc[bc];
        let per_tok = svc.per_token(&self.st_acc, acc_o);
        let var_o = (acc_o2 - acc_o * acc_o).max(0.0);
        var_o * svc.dec[bc] * svc.dec[bc] / (pf + acc_o * per_tok).powi(2)
    }
}

/// Service and arrival variability: with a queue, the number in system moves like a
/// diffusion of drift `λ_n − D` and variance `c_a²·λ_n + c_d²·D` (c_a² the arrivals' SCV
/// `v.arrival`, 1 for Poisson; c_d² the departures' dispersion `v.departures`), not the
/// `λ_n + D` of an exponential chain. Cancelling a rate θ_n from both the birth and the
/// death of each queueing state (n above `b_cap`) keeps the drift (so throughput =
/// accepted arrivals and the transient's pace) and matches the variance; with c_d² the
/// service-time SCV c², for M/G/1 the chain's mean queue is then Pollaczek–Khinchine's
/// exactly, for M/G/c Allen–Cunneen's, for G/G/1 Kingman's.
///
/// The edge from the cap into the queue sets where the queue's geometric law starts.
/// Its birth carries the arrivals' share of θ, and a smooth stream's share `v.edge` of
/// the departures' too: with Poisson arrivals (`v.edge` 0) the edge keeps Allen–Cunneen's
/// M/G/c queue (Erlang C's chance of waiting, the mean queue scaled by (1 + c²)/2); with
/// deterministic ones (`v.edge` 1) the queue is geometric from the cap, as a GI/G/c queue's
/// number waiting is in heavy traffic (exactly so for D/M/1, where both rules agree).
///
/// # Formula
/// `θ_n = min(((1 − c_a²)·λ_n + (1 − c_d²)·D_n)/2, (1 − max(c_a², 0.1)/2)·λ_n)`; c_d² > 1
/// adds variance (θ < 0) the same way. With Poisson arrivals the cap is `λ_n/2`. At the
/// edge `θ_B = min((1 − c_a²)·λ_B/2 + e·(1 − c_d²)·D_{B+1}/2, (1 − max(c_a², 0.1)/2)·λ_B)`
/// off the birth alone, `e = v.edge`.
pub(super) fn variance_matched(
    births: &[f64],
    deaths: &[f64],
    b_cap: u32,
    v: Variability,
) -> (Vec<f64>, Vec<f64>) {
    let keep = 1.0 - 0.5 * v.arrival.max(0.1);
    let (mut b, mut d): (Vec<f64>, Vec<f64>) = births
        .iter()
        .zip(deaths)
        .enumerate()
        .map(|(n, (&bn, &dn))| {
            if n as u32 > b_cap {
                let theta =
                    (0.5 * (1.0 - v.arrival) * bn + 0.5 * (1.0 - v.departures) * dn).min(keep * bn);
                (bn - theta, dn - theta)
            } else {
                (bn, dn)
            }
        })
        .unzip();
    // The edge into the queue, from the cap to one above it: its death carries the
    // arrivals' share of θ, so its birth does too (for Poisson arrivals that share is 0),
    // and the departures' share in proportion to `v.edge`.
    let bc = b_cap as usize;
    if v.arrival < 1.0 && bc < b.len() {
        let d_next = deaths.get(bc + 1).copied().unwrap_or(0.0);
        let theta = 0.5 * (1.0 - v.arrival) * b[bc] + 0.5 * v.edge * (1.0 - v.departures) * d_next;
        b[bc] -= theta.min(keep * b[bc]);
    }
    // Up to the cap every request is in service, as in an infinite-server queue, whose
    // number in system has variance z × its mean m, z = 1 + (c_a² − 1)·κ the peakedness
    // (Whitt 1984), κ = ∫(1 − G)²/E[S] between ½ (exponential service) and 1
    // (deterministic), here 1/(1 + c²). With Poisson arrivals the chain's law there is
    // Poisson's, ratio λ/D(n+1) = m/(n+1); multiplying each ratio by
    // (m + n(z − 1))/(z·m) makes it the binomial (z < 1) or negative binomial (z > 1)
    // of the same mean and variance z·m. The factor is split between the birth and the
    // death, so the chain's pace near the mean is kept.
    let kappa = 1.0 / (1.0 + v.service.max(0.0));
    let z = (1.0 + (v.arrival - 1.0) * kappa).max(0.05);
    if z < 1.0 && b.len() > 1 && d[1] > 0.0 {
        let m = b[0] / d[1];
        for n in 0..(b_cap as usize).min(b.len() - 1) {
            let g = ((m + n as f64 * (z - 1.0)) / (z * m)).max(1e-3);
            if d[n + 1] > 0.0 {
                let f = g.sqrt();
                b[n] *= f;
                d[n + 1] /= f;
            }
        }
    }
    (b, d)
}

/// The squared coefficients of variation the queueing states are matched to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Variability {
    /// Of the interarrival times (1 for Poisson).
    pub arrival: f64,
    /// Of the service time (the infinite-server states up to the cap).
    pub service: f64,
    /// The dispersion of the full running set's departures (the queueing states): the
    /// service-time SCV for Poisson arrivals, [`Rates::departure_dispersion`] for
    /// deterministic ones, linear in c_a² between.
    pub departures: f64,
    /// How much of the departures' share of θ the edge into the queue carries: 1 − c_a²
    /// (0 for Poisson and burstier arrivals).
    pub edge: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytic::lengths::fast_moments;

    /// The departures' dispersion is the output SCV times the decoding share of a slot's
    /// time squared, `c_O²·(1 − δD)²` (continuous batching: the stall is the whole
    /// prefill), below the service-time SCV that counts the others' stalls as its own.
    #[test]
    fn joiner_stalls_make_the_departures_more_regular() {
        let cfg = SimConfig::reference(4.77, 8, 8192);
        let m = fast_moments(&cfg.workload.lengths);
        let costs = Costs {
            cfg: &cfg,
            moments: m,
        };
        let svc = Service::new(costs, 4.77, 8, 8);
        let rates = Rates::new(&svc, 8, m.prompt.0, m.output.0);
        let c_o = m.output.1 / (m.output.0 * m.output.0) - 1.0;
        let stalled = rates.st_acc[8] * rates.d_full;
        let want = c_o * (1.0 - stalled).powi(2);
        let got = rates.departure_dispersion(&svc, m.output.1);
        assert!((got - want).abs() < 1e-12 * want, "{got} vs {want}");
        let scv = rates.departure_scv(&svc, m.output.1);
        assert!(got < 0.7 * scv && scv < c_o, "{got} {scv} {c_o}");
    }
}
