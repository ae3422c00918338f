//! The page's parameters: a flat, URL-friendly description of a study (workload ×
//! server × cost model × sweep), the presets, and the mapping to engine [`SimConfig`]s.
//!
//! The whole view is `Params`: [`Params::to_query`] writes it into a URL query string and
//! [`Params::from_query`] reads it back (unknown keys ignored, bad values reported and
//! left at the preset's value), so a shared link reproduces the same view.

use crate::metric::Metric;
use engine::config::{Admission, EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
use engine::cost::{CostModel, LinearCost, ReferenceCost, TableCost};
use engine::limits::{LimitError, Limits};
use engine::metrics::MetricsConfig;
use engine::sweep::SweepSpec;
use engine::workload::{ArrivalProcess, LengthDist, Workload};
use engine::ConfigError;
use serde::{Deserialize, Serialize};
pub use trace::{TraceInUse, TRACE_KEYS};

/// Arrival process kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arrivals {
    #[default]
    Poisson,
    Gamma,
    Deterministic,
}

/// Length distribution kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lengths {
    #[default]
    Lognormal,
    ShareGpt,
    Fixed,
    /// 50 % short 32→64, 50 % long 512→32 (the profiler study's mix).
    Mixture,
}

/// Cost model kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cost {
    #[default]
    Reference,
    A10g,
    Linear,
    /// GPU × model roofline preset (`engine::cost::roofline`).
    Roofline,
}

/// Which arrivals are admitted, on top of the KV mode's own rule (docs/model.md, Policies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdmissionRule {
    /// Everything the KV mode accepts.
    #[default]
    All,
    /// Admit an arrival only while fewer than [`Params::max_in_system`] requests are in
    /// the system (waiting + running).
    Threshold,
    /// The same rule with the threshold n* that the DP rule derives from the TTFT SLO (as
    /// a p99 target): [`engine::analytic::dp_threshold`], at each run's B and K.
    Dp,
}

impl AdmissionRule {
    pub const ALL: [AdmissionRule; 3] = [
        AdmissionRule::All,
        AdmissionRule::Threshold,
        AdmissionRule::Dp,
    ];
    pub fn key(self) -> &'static str {
        match self {
            AdmissionRule::All => "all",
            AdmissionRule::Threshold => "threshold",
            AdmissionRule::Dp => "dp",
        }
    }
}

/// Named presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Reference,
    VllmA10g,
    Interference,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Reference, Preset::VllmA10g, Preset::Interference];

    pub fn key(self) -> &'static str {
        match self {
            Preset::Reference => "reference",
            Preset::VllmA10g => "vllm-a10g",
            Preset::Interference => "interference",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Preset::Reference => "Reference study (continuous, reserve KV, B=8, K=8192)",
            Preset::VllmA10g => "vLLM on A10G · Qwen2.5-1.5B · ShareGPT",
            Preset::Interference => "Profiler interference: short/long mix, prefill stalls decode",
        }
    }

    pub fn from_key(s: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.key() == s)
    }

    pub fn params(self) -> Params {
        match self {
            Preset::Reference => Params::default(),
            Preset::VllmA10g => {
                // The server is the engine's vLLM-like configuration, not a copy of it.
                let server = SimConfig::vllm_like(1.0).server;
                Params {
                    preset: "vllm-a10g".into(),
                    rates: vec![0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
                    rate: 4.0,
                    lengths: Lengths::ShareGpt,
                    policy: server.policy,
                    max_batch: server.max_batch,
                    kv_tokens: server.kv_tokens,
                    block_size: server.block_size,
                    token_budget: server.token_budget,
                    kv_mode: server.kv_mode,
                    cost: Cost::A10g,
                    horizon_s: 120.0,
                    seeds: 3,
                    reference_rules: false,
                    metric: Metric::P99Ttft,
                    ..Params::default()
                }
            }
            Preset::Interference => Params {
                preset: "interference".into(),
                rates: vec![1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0],
                rate: 8.0,
                lengths: Lengths::Mixture,
                policy: Policy::Continuous,
                max_batch: 16,
                kv_tokens: 16384,
                block_size: 16,
                kv_mode: KvMode::Paged,
                horizon_s: 200.0,
                seeds: 3,
                reference_rules: false,
                metric: Metric::P99Tpot,
                ..Params::default()
            },
        }
    }
}

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
        }
    }
}

