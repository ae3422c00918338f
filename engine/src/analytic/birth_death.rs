//! The reference study's two-stage birth–death chain, reproduced.
//!
//! # Formula
//! States n ∈ {0..N_max}, `N_max = ⌊K/E[kv]⌋`, `C = min(B, N_max)`; birth λ (n < N_max),
//! death `μ_n = min(n, C) / s(min(n, C))` with `s(b) = prefill(b, E[Lp]) + E[Lg] decode(b)`.
//! Blocking `P_block = p_{N_max}` (PASTA); `λ_eff = λ(1 − p_{N_max})`;
//! mean TTFT `= L_q / λ_eff + s_ft` with `L_q = Σ (n − C)⁺ p_n` and
//! `s_ft = prefill(C, E[Lp]) + decode(C)`; TTFT quantiles by inverting the PASTA mixture
//! `P(W ≤ t) = Σ_{n<N_max} p_n/(1 − p_N) · P(Erlang(n + 1 − C, μ_C) ≤ t)` (no wait for n < C),
//! `μ_C = C / s(C)`.
//!
//! # Known defects (kept on purpose)
//! Mean lengths only (KV capacity counted in mean requests, no size-biased admission, no
//! length variance in the tail), joiner prefill stalls ignored, exponential service.

use super::reference_mmc::{RefParams, LEVELS};
use super::special::{erlang_cdf, invert_monotone};
use super::{AnalyticError, Predicted, Prediction};
use crate::config::SimConfig;

/// Chains of at most this many states are solved whole, as the product form gives them.
const WHOLE_STATES: u32 = 4096;

/// A longer chain keeps only the states holding at least this share of the most likely
/// state's mass (its geometric tails beyond them hold less than this share in all).
const NEGLIGIBLE: f64 = 1e-30;

/// The most states a chain keeps; a chain whose likely states are more is refused.
pub const MAX_CHAIN_STATES: u32 = 1 << 16;

/// The reference two-stage birth–death chain.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceChain {
    pub(crate) params: RefParams,
    pub(crate) c: u32,
    /// The top state: `N_max`, or the admission cap.
    pub(crate) top: u32,
    /// The first state held in `p`.
    pub(crate) lo: u32,
    /// Stationary p_n, n = lo..lo + p.len(); the states outside hold less than
    /// [`NEGLIGIBLE`] of the mass.
    pub(crate) p: Vec<f64>,
    /// `p_top`, the blocking probability (PASTA).
    pub(crate) blocking: f64,
    /// μ_C = C / s(C) [1/s].
    pub(crate) mu_c: f64,
}

impl ReferenceChain {
    /// # Errors
    /// [`AnalyticError::Invalid`] for a non-positive rate or a KV cache below one mean
    /// request; [`AnalyticError::Unsupported`] for a chain whose likely states are more
    /// than [`MAX_CHAIN_STATES`].
    pub fn from_config(cfg: &SimConfig) -> Result<ReferenceChain, AnalyticError> {
        let params = RefParams::from_config(cfg)?;
        Self::with_cap(params, None)
    }

    /// The chain truncated at `min(N_max, cap)` states in system (threshold admission).
    pub(crate) fn with_cap(
        params: RefParams,
        cap: Option<u32>,
    ) -> Result<ReferenceChain, AnalyticError> {
        let c = params.servers()?;
        let top = cap.map_or(params.n_max(), |k| k.min(params.n_max())).max(1);
        let deaths = deaths(&params, c);
        if top >= WHOLE_STATES {
            Self::likely_states(params, c, top, &deaths)
        } else {
            Ok(Self::whole(params, c, top, &deaths))
        }
    }

    /// A short chain by the product form, every state kept.
    fn whole(params: RefParams, c: u32, top: u32, deaths: &[f64]) -> ReferenceChain {
        let mut p = Vec::with_capacity(top as usize + 1);
        p.push(1.0f64);
        for n in 1..=top {
            let mu = deaths[n.min(c) as usize];
            let next = p[n as usize - 1] * params.lambda / mu;
            p.push(next);
            if next > 1e250 {
                p.iter_mut().for_each(|x| *x *= 1e-250);
            }
        }
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        let blocking = p[top as usize];
        ReferenceChain {
            params,
            c,
            top,
            lo: 0,
            p,
            blocking,
            mu_c: deaths[c as usize],
        }
    }

