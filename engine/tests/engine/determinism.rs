//! Determinism: same seed, same records; the golden digest the wasm test reproduces;
//! invalid input is an error, never a panic.

use super::*;

#[test]
fn determinism_same_seed_same_records() {
    for policy in Policy::ALL {
        let cfg = base(policy, KvMode::Paged, LengthDist::sharegpt(), 5.0);
        let a = simulate(&cfg).unwrap();
        let b = simulate(&cfg).unwrap();
        assert_eq!(a.records, b.records);
        assert_eq!(digest(&a.records), digest(&b.records));
        let other = simulate(&SimConfig { seed: 12, ..cfg }).unwrap();
        assert_ne!(digest(&a.records), digest(&other.records));
    }
}

/// The wasm test (engine/tests/wasm.rs, run in Node) reproduces the same digest.

#[test]
fn native_digest_matches_golden() {
    let rep = simulate(&common::wasm_digest_config()).unwrap();
    assert_eq!(
        digest(&rep.records),
        common::GOLDEN_DIGEST,
        "update common::GOLDEN_DIGEST only for a deliberate model change"
    );
}

#[test]
fn invalid_configurations_are_errors_not_panics() {
    let ok = SimConfig::reference(1.0, 4, 4096);
    let mut bad = vec![
        SimConfig::reference(0.0, 4, 4096),
        SimConfig::reference(-1.0, 4, 4096),
        SimConfig::reference(f64::NAN, 4, 4096),
        SimConfig::reference(1.0, 0, 4096),
        SimConfig::reference(1.0, 4, 1),
        SimConfig {
            horizon_s: f64::NAN,
            ..ok.clone()
        },
        SimConfig {
            horizon_s: 0.0,
            ..ok.clone()
        },
    ];
    let mut fixed = ok.clone();
    fixed.workload.lengths = LengthDist::Fixed {
        prompt: 3000,
        output: 2000,
    };
    bad.push(fixed);
    let mut lin = ok.clone();
    lin.cost = CostModel::Linear(LinearCost {
        beta0: f64::NAN,
        ..LinearCost::default()
    });
    bad.push(lin);
    let mut sig = ok.clone();
    sig.workload.lengths = LengthDist::Lognormal {
        prompt_median: 10.0,
        prompt_sigma: -1.0,
        output_median: 1.0,
        output_sigma: 0.1,
    };
    bad.push(sig);
    for h in [-0.001, f64::NAN, f64::INFINITY] {
        let mut o = ok.clone();
        o.server.overhead_s = h;
        bad.push(o);
    }
    for cfg in bad {
        let e = simulate(&cfg).expect_err("invalid config must be an error");
        assert!(!e.to_string().is_empty());
    }
    assert!(simulate(&ok).is_ok());
}
