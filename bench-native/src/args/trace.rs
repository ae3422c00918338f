//! Arrival traces and workload files: `--trace FILE` of `simulate` and `sweep`, and the
//! workload JSON of `run --workload` (one loader for both).

use anyhow::Context;
use engine::workload::{parse_trace, Trace, TraceError, Workload};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A workload file that cannot be used.
#[derive(Debug, Error)]
pub enum WorkloadFileError {
    /// The file cannot be read: check the path.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not a workload JSON (an engine `Workload`).
    #[error("{}: not a workload JSON: {why}", path.display())]
    NotWorkload { path: PathBuf, why: String },
}

/// Reads a workload JSON (an engine `Workload`, e.g. `{"arrivals": {"kind": "trace",
/// "requests": […]}, "lengths": …}`), as `run --workload` takes.
///
/// # Errors
/// [`WorkloadFileError`].
pub fn read_workload(path: &Path) -> Result<Workload, WorkloadFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| WorkloadFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_workload(&text).map_err(|why| WorkloadFileError::NotWorkload {
        path: path.to_path_buf(),
        why,
    })
}

/// A workload JSON's text as [`read_workload`] reads it.
///
/// # Errors
/// The JSON error.
pub fn parse_workload(text: &str) -> Result<Workload, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The arrivals of a `--trace` file, and what else the file fixes: the engine's
/// [`Trace`], which the page reads with the same parser.
pub type TraceFile = Trace;

/// Reads a `--trace` file: a JSON list of requests (`[{"arrival", "prompt", "output"}, …]`,
/// as `validate` writes), a JSON list of arrival times [s], or a workload JSON whose
/// arrivals are a trace or timestamps.
///
/// # Errors
/// Unreadable file, or what [`parse_trace_file`] refuses.
pub fn read_trace(path: &Path) -> anyhow::Result<TraceFile> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --trace {shown}"))?;
    parse_trace_file(&text, &shown)
}

