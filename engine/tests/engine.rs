//! The engine's integration tests, one binary: a conformance suite run against every
//! policy × KV mode, oracle tests against exact queueing results, determinism and invalid
//! input here; resource limits and the profiler study's findings in `engine/`.

#[path = "engine/common.rs"]
mod common;
#[path = "engine/limits.rs"]
mod limits;
#[path = "engine/profiler_study.rs"]
mod profiler_study;

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

fn base(policy: Policy, kv_mode: KvMode, lengths: LengthDist, rate: f64) -> SimConfig {
    SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths,
            max_model_len: None,
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

#[test]
fn conformance_every_policy_and_kv_mode() {
    let lengths = [
        (
            "lognormal",
            LengthDist::Lognormal {
                prompt_median: 64.0,
                prompt_sigma: 0.8,
                output_median: 48.0,
                output_sigma: 0.9,
            },
        ),
        ("mix", LengthDist::short_long_mix()),
    ];
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for (ln, l) in &lengths {
                for rate in [2.0, 12.0] {
                    let cfg = base(policy, kv, l.clone(), rate);
                    check_conformance(&cfg, &format!("{policy:?}/{kv:?}/{ln}/λ={rate}"));
                    let cut = SimConfig {
                        end: EndRule::Cut,
                        first_token: FirstToken::AfterFirstDecode,
                        ..cfg
                    };
                    check_conformance(&cut, &format!("{policy:?}/{kv:?}/{ln}/λ={rate}/cut"));
                }
            }
        }
    }
}

#[test]
fn conformance_other_cost_models_and_admission() {
    let linear = context_linear_cost();
    let table = CostModel::Table(TableCost::a10g_qwen_1_5b());
    for (name, cost) in [("linear", linear), ("table", table)] {
        for policy in Policy::ALL {
            let mut cfg = base(policy, KvMode::Paged, LengthDist::sharegpt(), 6.0);
            cfg.cost = cost.clone();
            cfg.server.kv_tokens = 16384;
            cfg.server.queue_cap = Some(20);
            check_conformance(&cfg, &format!("{name}/{policy:?}"));
            cfg.server.kv_mode = KvMode::Reserve;
            cfg.server.admission = Admission::MaxInSystem { max_in_system: 6 };
            check_conformance(&cfg, &format!("{name}/{policy:?}/threshold"));
        }
    }
}

#[test]
fn per_request_overhead_delays_entry_and_adds_to_every_latency() {
    // A constant overhead moves every entry by the same amount; with drain the whole
    // sample path moves with it, so every first token and finish moves by exactly the
    // overhead (up to rounding), outcomes do not change, and Little's law holds from entry.
    let h = 0.0375;
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            let cfg = base(policy, kv, LengthDist::sharegpt(), 6.0);
            let mut with = cfg.clone();
            with.server.overhead_s = h;
            let label = format!("{policy:?}/{kv:?}/overhead");
            check_conformance(&with, &label);
            let (a, b) = (simulate(&cfg).unwrap(), simulate(&with).unwrap());
            assert!(a.summary.completed > 100, "{label}: a loaded run");
            for (x, y) in a.records.iter().zip(&b.records) {
                assert_eq!(
                    (x.arrival_s, x.outcome),
                    (y.arrival_s, y.outcome),
                    "{label}"
                );
                if let (Some(p), Some(q)) = (x.ttft(), y.ttft()) {
                    assert!((q - p - h).abs() < 1e-9, "{label}: TTFT {p} → {q}");
                    let (p, q) = (x.e2e().unwrap(), y.e2e().unwrap());
                    assert!((q - p - h).abs() < 1e-9, "{label}: E2E {p} → {q}");
                }
            }
            let shift = b.summary.ttft.p99.unwrap() - a.summary.ttft.p99.unwrap();
            assert!((shift - h).abs() < 1e-9, "{label}: p99 TTFT moved {shift}");
        }
    }
}

