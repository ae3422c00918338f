//! `bench-native simulate`: one configuration through the engine's simulator, printed as a
//! table (or JSON), optionally with the per-request CSV.

use crate::args::limits::{Limits, Scope};
use crate::args::{self, DisaggArgs, FleetArgs, ModelArgs, Point, SINGLE};
use crate::table::{aligned, summary_table, write_records};
use anyhow::Context;
use clap::Args;
use engine::config::{Admission, SimConfig};
use engine::metrics::Summary;
use engine::workload::Request;
use std::path::PathBuf;

pub mod disagg;

/// Arguments of `simulate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    bench-native simulate --rate 2 --batch 8 --kv 8192\n  \
    bench-native simulate --preset vllm --rate 6 --batch 128 --kv 565904\n  \
    bench-native simulate --preset vllm --rate 20 --batch 256 --cost roofline:H100:Llama-3.1-8B:0.9:1\n  \
    bench-native simulate --preset llama-cpp --batch 4 --kv 8192 --budget 512 --cost fit.json --rate 1   # llama-server -np 4 -c 8192 -b 512\n  \
    bench-native simulate --preset vllm-v1 --batch 8 --kv 768 --block-size 128 --budget 512 --lengths fixed --prompt 128 --output 128 --rate 8\n  \
    bench-native simulate --rate 4 --policy chunked --kv-mode paged --block-size 16 --budget 512 --lengths sharegpt --drain --records run.csv\n  \
    bench-native simulate --preset vllm --rate 6 --batch 64 --kv 65536 --system-prompt 8:0.6:1024 --prefix-cache apc   # shared system prompts, vLLM's prefix caching\n  \
    bench-native simulate --preset vllm --rate 2 --batch 64 --kv 65536 --conversations 4:10:30 --prefix-cache apc   # multi-turn chats\n  \
    bench-native simulate --preset vllm --batch 64 --kv 65536 --users 32 --think 5 --conversations 4:10:30 --prefix-cache apc   # closed-loop users\n  \
    bench-native simulate --preset llama-cpp --batch 4 --kv 8192 --budget 512 --system-prompt 2:0.8:256 --prefix-cache slot   # llama-server's slot cache (cache_prompt)\n  \
    bench-native simulate --rate 3 --max-in-system 12            # threshold admission: reject while 12 are in the system\n  \
    bench-native simulate --rate 3 --dp-slo 2                    # the DP threshold for a 2 s p99 TTFT\n  \
    bench-native simulate --trace results/validate_llama/sim/trace-1.6.json --preset llama-cpp --batch 4 --kv 8192 --budget 512\n  \
    bench-native simulate --rate 8 --batch 16 --kv 16384 --horizon 20000000 --max-requests 200000000   # past the default limit\n  \
    bench-native simulate --rate 20000 --horizon 1 --drain --kv-mode paged --max-drain-horizons 5000   # a drain longer than the default cap\n  \
    bench-native simulate --like vllm-result.json --preset vllm-v1 --batch 8 --kv 24576 --block-size 128 --budget 2048 --cost fit.json\n  \
    bench-native simulate --like runs/r2 --preset llama-cpp --batch 4 --kv 8192 --budget 512 --cost fit.json --format csv\n\n\
