//! The CSV traces: BurstGPT (`Timestamp` [s], `Request tokens`, `Response tokens`) and
//! Azure LLM inference (`TIMESTAMP` as a date and time, `ContextTokens`,
//! `GeneratedTokens`). The header names the columns; other columns are ignored.

use super::{length, Clock, ImportError, ImportedTrace};
use crate::workload::TraceRequest;

/// The fields of a CSV line, trimmed, with surrounding double quotes removed (`""`
/// inside quotes is a quote; a comma inside quotes does not split).
pub(super) fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// The header's column positions of `names`, or the first missing one.
fn columns<const N: usize>(
    line: u64,
    header: &str,
    names: [&'static str; N],
) -> Result<[usize; N], ImportError> {
    let fields = split(header);
    let mut at = [0; N];
    for (slot, name) in at.iter_mut().zip(names) {
        *slot = fields
            .iter()
            .position(|f| f == name)
            .ok_or(ImportError::MissingColumn { line, column: name })?;
    }
    Ok(at)
}

/// The field in position `i` of a data line.
fn field<'a>(
    fields: &'a [String],
    i: usize,
    line: u64,
    column: &'static str,
) -> Result<&'a str, ImportError> {
    match fields.get(i) {
        Some(f) if !f.is_empty() => Ok(f),
        _ => Err(ImportError::MissingColumn { line, column }),
    }
}

/// An integer field (a float with no fractional part is accepted).
fn integer(s: &str, line: u64, column: &'static str) -> Result<i64, ImportError> {
    if let Ok(v) = s.parse::<i64>() {
        return Ok(v);
    }
    match s.parse::<f64>() {
        Ok(v) if v.fract() == 0.0 && v.abs() < 9e15 => Ok(v as i64),
        _ => Err(ImportError::BadField {
            line,
            column,
            why: format!("expected an integer number of tokens, got {s:?}"),
        }),
    }
}

/// The header line (after leading blank lines, counted in `out`) and the data lines
/// after it, numbered from 1.
fn header<'a>(
    text: &'a str,
    out: &mut ImportedTrace,
) -> Result<(u64, &'a str, impl Iterator<Item = (u64, &'a str)> + 'a), ImportError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i as u64 + 1, l));
    loop {
        match lines.next() {
            Some((n, l)) if l.trim().is_empty() => {
                out.skipped.blank += 1;
                out.lines = n;
            }
            Some((n, l)) => {
                out.lines = n;
                return Ok((n, l, lines));
            }
            None => {
                return Err(ImportError::MissingColumn {
                    line: out.lines + 1,
                    column: "(header)",
                })
            }
        }
    }
}

pub(super) fn parse_burstgpt(text: &str) -> Result<ImportedTrace, ImportError> {
    let mut out = ImportedTrace::default();
    let (hl, head, lines) = header(text, &mut out)?;
    let [ct, cp, co] = columns(hl, head, ["Timestamp", "Request tokens", "Response tokens"])?;
    let mut clock = Clock::new();
    for (line, raw) in lines {
        out.lines = line;
        if raw.trim().is_empty() {
            out.skipped.blank += 1;
            continue;
        }
        let f = split(raw);
        let ts = field(&f, ct, line, "Timestamp")?;
        let t: f64 = ts.parse().map_err(|_| ImportError::BadField {
            line,
            column: "Timestamp",
            why: format!("expected seconds, got {ts:?}"),
        })?;
        let arrival = clock.at(line, "Timestamp", t)?;
        let p = integer(
            field(&f, cp, line, "Request tokens")?,
            line,
            "Request tokens",
        )?;
        let o = integer(
            field(&f, co, line, "Response tokens")?,
            line,
            "Response tokens",
        )?;
        if o == 0 {
            // BurstGPT records a failed request with no response.
            out.skipped.failed += 1;
            continue;
        }
        out.requests.push(TraceRequest {
            arrival,
            prompt: length(line, "Request tokens", p)?,
            output: length(line, "Response tokens", o)?,
            class: 0,
        });
    }
    Ok(out)
}

pub(super) fn parse_azure(text: &str) -> Result<ImportedTrace, ImportError> {
    let mut out = ImportedTrace::default();
    let (hl, head, lines) = header(text, &mut out)?;
    let [ct, cp, co] = columns(hl, head, ["TIMESTAMP", "ContextTokens", "GeneratedTokens"])?;
    let mut clock = Clock::new();
    let mut base: Option<i64> = None;
    for (line, raw) in lines {
        out.lines = line;
        if raw.trim().is_empty() {
            out.skipped.blank += 1;
            continue;
        }
        let f = split(raw);
        let ts = field(&f, ct, line, "TIMESTAMP")?;
        let (secs, nanos) = datetime(ts).ok_or_else(|| ImportError::BadField {
            line,
            column: "TIMESTAMP",
            why: format!("expected a date and time like 2023-11-16 18:15:46.6805900, got {ts:?}"),
        })?;
        let b = *base.get_or_insert(secs);
        // Seconds from the first line's whole second: exact to the nanosecond over days.
        let t = (secs - b) as f64 + nanos as f64 * 1e-9;
        if t < 0.0 {
            return Err(ImportError::Unsorted {
                line,
                value: t,
                previous: clock.prev,
            });
        }
        let arrival = clock.at(line, "TIMESTAMP", t)?;
        let p = integer(field(&f, cp, line, "ContextTokens")?, line, "ContextTokens")?;
        let o = integer(
            field(&f, co, line, "GeneratedTokens")?,
            line,
            "GeneratedTokens",
        )?;
        out.requests.push(TraceRequest {
            arrival,
            prompt: length(line, "ContextTokens", p)?,
            output: length(line, "GeneratedTokens", o)?,
            class: 0,
        });
    }
    Ok(out)
}

/// A date and time `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|+00:00]` (UTC) as whole seconds
/// since 1970-01-01 and nanoseconds. `None` if malformed.
pub(super) fn datetime(s: &str) -> Option<(i64, u32)> {
    let s = s.trim();
    let s = s
        .strip_suffix('Z')
        .or_else(|| s.strip_suffix("+00:00"))
        .unwrap_or(s);
    let (date, time) = s.split_once([' ', 'T'])?;
    let mut d = date.split('-');
    let y: i64 = num(d.next()?, 4)?;
    let m: i64 = num(d.next()?, 2)?;
    let day: i64 = num(d.next()?, 2)?;
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=days_in(y, m)).contains(&day) {
        return None;
    }
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (time, None),
    };
    let mut t = hms.split(':');
    let hh: i64 = num(t.next()?, 2)?;
    let mm: i64 = num(t.next()?, 2)?;
    let ss: i64 = num(t.next()?, 2)?;
    if t.next().is_some() || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let nanos = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            f.parse::<u32>().ok()? * 10u32.pow(9 - f.len() as u32)
        }
        Some(_) => return None,
    };
    Some((
        days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss,
        nanos,
    ))
}

/// A field of exactly `width` ASCII digits.
fn num(s: &str, width: usize) -> Option<i64> {
    (s.len() == width && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn days_in(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
