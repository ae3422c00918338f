//! The conformance suite's runs beyond the shared check: every policy × KV mode, other
//! cost models and admission, the per-request overhead, paged preemption.

use super::*;

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

#[test]
fn the_first_step_after_idle_pays_the_wake_up_for_the_idle_time() {
    // Spaced arrivals, each long after the last request left: every request meets an idle
    // server, and with nothing else to wait for its TTFT and E2E grow by exactly the
    // wake-up its idle time (from the previous departure, or from 0) prices.
    let wake = vec![(0.05, 0.001), (0.5, 0.004), (2.0, 0.006)];
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            let mut cfg = base(
                policy,
                kv,
                LengthDist::Fixed {
                    prompt: 64,
                    output: 8,
                },
                1.0,
            );
            cfg.workload.arrivals = ArrivalProcess::Timestamps {
                times: vec![0.3, 0.6, 1.5, 4.0, 4.2],
            };
            cfg.keep_records = true;
            let mut with = cfg.clone();
            with.server.idle_wake = wake.clone();
            let label = format!("{policy:?}/{kv:?}/wake");
            let (a, b) = (simulate(&cfg).unwrap(), simulate(&with).unwrap());
            assert_eq!(a.records.len(), 5, "{label}");
            let mut left = 0.0;
            for (x, y) in a.records.iter().zip(&b.records) {
                let w = with.server.wake_s(x.arrival_s - left);
                assert!(w > 0.0, "{label}");
                let (p, q) = (x.ttft().unwrap(), y.ttft().unwrap());
                assert!(
                    (q - p - w).abs() < 1e-12,
                    "{label}: TTFT {p} → {q}, wake {w}"
                );
                let (p, q) = (x.e2e().unwrap(), y.e2e().unwrap());
                assert!(
                    (q - p - w).abs() < 1e-12,
                    "{label}: E2E {p} → {q}, wake {w}"
                );
                left = y.arrival_s + y.e2e().unwrap();
            }
        }
    }
    // Loaded: the wake-up only lengthens steps, so every invariant still holds; a queue
    // that never empties pays nothing.
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            let mut cfg = base(policy, kv, LengthDist::sharegpt(), 6.0);
            cfg.server.idle_wake = wake.clone();
            check_conformance(&cfg, &format!("{policy:?}/{kv:?}/wake, loaded"));
        }
    }
}

#[test]
fn a_wake_up_table_is_held_flat_beyond_its_ends_and_checked() {
    let mut s = ServerConfig {
        idle_wake: vec![(0.1, 0.002), (1.0, 0.005)],
        ..ServerConfig::default()
    };
    assert_eq!(s.wake_s(0.0), 0.002);
    assert_eq!(s.wake_s(30.0), 0.005);
    assert!((s.wake_s(0.55) - 0.0035).abs() < 1e-12);
    s.idle_wake = Vec::new();
    assert_eq!(s.wake_s(5.0), 0.0);
    let mut cfg = base(Policy::Chunked, KvMode::Paged, LengthDist::sharegpt(), 1.0);
    for bad in [
        vec![(1.0, 0.001), (0.5, 0.002)],
        vec![(0.1, -0.001)],
        vec![(f64::NAN, 0.001)],
    ] {
        cfg.server.idle_wake = bad.clone();
        let e = simulate(&cfg).unwrap_err().to_string();
        assert!(e.contains("idle wake-up"), "{bad:?}: {e}");
    }
}
