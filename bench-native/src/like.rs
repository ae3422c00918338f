//! `bench-native simulate --like RESULT`: a benchmark as it was run, read from its result,
//! and the same benchmark simulated.
//!
//! * [`Benchmark`]: what the result file says was run — N prompts (warm-ups excluded), their
//!   lengths in order where the file has them, the request rate (`inf`: all at once), the
//!   burstiness, the client's `max_concurrency` — and what it measured. Read from a
//!   `vllm bench serve --save-result` JSON ([`vllm`]) or a `bench-native run` folder
//!   ([`run_folder`]). Whatever the file lacks is a [`Benchmark::notes`] line naming the
//!   field and what the simulation assumes instead; nothing is defaulted silently.
//! * [`predict`]: the benchmark simulated once per seed of the arrival process by
//!   `engine::benchmark` (the same core the page runs), each run summarised by
//!   `engine::metrics` over the benchmark's own window (first send to last token, as
//!   `vllm bench serve` and `bench-native run` measure it).
//! * [`report`]: each metric predicted (mean over the seeds, with the seeds' range as the
//!   band) beside the measured value and the relative error, as a table, CSV or JSON.

pub mod report;
pub mod run_folder;
pub mod vllm;

pub use engine::benchmark::{BenchmarkRun, Schedule};
use engine::config::SimConfig;
use engine::metrics::Summary;
use std::path::Path;

/// Errors reading a result file.
#[derive(Debug, thiserror::Error)]
pub enum LikeError {
    /// The file or folder cannot be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The file is not a benchmark result this command can simulate; the message names
    /// the field.
    #[error("{path}: {why}")]
    Invalid { path: String, why: String },
}

impl LikeError {
    pub(crate) fn invalid(path: &Path, why: impl Into<String>) -> LikeError {
        LikeError::Invalid {
            path: path.display().to_string(),
            why: why.into(),
        }
    }
    pub(crate) fn io(path: &Path, source: std::io::Error) -> LikeError {
        LikeError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Where a measured latency starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyFrom {
    /// The request's actual send, after any client-side concurrency gate
    /// (`vllm bench serve`: a request waiting for `max_concurrency` is not yet timed).
    Send,
    /// The intended send time (`bench-native run`: the gate's wait counts).
    Intended,
}

/// A benchmark as it was run, and what it measured.
#[derive(Clone, Debug)]
pub struct Benchmark {
    /// What wrote the file (`vllm bench serve`, `bench-native run`).
    pub tool: String,
    /// What was run: requests, lengths, schedule, gate (the engine's description).
    pub run: BenchmarkRun,
    pub latency_from: LatencyFrom,
    /// The measurement, in [`Metric`] order (`None`: not in the file).
    pub measured: Vec<Option<f64>>,
    /// The seed the run itself used for its arrivals, when the file says.
    pub seed: Option<u64>,
    /// What the file lacks and what the simulation assumes instead, one line each.
    pub notes: Vec<String>,
}

/// The metrics compared, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Completed,
    Duration,
    Throughput,
    OutputThroughput,
    TtftMean,
    TtftMedian,
    TtftP99,
    TpotMean,
    TpotMedian,
    TpotP99,
    E2elMean,
    E2elMedian,
    E2elP99,
}

impl Metric {
    pub const ALL: [Metric; 13] = [
        Metric::Completed,
        Metric::Duration,
        Metric::Throughput,
        Metric::OutputThroughput,
        Metric::TtftMean,
        Metric::TtftMedian,
        Metric::TtftP99,
        Metric::TpotMean,
        Metric::TpotMedian,
        Metric::TpotP99,
        Metric::E2elMean,
        Metric::E2elMedian,
        Metric::E2elP99,
    ];

    /// Name and unit as the report shows them.
    pub fn label(self) -> (&'static str, &'static str) {
        match self {
            Metric::Completed => ("completed", "req"),
            Metric::Duration => ("duration", "s"),
            Metric::Throughput => ("completed req/s", "req/s"),
            Metric::OutputThroughput => ("output tok/s", "tok/s"),
            Metric::TtftMean => ("mean TTFT", "ms"),
            Metric::TtftMedian => ("median TTFT", "ms"),
            Metric::TtftP99 => ("p99 TTFT", "ms"),
            Metric::TpotMean => ("mean TPOT", "ms"),
            Metric::TpotMedian => ("median TPOT", "ms"),
            Metric::TpotP99 => ("p99 TPOT", "ms"),
            Metric::E2elMean => ("mean E2EL", "ms"),
            Metric::E2elMedian => ("median E2EL", "ms"),
            Metric::E2elP99 => ("p99 E2EL", "ms"),
        }
    }

