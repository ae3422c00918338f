//! Measured results dropped onto the page, parsed into points that overlay the curves.
//!
//! Three formats, told apart by content, not by file name:
//! * **per-request CSV** from `bench-native run` (one row per request: `ttft_s`, `tpot_s`,
//!   `e2e_s`, `prompt_tokens`, `completion_tokens`, an arrival/intended-send time …),
//!   summarised with the engine's own metrics code into one point per arrival rate;
//! * **summary CSV** in the sweep schema of SPEC Appendix A (`arrival_rate,max_batch_size,
//!   kv_budget,n_seeds,mean_ttft_mean,…`), which is also the reference study's sweep CSV;
//! * **vLLM `bench serve` result JSON** (`request_rate`, `mean_ttft_ms`, `p99_ttft_ms`, …),
//!   one object, an array of them, or one per line.
//!
//! Every failure is a [`MeasuredError`] whose message says what is wrong with the file.

use crate::metric::Metric;
use engine::metrics::{summarize, MetricsConfig};
use engine::record::{Outcome, RequestRecord};
use std::collections::BTreeMap;
use std::fmt;

/// Files above this size are refused before reading [bytes].
pub const MAX_BYTES: f64 = 50.0 * 1024.0 * 1024.0;

/// What kind of file it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    RequestCsv,
    SummaryCsv,
    VllmJson,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::RequestCsv => "per-request CSV",
            Source::SummaryCsv => "summary CSV",
            Source::VllmJson => "vLLM bench JSON",
        }
    }
}

/// One measured point: per metric an optional `(value, std)`.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPoint {
    /// Arrival rate [req/s].
    pub rate: f64,
    pub values: Vec<Option<(f64, Option<f64>)>>,
}

impl MeasuredPoint {
    fn new(rate: f64) -> MeasuredPoint {
        MeasuredPoint {
            rate,
            values: vec![None; Metric::N],
        }
    }

    pub fn get(&self, m: Metric) -> Option<(f64, Option<f64>)> {
        self.values.get(m.index()).copied().flatten()
    }

    fn set(&mut self, m: Metric, v: Option<f64>, std: Option<f64>) {
        if let Some(v) = v.filter(|x| x.is_finite()) {
            self.values[m.index()] = Some((v, std.filter(|x| x.is_finite())));
        }
    }
}

/// A parsed file.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredSet {
    /// File name.
    pub name: String,
    pub source: Source,
    /// Sorted by rate.
    pub points: Vec<MeasuredPoint>,
    /// Anything the user should know (rows skipped, configuration filtered, …).
    pub notes: Vec<String>,
}

/// Why a file could not be used.
#[derive(Clone, Debug, PartialEq)]
pub enum MeasuredError {
    TooLarge {
        bytes: f64,
    },
    Empty,
    UnknownFormat {
        header: String,
    },
    MissingColumn {
        column: &'static str,
        header: String,
    },
    BadRow {
        row: usize,
        why: String,
    },
    BadJson(String),
    NoPoints(String),
}

impl fmt::Display for MeasuredError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeasuredError::TooLarge { bytes } => write!(
                f,
                "the file is {:.1} MB; the page reads files up to {:.0} MB — summarise it first (bench-native writes a summary CSV)",
                bytes / 1048576.0,
                MAX_BYTES / 1048576.0
            ),
            MeasuredError::Empty => write!(f, "the file is empty"),
            MeasuredError::UnknownFormat { header } => write!(
                f,
                "unrecognised file: expected a bench-native per-request CSV (with a ttft_s column), a sweep summary CSV \
                 (arrival_rate,max_batch_size,kv_budget,…) or a vLLM bench serve JSON; the first line is '{}'",
                truncate(header, 120)
            ),
            MeasuredError::MissingColumn { column, header } => {
                write!(f, "missing column '{column}' (header: '{}')", truncate(header, 120))
            }
            MeasuredError::BadRow { row, why } => write!(f, "line {row}: {why}"),
            MeasuredError::BadJson(why) => write!(f, "not valid JSON: {why}"),
            MeasuredError::NoPoints(why) => write!(f, "no usable results: {why}"),
        }
    }
}

