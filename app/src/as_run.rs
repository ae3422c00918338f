//! "Simulate this benchmark": each dropped file's benchmark as it was run — its prompt
//! count, warm-ups, lengths in order, rate or `inf`, burstiness and client-side
//! `max_concurrency` ([`engine::benchmark`], the core `bench-native simulate --like` runs)
//! — simulated on the page's server for several seeds, one [`CurvePoint`] per file at the
//! rate the report card shows it.
//!
//! Plain Rust, tested natively: [`items`] maps a measured series onto the runs to
//! simulate, [`point`] simulates one (in a worker, `Task::Benchmark`), [`describe`] says
//! in one line what the report card's simulated column then holds.

use crate::curves::CurvePoint;
use crate::format;
use crate::measured::MeasuredSeries;
use crate::params::Params;
use engine::benchmark::BenchmarkRun;
use serde::{Deserialize, Serialize};

/// One file's benchmark, to simulate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The file it was read from.
    pub file: String,
    /// The rate the report card shows the file at [req/s] (for `inf`: its measured
    /// throughput).
    pub rate: f64,
    pub run: BenchmarkRun,
}

/// The benchmarks of `series` that can be simulated as run: every file that records its
/// benchmark, at the rate of its measured point, in the series' order.
pub fn items(series: &MeasuredSeries) -> Vec<Item> {
    series
        .files
        .iter()
        .filter_map(|(file, setup)| {
            let run = setup.run.as_ref()?;
            let at = series.points.iter().find(|p| &p.file == file)?;
            Some(Item {
                file: file.clone(),
                rate: at.point.rate,
                run: run.run.clone(),
            })
        })
        .collect()
}

/// Whether every file of `series` records its benchmark, so that the prompt count,
/// the warm-ups and the client's cap are simulated as run.
pub fn covers(series: &MeasuredSeries) -> bool {
    !series.files.is_empty() && items(series).len() == series.files.len()
}

/// The arrival seeds one run gets: `seeds` of them, or one when nothing is random
/// (every request at once, or fixed send times).
pub fn seeds_of(run: &BenchmarkRun, seeds: u32) -> u32 {
    if run.is_random() {
        seeds.max(1)
    } else {
        1
    }
}

/// Simulation runs all of `items` take with `seeds` seeds (for progress).
pub fn total_runs(items: &[Item], seeds: u32) -> u32 {
    items.iter().map(|i| seeds_of(&i.run, seeds)).sum()
}

/// `run` simulated on the server of `p` for each seed, summarised over the benchmark's
/// window, aggregated at `rate`; `tick` is called after each seed.
///
/// # Errors
/// The engine's message when it refuses the run or the server.
pub fn point(
    p: &Params,
    rate: f64,
    run: &BenchmarkRun,
    tick: &mut dyn FnMut(),
) -> Result<CurvePoint, String> {
    // The page's server, cost model and SLOs; the workload is the benchmark's own.
    let base = p.sim_config(rate, 0);
    let n = seeds_of(run, p.seeds);
    let mut summaries = Vec::with_capacity(n as usize);
    for seed in 0..u64::from(n) {
        let s = engine::benchmark::simulate(run, &base, seed)
            .map_err(|e| format!("the benchmark as run: {e}"))?;
        summaries.push(s);
        tick();
    }
    Ok(CurvePoint::from_summaries(rate, &summaries))
}

