//! Percentiles: exact (type 7) up to a bound, then to f32 precision up to a second bound,
//! then an HDR histogram (3 significant digits).

use super::Dist;
use hdrhistogram::Histogram;

/// Values kept exactly (as f64) before switching to f32 precision.
pub const EXACT_SAMPLES: usize = 1 << 20;

/// Values kept to f32 precision (≤ 2⁻²⁴ ≈ 6e-8 relative) before the HDR histogram takes
/// over: 4 bytes each, so a 10 M-request run's four latency samples fit in ≈ 130 MB
/// without paying the histogram's per-value cost.
pub const F32_SAMPLES: usize = 1 << 23;

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
/// Three tiers, each with bounded memory:
/// 1. up to [`EXACT_SAMPLES`] values, exactly, as integer keys ordered as
///    `f64::total_cmp` orders the values (see [`total_order_key`]), so selection compares
///    integers;
/// 2. then up to [`F32_SAMPLES`] values as f32 keys (≤ 6e-8 relative);
/// 3. then an HDR histogram (3 significant digits, ≤ 0.1 % relative).
#[derive(Debug)]
pub struct Quantiles {
    exact: Vec<i64>,
    /// Pushes while `exact.len() < room` are stored exactly: the tier-1 bound while in
    /// tier 1, 0 after (so one comparison selects the fast path).
    room: usize,
    /// Tier 2: f32 total-order keys.
    compact: Vec<i32>,
    /// Tier-2 bound.
    compact_room: usize,
    hist: Option<Box<Histogram<u64>>>,
    /// Expected number of values (sizes tier 2 when it starts).
    hint: usize,
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

    /// Room for `n` values up front (as many as the tiers keep), so pushing does not
    /// reallocate. A hint: more or fewer values are fine.
    pub fn with_capacity(n: usize) -> Quantiles {
        Quantiles::with_tiers(n, EXACT_SAMPLES, F32_SAMPLES)
    }

