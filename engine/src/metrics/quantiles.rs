//! Percentiles: exact (type 7) up to a bound, then an HDR histogram (3 significant digits).

use super::Dist;
use hdrhistogram::Histogram;

/// Values kept exactly before switching to the histogram.
pub const EXACT_SAMPLES: usize = 1 << 20;

/// Nanoseconds per second: the histogram stores integer nanoseconds.
const NS: f64 = 1e9;

/// Hyndman–Fan type 7 percentile (numpy's default) of a **sorted** slice; q in [0, 1].
pub fn percentile_type7(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = pos - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// A streaming sample of one latency [s].
#[derive(Debug)]
pub struct Quantiles {
    exact: Vec<f64>,
    hist: Option<Histogram<u64>>,
    n: u64,
    sum: f64,
    max: f64,
}

impl Default for Quantiles {
    fn default() -> Self {
        Self::new()
    }
}

impl Quantiles {
    pub fn new() -> Quantiles {
        Quantiles {
            exact: Vec::new(),
            hist: None,
            n: 0,
            sum: 0.0,
            max: f64::NEG_INFINITY,
        }
    }

    #[inline]
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        self.max = self.max.max(x);
        match &mut self.hist {
            Some(h) => record(h, x),
            None => {
                self.exact.push(x);
                if self.exact.len() > EXACT_SAMPLES {
                    self.switch_to_histogram();
                }
            }
        }
    }

    /// Moves the exact values into the histogram (once, past [`EXACT_SAMPLES`]).
    #[cold]
    fn switch_to_histogram(&mut self) {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        for v in self.exact.drain(..) {
            record(&mut h, v);
        }
        self.exact = Vec::new();
        self.hist = Some(h);
    }

    /// Whether percentiles are exact (no histogram yet).
    pub fn is_exact(&self) -> bool {
        self.hist.is_none()
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Percentile q in [0, 1].
    pub fn quantile(&mut self, q: f64) -> Option<f64> {
        match &self.hist {
            Some(h) => (self.n > 0).then(|| h.value_at_quantile(q) as f64 / NS),
            None => {
                self.exact.sort_unstable_by(f64::total_cmp);
                percentile_type7(&self.exact, q)
            }
        }
    }

    pub fn dist(mut self) -> Dist {
        if self.n == 0 {
            return Dist::default();
        }
        let qs = [0.50, 0.90, 0.95, 0.99, 0.999];
        let mut v = [None; 5];
        if self.hist.is_none() {
            // Type 7 by selection, not a full sort: each rank is selected within the part
            // above the previous one; the upper neighbour is the minimum above the rank.
            // Selection runs on integer keys ordered as `f64::total_cmp` orders the values.
            let mut keys: Vec<i64> = std::mem::take(&mut self.exact)
                .into_iter()
                .map(total_order_key)
                .collect();
            let n = keys.len();
            let mut from = 0;
            for (i, q) in qs.iter().enumerate() {
                let pos = q * (n - 1) as f64;
                let lo = pos.floor() as usize;
                let frac = pos - lo as f64;
                if lo >= from {
                    keys[from..].select_nth_unstable(lo - from);
                    from = lo;
                }
                let a = from_total_order_key(keys[lo]);
                let b = match keys.get(lo + 1..).and_then(|up| up.iter().min()) {
                    Some(&k) => from_total_order_key(k),
                    None => a,
                };
                v[i] = Some(a + (b - a) * frac);
            }
        } else {
            for (i, q) in qs.iter().enumerate() {
                v[i] = self.quantile(*q);
            }
        }
        Dist {
            n: self.n,
            mean: Some(self.sum / self.n as f64),
            p50: v[0],
            p90: v[1],
            p95: v[2],
            p99: v[3],
            p999: v[4],
            max: Some(self.max),
        }
    }
}

/// An integer whose order is `f64::total_cmp`'s order of `x` (the transform
/// `total_cmp` itself applies); its own inverse.
#[inline]
fn total_order_key(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ (((b >> 63) as u64) >> 1) as i64
}

#[inline]
fn from_total_order_key(k: i64) -> f64 {
    f64::from_bits((k ^ (((k >> 63) as u64) >> 1) as i64) as u64)
}

fn record(h: &mut Histogram<u64>, x: f64) {
    // Histogram auto-resizes; negative or non-finite values cannot occur for latencies.
    let v = (x.max(0.0) * NS).round() as u64;
    h.record(v.max(1))
        .expect("auto-resizing histogram accepts any u64");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type7_matches_numpy() {
        // numpy.percentile([1,2,3,4], [50, 95, 99]) = [2.5, 3.85, 3.97]
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_type7(&s, 0.5), Some(2.5));
        assert!((percentile_type7(&s, 0.95).unwrap() - 3.85).abs() < 1e-12);
        assert!((percentile_type7(&s, 0.99).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(percentile_type7(&[], 0.5), None);
        assert_eq!(percentile_type7(&[7.0], 0.99), Some(7.0));
    }

    #[test]
    fn selection_equals_sorting() {
        for n in [1usize, 2, 3, 10, 999, 1000, 4321] {
            let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1009) as f64 * 0.37).collect();
            let mut q = Quantiles::new();
            xs.iter().for_each(|&x| q.push(x));
            let d = q.dist();
            let mut s = xs.clone();
            s.sort_by(f64::total_cmp);
            for (got, p) in [
                (d.p50, 0.5),
                (d.p90, 0.9),
                (d.p95, 0.95),
                (d.p99, 0.99),
                (d.p999, 0.999),
            ] {
                assert_eq!(got, percentile_type7(&s, p), "n={n} p={p}");
            }
        }
    }

    #[test]
    fn histogram_within_a_tenth_of_a_percent() {
        let mut q = Quantiles::new();
        let n = EXACT_SAMPLES + 10_000;
        let mut exact = Vec::with_capacity(n);
        for i in 0..n {
            // a spread of latencies from 1 ms to ~10 s
            let x = 0.001 * (1.0 + (i as f64 * 0.618_033_988_7).fract() * 10_000.0);
            q.push(x);
            exact.push(x);
        }
        assert!(!q.is_exact());
        exact.sort_unstable_by(f64::total_cmp);
        for p in [0.5, 0.9, 0.99, 0.999] {
            let e = percentile_type7(&exact, p).unwrap();
            let a = q.quantile(p).unwrap();
            assert!((a - e).abs() / e < 1e-3, "p{p}: {a} vs {e}");
        }
    }
}
