//! Real request traces, read by their documented columns (docs/model.md, Imported traces):
//! Mooncake JSONL, BurstGPT CSV and Azure LLM inference CSV. Pure parsing from text:
//! the caller reads the file.
//!
//! Every problem is an [`ImportError`] naming the line (1-based, header included) and what
//! is wrong. Lines that the format itself marks as not served (BurstGPT's failed requests,
//! with 0 response tokens) and blank lines are skipped and counted in
//! [`ImportedTrace::skipped`], never dropped silently.

mod csv;
mod mooncake;

use super::TraceRequest;
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Largest trace text accepted [bytes], 256 MiB: a 1 M-request Mooncake trace with
/// 16 hash ids a line is about 110 MB.
pub const MAX_TRACE_BYTES: usize = 256 << 20;

/// Mooncake's block size: each hash id stands for 512 prompt tokens.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake JSONL: `timestamp` [ms], `input_length`, `output_length`, `hash_ids`.
    Mooncake,
    /// BurstGPT CSV: `Timestamp` [s], `Request tokens`, `Response tokens`.
    BurstGpt,
    /// Azure LLM inference CSV: `TIMESTAMP` (date and time), `ContextTokens`,
    /// `GeneratedTokens`.
    Azure,
}

impl TraceFormat {
    /// The name used on the command line and in messages.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::BurstGpt => "burstgpt",
            TraceFormat::Azure => "azure",
        }
    }

    /// The name its authors give it, for prose (`Mooncake`, `BurstGPT`, `Azure`).
    pub fn title(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "Mooncake",
            TraceFormat::BurstGpt => "BurstGPT",
            TraceFormat::Azure => "Azure",
        }
    }

    /// The format a name stands for (`mooncake`, `burstgpt`, `azure`).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        match name.to_ascii_lowercase().as_str() {
            "mooncake" => Some(TraceFormat::Mooncake),
            "burstgpt" => Some(TraceFormat::BurstGpt),
            "azure" => Some(TraceFormat::Azure),
            _ => None,
        }
    }

    /// The format of `text`, from its first non-blank line: a JSON object is Mooncake, a
    /// CSV header with `Request tokens` BurstGPT, one with `ContextTokens` Azure. `None`
    /// for anything else (e.g. a JSON list).
    pub fn detect(text: &str) -> Option<TraceFormat> {
        let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
        if first.starts_with('{') {
            return Some(TraceFormat::Mooncake);
        }
        let header = csv::split(first);
        let has = |name: &str| header.iter().any(|h| h == name);
        if has("Request tokens") && has("Timestamp") {
            Some(TraceFormat::BurstGpt)
        } else if has("ContextTokens") && has("TIMESTAMP") {
            Some(TraceFormat::Azure)
        } else {
            None
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a line was skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// Blank lines.
    pub blank: u64,
    /// Requests the trace records as failed (BurstGPT: 0 response tokens).
    pub failed: u64,
}

impl Skipped {
    pub fn total(&self) -> u64 {
        self.blank + self.failed
    }

    /// What was skipped and why, for a message: `no lines skipped`, or e.g. `skipped 18
    /// failed requests (0 response tokens) and 2 blank lines`.
    pub fn describe(&self) -> String {
        let mut skipped = Vec::new();
        if self.failed > 0 {
            skipped.push(format!(
                "{} failed requests (0 response tokens)",
                self.failed
            ));
        }
        if self.blank > 0 {
            skipped.push(format!("{} blank lines", self.blank));
        }
        if skipped.is_empty() {
            "no lines skipped".to_string()
        } else {
            format!("skipped {}", skipped.join(" and "))
        }
    }
}

/// Per request, the ids of its prompt's `block_tokens`-token blocks, as a trace gives
/// them: chained hashes, so two requests with the same id at position j share their
/// prompts up to the end of block j (docs/model.md, Shared tokens).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockIds {
    /// Tokens per id.
    pub block_tokens: u32,
    /// `ids[offsets[i]..offsets[i + 1]]` are request i's; `offsets.len()` = requests + 1.
    pub offsets: Vec<u32>,
    pub ids: Vec<u32>,
    /// Per request, how many of its leading ids another request of the trace has too
    /// ([`BlockIds::mark_shared`]); empty: every id counts as shared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<u32>,
}

