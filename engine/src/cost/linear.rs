//! Linear cost model, the shape `bench-native fit` produces.
//!
//! # Formula
//! `t = β0 + βp·prefill_tokens + βd·decode_seqs + βkv·context_tokens + βattn·prefill_attn`
//! `+ βmix·prefill_tokens·[decode_seqs > 0]` [s], where `prefill_attn` counts the query–key pairs of the prompt chunks that
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
//! `βmix`: on the CPU llama-server, prompt tokens that share an iteration with decodes
//! cost more than alone (a 448-token prompt with 2 decodes took 780 ms against ≈ 550 ms
//! alone, `results/profiler_study.md`). With per-slot KV (the default without `-kvu`)
//! such a batch is cut into separate micro-batches (equal tokens per sequence over
//! consecutive slot ids) and the alternating shapes defeat graph reuse, but the
//! mechanism of a *per-token* surcharge is not identified; the term is empirical.

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
    /// Per prompt token of an iteration that also decodes (on top of `beta_prefill`)
    /// [s/token].
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
            + if s.decode_seqs > 0 {
                self.beta_mixed * s.prefill_tokens as f64
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
        attn_pairs(self.beta_attn, self.attn_tile, prefix, chunk)
    }
}

/// [`LinearCost::attn_pairs`] for any cost with a `βattn` and an `attn_tile`.
pub(crate) fn attn_pairs(beta_attn: f64, attn_tile: u32, prefix: u64, chunk: u32) -> u64 {
    if beta_attn == 0.0 || (attn_tile > 0 && chunk >= attn_tile) {
        return 0;
    }
    let c = chunk as u64;
    c * prefix + c * (c + 1) / 2
}

/// The coefficients in ms, one line (as `bench-native fit` and the profiler study print
/// them).
impl std::fmt::Display for LinearCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} ms + {:.4} ms/prefill token + {:.3} ms/decode seq + {:.3e} ms/context token + {:.3e} ms/query-key pair of chunks < {} tokens + {:.4} ms/prompt token beside decodes",
            self.beta0 * 1e3,
            self.beta_prefill * 1e3,
            self.beta_decode * 1e3,
            self.beta_kv * 1e3,
            self.beta_attn * 1e3,
            self.attn_tile,
            self.beta_mixed * 1e3
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;
    use crate::cost::CostModel;
    use crate::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};

    #[test]
    fn old_configs_parse_with_the_new_terms_off() {
        let c: CostModel = serde_json::from_str(
            r#"{"kind": "linear", "beta0": 0.005, "beta_prefill": 0.0009, "beta_decode": 0.002}"#,
        )
        .unwrap();
        let CostModel::Linear(l) = &c else { panic!() };
        assert_eq!((l.beta_attn, l.attn_tile, l.beta_mixed), (0.0, 0, 0.0));
        assert_eq!(c.prefill_attn(448, 30), 0);
    }

    #[test]
    fn attention_pairs_and_mixed_iterations_are_charged() {
        let c = LinearCost {
            beta0: 0.005,
            beta_prefill: 1e-3,
            beta_decode: 2e-3,
            beta_kv: 0.0,
            beta_attn: 4e-6,
            attn_tile: 64,
            beta_mixed: 3e-4,
        };
        c.validate().unwrap();
        // causal pairs: 30 queries after 448 tokens see 448 + 1 … 448 + 30 keys
        assert_eq!(
            c.attn_pairs(448, 30),
            (1..=30).map(|i| 448 + i).sum::<u64>()
        );
        assert_eq!(c.attn_pairs(448, 64), 0);
        let untiled = LinearCost { attn_tile: 0, ..c };
        assert_eq!(untiled.attn_pairs(0, 512), 512 * 513 / 2);
        let s = BatchShape {
            running: 3,
            prefill_tokens: 30,
            prefill_seqs: 1,
            decode_seqs: 2,
            context_tokens: 0,
            prefill_attn: c.attn_pairs(448, 30),
            ..BatchShape::default()
        };
        let want = 0.005 + 0.030 + 0.004 + 4e-6 * s.prefill_attn as f64 + 30.0 * 3e-4;
        assert!((c.iteration(&s) - want).abs() < 1e-12);
        // no βmix without decodes, nor without prompt tokens
        let lone = BatchShape {
            decode_seqs: 0,
            ..s
        };
        assert!((c.iteration(&lone) - (want - 0.004 - 0.009)).abs() < 1e-12);
        let decode = BatchShape {
            prefill_tokens: 0,
            prefill_seqs: 0,
            prefill_attn: 0,
            ..s
        };
        assert!((c.iteration(&decode) - 0.009).abs() < 1e-12);
    }

    /// The event loop passes each chunk's prefix: a lone 512-token prompt under a 32-token
    /// budget takes 16 iterations, and βattn adds exactly βattn × Σ pairs to its TTFT.
    #[test]
    fn the_simulator_charges_chunk_attention_by_prefix() {
        let ttft = |beta_attn: f64| {
            let mut cfg = SimConfig::llama_cpp(1.0, 1, 1024, 32);
            cfg.workload = Workload {
                arrivals: ArrivalProcess::Trace {
                    requests: vec![TraceRequest {
                        arrival: 0.0,
                        prompt: 512,
                        output: 2,
                        class: 0,
                    }],
                },
                lengths: LengthDist::Fixed {
                    prompt: 1,
                    output: 1,
                },
                max_model_len: None,
                shared: None,
            };
            cfg.cost = CostModel::Linear(LinearCost {
                beta0: 0.005,
                beta_prefill: 1e-3,
                beta_decode: 2e-3,
                beta_attn,
                attn_tile: 64,
                ..LinearCost::default()
            });
            cfg.keep_records = true;
            let rep = crate::sim::simulate(&cfg).unwrap();
            rep.records[0].ttft().unwrap()
        };
        let pairs: u64 = (0..16u64).map(|i| 32 * (32 * i) + 32 * 33 / 2).sum();
        assert_eq!(pairs, 512 * 513 / 2);
        let (base, with) = (ttft(0.0), ttft(4e-6));
        assert!((base - (16.0 * 0.005 + 0.512)).abs() < 1e-9, "{base}");
        assert!(
            (with - base - 4e-6 * pairs as f64).abs() < 1e-9,
            "{with} {base}"
        );
    }
}
