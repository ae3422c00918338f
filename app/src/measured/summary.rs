//! The sweep summary CSV (`arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,
//! mean_ttft_std,…`): one row per grid point, metric columns as `<name>_mean` and
//! `<name>_std`. Written by `bench-native sweep`, `run` and `validate`, and the format of
//! the reference study's sweep CSV. Multi-configuration files are filtered to the view's
//! B and K.

use super::check::{self, Place, Quantity, Rejected};
use super::table::{Row, Table};
use super::{Context, MeasuredError, MeasuredPoint, Parsed};
use crate::metric::Metric;
use std::collections::BTreeSet;

/// Summary-schema columns (without `_mean` / `_std`) → metric.
pub(super) const COLUMNS: [(&str, Metric); 16] = [
    ("mean_ttft", Metric::MeanTtft),
    ("p50_ttft", Metric::P50Ttft),
    ("p95_ttft", Metric::P95Ttft),
    ("p99_ttft", Metric::P99Ttft),
    ("goodput", Metric::Goodput),
    ("blocking_probability", Metric::Blocking),
    ("mean_ttft_s", Metric::MeanTtft),
    ("p50_ttft_s", Metric::P50Ttft),
    ("p95_ttft_s", Metric::P95Ttft),
    ("p99_ttft_s", Metric::P99Ttft),
    ("mean_tpot_s", Metric::MeanTpot),
    ("p99_tpot_s", Metric::P99Tpot),
    ("mean_e2e_s", Metric::MeanE2e),
    ("goodput_rps", Metric::Goodput),
    ("slo_goodput_rps", Metric::SloGoodput),
    ("preemptions_per_request", Metric::Preemptions),
];

/// Columns read only to check the others: the p99 E2E bounds the p99 TTFT.
const P99_E2E: &str = "p99_e2e_s_mean";

/// A metric column and its spread column.
struct MetricCol {
    metric: Metric,
    mean: usize,
    std: Option<usize>,
}

/// One row's values, read and checked.
struct Read {
    config: (Option<u64>, Option<u64>),
    point: MeasuredPoint,
}

pub(super) fn parse(t: &Table, ctx: &Context) -> Result<Parsed, MeasuredError> {
    let rate_c = t.need("arrival_rate")?;
    let b_c = t.col(&["max_batch_size", "max_batch"]);
    let k_c = t.col(&["kv_budget", "kv_tokens"]);
    let p99_e2e_c = t.col(&[P99_E2E]);
    let metric_cols: Vec<MetricCol> = COLUMNS
        .iter()
        .filter_map(|(name, m)| {
            Some(MetricCol {
                metric: *m,
                mean: t.col(&[&format!("{name}_mean")])?,
                std: t.col(&[&format!("{name}_std")]),
            })
        })
        .collect();
    if metric_cols.is_empty() {
        return Err(MeasuredError::MissingColumn {
            column: "mean_ttft_mean",
            header: t.header.clone(),
        });
    }
    let mut rejected = Vec::new();
    let mut rows = Vec::new();
    for row in &t.rows {
        let rate = t.required(row, rate_c, Quantity::ArrivalRate, &mut rejected);
        let count = |c: Option<usize>, out: &mut Vec<Rejected>| {
            c.and_then(|c| t.value(row, c, Quantity::Count, out))
        };
        // 0 is how `bench-native run` writes "unknown" (a server it cannot ask).
        let known = |x: Option<f64>| x.map(|v| v as u64).filter(|v| *v > 0);
        let config = (
            known(count(b_c, &mut rejected)),
            known(count(k_c, &mut rejected)),
        );
        let mut p = MeasuredPoint::new(rate.unwrap_or(1.0));
        // Which column each metric's value came from, for the order checks.
        let mut from: Vec<Option<(usize, f64)>> = vec![None; Metric::N];
        for mc in &metric_cols {
            let q = Quantity::of(mc.metric);
            let v = t.value(row, mc.mean, q, &mut rejected);
            let std = mc.std.and_then(|c| t.value(row, c, q, &mut rejected));
            if let Some(v) = v {
                from[mc.metric.index()] = Some((mc.mean, v));
            }
            p.set(mc.metric, v, std);
        }
        let p99_e2e = p99_e2e_c.and_then(|c| t.value(row, c, Quantity::Time, &mut rejected));
        order_checks(
            t,
            row,
            &from,
            p99_e2e.map(|v| (p99_e2e_c.unwrap_or(0), v)),
            &mut rejected,
        );
        if rate.is_some() {
            rows.push(Read { config, point: p });
        }
    }
    if !rejected.is_empty() {
        return Err(MeasuredError::Implausible(rejected));
    }
    let (points, notes) = choose_configuration(rows, (b_c.is_some(), k_c.is_some()), ctx);
    Ok((points, notes))
}

