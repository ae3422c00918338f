//! Arrival traces and workload files: `--trace FILE` of `simulate` and `sweep`, and the
//! workload JSON of `run --workload` (one loader for both).

use anyhow::Context;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
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
    serde_json::from_str(&text).map_err(|e| WorkloadFileError::NotWorkload {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// The arrivals of a `--trace` file, and what else the file fixes.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFile {
    /// `Trace` (requests with their own lengths) or `Timestamps`.
    pub arrivals: ArrivalProcess,
    /// A workload file's length distribution (used with timestamps, unless --lengths).
    pub lengths: Option<LengthDist>,
    pub max_model_len: Option<u32>,
}

impl TraceFile {
    /// Reads a JSON list of requests (`[{"arrival", "prompt", "output"}, …]`, as `validate`
    /// writes), a JSON list of arrival times [s], or a workload JSON whose arrivals are a
    /// trace or timestamps.
    ///
    /// # Errors
    /// Unreadable file, another JSON shape, or a workload with generated arrivals.
    pub fn read(path: &Path) -> anyhow::Result<TraceFile> {
        let shown = path.display();
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading --trace {shown}"))?;
        if let Ok(requests) = serde_json::from_str::<Vec<TraceRequest>>(&text) {
            return Ok(TraceFile {
                arrivals: ArrivalProcess::Trace { requests },
                lengths: None,
                max_model_len: None,
            });
        }
        if let Ok(times) = serde_json::from_str::<Vec<f64>>(&text) {
            return Ok(TraceFile {
                arrivals: ArrivalProcess::Timestamps { times },
                lengths: None,
                max_model_len: None,
            });
        }
        let w = read_workload(path).with_context(|| {
            format!(
                "--trace {shown}: expected a JSON list of requests ({{\"arrival\", \"prompt\", \
                 \"output\"}}), of arrival times, or a workload JSON"
            )
        })?;
        match w.arrivals {
            ArrivalProcess::Trace { .. } | ArrivalProcess::Timestamps { .. } => Ok(TraceFile {
                arrivals: w.arrivals,
                lengths: Some(w.lengths),
                max_model_len: w.max_model_len,
            }),
            _ => anyhow::bail!(
                "--trace {shown}: its workload generates arrivals at a rate instead of listing \
                 them; use --arrivals and --rate for that"
            ),
        }
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
}
