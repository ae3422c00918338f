//! Disaggregated prefill and decode: a hand-computed case, transfer time against the
//! bytes, the conformance checks on P/D fleets, and bad input.

use super::*;
use engine::disagg::{
    simulate_disagg, simulate_disagg_requests, DisaggConfig, DisaggError, DisaggReport,
    FirstTokenFrom, KvGeometry, Link,
};
use engine::fleet::RouterKind;
use engine::workload::Request;

fn qwen() -> KvGeometry {
    KvGeometry::of_model("Qwen2.5-1.5B").unwrap()
}

fn link(gbps: f64, latency_s: f64) -> Link {
    Link {
        bandwidth_bytes_per_s: gbps * 1e9 / 8.0,
        latency_s,
        geometry: qwen(),
    }
}

/// β0 = 10 ms per iteration, 1 ms per prompt token, 2 ms per decoding sequence.
fn hand_cost() -> CostModel {
    CostModel::Linear(LinearCost {
        beta0: 0.010,
        beta_prefill: 0.001,
        beta_decode: 0.002,
        ..LinearCost::default()
    })
}

fn req(id: u64, arrival: f64, prompt: u32, output: u32) -> Request {
    Request {
        id,
        arrival,
        prompt,
        output,
        class: 0,
        group: 0,
        conv: 0,
    }
}

fn hand_config(first: FirstTokenFrom) -> DisaggConfig {
    let mut one = base(
        Policy::Continuous,
        KvMode::Paged,
        LengthDist::sharegpt(),
        1.0,
    );
    one.cost = hand_cost();
    one.timeseries_points = 0;
    let inf = Link {
        bandwidth_bytes_per_s: f64::INFINITY,
        latency_s: 0.0,
        geometry: qwen(),
    };
    DisaggConfig::uniform(one, 1, 1, RouterKind::RoundRobin, inf, first)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-12)
}

#[test]
fn one_plus_one_at_infinite_bandwidth_matches_the_hand_computed_case() {
    // r0 at 0 s, 100 → 4 tokens; r1 at 0.05 s, 20 → 2 tokens.
    // Prefill (one server, one prefill per iteration): r0 [0, 0.01 + 0.100] = 0.11;
    // r1 waits for it, [0.11, 0.11 + 0.01 + 0.020] = 0.14. Instant transfers.
    let reqs = vec![req(0, 0.0, 100, 4), req(1, 0.05, 20, 2)];

    // First token from the prefill pool: the decode pool emits the rest, 12 ms a step
    // alone (0.01 + 0.002). r0: 0.122, 0.134, 0.146. r1 arrives at 0.14 during r0's
    // last step and starts at 0.146: 0.158.
    let rep = simulate_disagg_requests(&hand_config(FirstTokenFrom::Prefill), reqs.clone());
    let (r0, r1) = (&rep.records[0], &rep.records[1]);
    assert!(
        close(r0.first_token_s, 0.11) && close(r0.finish_s, 0.146),
        "{r0:?}"
    );
    assert!(
        close(r1.first_token_s, 0.14) && close(r1.finish_s, 0.158),
        "{r1:?}"
    );
    assert!(close(r0.tpot(), 0.012) && close(r1.tpot(), 0.018));
    assert!((r0.max_gap_s - 0.012).abs() < 1e-12 && (r1.max_gap_s - 0.018).abs() < 1e-12);
    assert_eq!((r0.output_tokens, r1.output_tokens), (4, 2));

    // First token from the decode pool: it emits all of them. r0: 0.122, 0.134, 0.146;
    // r1 arrives at 0.14 and joins at 0.146: two decoders, 0.01 + 0.004 = 14 ms → 0.160
    // (r0's last token, r1's first), then r1 alone → 0.172.
    let rep = simulate_disagg_requests(&hand_config(FirstTokenFrom::Decode), reqs);
    let (r0, r1) = (&rep.records[0], &rep.records[1]);
    assert!(
        close(r0.first_token_s, 0.122) && close(r0.finish_s, 0.160),
        "{r0:?}"
    );
    assert!(
        close(r1.first_token_s, 0.160) && close(r1.finish_s, 0.172),
        "{r1:?}"
    );
    assert!((r0.max_gap_s - 0.014).abs() < 1e-12 && (r1.max_gap_s - 0.012).abs() < 1e-12);
    let h = &rep.handoffs;
    assert!(close(Some(h[0].transfer_end_s), 0.11) && close(Some(h[1].transfer_end_s), 0.14));
    assert!(close(h[1].decode_admitted_s, 0.146));
    // Busy: prefill 0.11 + 0.03 of 0.172; decode 3 × 0.012 + 0.014 + 0.012 of 0.172.
    assert!((rep.prefill.utilisation - 0.14 / 0.172).abs() < 1e-12);
    assert!((rep.decode.utilisation - 0.062 / 0.172).abs() < 1e-12);
}