/// Percentiles in order (p50 ≤ p95 ≤ p99 TTFT), mean TTFT ≤ mean E2E, p99 TTFT ≤ p99 E2E.
fn order_checks(
    t: &Table,
    row: &Row,
    from: &[Option<(usize, f64)>],
    p99_e2e: Option<(usize, f64)>,
    out: &mut Vec<Rejected>,
) {
    let name = |c: usize| t.cols[c].clone();
    let place = |column: &str| Place::Csv {
        line: row.line,
        column: column.to_string(),
    };
    let seq: Vec<(String, f64)> = [Metric::P50Ttft, Metric::P95Ttft, Metric::P99Ttft]
        .into_iter()
        .filter_map(|m| from[m.index()].map(|(c, v)| (name(c), v)))
        .collect();
    check::ordered(&seq, "percentiles out of order", &place, out);
    let pairs = [
        (
            from[Metric::MeanTtft.index()],
            from[Metric::MeanE2e.index()],
        ),
        (from[Metric::P99Ttft.index()], p99_e2e),
    ];
    for (ttft, e2e) in pairs {
        if let (Some((tc, tv)), Some((ec, ev))) = (ttft, e2e) {
            check::ttft_before_e2e((&name(tc), tv), (&name(ec), ev), &place, out);
        }
    }
}

/// The rows of the view's configuration (B, K) when the file holds several, with a note
/// saying which were shown; `has` says whether the file has B and K columns at all.
fn choose_configuration(
    rows: Vec<Read>,
    has: (bool, bool),
    ctx: &Context,
) -> (Vec<MeasuredPoint>, Vec<String>) {
    let mut notes = Vec::new();
    let configs: BTreeSet<(Option<u64>, Option<u64>)> = rows.iter().map(|r| r.config).collect();
    let want = (
        has.0.then_some(ctx.max_batch as u64),
        has.1.then_some(ctx.kv_tokens),
    );
    let chosen = if configs.len() <= 1 {
        if has.0 || has.1 {
            let file = configs.iter().next().copied().unwrap_or_default();
            notes.extend(config_note(file, (ctx.max_batch as u64, ctx.kv_tokens)));
        }
        None
    } else if configs.contains(&want) {
        notes.push(format!(
            "{} configurations in the file; showing the rows for B = {}, K = {} (the current view)",
            configs.len(),
            ctx.max_batch,
            ctx.kv_tokens
        ));
        Some(want)
    } else {
        let first = *configs.iter().next().expect("more than one configuration");
        notes.push(format!(
            "no rows for B = {}, K = {} (the current view); showing B = {}, K = {} — set B and K to match",
            ctx.max_batch,
            ctx.kv_tokens,
            first.0.map_or("?".into(), |x| x.to_string()),
            first.1.map_or("?".into(), |x| x.to_string())
        ));
        Some(first)
    };
    let mut points: Vec<MeasuredPoint> = rows
        .into_iter()
        .filter(|r| chosen.is_none_or(|w| r.config == w))
        .map(|r| r.point)
        .collect();
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    (points, notes)
}

/// The note for a file measured at one configuration `file` = (B, K) (None: the file
/// does not say) when it is not the view's: the errors would compare different servers.
fn config_note(file: (Option<u64>, Option<u64>), view: (u64, u64)) -> Option<String> {
    let differs = file.0.is_some_and(|b| b != view.0) || file.1.is_some_and(|k| k != view.1);
    let show = |x: Option<u64>| x.map_or("unknown".to_string(), |v| v.to_string());
    let measured = format!("B = {}, K = {}", show(file.0), show(file.1));
    let shown = format!("B = {}, K = {}", view.0, view.1);
    if differs {
        Some(format!(
            "this file was measured at {measured}; the view is {shown} — errors compare different servers"
        ))
    } else if file.0.is_none() || file.1.is_none() {
        Some(format!(
            "this file does not say all of its configuration ({measured}; 0 or empty means unknown); the view is {shown} — the errors assume they match"
        ))
    } else {
        None
    }
}
