//! `bench-native simulate --like RESULT`: a benchmark as it was run, read from its result,
//! and the same benchmark simulated.
//!
//! * [`Benchmark`]: what the result file says was run — N prompts (warm-ups excluded), their
//!   lengths in order where the file has them, the request rate (`inf`: all at once), the
//!   burstiness, the client's `max_concurrency` — and what it measured. Read from a
//!   `vllm bench serve --save-result` JSON ([`vllm`]) or a `bench-native run` folder
//!   ([`run_folder`]). Whatever the file lacks is a [`Benchmark::notes`] line naming the
//!   field and what the simulation assumes instead; nothing is defaulted silently.
//! * [`predict`]: the benchmark simulated once per seed of the arrival process, each run's
//!   records summarised by `engine::metrics` over the benchmark's own window (first send
//!   to last token, as `vllm bench serve` and `bench-native run` measure it).
//! * [`report`]: each metric predicted (mean over the seeds, with the seeds' range as the
//!   band) beside the measured value and the relative error, as a table, CSV or JSON.

pub mod report;
pub mod run_folder;
pub mod vllm;

use engine::config::{EndRule, SimConfig};
use engine::fleet::{Client, FleetConfig, RouterKind};
use engine::metrics::Summary;
use engine::record::RequestRecord;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
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

/// How the client spaced its sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Schedule {
    /// `vllm bench serve`: gamma gaps (shape = burstiness, mean 1/rate) summed, then
    /// scaled so that the last request is sent at exactly N / rate; the first at 0.
    VllmNormalized,
    /// `bench-native run`: the engine's own arrival process from the run's seed on.
    Renewal,
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
    /// Requests in the benchmark (warm-ups excluded).
    pub requests: usize,
    /// Request rate [req/s]; infinite = every request at t = 0.
    pub rate: f64,
    /// Gamma shape of the gaps (1 = Poisson).
    pub burstiness: f64,
    pub schedule: Schedule,
    /// Client-side cap on requests in flight.
    pub max_concurrency: Option<u32>,
    pub latency_from: LatencyFrom,
    /// (prompt, output) tokens of every request, in send order.
    pub lengths: Vec<(u32, u32)>,
    /// The measurement, in [`Metric`] order (`None`: not in the file).
    pub measured: Vec<Option<f64>>,
    /// The seed the run itself used for its arrivals, when the file says.
    pub seed: Option<u64>,
    /// Send times fixed by the run itself (a trace) [s]: every seed uses them.
    pub fixed_times: Option<Vec<f64>>,
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

/// Send times of the benchmark's requests for arrival seed `seed` [s]: the gaps of the
/// engine's arrival process (gamma with shape = burstiness, Poisson at 1, evenly spaced
/// at an infinite burstiness) summed from 0; for [`Schedule::VllmNormalized`] scaled so
/// that the last send is at N / rate. An infinite rate sends everything at 0.
pub fn send_times(b: &Benchmark, seed: u64) -> Vec<f64> {
    let n = b.requests;
    if let Some(t) = &b.fixed_times {
        return t.clone();
    }
    if !b.rate.is_finite() {
        return vec![0.0; n];
    }
    let arrivals = if !b.burstiness.is_finite() {
        ArrivalProcess::Deterministic { rate: b.rate }
    } else if b.burstiness == 1.0 {
        ArrivalProcess::Poisson { rate: b.rate }
    } else {
        ArrivalProcess::Gamma {
            rate: b.rate,
            burstiness: b.burstiness,
        }
    };
    let w = Workload {
        arrivals,
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
        shared: None,
    };
    // Far past the N-th arrival: the stream stops at N, not at the horizon.
    let horizon = (n as f64 / b.rate) * 1e3 + 1e3;
    let mut t: Vec<f64> = match w.stream(seed, horizon) {
        Ok(s) => s.take(n).map(|r| r.arrival).collect(),
        Err(_) => Vec::new(),
    };
    if t.len() < n {
        // Only if the process cannot be sampled (checked by the reader): even spacing.
        t = (1..=n).map(|i| i as f64 / b.rate).collect();
    }
    if b.schedule == Schedule::VllmNormalized {
        // vLLM's get_request: the cumulative delays are scaled so that the last one is
        // N / rate (the first request waits its own scaled delay too).
        let last = t.last().copied().unwrap_or(0.0);
        if last > 0.0 {
            let f = n as f64 / b.rate / last;
            for x in &mut t {
                *x *= f;
            }
        }
    }
    t
}

