//! What the prefix cache costs the simulator: the same vLLM-like runs (chunked prefill,
//! paged 16-token blocks, ShareGPT lengths) with the cache off and on, on a workload of
//! shared system prompts and on multi-turn conversations. The cache's target is at most
//! 2× the time of the run without it (docs/performance.md).
//! `cargo bench -p engine --bench prefix`
// criterion is a native-only dev-dependency; on wasm32 this bench is an empty program.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(native::benches);

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{criterion_group, Criterion, Throughput};
    use engine::config::SimConfig;
    use engine::sim::simulate;
    use engine::workload::{Conversations, SharedTokens, SystemPrompts};
    use engine::PrefixCache;

    fn system() -> SystemPrompts {
        SystemPrompts {
            groups: 16,
            share: 0.8,
            tokens: 512,
            zipf: 1.0,
        }
    }

    fn workloads() -> [(&'static str, SharedTokens); 2] {
        [
            (
                "system_prompts",
                SharedTokens::Prefixes { system: system() },
            ),
            (
                "conversations",
                SharedTokens::Conversations {
                    conversations: Conversations {
                        mean_turns: 4.0,
                        max_turns: 12,
                        think_s: 20.0,
                    },
                    system: Some(system()),
                },
            ),
        ]
    }

    fn off_and_on(c: &mut Criterion) {
        let mut g = c.benchmark_group("prefix");
        g.sample_size(10);
        // 8 req/s of requests; conversations: 1 start/s × 3.9 turns (both stable).
        for ((name, shared), rate) in workloads().into_iter().zip([8.0, 1.0]) {
            let mut cfg = SimConfig::vllm_like(rate);
            cfg.server.max_batch = 64;
            cfg.server.kv_tokens = 104_336;
            cfg.horizon_s = 1000.0;
            cfg.workload.shared = Some(shared);
            cfg.workload.max_model_len = Some(16_384);
            let n = simulate(&cfg).unwrap().stats.arrivals;
            g.throughput(Throughput::Elements(n));
            for cache in [PrefixCache::Off, PrefixCache::Apc] {
                let mut cfg = cfg.clone();
                cfg.server.prefix_cache = cache;
                g.bench_function(format!("vllm_like_1000s_{name}_{cache:?}"), |b| {
                    b.iter(|| simulate(&cfg).unwrap().summary.completed)
                });
            }
        }
        g.finish();
    }

    criterion_group!(benches, off_and_on);
}
