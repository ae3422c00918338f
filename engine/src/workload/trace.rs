//! Arrival traces read from text: the JSON forms that `bench-native --trace` and the page
//! accept (docs/model.md, Workload), checked as the engine checks a workload, with every
//! refusal placed at its line and column.
//!
//! [`parse_trace`] takes the text of
//! - a JSON list of requests, `[{"arrival": s, "prompt": tokens, "output": tokens}, …]`
//!   (as `bench-native validate` writes its traces; an optional `"class"`),
//! - a JSON list of arrival times [s] (lengths then come from a length distribution), or
//! - a workload JSON (an engine [`Workload`]) whose arrivals are one of these.
//!
//! # Examples
//! ```
//! use engine::workload::{parse_trace, ArrivalProcess};
//!
//! let t = parse_trace(r#"[{"arrival": 0.5, "prompt": 12, "output": 30},
//!                         {"arrival": 2.0, "prompt": 40, "output": 8}]"#).unwrap();
//! assert_eq!((t.len(), t.rate()), (2, 1.0));
//! // Time-scaled to 4 req/s: the same requests, four times closer together.
//! let (arrivals, horizon) = t.at_rate(4.0).unwrap();
//! assert_eq!(horizon, 0.5);
//! assert!(matches!(arrivals, ArrivalProcess::Trace { requests } if requests[0].arrival == 0.125));
//!
//! let e = parse_trace("[0.5,\n 0.25]").unwrap_err();
//! assert_eq!(e.to_string(), "line 2, column 2: entry 2 arrives at 0.25 s, before entry 1 (0.5 s): arrivals must be in time order");
//! ```

use super::import::{self, BlockIds, ImportedTrace, Skipped, TraceFormat};
use super::{ArrivalProcess, LengthDist, SharedTokens, TraceRequest, Workload};
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;
use thiserror::Error;

/// A place in a text: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (clamped to the text, and to a character
    /// boundary).
    pub fn of(text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }

    /// The position in a whole text of a serde_json error found in a part of it that
    /// starts at `start` (serde_json counts 1-based lines and columns within the part).
    fn within(start: Position, e: &serde_json::Error) -> Position {
        let (line, column) = (e.line().max(1), e.column().max(1));
        if line == 1 {
            Position {
                line: start.line,
                column: start.column + column - 1,
            }
        } else {
            Position {
                line: start.line + line - 1,
                column,
            }
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// A trace that cannot be used, and where in its text the problem is.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TraceError {
    /// The text is not JSON, or a value has the wrong type. Fix the text at `at`.
    #[error("{at}: {why}")]
    Json { at: Position, why: String },
    /// JSON of another shape. Give a list of requests, a list of arrival times [s] or a
    /// workload JSON whose arrivals are one of these.
    #[error(
        "{at}: expected a JSON list of requests ({{\"arrival\", \"prompt\", \"output\"}}), of arrival times [s], or a workload JSON"
    )]
    Shape { at: Position },
    /// A workload JSON whose arrivals are generated at a rate (`kind`), not listed. Use
    /// that arrival process directly instead of a trace.
    #[error("its workload generates arrivals at a rate ({kind}) instead of listing them")]
    Generated { kind: &'static str },
    /// The list is empty. A trace needs at least one arrival.
    #[error("the trace lists no arrivals")]
    Empty,
    /// Entry `entry` (1-based) arrives at a negative time or before the entry above it.
    /// Arrival times are seconds from the start, ≥ 0 and in time order.
    #[error("{at}: entry {entry} arrives at {arrival} s, {why}")]
    Arrival {
        at: Position,
        entry: usize,
        arrival: f64,
        why: String,
    },
    /// Entry `entry` (1-based) has 0 prompt or output tokens. Every request needs at
    /// least one of each.
    #[error("{at}: entry {entry} has {what} 0 tokens; every request needs at least 1")]
    NoTokens {
        at: Position,
        entry: usize,
        what: &'static str,
    },
    /// A workload JSON's other parts (lengths, `max_model_len`) are invalid.
    #[error("its workload: {0}")]
    Workload(ConfigError),
}

