//! Discretised (prompt, output) length distributions for the numerical models.
//!
//! A [`LengthDist`] becomes a list of weighted atoms. Lognormal marginals are cut into
//! quantile bins that get finer in the upper tail (u-edges `1 − (1 − i/N)²`, so the last
//! bin holds 1/N² of the mass and p99 tails are resolved), each atom at the bin's
//! conditional mean (exact, via the normal CDF) less ½ for the floor. Empirical pairs are
//! grouped on a grid of marginal quantiles, keeping their joint dependence.

use super::special::{normal_cdf, normal_quantile};
use crate::workload::{LengthDist, LengthMoments};
use statrs::distribution::LogNormal;
use statrs::statistics::Distribution;
use std::sync::Arc;

/// One atom of the joint length distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Atom {
    /// Mean prompt length in the bin [tokens].
    pub prompt: f64,
    /// Mean output length in the bin [tokens].
    pub output: f64,
    /// Probability.
    pub w: f64,
    /// Prompt bin lower / upper edge [tokens] (uniform within for CDFs).
    pub prompt_lo: f64,
    pub prompt_hi: f64,
    /// Index of the prompt bin (atoms sharing it have the same prompt).
    pub prompt_bin: usize,
}

impl Atom {
    pub fn total(&self) -> f64 {
        self.prompt + self.output
    }
}

/// A 1-D marginal bin: mean, lower edge, upper edge, probability.
#[derive(Clone, Copy, Debug)]
struct Bin {
    mean: f64,
    lo: f64,
    hi: f64,
    w: f64,
}

fn tail_edges(n: usize) -> Vec<f64> {
    (0..=n)
        .map(|i| 1.0 - (1.0 - i as f64 / n as f64).powi(2))
        .collect()
}

/// Bins of `max(1, floor(X))`, X lognormal (median, σ).
fn lognormal_bins(median: f64, sigma: f64, n: usize) -> Vec<Bin> {
    if sigma <= 0.0 {
        let v = libm::floor(median).max(1.0);
        return vec![Bin {
            mean: v,
            lo: v,
            hi: v,
            w: 1.0,
        }];
    }
    let edges = tail_edges(n);
    let shift = libm::exp(sigma * sigma / 2.0);
    // Each inner edge bounds two bins: its normal quantile and shifted CDF once.
    let z: Vec<f64> = edges.iter().map(|&u| normal_quantile(u)).collect();
    let cdf_shifted: Vec<f64> = z.iter().map(|&x| normal_cdf(x - sigma)).collect();
    let mut bins = Vec::with_capacity(n);
    for i in 0..n {
        let (ua, ub) = (edges[i], edges[i + 1]);
        let (za, zb) = (z[i], z[i + 1]);
        let part = cdf_shifted[i + 1] - cdf_shifted[i];
        let mean = median * shift * part / (ub - ua);
        let lo = if za.is_finite() {
            median * libm::exp(sigma * za)
        } else {
            0.0
        };
        let hi = if zb.is_finite() {
            median * libm::exp(sigma * zb)
        } else {
            2.0 * mean - lo
        };
        let f = |x: f64| (x - 0.5).max(1.0);
        bins.push(Bin {
            mean: f(mean),
            lo: f(lo),
            hi: f(hi.max(lo)),
            w: ub - ua,
        });
    }
    bins
}

/// Groups sorted values into ≤ `n` bins of roughly equal mass; returns per-value bin index
/// and the bins.
fn quantile_groups(values: &[f64], n: usize) -> (Vec<usize>, Vec<(f64, f64)>) {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let edges = tail_edges(n);
    let len = values.len();
    let mut which = vec![0; len];
    let mut ranges = Vec::new();
    let mut bin = 0usize;
    let mut start = 0usize;
    while start < len {
        let mut end =
            ((edges[(bin + 1).min(n)] * len as f64).round() as usize).clamp(start + 1, len);
        // Keep equal values in one bin.
        while end < len && values[idx[end]] == values[idx[end - 1]] {
            end += 1;
        }
        for &i in &idx[start..end] {
            which[i] = ranges.len();
        }
        ranges.push((values[idx[start]], values[idx[end - 1]]));
        start = end;
        bin += 1;
    }
    (which, ranges)
}

