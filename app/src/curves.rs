//! Load curves: per arrival rate, every metric aggregated over seeds (mean and 95 % CI),
//! plus what the page derives from them — interpolation, CSV export, capacity at the SLO.

use crate::metric::Metric;
use crate::params::{fmt_num, label, Params};
use engine::metrics::{Aggregate, PrefixSummary, Summary};
use serde::{Deserialize, Serialize};

/// One simulated point of the load curve: all metrics at one rate, over seeds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Arrival rate [req/s].
    pub rate: f64,
    /// Per metric (indexed like [`Metric::ALL`]).
    pub aggs: Vec<Aggregate>,
    /// Mean SLO attainment over seeds (fraction of arrivals meeting both SLOs).
    pub slo_attainment: Option<f64>,
}

impl CurvePoint {
    /// Aggregates per-seed summaries at one rate.
    pub fn from_summaries(rate: f64, summaries: &[Summary]) -> CurvePoint {
        let aggs = Metric::ALL
            .iter()
            .map(|m| Aggregate::of(summaries.iter().map(|s| m.of(s))))
            .collect();
        let att = Aggregate::of(summaries.iter().map(|s| s.slo_attainment));
        CurvePoint {
            rate,
            aggs,
            slo_attainment: att.mean,
        }
    }

    /// Aggregates per-seed runs at one rate: their summaries and, with a prefix cache,
    /// what it did (`prefixes[i]` belongs to `summaries[i]`).
    pub fn from_runs(
        rate: f64,
        summaries: &[Summary],
        prefixes: &[Option<PrefixSummary>],
    ) -> CurvePoint {
        let mut p = CurvePoint::from_summaries(rate, summaries);
        for m in Metric::ALL.into_iter().filter(|m| m.is_prefix()) {
            p.aggs[m.index()] = Aggregate::of(
                prefixes
                    .iter()
                    .map(|x| x.as_ref().and_then(|x| m.of_prefix(x))),
            );
        }
        p
    }

    pub fn get(&self, m: Metric) -> Aggregate {
        self.aggs.get(m.index()).copied().unwrap_or_default()
    }
}

/// An analytical model's prediction of one metric across rates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCurve {
    pub name: String,
    /// Which colour it gets (its model's place in `ModelKind::ALL`), so a model keeps its
    /// colour whether or not the others are shown.
    pub slot: usize,
    /// (rate, value) — `None` where the model is unstable or undefined.
    pub points: Vec<(f64, Option<f64>)>,
}

/// Linear interpolation of the simulated mean of `m` at `rate` (None outside the range
/// or where a neighbour has no value).
pub fn interpolate(points: &[CurvePoint], m: Metric, rate: f64) -> Option<f64> {
    let i = points.iter().position(|p| p.rate >= rate)?;
    let hi = &points[i];
    if (hi.rate - rate).abs() < 1e-12 {
        return hi.get(m).mean;
    }
    if i == 0 {
        return None;
    }
    let lo = &points[i - 1];
    let (a, b) = (lo.get(m).mean?, hi.get(m).mean?);
    Some(a + (b - a) * (rate - lo.rate) / (hi.rate - lo.rate))
}

/// The error of a measured value against the simulated one (docs/model.md, Metrics): relative where the
/// simulated value is meaningful, absolute where it is near zero (fractions below 1 %).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PointError {
    Relative(f64),
    Absolute(f64),
}

impl PointError {
    pub fn of(m: Metric, measured: f64, simulated: f64) -> PointError {
        let near_zero = if m.is_fraction() {
            simulated.abs() < 0.01
        } else {
            simulated.abs() < 1e-9
        };
        if near_zero {
            PointError::Absolute((measured - simulated).abs())
        } else {
            PointError::Relative((measured - simulated).abs() / simulated.abs())
        }
    }

    pub fn describe(self) -> String {
        match self {
            PointError::Relative(r) => format!("{:.1} %", 100.0 * r),
            PointError::Absolute(a) => format!("±{a:.4} (abs.)"),
        }
    }
}

/// The curves as CSV: rate, then mean/ci95/n per metric, then each model's values.
pub fn to_csv(points: &[CurvePoint], models: &[(String, Metric, ModelCurve)]) -> String {
    let mut out = String::from("arrival_rate");
    for m in Metric::ALL {
        let c = m.column();
        out.push_str(&format!(",{c}_mean,{c}_ci95,{c}_n"));
    }
    for (name, m, _) in models {
        out.push_str(&format!(
            ",model_{}_{}",
            name.replace([',', ' '], "_"),
            m.column()
        ));
    }
    out.push('\n');
    let opt = |x: Option<f64>| x.map(fmt_num).unwrap_or_default();
    for p in points {
        out.push_str(&fmt_num(p.rate));
        for m in Metric::ALL {
            let a = p.get(m);
            out.push_str(&format!(",{},{},{}", opt(a.mean), opt(a.ci95), a.n));
        }
        for (_, _, c) in models {
            let v = c
                .points
                .iter()
                .find(|(r, _)| (r - p.rate).abs() < 1e-12)
                .and_then(|x| x.1);
            out.push_str(&format!(",{}", opt(v)));
        }
        out.push('\n');
    }
    out
}