fn policy_key(p: Policy) -> &'static str {
    p.as_str()
}

fn policy_from(s: &str) -> Option<Policy> {
    Policy::ALL.into_iter().find(|p| p.as_str() == s)
}

impl Arrivals {
    pub const ALL: [Arrivals; 3] = [Arrivals::Poisson, Arrivals::Gamma, Arrivals::Deterministic];
    pub fn key(self) -> &'static str {
        match self {
            Arrivals::Poisson => "poisson",
            Arrivals::Gamma => "gamma",
            Arrivals::Deterministic => "deterministic",
        }
    }
}

impl Lengths {
    pub const ALL: [Lengths; 4] = [
        Lengths::Lognormal,
        Lengths::ShareGpt,
        Lengths::Fixed,
        Lengths::Mixture,
    ];
    pub fn key(self) -> &'static str {
        match self {
            Lengths::Lognormal => "lognormal",
            Lengths::ShareGpt => "sharegpt",
            Lengths::Fixed => "fixed",
            Lengths::Mixture => "mixture",
        }
    }
}

impl Cost {
    pub const ALL: [Cost; 4] = [Cost::Reference, Cost::A10g, Cost::Linear, Cost::Roofline];
    pub fn key(self) -> &'static str {
        match self {
            Cost::Reference => "reference",
            Cost::A10g => "a10g",
            Cost::Linear => "linear",
            Cost::Roofline => "roofline",
        }
    }
}

fn kv_key(k: KvMode) -> &'static str {
    match k {
        KvMode::Reserve => "reserve",
        KvMode::Paged => "paged",
    }
}

fn from_keys<T: Copy>(all: &[T], key: fn(T) -> &'static str, s: &str) -> Option<T> {
    all.iter().copied().find(|x| key(*x) == s)
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

/// Every text field of the page: URL key, the name the engine's messages use for it (if
/// they name it), and its label on the page.
pub const FIELDS: [(&str, Option<&str>, &str); 22] = [
    ("k", Some("burstiness"), "burstiness k"),
    ("rates", None, "rates λ [req/s]"),
    ("rate", None, "chosen λ [req/s]"),
    ("pm", Some("prompt median"), "prompt median [tok]"),
    ("ps", Some("prompt sigma"), "prompt σ"),
    ("om", Some("output median"), "output median [tok]"),
    ("os", Some("output sigma"), "output σ"),
    ("fp", Some("prompt tokens"), "prompt [tok]"),
    ("fo", Some("output tokens"), "output [tok]"),
    ("B", Some("max_batch"), "max batch B [seqs]"),
    ("K", Some("kv_tokens"), "KV capacity K [tokens]"),
    ("block", Some("block_size"), "block size [tokens]"),
    ("budget", Some("token_budget"), "token budget [tokens]"),
    ("nsys", Some("max_in_system"), "max in system n [requests]"),
    ("oh", None, "front-end overhead [ms]"),
    ("b0", Some("beta0"), "β0 [s]"),
    ("bp", Some("beta_prefill"), "β prefill [s/token]"),
    ("bd", Some("beta_decode"), "β decode [s/seq]"),
    ("T", Some("horizon_s"), "horizon T [s]"),
    ("seeds", None, "seeds"),
    ("slo_ttft", Some("slo_ttft_s"), "SLO TTFT [s]"),
    ("slo_tpot", Some("slo_tpot_s"), "SLO TPOT [s]"),
];

/// The page label of the field with URL key `key` (the key itself if it has none).
pub fn label(key: &str) -> &str {
    FIELDS.iter().find(|f| f.0 == key).map_or(key, |f| f.2)
}

/// An engine validation message with the engine's parameter names replaced by the
/// page's labels ("max_batch must be at least 1, got 0" → "max batch B [seqs] must be at
/// least 1, got 0"), so every message names a field the user can find. The engine's
/// text is not changed otherwise.
pub fn page_message(msg: &str) -> String {
    let mut out = msg.to_string();
    for (_, engine, page) in FIELDS {
        let Some(engine) = engine else { continue };
        out = replace_word(&out, engine, page);
    }
    out
}

/// A URL value [`Params::read_query`] could not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    pub key: String,
    pub text: String,
    /// Whether `key` is a parameter of the page (else the key itself is unknown).
    pub known: bool,
}