#[test]
fn paged_mode_preempts_under_pressure_and_recovers() {
    let mut cfg = base(
        Policy::Continuous,
        KvMode::Paged,
        LengthDist::Fixed {
            prompt: 100,
            output: 400,
        },
        4.0,
    );
    cfg.server.kv_tokens = 1600;
    cfg.server.max_batch = 16;
    let rep = simulate(&cfg).unwrap();
    assert!(rep.summary.preemptions > 0, "a small cache must preempt");
    assert_eq!(rep.summary.rejected, 0);
    check_conformance(&cfg, "paged pressure");
}

/// Oracle workload: a single server whose service time is (output − 1) decode steps of
/// `d`, prefill free, first token at prefill: TTFT is exactly the M/G/1 queueing delay.
fn mg1_config(pairs: Vec<(u32, u32)>, rate: f64, d: f64, horizon: f64) -> SimConfig {
    SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths: LengthDist::Empirical { pairs },
            max_model_len: None,
        },
        server: ServerConfig {
            policy: Policy::Serial,
            max_batch: 1,
            kv_tokens: 1 << 40,
            ..ServerConfig::default()
        },
        cost: CostModel::Table(TableCost {
            decode: vec![(1.0, d)],
            prefill: vec![(0.0, 0.0)],
        }),
        horizon_s: horizon,
        end: EndRule::Drain,
        first_token: FirstToken::AfterPrefill,
        metrics: MetricsConfig::default(),
        seed: 3,
        keep_records: false,
        timeseries_points: 0,
    }
}

/// Pollaczek–Khinchine mean wait for service S = (out − 1)·d.
fn pk_wait(pairs: &[(u32, u32)], rate: f64, d: f64) -> f64 {
    let n = pairs.len() as f64;
    let s1 = pairs.iter().map(|p| (p.1 - 1) as f64 * d).sum::<f64>() / n;
    let s2 = pairs
        .iter()
        .map(|p| ((p.1 - 1) as f64 * d).powi(2))
        .sum::<f64>()
        / n;
    let rho = rate * s1;
    assert!(rho < 1.0);
    rate * s2 / (2.0 * (1.0 - rho))
}

#[test]
fn oracle_mm1_mean_wait() {
    // Geometric output (mean 200) ≈ exponential service with mean ~1 s; ρ = 0.6.
    let n = 4000;
    let p = 1.0 / 200.0;
    let pairs: Vec<(u32, u32)> = (0..n)
        .map(|i| {
            let u = (i as f64 + 0.5) / n as f64;
            (1, 2 + ((1.0 - u).ln() / (1.0f64 - p).ln()).floor() as u32)
        })
        .collect();
    let (rate, d) = (0.6, 0.005);
    let cfg = mg1_config(pairs.clone(), rate, d, 200_000.0);
    let rep = simulate(&cfg).unwrap();
    let want = pk_wait(&pairs, rate, d);
    let got = rep.summary.ttft.mean.unwrap();
    assert!(
        (got - want).abs() / want < tol::ORACLE_MEAN_REL,
        "M/M/1 wait: sim {got} vs exact {want}"
    );
    // M/M/1: the wait is 0 with probability 1 − ρ, so the median TTFT is ~0 at ρ = 0.6... and
    // P(W > t) = ρ e^{−(μ−λ)t}: the p95 is ln(ρ/0.05)/(μ−λ).
    let mean_s: f64 = pairs.iter().map(|p| (p.1 - 1) as f64 * d).sum::<f64>() / n as f64;
    let rho = rate * mean_s;
    let p95 = (rho / 0.05).ln() / (1.0 / mean_s - rate);
    let got95 = rep.summary.ttft.p95.unwrap();
    assert!(
        (got95 - p95).abs() / p95 < 0.08,
        "M/M/1 p95 wait: sim {got95} vs {p95}"
    );
}

