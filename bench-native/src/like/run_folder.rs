//! A `bench-native run` folder as a [`Benchmark`]: `metadata.json` (the workload, its
//! seed, `max_concurrency`), `requests.csv` (every request's asked-for lengths, in id
//! order) and `summary.json` (the measurement, summarised by `engine::metrics`).
//! `bench-native run` times latencies from the intended send, so a concurrency gate's
//! wait counts ([`LatencyFrom::Intended`]).

use super::{Benchmark, BenchmarkRun, LatencyFrom, LikeError, Metric, Schedule};
use crate::run::RequestRow;
use engine::metrics::Summary;
use engine::workload::{ArrivalProcess, Workload};
use serde_json::Value;
use std::path::Path;

fn json(path: &Path) -> Result<Value, LikeError> {
    let text = std::fs::read_to_string(path).map_err(|e| LikeError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| LikeError::invalid(path, format!("not JSON: {e}")))
}

/// Reads the run folder `dir`.
///
/// # Errors
/// A missing or malformed file, a workload this command cannot replay.
pub fn read(dir: &Path) -> Result<Benchmark, LikeError> {
    let meta_path = dir.join("metadata.json");
    let meta = json(&meta_path)?;
    let run = meta.get("run").ok_or_else(|| {
        LikeError::invalid(
            &meta_path,
            "no \"run\" object: is it a bench-native run folder?",
        )
    })?;
    let workload: Workload = serde_json::from_value(
        run.get("workload")
            .cloned()
            .ok_or_else(|| LikeError::invalid(&meta_path, "no \"run.workload\""))?,
    )
    .map_err(|e| LikeError::invalid(&meta_path, format!("\"run.workload\": {e}")))?;
    let mut notes = Vec::new();
    let seed = match run.get("seed").and_then(Value::as_u64) {
        Some(s) => Some(s),
        None => {
            notes.push("no \"run.seed\": the arrival seeds start at 0".into());
            None
        }
    };
    let max_concurrency = run
        .get("max_concurrency")
        .and_then(Value::as_u64)
        .and_then(|c| u32::try_from(c).ok())
        .filter(|&c| c >= 1);
    // The requests, in id order.
    let csv_path = dir.join("requests.csv");
    let mut rdr = csv::Reader::from_path(&csv_path)
        .map_err(|e| LikeError::invalid(&csv_path, e.to_string()))?;
    let mut rows: Vec<RequestRow> = Vec::new();
    for (i, r) in rdr.deserialize().enumerate() {
        rows.push(r.map_err(|e| LikeError::invalid(&csv_path, format!("row {}: {e}", i + 2)))?);
    }
    if rows.is_empty() {
        return Err(LikeError::invalid(&csv_path, "no requests"));
    }
    rows.sort_by_key(|r| r.id);
    let lengths: Vec<(u32, u32)> = rows
        .iter()
        .map(|r| (r.target_prompt_tokens.max(1), r.target_output_tokens.max(1)))
        .collect();
    let (rate, burstiness, fixed_times) = match &workload.arrivals {
        ArrivalProcess::Poisson { rate } => (*rate, 1.0, None),
        ArrivalProcess::Gamma { rate, burstiness } => (*rate, *burstiness, None),
        ArrivalProcess::Deterministic { rate } => (*rate, f64::INFINITY, None),
        ArrivalProcess::Trace { .. } | ArrivalProcess::Timestamps { .. } => {
            let t: Vec<f64> = rows.iter().map(|r| r.intended_send_s).collect();
            notes.push(
                "the run replayed a trace: its own send times are simulated, the same for every seed"
                    .into(),
            );
            let span = t.last().copied().unwrap_or(0.0).max(1e-9);
            (rows.len() as f64 / span, 1.0, Some(t))
        }
    };
    let sum_path = dir.join("summary.json");
    let summary: Summary = serde_json::from_value(
        json(&sum_path)?
            .get("summary")
            .cloned()
            .ok_or_else(|| LikeError::invalid(&sum_path, "no \"summary\""))?,
    )
    .map_err(|e| LikeError::invalid(&sum_path, format!("\"summary\": {e}")))?;
    let measured = Metric::ALL.iter().map(|m| m.of(&summary)).collect();
    if max_concurrency.is_some() {
        notes.push(
            "bench-native run times latencies from the intended send (the wait for a --max-concurrency slot included); the simulated client's gate times them from the send, so the predicted TTFT and E2EL leave that wait out"
                .into(),
        );
    }
    Ok(Benchmark {
        tool: "bench-native run".into(),
        run: BenchmarkRun {
            requests: rows.len(),
            warmups: run
                .get("warmup_requests")
                .and_then(Value::as_u64)
                .and_then(|w| u32::try_from(w).ok())
                .unwrap_or(0),
            rate,
            burstiness,
            schedule: Schedule::Renewal,
            max_concurrency,
            lengths,
            fixed_times,
        },
        latency_from: LatencyFrom::Intended,
        measured,
        seed,
        notes,
    })
}
