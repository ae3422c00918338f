//! Simulator speed: the reference study's default sweep (800 runs, ~3 M requests) on one
//! core, one reference-mode run, a 1 M-request vLLM-like run. Reports elements/s.
//! `cargo bench -p engine --bench sim`
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
    use engine::sweep::{run_sweep, SweepSpec};

    fn default_sweep(c: &mut Criterion) {
        let spec = SweepSpec::reference_default();
        let requests: u64 = run_sweep(&spec, None, &mut |_, _| true)
            .unwrap()
            .unwrap()
            .iter()
            .flat_map(|p| p.summaries.iter())
            .map(|s| s.arrivals)
            .sum();
        let mut g = c.benchmark_group("sweep");
        g.sample_size(10);
        g.throughput(Throughput::Elements(requests));
        g.bench_function("reference_default_800_runs_1_core", |b| {
            b.iter(|| {
                run_sweep(&spec, None, &mut |_, _| true)
                    .unwrap()
                    .unwrap()
                    .len()
            })
        });
        let every = SweepSpec {
            reuse: false,
            ..spec.clone()
        };
        g.bench_function(
            "reference_default_800_runs_1_core_every_run_simulated",
            |b| {
                b.iter(|| {
                    run_sweep(&every, None, &mut |_, _| true)
                        .unwrap()
                        .unwrap()
                        .len()
                })
            },
        );
        g.finish();
    }

    fn single_runs(c: &mut Criterion) {
        let mut g = c.benchmark_group("run");
        let cfg = SimConfig::reference(3.0, 8, 16384);
        let n = simulate(&cfg).unwrap().stats.arrivals;
        g.throughput(Throughput::Elements(n));
        g.bench_function("reference_l3_b8_k16384_1000s", |b| {
            b.iter(|| simulate(&cfg).unwrap().summary.completed)
        });
        let mut v = SimConfig::vllm_like(8.0);
        v.server.max_batch = 64;
        v.server.kv_tokens = 104_336;
        v.horizon_s = 1000.0;
        let n = simulate(&v).unwrap().stats.arrivals;
        g.throughput(Throughput::Elements(n));
        g.sample_size(10);
        g.bench_function("vllm_like_chunked_paged_sharegpt_8rps_1000s", |b| {
            b.iter(|| simulate(&v).unwrap().summary.completed)
        });
        g.finish();
    }

    criterion_group!(benches, default_sweep, single_runs);
}