#[test]
fn oracle_md1_mean_wait() {
    let pairs = vec![(1, 201)]; // deterministic 1 s service
    let (rate, d) = (0.7, 0.005);
    let rep = simulate(&mg1_config(pairs.clone(), rate, d, 30_000.0)).unwrap();
    let want = pk_wait(&pairs, rate, d); // ρ/(2μ(1−ρ)) = 0.7/(2·0.3) = 1.1667
    let got = rep.summary.ttft.mean.unwrap();
    assert!((want - 7.0 / 6.0).abs() < 1e-9);
    assert!(
        (got - want).abs() / want < tol::ORACLE_MEAN_REL,
        "M/D/1 wait: sim {got} vs exact {want}"
    );
}

fn erlang_b(c: u32, a: f64) -> f64 {
    (1..=c).fold(1.0, |b, k| a * b / (k as f64 + a * b))
}

#[test]
fn oracle_erlang_b_reserve_loss() {
    // Each request reserves 100 tokens; K = 400 → c = 4 "servers"; B large so nobody waits.
    // Decode step constant (flat table), prefill free: holding time = (out − 1)·d plus the
    // wait for the next iteration boundary (d/2 on average). Erlang B is insensitive to the
    // holding-time distribution.
    let (c, d, out) = (4u32, 0.01, 100u32);
    let rate = 3.0;
    let cfg = SimConfig {
        workload: Workload {
            arrivals: ArrivalProcess::Poisson { rate },
            lengths: LengthDist::Fixed {
                prompt: 1,
                output: out - 1,
            },
            max_model_len: None,
        },
        server: ServerConfig {
            policy: Policy::Continuous,
            max_batch: 64,
            kv_tokens: 400,
            ..ServerConfig::default()
        },
        cost: CostModel::Table(TableCost {
            decode: vec![(1.0, d)],
            prefill: vec![(0.0, 0.0)],
        }),
        horizon_s: 40_000.0,
        ..mg1_config(vec![(1, 2)], rate, d, 1.0)
    };
    let rep = simulate(&cfg).unwrap();
    let hold = (out - 2) as f64 * d + d / 2.0;
    let want = erlang_b(c, rate * hold);
    let got = rep.summary.blocking_probability;
    assert!(
        (got - want).abs() < tol::ERLANG_B_ABS,
        "Erlang B: sim {got} vs exact {want}"
    );
}

#[test]
fn determinism_same_seed_same_records() {
    for policy in Policy::ALL {
        let cfg = base(policy, KvMode::Paged, LengthDist::sharegpt(), 5.0);
        let a = simulate(&cfg).unwrap();
        let b = simulate(&cfg).unwrap();
        assert_eq!(a.records, b.records);
        assert_eq!(digest(&a.records), digest(&b.records));
        let other = simulate(&SimConfig { seed: 12, ..cfg }).unwrap();
        assert_ne!(digest(&a.records), digest(&other.records));
    }
}

/// The wasm test (engine/tests/wasm.rs, run in Node) reproduces the same digest.

#[test]
fn native_digest_matches_golden() {
    let rep = simulate(&common::wasm_digest_config()).unwrap();
    assert_eq!(
        digest(&rep.records),
        common::GOLDEN_DIGEST,
        "update common::GOLDEN_DIGEST only for a deliberate model change"
    );
}

