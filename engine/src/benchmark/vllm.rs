//! The benchmark in a `vllm bench serve --save-result` JSON: `num_prompts`,
//! `num_warmups`, `request_rate` (a number or `"inf"`), `burstiness`, `max_concurrency`,
//! `ramp_up_strategy`, `backend`, and the lengths — with `--save-detailed` the per-request
//! `input_lens`, `output_lens` and `errors` in send order, otherwise the mean of
//! `total_input_tokens` and `total_output_tokens` over `completed`.
//!
//! Whatever the file lacks comes back as a note naming the field and what the simulation
//! assumes instead; nothing is defaulted silently.

use super::{BenchmarkRun, Schedule};
use serde_json::{Map, Value};

/// A finite number ≥ 0 at `key`, `Ok(None)` when absent or null.
///
/// # Errors
/// Not a number, or not finite and ≥ 0: a message naming the field.
pub fn number(o: &Map<String, Value>, key: &str) -> Result<Option<f64>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(format!("\"{key}\" is {n}: expected a finite number >= 0")),
        },
        Some(v) => Err(format!("\"{key}\" is {v}: expected a number")),
    }
}

/// A list of whole numbers ≥ 0 at `key`.
fn counts(o: &Map<String, Value>, key: &str) -> Result<Option<Vec<u32>>, String> {
    let Some(v) = o.get(key) else { return Ok(None) };
    let Some(a) = v.as_array() else {
        return Err(format!("\"{key}\" is not a list"));
    };
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| format!("\"{key}\"[{i}] is {x}: expected a whole number of tokens"))
        })
        .collect::<Result<Vec<u32>, _>>()
        .map(Some)
}