#[test]
fn transfer_time_scales_with_the_bytes() {
    // Lone requests far apart: no link ever waits, so each transfer is bytes /
    // bandwidth + latency, bytes = layers × 2 × KV heads × head dim × 2 × prompt.
    let g = qwen();
    assert_eq!(g.bytes_per_token(), 28.0 * 2.0 * 2.0 * 128.0 * 2.0);
    let reqs: Vec<Request> = [(64, 8), (256, 8), (1024, 8), (4000, 8)]
        .iter()
        .enumerate()
        .map(|(i, &(p, o))| req(i as u64, i as f64 * 10.0, p, o))
        .collect();
    let mut cfg = hand_config(FirstTokenFrom::Prefill);
    cfg.link = link(10.0, 0.0);
    let rep = simulate_disagg_requests(&cfg, reqs.clone());
    let per_byte = 8.0 / 10e9;
    for (h, q) in rep.handoffs.iter().zip(&reqs) {
        assert_eq!(h.bytes, g.bytes_per_token() * f64::from(q.prompt));
        assert_eq!(h.transfer_start_s, h.prefill_done_s);
        let t = h.transfer_end_s - h.prefill_done_s;
        assert!(
            (t - h.bytes * per_byte).abs() < 1e-12,
            "{t} for {} B",
            h.bytes
        );
    }
    // Doubling the bandwidth halves each transfer; latency adds to each.
    let mut fast = cfg.clone();
    fast.link = link(20.0, 0.002);
    let rep2 = simulate_disagg_requests(&fast, reqs);
    for (a, b) in rep.handoffs.iter().zip(&rep2.handoffs) {
        let (ta, tb) = (
            a.transfer_end_s - a.prefill_done_s,
            b.transfer_end_s - b.prefill_done_s,
        );
        assert!((tb - (ta / 2.0 + 0.002)).abs() < 1e-12);
    }
    // The second token waits for the transfer: TPOT grows with the prompt here.
    let gaps: Vec<f64> = rep.records.iter().map(|r| r.max_gap_s).collect();
    assert!(gaps.windows(2).all(|w| w[0] < w[1]), "{gaps:?}");
}

