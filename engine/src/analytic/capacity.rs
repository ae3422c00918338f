//! Capacity: which resource limits the arrival rate, and the largest rate meeting an SLO.
//!
//! # Formula
//! With `E[P]`, `E[O]` the mean prompt and output [tokens], `B` the batch width, `K` the
//! KV capacity:
//! * **compute**: token budget per unit time at a full batch. Continuous batching spends
//!   `E[O]·decode(B)/B + prefill(B, E[P])` seconds of the engine per request (its share of
//!   B-wide decode steps plus its own stalling prefill); chunked prefill spends
//!   `E[O]·decode(B)/B + (mixed(B, E[P]) − decode(B))`. `λ_compute = 1 / that`.
//! * **KV memory**: Little's law on the cache, `λ_kv = K / E[KV·time]`, with the lifetime
//!   KV use `E[(P + O)·S]` (reserve: held whole for the service `S = prefill + O·decode(B)`)
//!   or `E[(P + O/2)·S]` (paged: grows from P to P + O).
//! * **sequence slots**: `λ_slots = B / (prefill(1, E[P]) + E[O]·decode(1))`, B slots each
//!   held for an unslowed service.
//!
//! The smallest binds. SLO capacity (DistServe's goodput (c)): the largest λ whose
//! predicted SLO attainment (blocked arrivals miss) is ≥ 90 %, by bisection on a model.

use super::reference_mmc::prefill_tokens;
use super::{predict, AnalyticError, ModelKind, Prediction};
use crate::config::{KvMode, Policy, SimConfig};
use crate::cost::BatchShape;
use serde::{Deserialize, Serialize};

/// The resource that limits throughput.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    KvMemory,
    SequenceSlots,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Compute => "compute",
            Bound::KvMemory => "KV memory",
            Bound::SequenceSlots => "sequence slots",
        }
    }
}

/// The three throughput bounds [req/s] and which binds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityBounds {
    pub compute_rps: f64,
    pub kv_rps: f64,
    pub slots_rps: f64,
    pub binding: Bound,
}

impl CapacityBounds {
    /// The binding (smallest) bound [req/s].
    pub fn max_rps(&self) -> f64 {
        self.compute_rps.min(self.kv_rps).min(self.slots_rps)
    }
}

/// Computes the bounds for `cfg` (the arrival rate is ignored).
///
/// # Errors
/// [`AnalyticError::Config`] for an invalid configuration.
pub fn capacity_bounds(cfg: &SimConfig) -> Result<CapacityBounds, AnalyticError> {
    cfg.validate()?;
    let m = super::lengths::fast_moments(&cfg.workload.lengths);
    let (ep, eo) = (m.prompt.0, m.output.0);
    let b = cfg.server.max_batch;
    let cost = &cfg.cost;
    let ctx = (b as f64 * (ep + eo / 2.0)) as u64;
    let dec_b = cost.decode_step(b, ctx);
    let stall = match cfg.server.policy {
        Policy::Chunked | Policy::LlamaCpp => {
            let mixed = cost.iteration(&BatchShape {
                running: b,
                prefill_tokens: libm::round(ep) as u64,
                prefill_seqs: 1,
                decode_seqs: b.saturating_sub(1),
                context_tokens: ctx,
                prefill_attn: cost.prefill_attn(0, libm::round(ep) as u32),
                decode_ubatches: 0,
                max_context_tokens: 0,
            });
            (mixed - cost.decode_step(b.saturating_sub(1).max(1), ctx)).max(0.0)
        }
        _ => prefill_tokens(cost, b, ep),
    };
    let compute = 1.0 / (eo * dec_b / b as f64 + stall);
    let s_of = |o: f64| prefill_tokens(cost, b, ep) + o * dec_b;
    // E[(P+O)·S] = E[P]·s(E[O]) + E[O·s(O)] with S linear in O; E[P·O] from the moments.
    let e_po = 0.5 * (m.total.1 - m.prompt.1 - m.output.1);
    let pf = prefill_tokens(cost, b, ep);
    let kv_time = match cfg.server.kv_mode {
        KvMode::Reserve => ep * pf + e_po * dec_b + eo * pf + m.output.1 * dec_b,
        KvMode::Paged => ep * pf + e_po * dec_b + 0.5 * (eo * pf + m.output.1 * dec_b),
    };
    let kv = cfg.server.kv_tokens as f64 / kv_time;
    let slots = b as f64 / (prefill_tokens(cost, 1, ep) + eo * cost.decode_step(1, 0));
    let _ = s_of;
    let mut binding = Bound::Compute;
    let mut best = compute;
    if kv < best {
        binding = Bound::KvMemory;
        best = kv;
    }
    if slots < best {
        binding = Bound::SequenceSlots;
    }
    Ok(CapacityBounds {
        compute_rps: compute,
        kv_rps: kv,
        slots_rps: slots,
        binding,
    })
}

