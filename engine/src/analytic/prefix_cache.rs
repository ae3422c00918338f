//! The prefix cache's hit rate by Che's approximation for an LRU cache (docs/model.md,
//! Prefix caching), and its effect on mean TTFT through the batching model.
//!
//! **Che's approximation.** Under independent references, item i referenced at rate λᵢ
//! stays in an LRU cache of C items for a *characteristic time* T after its last
//! reference, the root of
//!
//! ```text
//! Σᵢ (1 − e^{−λᵢ T}) + r₁ T = C,
//! ```
//!
//! and a reference hits with probability hᵢ = 1 − e^{−λᵢ T}. The term r₁ T is the room
//! taken by blocks referenced once and never again (inserted at r₁ per second, each staying
//! T): the blocks of a request's own tokens.
//!
//! **The workload.** Shared system prompts ([`crate::workload::SystemPrompts`]): a share s
//! of requests, arriving at λ, begin with group g's prompt (probability p_g) of P tokens,
//! ⌊P / bs⌋ full blocks, all referenced together at λ s p_g. Every request also leaves
//! its own full blocks, ≈ (prompt + output) / bs − ½ of them beyond the system prompt. The
//! cache holds what running requests do not hold privately: C = KV blocks − N_run × their
//! own blocks, with N_run from Little's law over the batching model's decode time.
//!
//! **TTFT.** A hit skips ⌊P / bs⌋·bs tokens of prefill, so the batching model
//! ([`super::BatchingModel`]) runs on three classes of prompt: hits (p + P − ⌊P/bs⌋·bs),
//! misses (p + P) and requests without a system prompt (p), weighted s·h̄, s·(1 − h̄), 1 − s.
//! KV occupancy is then counted by prefilled tokens, an underestimate of a hit's footprint
//! by its shared blocks (held once, however many requests share them).
//!
//! **Scope.** Fixed request lengths (the classes above must be fixed-length ones),
//! Poisson-like arrivals, the batching model's policies. Not modelled: two requests of a
//! group missing together before either has computed the prompt (burst misses), a
//! preempted request finding its own blocks, conversations and traces.

use super::{check_positive, AnalyticError, BatchingModel, Prediction};
use crate::config::{KvMode, PrefixCache, SimConfig};
use crate::workload::{LengthDist, MixtureClass, SharedTokens, SystemPrompts};
use serde::{Deserialize, Serialize};

/// Che's approximation for an LRU cache of `capacity` items: classes of `count` items
/// each referenced at `rate` [1/s], plus one-time items inserted at `once_rate` [1/s].
#[derive(Clone, Debug, PartialEq)]
pub struct CheLru {
    classes: Vec<(f64, f64)>,
    once_rate: f64,
    capacity: f64,
}

impl CheLru {
    /// # Errors
    /// [`AnalyticError::Invalid`] for a negative or non-finite count, rate or capacity.
    pub fn new(
        classes: Vec<(f64, f64)>,
        once_rate: f64,
        capacity: f64,
    ) -> Result<CheLru, AnalyticError> {
        for &(n, r) in &classes {
            super::check_non_negative("item count", n)?;
            super::check_non_negative("reference rate", r)?;
        }
        super::check_non_negative("one-time insertion rate", once_rate)?;
        super::check_non_negative("cache capacity", capacity)?;
        Ok(CheLru {
            classes,
            once_rate,
            capacity,
        })
    }

    /// Items the cache would hold after `t` [s] of references: Σ n (1 − e^{−λt}) + r₁ t.
    fn occupancy(&self, t: f64) -> f64 {
        self.classes
            .iter()
            .map(|&(n, r)| n * -(-r * t).exp_m1())
            .sum::<f64>()
            + self.once_rate * t
    }

    /// The characteristic time T [s]: infinite when everything ever referenced fits.
    pub fn characteristic_time(&self) -> f64 {
        let all: f64 = self.classes.iter().filter(|c| c.1 > 0.0).map(|c| c.0).sum();
        if self.once_rate == 0.0 && all <= self.capacity {
            return f64::INFINITY;
        }
        if self.capacity <= 0.0 {
            return 0.0;
        }
        // Occupancy grows with t from 0: bracket the root, then bisect.
        let mut hi = 1.0;
        while self.occupancy(hi) < self.capacity && hi < 1e300 {
            hi *= 2.0;
        }
        let mut lo = 0.0;
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if self.occupancy(mid) < self.capacity {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-12 * hi {
                break;
            }
        }
        0.5 * (lo + hi)
    }