/// Every invariant of a P/D run.
fn check_disagg(cfg: &DisaggConfig, label: &str) -> DisaggReport {
    let rep = simulate_disagg(cfg).unwrap_or_else(|e| panic!("{label}: {e}"));
    let reqs = cfg
        .base
        .workload
        .generate(cfg.base.seed, cfg.base.horizon_s)
        .unwrap();
    // No request lost or duplicated; every completed one has all its tokens.
    assert_eq!(
        rep.records.len(),
        reqs.len(),
        "{label}: records vs arrivals"
    );
    let s = &rep.summary;
    assert_eq!(s.arrivals, reqs.len() as u64, "{label}");
    assert_eq!(
        s.completed + s.rejected + s.unfinished + s.errors,
        s.arrivals
    );
    assert_eq!(s.unfinished, 0, "{label}: drained");
    for ((r, q), i) in rep.records.iter().zip(&reqs).zip(0u64..) {
        assert_eq!((r.id, r.arrival_s), (i, q.arrival), "{label}");
        if r.outcome == Outcome::Completed {
            assert_eq!(r.output_tokens, q.output, "{label}: request {i}");
            let (f, e) = (r.first_token_s.unwrap(), r.finish_s.unwrap());
            assert!(r.arrival_s <= f && f <= e, "{label}: request {i}");
        }
    }
    // Each handoff in order: prefill, link, decode admission, finish.
    let mut h = rep.handoffs.iter().peekable();
    for r in &rep.records {
        if h.peek().is_some_and(|h| h.id == r.id) {
            let h = h.next().unwrap();
            let adm = h.decode_admitted_s.unwrap();
            assert!(h.prefill_done_s <= h.transfer_start_s, "{label}");
            assert!(h.transfer_start_s <= h.transfer_end_s && h.transfer_end_s <= adm);
            assert!(adm < r.finish_s.unwrap(), "{label}: request {}", r.id);
        }
    }
    assert_eq!(rep.transfer.transfers, rep.handoffs.len() as u64);
    // Each pool's KV within capacity.
    for (pool, p) in [("prefill", &rep.prefill), ("decode", &rep.decode)] {
        for (i, x) in p.replicas.iter().enumerate() {
            assert!(
                x.kv_peak_tokens <= x.kv_capacity_tokens,
                "{label}: {pool} replica {i} KV {} > {}",
                x.kv_peak_tokens,
                x.kv_capacity_tokens
            );
            assert!((0.0..=1.0).contains(&x.utilisation), "{label}: {pool}");
        }
        // Little's law per pool.
        let lambda = p.departed as f64 / rep.end_s;
        let l = p.time_avg_in_system;
        assert!(
            (l - lambda * p.mean_sojourn_s).abs() <= tol::LITTLE_REL * l.max(1e-9) + 1e-9,
            "{label}: {pool} L={l} λW={}",
            lambda * p.mean_sojourn_s
        );
        assert_eq!(
            p.replicas.iter().map(|x| x.routed).sum::<u64>(),
            if pool == "prefill" {
                s.arrivals
            } else {
                rep.handoffs.len() as u64
            },
            "{label}: {pool} routed"
        );
    }
    // Every request handed off departs the decode pool.
    assert_eq!(rep.decode.departed, rep.handoffs.len() as u64, "{label}");
    rep
}

#[test]
fn conformance_on_pd_fleets() {
    let lengths = LengthDist::Lognormal {
        prompt_median: 200.0,
        prompt_sigma: 0.8,
        output_median: 48.0,
        output_sigma: 0.9,
    };
    for (p, d) in [(1, 1), (2, 3), (3, 1)] {
        for router in [
            RouterKind::RoundRobin,
            RouterKind::LeastOutstanding,
            RouterKind::KvAware,
        ] {
            for first in [FirstTokenFrom::Prefill, FirstTokenFrom::Decode] {
                for policy in [Policy::Continuous, Policy::Chunked] {
                    let mut one = base(policy, KvMode::Paged, lengths.clone(), 5.0 * d as f64);
                    one.cost = context_linear_cost();
                    one.timeseries_points = 0;
                    one.horizon_s = 60.0;
                    let cfg = DisaggConfig::uniform(one, p, d, router, link(25.0, 5e-4), first);
                    let label = format!("{p}P{d}D/{}/{}/{policy:?}", router.name(), first.name());
                    check_disagg(&cfg, &label);
                }
            }
        }
    }
}

#[test]
fn a_tight_decode_pool_preempts_and_still_loses_nothing() {
    let mut one = base(
        Policy::Continuous,
        KvMode::Paged,
        LengthDist::Fixed {
            prompt: 300,
            output: 400,
        },
        6.0,
    );
    one.horizon_s = 40.0;
    one.timeseries_points = 0;
    let mut cfg = DisaggConfig::uniform(
        one,
        1,
        1,
        RouterKind::RoundRobin,
        link(100.0, 0.0),
        FirstTokenFrom::Decode,
    );
    cfg.decode.replicas[0].server.kv_tokens = 2048;
    let rep = check_disagg(&cfg, "tight decode KV");
    assert!(rep.summary.preemptions > 0, "{:?}", rep.summary);
    assert_eq!(rep.summary.completed, rep.summary.arrivals);
}