impl BadValue {
    /// "ignored URL parameter B=abc".
    pub fn message(&self) -> String {
        format!("ignored URL parameter {}={}", self.key, self.text)
    }

    /// What the page says beside the field: "max batch B [seqs]: 'abc' from the URL is
    /// not a valid value".
    pub fn field_message(&self) -> String {
        format!(
            "{}: '{}' from the URL is not a valid value",
            label(&self.key),
            self.text
        )
    }
}

/// Whether `key` is a URL key of [`Params`].
pub fn is_key(key: &str) -> bool {
    TRACE_KEYS.contains(&key)
        || Params::default()
            .to_query()
            .split('&')
            .any(|kv| kv.split_once('=').is_some_and(|(k, _)| k == key))
}

/// Time-series points of the detail run (the "Over time" view): enough that its
/// shortest window (5 %) still has 150.
pub const DETAIL_POINTS: u32 = 3000;

/// Why the parameters cannot run: a message naming fields by their page labels, and the
/// URL key of the field it is about (None: no one field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub key: Option<&'static str>,
    pub message: String,
}

impl Invalid {
    /// An engine validation error of the run at `rate`, whose rate is the field `rate_key`
    /// ("rates" or "rate").
    fn engine(e: &ConfigError, rate_key: &'static str, rate: f64) -> Invalid {
        let name = match e {
            ConfigError::NotPositive { name, .. }
            | ConfigError::Negative { name, .. }
            | ConfigError::Zero { name, .. }
            | ConfigError::OutOfRange { name, .. }
            | ConfigError::Limit(LimitError::AboveMax { name, .. })
            | ConfigError::Limit(LimitError::BelowMin { name, .. }) => Some(*name),
            ConfigError::Limit(
                LimitError::TooManyRequests { .. } | LimitError::DrainTooLong { .. },
            ) => Some("arrival rate"),
            ConfigError::KvTooSmall { .. } => Some("kv_tokens"),
            _ => None,
        };
        let message = page_message(&e.to_string());
        match name {
            // The rate and the run's size are not named by a page label: say which field.
            Some("arrival rate" | "seeds" | "grid points") => Invalid {
                key: Some(rate_key),
                message: format!("{} = {}: {message}", label(rate_key), fmt_num(rate)),
            },
            Some("per-request overhead") => Invalid {
                key: Some("oh"),
                message,
            },
            Some(n) => Invalid {
                key: FIELDS.iter().find(|f| f.1 == Some(n)).map(|f| f.0),
                message,
            },
            None => Invalid { key: None, message },
        }
    }
}

/// Replaces `word` where it stands alone (not inside a longer identifier).
fn replace_word(s: &str, word: &str, with: &str) -> String {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + word.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(ident) || after.is_some_and(ident) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[i + word.len()..];
    }
    out.push_str(rest);
    out
}

/// Formats rates as the comma list [`parse_rates`] reads.
pub fn format_rates(r: &[f64]) -> String {
    r.iter().map(|x| fmt_num(*x)).collect::<Vec<_>>().join(",")
}

/// Shortest round-tripping decimal.
pub fn fmt_num(x: f64) -> String {
    format!("{x}")
}

