//! Soak of the live tier: `run` for five minutes (`KVQUEUE_SOAK_SECS` sets another length)
//! against a real llama-server, at 2.5 × the rate it can serve, through the
//! fault-injecting proxy. The number of requests is bounded (rate × length), and the
//! per-request timeout bounds what is in flight, so the client reaches a steady state in
//! which its memory must stay flat. Checks: the resident set's slope over the steady part
//! (the median of pairwise slopes over one sample a second) is within a stated bound, no row is lost
//! (rows = requests scheduled = requests sent, and in `requests.csv`), and every injected
//! fault is an error row.

use super::live::{proxy, Fault, Server};
use bench_native::run::{run_to_end, RequestRow, RunConfig, RunReport};
use engine::workload::{ArrivalProcess, LengthDist, Workload};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Length of the soak [s] unless `KVQUEUE_SOAK_SECS` says otherwise.
const DEFAULT_SECS: f64 = 300.0;
/// Offered load relative to the measured capacity.
const OVERLOAD: f64 = 2.5;
/// Highest offered rate [req/s], whatever the capacity (the client's own limit is far
/// above; this keeps in-flight connections, rate × timeout, in the hundreds).
const MAX_RATE: f64 = 60.0;
/// Per-request timeout [s]: what bounds the requests in flight under overload.
const TIMEOUT_S: f64 = 4.0;
/// Memory a request may add to the client beyond its own row, over the steady part
/// [bytes]: a leaked body, connection buffer or task would be more.
const LEAK_BOUND_PER_REQUEST: f64 = 512.0;

/// What the proxy does to the i-th generation request: one in 20 each of an HTTP 500, a
/// stream cut after 600 bytes, and a stream stalled after 600 bytes (held 30 s).
fn plan(i: usize) -> Fault {
    match i % 20 {
        3 => Fault::Http500,
        9 => Fault::Cut(600),
        15 => Fault::Stall(600),
        _ => Fault::Pass,
    }
}

/// [`DEFAULT_SECS`], or `KVQUEUE_SOAK_SECS` if it is a number of seconds ≥ 120 (the
/// first 64 s are not part of the fit).
fn soak_secs() -> f64 {
    std::env::var("KVQUEUE_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 120.0)
        .unwrap_or(DEFAULT_SECS)
}

fn runtime() -> tokio::runtime::Runtime {
    bench_native::run::runtime().unwrap()
}

fn config(url: &str, out: &Path, arrivals: ArrivalProcess, n: usize) -> RunConfig {
    let mut c = RunConfig::new(url, out);
    c.workload = Workload {
        arrivals,
        lengths: LengthDist::Fixed {
            prompt: 32,
            output: 32,
        },
        max_model_len: None,
        shared: None,
    };
    c.max_requests = Some(n);
    c.horizon_s = 1e6;
    c.warmup_requests = 0;
    c.timeout = Duration::from_secs_f64(TIMEOUT_S);
    c
}

/// Completed requests per second when many are offered at once (what the server can
/// serve) [req/s].
fn capacity(server: &Server, out: &Path) -> f64 {
    let cfg = config(
        &server.url(),
        out,
        ArrivalProcess::Deterministic { rate: 1000.0 },
        32,
    );
    let rep = run_to_end(&runtime(), &cfg).unwrap();
    let done: Vec<&RequestRow> = rep
        .rows
        .iter()
        .filter(|r| r.outcome == "completed")
        .collect();
    assert!(
        done.len() >= 8,
        "the capacity probe mostly failed: {:#?}",
        rep.rows
    );
    let first = done
        .iter()
        .filter_map(|r| r.actual_send_s)
        .fold(f64::MAX, f64::min);
    let last = done
        .iter()
        .filter_map(|r| r.last_token_s)
        .fold(0.0f64, f64::max);
    done.len() as f64 / (last - first)
}

/// This process's resident set [bytes] (`VmRSS` of /proc/self/status).
fn rss_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024.0)
}

/// Slope of `y` over `t` [y per t]: the median of the slopes between every two points
/// (Theil–Sen). The allocator grows its arenas in steps of hundreds of KiB now and then;
/// a least-squares line leans on a step near either end of the window (one 580 KiB step
/// four-fifths of the way through a 236-s window made 8.0 KiB/s of 5.7), the median
/// does not, and a leak, which raises every pair, still moves it.
fn slope(points: &[(f64, f64)]) -> f64 {
    let mut slopes: Vec<f64> = Vec::with_capacity(points.len() * points.len() / 2);
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    slopes.sort_by(f64::total_cmp);
    engine::metrics::percentile_type7(&slopes, 0.5).unwrap_or(f64::NAN)
}

/// Samples [`rss_bytes`] once a second until `stop`; (seconds since start, bytes).
fn sample_rss(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(f64, f64)>> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut v = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Some(b) = rss_bytes() {
                v.push((t0.elapsed().as_secs_f64(), b));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        v
    })
}