Fleets (--rate is the whole fleet's; routers: round_robin|rr, random, least_outstanding|lor|least_conn|leastconn,\n\
least_tokens|jsq, power_of_D|p2c, kv_aware|kv, prefix_affinity|prefix):\n  \
    bench-native simulate --rate 16 --batch 8 --kv 8192 --replicas 4 --router least_outstanding\n  \
    bench-native simulate --preset vllm-v1 --batch 8 --kv 768 --rate 20 --replicas 8 --router kv_aware\n  \
    bench-native simulate --rate 1000 --batch 32 --kv 65536 --horizon 3600 --replicas 64 --router p2c   # 3.6 M requests\n  \
    bench-native simulate --rate 10 --fleet fleet.json --json   # mixed replicas (docs/model.md, \"Fleet files\")\n\n\
Disaggregated prefill and decode (P prefill : D decode replicas, --router within each pool; drained):\n  \
    bench-native simulate --preset vllm --cost roofline:A10G:Qwen2.5-1.5B --batch 32 --rate 12 --disagg 1:2 --router lor\n  \
    bench-native simulate --preset vllm --cost roofline:H100:Llama-3.1-8B --batch 128 --rate 40 --disagg 2:3 --link-gbps 200 --link-latency-ms 0.05 --first-token prefill\n  \
    bench-native simulate --preset vllm --rate 4 --batch 64 --kv 65536 --disagg 1:1 --kv-geometry Qwen2.5-1.5B --decode-batch 128 --link-gbps inf --json")]
pub struct SimulateArgs {
    /// Arrival rate [req/s] (default 1; not with --trace).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Batch width B (max_num_seqs).
    #[arg(long, default_value_t = 8)]
    pub batch: u32,
    /// KV capacity [tokens] (default 8192, or the GPU's with a roofline cost).
    #[arg(long)]
    pub kv: Option<u64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub fleet: FleetArgs,
    /// Closed-loop users instead of open-loop arrivals: U users, each sending its next
    /// request --think seconds after the answer to its last one ends (as `vllm bench serve
    /// --max-concurrency` and GuideLLM's concurrent mode do), until the horizon. The
    /// lengths and --conversations are kept; a user's conversation goes turn after turn.
    #[arg(long, value_name = "U", conflicts_with_all = ["rate", "trace", "like", "disagg"])]
    pub users: Option<u32>,
    /// The users' mean think time [s] (exponential; 0 sends at once).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 0.0,
        requires = "users"
    )]
    pub think: f64,
    #[command(flatten)]
    pub disagg: DisaggArgs,
    /// Threshold (DP) admission: the reference chain's threshold n* for this p99 TTFT
    /// target [s] (admit while fewer than n* are in the system, so every admitted request's
    /// predicted p99 TTFT meets it); n* is printed. Reference-mode configurations.
    #[arg(long, value_name = "SECONDS", conflicts_with = "max_in_system")]
    pub dp_slo: Option<f64>,
    /// Write every request's record to this CSV.
    #[arg(long)]
    pub records: Option<PathBuf>,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Simulate the benchmark of this result, exactly as it was run, and compare: a
    /// `vllm bench serve --save-result` JSON (with `--save-detailed`, its per-request
    /// lengths) or a `bench-native run` folder. The file fixes the requests, their lengths
    /// and order, the rate, burstiness and max_concurrency; the other flags describe the
    /// server. Prints each metric predicted (mean and range over the arrival seeds) beside
    /// the measured value and the error, and a note for everything the file lacks.
    #[arg(long, value_name = "RESULT")]
    pub like: Option<PathBuf>,
    /// With --like: how many seeds of the arrival process to run (default 5; one at an
    /// infinite rate or with a run's own send times, where nothing is random).
    #[arg(long, value_name = "N", requires = "like")]
    pub like_seeds: Option<u32>,
    /// With --like: table, csv or json.
    #[arg(long, value_enum, requires = "like", conflicts_with = "json")]
    pub format: Option<args::like::LikeFormat>,
}

impl SimulateArgs {
    /// The validated configuration (with the DP threshold applied for `--dp-slo`).
    ///
    /// # Errors
    /// As [`ModelArgs::config`]; `--rate` with `--trace`; a `--dp-slo` no threshold meets;
    /// more work than `--max-requests`.
    pub fn config(&self) -> anyhow::Result<SimConfig> {
        if self.rate.is_some() && self.model.trace.is_some() {
            return Err(args::ArgError::Conflict(
                "--rate does not apply to --trace: the trace's timestamps fix the arrival times"
                    .into(),
            )
            .into());
        }
        let mut model = self.model.clone();
        model.roofline_kv = self.kv.is_none();
        let point = Point {
            rate: self.rate.unwrap_or(1.0),
            batch: self.batch,
            kv: self.kv.unwrap_or(8192),
            seed: self.seed,
        };
        let mut cfg = model.config(point, SINGLE, Scope::Run)?;
        if let Some(slo) = self.dp_slo {
            if !(slo.is_finite() && slo > 0.0) {
                return Err(args::ArgError::range(
                    "--dp-slo",
                    "a finite number > 0 [s]",
                    args::num(slo),
                )
                .into());
            }
            let t = engine::analytic::dp_threshold(&cfg, slo)
                .with_context(|| format!("--dp-slo {slo}"))?;
            cfg.server.admission = Admission::MaxInSystem {
                max_in_system: t.max_in_system,
            };
        }
        cfg.keep_records = self.records.is_some();
        Ok(cfg)
    }
}

