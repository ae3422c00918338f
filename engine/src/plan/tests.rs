use super::*;
use crate::workload::LengthDist;

/// Qwen2.5-7B behind vLLM-like servers (B 64), fixed 512 → 128 lengths, TTFT ≤ 0.5 s,
/// TPOT ≤ 50 ms for 90 %, at `rate` req/s; short runs so the tests stay quick.
fn spec(rate: f64) -> PlanSpec {
    let mut base = SimConfig::vllm_like(rate);
    base.workload.lengths = LengthDist::Fixed {
        prompt: 512,
        output: 128,
    };
    base.server.max_batch = 64;
    base.horizon_s = 120.0;
    base.metrics.slo_ttft_s = 0.5;
    base.metrics.slo_tpot_s = 0.05;
    PlanSpec {
        base,
        model: "Qwen2.5-7B".into(),
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
        tps: vec![1, 2],
        routers: vec![RouterKind::Random],
        attainment: 0.9,
        mem_util: 0.9,
        max_replicas: 256,
    }
}

#[test]
fn bad_inputs_are_named() {
    let mut s = spec(10.0);
    s.offers.clear();
    assert!(matches!(screen(&s), Err(PlanError::Empty(_))));
    let mut s = spec(10.0);
    s.offers[0].gpu = "TPUv9".into();
    let e = screen(&s).unwrap_err().to_string();
    assert!(e.contains("TPUv9") && e.contains("A10G"), "{e}");
    let mut s = spec(10.0);
    s.offers[1].usd_per_gpu_hour = 0.0;
    assert!(screen(&s).unwrap_err().to_string().contains("price"));
    let mut s = spec(10.0);
    s.attainment = 1.0;
    assert!(screen(&s).unwrap_err().to_string().contains("attainment"));
    let mut s = spec(10.0);
    s.base.metrics.slo_ttft_s = 0.0;
    assert!(screen(&s).is_err());
    let mut s = spec(10.0);
    s.model = "GPT-9".into();
    assert!(screen(&s).unwrap_err().to_string().contains("GPT-9"));
    let mut s = spec(10.0);
    s.tps = vec![0];
    assert!(screen(&s).unwrap_err().to_string().contains("tensor"));
}

#[test]
fn a_model_too_large_for_a_gpu_is_infeasible_with_its_reason() {
    let mut s = spec(2.0);
    s.model = "Llama-3.1-70B".into();
    s.tps = vec![1, 4];
    let sc = screen(&s).unwrap();
    let a10g_tp1 = sc
        .infeasible
        .iter()
        .find(|i| i.gpu == "A10G" && i.tp == 1)
        .expect("70B on one A10G");
    assert!(a10g_tp1.why.contains("weights"), "{}", a10g_tp1.why);
    // Four H100s hold it.
    assert!(sc.feasible.iter().any(|f| f.gpu == "H100" && f.tp == 4));
}

#[test]
fn the_screen_finds_the_fewest_replicas_that_meet_the_slo() {
    let s = spec(20.0);
    let sc = screen(&s).unwrap();
    assert!(sc.evaluated > 0);
    assert!(!sc.feasible.is_empty(), "{:?}", sc.infeasible);
    for f in &sc.feasible {
        assert!(f.predicted.slo_attainment >= 0.9, "{f:?}");
        if f.replicas > 1 {
            assert!(
                f.attainment_below.is_none_or(|a| a < 0.9),
                "one fewer also meets it: {f:?}"
            );
        }
        let per_gpu = if f.gpu == "A10G" { 1.0 } else { 6.0 };
        assert!((f.usd_per_hour - per_gpu * (f.tp * f.replicas) as f64).abs() < 1e-9);
    }
    // Cheapest first.
    for w in sc.feasible.windows(2) {
        assert!(w[0].usd_per_hour <= w[1].usd_per_hour);
    }
    // More traffic needs at least as many replicas of the same family.
    let more = screen(&spec(60.0)).unwrap();
    for f in &sc.feasible {
        let g = more
            .feasible
            .iter()
            .find(|g| g.gpu == f.gpu && g.tp == f.tp)
            .unwrap();
        assert!(g.replicas >= f.replicas, "{f:?} vs {g:?}");
    }
}

#[test]
fn the_pareto_set_trades_price_for_p99() {
    let s = spec(20.0);
    let sc = screen(&s).unwrap();
    let front = pareto(&s, &sc, 3).unwrap();
    assert!(front.len() >= 2, "{front:?}");
    assert_eq!(front[0], sc.feasible[0]);
    for w in front.windows(2) {
        assert!(w[0].usd_per_hour <= w[1].usd_per_hour);
        assert!(w[1].predicted.ttft_p99_s < w[0].predicted.ttft_p99_s);
    }
}

#[test]
fn the_answer_is_verified_by_simulating_it() {
    let s = spec(20.0);
    let sc = screen(&s).unwrap();
    let best = sc.best().unwrap();
    let c = confirm(&s, best, &[1, 2, 3]).unwrap();
    assert!(c.meets, "{c:?}");
    assert!(c.at.meets(0.9));
    assert!(c.at.requests > 3 * 2000, "{}", c.at.requests);
    // One replica fewer misses it, simulated.
    if c.replicas > 1 {
        let below = c.below.as_ref().expect("simulated at N - 1");
        assert_eq!(below.replicas, c.replicas - 1);
        assert!(!below.meets(0.9), "{below:?}");
    }
    // Within a few replicas of the model's answer.
    assert!(c.replicas.abs_diff(best.replicas) <= 2, "{c:?}");
}