/// A `--trace` file's text (`shown` names it in messages), parsed by the engine's
/// [`parse_trace`]: arrival times finite, non-negative and in order, at least one, prompts
/// and outputs ≥ 1 token (see `docs/model.md`, Workload); a refusal names the line and
/// column.
///
/// # Errors
/// Another JSON shape, a workload with generated arrivals, or arrivals the engine
/// refuses, prefixed by `--trace FILE`.
pub fn parse_trace_file(text: &str, shown: &str) -> anyhow::Result<TraceFile> {
    parse_trace(text).map_err(|e| match e {
        TraceError::Generated { .. } => {
            anyhow::anyhow!("--trace {shown}: {e}; use --arrivals and --rate for that")
        }
        e => anyhow::anyhow!("--trace {shown}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::workload::{ArrivalProcess, TraceRequest};
    use proptest::prelude::*;

    #[test]
    fn reads_request_lists_timestamps_and_workloads() {
        let dir = std::env::temp_dir().join(format!("kvq-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let put = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let t = read_trace(&put(
            "a.json",
            r#"[{"arrival":0.5,"prompt":3,"output":4},{"arrival":2.0,"prompt":1,"output":1}]"#,
        ))
        .unwrap();
        assert!(matches!(&t.arrivals, ArrivalProcess::Trace { requests } if requests.len() == 2));
        assert_eq!(t.last_arrival(), 2.0);
        let t = read_trace(&put("b.json", "[0.1, 0.2, 0.4]")).unwrap();
        assert!(matches!(&t.arrivals, ArrivalProcess::Timestamps { times } if times.len() == 3));
        let w = Workload {
            arrivals: ArrivalProcess::Timestamps { times: vec![1.0] },
            ..Workload::default()
        };
        let t = read_trace(&put("c.json", &serde_json::to_string(&w).unwrap())).unwrap();
        assert_eq!(t.lengths, Some(w.lengths.clone()));
        let poisson = serde_json::to_string(&Workload::default()).unwrap();
        let e = read_trace(&put("d.json", &poisson)).unwrap_err();
        assert!(
            format!("{e:#}").contains("generates arrivals at a rate"),
            "{e:#}"
        );
        let e = read_trace(&put("e.json", "{\"x\": 1}")).unwrap_err();
        assert!(format!("{e:#}").contains("expected a JSON list"), "{e:#}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An arrival time: mostly sensible, sometimes negative or huge.
    fn time() -> impl Strategy<Value = f64> {
        prop_oneof![
            6 => 0.0..1e4f64,
            1 => -1e3..0.0f64,
            1 => Just(1e308),
            1 => Just(0.0),
        ]
    }

    /// What an accepted trace must be: at least one arrival, every time finite, >= 0 and in
    /// order, every request at least one prompt and one output token.
    fn sensible(t: &TraceFile) -> Result<(), TestCaseError> {
        let times: Vec<f64> = match &t.arrivals {
            ArrivalProcess::Trace { requests } => {
                for r in requests {
                    prop_assert!(r.prompt >= 1 && r.output >= 1, "{:?}", r);
                }
                requests.iter().map(|r| r.arrival).collect()
            }
            ArrivalProcess::Timestamps { times } => times.clone(),
            other => return Err(TestCaseError::fail(format!("generated arrivals {other:?}"))),
        };
        prop_assert!(!times.is_empty());
        let mut prev = 0.0;
        for x in times {
            prop_assert!(x.is_finite() && x >= prev, "{} after {}", x, prev);
            prev = x;
        }
        prop_assert!(t.rate().is_finite() && t.rate() >= 0.0);
        Ok(())
    }

    proptest! {
        #[test]
        fn never_panics_on_any_text(text in "(?s).{0,300}") {
            if let Ok(t) = parse_trace_file(&text, "x.json") {
                sensible(&t)?;
            }
        }

        #[test]
        fn never_panics_on_json_like_text(text in "[\\[\\]{}\",:0-9a-z.eE+\\- ]{0,200}") {
            if let Ok(t) = parse_trace_file(&text, "x.json") {
                sensible(&t)?;
            }
        }

        /// Lists of requests or times with any numbers: accepted only if sensible.
        #[test]
        fn what_is_accepted_is_sensible(
            reqs in prop::collection::vec((time(), 0u32..4, 0u32..4, any::<u16>()), 0..8),
            as_times in any::<bool>(),
            as_workload in any::<bool>(),
        ) {
            let arrivals = if as_times {
                ArrivalProcess::Timestamps { times: reqs.iter().map(|r| r.0).collect() }
            } else {
                ArrivalProcess::Trace {
                    requests: reqs
                        .iter()
                        .map(|&(arrival, prompt, output, class)| TraceRequest {
                            arrival,
                            prompt,
                            output,
                            class,
                        })
                        .collect(),
                }
            };
            let text = if as_workload {
                serde_json::to_string(&Workload { arrivals, ..Workload::default() }).unwrap()
            } else {
                match &arrivals {
                    ArrivalProcess::Trace { requests } => serde_json::to_string(requests),
                    ArrivalProcess::Timestamps { times } => serde_json::to_string(times),
                    _ => unreachable!(),
                }
                .unwrap()
            };
            if let Ok(t) = parse_trace_file(&text, "x.json") {
                sensible(&t)?;
            }
        }

        /// A sensible trace written as `validate` writes it reads back equal.
        #[test]
        fn valid_traces_round_trip(
            gaps in prop::collection::vec((0.0..10.0f64, 1u32..4096, 1u32..4096), 1..20),
        ) {
            let mut at = 0.0;
            let requests: Vec<TraceRequest> = gaps
                .iter()
                .map(|&(g, prompt, output)| {
                    at += g;
                    TraceRequest { arrival: at, prompt, output, class: 0 }
                })
                .collect();
            let text = serde_json::to_string(&requests).unwrap();
            let t = parse_trace_file(&text, "x.json").unwrap();
            let ArrivalProcess::Trace { requests: back } = &t.arrivals else {
                return Err(TestCaseError::fail("not a trace"));
            };
            prop_assert_eq!(back.len(), requests.len());
            for (a, b) in back.iter().zip(&requests) {
                prop_assert_eq!((a.prompt, a.output, a.class), (b.prompt, b.output, b.class));
                prop_assert!((a.arrival - b.arrival).abs() <= b.arrival * 1e-15);
            }
        }
    }

    /// Traces out of order, with negative times, zero-token requests or no requests at all
    /// were read without complaint (the engine refused them only later);
    /// `what_is_accepted_is_sensible` demands the reader refuse them.
    #[test]
    fn impossible_traces_are_refused_when_read() {
        for text in [
            "[]",
            "[2.0, 1.0]",
            "[-1.0]",
            r#"[{"arrival":0.5,"prompt":0,"output":4}]"#,
            r#"[{"arrival":-0.5,"prompt":3,"output":4}]"#,
        ] {
            let e = parse_trace_file(text, "x.json").expect_err(text);
            assert!(
                format!("{e:#}").starts_with("--trace x.json"),
                "{text}: {e:#}"
            );
        }
    }
}
