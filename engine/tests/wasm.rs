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