/// The arrivals a trace lists, and what else its file fixes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// [`ArrivalProcess::Trace`] (requests with their own lengths) or
    /// [`ArrivalProcess::Timestamps`].
    pub arrivals: ArrivalProcess,
    /// A workload JSON's length distribution (what a list of times draws its lengths
    /// from, unless the caller gives another).
    pub lengths: Option<LengthDist>,
    /// A workload JSON's `max_model_len`.
    pub max_model_len: Option<u32>,
    /// An imported Mooncake trace's prompt block ids, index-aligned with its requests:
    /// the prefix blocks its requests share ([`SharedTokens::Blocks`]).
    #[serde(default)]
    pub blocks: Option<BlockIds>,
}

impl Trace {
    /// The workload's shared tokens this trace brings: its block ids, if it has them.
    pub fn shared(&self) -> Option<SharedTokens> {
        self.blocks
            .clone()
            .map(|blocks| SharedTokens::Blocks { blocks })
    }

    /// Arrivals listed.
    pub fn len(&self) -> usize {
        match &self.arrivals {
            ArrivalProcess::Trace { requests } => requests.len(),
            ArrivalProcess::Timestamps { times } => times.len(),
            _ => 0,
        }
    }

    /// Whether no arrival is listed (never so for a parsed trace).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether each request carries its own lengths (a list of requests), rather than
    /// drawing them from a length distribution (a list of times).
    pub fn has_lengths(&self) -> bool {
        matches!(self.arrivals, ArrivalProcess::Trace { .. })
    }

    /// The last arrival [s].
    pub fn last_arrival(&self) -> f64 {
        match &self.arrivals {
            ArrivalProcess::Trace { requests } => requests.last().map_or(0.0, |r| r.arrival),
            ArrivalProcess::Timestamps { times } => times.last().copied().unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// Mean arrival rate, arrivals / last arrival [req/s] (0 when every arrival is at 0).
    pub fn rate(&self) -> f64 {
        self.arrivals.rate()
    }

    /// The requests' own (prompt, output) pairs as an empirical length distribution
    /// (`None` for a list of times): what the analytical models, which take a length
    /// distribution, see of a list of requests.
    pub fn own_lengths(&self) -> Option<LengthDist> {
        match &self.arrivals {
            ArrivalProcess::Trace { requests } => Some(LengthDist::Empirical {
                pairs: requests.iter().map(|r| (r.prompt, r.output)).collect(),
            }),
            _ => None,
        }
    }

    /// The trace time-scaled to mean rate `rate` [req/s], and its horizon: the scaled last
    /// arrival [s]. Every arrival time is multiplied by [`Trace::rate`] / `rate`, so the
    /// requests, their order and lengths and the shape of their bursts stay, and only the
    /// clock is stretched — as a renewal process's unit stream is scaled by 1/λ
    /// (docs/model.md, Workload).
    ///
    /// `None` when `rate` is not a finite number > 0 or the trace has no time scale to
    /// stretch (every arrival at 0).
    pub fn at_rate(&self, rate: f64) -> Option<(ArrivalProcess, f64)> {
        let own = self.rate();
        if !(rate.is_finite() && rate > 0.0 && own > 0.0) {
            return None;
        }
        let s = own / rate;
        let arrivals = match &self.arrivals {
            ArrivalProcess::Trace { requests } => ArrivalProcess::Trace {
                requests: requests
                    .iter()
                    .map(|r| TraceRequest {
                        arrival: r.arrival * s,
                        ..*r
                    })
                    .collect(),
            },
            ArrivalProcess::Timestamps { times } => ArrivalProcess::Timestamps {
                times: times.iter().map(|t| t * s).collect(),
            },
            _ => return None,
        };
        Some((arrivals, self.last_arrival() * s))
    }
}

/// Reads a trace from its text (see the module docs for the forms accepted), checking it
/// as the engine checks a workload: at least one arrival, every time ≥ 0 and in order,
/// every request at least one prompt and one output token, a workload's lengths valid.
///
/// # Errors
/// [`TraceError`], with the line and column of the value at fault where there is one.
pub fn parse_trace(text: &str) -> Result<Trace, TraceError> {
    let start = text.len() - text.trim_start().len();
    match text[start..].chars().next() {
        Some('[') => parse_list(text),
        Some('{') => parse_workload(text),
        Some(_) => Err(TraceError::Shape {
            at: Position::of(text, start),
        }),
        None => Err(TraceError::Empty),
    }
}

/// A trace file read in whichever form it is, and for an export of a known format what
/// its import skipped.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadTrace {
    pub trace: Trace,
    /// The export's format and the lines its import skipped (counted, never dropped
    /// silently); `None` for kvqueue's own JSON forms.
    pub imported: Option<(TraceFormat, Skipped)>,
}

/// Reads a trace file's text in any form kvqueue reads: a Mooncake, BurstGPT or Azure
/// export, recognised by its first line ([`TraceFormat::detect`]), is imported by its
/// documented columns ([`import::import`]); anything else is one of [`parse_trace`]'s JSON
/// forms.
///
/// # Errors
/// The import's or the parser's message, with the line at fault.
pub fn read_any_trace(text: &str) -> Result<ReadTrace, String> {
    let Some(format) = TraceFormat::detect(text) else {
        return parse_trace(text)
            .map(|trace| ReadTrace {
                trace,
                imported: None,
            })
            .map_err(|e| e.to_string());
    };
    let t = import::import(text, format).map_err(|e| format!("{format} trace: {e}"))?;
    let skipped = t.skipped;
    let mut trace = t.into_trace();
    let w = Workload {
        arrivals: std::mem::replace(&mut trace.arrivals, ArrivalProcess::Poisson { rate: 1.0 }),
        ..Workload::default()
    };
    w.validate().map_err(|e| format!("{format} trace: {e}"))?;
    trace.arrivals = w.arrivals;
    Ok(ReadTrace {
        trace,
        imported: Some((format, skipped)),
    })
}

impl ImportedTrace {
    /// The imported requests as a [`Trace`] (each with its own lengths), with their block
    /// ids.
    pub fn into_trace(self) -> Trace {
        Trace {
            arrivals: ArrivalProcess::Trace {
                requests: self.requests,
            },
            lengths: None,
            max_model_len: None,
            blocks: self.blocks,
        }
    }
}

/// The position of a raw value borrowed from `text`.
fn position(text: &str, raw: &RawValue) -> Position {
    let offset = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    Position::of(text, offset)
}

/// serde_json's message without its own " at line L column C" (relative to the part
/// parsed).
fn message(e: &serde_json::Error) -> String {
    let why = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    why.strip_suffix(&suffix).unwrap_or(&why).to_string()
}

fn json_error(at: Position, e: &serde_json::Error) -> TraceError {
    TraceError::Json {
        at,
        why: message(e),
    }
}

fn whole(text: &str) -> impl Fn(serde_json::Error) -> TraceError + '_ {
    move |e| json_error(Position::within(Position::of(text, 0), &e), &e)
}

