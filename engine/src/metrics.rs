//! Metrics, defined once (docs/model.md, Metrics) and used by the simulator, the analytical comparisons,
//! bench-native's measurements and the app.
//!
//! * TTFT = first token − arrival; TPOT = (E2E − TTFT)/(output − 1), output > 1; E2E;
//!   ITL max gap per request and stalls above a threshold.
//! * Throughput (completed req/s, output tok/s) over the measurement window.
//! * Goodput (a) completed req/s — the reference study's "goodput"; (b) SLO goodput:
//!   requests meeting TTFT ≤ x and TPOT ≤ y per second (vLLM bench); (c) capacity, the
//!   largest λ with ≥ 90 % SLO attainment, lives in [`crate::analytic`] / sweeps.
//! * Blocking = rejected / arrivals; preemptions.
//! * Percentiles: Hyndman–Fan type 7 (numpy's default), exact up to
//!   [`EXACT_SAMPLES`] values, then an HDR histogram at 3 significant digits (≤ 0.1 %
//!   relative error, bounded memory).
//! * Seed aggregation: mean, population std, Student-t 95 % CI.

mod aggregate;
mod disagg;
mod prefix;
mod quantiles;

pub use aggregate::{student_t_975, Aggregate};
pub use disagg::{pool_utilisation, TransferAccumulator, TransferSummary};
pub use prefix::{hit_rate, PrefixAccumulator, PrefixSummary};
pub use quantiles::{percentile_type7, Quantiles, EXACT_SAMPLES};

use crate::record::{Outcome, RequestRecord};
use serde::{Deserialize, Serialize};

/// How records are summarised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsConfig {
    /// A gap longer than this is a stall [s] (default 0.05).
    pub stall_threshold_s: f64,
    /// TTFT SLO for SLO goodput [s].
    pub slo_ttft_s: f64,
    /// TPOT SLO for SLO goodput [s].
    pub slo_tpot_s: f64,
    /// Records arriving before this are warm-up and ignored [s].
    pub warmup_s: f64,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            stall_threshold_s: 0.05,
            slo_ttft_s: 1.0,
            slo_tpot_s: 0.05,
            warmup_s: 0.0,
        }
    }
}

/// Distribution statistics of one latency [s]. `None` fields mean "no samples".
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    pub n: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub p999: Option<f64>,
    pub max: Option<f64>,
}

/// The summary of one run (simulated or measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests offered after warm-up [count].
    pub arrivals: u64,
    pub completed: u64,
    pub rejected: u64,
    pub unfinished: u64,
    pub errors: u64,
    /// Measurement window [s] that rates are divided by.
    pub window_s: f64,
    pub ttft: Dist,
    pub tpot: Dist,
    pub e2e: Dist,
    pub itl_max: Dist,
    /// Completed requests per second — goodput (a), the reference study's "goodput".
    pub throughput_rps: f64,
    /// Output tokens of completed requests per second.
    pub output_tokens_per_s: f64,
    /// Requests meeting TTFT ≤ slo_ttft and TPOT ≤ slo_tpot per second — goodput (b).
    pub slo_goodput_rps: f64,
    /// Fraction of offered (non-rejected… all) arrivals meeting the SLO.
    pub slo_attainment: Option<f64>,
    /// rejected / arrivals (0 with no arrivals).
    pub blocking_probability: f64,
    /// Total preemptions [count].
    pub preemptions: u64,
    /// Total stalls above the threshold [count].
    pub stalls: u64,
}

/// Streams records into a [`Summary`] with bounded memory.
#[derive(Debug)]
pub struct Accumulator {
    cfg: MetricsConfig,
    ttft: Quantiles,
    tpot: Quantiles,
    e2e: Quantiles,
    itl_max: Quantiles,
    arrivals: u64,
    completed: u64,
    rejected: u64,
    unfinished: u64,
    errors: u64,
    output_tokens: u64,
    slo_ok: u64,
    preemptions: u64,
    stalls: u64,
}

impl Accumulator {
    pub fn new(cfg: MetricsConfig) -> Accumulator {
        Accumulator::with_capacity(cfg, 0)
    }

