//! The one per-request record shared by simulated and measured runs, so the same metrics
//! code ([`crate::metrics`]) summarises both.

use serde::{Deserialize, Serialize};

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// All output tokens were produced.
    Completed,
    /// Refused at arrival (KV reservation did not fit, queue cap, threshold admission).
    Rejected,
    /// Accepted but not finished when the run was cut at its horizon.
    Unfinished,
    /// A measured request that failed (HTTP error, cut stream, timeout).
    Error,
}

impl Outcome {
    /// Lower-case name as written to CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Rejected => "rejected",
            Outcome::Unfinished => "unfinished",
            Outcome::Error => "error",
        }
    }
}

/// One request's life. Times are absolute [s] on the run's clock (0 = run start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Request id (arrival order).
    pub id: u64,
    /// Class label (mixtures, traces).
    pub class: u16,
    /// Arrival time [s]; for measured runs the **intended** send time (so client-side
    /// queueing counts against latency: no coordinated omission).
    pub arrival_s: f64,
    /// First output token [s], if any.
    pub first_token_s: Option<f64>,
    /// Last output token / completion [s], if finished.
    pub finish_s: Option<f64>,
    /// Prompt length [tokens].
    pub prompt_tokens: u32,
    /// Output tokens produced [tokens].
    pub output_tokens: u32,
    /// Largest gap between consecutive output tokens [s] (0 with fewer than 2 tokens).
    pub max_gap_s: f64,
    /// Gaps longer than the stall threshold [count].
    pub stalls: u32,
    /// Times this request was preempted [count].
    pub preemptions: u32,
    /// What became of it.
    pub outcome: Outcome,
    /// When the request first entered the running set (start of its first prefill) [s];
    /// `None` if it was never admitted (or not known, for measured runs).
    #[serde(default)]
    pub admitted_s: Option<f64>,
    /// Prompt tokens its first admission found in the prefix cache, whose prefill it
    /// skipped [tokens]; 0 with the cache off and on a miss. A measured run takes the
    /// server's own count where the server reports one (`requests.csv`'s `cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u32,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl RequestRecord {
    /// Time to first token [s] = first token − arrival.
    pub fn ttft(&self) -> Option<f64> {
        self.first_token_s.map(|t| t - self.arrival_s)
    }

    /// End-to-end latency [s] = finish − arrival.
    pub fn e2e(&self) -> Option<f64> {
        self.finish_s.map(|t| t - self.arrival_s)
    }

    /// Time per output token [s] = (E2E − TTFT)/(output − 1), defined for output > 1
    /// (vLLM's definition).
    pub fn tpot(&self) -> Option<f64> {
        match (self.first_token_s, self.finish_s) {
            (Some(f), Some(e)) if self.output_tokens > 1 => {
                Some((e - f) / (self.output_tokens - 1) as f64)
            }
            _ => None,
        }
    }
}
