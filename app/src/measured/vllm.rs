//! vLLM `bench serve` result JSON (`request_rate`, `mean_ttft_ms`, `median_ttft_ms`,
//! `p99_ttft_ms`, `mean_tpot_ms`, `mean_e2el_ms`, `request_throughput`, …): one object,
//! an array of them, or one object per line.

use super::check::{self, Place, Quantity, Rejected};
use super::setup::Setup;
use super::{MeasuredError, MeasuredPoint, Parsed};
use crate::metric::Metric;
use serde_json::{Map, Value};

/// The latency families vLLM reports as `mean_/median_/std_/p<q>_<family>_ms`.
const FAMILIES: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

/// Fields read as rates [req/s] besides `request_rate`.
const RATES: [&str; 2] = ["request_throughput", "request_goodput"];

/// The objects in the file, each with where it is: (item, line).
type Items = Vec<(Value, Option<usize>, Option<usize>)>;

fn items(body: &str, skipped: usize) -> Result<Items, MeasuredError> {
    match serde_json::from_str::<Value>(body) {
        Ok(Value::Array(a)) if a.is_empty() => {
            Err(MeasuredError::NoPoints("the JSON array is empty".into()))
        }
        Ok(Value::Array(a)) => Ok(a
            .into_iter()
            .enumerate()
            .map(|(i, v)| (v, Some(i + 1), None))
            .collect()),
        Ok(v) => Ok(vec![(v, None, None)]),
        Err(e) => {
            // JSON lines: one result object per line.
            let mut v = Vec::new();
            for (i, line) in body
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let at = i + 1 + skipped;
                v.push((
                    serde_json::from_str(line).map_err(|_| {
                        MeasuredError::BadJson(format!("{e} (also not JSON lines: line {at})"))
                    })?,
                    None,
                    Some(at),
                ));
            }
            Ok(v)
        }
    }
}

/// The object's name in messages.
fn label(item: Option<usize>, line: Option<usize>) -> String {
    match (item, line) {
        (_, Some(l)) => format!("line {l}"),
        (Some(i), _) => format!("item {i}"),
        _ => "the object".into(),
    }
}

/// A percentile field's level: `median_ttft_ms` → 50, `p99.9_ttft_ms` → 99.9.
fn level(key: &str, family: &str) -> Option<f64> {
    let stem = key.strip_suffix(&format!("_{family}_ms"))?;
    if stem == "median" {
        return Some(50.0);
    }
    stem.strip_prefix('p')?
        .parse::<f64>()
        .ok()
        .filter(|q| (0.0..=100.0).contains(q))
}

/// Checks every field the page reads or can check, returning the values [ms or /s].
fn check_fields(obj: &Map<String, Value>, place: &dyn Fn(&str) -> Place, out: &mut Vec<Rejected>) {
    for (k, v) in obj {
        let q = if k.ends_with("_ms") {
            Quantity::Time
        } else if RATES.contains(&k.as_str()) {
            Quantity::Throughput
        } else if k == "duration" {
            Quantity::Time
        } else {
            continue;
        };
        match v {
            Value::Null => {}
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                // Durations in ms are checked in seconds.
                let scaled = if k.ends_with("_ms") { x / 1000.0 } else { x };
                if let Some(why) = q.why_not(scaled) {
                    out.push(Rejected::new(place(k), &v.to_string(), why));
                }
            }
            _ => out.push(Rejected::new(place(k), &v.to_string(), "not a number")),
        }
    }
    let f = |k: &str| obj.get(k).and_then(Value::as_f64);
    for family in FAMILIES {
        let mut seq: Vec<(f64, String, f64)> = obj
            .keys()
            .filter_map(|k| Some((level(k, family)?, k.clone(), f(k)?)))
            .collect();
        seq.sort_by(|a, b| a.0.total_cmp(&b.0));
        let seq: Vec<(String, f64)> = seq.into_iter().map(|(_, k, v)| (k, v)).collect();
        check::ordered(&seq, "percentiles out of order", place, out);
    }
    for k in obj
        .keys()
        .filter(|k| k.ends_with("_ttft_ms") && !k.starts_with("std_"))
    {
        let e = k.replace("_ttft_ms", "_e2el_ms");
        if let (Some(tv), Some(ev)) = (f(k), f(&e)) {
            check::ttft_before_e2e((k, tv), (&e, ev), place, out);
        }
    }
}