#[test]
fn bad_pd_configurations_get_clear_errors() {
    let ok = hand_config(FirstTokenFrom::Decode);
    assert!(simulate_disagg(&ok).is_ok());
    let err = |f: &dyn Fn(&mut DisaggConfig)| {
        let mut c = ok.clone();
        f(&mut c);
        simulate_disagg(&c).unwrap_err()
    };
    for bw in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
        let e = err(&|c| c.link.bandwidth_bytes_per_s = bw);
        assert!(matches!(e, DisaggError::Bandwidth(_)), "{e}");
        assert!(e.to_string().contains("bandwidth"), "{e}");
    }
    for lat in [-1e-3, f64::INFINITY, f64::NAN] {
        let e = err(&|c| c.link.latency_s = lat);
        assert!(e.to_string().contains("latency"), "{e}");
    }
    let e = err(&|c| c.prefill.replicas.clear());
    assert_eq!(
        e.to_string(),
        "prefill pool: replicas must be at least 1, got 0"
    );
    let e = err(&|c| c.decode.replicas.clear());
    assert_eq!(
        e.to_string(),
        "decode pool: replicas must be at least 1, got 0"
    );
    let e = err(&|c| c.decode.replicas[0].server.kv_mode = KvMode::Reserve);
    assert!(e.to_string().contains("paged"), "{e}");
    let e = err(&|c| c.link.geometry.head_dim = 0);
    assert!(matches!(e, DisaggError::Geometry), "{e}");
    let e = err(&|c| c.base.end = EndRule::Cut);
    assert!(e.to_string().contains("--drain"), "{e}");
    let e = err(&|c| c.decode.replicas[0].server.max_batch = 0);
    assert!(e.to_string().starts_with("decode pool: max_batch"), "{e}");
    let e = err(&|c| c.base.workload = c.base.workload.with_rate(-2.0));
    assert!(!e.to_string().is_empty());
}

#[test]
fn the_tandem_model_at_vanishing_load_is_the_lone_request() {
    use engine::analytic::predict_disagg;
    // 100 → 4 tokens at 1e-4 req/s: prefill 0.01 + 0.1, instant transfer, decode steps
    // of 12 ms alone.
    let mut cfg = hand_config(FirstTokenFrom::Decode);
    cfg.base.workload.lengths = LengthDist::Fixed {
        prompt: 100,
        output: 4,
    };
    cfg.base.workload = cfg.base.workload.with_rate(1e-4);
    let p = predict_disagg(&cfg).unwrap();
    let m = p.overall.metrics().unwrap();
    assert!((m.ttft_mean_s - 0.122).abs() < 1e-4, "{m:?}");
    assert!((m.tpot_mean_s - 0.012).abs() < 1e-5, "{m:?}");
    // First token from the prefill pool: TTFT is the prefill; the second token waits
    // for the decode step, so TPOT is still 12 ms.
    cfg.first_token = FirstTokenFrom::Prefill;
    let m = *predict_disagg(&cfg).unwrap().overall.metrics().unwrap();
    assert!((m.ttft_mean_s - 0.11).abs() < 1e-4, "{m:?}");
    assert!((m.tpot_mean_s - 0.012).abs() < 1e-5, "{m:?}");
    // Past the prefill pool's capacity (1 / 0.11 s): unstable, explicitly.
    cfg.base.workload = cfg.base.workload.with_rate(10.0);
    let p = predict_disagg(&cfg).unwrap();
    assert!(p.overall.metrics().is_none(), "{:?}", p.overall);
}

