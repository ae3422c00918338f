//! Physical sense of measured values, checked before anything is plotted.
//!
//! A measurement is a duration, a rate, a fraction or a count: finite, never negative,
//! and within what a benchmark can produce ([`MAX_TIME_S`], [`MAX_RATE`], [`MAX_COUNT`]).
//! An arrival rate is above zero. Within one request or one summary row, TTFT ≤ E2E and
//! percentiles grow with their level (p50 ≤ p90 ≤ p95 ≤ p99). Each failure is a
//! [`Rejected`] value that names its [`Place`] in the file.

use super::MeasuredPoint;
use crate::metric::Metric;
use std::fmt;

/// Longest duration a measurement can hold [s]: 10⁶ s ≈ 11.6 days, beyond any benchmark
/// run (a 10³⁰⁸ s TTFT is a broken file, not a slow server).
pub const MAX_TIME_S: f64 = 1e6;
/// Highest rate a measurement can hold [req/s].
pub const MAX_RATE: f64 = 1e6;
/// Largest count (tokens, batch size, KV tokens, preemptions per request).
pub const MAX_COUNT: f64 = 1e12;
/// Slack for comparisons of two values that may be equal (TTFT = E2E for one-token
/// outputs, p95 = p99 for few requests), relative to the larger.
const ORDER_SLACK: f64 = 1e-9;

/// What a value measures, which sets its valid range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// A duration [s]: 0 ≤ x ≤ [`MAX_TIME_S`].
    Time,
    /// An offered arrival rate [req/s]: 0 < x ≤ [`MAX_RATE`].
    ArrivalRate,
    /// A completion rate (goodput, throughput) [req/s or tokens/s]: 0 ≤ x ≤ [`MAX_RATE`].
    Throughput,
    /// A probability or share: 0 ≤ x ≤ 1.
    Fraction,
    /// A count: 0 ≤ x ≤ [`MAX_COUNT`].
    Count,
}

impl Quantity {
    /// The quantity a plotted metric measures.
    pub fn of(m: Metric) -> Quantity {
        match m {
            Metric::MeanTtft
            | Metric::P50Ttft
            | Metric::P95Ttft
            | Metric::P99Ttft
            | Metric::MeanTpot
            | Metric::P99Tpot
            | Metric::MeanE2e => Quantity::Time,
            Metric::Goodput | Metric::SloGoodput => Quantity::Throughput,
            Metric::Blocking | Metric::PrefixHitRate | Metric::PrefixBlockHitRate => {
                Quantity::Fraction
            }
            Metric::Preemptions => Quantity::Count,
        }
    }

    /// Why `x` cannot be a value of this quantity, if it cannot.
    pub fn why_not(self, x: f64) -> Option<String> {
        if x.is_nan() {
            return Some("not a number".into());
        }
        if x.is_infinite() {
            return Some("infinite".into());
        }
        let (low_ok, what, max, unit) = match self {
            Quantity::Time => (x >= 0.0, "a time", MAX_TIME_S, " s"),
            Quantity::ArrivalRate => (x > 0.0, "an arrival rate", MAX_RATE, " req/s"),
            Quantity::Throughput => (x >= 0.0, "a rate", MAX_RATE, " /s"),
            Quantity::Fraction => (x >= 0.0, "a probability", 1.0, ""),
            Quantity::Count => (x >= 0.0, "a count", MAX_COUNT, ""),
        };
        if !low_ok {
            return Some(if self == Quantity::ArrivalRate {
                "an arrival rate must be above zero".into()
            } else {
                format!("{what} cannot be negative")
            });
        }
        (x > max).then(|| format!("{what} cannot exceed {max:e}{unit}"))
    }
}

/// Where a value sits in its file.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    /// A CSV cell: the line its row starts on (1 = the header) and the column's name.
    Csv { line: usize, column: String },
    /// A JSON field: the item (1-based, `None` for a lone object) or, for JSON lines,
    /// the line; and the field's name.
    Json {
        item: Option<usize>,
        line: Option<usize>,
        field: String,
    },
    /// A value the page derived (a summary of per-request rows) at an arrival rate.
    Point { rate: f64, metric: String },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Csv { line, column } => write!(f, "line {line}, column {column}"),
            Place::Json {
                line: Some(l),
                field,
                ..
            } => write!(f, "line {l}, field {field}"),
            Place::Json {
                item: Some(i),
                field,
                ..
            } => write!(f, "item {i}, field {field}"),
            Place::Json { field, .. } => write!(f, "field {field}"),
            Place::Point { rate, metric } => {
                write!(
                    f,
                    "{metric} at λ = {} req/s (from the rows)",
                    super::fmt_rate(*rate)
                )
            }
        }
    }
}

