//! The reference study's default grid (800 runs) on one thread, timed `N` times (default 5;
//! `every` simulates every run instead of reusing runs that stand for others): the
//! engine's speed natively and, built for `wasm32-wasip1`, under a WebAssembly engine
//! (which criterion, in `benches/sim.rs`, cannot run in).
//!
//! ```text
//! cargo bench -p engine --bench grid_timing -- 5 [every]
//! rustup target add wasm32-wasip1     # once
//! cargo build --profile wasm-speed -p engine --bench grid_timing --target wasm32-wasip1
//! node --no-warnings e2e/wasi_run.mjs target/wasm32-wasip1/wasm-speed/deps/grid_timing-*.wasm 5
//! ```
use engine::sweep::{run_sweep, SweepSpec};
use std::time::Instant;

fn main() {
    // `cargo bench` adds `--bench` to the arguments: take the first number, and `every`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.iter().find_map(|s| s.parse().ok()).unwrap_or(5);
    let spec = SweepSpec {
        reuse: !args.iter().any(|a| a == "every"),
        ..SweepSpec::reference_default()
    };
    let mut times = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let pts = run_sweep(&spec, None, &mut |_, _| true)
            .expect("the default grid is valid")
            .expect("not cancelled");
        let s = t.elapsed().as_secs_f64();
        let completed: u64 = pts
            .iter()
            .flat_map(|p| &p.summaries)
            .map(|s| s.completed)
            .sum();
        let simulated: u32 = pts.iter().map(|p| p.simulated_seeds).sum();
        println!(
            "run {}: {:.3} s ({} runs, {simulated} simulated, {completed} completed)",
            i + 1,
            s,
            spec.runs()
        );
        times.push(s);
    }
    times.sort_by(f64::total_cmp);
    println!("median {:.3} s, min {:.3} s", times[(n - 1) / 2], times[0]);
}
