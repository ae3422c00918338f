//! Mooncake JSONL: one JSON object a line with `timestamp` [ms], `input_length`,
//! `output_length` [tokens] and `hash_ids`, one id per 512-token block of the prompt
//! (the last block may be partial).

use super::{length, BlockIds, Clock, ImportError, ImportedTrace, MOONCAKE_BLOCK_TOKENS};
use crate::workload::TraceRequest;
use serde::Deserialize;

#[derive(Deserialize)]
struct Line {
    timestamp: Option<f64>,
    input_length: Option<i64>,
    output_length: Option<i64>,
    hash_ids: Option<Vec<u64>>,
}

/// The columns, in the order a wrong one is looked for.
const COLUMNS: [&str; 4] = ["timestamp", "input_length", "output_length", "hash_ids"];

pub(super) fn parse(text: &str) -> Result<ImportedTrace, ImportError> {
    parse_with(text, true)
}

/// [`parse`], reading lines without serde where it can (`fast`).
pub(super) fn parse_with(text: &str, fast_path: bool) -> Result<ImportedTrace, ImportError> {
    let mut out = ImportedTrace::default();
    let mut blocks = BlockIds {
        block_tokens: MOONCAKE_BLOCK_TOKENS,
        offsets: vec![0],
        ids: Vec::new(),
        shared: Vec::new(),
    };
    let mut clock = Clock::new();
    let mut scratch = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i as u64 + 1;
        out.lines = line;
        let raw = raw.trim();
        if raw.is_empty() {
            out.skipped.blank += 1;
            continue;
        }
        let l: Line = match fast_path.then(|| fast(raw, &mut scratch)).flatten() {
            Some(l) => l,
            None => serde_json::from_str(raw).map_err(|e| which_field(line, raw, &e))?,
        };
        let t = l.timestamp.ok_or(ImportError::MissingColumn {
            line,
            column: "timestamp",
        })?;
        let input = l.input_length.ok_or(ImportError::MissingColumn {
            line,
            column: "input_length",
        })?;
        let output = l.output_length.ok_or(ImportError::MissingColumn {
            line,
            column: "output_length",
        })?;
        let ids = l.hash_ids.ok_or(ImportError::MissingColumn {
            line,
            column: "hash_ids",
        })?;
        let arrival = clock.at(line, "timestamp", t / 1000.0)?;
        let prompt = length(line, "input_length", input)?;
        let output = length(line, "output_length", output)?;
        let expected = (prompt as u64).div_ceil(MOONCAKE_BLOCK_TOKENS as u64);
        if ids.len() as u64 != expected {
            return Err(ImportError::HashIds {
                line,
                input_length: prompt as u64,
                expected,
                got: ids.len() as u64,
            });
        }
        for &id in &ids {
            let id = u32::try_from(id).map_err(|_| ImportError::BadField {
                line,
                column: "hash_ids",
                why: format!("hash id {id} is more than {}", u32::MAX),
            })?;
            blocks.ids.push(id);
        }
        let end = u32::try_from(blocks.ids.len()).map_err(|_| ImportError::BadField {
            line,
            column: "hash_ids",
            why: format!("more than {} hash ids in the trace", u32::MAX),
        })?;
        blocks.offsets.push(end);
        scratch = ids;
        out.requests.push(TraceRequest {
            arrival,
            prompt,
            output,
            class: 0,
        });
    }
    blocks.mark_shared();
    out.blocks = Some(blocks);
    Ok(out)
}

/// The common shape of a line, `{"key": value, …}` with the four columns as integers
/// and no other keys, read without serde (a 1 M-line
/// trace in well under a second). `None` for anything else, which serde then reads or
/// explains. `ids` is reused between lines.
fn fast(raw: &str, ids: &mut Vec<u64>) -> Option<Line> {
    let b = raw.as_bytes();
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    let eat = |i: &mut usize, c: u8| -> Option<()> {
        ws(i);
        (b.get(*i) == Some(&c)).then(|| *i += 1)
    };
    let int = |i: &mut usize| -> Option<i64> {
        ws(i);
        let start = *i;
        if b.get(*i) == Some(&b'-') {
            *i += 1;
        }
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        let digits = &b[start + (b.get(start) == Some(&b'-')) as usize..*i];
        // JSON: no leading zeros, at least one digit; 18 digits fit an i64.
        if digits.is_empty()
            || digits.len() > 18
            || (digits.len() > 1 && digits[0] == b'0')
            || matches!(b.get(*i), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        raw.get(start..*i)?.parse().ok()
    };
    let mut l = Line {
        timestamp: None,
        input_length: None,
        output_length: None,
        hash_ids: None,
    };
    eat(&mut i, b'{')?;
    loop {
        eat(&mut i, b'"')?;
        let start = i;
        while i < b.len() && b[i] != b'"' && b[i] != b'\\' {
            i += 1;
        }
        let key = raw.get(start..i)?;
        eat(&mut i, b'"')?;
        eat(&mut i, b':')?;
        match key {
            // Integer milliseconds; a decimal goes to serde.
            "timestamp" if l.timestamp.is_none() => l.timestamp = Some(int(&mut i)? as f64),
            "input_length" if l.input_length.is_none() => l.input_length = Some(int(&mut i)?),
            "output_length" if l.output_length.is_none() => l.output_length = Some(int(&mut i)?),
            "hash_ids" if l.hash_ids.is_none() => {
                eat(&mut i, b'[')?;
                ids.clear();
                ws(&mut i);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    loop {
                        ids.push(u64::try_from(int(&mut i)?).ok()?);
                        ws(&mut i);
                        match b.get(i)? {
                            b',' => i += 1,
                            b']' => {
                                i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                l.hash_ids = Some(std::mem::take(ids));
            }
            _ => return None,
        }
        ws(&mut i);
        match b.get(i)? {
            b',' => i += 1,
            b'}' => {
                i += 1;
                ws(&mut i);
                return (i == b.len()).then_some(l);
            }
            _ => return None,
        }
    }
}

/// A line serde refused: names the column whose value is of the wrong type, or says the
/// line is not a JSON object.
fn which_field(line: u64, raw: &str, e: &serde_json::Error) -> ImportError {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(raw) else {
        return ImportError::BadField {
            line,
            column: "(line)",
            why: format!("not a JSON object: {e}"),
        };
    };
    for column in COLUMNS {
        let Some(v) = map.get(column) else { continue };
        let ok = match column {
            "timestamp" => v.is_number(),
            "hash_ids" => v
                .as_array()
                .is_some_and(|a| a.iter().all(serde_json::Value::is_u64)),
            _ => v.is_i64(),
        };
        if !ok {
            let what = match column {
                "timestamp" => "a number of milliseconds",
                "hash_ids" => "a list of non-negative integers",
                _ => "an integer number of tokens",
            };
            return ImportError::BadField {
                line,
                column,
                why: format!("expected {what}, got {v}"),
            };
        }
    }
    ImportError::BadField {
        line,
        column: "(line)",
        why: e.to_string(),
    }
}
