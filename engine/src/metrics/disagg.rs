//! Metrics of a disaggregated run (docs/model.md, Disaggregated prefill and decode),
//! defined once:
//!
//! * transfer time = the instant the request's KV has reached the decode pool − the end
//!   of its prefill: the wait for the prefill replica's link, the bytes over its
//!   bandwidth and the link's latency;
//! * transfer bytes = the KV bytes moved per request (its prompt's tokens);
//! * a pool's utilisation = the time its replicas spent running iterations over the
//!   run's end, averaged over the replicas.

use super::{Dist, Quantiles};
use serde::{Deserialize, Serialize};

/// What the prefill → decode transfers did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransferSummary {
    /// Requests whose KV was moved [count].
    pub transfers: u64,
    /// Transfer time [s].
    pub time: Dist,
    /// Of it, the wait for a busy link [s].
    pub wait: Dist,
    /// Mean KV bytes moved per transfer [B] (None: nothing moved).
    pub mean_bytes: Option<f64>,
}

/// Streams transfers into a [`TransferSummary`].
#[derive(Debug, Default)]
pub struct TransferAccumulator {
    warmup_s: f64,
    time: Quantiles,
    wait: Quantiles,
    bytes: f64,
    n: u64,
}

impl TransferAccumulator {
    /// Ignores requests arriving before `warmup_s` [s], as [`super::Accumulator`] does.
    pub fn new(warmup_s: f64) -> TransferAccumulator {
        TransferAccumulator {
            warmup_s,
            ..TransferAccumulator::default()
        }
    }

    /// One transfer of the request that arrived at `arrival_s`: prefill done at `done_s`,
    /// sent from `start_s`, at the decode pool at `end_s`, `bytes` moved.
    pub fn push(&mut self, arrival_s: f64, done_s: f64, start_s: f64, end_s: f64, bytes: f64) {
        if arrival_s < self.warmup_s {
            return;
        }
        self.n += 1;
        self.time.push(end_s - done_s);
        self.wait.push(start_s - done_s);
        self.bytes += bytes;
    }

    pub fn finish(self) -> TransferSummary {
        TransferSummary {
            transfers: self.n,
            time: self.time.dist(),
            wait: self.wait.dist(),
            mean_bytes: (self.n > 0).then(|| self.bytes / self.n as f64),
        }
    }
}

/// A pool's utilisation: each replica's busy time over `end_s`, averaged (0 for an empty
/// pool or a run of length 0).
pub fn pool_utilisation(busy_s: &[f64], end_s: f64) -> f64 {
    if busy_s.is_empty() || end_s <= 0.0 {
        return 0.0;
    }
    busy_s.iter().map(|b| b / end_s).sum::<f64>() / busy_s.len() as f64
}