    /// With explicit tier bounds (tests reach the later tiers with small ones).
    fn with_tiers(n: usize, exact: usize, compact: usize) -> Quantiles {
        Quantiles {
            exact: Vec::with_capacity(n.min(exact)),
            room: exact,
            compact: Vec::new(),
            compact_room: compact,
            hist: None,
            hint: n,
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
        if self.exact.len() < self.room {
            self.exact.push(total_order_key(x));
        } else {
            self.push_past_exact(x);
        }
    }

    /// Past tier 1: moves the exact values to f32 keys (once), and past tier 2 every key
    /// into the histogram (once); then records `x` in the current tier.
    #[inline(never)]
    fn push_past_exact(&mut self, x: f64) {
        if self.hist.is_none() {
            if self.room > 0 {
                let want = self.hint.clamp(self.exact.len() + 1, self.compact_room);
                self.compact.reserve_exact(want);
                self.compact.extend(
                    self.exact
                        .iter()
                        .map(|&k| f32_key(from_total_order_key(k) as f32)),
                );
                self.exact = Vec::new();
                self.room = 0;
            }
            if self.compact.len() < self.compact_room {
                self.compact.push(f32_key(x as f32));
                return;
            }
            let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
            for &k in &self.compact {
                record(&mut h, from_f32_key(k) as f64);
            }
            self.compact = Vec::new();
            self.hist = Some(Box::new(h));
        }
        if let Some(h) = &mut self.hist {
            record(h, x);
        }
    }

    /// Whether percentiles are exact (tier 1).
    pub fn is_exact(&self) -> bool {
        self.room > 0
    }

    /// Whether the HDR histogram holds the values (tier 3).
    pub fn is_histogram(&self) -> bool {
        self.hist.is_some()
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Percentile q in [0, 1].
    pub fn quantile(&mut self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        if let Some(h) = &self.hist {
            return Some(h.value_at_quantile(q) as f64 / NS);
        }
        // Sorting the keys sorts the values by `f64::total_cmp`.
        if self.is_exact() {
            self.exact.sort_unstable();
            Some(type7_sorted(&self.exact, q, from_total_order_key))
        } else {
            self.compact.sort_unstable();
            Some(type7_sorted(&self.compact, q, |k| from_f32_key(k) as f64))
        }
    }

    pub fn dist(mut self) -> Dist {
        let n = self.n;
        if n == 0 {
            return Dist::default();
        }
        let v = if self.hist.is_some() {
            DIST_QS.map(|q| self.quantile(q))
        } else if self.is_exact() {
            type7_by_selection(&mut self.exact, &DIST_QS, from_total_order_key).map(Some)
        } else {
            type7_by_selection(&mut self.compact, &DIST_QS, |k| from_f32_key(k) as f64).map(Some)
        };
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

/// Type 7 percentile q of the values whose keys are `sorted` (non-empty, increasing).
fn type7_sorted<K: Copy>(sorted: &[K], q: f64, value: impl Fn(K) -> f64) -> f64 {
    let n = sorted.len();
    let (lo, frac) = type7_rank(q, n);
    let a = value(sorted[lo]);
    let b = value(sorted[(lo + 1).min(n - 1)]);
    a + (b - a) * frac
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
fn type7_by_selection<K: Ord + Copy>(
    keys: &mut [K],
    qs: &[f64; 5],
    value: impl Fn(K) -> f64,
) -> [f64; 5] {
    let n = keys.len();
    let mut out = [0.0; 5];
    let mut from = 0;
    for (o, &q) in out.iter_mut().zip(qs) {
        let (lo, frac) = type7_rank(q, n);
        if lo >= from {
            keys[from..].select_nth_unstable(lo - from);
            from = lo;
        }
        let a = value(keys[lo]);
        let b = match keys.get(lo + 1..).and_then(|up| up.iter().min()) {
            Some(&k) => value(k),
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

/// An integer whose order is `f32::total_cmp`'s order of `x`; its own inverse.
#[inline]
fn f32_key(x: f32) -> i32 {
    let b = x.to_bits() as i32;
    b ^ (((b >> 31) as u32) >> 1) as i32
}

#[inline]
fn from_f32_key(k: i32) -> f32 {
    f32::from_bits((k ^ (((k >> 31) as u32) >> 1) as i32) as u32)
}

fn record(h: &mut Histogram<u64>, x: f64) {
    // Histogram auto-resizes; negative or non-finite values cannot occur for latencies.
    let y = x.max(0.0) * NS;
    // Round half away from zero, as `f64::round` (a libm call on baseline x86-64) does:
    // below 2^52 ns, y + 0.5 is exact and truncation is floor; above, y is an integer.
    let v = if y < 4_503_599_627_370_496.0 {
        (y + 0.5) as u64
    } else {
        y as u64
    };
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

    /// A spread of latencies from 1 ms to ~10 s.
    fn spread(i: usize) -> f64 {
        0.001 * (1.0 + (i as f64 * 0.618_033_988_7).fract() * 10_000.0)
    }

    fn check_tier(exact_bound: usize, f32_bound: usize, n: usize, tol: f64) -> Quantiles {
        let mut q = Quantiles::with_tiers(n / 3, exact_bound, f32_bound);
        let mut exact = Vec::with_capacity(n);
        for i in 0..n {
            q.push(spread(i));
            exact.push(spread(i));
        }
        exact.sort_unstable_by(f64::total_cmp);
        for p in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let e = percentile_type7(&exact, p).unwrap();
            let a = q.quantile(p).unwrap();
            assert!((a - e).abs() / e <= tol, "p{p}: {a} vs {e}");
        }
        let mut d = Quantiles::with_tiers(0, exact_bound, f32_bound);
        for i in 0..n {
            d.push(spread(i));
        }
        let d = d.dist();
        assert_eq!(d.n, n as u64);
        for (got, p) in [(d.p50, 0.5), (d.p99, 0.99), (d.p999, 0.999)] {
            let e = percentile_type7(&exact, p).unwrap();
            assert!((got.unwrap() - e).abs() / e <= tol, "dist p{p}");
        }
        assert_eq!(d.max, exact.last().copied());
        q
    }

    #[test]
    fn each_tier_within_its_precision() {
        // Tier 1: exact.
        let q = check_tier(1000, 5000, 1000, 0.0);
        assert!(q.is_exact() && !q.is_histogram());
        // Tier 2: f32 keys, ≤ 2^-24 relative (the interpolation adds rounding).
        let q = check_tier(1000, 5000, 4999, 1.2e-7);
        assert!(!q.is_exact() && !q.is_histogram());
        // Tier 3: HDR histogram, 3 significant digits.
        let q = check_tier(1000, 5000, 7000, 1e-3);
        assert!(q.is_histogram());
    }

    #[test]
    fn histogram_rounding_is_half_away_from_zero() {
        for (x, want) in [
            (0.0, 1),
            (1e-10, 1),
            (2.5e-9, 3),
            (3.5e-9, 4),
            (1.234_567_89, 1_234_567_890),
            (5e6, 5_000_000_000_000_000),
        ] {
            let mut h = Histogram::<u64>::new(3).unwrap();
            record(&mut h, x);
            let v = (x * NS).round().max(1.0) as u64;
            assert_eq!(v, want);
            assert!(h.equivalent(h.max(), v), "{x}");
        }
    }

    #[test]
    fn default_tiers_switch_to_f32_past_the_exact_bound() {
        let mut q = Quantiles::new();
        for i in 0..EXACT_SAMPLES + 1 {
            q.push(spread(i));
        }
        assert!(!q.is_exact() && !q.is_histogram());
    }
}
