//! Cost models: how long one iteration (one forward pass) takes, from the batch's shape.
//!
//! A [`CostModel`] is a plain serde value the caller passes in, so fitted and roofline
//! models plug in without touching the event loop. It is a pure function of [`BatchShape`].

mod linear;
pub mod overheads;
mod reference;
pub mod roofline;
mod table;
mod ubatch;

pub use linear::LinearCost;
pub use reference::ReferenceCost;
pub use roofline::RooflineCost;
pub use table::TableCost;
pub use ubatch::UbatchCost;

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// The composition of one iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchShape {
    /// Requests in the running set (the reference study's b) [requests].
    pub running: u32,
    /// Prompt (or recompute) tokens prefilled in this iteration [tokens].
    pub prefill_tokens: u64,
    /// Sequences whose prefill chunk is in this iteration [requests].
    pub prefill_seqs: u32,
    /// Sequences decoding one token in this iteration [requests].
    pub decode_seqs: u32,
    /// Tokens already in KV over the batch's sequences (attention context) [tokens].
    pub context_tokens: u64,
    /// Query–key pairs of this iteration's prompt chunks that the cost model charges per
    /// pair: the sum of [`CostModel::prefill_attn`] over the prefilling sequences (0 for
    /// models without such a term) [pairs].
    pub prefill_attn: u64,
    /// Micro-batches the decoding sequences are split into: llama.cpp with per-slot KV
    /// (`-np` > 1 without `-kvu`) puts only consecutive slot ids in one micro-batch, so
    /// decodes in slots {0, 2} run as two forward passes. 0 = not tracked (one)
    /// [micro-batches].
    pub decode_ubatches: u32,
    /// The longest context in KV among the batch's sequences, when the cost needs it
    /// (`UbatchCost` with a KV window: llama.cpp pads a micro-batch's attention to its
    /// longest sequence); 0 = not tracked (the mean context stands in) [tokens].
    pub max_context_tokens: u64,
}

/// Iteration duration as a function of the batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CostModel {
    /// The reference study's formula.
    Reference(ReferenceCost),
    /// `β0 + βp·prefill_tokens + βd·decode_seqs + βkv·context_tokens + βattn·prefill_attn
    /// + βmix·prefill_tokens·[decode_seqs > 0]`.
    Linear(LinearCost),
    /// Interpolated measured decode step and prefill latencies.
    Table(TableCost),
    /// Measured cost of one micro-batch by its tokens, summed over the iteration's
    /// micro-batches, plus linear context, attention and mixed terms.
    Ubatch(UbatchCost),
    /// GPU × model roofline: compute-bound prefill, bandwidth-bound decode.
    Roofline(RooflineCost),
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel::Reference(ReferenceCost::default())
    }
}