/// Runs above this many expected requests show a progress bar (by simulated arrivals).
const PROGRESS_ABOVE: f64 = 2e6;

/// The requests of `cfg`, ticking `bar` every 2^16 arrivals; the size hint is the
/// expected count, as `engine::sim::simulate` gives it.
struct Ticking<I> {
    inner: I,
    n: u64,
    expected: usize,
    bar: indicatif::ProgressBar,
}

impl<I: Iterator<Item = Request>> Iterator for Ticking<I> {
    type Item = Request;
    fn next(&mut self) -> Option<Request> {
        self.n += 1;
        if self.n.is_multiple_of(65_536) {
            self.bar.set_position(self.n);
        }
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.expected, None)
    }
}

/// Simulates `cfg` (checked against `work`), with a progress bar on a long run.
fn run(cfg: &SimConfig, work: &Limits) -> anyhow::Result<engine::sim::SimReport> {
    let expected = cfg.expected_requests();
    if expected <= PROGRESS_ABOVE {
        return Ok(engine::sim::simulate_with(cfg, work)?);
    }
    cfg.validate_with(work)?;
    let bar = indicatif::ProgressBar::new(expected as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} simulate [{bar:30}] {pos}/~{len} requests {elapsed_precise} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let requests = Ticking {
        inner: cfg.workload.stream(cfg.seed, cfg.horizon_s)?,
        n: 0,
        expected: expected as usize,
        bar: bar.clone(),
    };
    let rep = engine::sim::simulate_requests_with(cfg, requests, work);
    bar.finish_and_clear();
    Ok(rep)
}

/// `simulate --like`: the checked configuration, then the prediction and its report.
fn execute_like(a: &SimulateArgs, path: &std::path::Path) -> anyhow::Result<()> {
    let lc = args::like::config(
        path,
        args::like::Fixed {
            rate: a.rate,
            dp_slo: a.dp_slo,
            records: a.records.is_some(),
            model: &a.model,
        },
        a.batch,
        a.kv,
        a.like_seeds,
        if a.json {
            Some(args::like::LikeFormat::Json)
        } else {
            a.format
        },
    )?;
    let t = std::time::Instant::now();
    let p = crate::like::predict(&lc.bench, &lc.base, &lc.seeds)?;
    let took = t.elapsed();
    let rows = crate::like::report::rows(&lc.bench, &p);
    match lc.format {
        args::like::LikeFormat::Table => {
            print!(
                "{}",
                crate::like::report::table(&lc.bench, &lc.seeds, &rows)
            );
        }
        args::like::LikeFormat::Csv => {
            print!("{}", crate::like::report::csv(&rows));
            for n in &lc.bench.notes {
                eprintln!("note: {n}");
            }
        }
        args::like::LikeFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&crate::like::report::json(&lc.bench, &lc.seeds, &rows))?
        ),
    }
    eprintln!(
        "simulated {} requests × {} seeds in {:.1} ms",
        lc.bench.run.requests,
        lc.seeds.len(),
        took.as_secs_f64() * 1e3
    );
    Ok(())
}

pub fn execute(a: SimulateArgs) -> anyhow::Result<()> {
    if let Some(path) = a.like.clone() {
        return execute_like(&a, &path);
    }
    if a.fleet.is_fleet() || a.users.is_some() {
        return execute_fleet(a);
    }
    if a.disagg.disagg.is_some() {
        return disagg::execute(a);
    }
    let cfg = a.config()?;
    if let Admission::MaxInSystem { max_in_system } = cfg.server.admission {
        if a.dp_slo.is_some() {
            eprintln!("threshold admission (--dp-slo): admit while fewer than {max_in_system} are in the system");
        }
    }
    let t = std::time::Instant::now();
    let rep = run(&cfg, &a.model.work_limits(Scope::Run))?;
    let took = t.elapsed();
    if let Some(path) = &a.records {
        write_records(path, &rep.records)?;
    }
    if a.json {
        match &rep.stats.prefix {
            // The summary as it is, with the prefix cache's metrics after it.
            Some(p) => {
                #[derive(serde::Serialize)]
                struct WithPrefix<'a> {
                    #[serde(flatten)]
                    summary: &'a Summary,
                    prefix_cache: &'a engine::metrics::PrefixSummary,
                }
                let j = WithPrefix {
                    summary: &rep.summary,
                    prefix_cache: p,
                };
                println!("{}", serde_json::to_string_pretty(&j)?);
            }
            None => println!("{}", serde_json::to_string_pretty(&rep.summary)?),
        }
    } else {
        print!("{}", summary_table(&rep.summary));
        if let Some(p) = &rep.stats.prefix {
            print!("{}", prefix_table(p));
        }
        eprintln!(
            "simulated {} requests, {} iterations in {} loop steps, {:.1} ms",
            rep.stats.arrivals,
            rep.stats.iterations,
            rep.stats.steps,
            took.as_secs_f64() * 1e3
        );
    }
    for w in warnings(&cfg, &rep.summary)? {
        eprintln!("{w}");
    }
    Ok(())
}

