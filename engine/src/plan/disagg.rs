//! Disaggregated candidates for the planner (docs/model.md, Planning): for each family, the
//! cheapest split into a prefill pool and a decode pool of its replica whose SLO
//! attainment, predicted by the tandem model ([`crate::analytic::predict_disagg`]),
//! reaches the target.
//!
//! For each prefill count P from 1 (to 64), the fewest decode replicas D that meet the
//! target (doubling steps, then a bisection: the attainment does not fall as D grows), P +
//! D at most `max_replicas`; P stops growing once P + 1 replicas already cost as much as
//! the cheapest split found. The prefill pool at each P and the decode pool at each D are
//! solved once ([`DisaggSplits`]). The binding limit is the
//! busiest of the prefill pool, the decode pool and the links (the highest load ρ), and
//! the headroom 1 / ρ − 1.

use super::{Family, Infeasible, PlanError, PlanSpec};
use crate::analytic::{DisaggSplits, Predicted};
use crate::config::{KvMode, SimConfig};
use crate::disagg::{DisaggConfig, FirstTokenFrom, KvGeometry, Link};
use crate::fleet::RouterKind;
use serde::{Deserialize, Serialize};

/// The disaggregation settings of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisaggPlan {
    /// The link from each prefill replica [bytes/s], > 0 (infinite allowed).
    pub bandwidth_bytes_per_s: f64,
    /// Added to every transfer [s], ≥ 0.
    pub latency_s: f64,
    pub first_token: FirstTokenFrom,
}

/// A disaggregated fleet the screen found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScreenedDisagg {
    pub gpu: String,
    pub tp: u32,
    pub router: RouterKind,
    pub prefill: u32,
    pub decode: u32,
    /// The fleet's price [$ per hour].
    pub usd_per_hour: f64,
    /// The tandem model's prediction.
    pub predicted: Predicted,
    /// `prefill pool`, `decode pool` or `transfer`: the busiest stage.
    pub binding: String,
    /// 1 / the busiest stage's load − 1.
    pub headroom: f64,
}

/// Every family's cheapest disaggregated fleet that meets the target, cheapest first, and
/// the families none up to `max_replicas` per pool serves, with the reason.
///
/// # Errors
/// An invalid plan, a bandwidth ≤ 0 or a latency < 0 ([`PlanError::Range`]), an error of
/// the tandem model.
pub fn screen_disagg(
    spec: &PlanSpec,
    d: &DisaggPlan,
) -> Result<(Vec<ScreenedDisagg>, Vec<Infeasible>), PlanError> {
    spec.validate()?;
    let link = link_of(spec, d)?;
    let (families, _) = spec.families();
    let mut found = Vec::new();
    let mut none = Vec::new();
    for f in &families {
        let mut failed = None;
        match cheapest_split(spec, f, link, d.first_token, &mut failed)? {
            Some(s) => found.push(s),
            None => none.push(Infeasible {
                gpu: f.gpu.clone(),
                tp: f.tp,
                router: f.router,
                why: format!(
                    "no split of up to {} replicas in all meets the SLO{}",
                    spec.max_replicas,
                    failed.map_or(String::new(), |e| format!(
                        " (the model could not answer for some: {e})"
                    ))
                ),
            }),
        }
    }
    found.sort_by(|a, b| {
        a.usd_per_hour
            .total_cmp(&b.usd_per_hour)
            .then(a.predicted.ttft_p99_s.total_cmp(&b.predicted.ttft_p99_s))
    });
    Ok((found, none))
}

