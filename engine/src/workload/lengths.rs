//! Request length distributions: lognormal, empirical pairs, fixed and mixtures.

use crate::error::{non_negative, positive, ConfigError};
use rand::Rng;
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};

/// One class of a mixture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixtureClass {
    /// Relative weight (> 0; weights need not sum to 1).
    pub weight: f64,
    /// Lengths of this class (not itself a mixture).
    pub lengths: LengthDist,
}

/// How long requests are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LengthDist {
    /// Independent lognormal prompt and output, `max(1, floor(X))`, given medians [tokens]
    /// and σ of the underlying normal.
    Lognormal {
        prompt_median: f64,
        prompt_sigma: f64,
        output_median: f64,
        output_sigma: f64,
    },
    /// (prompt, output) pairs sampled uniformly with replacement, e.g. ShareGPT.
    Empirical { pairs: Vec<(u32, u32)> },
    /// Every request the same.
    Fixed { prompt: u32, output: u32 },
    /// Weighted classes; a request's class label is its index here.
    Mixture { classes: Vec<MixtureClass> },
}

impl LengthDist {
    /// The reference study's lengths: prompt median 256 σ 0.55, output median 128 σ 0.70.
    pub fn reference() -> LengthDist {
        LengthDist::Lognormal {
            prompt_median: 256.0,
            prompt_sigma: 0.55,
            output_median: 128.0,
            output_sigma: 0.70,
        }
    }

    /// The embedded 5,000 ShareGPT pairs.
    pub fn sharegpt() -> LengthDist {
        LengthDist::Empirical {
            pairs: crate::data::sharegpt_pairs(),
        }
    }

    /// The profiler study's mix: 50 % short 32→64, 50 % long 512→32.
    pub fn short_long_mix() -> LengthDist {
        LengthDist::Mixture {
            classes: vec![
                MixtureClass {
                    weight: 0.5,
                    lengths: LengthDist::Fixed {
                        prompt: 32,
                        output: 64,
                    },
                },
                MixtureClass {
                    weight: 0.5,
                    lengths: LengthDist::Fixed {
                        prompt: 512,
                        output: 32,
                    },
                },
            ],
        }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match self {
            LengthDist::Lognormal {
                prompt_median,
                prompt_sigma,
                output_median,
                output_sigma,
            } => {
                positive("prompt median", *prompt_median)?;
                positive("output median", *output_median)?;
                non_negative("prompt sigma", *prompt_sigma)?;
                non_negative("output sigma", *output_sigma)?;
            }
            LengthDist::Empirical { pairs } => {
                if pairs.is_empty() {
                    return Err(ConfigError::Empty {
                        what: "empirical length table",
                    });
                }
                if pairs.iter().any(|p| p.0 == 0 || p.1 == 0) {
                    return Err(ConfigError::Zero {
                        name: "empirical lengths",
                        value: 0,
                    });
                }
            }
            LengthDist::Fixed { prompt, output } => {
                crate::error::at_least_one("prompt tokens", *prompt as u64)?;
                crate::error::at_least_one("output tokens", *output as u64)?;
            }
            LengthDist::Mixture { classes } => {
                if classes.is_empty() {
                    return Err(ConfigError::Empty { what: "mixture" });
                }
                for c in classes {
                    positive("mixture weight", c.weight)?;
                    if matches!(c.lengths, LengthDist::Mixture { .. }) {
                        return Err(ConfigError::OutOfRange {
                            name: "mixture",
                            value: 0.0,
                            why: "classes cannot be mixtures",
                        });
                    }
                    c.lengths.validate()?;
                }
            }
        }
        Ok(())
    }

