//! Threshold (DP) admission, the reference study's rule: admit an arrival only while the
//! chain's predicted p99 TTFT for the state it would join meets the SLO.
//!
//! # Formula
//! An arrival finding n in system waits `Erlang(n + 1 − C, μ_C)` (none for n < C) and then
//! the first-token service `s_ft`; its predicted p99 is `s_ft + q_{0.99}(Erlang)`. The
//! threshold `n*` is the smallest n whose prediction exceeds the SLO, so admitting while
//! fewer than `n*` are in the system keeps every admitted request's predicted p99 within
//! it. The simulator takes `n*` as
//! [`crate::config::Admission::MaxInSystem`] `{ max_in_system: n* }`.
//!
//! # Validity
//! The chain's assumptions (see [`super::ReferenceChain`]); `n*` is capped at
//! `N_max = ⌊K/E[kv]⌋` (KV reservation blocks beyond it anyway).

use super::birth_death::{state_wait_quantile, ReferenceChain};
use super::reference_mmc::RefParams;
use super::{check_positive, AnalyticError, Prediction};
use crate::config::SimConfig;

/// The outcome of the DP threshold rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// Admit while fewer than this many requests are in the system.
    pub max_in_system: u32,
    /// The chain's prediction with that admission rule.
    pub prediction: Prediction,
}

/// The max-in-system threshold n* for a p99 TTFT SLO `slo_p99_ttft_s` [s].
///
/// # Errors
/// [`AnalyticError::Invalid`] for a non-positive SLO, or when even an arrival to an empty
/// server is predicted to miss it (no admission rule can meet the SLO).
pub fn dp_threshold(cfg: &SimConfig, slo_p99_ttft_s: f64) -> Result<Threshold, AnalyticError> {
    cfg.validate()?;
    check_positive("p99 TTFT SLO", slo_p99_ttft_s)?;
    let params = RefParams::from_config(cfg)?;
    let c = params.servers()?;
    let mu_c = f64::from(c) / params.service(c);
    let sft = params.first_token(c);
    if sft > slo_p99_ttft_s {
        return Err(AnalyticError::Invalid {
            name: "p99 TTFT SLO",
            value: slo_p99_ttft_s,
            why: "below the first-token service time of an idle server; no threshold can meet it",
        });
    }
    // The first n in 0..N_max whose prediction exceeds the SLO, or N_max: the prediction
    // rises with n, so halving [lo, hi] finds it in O(log N_max) quantiles.
    let exceeds = |n: u32| sft + state_wait_quantile(c, mu_c, n, 0.99) > slo_p99_ttft_s;
    let (mut lo, mut hi) = (0, params.n_max());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if exceeds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let n_star = lo;
    let n_star = n_star.max(1);
    let capped = ReferenceChain::with_cap(params, Some(n_star))?;
    Ok(Threshold {
        max_in_system: n_star,
        prediction: capped.prediction(cfg),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_tightens_with_slo() {
        let cfg = SimConfig::reference(3.0, 1, 16384);
        let loose = dp_threshold(&cfg, 30.0).unwrap();
        let tight = dp_threshold(&cfg, 3.0).unwrap();
        assert!(
            tight.max_in_system < loose.max_in_system,
            "{} {}",
            tight.max_in_system,
            loose.max_in_system
        );
        let m = tight.prediction.metrics().unwrap();
        assert!(m.ttft_p99_s <= 3.0 * 1.05, "{m:?}");
        assert!(dp_threshold(&cfg, 0.001).is_err());
        assert!(dp_threshold(&cfg, -1.0).is_err());
    }

    /// The rule's first principle, scanned state by state.
    fn scanned(cfg: &SimConfig, slo: f64) -> u32 {
        let ch = ReferenceChain::from_config(cfg).unwrap();
        let sft = ch.params.first_token(ch.servers());
        (0..ch.params.n_max())
            .find(|&n| sft + ch.state_wait_quantile(n, 0.99) > slo)
            .unwrap_or(ch.params.n_max())
            .max(1)
    }

    #[test]
    fn the_threshold_is_the_first_state_whose_prediction_misses_the_slo() {
        for (lam, b, k) in [(3.0, 1, 16384), (2.0, 8, 4096), (6.0, 4, 65536)] {
            let cfg = SimConfig::reference(lam, b, k);
            for slo in [2.0, 3.0, 5.0, 30.0, 1e4] {
                let Ok(t) = dp_threshold(&cfg, slo) else {
                    continue;
                };
                assert_eq!(
                    t.max_in_system,
                    scanned(&cfg, slo),
                    "λ {lam} B {b} K {k} SLO {slo}"
                );
            }
        }
    }

    #[test]
    fn a_kv_cache_of_millions_of_requests_gets_its_threshold() {
        let cfg = SimConfig::reference(40.0, 8, u32::MAX as u64);
        let t = dp_threshold(&cfg, 5.0).unwrap();
        assert!(
            t.max_in_system > 8 && t.max_in_system < 10_000,
            "{}",
            t.max_in_system
        );
        let m = t.prediction.metrics().unwrap();
        assert!(m.ttft_p99_s <= 5.0 * 1.05 && m.blocking > 0.0, "{m:?}");
    }
}
