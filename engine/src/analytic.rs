//! Analytical queueing models (`docs/model.md`, Analytical models), one file per model
//! under `analytic/`.
//!
//! * Textbook closed forms, each validating its parameters in `new()` and returning an
//!   explicit [`Stability::Unstable`] instead of a NaN when ρ ≥ 1: [`Little`], [`Mm1`],
//!   [`Mmc`] (Erlang C), [`erlang_b`], [`Mmck`], [`Mg1`] (Pollaczek–Khinchine),
//!   [`Kingman`] (G/G/1) and [`AllenCunneen`] (G/G/c).
//! * The reference study's models, reproduced with their simplifications:
//!   [`ReferenceMmc`], [`ReferenceChain`] (two-stage birth–death), [`ReferenceCtmc`]
//!   (multi-class, solved with a sparse iterative solver) and the threshold (DP) admission
//!   rule [`dp_threshold`].
//! * [`capacity`]: compute / KV / slot bounds and an SLO capacity search.
//! * [`predict_prefix_cache`]: the prefix cache's hit rate by Che's approximation for
//!   LRU ([`CheLru`]), and its mean TTFT through the batching model.
//! * [`BatchingModel`]: the batching model, a state-dependent knapsack + transient
//!   birth–death model that accounts for joiner prefill stalls, length variance and
//!   size-biased admission.
//!
//! Every server-level model is reachable through one entry point, [`predict`], so
//! comparisons can loop over [`ModelKind::ALL`].
//!
//! # Examples
//! ```
//! use engine::analytic::{predict, ModelKind};
//! use engine::SimConfig;
//! let cfg = SimConfig::reference(1.0, 8, 8192);
//! for kind in ModelKind::ALL {
//!     let p = predict(kind, &cfg).unwrap();
//!     if let Some(m) = p.metrics() {
//!         assert!(m.ttft_mean_s > 0.0 && m.blocking >= 0.0);
//!     }
//! }
//! ```

mod atoms;
mod batching;
mod birth_death;
pub mod capacity;
mod ctmc;
mod disagg;
mod erlang;
mod fleet;
mod ggc;
mod lengths;
mod little;
mod mg1;
mod mm1;
mod prefix_cache;
mod reference_mmc;
mod special;
mod threshold;

pub use batching::BatchingModel;
pub use birth_death::ReferenceChain;
pub use capacity::{capacity_bounds, slo_capacity, Bound, CapacityBounds, SloCapacity};
pub use ctmc::ReferenceCtmc;
pub use disagg::{predict_disagg, DecodePoolPrediction, DisaggPrediction, DisaggSplits};
pub use erlang::{erlang_b, erlang_c, Mmc, Mmck};
pub use fleet::{predict_fleet, supermarket_tail, FleetPrediction, ReplicaPrediction};
pub use ggc::{ca2_from_burstiness, AllenCunneen, Kingman};
pub use little::Little;
pub use mg1::Mg1;
pub use mm1::Mm1;
pub use prefix_cache::{predict_prefix_cache, CheLru, PrefixPrediction};
pub use reference_mmc::ReferenceMmc;
pub use threshold::{dp_threshold, Threshold};

use crate::config::SimConfig;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why an analytical model cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum AnalyticError {
    /// A parameter is outside the model's domain (negative rate, zero servers, NaN).
    /// Pass a value inside the stated range.
    #[error("{name} = {value} is invalid: {why}")]
    Invalid {
        name: &'static str,
        value: f64,
        why: &'static str,
    },
    /// The simulation configuration itself is invalid; fix it as the inner error says.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The model does not cover this configuration (policy, KV mode or cost model);
    /// use another model or the simulator.
    #[error("{model} does not support {what}")]
    Unsupported { model: &'static str, what: String },
    /// A numerical solver did not converge; report it (it should not happen on valid input).
    #[error("{what} did not converge (residual {residual:e})")]
    NoConvergence { what: &'static str, residual: f64 },
}

/// Checks `value` is finite and > 0.
pub(crate) fn check_positive(name: &'static str, value: f64) -> Result<f64, AnalyticError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(AnalyticError::Invalid {
            name,
            value,
            why: "must be a finite number > 0",
        })
    }
}

/// Checks `value` is finite and ≥ 0.
pub(crate) fn check_non_negative(name: &'static str, value: f64) -> Result<f64, AnalyticError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(AnalyticError::Invalid {
            name,
            value,
            why: "must be a finite number >= 0",
        })
    }
}

/// Checks a probability level is in (0, 1).
pub(crate) fn check_level(q: f64) -> Result<f64, AnalyticError> {
    if q.is_finite() && q > 0.0 && q < 1.0 {
        Ok(q)
    } else {
        Err(AnalyticError::Invalid {
            name: "quantile level",
            value: q,
            why: "must be in (0, 1)",
        })
    }
}

/// Whether a queue has a steady state.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Stability {
    /// ρ < 1 (or a finite/loss system): a steady state exists.
    Stable { rho: f64 },
    /// ρ ≥ 1: the queue grows without bound; waits are infinite, not a number.
    Unstable { rho: f64 },
}

