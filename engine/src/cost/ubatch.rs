//! Micro-batch cost model: a measured table of one forward pass's duration by the tokens
//! in it, summed over the micro-batches an iteration is split into, plus the linear
//! context, prompt-attention and mixed terms of [`super::LinearCost`].
//!
//! # Formula
//! `t = Σ_decode micro-batches g_d(k) + s·g(T / s) + βkv·kv + βattn·prefill_attn`
//! `+ βmix·T·[decode_seqs > 0]` [s], where `kv` is the context in KV, or with a KV
//! window the cells of padded windows beyond the first ([`UbatchCost::charged_context`]),
//! `g` interpolates the table (`g_d` the decode table, see below), the `n` decoding
//! sequences form `r` = [`BatchShape::decode_ubatches`] (at least 1) micro-batches of
//! `n / r` sequences each (as equal as integers allow), and the `T` prompt tokens of the
//! `s` prefilling sequences are one micro-batch per sequence, `T / s` tokens each.
//!
//! Why a table: on the CPU llama-server (1 thread, f16 weights) a forward pass over `k`
//! tokens is not linear in `k`. Up to a few tokens every extra token costs about as much
//! as a whole decode's matrix–vector products (≈ 2 ms against ≈ 3.5 ms fixed); from
//! about four tokens on the matrix–matrix path costs ≈ 0.85 ms per token. So a decode curve
//! (1..=slots sequences in consecutive slots) and a prefill curve (lone prompts) have the
//! same shape, and a linear model with one intercept cannot fit both their ends.
//!
//! Why a window: llama.cpp attends over `n_kv` = the micro-batch's longest KV padded up to
//! a multiple of 256 cells, at least 256 (`llama_kv_cache::get_n_kv`). Decodes with up to
//! 256 tokens of context cost about the same (a lone stream's step: 7.1 ms at 16–84
//! context tokens in the microbenchmark and in real runs), and 304 tokens cost one more
//! window (+2–3 ms per stream). A per-token `βkv` fitted across that step prices short
//! contexts ≈ 10 % low.
//!
//! Decode micro-batches have their own table when measured (`decode`): a micro-batch of
//! k decodes computes and samples k output rows, a k-token prompt one, and on the CPU
//! llama-server 4 decodes in one micro-batch take ≈ 13–15 ms against ≈ 10–11 ms for a
//! 4-token prompt (llama-server microbenchmarks; one shared table priced 4-stream decode
//! steps ≈ 8 % low, which near saturation became −30…−65 % on TTFT).
//!
//! Why micro-batches: with per-slot KV (llama.cpp's default without `-kvu`) the batch is
//! cut into micro-batches of consecutive slot ids (`split_equal(…, sequential = true)`),
//! each a full forward pass. Decodes in slots {0, 1, 3} cost `g(2) + g(1)`, ≈ 60 % more
//! than in {0, 1, 2}; a prompt is its own micro-batch beside the decodes.

use super::{interpolate, BatchShape};
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// Measured micro-batch durations and the linear extras.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UbatchCost {
    /// (tokens in one micro-batch, duration of the iteration that runs it [s]), sorted by
    /// tokens; interpolated piecewise-linearly, extrapolated linearly. Prompt
    /// micro-batches, and decode ones too when `decode` is empty.
    pub ubatch: Vec<(f64, f64)>,
    /// (sequences decoding in one micro-batch, duration [s]), as `ubatch`: a decode
    /// micro-batch of k sequences samples k tokens (k output rows), a k-token prompt one,
    /// so on llama-server 4 decodes cost ≈ 3 ms more than a 4-token prompt. Empty = the
    /// `ubatch` table.
    #[serde(default)]
    pub decode: Vec<(f64, f64)>,
    /// Per context token in KV [s/token]; with `kv_window` > 0, per KV cell of the
    /// padded attention window beyond the first `kv_window` cells [s/cell].
    #[serde(default)]
    pub beta_kv: f64,
    /// llama.cpp's attention window: each sequence attends over its KV padded up to a
    /// multiple of this many cells (at least one window; 256 for llama.cpp), and the cost
    /// of the first window is in the table. 0 = `beta_kv` per context token [cells].
    #[serde(default)]
    pub kv_window: u32,
    /// Per query–key pair of a charged prompt chunk (as [`LinearCost::beta_attn`](super::LinearCost::beta_attn))
    /// [s/pair].
    #[serde(default)]
    pub beta_attn: f64,
    /// Prompt chunks of at least this many tokens are not charged per pair (as
    /// [`LinearCost::attn_tile`](super::LinearCost::attn_tile)) [tokens].
    #[serde(default)]
    pub attn_tile: u32,
    /// Per prompt token of an iteration that also decodes [s/token].
    #[serde(default)]
    pub beta_mixed: f64,
}