impl BlockIds {
    /// Fills [`BlockIds::shared`]. The ids are chained hashes, so a request's ids past its
    /// first one no other request has are its alone: once it finishes, no one can find
    /// the blocks they name, and the prefix cache returns them as one run.
    pub fn mark_shared(&mut self) {
        // The ids that occur more than once, sorted (a sort, not a hash map: trace ids
        // are small consecutive numbers).
        let mut sorted = self.ids.clone();
        sorted.sort_unstable();
        let mut multi: Vec<u32> = sorted
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        multi.dedup();
        self.shared = (0..self.len())
            .map(|i| {
                self.of(i)
                    .iter()
                    .take_while(|id| multi.binary_search(id).is_ok())
                    .count() as u32
            })
            .collect();
    }

    /// How many of request `i`'s leading ids another request has too (all of them when
    /// not marked).
    #[inline]
    pub fn shared_len(&self, i: usize) -> usize {
        match self.shared.get(i) {
            Some(&n) => n as usize,
            None => self.of(i).len(),
        }
    }

    /// Request `i`'s block ids (empty past the end).
    #[inline]
    pub fn of(&self, i: usize) -> &[u32] {
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.ids[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Requests described.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A trace as read: requests with arrivals counted from the first data line's timestamp
/// (time 0, even if that line is skipped), lengths, and for Mooncake the prompts' block
/// ids.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportedTrace {
    pub requests: Vec<TraceRequest>,
    /// Mooncake's `hash_ids`, index-aligned with `requests`.
    pub blocks: Option<BlockIds>,
    pub skipped: Skipped,
    /// Lines read, header included.
    pub lines: u64,
}

/// A trace that cannot be imported. Lines are 1-based and count the header.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ImportError {
    /// The text is larger than [`MAX_TRACE_BYTES`].
    #[error(
        "trace is {bytes} bytes, over the limit of {limit} bytes (256 MiB); cut it into parts"
    )]
    TooLarge { bytes: usize, limit: usize },
    /// No request in the trace.
    #[error("{format} trace has no requests")]
    Empty { format: TraceFormat },
    /// A required column or field is absent.
    #[error("line {line}: missing column `{column}`")]
    MissingColumn { line: u64, column: &'static str },
    /// A field that is not what its column holds.
    #[error("line {line}: column `{column}`: {why}")]
    BadField {
        line: u64,
        column: &'static str,
        why: String,
    },
    /// A timestamp before zero (or not finite).
    #[error("line {line}: timestamp {value} is negative")]
    NegativeTimestamp { line: u64, value: f64 },
    /// A timestamp earlier than the line before's.
    #[error("line {line}: timestamp {value} is earlier than the previous line's {previous}; sort the trace by time")]
    Unsorted {
        line: u64,
        value: f64,
        previous: f64,
    },
    /// A length of zero or below (where the format does not mark it as a failure).
    #[error("line {line}: column `{column}` must be >= 1, got {value}")]
    NonPositive {
        line: u64,
        column: &'static str,
        value: i64,
    },
    /// Mooncake: `hash_ids` must have one id per 512 prompt tokens, ⌈input_length / 512⌉.
    #[error("line {line}: {got} hash_ids for input_length {input_length}; expected {expected} (one per 512 tokens)")]
    HashIds {
        line: u64,
        input_length: u64,
        expected: u64,
        got: u64,
    },
}

/// Imports a trace of a known format.
///
/// # Errors
/// [`ImportError`], with the line.
pub fn import(text: &str, format: TraceFormat) -> Result<ImportedTrace, ImportError> {
    if text.len() > MAX_TRACE_BYTES {
        return Err(ImportError::TooLarge {
            bytes: text.len(),
            limit: MAX_TRACE_BYTES,
        });
    }
    let t = match format {
        TraceFormat::Mooncake => mooncake::parse(text)?,
        TraceFormat::BurstGpt => csv::parse_burstgpt(text)?,
        TraceFormat::Azure => csv::parse_azure(text)?,
    };
    if t.requests.is_empty() {
        return Err(ImportError::Empty { format });
    }
    Ok(t)
}

