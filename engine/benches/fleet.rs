//! Fleet simulator speed: 64 reference-mode replicas at 1,000 req/s over 1 h of arrivals
//! (3.6 M requests), replicas (A10G table cost, B 128) sized so the fleet runs at about
//! 80 % of its capacity, per router; and the one-server simulator on the same number of
//! requests (one replica at 1000/64 req/s over 64 h) for the ratio. Reports elements/s.
//! `cargo bench -p engine --bench fleet`
// criterion is a native-only dev-dependency; on wasm32 this bench is an empty program.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
criterion::criterion_main!(native::benches);

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{criterion_group, Criterion, Throughput};
    use engine::config::SimConfig;
    use engine::cost::{CostModel, TableCost};
    use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
    use engine::sim::simulate;

    const N: u32 = 64;
    const RATE: f64 = 1000.0;
    const HORIZON: f64 = 3600.0;

    /// One replica at the fleet's share of the rate: the A10G table cost at B = 128,
    /// whose saturated throughput (about 19.6 req/s, docs/performance.md) puts the fleet
    /// at about 80 % of its capacity; KV never binds.
    fn replica() -> SimConfig {
        let mut cfg = SimConfig::reference(RATE / f64::from(N), 128, 1 << 20);
        cfg.cost = CostModel::Table(TableCost::a10g_qwen_1_5b());
        cfg.horizon_s = HORIZON;
        cfg
    }

    fn fleet(c: &mut Criterion) {
        let one = replica();
        let base = SimConfig {
            workload: one.workload.clone().with_rate(RATE),
            ..one.clone()
        };
        let mut g = c.benchmark_group("fleet");
        g.sample_size(10);
        for router in [
            RouterKind::RoundRobin,
            RouterKind::Random,
            RouterKind::LeastOutstanding,
            RouterKind::LeastTokens,
            RouterKind::PowerOfD { d: 2 },
        ] {
            let cfg = FleetConfig::uniform(base.clone(), N, router);
            let n = simulate_fleet(&cfg).unwrap().summary.arrivals;
            g.throughput(Throughput::Elements(n));
            g.bench_function(format!("64_replicas_1000rps_1h_{}", router.name()), |b| {
                b.iter(|| simulate_fleet(&cfg).unwrap().summary.arrivals)
            });
        }
        // the same number of requests through one server: its share of the rate, 64 h
        let mut long = one.clone();
        long.horizon_s = HORIZON * f64::from(N);
        let n = simulate(&long).unwrap().stats.arrivals;
        g.throughput(Throughput::Elements(n));
        g.bench_function("one_replica_15.6rps_64h_same_requests", |b| {
            b.iter(|| simulate(&long).unwrap().stats.arrivals)
        });
        g.finish();
    }

    criterion_group!(benches, fleet);
}
