//! The engine compiled to wasm32 and run in Node: same records as native (digest), and the
//! reference sweep runs. `cargo test -p engine --target wasm32-unknown-unknown`.
#![cfg(target_arch = "wasm32")]

#[path = "engine/common.rs"]
mod common;

use wasm_bindgen_test::wasm_bindgen_test;

#[wasm_bindgen_test]
fn wasm_digest_equals_native() {
    let rep = engine::sim::simulate(&common::wasm_digest_config()).unwrap();
    assert_eq!(engine::sim::digest(&rep.records), common::GOLDEN_DIGEST);
}

#[wasm_bindgen_test]
fn invalid_config_is_an_error_in_wasm_too() {
    assert!(engine::sim::simulate(&engine::SimConfig::reference(0.0, 1, 2048)).is_err());
}

/// The page's worker trapped on these; in wasm too they are errors before anything runs.
#[wasm_bindgen_test]
fn configurations_past_the_limits_are_errors_in_wasm() {
    use engine::workload::ArrivalProcess;
    let mut cases = Vec::new();
    let base = engine::SimConfig::reference(1.0, 8, 8192);
    let mut c = base.clone();
    c.workload = c.workload.with_rate(1e5);
    cases.push(c);
    let mut c = base.clone();
    c.server.max_batch = u32::MAX;
    cases.push(c);
    let mut c = base.clone();
    c.server.kv_tokens = u64::MAX;
    cases.push(c);
    let mut c = base.clone();
    c.workload.arrivals = ArrivalProcess::Gamma {
        rate: 1.0,
        burstiness: 1e-300,
    };
    cases.push(c);
    for c in cases {
        assert!(matches!(
            engine::sim::simulate(&c),
            Err(engine::ConfigError::Limit(_))
        ));
    }
}