impl Params {
    /// The engine workload at `rate`.
    pub fn workload(&self, rate: f64) -> Workload {
        let arrivals = match self.arrivals {
            Arrivals::Poisson => ArrivalProcess::Poisson { rate },
            Arrivals::Gamma => ArrivalProcess::Gamma {
                rate,
                burstiness: self.burstiness,
            },
            Arrivals::Deterministic => ArrivalProcess::Deterministic { rate },
        };
        let lengths = match self.lengths {
            Lengths::Lognormal => LengthDist::Lognormal {
                prompt_median: self.prompt_median,
                prompt_sigma: self.prompt_sigma,
                output_median: self.output_median,
                output_sigma: self.output_sigma,
            },
            Lengths::ShareGpt => LengthDist::sharegpt(),
            Lengths::Fixed => LengthDist::Fixed {
                prompt: self.fixed_prompt,
                output: self.fixed_output,
            },
            Lengths::Mixture => LengthDist::short_long_mix(),
        };
        self.trace_workload(
            rate,
            Workload {
                arrivals,
                lengths,
                max_model_len: None,
                shared: None,
            },
        )
    }

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
    fn admit_all_config(&self, rate: f64, seed: u64) -> SimConfig {
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

    /// Checks the parameters the way the engine will, plus the page's own limits.
    ///
    /// # Errors
    /// A readable message naming the fields by their labels on the page
    /// ([`page_message`]).
    pub fn validate(&self) -> Result<(), String> {
        self.check().map_err(|e| e.message)
    }

    /// [`Params::validate`], saying which field the problem is with.
    ///
    /// Every run the page would start is checked against the engine's policy
    /// (docs/model.md, Limits) before a job goes to a worker: each swept rate's and the
    /// chosen rate's configuration ([`SimConfig::validate`]), the worker's memory (it keeps
    /// every seed's requests for a rate: seeds × [`engine::SimConfig::expected_requests`] against
    /// [`Limits::max_requests_per_sweep`]), the sweep as a whole ([`SweepSpec::validate`])
    /// and the detail run (records and time series kept).
    ///
    /// # Errors
    /// The first problem found, with the URL key of its field when it has one.
    pub fn check(&self) -> Result<(), Invalid> {
        let at = |key: &'static str, message: String| Invalid {
            key: Some(key),
            message,
        };
        if self.rates.is_empty() {
            return Err(at(
                "rates",
                format!("{}: give at least one arrival rate", label("rates")),
            ));
        }
        if !(1..=50).contains(&self.seeds) {
            return Err(at(
                "seeds",
                format!("{} must be between 1 and 50", label("seeds")),
            ));
        }
        if self.trace.is_none() && !(self.horizon_s > 0.0 && self.horizon_s <= 100_000.0) {
            return Err(at("T", format!("{} must be in (0, 100000]", label("T"))));
        }
        self.check_trace()?;
        let limits = Limits::default();
        let runs = || {
            self.rates
                .iter()
                .map(|&r| ("rates", r))
                .chain([("rate", self.rate)])
        };
        // Admitting everything first: the DP threshold is derived from this configuration,
        // on the page's own thread, so its sizes must be within bounds before.
        for (key, r) in runs() {
            let cfg = self.admit_all_config(r, 0);
            cfg.validate().map_err(|e| Invalid::engine(&e, key, r))?;
            let held = self.seeds as f64 * cfg.expected_requests();
            // NaN counts as over, as the engine counts it.
            if held.is_nan() || held > limits.max_requests_per_sweep {
                return Err(at(
                    key,
                    format!(
                        "{} = {}: {} seeds × ≈ {:.1e} requests each would hold ≈ {held:.1e} requests in memory, over the limit of {:.1e} (max_requests_per_sweep); lower the rate, {} or {}",
                        label(key),
                        fmt_num(r),
                        self.seeds,
                        cfg.expected_requests(),
                        limits.max_requests_per_sweep,
                        label("T"),
                        label("seeds"),
                    ),
                ));
            }
        }
        let sweep = SweepSpec {
            base: self.admit_all_config(self.rates[0], 0),
            rates: self.rates.clone(),
            max_batches: vec![self.max_batch],
            kv_tokens: vec![self.kv_tokens],
            seeds: (0..self.seeds as u64).collect(),
            reuse: true,
        };
        sweep
            .validate_with(&limits)
            .map_err(|e| Invalid::engine(&e, "rates", self.rates[0]))?;
        if self.admission == AdmissionRule::Dp {
            self.dp_threshold().map_err(|e| Invalid {
                key: Some("slo_ttft"),
                message: format!("threshold (DP) admission: {e}"),
            })?;
        }
        for (key, r) in runs() {
            self.sim_config(r, 0)
                .validate()
                .map_err(|e| Invalid::engine(&e, key, r))?;
        }
        let mut detail = self.sim_config(self.rate, 0);
        detail.keep_records = true;
        detail.timeseries_points = DETAIL_POINTS;
        detail
            .validate()
            .map_err(|e| Invalid::engine(&e, "rate", self.rate))
    }