/// The simulation of one seed: the requests in order, at their send times, on the server
/// of `base` (its workload replaced), drained.
pub fn sim_config(b: &Benchmark, base: &SimConfig, seed: u64) -> SimConfig {
    let times = send_times(b, seed);
    let requests: Vec<TraceRequest> = times
        .iter()
        .zip(&b.lengths)
        .map(|(&arrival, &(prompt, output))| TraceRequest {
            arrival,
            prompt,
            output,
            class: 0,
        })
        .collect();
    let last = times.last().copied().unwrap_or(0.0);
    let mut c = base.clone();
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace { requests },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: base.workload.max_model_len,
        shared: None,
    };
    c.end = EndRule::Drain;
    // Arrivals end with the trace; a horizon past the last send lets every request in.
    c.horizon_s = (last * 1.01).max(last + 1.0);
    c.metrics.warmup_s = 0.0;
    c.keep_records = true;
    c.timeseries_points = 0;
    c.seed = seed;
    c
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

/// The summary of simulated `records` over the benchmark's window: from the first send
/// (t = 0) to the last token, as the client measures its duration.
pub fn summarize(records: &[RequestRecord], cfg: &SimConfig) -> Summary {
    let end = records
        .iter()
        .filter_map(|r| r.finish_s.or(r.first_token_s))
        .fold(0.0f64, f64::max);
    engine::metrics::summarize(records, &cfg.metrics, end)
}

/// Simulates `b` on the server of `base` for each seed.
///
/// # Errors
/// The engine refuses the configuration (its own message).
pub fn predict(b: &Benchmark, base: &SimConfig, seeds: &[u64]) -> anyhow::Result<Prediction> {
    let mut runs = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        let cfg = sim_config(b, base, seed);
        cfg.validate()
            .map_err(|e| anyhow::anyhow!("the simulated benchmark: {e}"))?;
        let records = match b.max_concurrency {
            None => engine::sim::simulate(&cfg)?.records,
            Some(max) => {
                // The client's gate: one server behind a client that keeps at most `max`
                // requests in flight, each timed from its send (engine::fleet).
                let mut fleet = FleetConfig::uniform(cfg.clone(), 1, RouterKind::RoundRobin);
                fleet.client = Client::MaxConcurrency { max };
                engine::fleet::simulate_fleet(&fleet)
                    .map_err(|e| anyhow::anyhow!("the simulated benchmark: {e}"))?
                    .records
            }
        };
        runs.push(SeedRun {
            seed,
            summary: summarize(&records, &cfg),
        });
    }
    Ok(Prediction { runs })
}

/// Mean lengths standing in for per-request ones: `total_in / n`, `total_out / n`, each
/// ≥ 1, `n` requests of them.
pub(crate) fn mean_lengths(n: usize, total_in: f64, total_out: f64) -> Vec<(u32, u32)> {
    let k = n.max(1) as f64;
    let p = ((total_in / k).round() as u32).max(1);
    let o = ((total_out / k).round() as u32).max(1);
    vec![(p, o); n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(rate: f64, burstiness: f64, schedule: Schedule) -> Benchmark {
        Benchmark {
            tool: "test".into(),
            requests: 200,
            rate,
            burstiness,
            schedule,
            max_concurrency: None,
            latency_from: LatencyFrom::Send,
            lengths: vec![(16, 8); 200],
            measured: vec![None; Metric::ALL.len()],
            seed: None,
            fixed_times: None,
            notes: Vec::new(),
        }
    }

    /// vLLM's schedule ends at exactly N / rate, rises, and differs between seeds;
    /// an infinite rate sends everything at 0.
    #[test]
    fn vllm_send_times_end_at_n_over_rate() {
        let b = bench(4.0, 0.5, Schedule::VllmNormalized);
        let t = send_times(&b, 3);
        assert_eq!(t.len(), 200);
        assert!((t[199] - 50.0).abs() < 1e-9, "{}", t[199]);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        assert!(t[0] > 0.0);
        assert_ne!(t, send_times(&b, 4));
        let inf = bench(f64::INFINITY, 1.0, Schedule::VllmNormalized);
        assert!(send_times(&inf, 0).iter().all(|&x| x == 0.0));
        let even = bench(2.0, f64::INFINITY, Schedule::VllmNormalized);
        let t = send_times(&even, 0);
        assert!((t[1] - t[0] - 0.5).abs() < 1e-9, "{:?}", &t[..2]);
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
        gated.max_concurrency = Some(2);
        let g = predict(&gated, &base, &[0]).unwrap();
        assert_eq!(g.runs[0].summary.completed, 200);
        assert_eq!(g.runs[0].summary.ttft.n, 200);
        let mut slow = base.clone();
        slow.server.step_overhead_s = 0.01;
        let q = predict(&b, &slow, &[0]).unwrap();
        assert!(
            q.runs[0].summary.tpot.mean.unwrap() > p.runs[0].summary.tpot.mean.unwrap() + 0.009
        );
    }
}
