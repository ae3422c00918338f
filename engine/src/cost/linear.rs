//! Linear cost model, the shape `bench-native fit` produces.
//!
//! # Formula
//! `t = β0 + βp·prefill_tokens + βd·decode_seqs + βkv·context_tokens` [s].

use super::BatchShape;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Coefficients of the linear model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinearCost {
    /// Fixed cost per iteration [s].
    pub beta0: f64,
    /// Per prefilled token [s/token].
    pub beta_prefill: f64,
    /// Per decoding sequence [s/seq].
    pub beta_decode: f64,
    /// Per context token in KV [s/token].
    #[serde(default)]
    pub beta_kv: f64,
}

impl LinearCost {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let v = [
            self.beta0,
            self.beta_prefill,
            self.beta_decode,
            self.beta_kv,
        ];
        if v.iter().all(|x| x.is_finite() && *x >= 0.0) && self.beta0 + self.beta_decode > 0.0 {
            Ok(())
        } else {
            Err(ConfigError::Cost(
                "linear coefficients must be finite and >= 0, with beta0 + beta_decode > 0".into(),
            ))
        }
    }

    pub(crate) fn iteration(&self, s: &BatchShape) -> f64 {
        self.beta0
            + self.beta_prefill * s.prefill_tokens as f64
            + self.beta_decode * s.decode_seqs as f64
            + self.beta_kv * s.context_tokens as f64
    }
}