impl Stability {
    /// Classifies an offered utilisation ρ.
    pub fn of(rho: f64) -> Stability {
        if rho < 1.0 {
            Stability::Stable { rho }
        } else {
            Stability::Unstable { rho }
        }
    }

    /// The utilisation ρ either way.
    pub fn rho(self) -> f64 {
        match self {
            Stability::Stable { rho } | Stability::Unstable { rho } => rho,
        }
    }

    pub fn is_stable(self) -> bool {
        matches!(self, Stability::Stable { .. })
    }
}

impl std::fmt::Display for Stability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stability::Stable { rho } => write!(f, "stable: ρ = {rho:.3}"),
            Stability::Unstable { rho } => write!(f, "unstable: ρ = {rho:.3}"),
        }
    }
}

/// What a server-level model predicts for one configuration (`docs/model.md`, Metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Mean TTFT [s].
    pub ttft_mean_s: f64,
    /// Median TTFT [s].
    pub ttft_p50_s: f64,
    /// 95th percentile TTFT [s].
    pub ttft_p95_s: f64,
    /// 99th percentile TTFT [s].
    pub ttft_p99_s: f64,
    /// Mean TPOT [s/token].
    pub tpot_mean_s: f64,
    /// Goodput (a): completed requests per second [req/s].
    pub goodput_rps: f64,
    /// Blocking probability (rejected / arrivals).
    pub blocking: f64,
    /// Utilisation: mean fraction of batch slots busy.
    pub utilisation: f64,
    /// Fraction of arrivals meeting TTFT ≤ `slo_ttft_s` and TPOT ≤ `slo_tpot_s` of the
    /// configuration's [`crate::metrics::MetricsConfig`] (blocked arrivals miss it).
    pub slo_attainment: f64,
}

impl Predicted {
    /// Whether every number is finite (a NaN or infinity would be written to JSON as
    /// `null` and fail to read back as a number).
    pub fn is_finite(&self) -> bool {
        [
            self.ttft_mean_s,
            self.ttft_p50_s,
            self.ttft_p95_s,
            self.ttft_p99_s,
            self.tpot_mean_s,
            self.goodput_rps,
            self.blocking,
            self.utilisation,
            self.slo_attainment,
        ]
        .iter()
        .all(|x| x.is_finite())
    }
}

/// A model's answer: metrics, or an explicit statement that the queue is unstable.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Prediction {
    /// A steady (or finite-horizon) prediction.
    Stable(Predicted),
    /// The queue grows without bound at this load ("unstable: ρ = 1.3").
    Unstable { rho: f64 },
}

impl Prediction {
    /// The metrics when stable.
    pub fn metrics(&self) -> Option<&Predicted> {
        match self {
            Prediction::Stable(m) => Some(m),
            Prediction::Unstable { .. } => None,
        }
    }
}

impl std::fmt::Display for Prediction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prediction::Stable(m) => write!(
                f,
                "TTFT mean {:.4} s p99 {:.4} s, goodput {:.3} req/s, blocking {:.4}",
                m.ttft_mean_s, m.ttft_p99_s, m.goodput_rps, m.blocking
            ),
            Prediction::Unstable { rho } => write!(f, "unstable: ρ = {rho:.3}"),
        }
    }
}

/// The server-level models [`predict`] can evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    /// The reference study's M/M/C baseline.
    ReferenceMmc,
    /// The reference study's two-stage birth–death chain.
    ReferenceChain,
    /// The reference study's multi-class CTMC.
    ReferenceCtmc,
    /// The batching model ([`BatchingModel`]); `ours` is accepted as its former name.
    #[serde(alias = "ours")]
    Batching,
}

impl ModelKind {
    pub const ALL: [ModelKind; 4] = [
        ModelKind::ReferenceMmc,
        ModelKind::ReferenceChain,
        ModelKind::ReferenceCtmc,
        ModelKind::Batching,
    ];

    /// Short machine name (CSV columns, CLI values).
    pub fn as_str(self) -> &'static str {
        match self {
            ModelKind::ReferenceMmc => "reference_mmc",
            ModelKind::ReferenceChain => "reference_chain",
            ModelKind::ReferenceCtmc => "reference_ctmc",
            ModelKind::Batching => "batching",
        }
    }

    /// The model named `name`: its [`as_str`](Self::as_str) name, with `-` for `_`
    /// allowed, or `ours`, the batching model's former name (old URLs and scripts).
    pub fn from_name(name: &str) -> Option<ModelKind> {
        let name = name.trim().to_ascii_lowercase().replace('-', "_");
        if name == "ours" {
            return Some(ModelKind::Batching);
        }
        ModelKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Human-readable name (legends).
    pub fn label(self) -> &'static str {
        match self {
            ModelKind::ReferenceMmc => "M/M/C baseline (reference)",
            ModelKind::ReferenceChain => "birth–death chain (reference)",
            ModelKind::ReferenceCtmc => "multi-class CTMC (reference)",
            ModelKind::Batching => "batching model",
        }
    }
}

