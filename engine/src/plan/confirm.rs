//! The simulator's answer for a screened fleet: simulated over seeds at the model's
//! count, then moved down while the simulated attainment still meets the target and up
//! while it does not, so the answer meets it at N and misses it at N − 1.

use super::{family_of, Family, PlanError, PlanSpec, Screened};
use crate::fleet::simulate_fleet;
use crate::metrics::Aggregate;
use serde::{Deserialize, Serialize};

/// Most replicas the simulator adds to the model's count before it gives up.
pub const MAX_STEPS: u32 = 16;

/// One fleet size, simulated over seeds (each figure's mean and 95 % interval).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimFigures {
    pub replicas: u32,
    pub attainment: Aggregate,
    pub ttft_mean_s: Aggregate,
    pub ttft_p99_s: Aggregate,
    pub tpot_mean_s: Aggregate,
    /// Requests simulated over all seeds.
    pub requests: u64,
}

impl SimFigures {
    /// Whether the mean attainment over the seeds reaches `target`.
    pub fn meets(&self, target: f64) -> bool {
        self.attainment.mean.is_some_and(|a| a >= target)
    }
}

/// The simulator's answer beside the model's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Confirmed {
    /// The model's fleet.
    pub screened: Screened,
    /// The simulator's replica count.
    pub replicas: u32,
    pub usd_per_hour: f64,
    /// Simulated at `replicas`.
    pub at: SimFigures,
    /// Simulated at `replicas − 1` (None at one replica).
    pub below: Option<SimFigures>,
    /// Whether `at` meets the target (false when [`MAX_STEPS`] more replicas, or
    /// `max_replicas`, do not).
    pub meets: bool,
}

fn simulate(f: &Family, n: u32, seeds: &[u64]) -> Result<SimFigures, PlanError> {
    let mut att = Vec::new();
    let mut mean = Vec::new();
    let mut p99 = Vec::new();
    let mut tpot = Vec::new();
    let mut requests = 0;
    for &seed in seeds {
        let mut cfg = f.fleet(n);
        cfg.base.seed = seed;
        let r = simulate_fleet(&cfg)?;
        let s = &r.summary;
        requests += s.arrivals;
        att.push(s.slo_attainment);
        mean.push(s.ttft.mean);
        p99.push(s.ttft.p99);
        tpot.push(s.tpot.mean);
    }
    Ok(SimFigures {
        replicas: n,
        attainment: Aggregate::of(att),
        ttft_mean_s: Aggregate::of(mean),
        ttft_p99_s: Aggregate::of(p99),
        tpot_mean_s: Aggregate::of(tpot),
        requests,
    })
}

/// Confirms `s` by simulation over `seeds`.
///
/// # Errors
/// A fleet the simulator refuses (its work limits, say), or `s` not from `spec`.
pub fn confirm(spec: &PlanSpec, s: &Screened, seeds: &[u64]) -> Result<Confirmed, PlanError> {
    if seeds.is_empty() {
        return Err(PlanError::Empty("no seeds to confirm with"));
    }
    let f = family_of(spec, s).ok_or(PlanError::Empty("the fleet is not one of the plan's"))?;
    let target = spec.attainment;
    let mut n = s.replicas;
    let mut at = simulate(&f, n, seeds)?;
    let mut below = None;
    if at.meets(target) {
        // Down while the simulation still meets it.
        while n > 1 {
            let b = simulate(&f, n - 1, seeds)?;
            if b.meets(target) {
                n -= 1;
                at = b;
            } else {
                below = Some(b);
                break;
            }
        }
    } else {
        // Up until it does, at most `MAX_STEPS` replicas past the model's count.
        let top = (s.replicas + MAX_STEPS).min(spec.max_replicas);
        while !at.meets(target) && n < top {
            n += 1;
            let next = simulate(&f, n, seeds)?;
            below = Some(std::mem::replace(&mut at, next));
        }
    }
    Ok(Confirmed {
        screened: s.clone(),
        replicas: n,
        usd_per_hour: s.usd_per_hour / s.replicas as f64 * n as f64,
        meets: at.meets(target),
        at,
        below,
    })
}
