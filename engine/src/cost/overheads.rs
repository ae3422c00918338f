//! The overheads around the forward pass, identified from the A10G measurement in `data/`
//! (docs/model.md, Overheads): the front end every request passes through once
//! (`ServerConfig::overhead_s`) and the scheduling work of every engine step
//! (`ServerConfig::step_overhead_s`).
//!
//! * Front end: a lone short prompt's TTFT (one stream) minus the one-stream decode step.
//!   A prompt of a few tokens costs the server one step, about what a one-sequence decode
//!   costs; the rest of its TTFT is HTTP, tokenization, the hand-off to the engine and the
//!   first token's way back. The TTFTs at 2–32 simultaneous streams are not used: they
//!   also hold the front end's serial processing of a burst and the streams that miss the
//!   first step, which Poisson arrivals of a few requests per second do not meet.
//! * Step overhead: the measured decode step minus the roofline's forward pass
//!   ([`forward_pass_roofline`]: A10G × Qwen2.5-1.5B without the roofline's own assumed
//!   per-iteration overhead) at each stream count, the median over the stream counts,
//!   ≥ 0. It belongs with a cost model that prices only the forward pass; the measured
//!   table already holds it.

use super::{CostModel, RooflineCost, TableCost};

/// The overheads of the A10G measurement [s].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct A10gOverheads {
    /// Front-end delay per request [s].
    pub front_end_s: f64,
    /// Scheduling overhead per engine step beside the roofline's forward pass [s].
    pub step_s: f64,
}

fn points(key: &str, value: &str) -> Vec<(f64, f64)> {
    let v: serde_json::Value =
        serde_json::from_str(crate::data::A10G_QWEN_1_5B_JSON).expect("embedded json");
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| Some((r["batch"].as_f64()?, r[value].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The roofline of A10G × Qwen2.5-1.5B ([`RooflineCost::default`]) pricing the forward
/// pass alone: its assumed per-iteration overhead set to 0, so that the step overhead is
/// a term of its own (`ServerConfig::step_overhead_s`).
pub fn forward_pass_roofline() -> RooflineCost {
    RooflineCost {
        step_overhead_s: 0.0,
        ..RooflineCost::default()
    }
}

/// Context of the decode microbenchmark's streams: a short prompt and half of the 48
/// decoded tokens on average [tokens per stream].
const DECODE_CONTEXT_PER_STREAM: u64 = 32;

/// The front end and the step overhead of the A10G measurement (see the module docs).
pub fn a10g_overheads() -> A10gOverheads {
    let steps = points("decode_step_s", "mean_step_s");
    let ttft = points("ttft_s_short_prompt", "mean_ttft_s");
    let one = |pts: &[(f64, f64)]| pts.iter().find(|p| p.0 == 1.0).map(|p| p.1);
    let front_end_s = match (one(&ttft), one(&steps)) {
        (Some(t), Some(s)) => (t - s).max(0.0),
        _ => 0.0,
    };
    let roof = CostModel::Roofline(forward_pass_roofline());
    let mut d: Vec<f64> = steps
        .iter()
        .map(|&(k, s)| {
            let n = k as u32;
            s - roof.decode_step(n, u64::from(n) * DECODE_CONTEXT_PER_STREAM)
        })
        .collect();
    d.sort_by(f64::total_cmp);
    let step_s = crate::metrics::percentile_type7(&d, 0.5).map_or(0.0, |x| x.max(0.0));
    A10gOverheads {
        front_end_s,
        step_s,
    }
}

impl TableCost {
    /// [`TableCost::a10g_qwen_1_5b`] with the front end taken out of its prefill points
    /// (each lowered by [`A10gOverheads::front_end_s`]), for a simulation that adds the
    /// front end to every request (`ServerConfig::overhead_s`) instead of charging it to
    /// prompt iterations, where decodes running beside a prompt would hide it.
    pub fn a10g_qwen_1_5b_without_front_end() -> TableCost {
        let mut t = TableCost::a10g_qwen_1_5b();
        let a = a10g_overheads().front_end_s;
        for p in &mut t.prefill {
            p.1 = (p.1 - a).max(0.0);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 17.2 ms lone TTFT against a 7.9 ms step: 9.3 ms of front end; the roofline leaves a
    /// few ms per step to the scheduler; the split table's lone short prompt costs a step.
    #[test]
    fn the_a10g_file_gives_a_front_end_and_a_step_overhead() {
        let o = a10g_overheads();
        assert!((o.front_end_s - 0.009336).abs() < 1e-4, "{o:?}");
        assert!(o.step_s > 0.0005 && o.step_s < 0.008, "{o:?}");
        let t = TableCost::a10g_qwen_1_5b_without_front_end();
        assert!((t.prefill_s(0.0) - t.decode_s(1.0)).abs() < 1e-9, "{t:?}");
    }
}
