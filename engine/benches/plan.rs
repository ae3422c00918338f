//! Planner speed: the analytical screen of 96 families (6 GPUs × TP 1, 2, 4, 8 × 4
//! routers) of Qwen2.5-7B behind vLLM-like replicas (B 128) at 40 req/s, TTFT ≤ 1 s and
//! TPOT ≤ 50 ms for 90 % of requests, replica counts 1 to 1,024: fixed 512 → 256 lengths
//! and the embedded ShareGPT pairs. Prints how many fleets each screen evaluates, so the
//! time per evaluated fleet is the median over that count. The disaggregated screen
//! (`plan_screen_disagg`) is `bench-native plan --preset vllm-v1 --rate 40 --model
//! Qwen2.5-7B --disagg`'s: 12 families (A10G, L4, A100-80GB, H100 × TP 1, 2, 4, least
//! outstanding) of vLLM V1 replicas (B 128, budget 2048), ShareGPT lengths, a 100 Gb/s
//! link, the first token from the decode pool.
//! `cargo bench -p engine --bench plan`
// criterion is a native-only dev-dependency; on wasm32 this bench is an empty program.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(native::benches);

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{criterion_group, Criterion};
    use engine::config::{ServerConfig, SimConfig};
    use engine::disagg::FirstTokenFrom;
    use engine::fleet::RouterKind;
    use engine::plan::{default_price, screen, screen_disagg, DisaggPlan, Offer, PlanSpec};
    use engine::workload::LengthDist;
    use std::time::Duration;

    fn spec(lengths: LengthDist) -> PlanSpec {
        let mut base = SimConfig::vllm_like(40.0);
        base.workload.lengths = lengths;
        base.server.max_batch = 128;
        base.metrics.slo_ttft_s = 1.0;
        base.metrics.slo_tpot_s = 0.05;
        let offers = ["A10G", "L4", "A100-40GB", "A100-80GB", "H100", "H200"]
            .iter()
            .map(|g| Offer {
                gpu: (*g).to_string(),
                usd_per_gpu_hour: default_price(g).expect("a priced GPU"),
            })
            .collect();
        PlanSpec {
            base,
            model: "Qwen2.5-7B".into(),
            offers,
            tps: vec![1, 2, 4, 8],
            routers: vec![
                RouterKind::Random,
                RouterKind::LeastOutstanding,
                RouterKind::PowerOfD { d: 2 },
                RouterKind::RoundRobin,
            ],
            attainment: 0.9,
            mem_util: 0.9,
            max_replicas: 1024,
        }
    }

    fn plan(c: &mut Criterion) {
        let mut g = c.benchmark_group("plan_screen");
        g.sample_size(10).measurement_time(Duration::from_secs(10));
        for (name, lengths) in [
            (
                "fixed_512_256",
                LengthDist::Fixed {
                    prompt: 512,
                    output: 256,
                },
            ),
            ("sharegpt", LengthDist::sharegpt()),
        ] {
            let s = spec(lengths);
            let once = screen(&s).expect("a valid plan");
            println!(
                "plan_screen/{name}: 96 families, {} candidate fleets, {} evaluated",
                96 * 1024,
                once.evaluated
            );
            g.bench_function(name, |b| b.iter(|| screen(&s).expect("a valid plan")));
        }
        g.finish();
    }

    fn plan_disagg(c: &mut Criterion) {
        let mut base = SimConfig {
            server: ServerConfig::vllm_v1(128, (1 << 20) / 16, 16, 2048),
            ..SimConfig::vllm_like(40.0)
        };
        base.metrics.slo_ttft_s = 1.0;
        base.metrics.slo_tpot_s = 0.05;
        let offers = ["A10G", "L4", "A100-80GB", "H100"]
            .iter()
            .map(|g| Offer {
                gpu: (*g).to_string(),
                usd_per_gpu_hour: default_price(g).expect("a priced GPU"),
            })
            .collect();
        let s = PlanSpec {
            base,
            model: "Qwen2.5-7B".into(),
            offers,
            tps: vec![1, 2, 4],
            routers: vec![RouterKind::LeastOutstanding],
            attainment: 0.9,
            mem_util: 0.9,
            max_replicas: 1024,
        };
        let d = DisaggPlan {
            bandwidth_bytes_per_s: 100e9 / 8.0,
            latency_s: 0.0,
            first_token: FirstTokenFrom::Decode,
        };
        let (found, none) = screen_disagg(&s, &d).expect("a valid plan");
        println!(
            "plan_screen_disagg: 12 families, {} with a split, {} without",
            found.len(),
            none.len()
        );
        let mut g = c.benchmark_group("plan_screen_disagg");
        g.sample_size(10).measurement_time(Duration::from_secs(10));
        g.bench_function("sharegpt_decode_first", |b| {
            b.iter(|| screen_disagg(&s, &d).expect("a valid plan"))
        });
        g.finish();
    }

    criterion_group!(benches, plan, plan_disagg);
}
