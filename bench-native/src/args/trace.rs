//! Arrival traces and workload files: `--trace FILE` of `simulate` and `sweep`, and the
//! workload JSON of `run --workload` (one loader for both).

use anyhow::Context;
use clap::ValueEnum;
use engine::workload::import::{self, BlockIds, ImportedTrace, Skipped, TraceFormat};
use engine::workload::{parse_trace, ArrivalProcess, LengthDist, TraceError, Workload};
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

/// The format of `--trace FILE` (`--trace-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceFormatArg {
    /// A JSON list of requests or arrival times, or a workload JSON.
    Json,
    /// Mooncake JSONL.
    Mooncake,
    /// BurstGPT CSV.
    Burstgpt,
    /// Azure LLM inference CSV.
    Azure,
}

impl TraceFormatArg {
    fn imported(self) -> Option<TraceFormat> {
        match self {
            TraceFormatArg::Json => None,
            TraceFormatArg::Mooncake => Some(TraceFormat::Mooncake),
            TraceFormatArg::Burstgpt => Some(TraceFormat::BurstGpt),
            TraceFormatArg::Azure => Some(TraceFormat::Azure),
        }
    }
}

/// What importing a real trace found besides its requests.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub format: TraceFormat,
    pub skipped: Skipped,
    /// Mooncake's prompt block ids, index-aligned with the requests.
    pub blocks: Option<BlockIds>,
    /// Time to parse [s].
    pub took_s: f64,
}

/// The arrivals of a `--trace` file, and what else the file fixes.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFile {
    /// `Trace` (requests with their own lengths) or `Timestamps`.
    pub arrivals: ArrivalProcess,
    /// A workload file's length distribution (used with timestamps, unless --lengths).
    pub lengths: Option<LengthDist>,
    pub max_model_len: Option<u32>,
    /// A Mooncake, BurstGPT or Azure trace: what the import found.
    pub imported: Option<Imported>,
}

impl TraceFile {
    /// Reads `path` in `format`, or in the format its first line shows (a Mooncake JSON
    /// object, a BurstGPT or Azure CSV header), else as JSON ([`TraceFile::read`]).
    ///
    /// # Errors
    /// Unreadable file; the import's error with its line; as [`TraceFile::parse`].
    pub fn read_as(path: &Path, format: Option<TraceFormatArg>) -> anyhow::Result<TraceFile> {
        let shown = path.display().to_string();
        let size = std::fs::metadata(path)
            .with_context(|| format!("reading --trace {shown}"))?
            .len();
        if size > import::MAX_TRACE_BYTES as u64 {
            anyhow::bail!(
                "--trace {shown}: {size} bytes, over the limit of {} bytes (256 MiB); cut the \
                 trace into parts",
                import::MAX_TRACE_BYTES
            );
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading --trace {shown}"))?;
        TraceFile::parse_as(&text, &shown, format)
    }

    /// [`TraceFile::read_as`] on the file's text.
    ///
    /// # Errors
    /// As [`TraceFile::read_as`].
    pub fn parse_as(
        text: &str,
        shown: &str,
        format: Option<TraceFormatArg>,
    ) -> anyhow::Result<TraceFile> {
        let format = match format {
            Some(f) => f.imported(),
            None => TraceFormat::detect(text),
        };
        let Some(format) = format else {
            return TraceFile::parse(text, shown);
        };
        let t0 = std::time::Instant::now();
        let t: ImportedTrace = import::import(text, format)
            .with_context(|| format!("--trace {shown} ({format} trace)"))?;
        let took_s = t0.elapsed().as_secs_f64();
        let w = Workload {
            arrivals: ArrivalProcess::Trace {
                requests: t.requests,
            },
            ..Workload::default()
        };
        w.validate().with_context(|| format!("--trace {shown}"))?;
        Ok(TraceFile {
            arrivals: w.arrivals,
            lengths: None,
            max_model_len: None,
            imported: Some(Imported {
                format,
                skipped: t.skipped,
                blocks: t.blocks,
                took_s,
            }),
        })
    }

    /// What to tell the user about an imported trace: its requests, the lines skipped and
    /// why, and how long the import took.
    pub fn import_note(&self) -> Option<String> {
        let i = self.imported.as_ref()?;
        let n = match &self.arrivals {
            ArrivalProcess::Trace { requests } => requests.len(),
            _ => 0,
        };
        let skipped = i.skipped.describe();
        Some(format!(
            "imported {n} requests from a {} trace in {:.1} ms; {skipped}",
            i.format,
            i.took_s * 1e3
        ))
    }

    /// Reads a JSON list of requests (`[{"arrival", "prompt", "output"}, …]`, as `validate`
    /// writes), a JSON list of arrival times [s], or a workload JSON whose arrivals are a
    /// trace or timestamps.
    ///
    /// # Errors
    /// Unreadable file, another JSON shape, or a workload with generated arrivals.
    pub fn read(path: &Path) -> anyhow::Result<TraceFile> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading --trace {shown}"))?;
        TraceFile::parse(&text, &shown)
    }