/// A top-level list: of requests if its first entry is an object, else of times.
fn parse_list(text: &str) -> Result<Trace, TraceError> {
    let items: Vec<&RawValue> = serde_json::from_str(text).map_err(whole(text))?;
    let first = items.first().ok_or(TraceError::Empty)?;
    let item = |raw: &RawValue| -> Position { position(text, raw) };
    let arrivals = if first.get().starts_with('{') {
        let mut requests = Vec::with_capacity(items.len());
        for raw in &items {
            let r: TraceRequest = serde_json::from_str(raw.get())
                .map_err(|e| json_error(Position::within(item(raw), &e), &e))?;
            requests.push(r);
        }
        ArrivalProcess::Trace { requests }
    } else if first
        .get()
        .starts_with(|c: char| c == '-' || c.is_ascii_digit())
    {
        let mut times = Vec::with_capacity(items.len());
        for raw in &items {
            // A scalar: the error is placed at its start.
            let t: f64 = serde_json::from_str(raw.get()).map_err(|e| json_error(item(raw), &e))?;
            times.push(t);
        }
        ArrivalProcess::Timestamps { times }
    } else {
        return Err(TraceError::Shape { at: item(first) });
    };
    let places: Vec<Position> = items.iter().map(|raw| item(raw)).collect();
    check(&arrivals, |i| places[i])?;
    Ok(Trace {
        arrivals,
        lengths: None,
        max_model_len: None,
        blocks: None,
    })
}

/// Where a workload JSON's listed arrivals are: only what locating an entry needs.
#[derive(Deserialize)]
struct Skeleton<'a> {
    #[serde(borrow)]
    arrivals: ListedSkeleton<'a>,
}

