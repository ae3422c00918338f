//! The planner: the cheapest fleet of identical replicas that meets an SLO at a given
//! traffic (`docs/model.md`, Planning).
//!
//! A *family* is one GPU offer × tensor-parallel degree × router. Its replica is the
//! roofline cost of the model on `tp` GPUs ([`crate::cost::RooflineCost`]) with the KV
//! the GPUs' memory leaves after the weights; a family whose GPUs cannot hold the weights
//! is infeasible, and says so.
//!
//! * [`screen`]: for every family, the fewest replicas whose SLO attainment, predicted by
//!   the analytical fleet model ([`crate::analytic::predict_fleet`]), reaches the target:
//!   a bisection between the capacity bound (λ over one replica's binding throughput,
//!   [`crate::analytic::capacity_bounds`]) and `max_replicas`. Microseconds per fleet.
//! * [`pareto`]: the fleets that no other fleet beats on both price and p99 TTFT, each
//!   family at its smallest count and a few more replicas.
//! * [`confirm`]: the simulator's answer for one screened fleet: the fleet simulated over
//!   seeds, its replica count moved down while the simulated attainment still meets the
//!   target and up while it does not, so the answer meets the SLO at N and misses it at
//!   N − 1, both simulated.
//! * [`screen_disagg`] and [`confirm_disagg`]: the same for fleets split into a prefill
//!   and a decode pool, by the tandem model and the disaggregated simulator.

mod confirm;
mod confirm_disagg;
mod disagg;

pub use confirm::{answer, by_simulation, confirm, Confirmed, SimFigures, Simulated};
pub use confirm_disagg::{confirm_disagg, ConfirmedDisagg};
pub use disagg::{screen_disagg, DisaggPlan, ScreenedDisagg};

use crate::analytic::{
    capacity_bounds, predict, predict_fleet, AnalyticError, Bound, ModelKind, Predicted,
};
use crate::config::SimConfig;
use crate::cost::roofline::{Gpu, ModelSpec, RooflineCost};
use crate::cost::CostModel;
use crate::fleet::{FleetConfig, RouterKind};
use serde::{Deserialize, Serialize};

/// Editable default prices [$ per GPU-hour]: round figures of the order of public
/// on-demand cloud prices, to be replaced by the user's own.
pub const DEFAULT_PRICES: &[(&str, f64)] = &[
    ("A10G", 1.0),
    ("L4", 0.8),
    ("A100-40GB", 3.0),
    ("A100-80GB", 4.0),
    ("H100", 6.0),
    ("H200", 8.0),
];

/// The default price of a GPU preset [$ per GPU-hour], if it has one.
pub fn default_price(gpu: &str) -> Option<f64> {
    DEFAULT_PRICES
        .iter()
        .find(|(g, _)| g.eq_ignore_ascii_case(gpu))
        .map(|p| p.1)
}

/// One GPU to consider and its price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// A roofline GPU preset name (`crate::cost::roofline::GPUS`).
    pub gpu: String,
    /// Price [$ per GPU-hour].
    pub usd_per_gpu_hour: f64,
}

/// What to plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanSpec {
    /// The traffic (its workload's rate is the whole fleet's), the server settings every
    /// replica shares (policy, batch width, KV mode, block size, budget), the SLO
    /// (`metrics.slo_ttft_s`, `metrics.slo_tpot_s`) and the run settings the simulator
    /// uses to confirm. Its cost and KV capacity are replaced by each family's.
    pub base: SimConfig,
    /// A roofline model preset name (`crate::cost::roofline::MODELS`).
    pub model: String,
    pub offers: Vec<Offer>,
    /// Tensor-parallel degrees to consider.
    pub tps: Vec<u32>,
    pub routers: Vec<RouterKind>,
    /// Fraction of requests that must meet the SLO (0.9: 90 %).
    pub attainment: f64,
    /// Fraction of each GPU's memory the server may use (weights + KV).
    pub mem_util: f64,
    /// Most replicas of a fleet.
    pub max_replicas: u32,
}

