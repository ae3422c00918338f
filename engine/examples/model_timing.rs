//! Times each analytical model per configuration on the 48-config grid.
//! `cargo run --release -p engine --example model_timing`
use engine::analytic::{predict, ModelKind};
use engine::SimConfig;

fn main() {
    for kind in ModelKind::ALL {
        let mut worst = (0.0f64, String::new());
        let t0 = std::time::Instant::now();
        for rate in [0.5, 1.0, 2.0, 3.0] {
            for b in [1u32, 4, 8] {
                for k in [2048u64, 4096, 8192, 16384] {
                    let cfg = SimConfig::reference(rate, b, k);
                    let t = std::time::Instant::now();
                    let _ = predict(kind, &cfg);
                    let e = t.elapsed().as_secs_f64();
                    if e > worst.0 {
                        worst = (e, format!("λ={rate} B={b} K={k}"));
                    }
                }
            }
        }
        println!(
            "{:<16} total {:?} worst {:.2} ms at {}",
            kind.as_str(),
            t0.elapsed(),
            worst.0 * 1e3,
            worst.1
        );
    }
}
