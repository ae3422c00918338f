//! The page's kinds (arrivals, lengths, cost model, admission rule), their URL keys, and
//! the named presets.

use super::Params;
use crate::metric::Metric;
use engine::config::{KvMode, Policy, PrefixCache, SimConfig};
use serde::{Deserialize, Serialize};

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

pub(super) fn policy_key(p: Policy) -> &'static str {
    p.as_str()
}

pub(super) fn policy_from(s: &str) -> Option<Policy> {
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

pub(super) fn kv_key(k: KvMode) -> &'static str {
    match k {
        KvMode::Reserve => "reserve",
        KvMode::Paged => "paged",
    }
}

pub(super) fn prefix_cache_key(c: PrefixCache) -> &'static str {
    match c {
        PrefixCache::Off => "off",
        PrefixCache::Apc => "apc",
        PrefixCache::Slot => "slot",
    }
}

pub(super) fn from_keys<T: Copy>(all: &[T], key: fn(T) -> &'static str, s: &str) -> Option<T> {
    all.iter().copied().find(|x| key(*x) == s)
}
