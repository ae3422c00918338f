//! The page's parameters: a flat, URL-friendly description of a study (workload ×
//! server × cost model × sweep), the presets, and the mapping to engine [`SimConfig`]s.
//!
//! The whole view is `Params`: [`Params::to_query`] writes it into a URL query string and
//! [`Params::from_query`] reads it back (unknown keys ignored, bad values reported and
//! left at the preset's value), so a shared link reproduces the same view.

mod check;
mod fields;
mod kinds;
mod query;
mod workload;

use crate::metric::Metric;
use engine::config::{
    Admission, EndRule, FirstToken, KvMode, Policy, PrefixCache, ServerConfig, SimConfig,
};
use engine::cost::{CostModel, LinearCost, ReferenceCost, TableCost};
use engine::metrics::MetricsConfig;
pub use fields::{is_key, label, page_message, BadValue, Invalid, FIELDS};
pub use kinds::{AdmissionRule, Arrivals, Cost, Lengths, Preset};
use serde::{Deserialize, Serialize};
pub use trace::{TraceInUse, TRACE_KEYS};
pub use workload::SharedParams;

/// Every knob of the page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Preset the view started from (informational).
    pub preset: String,
    pub arrivals: Arrivals,
    /// Gamma shape k (c_a² = 1/k).
    pub burstiness: f64,
    /// Arrival rates of the sweep [req/s], ascending.
    pub rates: Vec<f64>,
    /// The chosen rate for the CDF / time-series / timeline views [req/s].
    pub rate: f64,
    pub lengths: Lengths,
    pub prompt_median: f64,
    pub prompt_sigma: f64,
    pub output_median: f64,
    pub output_sigma: f64,
    pub fixed_prompt: u32,
    pub fixed_output: u32,
    pub policy: Policy,
    pub max_batch: u32,
    pub kv_tokens: u64,
    pub block_size: u32,
    pub token_budget: u32,
    pub kv_mode: KvMode,
    /// Admission rule at arrival.
    pub admission: AdmissionRule,
    /// The threshold of [`AdmissionRule::Threshold`] [requests in system].
    pub max_in_system: u32,
    /// Per-request front-end overhead (HTTP, tokenization, task queue) [ms].
    pub overhead_ms: f64,
    pub cost: Cost,
    /// Linear cost coefficients [s], [s/token], [s/seq].
    pub beta0: f64,
    pub beta_prefill: f64,
    pub beta_decode: f64,
    /// Roofline preset: GPU name and model name (`engine::cost::roofline::{GPUS, MODELS}`).
    pub gpu: String,
    pub llm: String,
    /// Horizon of each run [s].
    pub horizon_s: f64,
    pub seeds: u32,
    /// The reference study's run rules (cut at the horizon, first token after first decode).
    pub reference_rules: bool,
    pub slo_ttft_s: f64,
    pub slo_tpot_s: f64,
    pub metric: Metric,
    /// A trace file as the arrivals, replayed time-scaled at each rate (see [`trace`]).
    #[serde(default)]
    pub trace: Option<TraceInUse>,
    /// What the requests share: system prompts, conversations ([`SharedParams`]).
    #[serde(default)]
    pub shared: SharedParams,
    /// The KV manager's prefix cache (paged KV only; docs/model.md, Prefix caching).
    #[serde(default)]
    pub prefix_cache: PrefixCache,
}

impl Default for Params {
    /// The reference study at B = 8, K = 8192, its eight rates and five seeds.
    fn default() -> Self {
        Params {
            preset: "reference".into(),
            arrivals: Arrivals::Poisson,
            burstiness: 1.0,
            rates: vec![0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0],
            rate: 4.0,
            lengths: Lengths::Lognormal,
            prompt_median: 256.0,
            prompt_sigma: 0.55,
            output_median: 128.0,
            output_sigma: 0.70,
            fixed_prompt: 256,
            fixed_output: 128,
            policy: Policy::Continuous,
            max_batch: 8,
            kv_tokens: 8192,
            block_size: 1,
            token_budget: 2048,
            kv_mode: KvMode::Reserve,
            admission: AdmissionRule::All,
            max_in_system: 16,
            overhead_ms: 0.0,
            cost: Cost::Reference,
            beta0: 0.006,
            beta_prefill: 8e-5,
            beta_decode: 5.5e-4,
            gpu: "H100".into(),
            llm: "Llama-3.1-8B".into(),
            horizon_s: 1000.0,
            seeds: 5,
            reference_rules: true,
            slo_ttft_s: 1.0,
            slo_tpot_s: 0.05,
            metric: Metric::P99Ttft,
            trace: None,
            shared: SharedParams::default(),
            prefix_cache: PrefixCache::Off,
        }
    }
}

/// Parses a comma-separated list of positive rates [req/s], sorted and deduplicated.
///
/// # Errors
/// A message naming the bad entry, or saying the list is empty.
pub fn parse_rates(s: &str) -> Result<Vec<f64>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => v.push(x),
            _ => return Err(format!("rate '{part}' is not a positive number")),
        }
    }
    if v.is_empty() {
        return Err("give at least one arrival rate".into());
    }
    if v.len() > 40 {
        return Err("at most 40 rates".into());
    }
    v.sort_by(f64::total_cmp);
    v.dedup();
    Ok(v)
}

