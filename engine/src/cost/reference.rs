//! The reference study's cost formula.
//!
//! # Formula
//! `f(b) = 1 + 0.22 (b−1)^0.65`, `prefill(b, T) = 0.004 + 8e-5 · T · f(b)`,
//! `decode(b) = 0.006 + 5.5e-4 · f(b)` [s], b = running requests, T = prompt tokens
//! prefilled in the iteration. A mixed (chunked) iteration costs
//! `prefill(b, T) + 5.5e-4 · f(b)`: the decode's marginal term without a second fixed
//! overhead.

use super::BatchShape;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Constants of the reference formula (defaults: the study's).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceCost {
    pub prefill_base_s: f64,
    pub prefill_per_token_s: f64,
    pub decode_base_s: f64,
    pub decode_per_batch_s: f64,
    pub batch_coef: f64,
    pub batch_exp: f64,
}

impl Default for ReferenceCost {
    fn default() -> Self {
        ReferenceCost {
            prefill_base_s: 0.004,
            prefill_per_token_s: 8e-5,
            decode_base_s: 0.006,
            decode_per_batch_s: 5.5e-4,
            batch_coef: 0.22,
            batch_exp: 0.65,
        }
    }
}

impl ReferenceCost {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let v = [
            self.prefill_base_s,
            self.prefill_per_token_s,
            self.decode_base_s,
            self.decode_per_batch_s,
            self.batch_coef,
            self.batch_exp,
        ];
        if v.iter().all(|x| x.is_finite() && *x >= 0.0)
            && self.decode_base_s + self.decode_per_batch_s > 0.0
        {
            Ok(())
        } else {
            Err(ConfigError::Cost(
                "reference constants must be finite and >= 0, with a positive decode step".into(),
            ))
        }
    }

    /// `f(b)`, the batch factor.
    #[inline]
    pub fn batch_factor(&self, b: u32) -> f64 {
        if b <= 1 {
            1.0
        } else {
            1.0 + self.batch_coef * libm::pow((b - 1) as f64, self.batch_exp)
        }
    }

    /// `prefill(b, T)` [s].
    #[inline]
    pub fn prefill_s(&self, b: u32, tokens: f64) -> f64 {
        self.prefill_base_s + self.prefill_per_token_s * tokens * self.batch_factor(b)
    }

    /// `decode(b)` [s].
    #[inline]
    pub fn decode_s(&self, b: u32) -> f64 {
        self.decode_base_s + self.decode_per_batch_s * self.batch_factor(b)
    }

    pub(crate) fn iteration(&self, s: &BatchShape) -> f64 {
        self.iteration_with_factor(s, self.batch_factor(s.running.max(1)))
    }

    /// The iteration time given the precomputed batch factor `f = f(b)`.
    #[inline]
    pub(crate) fn iteration_with_factor(&self, s: &BatchShape, f: f64) -> f64 {
        let prefill = self.prefill_base_s + self.prefill_per_token_s * s.prefill_tokens as f64 * f;
        let decode = self.decode_per_batch_s * f;
        match (s.prefill_tokens > 0, s.decode_seqs > 0) {
            (true, false) => prefill,
            (false, true) => self.decode_base_s + decode,
            (true, true) => prefill + decode,
            (false, false) => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_values() {
        let c = ReferenceCost::default();
        assert_eq!(c.batch_factor(1), 1.0);
        assert!((c.decode_s(1) - 0.00655).abs() < 1e-12);
        let f16 = 1.0 + 0.22 * 15f64.powf(0.65);
        assert!((c.decode_s(16) - (0.006 + 5.5e-4 * f16)).abs() < 1e-12);
        assert!(
            (c.prefill_s(4, 256.0) - (0.004 + 8e-5 * 256.0 * (1.0 + 0.22 * 3f64.powf(0.65)))).abs()
                < 1e-12
        );
    }
}