    /// This distribution prepared for drawing many samples (see [`LengthSampler`]).
    pub(crate) fn sampler(&self) -> LengthSampler<'_> {
        match self {
            LengthDist::Lognormal {
                prompt_median,
                prompt_sigma,
                output_median,
                output_sigma,
            } => LengthSampler::Lognormal {
                prompt: TokenLognormal::new(*prompt_median, *prompt_sigma),
                output: TokenLognormal::new(*output_median, *output_sigma),
            },
            LengthDist::Empirical { pairs } => LengthSampler::Empirical(pairs),
            LengthDist::Fixed { prompt, output } => LengthSampler::Fixed(*prompt, *output),
            LengthDist::Mixture { classes } => LengthSampler::Mixture {
                total: classes.iter().map(|c| c.weight).sum(),
                classes: classes
                    .iter()
                    .map(|c| (c.weight, c.lengths.sampler()))
                    .collect(),
            },
        }
    }

    /// The smallest prompt + output this distribution can produce [tokens].
    pub fn min_total(&self) -> u64 {
        match self {
            LengthDist::Lognormal { .. } => 2,
            LengthDist::Empirical { pairs } => pairs
                .iter()
                .map(|p| p.0 as u64 + p.1 as u64)
                .min()
                .unwrap_or(2),
            LengthDist::Fixed { prompt, output } => *prompt as u64 + *output as u64,
            LengthDist::Mixture { classes } => classes
                .iter()
                .map(|c| c.lengths.min_total())
                .min()
                .unwrap_or(2),
        }
    }

    /// Moments of (prompt, output, prompt+output): E[X] and E[X²] for each.
    pub fn moments(&self) -> LengthMoments {
        match self {
            LengthDist::Lognormal {
                prompt_median,
                prompt_sigma,
                output_median,
                output_sigma,
            } => {
                // Exact for the floored lognormal by summing the pmf over its support.
                let p = floored_lognormal_moments(*prompt_median, *prompt_sigma);
                let o = floored_lognormal_moments(*output_median, *output_sigma);
                LengthMoments::independent(p, o)
            }
            LengthDist::Empirical { pairs } => {
                let n = pairs.len() as f64;
                let mut m = LengthMoments::default();
                for &(p, o) in pairs {
                    m.add(p as f64, o as f64, 1.0 / n);
                }
                m
            }
            LengthDist::Fixed { prompt, output } => {
                let mut m = LengthMoments::default();
                m.add(*prompt as f64, *output as f64, 1.0);
                m
            }
            LengthDist::Mixture { classes } => {
                let total: f64 = classes.iter().map(|c| c.weight).sum();
                let mut m = LengthMoments::default();
                for c in classes {
                    let w = c.weight / total;
                    let cm = c.lengths.moments();
                    m.prompt.0 += w * cm.prompt.0;
                    m.prompt.1 += w * cm.prompt.1;
                    m.output.0 += w * cm.output.0;
                    m.output.1 += w * cm.output.1;
                    m.total.0 += w * cm.total.0;
                    m.total.1 += w * cm.total.1;
                }
                m
            }
        }
    }
}

/// First and second moments (E[X], E[X²]) of prompt, output and their sum [tokens].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LengthMoments {
    pub prompt: (f64, f64),
    pub output: (f64, f64),
    pub total: (f64, f64),
}

impl LengthMoments {
    fn add(&mut self, p: f64, o: f64, w: f64) {
        self.prompt.0 += w * p;
        self.prompt.1 += w * p * p;
        self.output.0 += w * o;
        self.output.1 += w * o * o;
        self.total.0 += w * (p + o);
        self.total.1 += w * (p + o) * (p + o);
    }

    fn independent(p: (f64, f64), o: (f64, f64)) -> LengthMoments {
        LengthMoments {
            prompt: p,
            output: o,
            total: (p.0 + o.0, p.1 + 2.0 * p.0 * o.0 + o.1),
        }
    }
}

