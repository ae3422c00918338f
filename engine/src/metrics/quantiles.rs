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
///
/// While exact, values are kept as integer keys ordered as `f64::total_cmp` orders the
/// values (see [`total_order_key`]), so selection compares integers. Past
/// [`EXACT_SAMPLES`] values they move into an HDR histogram.
#[derive(Debug)]
pub struct Quantiles {
    exact: Vec<i64>,
    /// Pushes while `exact.len() < room` are stored exactly: [`EXACT_SAMPLES`] while
    /// exact, 0 once the histogram is used (so one comparison selects the path).
    room: usize,
    hist: Option<Box<Histogram<u64>>>,
    n: u64,
    sum: f64,
    max: f64,
}

impl Default for Quantiles {
    fn default() -> Self {
        Self::new()
    }
}

/// The percentiles [`Quantiles::dist`] reports.
const DIST_QS: [f64; 5] = [0.50, 0.90, 0.95, 0.99, 0.999];

impl Quantiles {
    pub fn new() -> Quantiles {
        Quantiles::with_capacity(0)
    }

    /// Room for `n` exact values up front (at most [`EXACT_SAMPLES`], the most ever
    /// kept), so pushing does not reallocate. A hint: more or fewer values are fine.
    pub fn with_capacity(n: usize) -> Quantiles {
        Quantiles {
            exact: Vec::with_capacity(n.min(EXACT_SAMPLES)),
            room: EXACT_SAMPLES,
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
        self.max = crate::num::max_f64(self.max, x);
        if self.exact.len() < self.room {
            self.exact.push(total_order_key(x));
        } else {
            self.push_to_histogram(x);
        }
    }

    /// Past [`EXACT_SAMPLES`]: moves the exact values into the histogram (once), then
    /// records `x` there.
    #[cold]
    fn push_to_histogram(&mut self, x: f64) {
        if self.hist.is_none() {
            let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
            for &k in &self.exact {
                record(&mut h, from_total_order_key(k));
            }
            self.exact = Vec::new();
            self.room = 0;
            self.hist = Some(Box::new(h));
        }
        if let Some(h) = &mut self.hist {
            record(h, x);
        }
    }

    /// Adds every value of `other` (a fleet's servers into the fleet): exact while the
    /// two together fit in [`EXACT_SAMPLES`], else through the histogram.
    pub fn merge(&mut self, other: &Quantiles) {
        match &other.hist {
            None if self.hist.is_none()
                && self.exact.len() + other.exact.len() <= EXACT_SAMPLES =>
            {
                self.exact.extend_from_slice(&other.exact);
            }
            None => {
                for &k in &other.exact {
                    self.push_to_histogram(from_total_order_key(k));
                }
                // push_to_histogram counts nothing itself; n, sum and max follow below.
            }
            Some(h) => {
                // Force the histogram, then add other's counts.
                if self.hist.is_none() {
                    let mut mine = Histogram::<u64>::new(3).expect("3 significant digits is valid");
                    for &k in &self.exact {
                        record(&mut mine, from_total_order_key(k));
                    }
                    self.exact = Vec::new();
                    self.room = 0;
                    self.hist = Some(Box::new(mine));
                }
                if let Some(mine) = &mut self.hist {
                    mine.add(&**h)
                        .expect("histograms of the same precision add");
                }
            }
        }
        self.n += other.n;
        self.sum += other.sum;
        self.max = crate::num::max_f64(self.max, other.max);
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
                // Sorting the keys sorts the values by `f64::total_cmp`.
                self.exact.sort_unstable();
                let n = self.exact.len();
                if n == 0 {
                    return None;
                }
                let (lo, frac) = type7_rank(q, n);
                let a = from_total_order_key(self.exact[lo]);
                let b = from_total_order_key(self.exact[(lo + 1).min(n - 1)]);
                Some(a + (b - a) * frac)
            }
        }
    }

    pub fn dist(mut self) -> Dist {
        let n = self.n;
        if n == 0 {
            return Dist::default();
        }
        let mut v = [None; 5];
        if self.hist.is_none() {
            let mut keys = std::mem::take(&mut self.exact);
            for (slot, x) in v.iter_mut().zip(type7_by_selection(&mut keys, &DIST_QS)) {
                *slot = Some(x);
            }
        } else {
            for (i, q) in DIST_QS.iter().enumerate() {
                v[i] = self.quantile(*q);
            }
        }
        Dist {
            n,
            mean: Some(self.sum / n as f64),
            p50: v[0],
            p90: v[1],
            p95: v[2],
            p99: v[3],
            p999: v[4],
            max: Some(self.max),
        }
    }
}