impl std::error::Error for MeasuredError {}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Refuses files that are too large to read in the page.
///
/// # Errors
/// [`MeasuredError::TooLarge`].
pub fn check_size(bytes: f64) -> Result<(), MeasuredError> {
    if bytes > MAX_BYTES {
        Err(MeasuredError::TooLarge { bytes })
    } else {
        Ok(())
    }
}

/// The current view, used to pick matching rows of multi-configuration files and the SLO
/// for per-request files.
#[derive(Clone, Debug, PartialEq)]
pub struct Context {
    pub max_batch: u32,
    pub kv_tokens: u64,
    pub metrics: MetricsConfig,
}

/// Parses a dropped file.
///
/// # Errors
/// A [`MeasuredError`] saying what is wrong.
pub fn parse(name: &str, text: &str, ctx: &Context) -> Result<MeasuredSet, MeasuredError> {
    check_size(text.len() as f64)?;
    let body = text.trim_start_matches('\u{feff}').trim();
    if body.is_empty() {
        return Err(MeasuredError::Empty);
    }
    let (source, points, notes) = if body.starts_with('{') || body.starts_with('[') {
        let (p, n) = parse_vllm_json(body)?;
        (Source::VllmJson, p, n)
    } else {
        let header = body.lines().next().unwrap_or_default();
        let cols = split(header);
        if cols.iter().any(|c| c == "arrival_rate") && cols.iter().any(|c| c.ends_with("_mean")) {
            let (p, n) = parse_summary_csv(body, ctx)?;
            (Source::SummaryCsv, p, n)
        } else if cols.iter().any(|c| c == "ttft_s" || c == "ttft_ms") {
            let (p, n) = parse_request_csv(body, ctx)?;
            (Source::RequestCsv, p, n)
        } else {
            return Err(MeasuredError::UnknownFormat {
                header: header.to_string(),
            });
        }
    };
    if points.is_empty() {
        return Err(MeasuredError::NoPoints("the file has no rows".into()));
    }
    Ok(MeasuredSet {
        name: name.to_string(),
        source,
        points,
        notes,
    })
}

fn split(line: &str) -> Vec<String> {
    line.split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect()
}

fn num(s: &str) -> Option<f64> {
    let s = s.trim().trim_matches('"');
    if s.is_empty() || s.eq_ignore_ascii_case("nan") || s.eq_ignore_ascii_case("none") {
        return None;
    }
    s.parse::<f64>().ok()
}

struct Table {
    header: String,
    cols: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    fn read(body: &str) -> Result<Table, MeasuredError> {
        let mut lines = body
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, header) = lines.next().ok_or(MeasuredError::Empty)?;
        let cols = split(header);
        let mut rows = Vec::new();
        for (i, line) in lines {
            let f = split(line);
            if f.len() != cols.len() {
                return Err(MeasuredError::BadRow {
                    row: i + 1,
                    why: format!("{} fields, the header has {}", f.len(), cols.len()),
                });
            }
            rows.push((i + 1, f));
        }
        if rows.is_empty() {
            return Err(MeasuredError::NoPoints(
                "the CSV has a header but no rows".into(),
            ));
        }
        Ok(Table {
            header: header.to_string(),
            cols,
            rows,
        })
    }

    fn col(&self, names: &[&str]) -> Option<usize> {
        self.cols.iter().position(|c| names.contains(&c.as_str()))
    }

    fn need(&self, name: &'static str) -> Result<usize, MeasuredError> {
        self.col(&[name])
            .ok_or_else(|| MeasuredError::MissingColumn {
                column: name,
                header: self.header.clone(),
            })
    }
}