/// The disaggregated settings of the CLI's `--disagg` defaults: 100 Gb/s, no added
/// latency, the first token from the decode pool.
fn link() -> DisaggPlan {
    DisaggPlan {
        bandwidth_bytes_per_s: 100e9 / 8.0,
        latency_s: 0.0,
        first_token: crate::disagg::FirstTokenFrom::Decode,
    }
}

#[test]
fn the_disaggregated_answer_is_verified_by_simulating_it() {
    let mut s = spec(20.0);
    s.offers.truncate(1);
    s.tps = vec![1];
    let (found, _) = screen_disagg(&s, &link()).unwrap();
    let best = &found[0];
    let c = confirm_disagg(&s, &link(), best, &[1, 2, 3]).unwrap();
    assert!(c.meets, "{c:?}");
    assert_eq!(c.at.replicas, c.prefill + c.decode);
    assert!(c.at.requests > 3 * 2000, "{}", c.at.requests);
    assert!((c.usd_per_hour - f64::from(c.prefill + c.decode)).abs() < 1e-9);
    // Every split one replica smaller misses it, simulated: the best of them is kept.
    let (p, d, below) = c.below.as_ref().expect("a smaller split simulated");
    assert_eq!(p + d + 1, c.prefill + c.decode);
    assert_eq!(below.replicas, p + d);
    assert!(!below.meets(0.9), "{below:?}");
    // Within a few replicas of the model's split.
    assert!(
        (c.prefill + c.decode).abs_diff(best.prefill + best.decode) <= 3,
        "{c:?}"
    );
}

#[test]
fn a_disaggregated_split_that_misses_in_simulation_is_grown_until_it_meets() {
    let mut s = spec(20.0);
    s.offers.truncate(1);
    s.tps = vec![1];
    let (found, _) = screen_disagg(&s, &link()).unwrap();
    // Two prefill replicas fewer than the model's answer: short of prefill capacity.
    let mut small = found[0].clone();
    small.prefill -= 2;
    let c = confirm_disagg(&s, &link(), &small, &[1, 2]).unwrap();
    assert!(c.meets, "{c:?}");
    assert!(c.prefill + c.decode > small.prefill + small.decode, "{c:?}");
    let (_, _, below) = c.below.as_ref().unwrap();
    assert!(!below.meets(0.9) && c.at.meets(0.9));
    // Priced per replica as the model's split.
    assert!((c.usd_per_hour / f64::from(c.prefill + c.decode) - 1.0).abs() < 1e-9);
}

#[test]
fn the_walk_moves_to_the_smallest_fleet_that_meets_the_target() {
    // Attainment (p + 2 d) / 20 capped at 1: meets 0.9 from p + 2 d >= 18.
    let fig = |(p, d): (u32, u32)| {
        let a = (f64::from(p + 2 * d) / 20.0).min(1.0);
        Ok(confirm::figures(p + d, &[1], |_| {
            Ok(crate::metrics::Summary {
                slo_attainment: Some(a),
                ..Default::default()
            })
        })
        .unwrap())
    };
    let fewer = |(p, d): (u32, u32)| {
        let mut v = Vec::new();
        if d > 1 {
            v.push((p, d - 1));
        }
        if p > 1 {
            v.push((p - 1, d));
        }
        v
    };
    let more = |(p, d): (u32, u32)| {
        if p + d < 40 {
            vec![(p, d + 1), (p + 1, d)]
        } else {
            vec![]
        }
    };
    // Down from (10, 10): to a split whose smaller neighbours all miss (greedy, one
    // replica at a time, as the aggregated count moves).
    let w = confirm::walk((10, 10), 0.9, fewer, more, fig).unwrap();
    assert!(w.figures.meets(0.9));
    let (p, d) = w.at;
    assert!(
        p + 2 * d >= 18 && (p == 1 || p + 2 * d - 1 < 18),
        "{:?}",
        w.at
    );
    assert!(!w.below.unwrap().1.meets(0.9));
    // Up from (1, 1): the decode replica adds more, so it grows the decode pool.
    let w = confirm::walk((1, 1), 0.9, fewer, more, fig).unwrap();
    assert_eq!(w.at, (1, 9));
    assert_eq!(w.below.unwrap().0, (1, 8));
    // Up to the cap without meeting it: the last fleet, not met.
    let w = confirm::walk((1, 1), 0.9, fewer, |_| vec![], fig).unwrap();
    assert_eq!(w.at, (1, 1));
    assert!(!w.figures.meets(0.9) && w.below.is_none());
}

#[test]
fn the_simulator_decides_the_answer() {
    let s = spec(20.0);
    let sc = screen(&s).unwrap();
    let c = confirm(&s, sc.best().unwrap(), &[1]).unwrap();
    let mut miss = c.clone();
    miss.meets = false;
    miss.usd_per_hour = c.usd_per_hour / 2.0;
    let mut dear = c.clone();
    dear.usd_per_hour = 2.0 * c.usd_per_hour;
    let mut v = vec![dear.clone(), miss.clone(), c.clone()];
    by_simulation(&mut v);
    // The cheaper finalist that misses in simulation is passed over for the next.
    assert_eq!(v, vec![c.clone(), dear, miss.clone()]);
    assert_eq!(answer(&v), Some(&c));
    assert_eq!(answer(&[miss]), None);
}
