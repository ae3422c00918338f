//! Analytical models per configuration on the reference grid (goal: < 1 ms each).
// criterion is a native-only dev-dependency; on wasm32 this bench is an empty program.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(native::benches);

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{criterion_group, Criterion};
    use engine::analytic::{predict, ModelKind};
    use engine::SimConfig;
    use std::hint::black_box;

    fn grid() -> Vec<SimConfig> {
        let mut v = Vec::new();
        for rate in [0.5, 1.0, 2.0, 3.0] {
            for b in [1, 4, 8] {
                for k in [2048, 4096, 8192, 16384] {
                    v.push(SimConfig::reference(rate, b, k));
                }
            }
        }
        v
    }

    fn bench(c: &mut Criterion) {
        let g = grid();
        for kind in ModelKind::ALL {
            let mut group = c.benchmark_group(kind.as_str());
            group.sample_size(10);
            group.bench_function("48-config grid", |bch| {
                bch.iter(|| {
                    for cfg in &g {
                        let _ = black_box(predict(kind, black_box(cfg)));
                    }
                })
            });
            group.finish();
        }
        // The heaviest configuration for the batching model (near-critical B = 4 with a slow transient
        // and a KV rebuild in three of its four fixed-point passes).
        let worst = SimConfig::reference(3.0, 4, 16384);
        let mut group = c.benchmark_group("batching");
        group.sample_size(20);
        group.bench_function("worst config (λ=3, B=4, K=16384)", |bch| {
            bch.iter(|| black_box(predict(ModelKind::Batching, black_box(&worst))))
        });
        group.finish();
        // The heaviest configuration for the reference multi-class CTMC: K = 16384 gives the
        // largest state space (747 states); λ and B change its cost by ~2 %.
        let worst = SimConfig::reference(0.5, 4, 16384);
        let mut group = c.benchmark_group("reference_ctmc");
        group.sample_size(20);
        group.bench_function("worst config (λ=0.5, B=4, K=16384)", |bch| {
            bch.iter(|| black_box(predict(ModelKind::ReferenceCtmc, black_box(&worst))))
        });
        group.finish();
    }

    criterion_group!(benches, bench);
}
