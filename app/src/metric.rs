//! The metrics a chart can show, read the same way from a simulated or a measured
//! [`Summary`], with their labels and units.

use engine::metrics::{PrefixSummary, Summary};
use serde::{Deserialize, Serialize};

/// One plotted metric.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    MeanTtft,
    P50Ttft,
    P95Ttft,
    #[default]
    P99Ttft,
    MeanTpot,
    P99Tpot,
    MeanE2e,
    /// Completed requests per second — goodput (a).
    Goodput,
    /// Requests meeting both SLOs per second — goodput (b).
    SloGoodput,
    Blocking,
    /// Preemptions per arrival.
    Preemptions,
    /// Prefix cache: prompt tokens found cached / prompt tokens to prefill
    /// (docs/model.md, Prefix caching; `engine::metrics::PrefixSummary`).
    PrefixHitRate,
    /// Prefix cache: full prompt blocks found / full prompt blocks looked up.
    PrefixBlockHitRate,
}

impl Metric {
    pub const ALL: [Metric; 13] = [
        Metric::MeanTtft,
        Metric::P50Ttft,
        Metric::P95Ttft,
        Metric::P99Ttft,
        Metric::MeanTpot,
        Metric::P99Tpot,
        Metric::MeanE2e,
        Metric::Goodput,
        Metric::SloGoodput,
        Metric::Blocking,
        Metric::Preemptions,
        Metric::PrefixHitRate,
        Metric::PrefixBlockHitRate,
    ];
    /// Number of metrics (length of per-metric arrays).
    pub const N: usize = Metric::ALL.len();

    /// Position in [`Metric::ALL`].
    pub fn index(self) -> usize {
        Metric::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }

    /// Stable short name (URL and CSV).
    pub fn key(self) -> &'static str {
        match self {
            Metric::MeanTtft => "mean_ttft",
            Metric::P50Ttft => "p50_ttft",
            Metric::P95Ttft => "p95_ttft",
            Metric::P99Ttft => "p99_ttft",
            Metric::MeanTpot => "mean_tpot",
            Metric::P99Tpot => "p99_tpot",
            Metric::MeanE2e => "mean_e2e",
            Metric::Goodput => "goodput",
            Metric::SloGoodput => "slo_goodput",
            Metric::Blocking => "blocking",
            Metric::Preemptions => "preemptions",
            Metric::PrefixHitRate => "prefix_hit_rate",
            Metric::PrefixBlockHitRate => "prefix_block_hit_rate",
        }
    }

    pub fn from_key(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == s)
    }

    /// Human label with unit.
    pub fn label(self) -> &'static str {
        match self {
            Metric::MeanTtft => "mean TTFT [s]",
            Metric::P50Ttft => "p50 TTFT [s]",
            Metric::P95Ttft => "p95 TTFT [s]",
            Metric::P99Ttft => "p99 TTFT [s]",
            Metric::MeanTpot => "mean TPOT [s]",
            Metric::P99Tpot => "p99 TPOT [s]",
            Metric::MeanE2e => "mean E2E latency [s]",
            Metric::Goodput => "goodput (completed) [req/s]",
            Metric::SloGoodput => "SLO goodput [req/s]",
            Metric::Blocking => "blocking probability",
            Metric::Preemptions => "preemptions per request",
            Metric::PrefixHitRate => "prefix-cache hit rate (prompt tokens)",
            Metric::PrefixBlockHitRate => "prefix-cache hit rate (blocks)",
        }
    }

    /// CSV column name with unit.
    pub fn column(self) -> &'static str {
        match self {
            Metric::MeanTtft => "mean_ttft_s",
            Metric::P50Ttft => "p50_ttft_s",
            Metric::P95Ttft => "p95_ttft_s",
            Metric::P99Ttft => "p99_ttft_s",
            Metric::MeanTpot => "mean_tpot_s",
            Metric::P99Tpot => "p99_tpot_s",
            Metric::MeanE2e => "mean_e2e_s",
            Metric::Goodput => "goodput_rps",
            Metric::SloGoodput => "slo_goodput_rps",
            Metric::Blocking => "blocking_probability",
            Metric::Preemptions => "preemptions_per_request",
            Metric::PrefixHitRate => "prefix_token_hit_rate",
            Metric::PrefixBlockHitRate => "prefix_block_hit_rate",
        }
    }

    /// The metric's name without its unit ("p99 TTFT"): axes and tables write the unit
    /// into each value ([`crate::format::value`]).
    pub fn name(self) -> &'static str {
        match self {
            Metric::MeanTtft => "mean TTFT",
            Metric::P50Ttft => "p50 TTFT",
            Metric::P95Ttft => "p95 TTFT",
            Metric::P99Ttft => "p99 TTFT",
            Metric::MeanTpot => "mean TPOT",
            Metric::P99Tpot => "p99 TPOT",
            Metric::MeanE2e => "mean E2E latency",
            Metric::Goodput => "goodput (completed)",
            Metric::SloGoodput => "SLO goodput",
            Metric::Blocking => "blocking probability",
            Metric::Preemptions => "preemptions per request",
            Metric::PrefixHitRate => "prefix-cache hit rate (tokens)",
            Metric::PrefixBlockHitRate => "prefix-cache hit rate (blocks)",
        }
    }

    /// Whether the metric is a latency [s].
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::MeanTtft
                | Metric::P50Ttft
                | Metric::P95Ttft
                | Metric::P99Ttft
                | Metric::MeanTpot
                | Metric::P99Tpot
                | Metric::MeanE2e
        )
    }

    /// Whether values near zero are the norm (errors then shown as absolute; docs/model.md, Metrics).
    pub fn is_fraction(self) -> bool {
        matches!(
            self,
            Metric::Blocking
                | Metric::Preemptions
                | Metric::PrefixHitRate
                | Metric::PrefixBlockHitRate
        )
    }

    /// The most the metric can be (a probability or a rate of hits: 1), if it has a bound.
    pub fn upper_bound(self) -> Option<f64> {
        matches!(
            self,
            Metric::Blocking | Metric::PrefixHitRate | Metric::PrefixBlockHitRate
        )
        .then_some(1.0)
    }

    /// Whether the metric is the prefix cache's (no value without it).
    pub fn is_prefix(self) -> bool {
        matches!(self, Metric::PrefixHitRate | Metric::PrefixBlockHitRate)
    }

    /// The metric of one run; `None` when it has no samples (always for the prefix
    /// cache's, which come from the run's bookkeeping: [`Metric::of_prefix`]).
    pub fn of(self, s: &Summary) -> Option<f64> {
        match self {
            Metric::MeanTtft => s.ttft.mean,
            Metric::P50Ttft => s.ttft.p50,
            Metric::P95Ttft => s.ttft.p95,
            Metric::P99Ttft => s.ttft.p99,
            Metric::MeanTpot => s.tpot.mean,
            Metric::P99Tpot => s.tpot.p99,
            Metric::MeanE2e => s.e2e.mean,
            Metric::Goodput => Some(s.throughput_rps),
            Metric::SloGoodput => Some(s.slo_goodput_rps),
            Metric::Blocking => Some(s.blocking_probability),
            Metric::Preemptions => {
                (s.arrivals > 0).then(|| s.preemptions as f64 / s.arrivals.max(1) as f64)
            }
            // A run's bookkeeping, not its records: see [`Metric::of_prefix`].
            Metric::PrefixHitRate | Metric::PrefixBlockHitRate => None,
        }
    }

    /// A prefix-cache metric of one run's [`PrefixSummary`] (`None` for the others, and
    /// when nothing was looked up).
    pub fn of_prefix(self, p: &PrefixSummary) -> Option<f64> {
        match self {
            Metric::PrefixHitRate => p.token_hit_rate,
            Metric::PrefixBlockHitRate => p.block_hit_rate,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_key(m.key()), Some(m));
            assert_eq!(Metric::ALL[m.index()], m);
        }
    }
}