#[test]
fn the_tandem_model_meets_the_simulator_on_a_pd_point() {
    use engine::analytic::predict_disagg;
    use engine::cost::RooflineCost;
    // A10G × Qwen2.5-1.5B, 1 prefill : 2 decode, least outstanding, first token from the
    // decode pool, about 0.6 of the prefill pool's capacity; 30 seeds of 120 s.
    let (cost, kv) = RooflineCost::preset("A10G", "Qwen2.5-1.5B", 0.9, 1).unwrap();
    let mut one = base(
        Policy::Chunked,
        KvMode::Paged,
        LengthDist::reference(),
        20.0,
    );
    one.cost = cost.clone();
    one.server.kv_tokens = kv;
    one.server.max_batch = 32;
    one.server.token_budget = 2048;
    one.horizon_s = 120.0;
    one.timeseries_points = 0;
    one.keep_records = false;
    one.metrics.warmup_s = 10.0;
    let l = Link {
        bandwidth_bytes_per_s: 25e9 / 8.0,
        latency_s: 1e-3,
        geometry: KvGeometry::of_cost(&cost).unwrap(),
    };
    let cfg = DisaggConfig::uniform(
        one,
        1,
        2,
        RouterKind::LeastOutstanding,
        l,
        FirstTokenFrom::Decode,
    );
    let m = *predict_disagg(&cfg).unwrap().overall.metrics().unwrap();
    let (mut ttft, mut tpot) = (0.0, 0.0);
    let seeds = 30;
    for s in 0..seeds {
        let mut c = cfg.clone();
        c.base.seed = s;
        let r = simulate_disagg(&c).unwrap();
        ttft += r.summary.ttft.mean.unwrap() / seeds as f64;
        tpot += r.summary.tpot.mean.unwrap() / seeds as f64;
    }
    assert!(
        (m.ttft_mean_s / ttft - 1.0).abs() < 0.05,
        "model {} sim {ttft}",
        m.ttft_mean_s
    );
    assert!(
        (m.tpot_mean_s / tpot - 1.0).abs() < 0.05,
        "model {} sim {tpot}",
        m.tpot_mean_s
    );
}

#[test]
fn the_planner_finds_the_fewest_decode_replicas_for_each_split() {
    use engine::analytic::predict_disagg;
    use engine::plan::{screen_disagg, DisaggPlan, Offer, PlanError, PlanSpec};
    let mut one = base(
        Policy::Chunked,
        KvMode::Paged,
        LengthDist::reference(),
        20.0,
    );
    one.server.max_batch = 32;
    one.server.token_budget = 2048;
    let spec = PlanSpec {
        base: one,
        model: "Qwen2.5-1.5B".into(),
        offers: vec![
            Offer {
                gpu: "A10G".into(),
                usd_per_gpu_hour: 1.0,
            },
            Offer {
                gpu: "H100".into(),
                usd_per_gpu_hour: 6.0,
            },
        ],
        tps: vec![1],
        routers: vec![RouterKind::LeastOutstanding],
        attainment: 0.9,
        mem_util: 0.9,
        max_replicas: 32,
    };
    let d = DisaggPlan {
        bandwidth_bytes_per_s: 25e9 / 8.0,
        latency_s: 1e-3,
        first_token: FirstTokenFrom::Decode,
    };
    let (found, none) = screen_disagg(&spec, &d).unwrap();
    assert_eq!(found.len() + none.len(), 2);
    let best = &found[0];
    assert!(found
        .windows(2)
        .all(|w| w[0].usd_per_hour <= w[1].usd_per_hour));
    assert!(best.predicted.slo_attainment >= 0.9, "{best:?}");
    assert!(best.headroom > 0.0 && best.headroom.is_finite());
    assert_eq!(
        best.usd_per_hour,
        f64::from(best.prefill + best.decode) * if best.gpu == "H100" { 6.0 } else { 1.0 }
    );
    // One decode replica fewer misses the target (or cannot carry the load).
    if best.decode > 1 {
        let (cost, kv) =
            engine::cost::RooflineCost::preset(&best.gpu, "Qwen2.5-1.5B", 0.9, 1).unwrap();
        let mut b = spec.base.clone();
        b.cost = cost.clone();
        b.server.kv_tokens = kv / 16 * 16;
        let link = Link {
            bandwidth_bytes_per_s: d.bandwidth_bytes_per_s,
            latency_s: d.latency_s,
            geometry: KvGeometry::of_cost(&cost).unwrap(),
        };
        let fewer = DisaggConfig::uniform(
            b,
            best.prefill,
            best.decode - 1,
            best.router,
            link,
            d.first_token,
        );
        let p = predict_disagg(&fewer).unwrap();
        assert!(
            p.overall.metrics().is_none_or(|m| m.slo_attainment < 0.9),
            "{p:?}"
        );
    }
    let bad = DisaggPlan {
        bandwidth_bytes_per_s: 0.0,
        ..d
    };
    assert!(matches!(
        screen_disagg(&spec, &bad),
        Err(PlanError::Range { .. })
    ));
}