/// Errors of a plan's inputs.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("no candidates: {0}")]
    Empty(&'static str),
    #[error("{name} must be {want}, got {got}")]
    Range {
        name: &'static str,
        want: &'static str,
        got: String,
    },
    #[error("unknown {what} {name:?} (known: {known})")]
    Unknown {
        what: &'static str,
        name: String,
        known: String,
    },
    #[error(transparent)]
    Model(#[from] AnalyticError),
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error(transparent)]
    Disagg(#[from] crate::disagg::DisaggError),
}

/// One fleet the screen found: a family at a replica count, with the model's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Screened {
    pub gpu: String,
    pub tp: u32,
    pub router: RouterKind,
    pub replicas: u32,
    /// The fleet's price [$ per hour].
    pub usd_per_hour: f64,
    /// KV capacity of one replica [tokens].
    pub kv_tokens: u64,
    /// The analytical fleet prediction at this count.
    pub predicted: Predicted,
    /// The resource that bounds one replica's throughput.
    pub binding: Bound,
    /// Spare throughput: the replicas' summed capacity over the offered rate, minus 1.
    pub headroom: f64,
    /// Why not one replica fewer: the predicted attainment there (None: one fewer is
    /// unstable, or this is one replica).
    pub attainment_below: Option<f64>,
}

/// A family that cannot meet the SLO, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Infeasible {
    pub gpu: String,
    pub tp: u32,
    pub router: RouterKind,
    pub why: String,
}

/// The screen of every family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Screen {
    /// Each feasible family at its smallest count, cheapest first (then lowest p99 TTFT).
    pub feasible: Vec<Screened>,
    pub infeasible: Vec<Infeasible>,
    /// Fleets the analytical model evaluated.
    pub evaluated: u64,
}

impl Screen {
    /// The cheapest fleet that meets the SLO, by the model.
    pub fn best(&self) -> Option<&Screened> {
        self.feasible.first()
    }
}

/// A family's replica: its configuration and price.
#[derive(Clone, Debug)]
pub(crate) struct Family {
    gpu: String,
    tp: u32,
    router: RouterKind,
    usd_per_replica_hour: f64,
    pub(crate) replica: SimConfig,
}

impl Family {
    pub(crate) fn fleet(&self, n: u32) -> FleetConfig {
        FleetConfig::uniform(self.replica.clone(), n, self.router)
    }

    fn screened(
        &self,
        n: u32,
        predicted: Predicted,
        spec: &PlanSpec,
    ) -> Result<Screened, PlanError> {
        let cap = capacity_bounds(&self.replica)?;
        let rate = spec.base.workload.rate();
        Ok(Screened {
            gpu: self.gpu.clone(),
            tp: self.tp,
            router: self.router,
            replicas: n,
            usd_per_hour: self.usd_per_replica_hour * n as f64,
            kv_tokens: self.replica.server.kv_tokens,
            predicted,
            binding: cap.binding,
            headroom: n as f64 * cap.max_rps() / rate - 1.0,
            attainment_below: None,
        })
    }
}

