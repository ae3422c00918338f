//! Error table of every analytical model against the simulator in reference mode over the
//! 48-config grid (λ ∈ {0.5,1,2,3} × B ∈ {1,4,8} × K ∈ {2048,…,16384}), seed-averaged
//! like the reference sweep (mean of per-seed metrics).
//!
//! `cargo run --release -p engine --example model_error -- [seeds] [horizon_s]`
//! (defaults: 5 seeds, 1000 s). Relative errors |a − s|/|s| (MRE over configs); blocking
//! as mean absolute error.
use engine::analytic::{predict, ModelKind, Prediction};
use engine::SimConfig;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let horizon: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000.0);
    let verbose = args.iter().any(|a| a == "-v");
    let mut err: Vec<[f64; 5]> = vec![[0.0; 5]; ModelKind::ALL.len()];
    let mut count = vec![0usize; ModelKind::ALL.len()];
    let mut unstable = vec![0usize; ModelKind::ALL.len()];
    for rate in [0.5, 1.0, 2.0, 3.0] {
        for b in [1u32, 4, 8] {
            for k in [2048u64, 4096, 8192, 16384] {
                let mut cfg = SimConfig::reference(rate, b, k);
                cfg.horizon_s = horizon;
                let mut sim = [0.0; 5];
                for seed in 0..seeds {
                    cfg.seed = seed;
                    let s = engine::sim::simulate(&cfg).expect("valid config").summary;
                    sim[0] += s.ttft.mean.unwrap_or(0.0);
                    sim[1] += s.ttft.p95.unwrap_or(0.0);
                    sim[2] += s.ttft.p99.unwrap_or(0.0);
                    sim[3] += s.throughput_rps;
                    sim[4] += s.blocking_probability;
                }
                sim.iter_mut().for_each(|x| *x /= seeds as f64);
                for (i, kind) in ModelKind::ALL.into_iter().enumerate() {
                    match predict(kind, &cfg) {
                        Ok(Prediction::Stable(m)) => {
                            let a = [
                                m.ttft_mean_s,
                                m.ttft_p95_s,
                                m.ttft_p99_s,
                                m.goodput_rps,
                                m.blocking,
                            ];
                            for j in 0..4 {
                                err[i][j] += (a[j] - sim[j]).abs() / sim[j].abs().max(1e-12);
                            }
                            err[i][4] += (a[4] - sim[4]).abs();
                            count[i] += 1;
                            if verbose && kind == ModelKind::Batching {
                                println!(
                                    "λ={rate} B={b} K={k}: mean {:.4}/{:.4} p95 {:.4}/{:.4} p99 {:.4}/{:.4} good {:.4}/{:.4} blk {:.4}/{:.4}",
                                    a[0], sim[0], a[1], sim[1], a[2], sim[2], a[3], sim[3], a[4], sim[4]
                                );
                            }
                        }
                        Ok(Prediction::Unstable { .. }) => unstable[i] += 1,
                        Err(e) => eprintln!("{}: {e}", kind.as_str()),
                    }
                }
            }
        }
    }
    println!("seeds {seeds}, horizon {horizon} s, 48 configs");
    println!(
        "{:<18} {:>7} {:>10} {:>9} {:>9} {:>9} {:>11} {:>9}",
        "model", "n", "unstable", "mean MRE", "p95 MRE", "p99 MRE", "goodput MRE", "block MAE"
    );
    for (i, kind) in ModelKind::ALL.into_iter().enumerate() {
        let n = count[i].max(1) as f64;
        println!(
            "{:<18} {:>7} {:>10} {:>8.2}% {:>8.2}% {:>8.2}% {:>10.2}% {:>9.4}",
            kind.as_str(),
            count[i],
            unstable[i],
            100.0 * err[i][0] / n,
            100.0 * err[i][1] / n,
            100.0 * err[i][2] / n,
            100.0 * err[i][3] / n,
            err[i][4] / n
        );
    }
}