/// The validated fleet of `--replicas`/`--fleet` (None without them).
///
/// # Errors
/// As [`SimulateArgs::config`] and [`FleetArgs::resolve`]; `--dp-slo` with a fleet.
pub fn fleet_config(a: &SimulateArgs) -> anyhow::Result<Option<engine::fleet::FleetConfig>> {
    let fleet = match (a.fleet.resolve(&a.model)?, a.users) {
        (Some(f), _) => f,
        // Users in front of one server.
        (None, Some(_)) => FleetArgs {
            replicas: Some(1),
            ..a.fleet.clone()
        }
        .resolve(&a.model)?
        .expect("one replica"),
        (None, None) => return Ok(None),
    };
    if a.dp_slo.is_some() {
        return Err(args::ArgError::Conflict(
            "--dp-slo is a one-server threshold: it does not apply to --replicas or --fleet \
             (give each replica --max-in-system instead)"
                .into(),
        )
        .into());
    }
    let base = a.config()?;
    let point = Point {
        rate: a.rate.unwrap_or(1.0),
        batch: a.batch,
        kv: a.kv.unwrap_or(base.server.kv_tokens),
        seed: a.seed,
    };
    let mut cfg = fleet.config(&base, point, SINGLE, Scope::Run)?;
    if let Some(users) = a.users {
        cfg.client = engine::fleet::Client::Users {
            users,
            think_s: a.think,
        };
        cfg.validate_with(&a.model.work_limits(Scope::Run))
            .map_err(|e| anyhow::anyhow!("--users {users} --think {}: {e}", a.think))?;
    }
    Ok(Some(cfg))
}

fn execute_fleet(a: SimulateArgs) -> anyhow::Result<()> {
    let cfg = fleet_config(&a)?.expect("a fleet was asked for");
    let expected = cfg.base.expected_requests();
    let requests = cfg
        .base
        .workload
        .stream(cfg.base.seed, cfg.base.horizon_s)?;
    let bar = indicatif::ProgressBar::new(expected as u64);
    // Users send at their own pace: the stream's count is no guide to their progress.
    if expected > PROGRESS_ABOVE && a.users.is_none() {
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} simulate fleet [{bar:30}] {pos}/~{len} requests {elapsed_precise} eta {eta}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let requests = Ticking {
        inner: requests,
        n: 0,
        expected: expected as usize,
        bar: bar.clone(),
    };
    let t = std::time::Instant::now();
    let rep = crate::fleet::run(&cfg, requests);
    let took = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    if let Some(path) = &a.records {
        write_records(path, &rep.records)?;
    }
    if a.json {
        let j = crate::fleet::FleetJson::new(&cfg, &rep);
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", summary_table(&rep.summary));
        if let Some(p) = &rep.prefix {
            print!("{}", prefix_table(p));
        }
        print!("{}", crate::fleet::replica_table(&cfg, &rep));
    }
    let arrivals: u64 = rep.replicas.iter().map(|r| r.stats.arrivals).sum();
    if let engine::fleet::Client::Users { users, think_s } = cfg.client {
        eprintln!(
            "closed loop: {users} users, think {think_s} s: {:.3} req/s sent over the {} s horizon",
            arrivals as f64 / cfg.base.horizon_s,
            cfg.base.horizon_s
        );
    }
    eprintln!(
        "simulated {arrivals} requests on {} replicas ({}) in {:.1} ms ({:.2} M requests/s)",
        rep.replicas.len(),
        cfg.router.name(),
        took * 1e3,
        arrivals as f64 / took.max(1e-9) / 1e6
    );
    for w in warnings(&cfg.base, &rep.summary)? {
        eprintln!("{w}");
    }
    if rep.unstable {
        eprintln!("warning: a replica's drained run stopped at its cap: the fleet is overloaded");
    }
    Ok(())
}

