//! Configuration errors. Every variant says what is wrong and what to do about it; the
//! engine never panics on user input.

use crate::limits::LimitError;
use thiserror::Error;

/// A configuration the engine refuses to run or evaluate.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// A parameter must be a finite number > 0 (rates, durations, medians). Pass a positive value.
    #[error("{name} must be a finite number > 0, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    /// A parameter must be finite and ≥ 0 (σ, warm-up, coefficients). Pass a non-negative value.
    #[error("{name} must be a finite number >= 0, got {value}")]
    Negative { name: &'static str, value: f64 },
    /// An integer parameter must be ≥ 1 (batch width, block size, token budget).
    #[error("{name} must be at least 1, got {value}")]
    Zero { name: &'static str, value: u64 },
    /// The KV cache cannot hold even the smallest possible request; raise the KV capacity.
    #[error("KV capacity of {kv_tokens} tokens cannot hold one request of {need_tokens} tokens; raise kv_tokens")]
    KvTooSmall { kv_tokens: u64, need_tokens: u64 },
    /// An empirical length table or trace is empty; give it at least one row.
    #[error("{what} is empty")]
    Empty { what: &'static str },
    /// Timestamps of a trace must be finite, ≥ 0 and non-decreasing.
    #[error("trace timestamps must be finite, >= 0 and non-decreasing (row {row})")]
    BadTimestamps { row: usize },
    /// A table/linear cost model is malformed (non-finite, negative or unsorted points).
    #[error("cost model: {0}")]
    Cost(String),
    /// A value outside its allowed range.
    #[error("{name} = {value} is out of range: {why}")]
    OutOfRange {
        name: &'static str,
        value: f64,
        why: &'static str,
    },
    /// A data file (CSV/JSON) could not be parsed.
    #[error("could not parse {what}: {why}")]
    Parse { what: &'static str, why: String },
    /// A fleet that cannot run as given (a router that cannot apply to its servers). The
    /// message says what to change.
    #[error("fleet: {0}")]
    Fleet(String),
    /// A prefix cache that cannot apply to this server (the message says what to change).
    #[error("prefix cache: {0}")]
    PrefixCache(&'static str),
    /// Past a resource limit of the simulator ([`crate::limits`]): too much work for one
    /// run or sweep, or a value it cannot allocate for. The variant says which and by how
    /// much.
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// Checks `value` is finite and > 0.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<f64, ConfigError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ConfigError::NotPositive { name, value })
    }
}

/// Checks `value` is finite and ≥ 0.
pub(crate) fn non_negative(name: &'static str, value: f64) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ConfigError::Negative { name, value })
    }
}

/// Checks an integer is ≥ 1.
pub(crate) fn at_least_one(name: &'static str, value: u64) -> Result<u64, ConfigError> {
    if value >= 1 {
        Ok(value)
    } else {
        Err(ConfigError::Zero { name, value })
    }
}