    /// A long chain by its log weights: the head `n ≤ C` by the product form, the tail
    /// `n > C` geometric with ratio `ρ = λ/μ_C`, keeping the states from `lo` to `hi`
    /// outside which the tails hold less than [`NEGLIGIBLE`] of the largest weight.
    fn likely_states(
        params: RefParams,
        c: u32,
        top: u32,
        deaths: &[f64],
    ) -> Result<ReferenceChain, AnalyticError> {
        let lambda = params.lambda;
        let head_top = c.min(top);
        let mut head = Vec::with_capacity(head_top as usize + 1);
        head.push(0.0f64);
        for n in 1..=head_top {
            head.push(head[n as usize - 1] + libm::log(lambda / deaths[n as usize]));
        }
        let mu_c = deaths[c as usize];
        let log_rho = libm::log(lambda / mu_c);
        let log_c = head[head_top as usize];
        let log_w = |n: u32| {
            if n <= head_top {
                head[n as usize]
            } else {
                log_c + (n - c) as f64 * log_rho
            }
        };
        let head_max = head.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log_max = head_max.max(log_w(top));
        let cut = log_max + libm::log(NEGLIGIBLE);
        let (mut lo, mut hi) = (0, top);
        if top > c && log_rho < 0.0 {
            // A falling tail: drop the states past the one whose tail sum is negligible.
            let j = (cut + libm::log(-libm::expm1(log_rho)) - log_c) / log_rho;
            if j.is_finite() && j >= 0.0 && j < f64::from(top - c) {
                hi = c + libm::ceil(j) as u32;
            }
        } else if top > c && log_rho > 0.0 && head_max + libm::log(f64::from(c) + 1.0) < cut {
            // A rising tail: the head and the tail below the cut hold a negligible mass.
            let j = (cut + libm::log(-libm::expm1(-log_rho)) - log_c) / log_rho;
            if j.is_finite() && j > 0.0 {
                lo = c + (libm::floor(j) as u32).min(top - c);
            }
        }
        let states = hi - lo + 1;
        if states > MAX_CHAIN_STATES {
            return Err(AnalyticError::Unsupported {
                model: "reference_chain",
                what: format!(
                    "{states} likely states (N_max = {top}, λ/μ_C = {:.6}): above the {MAX_CHAIN_STATES}-state limit",
                    libm::exp(log_rho)
                ),
            });
        }
        let mut p: Vec<f64> = (lo..=hi).map(|n| libm::exp(log_w(n) - log_max)).collect();
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        let blocking = libm::exp(log_w(top) - log_max) / total;
        Ok(ReferenceChain {
            params,
            c,
            top,
            lo,
            p,
            blocking,
            mu_c,
        })
    }

    /// Stationary probabilities of the states from [`ReferenceChain::first_state`] on, as
    /// many as the chain keeps (the states beyond hold less than 1e-30 of the mass).
    pub fn probabilities(&self) -> &[f64] {
        &self.p
    }

    /// The state [`ReferenceChain::probabilities`] starts at.
    pub fn first_state(&self) -> u32 {
        self.lo
    }

    /// The kept states `(n, p_n)`.
    fn states(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        (self.lo..).zip(self.p.iter().copied())
    }

    /// Servers C.
    pub fn servers(&self) -> u32 {
        self.c
    }

    /// `P(W ≤ t)` for an accepted arrival (PASTA mixture of Erlang waits).
    pub fn wait_cdf(&self, t: f64) -> f64 {
        let acc = 1.0 - self.blocking;
        let mut f = 0.0;
        for (n, pn) in self.states().take_while(|&(n, _)| n < self.top) {
            f += pn
                * if n < self.c {
                    1.0
                } else {
                    erlang_cdf(n + 1 - self.c, self.mu_c, t)
                };
        }
        f / acc
    }

