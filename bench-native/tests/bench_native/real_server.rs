//! Measurement against a real continuous-batching server: llama.cpp's `llama-server` on
//! the CPU with a tiny random-weight GGUF (`scripts/llama-server.sh install`, which
//! `scripts/setup.sh server` runs). Each test starts its own server on a free loopback
//! port with one thread and stops it by PID; tests run one at a time (a shared lock) so
//! they do not disturb each other's timings. Traffic is a few dozen short requests.
//!
//! Live tier (`#[ignore = "live: …"]`, run with `-- --include-ignored`): a missing binary is
//! a FAILURE with instructions, never a silent pass.

use super::live::{proxy, Fault, Server};
use crate::common::free_port;
use bench_native::client::{ClientError, Endpoint, EndpointConfig};
use bench_native::fit;
use bench_native::microbench::{self, MicrobenchConfig};
use bench_native::run::{run_to_end, RunConfig, RunError, RunReport};
use engine::cost::CostModel;
use engine::workload::{ArrivalProcess, LengthDist, Workload};
use indicatif::ProgressBar;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn serial() -> std::sync::MutexGuard<'static, ()> {
    crate::common::live()
}

fn scratch(name: &str) -> PathBuf {
    let d =
        crate::common::scratch_root().join(format!("kvqueue-real-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(url: &str, out: &Path, rate: f64, n: usize, prompt: u32, output: u32) -> RunConfig {
    let mut c = RunConfig::new(url, out);
    c.workload = Workload {
        arrivals: ArrivalProcess::Poisson { rate },
        lengths: LengthDist::Fixed { prompt, output },
        max_model_len: None,
        shared: None,
    };
    c.max_requests = Some(n);
    c.horizon_s = 1e6;
    c.seed = 7;
    c.timeout = Duration::from_secs(20);
    c
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn run(cfg: &RunConfig) -> Result<RunReport, RunError> {
    run_to_end(&runtime(), cfg)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn two_rates_exact_tokens_and_server_timings() {
    let _g = serial();
    let dir = scratch("rates");
    let server = Server::start(4, 2048, &dir.join("server.log"));
    for (rate, n) in [(2.0, 12), (8.0, 16)] {
        let out = dir.join(format!("rate-{rate}"));
        let cfg = config(&server.url(), &out, rate, n, 64, 16);
        let rep = run(&cfg).unwrap();
        let s = &rep.summary;
        eprintln!(
            "rate {rate}: ttft mean {:.1} ms p99 {:.1} ms, tpot mean {:.2} ms, {} metrics samples, lateness p99 {:.3} ms",
            s.ttft.mean.unwrap() * 1e3,
            s.ttft.p99.unwrap() * 1e3,
            s.tpot.mean.unwrap() * 1e3,
            rep.metrics_samples,
            rep.client.send_lateness_p99_s.unwrap() * 1e3
        );
        assert_eq!(
            (s.arrivals, s.completed, s.errors),
            (n as u64, n as u64, 0),
            "{:#?}",
            rep.rows
        );
        for r in &rep.rows {
            assert_eq!(r.prompt_tokens, Some(64), "exact prompt length: {r:?}");
            assert_eq!(r.completion_tokens, Some(16), "forced output length: {r:?}");
            assert_eq!(r.chunks, 16, "one token per chunk with this model: {r:?}");
            assert!(
                r.actual_send_s.unwrap() - r.intended_send_s < 0.05,
                "sent late: {r:?}"
            );
        }
        // Client timing vs the server's own `timings`.
        let ttft_minus_server: Vec<f64> = rep
            .rows
            .iter()
            .map(|r| {
                (r.first_token_s.unwrap() - r.actual_send_s.unwrap())
                    - r.server_prompt_ms.unwrap() / 1e3
            })
            .collect();
        let decode_ratio: Vec<f64> = rep
            .rows
            .iter()
            .map(|r| {
                (r.last_token_s.unwrap() - r.first_token_s.unwrap())
                    / (r.server_predicted_ms.unwrap() / 1e3)
            })
            .collect();
        let (d_ttft, ratio) = (
            median(ttft_minus_server.clone()),
            median(decode_ratio.clone()),
        );
        eprintln!("rate {rate}: median client TTFT − server prompt_ms = {:.2} ms; median stream span / predicted_ms = {ratio:.3}", d_ttft * 1e3);
        assert!(
            ttft_minus_server.iter().all(|d| *d > -0.002),
            "client TTFT shorter than the server's prompt time: {ttft_minus_server:?}"
        );
        if rate <= 2.0 {
            // no queueing in the server at this rate: the client's TTFT is the server's
            // prompt time plus HTTP and scheduling overhead (loose: CI machines are busy)
            let server_prompt = median(
                rep.rows
                    .iter()
                    .map(|r| r.server_prompt_ms.unwrap() / 1e3)
                    .collect(),
            );
            assert!(
                d_ttft < 0.05f64.max(0.5 * server_prompt),
                "TTFT far from the server's prompt_ms at low load: {ttft_minus_server:?}"
            );
        }
        assert!(
            (0.7..1.4).contains(&ratio),
            "decode span vs server predicted_ms: {decode_ratio:?}"
        );
        // Files on disk.
        let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
        assert_eq!(csv.lines().count(), n + 1);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("metadata.json")).unwrap())
                .unwrap();
        assert_eq!(meta["kv"]["tokens"], 2048, "{}", meta["kv"]);
        assert_eq!(meta["server_kind"], "llama_cpp");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["summary"]["completed"], n);
        let sweep_row = std::fs::read_to_string(out.join("summary.csv")).unwrap();
        let lines: Vec<&str> = sweep_row.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            engine::sweep::summary_header(),
            "summary.csv uses the sweep columns"
        );
        assert_eq!(lines[1].split(',').count(), lines[0].split(',').count());
        let metrics = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
        assert!(
            metrics.lines().count() >= 2,
            "no /metrics samples: {metrics}"
        );
        assert!(
            metrics
                .lines()
                .skip(1)
                .any(|l| l.split(',').nth(1).is_some_and(|v| !v.is_empty())),
            "{metrics}"
        );
    }
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn microbench_then_fit_gives_a_loadable_cost_model() {
    let _g = serial();
    let dir = scratch("microbench");
    let server = Server::start(4, 2048, &dir.join("server.log"));
    let cfg = MicrobenchConfig {
        endpoint: EndpointConfig {
            url: server.url(),
            ..EndpointConfig::default()
        },
        prompt_lengths: vec![16, 64, 192],
        repeats: 2,
        streams: vec![1, 2, 4],
        decode_tokens: 24,
        decode_prompt: 16,
        timeout: Duration::from_secs(20),
        chars_per_token: 4.0,
        use_tokenizer: true,
        mixed_streams: vec![],
        mixed_prompt: 0,
        budget: None,
        pin_slots: false,
        layouts: vec![],
        long_prompt: None,
        decode_rounds: 1,
        cached_prefixes: vec![],
        cached_chunk: 32,
        idle_pauses: vec![0.0, 0.3],
        idle_rounds: 2,
    };
    let mb = runtime()
        .block_on(microbench::microbench(&cfg, &ProgressBar::hidden()))
        .unwrap();
    for p in &mb.prefill {
        eprintln!(
            "prefill {} tokens: {:.2} ms (server {:.2} ms)",
            p.prompt_tokens,
            p.latency_s * 1e3,
            p.server_prompt_s.unwrap_or(f64::NAN) * 1e3
        );
    }
    for d in &mb.decode {
        eprintln!(
            "decode {} streams: {:.2} ms/step over {} gaps",
            d.streams,
            d.step_s * 1e3,
            d.gaps
        );
    }
    assert_eq!(
        mb.prefill
            .iter()
            .map(|p| p.prompt_tokens)
            .collect::<Vec<_>>(),
        vec![16, 64, 192]
    );
    // the idle probe: the shortest prompt after each pause, every round
    let idle: Vec<(f64, u32, usize)> = mb
        .idle
        .iter()
        .map(|p| (p.pause_s, p.prompt_tokens, p.samples_s.len()))
        .collect();
    assert_eq!(idle, vec![(0.0, 16, 2), (0.3, 16, 2)], "{:?}", mb.idle);
    assert!(mb
        .idle
        .iter()
        .all(|p| p.latency_s > 0.0 && p.latency_s < 5.0));
    assert!(
        mb.prefill[2].latency_s > mb.prefill[0].latency_s,
        "longer prompts take longer: {:?}",
        mb.prefill
    );
    assert!(mb.decode.iter().all(|d| d.step_s > 0.0 && d.gaps > 0));
    let path = dir.join("mb.json");
    microbench::write(&mb, &path).unwrap();
    let f = fit::fit(&fit::read_microbench(&path).unwrap(), false).unwrap();
    let files = fit::write(&f, &path, &dir.join("fit.json")).unwrap();
    eprintln!(
        "fitted linear {:?}, relative RMS {:.3}",
        f.linear, f.linear_rel_rms
    );
    for file in &files[1..] {
        let m: CostModel = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        m.validate().unwrap();
        assert!(
            m.decode_step(1, 0) > 0.0 && m.prefill(1, 1, 192) > m.prefill(1, 1, 16),
            "{m:?}"
        );
    }
    let both: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let _: CostModel = serde_json::from_value(both["table"].clone()).unwrap();
    let _: CostModel = serde_json::from_value(both["linear"].clone()).unwrap();
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn faults_become_error_rows_and_the_run_goes_on() {
    let _g = serial();
    let dir = scratch("faults");
    let server = Server::start(4, 2048, &dir.join("server.log"));
    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
    fn plan(i: usize) -> Fault {
        match i % 6 {
            1 => Fault::Http500,
            3 => Fault::Cut(800),
            5 => Fault::Stall(800),
            _ => Fault::Pass,
        }
    }
    rt.spawn(proxy(listener, upstream, plan));
    let mut cfg = config(&proxy_url, &dir.join("out"), 4.0, 12, 16, 8);
    cfg.warmup_requests = 0;
    cfg.timeout = Duration::from_secs(4);
    let t = Instant::now();
    let rep = run_to_end(&rt, &cfg).unwrap();
    eprintln!("faults run took {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(rep.rows.len(), 12);
    let mut by_id = rep.rows.clone();
    by_id.sort_by_key(|r| r.id);
    for r in &by_id {
        // requests are sent in id order, so the proxy's counter follows ids (Poisson gaps
        // at 6 req/s are ≥ 1 ms apart almost surely; a tie would only swap two faults)
        eprintln!("id {} outcome {} error {:?}", r.id, r.outcome, r.error);
    }
    let count = |f: &dyn Fn(&str) -> bool| by_id.iter().filter(|r| f(&r.error)).count();
    assert_eq!(count(&|e| e.starts_with("HTTP 500: injected fault")), 2);
    assert_eq!(count(&|e| e.starts_with("stream cut")), 2);
    assert_eq!(count(&|e| e.starts_with("timed out")), 2);
    let done: Vec<_> = by_id.iter().filter(|r| r.outcome == "completed").collect();
    assert_eq!(done.len(), 6);
    assert!(done
        .iter()
        .all(|r| r.completion_tokens == Some(8) && r.prompt_tokens == Some(16)));
    assert!(by_id
        .iter()
        .filter(|r| r.error.starts_with("stream cut") || r.error.starts_with("timed out"))
        .all(|r| r.chunks > 0));
    assert_eq!((rep.summary.completed, rep.summary.errors), (6, 6));
    let csv = std::fs::read_to_string(dir.join("out/requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    drop(server);
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn server_killed_mid_run_keeps_every_finished_row() {
    let _g = serial();
    let dir = scratch("killed");
    let mut server = Server::start(4, 2048, &dir.join("server.log"));
    let cfg = config(&server.url(), &dir.join("out"), 10.0, 30, 32, 16);
    let rt = runtime();
    let pid = server.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2500));
        // kill only the server this test started, by its PID
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let rep = run_to_end(&rt, &cfg).unwrap();
    killer.join().unwrap();
    server.kill();
    let completed = rep.rows.iter().filter(|r| r.outcome == "completed").count();
    let errors = rep.rows.iter().filter(|r| r.outcome == "error").count();
    eprintln!(
        "killed mid-run: {completed} completed, {errors} errors of {}",
        rep.rows.len()
    );
    assert_eq!(rep.rows.len(), 30);
    assert!(completed >= 3 && errors >= 5, "{:#?}", rep.rows);
    assert!(rep
        .rows
        .iter()
        .filter(|r| r.outcome == "completed")
        .all(|r| r.completion_tokens == Some(16)));
    assert!(rep
        .rows
        .iter()
        .filter(|r| r.outcome == "error")
        .all(|r| !r.error.is_empty()));
    let csv = std::fs::read_to_string(dir.join("out/requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), 31);
    assert_eq!(rep.summary.completed as usize, completed);
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn clear_errors_for_unreachable_server_wrong_model_and_too_long_prompt() {
    let _g = serial();
    let dir = scratch("errors");
    let rt = runtime();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let e = run_to_end(&rt, &RunConfig::new(&dead, dir.join("a"))).unwrap_err();
    assert!(e.to_string().contains("cannot reach the server"), "{e}");

    let server = Server::start(2, 1024, &dir.join("server.log"));
    let mut cfg = config(&server.url(), &dir.join("b"), 5.0, 2, 16, 8);
    cfg.endpoint.model = Some("no-such-model".into());
    let e = run_to_end(&rt, &cfg).unwrap_err();
    assert!(
        matches!(e, RunError::Client(ClientError::UnknownModel { .. })),
        "{e}"
    );
    eprintln!("{e}");

    // 1024 KV tokens over 2 slots = 512 per sequence: refused before sending anything
    let cfg = config(&server.url(), &dir.join("c"), 5.0, 2, 600, 8);
    let e = run_to_end(&rt, &cfg).unwrap_err();
    assert!(
        matches!(
            e,
            RunError::Client(ClientError::ContextTooSmall { ctx: 512, .. })
        ),
        "{e}"
    );
    eprintln!("{e}");

    // and if sent anyway, the server's HTTP 400 becomes a readable error row
    let msg = rt.block_on(async {
        let ep = Endpoint::connect(&EndpointConfig {
            url: server.url(),
            ..EndpointConfig::default()
        })
        .await
        .unwrap();
        let body = ep.body(&"x".repeat(700), 8);
        ep.stream(tokio::time::Instant::now(), &body, Duration::from_secs(10))
            .await
            .error
            .unwrap()
    });
    eprintln!("{msg}");
    assert!(msg.starts_with("HTTP 400: ") && !msg.contains('{'), "{msg}");
}