/// What the simulated column holds, in one line: "the benchmark as run: 40 prompts per
/// file in the files' order, 1 warm-up each not measured, at most 2 in flight, mean
/// lengths (no per-request lengths in the files) · 5 seeds".
pub fn describe(items: &[Item], seeds: u32) -> String {
    let mut parts: Vec<String> = Vec::new();
    let counts: Vec<usize> = items.iter().map(|i| i.run.requests).collect();
    match (counts.iter().min(), counts.iter().max()) {
        (Some(a), Some(b)) if a == b => parts.push(format!(
            "{a} prompt{} per file",
            if *a == 1 { "" } else { "s" }
        )),
        (Some(a), Some(b)) => parts.push(format!("{a}–{b} prompts per file")),
        _ => return "the benchmark as run: no file records its benchmark".into(),
    }
    let warm: u32 = items.iter().map(|i| i.run.warmups).max().unwrap_or(0);
    if warm > 0 {
        parts.push(format!(
            "up to {warm} warm-up{} each, not measured",
            if warm == 1 { "" } else { "s" }
        ));
    }
    let caps: Vec<u32> = items.iter().filter_map(|i| i.run.max_concurrency).collect();
    if !caps.is_empty() {
        let lo = caps.iter().min().copied().unwrap_or(0);
        let hi = caps.iter().max().copied().unwrap_or(0);
        parts.push(if lo == hi {
            format!("at most {lo} in flight")
        } else {
            format!("at most {lo}–{hi} in flight")
        });
    }
    let all_at_once = items.iter().filter(|i| !i.run.rate.is_finite()).count();
    if all_at_once > 0 {
        parts.push(format!(
            "{all_at_once} file{} sending every request at once",
            if all_at_once == 1 { "" } else { "s" }
        ));
    }
    if items.iter().all(|i| uniform(&i.run)) {
        parts.push("the files' mean lengths for every request".into());
    } else {
        parts.push("each request's own lengths in order".into());
    }
    let runs = total_runs(items, seeds);
    format!(
        "the benchmark as run: {} · {} file{}, {runs} runs ({} seed{} where the sends are random)",
        parts.join(", "),
        items.len(),
        if items.len() == 1 { "" } else { "s" },
        seeds,
        if seeds == 1 { "" } else { "s" }
    )
}

/// Whether every request has the same lengths (the file's means stand in for them).
fn uniform(run: &BenchmarkRun) -> bool {
    run.lengths.windows(2).all(|w| w[0] == w[1])
}

/// The page's benchmark-as-run job and what it has brought back so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AsRunState {
    /// The job's id (0: none started).
    pub id: u64,
    /// The series it simulates (its name).
    pub series: String,
    /// The parameters it ran with: its figures stand for the series only under these.
    pub params: Option<Params>,
    /// What the simulated column then holds ([`describe`]).
    pub label: String,
    /// Simulation runs in all, and done per worker.
    pub total: u32,
    pub done: Vec<u32>,
    /// Per worker: its share is finished.
    pub finished: Vec<bool>,
    /// One point per file, sorted by rate.
    pub points: Vec<CurvePoint>,
    pub running: bool,
    pub error: Option<String>,
}

impl AsRunState {
    /// The finished figures for `series` under the parameters `p`, if there are any.
    pub fn points_for(&self, series: &str, p: &Params) -> Option<&[CurvePoint]> {
        (!self.running
            && self.error.is_none()
            && self.series == series
            && self.params.as_ref() == Some(p)
            && !self.points.is_empty())
        .then_some(self.points.as_slice())
    }

    /// What the report card of `series` says about the job under `p`: running (with its
    /// progress), failed, or done (what its column holds); `None` when the job is not
    /// this series' or its parameters have changed since.
    pub fn status_for(&self, series: &str, p: &Params) -> Option<(AsRunStatus, String)> {
        if self.id == 0 || self.series != series {
            return None;
        }
        if self.running {
            let done: u32 = self.done.iter().sum();
            return Some((
                AsRunStatus::Running,
                format!(
                    "simulating the benchmark as run… {done} of {} runs",
                    self.total
                ),
            ));
        }
        if let Some(e) = &self.error {
            return Some((AsRunStatus::Failed, format!("the benchmark as run: {e}")));
        }
        self.points_for(series, p).map(|_| {
            (
                AsRunStatus::Done,
                format!("simulated column: {}", self.label),
            )
        })
    }

    /// Inserts a file's point, keeping them sorted by rate.
    pub fn add(&mut self, point: CurvePoint) {
        let at = self.points.partition_point(|q| q.rate < point.rate);
        self.points.insert(at, point);
    }
}

/// The state [`AsRunState::status_for`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsRunStatus {
    Running,
    Failed,
    Done,
}

impl AsRunStatus {
    /// The value of the report card's `data-as-run` attribute.
    pub fn key(self) -> &'static str {
        match self {
            AsRunStatus::Running => "running",
            AsRunStatus::Failed => "failed",
            AsRunStatus::Done => "done",
        }
    }
}

/// The rates of `items`, for a message: "0.5 req/s … 8 req/s".
pub fn rate_span(items: &[Item]) -> String {
    let lo = items.iter().map(|i| i.rate).fold(f64::INFINITY, f64::min);
    let hi = items.iter().map(|i| i.rate).fold(0.0, f64::max);
    if items.is_empty() {
        String::new()
    } else if (hi - lo).abs() < 1e-9 {
        format::req_per_s(lo)
    } else {
        format!("{} … {}", format::req_per_s(lo), format::req_per_s(hi))
    }
}

#[cfg(test)]
mod tests;