    /// The predicted q-quantile of the wait of an arrival that finds `n` in system [s].
    pub fn state_wait_quantile(&self, n: u32, q: f64) -> f64 {
        state_wait_quantile(self.c, self.mu_c, n, q)
    }

    /// The prediction.
    pub fn prediction(&self, cfg: &SimConfig) -> Prediction {
        let p = &self.params;
        let pb = self.blocking;
        let lam_eff = p.lambda * (1.0 - pb);
        let lq: f64 = self
            .states()
            .map(|(n, pn)| (f64::from(n) - f64::from(self.c)).max(0.0) * pn)
            .sum();
        let sft = p.first_token(self.c);
        let scale = (f64::from(self.top) + 1.0) / self.mu_c;
        let quant = |q: f64| sft + invert_monotone(|t| self.wait_cdf(t), q, 0.0, scale);
        let busy: f64 = self
            .states()
            .map(|(n, pn)| f64::from(n.min(self.c)) * pn)
            .sum();
        let tpot: f64 = self
            .states()
            .filter(|&(n, _)| n > 0)
            .map(|(n, pn)| pn * f64::from(n.min(self.c)) * p.decode(n.min(self.c)))
            .sum::<f64>()
            / busy.max(1e-300);
        let slo = &cfg.metrics;
        let meets = if tpot <= slo.slo_tpot_s {
            self.wait_cdf(slo.slo_ttft_s - sft)
        } else {
            0.0
        };
        let meets = if slo.slo_ttft_s < sft { 0.0 } else { meets };
        Prediction::Stable(Predicted {
            ttft_mean_s: lq / lam_eff + sft,
            ttft_p50_s: quant(LEVELS[0]),
            ttft_p95_s: quant(LEVELS[1]),
            ttft_p99_s: quant(LEVELS[2]),
            tpot_mean_s: if busy > 0.0 { tpot } else { p.decode(1) },
            goodput_rps: lam_eff,
            blocking: pb,
            utilisation: busy / self.c as f64,
            slo_attainment: (1.0 - pb) * meets,
        })
    }
}

/// The death rates `μ_b = b / s(b)`, b = 0..=C [1/s].
fn deaths(params: &RefParams, c: u32) -> Vec<f64> {
    (0..=c)
        .map(|b| {
            if b == 0 {
                0.0
            } else {
                b as f64 / params.service(b)
            }
        })
        .collect()
}

