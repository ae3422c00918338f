//! `bench-native server-sweep`: rates × server configurations against real servers. Each
//! configuration is a launch command template (`{port}`, `{slots}`, `{budget}`
//! placeholders) that is started on a free loopback port, health-checked, measured at
//! every rate with `run`, and stopped (its whole process group) before the next one.
//! One summary row per (configuration, rate), in the simulator's sweep columns.

use crate::run::{run_load, RunArgs, RunConfig};
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXAMPLES: &str = "Examples:
  # llama-server: 1 slot (FCFS) vs 8 slots, eager (-b 2048) vs chunked (-b 64), at 1 and 4 req/s
  bench-native server-sweep \\
    --server-cmd 'llama-server -m model.gguf --host 127.0.0.1 --port {port} -np {slots} -b {budget} -ub {budget} -c 16384 -t 1 --metrics' \\
    --slots 1,8 --budget 2048,64 --rates 1,4 --duration 30 --out results/server-sweep

  # vLLM: max_num_seqs × max_num_batched_tokens
  bench-native server-sweep \\
    --server-cmd 'python -m vllm.entrypoints.openai.api_server --model M --port {port} --max-num-seqs {slots} --max-num-batched-tokens {budget}' \\
    --slots 64,128 --budget 2048 --rates 0.5,1,2,4 --health-timeout 300";

/// Arguments of `server-sweep`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct ServerSweepArgs {
    /// Launch command template, run with `sh -c`; `{port}`, `{slots}` and `{budget}` are
    /// substituted. The server must listen on 127.0.0.1:{port} and answer GET /health.
    #[arg(long)]
    pub server_cmd: String,
    /// Values of `{slots}` (max concurrent sequences), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4")]
    pub slots: Vec<u32>,
    /// Values of `{budget}` (tokens per iteration), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "512")]
    pub budget: Vec<u32>,
    /// Arrival rates [req/s], comma-separated (replaces `--rate`).
    #[arg(long, value_delimiter = ',', required = true)]
    pub rates: Vec<f64>,
    /// Seconds to wait for /health to answer 200 after launch.
    #[arg(long, default_value_t = 120.0)]
    pub health_timeout: f64,
    /// Everything `run` takes (workload, duration, timeouts, output directory …); `--url`
    /// and `--rate` are set per configuration and rate.
    #[command(flatten)]
    pub run: RunArgs,
}

/// A launched server: its process group is terminated on drop.
#[derive(Debug)]
pub struct LaunchedServer {
    child: Child,
    pub port: u16,
}

impl LaunchedServer {
    /// Starts `cmd` with `sh -c` in its own process group, logging to `log`, and waits until
    /// GET /health on 127.0.0.1:`port` answers 200.
    ///
    /// # Errors
    /// The server exits or stays unhealthy past `timeout` (the log's tail is in the error).
    pub fn start(
        cmd: &str,
        port: u16,
        log: &Path,
        timeout: Duration,
    ) -> anyhow::Result<LaunchedServer> {
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("launching `{cmd}`"))?;
        let mut s = LaunchedServer { child, port };
        let t0 = Instant::now();
        loop {
            if healthy(port) {
                return Ok(s);
            }
            if let Some(status) = s.child.try_wait()? {
                bail!(
                    "server exited ({status}) before becoming healthy:\n{}",
                    tail(log)
                );
            }
            if t0.elapsed() > timeout {
                bail!(
                    "server not healthy on port {port} after {:.0} s:\n{}",
                    timeout.as_secs_f64(),
                    tail(log)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The launched shell's PID (= its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for LaunchedServer {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        // The group may be gone already (a command that failed at once): not an error, so
        // `kill`'s "No such process" is not shown.
        let kill = |sig: &str| {
            let _ = Command::new("kill")
                .args([sig, "--", &group])
                .stderr(Stdio::null())
                .status();
        };
        kill("-TERM");
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        kill("-KILL");
        let _ = self.child.wait();
        // The shell may be reaped before the server it started has finished dying (a
        // signal is delivered asynchronously): wait until the port refuses connections,
        // so a stopped server is really gone (at most 3 s).
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3)
            && TcpStream::connect(("127.0.0.1", self.port)).is_ok()
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 32];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).contains(" 200")
}