impl UbatchCost {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.ubatch.is_empty() {
            return Err(ConfigError::Cost("micro-batch table has no points".into()));
        }
        for pts in [&self.ubatch, &self.decode] {
            if pts
                .iter()
                .any(|p| !p.0.is_finite() || !p.1.is_finite() || p.0 < 0.0 || p.1 < 0.0)
                || pts.windows(2).any(|w| w[1].0 <= w[0].0)
            {
                return Err(ConfigError::Cost(
                    "micro-batch points must be finite, >= 0 and strictly increasing in tokens"
                        .into(),
                ));
            }
        }
        let v = [self.beta_kv, self.beta_attn, self.beta_mixed];
        if !v.iter().all(|x| x.is_finite() && *x >= 0.0) {
            return Err(ConfigError::Cost(
                "micro-batch model coefficients must be finite and >= 0".into(),
            ));
        }
        if self.g(1.0) <= 0.0 || self.g_decode(1.0) <= 0.0 {
            return Err(ConfigError::Cost(
                "a one-token micro-batch must take > 0 s".into(),
            ));
        }
        Ok(())
    }

    /// One micro-batch of `tokens` [s] (0 for none, never below 0).
    pub fn g(&self, tokens: f64) -> f64 {
        if tokens <= 0.0 {
            0.0
        } else {
            interpolate(&self.ubatch, tokens).max(0.0)
        }
    }

    /// One micro-batch of `seqs` decoding sequences [s] (the `decode` table, or `ubatch`
    /// when it is empty).
    pub fn g_decode(&self, seqs: f64) -> f64 {
        if self.decode.is_empty() {
            self.g(seqs)
        } else if seqs <= 0.0 {
            0.0
        } else {
            interpolate(&self.decode, seqs).max(0.0)
        }
    }

    /// Query–key pairs charged for a prompt chunk (as [`LinearCost::attn_pairs`](super::LinearCost::attn_pairs)) [pairs].
    pub fn attn_pairs(&self, prefix: u64, chunk: u32) -> u64 {
        super::linear::attn_pairs(self.beta_attn, self.attn_tile, prefix, chunk)
    }

    /// What `beta_kv` multiplies for `context` tokens over `seqs` sequences: the tokens,
    /// or with a window W the cells beyond the first window of each sequence's padded
    /// attention window, `seqs · (⌈c̄ / W⌉·W − W)` with c̄ the mean context per sequence
    /// (llama.cpp pads to the longest sequence of a micro-batch; the mean stands in for
    /// it here, and the simulator gives the longest as `BatchShape::max_context_tokens`)
    /// [tokens or cells].
    ///
    /// # Examples
    /// ```
    /// use engine::cost::UbatchCost;
    /// let c = UbatchCost { kv_window: 256, ..UbatchCost::default() };
    /// assert_eq!(c.charged_context(4 * 200, 4), 0.0); // inside the first window
    /// assert_eq!(c.charged_context(4 * 300, 4), 4.0 * 256.0); // one more window each
    /// let linear = UbatchCost::default();
    /// assert_eq!(linear.charged_context(1200, 4), 1200.0);
    /// ```
    pub fn charged_context(&self, context: u64, seqs: u32) -> f64 {
        if self.kv_window == 0 {
            return context as f64;
        }
        if seqs == 0 || context == 0 {
            return 0.0;
        }
        let w = self.kv_window as f64;
        let mean = context as f64 / seqs as f64;
        seqs as f64 * ((mean / w).ceil().max(1.0) - 1.0) * w
    }

    /// What `beta_kv` multiplies in an iteration: [`UbatchCost::charged_context`], with
    /// a window and a known longest context every sequence padded to the longest's
    /// window (as llama.cpp's `get_n_kv` pads the micro-batch).
    fn charged(&self, s: &BatchShape) -> f64 {
        if self.kv_window > 0 && s.max_context_tokens > 0 {
            let w = self.kv_window as f64;
            let windows = (s.max_context_tokens as f64 / w).ceil().max(1.0) - 1.0;
            s.running as f64 * windows * w
        } else {
            self.charged_context(s.context_tokens, s.running)
        }
    }

    pub(crate) fn iteration(&self, s: &BatchShape) -> f64 {
        let n = s.decode_seqs;
        let decode = if n == 0 {
            0.0
        } else {
            let r = s.decode_ubatches.clamp(1, n);
            let (k, big) = (n / r, n % r);
            big as f64 * self.g_decode((k + 1) as f64) + (r - big) as f64 * self.g_decode(k as f64)
        };
        let prefill = if s.prefill_tokens == 0 {
            0.0
        } else {
            let seqs = s.prefill_seqs.max(1) as f64;
            seqs * self.g(s.prefill_tokens as f64 / seqs)
        };
        decode
            + prefill
            + self.beta_kv * self.charged(s)
            + self.beta_attn * s.prefill_attn as f64
            + if n > 0 {
                self.beta_mixed * s.prefill_tokens as f64
            } else {
                0.0
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;

    fn model() -> UbatchCost {
        UbatchCost {
            ubatch: vec![(1.0, 0.0056), (2.0, 0.0078), (4.0, 0.0116), (64.0, 0.0600)],
            beta_kv: 5e-6,
            ..UbatchCost::default()
        }
    }

    #[test]
    fn decodes_sum_over_micro_batches() {
        let c = CostModel::Ubatch(model());
        c.validate().unwrap();
        // one micro-batch of 3 (interpolated), or 2 + 1
        let one = 0.0078 + (0.0116 - 0.0078) / 2.0;
        assert!((c.decode_step(3, 0) - one).abs() < 1e-12);
        assert!((c.decode_step_split(3, 1, 0) - one).abs() < 1e-12);
        assert!((c.decode_step_split(3, 2, 0) - (0.0078 + 0.0056)).abs() < 1e-12);
        // never more micro-batches than sequences
        assert!((c.decode_step_split(2, 5, 0) - 2.0 * 0.0056).abs() < 1e-12);
        assert!((c.decode_step(1, 100) - (0.0056 + 100.0 * 5e-6)).abs() < 1e-12);
        assert!(c.depends_on_context());
        let w = CostModel::Ubatch(UbatchCost {
            kv_window: 256,
            ..model()
        });
        assert_eq!(w.decode_step(2, 400), c.decode_step(2, 0));
        assert!((w.decode_step(2, 600) - (c.decode_step(2, 0) + 2.0 * 256.0 * 5e-6)).abs() < 1e-12);
    }

    #[test]
    fn decode_micro_batches_use_their_own_table_and_prompts_the_other() {
        let m = UbatchCost {
            decode: vec![(1.0, 0.0060), (4.0, 0.0140)],
            ..model()
        };
        let c = CostModel::Ubatch(m.clone());
        c.validate().unwrap();
        // 4 decodes in one micro-batch: the decode table; in 2 + 2: twice its g_d(2)
        assert!((c.decode_step_split(4, 1, 0) - 0.0140).abs() < 1e-12);
        let g2 = 0.0060 + (0.0140 - 0.0060) / 3.0;
        assert!((c.decode_step_split(4, 2, 0) - 2.0 * g2).abs() < 1e-12);
        // a lone 4-token prompt: the prompt table
        let p4 = BatchShape {
            running: 1,
            prefill_tokens: 4,
            prefill_seqs: 1,
            ..BatchShape::default()
        };
        assert!((m.iteration(&p4) - 0.0116).abs() < 1e-12);
        // an empty decode table falls back to the prompt table
        assert_eq!(model().g_decode(4.0), model().g(4.0));
        let bad = UbatchCost {
            decode: vec![(2.0, 0.01), (1.0, 0.02)],
            ..model()
        };
        assert!(CostModel::Ubatch(bad).validate().is_err());
    }

    #[test]
    fn every_sequence_pays_the_longest_ones_window() {
        let m = UbatchCost {
            kv_window: 256,
            ..model()
        };
        // contexts 300, 20, 20, 20: the mean (90) is inside the first window, but the
        // micro-batch is padded to the longest, one more window for each of the four
        let s = BatchShape {
            running: 4,
            decode_seqs: 4,
            context_tokens: 360,
            max_context_tokens: 300,
            decode_ubatches: 1,
            ..BatchShape::default()
        };
        let base = m.iteration(&BatchShape {
            max_context_tokens: 0,
            context_tokens: 0,
            ..s
        });
        assert!((m.iteration(&s) - (base + 4.0 * 256.0 * 5e-6)).abs() < 1e-12);
        // not tracked: the mean stands in
        let untracked = BatchShape {
            max_context_tokens: 0,
            ..s
        };
        assert_eq!(m.iteration(&untracked), base);
    }

    #[test]
    fn prompts_are_one_micro_batch_each_beside_the_decodes() {
        let m = UbatchCost {
            beta_mixed: 1e-4,
            ..model()
        };
        let s = BatchShape {
            running: 3,
            prefill_tokens: 64,
            prefill_seqs: 2,
            decode_seqs: 1,
            ..BatchShape::default()
        };
        // two prompts of 32 tokens each: 2·g(32), plus one decode, plus βmix per token
        let g32 = 0.0116 + (0.0600 - 0.0116) * 28.0 / 60.0;
        let want = 0.0056 + 2.0 * g32 + 64.0 * 1e-4;
        assert!((m.iteration(&s) - want).abs() < 1e-12);
        assert_eq!(m.iteration(&BatchShape::default()), 0.0);
    }

    /// Three requests take slots 3, 2, 1 (`llama_cpp`: LRU, ties to the highest index);
    /// once the one in slot 2 finishes, slots 1 and 3 decode as two micro-batches, so the
    /// step is 2·g(1), not g(2).
    #[test]
    fn the_llama_cpp_policy_reports_split_slots() {
        use crate::config::SimConfig;
        use crate::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
        let req = |output: u32| TraceRequest {
            arrival: 0.0,
            prompt: 20,
            output,
            class: 0,
        };
        let mut cfg = SimConfig::llama_cpp(1.0, 4, 4096, 512);
        cfg.workload = Workload {
            arrivals: ArrivalProcess::Trace {
                requests: vec![req(50), req(2), req(50)],
            },
            lengths: LengthDist::Fixed {
                prompt: 1,
                output: 1,
            },
            max_model_len: None,
            shared: None,
        };
        cfg.cost = CostModel::Ubatch(UbatchCost {
            ubatch: vec![(1.0, 0.010), (2.0, 0.012), (3.0, 0.014), (64.0, 0.1)],
            ..UbatchCost::default()
        });
        cfg.keep_records = true;
        let rep = crate::sim::simulate(&cfg).unwrap();
        let r = &rep.records[0];
        let decode = r.e2e().unwrap() - r.ttft().unwrap();
        // one 3-stream step (slots 1..=3), then 48 steps of slots {1, 3}
        assert!((decode - (0.014 + 48.0 * 0.020)).abs() < 1e-9, "{decode}");
    }

    #[test]
    fn bad_tables_are_rejected() {
        let bad = UbatchCost {
            ubatch: vec![(2.0, 0.01), (1.0, 0.02)],
            ..UbatchCost::default()
        };
        assert!(bad.validate().is_err());
        assert!(UbatchCost::default().validate().is_err());
        let json = r#"{"kind": "ubatch", "ubatch": [[1, 0.005], [64, 0.06]]}"#;
        let c: CostModel = serde_json::from_str(json).unwrap();
        c.validate().unwrap();
    }
}
