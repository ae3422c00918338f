//! The profiler study's three scenarios against a real `llama-server` (CPU, 1 thread,
//! the tiny random-weight model of `scripts/llama-server.sh`), side by side with the
//! simulator's prediction *of that server* (the traces are those of the engine's
//! integration test, `engine/tests/engine/profiler_study/scenarios.rs`). It writes the
//! real-server section of `results/profiler_study.md`.
//!
//! FCFS = `-np 1`; eager = 8 slots, `-b 2048`; chunked = 8 slots, `-b 64/32/16` (and
//! `-ub` = min(`-b`, 512)); `-c` = slots × 1024. Each variant gets its own server on a free
//! loopback port, killed by PID. One seed per scenario (seed 0).
//!
//! The loop is closed as `bench-native validate` closes it: the same binary, model and
//! thread count are microbenchmarked (an 8-slot `-b 2048` server, before and after the
//! measurements, pooled, plus the mixed probe — a 512-token prompt prefilled while 1, 2, 4
//! streams decode — on an 8-slot `-b 32` server), `bench_native::fit` fits the linear and
//! the table cost, and each
//! variant is simulated with `ServerConfig::llama_cpp(slots, slots × 1024, -b)` (decodes
//! first, then prompt chunks under the `-b` budget, one slot's context per request).
//! About 2.5 minutes on an idle 2-core machine:
//!
//! ```text
//! cargo run --release -p bench-native --example profiler_study_real
//! ```
//!
//! `PROFILER_STUDY_KEEP=1` keeps each run's `requests.csv` in the temp directory.

#[path = "../../engine/tests/engine/profiler_study/scenarios.rs"]
mod study;

use bench_native::client::EndpointConfig;
use bench_native::fit;
use bench_native::microbench::{self, MicrobenchConfig, MicrobenchResult};
use bench_native::run::{run_to_end, RunConfig};
use bench_native::validate::pool;
use engine::config::ServerConfig;
use engine::cost::CostModel;
use engine::record::RequestRecord;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use indicatif::ProgressBar;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use study::{Variant, LONG, SHORT};

fn paths() -> (String, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/llama-server.sh"))
        .arg("paths")
        .output()
        .expect("scripts/llama-server.sh paths");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .expect("llama-server installed (scripts/setup.sh server)")
            .to_string()
    };
    (get("LLAMA_SERVER_BIN="), get("LLAMA_SERVER_MODEL="))
}

/// A llama-server child, killed by PID on drop.
struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn healthy(port: u16) -> std::io::Result<bool> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = [0u8; 32];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).contains(" 200"))
}

/// Slots and `-b` of a variant's server.
fn server_shape(variant: Variant) -> (u32, u32) {
    match variant {
        Variant::Fcfs => (1, 2048),
        Variant::Eager => (study::SLOTS, 2048),
        Variant::Chunked(c) => (study::SLOTS, c),
    }
}

