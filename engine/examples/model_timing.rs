//! Times each analytical model per configuration on the 48-config grid (each configuration's
//! time is the mean of `reps` evaluations; prints the mean, median and worst over the grid).
//! `cargo run --release -p engine --example model_timing -- [model] [reps]` (model: a
//! name such as `batching` or `reference_ctmc`, or `all`).
use engine::analytic::{predict, ModelKind};
use engine::SimConfig;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let only = args.get(1).filter(|a| a.as_str() != "all");
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    for kind in ModelKind::ALL {
        if only.is_some_and(|o| ModelKind::from_name(o) != Some(kind)) {
            continue;
        }
        let mut worst = (0.0f64, String::new());
        let mut per_config = Vec::with_capacity(48);
        let t0 = std::time::Instant::now();
        for rate in [0.5, 1.0, 2.0, 3.0] {
            for b in [1u32, 4, 8] {
                for k in [2048u64, 4096, 8192, 16384] {
                    let cfg = SimConfig::reference(rate, b, k);
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        let _ = std::hint::black_box(predict(kind, &cfg));
                    }
                    let e = t.elapsed().as_secs_f64() / reps as f64;
                    per_config.push(e);
                    if e > worst.0 {
                        worst = (e, format!("λ={rate} B={b} K={k}"));
                    }
                }
            }
        }
        per_config.sort_by(f64::total_cmp);
        let median = 0.5 * (per_config[23] + per_config[24]);
        println!(
            "{:<16} mean {:.3} ms per config, median {:.3} ms, worst {:.3} ms at {}",
            kind.as_str(),
            t0.elapsed().as_secs_f64() * 1e3 / (48 * reps) as f64,
            median * 1e3,
            worst.0 * 1e3,
            worst.1
        );
    }
}