impl PlanSpec {
    /// Checks the inputs.
    ///
    /// # Errors
    /// An empty candidate list, an unknown GPU or model, a price, attainment or memory
    /// fraction out of range, or an invalid base configuration.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.offers.is_empty() {
            return Err(PlanError::Empty("no GPU offers"));
        }
        if self.tps.is_empty() {
            return Err(PlanError::Empty("no tensor-parallel degrees"));
        }
        if self.routers.is_empty() {
            return Err(PlanError::Empty("no routers"));
        }
        ModelSpec::by_name(&self.model).ok_or_else(|| PlanError::Unknown {
            what: "model",
            name: self.model.clone(),
            known: crate::cost::roofline::MODELS
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        for o in &self.offers {
            Gpu::by_name(&o.gpu).ok_or_else(|| PlanError::Unknown {
                what: "GPU",
                name: o.gpu.clone(),
                known: crate::cost::roofline::GPUS
                    .iter()
                    .map(|g| g.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
            if !(o.usd_per_gpu_hour.is_finite() && o.usd_per_gpu_hour > 0.0) {
                return Err(PlanError::Range {
                    name: "price",
                    want: "a finite number > 0 [$ per GPU-hour]",
                    got: format!("{} for {}", o.usd_per_gpu_hour, o.gpu),
                });
            }
        }
        if let Some(tp) = self.tps.iter().find(|t| !(1..=64).contains(*t)) {
            return Err(PlanError::Range {
                name: "tensor parallelism",
                want: "1 to 64",
                got: tp.to_string(),
            });
        }
        if !(self.attainment > 0.0 && self.attainment < 1.0) {
            return Err(PlanError::Range {
                name: "attainment",
                want: "a fraction in (0, 1)",
                got: self.attainment.to_string(),
            });
        }
        if !(self.mem_util > 0.0 && self.mem_util <= 1.0) {
            return Err(PlanError::Range {
                name: "memory utilisation",
                want: "a fraction in (0, 1]",
                got: self.mem_util.to_string(),
            });
        }
        if !(1..=crate::limits::MAX_REPLICAS as u32).contains(&self.max_replicas) {
            return Err(PlanError::Range {
                name: "max replicas",
                want: "1 to 4096",
                got: self.max_replicas.to_string(),
            });
        }
        self.base.validate()?;
        Ok(())
    }

    /// Every family, or why it cannot run at all (the weights do not fit).
    pub(crate) fn families(&self) -> (Vec<Family>, Vec<Infeasible>) {
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        let Some(model) = ModelSpec::by_name(&self.model) else {
            return (ok, bad);
        };
        for o in &self.offers {
            let Some(gpu) = Gpu::by_name(&o.gpu) else {
                continue;
            };
            for &tp in &self.tps {
                let cost = RooflineCost::new(&gpu, &model, tp);
                let kv = cost.kv_tokens(gpu.mem_bytes, self.mem_util);
                for &router in &self.routers {
                    let block = self.base.server.block_size.max(1) as u64;
                    let kv_tokens = kv / block * block;
                    if kv_tokens == 0 {
                        bad.push(Infeasible {
                            gpu: gpu.name.to_string(),
                            tp,
                            router,
                            why: format!(
                                "{} weights ({:.1} GB over {tp} GPU) leave no room for KV at {} of {:.0} GB",
                                model.name,
                                model.weight_bytes() / 1e9,
                                self.mem_util,
                                gpu.mem_bytes / 1e9
                            ),
                        });
                        continue;
                    }
                    let mut replica = self.base.clone();
                    replica.cost = CostModel::Roofline(cost.clone());
                    replica.server.kv_tokens = kv_tokens;
                    ok.push(Family {
                        gpu: gpu.name.to_string(),
                        tp,
                        router,
                        usd_per_replica_hour: o.usd_per_gpu_hour * tp as f64,
                        replica,
                    });
                }
            }
        }
        (ok, bad)
    }
}

/// The predicted fleet at `n` replicas, None when unstable.
fn predict_at(f: &Family, n: u32) -> Result<Option<Predicted>, PlanError> {
    let p = predict_fleet(ModelKind::Batching, &f.fleet(n))?;
    Ok(p.fleet.metrics().copied())
}

fn meets(p: &Option<Predicted>, target: f64) -> bool {
    p.is_some_and(|p| p.slo_attainment >= target)
}

/// The fewest replicas of `f` meeting the target, by the model: (count, its prediction,
/// the attainment one fewer), or why none up to `max_replicas` does. The attainment grows
/// with the count; the search starts at the capacity bound, walks out by doubling steps
/// to a miss and a hit, and bisects between them.
#[allow(clippy::type_complexity)]
fn smallest(
    f: &Family,
    spec: &PlanSpec,
    count: &std::cell::Cell<u64>,
) -> Result<Result<(u32, Predicted, Option<f64>), String>, PlanError> {
    let rate = spec.base.workload.rate();
    let cap = capacity_bounds(&f.replica)?.max_rps();
    let start = if cap > 0.0 {
        (rate / cap).floor().max(1.0)
    } else {
        f64::INFINITY
    };
    if start > spec.max_replicas as f64 {
        return Ok(Err(format!(
            "needs more than {} replicas: one replica's capacity is {cap:.3} req/s against {rate} req/s",
            spec.max_replicas
        )));
    }
    let target = spec.attainment;
    let eval = |n: u32| {
        count.set(count.get() + 1);
        predict_at(f, n)
    };
    let start = start as u32;
    let p0 = eval(start)?;
    // lo: the largest count known to miss (0: none), hi: the smallest known to meet.
    let (mut lo, mut lo_p, mut hi, mut hi_p);
    if meets(&p0, target) {
        (hi, hi_p, lo, lo_p) = (start, p0, 0, None);
        let mut step = 1;
        while hi > 1 {
            let n = hi.saturating_sub(step).max(1);
            let p = eval(n)?;
            if meets(&p, target) {
                (hi, hi_p) = (n, p);
                step *= 2;
            } else {
                (lo, lo_p) = (n, p);
                break;
            }
        }
    } else {
        (lo, lo_p) = (start, p0);
        // No count can meet it when one replica at the lightest share misses it (the
        // TPOT of a request decoding alone, say): one evaluation instead of a search.
        count.set(count.get() + 1);
        let mut light = f.replica.clone();
        light.workload = light.workload.with_rate(rate / spec.max_replicas as f64);
        if let Some(p) = predict(ModelKind::Batching, &light)?.metrics() {
            if p.slo_attainment < target {
                return Ok(Err(format!(
                    "even at the lightest load ({} replicas) {:.1} % of requests meet the SLO: \
                     mean TTFT {:.3} s, mean TPOT {:.4} s",
                    spec.max_replicas,
                    100.0 * p.slo_attainment,
                    p.ttft_mean_s,
                    p.tpot_mean_s
                )));
            }
        }
        loop {
            if lo >= spec.max_replicas {
                let best = lo_p.map_or("unstable".to_string(), |p| {
                    format!(
                        "{:.1} % of requests meet the SLO (p99 TTFT {:.3} s, mean TPOT {:.4} s)",
                        100.0 * p.slo_attainment,
                        p.ttft_p99_s,
                        p.tpot_mean_s
                    )
                });
                return Ok(Err(format!(
                    "at the most replicas allowed ({}): {best}",
                    spec.max_replicas
                )));
            }
            let n = (lo * 2).min(spec.max_replicas);
            let p = eval(n)?;
            if meets(&p, target) {
                (hi, hi_p) = (n, p);
                break;
            }
            (lo, lo_p) = (n, p);
        }
    }
    while lo > 0 && hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let p = eval(mid)?;
        if meets(&p, target) {
            (hi, hi_p) = (mid, p);
        } else {
            (lo, lo_p) = (mid, p);
        }
    }
    let below = if lo == 0 {
        None
    } else {
        lo_p.map(|p| p.slo_attainment)
    };
    Ok(Ok((hi, hi_p.unwrap_or_default(), below)))
}

/// Cheaper first, then lower predicted p99 TTFT.
fn cheapest_first(a: &Screened, b: &Screened) -> std::cmp::Ordering {
    a.usd_per_hour
        .total_cmp(&b.usd_per_hour)
        .then(a.predicted.ttft_p99_s.total_cmp(&b.predicted.ttft_p99_s))
}

/// Screens every family with the analytical fleet model.
///
/// # Errors
/// The inputs' errors ([`PlanSpec::validate`]) and any error of the model.
pub fn screen(spec: &PlanSpec) -> Result<Screen, PlanError> {
    spec.validate()?;
    let (families, mut infeasible) = spec.families();
    let mut feasible = Vec::new();
    let evaluated = std::cell::Cell::new(0);
    for f in &families {
        match smallest(f, spec, &evaluated) {
            Ok(Ok((n, p, below))) => {
                let mut s = f.screened(n, p, spec)?;
                s.attainment_below = below;
                feasible.push(s);
            }
            Ok(Err(why)) => infeasible.push(Infeasible {
                gpu: f.gpu.clone(),
                tp: f.tp,
                router: f.router,
                why,
            }),
            // A model that cannot take this family (its arrivals, say) is a reason, not a
            // failure of the whole plan.
            Err(PlanError::Model(e)) => infeasible.push(Infeasible {
                gpu: f.gpu.clone(),
                tp: f.tp,
                router: f.router,
                why: e.to_string(),
            }),
            Err(e) => return Err(e),
        }
    }
    feasible.sort_by(cheapest_first);
    Ok(Screen {
        feasible,
        infeasible,
        evaluated: evaluated.get(),
    })
}

/// The fleets no other beats on both price and p99 TTFT (by the model): each feasible
/// family at its smallest count and up to `extra` more replicas, cheapest first.
///
/// # Errors
/// Any error of the model.
pub fn pareto(spec: &PlanSpec, screen: &Screen, extra: u32) -> Result<Vec<Screened>, PlanError> {
    let (families, _) = spec.families();
    let mut all = Vec::new();
    for s in &screen.feasible {
        all.push(s.clone());
        let Some(f) = families
            .iter()
            .find(|f| f.gpu == s.gpu && f.tp == s.tp && f.router == s.router)
        else {
            continue;
        };
        for k in 1..=extra {
            let n = s.replicas + k;
            if n > spec.max_replicas {
                break;
            }
            if let Some(p) = predict_at(f, n)? {
                all.push(f.screened(n, p, spec)?);
            }
        }
    }
    all.sort_by(cheapest_first);
    let mut front: Vec<Screened> = Vec::new();
    for s in all {
        if front
            .last()
            .is_none_or(|l| s.predicted.ttft_p99_s < l.predicted.ttft_p99_s)
        {
            front.push(s);
        }
    }
    Ok(front)
}

/// The family of a screened fleet.
pub(crate) fn family_of(spec: &PlanSpec, s: &Screened) -> Option<Family> {
    family(spec, &s.gpu, s.tp, s.router)
}

/// The family of a GPU, tensor-parallel degree and router.
pub(crate) fn family(spec: &PlanSpec, gpu: &str, tp: u32, router: RouterKind) -> Option<Family> {
    spec.families()
        .0
        .into_iter()
        .find(|f| f.gpu == gpu && f.tp == tp && f.router == router)
}

#[cfg(test)]
mod tests;