/// Starts `llama-server -np slots -c slots·CTX_PER_SLOT -t 1 -b b -ub min(b, 512)`.
fn start(slots: u32, b: u32) -> Server {
    let (bin, model) = paths();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ub = b.min(512);
    let child = Command::new(bin)
        .args([
            "-m",
            &model,
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args([
            "-c",
            &(slots * CTX_PER_SLOT).to_string(),
            "-np",
            &slots.to_string(),
        ])
        .args(["-t", "1", "-b", &b.to_string(), "-ub", &ub.to_string()])
        .args(["--metrics", "--no-webui", "-cram", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn llama-server");
    let s = Server(child, port);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if healthy(port).unwrap_or(false) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("llama-server not healthy in 30 s");
}

/// KV tokens per slot (`-c` = slots × this).
const CTX_PER_SLOT: u32 = 1024;

fn url(s: &Server) -> String {
    format!("http://127.0.0.1:{}", s.1)
}

/// Microbenchmarks a fresh 8-slot, `-b 2048` server (the eager variant's) with
/// `bench_native::microbench`, as `validate` does — prefill latency of one request vs
/// prompt length, decode step vs 1..=8 streams with 16-token prompts — plus a second
/// decode curve (1/2/4/8 streams) with 448-token prompts, so that the fit can separate the
/// per-context-token (attention) cost from the per-sequence cost.
fn microbench_server(rt: &tokio::runtime::Runtime) -> MicrobenchResult {
    let server = start(study::SLOTS, 2048);
    let cfg = MicrobenchConfig {
        endpoint: EndpointConfig {
            url: url(&server),
            ..EndpointConfig::default()
        },
        prompt_lengths: vec![16, 32, 64, 128, 256, 512],
        repeats: 3,
        streams: (1..=study::SLOTS).collect(),
        decode_tokens: 64,
        decode_prompt: 16,
        timeout: Duration::from_secs(60),
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
        idle_pauses: vec![],
        idle_rounds: 0,
    };
    let mut mb = retry(rt, &cfg);
    let long = MicrobenchConfig {
        prompt_lengths: vec![16],
        repeats: 1,
        streams: vec![1, 2, 4, 8],
        decode_tokens: 48,
        decode_prompt: LONG_CONTEXT,
        ..cfg
    };
    let l = retry(rt, &long);
    mb.decode.extend(l.decode);
    drop(server);
    // The mixed probe needs prompt chunks shorter than llama.cpp's attention tile (64), so
    // it runs on a `-b 32` server: a 512-token prompt prefilled while 1, 2, 4 streams decode.
    let server = start(study::SLOTS, MIXED_BUDGET);
    let mixed = MicrobenchConfig {
        endpoint: EndpointConfig {
            url: url(&server),
            ..EndpointConfig::default()
        },
        prompt_lengths: vec![],
        repeats: 2,
        streams: vec![],
        mixed_streams: vec![1, 2, 4],
        mixed_prompt: 512,
        budget: Some(MIXED_BUDGET),
        decode_prompt: 16,
        ..long
    };
    mb.mixed = retry(rt, &mixed).mixed;
    mb
}

/// `-b` of the mixed probe's server [tokens].
const MIXED_BUDGET: u32 = 32;

/// `microbench` with up to two retries (a keep-alive connection the server closes under
/// load fails one request, and a microbenchmark with holes is refused).
fn retry(rt: &tokio::runtime::Runtime, cfg: &MicrobenchConfig) -> MicrobenchResult {
    let mut last = None;
    for _ in 0..3 {
        match rt.block_on(microbench::microbench(cfg, &ProgressBar::hidden())) {
            Ok(m) => return m,
            Err(e) => {
                eprintln!("microbenchmark failed, retrying: {e}");
                last = Some(e);
            }
        }
    }
    panic!("microbenchmark failed three times: {last:?}");
}

/// Prompt length of the long-context decode curve [tokens].
const LONG_CONTEXT: u32 = 448;

/// Replays `trace` against `variant`'s server; every request's record (times from the
/// intended send time).
fn measure(
    rt: &tokio::runtime::Runtime,
    variant: Variant,
    trace: &[TraceRequest],
) -> Vec<RequestRecord> {
    let (slots, b) = server_shape(variant);
    let server = start(slots, b);
    let out = std::env::temp_dir().join(format!("kvqueue-study-{}", server.1));
    let mut c = RunConfig::new(&url(&server), &out);
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace {
            requests: trace.to_vec(),
        },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
        shared: None,
    };
    c.horizon_s = 1e6;
    c.timeout = Duration::from_secs(60);
    c.metrics_interval = None;
    let rep = run_to_end(rt, &c).expect("load run");
    if std::env::var_os("PROFILER_STUDY_KEEP").is_some() {
        eprintln!("kept {} ({})", out.display(), variant.label());
    } else {
        let _ = std::fs::remove_dir_all(&out);
    }
    drop(server);
    assert_eq!(rep.rows.len(), trace.len(), "every request measured");
    assert!(
        rep.rows.iter().all(|r| r.outcome == "completed"),
        "every request completed"
    );
    rep.rows.iter().map(|r| r.record()).collect()
}

/// Simulates `variant`'s server — `ServerConfig::llama_cpp(slots, slots × 1024, b)`:
/// decodes first, then prompt chunks under the `-b` budget — on `trace` with `cost`.
fn simulate(variant: Variant, trace: &[TraceRequest], cost: &CostModel) -> Vec<RequestRecord> {
    let (slots, b) = server_shape(variant);
    let mut cfg = study::config_with_cost(variant, trace, cost.clone());
    cfg.server = ServerConfig::llama_cpp(slots, (slots * CTX_PER_SLOT) as u64, b);
    cfg.workload.max_model_len = Some(CTX_PER_SLOT);
    let rep = engine::sim::simulate(&cfg).expect("valid study config");
    assert_eq!(rep.records.len(), trace.len(), "every request recorded");
    rep.records
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn ttft(recs: &[RequestRecord], class: Option<u16>) -> f64 {
    mean(
        recs.iter()
            .filter(|r| class.is_none_or(|c| r.class == c))
            .filter_map(|r| r.ttft()),
    )
}

/// Mean E2E / (the request's time alone on the server under `cost`) of `class`.
fn slowdown(recs: &[RequestRecord], class: u16, cost: &CostModel) -> f64 {
    mean(recs.iter().filter(|r| r.class == class).filter_map(|r| {
        let ctx = r.prompt_tokens as u64 + r.output_tokens as u64 / 2;
        let alone = cost.prefill(1, 1, r.prompt_tokens as u64)
            + r.output_tokens.saturating_sub(1) as f64 * cost.decode_step(1, ctx);
        Some(r.e2e()? / alone)
    }))
}

/// Finding 3's read-outs: short worst gap [s], short stalls > 50 ms, short TTFT [s],
/// long TTFT [s], makespan [s], throughput [tok/s].
fn interference(recs: &[RequestRecord]) -> (f64, u32, f64, f64, f64, f64) {
    let short = recs.iter().filter(|r| r.class == SHORT);
    let first = recs.iter().map(|r| r.arrival_s).fold(f64::MAX, f64::min);
    let makespan = recs.iter().filter_map(|r| r.finish_s).fold(0.0, f64::max) - first;
    let tokens: u64 = recs.iter().map(|r| r.output_tokens as u64).sum();
    (
        short.clone().map(|r| r.max_gap_s).fold(0.0, f64::max),
        short.map(|r| r.stalls).sum(),
        ttft(recs, Some(SHORT)),
        ttft(recs, Some(LONG)),
        makespan,
        tokens as f64 / makespan,
    )
}

fn ms(x: f64) -> String {
    format!("{:.0}", x * 1e3)
}

fn describe(c: &CostModel) -> String {
    match c {
        CostModel::Linear(l) => format!("linear: {l}"),
        CostModel::Table(t) => format!(
            "table: prefill {} ms for {} tokens; decode {} ms for {} streams",
            t.prefill
                .iter()
                .map(|p| format!("{:.1}", p.1 * 1e3))
                .collect::<Vec<_>>()
                .join("/"),
            t.prefill
                .iter()
                .map(|p| format!("{}", p.0))
                .collect::<Vec<_>>()
                .join("/"),
            t.decode
                .iter()
                .map(|p| format!("{:.1}", p.1 * 1e3))
                .collect::<Vec<_>>()
                .join("/"),
            t.decode
                .iter()
                .map(|p| format!("{}", p.0))
                .collect::<Vec<_>>()
                .join("/"),
        ),
        other => format!("{other:?}"),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let t0 = Instant::now();
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let load_start = load_average();
    eprintln!("load average at the start: {load_start}");
    eprintln!("microbenchmark (before the measurements)");
    let mb_pre = microbench_server(&rt);

    // Measure everything first, right after the microbenchmark.
    let collapse = study::collapse_trace(0);
    let inversion = study::inversion_trace(0);
    let interf = study::interference_trace();
    let batching = [Variant::Fcfs, Variant::Eager];
    let chunking = [
        Variant::Eager,
        Variant::Chunked(64),
        Variant::Chunked(32),
        Variant::Chunked(16),
    ];
    let m1: Vec<_> = batching
        .iter()
        .map(|&v| {
            eprintln!("measuring collapse, {}", v.label());
            measure(&rt, v, &collapse)
        })
        .collect();
    let m2: Vec<_> = batching
        .iter()
        .map(|&v| {
            eprintln!("measuring inversion, {}", v.label());
            measure(&rt, v, &inversion)
        })
        .collect();
    let m3: Vec<_> = chunking
        .iter()
        .map(|&v| {
            eprintln!("measuring interference, {}", v.label());
            measure(&rt, v, &interf)
        })
        .collect();

    eprintln!("microbenchmark (after the measurements)");
    let mb_post = microbench_server(&rt);
    let mb = pool(&mb_pre, &mb_post);
    let f = fit::fit(&mb, false).expect("fit");
    let load_end = load_average();
    // The ablation: the same fit without the long-context decode curve (what `validate`'s
    // microbenchmark gives: βkv not identifiable, 0).
    let mut short_only = mb.clone();
    short_only.decode.truncate(study::SLOTS as usize);
    short_only.mixed.clear();
    let f0 = fit::fit(&short_only, false).expect("fit");
    // The model before the mixed probe: the same fit without the mixed points (βattn and
    // βmix 0).
    let mut no_mixed = mb.clone();
    no_mixed.mixed.clear();
    let f1 = fit::fit(&no_mixed, false).expect("fit");
    // (label, cost) of every simulated row; the first is the headline prediction.
    let costs = [
        ("sim, fitted linear", f.linear.clone()),
        ("sim, fitted table", f.table.clone()),
        ("sim, linear without the mixed probe", f1.linear.clone()),
        ("sim, linear without βkv", f0.linear.clone()),
    ];

    println!("Load average (1/5/15 min) at the start: {load_start}; at the end: {load_end}.\n");
    println!(
        "Microbenchmark of llama-server -np {} -b 2048 -ub 512 -t 1, before and after the \
         measurements, pooled (as `validate`):\n",
        study::SLOTS
    );
    for (name, m) in [("before", &mb_pre), ("after", &mb_post)] {
        println!(
            "- {name}: prefill {} ms for {} tokens; decode step {} ms for 1..{} streams (16-token prompts), then 1/2/4/8 streams ({LONG_CONTEXT}-token prompts)",
            m.prefill
                .iter()
                .map(|p| format!("{:.0}", p.latency_s * 1e3))
                .collect::<Vec<_>>()
                .join("/"),
            m.prefill
                .iter()
                .map(|p| p.prompt_tokens.to_string())
                .collect::<Vec<_>>()
                .join("/"),
            m.decode
                .iter()
                .map(|d| format!("{:.1}", d.step_s * 1e3))
                .collect::<Vec<_>>()
                .join("/"),
            study::SLOTS
        );
    }
    for (name, m) in [("before", &mb_pre), ("after", &mb_post)] {
        println!(
            "- mixed probe {name} (`-b {MIXED_BUDGET}`, 512-token prompt; streams: iteration ms by chunk): {}",
            [1, 2, 4]
                .iter()
                .map(|&k| format!(
                    "{k}: {}",
                    m.mixed
                        .iter()
                        .filter(|p| p.streams == k)
                        .map(|p| format!("{:.0}", p.step_s * 1e3))
                        .collect::<Vec<_>>()
                        .join("/")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    println!("\nFitted costs used:\n");
    for (name, c) in &costs {
        println!("- {name}: {}", describe(c));
    }
    println!(
        "  (linear fit relative RMS {:.1} %)\n",
        f.linear_rel_rms * 100.0
    );
    let (_, headline) = &costs[0];

    println!("## 1. FCFS collapse (30 requests 32→64, Poisson 10 req/s, seed 0)\n");
    println!("| variant | source | mean TTFT [ms] |\n|---|---|---|");
    let mut ratio = Vec::new();
    for (v, meas) in batching.iter().zip(&m1) {
        println!("| {} | measured | {} |", v.label(), ms(ttft(meas, None)));
        for (name, c) in &costs {
            println!(
                "| {} | {name} | {} |",
                v.label(),
                ms(ttft(&simulate(*v, &collapse, c), None))
            );
        }
    }
    ratio.push(("measured", ttft(&m1[0], None) / ttft(&m1[1], None)));
    for (name, c) in &costs {
        ratio.push((
            name,
            ttft(&simulate(Variant::Fcfs, &collapse, c), None)
                / ttft(&simulate(Variant::Eager, &collapse, c), None),
        ));
    }
    println!(
        "\nFCFS / continuous: {}\n",
        ratio
            .iter()
            .map(|(n, r)| format!("{n} {r:.1}×"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    println!("## 2. FCFS priority inversion (40 requests, 50 % 32→64 / 50 % 512→32, Poisson 4 req/s, seed 0)\n");
    println!(
        "| variant | source | short TTFT [ms] | long TTFT [ms] | short slowdown | long slowdown |"
    );
    println!("|---|---|---|---|---|---|");
    let row2 = |v: Variant, name: &str, r: &[RequestRecord]| {
        println!(
            "| {} | {name} | {} | {} | {:.1}× | {:.1}× |",
            v.label(),
            ms(ttft(r, Some(SHORT))),
            ms(ttft(r, Some(LONG))),
            slowdown(r, SHORT, headline),
            slowdown(r, LONG, headline)
        );
    };
    for (v, meas) in batching.iter().zip(&m2) {
        row2(*v, "measured", meas);
        for (name, c) in &costs {
            row2(*v, name, &simulate(*v, &inversion, c));
        }
    }
    println!(
        "\nslowdown = E2E / the request's time alone on the server under the fitted linear \
         cost (short {} ms, long {} ms)\n",
        ms(headline.prefill(1, 1, 32) + 63.0 * headline.decode_step(1, 64)),
        ms(headline.prefill(1, 1, 512) + 31.0 * headline.decode_step(1, 528))
    );

    println!("## 3. Interference scenario (t=0: 2 short 32→64; t=0.1 s: 2 long 512→32; t=0.3 s: 2 short)\n");
    println!("| variant | source | short worst gap [ms] | short stalls > 50 ms | short TTFT [ms] | long TTFT [ms] | makespan [ms] | throughput [tok/s] |");
    println!("|---|---|---|---|---|---|---|---|");
    let row3 = |v: Variant, name: &str, r: &[RequestRecord]| {
        let (gap, stalls, st, lt, mk, tp) = interference(r);
        println!(
            "| {} | {name} | {} | {} | {} | {} | {} | {:.0} |",
            v.label(),
            ms(gap),
            stalls,
            ms(st),
            ms(lt),
            ms(mk),
            tp
        );
    };
    for (v, meas) in chunking.iter().zip(&m3) {
        row3(*v, "measured", meas);
        for (name, c) in &costs {
            row3(*v, name, &simulate(*v, &interf, c));
        }
    }
    eprintln!(
        "total {:.0} s; load average at the end {load_end}",
        t0.elapsed().as_secs_f64()
    );
}
