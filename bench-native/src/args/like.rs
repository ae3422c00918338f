//! `simulate --like RESULT`: the flags the result fixes refused, the server flags turned
//! into the base configuration, and the seeds of the arrival process.

use super::limits::Scope;
use super::{ArgError, ModelArgs, Point, SINGLE};
use crate::like::{self, Benchmark};
use clap::ValueEnum;
use engine::config::SimConfig;
use std::path::Path;

/// How `simulate --like` prints its comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LikeFormat {
    /// An aligned table with the notes below it.
    #[default]
    Table,
    /// One row per metric (`metric,unit,measured,predicted,band_min,band_max,error_rel`);
    /// the notes go to stderr.
    Csv,
    /// The benchmark, the notes, the seeds and every metric.
    Json,
}

/// Seeds of the arrival process `simulate --like` runs by default.
pub const DEFAULT_SEEDS: u32 = 5;

/// Most seeds `--like-seeds` takes.
pub const MAX_SEEDS: u32 = 1000;

/// A checked `simulate --like`.
#[derive(Clone, Debug)]
pub struct LikeConfig {
    pub bench: Benchmark,
    /// The server, cost and run rules; its workload is replaced by the benchmark's.
    pub base: SimConfig,
    pub seeds: Vec<u64>,
    pub format: LikeFormat,
}

/// The flags that set what the result file already fixes (given: refused).
#[derive(Debug)]
pub struct Fixed<'a> {
    pub rate: Option<f64>,
    pub dp_slo: Option<f64>,
    pub records: bool,
    pub model: &'a ModelArgs,
}

/// Checks the flags, reads the result, builds the base configuration.
///
/// # Errors
/// [`ArgError::Conflict`] for a flag the file fixes; [`ArgError::Range`] for
/// `--like-seeds`; the file's own errors ([`crate::like::LikeError`]); the server flags'
/// errors as `simulate` gives them.
pub fn config(
    path: &Path,
    fixed: Fixed<'_>,
    batch: u32,
    kv: Option<u64>,
    seeds: Option<u32>,
    format: Option<LikeFormat>,
) -> anyhow::Result<LikeConfig> {
    let m = fixed.model;
    for (given, flag) in [
        (fixed.rate.is_some(), "--rate"),
        (m.trace.is_some(), "--trace"),
        (m.arrivals.is_some(), "--arrivals"),
        (m.lengths.is_some(), "--lengths"),
        (m.horizon.is_some(), "--horizon"),
        (fixed.dp_slo.is_some(), "--dp-slo"),
        (fixed.records, "--records"),
        (m.burstiness != 1.0, "--burstiness"),
    ] {
        if given {
            return Err(ArgError::Conflict(format!(
                "{flag} does not apply to --like: the result file fixes the benchmark (its requests, lengths, rate and burstiness); give only the server's flags"
            ))
            .into());
        }
    }
    let n = seeds.unwrap_or(DEFAULT_SEEDS);
    if n == 0 || n > MAX_SEEDS {
        return Err(ArgError::range("--like-seeds", "from 1 to 1000", n).into());
    }
    let bench = like::read(path)?;
    let first = bench.seed.unwrap_or(0);
    let seeds: Vec<u64> = if !bench.run.is_random() {
        // Nothing random to vary: one run is the prediction.
        vec![first]
    } else {
        (0..u64::from(n)).map(|i| first + i).collect()
    };
    let mut model = m.clone();
    model.roofline_kv = kv.is_none();
    let base = model.config(
        Point {
            rate: 1.0,
            batch,
            kv: kv.unwrap_or(8192),
            seed: first,
        },
        SINGLE,
        Scope::Run,
    )?;
    if let Some(cap) = base.workload.max_model_len {
        if let Some(i) = bench
            .run
            .lengths
            .iter()
            .position(|&(p, o)| p as u64 + o as u64 > cap as u64)
        {
            let (p, o) = bench.run.lengths[i];
            return Err(ArgError::Conflict(format!(
                "request {i} of {} has {p} prompt + {o} output tokens, more than --max-model-len {cap}: the server would have refused it",
                path.display()
            ))
            .into());
        }
    }
    Ok(LikeConfig {
        bench,
        base,
        seeds,
        format: format.unwrap_or_default(),
    })
}