/// The plan's link, checked.
pub(crate) fn link_of(spec: &PlanSpec, d: &DisaggPlan) -> Result<Link, PlanError> {
    if d.bandwidth_bytes_per_s.is_nan() || d.bandwidth_bytes_per_s <= 0.0 {
        return Err(PlanError::Range {
            name: "link bandwidth",
            want: "a number > 0 (or infinite)",
            got: d.bandwidth_bytes_per_s.to_string(),
        });
    }
    if !(d.latency_s.is_finite() && d.latency_s >= 0.0) {
        return Err(PlanError::Range {
            name: "link latency",
            want: "a finite number >= 0 [s]",
            got: d.latency_s.to_string(),
        });
    }
    let geometry = KvGeometry::of_model(&spec.model).ok_or_else(|| PlanError::Unknown {
        what: "model",
        name: spec.model.clone(),
        known: String::new(),
    })?;
    Ok(Link {
        bandwidth_bytes_per_s: d.bandwidth_bytes_per_s,
        latency_s: d.latency_s,
        geometry,
    })
}

/// Most prefill replicas a split considers.
const MAX_PREFILL: u32 = 64;

pub(crate) fn config(
    f: &Family,
    p: u32,
    d: u32,
    link: Link,
    first: FirstTokenFrom,
) -> DisaggConfig {
    DisaggConfig::uniform(replica(f), p, d, f.router, link, first)
}

/// Both pools' replica: the family's, paged.
fn replica(f: &Family) -> SimConfig {
    let mut base = f.replica.clone();
    base.server.kv_mode = KvMode::Paged;
    base
}

fn cheapest_split(
    spec: &PlanSpec,
    f: &Family,
    link: Link,
    first: FirstTokenFrom,
    failed: &mut Option<String>,
) -> Result<Option<ScreenedDisagg>, PlanError> {
    let target = spec.attainment;
    let max = spec.max_replicas;
    // The prefill pool at P and the decode pool at D are each solved once.
    let mut splits = DisaggSplits::new(replica(f), f.router, link, first);
    let mut meets = |p: u32, d: u32| -> Result<Option<(Predicted, String, f64)>, PlanError> {
        // A split the model cannot answer for counts as a miss, and the family says why.
        let pr = match splits.meets(p, d, target) {
            Ok(Some(pr)) => pr,
            Ok(None) => return Ok(None),
            Err(e) => {
                *failed = Some(e.to_string());
                return Ok(None);
            }
        };
        let Some(m) = pr.overall.metrics().copied() else {
            return Ok(None);
        };
        let rho_p = pr.prefill.metrics().map_or(0.0, |x| x.utilisation);
        let stages = [
            (rho_p, "prefill pool"),
            (pr.decode.rho, "decode pool"),
            (pr.link_utilisation, "transfer"),
        ];
        let (rho, name) =
            stages
                .iter()
                .copied()
                .fold((0.0, "prefill pool"), |a, b| if b.0 > a.0 { b } else { a });
        Ok(Some((m, name.to_string(), 1.0 / rho.max(1e-12) - 1.0)))
    };
    let mut best: Option<ScreenedDisagg> = None;
    for p in 1..max.min(MAX_PREFILL + 1) {
        if best.as_ref().is_some_and(|b| b.prefill + b.decode <= p + 1) {
            break;
        }
        // The fewest decode replicas: a count that meets by doubling steps, then a
        // bisection down to one that does not (or 0).
        let cap = max - p;
        let mut hi = 1u32;
        let mut at_hi = loop {
            if let Some(met) = meets(p, hi)? {
                break Some(met);
            }
            if hi >= cap {
                break None;
            }
            hi = (hi * 2).min(cap);
        };
        if at_hi.is_none() {
            continue;
        }
        let mut lo = hi / 2;
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if let Some(met) = meets(p, mid)? {
                hi = mid;
                at_hi = Some(met);
            } else {
                lo = mid;
            }
        }
        let (m, binding, headroom) = at_hi.expect("met at hi");
        let n = p + hi;
        if best.as_ref().is_none_or(|b| n < b.prefill + b.decode) {
            best = Some(ScreenedDisagg {
                gpu: f.gpu.clone(),
                tp: f.tp,
                router: f.router,
                prefill: p,
                decode: hi,
                usd_per_hour: f.usd_per_replica_hour * f64::from(n),
                predicted: m,
                binding,
                headroom,
            });
        }
    }
    Ok(best)
}