#[test]
fn invalid_configurations_are_errors_not_panics() {
    let ok = SimConfig::reference(1.0, 4, 4096);
    let mut bad = vec![
        SimConfig::reference(0.0, 4, 4096),
        SimConfig::reference(-1.0, 4, 4096),
        SimConfig::reference(f64::NAN, 4, 4096),
        SimConfig::reference(1.0, 0, 4096),
        SimConfig::reference(1.0, 4, 1),
        SimConfig {
            horizon_s: f64::NAN,
            ..ok.clone()
        },
        SimConfig {
            horizon_s: 0.0,
            ..ok.clone()
        },
    ];
    let mut fixed = ok.clone();
    fixed.workload.lengths = LengthDist::Fixed {
        prompt: 3000,
        output: 2000,
    };
    bad.push(fixed);
    let mut lin = ok.clone();
    lin.cost = CostModel::Linear(LinearCost {
        beta0: f64::NAN,
        ..LinearCost::default()
    });
    bad.push(lin);
    let mut sig = ok.clone();
    sig.workload.lengths = LengthDist::Lognormal {
        prompt_median: 10.0,
        prompt_sigma: -1.0,
        output_median: 1.0,
        output_sigma: 0.1,
    };
    bad.push(sig);
    for h in [-0.001, f64::NAN, f64::INFINITY] {
        let mut o = ok.clone();
        o.server.overhead_s = h;
        bad.push(o);
    }
    for cfg in bad {
        let e = simulate(&cfg).expect_err("invalid config must be an error");
        assert!(!e.to_string().is_empty());
    }
    assert!(simulate(&ok).is_ok());
}

#[test]
fn reference_mode_first_token_is_one_decode_later() {
    let mut cfg = SimConfig::reference(0.2, 4, 100_000);
    cfg.keep_records = true;
    cfg.horizon_s = 200.0;
    let a = simulate(&cfg).unwrap();
    cfg.first_token = FirstToken::AfterPrefill;
    let b = simulate(&cfg).unwrap();
    // Same requests; in reference mode TTFT is later, and output 1 means TTFT = E2E.
    assert!(a.summary.ttft.mean.unwrap() > b.summary.ttft.mean.unwrap());
    for r in a
        .records
        .iter()
        .filter(|r| r.outcome == Outcome::Completed && r.output_tokens == 1)
    {
        assert_eq!(r.first_token_s, r.finish_s);
    }
}

#[test]
fn chunked_prefill_cuts_decode_stalls() {
    // The profiler study's interference scenario: long prompts arriving mid-stream.
    use engine::workload::TraceRequest;
    let tr = |t: f64, p: u32, o: u32, c: u16| TraceRequest {
        arrival: t,
        prompt: p,
        output: o,
        class: c,
    };
    let trace = vec![
        tr(0.0, 32, 64, 0),
        tr(0.0, 32, 64, 0),
        tr(0.1, 512, 32, 1),
        tr(0.1, 512, 32, 1),
        tr(0.3, 32, 64, 0),
        tr(0.3, 32, 64, 0),
    ];
    let mk = |policy, budget| {
        let mut cfg = base(policy, KvMode::Paged, LengthDist::reference(), 1.0);
        cfg.workload.arrivals = ArrivalProcess::Trace {
            requests: trace.clone(),
        };
        cfg.server.token_budget = budget;
        cfg.server.kv_tokens = 65536;
        cfg.cost = CostModel::Linear(LinearCost {
            beta0: 0.002,
            beta_prefill: 4.5e-4,
            beta_decode: 1.3e-3,
            beta_kv: 0.0,
            ..LinearCost::default()
        });
        cfg.horizon_s = 10.0;
        simulate(&cfg).unwrap()
    };
    let eager = mk(Policy::Continuous, 2048);
    let chunked = mk(Policy::Chunked, 32);
    let worst = |r: &engine::sim::SimReport| {
        r.records
            .iter()
            .filter(|r| r.class == 0)
            .map(|r| r.max_gap_s)
            .fold(0.0, f64::max)
    };
    assert!(
        worst(&chunked) < worst(&eager),
        "chunked {} vs eager {}",
        worst(&chunked),
        worst(&eager)
    );
}

