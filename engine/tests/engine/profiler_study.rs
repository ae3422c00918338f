//! The profiler study's three findings hold in the simulator (directions only; the
//! numbers are in results/profiler_study.md, printed by
//! `cargo run --release -p engine --example profiler_study` from the same scenarios).

#[path = "profiler_study/scenarios.rs"]
mod study;

use study::{Variant, LONG, SHORT};

#[test]
fn fcfs_collapses_under_load() {
    let (f, e) = study::collapse(&study::cpu_cost());
    assert!(f > 3.0 * e, "FCFS {f} vs continuous {e}");
    // With batched decode as flat as on a GPU the study's ≈ 48× appears.
    let (f, e) = study::collapse(&study::flat_decode_cost());
    assert!(f > 30.0 * e, "FCFS {f} vs continuous {e}");
}

#[test]
fn fcfs_inverts_priority() {
    let m = study::inversion(Variant::Fcfs);
    let (short, long) = (m[SHORT as usize][1], m[LONG as usize][1]);
    assert!(
        short > 1.2 * long,
        "short slowdown {short} vs long {long} under FCFS"
    );
}

#[test]
fn chunked_prefill_trades_ttft_for_smooth_decoding() {
    let rows: Vec<_> = [
        Variant::Eager,
        Variant::Chunked(64),
        Variant::Chunked(32),
        Variant::Chunked(16),
    ]
    .into_iter()
    .map(study::interference)
    .collect();
    study::check_interference(&rows);
}