#[derive(Deserialize)]
struct ListedSkeleton<'a> {
    #[serde(borrow, default)]
    requests: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    times: Option<Vec<&'a RawValue>>,
}

fn parse_workload(text: &str) -> Result<Trace, TraceError> {
    let w: Workload = match serde_json::from_str(text) {
        Ok(w) => w,
        Err(e) if e.is_data() && serde_json::from_str::<serde_json::Value>(text).is_ok() => {
            // Well-formed JSON that is not a workload: say which forms are meant, at the
            // value serde_json stopped on.
            return Err(TraceError::Json {
                at: Position::within(Position::of(text, 0), &e),
                why: format!(
                    "not a trace: expected a JSON list of requests ({{\"arrival\", \"prompt\", \"output\"}}), of arrival times [s], or a workload JSON ({})",
                    message(&e)
                ),
            });
        }
        Err(e) => return Err(whole(text)(e)),
    };
    let kind = match &w.arrivals {
        ArrivalProcess::Trace { .. } | ArrivalProcess::Timestamps { .. } => None,
        ArrivalProcess::Poisson { .. } => Some("poisson"),
        ArrivalProcess::Gamma { .. } => Some("gamma"),
        ArrivalProcess::Deterministic { .. } => Some("deterministic"),
    };
    if let Some(kind) = kind {
        return Err(TraceError::Generated { kind });
    }
    // The entries' places, for messages; the whole text parsed, so this parses too.
    let places: Vec<Position> = serde_json::from_str::<Skeleton<'_>>(text)
        .ok()
        .and_then(|s| s.arrivals.requests.or(s.arrivals.times))
        .map(|raws| raws.iter().map(|raw| position(text, raw)).collect())
        .unwrap_or_default();
    let origin = Position::of(text, 0);
    check(&w.arrivals, |i| places.get(i).copied().unwrap_or(origin))?;
    let Workload {
        arrivals,
        lengths,
        max_model_len,
        ..
    } = w;
    let rest = Workload {
        arrivals: ArrivalProcess::Timestamps { times: vec![0.0] },
        lengths: lengths.clone(),
        max_model_len,
        shared: None,
    };
    rest.validate().map_err(TraceError::Workload)?;
    Ok(Trace {
        arrivals,
        lengths: Some(lengths),
        max_model_len,
        blocks: None,
    })
}

