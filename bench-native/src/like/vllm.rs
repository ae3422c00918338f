//! A `vllm bench serve --save-result` JSON as a [`Benchmark`]: the fields of vLLM's bench
//! serve result (`num_prompts`, `request_rate` — a number or `"inf"` —, `burstiness`,
//! `max_concurrency`, `completed`, `failed`, `duration`, `request_throughput`,
//! `output_throughput`, `total_input_tokens`, `total_output_tokens`, the
//! `mean_/median_/p99_{ttft,tpot,e2el}_ms` statistics) and, with `--save-detailed`, the
//! per-request `input_lens`, `output_lens` and `errors` in send order.
//!
//! vLLM writes no version into the file; a `version` or `vllm_version` field (from
//! `--metadata`) that is not a 0.x version is read with these field names, and a note says
//! so.

use super::{Benchmark, LatencyFrom, LikeError, Metric};
use serde_json::{Map, Value};
use std::path::Path;

/// The latency statistics vLLM writes, by metric: (family, statistic).
fn latency_field(m: Metric) -> Option<(&'static str, &'static str)> {
    Some(match m {
        Metric::TtftMean => ("ttft", "mean"),
        Metric::TtftMedian => ("ttft", "median"),
        Metric::TtftP99 => ("ttft", "p99"),
        Metric::TpotMean => ("tpot", "mean"),
        Metric::TpotMedian => ("tpot", "median"),
        Metric::TpotP99 => ("tpot", "p99"),
        Metric::E2elMean => ("e2el", "mean"),
        Metric::E2elMedian => ("e2el", "median"),
        Metric::E2elP99 => ("e2el", "p99"),
        _ => return None,
    })
}

/// A finite number ≥ 0 at `key`, `Ok(None)` when absent or null.
fn number(o: &Map<String, Value>, key: &str, path: &Path) -> Result<Option<f64>, LikeError> {
    engine::benchmark::vllm::number(o, key).map_err(|why| LikeError::invalid(path, why))
}

/// The measured value of `m` [report unit]: the `_ms` field, or one in other units
/// (`_s`, `_us`) converted with a note.
fn measured(
    o: &Map<String, Value>,
    m: Metric,
    path: &Path,
    notes: &mut Vec<String>,
) -> Result<Option<f64>, LikeError> {
    let direct = |key: &str| number(o, key, path);
    Ok(match m {
        Metric::Completed => direct("completed")?,
        Metric::Duration => direct("duration")?,
        Metric::Throughput => direct("request_throughput")?,
        Metric::OutputThroughput => direct("output_throughput")?,
        m => {
            let (family, stat) = latency_field(m).expect("a latency metric");
            let ms = format!("{stat}_{family}_ms");
            if let Some(x) = direct(&ms)? {
                return Ok(Some(x));
            }
            for (unit, to_ms) in [("s", 1e3), ("us", 1e-3)] {
                let key = format!("{stat}_{family}_{unit}");
                if let Some(x) = direct(&key)? {
                    notes.push(format!(
                        "\"{key}\" is in {unit}, not ms as vllm bench serve writes it: read as {} ms",
                        x * to_ms
                    ));
                    return Ok(Some(x * to_ms));
                }
            }
            None
        }
    })
}

