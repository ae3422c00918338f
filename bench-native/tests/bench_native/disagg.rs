//! `simulate --disagg P:D`: its flags refused by name, the pools it builds, and a run of
//! the binary with the pools, the transfers and the tandem model in its JSON.

use bench_native::cli::{Cli, Command};
use clap::Parser;
use engine::disagg::{DisaggConfig, FirstTokenFrom};
use engine::fleet::RouterKind;
use std::process::Command as Process;

const ROOFLINE: [&str; 6] = [
    "--preset",
    "vllm",
    "--cost",
    "roofline:A10G:Qwen2.5-1.5B",
    "--batch",
    "32",
];

/// `simulate` with the roofline server and `args`: the disaggregated configuration, or
/// the error as printed.
fn config(args: &[&str]) -> Result<DisaggConfig, String> {
    let mut v = vec!["bench-native", "simulate"];
    v.extend_from_slice(&ROOFLINE);
    v.extend_from_slice(args);
    let cli = Cli::try_parse_from(v).map_err(|e| e.to_string())?;
    let Command::Simulate(a) = cli.command else {
        panic!("not simulate")
    };
    bench_native::simulate::disagg::config(&a)
        .map_err(|e| format!("{e:#}"))
        .map(|c| c.expect("--disagg given"))
}

#[test]
fn disagg_flags_refuse_what_cannot_run_by_name() {
    for (args, want) in [
        (vec!["--disagg", "0:1"], "--disagg must be P:D"),
        (vec!["--disagg", "2:0"], "--disagg must be P:D"),
        (vec!["--disagg", "3"], "--disagg must be P:D"),
        (
            vec!["--disagg", "1:1", "--link-gbps", "0"],
            "--link-gbps must be a number > 0",
        ),
        (
            vec!["--disagg", "1:1", "--link-gbps=-5"],
            "--link-gbps must be a number > 0",
        ),
        (
            vec!["--disagg", "1:1", "--link-gbps", "NaN"],
            "--link-gbps must be a number > 0",
        ),
        (
            vec!["--disagg", "1:1", "--link-latency-ms=-1"],
            "--link-latency-ms must be",
        ),
        (
            vec!["--disagg", "1:1", "--first-token", "middle"],
            "--first-token must be prefill or decode",
        ),
        (
            vec!["--disagg", "1:1", "--kv-geometry", "Llama-99B"],
            "--kv-geometry must be",
        ),
        (
            vec!["--disagg", "1:1", "--router", "fastest"],
            "--router must be",
        ),
    ] {
        let e = config(&args).unwrap_err();
        assert!(e.contains(want), "{args:?}: {e}");
    }
    // A cost that is not a roofline needs the geometry named.
    let cli =
        Cli::try_parse_from(["bench-native", "simulate", "--disagg", "1:1", "--drain"]).unwrap();
    let Command::Simulate(a) = cli.command else {
        panic!()
    };
    let e = format!(
        "{:#}",
        bench_native::simulate::disagg::config(&a).unwrap_err()
    );
    assert!(e.contains("--kv-geometry"), "{e}");
}

#[test]
fn disagg_builds_both_pools_with_the_decode_pools_own_settings() {
    let c = config(&[
        "--disagg",
        "2:3",
        "--router",
        "lor",
        "--link-gbps",
        "inf",
        "--link-latency-ms",
        "0.5",
        "--first-token",
        "prefill",
        "--decode-batch",
        "128",
        "--decode-kv",
        "300000",
    ])
    .unwrap();
    assert_eq!((c.prefill.replicas.len(), c.decode.replicas.len()), (2, 3));
    assert_eq!(c.prefill.router, RouterKind::LeastOutstanding);
    assert_eq!(c.decode.router, RouterKind::LeastOutstanding);
    assert!(c.link.bandwidth_bytes_per_s.is_infinite());
    assert_eq!(c.link.latency_s, 0.5e-3);
    assert_eq!(c.first_token, FirstTokenFrom::Prefill);
    assert_eq!(
        c.link.geometry.bytes_per_token(),
        28.0 * 2.0 * 2.0 * 128.0 * 2.0
    );
    assert_eq!(c.prefill.replicas[0].server.max_batch, 32);
    assert_eq!(c.decode.replicas[0].server.max_batch, 128);
    assert_eq!(c.decode.replicas[0].server.kv_tokens, 300_000);
}

#[test]
fn simulate_disagg_prints_the_pools_the_transfers_and_the_model() {
    let mut args = vec!["simulate"];
    args.extend_from_slice(&ROOFLINE);
    args.extend_from_slice(&[
        "--rate",
        "8",
        "--horizon",
        "60",
        "--disagg",
        "1:2",
        "--router",
        "lor",
        "--json",
    ]);
    let out = Process::new(env!("CARGO_BIN_EXE_bench-native"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let arrivals = j["summary"]["arrivals"].as_u64().unwrap();
    assert!(arrivals > 300, "{j}");
    assert_eq!(j["summary"]["completed"].as_u64().unwrap(), arrivals);
    assert_eq!(j["prefill"]["replicas"].as_array().unwrap().len(), 1);
    assert_eq!(j["decode"]["replicas"].as_array().unwrap().len(), 2);
    assert_eq!(j["transfer"]["transfers"].as_u64().unwrap(), arrivals);
    let tx = j["transfer"]["time"]["mean"].as_f64().unwrap();
    assert!(tx > 0.0 && tx < 0.1, "{tx}");
    let model = j["model"]["overall"]["ttft_mean_s"].as_f64().unwrap();
    let sim = j["summary"]["ttft"]["mean"].as_f64().unwrap();
    assert!((model / sim - 1.0).abs() < 0.25, "model {model} sim {sim}");
    // The table names the pools.
    args.pop();
    let out = Process::new(env!("CARGO_BIN_EXE_bench-native"))
        .args(&args)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("prefill") && table.contains("decode") && table.contains("transfers"),
        "{table}"
    );
    assert!(table.contains("tandem model"), "{table}");
}

#[test]
fn plan_disagg_adds_the_cheapest_splits_and_refuses_a_bad_link() {
    let bin = env!("CARGO_BIN_EXE_bench-native");
    let out = Process::new(bin)
        .args([
            "plan",
            "--preset",
            "vllm-v1",
            "--rate",
            "20",
            "--disagg",
            "--link-gbps=0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--link-gbps must be a number > 0"), "{e}");
    let out = Process::new(bin)
        .args([
            "plan",
            "--preset",
            "vllm-v1",
            "--rate",
            "20",
            "--model",
            "Qwen2.5-1.5B",
            "--gpus",
            "A10G",
            "--tp",
            "1",
            "--seeds",
            "1",
            "--finalists",
            "1",
            "--disagg",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &j["disaggregated"]["fleets"][0];
    assert!(
        f["prefill"].as_u64().unwrap() >= 1 && f["decode"].as_u64().unwrap() >= 1,
        "{j}"
    );
    assert!(
        f["predicted"]["slo_attainment"].as_f64().unwrap() >= 0.9,
        "{f}"
    );
    assert_eq!(j["disaggregated"]["first_token"], "decode");
}