/// What a user should know about a run that the table does not say: requests cut to the
/// maximum length (a slot's context with `--preset llama-cpp`), and a KV cache too small
/// for most requests.
pub fn warnings(cfg: &SimConfig, s: &Summary) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(cap) = cfg.workload.max_model_len {
        let mut uncapped = cfg.workload.clone();
        uncapped.max_model_len = None;
        let reqs = uncapped.generate(cfg.seed, cfg.horizon_s)?;
        let cut = reqs
            .iter()
            .filter(|r| r.total_tokens() > cap as u64)
            .count();
        if cut > 0 {
            out.push(format!(
                "note: {cut} of {} requests ({:.1} %) were cut to the {cap}-token maximum length \
                 (prompt + output; with --preset llama-cpp a slot's share of the KV, K/B): \
                 the latencies are for the shorter requests",
                reqs.len(),
                100.0 * cut as f64 / reqs.len().max(1) as f64
            ));
        }
    }
    if cfg.server.overhead_s > 0.0 && cfg.server.overhead_per_token_s == 0.0 {
        out.push(format!(
            "note: TTFT and E2E include a per-request front-end overhead of {:.2} ms \
             (--overhead-ms, or the cost file's overhead_s)",
            cfg.server.overhead_s * 1e3
        ));
    }
    if cfg.server.overhead_per_token_s > 0.0 {
        out.push(format!(
            "note: TTFT and E2E include a front-end overhead of {:.2} ms per request + {:.2} µs \
             per prompt token (--overhead-ms, --overhead-per-token-us, or the cost file's)",
            cfg.server.overhead_s * 1e3,
            cfg.server.overhead_per_token_s * 1e6
        ));
    }
    if cfg.server.step_overhead_s > 0.0 {
        out.push(format!(
            "note: every iteration includes a scheduling overhead of {:.3} ms \
             (--step-overhead-ms, or the cost file's step_overhead_s)",
            cfg.server.step_overhead_s * 1e3
        ));
    }
    if s.arrivals > 0 && s.blocking_probability >= 0.5 {
        out.push(format!(
            "warning: {:.1} % of requests were rejected: K = {} tokens holds few of them \
             (each needs its prompt + output in KV); raise --kv",
            100.0 * s.blocking_probability,
            cfg.server.kv_tokens
        ));
    }
    Ok(out)
}

/// The prefix cache's metrics (docs/model.md, Prefix caching) as text: hit rates, saved
/// prefill, and TTFT of hits against misses.
pub fn prefix_table(p: &engine::metrics::PrefixSummary) -> String {
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v * 1e3));
    let rate = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.4}", v));
    let mut rows: Vec<Vec<String>> = vec![["[ms]", "n", "mean", "p50", "p95", "p99"]
        .map(String::from)
        .to_vec()];
    for (name, d) in [("TTFT hit", &p.ttft_hit), ("TTFT miss", &p.ttft_miss)] {
        rows.push(vec![
            name.to_string(),
            d.n.to_string(),
            ms(d.mean),
            ms(d.p50),
            ms(d.p95),
            ms(d.p99),
        ]);
    }
    format!(
        "prefix cache: hit rate {} of blocks ({} of {}), {} of prompt tokens; prefill tokens \
         saved {}; {} of {} admissions hit; evictions {}; peak cached {} blocks\n{}",
        rate(p.block_hit_rate),
        p.hit_blocks,
        p.query_blocks,
        rate(p.token_hit_rate),
        p.saved_tokens,
        p.hit_lookups,
        p.lookups,
        p.evictions,
        p.peak_cached_blocks,
        aligned(&rows)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warns_about_cut_requests_and_a_too_small_kv_cache() {
        let mut cfg = SimConfig::reference(2.0, 4, 100);
        cfg.horizon_s = 50.0;
        cfg.workload.max_model_len = Some(300);
        let rep = engine::sim::simulate(&cfg).unwrap();
        let w = warnings(&cfg, &rep.summary).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("were cut to the 300-token maximum length"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("raise --kv"), "{}", w[1]);
        // A roomy cache and no cap: nothing to say.
        let ok = SimConfig::reference(1.0, 8, 8192);
        let rep = engine::sim::simulate(&ok).unwrap();
        assert!(warnings(&ok, &rep.summary).unwrap().is_empty());
    }
}
