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
