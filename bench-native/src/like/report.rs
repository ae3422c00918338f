//! The comparison of a [`Prediction`] with its [`Benchmark`]'s measurement: one [`Row`]
//! per metric — the mean over the seeds, the seeds' range as the band, the measured value
//! and the relative error of the mean — as a table, CSV or JSON.

use super::{Benchmark, Metric, Prediction};
use crate::table::aligned;
use serde_json::json;

/// One metric predicted beside its measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub metric: Metric,
    /// The file's value [the metric's unit] (`None`: not in the file).
    pub measured: Option<f64>,
    /// Mean over the seeds [the metric's unit] (`None`: no seed had a value).
    pub predicted: Option<f64>,
    /// The lowest and highest seed [the metric's unit].
    pub band: Option<(f64, f64)>,
    /// (predicted − measured) / measured, when both exist and measured ≠ 0.
    pub error: Option<f64>,
}

/// Every metric of `b`, predicted by `p`.
pub fn rows(b: &Benchmark, p: &Prediction) -> Vec<Row> {
    Metric::ALL
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let xs: Vec<f64> = p
                .runs
                .iter()
                .filter_map(|r| m.of(&r.summary))
                .filter(|x| x.is_finite())
                .collect();
            let predicted = (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
            let band = (!xs.is_empty()).then(|| {
                xs.iter()
                    .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)))
            });
            let measured = b.measured.get(i).copied().flatten();
            let error = match (predicted, measured) {
                (Some(p), Some(m)) if m != 0.0 => Some((p - m) / m),
                _ => None,
            };
            Row {
                metric: m,
                measured,
                predicted,
                band,
                error,
            }
        })
        .collect()
}

/// A value with as many decimals as its size needs.
fn val(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), val)
}

/// What was simulated, in one line.
pub fn headline(b: &Benchmark, seeds: &[u64]) -> String {
    let rate = if b.run.rate.is_finite() {
        format!(
            "{} req/s (burstiness {})",
            crate::args::num(b.run.rate),
            b.run.burstiness
        )
    } else {
        "rate inf (every request at t = 0)".into()
    };
    let gate = b
        .run
        .max_concurrency
        .map_or("no max_concurrency".into(), |c| {
            format!("max_concurrency {c}")
        });
    format!(
        "{}: {} requests, {rate}, {gate}; {} arrival seed{}",
        b.tool,
        b.run.requests,
        seeds.len(),
        if seeds.len() == 1 { "" } else { "s" }
    )
}

/// The comparison as an aligned table, the notes below it.
pub fn table(b: &Benchmark, seeds: &[u64], rows: &[Row]) -> String {
    let mut cells = vec![[
        "metric",
        "unit",
        "measured",
        "predicted",
        "band (seeds)",
        "error",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        let (name, unit) = r.metric.label();
        cells.push(vec![
            name.into(),
            unit.into(),
            opt(r.measured),
            opt(r.predicted),
            r.band
                .map_or("-".into(), |(l, h)| format!("{}–{}", val(l), val(h))),
            r.error
                .map_or("-".into(), |e| format!("{:+.1} %", e * 100.0)),
        ]);
    }
    let mut out = headline(b, seeds) + "\n" + &aligned(&cells);
    for n in &b.notes {
        out += &format!("note: {n}\n");
    }
    out
}

/// Header of [`csv`].
pub const CSV_COLUMNS: &str = "metric,unit,measured,predicted,band_min,band_max,error_rel";

/// The comparison as CSV ([`CSV_COLUMNS`]; empty cells where a value is missing).
pub fn csv(rows: &[Row]) -> String {
    let c = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let mut out = String::from(CSV_COLUMNS) + "\n";
    for r in rows {
        out += &format!(
            "{},{},{},{},{},{},{}\n",
            r.metric.key(),
            r.metric.label().1,
            c(r.measured),
            c(r.predicted),
            c(r.band.map(|b| b.0)),
            c(r.band.map(|b| b.1)),
            c(r.error)
        );
    }
    out
}

/// The comparison as JSON: the benchmark, the notes, the seeds and one object per metric.
pub fn json(b: &Benchmark, seeds: &[u64], rows: &[Row]) -> serde_json::Value {
    json!({
        "benchmark": {
            "tool": b.tool,
            "requests": b.run.requests,
            "request_rate": if b.run.rate.is_finite() { json!(b.run.rate) } else { json!("inf") },
            "burstiness": if b.run.burstiness.is_finite() { json!(b.run.burstiness) } else { json!("inf") },
            "max_concurrency": b.run.max_concurrency,
        },
        "notes": b.notes,
        "seeds": seeds,
        "metrics": rows.iter().map(|r| json!({
            "metric": r.metric.key(),
            "unit": r.metric.label().1,
            "measured": r.measured,
            "predicted": r.predicted,
            "band": r.band.map(|(l, h)| [l, h]),
            "error_rel": r.error,
        })).collect::<Vec<_>>(),
    })
}