    /// Hit probability of an item referenced at `rate` [1/s]: 1 − e^{−rate·T}.
    pub fn hit_probability(&self, rate: f64) -> f64 {
        let t = self.characteristic_time();
        if t.is_infinite() {
            return if rate > 0.0 { 1.0 } else { 0.0 };
        }
        -(-rate * t).exp_m1()
    }
}

/// What the model predicts for a configuration with the prefix cache on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixPrediction {
    /// Che's characteristic time [s] (infinite: every system prompt stays cached).
    pub characteristic_time_s: f64,
    /// Blocks the LRU holds [blocks].
    pub cache_blocks: f64,
    /// Expected blocks found / full prompt blocks looked up.
    pub block_hit_rate: f64,
    /// Expected prompt tokens found cached / prompt tokens.
    pub token_hit_rate: f64,
    /// Expected prefill tokens saved per request [tokens].
    pub saved_tokens_per_request: f64,
    /// Mean TTFT with the cache [s] (None: the batching model finds the load unstable).
    pub ttft_mean_s: Option<f64>,
    /// Mean TTFT of the same configuration without it [s].
    pub ttft_mean_off_s: Option<f64>,
}

fn unsupported(what: &str) -> AnalyticError {
    AnalyticError::Unsupported {
        model: "prefix cache (Che)",
        what: what.into(),
    }
}

/// The three prompt classes of a system-prompt workload with fixed lengths: (weight,
/// prompt tokens prefilled), for a hit probability `h` of a group's blocks.
fn classes(sys: &SystemPrompts, prompt: u32, output: u32, skip: u32, h: f64) -> LengthDist {
    let class = |weight: f64, prompt: u32| MixtureClass {
        weight,
        lengths: LengthDist::Fixed { prompt, output },
    };
    let full = prompt + sys.tokens;
    let all = [
        class(sys.share * h, full - skip),
        class(sys.share * (1.0 - h), full),
        class(1.0 - sys.share, prompt),
    ];
    LengthDist::Mixture {
        classes: all.into_iter().filter(|c| c.weight > 0.0).collect(),
    }
}

/// Mean TTFT of `cfg` with its lengths replaced by `lengths` and nothing shared.
fn ttft(cfg: &SimConfig, lengths: LengthDist) -> Result<Option<(f64, f64)>, AnalyticError> {
    let mut c = cfg.clone();
    c.workload.lengths = lengths;
    c.workload.shared = None;
    c.server.prefix_cache = PrefixCache::Off;
    Ok(match BatchingModel::from_config(&c)?.prediction()? {
        Prediction::Stable(m) => Some((m.ttft_mean_s, m.tpot_mean_s)),
        Prediction::Unstable { .. } => None,
    })
}

