//! Paged (queueing) mode: no reservation loss; the running set is limited by B and by the
//! KV the running requests occupy on average (prompt + half the output), the queue is
//! unbounded unless capped, and the server is unstable (an explicit value) when λ
//! exceeds the full-batch departure rate.

use super::kv_occupancy::StateInfo;
use super::service::Service;
use crate::config::SimConfig;
use crate::workload::LengthMoments;

/// The running-set cap of paged mode: B, and the KV the running requests occupy on
/// average, `K·(1 − watermark) / (E[P] + E[O]/2)`, at least 1.
pub(super) fn running_cap(cfg: &SimConfig, m: &LengthMoments) -> u32 {
    let per = m.prompt.0 + m.output.0 / 2.0;
    let k_tok = cfg.server.kv_tokens as f64;
    let b_max = cfg.server.max_batch;
    b_max.min((libm::floor(k_tok * (1.0 - cfg.server.watermark) / per) as u32).max(1))
}

/// An uncapped queue with load `rho` ≥ 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Unstable {
    pub rho: f64,
}

/// The states of paged mode, every arrival accepted with the unconditional lengths (`bins`
/// the prompt bins' weights): up to the queue cap, else to where the geometric tail of
/// load `λ/d_full` falls below 1e-12.
///
/// # Errors
/// [`Unstable`] when the queue is uncapped and `λ ≥ d_full`.
pub(super) fn paged_states(
    svc: &Service,
    d_full: f64,
    bins: &[f64],
    m: &LengthMoments,
) -> Result<Vec<StateInfo>, Unstable> {
    let cfg = svc.costs.cfg;
    let (b_max, b_cap) = (cfg.server.max_batch, svc.b_cap);
    let rho = svc.lambda / d_full;
    let cap = cfg.server.queue_cap.map(|q| q as usize + b_max as usize);
    if cap.is_none() && rho >= 1.0 {
        return Err(Unstable { rho });
    }
    let top = cap.unwrap_or_else(|| {
        let r = rho.max(1e-9);
        b_max as usize + (libm::log(1e-12) / libm::log(r)).min(20_000.0) as usize + 8
    });
    let pf_queued = svc.costs.prefill_iter(b_cap, m.prompt.0);
    let states = (0..=top)
        .map(|n| StateInfo {
            accept: if n == top && cap.is_some() { 0.0 } else { 1.0 },
            acc_prompt: m.prompt.0,
            acc_output: m.output.0,
            acc_output2: m.output.1,
            prompt_bins: if n < b_max as usize {
                bins.to_vec()
            } else {
                Vec::new()
            },
            sys_output: 0.0,
            sys_var_ratio: 1.0,
            pf_start: if (n as u32) < b_cap {
                svc.costs.prefill_iter(n as u32 + 1, m.prompt.0)
            } else {
                0.0
            },
            pf_queued,
        })
        .collect();
    Ok(states)
}
