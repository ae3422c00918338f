//! Server models: the reference first-token rule, chunked prefill, llama.cpp's slots,
//! vLLM V1's paging.

use super::*;

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
