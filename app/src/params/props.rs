//! Property tests of the URL state parser: it never panics, what it accepts the engine
//! runs, and a valid view round-trips through its query string.

use super::*;
use engine::limits::Limits;
use proptest::prelude::*;

/// URL keys of the page, and a few it does not know.
fn key() -> impl Strategy<Value = String> {
    let mut keys: Vec<String> = Params::default()
        .to_query()
        .split('&')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    keys.extend(["zzz", "view", "", "B=", "%2C"].map(String::from));
    proptest::sample::select(keys)
}

/// Values: keys' own values, numbers at and past every bound, and any text.
fn value() -> impl Strategy<Value = String> {
    let special = proptest::sample::select(
        [
            "0",
            "-0",
            "1",
            "-1",
            "1e-300",
            "1e308",
            "1e309",
            "NaN",
            "inf",
            "-inf",
            "4294967295",
            "4294967296",
            "18446744073709551615",
            "1099511627776",
            "65536",
            "65537",
            "1e9",
            "1e5",
            "0.5,1,2",
            "1,x",
            ",,",
            "gamma",
            "paged",
            "dp",
            "threshold",
            "linear",
            "roofline",
            "A10G",
            "Qwen2.5-1.5B",
            "fixed",
            "mixture",
            "vllm-a10g",
            "interference",
            "p99_ttft",
            "50",
            "51",
        ]
        .map(String::from)
        .to_vec(),
    );
    prop_oneof![
        3 => special,
        2 => any::<f64>().prop_map(|x| x.to_string()),
        2 => any::<u64>().prop_map(|x| x.to_string()),
        1 => ".{0,12}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    proptest::collection::vec((key(), value()), 0..8).prop_map(|kv| {
        kv.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

/// 256 cases unless `PROPTEST_CASES` is set (the live tier's longer search); most random
/// queries are rejected as invalid, so the reject budget scales with the cases.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        max_global_rejects: cases.saturating_mul(100),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn reading_any_query_string_never_panics(q in ".{0,200}") {
        let (p, _) = Params::read_query(&q);
        let _ = p.check();
        let _ = Params::from_query(&q);
    }

    #[test]
    fn reading_a_query_of_page_keys_never_panics(q in query()) {
        let (p, bad) = Params::read_query(&q);
        let _ = p.check();
        for b in &bad {
            prop_assert!(!b.message().is_empty() && !b.field_message().is_empty());
        }
    }

    /// What the page accepts (every value read, the parameters checked) the engine
    /// runs: every rate and seed of the sweep, the sweep's memory and the detail run.
    #[test]
    fn anything_accepted_validates(q in query()) {
        let (p, bad) = Params::read_query(&q);
        prop_assume!(bad.is_empty() && p.check().is_ok());
        let limits = Limits::default();
        for &r in p.rates.iter().chain([&p.rate]) {
            for seed in 0..p.seeds as u64 {
                let cfg = p.sim_config(r, seed);
                prop_assert!(cfg.validate().is_ok(), "{q}: λ {r} seed {seed}: {:?}", cfg.validate());
            }
            let held = p.seeds as f64 * p.sim_config(r, 0).expected_requests();
            prop_assert!(held <= limits.max_requests_per_sweep, "{q}: {held}");
        }
        let mut d = p.sim_config(p.rate, 0);
        d.keep_records = true;
        d.timeseries_points = DETAIL_POINTS;
        prop_assert!(d.validate().is_ok(), "{q}");
    }

    /// A valid Params comes back from its own query string, with nothing refused.
    #[test]
    fn a_valid_params_round_trips_through_its_query(q in query(), rates in proptest::collection::vec(0.01f64..50.0, 1..6), seeds in 1u32..6) {
        let (mut p, _) = Params::read_query(&q);
        p.rates = parse_rates(&format_rates(&rates)).unwrap();
        p.seeds = seeds;
        prop_assume!(p.check().is_ok());
        let text = p.to_query();
        let (back, bad) = Params::read_query(&text);
        prop_assert!(bad.is_empty(), "{text}: {bad:?}");
        prop_assert_eq!(&back, &p, "{}", text);
        prop_assert_eq!(back.to_query(), text);
    }
}
