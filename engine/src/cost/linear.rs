//! Linear cost model, the shape `bench-native fit` produces.
//!
//! # Formula
//! `t = β0 + βp·prefill_tokens + βd·decode_seqs + βkv·context_tokens + βattn·prefill_attn`
//! `+ βmix·[prefill_seqs > 0 and decode_seqs > 0]` [s], where `prefill_attn` counts the query–key pairs of the prompt chunks that
//! [`LinearCost::attn_pairs`] charges: a chunk of `c` tokens after `p` tokens already in
//! KV has `c·p + c(c+1)/2` (causal attention), and with `attn_tile > 0` only chunks
//! shorter than `attn_tile` tokens count.
//!
//! Why the tile: llama.cpp's CPU flash attention (ggml `GGML_FA_TILE_Q` = 64) runs a
//! tiled, matrix-style kernel when a sequence has at least 64 query rows in the
//! micro-batch and a row-by-row vector kernel below that — the kernel every decode
//! uses, whose per-context-token cost is `βkv`. A prompt chunk of fewer than 64 tokens
//! (every chunk under `-b 64` once a decode shares the batch, every chunk under
//! `-b 32/16`) therefore pays roughly a decode's price per query–key pair, while whole
//! prompts and larger chunks pay little for attention (their cost is in `βp`).
//!
//! Why `βmix`: with per-slot KV (llama.cpp's default without `-kvu`) a batch is cut into
//! micro-batches of equal tokens per sequence over consecutive slot ids, so the decodes
//! and a prompt chunk run as separate forward passes, and the alternating shapes defeat
//! graph reuse: an iteration that mixes them pays a second per-pass overhead.

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
    /// Per query–key pair of a charged prompt chunk (attention over the chunk's prefix
    /// and itself) [s/pair]. 0 in configurations written before it existed.
    #[serde(default)]
    pub beta_attn: f64,
    /// Prompt chunks of at least this many tokens are not charged per pair (a tiled
    /// attention kernel; 64 on llama.cpp's CPU backend); 0 = every chunk is [tokens].
    #[serde(default)]
    pub attn_tile: u32,
    /// Per iteration that carries both decodes and prompt tokens [s].
    #[serde(default)]
    pub beta_mixed: f64,
}

impl LinearCost {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let v = [
            self.beta0,
            self.beta_prefill,
            self.beta_decode,
            self.beta_kv,
            self.beta_attn,
            self.beta_mixed,
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
            + self.beta_attn * s.prefill_attn as f64
            + if s.prefill_tokens > 0 && s.decode_seqs > 0 {
                self.beta_mixed
            } else {
                0.0
            }
    }

    /// Query–key pairs charged for a prompt chunk of `chunk` tokens after `prefix` tokens
    /// already in KV: `chunk·prefix + chunk(chunk+1)/2`, or 0 if `βattn` is 0 or the chunk
    /// reaches `attn_tile` [pairs].
    ///
    /// # Examples
    /// ```
    /// use engine::cost::LinearCost;
    /// let c = LinearCost { beta_attn: 1e-6, attn_tile: 64, ..LinearCost::default() };
    /// assert_eq!(c.attn_pairs(448, 60), 60 * 448 + 60 * 61 / 2);
    /// assert_eq!(c.attn_pairs(448, 64), 0); // tiled kernel: no per-pair charge
    /// ```
    pub fn attn_pairs(&self, prefix: u64, chunk: u32) -> u64 {
        if self.beta_attn == 0.0 || (self.attn_tile > 0 && chunk >= self.attn_tile) {
            return 0;
        }
        let c = chunk as u64;
        c * prefix + c * (c + 1) / 2
    }
}