/// Type 7's lower rank `floor(q·(n−1))` and the fraction towards the next (n ≥ 1).
#[inline]
fn type7_rank(q: f64, n: usize) -> (usize, f64) {
    let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
    // pos >= 0, so truncation is floor (and no libm call on baseline x86-64).
    let lo = (pos as usize).min(n - 1);
    (lo, pos - lo as f64)
}

/// Type 7 percentiles `qs` (increasing) of the values whose total-order keys are `keys`
/// (non-empty; reordered), without a full sort: the same numbers as [`percentile_type7`]
/// on the sorted values, bit for bit.
///
/// Each rank is selected within the part above the previous one; the upper neighbour is
/// the minimum above the rank. (A one-pass bucketed selection was tried: at the few
/// thousand values per run of the default grid it executed as many instructions.)
fn type7_by_selection(keys: &mut [i64], qs: &[f64; 5]) -> [f64; 5] {
    let n = keys.len();
    let mut out = [0.0; 5];
    let mut from = 0;
    for (o, &q) in out.iter_mut().zip(qs) {
        let (lo, frac) = type7_rank(q, n);
        if lo >= from {
            keys[from..].select_nth_unstable(lo - from);
            from = lo;
        }
        let a = from_total_order_key(keys[lo]);
        let b = match keys.get(lo + 1..).and_then(|up| up.iter().min()) {
            Some(&k) => from_total_order_key(k),
            None => a,
        };
        *o = a + (b - a) * frac;
    }
    out
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
    // Histogram auto-resizes.
    h.record(histogram_ns(x))
        .expect("auto-resizing histogram accepts any u64");
}

/// `x` [s] as whole nanoseconds, at least 1 (negative or NaN latencies cannot occur).
#[inline]
fn histogram_ns(x: f64) -> u64 {
    let y = x.max(0.0) * NS;
    // Round half away from zero, as `f64::round` (a libm call on baseline x86-64) does:
    // below 2^52 ns, y + 0.5 is exact and truncation is floor; above, y is an integer.
    let v = if y < 4_503_599_627_370_496.0 {
        (y + 0.5) as u64
    } else {
        y as u64
    };
    v.max(1)
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
        for n in [1usize, 2, 3, 10, 255, 256, 257, 999, 1000, 4321, 100_000] {
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
    fn bucketed_selection_on_skewed_data() {
        // Heavy ties, one far outlier, negative values and both zeros.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let cases: Vec<Vec<f64>> = vec![
            (0..5000)
                .map(|i| if i % 3 == 0 { 1.0 } else { 2.0 })
                .collect(),
            (0..5000)
                .map(|i| {
                    if i == 17 {
                        1e300
                    } else {
                        (i % 50) as f64 * 1e-3
                    }
                })
                .collect(),
            (0..3000)
                .map(|i| match i % 4 {
                    0 => -0.0,
                    1 => 0.0,
                    _ => (next() % 1000) as f64 - 500.0,
                })
                .collect(),
            (0..20_000)
                .map(|_| f64::from_bits(next() >> 2) * 1e-300)
                .collect(),
            vec![0.25; 1000],
        ];
        for xs in cases {
            let mut q = Quantiles::new();
            xs.iter().for_each(|&x| q.push(x));
            let d = q.dist();
            let mut s = xs.clone();
            s.sort_by(f64::total_cmp);
            for (got, p) in [(d.p50, 0.5), (d.p90, 0.9), (d.p99, 0.99), (d.p999, 0.999)] {
                let want = percentile_type7(&s, p);
                assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "p={p}");
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

    #[test]
    fn histogram_rounding_is_half_away_from_zero() {
        let mut xs = vec![
            0.0,
            1e-10,
            4.9e-10,
            5e-10,
            2.5e-9,
            3.5e-9,
            1.234_567_89,
            5e6,
            1e7,
        ];
        xs.extend((0..10_000).map(|i| (i as f64 + 0.5) * 1e-9));
        xs.extend((0..10_000).map(|i| 1e-3 * (1.0 + (i as f64 * 0.618_034).fract())));
        for x in xs {
            assert_eq!(histogram_ns(x), (x * NS).round().max(1.0) as u64, "{x}");
        }
    }
}
