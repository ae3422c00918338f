//! The reference study's M/M/C baseline, reproduced with its simplifications.
//!
//! # Formula
//! `N_max = ⌊K / E[kv]⌋` with `E[kv] = E[Lp] + E[Lg]`, `C = min(B, N_max)`,
//! service `s(b) = prefill(b, E[Lp]) + E[Lg]·decode(b)`, `μ = 1/s(C)`, `A = λ/μ`;
//! blocking = Erlang B(C, A); wait = Erlang C (M/M/C with an infinite queue);
//! TTFT = `s_ft + Wq` with the first-token service `s_ft = prefill(C, E[Lp]) + decode(C)`;
//! quantiles from `P(Wq > t) = C(C, A) e^{−(Cμ−λ)t}`.
//!
//! # Known defects (kept on purpose; [`super::BatchingModel`] fixes them)
//! Blocking from a loss system but the wait from a queue with no loss (inconsistent);
//! every request treated as the mean request (no length variance, no size-biased
//! admission); prefill stalls of later joiners ignored; unstable (no answer) when
//! `λ ≥ C μ` although the real reserve system is a finite loss system.

use super::erlang::{erlang_b, Mmc};
use super::{check_positive, AnalyticError, Predicted, Prediction, Stability};
use crate::config::SimConfig;
use crate::cost::CostModel;

/// Mean-request quantities shared by the reference models.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RefParams {
    pub lambda: f64,
    pub b: u32,
    pub k_tokens: f64,
    pub mean_prompt: f64,
    pub mean_output: f64,
    pub cost: CostModel,
}

impl RefParams {
    pub fn from_config(cfg: &SimConfig) -> Result<RefParams, AnalyticError> {
        let m = super::lengths::fast_moments(&cfg.workload.lengths);
        Ok(RefParams {
            lambda: check_positive("arrival rate", cfg.workload.rate())?,
            b: cfg.server.max_batch,
            k_tokens: cfg.server.kv_tokens as f64,
            mean_prompt: m.prompt.0,
            mean_output: m.output.0,
            cost: cfg.cost.clone(),
        })
    }

    /// `E[kv] = E[Lp] + E[Lg]` [tokens].
    pub fn mean_kv(&self) -> f64 {
        self.mean_prompt + self.mean_output
    }

    /// `N_max = ⌊K / E[kv]⌋`.
    pub fn n_max(&self) -> u32 {
        libm::floor(self.k_tokens / self.mean_kv()) as u32
    }

    /// `C = min(B, N_max)`, at least 1.
    ///
    /// # Errors
    /// [`AnalyticError::Invalid`] when the KV cache cannot hold one mean request.
    pub fn servers(&self) -> Result<u32, AnalyticError> {
        let n = self.n_max();
        if n == 0 {
            return Err(AnalyticError::Invalid {
                name: "kv_tokens",
                value: self.k_tokens,
                why: "smaller than one mean request (N_max = 0); raise the KV capacity",
            });
        }
        Ok(self.b.min(n))
    }

    /// `prefill(b, E[Lp])` [s] (fractional tokens for the reference formula).
    pub fn prefill(&self, b: u32) -> f64 {
        prefill_tokens(&self.cost, b, self.mean_prompt)
    }

    pub fn decode(&self, b: u32) -> f64 {
        self.cost.decode_step(b.max(1), 0)
    }

    /// `s(b) = prefill(b, E[Lp]) + E[Lg] decode(b)` [s].
    pub fn service(&self, b: u32) -> f64 {
        self.prefill(b) + self.mean_output * self.decode(b)
    }

    /// First-token service `prefill(b, E[Lp]) + decode(b)` [s].
    pub fn first_token(&self, b: u32) -> f64 {
        self.prefill(b) + self.decode(b)
    }
}

/// Prefill of a (possibly fractional) token count with `b` running [s].
pub(crate) fn prefill_tokens(cost: &CostModel, b: u32, tokens: f64) -> f64 {
    match cost {
        CostModel::Reference(c) => c.prefill_s(b.max(1), tokens),
        other => {
            let lo = libm::floor(tokens);
            let t0 = other.prefill(b.max(1), 1, lo as u64);
            let t1 = other.prefill(b.max(1), 1, lo as u64 + 1);
            t0 + (tokens - lo) * (t1 - t0)
        }
    }
}