    /// Sets the field `key` from the text the user typed: the new parameters, or a
    /// message naming the field by its label when the text is not a value of that field.
    /// Whether the parameters as a whole are valid is [`Params::validate`]'s business.
    ///
    /// # Errors
    /// "chosen λ [req/s]: 'abc' is not a valid value".
    pub fn edited(&self, key: &str, text: &str) -> Result<Params, String> {
        let mut p = self.clone();
        if p.set(key, text.trim()) {
            Ok(p)
        } else {
            Err(format!("{}: '{text}' is not a valid value", label(key)))
        }
    }

    /// The URL query string (without `?`) that reproduces this view.
    pub fn to_query(&self) -> String {
        let mut q: Vec<(&str, String)> = vec![
            ("preset", self.preset.clone()),
            ("arr", self.arrivals.key().into()),
            ("k", fmt_num(self.burstiness)),
            ("rates", format_rates(&self.rates)),
            ("rate", fmt_num(self.rate)),
            ("len", self.lengths.key().into()),
            ("pm", fmt_num(self.prompt_median)),
            ("ps", fmt_num(self.prompt_sigma)),
            ("om", fmt_num(self.output_median)),
            ("os", fmt_num(self.output_sigma)),
            ("fp", self.fixed_prompt.to_string()),
            ("fo", self.fixed_output.to_string()),
            ("policy", policy_key(self.policy).into()),
            ("B", self.max_batch.to_string()),
            ("K", self.kv_tokens.to_string()),
            ("block", self.block_size.to_string()),
            ("budget", self.token_budget.to_string()),
            ("kv", kv_key(self.kv_mode).into()),
            ("adm", self.admission.key().into()),
            ("nsys", self.max_in_system.to_string()),
            ("oh", fmt_num(self.overhead_ms)),
            ("cost", self.cost.key().into()),
            ("b0", fmt_num(self.beta0)),
            ("bp", fmt_num(self.beta_prefill)),
            ("bd", fmt_num(self.beta_decode)),
            ("gpu", self.gpu.clone()),
            ("llm", self.llm.clone()),
            ("T", fmt_num(self.horizon_s)),
            ("seeds", self.seeds.to_string()),
            ("refrules", (self.reference_rules as u8).to_string()),
            ("slo_ttft", fmt_num(self.slo_ttft_s)),
            ("slo_tpot", fmt_num(self.slo_tpot_s)),
            ("metric", self.metric.key().into()),
        ];
        q.extend(self.trace_query());
        // The preset is written even when empty, so that it reads back as it is.
        q.retain(|(k, v)| *k == "preset" || !v.is_empty());
        q.iter()
            .map(|(k, v)| format!("{k}={}", v.replace(',', "%2C")))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// Reads a query string (with or without `?`). Starts from the named preset (or the
    /// default), then applies every recognised key.
    ///
    /// Returns the parameters and a list of problems (bad values are skipped, not fatal).
    pub fn from_query(query: &str) -> (Params, Vec<String>) {
        let (p, bad) = Params::read_query(query);
        (p, bad.iter().map(BadValue::message).collect())
    }

    /// [`Params::from_query`], with each value it could not read: its key and text as
    /// the URL has them, so the page can show them where the user fixes them.
    pub fn read_query(query: &str) -> (Params, Vec<BadValue>) {
        let query = query.trim_start_matches('?');
        let pairs: Vec<(String, String)> = query
            .split('&')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (k.to_string(), v.replace("%2C", ",").replace("%2c", ","))
            })
            .collect();
        let mut p = pairs
            .iter()
            .find(|(k, _)| k == "preset")
            .and_then(|(_, v)| Preset::from_key(v))
            .map(Preset::params)
            .unwrap_or_default();
        let mut bad = Vec::new();
        for (k, v) in &pairs {
            if !p.set(k, v) {
                bad.push(BadValue {
                    known: is_key(k),
                    key: k.clone(),
                    text: v.clone(),
                });
            }
        }
        (p, bad)
    }

    /// One parameter's value by its URL key, as text (empty if unknown).
    pub fn get(&self, key: &str) -> String {
        self.to_query()
            .split('&')
            .find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v.replace("%2C", ","))
            })
            .unwrap_or_default()
    }

    /// Sets one parameter by its URL key; false if the key or value is not understood.
    pub fn set(&mut self, key: &str, v: &str) -> bool {
        fn f(v: &str) -> Option<f64> {
            v.parse::<f64>().ok().filter(|x| x.is_finite())
        }
        fn u<T: std::str::FromStr>(v: &str) -> Option<T> {
            v.parse::<T>().ok()
        }
        macro_rules! put {
            ($field:expr, $val:expr) => {
                match $val {
                    Some(x) => {
                        $field = x;
                        true
                    }
                    None => false,
                }
            };
        }
        match key {
            "preset" => {
                self.preset = v.to_string();
                true
            }
            "arr" => put!(self.arrivals, from_keys(&Arrivals::ALL, Arrivals::key, v)),
            "k" => put!(self.burstiness, f(v)),
            "rates" => put!(self.rates, parse_rates(v).ok()),
            "rate" => put!(self.rate, f(v).filter(|x| *x > 0.0)),
            "len" => put!(self.lengths, from_keys(&Lengths::ALL, Lengths::key, v)),
            "pm" => put!(self.prompt_median, f(v)),
            "ps" => put!(self.prompt_sigma, f(v)),
            "om" => put!(self.output_median, f(v)),
            "os" => put!(self.output_sigma, f(v)),
            "fp" => put!(self.fixed_prompt, u(v)),
            "fo" => put!(self.fixed_output, u(v)),
            "policy" => put!(self.policy, policy_from(v)),
            "B" => put!(self.max_batch, u(v)),
            "K" => put!(self.kv_tokens, u(v)),
            "block" => put!(self.block_size, u(v)),
            "budget" => put!(self.token_budget, u(v)),
            "oh" => put!(self.overhead_ms, f(v).filter(|x| *x >= 0.0)),
            "kv" => put!(
                self.kv_mode,
                from_keys(&[KvMode::Reserve, KvMode::Paged], kv_key, v)
            ),
            "adm" => put!(
                self.admission,
                from_keys(&AdmissionRule::ALL, AdmissionRule::key, v)
            ),
            "nsys" => put!(self.max_in_system, u(v)),
            "cost" => put!(self.cost, from_keys(&Cost::ALL, Cost::key, v)),
            "b0" => put!(self.beta0, f(v)),
            "bp" => put!(self.beta_prefill, f(v)),
            "bd" => put!(self.beta_decode, f(v)),
            "gpu" => put!(
                self.gpu,
                engine::cost::roofline::GPUS
                    .iter()
                    .find(|g| g.name == v)
                    .map(|g| g.name.to_string())
            ),
            "llm" => put!(
                self.llm,
                engine::cost::roofline::MODELS
                    .iter()
                    .find(|m| m.name == v)
                    .map(|m| m.name.to_string())
            ),
            "T" => put!(self.horizon_s, f(v)),
            "seeds" => put!(self.seeds, u(v)),
            "refrules" => put!(
                self.reference_rules,
                matches!(v, "0" | "1").then_some(v == "1")
            ),
            "slo_ttft" => put!(self.slo_ttft_s, f(v)),
            "slo_tpot" => put!(self.slo_tpot_s, f(v)),
            "metric" => put!(self.metric, Metric::from_key(v)),
            "trace" | "trace_id" => self.set_trace_key(key, v),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trips_for_every_preset() {
        for preset in Preset::ALL {
            let mut p = preset.params();
            p.rates = vec![0.25, 1.5, 3.0];
            p.max_batch = 12;
            p.metric = Metric::Blocking;
            let (back, errs) = Params::from_query(&format!("?{}", p.to_query()));
            assert!(errs.is_empty(), "{errs:?}");
            assert_eq!(back, p);
        }
    }

    #[test]
    fn the_front_end_overhead_reaches_the_engine_and_the_url() {
        let p = Params::default().edited("oh", "2.5").unwrap();
        assert_eq!(p.sim_config(1.0, 0).server.overhead_s, 0.0025);
        let (back, errs) = Params::from_query(&p.to_query());
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(back.overhead_ms, 2.5);
        for bad in ["-1", "x", "NaN"] {
            let e = Params::default().edited("oh", bad).unwrap_err();
            assert!(e.contains("front-end overhead [ms]"), "{e}");
        }
        // links made before the field existed still load, with no overhead
        let (old, errs) = Params::from_query("B=4&K=4096");
        assert!(errs.is_empty() && old.overhead_ms == 0.0);
    }

    #[test]
    fn the_admission_rule_reaches_the_engine_and_the_url() {
        // Links made before the rule existed admit everything.
        let (old, errs) = Params::from_query("B=4&K=4096");
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(old.admission, AdmissionRule::All);
        assert_eq!(old.sim_config(1.0, 0).server.admission, Admission::All);

        let (p, errs) = Params::from_query("adm=threshold&nsys=5");
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            p.sim_config(2.0, 1).server.admission,
            Admission::MaxInSystem { max_in_system: 5 }
        );
        p.validate().unwrap();
        let (back, errs) = Params::from_query(&p.to_query());
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(back, p);
        let e = p.edited("nsys", "0").unwrap().validate().unwrap_err();
        assert!(e.starts_with("max in system n [requests]"), "{e}");

        // The DP rule: the engine's threshold for the SLO, at each run's B and K.
        let (mut dp, errs) = Params::from_query("adm=dp&slo_ttft=3");
        assert!(errs.is_empty(), "{errs:?}");
        dp.validate().unwrap();
        let base = Params::default().sim_config(dp.rate, 0);
        let want = engine::analytic::dp_threshold(&base, 3.0)
            .unwrap()
            .max_in_system;
        assert_eq!(dp.dp_threshold(), Ok(want));
        assert_eq!(
            dp.sim_config(dp.rate, 0).server.admission,
            Admission::MaxInSystem {
                max_in_system: want
            }
        );
        let mut small = dp.sim_config(dp.rate, 0);
        small.server.kv_tokens = 2048;
        dp.resolve_admission(&mut small);
        let mut small_all = base.clone();
        small_all.server.kv_tokens = 2048;
        let want_small = engine::analytic::dp_threshold(&small_all, 3.0)
            .unwrap()
            .max_in_system;
        assert_ne!(want_small, want, "the threshold follows the run's K");
        assert_eq!(
            small.server.admission,
            Admission::MaxInSystem {
                max_in_system: want_small
            }
        );
        let (back, _) = Params::from_query(&dp.to_query());
        assert_eq!(back, dp);
        // An SLO no threshold can meet is said plainly, by the rule's name.
        dp.slo_ttft_s = 1e-4;
        let e = dp.validate().unwrap_err();
        assert!(e.starts_with("threshold (DP) admission: "), "{e}");
    }

    #[test]
    fn bad_query_values_are_reported_and_skipped() {
        let (p, errs) = Params::from_query("B=abc&rates=1,x&zzz=1&K=4096");
        assert_eq!(p.max_batch, Params::default().max_batch);
        assert_eq!(p.kv_tokens, 4096);
        assert_eq!(errs.len(), 3);
    }

    #[test]
    fn roofline_cost_sets_kv_from_the_gpu() {
        let (mut p, errs) = Params::from_query("cost=roofline&gpu=A10G&llm=Qwen2.5-1.5B&K=4096");
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(p.kv_tokens, 4096, "a shared K survives reading the URL");
        p.apply_roofline_kv();
        assert!(p.kv_tokens > 400_000, "{}", p.kv_tokens);
        assert!(matches!(p.cost_model(), CostModel::Roofline(_)));
        p.validate().unwrap();
        let (back, _) = Params::from_query(&p.to_query());
        assert_eq!(back, p);
        let (_, errs) = Params::from_query("gpu=TPU");
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn presets_validate() {
        for preset in Preset::ALL {
            preset.params().validate().unwrap();
        }
        let p = Params::default();
        assert_eq!(p.sim_config(1.0, 0), SimConfig::reference(1.0, 8, 8192));
    }

    #[test]
    fn get_reads_what_set_writes() {
        let mut p = Params::default();
        assert!(p.set("rates", "1,2.5"));
        assert_eq!(p.get("rates"), "1,2.5");
        assert_eq!(p.get("B"), "8");
        assert_eq!(p.get("nope"), "");
    }

    #[test]
    fn messages_name_fields_by_their_page_labels() {
        let p = Params {
            max_batch: 0,
            ..Params::default()
        };
        let e = p.validate().unwrap_err();
        assert_eq!(e, "max batch B [seqs] must be at least 1, got 0");
        let p = Params {
            fixed_prompt: 300,
            fixed_output: 100,
            lengths: Lengths::Fixed,
            kv_tokens: 256,
            ..Params::default()
        };
        let e = p.validate().unwrap_err();
        assert!(e.ends_with("raise KV capacity K [tokens]"), "{e}");
        // Only whole words: a longer identifier keeps its name.
        assert_eq!(
            page_message("max_batch_x and beta0 + beta_decode > 0"),
            "max_batch_x and β0 [s] + β decode [s/seq] > 0"
        );
        assert_eq!(
            Params::default().edited("rate", "abc").unwrap_err(),
            "chosen λ [req/s]: 'abc' is not a valid value"
        );
        // Every text field has a label, and each label is unique.
        let mut labels: Vec<&str> = FIELDS.iter().map(|f| f.2).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), FIELDS.len());
        for (key, _, _) in FIELDS {
            assert!(
                !Params::default().get(key).is_empty(),
                "{key} is a parameter"
            );
        }
    }

    #[test]
    fn correcting_a_value_gives_back_the_same_parameters() {
        // B = 0 is a number (set), but invalid (validate says so by its label); setting
        // 8 again gives parameters equal to the last valid ones, which validate.
        let shown = Params::default();
        let bad = shown.edited("B", "0").unwrap();
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("max batch B [seqs]"));
        let back = bad.edited("B", " 8 ").unwrap();
        assert_eq!(back, shown);
        assert!(back.validate().is_ok());
        // A value that is not a number leaves the parameters alone.
        assert!(shown.edited("rate", "abc").is_err());
        assert_eq!(shown.edited("rate", "4").unwrap(), shown);
    }

    #[test]
    fn rates_parse() {
        assert_eq!(parse_rates("3, 1,2,2").unwrap(), vec![1.0, 2.0, 3.0]);
        assert!(parse_rates("").is_err());
        assert!(parse_rates("1,-2").is_err());
    }

    #[test]
    fn values_past_the_engines_bounds_are_refused_by_their_field() {
        // Each URL that used to reach a worker and trap, with the field it is about.
        for (query, key) in [
            ("rates=1e5", "rates"),
            ("rate=1e308", "rate"),
            ("B=4294967295", "B"),
            ("K=18446744073709551615", "K"),
            ("arr=gamma&k=1e-300", "k"),
        ] {
            let (p, bad) = Params::read_query(query);
            assert!(bad.is_empty(), "{query}: {bad:?}");
            let e = p.check().unwrap_err();
            assert_eq!(e.key, Some(key), "{query}: {e:?}");
            assert!(e.message.contains(label(key)), "{query}: {}", e.message);
        }
        // Within the engine's per-run limit, but not the seeds the worker holds at once.
        let p = Params::read_query("rates=40&T=100000&seeds=40").0;
        assert!(p.sim_config(40.0, 0).validate().is_ok());
        let e = p.check().unwrap_err();
        assert_eq!(e.key, Some("rates"));
        assert!(
            e.message.contains("max_requests_per_sweep"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_bad_url_value_keeps_its_key_and_text() {
        let (_, bad) = Params::read_query("B=abc&zzz=1");
        assert_eq!(
            bad,
            vec![
                BadValue {
                    key: "B".into(),
                    text: "abc".into(),
                    known: true
                },
                BadValue {
                    key: "zzz".into(),
                    text: "1".into(),
                    known: false
                },
            ]
        );
        assert_eq!(
            bad[0].field_message(),
            "max batch B [seqs]: 'abc' from the URL is not a valid value"
        );
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod props;
pub mod trace;