/// Che's approximation for the prefix cache of `cfg` (paged KV, system prompts, fixed
/// lengths), with its mean TTFT through the batching model.
///
/// # Errors
/// [`AnalyticError::Unsupported`] outside the model's scope (see the module doc); the
/// configuration's own errors.
pub fn predict_prefix_cache(cfg: &SimConfig) -> Result<PrefixPrediction, AnalyticError> {
    cfg.validate()?;
    if cfg.server.kv_mode != KvMode::Paged {
        return Err(unsupported("reserve KV"));
    }
    if cfg.server.prefix_cache == PrefixCache::Slot {
        // Che's approximation is of one LRU cache of blocks, not of per-slot caches.
        return Err(unsupported("llama.cpp's slot cache"));
    }
    let Some(SharedTokens::Prefixes { system: sys }) = &cfg.workload.shared else {
        return Err(unsupported("a workload without shared system prompts only"));
    };
    let LengthDist::Fixed { prompt, output } = cfg.workload.lengths else {
        return Err(unsupported("lengths other than fixed ones"));
    };
    if cfg.workload.max_model_len.is_some() {
        return Err(unsupported("a max model length"));
    }
    let lambda = check_positive("arrival rate", cfg.workload.rate())?;
    let bs = cfg.server.block_size.max(1) as f64;
    let n_sys = (sys.tokens as f64 / bs).floor();
    let skip = n_sys as u32 * cfg.server.block_size.max(1);
    // The TTFT and TPOT without the cache give N_run (Little over the decode time).
    let off = ttft(cfg, classes(sys, prompt, output, skip, 0.0))?;
    let tpot = off.map_or(0.0, |o| o.1);
    let (p, o, s) = (prompt as f64, output as f64, sys.share);
    let n_run = lambda * (tpot * (o - 1.0).max(0.0));
    // Blocks a running request holds privately: its own prompt blocks and, on average,
    // half its output.
    let own_prompt = s * (p + sys.tokens as f64 - n_sys * bs) + (1.0 - s) * p;
    let held = (own_prompt + o / 2.0) / bs + 0.5;
    let total_blocks = (cfg.server.kv_tokens / cfg.server.block_size.max(1) as u64) as f64;
    let capacity = (total_blocks - n_run * held).max(0.0);
    // Own full blocks each request leaves (one-time items): of prompt + output − 1
    // computed tokens, less its system blocks.
    let own_left = s * (((p + sys.tokens as f64 + o - 1.0) / bs - 0.5) - n_sys).max(0.0)
        + (1.0 - s) * ((p + o - 1.0) / bs - 0.5).max(0.0);
    let pop = sys.popularity();
    let che = CheLru::new(
        pop.iter().map(|&pg| (n_sys, lambda * s * pg)).collect(),
        lambda * own_left,
        capacity,
    )?;
    let h_bar: f64 = pop
        .iter()
        .map(|&pg| pg * che.hit_probability(lambda * s * pg))
        .sum();
    let hits = s * h_bar * n_sys;
    // Full blocks within the first target − 1 tokens, as the simulator looks them up.
    let looked =
        s * ((p + sys.tokens as f64 - 1.0) / bs).floor() + (1.0 - s) * ((p - 1.0) / bs).floor();
    let prompt_mean = p + s * sys.tokens as f64;
    let on = ttft(cfg, classes(sys, prompt, output, skip, h_bar))?;
    Ok(PrefixPrediction {
        characteristic_time_s: che.characteristic_time(),
        cache_blocks: capacity,
        block_hit_rate: if looked > 0.0 { hits / looked } else { 0.0 },
        token_hit_rate: hits * bs / prompt_mean,
        saved_tokens_per_request: hits * bs,
        ttft_mean_s: on.map(|x| x.0),
        ttft_mean_off_s: off.map(|x| x.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn che_matches_hand_computed_values() {
        // Two equally popular items at rate 1, a cache of 1: 2(1 − e^{−T}) = 1, so
        // T = ln 2 and each hits with probability 1/2 (by symmetry, exactly the LRU
        // answer for two items: the other item was referenced last half the time).
        let c = CheLru::new(vec![(2.0, 1.0)], 0.0, 1.0).unwrap();
        assert!((c.characteristic_time() - std::f64::consts::LN_2).abs() < 1e-9);
        assert!((c.hit_probability(1.0) - 0.5).abs() < 1e-9);
        // One item at rate 1 with one-time items at rate 1 in a cache of 1: the
        // one-time items push it out: (1 − e^{−T}) + T = 1 → T ≈ 0.5671 (the omega
        // constant, W(1)), h = 1 − e^{−T} = 1 − T ≈ 0.4329.
        let c = CheLru::new(vec![(1.0, 1.0)], 1.0, 1.0).unwrap();
        let t = c.characteristic_time();
        assert!((t - 0.567_143_290_4).abs() < 1e-8, "{t}");
        assert!((c.hit_probability(1.0) - (1.0 - t)).abs() < 1e-9);
        // Everything fits: T infinite, referenced items always hit.
        let c = CheLru::new(vec![(3.0, 0.5)], 0.0, 3.0).unwrap();
        assert!(c.characteristic_time().is_infinite());
        assert_eq!(c.hit_probability(0.5), 1.0);
        assert!(CheLru::new(vec![(1.0, -1.0)], 0.0, 1.0).is_err());
    }

    #[test]
    fn che_against_the_exact_lru_of_three_items() {
        // IRM with probabilities (1/2, 1/3, 1/6), cache of 2: item i is cached when it was
        // referenced last, or second to last: pᵢ + Σ_{j≠i} pⱼ pᵢ/(1 − pⱼ); the hit rate
        // Σᵢ pᵢ P(i cached) = 0.425 + 11/45 + 5/72 = 0.73889.
        let p = [0.5, 1.0 / 3.0, 1.0 / 6.0];
        let mut exact = 0.0;
        for i in 0..3 {
            let mut in_cache = 0.0;
            for j in 0..3 {
                if j != i {
                    in_cache += p[j] * p[i] / (1.0 - p[j]);
                }
            }
            exact += p[i] * (p[i] + in_cache);
        }
        let c = CheLru::new(p.iter().map(|&x| (1.0, x)).collect(), 0.0, 2.0).unwrap();
        let che: f64 = p.iter().map(|&x| x * c.hit_probability(x)).sum();
        assert!((exact - 0.738_889).abs() < 1e-6, "{exact}");
        assert!((che - exact).abs() < 0.02, "{che} vs {exact}");
    }
}