    /// A `--trace` file's text (`shown` names it in messages), as [`TraceFile::read`]
    /// reads it. What is accepted is checked as the engine checks a workload: arrival
    /// times finite, non-negative and in order, at least one, prompts and outputs ≥ 1
    /// token (see `docs/model.md`, Workload).
    ///
    /// # Errors
    /// Another JSON shape, a workload with generated arrivals, or arrivals the engine
    /// refuses.
    pub fn parse(text: &str, shown: &str) -> anyhow::Result<TraceFile> {
        let t = parse_trace(text).map_err(|e| match e {
            TraceError::Generated { .. } => {
                anyhow::anyhow!("--trace {shown}: {e}; use --arrivals and --rate for that")
            }
            e => anyhow::anyhow!("--trace {shown}: {e}"),
        })?;
        Ok(TraceFile {
            arrivals: t.arrivals,
            lengths: t.lengths,
            max_model_len: t.max_model_len,
            imported: None,
        })
    }

    /// The last arrival [s] (0 for an empty trace).
    pub fn last_arrival(&self) -> f64 {
        match &self.arrivals {
            ArrivalProcess::Trace { requests } => requests.last().map_or(0.0, |r| r.arrival),
            ArrivalProcess::Timestamps { times } => times.last().copied().unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// Mean arrival rate [req/s], the label of a trace's row in a sweep.
    pub fn rate(&self) -> f64 {
        self.arrivals.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::workload::TraceRequest;
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
        let t = TraceFile::read(&put(
            "a.json",
            r#"[{"arrival":0.5,"prompt":3,"output":4},{"arrival":2.0,"prompt":1,"output":1}]"#,
        ))
        .unwrap();
        assert!(matches!(&t.arrivals, ArrivalProcess::Trace { requests } if requests.len() == 2));
        assert_eq!(t.last_arrival(), 2.0);
        let t = TraceFile::read(&put("b.json", "[0.1, 0.2, 0.4]")).unwrap();
        assert!(matches!(&t.arrivals, ArrivalProcess::Timestamps { times } if times.len() == 3));
        let w = Workload {
            arrivals: ArrivalProcess::Timestamps { times: vec![1.0] },
            ..Workload::default()
        };
        let t = TraceFile::read(&put("c.json", &serde_json::to_string(&w).unwrap())).unwrap();
        assert_eq!(t.lengths, Some(w.lengths.clone()));
        let poisson = serde_json::to_string(&Workload::default()).unwrap();
        let e = TraceFile::read(&put("d.json", &poisson)).unwrap_err();
        assert!(
            format!("{e:#}").contains("generates arrivals at a rate"),
            "{e:#}"
        );
        let e = TraceFile::read(&put("e.json", "{\"x\": 1}")).unwrap_err();
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
            if let Ok(t) = TraceFile::parse(&text, "x.json") {
                sensible(&t)?;
            }
        }

        #[test]
        fn never_panics_on_json_like_text(text in "[\\[\\]{}\",:0-9a-z.eE+\\- ]{0,200}") {
            if let Ok(t) = TraceFile::parse(&text, "x.json") {
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
            if let Ok(t) = TraceFile::parse(&text, "x.json") {
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
            let t = TraceFile::parse(&text, "x.json").unwrap();
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
            let e = TraceFile::parse(text, "x.json").expect_err(text);
            assert!(
                format!("{e:#}").starts_with("--trace x.json"),
                "{text}: {e:#}"
            );
        }
    }
}