/// The benchmark a vLLM result object `o` records, and one note per field it lacks.
///
/// # Errors
/// A field of the wrong type or out of range, per-request lists whose lengths disagree
/// with each other or with `num_prompts`, no way to know the request lengths: a message
/// naming the field.
pub fn read(o: &Map<String, Value>) -> Result<(BenchmarkRun, Vec<String>), String> {
    let mut notes = Vec::new();
    // What was run.
    let completed = number(o, "completed")?;
    let failed = number(o, "failed")?;
    let input_lens = counts(o, "input_lens")?;
    let output_lens = counts(o, "output_lens")?;
    let requests = match number(o, "num_prompts")? {
        Some(n) if n >= 1.0 && n.fract() == 0.0 => n as usize,
        Some(n) => {
            return Err(format!(
                "\"num_prompts\" is {n}: expected a whole number >= 1"
            ))
        }
        None => {
            let (n, from) = match (&input_lens, completed, failed) {
                (Some(l), _, _) if !l.is_empty() => (l.len(), "the length of \"input_lens\""),
                (_, Some(c), f) if c >= 1.0 => (
                    (c + f.unwrap_or(0.0)) as usize,
                    "\"completed\" + \"failed\"",
                ),
                _ => {
                    return Err("no \"num_prompts\", \"input_lens\" or \"completed\": the number of requests is unknown".into())
                }
            };
            notes.push(format!(
                "no \"num_prompts\": simulated {n} requests ({from})"
            ));
            n
        }
    };
    let rate = match o.get("request_rate") {
        Some(Value::String(s)) if s.eq_ignore_ascii_case("inf") => f64::INFINITY,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() && x > 0.0 => x,
            _ => {
                return Err(format!(
                    "\"request_rate\" is {n}: expected a number > 0 or \"inf\""
                ))
            }
        },
        None | Some(Value::Null) => {
            notes.push(
                "no \"request_rate\": simulated as \"inf\" (vllm bench serve's default: every request sent at t = 0)"
                    .into(),
            );
            f64::INFINITY
        }
        Some(v) => {
            return Err(format!(
                "\"request_rate\" is {v}: expected a number > 0 or \"inf\""
            ))
        }
    };
    let burstiness = match o.get("burstiness") {
        Some(Value::String(s)) if s.eq_ignore_ascii_case("inf") => f64::INFINITY,
        None | Some(Value::Null) => {
            if rate.is_finite() {
                notes.push(
                    "no \"burstiness\": simulated as 1 (Poisson, vllm bench serve's default)"
                        .into(),
                );
            }
            1.0
        }
        Some(_) => match number(o, "burstiness")? {
            Some(b) if b > 0.0 => b,
            other => {
                return Err(format!(
                    "\"burstiness\" is {}: expected a number > 0",
                    other.map_or("null".into(), |x| x.to_string())
                ))
            }
        },
    };
    let max_concurrency = match o.get("max_concurrency") {
        None => {
            notes.push(
                "no \"max_concurrency\" field: simulated without a client-side cap (vllm bench serve's default)"
                    .into(),
            );
            None
        }
        Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|x| u32::try_from(x).ok()) {
            Some(c) if c >= 1 => Some(c),
            _ => {
                return Err(format!(
                    "\"max_concurrency\" is {v}: expected a whole number >= 1 or null"
                ))
            }
        },
    };
    if let Some(s) = o.get("ramp_up_strategy").and_then(Value::as_str) {
        notes.push(format!(
            "\"ramp_up_strategy\" is {s}: the ramp is not simulated; the requests are spaced at the constant \"request_rate\""
        ));
    }
    if o.get("backend").and_then(Value::as_str) == Some("openai-chat") {
        notes.push(
            "backend openai-chat: \"input_lens\" count the prompt without the chat template's tokens, which the server also prefills"
                .into(),
        );
    }
    // The lengths, in send order.
    let lengths = match (input_lens, output_lens) {
        (Some(inp), Some(out)) => {
            if inp.len() != out.len() || inp.len() != requests {
                return Err(format!(
                        "\"input_lens\" has {} entries and \"output_lens\" {}, \"num_prompts\" is {requests}: they must agree",
                        inp.len(),
                        out.len()
                    ));
            }
            let errors: Vec<bool> = match o.get("errors").and_then(Value::as_array) {
                Some(e) => e
                    .iter()
                    .map(|x| x.as_str().is_some_and(|s| !s.is_empty()))
                    .collect(),
                None => vec![false; out.len()],
            };
            let failed_at: Vec<usize> = (0..out.len())
                .filter(|&i| out[i] == 0 || errors.get(i).copied().unwrap_or(false))
                .collect();
            let mut ok: Vec<u32> = (0..out.len())
                .filter(|i| !failed_at.contains(i))
                .map(|i| out[i])
                .collect();
            ok.sort_unstable();
            let median = ok.get(ok.len() / 2).copied().unwrap_or(1).max(1);
            if !failed_at.is_empty() {
                notes.push(format!(
                    "{} requests failed in the measurement (no output length): simulated with the median output of the others, {median} tokens",
                    failed_at.len()
                ));
            }
            inp.iter()
                .zip(&out)
                .enumerate()
                .map(|(i, (&p, &q))| (p.max(1), if failed_at.contains(&i) { median } else { q }))
                .collect()
        }
        (inp, out) => {
            let missing = match (inp.is_some(), out.is_some()) {
                (false, false) => "\"input_lens\" and \"output_lens\"",
                (true, false) => "\"output_lens\"",
                _ => "\"input_lens\"",
            };
            let tin = number(o, "total_input_tokens")?;
            let tout = number(o, "total_output_tokens")?;
            let done = completed.filter(|&c| c >= 1.0);
            match (tin, tout, done) {
                (Some(i), Some(q), Some(c)) => {
                    let l = super::mean_lengths(c as usize, i, q);
                    notes.push(format!(
                        "no per-request {missing} (run with --save-detailed): every request simulated with the mean lengths, {} prompt and {} output tokens (total_input_tokens and total_output_tokens over {c} completed)",
                        l[0].0, l[0].1
                    ));
                    vec![l[0]; requests]
                }
                _ => {
                    return Err(format!(
                            "no per-request {missing} (run with --save-detailed), and no \"total_input_tokens\", \"total_output_tokens\" and \"completed\" to take mean lengths from"
                        ))
                }
            }
        }
    };
    let warmups = match o.get("num_warmups") {
        Some(Value::Number(n)) => n.as_u64().and_then(|w| u32::try_from(w).ok()).unwrap_or(0),
        _ => 0,
    };
    let run = BenchmarkRun {
        requests,
        warmups,
        rate,
        burstiness,
        schedule: Schedule::VllmNormalized,
        max_concurrency,
        lengths,
        fixed_times: None,
    };
    Ok((run, notes))
}