/// Summary-schema columns (without `_mean` / `_std`) → metric.
const SUMMARY_COLUMNS: [(&str, Metric); 16] = [
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

type Parsed = (Vec<MeasuredPoint>, Vec<String>);

fn parse_summary_csv(body: &str, ctx: &Context) -> Result<Parsed, MeasuredError> {
    let t = Table::read(body)?;
    let rate_c = t.need("arrival_rate")?;
    let b_c = t.col(&["max_batch_size", "max_batch"]);
    let k_c = t.col(&["kv_budget", "kv_tokens"]);
    let metric_cols: Vec<(Metric, usize, Option<usize>)> = SUMMARY_COLUMNS
        .iter()
        .filter_map(|(name, m)| {
            let mean = t.col(&[&format!("{name}_mean")])?;
            Some((*m, mean, t.col(&[&format!("{name}_std")])))
        })
        .collect();
    if metric_cols.is_empty() {
        return Err(MeasuredError::MissingColumn {
            column: "mean_ttft_mean",
            header: t.header.clone(),
        });
    }
    let mut rows = Vec::new();
    for (line, f) in &t.rows {
        let rate = num(&f[rate_c])
            .filter(|r| *r > 0.0)
            .ok_or_else(|| MeasuredError::BadRow {
                row: *line,
                why: format!("arrival_rate '{}' is not a positive number", f[rate_c]),
            })?;
        let int = |c: Option<usize>| -> Result<Option<u64>, MeasuredError> {
            match c {
                None => Ok(None),
                Some(c) => {
                    num(&f[c])
                        .map(|x| Some(x as u64))
                        .ok_or_else(|| MeasuredError::BadRow {
                            row: *line,
                            why: format!("'{}' in column {} is not a number", f[c], t.cols[c]),
                        })
                }
            }
        };
        // 0 is how `bench-native run` writes "unknown" (a server it cannot ask).
        let known = |x: Option<u64>| x.filter(|v| *v > 0);
        let (b, k) = (known(int(b_c)?), known(int(k_c)?));
        let mut p = MeasuredPoint::new(rate);
        for (m, mean, std) in &metric_cols {
            let v = num(&f[*mean]);
            if v.is_none() && !f[*mean].trim().is_empty() && !f[*mean].eq_ignore_ascii_case("nan") {
                return Err(MeasuredError::BadRow {
                    row: *line,
                    why: format!("'{}' in column {} is not a number", f[*mean], t.cols[*mean]),
                });
            }
            p.set(*m, v, std.and_then(|c| num(&f[c])));
        }
        rows.push(((b, k), p));
    }
    let mut notes = Vec::new();
    let configs: std::collections::BTreeSet<(Option<u64>, Option<u64>)> =
        rows.iter().map(|r| r.0).collect();
    let want = (
        b_c.map(|_| ctx.max_batch as u64),
        k_c.map(|_| ctx.kv_tokens),
    );
    let chosen = if configs.len() <= 1 {
        if b_c.is_some() || k_c.is_some() {
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
        let first = *configs.iter().next().expect("non-empty");
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
        .filter(|(c, _)| chosen.is_none_or(|w| *c == w))
        .map(|(_, p)| p)
        .collect();
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    Ok((points, notes))
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

/// An arrival rate for a table cell [req/s]: at most three decimals, no trailing zeros
/// (1.6780423965510918 → "1.678", 0.5 → "0.5").
pub fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn parse_request_csv(body: &str, ctx: &Context) -> Result<Parsed, MeasuredError> {
    let t = Table::read(body)?;
    let (ttft_c, ttft_scale) = match t.col(&["ttft_s"]) {
        Some(c) => (c, 1.0),
        None => (t.need("ttft_ms")?, 1e-3),
    };
    let arrival_c = t.col(&[
        "arrival_s",
        "intended_s",
        "intended_send_s",
        "scheduled_s",
        "send_s",
        "start_s",
    ]);
    let rate_c = t.col(&["arrival_rate", "rate", "request_rate"]);
    if arrival_c.is_none() && rate_c.is_none() {
        return Err(MeasuredError::MissingColumn {
            column: "arrival_s",
            header: t.header.clone(),
        });
    }
    let e2e_c = t.col(&["e2e_s"]);
    let tpot_c = t.col(&["tpot_s"]);
    let out_c = t.col(&["completion_tokens", "output_tokens"]);
    let prompt_c = t.col(&["prompt_tokens"]);
    let outcome_c = t.col(&["outcome", "status"]);
    let mut groups: BTreeMap<u64, (f64, Vec<RequestRecord>)> = BTreeMap::new();
    for (i, (line, f)) in t.rows.iter().enumerate() {
        let bad = |why: String| MeasuredError::BadRow { row: *line, why };
        let arrival = match arrival_c {
            Some(c) => num(&f[c])
                .filter(|x| *x >= 0.0)
                .ok_or_else(|| bad(format!("bad arrival time '{}'", f[c])))?,
            None => 0.0,
        };
        let rate = match rate_c {
            Some(c) => num(&f[c])
                .filter(|x| *x > 0.0)
                .ok_or_else(|| bad(format!("bad arrival rate '{}'", f[c])))?,
            None => 0.0,
        };
        let ttft = num(&f[ttft_c]).map(|x| x * ttft_scale);
        if ttft.is_some_and(|x| x < 0.0) {
            return Err(bad(format!("negative TTFT '{}'", f[ttft_c])));
        }
        if ttft.is_none() && !f[ttft_c].trim().is_empty() && !f[ttft_c].eq_ignore_ascii_case("nan")
        {
            return Err(bad(format!("TTFT '{}' is not a number", f[ttft_c])));
        }
        let out = out_c
            .and_then(|c| num(&f[c]))
            .map(|x| x.max(0.0) as u32)
            .unwrap_or(1);
        let e2e = e2e_c.and_then(|c| num(&f[c])).or_else(|| {
            Some(ttft? + tpot_c.and_then(|c| num(&f[c]))? * out.saturating_sub(1) as f64)
        });
        let outcome = match outcome_c.map(|c| f[c].to_ascii_lowercase()) {
            Some(s) if s == "rejected" => Outcome::Rejected,
            Some(s) if s == "unfinished" => Outcome::Unfinished,
            Some(s) if s == "error" || s == "failed" => Outcome::Error,
            _ if ttft.is_none() => Outcome::Error,
            _ => Outcome::Completed,
        };
        let rec = RequestRecord {
            id: i as u64,
            class: 0,
            arrival_s: arrival,
            first_token_s: ttft.map(|x| arrival + x),
            finish_s: e2e.map(|x| arrival + x.max(ttft.unwrap_or(0.0))),
            prompt_tokens: prompt_c
                .and_then(|c| num(&f[c]))
                .map(|x| x as u32)
                .unwrap_or(0),
            output_tokens: out,
            max_gap_s: 0.0,
            stalls: 0,
            preemptions: 0,
            outcome,
            admitted_s: None,
        };
        groups
            .entry(rate.to_bits())
            .or_insert_with(|| (rate, Vec::new()))
            .1
            .push(rec);
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

fn parse_vllm_json(body: &str) -> Result<Parsed, MeasuredError> {
    let objects: Vec<serde_json::Value> = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(a)) => a,
        Ok(v) => vec![v],
        Err(e) => {
            // JSON lines: one result object per line.
            let mut v = Vec::new();
            for (i, line) in body
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                v.push(serde_json::from_str(line).map_err(|_| {
                    MeasuredError::BadJson(format!("{e} (also not JSON lines: line {})", i + 1))
                })?);
            }
            v
        }
    };
    let mut notes = Vec::new();
    let mut points = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let Some(obj) = o.as_object() else {
            return Err(MeasuredError::BadJson(format!(
                "item {} is not an object",
                i + 1
            )));
        };
        let f = |k: &str| obj.get(k).and_then(|v| v.as_f64());
        if f("mean_ttft_ms").is_none() && f("p99_ttft_ms").is_none() {
            let keys: Vec<_> = obj.keys().take(8).cloned().collect();
            return Err(MeasuredError::NoPoints(format!(
                "item {} has no mean_ttft_ms / p99_ttft_ms (keys: {}) — is it a vLLM bench serve result?",
                i + 1,
                keys.join(", ")
            )));
        }
        let rate = match obj.get("request_rate") {
            Some(v) if v.as_f64().is_some_and(|x| x > 0.0 && x.is_finite()) => {
                v.as_f64().unwrap_or_default()
            }
            _ => match f("request_throughput") {
                Some(x) if x > 0.0 => {
                    notes.push(format!(
                        "item {}: request_rate is infinite or missing; placed at its measured throughput {x:.3} req/s",
                        i + 1
                    ));
                    x
                }
                _ => {
                    return Err(MeasuredError::NoPoints(format!(
                        "item {} has no request_rate",
                        i + 1
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
    points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    Ok((points, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            max_batch: 8,
            kv_tokens: 8192,
            metrics: MetricsConfig::default(),
        }
    }

    const SUMMARY: &str = "arrival_rate,max_batch_size,kv_budget,n_seeds,mean_ttft_mean,mean_ttft_std,p50_ttft_mean,p50_ttft_std,p95_ttft_mean,p95_ttft_std,p99_ttft_mean,p99_ttft_std,goodput_mean,goodput_std,blocking_probability_mean,blocking_probability_std
1.0,8,8192,5,0.1,0.01,0.09,0.01,0.2,0.02,0.3,0.03,0.99,0.01,0.0,0.0
0.5,8,8192,5,0.08,0.01,0.07,0.01,0.15,0.02,0.2,0.03,0.5,0.01,0.0,0.0
1.0,4,8192,5,0.5,0.01,0.4,0.01,0.9,0.02,1.3,0.03,0.9,0.01,0.1,0.0
";

    #[test]
    fn one_configuration_is_compared_with_the_view() {
        // A llama.cpp server at B = 4 dropped on the default view (B = 8).
        let csv =
            "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n1.6780423965510918,4,8192,0.2\n";
        let s = parse("llama.csv", csv, &ctx()).unwrap();
        assert_eq!(s.points.len(), 1, "still overlaid");
        assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
        assert!(
            s.notes[0].contains("measured at B = 4, K = 8192; the view is B = 8, K = 8192")
                && s.notes[0].contains("different servers"),
            "{:?}",
            s.notes
        );
        // The view's own configuration: nothing to say.
        let same = Context {
            max_batch: 4,
            ..ctx()
        };
        assert!(parse("llama.csv", csv, &same).unwrap().notes.is_empty());
        // `bench-native run` writes 0 for what it cannot know.
        let unknown = "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n2,0,0,0.2\n";
        let s = parse("run.csv", unknown, &ctx()).unwrap();
        assert!(
            s.notes[0].contains("B = unknown, K = unknown") && s.notes[0].contains("assume"),
            "{:?}",
            s.notes
        );
        // Known K that differs, unknown B: still a different server.
        let k_only = "arrival_rate,max_batch_size,kv_budget,p99_ttft_mean\n2,0,4096,0.2\n";
        let s = parse("run.csv", k_only, &ctx()).unwrap();
        assert!(s.notes[0].contains("different servers"), "{:?}", s.notes);
        // No B/K columns at all: no claim either way.
        let bare = "arrival_rate,p99_ttft_mean\n2,0.2\n";
        assert!(parse("bare.csv", bare, &ctx()).unwrap().notes.is_empty());
    }

    #[test]
    fn rates_in_tables_are_rounded() {
        assert_eq!(fmt_rate(1.6780423965510918), "1.678");
        assert_eq!(fmt_rate(1.139593038692236), "1.14");
        assert_eq!(fmt_rate(0.5), "0.5");
        assert_eq!(fmt_rate(12.0), "12");
    }

    #[test]
    fn summary_csv_filters_to_the_current_configuration() {
        let s = parse("s.csv", SUMMARY, &ctx()).unwrap();
        assert_eq!(s.source, Source::SummaryCsv);
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[0].rate, 0.5);
        assert_eq!(s.points[1].get(Metric::P99Ttft), Some((0.3, Some(0.03))));
        assert_eq!(s.notes.len(), 1);
        let other = Context {
            max_batch: 2,
            ..ctx()
        };
        let s = parse("s.csv", SUMMARY, &other).unwrap();
        assert!(s.notes[0].contains("no rows for B = 2"), "{:?}", s.notes);
    }

    #[test]
    fn request_csv_is_summarised_per_rate() {
        let mut csv = String::from("request_id,arrival_rate,arrival_s,ttft_s,tpot_s,e2e_s,prompt_tokens,completion_tokens\n");
        for i in 0..100 {
            let ttft = 0.1 + 0.001 * i as f64;
            csv.push_str(&format!(
                "{i},2,{},{ttft},0.01,{},100,11\n",
                i as f64 * 0.5,
                ttft + 0.1
            ));
        }
        let s = parse("r.csv", &csv, &ctx()).unwrap();
        assert_eq!(s.source, Source::RequestCsv);
        assert_eq!(s.points.len(), 1);
        let p = &s.points[0];
        assert_eq!(p.rate, 2.0);
        assert!((p.get(Metric::MeanTtft).unwrap().0 - 0.1495).abs() < 1e-9);
        assert!((p.get(Metric::MeanTpot).unwrap().0 - 0.01).abs() < 1e-9);
        assert!((p.get(Metric::Goodput).unwrap().0 - 2.0).abs() < 1e-6);
    }

    #[test]
    fn request_csv_without_rate_estimates_it() {
        let csv = "arrival_s,ttft_ms\n0,100\n1,120\n2,130\n";
        let s = parse("r.csv", csv, &ctx()).unwrap();
        assert!((s.points[0].rate - 1.0).abs() < 1e-9);
        assert!((s.points[0].get(Metric::MeanTtft).unwrap().0 - 0.11666666666666667).abs() < 1e-9);
    }

    #[test]
    fn vllm_json_in_all_three_shapes() {
        let one = r#"{"request_rate": 4.0, "mean_ttft_ms": 50.0, "median_ttft_ms": 45, "p99_ttft_ms": 120.5, "mean_tpot_ms": 9.1, "request_throughput": 3.9}"#;
        let s = parse("v.json", one, &ctx()).unwrap();
        assert_eq!(s.source, Source::VllmJson);
        assert_eq!(s.points[0].get(Metric::P99Ttft), Some((0.1205, None)));
        let arr = format!("[{one}, {}]", one.replace("4.0", "2.0"));
        assert_eq!(parse("v.json", &arr, &ctx()).unwrap().points.len(), 2);
        let lines = format!("{one}\n{}\n", one.replace("4.0", "\"inf\""));
        let s = parse("v.jsonl", &lines, &ctx()).unwrap();
        assert_eq!(s.points.len(), 2);
        assert!(s.notes[0].contains("infinite"));
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let msg = |t: &str| parse("x", t, &ctx()).unwrap_err().to_string();
        assert!(msg("").contains("empty"));
        assert!(msg("a,b,c\n1,2,3").contains("unrecognised"));
        assert!(msg("ttft_s,e2e_s\n0.1,0.2").contains("arrival_s"));
        assert!(msg("arrival_s,ttft_s\n0,0.1\n1,abc").contains("line 3"));
        assert!(msg("arrival_s,ttft_s\n0,0.1\n1").contains("1 fields"));
        assert!(msg("arrival_rate,foo_mean\n").contains("no rows"));
        assert!(
            msg("arrival_rate,max_batch_size,kv_budget,n_seeds,x_mean\n1,8,8192,5,0.1")
                .contains("mean_ttft_mean")
        );
        assert!(msg("{\"a\": 1}").contains("mean_ttft_ms"));
        assert!(msg("{\"a\": ").contains("JSON"));
        assert!(check_size(60.0 * 1048576.0)
            .unwrap_err()
            .to_string()
            .contains("60.0 MB"));
    }
}
