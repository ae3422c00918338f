//! Command-line surface (clap derive). Each subcommand's arguments live in its own module.

use clap::{Parser, Subcommand};

/// kvqueue's native tool: simulate and sweep the continuous-batching model, compare it
/// with the analytical models, and load-test real OpenAI-compatible servers.
#[derive(Debug, Parser)]
#[command(name = "bench-native", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load-test a running OpenAI-compatible server (open-loop, streaming).
    Run(crate::run::RunArgs),
    /// Measure prefill latency vs prompt length and decode step latency vs streams.
    Microbench(crate::microbench::MicrobenchArgs),
    /// Fit table and linear cost models from a microbenchmark.
    Fit(crate::fit::FitArgs),
    /// Simulate one configuration and print its metrics.
    Simulate(crate::simulate::SimulateArgs),
    /// Sweep rates × batch widths × KV budgets × seeds; write CSV/JSON to results/.
    Sweep(crate::sweep::SweepArgs),
    /// Rates × server configurations: launch, health-check, measure and stop each server.
    ServerSweep(crate::server_sweep::ServerSweepArgs),
    /// Join sharded sweep outputs into one summary CSV.
    Merge(crate::sweep::MergeArgs),
    /// Simulator vs every analytical model on a grid: error table (markdown + CSV).
    Compare(crate::compare::CompareArgs),
    /// The cheapest fleet meeting an SLO: every GPU × TP × router screened by the model, the cheapest confirmed by simulation.
    Plan(crate::plan::PlanArgs),
    /// Microbench → fit → simulate → measure a real server at the same rates: predicted vs measured table.
    Validate(crate::validate::ValidateArgs),
}