/// Checks listed arrivals entry by entry; `at(i)` places entry i (0-based).
fn check(arrivals: &ArrivalProcess, at: impl Fn(usize) -> Position) -> Result<(), TraceError> {
    let entries: Vec<(f64, Option<(u32, u32)>)> = match arrivals {
        ArrivalProcess::Trace { requests } => requests
            .iter()
            .map(|r| (r.arrival, Some((r.prompt, r.output))))
            .collect(),
        ArrivalProcess::Timestamps { times } => times.iter().map(|&t| (t, None)).collect(),
        _ => Vec::new(),
    };
    if entries.is_empty() {
        return Err(TraceError::Empty);
    }
    let mut prev = 0.0;
    for (i, &(t, lengths)) in entries.iter().enumerate() {
        let bad = |why: String| TraceError::Arrival {
            at: at(i),
            entry: i + 1,
            arrival: t,
            why,
        };
        if !(t.is_finite() && t >= 0.0) {
            return Err(bad("not a time >= 0 [s]".into()));
        }
        if t < prev {
            return Err(bad(format!(
                "before entry {i} ({prev} s): arrivals must be in time order"
            )));
        }
        prev = t;
        if let Some((prompt, output)) = lengths {
            let what = if prompt == 0 {
                Some("prompt")
            } else if output == 0 {
                Some("output")
            } else {
                None
            };
            if let Some(what) = what {
                return Err(TraceError::NoTokens {
                    at: at(i),
                    entry: i + 1,
                    what,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse_trace(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_the_three_forms() {
        let t = parse_trace(
            r#"[{"arrival":0.5,"prompt":3,"output":4},{"arrival":2.0,"prompt":1,"output":1,"class":2}]"#,
        )
        .unwrap();
        assert!(t.has_lengths());
        assert_eq!((t.len(), t.last_arrival(), t.rate()), (2, 2.0, 1.0));
        assert_eq!(
            t.own_lengths(),
            Some(LengthDist::Empirical {
                pairs: vec![(3, 4), (1, 1)]
            })
        );
        let t = parse_trace(" [0.1, 0.2, 0.4]\n").unwrap();
        assert!(!t.has_lengths() && t.lengths.is_none() && t.own_lengths().is_none());
        assert_eq!(t.len(), 3);
        let w = Workload {
            arrivals: ArrivalProcess::Timestamps {
                times: vec![1.0, 3.0],
            },
            max_model_len: Some(512),
            ..Workload::default()
        };
        let t = parse_trace(&serde_json::to_string_pretty(&w).unwrap()).unwrap();
        assert_eq!(
            (t.lengths, t.max_model_len),
            (Some(w.lengths.clone()), Some(512))
        );
    }

    #[test]
    fn refusals_name_the_place() {
        assert_eq!(
            err("[0.5, 1.0,\n  -2]"),
            "line 2, column 3: entry 3 arrives at -2 s, not a time >= 0 [s]"
        );
        assert_eq!(
            err("[{\"arrival\": 1, \"prompt\": 3, \"output\": 4},\n {\"arrival\": 2, \"prompt\": 0, \"output\": 4}]"),
            "line 2, column 2: entry 2 has prompt 0 tokens; every request needs at least 1"
        );
        assert_eq!(
            err("[{\"arrival\": 1, \"prompt\": 3, \"output\": 4},\n {\"arrival\": 2, \"prompt\": 3}]"),
            "line 2, column 28: missing field `output`"
        );
        assert_eq!(
            err("[1.0, \"x\"]"),
            "line 1, column 7: invalid type: string \"x\", expected f64"
        );
        assert_eq!(
            err("[1.0, 2.0"),
            "line 1, column 9: EOF while parsing a list"
        );
        assert_eq!(err("[]"), "the trace lists no arrivals");
        assert_eq!(err("   "), "the trace lists no arrivals");
        assert!(err("hello").starts_with("line 1, column 1: expected a JSON list"));
        assert!(err("[true]").starts_with("line 1, column 2: expected a JSON list"));
        assert!(err("{\"x\": 1}").contains("not a trace: expected a JSON list"));
        let poisson = serde_json::to_string(&Workload::default()).unwrap();
        assert_eq!(
            err(&poisson),
            "its workload generates arrivals at a rate (poisson) instead of listing them"
        );
        // In a workload JSON, the entry is found where it stands.
        let w = "{\"arrivals\": {\"kind\": \"timestamps\",\n \"times\": [1, 3, 2]},\n \"lengths\": {\"kind\": \"fixed\", \"prompt\": 3, \"output\": 4}}";
        assert_eq!(
            err(w),
            "line 2, column 18: entry 3 arrives at 2 s, before entry 2 (3 s): arrivals must be in time order"
        );
        let w = "{\"arrivals\": {\"kind\": \"timestamps\", \"times\": [1]},\n \"lengths\": {\"kind\": \"fixed\", \"prompt\": 0, \"output\": 4}}";
        assert_eq!(
            err(w),
            "its workload: prompt tokens must be at least 1, got 0"
        );
    }

    #[test]
    fn positions_count_characters() {
        let text = "ab\ncdé\nf";
        assert_eq!(Position::of(text, 0), Position { line: 1, column: 1 });
        assert_eq!(Position::of(text, 3), Position { line: 2, column: 1 });
        assert_eq!(Position::of(text, 7), Position { line: 2, column: 4 });
        assert_eq!(Position::of(text, 6), Position { line: 2, column: 3 });
        assert_eq!(Position::of(text, 99), Position { line: 3, column: 2 });
    }

    #[test]
    fn scaling_keeps_the_requests_and_sets_the_rate() {
        let t = parse_trace("[0, 1, 1, 4]").unwrap();
        assert_eq!(t.rate(), 1.0);
        let (a, h) = t.at_rate(2.0).unwrap();
        assert_eq!(a.rate(), 2.0);
        assert_eq!(h, 2.0);
        assert_eq!(
            a,
            ArrivalProcess::Timestamps {
                times: vec![0.0, 0.5, 0.5, 2.0]
            }
        );
        assert!(t.at_rate(0.0).is_none() && t.at_rate(f64::NAN).is_none());
        assert!(parse_trace("[0, 0]").unwrap().at_rate(1.0).is_none());
    }
}
