//! The parameters' URL round trips, validation and messages.

use super::*;

#[test]
fn query_round_trips_for_every_preset() {
    for preset in Preset::ALL {
        let mut p = preset.params();
        p.rates = vec![0.25, 1.5, 3.0];
        p.max_batch = 12;
        p.metric = Metric::Blocking;
        let (back, errs) = Params::from_query(&format!("?{}", p.to_query()));
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(back, p);
    }
}

#[test]
fn the_front_end_overhead_reaches_the_engine_and_the_url() {
    let p = Params::default().edited("oh", "2.5").unwrap();
    assert_eq!(p.sim_config(1.0, 0).server.overhead_s, 0.0025);
    let (back, errs) = Params::from_query(&p.to_query());
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(back.overhead_ms, 2.5);
    for bad in ["-1", "x", "NaN"] {
        let e = Params::default().edited("oh", bad).unwrap_err();
        assert!(e.contains("front-end overhead [ms]"), "{e}");
    }
    // links made before the field existed still load, with no overhead
    let (old, errs) = Params::from_query("B=4&K=4096");
    assert!(errs.is_empty() && old.overhead_ms == 0.0);
}

#[test]
fn the_admission_rule_reaches_the_engine_and_the_url() {
    // Links made before the rule existed admit everything.
    let (old, errs) = Params::from_query("B=4&K=4096");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(old.admission, AdmissionRule::All);
    assert_eq!(old.sim_config(1.0, 0).server.admission, Admission::All);

    let (p, errs) = Params::from_query("adm=threshold&nsys=5");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(
        p.sim_config(2.0, 1).server.admission,
        Admission::MaxInSystem { max_in_system: 5 }
    );
    p.validate().unwrap();
    let (back, errs) = Params::from_query(&p.to_query());
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(back, p);
    let e = p.edited("nsys", "0").unwrap().validate().unwrap_err();
    assert!(e.starts_with("max in system n [requests]"), "{e}");

    // The DP rule: the engine's threshold for the SLO, at each run's B and K.
    let (mut dp, errs) = Params::from_query("adm=dp&slo_ttft=3");
    assert!(errs.is_empty(), "{errs:?}");
    dp.validate().unwrap();
    let base = Params::default().sim_config(dp.rate, 0);
    let want = engine::analytic::dp_threshold(&base, 3.0)
        .unwrap()
        .max_in_system;
    assert_eq!(dp.dp_threshold(), Ok(want));
    assert_eq!(
        dp.sim_config(dp.rate, 0).server.admission,
        Admission::MaxInSystem {
            max_in_system: want
        }
    );
    let mut small = dp.sim_config(dp.rate, 0);
    small.server.kv_tokens = 2048;
    dp.resolve_admission(&mut small);
    let mut small_all = base.clone();
    small_all.server.kv_tokens = 2048;
    let want_small = engine::analytic::dp_threshold(&small_all, 3.0)
        .unwrap()
        .max_in_system;
    assert_ne!(want_small, want, "the threshold follows the run's K");
    assert_eq!(
        small.server.admission,
        Admission::MaxInSystem {
            max_in_system: want_small
        }
    );
    let (back, _) = Params::from_query(&dp.to_query());
    assert_eq!(back, dp);
    // An SLO no threshold can meet is said plainly, by the rule's name.
    dp.slo_ttft_s = 1e-4;
    let e = dp.validate().unwrap_err();
    assert!(e.starts_with("threshold (DP) admission: "), "{e}");
}

#[test]
fn the_dp_rule_on_a_kv_cache_of_millions_of_requests_is_checked_at_once() {
    // K = 2^32 - 1 tokens holds millions of requests: the threshold comes from the chain's
    // likely states, and the check answers instead of running through every one.
    let (p, errs) = Params::from_query("adm=dp&K=4294967295&rates=39.4,44&seeds=2");
    assert!(errs.is_empty(), "{errs:?}");
    p.check().unwrap();
    let n = p.dp_threshold().unwrap();
    let want = engine::analytic::dp_threshold(&p.admit_all_config(p.rate, 0), p.slo_ttft_s)
        .unwrap()
        .max_in_system;
    assert_eq!(n, want);
    assert!(n > 1, "{n}");
}

#[test]
fn bad_query_values_are_reported_and_skipped() {
    let (p, errs) = Params::from_query("B=abc&rates=1,x&zzz=1&K=4096");
    assert_eq!(p.max_batch, Params::default().max_batch);
    assert_eq!(p.kv_tokens, 4096);
    assert_eq!(errs.len(), 3);
}

