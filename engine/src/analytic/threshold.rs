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

use super::birth_death::ReferenceChain;
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
    let chain = ReferenceChain::from_config(cfg)?;
    let sft = params.first_token(chain.servers());
    if sft > slo_p99_ttft_s {
        return Err(AnalyticError::Invalid {
            name: "p99 TTFT SLO",
            value: slo_p99_ttft_s,
            why: "below the first-token service time of an idle server; no threshold can meet it",
        });
    }
    let n_max = params.n_max();
    let mut n_star = n_max;
    for n in 0..n_max {
        if sft + chain.state_wait_quantile(n, 0.99) > slo_p99_ttft_s {
            n_star = n;
            break;
        }
    }
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
}