/// Evaluates `model` on `cfg`.
///
/// # Errors
/// [`AnalyticError::Config`] for an invalid configuration, [`AnalyticError::Unsupported`]
/// when the model does not cover the policy / KV mode / cost model.
pub fn predict(model: ModelKind, cfg: &SimConfig) -> Result<Prediction, AnalyticError> {
    predict_pooled(model, cfg, 1.0, false)
}

/// [`predict`] for one of `pooled` servers whose queues move as one, routed to by least
/// outstanding work if `by_work` (only the batching model covers `pooled > 1` and
/// `by_work`; see `fleet.rs`).
fn predict_pooled(
    model: ModelKind,
    cfg: &SimConfig,
    pooled: f64,
    by_work: bool,
) -> Result<Prediction, AnalyticError> {
    cfg.validate()?;
    let h = cfg.server.overhead_s;
    if h > 0.0 {
        // A per-request front-end overhead is a pure delay before the server: every
        // model predicts the server without it, with the TTFT SLO tightened by it, and
        // the overhead is added to each TTFT (a constant shifts every quantile).
        let mut inner = cfg.clone();
        inner.server.overhead_s = 0.0;
        inner.metrics.slo_ttft_s = (cfg.metrics.slo_ttft_s - h).max(f64::MIN_POSITIVE);
        return Ok(match predict_pooled(model, &inner, pooled, by_work)? {
            Prediction::Stable(mut m) => {
                m.ttft_mean_s += h;
                m.ttft_p50_s += h;
                m.ttft_p95_s += h;
                m.ttft_p99_s += h;
                Prediction::Stable(m)
            }
            unstable => unstable,
        });
    }
    if (pooled > 1.0 || by_work) && model != ModelKind::Batching {
        return Err(AnalyticError::Unsupported {
            model: model.as_str(),
            what: "pooled (join-the-shortest-queue) servers".into(),
        });
    }
    match model {
        ModelKind::ReferenceMmc => Ok(ReferenceMmc::from_config(cfg)?.prediction(cfg)),
        ModelKind::ReferenceChain => Ok(ReferenceChain::from_config(cfg)?.prediction(cfg)),
        ModelKind::ReferenceCtmc => Ok(ReferenceCtmc::from_config(cfg)?.prediction(cfg)),
        ModelKind::Batching => BatchingModel::from_config(cfg)?
            .pooled(pooled)
            .routed_by_work(by_work)
            .prediction(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_front_end_overhead_shifts_every_models_ttft_and_tightens_the_slo() {
        let base = SimConfig::reference(2.0, 8, 8192);
        let h = 0.25;
        let mut with = base.clone();
        with.server.overhead_s = h;
        let mut tighter = base.clone();
        tighter.metrics.slo_ttft_s -= h;
        for model in ModelKind::ALL {
            let (a, b) = (
                predict(model, &base).unwrap(),
                predict(model, &with).unwrap(),
            );
            let (Some(a), Some(b)) = (a.metrics(), b.metrics()) else {
                continue;
            };
            let name = model.as_str();
            for (x, y) in [
                (a.ttft_mean_s, b.ttft_mean_s),
                (a.ttft_p50_s, b.ttft_p50_s),
                (a.ttft_p95_s, b.ttft_p95_s),
                (a.ttft_p99_s, b.ttft_p99_s),
            ] {
                assert!((y - x - h).abs() < 1e-12, "{name}: TTFT {x} → {y}");
            }
            assert_eq!(
                (a.tpot_mean_s, a.goodput_rps, a.blocking),
                (b.tpot_mean_s, b.goodput_rps, b.blocking),
                "{name}"
            );
            let t = predict(model, &tighter).unwrap();
            assert_eq!(
                b.slo_attainment,
                t.metrics().unwrap().slo_attainment,
                "{name}"
            );
        }
        let batching = predict(ModelKind::Batching, &with).unwrap();
        assert!(
            batching.metrics().is_some(),
            "the batching model covers λ = 2, B = 8"
        );
    }

    #[test]
    fn the_batching_model_keeps_its_former_name_as_an_alias() {
        for name in ["batching", "Batching", "ours", "OURS"] {
            assert_eq!(
                ModelKind::from_name(name),
                Some(ModelKind::Batching),
                "{name}"
            );
        }
        assert_eq!(
            ModelKind::from_name("reference-chain"),
            Some(ModelKind::ReferenceChain)
        );
        assert_eq!(ModelKind::from_name("kvqueue"), None);
        for kind in ModelKind::ALL {
            assert_eq!(ModelKind::from_name(kind.as_str()), Some(kind));
        }
        let old: ModelKind = serde_json::from_str("\"ours\"").unwrap();
        assert_eq!(old, ModelKind::Batching);
        assert_eq!(
            serde_json::to_string(&ModelKind::Batching).unwrap(),
            "\"batching\""
        );
    }
}
