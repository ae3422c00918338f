//! Analytical models per configuration on the reference grid (goal: < 1 ms each).
use criterion::{criterion_group, criterion_main, Criterion};
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
