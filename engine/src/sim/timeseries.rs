//! Time-series sampling: the server's state on a regular grid of instants, in memory
//! bounded whatever the run's length.

use super::clock::count_f64;
use serde::{Deserialize, Serialize};

/// The server's state at one sampling instant: instant `i` is `i · horizon /
/// timeseries_points`, on a regular grid up to the end of the run, and the state is the
/// one holding at that instant (after any event at exactly that time). Paged decode runs
/// take their blocks when the run starts, so a sample inside one counts them already.
///
/// A run keeps at most `2 · timeseries_points + 1` samples: a drained run that goes on
/// past twice its horizon has its grid thinned to every other instant (the spacing
/// doubles, the samples kept are unchanged), as often as needed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimePoint {
    /// The sampling instant [s].
    pub t_s: f64,
    /// Requests in the waiting queue.
    pub waiting: u32,
    /// Requests in the running set.
    pub running: u32,
    /// KV in use (blocks × block size) [tokens].
    pub kv_used_tokens: u64,
    /// Prefix cache: blocks in the cache, held or idle (× block size) [tokens]; 0 with
    /// the cache off, and then not written out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_cached_tokens: u64,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// The sampling grid and the samples taken so far.
#[derive(Debug)]
pub(super) struct Sampler {
    /// Spacing of the grid [s].
    every: f64,
    /// The next sampling instant, `index · every` (infinite with no time series) [s].
    pub(super) next: f64,
    index: u64,
    /// Thin the grid when the sample of this index is due (2 · points + 1).
    thin_at: u64,
    pub(super) points: Vec<TimePoint>,
}

impl Sampler {
    /// `points` instants per `horizon` [s]; none at all for `points` = 0.
    pub(super) fn new(horizon: f64, points: u32) -> Sampler {
        let (every, next) = if points > 0 {
            (horizon / points as f64, 0.0)
        } else {
            (f64::INFINITY, f64::INFINITY)
        };
        Sampler {
            every,
            next,
            index: 0,
            thin_at: 2 * points as u64 + 1,
            points: Vec::new(),
        }
    }

    /// Records the state at the instant [`Sampler::next`] and moves to the following one.
    #[inline]
    pub(super) fn record(
        &mut self,
        waiting: u32,
        running: u32,
        kv_used_tokens: u64,
        kv_cached_tokens: u64,
    ) {
        let t = self.next;
        self.index += 1;
        self.points.push(TimePoint {
            t_s: t,
            waiting,
            running,
            kv_used_tokens,
            kv_cached_tokens,
        });
        if self.index == self.thin_at {
            self.thin();
        }
        self.next = count_f64(self.index) * self.every;
    }

    /// Keeps the samples at even indices and doubles the spacing: instant `2j` of the
    /// old grid is instant `j` of the new one, the same number (`j · 2e = 2j · e` exactly
    /// in binary floating point).
    #[cold]
    fn thin(&mut self) {
        let mut i = 0;
        self.points.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        self.every *= 2.0;
        self.index = self.points.len() as u64;
    }
}
