//! The profiler study's three scenarios against a real `llama-server` (CPU, 1 thread,
//! the tiny random-weight model of `scripts/llama-server.sh`), side by side with the
//! simulator (`engine/examples/profiler_study.rs`, whose traces this replays).
//!
//! FCFS = `-np 1`; eager = 8 slots, `-b 2048`; chunked = 8 slots, `-b 64/32/16` (and
//! `-ub` = min(`-b`, 512)). Each variant gets its own server on a free loopback port,
//! killed by PID. One seed per scenario (seed 0) to stay within ~2 minutes:
//!
//! ```text
//! cargo run --release -p bench-native --example profiler_study_real
//! ```

#[path = "../../engine/examples/profiler_study.rs"]
mod study;

use bench_native::run::{run_load, RequestRow, RunConfig};
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

fn start(variant: Variant) -> Server {
    let (bin, model) = paths();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (slots, b) = match variant {
        Variant::Fcfs => (1, 2048),
        Variant::Eager => (study::SLOTS, 2048),
        Variant::Chunked(c) => (study::SLOTS, c),
    };
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
        .args(["-c", &(slots * 1024).to_string(), "-np", &slots.to_string()])
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

fn measure(variant: Variant, trace: &[TraceRequest]) -> Vec<RequestRow> {
    let server = start(variant);
    let out = std::env::temp_dir().join(format!("kvqueue-study-{}", server.1));
    let mut c = RunConfig::new(&format!("http://127.0.0.1:{}", server.1), &out);
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace {
            requests: trace.to_vec(),
        },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
    };
    c.horizon_s = 1e6;
    c.timeout = Duration::from_secs(60);
    c.metrics_interval = None;
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    let rep = rt
        .block_on(run_load(&c, &ProgressBar::hidden(), std::future::pending()))
        .expect("load run");
    let _ = std::fs::remove_dir_all(&out);
    drop(server);
    assert_eq!(rep.rows.len(), trace.len(), "every request measured");
    rep.rows
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn ttft(rows: &[RequestRow], class: Option<u16>) -> f64 {
    mean(
        rows.iter()
            .filter(|r| class.is_none_or(|c| r.class == c))
            .filter_map(|r| r.ttft_s),
    )
}

fn ms(x: f64) -> String {
    format!("{:.0}", x * 1e3)
}

fn main() {
    let t0 = Instant::now();
    println!("## 1. FCFS collapse (seed 0), measured vs simulated (CPU table)\n");
    println!("| variant | measured mean TTFT [ms] | simulated [ms] |\n|---|---|---|");
    let tr = study::collapse_trace(0);
    let mut m = [0.0; 2];
    for (i, v) in [Variant::Fcfs, Variant::Eager].into_iter().enumerate() {
        m[i] = ttft(&measure(v, &tr), None);
        let s = study::mean_ttft(&study::run(v, &tr), None);
        println!("| {} | {} | {} |", v.label(), ms(m[i]), ms(s));
    }
    println!("\nmeasured FCFS / continuous = {:.1}×\n", m[0] / m[1]);

    println!("## 2. FCFS priority inversion (seed 0)\n");
    println!(
        "| variant | source | short TTFT [ms] | long TTFT [ms] | short slowdown | long slowdown |"
    );
    println!("|---|---|---|---|---|---|");
    let tr = study::inversion_trace(0);
    let cost = study::cpu_cost();
    for v in [Variant::Fcfs, Variant::Eager] {
        let rows = measure(v, &tr);
        let slow = |c: u16| {
            mean(rows.iter().filter(|r| r.class == c).filter_map(|r| {
                let iso = cost.prefill(1, 1, r.target_prompt_tokens as u64)
                    + r.target_output_tokens.saturating_sub(1) as f64 * cost.decode_step(1, 0);
                Some(r.e2e_s? / iso)
            }))
        };
        println!(
            "| {} | measured | {} | {} | {:.1}× | {:.1}× |",
            v.label(),
            ms(ttft(&rows, Some(SHORT))),
            ms(ttft(&rows, Some(LONG))),
            slow(SHORT),
            slow(LONG)
        );
        let recs = study::run(v, &tr);
        println!(
            "| {} | simulated | {} | {} | {:.1}× | {:.1}× |",
            v.label(),
            ms(study::mean_ttft(&recs, Some(SHORT))),
            ms(study::mean_ttft(&recs, Some(LONG))),
            study::mean_slowdown(&recs, SHORT),
            study::mean_slowdown(&recs, LONG)
        );
    }

    println!("\n## 3. Interference scenario\n");
    println!("| variant | source | short worst gap [ms] | short stalls > 50 ms | short TTFT [ms] | long TTFT [ms] | makespan [ms] |");
    println!("|---|---|---|---|---|---|---|");
    let tr = study::interference_trace();
    for v in [
        Variant::Eager,
        Variant::Chunked(64),
        Variant::Chunked(32),
        Variant::Chunked(16),
    ] {
        let rows = measure(v, &tr);
        let short = rows.iter().filter(|r| r.class == SHORT);
        let gap = short.clone().map(|r| r.max_gap_s).fold(0.0, f64::max);
        let stalls: u32 = short.map(|r| r.stalls).sum();
        let makespan = rows
            .iter()
            .filter_map(|r| r.last_token_s)
            .fold(0.0, f64::max);
        println!(
            "| {} | measured | {} | {} | {} | {} | {} |",
            v.label(),
            ms(gap),
            stalls,
            ms(ttft(&rows, Some(SHORT))),
            ms(ttft(&rows, Some(LONG))),
            ms(makespan)
        );
        let s = study::interference(v);
        println!(
            "| {} | simulated | {} | {} | {} | {} | {} |",
            v.label(),
            ms(s.short_max_gap_s),
            s.short_stalls,
            ms(s.short_ttft_s),
            ms(s.long_ttft_s),
            ms(s.makespan_s)
        );
    }
    eprintln!("total {:.0} s", t0.elapsed().as_secs_f64());
}
