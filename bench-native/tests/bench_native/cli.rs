//! The command line's validated-config step: every refused value is named by the flag the
//! user set, nothing the user can type panics or aborts, work beyond `--max-requests` ends
//! at once with the estimate, a drained run that could not drain within the cap ends at
//! once with its estimated drain, and the flags for threshold admission and trace arrivals.

use crate::common::fixture;
use bench_native::cli::{Cli, Command};
use clap::Parser;
use engine::config::Admission;
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};

fn parse(args: &[&str]) -> Command {
    let mut v = vec!["bench-native"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

/// `simulate` with `args`: its validated configuration, or the error as printed.
fn simulate_config(args: &[&str]) -> Result<engine::SimConfig, String> {
    let mut v = vec!["simulate"];
    v.extend_from_slice(args);
    let Command::Simulate(a) = parse(&v) else {
        panic!("not simulate")
    };
    a.config().map_err(|e| format!("{e:#}"))
}

fn simulate_error(args: &[&str]) -> String {
    simulate_config(args).expect_err("refused")
}

/// The binary run with `args`, killed after `limit`: (exit code, stderr, seconds taken).
fn run_binary(args: &[&str], limit: Duration) -> (Option<i32>, String, f64) {
    let t = Instant::now();
    let mut child = Process::new(env!("CARGO_BIN_EXE_bench-native"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start bench-native");
    while t.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        t.elapsed().as_secs_f64(),
    )
}

#[test]
fn errors_name_the_flags_and_the_values_the_user_set() {
    let _cpu = crate::common::cpu_bound();
    assert_eq!(
        simulate_error(&["--batch", "0"]),
        "--batch must be at least 1, got 0"
    );
    assert!(simulate_error(&["--horizon", "0"]).contains("--horizon must be"));
    assert!(simulate_error(&["--kv", "10", "--lengths", "fixed"]).contains("raise --kv"));
    assert!(simulate_error(&["--overhead-ms=-1"]).contains("--overhead-ms must be"));
    assert_eq!(
        simulate_error(&["--rate", "0"]),
        "--rate must be a finite number > 0 and at most 1e9 [req/s], got 0"
    );
    // llama.cpp's slots own K/B tokens each: the message is about --kv and --batch
    let e = simulate_error(&["--preset", "llama-cpp", "--kv", "10"]);
    assert!(
        e.contains("--kv 10") && e.contains("--batch 8") && e.contains("at least 16"),
        "{e}"
    );
    assert!(!e.contains("max_model_len"), "{e}");
    // a block larger than the cache is a block, not a request
    let e = simulate_error(&["--block-size", "100000"]);
    assert!(
        e.contains("--block-size 100000") && e.contains("--kv 8192"),
        "{e}"
    );
    assert!(!e.contains("request of"), "{e}");
    // sweep and compare name the list flags
    let Command::Sweep(a) = parse(&["sweep", "--batches", "4,0"]) else {
        panic!()
    };
    let e = format!("{:#}", bench_native::sweep::spec(&a).unwrap_err());
    assert_eq!(e, "--batches must be at least 1 each, got 0");
    let Command::Sweep(a) = parse(&[
        "sweep",
        "--preset",
        "llama-cpp",
        "--kv",
        "8",
        "--batches",
        "8",
    ]) else {
        panic!()
    };
    let e = format!("{:#}", bench_native::sweep::spec(&a).unwrap_err());
    assert!(e.contains("--kv 8") && e.contains("--batches 8"), "{e}");
}

#[test]
fn seeds_are_parsed_with_their_flag_and_never_overflow() {
    let _cpu = crate::common::cpu_bound();
    for (seeds, says) in [
        ("a-b", "'a' is not a seed"),
        ("0-18446744073709551615", "at most 10000"),
        ("1,x", "'x' is not a seed"),
    ] {
        let e = Cli::try_parse_from(["bench-native", "sweep", "--seeds", seeds])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--seeds") && e.contains(says), "{seeds}: {e}");
    }
    let e = Cli::try_parse_from(["bench-native", "compare", "--noise-floor", "9-x"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--noise-floor"), "{e}");
    // the binary says so and exits 2 (a usage error), without a panic
    let (code, err, _) = run_binary(
        &["sweep", "--seeds", "0-18446744073709551615"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn too_many_threads_is_an_error_not_an_abort() {
    let _cpu = crate::common::cpu_bound();
    for sub in ["compare", "sweep"] {
        let (code, err, _) = run_binary(
            &[
                sub,
                "--threads",
                "100000",
                "--out",
                "kvq-threads-never-written",
            ],
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(1), "{sub}: {err}");
        assert!(
            err.contains("--threads must be at most 1024"),
            "{sub}: {err}"
        );
    }
}

#[test]
fn work_beyond_the_limit_ends_at_once_with_the_estimate() {
    let _cpu = crate::common::cpu_bound();
    let out = crate::common::scratch_root().join("kvq-limits-never-written");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (vec!["simulate", "--horizon", "1e12"], "--horizon must be at most 1e9"),
        (
            vec!["simulate", "--horizon", "1e8"],
            "about 1.000e8 requests to simulate (rate × horizon), more than --max-requests 20000000",
        ),
        (vec!["simulate", "--rate", "1e308"], "--rate must be"),
        (
            vec!["simulate", "--arrivals", "gamma", "--burstiness", "1e-300"],
            "--burstiness must be",
        ),
        (vec!["sweep", "--horizon", "1e12", "--out", out], "--horizon must be at most 1e9"),
        (vec!["sweep", "--horizon", "1e6", "--out", out], "800 runs"),
        (vec!["compare", "--horizon", "1e12", "--out", out], "--horizon must be at most 1e9"),
        (vec!["compare", "--horizon", "1e6", "--out", out], "240 runs"),
        (
            vec!["validate", "--requests", "100000000", "--out", out],
            "lower --requests",
        ),
    ] {
        let (code, err, secs) = run_binary(&args, Duration::from_secs(30));
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(secs < 10.0, "{args:?} took {secs:.1} s");
    }
    // --max-requests moves the limit both ways
    let at =
        |max: &str| simulate_config(&["--rate", "100", "--horizon", "10", "--max-requests", max]);
    let e = at("500").unwrap_err();
    assert!(
        e.contains("about 1.000e3 requests") && e.contains("--max-requests 500"),
        "{e}"
    );
    assert!(at("1000").is_ok());
}

/// A drained run of 20,000 req/s for 1 s at the reference server (best case ≈ 5 req/s):
/// its backlog of ≈ 2e4 requests needs ≈ 3700 horizons to drain, past the cap of 1000.
#[test]
fn a_drain_past_the_cap_ends_at_once_with_its_estimate_and_the_flag() {
    let _cpu = crate::common::cpu_bound();
    // Paged: the queue is unbounded (in reserve mode what K can reserve bounds the backlog).
    let over = [
        "--rate",
        "20000",
        "--horizon",
        "1",
        "--drain",
        "--kv-mode",
        "paged",
    ];
    let e = simulate_error(&over);
    assert!(
        e.starts_with("this run: it is drained, and at the server's best case (≈ 5.")
            && e.contains("against 20000 req/s offered")
            && e.contains("horizons, more than --max-drain-horizons 1000")
            && e.ends_with("raise --max-drain-horizons"),
        "{e}"
    );
    // The flag raises the cap; cut at the horizon there is no drain to estimate.
    let mut raised = over.to_vec();
    raised.extend(["--max-drain-horizons", "10000"]);
    assert!(simulate_config(&raised).is_ok());
    assert!(simulate_config(&["--rate", "20000", "--horizon", "1"]).is_ok());
    // Within the cap an overloaded drained run runs (about 2 horizons here).
    assert!(simulate_config(&["--rate", "15", "--horizon", "100", "--drain"]).is_ok());
    assert!(simulate_error(&["--max-drain-horizons=-1"])
        .starts_with("--max-drain-horizons must be a finite number >= 0"));
    let e = simulate_error(&[
        "--rate",
        "0.001",
        "--horizon",
        "1e9",
        "--drain",
        "--max-drain-horizons",
        "5000",
    ]);
    assert!(e.starts_with("--max-drain-horizons must be at most"), "{e}");
    // The binary ends at once; so does a sweep with such a point.
    let out = crate::common::scratch_root().join("kvq-drain-never-written");
    let out = out.to_str().unwrap();
    let mut sim = vec!["simulate"];
    sim.extend(over);
    for (args, says) in [
        (sim, "more than --max-drain-horizons 1000"),
        (
            vec![
                "sweep",
                "--rates",
                "1,20000",
                "--horizon",
                "1",
                "--drain",
                "--kv-mode",
                "paged",
                "--out",
                out,
            ],
            "one run of this grid: it is drained",
        ),
    ] {
        let (code, err, secs) = run_binary(&args, Duration::from_secs(30));
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(secs < 10.0, "{args:?} took {secs:.1} s");
    }
}

#[test]
fn threshold_admission_rejects_beyond_its_threshold() {
    let _cpu = crate::common::cpu_bound();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--rate",
            "6",
            "--batch",
            "4",
            "--kv",
            "65536",
            "--horizon",
            "300",
        ];
        args.extend_from_slice(extra);
        let cfg = simulate_config(&args).unwrap();
        (
            cfg.server.admission.clone(),
            engine::sim::simulate(&cfg).unwrap().summary,
        )
    };
    let (all, open) = run(&[]);
    assert_eq!(all, Admission::All);
    let (cap, capped) = run(&["--max-in-system", "6"]);
    assert_eq!(cap, Admission::MaxInSystem { max_in_system: 6 });
    assert!(
        capped.rejected > 0 && capped.rejected > open.rejected,
        "{capped:?}"
    );
    assert!(capped.ttft.p99 < open.ttft.p99);
    // the DP rule computes the threshold from a p99 TTFT target
    let (dp, _) = run(&["--dp-slo", "5"]);
    assert!(
        matches!(dp, Admission::MaxInSystem { max_in_system } if max_in_system >= 1),
        "{dp:?}"
    );
    assert!(simulate_error(&["--max-in-system", "0"]).contains("--max-in-system must be"));
    // and a sweep applies it at every grid point
    let Command::Sweep(a) = parse(&["sweep", "--max-in-system", "3", "--rates", "1,2"]) else {
        panic!()
    };
    let (spec, _, _) = bench_native::sweep::spec(&a).unwrap();
    assert_eq!(
        spec.config(2.0, 16, 16384, 0).server.admission,
        Admission::MaxInSystem { max_in_system: 3 }
    );
}

#[test]
fn trace_arrivals_come_from_a_file() {
    let _cpu = crate::common::cpu_bound();
    let trace = fixture("llama_server_run/sim/trace-1.4.json");
    let trace = trace.to_str().unwrap();
    let llama = [
        "--preset",
        "llama-cpp",
        "--batch",
        "4",
        "--kv",
        "8192",
        "--budget",
        "512",
    ];
    let mut args = vec!["--trace", trace];
    args.extend_from_slice(&llama);
    let cfg = simulate_config(&args).unwrap();
    let s = engine::sim::simulate(&cfg).unwrap().summary;
    assert_eq!((s.arrivals, s.completed), (40, 40), "{s:?}");
    let mut explicit = vec!["--arrivals", "trace"];
    explicit.extend_from_slice(&args);
    assert_eq!(simulate_config(&explicit).unwrap(), cfg);
    // a trace fixes the arrival times: no rate, and --arrivals trace needs the file
    let mut with_rate = args.clone();
    with_rate.extend_from_slice(&["--rate", "2"]);
    assert!(simulate_error(&with_rate).contains("--rate does not apply to --trace"));
    assert!(simulate_error(&["--arrivals", "trace"]).contains("needs --trace FILE"));
    // sweep: one row per (B, K), labelled with the trace's own rate
    let mut sweep = vec![
        "sweep",
        "--trace",
        trace,
        "--preset",
        "llama-cpp",
        "--batches",
        "2,4",
    ];
    sweep.extend_from_slice(&["--kv", "8192", "--seeds", "0"]);
    let Command::Sweep(a) = parse(&sweep) else {
        panic!()
    };
    let (spec, _, runs) = bench_native::sweep::spec(&a).unwrap();
    assert_eq!((spec.rates.len(), runs), (1, 2));
    let mut with_rates = sweep.clone();
    with_rates.extend_from_slice(&["--rates", "1,2"]);
    let Command::Sweep(a) = parse(&with_rates) else {
        panic!()
    };
    let e = format!("{:#}", bench_native::sweep::spec(&a).unwrap_err());
    assert!(
        e.contains("--rates does not apply to --arrivals trace"),
        "{e}"
    );
}

#[test]
fn help_shows_an_example_of_each_new_flag() {
    for (sub, flags) in [
        (
            "simulate",
            &[
                "--max-in-system",
                "--dp-slo",
                "--users",
                "--think",
                "--trace",
                "--max-requests",
                "--max-drain-horizons",
            ][..],
        ),
        (
            "sweep",
            &["--max-in-system", "--trace", "--max-requests"][..],
        ),
    ] {
        let e = Cli::try_parse_from(["bench-native", sub, "--help"]).unwrap_err();
        let help = e.to_string();
        let examples = &help[help.find("Examples:").expect("examples")..];
        for f in flags {
            assert!(
                examples
                    .lines()
                    .any(|l| l.contains("bench-native") && l.contains(f)),
                "{sub} --help has no example with {f}:\n{examples}"
            );
        }
    }
}

/// `microbench --chars-per-token` is checked as `run`'s is, before any server is reached:
/// no NaN, zero, negative ratio, nor one that builds prompts of gigabytes.
#[test]
fn microbench_checks_chars_per_token() {
    for (v, says) in [
        ("NaN", "finite number > 0"),
        ("0", "finite number > 0"),
        ("-4", "finite number > 0"),
        ("1e9", "over the limit"),
    ] {
        let flag = format!("--chars-per-token={v}");
        let Command::Microbench(a) = parse(&["microbench", &flag]) else {
            panic!("not microbench")
        };
        let e = format!("{:#}", a.config().expect_err(v));
        assert!(
            e.contains("--chars-per-token") && e.contains(says),
            "{v}: {e}"
        );
    }
    let Command::Microbench(a) = parse(&["microbench", "--chars-per-token", "4"]) else {
        panic!("not microbench")
    };
    assert_eq!(a.config().unwrap().chars_per_token, 4.0);
}

/// `microbench --timeout` is refused, not a panic in `Duration`, when it is no time.
#[test]
fn microbench_refuses_a_timeout_that_is_no_time() {
    for v in ["NaN", "0", "-1", "1e300"] {
        let flag = format!("--timeout={v}");
        let Command::Microbench(a) = parse(&["microbench", &flag]) else {
            panic!("not microbench")
        };
        let e = format!("{:#}", a.config().expect_err(v));
        assert!(
            e.contains("--timeout must be a finite number of seconds > 0"),
            "{v}: {e}"
        );
    }
}

/// `microbench --cached-prefixes` and `--cached-chunk` of 0 tokens are refused before any
/// server is reached.
#[test]
fn microbench_refuses_an_empty_cached_prefix_or_chunk() {
    for flags in [
        &["--cached-prefixes", "0,256"][..],
        &["--cached-prefixes", "256", "--cached-chunk", "0"],
    ] {
        let mut argv = vec!["microbench"];
        argv.extend(flags);
        let Command::Microbench(a) = parse(&argv) else {
            panic!("not microbench")
        };
        let e = format!("{:#}", a.config().expect_err("refused"));
        assert!(e.contains("must be ≥ 1 token"), "{flags:?}: {e}");
    }
    let Command::Microbench(a) = parse(&["microbench", "--cached-prefixes", "128,512"]) else {
        panic!("not microbench")
    };
    let c = a.config().unwrap();
    assert_eq!((c.cached_prefixes, c.cached_chunk), (vec![128, 512], 32));
}

/// The shipped samples of `data/traces/` import by their columns, detected or named with
/// `--trace-format`, and a broken line is named.
#[test]
fn real_trace_formats_import_by_their_columns() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/traces");
    for (file, format, requests) in [
        ("mooncake-sample.jsonl", "mooncake", 300),
        ("burstgpt-sample.csv", "burstgpt", 282),
        ("azure-sample.csv", "azure", 300),
    ] {
        let path = data.join(file);
        let path = path.to_str().unwrap();
        let detected = simulate_config(&["--trace", path, "--preset", "vllm"]).unwrap();
        let named = simulate_config(&[
            "--trace",
            path,
            "--trace-format",
            format,
            "--preset",
            "vllm",
        ])
        .unwrap();
        assert_eq!(detected, named, "{file}");
        let engine::workload::ArrivalProcess::Trace { requests: r } = &named.workload.arrivals
        else {
            panic!("{file}: not a trace")
        };
        assert_eq!(r.len(), requests, "{file}");
        let s = engine::sim::simulate(&named).unwrap().summary;
        assert_eq!(s.arrivals, requests as u64, "{file}");
    }
    // A BurstGPT file read as Azure: its missing column, on the header line.
    let burst = data.join("burstgpt-sample.csv");
    let e = simulate_error(&[
        "--trace",
        burst.to_str().unwrap(),
        "--trace-format",
        "azure",
    ]);
    assert!(e.contains("line 1: missing column `TIMESTAMP`"), "{e}");
    let dir = crate::common::scratch_root().join(format!("kvq-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]}\n\
         {\"timestamp\": 9, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1]}\n",
    )
    .unwrap();
    let e = simulate_error(&["--trace", bad.to_str().unwrap()]);
    assert!(
        e.contains("(mooncake trace): line 2: 1 hash_ids for input_length 600; expected 2"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `simulate` with fleet flags: the validated fleet, or the error as printed.
fn fleet_config(args: &[&str]) -> Result<engine::fleet::FleetConfig, String> {
    let mut v = vec!["simulate"];
    v.extend_from_slice(args);
    let Command::Simulate(a) = parse(&v) else {
        panic!("not simulate")
    };
    bench_native::simulate::fleet_config(&a)
        .map(|c| c.expect("a fleet"))
        .map_err(|e| format!("{e:#}"))
}

fn fleet_file(name: &str, json: &str) -> String {
    let dir = crate::common::scratch_root().join(format!("kvq-fleet-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, json).unwrap();
    p.display().to_string()
}

#[test]
fn fleet_flags_refuse_what_cannot_run_by_name() {
    let _cpu = crate::common::cpu_bound();
    let e = fleet_config(&["--replicas", "0"]).unwrap_err();
    assert_eq!(e, "--replicas must be at least 1 and at most 4096, got 0");
    let e = fleet_config(&["--replicas", "2", "--router", "fastest"]).unwrap_err();
    assert!(
        e.starts_with("--router fastest: unknown router 'fastest'"),
        "{e}"
    );
    // reserve-mode replicas report reservations, not use
    let e = fleet_config(&["--replicas", "2", "--router", "kv_aware"]).unwrap_err();
    assert!(e.contains("kv_aware router needs paged servers"), "{e}");
    assert!(fleet_config(&["--replicas", "2", "--router", "kv", "--kv-mode", "paged"]).is_ok());
    let Command::Simulate(a) = parse(&["simulate", "--router", "jsq"]) else {
        panic!()
    };
    let e = format!(
        "{:#}",
        bench_native::simulate::fleet_config(&a).unwrap_err()
    );
    assert!(e.contains("--router jsq needs a fleet"), "{e}");
    // fleet files: the field that is wrong, by its place in the file
    let f = fleet_file(
        "preset.json",
        r#"{"replicas":[{"count":1},{"preset":"tgi"}]}"#,
    );
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(e.contains("replicas[1].preset: unknown value 'tgi'"), "{e}");
    assert!(e.contains("vllm-v1"), "{e}");
    let f = fleet_file(
        "gpu.json",
        r#"{"replicas":[{"cost":"roofline:Z9000:Llama-3.1-8B"}]}"#,
    );
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(e.contains("replicas[0]") && e.contains("Z9000"), "{e}");
    let f = fleet_file(
        "model.json",
        r#"{"replicas":[{"cost":"roofline:H100:Llama-99B"}]}"#,
    );
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(e.contains("replicas[0]") && e.contains("Llama-99B"), "{e}");
    let f = fleet_file("zero.json", r#"{"replicas":[{"count":0}]}"#);
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(
        e.ends_with("replicas[0].count must be at least 1, got 0"),
        "{e}"
    );
    let f = fleet_file("typo.json", r#"{"replicas":[{"cuont":2}]}"#);
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(e.contains("not a fleet file") && e.contains("cuont"), "{e}");
    let f = fleet_file("batch.json", r#"{"replicas":[{"batch":0}]}"#);
    let e = fleet_config(&["--fleet", &f]).unwrap_err();
    assert!(
        e.contains("replicas[0]") && e.contains("--batch must be at least 1"),
        "{e}"
    );
    let f = fleet_file("empty.json", r#"{"replicas":[]}"#);
    assert!(fleet_config(&["--fleet", &f])
        .unwrap_err()
        .contains("replicas is empty"));
}

#[test]
fn a_fleet_file_builds_mixed_replicas() {
    let _cpu = crate::common::cpu_bound();
    let f = fleet_file(
        "mixed.json",
        r#"{"router":"p2c","replicas":[
            {"count":2,"preset":"vllm-v1","batch":16,"kv":4096},
            {"preset":"llama-cpp","batch":4,"kv":8192,"budget":512,"overhead_ms":3}]}"#,
    );
    let c = fleet_config(&["--fleet", &f, "--rate", "4"]).unwrap();
    assert_eq!(c.router, engine::fleet::RouterKind::PowerOfD { d: 2 });
    assert_eq!(c.replicas.len(), 3);
    assert_eq!(c.replicas[0], c.replicas[1]);
    assert_eq!(c.replicas[0].server.max_batch, 16);
    assert_eq!(c.replicas[0].server.kv_mode, engine::KvMode::Paged);
    assert_eq!(c.replicas[2].server.max_batch, 4);
    assert_eq!(c.replicas[2].server.token_budget, 512);
    assert!((c.replicas[2].server.overhead_s - 0.003).abs() < 1e-12);
    // --router wins over the file's
    let c = fleet_config(&["--fleet", &f, "--router", "rr"]).unwrap();
    assert_eq!(c.router, engine::fleet::RouterKind::RoundRobin);
}

/// The binary's stdout with `args`, which must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = Process::new(env!("CARGO_BIN_EXE_bench-native"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("start bench-native");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn simulate_prints_a_fleet_and_one_replica_is_the_one_server_run() {
    let _cpu = crate::common::cpu_bound();
    let text = stdout_of(&[
        "simulate",
        "--rate",
        "12",
        "--horizon",
        "200",
        "--replicas",
        "4",
        "--router",
        "lor",
    ]);
    assert!(text.contains("TTFT mean"), "{text}");
    assert!(
        text.contains("router least_outstanding over 4 replicas"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("replica"))
        .skip(1)
        .take(4)
        .collect();
    let routed: u64 = rows
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&[
        "simulate",
        "--rate",
        "12",
        "--horizon",
        "200",
        "--replicas",
        "4",
        "--router",
        "lor",
        "--json",
    ]))
    .unwrap();
    assert_eq!(json["per_replica"].as_array().unwrap().len(), 4);
    assert_eq!(routed, json["summary"]["arrivals"].as_u64().unwrap());
    assert!(json["imbalance"].as_f64().unwrap() >= 1.0);
    // one replica behind any router is the one-server run
    let one = stdout_of(&["simulate", "--rate", "3", "--horizon", "300", "--json"]);
    let one: serde_json::Value = serde_json::from_str(&one).unwrap();
    for r in ["rr", "jsq", "p2c"] {
        let f: serde_json::Value = serde_json::from_str(&stdout_of(&[
            "simulate",
            "--rate",
            "3",
            "--horizon",
            "300",
            "--json",
            "--replicas",
            "1",
            "--router",
            r,
        ]))
        .unwrap();
        assert_eq!(f["summary"], one, "{r}");
    }
}

#[test]
fn sweep_writes_one_fleet_row_per_run() {
    let _cpu = crate::common::cpu_bound();
    let out = crate::common::scratch_root().join(format!("kvq-fleet-sweep-{}", std::process::id()));
    let o = out.display().to_string();
    let text = stdout_of(&[
        "sweep",
        "--rates",
        "4,8",
        "--batches",
        "8",
        "--kv",
        "8192",
        "--seeds",
        "0-2",
        "--horizon",
        "100",
        "--replicas",
        "3",
        "--router",
        "random",
        "--threads",
        "1",
        "--out",
        &o,
    ]);
    assert!(
        text.contains("6 fleet runs of 3 replicas (random)"),
        "{text}"
    );
    let csv = std::fs::read_to_string(out.join("fleet_summary.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 7, "{csv}");
    assert!(lines[1].starts_with("4.0,8,8192,0,random,3,"), "{csv}");
    let reps = std::fs::read_to_string(out.join("fleet_replicas.csv")).unwrap();
    assert_eq!(reps.lines().count(), 1 + 6 * 3, "{reps}");
    assert!(!out.join("sweep_summary.csv").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn users_make_a_closed_loop_in_front_of_the_servers() {
    let c = fleet_config(&["--users", "12", "--think", "2.5"]).unwrap();
    assert_eq!(
        c.replicas.len(),
        1,
        "one server unless --replicas says otherwise"
    );
    assert_eq!(
        c.client,
        engine::fleet::Client::Users {
            users: 12,
            think_s: 2.5
        }
    );
    let c = fleet_config(&["--users", "3", "--replicas", "4", "--router", "lor"]).unwrap();
    assert_eq!(c.replicas.len(), 4);
    let e = fleet_config(&["--users", "0"]).unwrap_err();
    assert!(
        e.contains("--users 0") && e.contains("must be at least 1"),
        "{e}"
    );
    let e = fleet_config(&["--users", "2", "--think=-1"]).unwrap_err();
    assert!(e.contains("think time"), "{e}");
    // The users set the pace: a rate, or --think without users, is refused by name.
    let mut v = vec!["bench-native", "simulate", "--users", "2", "--rate", "3"];
    let e = Cli::try_parse_from(&v).unwrap_err().to_string();
    assert!(e.contains("--rate") && e.contains("--users"), "{e}");
    v = vec!["bench-native", "simulate", "--think", "3"];
    let e = Cli::try_parse_from(&v).unwrap_err().to_string();
    assert!(e.contains("--users"), "{e}");
    // The run: every user busy, never more than U in the system (the table's own line).
    let (code, err, _) = run_binary(
        &[
            "simulate",
            "--users",
            "4",
            "--think",
            "1",
            "--horizon",
            "200",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("closed loop: 4 users, think 1 s:"), "{err}");
}