#[test]
fn roofline_cost_sets_kv_from_the_gpu() {
    let (mut p, errs) = Params::from_query("cost=roofline&gpu=A10G&llm=Qwen2.5-1.5B&K=4096");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(p.kv_tokens, 4096, "a shared K survives reading the URL");
    p.apply_roofline_kv();
    assert!(p.kv_tokens > 400_000, "{}", p.kv_tokens);
    assert!(matches!(p.cost_model(), CostModel::Roofline(_)));
    p.validate().unwrap();
    let (back, _) = Params::from_query(&p.to_query());
    assert_eq!(back, p);
    let (_, errs) = Params::from_query("gpu=TPU");
    assert_eq!(errs.len(), 1);
}

#[test]
fn presets_validate() {
    for preset in Preset::ALL {
        preset.params().validate().unwrap();
    }
    let p = Params::default();
    assert_eq!(p.sim_config(1.0, 0), SimConfig::reference(1.0, 8, 8192));
}

#[test]
fn get_reads_what_set_writes() {
    let mut p = Params::default();
    assert!(p.set("rates", "1,2.5"));
    assert_eq!(p.get("rates"), "1,2.5");
    assert_eq!(p.get("B"), "8");
    assert_eq!(p.get("nope"), "");
}

#[test]
fn messages_name_fields_by_their_page_labels() {
    let p = Params {
        max_batch: 0,
        ..Params::default()
    };
    let e = p.validate().unwrap_err();
    assert_eq!(e, "max batch B [seqs] must be at least 1, got 0");
    let p = Params {
        fixed_prompt: 300,
        fixed_output: 100,
        lengths: Lengths::Fixed,
        kv_tokens: 256,
        ..Params::default()
    };
    let e = p.validate().unwrap_err();
    assert!(e.ends_with("raise KV capacity K [tokens]"), "{e}");
    // Only whole words: a longer identifier keeps its name.
    assert_eq!(
        page_message("max_batch_x and beta0 + beta_decode > 0"),
        "max_batch_x and β0 [s] + β decode [s/seq] > 0"
    );
    assert_eq!(
        Params::default().edited("rate", "abc").unwrap_err(),
        "chosen λ [req/s]: 'abc' is not a valid value"
    );
    // Every text field has a label, and each label is unique.
    let mut labels: Vec<&str> = FIELDS.iter().map(|f| f.2).collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), FIELDS.len());
    for (key, _, _) in FIELDS {
        assert!(
            !Params::default().get(key).is_empty(),
            "{key} is a parameter"
        );
    }
}

#[test]
fn correcting_a_value_gives_back_the_same_parameters() {
    // B = 0 is a number (set), but invalid (validate says so by its label); setting
    // 8 again gives parameters equal to the last valid ones, which validate.
    let shown = Params::default();
    let bad = shown.edited("B", "0").unwrap();
    assert!(bad
        .validate()
        .unwrap_err()
        .starts_with("max batch B [seqs]"));
    let back = bad.edited("B", " 8 ").unwrap();
    assert_eq!(back, shown);
    assert!(back.validate().is_ok());
    // A value that is not a number leaves the parameters alone.
    assert!(shown.edited("rate", "abc").is_err());
    assert_eq!(shown.edited("rate", "4").unwrap(), shown);
}

#[test]
fn rates_parse() {
    assert_eq!(parse_rates("3, 1,2,2").unwrap(), vec![1.0, 2.0, 3.0]);
    assert!(parse_rates("").is_err());
    assert!(parse_rates("1,-2").is_err());
}

#[test]
fn values_past_the_engines_bounds_are_refused_by_their_field() {
    // Each URL that used to reach a worker and trap, with the field it is about.
    for (query, key) in [
        ("rates=1e5", "rates"),
        ("rate=1e308", "rate"),
        ("B=4294967295", "B"),
        ("K=18446744073709551615", "K"),
        ("arr=gamma&k=1e-300", "k"),
    ] {
        let (p, bad) = Params::read_query(query);
        assert!(bad.is_empty(), "{query}: {bad:?}");
        let e = p.check().unwrap_err();
        assert_eq!(e.key, Some(key), "{query}: {e:?}");
        assert!(e.message.contains(label(key)), "{query}: {}", e.message);
    }
    // Within the engine's per-run limit, but not the seeds the worker holds at once.
    let p = Params::read_query("rates=40&T=100000&seeds=40").0;
    assert!(p.sim_config(40.0, 0).validate().is_ok());
    let e = p.check().unwrap_err();
    assert_eq!(e.key, Some("rates"));
    assert!(
        e.message.contains("max_requests_per_sweep"),
        "{}",
        e.message
    );
}