    /// The key in CSV and JSON (`ttft_mean_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Completed => "completed",
            Metric::Duration => "duration_s",
            Metric::Throughput => "throughput_rps",
            Metric::OutputThroughput => "output_tokens_per_s",
            Metric::TtftMean => "ttft_mean_ms",
            Metric::TtftMedian => "ttft_p50_ms",
            Metric::TtftP99 => "ttft_p99_ms",
            Metric::TpotMean => "tpot_mean_ms",
            Metric::TpotMedian => "tpot_p50_ms",
            Metric::TpotP99 => "tpot_p99_ms",
            Metric::E2elMean => "e2e_mean_ms",
            Metric::E2elMedian => "e2e_p50_ms",
            Metric::E2elP99 => "e2e_p99_ms",
        }
    }

    /// This metric of a summary, in the report's unit (the one definition,
    /// `engine::metrics`).
    pub fn of(self, s: &Summary) -> Option<f64> {
        let ms = |x: Option<f64>| x.map(|v| v * 1e3);
        match self {
            Metric::Completed => Some(s.completed as f64),
            Metric::Duration => Some(s.window_s),
            Metric::Throughput => Some(s.throughput_rps),
            Metric::OutputThroughput => Some(s.output_tokens_per_s),
            Metric::TtftMean => ms(s.ttft.mean),
            Metric::TtftMedian => ms(s.ttft.p50),
            Metric::TtftP99 => ms(s.ttft.p99),
            Metric::TpotMean => ms(s.tpot.mean),
            Metric::TpotMedian => ms(s.tpot.p50),
            Metric::TpotP99 => ms(s.tpot.p99),
            Metric::E2elMean => ms(s.e2e.mean),
            Metric::E2elMedian => ms(s.e2e.p50),
            Metric::E2elP99 => ms(s.e2e.p99),
        }
    }
}

/// Reads a result: a folder is a `bench-native run` output, a file a `vllm bench serve`
/// result JSON.
///
/// # Errors
/// [`LikeError`] naming the file and the field that cannot be used.
pub fn read(path: &Path) -> Result<Benchmark, LikeError> {
    if path.is_dir() {
        run_folder::read(path)
    } else {
        let text = std::fs::read_to_string(path).map_err(|e| LikeError::io(path, e))?;
        vllm::parse(&text, path)
    }
}

/// One seed's simulated benchmark: its summary over the benchmark window.
#[derive(Clone, Debug)]
pub struct SeedRun {
    pub seed: u64,
    pub summary: Summary,
}

/// The prediction: one run per seed.
#[derive(Clone, Debug)]
pub struct Prediction {
    pub runs: Vec<SeedRun>,
}

/// Simulates `b` on the server of `base` for each seed.
///
/// # Errors
/// The engine refuses the configuration (its own message).
pub fn predict(b: &Benchmark, base: &SimConfig, seeds: &[u64]) -> anyhow::Result<Prediction> {
    let mut runs = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        let summary = engine::benchmark::simulate(&b.run, base, seed)
            .map_err(|e| anyhow::anyhow!("the simulated benchmark: {e}"))?;
        runs.push(SeedRun { seed, summary });
    }
    Ok(Prediction { runs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(rate: f64, burstiness: f64, schedule: Schedule) -> Benchmark {
        Benchmark {
            tool: "test".into(),
            run: BenchmarkRun {
                requests: 200,
                warmups: 0,
                rate,
                burstiness,
                schedule,
                max_concurrency: None,
                lengths: vec![(16, 8); 200],
                fixed_times: None,
            },
            latency_from: LatencyFrom::Send,
            measured: vec![None; Metric::ALL.len()],
            seed: None,
            notes: Vec::new(),
        }
    }

    /// The same benchmark on a slower server: later tokens, the same requests, and the
    /// window is first send to last token.
    #[test]
    fn predicts_every_request_over_the_benchmark_window() {
        let b = bench(2.0, 1.0, Schedule::Renewal);
        let mut base = SimConfig::vllm_like(1.0);
        base.server.max_batch = 8;
        let p = predict(&b, &base, &[0, 1]).unwrap();
        assert_eq!(p.runs.len(), 2);
        for r in &p.runs {
            assert_eq!(r.summary.completed, 200);
            assert_eq!(r.summary.arrivals, 200);
            assert!(r.summary.window_s > 90.0, "{}", r.summary.window_s);
            let x = Metric::Throughput.of(&r.summary).unwrap();
            assert!((x - 200.0 / r.summary.window_s).abs() < 1e-9);
        }
        // A closed loop of 2 (engine::fleet's client gate): every request still completes.
        let mut gated = b.clone();
        gated.run.max_concurrency = Some(2);
        let g = predict(&gated, &base, &[0]).unwrap();
        assert_eq!(g.runs[0].summary.completed, 200);
        assert_eq!(g.runs[0].summary.ttft.n, 200);
        let mut slow = base.clone();
        slow.server.step_overhead_s = 0.01;
        let q = predict(&b, &slow, &[0]).unwrap();
        assert!(
            q.runs[0].summary.tpot.mean.unwrap() > p.runs[0].summary.tpot.mean.unwrap() + 0.009
        );
        // A description the engine refuses is an error, not a panic.
        let mut short = b.clone();
        short.run.lengths.pop();
        let e = predict(&short, &base, &[0]).unwrap_err().to_string();
        assert!(e.contains("199 request lengths for 200 requests"), "{e}");
    }
}
