//! A fleet through a real load balancer: two llama-server replicas (1 thread each, the
//! tiny model of `scripts/llama-server.sh`) behind Debian's nginx (`scripts/setup.sh
//! balancer`), first with its default round-robin upstream, then with `least_conn`
//! (`proxy_buffering off`, so tokens stream through one by one). For each policy
//! `bench-native validate --balancer` fits the cost model on one replica alone, replays the
//! same traces through nginx at four rates in two rounds, and predicts mean/p99 TTFT and
//! TPOT with the fleet simulator: two copies of the fitted replica behind `round_robin` or
//! `least_outstanding` (docs/model.md, "Fleets"; docs/accuracy.md, "Fleets through a real
//! load balancer"). The two replicas share the machine's two cores, so the replica is
//! microbenchmarked a second time beside the other one kept busy (`--mb-beside`), and the
//! prediction scales its cost by how busy the replicas are at each rate.
//!
//! Asserted: per policy, the median |relative error| over those four metrics at every rate
//! is ≤ 60 % + twice the yardstick's resolution (the second round against the first, same
//! cells, plus the machine's drift between the microbenchmarks; see [`bound`] and
//! [`CEILING`]: this testbed does not meet the 15 % target, which the report sets the
//! error against); and
//! where the simulator predicts the policies' mean TTFT to differ (by ≥ 2 %) and the
//! measurement resolves a difference (every round of one policy beyond every round of
//! the other, [`INTERLEAVED_ROUNDS`] each), the signs agree. The policies are compared on
//! runs interleaved in time (round-robin, least_conn, round-robin, least_conn, … on the
//! same trace, both balancers up at once), so a change in the machine's speed between the
//! two validations does not pass for a policy's effect.
//!
//! Everything runs on loopback ports picked here, and every process is stopped by its PID
//! when its guard drops, on failure too. `KVQUEUE_FLEET_OUT=DIR` keeps the reports there
//! (results/fleet-live/ is made this way).

use crate::common::{free_port, repo_root};
use crate::live::{http_status, Server};
use bench_native::cli::{Cli, Command as Sub};
use bench_native::run::{run_load, RunConfig};
use bench_native::validate::{self, fmt_rate, ValidateReport, FLEET_METRICS};
use clap::Parser;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use indicatif::ProgressBar;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The error target of the fleet prediction (median |relative error|), which the report
/// sets the error against.
const TARGET: f64 = 0.15;

/// What the test asserts instead of the target: on this testbed the prediction is 7–46 %
/// off with the measurement's noise at 4–25 % (docs/accuracy.md, "Fleets through a real
/// load balancer"), depending on the host the VM runs on that day: the two replicas,
/// nginx and the client share two cores in ways the co-location factor only averages,
/// and 36 requests per rate leave one broken tie able to move several cells. A fault in
/// routing, fitting or replaying the fleet (a replica left out, the wrong router's
/// alternation) is off by far more.
const CEILING: f64 = 0.60;

/// Rounds of each policy in the interleaved comparison. Its rounds are the independent
/// measurements of a policy's mean TTFT (the requests of one run queue behind each other),
/// and with four against four, every round of one policy beyond every round of the other
/// has a chance of 2 in 70 (2.9 %) when the policies do not differ (a Mann–Whitney test at
/// its extreme; two against two would be 1 in 3).
const INTERLEAVED_ROUNDS: usize = 4;

/// Copies of a rate's 36-request trace that one interleaved run sends, one after the
/// other: a run's mean TTFT over 36 requests near saturation moves by a third from run to
/// run, over 72 by less.
const INTERLEAVED_COPIES: usize = 2;

