//! Table cost model: measured decode step latency vs concurrent sequences and prefill
//! latency vs prompt tokens, interpolated piecewise-linearly (linear extrapolation).
//!
//! # Formula
//! pure decode: `decode(n)`; pure prefill: `prefill(T)`; mixed:
//! `decode(n) + prefill(T) − prefill(0)` (the prefill's marginal cost rides on the step).

use super::{interpolate, BatchShape};
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Measured points.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TableCost {
    /// (concurrent decoding sequences, step latency [s]), sorted by sequences.
    pub decode: Vec<(f64, f64)>,
    /// (prefill tokens in the iteration, latency [s]), sorted by tokens.
    pub prefill: Vec<(f64, f64)>,
}

impl TableCost {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (name, pts) in [("decode", &self.decode), ("prefill", &self.prefill)] {
            if pts.is_empty() {
                return Err(ConfigError::Cost(format!("table has no {name} points")));
            }
            if pts
                .iter()
                .any(|p| !p.0.is_finite() || !p.1.is_finite() || p.0 < 0.0 || p.1 < 0.0)
            {
                return Err(ConfigError::Cost(format!(
                    "{name} points must be finite and >= 0"
                )));
            }
            if pts.windows(2).any(|w| w[1].0 <= w[0].0) {
                return Err(ConfigError::Cost(format!(
                    "{name} points must be strictly increasing in x"
                )));
            }
        }
        if self.decode_s(1.0) <= 0.0 {
            return Err(ConfigError::Cost(
                "decode step at 1 sequence must be > 0".into(),
            ));
        }
        Ok(())
    }

    /// Decode step [s] at `n` sequences (never below 0).
    pub fn decode_s(&self, n: f64) -> f64 {
        interpolate(&self.decode, n).max(0.0)
    }

    /// Prefill [s] of `tokens` (never below 0).
    pub fn prefill_s(&self, tokens: f64) -> f64 {
        interpolate(&self.prefill, tokens).max(0.0)
    }

    pub(crate) fn iteration(&self, s: &BatchShape) -> f64 {
        match (s.prefill_tokens > 0, s.decode_seqs > 0) {
            (true, false) => self.prefill_s(s.prefill_tokens as f64),
            (false, true) => self.decode_s(s.decode_seqs as f64),
            (true, true) => {
                self.decode_s(s.decode_seqs as f64)
                    + (self.prefill_s(s.prefill_tokens as f64) - self.prefill_s(0.0)).max(0.0)
            }
            (false, false) => 0.0,
        }
    }

    /// The A10G / vLLM 0.22 / Qwen2.5-1.5B measurement in `data/`: decode steps as
    /// measured; prefill as the measured single-stream TTFT of a short prompt plus a
    /// compute-bound per-token term (2·1.54e9 FLOP/token at 50 % of the A10G's 125 TFLOP/s
    /// bf16 peak = 49 µs/token), since the file has no long-prompt prefill points.
    pub fn a10g_qwen_1_5b() -> TableCost {
        let v: serde_json::Value =
            serde_json::from_str(crate::data::A10G_QWEN_1_5B_JSON).expect("embedded json");
        let decode = v["decode_step_s"]
            .as_array()
            .expect("decode_step_s")
            .iter()
            .map(|r| {
                (
                    r["batch"].as_f64().unwrap_or(0.0),
                    r["mean_step_s"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        let ttft1 = v["ttft_s_short_prompt"][0]["mean_ttft_s"]
            .as_f64()
            .unwrap_or(0.017);
        let per_token = 2.0 * 1.54e9 / (0.5 * 125e12);
        TableCost {
            decode,
            prefill: vec![(0.0, ttft1), (2048.0, ttft1 + 2048.0 * per_token)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a10g_interpolates() {
        let t = TableCost::a10g_qwen_1_5b();
        t.validate().unwrap();
        assert!((t.decode_s(1.0) - 0.0079).abs() < 1e-4);
        assert!((t.decode_s(32.0) - 0.01018).abs() < 1e-4);
        let mid = t.decode_s(24.0);
        assert!(mid > t.decode_s(16.0) && mid < t.decode_s(32.0));
        assert!(TableCost {
            decode: vec![(2.0, 1.0), (1.0, 1.0)],
            prefill: vec![(0.0, 1.0)]
        }
        .validate()
        .is_err());
    }
}