fn scratch(name: &str) -> PathBuf {
    let d =
        crate::common::scratch_root().join(format!("kvqueue-soak-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Every row's own memory: the struct and its strings [bytes, mean].
fn row_bytes(rows: &[RequestRow]) -> f64 {
    let strings: usize = rows
        .iter()
        .map(|r| r.error.capacity() + r.finish_reason.capacity() + r.outcome.capacity())
        .sum();
    std::mem::size_of::<RequestRow>() as f64 + strings as f64 / rows.len().max(1) as f64
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn soak_above_capacity_with_faults_keeps_memory_flat_and_every_row() {
    let dir = scratch("run");
    let server = Server::start(4, 2048, &dir.join("server.log"));
    let cap = capacity(&server, &dir.join("probe"));
    let secs = soak_secs();
    let rate = (OVERLOAD * cap).min(MAX_RATE);
    let n = (rate * secs).floor() as usize;
    eprintln!(
        "soak: capacity {cap:.1} req/s; offering {rate:.1} req/s for {secs:.0} s = {n} requests"
    );

    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
    rt.spawn(proxy(listener, upstream, plan));
    // deterministic arrivals, ≥ 1/MAX_RATE apart: requests reach the proxy in id order, so
    // the proxy's i-th request is the row with id i
    let out = dir.join("out");
    let cfg = config(&proxy_url, &out, ArrivalProcess::Deterministic { rate }, n);

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_rss(stop.clone());
    let t = Instant::now();
    let rep: RunReport = run_to_end(&rt, &cfg).unwrap();
    let took = t.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let rss = sampler.join().unwrap();
    let rows_csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    drop(server);

    // memory: the slope over the steady part (after every timeout and stall of the start
    // has played out) against what the rows themselves add
    let steady_from = TIMEOUT_S + 30.0 + 30.0;
    let steady: Vec<(f64, f64)> = rss
        .iter()
        .copied()
        .filter(|p| p.0 >= steady_from && p.0 <= secs)
        .collect();
    assert!(steady.len() >= 20, "too few RSS samples: {rss:?}");
    let per_s = slope(&steady);
    let per_request = per_s / rate;
    let own = row_bytes(&rep.rows);
    let (lo, hi) = steady
        .iter()
        .fold((f64::MAX, 0.0f64), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    let s = &rep.summary;
    eprintln!(
        "soak: {:.0} s, {} rows: {} completed, {} errors; RSS {:.1}..{:.1} MiB over the steady part, slope {:.2} KiB/s = {:.0} B per request (a row is {own:.0} B; bound {:.0} B)",
        took,
        rep.rows.len(),
        s.completed,
        s.errors,
        lo / 1048576.0,
        hi / 1048576.0,
        per_s / 1024.0,
        per_request,
        own + LEAK_BOUND_PER_REQUEST
    );
    for (kind, count) in bench_native::run::failure_reasons(&rep.rows) {
        eprintln!("soak: {count}× {kind}");
    }
    assert!(
        per_request <= own + LEAK_BOUND_PER_REQUEST,
        "RSS grows by {per_request:.0} B per request over the steady part (rows account for {own:.0} B): {steady:?}"
    );

    // no row lost: every scheduled request was sent and has exactly one row
    assert_eq!(rep.scheduled, n);
    assert_eq!(rep.rows.len(), n);
    assert!(!rep.interrupted);
    let mut ids: Vec<u64> = rep.rows.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert!(ids.iter().copied().eq(0..n as u64), "ids are not 0..{n}");
    assert!(
        rep.rows.iter().all(|r| r.actual_send_s.is_some()),
        "a row was never sent"
    );
    assert_eq!(rows_csv.lines().count(), n + 1);

    // every fault is an error row, with the reason it should have
    let mut faults = 0;
    for r in &rep.rows {
        let fault = plan(r.id as usize);
        if fault == Fault::Pass {
            assert!(
                r.outcome == "completed" || r.error.starts_with("timed out"),
                "a request passed through unharmed failed otherwise: {r:?}"
            );
            continue;
        }
        faults += 1;
        assert_eq!(r.outcome, "error", "fault {fault:?} counted as {r:?}");
        let ok = match fault {
            Fault::Http500 => r.error.starts_with("HTTP 500: injected fault"),
            // overload may keep a request queued in the server past the timeout before
            // the fault can strike
            Fault::Cut(_) => r.error.starts_with("stream cut") || r.error.starts_with("timed out"),
            Fault::Stall(_) => r.error.starts_with("timed out"),
            Fault::Pass => unreachable!(),
        };
        assert!(ok, "fault {fault:?} gave {r:?}");
    }
    let injected_500 = (0..n).filter(|&i| plan(i) == Fault::Http500).count();
    let rows_500 = rep
        .rows
        .iter()
        .filter(|r| r.error.starts_with("HTTP 500: injected fault"))
        .count();
    assert_eq!(rows_500, injected_500);
    assert_eq!(
        s.completed + s.errors,
        n as u64,
        "rows are completed or errors"
    );
    eprintln!("soak: {faults} faults injected, each an error row");
}