/// A [`LengthDist`] prepared for drawing: everything that does not depend on the random
/// numbers (the lognormals' μ = ln median, a mixture's total weight) is computed once per
/// stream instead of once per draw. Draws are the same numbers, bit for bit.
#[derive(Clone, Debug)]
pub(crate) enum LengthSampler<'a> {
    Lognormal {
        prompt: TokenLognormal,
        output: TokenLognormal,
    },
    Empirical(&'a [(u32, u32)]),
    Fixed(u32, u32),
    /// `(weight, lengths)` per class and the sum of the weights.
    Mixture {
        total: f64,
        classes: Vec<(f64, LengthSampler<'a>)>,
    },
}

impl LengthSampler<'_> {
    /// Draws (prompt, output, class).
    pub(crate) fn sample<R: Rng>(&self, rng: &mut R) -> (u32, u32, u16) {
        match self {
            LengthSampler::Lognormal { prompt, output } => {
                let p = prompt.sample(rng);
                let o = output.sample(rng);
                (p, o, 0)
            }
            LengthSampler::Empirical(pairs) => {
                let (p, o) = pairs[rng.random_range(0..pairs.len())];
                (p, o, 0)
            }
            LengthSampler::Fixed(p, o) => (*p, *o, 0),
            LengthSampler::Mixture { total, classes } => {
                let mut u = rng.random::<f64>() * total;
                let mut pick = classes.len() - 1;
                for (i, (w, _)) in classes.iter().enumerate() {
                    if u < *w {
                        pick = i;
                        break;
                    }
                    u -= w;
                }
                let (p, o, _) = classes[pick].1.sample(rng);
                (p, o, pick as u16)
            }
        }
    }
}

/// Token count `max(1, floor(X))`, X lognormal(ln median, σ); σ = 0 is the constant
/// `max(1, floor(median))` and draws nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TokenLognormal {
    Constant(u32),
    Random(LogNormal<f64>),
}

impl TokenLognormal {
    fn new(median: f64, sigma: f64) -> TokenLognormal {
        if sigma == 0.0 {
            TokenLognormal::Constant((median.floor() as u32).max(1))
        } else {
            TokenLognormal::Random(LogNormal::new(libm::log(median), sigma).expect("validated"))
        }
    }

    #[inline]
    fn sample<R: Rng>(&self, rng: &mut R) -> u32 {
        match self {
            TokenLognormal::Constant(n) => *n,
            TokenLognormal::Random(d) => {
                let x: f64 = d.sample(rng);
                // `as u32` truncates, which is floor for x >= 0 (x = e^y > 0); it saturates
                // at u32::MAX, and the `min` maps NaN to u32::MAX as `floor().min()` did.
                // (`f64::floor` is a libm call on baseline x86-64, not an instruction.)
                (x.min(u32::MAX as f64) as u32).max(1)
            }
        }
    }
}

/// E[Y], E[Y²] of Y = max(1, floor(X)), X lognormal(ln median, σ).
fn floored_lognormal_moments(median: f64, sigma: f64) -> (f64, f64) {
    if sigma == 0.0 {
        let y = median.floor().max(1.0);
        return (y, y * y);
    }
    let mu = libm::log(median);
    let cdf = |x: f64| 0.5 * libm::erfc(-(libm::log(x) - mu) / (sigma * core::f64::consts::SQRT_2));
    // P(Y = 1) = P(X < 2); P(Y = k) = P(k <= X < k+1) for k >= 2.
    let mut p_prev = cdf(2.0);
    let (mut m1, mut m2) = (p_prev, p_prev);
    let upper = (median * libm::exp(9.0 * sigma)).ceil() as u64 + 2;
    for k in 2..upper {
        let c = cdf(k as f64 + 1.0);
        let p = c - p_prev;
        p_prev = c;
        let y = k as f64;
        m1 += p * y;
        m2 += p * y * y;
    }
    (m1, m2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_moments() {
        let m = LengthDist::reference().moments();
        assert!((m.prompt.0 - 297.3).abs() < 0.3, "{:?}", m.prompt);
        assert!((m.output.0 - 163.0).abs() < 0.3, "{:?}", m.output);
    }

    #[test]
    fn mixture_labels() {
        let d = LengthDist::short_long_mix();
        let mut rng = crate::workload::stream_rng(0, 1);
        let mut n1 = 0;
        for _ in 0..10_000 {
            let (p, o, c) = d.sampler().sample(&mut rng);
            assert_eq!((p, o), if c == 0 { (32, 64) } else { (512, 32) });
            n1 += c as u32;
        }
        assert!((4700..5300).contains(&n1));
        assert!((d.moments().prompt.0 - 272.0).abs() < 1e-9);
    }
}