/// The SLO capacity search result.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloCapacity {
    /// Largest arrival rate with attainment ≥ the target [req/s] (0 if none).
    pub rate_rps: f64,
    /// Predicted attainment there.
    pub attainment: f64,
}

/// Largest λ with at least `target` (e.g. 0.9) of requests meeting the configuration's
/// TTFT and TPOT SLOs (`cfg.metrics.slo_ttft_s`, `slo_tpot_s`), by `model`.
///
/// # Errors
/// [`AnalyticError::Invalid`] for a target outside (0, 1); model errors.
pub fn slo_capacity(
    model: ModelKind,
    cfg: &SimConfig,
    target: f64,
) -> Result<SloCapacity, AnalyticError> {
    super::check_level(target)?;
    let att = |rate: f64| -> Result<f64, AnalyticError> {
        let c = SimConfig {
            workload: cfg.workload.with_rate(rate),
            ..cfg.clone()
        };
        Ok(match predict(model, &c)? {
            Prediction::Stable(m) => m.slo_attainment,
            Prediction::Unstable { .. } => 0.0,
        })
    };
    let upper = capacity_bounds(cfg)?.max_rps() * 1.5;
    // Scan down from the bound on a geometric grid for a feasible rate, then bisect up.
    let mut lo = upper;
    let mut lo_att = att(lo)?;
    let mut hi = upper;
    while lo_att < target {
        hi = lo;
        lo *= 0.7;
        if lo < upper * 1e-4 {
            return Ok(SloCapacity {
                rate_rps: 0.0,
                attainment: att(lo)?,
            });
        }
        lo_att = att(lo)?;
    }
    if hi == lo {
        return Ok(SloCapacity {
            rate_rps: lo,
            attainment: lo_att,
        });
    }
    for _ in 0..30 {
        let mid = 0.5 * (lo + hi);
        let a = att(mid)?;
        if a >= target {
            lo = mid;
            lo_att = a;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-3 * hi {
            break;
        }
    }
    Ok(SloCapacity {
        rate_rps: lo,
        attainment: lo_att,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_identify_binding_resource() {
        let small_kv = capacity_bounds(&SimConfig::reference(1.0, 8, 2048)).unwrap();
        assert_eq!(small_kv.binding, Bound::KvMemory);
        let b1 = capacity_bounds(&SimConfig::reference(1.0, 1, 16384)).unwrap();
        assert!(matches!(b1.binding, Bound::Compute | Bound::SequenceSlots));
        // B = 1: about one request per 1.1 s.
        assert!((b1.max_rps() - 0.91).abs() < 0.03, "{b1:?}");
    }

    #[test]
    fn slo_capacity_search() {
        let mut cfg = SimConfig::reference(1.0, 8, 16384);
        cfg.metrics.slo_ttft_s = 1.0;
        cfg.metrics.slo_tpot_s = 0.05;
        let c = slo_capacity(ModelKind::ReferenceChain, &cfg, 0.9).unwrap();
        assert!(c.rate_rps > 0.5 && c.attainment >= 0.9, "{c:?}");
        assert!(slo_capacity(ModelKind::ReferenceChain, &cfg, 1.5).is_err());
    }
}