/// The points and notes, and the setup the (first) result object records.
pub(super) fn parse(body: &str, skipped: usize) -> Result<(Parsed, Setup), MeasuredError> {
    let mut notes = Vec::new();
    let mut setup: Option<Setup> = None;
    let mut points = Vec::new();
    let mut rejected = Vec::new();
    for (o, item, line) in items(body, skipped)? {
        let name = label(item, line);
        let Some(obj) = o.as_object() else {
            return Err(MeasuredError::BadJson(format!("{name} is not an object")));
        };
        let place = |field: &str| Place::Json {
            item,
            line,
            field: field.to_string(),
        };
        let before = rejected.len();
        check_fields(obj, &place, &mut rejected);
        let this = Setup::from_vllm(obj);
        match &setup {
            None => setup = Some(this),
            Some(first) if first.series_key() != this.series_key() && notes.len() < 8 => notes
                .push(format!(
                "{name} records another setup than the first result ({}); the first one's is shown",
                this.describe()
            )),
            Some(_) => {}
        }
        let f = |k: &str| obj.get(k).and_then(Value::as_f64);
        if f("mean_ttft_ms").is_none() && f("p99_ttft_ms").is_none() {
            let keys: Vec<_> = obj.keys().take(8).cloned().collect();
            return Err(MeasuredError::NoPoints(format!(
                "{name} has no mean_ttft_ms / p99_ttft_ms (keys: {}) — is it a vLLM bench serve result?",
                keys.join(", ")
            )));
        }
        let rate = match obj.get("request_rate") {
            Some(Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                match Quantity::ArrivalRate.why_not(x) {
                    Some(why) => {
                        rejected.push(Rejected::new(place("request_rate"), &n.to_string(), why));
                        None
                    }
                    None => Some(x),
                }
            }
            // vLLM writes "inf" for an open-loop run (all requests at once).
            Some(Value::String(s))
                if s.trim().trim_start_matches('+').eq_ignore_ascii_case("inf")
                    || s.trim().eq_ignore_ascii_case("infinity") =>
            {
                None
            }
            None | Some(Value::Null) => None,
            Some(v) => {
                rejected.push(Rejected::new(
                    place("request_rate"),
                    &v.to_string(),
                    "not a number",
                ));
                None
            }
        };
        if rejected.len() > before {
            continue;
        }
        let rate = match rate {
            Some(r) => r,
            None => match f("request_throughput") {
                Some(x) if x > 0.0 => {
                    notes.push(format!(
                        "{name}: request_rate is infinite or missing; placed at its measured throughput {x:.3} req/s"
                    ));
                    x
                }
                _ => {
                    return Err(MeasuredError::NoPoints(format!(
                        "{name} has no request_rate"
                    )))
                }
            },
        };
        let ms = |k: &str| f(k).map(|x| x / 1000.0);
        let mut p = MeasuredPoint::new(rate);
        p.set(Metric::MeanTtft, ms("mean_ttft_ms"), ms("std_ttft_ms"));
        p.set(
            Metric::P50Ttft,
            ms("median_ttft_ms").or(ms("p50_ttft_ms")),
            None,
        );
        p.set(Metric::P95Ttft, ms("p95_ttft_ms"), None);
        p.set(Metric::P99Ttft, ms("p99_ttft_ms"), None);
        p.set(Metric::MeanTpot, ms("mean_tpot_ms"), ms("std_tpot_ms"));
        p.set(Metric::P99Tpot, ms("p99_tpot_ms"), None);
        p.set(Metric::MeanE2e, ms("mean_e2el_ms"), ms("std_e2el_ms"));
        p.set(Metric::Goodput, f("request_throughput"), None);
        p.set(Metric::SloGoodput, f("request_goodput"), None);
        points.push(p);
    }
    if !rejected.is_empty() {
        return Err(MeasuredError::Implausible(rejected));
    }
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    Ok(((points, notes), setup.unwrap_or_default()))
}