    /// An accumulator with room for about `records` completed requests' latencies, so
    /// pushing does not reallocate (a hint; see [`Quantiles::with_capacity`]).
    pub fn with_capacity(cfg: MetricsConfig, records: usize) -> Accumulator {
        Accumulator {
            cfg,
            ttft: Quantiles::with_capacity(records),
            tpot: Quantiles::with_capacity(records),
            e2e: Quantiles::with_capacity(records),
            itl_max: Quantiles::with_capacity(records),
            arrivals: 0,
            completed: 0,
            rejected: 0,
            unfinished: 0,
            errors: 0,
            output_tokens: 0,
            slo_ok: 0,
            preemptions: 0,
            stalls: 0,
        }
    }

    /// Adds one record (warm-up arrivals are ignored).
    #[inline]
    pub fn push(&mut self, r: &RequestRecord) {
        if r.arrival_s < self.cfg.warmup_s {
            return;
        }
        self.arrivals += 1;
        self.preemptions += r.preemptions as u64;
        match r.outcome {
            Outcome::Rejected => self.rejected += 1,
            Outcome::Unfinished => self.unfinished += 1,
            Outcome::Error => self.errors += 1,
            Outcome::Completed => {
                self.completed += 1;
                self.output_tokens += r.output_tokens as u64;
                self.stalls += r.stalls as u64;
                let ttft = r.ttft();
                if let Some(x) = ttft {
                    self.ttft.push(x);
                }
                let tpot = r.tpot();
                if let Some(x) = tpot {
                    self.tpot.push(x);
                }
                if let Some(x) = r.e2e() {
                    self.e2e.push(x);
                }
                if r.output_tokens > 1 {
                    self.itl_max.push(r.max_gap_s);
                }
                if ttft.is_some_and(|x| x <= self.cfg.slo_ttft_s)
                    && tpot.is_none_or(|x| x <= self.cfg.slo_tpot_s)
                {
                    self.slo_ok += 1;
                }
            }
        }
    }

    /// Adds everything `other` has counted (the servers of a fleet into the fleet).
    pub fn merge(&mut self, other: &Accumulator) {
        self.ttft.merge(&other.ttft);
        self.tpot.merge(&other.tpot);
        self.e2e.merge(&other.e2e);
        self.itl_max.merge(&other.itl_max);
        self.arrivals += other.arrivals;
        self.completed += other.completed;
        self.rejected += other.rejected;
        self.unfinished += other.unfinished;
        self.errors += other.errors;
        self.output_tokens += other.output_tokens;
        self.slo_ok += other.slo_ok;
        self.preemptions += other.preemptions;
        self.stalls += other.stalls;
    }

    /// Finishes with the measurement window [s] that rates are divided by.
    pub fn finish(self, window_s: f64) -> Summary {
        let per_s = |x: u64| {
            if window_s > 0.0 {
                x as f64 / window_s
            } else {
                0.0
            }
        };
        Summary {
            arrivals: self.arrivals,
            completed: self.completed,
            rejected: self.rejected,
            unfinished: self.unfinished,
            errors: self.errors,
            window_s,
            ttft: self.ttft.dist(),
            tpot: self.tpot.dist(),
            e2e: self.e2e.dist(),
            itl_max: self.itl_max.dist(),
            throughput_rps: per_s(self.completed),
            output_tokens_per_s: per_s(self.output_tokens),
            slo_goodput_rps: per_s(self.slo_ok),
            slo_attainment: (self.arrivals > 0).then(|| self.slo_ok as f64 / self.arrivals as f64),
            blocking_probability: if self.arrivals > 0 {
                self.rejected as f64 / self.arrivals as f64
            } else {
                0.0
            },
            preemptions: self.preemptions,
            stalls: self.stalls,
        }
    }
}

/// Summarises a slice of records over `window_s`.
pub fn summarize(records: &[RequestRecord], cfg: &MetricsConfig, window_s: f64) -> Summary {
    let mut acc = Accumulator::new(cfg.clone());
    for r in records {
        acc.push(r);
    }
    acc.finish(window_s)
}
