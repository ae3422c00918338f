//! The simulator's answer for a screened fleet: simulated over seeds at the model's
//! count, then moved down while the simulated attainment still meets the target and up
//! while it does not, so the answer meets it at N and misses it at N − 1.

use super::{family_of, Family, PlanError, PlanSpec, Screened};
use crate::fleet::simulate_fleet;
use crate::metrics::{Aggregate, Summary};
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

/// The figures of one fleet size over seeds, from each seed's run summary.
pub(crate) fn figures(
    replicas: u32,
    seeds: &[u64],
    mut run: impl FnMut(u64) -> Result<Summary, PlanError>,
) -> Result<SimFigures, PlanError> {
    let mut att = Vec::new();
    let mut mean = Vec::new();
    let mut p99 = Vec::new();
    let mut tpot = Vec::new();
    let mut requests = 0;
    for &seed in seeds {
        let s = run(seed)?;
        requests += s.arrivals;
        att.push(s.slo_attainment);
        mean.push(s.ttft.mean);
        p99.push(s.ttft.p99);
        tpot.push(s.tpot.mean);
    }
    Ok(SimFigures {
        replicas,
        attainment: Aggregate::of(att),
        ttft_mean_s: Aggregate::of(mean),
        ttft_p99_s: Aggregate::of(p99),
        tpot_mean_s: Aggregate::of(tpot),
        requests,
    })
}

fn simulate(f: &Family, n: u32, seeds: &[u64]) -> Result<SimFigures, PlanError> {
    figures(n, seeds, |seed| {
        let mut cfg = f.fleet(n);
        cfg.base.seed = seed;
        Ok(simulate_fleet(&cfg)?.summary)
    })
}

/// Where the simulator's walk from the model's fleet ended.
pub(crate) struct Walk<S> {
    pub at: S,
    pub figures: SimFigures,
    /// The fleet one replica smaller, simulated (the best of them when there are
    /// several): it misses the target when `at` meets it.
    pub below: Option<(S, SimFigures)>,
}

fn higher(a: &SimFigures, b: &SimFigures) -> bool {
    a.attainment.mean.unwrap_or(-1.0) > b.attainment.mean.unwrap_or(-1.0)
}

/// From `start`, simulated: while it meets `target`, to the first of its one-replica-
/// smaller fleets (`fewer`) that still does; while it does not, to the best of its
/// one-replica-larger fleets (`more`; none: the walk stops). The aggregated fleet has
/// one smaller and one larger fleet, the disaggregated one a pool of each to shrink or
/// grow.
pub(crate) fn walk<S: Copy>(
    start: S,
    target: f64,
    fewer: impl Fn(S) -> Vec<S>,
    more: impl Fn(S) -> Vec<S>,
    mut sim: impl FnMut(S) -> Result<SimFigures, PlanError>,
) -> Result<Walk<S>, PlanError> {
    let mut s = start;
    let mut at = sim(s)?;
    let mut below: Option<(S, SimFigures)> = None;
    if at.meets(target) {
        'down: loop {
            let mut miss: Option<(S, SimFigures)> = None;
            for c in fewer(s) {
                let f = sim(c)?;
                if f.meets(target) {
                    (s, at) = (c, f);
                    continue 'down;
                }
                if miss.as_ref().is_none_or(|m| higher(&f, &m.1)) {
                    miss = Some((c, f));
                }
            }
            below = miss;
            break;
        }
    } else {
        while !at.meets(target) {
            let mut best: Option<(S, SimFigures)> = None;
            for c in more(s) {
                let f = sim(c)?;
                if best.as_ref().is_none_or(|b| higher(&f, &b.1)) {
                    best = Some((c, f));
                }
            }
            let Some((c, f)) = best else { break };
            below = Some((s, std::mem::replace(&mut at, f)));
            s = c;
        }
    }
    Ok(Walk {
        at: s,
        figures: at,
        below,
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
    // Up at most `MAX_STEPS` replicas past the model's count.
    let top = (s.replicas + MAX_STEPS).min(spec.max_replicas);
    let w = walk(
        s.replicas,
        target,
        |n| if n > 1 { vec![n - 1] } else { vec![] },
        |n| if n < top { vec![n + 1] } else { vec![] },
        |n| simulate(&f, n, seeds),
    )?;
    let n = w.at;
    Ok(Confirmed {
        screened: s.clone(),
        replicas: n,
        usd_per_hour: s.usd_per_hour / s.replicas as f64 * n as f64,
        meets: w.figures.meets(target),
        at: w.figures,
        below: w.below.map(|b| b.1),
    })
}

/// A fleet the simulator has confirmed (or not), aggregated or disaggregated.
pub trait Simulated {
    /// Whether the simulated fleet meets the target.
    fn meets(&self) -> bool;
    /// The simulated fleet's price [$ per hour].
    fn usd_per_hour(&self) -> f64;
}

impl Simulated for Confirmed {
    fn meets(&self) -> bool {
        self.meets
    }
    fn usd_per_hour(&self) -> f64 {
        self.usd_per_hour
    }
}

/// The simulator decides: the fleets that meet the target first, cheapest first within
/// each kind (a finalist the simulation shows missing it goes last, and the next one
/// answers).
pub fn by_simulation<T: Simulated>(confirmed: &mut [T]) {
    confirmed.sort_by(|x, y| {
        y.meets()
            .cmp(&x.meets())
            .then(x.usd_per_hour().total_cmp(&y.usd_per_hour()))
    });
}

/// The cheapest confirmed fleet that meets the target in simulation.
pub fn answer<T: Simulated>(confirmed: &[T]) -> Option<&T> {
    confirmed
        .iter()
        .filter(|c| c.meets())
        .min_by(|a, b| a.usd_per_hour().total_cmp(&b.usd_per_hour()))
}
