//! `plan`: the cheapest fleet meeting an SLO, screened by the model and confirmed by
//! simulation, and its refusals of inputs it cannot plan.

use serde_json::Value;
use std::process::{Command, Output};

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench-native"))
        .arg("plan")
        .args(args)
        .output()
        .unwrap()
}

/// A small plan: Qwen2.5-7B at 20 req/s, fixed 512 → 128 lengths, a 120 s horizon.
const SMALL: &[&str] = &[
    "--preset",
    "vllm-v1",
    "--rate",
    "20",
    "--model",
    "Qwen2.5-7B",
    "--gpus",
    "A10G,L4,H100",
    "--tp",
    "1,2",
    "--batch",
    "64",
    "--lengths",
    "fixed",
    "--prompt",
    "512",
    "--output",
    "128",
    "--horizon",
    "120",
    "--slo-ttft",
    "0.5",
    "--slo-tpot",
    "0.05",
    "--routers",
    "random,lor",
];

#[test]
fn the_answer_meets_the_slo_simulated_and_one_replica_fewer_misses_it() {
    let _cpu = crate::common::cpu_bound();
    let out = plan(&[SMALL, &["--format", "json", "--finalists", "2"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["confirmed"][0];
    assert_eq!(c["meets"], true, "{c}");
    let met = c["at"]["attainment"]["mean"].as_f64().unwrap();
    assert!(met >= 0.9, "{met}");
    let n = c["replicas"].as_u64().unwrap();
    if n > 1 {
        let below = c["below"]["attainment"]["mean"].as_f64().unwrap();
        assert!(
            below < 0.9,
            "{n} replicas meet it at {met}, {} at {below}",
            n - 1
        );
        assert_eq!(c["below"]["replicas"].as_u64().unwrap(), n - 1);
    }
    // The price is the GPUs' price × TP × replicas.
    let per_gpu = match c["screened"]["gpu"].as_str().unwrap() {
        "A10G" => 1.0,
        "L4" => 0.8,
        _ => 6.0,
    };
    let tp = c["screened"]["tp"].as_u64().unwrap() as f64;
    assert!((c["usd_per_hour"].as_f64().unwrap() - per_gpu * tp * n as f64).abs() < 1e-9);
    // The sentence names the fleet; the Pareto set starts at the model's cheapest.
    let answer = v["answer"].as_str().unwrap();
    assert!(answer.contains(&format!("{n} replicas")), "{answer}");
    assert_eq!(v["pareto"][0], v["screened"][0]);
    // A 7B model's TPOT on one L4 cannot reach 50 ms: passed over, with the reason.
    let l4 = v["infeasible"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["gpu"] == "L4" && i["tp"] == 1);
    assert!(
        l4.is_some_and(|i| i["why"].as_str().unwrap().contains("TPOT")),
        "{}",
        v["infeasible"]
    );
}

#[test]
fn the_table_says_the_answer_and_what_binds() {
    let _cpu = crate::common::cpu_bound();
    let out = plan(&[SMALL, &["--finalists", "1", "--seeds", "2"]].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Cheapest fleet for 90 % of requests",
        "binding limit",
        "Pareto set",
        "Passed over",
    ] {
        assert!(t.contains(want), "{want} missing from\n{t}");
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("screened") && err.contains("fleets in"),
        "{err}"
    );
}

#[test]
fn a_rate_profile_prices_a_fixed_and_a_resized_fleet() {
    let _cpu = crate::common::cpu_bound();
    let mut args: Vec<&str> = SMALL.to_vec();
    let at = args.iter().position(|a| *a == "--rate").unwrap();
    args.drain(at..at + 2);
    let out = plan(
        &[
            &args[..],
            &[
                "--profile",
                "8:5,8:20,8:10",
                "--finalists",
                "0",
                "--format",
                "json",
            ],
        ]
        .concat(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rate_rps"], 20.0, "planned for the peak");
    let p = &v["profile"];
    let n: Vec<u64> = p["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["replicas"].as_u64().unwrap())
        .collect();
    assert!(n[0] <= n[2] && n[2] <= n[1], "{n:?}");
    assert!(p["resized_usd"].as_f64().unwrap() <= p["fixed_usd"].as_f64().unwrap());
}

#[test]
fn inputs_it_cannot_plan_are_refused_by_name() {
    for (args, want) in [
        (vec!["--rate", "10", "--gpus", "TPUv9"], "TPUv9"),
        (vec!["--rate", "10", "--gpus", "A10G=-1"], "price"),
        (vec!["--rate", "10", "--gpus", "A10G=abc"], "price"),
        (vec!["--rate", "10", "--model", "GPT-9"], "GPT-9"),
        (vec!["--rate", "10", "--tp", "0"], "tensor"),
        (vec!["--rate", "10", "--attainment", "1.5"], "attainment"),
        (vec!["--rate", "10", "--slo-ttft", "0"], "slo"),
        (vec!["--rate", "10", "--routers", "psychic"], "psychic"),
        (vec!["--rate", "10", "--cost", "a10g"], "--cost"),
        (vec!["--profile", "8:-5"], "--profile"),
        (vec!["--profile", "8"], "--profile"),
        (vec!["--rate", "-3"], "--rate"),
    ] {
        let out = plan(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(
            err.to_lowercase().contains(&want.to_lowercase()),
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}