#[test]
fn llama_cpp_slots_never_block_on_kv_and_cap_each_request_at_its_slot() {
    // 4 slots × 512 tokens, overloaded with ShareGPT lengths (many longer than a slot).
    let mut cfg = SimConfig::llama_cpp(3.0, 4, 2048, 256);
    cfg.workload.lengths = LengthDist::sharegpt();
    cfg.horizon_s = 60.0;
    cfg.keep_records = true;
    cfg.timeseries_points = 400;
    let slot = cfg.server.slot_context();
    assert_eq!(slot, 512);
    let r = simulate(&cfg).unwrap();
    assert!(r.summary.arrivals > 100);
    assert_eq!(r.summary.rejected, 0, "a free slot always has its KV");
    assert_eq!(
        r.summary.preemptions, 0,
        "slots own their KV: no preemption"
    );
    assert!(r.timeseries.iter().all(|p| p.running <= 4));
    assert!(
        r.timeseries.iter().any(|p| p.waiting > 0),
        "overloaded: a queue forms"
    );
    for rec in &r.records {
        assert!(
            rec.prompt_tokens as u64 + rec.output_tokens as u64 <= slot,
            "{rec:?} overflows its slot"
        );
    }
    assert!(r.stats.kv_peak_tokens <= 2048);
    // Reserving at arrival instead (a loss system) would turn the queue into rejections.
    let mut reserve = cfg.clone();
    reserve.server.kv_mode = KvMode::Reserve;
    assert!(simulate(&reserve).unwrap().summary.rejected > 0);
}

#[test]
fn vllm_v1_preempts_when_its_blocks_run_out_and_has_no_watermark() {
    let server = ServerConfig::vllm_v1(8, 6, 128, 512);
    assert_eq!(server.kv_tokens, 768);
    assert_eq!(server.watermark, 0.0);
    let mut cfg = SimConfig::vllm_like(8.0);
    cfg.server = server;
    cfg.workload.lengths = LengthDist::Fixed {
        prompt: 128,
        output: 128,
    };
    cfg.horizon_s = 3.0;
    let r = simulate(&cfg).unwrap();
    assert!(
        r.summary.preemptions > 0,
        "8 × 256 tokens in 768 must preempt"
    );
    assert_eq!(
        r.summary.completed, r.summary.arrivals,
        "all finish after preemption"
    );
    // With room for everyone, nothing is preempted.
    cfg.server = ServerConfig::vllm_v1(8, 64, 128, 512);
    assert_eq!(simulate(&cfg).unwrap().summary.preemptions, 0);
}

