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

/// The reference two-stage birth–death chain.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceChain {
    pub(crate) params: RefParams,
    pub(crate) c: u32,
    /// Stationary p_n, n = 0..=N_max.
    pub(crate) p: Vec<f64>,
    /// μ_C = C / s(C) [1/s].
    pub(crate) mu_c: f64,
}

impl ReferenceChain {
    /// # Errors
    /// [`AnalyticError::Invalid`] for a non-positive rate or a KV cache below one mean request.
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
        let n_max = cap.map_or(params.n_max(), |k| k.min(params.n_max())).max(1);
        let mut p = Vec::with_capacity(n_max as usize + 1);
        p.push(1.0f64);
        let mut deaths = Vec::with_capacity(c as usize + 1);
        for b in 0..=c {
            deaths.push(if b == 0 {
                0.0
            } else {
                b as f64 / params.service(b)
            });
        }
        for n in 1..=n_max {
            let mu = deaths[n.min(c) as usize];
            let next = p[n as usize - 1] * params.lambda / mu;
            p.push(next);
            if next > 1e250 {
                p.iter_mut().for_each(|x| *x *= 1e-250);
            }
        }
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        let mu_c = deaths[c as usize];
        Ok(ReferenceChain { params, c, p, mu_c })
    }

    /// Stationary distribution of the number in system.
    pub fn probabilities(&self) -> &[f64] {
        &self.p
    }

    /// Servers C.
    pub fn servers(&self) -> u32 {
        self.c
    }

    /// `P(W ≤ t)` for an accepted arrival (PASTA mixture of Erlang waits).
    pub fn wait_cdf(&self, t: f64) -> f64 {
        let n_top = self.p.len() - 1;
        let acc = 1.0 - self.p[n_top];
        let mut f = 0.0;
        for (n, &pn) in self.p[..n_top].iter().enumerate() {
            let n = n as u32;
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
        if n < self.c {
            return 0.0;
        }
        let k = n + 1 - self.c;
        invert_monotone(
            |t| erlang_cdf(k, self.mu_c, t),
            q,
            0.0,
            k as f64 / self.mu_c,
        )
    }

    /// The prediction.
    pub fn prediction(&self, cfg: &SimConfig) -> Prediction {
        let p = &self.params;
        let n_top = self.p.len() - 1;
        let pb = self.p[n_top];
        let lam_eff = p.lambda * (1.0 - pb);
        let lq: f64 = self
            .p
            .iter()
            .enumerate()
            .map(|(n, pn)| (n as f64 - self.c as f64).max(0.0) * pn)
            .sum();
        let sft = p.first_token(self.c);
        let scale = (n_top as f64 + 1.0) / self.mu_c;
        let quant = |q: f64| sft + invert_monotone(|t| self.wait_cdf(t), q, 0.0, scale);
        let busy: f64 = self
            .p
            .iter()
            .enumerate()
            .map(|(n, pn)| (n as u32).min(self.c) as f64 * pn)
            .sum();
        let tpot: f64 = self
            .p
            .iter()
            .enumerate()
            .skip(1)
            .map(|(n, pn)| pn * (n as u32).min(self.c) as f64 * p.decode((n as u32).min(self.c)))
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
}
