//! The arguments shared by the subcommands that simulate (`simulate`, `sweep`, `compare`)
//! and the one step that turns them into validated engine configurations.
//!
//! Two stages, as in ripgrep: clap parses the command line into plain argument structs
//! ([`ModelArgs`], [`GridArgs`]); [`ModelArgs::config`] and [`GridArgs::resolve`] then check
//! every value *as the user gave it* and build the engine's `SimConfig`s. A value the engine
//! would refuse is refused here first, by an [`ArgError`] that names the flag and the value
//! the user set (`--kv 10 …`, `--block-size 100000 …`), so no engine message is ever
//! rewritten to name a flag. What the engine still refuses after that is its own message.
//!
//! Before anything runs, [`limits::check`] estimates the work (requests simulated) and
//! refuses a command beyond `--max-requests` with the estimate.

pub mod cost;
pub mod disagg;
pub mod fleet;
pub mod grid;
pub mod like;
pub mod limits;
pub mod model;
pub mod shared;
pub mod trace;

pub use cost::{load_cost, roofline, Overheads};
pub use disagg::{Disagg, DisaggArgs, LinkArgs};
pub use fleet::{Fleet, FleetArgs};
pub use grid::{Grid, GridArgs, GridDefaults, Seeds};
pub use model::{
    check_point, ArrivalArg, KvModeArg, LengthsArg, ModelArgs, Point, PolicyArg, Preset,
};

use anyhow::Context;
use engine::limits::Limits;
use engine::sweep::SweepSpec;
use thiserror::Error;

/// A command-line value that cannot run, naming the flag it came from.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ArgError {
    /// The flag's value is outside its range: give one inside it.
    #[error("{flag} must be {what}, got {value}")]
    Range {
        flag: &'static str,
        what: &'static str,
        value: String,
    },
    /// Two or more flags that cannot hold together; the message says which to change.
    #[error("{0}")]
    Conflict(String),
    /// The command would simulate more requests than allowed (raise `--max-requests`, or
    /// shorten the run).
    #[error("{0}")]
    TooMuchWork(String),
}

impl ArgError {
    pub(crate) fn range(flag: &'static str, what: &'static str, value: impl ToString) -> Self {
        ArgError::Range {
            flag,
            what,
            value: value.to_string(),
        }
    }
}

/// A number as the user would type it back: `2`, `0.25`, `1e-300` (never 300 digits).
pub(crate) fn num(x: f64) -> String {
    let plain = format!("{x}");
    if plain.len() > 12 {
        format!("{x:e}")
    } else {
        plain
    }
}

/// The flags one grid point's values come from: the singular ones of `simulate`, the lists
/// of `sweep` and `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointFlags {
    pub rate: &'static str,
    pub batch: &'static str,
    pub kv: &'static str,
}

/// `simulate`'s flags.
pub const SINGLE: PointFlags = PointFlags {
    rate: "--rate",
    batch: "--batch",
    kv: "--kv",
};

/// `sweep`'s and `compare`'s flags.
pub const LISTS: PointFlags = PointFlags {
    rate: "--rates",
    batch: "--batches",
    kv: "--kv",
};

/// The most worker threads `--threads` may ask for: more only cost memory (each thread's
/// stack) and the OS may refuse to start them.
pub const MAX_THREADS: usize = 1024;

/// `--threads N`: 0 = every core, else N (at most [`MAX_THREADS`]).
///
/// # Errors
/// [`ArgError::Range`] above [`MAX_THREADS`].
pub fn threads(n: usize) -> Result<usize, ArgError> {
    match n {
        0 => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        n if n > MAX_THREADS => Err(ArgError::range(
            "--threads",
            "at most 1024 (0 = every core)",
            n,
        )),
        n => Ok(n),
    }
}

/// The checked grid of `sweep` or `compare` (`defaults` for unset grid flags): the base
/// configuration at the first point, every point checked against its flags, the engine's
/// own check last. Also returns `--seeds` as typed (or the default), for messages.
///
/// # Errors
/// [`ArgError`] naming the flag; cost or trace files; what the engine still refuses.
pub fn sweep_spec(
    grid: &GridArgs,
    defaults: &GridDefaults,
    model: &ModelArgs,
    reuse: bool,
) -> anyhow::Result<(SweepSpec, String)> {
    let trace_rate = model.trace_file()?.map(|t| t.rate());
    let g = grid.resolve(defaults, trace_rate)?;
    let base = model.config(
        Point {
            rate: g.rates[0],
            batch: g.batches[0],
            kv: g.kv[0],
            seed: g.seeds[0],
        },
        LISTS,
        limits::Scope::Sweep,
    )?;
    let spec = SweepSpec {
        base,
        rates: g.rates,
        max_batches: g.batches,
        kv_tokens: g.kv,
        seeds: g.seeds,
        reuse,
    };
    let work = model.work_limits(limits::Scope::Sweep);
    for (r, b, k) in spec.points() {
        let c = spec.config(r, b, k, spec.seeds[0]);
        check_point(&c, LISTS)?;
        limits::check(
            "one run of this grid",
            c.expected_requests(),
            "rate × horizon",
            work.max_requests_per_run,
        )?;
        limits::check_drain("one run of this grid", &c, work.max_drain_horizons)?;
    }
    // the work of all runs is the caller's to check (shards, noise floors)
    let structural = Limits {
        max_requests_per_sweep: f64::INFINITY,
        ..work
    };
    spec.validate_with(&structural).context("invalid grid")?;
    Ok((spec, g.seeds_text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_capped_and_zero_means_every_core() {
        assert!(threads(0).unwrap() >= 1);
        assert_eq!(threads(3).unwrap(), 3);
        assert_eq!(
            threads(100_000).unwrap_err().to_string(),
            "--threads must be at most 1024 (0 = every core), got 100000"
        );
    }
}
