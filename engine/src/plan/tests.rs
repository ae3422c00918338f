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
