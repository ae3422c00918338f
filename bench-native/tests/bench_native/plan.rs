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

#[test]
fn the_disaggregated_answer_meets_the_slo_simulated_and_a_smaller_split_misses_it() {
    let _cpu = crate::common::cpu_bound();
    let args = [
        SMALL,
        &[
            "--gpus",
            "A10G,H100",
            "--tp",
            "1",
            "--routers",
            "lor",
            "--disagg",
            "--link-gbps",
            "25",
            "--finalists",
            "2",
            "--format",
            "json",
        ],
    ]
    .concat();
    let out = plan(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["disaggregated"];
    assert_eq!(d["link"]["bandwidth_bytes_per_s"], 25e9 / 8.0);
    let confirmed = d["confirmed"].as_array().unwrap();
    assert_eq!(confirmed.len(), 2, "{d}");
    let c = &confirmed[0];
    assert_eq!(c["meets"], true, "{c}");
    let met = c["at"]["attainment"]["mean"].as_f64().unwrap();
    assert!(met >= 0.9, "{met}");
    assert_eq!(c["at"]["attainment"]["n"], 3);
    let (p, n) = (
        c["prefill"].as_u64().unwrap(),
        c["decode"].as_u64().unwrap(),
    );
    assert_eq!(c["at"]["replicas"].as_u64().unwrap(), p + n);
    // The next-cheaper split (one replica fewer), simulated, misses it; at one replica
    // per pool there is none, and the answer says "–".
    match c["below"].as_array() {
        Some(b) => {
            assert_eq!(b[0].as_u64().unwrap() + b[1].as_u64().unwrap() + 1, p + n);
            let below = b[2]["attainment"]["mean"].as_f64().unwrap();
            assert!(
                below < 0.9,
                "{p}P + {n}D meet it at {met}, one fewer at {below}"
            );
        }
        None => assert_eq!((p, n), (1, 1), "{c}"),
    }
    // Ranked by the simulator: no finalist that misses comes before one that meets, and
    // the sentence names the simulated split.
    assert!(confirmed
        .windows(2)
        .all(|w| w[0]["meets"].as_bool() >= w[1]["meets"].as_bool()));
    let answer = d["answer"].as_str().unwrap();
    assert!(
        answer.contains(&format!("{p}P + {n}D")) && answer.contains("confirmed by simulation"),
        "{answer}"
    );
    // The CSV carries the simulated rows beside the model's.
    let csv_args = [&args[..args.len() - 2], &["--format", "csv"]].concat();
    let out = plan(&csv_args);
    let csv = String::from_utf8_lossy(&out.stdout);
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with(",prefill,decode"), "{header}");
    let sim = csv
        .lines()
        .find(|l| l.starts_with("disagg_simulated,"))
        .unwrap_or_else(|| panic!("{csv}"));
    assert_eq!(sim.split(',').count(), header.split(',').count(), "{sim}");
    assert!(csv.lines().any(|l| l.starts_with("disagg,")), "{csv}");
}
