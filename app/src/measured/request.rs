//! The per-request CSV: one row per request (`bench-native run`'s `requests.csv`,
//! `simulate --records`, `sweep --per-request`, or a long form with an `arrival_rate`
//! column), summarised per arrival rate with the engine's metrics code.

use super::check::{self, Place, Quantity, Rejected};
use super::table::{cell, Cell, Row, Table};
use super::{Context, MeasuredError, MeasuredPoint, Parsed};
use crate::metric::Metric;
use engine::metrics::summarize;
use engine::record::{Outcome, RequestRecord};
use std::collections::BTreeMap;

/// Names of the arrival (intended send) time column, first match wins.
const ARRIVAL: [&str; 6] = [
    "arrival_s",
    "intended_s",
    "intended_send_s",
    "scheduled_s",
    "send_s",
    "start_s",
];

/// The columns a per-request file may have.
struct Cols {
    ttft: usize,
    /// 1 for `ttft_s`, 10⁻³ for `ttft_ms`.
    ttft_scale: f64,
    arrival: Option<usize>,
    rate: Option<usize>,
    e2e: Option<usize>,
    tpot: Option<usize>,
    out: Option<usize>,
    prompt: Option<usize>,
    outcome: Option<usize>,
}

impl Cols {
    fn find(t: &Table) -> Result<Cols, MeasuredError> {
        let (ttft, ttft_scale) = match t.col(&["ttft_s"]) {
            Some(c) => (c, 1.0),
            None => (t.need("ttft_ms")?, 1e-3),
        };
        let c = Cols {
            ttft,
            ttft_scale,
            arrival: t.col(&ARRIVAL),
            rate: t.col(&["arrival_rate", "rate", "request_rate"]),
            e2e: t.col(&["e2e_s"]),
            tpot: t.col(&["tpot_s"]),
            out: t.col(&["completion_tokens", "output_tokens"]),
            prompt: t.col(&["prompt_tokens"]),
            outcome: t.col(&["outcome", "status"]),
        };
        if c.arrival.is_none() && c.rate.is_none() {
            return Err(MeasuredError::MissingColumn {
                column: "arrival_s",
                header: t.header.clone(),
            });
        }
        Ok(c)
    }
}

/// One row as a record and its arrival rate (0: not in the file), or `None` when a value
/// was rejected.
fn record(
    t: &Table,
    c: &Cols,
    id: u64,
    row: &Row,
    out: &mut Vec<Rejected>,
) -> Option<(f64, RequestRecord)> {
    let before = out.len();
    let f = &row.fields;
    let arrival = match c.arrival {
        Some(a) => t.required(row, a, Quantity::Time, out),
        None => Some(0.0),
    };
    let rate = match c.rate {
        Some(r) => t.required(row, r, Quantity::ArrivalRate, out),
        None => Some(0.0),
    };
    // TTFT in ms is checked in seconds.
    let ttft = match cell(&f[c.ttft]) {
        Cell::Number(x) => {
            let s = x * c.ttft_scale;
            match Quantity::Time.why_not(s) {
                Some(why) => {
                    out.push(Rejected::new(t.place(row, c.ttft), &f[c.ttft], why));
                    None
                }
                None => Some(s),
            }
        }
        _ => t.value(row, c.ttft, Quantity::Time, out),
    };
    let e2e = c.e2e.and_then(|e| t.value(row, e, Quantity::Time, out));
    let tpot = c.tpot.and_then(|p| t.value(row, p, Quantity::Time, out));
    let tokens = |col: Option<usize>, out: &mut Vec<Rejected>| {
        col.and_then(|k| t.value(row, k, Quantity::Count, out))
    };
    let out_tokens = tokens(c.out, out)
        .map(|x| x.min(u32::MAX as f64) as u32)
        .unwrap_or(1);
    let prompt = tokens(c.prompt, out)
        .map(|x| x.min(u32::MAX as f64) as u32)
        .unwrap_or(0);
    if let (Some(tt), Some(ee), Some(ec)) = (ttft, e2e, c.e2e) {
        let place = |column: &str| Place::Csv {
            line: row.line,
            column: column.to_string(),
        };
        let e2e_name = t.cols[ec].clone();
        check::ttft_before_e2e((&t.cols[c.ttft], tt), (&e2e_name, ee), &place, out);
    }
    if out.len() > before {
        return None;
    }
    let (arrival, rate) = (arrival?, rate?);
    let e2e = e2e.or_else(|| Some(ttft? + tpot? * out_tokens.saturating_sub(1) as f64));
    let outcome = match c.outcome.map(|o| f[o].to_ascii_lowercase()) {
        Some(s) if s == "rejected" => Outcome::Rejected,
        Some(s) if s == "unfinished" => Outcome::Unfinished,
        Some(s) if s == "error" || s == "failed" => Outcome::Error,
        _ if ttft.is_none() => Outcome::Error,
        _ => Outcome::Completed,
    };
    let rec = RequestRecord {
        id,
        class: 0,
        arrival_s: arrival,
        first_token_s: ttft.map(|x| arrival + x),
        finish_s: e2e.map(|x| arrival + x.max(ttft.unwrap_or(0.0))),
        prompt_tokens: prompt,
        output_tokens: out_tokens,
        max_gap_s: 0.0,
        stalls: 0,
        preemptions: 0,
        outcome,
        admitted_s: None,
        cached_tokens: 0,
    };
    Some((rate, rec))
}

pub(super) fn parse(t: &Table, ctx: &Context) -> Result<Parsed, MeasuredError> {
    let c = Cols::find(t)?;
    let mut groups: BTreeMap<u64, (f64, Vec<RequestRecord>)> = BTreeMap::new();
    let mut rejected = Vec::new();
    for (i, row) in t.rows.iter().enumerate() {
        if let Some((rate, rec)) = record(t, &c, i as u64, row, &mut rejected) {
            groups
                .entry(rate.to_bits())
                .or_insert_with(|| (rate, Vec::new()))
                .1
                .push(rec);
        }
    }
    if !rejected.is_empty() {
        return Err(MeasuredError::Implausible(rejected));
    }
    let mut notes = Vec::new();
    let mut points = Vec::new();
    for (_, (rate, mut recs)) in groups {
        recs.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
        let first = recs.first().map_or(0.0, |r| r.arrival_s);
        let last = recs.last().map_or(0.0, |r| r.arrival_s);
        let n = recs.len() as f64;
        let (rate, window) = if rate > 0.0 {
            (
                rate,
                if last > first {
                    last - first + 1.0 / rate
                } else {
                    n / rate
                },
            )
        } else if recs.len() >= 2 && last > first {
            // n arrivals whose gaps span (last − first): rate ≈ (n − 1)/span.
            let r = (n - 1.0) / (last - first);
            notes.push(format!(
                "arrival rate estimated from the arrival times: {r:.3} req/s"
            ));
            (r, n / r)
        } else {
            return Err(MeasuredError::NoPoints(
                "cannot tell the arrival rate: need an arrival_rate column or at least two distinct arrival times".into(),
            ));
        };
        let s = summarize(&recs, &ctx.metrics, window);
        let mut p = MeasuredPoint::new(rate);
        for m in Metric::ALL {
            p.set(m, m.of(&s), None);
        }
        if s.errors > 0 {
            notes.push(format!("{} failed requests at {rate} req/s", s.errors));
        }
        points.push(p);
    }
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    Ok((points, notes))
}