#[test]
fn a_bad_url_value_keeps_its_key_and_text() {
    let (_, bad) = Params::read_query("B=abc&zzz=1");
    assert_eq!(
        bad,
        vec![
            BadValue {
                key: "B".into(),
                text: "abc".into(),
                known: true
            },
            BadValue {
                key: "zzz".into(),
                text: "1".into(),
                known: false
            },
        ]
    );
    assert_eq!(
        bad[0].field_message(),
        "max batch B [seqs]: 'abc' from the URL is not a valid value"
    );
}

#[test]
fn shared_prompts_conversations_and_the_prefix_cache_reach_the_engine_and_the_url() {
    use engine::config::PrefixCache;
    use engine::workload::SharedTokens;
    // Links made before the fields existed: nothing shared, no cache.
    let (old, errs) = Params::from_query("B=4&K=4096");
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(old.sim_config(1.0, 0).workload.shared, None);
    assert_eq!(old.sim_config(1.0, 0).server.prefix_cache, PrefixCache::Off);

    let (p, errs) =
        Params::from_query("kv=paged&block=16&pc=apc&sp=1&spg=4&sps=0.75&spt=256&spz=1.2");
    assert!(errs.is_empty(), "{errs:?}");
    p.validate().unwrap();
    let cfg = p.sim_config(2.0, 0);
    assert_eq!(cfg.server.prefix_cache, PrefixCache::Apc);
    let Some(SharedTokens::Prefixes { system }) = cfg.workload.shared else {
        panic!("{:?}", cfg.workload.shared)
    };
    assert_eq!(
        (system.groups, system.share, system.tokens, system.zipf),
        (4, 0.75, 256, 1.2)
    );
    let (back, errs) = Params::from_query(&p.to_query());
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(back, p);

    // Conversations, with and without system prompts.
    let conv = p.edited("conv", "1").unwrap().edited("cvm", "3").unwrap();
    let conv = conv
        .edited("cvx", "6")
        .unwrap()
        .edited("cvt", "20")
        .unwrap();
    conv.validate().unwrap();
    match conv.sim_config(2.0, 0).workload.shared {
        Some(SharedTokens::Conversations {
            conversations: c,
            system: Some(s),
        }) => assert_eq!(
            (c.mean_turns, c.max_turns, c.think_s, s.groups),
            (3.0, 6, 20.0, 4)
        ),
        other => panic!("{other:?}"),
    }
    let alone = conv.edited("sp", "0").unwrap();
    assert!(matches!(
        alone.sim_config(2.0, 0).workload.shared,
        Some(SharedTokens::Conversations { system: None, .. })
    ));
    assert_eq!(Params::from_query(&conv.to_query()).0, conv);
}

#[test]
fn bad_shared_and_prefix_cache_values_are_refused_beside_their_field() {
    let base = "kv=paged&block=16&pc=apc&sp=1&conv=1";
    Params::read_query(base).0.validate().unwrap();
    // Values that are not values of the field: kept with their key, for the field.
    for (key, bad) in [
        ("sp", "2"),
        ("conv", "yes"),
        ("pc", "lru"),
        ("spg", "-1"),
        ("spt", "1.5"),
        ("sps", "x"),
        ("cvt", "NaN"),
    ] {
        let (_, bad_values) = Params::read_query(&format!("{base}&{key}={bad}"));
        assert_eq!(bad_values.len(), 1, "{key}={bad}");
        assert_eq!(bad_values[0].key, key);
        assert!(bad_values[0].known, "{key} is a parameter of the page");
        let e = Params::read_query(base).0.edited(key, bad).unwrap_err();
        assert!(e.starts_with(label(key)), "{e}");
    }
    // Numbers out of the engine's range: refused by check, beside their field.
    for (key, bad) in [
        ("spg", "0"),
        ("spg", "70000"),
        ("sps", "1.5"),
        ("spt", "0"),
        ("spz", "-1"),
        ("cvm", "0.5"),
        ("cvx", "0"),
        ("cvt", "0"),
    ] {
        let (p, bv) = Params::read_query(&format!("{base}&{key}={bad}"));
        assert!(bv.is_empty(), "{key}={bad}: {bv:?}");
        let e = p.check().unwrap_err();
        assert_eq!(e.key, Some(key), "{key}={bad}: {e:?}");
        assert!(e.message.contains(label(key)), "{key}={bad}: {}", e.message);
    }
    // The cache needs paged KV: said beside the cache's field, in the page's words.
    let e = Params::read_query("pc=apc&sp=1").0.check().unwrap_err();
    assert_eq!(e.key, Some("pc"));
    assert!(e.message.contains("needs paged KV"), "{}", e.message);
    // A field of a part that is off is not the engine's business.
    let (off, _) = Params::read_query("kv=paged&pc=apc&spg=0");
    off.validate().unwrap();
}