/// The log's last 20 lines, or a note that it is empty.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        return format!("(the server wrote nothing to {})", log.display());
    }
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A free loopback port.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Substitutes the placeholders.
pub fn render(template: &str, port: u16, slots: u32, budget: u32) -> String {
    template
        .replace("{port}", &port.to_string())
        .replace("{slots}", &slots.to_string())
        .replace("{budget}", &budget.to_string())
}

/// One measured (configuration, rate).
#[derive(Debug)]
pub struct Measured {
    pub slots: u32,
    pub budget: u32,
    /// Loopback port the configuration's server listened on.
    pub port: u16,
    pub rate: f64,
    pub dir: PathBuf,
    pub summary: engine::metrics::Summary,
    pub kv_tokens: u64,
}

/// Runs the sweep; returns every measured point and writes `server_sweep_summary.csv`.
///
/// # Errors
/// A bad template or run option, or a server that does not come up.
pub fn server_sweep(a: &ServerSweepArgs) -> anyhow::Result<Vec<Measured>> {
    if !a.server_cmd.contains("{port}") {
        bail!("--server-cmd must contain {{port}} so each configuration gets a free loopback port");
    }
    if a.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        bail!("--rates must all be finite and > 0");
    }
    let base: RunConfig = (&a.run).try_into()?;
    std::fs::create_dir_all(&a.run.out)
        .with_context(|| format!("creating {}", a.run.out.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut out = Vec::new();
    let total = a.slots.len() * a.budget.len();
    for (i, (&slots, &budget)) in a
        .slots
        .iter()
        .flat_map(|s| a.budget.iter().map(move |b| (s, b)))
        .enumerate()
    {
        let port = free_port()?;
        let dir = a.run.out.join(format!("slots-{slots}_budget-{budget}"));
        std::fs::create_dir_all(&dir)?;
        let cmd = render(&a.server_cmd, port, slots, budget);
        eprintln!(
            "[{}/{total}] slots {slots}, budget {budget}: starting `{cmd}`",
            i + 1
        );
        let server = LaunchedServer::start(
            &cmd,
            port,
            &dir.join("server.log"),
            Duration::from_secs_f64(a.health_timeout),
        )?;
        for &rate in &a.rates {
            let mut rc = base.clone();
            rc.endpoint.url = format!("http://127.0.0.1:{port}");
            rc.workload = rc.workload.with_rate(rate);
            rc.out_dir = dir.join(format!("rate-{rate}"));
            let pb = crate::run::progress_bar(a.run.quiet);
            let rep = rt.block_on(run_load(&rc, &pb, std::future::pending()))?;
            pb.finish_and_clear();
            eprintln!(
                "    {rate} req/s: {} completed, {} errors, mean TTFT {:.1} ms",
                rep.summary.completed,
                rep.summary.errors,
                rep.summary.ttft.mean.unwrap_or(f64::NAN) * 1e3
            );
            out.push(Measured {
                slots,
                budget,
                port,
                rate,
                dir: rc.out_dir.clone(),
                summary: rep.summary,
                kv_tokens: rep.metadata["kv"]["tokens"].as_u64().unwrap_or(0),
            });
        }
        drop(server);
    }
    let mut csv = engine::sweep::summary_header();
    csv.push('\n');
    for m in &out {
        let labels = engine::sweep::RowLabels {
            policy: "measured",
            kv_mode: "server",
            block_size: 0,
            token_budget: m.budget,
            horizon_s: m.summary.window_s,
        };
        let agg = engine::sweep::PointAggregate::of(std::slice::from_ref(&m.summary));
        csv.push_str(&engine::sweep::summary_row_of(
            m.rate,
            m.slots,
            m.kv_tokens,
            &agg,
            &labels,
        ));
        csv.push('\n');
    }
    let path = a.run.out.join("server_sweep_summary.csv");
    std::fs::write(&path, csv).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(out)
}

pub fn execute(a: ServerSweepArgs) -> anyhow::Result<()> {
    server_sweep(&a).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        assert_eq!(
            render("x --port {port} -np {slots} -b {budget}", 9, 4, 64),
            "x --port 9 -np 4 -b 64"
        );
    }
}
