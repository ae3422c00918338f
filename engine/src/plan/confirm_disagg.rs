//! The simulator's answer for a screened disaggregated fleet (docs/model.md, Planning):
//! the split the tandem model chose, simulated by the disaggregated simulator over seeds
//! (the same seeds, so the same requests, for every split: common random numbers), then
//! moved as the aggregated confirmation moves its count ([`super::confirm`]): while it
//! meets the target, to a split one replica smaller (one prefill or one decode replica
//! fewer) that still does; while it does not, to the better of one more prefill or one
//! more decode replica. The answer meets the SLO at P + D and its smaller splits miss it,
//! simulated.

use super::confirm::{figures, walk, Simulated, MAX_STEPS};
use super::disagg::{config, link_of, DisaggPlan, ScreenedDisagg};
use super::{family, PlanError, PlanSpec, SimFigures};
use crate::disagg::simulate_disagg;
use serde::{Deserialize, Serialize};

/// The simulator's split beside the model's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfirmedDisagg {
    /// The model's split.
    pub screened: ScreenedDisagg,
    /// The simulator's prefill and decode counts.
    pub prefill: u32,
    pub decode: u32,
    pub usd_per_hour: f64,
    /// Simulated at `prefill + decode` (its `replicas`).
    pub at: SimFigures,
    /// The best of the splits one replica smaller, simulated: (prefill, decode, figures);
    /// None when there is none (one replica per pool and `at` meets the target).
    pub below: Option<(u32, u32, SimFigures)>,
    /// Whether `at` meets the target (false when [`MAX_STEPS`] more replicas, or
    /// `max_replicas`, do not).
    pub meets: bool,
}

impl Simulated for ConfirmedDisagg {
    fn meets(&self) -> bool {
        self.meets
    }
    fn usd_per_hour(&self) -> f64 {
        self.usd_per_hour
    }
}

/// Confirms the disaggregated fleet `s` by simulation over `seeds`.
///
/// # Errors
/// A split the simulator refuses (its work limits, say), a bad link, or `s` not from
/// `spec`.
pub fn confirm_disagg(
    spec: &PlanSpec,
    d: &DisaggPlan,
    s: &ScreenedDisagg,
    seeds: &[u64],
) -> Result<ConfirmedDisagg, PlanError> {
    if seeds.is_empty() {
        return Err(PlanError::Empty("no seeds to confirm with"));
    }
    let link = link_of(spec, d)?;
    let f = family(spec, &s.gpu, s.tp, s.router)
        .ok_or(PlanError::Empty("the fleet is not one of the plan's"))?;
    let target = spec.attainment;
    let top = (s.prefill + s.decode + MAX_STEPS).min(spec.max_replicas);
    let w = walk(
        (s.prefill, s.decode),
        target,
        |(p, d)| {
            let mut v = Vec::new();
            if d > 1 {
                v.push((p, d - 1));
            }
            if p > 1 {
                v.push((p - 1, d));
            }
            v
        },
        |(p, d)| {
            if p + d < top {
                vec![(p, d + 1), (p + 1, d)]
            } else {
                vec![]
            }
        },
        |(p, dd)| {
            figures(p + dd, seeds, |seed| {
                let mut cfg = config(&f, p, dd, link, d.first_token);
                cfg.base.seed = seed;
                Ok(simulate_disagg(&cfg)?.summary)
            })
        },
    )?;
    let (p, dd) = w.at;
    Ok(ConfirmedDisagg {
        screened: s.clone(),
        prefill: p,
        decode: dd,
        usd_per_hour: f.usd_per_replica_hour * f64::from(p + dd),
        meets: w.figures.meets(target),
        at: w.figures,
        below: w.below.map(|((p, d), f)| (p, d, f)),
    })
}