/// Atoms of a length distribution with about `n` bins per marginal.
pub(crate) fn atoms(dist: &LengthDist, n: usize) -> Vec<Atom> {
    let mut out = Vec::new();
    push_atoms(dist, n, 1.0, &mut out, 0);
    out
}

/// How many distributions' atoms [`shared_atoms`] keeps.
const KEPT: usize = 4;

/// A distribution, its bin count and its atoms.
type Kept = (LengthDist, usize, Arc<[Atom]>);

thread_local! {
    /// The atoms of the distributions asked for last, most recent first: a plan or a sweep
    /// predicts hundreds of configurations that share their lengths, and building the
    /// atoms (sorting an empirical sample) would otherwise dominate each prediction.
    static KEEP: std::cell::RefCell<Vec<Kept>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`atoms`], shared with earlier calls for the same distribution and bin count.
pub(crate) fn shared_atoms(dist: &LengthDist, n: usize) -> Arc<[Atom]> {
    KEEP.with(|keep| {
        let mut keep = keep.borrow_mut();
        if let Some(i) = keep.iter().position(|(d, m, _)| *m == n && d == dist) {
            let hit = keep.remove(i);
            let out = hit.2.clone();
            keep.insert(0, hit);
            return out;
        }
        let out: Arc<[Atom]> = atoms(dist, n).into();
        keep.insert(0, (dist.clone(), n, out.clone()));
        keep.truncate(KEPT);
        out
    })
}

fn push_atoms(dist: &LengthDist, n: usize, weight: f64, out: &mut Vec<Atom>, bin0: usize) -> usize {
    match dist {
        LengthDist::Lognormal {
            prompt_median,
            prompt_sigma,
            output_median,
            output_sigma,
        } => {
            let pb = lognormal_bins(*prompt_median, *prompt_sigma, n);
            let ob = lognormal_bins(*output_median, *output_sigma, n);
            out.reserve(pb.len() * ob.len());
            for (i, p) in pb.iter().enumerate() {
                for o in &ob {
                    out.push(Atom {
                        prompt: p.mean,
                        output: o.mean,
                        w: weight * p.w * o.w,
                        prompt_lo: p.lo,
                        prompt_hi: p.hi,
                        prompt_bin: bin0 + i,
                    });
                }
            }
            bin0 + pb.len()
        }
        LengthDist::Fixed { prompt, output } => {
            let p = *prompt as f64;
            out.push(Atom {
                prompt: p,
                output: *output as f64,
                w: weight,
                prompt_lo: p,
                prompt_hi: p,
                prompt_bin: bin0,
            });
            bin0 + 1
        }
        LengthDist::Empirical { pairs } => {
            let ps: Vec<f64> = pairs.iter().map(|p| p.0 as f64).collect();
            let os: Vec<f64> = pairs.iter().map(|p| p.1 as f64).collect();
            let (pw, pr) = quantile_groups(&ps, n);
            let (ow, or) = quantile_groups(&os, n);
            let (np, no) = (pr.len(), or.len());
            let mut acc = vec![(0.0f64, 0.0f64, 0.0f64, 0.0f64); np * no];
            let mut pmean = vec![(0.0f64, 0.0f64); np];
            for k in 0..pairs.len() {
                let c = &mut acc[pw[k] * no + ow[k]];
                c.0 += 1.0;
                c.1 += ps[k];
                c.2 += os[k];
                pmean[pw[k]].0 += 1.0;
                pmean[pw[k]].1 += ps[k];
            }
            let total = pairs.len() as f64;
            for (cell, c) in acc.iter().enumerate() {
                if c.0 > 0.0 {
                    let i = cell / no;
                    let pm = pmean[i].1 / pmean[i].0;
                    out.push(Atom {
                        prompt: pm,
                        output: c.2 / c.0,
                        w: weight * c.0 / total,
                        prompt_lo: pr[i].0,
                        prompt_hi: pr[i].1,
                        prompt_bin: bin0 + i,
                    });
                }
            }
            bin0 + np
        }
        LengthDist::Mixture { classes } => {
            let total: f64 = classes.iter().map(|c| c.weight).sum();
            let mut b = bin0;
            for c in classes {
                b = push_atoms(&c.lengths, n, weight * c.weight / total, out, b);
            }
            b
        }
    }
}

