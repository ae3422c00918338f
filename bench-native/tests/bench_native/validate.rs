//! `bench-native validate` end to end against a real llama-server (CPU, 1 thread, the tiny
//! random-weight model of `scripts/llama-server.sh`) that this test starts on a free
//! loopback port and kills by PID. Two rates, a few short requests each (~30 s); then the
//! same run and recorded ones (`tests/fixtures/`) re-predicted with `--replay` (no server).
//!
//! Live tier (`#[ignore = "live: …"]`, run with `-- --include-ignored`): a missing binary is
//! a FAILURE with instructions, never a silent pass.

use crate::common::{fixture, free_port, installed};
use bench_native::cli::{Cli, Command as Sub};
use bench_native::validate::{self, ValidateArgs, FLEET_METRICS, METRICS};
use clap::Parser;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A llama-server child, killed by PID on drop.
struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(
        s,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 32];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).contains(" 200")
}

fn start(slots: u32, ctx: u32, batch: u32, log: &Path) -> Server {
    let (bin, model) = installed();
    let port = free_port();
    let child = Command::new(bin)
        .args(["-m", model.to_str().unwrap(), "--host", "127.0.0.1"])
        .args(["--port", &port.to_string(), "-c", &ctx.to_string()])
        .args(["-np", &slots.to_string(), "-t", "1"])
        .args(["-b", &batch.to_string(), "-ub", &batch.min(512).to_string()])
        .args(["--metrics", "--no-webui", "-cram", "0"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn llama-server");
    let mut s = Server(child, port);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if let Some(st) = s.0.try_wait().unwrap() {
            panic!("llama-server exited during start-up: {st}");
        }
        if healthy(port) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("llama-server did not become healthy in 60 s");
}

/// `validate` run as the command line `argv` would run it, with the arguments it parsed.
fn validate_argv(argv: &[&str]) -> (ValidateArgs, validate::ValidateReport) {
    let Sub::Validate(args) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not the validate subcommand")
    };
    let rep = validate::validate(&args, &argv.join(" ")).unwrap();
    (args, rep)
}

/// `validate --replay rec --out out` plus `extra` flags.
fn replay(rec: &Path, out: &Path, extra: &[&str]) -> (ValidateArgs, validate::ValidateReport) {
    let mut argv = vec![
        "bench-native",
        "validate",
        "--replay",
        rec.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    validate_argv(&argv)
}

#[test]
#[ignore = "live: needs llama-server (scripts/setup.sh server)"]
fn validate_two_rates_against_llama_server() {
    let _live = crate::common::live();
    let dir =
        crate::common::scratch_root().join(format!("kvqueue-validate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = start(2, 2048, 256, &dir.join("server.log"));
    let out = dir.join("out");
    let url = format!("http://127.0.0.1:{}", server.1);
    let argv = [
        "bench-native",
        "validate",
        "--url",
        &url,
        "--budget",
        "256",
        "--load",
        "0.3,1.2",
        "--requests",
        "8",
        "--scale",
        "0.1",
        "--max-len",
        "160",
        "--mb-prompts",
        "16,64,128",
        "--mb-repeats",
        "1",
        "--mb-decode-tokens",
        "24",
        "--rounds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let t = Instant::now();
    let (_, rep) = validate_argv(&argv);
    eprintln!(
        "validate took {:.1} s; median |rel err| {:.1} %",
        t.elapsed().as_secs_f64(),
        rep.median_abs_rel_error * 100.0
    );
    drop(server);

    assert_eq!(rep.rates.len(), 2);
    for f in [
        "validate.md",
        "validate.csv",
        "microbench.json",
        "microbench_pre.json",
        "microbench_post.json",
        "fit.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let md = std::fs::read_to_string(out.join("validate.md")).unwrap();
    assert!(md.contains(&argv.join(" ")), "command at the top: {md}");
    assert!(md.contains("Median |relative error|"), "{md}");
    // the wake-up after idle: probed before the runs only, fitted, named in the report
    let json = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join(f)).unwrap()).unwrap()
    };
    let wake = json("fit.json")["idle_wake_s"].clone();
    assert_eq!(wake.as_array().map(Vec::len), Some(4), "{wake}");
    let probed = |f: &str| json(f)["idle"].as_array().map_or(0, Vec::len);
    assert_eq!(
        (
            probed("microbench_pre.json"),
            probed("microbench_post.json")
        ),
        (4, 0)
    );
    assert!(md.contains("wake-up after idle"), "{md}");
    // the second round: every rate measured again, and how far it moved is reported
    assert!(md.contains("Measurement noise (2 rounds)"), "{md}");
    // and the values round by round, prediction last, a row per rate
    let rows = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains(" / ") && l.contains(" → "))
        .count();
    assert_eq!(rows, 2, "{md}");
    let (noise, against) = rep.repeat_noise.expect("2 rounds measure a noise");
    assert!(
        noise.is_finite() && noise >= 0.0 && against.is_finite(),
        "{noise} {against}"
    );
    for r in &rep.rates {
        assert_eq!(r.repeats.len(), 1, "rate {}", r.rate);
        assert_eq!(r.repeats[0].completed, 8, "rate {}", r.rate);
    }

    let csv = std::fs::read_to_string(out.join("validate.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], validate::csv_header());
    assert_eq!(lines.len(), 3, "{csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    for line in &lines[1..] {
        let cells: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cells.len(), header.len());
        assert!(cells.iter().all(|c| c.is_finite()), "{line}");
        assert_eq!(cells[2], 8.0, "every request simulated: {line}");
        assert_eq!(cells[3], 8.0, "every request measured: {line}");
        for (i, (name, _)) in METRICS.iter().enumerate() {
            let (p, m, e) = (cells[4 + 3 * i], cells[5 + 3 * i], cells[6 + 3 * i]);
            assert!(p > 0.0 && m > 0.0, "{name}: {line}");
            assert!(
                (e - (p - m) / m).abs() < 1e-9,
                "{name}: error column is (pred - meas) / meas: {line}"
            );
        }
    }
    // the errors are computed, not forced: some cell differs from 0
    assert!(rep
        .rates
        .iter()
        .flat_map(|r| r.errors(false))
        .any(|(_, _, _, e)| e != 0.0));
    assert!(rep.median_abs_rel_error.is_finite());
    for r in &rep.rates {
        let run = out.join(format!("rate-{}", r.rate));
        let alt = out.join(format!(
            "rate-{}",
            format!("{:.3}", r.rate)
                .trim_end_matches('0')
                .trim_end_matches('.')
        ));
        assert!(
            run.join("requests.csv").is_file() || alt.join("requests.csv").is_file(),
            "real run files for rate {}",
            r.rate
        );
        // every simulated request written, one row per traced request
        let sim = std::fs::read_dir(out.join("sim"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains("requests-"))
            .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
            .collect::<Vec<_>>();
        assert_eq!(
            sim,
            vec![1 + 8; 2],
            "sim/requests-<rate>.csv: header + 8 rows each"
        );
        let again = |p: &Path| {
            out.join("repeat-2")
                .join(p.file_name().unwrap())
                .join("requests.csv")
                .is_file()
        };
        assert!(
            again(&run) || again(&alt),
            "round 2 files for rate {}",
            r.rate
        );
    }
    // the recorded run, re-predicted without the server, gives the same numbers
    // (its server and workload, --budget 256 --max-len 160 --scale 0.1, from the
    // recording's run_args.json)
    let (_, again) = replay(&out, &dir.join("replay"), &[]);
    assert_eq!(again.rates.len(), rep.rates.len());
    // equal up to the last bits that a float loses in a JSON round trip
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(1e-12);
    for (a, b) in rep.rates.iter().zip(&again.rates) {
        assert_eq!(a.rate, b.rate);
        for (x, y) in a.errors(false).into_iter().zip(b.errors(false)) {
            assert!(
                close(x.1, y.1) && close(x.2, y.2),
                "rate {} {}: {x:?} vs {y:?}",
                a.rate,
                x.0
            );
        }
    }
    assert!(close(rep.median_abs_rel_error, again.median_abs_rel_error));
    let (n2, a2) = again.repeat_noise.expect("the replay reads round 2");
    assert!(
        close(noise, n2) && close(against, a2),
        "{noise} {against} vs {n2} {a2}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorded `validate` run (the `llama_server_run` fixture: llama-server, 4 rates × 40
/// requests) re-predicted by this build without a server: every cell is computed.
#[test]
fn replay_of_a_recorded_run() {
    let _cpu = crate::common::cpu_bound();
    let rec = fixture("llama_server_run");
    let out = crate::common::scratch_root().join(format!("kvqueue-replay-{}", std::process::id()));
    let (args, rep) = replay(&rec, &out, &[]);
    let rates: Vec<f64> = rep.rates.iter().map(|r| r.rate).collect();
    assert_eq!(rates, [0.71, 1.4, 2.3, 3.4]);
    for r in &rep.rates {
        assert_eq!(r.measured.completed, 40, "rate {}", r.rate);
        assert_eq!(r.predicted.completed, 40, "rate {}", r.rate);
        for (name, p, m, e) in r.errors(false) {
            assert!(p > 0.0 && m > 0.0 && e.is_finite(), "{name} at {}", r.rate);
        }
    }
    assert!(rep.median_abs_rel_error > 0.0 && rep.median_abs_rel_error < 1.0);
    let md = std::fs::read_to_string(out.join("validate.md")).unwrap();
    assert!(md.contains("--replay"), "{md}");
    // a directory that is not a validate run is an error that names it
    let e = validate::validate(
        &ValidateArgs {
            replay: Some(out.join("sim")),
            ..args.clone()
        },
        "",
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("sim"), "{e:#}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A recorded fleet run (the `nginx_fleet_run` fixture: two llama-servers behind nginx
/// round-robin, 4 rates × 36 requests, two rounds) re-predicted by the fleet simulator
/// without a server, behind its recorded router and then behind another.
#[test]
fn replay_of_a_recorded_fleet_run_and_another_router() {
    let _cpu = crate::common::cpu_bound();
    let rec = fixture("nginx_fleet_run");
    let base =
        crate::common::scratch_root().join(format!("kvqueue-fleet-replay-{}", std::process::id()));
    let (_, rr) = replay(&rec, &base.join("rr"), &[]);
    let (_, lor) = replay(&rec, &base.join("lor"), &["--router", "least_outstanding"]);
    let rates: Vec<f64> = rr.rates.iter().map(|r| r.rate).collect();
    assert_eq!(rates, [1.3, 1.9, 2.6, 3.2]);
    for rep in [&rr, &lor] {
        for r in &rep.rates {
            assert_eq!(r.measured.completed, 36, "rate {}", r.rate);
            assert_eq!(r.predicted.completed, 36, "rate {}", r.rate);
            assert_eq!(r.repeats.len(), 1);
        }
        let (err, noise) = (
            rep.median_error_over(&FLEET_METRICS),
            rep.noise_over(&FLEET_METRICS).unwrap(),
        );
        assert!(err.is_finite() && err > 0.0 && noise > 0.0, "{err} {noise}");
    }
    // the same fit and traces: least outstanding routes the busy top rate better
    let ttft = |rep: &validate::ValidateReport, i: usize| rep.rates[i].predicted.ttft.mean.unwrap();
    assert!(
        ttft(&lor, 3) < ttft(&rr, 3),
        "{} {}",
        ttft(&lor, 3),
        ttft(&rr, 3)
    );
    // the measurements are the recording's, whatever the router
    assert_eq!(
        rr.rates[3].measured.ttft.mean,
        lor.rates[3].measured.ttft.mean
    );
    for (dir, router) in [("rr", "round_robin"), ("lor", "least_outstanding")] {
        let md = std::fs::read_to_string(base.join(dir).join("validate.md")).unwrap();
        assert!(
            md.contains(&format!("behind the `{router}` router")),
            "{md}"
        );
        assert!(md.contains("Fleet median |relative error|"), "{md}");
        // the replay records the router it predicted with
        let recorded = validate::RecordedArgs::read(&base.join(dir)).unwrap();
        assert_eq!(recorded.router.name(), router);
        assert_eq!(recorded.replicas, 2);
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Replicas that slow each other: the recorded fleet run replayed with a microbenchmark
/// beside busy neighbours that is the one alone 30 % slower. Each rate's prediction then
/// runs on a cost scaled by more than 1 and less than 1.3, more as the replicas get
/// busier, and the fleet's predicted saturation falls by the full slowdown.
#[test]
fn a_fleet_beside_busy_neighbours_is_predicted_slower_the_busier_it_is() {
    let _cpu = crate::common::cpu_bound();
    let base = crate::common::scratch_root().join(format!("kvqueue-beside-{}", std::process::id()));
    let rec = base.join("rec");
    let _ = std::fs::remove_dir_all(&base);
    copy_fixture("nginx_fleet_run", &rec);
    let (_, alone) = replay(&rec, &base.join("alone"), &[]);
    let pre = std::fs::read_to_string(rec.join("microbench_pre.json")).unwrap();
    let mut mb: serde_json::Value = serde_json::from_str(&pre).unwrap();
    let slower = |v: &mut serde_json::Value| *v = (v.as_f64().unwrap() * 1.3).into();
    for p in mb["prefill"].as_array_mut().unwrap() {
        slower(&mut p["latency_s"]);
    }
    for d in mb["decode"].as_array_mut().unwrap() {
        slower(&mut d["step_s"]);
    }
    std::fs::write(rec.join(validate::BESIDE), mb.to_string()).unwrap();
    let (_, beside) = replay(&rec, &base.join("beside"), &[]);

    let mut last = 1.0;
    for (a, b) in alone.rates.iter().zip(&beside.rates) {
        assert_eq!(a.colocation, None);
        let (k, busy) = b.colocation.expect("a co-location factor at every rate");
        assert!(k > 1.0 && k < 1.3 && busy > 0.0 && busy < 1.0, "{k} {busy}");
        assert!(k > last, "rate {}: ×{k} after ×{last}", b.rate);
        last = k;
        let tpot = |r: &validate::RateResult| r.predicted.tpot.mean.unwrap();
        assert!(
            tpot(b) > tpot(a) && tpot(b) < tpot(a) * 2.0,
            "rate {}: TPOT {} ms alone, {} ms beside (×{k})",
            b.rate,
            tpot(a) * 1e3,
            tpot(b) * 1e3
        );
        assert_eq!(a.measured.ttft.mean, b.measured.ttft.mean);
    }
    let drop = alone.capacity_rps / beside.capacity_rps;
    assert!(drop > 1.15 && drop < 1.45, "saturation ÷{drop}");
    let md = std::fs::read_to_string(base.join("beside").join("validate.md")).unwrap();
    assert!(
        md.contains("Co-location: beside its busy neighbours"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A replay simulates the server the run was recorded with: the recorded vLLM run was
/// measured with `--slots 4 --budget 512` (vLLM does not report its max_num_seqs), so its
/// replay needs no flags, and flags that contradict the recording do not change it.
#[test]
fn a_replay_takes_the_server_and_workload_from_the_recording() {
    let _cpu = crate::common::cpu_bound();
    let rec = fixture("vllm_run");
    let base =
        crate::common::scratch_root().join(format!("kvqueue-replay-args-{}", std::process::id()));
    let (_, plain) = replay(&rec, &base.join("plain"), &[]);
    let (_, other) = replay(
        &rec,
        &base.join("other"),
        &["--slots", "1", "--budget", "64", "--scale", "2"],
    );
    assert_eq!(plain.median_abs_rel_error, other.median_abs_rel_error);
    let cells = |r: &validate::ValidateReport| -> Vec<f64> {
        r.rates
            .iter()
            .map(|x| x.predicted.ttft.mean.unwrap())
            .collect()
    };
    assert_eq!(cells(&plain), cells(&other));
    // the replay's own directory says what it replayed, so a replay of it does too
    let args = std::fs::read_to_string(base.join("other").join(validate::RECORDED_ARGS)).unwrap();
    assert!(
        args.contains("\"slots\": 4") && args.contains("\"budget\": 512"),
        "{args}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A replay reads the recording's `run_args.json`, never its report: without one it is an
/// error that says what to write, not a guess from this command's flags.
#[test]
fn a_replay_without_run_args_says_what_to_write() {
    let _cpu = crate::common::cpu_bound();
    let base =
        crate::common::scratch_root().join(format!("kvqueue-replay-noargs-{}", std::process::id()));
    let rec = base.join("rec");
    let _ = std::fs::remove_dir_all(&base);
    copy_fixture("llama_server_run", &rec);
    std::fs::remove_file(rec.join(validate::RECORDED_ARGS)).unwrap();
    // a report that names other flags is not read
    std::fs::write(
        rec.join("validate.md"),
        "```text\nbench-native validate --url http://x --budget 64 --out y\n```\n",
    )
    .unwrap();
    let Sub::Validate(args) = Cli::try_parse_from([
        "bench-native",
        "validate",
        "--replay",
        rec.to_str().unwrap(),
        "--out",
        base.join("out").to_str().unwrap(),
    ])
    .unwrap()
    .command
    else {
        panic!()
    };
    let e = format!("{:#}", validate::validate(&args, "").unwrap_err());
    assert!(
        e.contains("run_args.json") && e.contains("\"max_len\": 512"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// A copy of the fixture `name` at `to`, to be changed.
fn copy_fixture(name: &str, to: &Path) {
    let src = fixture(name);
    for e in walk(&src) {
        let dst = to.join(e.strip_prefix(&src).unwrap());
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&e, &dst).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