/// The q-quantile of the wait of an arrival that finds `n` in system, with `c` servers
/// of rate `mu_c` each when all are busy: `Erlang(n + 1 − C, μ_C)`, none for `n < C` [s].
pub(crate) fn state_wait_quantile(c: u32, mu_c: f64, n: u32, q: f64) -> f64 {
    if n < c {
        return 0.0;
    }
    let k = n + 1 - c;
    invert_monotone(|t| erlang_cdf(k, mu_c, t), q, 0.0, f64::from(k) / mu_c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_is_a_distribution_and_ordered() {
        for (lam, b, k) in [
            (0.5, 1, 2048),
            (3.0, 1, 16384),
            (2.0, 8, 4096),
            (3.0, 4, 16384),
        ] {
            let cfg = SimConfig::reference(lam, b, k);
            let ch = ReferenceChain::from_config(&cfg).unwrap();
            let s: f64 = ch.probabilities().iter().sum();
            assert!((s - 1.0).abs() < 1e-12);
            let m = *ch.prediction(&cfg).metrics().unwrap();
            assert!(
                m.ttft_p50_s <= m.ttft_p95_s && m.ttft_p95_s <= m.ttft_p99_s,
                "{m:?}"
            );
            assert!(m.blocking >= 0.0 && m.blocking < 1.0 && m.ttft_mean_s.is_finite());
        }
    }

    #[test]
    fn single_server_chain_is_mm1k() {
        // B = 1: the chain is M/M/1/N_max with μ = 1/s(1).
        let cfg = SimConfig::reference(0.5, 1, 2048);
        let ch = ReferenceChain::from_config(&cfg).unwrap();
        let mu = 1.0 / ch.params.service(1);
        let q = crate::analytic::Mmck::new(0.5, mu, 1, ch.params.n_max()).unwrap();
        for (a, b) in ch.probabilities().iter().zip(q.probabilities()) {
            assert!((a - b).abs() < 1e-12);
        }
    }

    /// The reference workload's chain parameters at `rho = λ/μ_C` with B = 8 and a KV
    /// cache of 2^30 tokens (N_max in the millions).
    fn long_chain(rho: f64) -> (RefParams, u32, Vec<f64>) {
        let cfg = SimConfig::reference(1.0, 8, 1 << 30);
        let mut params = RefParams::from_config(&cfg).unwrap();
        let c = params.servers().unwrap();
        let d = deaths(&params, c);
        params.lambda = rho * d[c as usize];
        (params, c, d)
    }

    fn metrics(ch: &ReferenceChain) -> Predicted {
        let cfg = SimConfig::reference(ch.params.lambda, 8, 1 << 30);
        *ch.prediction(&cfg).metrics().unwrap()
    }

    fn assert_close(a: f64, b: f64, what: &str) {
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12),
            "{what}: {a} against {b}"
        );
    }

    #[test]
    fn a_long_chain_keeps_its_likely_states_and_predicts_as_the_whole_chain() {
        let top = WHOLE_STATES + 6000;
        for (rho, cut_below, cut_above) in [
            (0.5, false, true),
            (0.99, false, true),
            (1.001, false, false),
            (1.5, true, false),
        ] {
            let (params, c, d) = long_chain(rho);
            let whole = ReferenceChain::whole(params.clone(), c, top, &d);
            let likely = ReferenceChain::likely_states(params, c, top, &d).unwrap();
            let last = likely.first_state() as usize + likely.probabilities().len() - 1;
            assert_eq!(likely.first_state() > 0, cut_below, "ρ {rho}");
            assert_eq!(last < top as usize, cut_above, "ρ {rho}: {last}");
            let s: f64 = likely.probabilities().iter().sum();
            assert!((s - 1.0).abs() < 1e-12, "ρ {rho}: {s}");
            let (w, l) = (metrics(&whole), metrics(&likely));
            for (what, a, b) in [
                ("mean TTFT", w.ttft_mean_s, l.ttft_mean_s),
                ("p50 TTFT", w.ttft_p50_s, l.ttft_p50_s),
                ("p99 TTFT", w.ttft_p99_s, l.ttft_p99_s),
                ("TPOT", w.tpot_mean_s, l.tpot_mean_s),
                ("goodput", w.goodput_rps, l.goodput_rps),
                ("utilisation", w.utilisation, l.utilisation),
                ("SLO attainment", w.slo_attainment, l.slo_attainment),
                ("blocking", w.blocking, l.blocking),
            ] {
                assert_close(a, b, &format!("ρ {rho}: {what}"));
            }
        }
    }

    #[test]
    fn a_kv_cache_of_millions_of_requests_is_solved_on_its_likely_states_or_refused() {
        // Light load: the queue never reaches far; the same answer as a chain of 4,000.
        let (params, c, d) = long_chain(0.7);
        assert!(params.n_max() > 1_000_000, "{}", params.n_max());
        let long = ReferenceChain::with_cap(params.clone(), None).unwrap();
        let short = ReferenceChain::whole(params.clone(), c, 4000, &d);
        assert!(long.probabilities().len() < 1000);
        assert_eq!(long.blocking, 0.0);
        assert_close(metrics(&long).ttft_p99_s, metrics(&short).ttft_p99_s, "p99");
        assert_close(
            metrics(&long).ttft_mean_s,
            metrics(&short).ttft_mean_s,
            "mean",
        );
        // Overload: the chain sits at the top and blocks 1 − 1/ρ of the arrivals.
        let (params, _, _) = long_chain(2.0);
        let full = ReferenceChain::with_cap(params, None).unwrap();
        assert!(full.first_state() > 1_000_000);
        assert_close(full.blocking, 0.5, "blocking");
        // Critical load: every state is likely, and there are too many.
        let (params, _, _) = long_chain(1.0);
        let e = ReferenceChain::with_cap(params, None).unwrap_err();
        assert!(e.to_string().contains("state limit"), "{e}");
    }
}