/// Parses the result JSON `text` (from the file `path`, for messages).
///
/// # Errors
/// Not JSON, not an object, a field of the wrong type or out of range, per-request lists
/// whose lengths disagree with each other or with `num_prompts`, no way to know the
/// request lengths.
pub fn parse(text: &str, path: &Path) -> Result<Benchmark, LikeError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| LikeError::invalid(path, format!("not JSON: {e}")))?;
    let Some(o) = v.as_object() else {
        return Err(LikeError::invalid(
            path,
            "expected one vllm bench serve result object",
        ));
    };
    if !o.contains_key("request_throughput") && !o.contains_key("mean_ttft_ms") {
        let keys: Vec<&str> = o.keys().take(8).map(String::as_str).collect();
        return Err(LikeError::invalid(
            path,
            format!(
                "no \"request_throughput\" or \"mean_ttft_ms\" (keys: {}): is it a vllm bench serve --save-result file?",
                keys.join(", ")
            ),
        ));
    }
    let mut notes = Vec::new();
    for key in ["version", "vllm_version"] {
        if let Some(ver) = o.get(key) {
            let s = ver.as_str().map_or_else(|| ver.to_string(), str::to_string);
            if !s.trim_start_matches('v').starts_with("0.") {
                notes.push(format!(
                    "\"{key}\" is {s}, a version this reader does not know: read with the field names of vLLM 0.32's bench serve"
                ));
            }
        }
    }
    // What was run: the engine's reader, shared with the page.
    let (run, run_notes) =
        engine::benchmark::vllm::read(o).map_err(|why| LikeError::invalid(path, why))?;
    notes.extend(run_notes);
    let mut values = Vec::with_capacity(Metric::ALL.len());
    let mut absent = Vec::new();
    for m in Metric::ALL {
        let x = measured(o, m, path, &mut notes)?;
        if x.is_none() {
            absent.push(match latency_field(m) {
                Some((f, s)) => format!("{s}_{f}_ms"),
                None => m.key().to_string(),
            });
        }
        values.push(x);
    }
    if !absent.is_empty() {
        notes.push(format!(
            "not in the file, so not compared: {} (vllm bench serve writes e2el only with --percentile-metrics ttft,tpot,itl,e2el)",
            absent.join(", ")
        ));
    }
    if run.max_concurrency.is_some() {
        notes.push(
            "latencies as vllm bench serve measures them: from each request's send, after it passed the client's max_concurrency gate"
                .into(),
        );
    }
    Ok(Benchmark {
        tool: "vllm bench serve".into(),
        run,
        latency_from: LatencyFrom::Send,
        measured: values,
        seed: None,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> Value {
        json!({
            "date": "20261202-003000", "backend": "vllm", "num_prompts": 3,
            "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": null,
            "duration": 4.0, "completed": 3, "failed": 0,
            "total_input_tokens": 60, "total_output_tokens": 30,
            "request_throughput": 0.75, "output_throughput": 7.5,
            "mean_ttft_ms": 20.0, "median_ttft_ms": 19.0, "p99_ttft_ms": 30.0,
            "mean_tpot_ms": 5.0, "median_tpot_ms": 5.0, "p99_tpot_ms": 6.0,
            "mean_e2el_ms": 70.0, "median_e2el_ms": 69.0, "p99_e2el_ms": 80.0,
            "input_lens": [10, 20, 30], "output_lens": [5, 10, 15],
            "errors": ["", "", ""]
        })
    }

    fn parse_v(v: &Value) -> Result<Benchmark, LikeError> {
        parse(&v.to_string(), Path::new("r.json"))
    }

    #[test]
    fn a_detailed_result_gives_its_lengths_in_order_and_no_notes() {
        let b = parse_v(&full()).unwrap();
        assert_eq!(b.run.requests, 3);
        assert_eq!(b.run.lengths, vec![(10, 5), (20, 10), (30, 15)]);
        assert_eq!(b.run.rate, 2.0);
        assert_eq!(b.run.max_concurrency, None);
        assert!(b.notes.is_empty(), "{:?}", b.notes);
        assert_eq!(
            b.measured[Metric::ALL
                .iter()
                .position(|&m| m == Metric::TtftP99)
                .unwrap()],
            Some(30.0)
        );
    }

    #[test]
    fn every_missing_field_is_named_with_what_was_assumed() {
        let mut v = full();
        let o = v.as_object_mut().unwrap();
        for k in [
            "input_lens",
            "output_lens",
            "errors",
            "burstiness",
            "max_concurrency",
            "p99_e2el_ms",
        ] {
            o.remove(k);
        }
        o.insert("request_rate".into(), json!("inf"));
        o.insert("mean_ttft_s".into(), json!(0.02));
        o.remove("mean_ttft_ms");
        o.insert("version".into(), json!("2.1"));
        let b = parse_v(&v).unwrap();
        assert!(b.run.rate.is_infinite());
        assert_eq!(b.run.lengths, vec![(20, 10); 3]);
        let text = b.notes.join("\n");
        for want in [
            "no per-request \"input_lens\" and \"output_lens\" (run with --save-detailed)",
            "mean lengths, 20 prompt and 10 output tokens",
            "no \"max_concurrency\" field",
            "\"mean_ttft_s\" is in s",
            "not compared: p99_e2el_ms",
            "\"version\" is 2.1",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        // at an infinite rate, burstiness does not matter: no note for it
        assert!(!text.contains("burstiness"), "{text}");
        let m = Metric::ALL
            .iter()
            .position(|&m| m == Metric::TtftMean)
            .unwrap();
        assert!((b.measured[m].unwrap() - 20.0).abs() < 1e-9);
    }

    #[test]
    fn failed_requests_and_bad_fields_are_named() {
        let mut v = full();
        v["output_lens"] = json!([5, 0, 15]);
        v["errors"] = json!(["", "HTTP 500", ""]);
        let b = parse_v(&v).unwrap();
        assert_eq!(b.run.lengths[1], (20, 15));
        assert!(b.notes[0].contains("1 requests failed"), "{:?}", b.notes);
        for (k, bad, want) in [
            ("request_rate", json!(-1), "\"request_rate\" is -1"),
            (
                "request_rate",
                json!("fast"),
                "expected a number > 0 or \"inf\"",
            ),
            (
                "num_prompts",
                json!(4),
                "\"num_prompts\" is 4: they must agree",
            ),
            ("input_lens", json!([1, "x", 3]), "\"input_lens\"[1]"),
            ("max_concurrency", json!(0), "\"max_concurrency\" is 0"),
            ("mean_ttft_ms", json!("NaN"), "\"mean_ttft_ms\" is \"NaN\""),
        ] {
            let mut v = full();
            v[k] = bad;
            let e = parse_v(&v).unwrap_err().to_string();
            assert!(e.contains(want), "{k}: {e}");
        }
        let e = parse_v(&json!({"a": 1})).unwrap_err().to_string();
        assert!(
            e.contains("is it a vllm bench serve --save-result file?"),
            "{e}"
        );
        let e = parse("[1", Path::new("r.json")).unwrap_err().to_string();
        assert!(e.contains("not JSON"), "{e}");
    }
}
