//! Quick start: the reference study's simulator at four (λ, B, K) points, one line each
//! (arrivals, completions, rejections, TTFT, goodput, blocking, work done).
//!
//! ```text
//! cargo run --release -p engine --example quick
//! ```

fn main() {
    for (rate, b, k) in [
        (0.5, 1, 2048u64),
        (1.0, 4, 4096),
        (3.0, 8, 16384),
        (8.0, 16, 16384),
    ] {
        let cfg = engine::SimConfig::reference(rate, b, k);
        let t = std::time::Instant::now();
        let r = engine::sim::simulate(&cfg).unwrap();
        let s = &r.summary;
        println!(
            "λ={rate} B={b} K={k}: arr={} done={} rej={} unf={} mean_ttft={:?} p99={:?} goodput={:.3} block={:.4} iters={} steps={} L={:.2} {:?}",
            s.arrivals, s.completed, s.rejected, s.unfinished, s.ttft.mean, s.ttft.p99, s.throughput_rps, s.blocking_probability,
            r.stats.iterations, r.stats.steps, r.stats.time_avg_in_system, t.elapsed()
        );
    }
}
