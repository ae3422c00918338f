//! Predicts vLLM 0.22 serving Qwen2.5-1.5B on one A10G (the measurement in `data/`):
//! Poisson 0.5–8 req/s over ShareGPT lengths, chunked prefill (max_num_batched_tokens
//! 2048), paged KV in 16-token blocks, max_num_seqs 64 and 128, KV 104,336 and 565,904
//! tokens; the table cost from the measured A10G decode curve, and for comparison the
//! roofline preset (A10G × Qwen2.5-1.5B). Each also with its overheads as their own terms
//! (`engine::cost::overheads`, docs/model.md, Overheads): `table+fe` takes the front end
//! (9.3 ms, the lone short prompt's TTFT minus a decode step) out of the prefill points and
//! adds it to every request; `roofline+oh` prices the forward pass by the roofline without its
//! assumed per-iteration overhead and adds that front end and the step overhead identified
//! from the data (the measured decode steps minus that forward pass).
//!
//! Prints CSV (means over 3 seeds, 600 s of arrivals each, drained) to stdout and a check
//! against the measured facts to stderr. Then, to stderr, the same server run as the
//! serving sweep's benchmark was run (`engine::benchmark`): 300 prompts after 8 warm-ups,
//! the ShareGPT pairs in the table's order, Poisson sends as `vllm bench serve` spaces
//! them, each metric over the benchmark's own window (first send to last token), 5 seeds:
//!
//! ```text
//! cargo run --release -p engine --example a10g_prediction > results/a10g_vllm/predicted.csv
//! ```

use engine::benchmark::{BenchmarkRun, Schedule};
use engine::cost::overheads::{a10g_overheads, forward_pass_roofline};
use engine::cost::{CostModel, RooflineCost, TableCost};
use engine::SimConfig;

const RATES: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 6.0, 8.0];
const SEEDS: [u64; 3] = [0, 1, 2];

/// (name, cost, front end [s], step overhead [s])
type Cost<'a> = (&'a str, CostModel, f64, f64);

/// The A10G server at `rate` with `cost`, max_num_seqs `max_seqs` and `kv` tokens of KV.
fn server((_, cost, front_end_s, step_s): &Cost, rate: f64, max_seqs: u32, kv: u64) -> SimConfig {
    let mut cfg = SimConfig::vllm_like(rate);
    cfg.server.max_batch = max_seqs;
    cfg.server.kv_tokens = kv;
    cfg.cost = cost.clone();
    cfg.server.overhead_s = *front_end_s;
    cfg.server.step_overhead_s = *step_s;
    cfg
}

fn main() {
    let oh = a10g_overheads();
    eprintln!(
        "overheads from data/: front end {:.2} ms per request, step {:.2} ms beside the roofline",
        oh.front_end_s * 1e3,
        oh.step_s * 1e3
    );
    let costs: [Cost; 4] = [
        (
            "table",
            CostModel::Table(TableCost::a10g_qwen_1_5b()),
            0.0,
            0.0,
        ),
        (
            "roofline",
            CostModel::Roofline(RooflineCost::default()),
            0.0,
            0.0,
        ),
        (
            "table+fe",
            CostModel::Table(TableCost::a10g_qwen_1_5b_without_front_end()),
            oh.front_end_s,
            0.0,
        ),
        (
            "roofline+oh",
            CostModel::Roofline(forward_pass_roofline()),
            oh.front_end_s,
            oh.step_s,
        ),
    ];
    println!(
        "cost,rate_rps,max_num_seqs,kv_tokens,seeds,completed,throughput_rps,output_tokens_per_s,\
         ttft_mean_s,ttft_p50_s,ttft_p99_s,tpot_mean_s,tpot_p50_s,tpot_p99_s,itl_max_p99_s,\
         e2e_mean_s,preemptions"
    );
    // Per cost, per rate: (completed req/s, mean TTFT [s]) at max_num_seqs 128, KV 565,904.
    let mut open: Vec<Vec<(f64, f64)>> = Vec::new();
    for c in &costs {
        let cost_name = c.0;
        open.push(Vec::new());
        let (mut tpot_lo, mut tpot_hi, mut ttft_mean_hi, mut ttft_p99_hi, mut pre) =
            (f64::MAX, 0.0f64, 0.0f64, 0.0f64, 0u64);
        for max_seqs in [64u32, 128] {
            for kv in [104_336u64, 565_904] {
                for rate in RATES {
                    let mut acc = [0.0f64; 12];
                    let mut preempt = 0;
                    for seed in SEEDS {
                        let mut cfg = server(c, rate, max_seqs, kv);
                        cfg.seed = seed;
                        let s = engine::sim::simulate(&cfg).expect("valid config").summary;
                        let v = [
                            s.completed as f64,
                            s.throughput_rps,
                            s.output_tokens_per_s,
                            s.ttft.mean.unwrap_or(f64::NAN),
                            s.ttft.p50.unwrap_or(f64::NAN),
                            s.ttft.p99.unwrap_or(f64::NAN),
                            s.tpot.mean.unwrap_or(f64::NAN),
                            s.tpot.p50.unwrap_or(f64::NAN),
                            s.tpot.p99.unwrap_or(f64::NAN),
                            s.itl_max.p99.unwrap_or(f64::NAN),
                            s.e2e.mean.unwrap_or(f64::NAN),
                            0.0,
                        ];
                        for (a, x) in acc.iter_mut().zip(v) {
                            *a += x / SEEDS.len() as f64;
                        }
                        preempt += s.preemptions;
                    }
                    println!(
                        "{cost_name},{rate},{max_seqs},{kv},{},{:.1},{:.4},{:.1},{:.5},{:.5},{:.5},{:.5},{:.5},{:.5},{:.5},{:.3},{preempt}",
                        SEEDS.len(),
                        acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7], acc[8], acc[9], acc[10]
                    );
                    if (max_seqs, kv) == (128, 565_904) {
                        open.last_mut().unwrap().push((acc[1], acc[3]));
                    }
                    tpot_lo = tpot_lo.min(acc[6]);
                    tpot_hi = tpot_hi.max(acc[6]);
                    ttft_mean_hi = ttft_mean_hi.max(acc[3]);
                    ttft_p99_hi = ttft_p99_hi.max(acc[5]);
                    pre += preempt;
                }
            }
        }
        eprintln!(
            "{cost_name} cost, over all 24 configurations (measured on the A10G in brackets):"
        );
        eprintln!(
            "  mean TPOT {:.1}–{:.1} ms [8.3–10.2 ms]",
            tpot_lo * 1e3,
            tpot_hi * 1e3
        );
        eprintln!("  max mean TTFT {:.1} ms [< 61 ms]", ttft_mean_hi * 1e3);
        eprintln!("  max p99 TTFT {:.1} ms [< 185 ms]", ttft_p99_hi * 1e3);
        eprintln!("  preemptions {pre} [0]");
    }
    as_run(&costs[2..], &open[2..]);
}

