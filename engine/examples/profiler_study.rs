//! The continuous-batching profiler study's tables, as `results/profiler_study.md` shows
//! them (its simulated sections 1–3): FCFS collapse, priority inversion, chunked prefill
//! against eager batching. Prints markdown and panics if a finding's direction does not
//! hold; the scenarios are the integration test's (`engine/tests/engine/profiler_study/`).
//!
//! ```text
//! cargo run --release -p engine --example profiler_study
//! ```

#[path = "../tests/engine/profiler_study/scenarios.rs"]
mod study;

use study::*;

fn ms(x: f64) -> String {
    format!("{:.0}", x * 1e3)
}

fn main() {
    println!("## 1. FCFS collapses under load (30 requests 32→64, Poisson 10 req/s, 5 seeds)\n");
    println!("| cost model | FCFS mean TTFT [ms] | eager continuous ({SLOTS} slots) mean TTFT [ms] | FCFS / continuous |");
    println!("|---|---|---|---|");
    let (f, e) = collapse(&cpu_cost());
    println!(
        "| CPU table (llama-server, 1 thread) | {} | {} | **{:.1}×** |",
        ms(f),
        ms(e),
        f / e
    );
    let (gf, ge) = collapse(&flat_decode_cost());
    println!(
        "| CPU prefill, GPU-flat decode | {} | {} | **{:.1}×** |",
        ms(gf),
        ms(ge),
        gf / ge
    );
    println!("\n(study: ≈ 48×)\n");
    assert!(f > 3.0 * e, "FCFS must be far worse than continuous");
    assert!(gf > 3.0 * ge, "FCFS must be far worse than continuous");

    println!("## 2. FCFS inverts priority (50 % short 32→64 / 50 % long 512→32, Poisson 4 req/s, 40 requests, 5 seeds)\n");
    println!("| variant | short TTFT [ms] | long TTFT [ms] | short slowdown | long slowdown |");
    println!("|---|---|---|---|---|");
    let inv: Vec<_> = [Variant::Fcfs, Variant::Eager, Variant::Chunked(64)]
        .into_iter()
        .map(|v| (v, inversion(v)))
        .collect();
    for (v, m) in &inv {
        println!(
            "| {} | {} | {} | {:.1}× | {:.1}× |",
            v.label(),
            ms(m[0][0]),
            ms(m[1][0]),
            m[0][1],
            m[1][1]
        );
    }
    println!(
        "\nslowdown = E2E / the request's time alone on the server (short 154 ms, long 271 ms)\n"
    );
    let fcfs = inv[0].1;
    assert!(
        fcfs[0][1] > fcfs[1][1],
        "under FCFS short requests must wait longer relative to their size"
    );

    println!("## 3. Chunked prefill vs eager in the interference scenario\n");
    println!(
        "(t=0: 2 short 32→64; t=0.1 s: 2 long 512→32; t=0.3 s: 2 short 32→64; {SLOTS} slots)\n"
    );
    println!("| variant | short worst gap [ms] | short stalls > 50 ms | short TTFT [ms] | long TTFT [ms] | makespan [ms] | throughput [tok/s] |");
    println!("|---|---|---|---|---|---|---|");
    let rows: Vec<_> = [
        Variant::Eager,
        Variant::Chunked(64),
        Variant::Chunked(32),
        Variant::Chunked(16),
    ]
    .into_iter()
    .map(interference)
    .collect();
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.0} |",
            r.variant.label(),
            ms(r.short_max_gap_s),
            r.short_stalls,
            ms(r.short_ttft_s),
            ms(r.long_ttft_s),
            ms(r.makespan_s),
            r.throughput_tok_s
        );
    }
    check_interference(&rows);
    println!("\nAll finding directions hold in the simulator.");
}