/// Capacity at the SLO from the simulated curve: the largest rate such that every swept
/// rate up to it has mean SLO attainment ≥ `target` (DistServe's definition, goodput (c)),
/// interpolated linearly between the last passing and the first failing rate.
///
/// Returns `(capacity, exceeded_range)`: `None` if even the lowest rate fails;
/// `exceeded_range` is true when every swept rate passes (capacity is at least the top).
pub fn capacity_at_slo(points: &[CurvePoint], target: f64) -> (Option<f64>, bool) {
    let mut last: Option<(f64, f64)> = None;
    for p in points {
        let a = p.slo_attainment.unwrap_or(0.0);
        if a >= target {
            last = Some((p.rate, a));
        } else {
            return match last {
                None => (None, false),
                Some((r0, a0)) => {
                    let r = r0 + (p.rate - r0) * (a0 - target) / (a0 - a).max(1e-12);
                    (Some(r), false)
                }
            };
        }
    }
    (last.map(|l| l.0), last.is_some())
}

/// What the simulated `points` (swept with `params`) say is wrong with the parameters as
/// a whole, in plain words: so far, that no request fits in the KV cache — every arrival
/// is rejected even at the lowest rate, the curves of every latency metric are empty and
/// the models have nothing to predict.
pub fn diagnose(params: &Params, points: &[CurvePoint]) -> Option<String> {
    let lowest = points.first()?;
    let blocking = lowest.get(Metric::Blocking);
    (blocking.n > 0 && blocking.mean? >= 1.0 - 1e-9).then(|| {
        format!(
            "no request fits in K = {} tokens: every request is rejected (blocking 100 %) — raise {}",
            params.kv_tokens,
            label("K")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(rate: f64, v: f64, att: f64) -> CurvePoint {
        let mut aggs = vec![Aggregate::default(); Metric::N];
        aggs[Metric::P99Ttft.index()] = Aggregate {
            n: 2,
            mean: Some(v),
            std: Some(0.0),
            ci95: Some(0.1),
        };
        CurvePoint {
            rate,
            aggs,
            slo_attainment: Some(att),
        }
    }

    #[test]
    fn interpolates_and_finds_capacity() {
        let pts = vec![pt(1.0, 1.0, 1.0), pt(2.0, 3.0, 0.95), pt(3.0, 10.0, 0.5)];
        assert_eq!(interpolate(&pts, Metric::P99Ttft, 1.5), Some(2.0));
        assert_eq!(interpolate(&pts, Metric::P99Ttft, 0.5), None);
        assert_eq!(interpolate(&pts, Metric::P99Ttft, 3.5), None);
        let (c, over) = capacity_at_slo(&pts, 0.9);
        assert!(!over);
        assert!((c.unwrap() - (2.0 + 0.05 / 0.45)).abs() < 1e-9);
        assert_eq!(capacity_at_slo(&pts[..1], 0.9), (Some(1.0), true));
    }

    #[test]
    fn errors_are_relative_except_near_zero() {
        assert_eq!(
            PointError::of(Metric::P99Ttft, 1.1, 1.0),
            PointError::Relative(0.10000000000000009)
        );
        assert!(matches!(
            PointError::of(Metric::Blocking, 0.02, 0.0),
            PointError::Absolute(_)
        ));
    }

    #[test]
    fn csv_has_a_header_and_one_row_per_rate() {
        let pts = vec![pt(1.0, 1.0, 1.0), pt(2.0, 3.0, 0.95)];
        let csv = to_csv(&pts, &[]);
        let lines: Vec<_> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[0].starts_with("arrival_rate,mean_ttft_s_mean,mean_ttft_s_ci95,mean_ttft_s_n")
        );
        assert_eq!(lines[0].split(',').count(), lines[1].split(',').count());
    }

    #[test]
    fn a_cache_too_small_for_any_request_is_said_plainly() {
        let point = |rate: f64, blocking: f64| {
            let mut aggs = vec![Aggregate::default(); Metric::N];
            aggs[Metric::Blocking.index()] = Aggregate {
                n: 5,
                mean: Some(blocking),
                std: Some(0.0),
                ci95: Some(0.0),
            };
            CurvePoint {
                rate,
                aggs,
                slo_attainment: Some(0.0),
            }
        };
        let p = Params {
            kv_tokens: 10,
            ..Params::default()
        };
        let msg = diagnose(&p, &[point(0.5, 1.0), point(1.0, 1.0)]).unwrap();
        assert!(
            msg.starts_with(
                "no request fits in K = 10 tokens: every request is rejected (blocking 100 %)"
            ),
            "{msg}"
        );
        assert_eq!(diagnose(&p, &[point(0.5, 0.02), point(1.0, 1.0)]), None);
        assert_eq!(diagnose(&p, &[]), None, "nothing swept yet: nothing to say");
    }
}