/// Quantile levels reported.
pub(crate) const LEVELS: [f64; 3] = [0.5, 0.95, 0.99];

/// The reference M/M/C baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceMmc {
    params: RefParams,
    c: u32,
    mu: f64,
}

impl ReferenceMmc {
    /// # Errors
    /// [`AnalyticError::Invalid`] for a non-positive rate or a KV cache below one mean
    /// request.
    pub fn from_config(cfg: &SimConfig) -> Result<ReferenceMmc, AnalyticError> {
        let params = RefParams::from_config(cfg)?;
        let c = params.servers()?;
        let mu = 1.0 / params.service(c);
        Ok(ReferenceMmc { params, c, mu })
    }

    /// Servers C.
    pub fn servers(&self) -> u32 {
        self.c
    }

    /// Erlang B blocking at offered load λ/μ.
    pub fn blocking(&self) -> f64 {
        erlang_b(self.c, self.params.lambda / self.mu).unwrap_or(1.0)
    }

    /// `ρ = λ / (Cμ)`.
    pub fn stability(&self) -> Stability {
        Stability::of(self.params.lambda / (self.c as f64 * self.mu))
    }

    /// The prediction (unstable when λ ≥ Cμ: the Erlang C wait is infinite).
    pub fn prediction(&self, cfg: &SimConfig) -> Prediction {
        let p = &self.params;
        let mmc = match Mmc::new(p.lambda, self.mu, self.c) {
            Ok(m) => m,
            Err(_) => return Prediction::Unstable { rho: f64::INFINITY },
        };
        let wq = match mmc.mean_wait() {
            Ok(w) => w,
            Err(s) => return Prediction::Unstable { rho: s.rho() },
        };
        let sft = p.first_token(self.c);
        let q = |level: f64| sft + mmc.wait_quantile(level).unwrap_or(0.0);
        let pb = self.blocking();
        let tpot = p.decode(self.c);
        let pw = mmc.p_wait().unwrap_or(1.0);
        let slo = &cfg.metrics;
        let cdf_at = |t: f64| {
            let w = t - sft;
            if w < 0.0 {
                0.0
            } else {
                1.0 - pw * libm::exp(-(self.c as f64 * self.mu - p.lambda) * w)
            }
        };
        let meets = if tpot <= slo.slo_tpot_s {
            cdf_at(slo.slo_ttft_s)
        } else {
            0.0
        };
        Prediction::Stable(Predicted {
            ttft_mean_s: sft + wq,
            ttft_p50_s: q(LEVELS[0]),
            ttft_p95_s: q(LEVELS[1]),
            ttft_p99_s: q(LEVELS[2]),
            tpot_mean_s: tpot,
            goodput_rps: p.lambda * (1.0 - pb),
            blocking: pb,
            utilisation: (p.lambda * (1.0 - pb) / (self.c as f64 * self.mu)).min(1.0),
            slo_attainment: (1.0 - pb) * meets,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_values() {
        let cfg = SimConfig::reference(1.0, 8, 8192);
        let m = ReferenceMmc::from_config(&cfg).unwrap();
        // E[kv] ≈ 460.3 → N_max = 17, C = 8.
        assert_eq!(m.servers(), 8);
        let p = m.prediction(&cfg);
        let s = p.metrics().unwrap();
        assert!(
            s.blocking < 1e-3 && s.ttft_mean_s > 0.03 && s.ttft_mean_s < 0.1,
            "{s:?}"
        );
        assert!(s.ttft_p50_s <= s.ttft_p95_s && s.ttft_p95_s <= s.ttft_p99_s);
        // B = 1 at λ = 3 is beyond one server: explicit instability, no NaN.
        let cfg = SimConfig::reference(3.0, 1, 8192);
        match ReferenceMmc::from_config(&cfg).unwrap().prediction(&cfg) {
            Prediction::Unstable { rho } => assert!(rho > 3.0),
            other => panic!("{other:?}"),
        }
    }
}
