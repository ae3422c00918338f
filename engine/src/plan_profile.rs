//! A piecewise rate profile for the planner (docs/model.md, Planning): the fleet is
//! planned for the profile's peak; the peak's cheapest family is then screened at each
//! segment's rate, and the period's price is given for a fleet fixed at the peak's count
//! and for one resized per segment.

use crate::plan::{screen, PlanError, PlanSpec, Screened};
use serde::{Deserialize, Serialize};

/// One segment of a profile and the replicas the model gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Length [h].
    pub hours: f64,
    /// The whole fleet's arrival rate [req/s].
    pub rate_rps: f64,
    /// The fewest replicas of the peak's family meeting the target at this rate (None:
    /// none up to `max_replicas`).
    pub replicas: Option<u32>,
}

/// The price of a profile's period [$].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileCost {
    /// Total length [h].
    pub hours: f64,
    /// Every segment at the peak's count [$].
    pub fixed_usd: f64,
    /// Each segment at its own count [$] (a segment without one at the peak's).
    pub resized_usd: f64,
}

/// Whether every segment has hours > 0 and a rate > 0, both finite.
///
/// # Errors
/// [`PlanError::Range`] naming the first bad segment.
pub fn check(profile: &[(f64, f64)]) -> Result<(), PlanError> {
    if profile.is_empty() {
        return Err(PlanError::Empty("no profile segments"));
    }
    match profile
        .iter()
        .find(|(h, r)| !(h.is_finite() && *h > 0.0 && r.is_finite() && *r > 0.0))
    {
        Some((h, r)) => Err(PlanError::Range {
            name: "profile segment",
            want: "HOURS:RATE with finite hours > 0 and a finite rate > 0",
            got: format!("{h}:{r}"),
        }),
        None => Ok(()),
    }
}

/// The profile's peak rate [req/s].
pub fn peak(profile: &[(f64, f64)]) -> f64 {
    profile.iter().map(|s| s.1).fold(0.0, f64::max)
}

/// `best`'s family (its GPU at its price, its TP and router) screened at each segment's
/// rate; `spec` is the plan at the peak.
///
/// # Errors
/// A bad profile ([`check`]) or any error of the screen.
pub fn segments(
    spec: &PlanSpec,
    best: &Screened,
    profile: &[(f64, f64)],
) -> Result<Vec<Segment>, PlanError> {
    check(profile)?;
    let mut one = spec.clone();
    one.offers.retain(|o| o.gpu == best.gpu);
    one.tps = vec![best.tp];
    one.routers = vec![best.router];
    profile
        .iter()
        .map(|&(hours, rate_rps)| {
            one.base.workload = spec.base.workload.with_rate(rate_rps);
            let s = screen(&one)?;
            Ok(Segment {
                hours,
                rate_rps,
                replicas: s.best().map(|x| x.replicas),
            })
        })
        .collect()
}

/// The period's price at `usd_per_replica_hour` [$ per replica-hour], fixed at `peak_n`
/// replicas or resized per segment.
pub fn cost(segments: &[Segment], usd_per_replica_hour: f64, peak_n: u32) -> ProfileCost {
    let mut c = ProfileCost {
        hours: 0.0,
        fixed_usd: 0.0,
        resized_usd: 0.0,
    };
    for s in segments {
        c.hours += s.hours;
        c.fixed_usd += s.hours * usd_per_replica_hour * f64::from(peak_n);
        c.resized_usd += s.hours * usd_per_replica_hour * f64::from(s.replicas.unwrap_or(peak_n));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;
    use crate::fleet::RouterKind;
    use crate::plan::Offer;

    fn spec(rate: f64) -> PlanSpec {
        let mut base = SimConfig::vllm_like(rate);
        base.metrics.slo_ttft_s = 1.0;
        base.metrics.slo_tpot_s = 0.05;
        PlanSpec {
            base,
            model: "Qwen2.5-7B".into(),
            offers: vec![Offer {
                gpu: "A10G".into(),
                usd_per_gpu_hour: 1.0,
            }],
            tps: vec![1],
            routers: vec![RouterKind::Random],
            attainment: 0.9,
            mem_util: 0.9,
            max_replicas: 256,
        }
    }

    #[test]
    fn quieter_segments_need_fewer_replicas_and_resizing_costs_less() {
        let profile = [(8.0, 5.0), (8.0, 40.0), (8.0, 20.0)];
        let at_peak = spec(peak(&profile));
        let s = screen(&at_peak).unwrap();
        let best = s.best().unwrap();
        let segs = segments(&at_peak, best, &profile).unwrap();
        let n: Vec<u32> = segs.iter().map(|s| s.replicas.unwrap()).collect();
        assert_eq!(n[1], best.replicas, "the peak's segment is the peak's plan");
        assert!(n[0] < n[2] && n[2] < n[1], "{n:?}");
        let per = best.usd_per_hour / f64::from(best.replicas);
        let c = cost(&segs, per, best.replicas);
        assert_eq!(c.hours, 24.0);
        assert!((c.fixed_usd - 24.0 * best.usd_per_hour).abs() < 1e-9);
        let resized: f64 = n.iter().map(|&k| 8.0 * per * f64::from(k)).sum();
        assert!((c.resized_usd - resized).abs() < 1e-9 && resized < c.fixed_usd);
    }

    #[test]
    fn bad_segments_are_refused() {
        assert!(check(&[]).is_err());
        for bad in [
            (0.0, 5.0),
            (8.0, -1.0),
            (f64::NAN, 5.0),
            (8.0, f64::INFINITY),
        ] {
            let e = check(&[(8.0, 5.0), bad]).unwrap_err();
            assert!(e.to_string().contains("profile segment"), "{e}");
        }
    }
}
