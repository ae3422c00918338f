//! llama.cpp's slot cache: `simulate --prefix-cache slot` against the real one.
//!
//! * hermetic: the flag's `--help` text, its report, and its refusal of a policy other than
//!   llama.cpp's.
//! * live (`#[ignore = "live: …"]`): llama-server (4 slots, `-c 4096`, one thread) with
//!   `bench-native run --cache-prompt --system-prompt` sending requests whose shared
//!   system prompts are the same text (sized with the server's `/tokenize`), and the
//!   simulator, with the cost `microbench` + `fit` measured on the same server,
//!   predicting the hit rate that llama-server's `llamacpp:prompt_tokens_cached_total` /
//!   `llamacpp:prompt_tokens_total` counters report and the mean TTFT that the run
//!   measures, at three prefix settings, one of them run twice for the measurement's own
//!   noise (the TTFT bound is 15 % plus twice that noise). Then the same for multi-turn
//!   conversations sent by closed-loop users (`run --users --conversations`, each turn
//!   resending the earlier turns and the server's own answers): fewer users than slots,
//!   more users than slots, and users whose chats share a system prompt. Every setting
//!   gets a fresh server (empty slots, as the simulation starts).
//!   `KVQUEUE_SLOT_OUT=DIR` keeps every file there.

use crate::cache_live::{report, requests, settings, Row};
use crate::common::{bin, run_ok};
use crate::live::Server;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SLOTS: &str = "4";
const CTX: u32 = 4096;
/// Each request's own prompt and output after its system prompt [tokens].
const OWN: u32 = 32;
const OUTPUT: u32 = 16;
/// The independent requests' arrival rate [req/s].
const RATE: &str = "1";
const DURATION_S: f64 = 30.0;