/// `m` classes of (about) equal probability by total size, each with its mean prompt and
/// output: (probability, mean prompt, mean output).
pub(crate) fn size_classes(atoms: &[Atom], m: usize) -> Vec<(f64, f64, f64)> {
    let mut sorted: Vec<&Atom> = atoms.iter().collect();
    sorted.sort_by(|a, b| a.total().total_cmp(&b.total()));
    let mut classes = Vec::with_capacity(m);
    let mut cum = 0.0;
    let (mut w, mut p, mut o) = (0.0, 0.0, 0.0);
    for a in sorted {
        w += a.w;
        p += a.w * a.prompt;
        o += a.w * a.output;
        cum += a.w;
        if cum >= (classes.len() + 1) as f64 / m as f64 - 1e-9 && classes.len() < m - 1 {
            classes.push((w, p / w, o / w));
            (w, p, o) = (0.0, 0.0, 0.0);
        }
    }
    if w > 0.0 {
        classes.push((w, p / w, o / w));
    }
    classes
}

/// Fast moments: the floored lognormal in closed form (`floor(X) ≈ X − U`, U uniform:
/// `E ≈ E[X] − ½`, `E[·²] ≈ E[X²] − E[X] + ⅓`), the exact sums otherwise.
pub(crate) fn fast_moments(dist: &LengthDist) -> LengthMoments {
    match dist {
        LengthDist::Lognormal {
            prompt_median,
            prompt_sigma,
            output_median,
            output_sigma,
        } => {
            let mom = |m: f64, s: f64| {
                // E[X] and E[X²] of the lognormal (a point mass at m when σ = 0).
                let (e1, e2) = match LogNormal::new(libm::log(m), s) {
                    Ok(d) => {
                        let e1 = d.mean().unwrap_or(m);
                        (e1, d.variance().unwrap_or(0.0) + e1 * e1)
                    }
                    Err(_) => (m, m * m),
                };
                ((e1 - 0.5).max(1.0), (e2 - e1 + 1.0 / 3.0).max(1.0))
            };
            let p = mom(*prompt_median, *prompt_sigma);
            let o = mom(*output_median, *output_sigma);
            LengthMoments {
                prompt: p,
                output: o,
                total: (p.0 + o.0, p.1 + o.1 + 2.0 * p.0 * o.0),
            }
        }
        LengthDist::Mixture { classes } => {
            let total: f64 = classes.iter().map(|c| c.weight).sum();
            let mut m = LengthMoments::default();
            for c in classes {
                let w = c.weight / total;
                let cm = fast_moments(&c.lengths);
                m.prompt.0 += w * cm.prompt.0;
                m.prompt.1 += w * cm.prompt.1;
                m.output.0 += w * cm.output.0;
                m.output.1 += w * cm.output.1;
                m.total.0 += w * cm.total.0;
                m.total.1 += w * cm.total.1;
            }
            m
        }
        other => other.moments(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_atoms_match_moments() {
        let d = LengthDist::reference();
        let m = d.moments();
        let a = atoms(&d, 32);
        let w: f64 = a.iter().map(|x| x.w).sum();
        let ep: f64 = a.iter().map(|x| x.w * x.prompt).sum();
        let eo: f64 = a.iter().map(|x| x.w * x.output).sum();
        assert!((w - 1.0).abs() < 1e-12);
        assert!(
            (ep / m.prompt.0 - 1.0).abs() < 2e-3,
            "{ep} vs {}",
            m.prompt.0
        );
        assert!(
            (eo / m.output.0 - 1.0).abs() < 2e-3,
            "{eo} vs {}",
            m.output.0
        );
        let c = size_classes(&a, 2);
        assert_eq!(c.len(), 2);
        assert!((c[0].0 - 0.5).abs() < 0.05 && c[0].1 + c[0].2 < c[1].1 + c[1].2);
    }

    #[test]
    fn empirical_and_mixture() {
        let a = atoms(&LengthDist::sharegpt(), 16);
        let w: f64 = a.iter().map(|x| x.w).sum();
        assert!((w - 1.0).abs() < 1e-9);
        let m = LengthDist::sharegpt().moments();
        let ep: f64 = a.iter().map(|x| x.w * x.prompt).sum();
        assert!((ep / m.prompt.0 - 1.0).abs() < 1e-9);
        let a = atoms(&LengthDist::short_long_mix(), 8);
        assert_eq!(a.len(), 2);
    }
}