/// The serving sweep's benchmark as it was run, beside 600 s of open arrivals (`open`,
/// per cost and rate: completed req/s and mean TTFT [s], from `main`): completed req/s is
/// counted over a window that holds the drain of the last requests.
fn as_run(costs: &[Cost], open: &[Vec<(f64, f64)>]) {
    const PROMPTS: usize = 300;
    const BENCH_SEEDS: [u64; 5] = [0, 1, 2, 3, 4];
    let lengths = engine::data::sharegpt_pairs()[..PROMPTS].to_vec();
    let run = |rate: f64| BenchmarkRun {
        requests: PROMPTS,
        warmups: 8,
        rate,
        burstiness: 1.0,
        schedule: Schedule::VllmNormalized,
        max_concurrency: None,
        lengths: lengths.clone(),
        fixed_times: None,
    };
    eprintln!(
        "\nthe benchmark as run ({PROMPTS} prompts, 8 warm-ups, max_num_seqs 128, KV 565,904), \
         mean over {} seeds [range]; `open` = 600 s of Poisson arrivals, drained:",
        BENCH_SEEDS.len()
    );
    eprintln!(
        "| cost | rate [req/s] | completed req/s | open | mean TTFT [ms] | open | p99 TTFT [ms] | mean TPOT [ms] |"
    );
    eprintln!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (c, open) in costs.iter().zip(open) {
        for (&rate, &(open_rps, open_ttft)) in RATES.iter().zip(open) {
            let base = server(c, rate, 128, 565_904);
            let seeds: Vec<engine::metrics::Summary> = BENCH_SEEDS
                .iter()
                .map(|&seed| {
                    engine::benchmark::simulate(&run(rate), &base, seed).expect("valid run")
                })
                .collect();
            let stat = |v: &[engine::metrics::Summary],
                        f: &dyn Fn(&engine::metrics::Summary) -> f64| {
                let x: Vec<f64> = v.iter().map(f).collect();
                let mean = x.iter().sum::<f64>() / x.len() as f64;
                let (lo, hi) = x
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
                (mean, lo, hi)
            };
            let rps = stat(&seeds, &|s| s.throughput_rps);
            let ttft = stat(&seeds, &|s| s.ttft.mean.unwrap_or(f64::NAN) * 1e3);
            let p99 = stat(&seeds, &|s| s.ttft.p99.unwrap_or(f64::NAN) * 1e3);
            let tpot = stat(&seeds, &|s| s.tpot.mean.unwrap_or(f64::NAN) * 1e3);
            eprintln!(
                "| {} | {rate} | {:.2} [{:.2}–{:.2}] | {:.2} | {:.1} [{:.1}–{:.1}] | {:.1} | {:.0} [{:.0}–{:.0}] | {:.2} |",
                c.0,
                rps.0, rps.1, rps.2,
                open_rps,
                ttft.0, ttft.1, ttft.2,
                open_ttft * 1e3,
                p99.0, p99.1, p99.2,
                tpot.0,
            );
        }
    }
}