impl CostModel {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`ConfigError::Cost`] naming the bad coefficient or point.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            CostModel::Reference(c) => c.validate(),
            CostModel::Linear(c) => c.validate(),
            CostModel::Table(c) => c.validate(),
            CostModel::Ubatch(c) => c.validate(),
            CostModel::Roofline(c) => c.validate(),
        }
    }

    /// Duration of one iteration [s].
    #[inline]
    pub fn iteration(&self, b: &BatchShape) -> f64 {
        match self {
            CostModel::Reference(c) => c.iteration(b),
            CostModel::Linear(c) => c.iteration(b),
            CostModel::Table(c) => c.iteration(b),
            CostModel::Ubatch(c) => c.iteration(b),
            CostModel::Roofline(c) => c.iteration(b),
        }
    }

    /// Duration of a pure decode iteration of `n` sequences with `context` tokens in KV [s].
    #[inline]
    pub fn decode_step(&self, n: u32, context: u64) -> f64 {
        self.iteration(&BatchShape {
            running: n,
            decode_seqs: n,
            context_tokens: context,
            ..BatchShape::default()
        })
    }

    /// Duration of a pure decode iteration of `n` sequences split into `ubatches`
    /// micro-batches (see [`BatchShape::decode_ubatches`]) [s].
    #[inline]
    pub fn decode_step_split(&self, n: u32, ubatches: u32, context: u64) -> f64 {
        self.iteration(&BatchShape {
            running: n,
            decode_seqs: n,
            context_tokens: context,
            decode_ubatches: ubatches,
            ..BatchShape::default()
        })
    }

    /// Duration of a prefill-only iteration of `tokens` for `seqs` joiners with `running`
    /// requests in the running set (prefill priority) [s].
    #[inline]
    pub fn prefill(&self, running: u32, seqs: u32, tokens: u64) -> f64 {
        self.iteration(&BatchShape {
            running,
            prefill_tokens: tokens,
            prefill_seqs: seqs,
            ..BatchShape::default()
        })
    }

    /// Query–key pairs this model charges for a prompt chunk of `chunk` tokens after
    /// `prefix` tokens already in KV (the summand of [`BatchShape::prefill_attn`]); 0 for
    /// models without a per-pair attention term [pairs].
    #[inline]
    pub fn prefill_attn(&self, prefix: u64, chunk: u32) -> u64 {
        match self {
            CostModel::Linear(c) => c.attn_pairs(prefix, chunk),
            CostModel::Ubatch(c) => c.attn_pairs(prefix, chunk),
            _ => 0,
        }
    }

    /// The same model with every iteration taking `f` times as long: a server slowed
    /// by work beside it on the same machine (bench-native's co-location factor,
    /// docs/accuracy.md). `f` = 1 returns the model unchanged.
    #[must_use]
    pub fn scaled(&self, f: f64) -> CostModel {
        let pts = |v: &[(f64, f64)]| v.iter().map(|&(x, y)| (x, y * f)).collect();
        match self {
            CostModel::Reference(c) => CostModel::Reference(ReferenceCost {
                prefill_base_s: c.prefill_base_s * f,
                prefill_per_token_s: c.prefill_per_token_s * f,
                decode_base_s: c.decode_base_s * f,
                decode_per_batch_s: c.decode_per_batch_s * f,
                ..*c
            }),
            CostModel::Linear(c) => CostModel::Linear(LinearCost {
                beta0: c.beta0 * f,
                beta_prefill: c.beta_prefill * f,
                beta_decode: c.beta_decode * f,
                beta_kv: c.beta_kv * f,
                beta_attn: c.beta_attn * f,
                beta_mixed: c.beta_mixed * f,
                ..*c
            }),
            CostModel::Table(c) => CostModel::Table(TableCost {
                decode: pts(&c.decode),
                prefill: pts(&c.prefill),
            }),
            CostModel::Ubatch(c) => CostModel::Ubatch(UbatchCost {
                ubatch: pts(&c.ubatch),
                decode: pts(&c.decode),
                beta_kv: c.beta_kv * f,
                beta_attn: c.beta_attn * f,
                beta_mixed: c.beta_mixed * f,
                ..c.clone()
            }),
            CostModel::Roofline(c) => CostModel::Roofline(RooflineCost {
                peak_flops: c.peak_flops / f,
                mem_bw: c.mem_bw / f,
                step_overhead_s: c.step_overhead_s * f,
                per_seq_overhead_s: c.per_seq_overhead_s * f,
                ..c.clone()
            }),
        }
    }

    /// Whether the duration depends on context tokens (if not, a run of identical decode
    /// iterations has one step length and can be jumped in one go). The per-pair prompt
    /// attention term (`βattn`) does not count: it is 0 in pure decode iterations.
    pub fn depends_on_context(&self) -> bool {
        match self {
            CostModel::Linear(c) => c.beta_kv != 0.0,
            CostModel::Ubatch(c) => c.beta_kv != 0.0,
            CostModel::Roofline(c) => c.kv_bytes_per_elem != 0.0,
            _ => false,
        }
    }
}

/// A cost model with per-batch-size values precomputed for batch sizes up to B, so the
/// event loop's hot path does no `pow` or interpolation. Same values as [`CostModel`].
#[derive(Clone, Debug)]
pub struct PreparedCost {
    model: CostModel,
    /// Pure decode step [s] by batch size (context-independent models), index = n.
    decode: Vec<f64>,
    /// Reference model's batch factor f(b), index = b.
    factor: Vec<f64>,
    /// Scheduling overhead added to every iteration [s] (0 unless
    /// [`PreparedCost::with_step_overhead`]).
    step_s: f64,
}

impl PreparedCost {
    pub fn new(model: &CostModel, max_batch: u32) -> PreparedCost {
        let n = (max_batch as usize).min(1 << 16) + 1;
        let decode = (0..n).map(|b| model.decode_step(b as u32, 0)).collect();
        let factor = match model {
            CostModel::Reference(c) => (0..n).map(|b| c.batch_factor(b as u32)).collect(),
            _ => Vec::new(),
        };
        PreparedCost {
            model: model.clone(),
            decode,
            factor,
            step_s: 0.0,
        }
    }

