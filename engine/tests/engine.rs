//! The engine's integration tests, one binary, its modules in `engine/`: the conformance
//! suite (the shared check below, run against every policy × KV mode), oracle tests
//! against exact queueing results, determinism and invalid input, server models, what a
//! run reports (reuse, time series), resource limits and the profiler study's findings.

#[path = "engine/common.rs"]
mod common;
#[path = "engine/conformance.rs"]
mod conformance;
#[path = "engine/determinism.rs"]
mod determinism;
#[path = "engine/disagg.rs"]
mod disagg;
#[path = "engine/events.rs"]
mod events;
#[path = "engine/fleet.rs"]
mod fleet;
#[path = "engine/fleet_events.rs"]
mod fleet_events;
#[path = "engine/limits.rs"]
mod limits;
#[path = "engine/oracle.rs"]
mod oracle;
#[path = "engine/prefix.rs"]
mod prefix;
#[path = "engine/profiler_study.rs"]
mod profiler_study;
#[path = "engine/runs.rs"]
mod runs;
#[path = "engine/servers.rs"]
mod servers;
#[path = "engine/slot.rs"]
mod slot;
#[path = "engine/users.rs"]
mod users;

use engine::config::{Admission, EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
use engine::cost::{CostModel, LinearCost, TableCost};
use engine::metrics::MetricsConfig;
use engine::record::Outcome;
use engine::sim::{digest, simulate};
use engine::workload::{ArrivalProcess, LengthDist, Workload};

/// Tolerances, named in one place.
mod tol {
    /// Little's law L = λW, relative.
    pub const LITTLE_REL: f64 = 1e-6;
    /// Oracle mean waits, relative (long runs; ~3 standard errors).
    pub const ORACLE_MEAN_REL: f64 = 0.06;
    /// Erlang B blocking, absolute.
    pub const ERLANG_B_ABS: f64 = 0.01;
}

/// Short lognormal lengths (prompt median 64, output median 48): many requests per second
/// of simulated time.
fn lognormal() -> LengthDist {
    LengthDist::Lognormal {
        prompt_median: 64.0,
        prompt_sigma: 0.8,
        output_median: 48.0,
        output_sigma: 0.9,
    }
}

fn base(policy: Policy, kv_mode: KvMode, lengths: LengthDist, rate: f64) -> SimConfig {
    SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths,
            max_model_len: None,
            shared: None,
        },
        server: ServerConfig {
            policy,
            max_batch: 8,
            kv_tokens: 4096,
            block_size: if kv_mode == KvMode::Paged { 16 } else { 1 },
            token_budget: 256,
            kv_mode,
            watermark: 0.01,
            queue_cap: None,
            admission: Admission::All,
            overhead_s: 0.0,
            overhead_per_token_s: 0.0,
            step_overhead_s: 0.0,
            idle_wake: Vec::new(),
            prefix_cache: engine::PrefixCache::Off,
        },
        cost: CostModel::default(),
        horizon_s: 150.0,
        end: EndRule::Drain,
        first_token: FirstToken::AfterPrefill,
        metrics: MetricsConfig::default(),
        seed: 11,
        keep_records: true,
        timeseries_points: 200,
    }
}

/// A linear cost that charges context tokens (so the event loop keeps every field exact).
fn context_linear_cost() -> CostModel {
    CostModel::Linear(LinearCost {
        beta0: 0.004,
        beta_prefill: 5e-5,
        beta_decode: 3e-4,
        beta_kv: 1e-7,
        ..LinearCost::default()
    })
}

/// Every invariant a run must satisfy.
fn check_conformance(cfg: &SimConfig, label: &str) {
    let rep = simulate(cfg).unwrap_or_else(|e| panic!("{label}: {e}"));
    let st = &rep.stats;
    let recs = &rep.records;
    // No request lost or duplicated.
    assert_eq!(
        recs.len() as u64,
        st.arrivals,
        "{label}: records vs arrivals"
    );
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r.id, i as u64, "{label}: ids must be 0..n exactly once");
    }
    let s = &rep.summary;
    assert_eq!(
        s.completed + s.rejected + s.unfinished + s.errors,
        s.arrivals,
        "{label}: outcomes add up"
    );
    let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
    for (r, q) in recs.iter().zip(&reqs) {
        assert_eq!(r.arrival_s, q.arrival, "{label}");
        if r.outcome == Outcome::Completed {
            assert_eq!(
                r.output_tokens, q.output,
                "{label}: request {} produced every token",
                r.id
            );
            let (f, e) = (r.first_token_s.unwrap(), r.finish_s.unwrap());
            assert!(
                r.arrival_s <= f && f <= e,
                "{label}: arrival <= first token <= finish for {}",
                r.id
            );
            if r.output_tokens >= 2 {
                let mean_gap = (e - f) / (r.output_tokens - 1) as f64;
                assert!(
                    r.max_gap_s >= mean_gap * (1.0 - 1e-9),
                    "{label}: max gap >= mean gap"
                );
            }
        }
    }
    // KV never over capacity and fully released after draining.
    assert!(
        st.kv_peak_tokens <= st.kv_capacity_tokens,
        "{label}: KV over capacity"
    );
    if cfg.end == EndRule::Drain {
        assert_eq!(st.kv_used_at_end_tokens, 0, "{label}: KV not released");
        assert_eq!(s.unfinished, 0, "{label}: drain leaves nothing unfinished");
    }
    for p in &rep.timeseries {
        assert!(p.kv_used_tokens <= st.kv_capacity_tokens, "{label}");
        assert!(
            p.running <= cfg.server.max_batch.max(1),
            "{label}: batch over B"
        );
    }
    // Time monotone.
    assert!(st.time_monotone, "{label}: time went backwards");
    assert!(
        rep.timeseries.windows(2).all(|w| w[0].t_s <= w[1].t_s),
        "{label}: time series not monotone"
    );
    // Little's law L = λ W over the run (accepted requests).
    if cfg.end == EndRule::Drain && st.departed > 0 {
        let lambda = st.accepted as f64 / st.end_s;
        let w = st.sojourn_sum_s / st.departed as f64;
        let l = st.time_avg_in_system;
        assert!(
            (l - lambda * w).abs() <= tol::LITTLE_REL * l.max(1e-9) + 1e-9,
            "{label}: Little L={l} λW={}",
            lambda * w
        );
    }
}