/// A running load balancer, killed by PID on drop. nginx runs with `master_process off`,
/// HAProxy with one thread: one process each, so killing it leaves nothing behind.
struct Balancer {
    child: Child,
    port: u16,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Balancer {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits until the balancer answers `/health` with the replicas' 200.
    fn ready(mut self, what: &str) -> Balancer {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("{what} exited during start-up: {st}");
            }
            if http_status(self.port, "/health") == Some(200) {
                return self;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{what} did not pass /health through in 20 s");
    }
}

/// nginx in the foreground, one process, config and every temp path under `dir`;
/// `least_conn` or the default round-robin over `replicas`.
fn nginx(dir: &Path, replicas: &[u16], least_conn: bool) -> Balancer {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let d = dir.display();
    let servers: String = replicas
        .iter()
        .map(|p| format!("    server 127.0.0.1:{p};\n"))
        .collect();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/client;\n\
         proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         upstream llama {{\n{}{servers}  }}\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
         proxy_pass http://llama;\n      proxy_http_version 1.1;\n\
         proxy_set_header Connection \"\";\n      proxy_buffering off;\n\
         proxy_read_timeout 300s;\n    }}\n  }}\n}}\n",
        if least_conn { "    least_conn;\n" } else { "" }
    );
    let file = dir.join("nginx.conf");
    std::fs::write(&file, conf).unwrap();
    let child = Command::new("nginx")
        .args(["-c", file.to_str().unwrap(), "-p", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .expect("spawn nginx (scripts/setup.sh balancer installs it)");
    Balancer { child, port }.ready("nginx")
}

/// HAProxy in the foreground with one thread; `balance roundrobin` or `leastconn`.
fn haproxy(dir: &Path, replicas: &[u16], leastconn: bool) -> Balancer {
    std::fs::create_dir_all(dir).unwrap();
    let port = free_port();
    let servers: String = replicas
        .iter()
        .enumerate()
        .map(|(i, p)| format!("  server r{i} 127.0.0.1:{p}\n"))
        .collect();
    let conf = format!(
        "global\n  nbthread 1\ndefaults\n  mode http\n  timeout connect 5s\n\
         timeout client 300s\n  timeout server 300s\nfrontend fe\n  bind 127.0.0.1:{port}\n\
         default_backend llama\nbackend llama\n  balance {}\n{servers}",
        if leastconn { "leastconn" } else { "roundrobin" }
    );
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, conf).unwrap();
    let child = Command::new("haproxy")
        .args(["-f", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .expect("spawn haproxy (scripts/setup.sh balancer installs it)");
    Balancer { child, port }.ready("haproxy")
}

/// The bound on the median |relative error|: [`CEILING`] plus twice the yardstick's own
/// resolution, which is the measurement's noise (median round-to-round difference) plus
/// the machine's drift (median change between the microbenchmarks before and after the
/// measurement), since the prediction is scored against one noisy measurement with a
/// cost fitted from microbenchmarks whose speed moved by that much. Noise above 40 %
/// leaves a bound that only a gross over-prediction could break: the test refuses to
/// call that a check and fails, naming the machine's load.
fn bound(noise: f64, drift: f64) -> f64 {
    CEILING + 2.0 * (noise + drift)
}

/// `validate` of the fleet behind `balancer`, fitted on `replica` (alone, and beside its
/// busy `neighbour` on the same two cores), as `router`.
fn validate_fleet(
    [replica, neighbour]: [&str; 2],
    balancer: &str,
    router: &str,
    rates: &str,
    out: &Path,
) -> (String, ValidateReport) {
    let argv = vec![
        "bench-native",
        "validate",
        "--url",
        replica,
        "--mb-beside",
        neighbour,
        "--balancer",
        balancer,
        "--replicas",
        "2",
        "--router",
        router,
        "--budget",
        "2048",
        rates,
        "--requests",
        "36",
        "--scale",
        "0.25",
        "--max-len",
        "256",
        "--mb-prompts",
        "1,4,16,64,128,224",
        "--mb-repeats",
        "2",
        "--mb-decode-tokens",
        "48",
        "--mb-long-prompt",
        "128",
        "--mb-mixed-prompt",
        "192",
        "--rounds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let command = as_from_root(&argv);
    let Sub::Validate(args) = Cli::try_parse_from(&argv).unwrap().command else {
        panic!("not the validate subcommand")
    };
    (
        command.clone(),
        validate::validate(&args, &command).unwrap(),
    )
}

/// The command line as typed from the repository root (paths under it relative).
fn as_from_root(argv: &[&str]) -> String {
    argv.join(" ")
        .replace(&format!("{}/", repo_root().display()), "")
}

/// Per rate: (predicted, measured in each round) of `metric` (an index of FLEET_METRICS).
fn values(rep: &ValidateReport, metric: usize) -> Vec<(f64, Vec<f64>)> {
    let get = FLEET_METRICS[metric].1;
    rep.rates
        .iter()
        .map(|r| {
            let rounds = std::iter::once(&r.measured)
                .chain(&r.repeats)
                .map(|s| get(s).unwrap_or(f64::NAN))
                .collect();
            (get(&r.predicted).unwrap_or(f64::NAN), rounds)
        })
        .collect()
}

/// `validate --replay dir --router router --out out`.
fn replay_as(dir: &Path, router: &str, out: &Path) -> (String, ValidateReport) {
    let argv = vec![
        "bench-native",
        "validate",
        "--replay",
        dir.to_str().unwrap(),
        "--router",
        router,
        "--out",
        out.to_str().unwrap(),
    ];
    let command = as_from_root(&argv);
    let Sub::Validate(args) = Cli::try_parse_from(&argv).unwrap().command else {
        panic!("not the validate subcommand")
    };
    (
        command.clone(),
        validate::validate(&args, &command).unwrap(),
    )
}

/// Mean TTFT [s] of `rr_dir`'s trace at `rate`, sent [`INTERLEAVED_COPIES`] times over,
/// run through each balancer in turn, `rounds` times (round-robin, least_conn,
/// round-robin, …): per balancer, one value per round. Interleaved, the two policies see
/// the same machine speed.
fn interleaved_mean_ttft(
    balancers: [&Balancer; 2],
    rr_dir: &Path,
    rate: f64,
    rounds: usize,
    out: &Path,
) -> [Vec<f64>; 2] {
    let file = rr_dir
        .join("sim")
        .join(format!("trace-{}.json", fmt_rate(rate)));
    let once: Vec<TraceRequest> =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let trace = repeated(&once, INTERLEAVED_COPIES);
    let rt = bench_native::run::runtime().unwrap();
    let mut ttft = [Vec::new(), Vec::new()];
    for round in 1..=rounds {
        for (k, lb) in balancers.iter().enumerate() {
            let dir = out.join(format!(
                "{}-rate-{}-round-{round}",
                ["round_robin", "least_conn"][k],
                fmt_rate(rate)
            ));
            let mut rc = RunConfig::new(&lb.url(), dir);
            rc.workload = Workload {
                arrivals: ArrivalProcess::Trace {
                    requests: trace.clone(),
                },
                lengths: LengthDist::Fixed {
                    prompt: 1,
                    output: 1,
                },
                max_model_len: None,
                shared: None,
            };
            rc.horizon_s = 1e6;
            rc.timeout = Duration::from_secs(300);
            // as `validate --balancer`: no /metrics scrapes taking round-robin's turns
            rc.metrics_interval = None;
            let rep = rt
                .block_on(run_load(
                    &rc,
                    &ProgressBar::hidden(),
                    std::future::pending(),
                ))
                .unwrap();
            assert_eq!(
                rep.summary.completed,
                trace.len() as u64,
                "paired run {rate}"
            );
            ttft[k].push(FLEET_METRICS[0].1(&rep.summary).unwrap());
        }
    }
    ttft
}

/// `trace` sent `copies` times, each copy starting one mean gap after the last arrival of
/// the one before, so the rate stays the trace's own.
fn repeated(trace: &[TraceRequest], copies: usize) -> Vec<TraceRequest> {
    let last = trace.last().map_or(0.0, |r| r.arrival);
    let period = last + last / trace.len().max(1) as f64;
    (0..copies)
        .flat_map(|c| {
            trace.iter().map(move |r| TraceRequest {
                arrival: r.arrival + c as f64 * period,
                ..*r
            })
        })
        .collect()
}

/// Whether every value of `a` lies beyond every value of `b`, on one side.
fn separated(a: &[f64], b: &[f64]) -> bool {
    let range = |v: &[f64]| {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            })
    };
    let ((lo_a, hi_a), (lo_b, hi_b)) = (range(a), range(b));
    hi_a < lo_b || hi_b < lo_a
}

/// The machine's 1-minute load average (other work on the two cores shows here).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_else(|| "?".into())
}

fn out_dir() -> (PathBuf, bool) {
    match std::env::var_os("KVQUEUE_FLEET_OUT") {
        // relative to the repository root (tests run in bench-native/)
        Some(d) if !d.is_empty() => (repo_root().join(d), true),
        _ => (
            crate::common::scratch_root().join(format!("kvqueue-fleet-{}", std::process::id())),
            false,
        ),
    }
}

#[test]
#[ignore = "live: needs llama-server and nginx (scripts/setup.sh server balancer)"]
fn fleet_through_nginx_round_robin_and_least_conn() {
    let _live = crate::common::live();
    let t0 = Instant::now();
    let load_before = loadavg();
    let (out, keep) = out_dir();
    let _ = std::fs::remove_dir_all(out.join("round_robin"));
    let _ = std::fs::remove_dir_all(out.join("least_outstanding"));
    let _ = std::fs::remove_dir_all(out.join("interleaved"));
    let scratch =
        crate::common::scratch_root().join(format!("kvqueue-fleet-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::create_dir_all(&out).unwrap();

    // two replicas: 2 slots each, 2048 KV tokens per slot, 1 thread, -b 2048
    let a = Server::start(2, 4096, &scratch.join("replica-a.log"));
    let b = Server::start(2, 4096, &scratch.join("replica-b.log"));
    let ports = [a.port, b.port];

    // HAProxy passes the stream through too (a quick check of the other balancer)
    {
        let h = haproxy(&scratch.join("haproxy"), &ports, true);
        assert_eq!(http_status(h.port, "/v1/models"), Some(200));
    }

    // Both balancers up at once: the validations one after the other, then the two
    // policies interleaved on the same traces.
    let lb_rr = nginx(&scratch.join("nginx-rr"), &ports, false);
    let lb_lc = nginx(&scratch.join("nginx-lc"), &ports, true);
    // round-robin first, at --load fractions of the fitted fleet's saturation ...
    let rr_dir = out.join("round_robin");
    let (rr_cmd, rr) = validate_fleet(
        [&a.url(), &b.url()],
        &lb_rr.url(),
        "round_robin",
        "--load=0.4,0.6,0.8,1.0",
        &rr_dir,
    );
    // ... then least_conn at the same rates, so both see the same traces
    let rates: Vec<String> = rr.rates.iter().map(|r| format!("{:?}", r.rate)).collect();
    let lc_dir = out.join("least_outstanding");
    let (lc_cmd, lc) = validate_fleet(
        [&a.url(), &b.url()],
        &lb_lc.url(),
        "least_outstanding",
        &format!("--rates={}", rates.join(",")),
        &lc_dir,
    );
    // the policies against each other, interleaved, at the two highest rates (where the
    // simulator predicts them to differ most)
    let paired_dir = out.join("interleaved");
    let paired: Vec<(f64, [Vec<f64>; 2])> = rr.rates[rr.rates.len() - 2..]
        .iter()
        .map(|r| {
            let m = interleaved_mean_ttft(
                [&lb_rr, &lb_lc],
                &rr_dir,
                r.rate,
                INTERLEAVED_ROUNDS,
                &paired_dir,
            );
            (r.rate, m)
        })
        .collect();
    drop((lb_rr, lb_lc));
    drop((a, b));
    let elapsed = t0.elapsed().as_secs_f64();
    let load_after = loadavg();
    // The round-robin run's fit and traces predicted behind least_outstanding: the
    // simulator's own difference between the policies, with one cost model.
    let (_, rr_as_lc) = replay_as(&rr_dir, "least_outstanding", &scratch.join("rr-as-lc"));

    // every request of every round completed, with its full output
    for rep in [&rr, &lc] {
        assert_eq!(rep.rates.len(), 4);
        for r in &rep.rates {
            assert_eq!(r.measured.completed, 36, "rate {}", r.rate);
            assert_eq!(r.measured.errors, 0, "rate {}", r.rate);
            assert_eq!(r.repeats.len(), 1);
            assert_eq!(r.repeats[0].completed, 36, "rate {}", r.rate);
            assert_eq!(r.predicted.completed, 36, "rate {}", r.rate);
        }
    }

    // the figures, per policy
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Two llama-server replicas behind nginx: fleet simulator vs measurement\n"
    );
    let _ = writeln!(
        md,
        "Per policy, median |relative error| of the fleet simulator's mean/p99 TTFT and \
         mean/p99 TPOT over the {} rates (first round), the measurement's own noise (the \
         second round against the first, same cells) and the machine's drift (the \
         microbenchmark after the measurement against the one before, same points). Test \
         time {elapsed:.0} s; the \
         machine's 1-minute load average {load_before} at the start, {load_after} at the end \
         (2 cores: above 2, other work shared them).\n",
        rr.rates.len()
    );
    let _ = writeln!(
        md,
        "| nginx policy | simulator router | median error | 15 % target | noise between rounds | machine drift | bound asserted |"
    );
    let _ = writeln!(md, "|---|---|---:|---|---:|---:|---:|");
    let mut checks = Vec::new();
    for (policy, router, rep) in [
        ("round-robin", "round_robin", &rr),
        ("least_conn", "least_outstanding", &lc),
    ] {
        let err = rep.median_error_over(&FLEET_METRICS);
        let noise = rep.noise_over(&FLEET_METRICS).expect("two rounds");
        let bound = bound(noise, rep.drift);
        let _ = writeln!(
            md,
            "| {policy} | {router} | {:.1} % | {} | {:.1} % | {:.1} % | {:.0} % (60 % + 2 × (noise + drift)) |",
            err * 100.0,
            if err <= TARGET { "met" } else { "not met" },
            noise * 100.0,
            rep.drift * 100.0,
            bound * 100.0,
        );
        checks.push((policy, err, noise, rep.drift, bound));
    }

    // the two policies against each other: mean TTFT, least_conn over round-robin
    let _ = writeln!(
        md,
        "\nMean TTFT [ms], round-robin → least_conn: predicted (both from the round-robin \
         run's fit and traces, `validate --replay round_robin --router least_outstanding`), \
         and measured in the two validations (minutes apart, each in two rounds). The change \
         is least_conn's over round-robin's (measured: mean of the rounds).\n"
    );
    let _ = writeln!(
        md,
        "| rate [req/s] | predicted | measured in the validations (round 1 / 2) | predicted change | measured change |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|");
    let (vr, vl, vp) = (values(&rr, 0), values(&lc, 0), values(&rr_as_lc, 0));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // each round's value [ms], "r₁ / r₂ / …"; two policies' as "rr₁ / rr₂ → lc₁ / lc₂"
    let ms = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{:.0}", x * 1e3))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let rounds = |r: &[f64], l: &[f64]| format!("{} → {}", ms(r), ms(l));
    let mut predicted_change = Vec::new();
    for (i, r) in rr.rates.iter().enumerate() {
        let ((pr, mr), (_, ml), (pl, _)) = (&vr[i], &vl[i], &vp[i]);
        let (dp, dm) = (pl / pr - 1.0, mean(ml) / mean(mr) - 1.0);
        let _ = writeln!(
            md,
            "| {} | {:.0} → {:.0} | {} | {:+.1} % | {:+.1} % |",
            r.rate,
            pr * 1e3,
            pl * 1e3,
            rounds(mr, ml),
            dp * 100.0,
            dm * 100.0,
        );
        predicted_change.push((r.rate, dp));
    }
    let _ = writeln!(
        md,
        "\nInterleaved (`interleaved/`): the same trace through round-robin, least_conn, \
         round-robin, least_conn, … ({INTERLEAVED_ROUNDS} rounds each, the rate's trace sent \
         {INTERLEAVED_COPIES} times over in each), one run after the other with both balancers \
         up, so the policies share the machine's speed. The predicted change is the \
         validations' (one copy of the trace). The measured \
         direction is resolved where every round of one policy lies beyond every round of \
         the other: a chance of 2 in 70 (2.9 %) if the policies did not differ.\n"
    );
    let _ = writeln!(
        md,
        "| rate [req/s] | round-robin's rounds | least_conn's rounds | predicted change | measured change | resolved |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---|");
    let mut direction = Vec::new();
    for (rate, [mr, ml]) in &paired {
        let dp = predicted_change
            .iter()
            .find(|(r, _)| r == rate)
            .map(|&(_, d)| d)
            .unwrap();
        let dm = mean(ml) / mean(mr) - 1.0;
        let resolved = separated(mr, ml);
        let _ = writeln!(
            md,
            "| {rate} | {} | {} | {:+.1} % | {:+.1} % | {} |",
            ms(mr),
            ms(ml),
            dp * 100.0,
            dm * 100.0,
            if resolved { "yes" } else { "no" }
        );
        direction.push((*rate, dp, dm, resolved));
    }
    // The sign is compared where the simulator predicts a difference (≥ 2 %) and the
    // measurement resolves one.
    let beyond: Vec<_> = direction
        .iter()
        .filter(|(_, dp, _, resolved)| dp.abs() >= 0.02 && *resolved)
        .collect();
    let agree = beyond.iter().filter(|(_, dp, dm, _)| dp * dm > 0.0).count();
    let _ = writeln!(
        md,
        "\nRates where the simulator predicts a change of 2 % or more and the interleaved \
         rounds resolve the measured one: {} of {}; the simulator predicts its sign at {agree} \
         of them.\n",
        beyond.len(),
        direction.len()
    );
    let _ = writeln!(
        md,
        "Commands (replica and balancer ports picked by the test):\n\n```text\n{rr_cmd}\n{lc_cmd}\n```\n\n\
         Per policy, `validate.md` in `round_robin/` and `least_outstanding/` has every cell and \
         round; the runs' files are there too, and the interleaved runs' in `interleaved/`."
    );
    std::fs::write(out.join("fleet.md"), &md).unwrap();
    eprintln!("{md}");

    for (policy, err, noise, drift, bound) in checks {
        assert!(
            noise <= 0.40,
            "{policy}: the measurement's own noise is {:.0} % (load average {load_after}): \
             too loaded a machine to check a prediction against",
            noise * 100.0
        );
        assert!(
            err <= bound,
            "{policy}: median |relative error| {:.1} % above the bound {:.0} % (noise {:.1} %, \
             drift {:.1} %)",
            err * 100.0,
            bound * 100.0,
            noise * 100.0,
            drift * 100.0
        );
    }
    assert!(
        agree == beyond.len(),
        "where the measurement resolves the policies' difference, the simulator predicts the other direction: {direction:?}"
    );
    if !keep {
        let _ = std::fs::remove_dir_all(&out);
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn a_trace_sent_twice_over_keeps_its_lengths_order_and_rate() {
    let once: Vec<TraceRequest> = (0..4)
        .map(|i| TraceRequest {
            arrival: 0.5 * f64::from(i + 1),
            prompt: 10 + i,
            output: 20 + i,
            class: 0,
        })
        .collect();
    let twice = repeated(&once, 2);
    assert_eq!(twice.len(), 8);
    // the second copy: the same requests, one mean gap (0.5 s) after the first copy's last
    for (a, b) in once.iter().zip(&twice[4..]) {
        assert_eq!((a.prompt, a.output), (b.prompt, b.output));
        assert!((b.arrival - (a.arrival + 2.5)).abs() < 1e-12, "{b:?}");
    }
    assert!(twice.windows(2).all(|w| w[0].arrival < w[1].arrival));
    // 8 requests over 4.5 s, as 4 over 2 s plus one gap
    assert!((twice[7].arrival - 4.5).abs() < 1e-12);
}

#[test]
fn a_direction_is_resolved_only_when_every_round_lies_beyond_the_other_policys() {
    assert!(separated(&[3.0, 4.0, 5.0, 6.0], &[1.0, 2.0, 2.5, 2.9]));
    assert!(separated(&[1.0, 2.0], &[3.0, 4.0]));
    // one round of each on the other's side, or a tie at the edge
    assert!(!separated(&[3.0, 4.0, 5.0, 1.5], &[1.0, 2.0, 2.5, 2.9]));
    assert!(!separated(&[3.0, 4.0], &[1.0, 3.0]));
}