    /// The same cost with `step_s` of scheduling overhead added to every iteration
    /// (`ServerConfig::step_overhead_s`, docs/model.md, Overheads): the CPU work between
    /// two forward passes that no batch shape pays less of. 0 leaves every duration as it
    /// was, bit for bit.
    pub fn with_step_overhead(mut self, step_s: f64) -> PreparedCost {
        if step_s != 0.0 {
            for d in &mut self.decode {
                *d += step_s;
            }
        }
        self.step_s = step_s;
        self
    }

    /// The model's duration plus the step overhead, unchanged when that is 0.
    #[inline]
    fn plus_step(&self, d: f64) -> f64 {
        if self.step_s == 0.0 {
            d
        } else {
            d + self.step_s
        }
    }

    /// As [`CostModel::iteration`].
    #[inline]
    pub fn iteration(&self, s: &BatchShape) -> f64 {
        let d = match &self.model {
            CostModel::Reference(c) if (s.running.max(1) as usize) < self.factor.len() => {
                c.iteration_with_factor(s, self.factor[s.running.max(1) as usize])
            }
            m => m.iteration(s),
        };
        self.plus_step(d)
    }

    /// As [`CostModel::decode_step`].
    #[inline]
    pub fn decode_step(&self, n: u32, context: u64) -> f64 {
        match self.decode.get(n as usize) {
            Some(&d) if !self.model.depends_on_context() => d,
            _ => self.plus_step(self.model.decode_step(n, context)),
        }
    }

    pub fn depends_on_context(&self) -> bool {
        self.model.depends_on_context()
    }

    /// As [`CostModel::decode_step_split`]; one micro-batch (or 0, untracked) is
    /// [`PreparedCost::decode_step`].
    #[inline]
    pub fn decode_step_split(&self, n: u32, ubatches: u32, context: u64) -> f64 {
        if ubatches <= 1 {
            self.decode_step(n, context)
        } else {
            self.plus_step(self.model.decode_step_split(n, ubatches, context))
        }
    }

    /// As [`CostModel::prefill_attn`].
    #[inline]
    pub fn prefill_attn(&self, prefix: u64, chunk: u32) -> u64 {
        self.model.prefill_attn(prefix, chunk)
    }
}

/// Piecewise-linear interpolation through sorted `(x, y)` points, linear extrapolation
/// beyond the ends (flat if only one point).
pub(crate) fn interpolate(points: &[(f64, f64)], x: f64) -> f64 {
    match points {
        [] => 0.0,
        [(_, y)] => *y,
        _ => {
            let i = points
                .partition_point(|p| p.0 < x)
                .clamp(1, points.len() - 1);
            let (x0, y0) = points[i - 1];
            let (x1, y1) = points[i];
            y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_model_takes_f_times_as_long_for_every_batch() {
        let linear = LinearCost {
            beta0: 2e-3,
            beta_prefill: 1e-4,
            beta_decode: 3e-4,
            beta_kv: 1e-7,
            beta_attn: 1e-9,
            attn_tile: 64,
            beta_mixed: 2e-5,
        };
        let pts = vec![(1.0, 3e-3), (16.0, 9e-3), (512.0, 0.2)];
        let models = [
            CostModel::Reference(ReferenceCost::default()),
            CostModel::Linear(linear),
            CostModel::Table(TableCost {
                decode: pts.clone(),
                prefill: pts.clone(),
            }),
            CostModel::Ubatch(UbatchCost {
                ubatch: pts.clone(),
                decode: vec![(1.0, 3e-3), (4.0, 5e-3)],
                beta_kv: 1e-7,
                kv_window: 256,
                beta_attn: 1e-9,
                attn_tile: 64,
                beta_mixed: 2e-5,
            }),
            CostModel::Roofline(RooflineCost::default()),
        ];
        let shapes = [
            BatchShape {
                running: 3,
                decode_seqs: 3,
                context_tokens: 900,
                ..BatchShape::default()
            },
            BatchShape {
                running: 2,
                prefill_tokens: 300,
                prefill_seqs: 1,
                decode_seqs: 1,
                context_tokens: 700,
                prefill_attn: 45_000,
                max_context_tokens: 400,
                ..BatchShape::default()
            },
        ];
        for m in &models {
            m.validate().unwrap();
            assert_eq!(&m.scaled(1.0), m);
            let slow = m.scaled(1.37);
            slow.validate().unwrap();
            for b in &shapes {
                let (d, s) = (m.iteration(b), slow.iteration(b));
                assert!(d > 0.0, "{m:?}");
                assert!((s / d - 1.37).abs() < 1e-12, "{m:?}: {d} → {s}");
            }
        }
    }
}