/// One value that fails the physical checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected {
    pub place: Place,
    /// The value as written in the file (shortened).
    pub value: String,
    /// What is impossible about it.
    pub why: String,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = '{}': {}", self.place, self.value, self.why)
    }
}

impl Rejected {
    pub fn new(place: Place, value: &str, why: impl Into<String>) -> Rejected {
        Rejected {
            place,
            value: super::truncate(value, 40),
            why: why.into(),
        }
    }
}

/// Whether `a ≤ b` up to [`ORDER_SLACK`].
pub fn in_order(a: f64, b: f64) -> bool {
    a <= b + ORDER_SLACK * a.abs().max(b.abs())
}

/// Checks a named, ordered sequence (`(name, value)` by increasing level): each value at
/// least the one before it. `place` builds the [`Place`] of a name.
pub fn ordered(
    seq: &[(String, f64)],
    what: &str,
    place: &dyn Fn(&str) -> Place,
    out: &mut Vec<Rejected>,
) {
    for w in seq.windows(2) {
        let ((lo_n, lo), (hi_n, hi)) = (&w[0], &w[1]);
        if !in_order(*lo, *hi) {
            out.push(Rejected::new(
                place(hi_n),
                &hi.to_string(),
                format!("{what}: {hi_n} is below {lo_n} = {lo}"),
            ));
        }
    }
}

/// TTFT ≤ E2E for one pair of values (`ttft`, `e2e` named as in the file).
pub fn ttft_before_e2e(
    ttft: (&str, f64),
    e2e: (&str, f64),
    place: &dyn Fn(&str) -> Place,
    out: &mut Vec<Rejected>,
) {
    if !in_order(ttft.1, e2e.1) {
        out.push(Rejected::new(
            place(ttft.0),
            &ttft.1.to_string(),
            format!(
                "the first token cannot come after the last: {} is above {} = {}",
                ttft.0, e2e.0, e2e.1
            ),
        ));
    }
}

/// The checks on what the page plots: every point's rate and values, and the order of
/// its TTFT percentiles. Applied to every format's output, derived or read.
pub fn points(points: &[MeasuredPoint]) -> Vec<Rejected> {
    let mut out = Vec::new();
    for p in points {
        let place = |metric: &str| Place::Point {
            rate: p.rate,
            metric: metric.to_string(),
        };
        if let Some(why) = Quantity::ArrivalRate.why_not(p.rate) {
            out.push(Rejected::new(
                place("arrival rate"),
                &p.rate.to_string(),
                why,
            ));
            continue;
        }
        for m in Metric::ALL {
            let Some((v, std)) = p.get(m) else { continue };
            let q = Quantity::of(m);
            if let Some(why) = q.why_not(v) {
                out.push(Rejected::new(place(m.key()), &v.to_string(), why));
            }
            if let Some(why) = std.and_then(|s| q.why_not(s)) {
                out.push(Rejected::new(
                    place(&format!("{} std", m.key())),
                    &std.unwrap_or_default().to_string(),
                    why,
                ));
            }
        }
        let seq: Vec<(String, f64)> = [Metric::P50Ttft, Metric::P95Ttft, Metric::P99Ttft]
            .into_iter()
            .filter_map(|m| Some((m.key().to_string(), p.get(m)?.0)))
            .collect();
        ordered(&seq, "percentiles out of order", &place, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(Quantity::Time.why_not(0.0), None);
        assert_eq!(Quantity::Time.why_not(1e6), None);
        assert!(Quantity::Time.why_not(-1e-9).unwrap().contains("negative"));
        assert!(Quantity::Time.why_not(1e308).unwrap().contains("exceed"));
        assert!(Quantity::Time
            .why_not(f64::INFINITY)
            .unwrap()
            .contains("infinite"));
        assert!(Quantity::Time
            .why_not(f64::NAN)
            .unwrap()
            .contains("not a number"));
        assert!(Quantity::ArrivalRate
            .why_not(0.0)
            .unwrap()
            .contains("above zero"));
        assert_eq!(Quantity::Throughput.why_not(0.0), None);
        assert!(Quantity::Fraction.why_not(1.5).is_some());
        assert_eq!(Quantity::Fraction.why_not(1.0), None);
    }

    #[test]
    fn equal_values_are_in_order() {
        assert!(in_order(0.1 + 0.2, 0.3));
        assert!(in_order(5.0, 5.0));
        assert!(!in_order(0.31, 0.3));
    }
}
