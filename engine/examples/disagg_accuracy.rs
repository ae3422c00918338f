//! The tandem model of a disaggregated deployment (`analytic::predict_disagg`) against
//! the simulator (`disagg::simulate_disagg`) on a P/D grid (docs/accuracy.md,
//! "Disaggregated prefill and decode").
//!
//! ```sh
//! cargo run --release -p engine --example disagg_accuracy -- 200   # seeds per point
//! ```
//!
//! Each point: A10G × Qwen2.5-1.5B roofline replicas (chunked, paged, B = 32, budget
//! 2048, KV at 0.9 memory), the reference lognormal lengths, a 25 Gb/s link with 1 ms
//! latency, one router for both pools, λ a fraction of the deployment's capacity (the
//! smaller of the two pools' as the model gives it), 120 s drained with 10 s of warm-up.
//! The yardstick is the mean over seeds of each seed's mean TTFT, p99 TTFT and mean
//! TPOT. Runs on two threads.

use engine::analytic::predict_disagg;
use engine::cost::RooflineCost;
use engine::disagg::{simulate_disagg, DisaggConfig, FirstTokenFrom, KvGeometry, Link};
use engine::fleet::RouterKind;
use engine::workload::LengthDist;
use engine::{KvMode, Policy, SimConfig};
use std::time::Instant;

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .map_or(200, |s| s.parse().expect("seeds: a whole number"));
    let (cost, kv) = RooflineCost::preset("A10G", "Qwen2.5-1.5B", 0.9, 1).expect("preset");
    let mut one = SimConfig::vllm_like(1.0);
    one.cost = cost.clone();
    one.server.kv_tokens = kv;
    one.server.max_batch = 32;
    one.server.policy = Policy::Chunked;
    one.server.token_budget = 2048;
    one.server.kv_mode = KvMode::Paged;
    one.workload.lengths = LengthDist::reference();
    one.horizon_s = 120.0;
    one.metrics.warmup_s = 10.0;
    let link = Link {
        bandwidth_bytes_per_s: 25e9 / 8.0,
        latency_s: 1e-3,
        geometry: KvGeometry::of_cost(&cost).expect("a roofline cost"),
    };
    let start = Instant::now();
    println!("| P:D | router | first token | load | λ | sim mean TTFT | model | err | sim p99 TTFT | model | err | sim mean TPOT | model | err |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut errs: Vec<[f64; 3]> = Vec::new();
    let mut model_s: Vec<(FirstTokenFrom, f64)> = Vec::new();
    for (p, d) in [(1u32, 1u32), (1, 2), (2, 3)] {
        for router in [RouterKind::Random, RouterKind::LeastOutstanding] {
            for first in [FirstTokenFrom::Prefill, FirstTokenFrom::Decode] {
                let at_one = DisaggConfig::uniform(one.clone(), p, d, router, link, first);
                let unit = predict_disagg(&at_one).expect("model at 1 req/s");
                let rho_p = unit.prefill.metrics().map_or(1.0, |m| m.utilisation);
                let cap = 1.0 / rho_p.max(unit.decode.rho);
                for load in [0.3, 0.6, 0.85] {
                    let rate = load * cap;
                    let mut b = one.clone();
                    b.workload = b.workload.with_rate(rate);
                    let cfg = DisaggConfig::uniform(b, p, d, router, link, first);
                    let t = Instant::now();
                    let model = predict_disagg(&cfg).expect("model");
                    model_s.push((first, t.elapsed().as_secs_f64()));
                    let sims: Vec<[f64; 3]> = std::thread::scope(|s| {
                        let hs: Vec<_> = (0..2u64)
                            .map(|t| {
                                let cfg = &cfg;
                                s.spawn(move || {
                                    (0..seeds)
                                        .filter(|x| x % 2 == t)
                                        .map(|seed| {
                                            let mut c = cfg.clone();
                                            c.base.seed = seed;
                                            let r = simulate_disagg(&c).expect("simulate");
                                            let s = &r.summary;
                                            [
                                                s.ttft.mean.unwrap_or(f64::NAN),
                                                s.ttft.p99.unwrap_or(f64::NAN),
                                                s.tpot.mean.unwrap_or(f64::NAN),
                                            ]
                                        })
                                        .collect::<Vec<_>>()
                                })
                            })
                            .collect();
                        hs.into_iter()
                            .flat_map(|h| h.join().expect("thread"))
                            .collect()
                    });
                    let n = sims.len() as f64;
                    let y = [0, 1, 2].map(|k| sims.iter().map(|x| x[k]).sum::<f64>() / n);
                    let Some(m) = model.overall.metrics() else {
                        println!(
                            "| {p}:{d} | {} | {} | {load} | {rate:.2} | unstable in the model |",
                            router.name(),
                            first.name()
                        );
                        continue;
                    };
                    let mv = [m.ttft_mean_s, m.ttft_p99_s, m.tpot_mean_s];
                    let e = [0, 1, 2].map(|k| (mv[k] - y[k]) / y[k]);
                    errs.push(e);
                    println!(
                        "| {p}:{d} | {} | {} | {load} | {rate:.2} | {:.4} | {:.4} | {:+.1} % | {:.4} | {:.4} | {:+.1} % | {:.5} | {:.5} | {:+.1} % |",
                        router.name(), first.name(), y[0], mv[0], 100.0 * e[0], y[1], mv[1], 100.0 * e[1], y[2], mv[2], 100.0 * e[2]
                    );
                }
            }
        }
    }
    let k = errs.len() as f64;
    let mre = [0, 1, 2].map(|i| 100.0 * errs.iter().map(|e| e[i].abs()).sum::<f64>() / k);
    let max = [0, 1, 2].map(|i| 100.0 * errs.iter().map(|e| e[i].abs()).fold(0.0, f64::max));
    println!(
        "\n{} points × {seeds} seeds in {:.0} s: mean |error| mean TTFT {:.2} % (max {:.2} %), p99 TTFT {:.2} % (max {:.2} %), mean TPOT {:.2} % (max {:.2} %)",
        errs.len(), start.elapsed().as_secs_f64(), mre[0], max[0], mre[1], max[1], mre[2], max[2]
    );
    for first in [FirstTokenFrom::Prefill, FirstTokenFrom::Decode] {
        let t: Vec<f64> = model_s
            .iter()
            .filter(|x| x.0 == first)
            .map(|x| x.1)
            .collect();
        println!(
            "tandem model, first token from the {} pool: {:.1} ms per prediction (mean of {})",
            first.name(),
            1e3 * t.iter().sum::<f64>() / t.len().max(1) as f64,
            t.len()
        );
    }
}