fn json_file(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn the_slot_cache_flag_is_documented_reported_and_refused_off_llama_cpp() {
    let _cpu = crate::common::cpu_bound();
    let help = run_ok(bin().args(["simulate", "--help"]));
    assert!(
        help.contains("llama-server's per-slot prompt cache"),
        "{help}"
    );
    assert!(help.contains("--prefix-cache slot"), "an example: {help}");
    let run_help = run_ok(bin().args(["run", "--help"]));
    assert!(run_help.contains("--cache-prompt"), "{run_help}");
    let sim = |extra: &[&str]| {
        bin()
            .args(["simulate", "--json", "--batch", "4", "--kv", "4096"])
            .args(["--budget", "512", "--system-prompt", "2:0.8:256"])
            .args(["--lengths", "fixed", "--prompt", "32", "--output", "16"])
            .args(["--rate", "2", "--horizon", "60", "--prefix-cache", "slot"])
            .args(extra)
            .output()
            .unwrap()
    };
    let ok = sim(&["--preset", "llama-cpp"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let v: Value = serde_json::from_slice(&ok.stdout).unwrap();
    let p = &v["prefix_cache"];
    let hit = p["token_hit_rate"].as_f64().unwrap();
    // 80 % of the prompts are one of 2 system prompts (256 tokens) + 32 tokens, the rest
    // 32 tokens that share BOS: at most (0.8·256 + 0.2·1) / (0.8·288 + 0.2·32) reused.
    let most = (0.8 * 256.0 + 0.2) / (0.8 * 288.0 + 0.2 * 32.0);
    assert!(hit > 0.5 && hit < most, "{p}");
    assert!(
        p["ttft_hit"]["mean"].as_f64() < p["ttft_miss"]["mean"].as_f64(),
        "{p}"
    );
    for (preset, policy) in [("vllm-v1", "chunked"), ("reference", "continuous")] {
        let bad = sim(&["--preset", preset, "--kv-mode", "paged"]);
        let e = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success(), "{preset}");
        assert!(
            e.contains("--prefix-cache slot is llama-server's per-slot prompt cache")
                && e.contains(&format!("the policy here is {policy}"))
                && e.contains("--preset llama-cpp"),
            "{preset}: {e}"
        );
    }
}

/// `GET path` on the loopback port: the body.
fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A counter of llama-server's `/metrics`.
fn metric(port: u16, name: &str) -> f64 {
    let text = http_get(port, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} missing from /metrics:\n{text}"))
}

/// `run` of `extra` on `port` into `dir`: the prompt tokens the server reused and those
/// it prefilled [tokens], and the run's mean TTFT [s].
fn measure(port: u16, dir: &Path, seed: u64, extra: &[&str]) -> (f64, f64, f64, Option<f64>) {
    let cached = "llamacpp:prompt_tokens_cached_total";
    let fresh = "llamacpp:prompt_tokens_total";
    let (c0, f0) = (metric(port, cached), metric(port, fresh));
    run_ok(
        bin()
            .args(["run", "--url", &format!("http://127.0.0.1:{port}")])
            .args(["--quiet", "--warmup-requests", "0", "--cache-prompt"])
            .args(["--duration", &DURATION_S.to_string()])
            .args(["--lengths", "fixed", "--prompt-tokens", &OWN.to_string()])
            .args(["--output-tokens", &OUTPUT.to_string()])
            .args(["--seed", &seed.to_string()])
            .args(extra)
            .arg("--out")
            .arg(dir),
    );
    let (c1, f1) = (metric(port, cached), metric(port, fresh));
    let (n, prompt, hit) = requests(dir);
    assert!(n >= 20, "{n} requests in {}", dir.display());
    // the per-request counts add up to the server's own counters
    let (by_request, by_counters) = (hit / prompt, (c1 - c0) / (c1 - c0 + f1 - f0));
    assert!(
        (by_request - by_counters).abs() < 0.01,
        "hit rate from requests.csv {by_request:.4}, from /metrics {by_counters:.4}"
    );
    let s = json_file(&dir.join("summary.json"));
    assert_eq!(
        s["summary"]["errors"].as_u64(),
        Some(0),
        "every request answered: {s}"
    );
    (
        c1 - c0,
        f1 - f0,
        s["summary"]["ttft"]["mean"].as_f64().unwrap(),
        s["prefix_cache"]["ttft_hit"]["mean"].as_f64(),
    )
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn llama_server_slot_cache_hit_rate_and_ttft_are_predicted() {
    let _live = crate::common::live();
    let t0 = Instant::now();
    let dir: PathBuf = match std::env::var_os("KVQUEUE_SLOT_OUT") {
        // relative to the repository root (tests run in bench-native/)
        Some(d) if !d.is_empty() => crate::common::repo_root().join(d),
        _ => crate::common::scratch_root().join(format!("kvq-slot-live-{}", std::process::id())),
    };
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let slots: u32 = SLOTS.parse().unwrap();

    // The server's cost, measured on it: prompts prefilled in full, new tokens after a
    // cached prefix, decodes at two contexts.
    {
        let server = Server::start(slots, CTX, &dir.join("server-fit.log"));
        let url = format!("http://127.0.0.1:{}", server.port);
        run_ok(
            bin()
                .args(["microbench", "--url", &url])
                .args(["--prompt-lengths", "8,32,64,128,256,320", "--repeats", "2"])
                .args(["--streams", "1,2,3,4", "--decode-tokens", "32"])
                .args(["--mixed-streams", "1,2", "--mixed-prompt", "288"])
                // new tokens after a cached context (the slot cache's hits), and a second
                // decode curve at a longer context: attention over what the slots hold
                .args([
                    "--cached-prefixes",
                    "128,256,512,896",
                    "--cached-chunk",
                    "32",
                ])
                .args(["--long-prompt", "512"])
                .args(["--budget", "2048", "--out"])
                .arg(dir.join("microbench.json")),
        );
        run_ok(
            bin()
                .arg("fit")
                .arg(dir.join("microbench.json"))
                .arg("--out")
                .arg(dir.join("fit.json")),
        );
    }

    // Each setting on a fresh server (empty slots, as a simulation starts).
    let settings = settings(RATE, ["1:0.5:256", "2:0.8:256", "8:1:384"], ["3", "8", "6"]);
    let per_slot = (CTX / slots).to_string();
    let mut rows = Vec::new();
    for (name, traffic, seed) in settings {
        let server = Server::start(slots, CTX, &dir.join(format!("server-{seed}.log")));
        let (cached, fresh, ttft, hit_ttft) = measure(
            server.port,
            &dir.join(format!("run-{seed}")),
            seed,
            &traffic,
        );
        drop(server);
        assert!(fresh > 0.0, "{name}: the counters moved");
        let sim: Value = serde_json::from_str(&run_ok(
            bin()
                .args(["simulate", "--json", "--preset", "llama-cpp"])
                .args(["--batch", SLOTS, "--kv", &CTX.to_string()])
                .args(["--budget", "2048", "--prefix-cache", "slot"])
                .args(["--max-model-len", &per_slot])
                .args(&traffic)
                .args(["--lengths", "fixed"])
                .args(["--prompt", &OWN.to_string()])
                .args(["--output", &OUTPUT.to_string()])
                .args(["--horizon", &DURATION_S.to_string()])
                .args(["--seed", &seed.to_string(), "--cost"])
                .arg(dir.join("fit.json")),
        ))
        .unwrap();
        rows.push(Row {
            name,
            measured_hit: cached / (cached + fresh),
            predicted_hit: sim["prefix_cache"]["token_hit_rate"].as_f64().unwrap(),
            measured_ttft: ttft,
            // users are simulated as a fleet of one: its summary is one level down
            predicted_ttft: sim.get("summary").unwrap_or(&sim)["ttft"]["mean"]
                .as_f64()
                .unwrap(),
            measured_hit_ttft: hit_ttft,
            predicted_hit_ttft: sim["prefix_cache"]["ttft_hit"]["mean"].as_f64(),
        });
    }

    let r = report(&rows, &format!("{:.0} s", t0.elapsed().as_secs_f64()));
    let (md, median, chat_median, ttft_noise) =
        (r.md, r.prefix_median, r.chat_median, r.ttft_noise);
    std::fs::write(dir.join("slot.md"), &md).unwrap();
    eprintln!("{md}");
    // The hit-rate target is on the median over the settings: where the server queues
    // (the 8 × 384 setting), which idle slot a request finds depends on timing, and one
    // setting may stray; none may stray by twice the target.
    let mut hit_errs: Vec<f64> = rows[..3]
        .iter()
        .map(|r| (r.measured_hit - r.predicted_hit).abs())
        .collect();
    hit_errs.sort_by(f64::total_cmp);
    assert!(
        hit_errs[1] <= 0.05,
        "hit rate off by {:.3} (median over the settings), over 0.05\n{md}",
        hit_errs[1]
    );
    for r in &rows {
        assert!(
            (r.measured_hit - r.predicted_hit).abs() <= 0.10,
            "{}: hit rate measured {:.3}, predicted {:.3}\n{md}",
            r.name,
            r.measured_hit,
            r.predicted_hit
        );
    }
    // The TTFT is scored against one noisy measurement (other work on the two cores
    // moves it by tens of per cent), with a cost fitted under the same noise: the bound
    // is the 15 % target plus twice the repeated setting's own difference, and the report
    // above sets the error against the target itself. Noise above 40 % would leave a
    // bound over 95 %: the test refuses to call that a check.
    assert!(
        ttft_noise <= 0.4,
        "the machine is too loaded to judge the TTFT: the repeated setting moved {:.1} %\n{md}",
        ttft_noise * 100.0
    );
    assert!(
        median <= 0.15 + 2.0 * ttft_noise,
        "mean TTFT off by {:.1} % (median), over 15 % + twice the noise {:.1} %\n{md}",
        median * 100.0,
        ttft_noise * 100.0
    );
    // The conversations, with the cost of attention over the slots' context fitted, are
    // bounded as the prefix settings are.
    assert!(
        chat_median <= 0.15 + 2.0 * ttft_noise,
        "conversations' mean TTFT off by {:.1} % (median), over 15 % + twice the noise {:.1} %\n{md}",
        chat_median * 100.0,
        ttft_noise * 100.0
    );
}