/// Parses a length field: an integer ≥ 1 (a non-integer or out-of-range value is a
/// [`ImportError::BadField`], ≤ 0 a [`ImportError::NonPositive`]).
pub(crate) fn length(line: u64, column: &'static str, v: i64) -> Result<u32, ImportError> {
    if v <= 0 {
        return Err(ImportError::NonPositive {
            line,
            column,
            value: v,
        });
    }
    u32::try_from(v).map_err(|_| ImportError::BadField {
        line,
        column,
        why: format!("{v} tokens is more than {}", u32::MAX),
    })
}

/// Arrival times: each finite, ≥ 0 and not before the previous; returned relative to the
/// first.
pub(crate) struct Clock {
    first: Option<f64>,
    prev: f64,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            first: None,
            prev: f64::NEG_INFINITY,
        }
    }

    /// `t` [s] of column `column` on `line`, relative to the first timestamp.
    pub(crate) fn at(
        &mut self,
        line: u64,
        column: &'static str,
        t: f64,
    ) -> Result<f64, ImportError> {
        if !t.is_finite() {
            return Err(ImportError::BadField {
                line,
                column,
                why: format!("timestamp {t} is not a finite number"),
            });
        }
        if t < 0.0 {
            return Err(ImportError::NegativeTimestamp { line, value: t });
        }
        if t < self.prev {
            return Err(ImportError::Unsorted {
                line,
                value: t,
                previous: self.prev,
            });
        }
        self.prev = t;
        let first = *self.first.get_or_insert(t);
        Ok(t - first)
    }
}

/// Writes `trace` in `format`, as [`import`] reads it back: Mooncake timestamps in whole
/// milliseconds, BurstGPT's in seconds, Azure's as dates from 2024-01-01 00:00:00 UTC
/// with 7 decimals. Mooncake needs [`ImportedTrace::blocks`] (ids of 512-token blocks);
/// without them each request gets ids of its own.
pub fn render(trace: &ImportedTrace, format: TraceFormat) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    match format {
        TraceFormat::Mooncake => {
            let mut fresh = u32::MAX;
            for (i, r) in trace.requests.iter().enumerate() {
                let ids: Vec<u32> = match &trace.blocks {
                    Some(b) => b.of(i).to_vec(),
                    None => (0..r.prompt.div_ceil(MOONCAKE_BLOCK_TOKENS))
                        .map(|_| {
                            fresh -= 1;
                            fresh
                        })
                        .collect(),
                };
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                let _ = writeln!(
                    s,
                    "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [{}]}}",
                    (r.arrival * 1000.0).round() as u64,
                    r.prompt,
                    r.output,
                    ids.join(", ")
                );
            }
        }
        TraceFormat::BurstGpt => {
            s.push_str("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
            for r in &trace.requests {
                let _ = writeln!(
                    s,
                    "{},ChatGPT,{},{},{},Conversation log",
                    r.arrival,
                    r.prompt,
                    r.output,
                    r.prompt as u64 + r.output as u64
                );
            }
        }
        TraceFormat::Azure => {
            s.push_str("TIMESTAMP,ContextTokens,GeneratedTokens\n");
            for r in &trace.requests {
                let ticks = (r.arrival * 1e7).round() as u64;
                let (secs, frac) = (ticks / 10_000_000, ticks % 10_000_000);
                let (d, rem) = (secs / 86_400, secs % 86_400);
                let (y, m, day) = civil_from_days(19_723 + d as i64);
                let _ = writeln!(
                    s,
                    "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}.{frac:07},{},{}",
                    rem / 3600,
                    rem / 60 % 60,
                    rem % 60,
                    r.prompt,
                    r.output
                );
            }
        }
    }
    s
}

/// The date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

#[cfg(test)]
mod tests;