/// A run that [`run_also_holds_for`] says stands for another (B, K) must be that run, record
/// for record, over every policy × KV mode × end rule × cost; and the rule must actually
/// apply where it should (reserve mode, B or K not binding), or a sweep would reuse nothing.
#[test]
fn a_run_stands_for_another_width_or_kv_only_when_it_is_identical() {
    use engine::sim::run_also_holds_for;
    let context_cost = context_linear_cost();
    let widths = [1, 2, 3, 4, 8, 16];
    let kvs = [1000, 2048, 4096, 8192, 65536];
    let mut held_elsewhere = Vec::new();
    for policy in Policy::ALL {
        let mut held = 0;
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for cut in [false, true] {
                for (cost_name, cost) in [
                    ("default", CostModel::default()),
                    ("context", context_cost.clone()),
                ] {
                    for rate in [1.5, 6.0] {
                        let mut cfg = base(policy, kv, LengthDist::sharegpt(), rate);
                        cfg.horizon_s = 60.0;
                        cfg.cost = cost.clone();
                        if cut {
                            cfg.end = EndRule::Cut;
                            cfg.first_token = FirstToken::AfterFirstDecode;
                        }
                        if rate > 2.0 && cost_name == "context" {
                            cfg.server.admission = Admission::MaxInSystem { max_in_system: 10 };
                        }
                        let mut runs = Vec::new();
                        for &b in &widths {
                            for &k in &kvs {
                                let mut c = cfg.clone();
                                c.server.max_batch = b;
                                c.server.kv_tokens = k;
                                let rep = simulate(&c).unwrap();
                                runs.push((c, digest(&rep.records), rep));
                            }
                        }
                        for (a, da, ra) in &runs {
                            for (b, db, rb) in &runs {
                                let (wb, kb) = (b.server.max_batch, b.server.kv_tokens);
                                if !run_also_holds_for(&a.server, &ra.stats, wb, kb) {
                                    continue;
                                }
                                let label = format!(
                                    "{policy:?}/{kv:?}/cut={cut}/{cost_name}/λ={rate}: \
                                     B {} K {} stands for B {wb} K {kb}",
                                    a.server.max_batch, a.server.kv_tokens
                                );
                                assert_eq!(da, db, "{label}: records differ");
                                assert_eq!(ra.summary, rb.summary, "{label}");
                                assert_eq!(ra.timeseries, rb.timeseries, "{label}");
                                if a.server.max_batch != wb || a.server.kv_tokens != kb {
                                    assert_eq!(kv, KvMode::Reserve, "{label}: reserve mode only");
                                    assert_ne!(policy, Policy::LlamaCpp, "{label}");
                                    held += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        held_elsewhere.push((policy, held));
    }
    // Light runs (λ 1.5, a large K or B) stand for others under every policy it covers.
    for (policy, held) in held_elsewhere {
        assert_eq!(
            held > 20,
            policy != Policy::LlamaCpp,
            "{policy:?}: a run stood for another (B, K) {held} times"
        );
    }
}

/// The time series is the state at regular instants `i · horizon / points`: here checked
/// against the state rebuilt from the records (reserve mode, no preemption: a request
/// waits from its arrival until it is admitted, runs until it finishes, and holds its
/// reservation all that time). Long decode runs with no event inside must not skip
/// instants (B 16 at a low rate has runs of many instants).
#[test]
fn the_time_series_is_the_state_at_every_sampling_instant() {
    for (rate, b, kv, cut) in [
        (3.0, 4, 8192, false),
        (0.5, 16, 65536, false),
        (6.0, 8, 4096, true),
    ] {
        let mut cfg = SimConfig::reference(rate, b, kv);
        cfg.horizon_s = 200.0;
        cfg.keep_records = true;
        cfg.timeseries_points = 1000;
        if !cut {
            cfg.end = EndRule::Drain;
        }
        let label = format!("λ {rate} B {b} K {kv} cut {cut}");
        let r = simulate(&cfg).unwrap();
        let every = cfg.horizon_s / 1000.0;
        let end = r.stats.end_s;
        assert_eq!(
            r.timeseries.len(),
            (end / every).floor() as usize + 1,
            "{label}"
        );
        let accepted: Vec<_> = r
            .records
            .iter()
            .filter(|x| x.outcome != Outcome::Rejected)
            .collect();
        for (i, p) in r.timeseries.iter().enumerate() {
            let at = p.t_s;
            assert_eq!(at, i as f64 * every, "{label}: instant {i}");
            let waiting = accepted
                .iter()
                .filter(|x| x.arrival_s <= at && x.admitted_s.is_none_or(|a| a > at))
                .count();
            let running: Vec<_> = accepted
                .iter()
                .filter(|x| {
                    x.admitted_s.is_some_and(|a| a <= at) && x.finish_s.is_none_or(|f| f > at)
                })
                .collect();
            assert_eq!(p.waiting as usize, waiting, "{label}: waiting at {at}");
            assert_eq!(
                p.running as usize,
                running.len(),
                "{label}: running at {at}"
            );
            if !cut {
                // Completed requests generated their whole output: prompt + output is the
                // reservation they held from arrival to finish.
                let kv_used: u64 = accepted
                    .iter()
                    .filter(|x| x.arrival_s <= at && x.finish_s.is_some_and(|f| f > at))
                    .map(|x| x.prompt_tokens as u64 + x.output_tokens as u64)
                    .sum();
                assert_eq!(p.kv_used_tokens, kv_used, "{label}: KV at {at}");
            }
        }
    }
}
