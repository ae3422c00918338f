//! Measured results dropped onto the page, parsed into points that overlay the curves.
//!
//! Three formats, told apart by content, not by file name:
//! * **per-request CSV** from `bench-native run` (one row per request: `ttft_s`, `tpot_s`,
//!   `e2e_s`, `prompt_tokens`, `completion_tokens`, an arrival/intended-send time …),
//!   summarised with the engine's own metrics code into one point per arrival rate
//!   ([`request`]);
//! * **summary CSV** in the sweep schema (`arrival_rate,max_batch_size,kv_budget,n_seeds,
//!   mean_ttft_mean,…`, see `docs/model.md`, Metrics), which is also the reference study's
//!   sweep CSV ([`summary`]);
//! * **vLLM `bench serve` result JSON** (`request_rate`, `mean_ttft_ms`, `p99_ttft_ms`, …),
//!   one object, an array of them, or one per line ([`vllm`]).
//!
//! CSV is read with the `csv` crate, so quoted fields may hold commas, quotes and line
//! breaks ([`table`]). Before anything is plotted every value is checked for physical
//! sense ([`check`]): finite, non-negative, within what a benchmark can measure, TTFT ≤
//! E2E, percentiles in order, arrival rates above zero. One impossible value rejects the
//! whole file, and the message names each rejected value's line and column.
//!
//! Every failure is a [`MeasuredError`] whose message says what is wrong with the file.

pub mod check;
pub mod folder;
mod request;
pub mod series;
pub mod setup;
mod summary;
mod table;
mod vllm;

#[cfg(all(test, not(target_arch = "wasm32")))]
mod props;
#[cfg(test)]
mod tests;

pub use check::{Place, Rejected};
pub use series::{group, MeasuredSeries, SeriesPoint};
pub use setup::Setup;

use crate::metric::Metric;
use engine::metrics::MetricsConfig;
use std::fmt;

/// Files above this size are refused before reading [bytes].
pub const MAX_BYTES: f64 = 50.0 * 1024.0 * 1024.0;

/// Rejected values listed in one message; the rest are counted.
const SHOWN_REJECTED: usize = 8;

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
    /// What the file (or the `metadata.json` beside it) says about its benchmark.
    pub setup: Setup,
}

/// Why a file could not be used.
#[derive(Clone, Debug, PartialEq)]
pub enum MeasuredError {
    /// Summarise the file first (bench-native writes a summary CSV).
    TooLarge {
        bytes: f64,
    },
    /// Nothing but white space: pick the right file.
    Empty,
    /// A CSV header line and nothing under it: the run wrote no rows.
    HeaderOnly {
        header: String,
    },
    /// Not one of the formats the page reads.
    UnknownFormat {
        header: String,
    },
    /// A column the format needs is not in the header.
    MissingColumn {
        column: &'static str,
        header: String,
    },
    /// A row that cannot be read at all (wrong number of fields).
    BadRow {
        row: usize,
        why: String,
    },
    /// Values that cannot be measurements; nothing from the file is plotted.
    Implausible(Vec<Rejected>),
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
            MeasuredError::HeaderOnly { header } => write!(
                f,
                "the file has only a header line, no rows of data (header: '{}')",
                truncate(header, 120)
            ),
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
            MeasuredError::Implausible(rejected) => {
                let n = rejected.len();
                write!(
                    f,
                    "{n} value{} cannot be measured, so nothing from this file is plotted: ",
                    if n == 1 { "" } else { "s" }
                )?;
                for (i, r) in rejected.iter().take(SHOWN_REJECTED).enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{r}")?;
                }
                if n > SHOWN_REJECTED {
                    write!(f, "; … and {} more", n - SHOWN_REJECTED)?;
                }
                Ok(())
            }
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

/// Points and notes, what each format's parser returns.
type Parsed = (Vec<MeasuredPoint>, Vec<String>);

/// Parses a dropped file.
///
/// # Errors
/// A [`MeasuredError`] saying what is wrong; [`MeasuredError::Implausible`] lists every
/// value that fails the physical checks, with its line (or JSON item) and column.
pub fn parse(name: &str, text: &str, ctx: &Context) -> Result<MeasuredSet, MeasuredError> {
    check_size(text.len() as f64)?;
    let unbommed = text.trim_start_matches('\u{feff}');
    let body = unbommed.trim_start();
    // Lines trimmed off the top, so that line numbers are the file's own.
    let skipped = unbommed[..unbommed.len() - body.len()]
        .matches('\n')
        .count();
    let body = body.trim_end();
    if body.is_empty() {
        return Err(MeasuredError::Empty);
    }
    let mut setup = Setup::default();
    let (source, points, notes) = if body.starts_with('{') || body.starts_with('[') {
        let ((p, n), s) = vllm::parse(body, skipped)?;
        setup = s;
        (Source::VllmJson, p, n)
    } else {
        let t = table::Table::read(body, skipped)?;
        if t.has("arrival_rate") && t.cols.iter().any(|c| c.ends_with("_mean")) {
            let (p, n) = summary::parse(&t, ctx)?;
            (Source::SummaryCsv, p, n)
        } else if t.has("ttft_s") || t.has("ttft_ms") {
            let (p, n) = request::parse(&t, ctx)?;
            (Source::RequestCsv, p, n)
        } else {
            return Err(MeasuredError::UnknownFormat {
                header: body.lines().next().unwrap_or_default().to_string(),
            });
        }
    };
    if points.is_empty() {
        return Err(MeasuredError::NoPoints("the file has no rows".into()));
    }
    if points.iter().all(|p| p.values.iter().all(Option::is_none)) {
        return Err(MeasuredError::NoPoints(
            "no row has a value in any metric the page plots".into(),
        ));
    }
    // The last line of defence: what the formats derive (summaries of per-request rows,
    // estimated rates) passes the same checks as what they read.
    let rejected = check::points(&points);
    if !rejected.is_empty() {
        return Err(MeasuredError::Implausible(rejected));
    }
    Ok(MeasuredSet {
        name: name.to_string(),
        source,
        points,
        notes,
        setup,
    })
}

/// An arrival rate for a table cell [req/s]: at most three decimals, no trailing zeros
/// (1.6780423965510918 → "1.678", 0.5 → "0.5").
pub fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