/// Formats rates as the comma list [`parse_rates`] reads.
pub fn format_rates(r: &[f64]) -> String {
    r.iter().map(|x| fmt_num(*x)).collect::<Vec<_>>().join(",")
}

/// Shortest round-tripping decimal.
pub fn fmt_num(x: f64) -> String {
    format!("{x}")
}

/// Time-series points of the detail run (the "Over time" view): enough that its
/// shortest window (5 %) still has 150.
pub const DETAIL_POINTS: u32 = 3000;

impl Params {
    /// The engine cost model.
    pub fn cost_model(&self) -> CostModel {
        match self.cost {
            Cost::Reference => CostModel::Reference(ReferenceCost::default()),
            Cost::A10g => CostModel::Table(TableCost::a10g_qwen_1_5b()),
            Cost::Linear => CostModel::Linear(LinearCost {
                beta0: self.beta0,
                beta_prefill: self.beta_prefill,
                beta_decode: self.beta_decode,
                beta_kv: 0.0,
                ..LinearCost::default()
            }),
            // An unknown name falls back to an invalid linear model, which `validate`
            // reports as a readable error.
            Cost::Roofline => self
                .roofline()
                .map(|(c, _)| c)
                .unwrap_or(CostModel::Linear(LinearCost::default())),
        }
    }

    /// The roofline preset's cost model and KV capacity [tokens] (90 % of GPU memory, one GPU).
    pub fn roofline(&self) -> Result<(CostModel, u64), String> {
        engine::cost::RooflineCost::preset(&self.gpu, &self.llm, 0.9, 1).map_err(|e| e.to_string())
    }

    /// With a roofline cost, sets K to the GPU's KV capacity (called when the user picks a
    /// GPU or model, not when a URL is read, so a shared K survives).
    pub fn apply_roofline_kv(&mut self) {
        if self.cost == Cost::Roofline {
            if let Ok((_, kv)) = self.roofline() {
                self.kv_tokens = kv;
            }
        }
    }

    /// One run's configuration at `rate` and `seed`.
    pub fn sim_config(&self, rate: f64, seed: u64) -> SimConfig {
        let mut cfg = self.admit_all_config(rate, seed);
        self.resolve_admission(&mut cfg);
        cfg
    }

    /// Sets `cfg`'s admission rule from [`Params::admission`] for `cfg`'s own server (call
    /// it again after changing B or K: the DP threshold depends on them). A DP threshold
    /// that cannot be derived becomes 0, which the engine's validation refuses;
    /// [`Params::validate`] says why first.
    pub fn resolve_admission(&self, cfg: &mut SimConfig) {
        cfg.server.admission = match self.admission {
            AdmissionRule::All => Admission::All,
            AdmissionRule::Threshold => Admission::MaxInSystem {
                max_in_system: self.max_in_system,
            },
            AdmissionRule::Dp => {
                cfg.server.admission = Admission::All;
                Admission::MaxInSystem {
                    max_in_system: self.dp_threshold_of(cfg).unwrap_or(0),
                }
            }
        };
    }

    /// The DP rule's threshold n* for the chosen rate's server, from the TTFT SLO taken
    /// as a p99 target.
    ///
    /// # Errors
    /// The analytical model's message, when no threshold meets the SLO or the
    /// configuration is invalid.
    pub fn dp_threshold(&self) -> Result<u32, String> {
        self.dp_threshold_of(&self.admit_all_config(self.rate, 0))
    }

    fn dp_threshold_of(&self, cfg: &SimConfig) -> Result<u32, String> {
        engine::analytic::dp_threshold(cfg, self.slo_ttft_s)
            .map(|t| t.max_in_system)
            .map_err(|e| page_message(&e.to_string()))
    }

    /// One run's configuration with every arrival admitted (the KV mode's rule only).
    pub(super) fn admit_all_config(&self, rate: f64, seed: u64) -> SimConfig {
        SimConfig {
            workload: self.workload(rate),
            server: ServerConfig {
                policy: self.policy,
                max_batch: self.max_batch,
                kv_tokens: self.kv_tokens,
                block_size: self.block_size,
                token_budget: self.token_budget,
                kv_mode: self.kv_mode,
                overhead_s: self.overhead_ms / 1e3,
                prefix_cache: self.prefix_cache,
                ..ServerConfig::default()
            },
            cost: self.cost_model(),
            horizon_s: self.run_horizon(rate),
            end: if self.reference_rules {
                EndRule::Cut
            } else {
                EndRule::Drain
            },
            first_token: if self.reference_rules {
                FirstToken::AfterFirstDecode
            } else {
                FirstToken::AfterPrefill
            },
            metrics: MetricsConfig {
                slo_ttft_s: self.slo_ttft_s,
                slo_tpot_s: self.slo_tpot_s,
                ..MetricsConfig::default()
            },
            seed,
            keep_records: false,
            timeseries_points: 0,
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod props;
pub mod trace;
