//! `bench-native validate`: does the simulator predict a real server?
//!
//! Against one running server URL, back to back (so both see the same machine load):
//!
//! 1. `microbench` it (prefill vs prompt length, decode step vs 1..=slots streams at a
//!    short and a long context; on llama-server the decodes are pinned to consecutive
//!    slots, plus two split slot layouts, and the mixed probe);
//! 2. `fit` a cost model (the micro-batch model `engine::cost::UbatchCost` by default,
//!    `--cost linear` or `table` for the others), pooling a second microbenchmark taken
//!    right after the measurement;
//! 3. build one request trace per rate — ShareGPT lengths scaled by `--scale` and capped
//!    at `--max-len` (and the server's per-slot context), Poisson arrivals — and simulate
//!    it with the server's configuration read from its metadata;
//! 4. replay the *same* trace against the server (`run`, open loop);
//! 5. write `validate.md` + `validate.csv`: predicted vs measured mean/p50/p99 TTFT, mean
//!    TPOT, mean E2E and throughput per rate, relative errors, and their median.
//!
//! **How the server maps onto the engine**: the named server models of
//! `engine::config::ServerConfig`. A `llama-server` (`-np S -c C -b B`, no KV blocks in
//! its metadata) is `ServerConfig::llama_cpp(S, C, B)`: the `llama_cpp` policy (decodes
//! first, then prompt chunks in slot order under the `-b` budget), B = slots, token-granular KV in which waiting requests hold
//! nothing, and the per-slot context `C / S` as the workload's `max_model_len` cap, so
//! slots never block or preempt. A vLLM (KV blocks × block size from
//! `vllm:cache_config_info`) is `ServerConfig::vllm_v1(max_num_seqs, blocks, block size,
//! max_num_batched_tokens)`: chunked prefill, paged KV, recompute preemption, no
//! watermark. Neither server publishes its budget (`-b`, `max_num_batched_tokens`): pass
//! `--budget`; vLLM does not publish `max_num_seqs` either: pass `--slots`. The
//! `llama_cpp` policy tracks slots because they shape the cost: with per-slot KV a
//! batch's decodes run as one forward pass per run of consecutive slot ids, so the
//! policy reports those runs and the micro-batch cost sums them. Slot choice by prompt
//! similarity is modelled only as bench-native's prompts trigger it (prompts under 10
//! tokens share their BOS with a used slot and take the lowest-index one). The HTTP /
//! tokenization / task-queue hop between a request's send and the scheduler is the fit's
//! per-request overhead (`ServerConfig::overhead_s`, measured from the lone prompts).
//! Not modelled: a prompt sharing more than its BOS; vLLM's prefix caching.
//!
//! `--replay DIR` skips steps 1 and 4: it re-fits DIR's two microbenchmarks and
//! re-simulates DIR's traces against DIR's measurements with this build's models, for the
//! server and workload DIR was recorded with (`run_args.json`, written by every run).
//!
//! The pieces: [`errors`] (the compared metrics, relative errors, medians, pooling),
//! `server` (what the simulator is told about the server), `predict` (the traces and the
//! simulations), `report` (`validate.md`, `validate.csv`), `replay` and `running` (the
//! live pipeline).
//!
//! Arrival rates default to fractions of the saturation throughput that the fitted model
//! itself predicts (`--load`), so "light to past saturation" holds on a slow or loaded
//! machine; `--rates` gives them in req/s instead.

pub mod colocation;
mod errors;
mod predict;
mod replay;
mod report;
mod running;
mod server;

pub use errors::{pool, Getter, RateResult, ValidateReport, FLEET_METRICS, METRICS};
pub use replay::{RecordedArgs, RECORDED_ARGS};
pub use report::csv_header;

use crate::fit;
use crate::run::ServerArgs;
use anyhow::{bail, Context};
use engine::cost::CostModel;
use engine::fleet::RouterKind;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  # a llama-server with 4 slots, 8192 KV tokens, -b 512 (1 thread) on :8080
  llama-server -m tiny.gguf --port 8080 -np 4 -c 8192 -b 512 -ub 512 -t 1 --metrics
  bench-native validate --url http://127.0.0.1:8080 --budget 512 --out results/validate_llama

  # fixed rates, more requests per rate, the linear cost model
  bench-native validate --rates 1,2,4,8 --requests 80 --cost linear --out /tmp/val

  # every rate measured twice: the report states the measurement's own noise
  bench-native validate --url http://127.0.0.1:8080 --budget 512 --rounds 2 --out /tmp/val2

  # two replicas behind nginx `least_conn` on :8000; fit on one replica, predict the fleet
  # (the other replica, on the same machine, kept busy for a second microbenchmark)
  bench-native validate --url http://127.0.0.1:8080 --balancer http://127.0.0.1:8000 \
    --replicas 2 --router least_outstanding --mb-beside http://127.0.0.1:8081 \
    --budget 512 --rounds 2 --out /tmp/fleet

  # the same measurements, predicted again by this build's models (no server)
  bench-native validate --replay results/validate_llama --out /tmp/replay

Files written to --out: validate.md (table, command at the top), validate.csv (one row per
rate: predicted, measured and relative error of each metric), run_args.json (the server and
workload flags, what --replay reads), microbench.json/.csv (with --mb-beside, also
microbench_beside.json),
fit.json (+ .table.json, .linear.json), sim/trace-<rate>.json (the replayed trace),
sim/requests-<rate>.csv (every simulated request, ids as in the real run's) and
rate-<rate>/ (the real run: requests.csv, summary.csv, metadata.json, metrics.csv);
with --rounds, repeat-<k>/rate-<rate>/ for the later rounds.";

/// Which fitted cost model drives the prediction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CostKind {
    Table,
    Linear,
    /// Measured micro-batch table plus linear context / attention / mixed terms
    /// (`engine::cost::UbatchCost`).
    Ubatch,
}

impl CostKind {
    /// The model reported beside this one.
    pub fn alt(self) -> CostKind {
        match self {
            CostKind::Ubatch => CostKind::Linear,
            CostKind::Linear | CostKind::Table => CostKind::Ubatch,
        }
    }

    fn of(self, f: &fit::Fit) -> CostModel {
        match self {
            CostKind::Table => f.table.clone(),
            CostKind::Linear => f.linear.clone(),
            CostKind::Ubatch => f.ubatch.clone(),
        }
    }
}

/// Arguments of `validate`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Arrival rates [req/s]; default: `--load` × the model's predicted saturation.
    #[arg(long, value_delimiter = ',')]
    pub rates: Option<Vec<f64>>,
    /// Load levels as fractions of the predicted saturation throughput (without --rates).
    #[arg(long, value_delimiter = ',', default_value = "0.25,0.5,0.8,1.2")]
    pub load: Vec<f64>,
    /// Requests per rate.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// ShareGPT prompt and output lengths are multiplied by this.
    #[arg(long, default_value_t = 0.25)]
    pub scale: f64,
    /// Cap prompt + output at this many tokens (also at the server's per-slot context).
    #[arg(long, default_value_t = 512)]
    pub max_len: u32,
    /// The server's per-iteration token budget (llama.cpp `-b`, vLLM
    /// `max_num_batched_tokens`); servers do not report it.
    #[arg(long, default_value_t = 512)]
    pub budget: u32,
    /// Slots / max_num_seqs (default: from the server's metadata).
    #[arg(long)]
    pub slots: Option<u32>,
    /// KV capacity [tokens] (default: from the server's metadata).
    #[arg(long)]
    pub kv_tokens: Option<u64>,
    /// Cost model used for the prediction (the median error of `ubatch`, or of `linear`
    /// if `ubatch` is chosen, is reported too). `ubatch` by default: on llama-server a
    /// forward pass is not linear in its tokens, and per-slot KV splits decodes in
    /// non-consecutive slots into separate passes (`engine::cost::UbatchCost`).
    #[arg(long, value_enum, default_value_t = CostKind::Ubatch)]
    pub cost: CostKind,
    /// Microbenchmark prompt lengths (those above the cap are dropped). The short ones
    /// price the many tiny prompts of the scaled ShareGPT workload directly.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,4,16,64,128,256,448,512"
    )]
    pub mb_prompts: Vec<u32>,
    /// Microbenchmark repeats per prompt length.
    #[arg(long, default_value_t = 3)]
    pub mb_repeats: usize,
    /// Rounds of the microbenchmark's decode curves (interleaved, gaps pooled).
    #[arg(long, default_value_t = 2)]
    pub mb_decode_rounds: usize,
    /// Prompt of the microbenchmark's long-context decode curve [tokens] (capped at half
    /// the length cap; 0: no such curve, `βkv` stays 0).
    #[arg(long, default_value_t = 256)]
    pub mb_long_prompt: u32,
    /// Output tokens per microbenchmark decode stream.
    #[arg(long, default_value_t = 96)]
    pub mb_decode_tokens: u32,
    /// Pauses of the microbenchmark's idle probe [s] (`microbench --idle-pauses`): the
    /// wake-up after idle the predictions add (docs/model.md, Overheads). Measured in the
    /// microbenchmark before the runs; an empty list (`""`) turns it off.
    #[arg(long, value_delimiter = ',', default_value = "0,0.05,0.2,1")]
    pub mb_idle_pauses: Vec<f64>,
    /// Rounds of the idle probe (each pause once per round; the median is kept).
    #[arg(long, default_value_t = 3)]
    pub mb_idle_rounds: usize,
    /// Decode streams of the microbenchmark's mixed probe (a prompt prefilled while they
    /// decode; counts that leave no slot free are dropped; empty: no probe).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub mb_mixed_streams: Vec<u32>,
    /// Prompt of the mixed probe [tokens] (capped below the length cap).
    #[arg(long, default_value_t = 448)]
    pub mb_mixed_prompt: u32,
    /// Seed of arrivals and lengths.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Measure every rate's trace this many times, in rounds (round k ≥ 2 in
    /// `repeat-<k>/`). The prediction is scored against the first round; the report says
    /// how far the later rounds moved from it: the measurement's own noise on this
    /// machine, which bounds any prediction.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Measure through this URL instead of --url: a load balancer in front of --replicas
    /// copies of the --url server. The microbenchmark and the fit stay on --url (one
    /// replica, alone); the measured runs go through the balancer, and the prediction is
    /// the fleet simulator's (docs/model.md, "Fleets").
    #[arg(long, value_name = "URL")]
    pub balancer: Option<String>,
    /// Servers sharing the machine with --url (the other replicas behind --balancer): the
    /// microbenchmark runs once more while they decode, and the fleet prediction scales
    /// the fitted cost by how much that slows the replica, in proportion to how busy
    /// the replicas are at each rate (docs/accuracy.md, "Fleets through a real load
    /// balancer"). Empty: the replicas do not slow each other.
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub mb_beside: Vec<String>,
    /// Replicas behind --balancer, each a copy of the --url server with the fitted cost;
    /// more than 1 predicts with the fleet simulator.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replicas: u32,
    /// The balancer's policy, as the fleet simulator's router: round_robin (nginx's
    /// default, HAProxy `roundrobin`; the default), least_outstanding (nginx `least_conn`,
    /// HAProxy `leastconn`), or any router of `simulate --router`. With --replay: the
    /// recorded run's unless given; given, the recorded measurements are predicted as if
    /// behind this router (the same fit and traces, another policy).
    #[arg(long, value_name = "NAME")]
    pub router: Option<String>,
    /// Output directory.
    #[arg(long, default_value = "results/validate")]
    pub out: PathBuf,
    /// Re-predict a finished `validate` directory instead of measuring: its pooled
    /// microbenchmarks are re-fitted and its traces re-simulated with this build's models,
    /// against its measurements (no server needed). Reads DIR, writes --out (may be DIR).
    /// The server and workload (--scale, --max-len, --seed, --budget, --slots,
    /// --kv-tokens) are the recorded run's, from DIR's `run_args.json`; the model options
    /// (--cost…) are this command's.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
}

/// Runs the whole pipeline (or, with `--replay`, its prediction of a recorded run);
/// `command` is recorded at the top of the markdown.
///
/// # Errors
/// Flags out of range, an unreachable server, a failed microbenchmark or run, a replay
/// directory that is not a recorded run, file errors.
pub fn validate(args: &ValidateArgs, command: &str) -> anyhow::Result<ValidateReport> {
    if args.requests == 0 || args.scale.is_nan() || args.scale <= 0.0 || args.max_len < 2 {
        bail!("--requests must be >= 1, --scale > 0, --max-len >= 2");
    }
    let rates = args.rates.as_ref().map_or(args.load.len(), Vec::len);
    let max = crate::args::limits::Limits::default().max_requests_per_sweep;
    if args.requests as f64 * rates as f64 > max {
        return Err(crate::args::ArgError::TooMuchWork(format!(
            "validate: --requests {} × {rates} rates is more than {max:.0} requests to simulate \
             (and measure); lower --requests",
            args.requests
        ))
        .into());
    }
    fleet_spec(args)?;
    let out = &args.out;
    std::fs::create_dir_all(out.join("sim"))
        .with_context(|| format!("creating {}", out.display()))?;
    match &args.replay {
        Some(dir) => replay::replay(args, dir, command),
        None => running::measure(args, command),
    }
}

/// The fleet the prediction simulates: (replicas, router), checked against the flags.
///
/// # Errors
/// `--replicas 0` or above the engine's limit, an unknown `--router`, or more than one
/// replica measured without `--balancer` (the runs would reach one replica only).
pub(crate) fn fleet_spec(args: &ValidateArgs) -> anyhow::Result<(u32, RouterKind)> {
    let name = args.router.as_deref().unwrap_or("round_robin");
    let router = RouterKind::parse(name).with_context(|| {
        format!(
            "--router: unknown router '{}': one of round_robin (rr, roundrobin), random, \
             least_outstanding (lor, least_conn, leastconn), least_tokens (jsq), power_of_D \
             (p2c), kv_aware",
            name
        )
    })?;
    if args.replicas == 0 || args.replicas as usize > engine::limits::MAX_REPLICAS {
        bail!(
            "--replicas must be between 1 and {}, not {}",
            engine::limits::MAX_REPLICAS,
            args.replicas
        );
    }
    if args.replicas > 1 && args.balancer.is_none() && args.replay.is_none() {
        bail!(
            "--replicas {} needs --balancer URL: the measured runs must go through the load \
             balancer in front of the replicas (--url is the one replica that is fitted)",
            args.replicas
        );
    }
    if !args.mb_beside.is_empty() && (args.replicas < 2 || args.replay.is_some()) {
        bail!(
            "--mb-beside is for a measured fleet (--replicas 2 or more behind --balancer): it \
             names the other replicas on --url's machine; a replay uses the run's own \
             microbench_beside.json"
        );
    }
    Ok((args.replicas, router))
}

/// The microbenchmark beside busy neighbours (`--mb-beside`), in a run's directory.
pub const BESIDE: &str = "microbench_beside.json";

/// A rate as file names and reports print it: up to 3 decimals, trailing zeros dropped.
pub fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Rounds to two significant digits.
pub(crate) fn round2(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    // Scale by an exact power of ten and divide back, so 0.69 prints as 0.69.
    let k = x.log10().floor() as i32 - 1;
    if k < 0 {
        let p = 10f64.powi(-k);
        (x * p).round() / p
    } else {
        let p = 10f64.powi(k);
        (x / p).round() * p
    }
}

/// Entry point of the subcommand.
pub fn execute(args: ValidateArgs) -> anyhow::Result<()> {
    let command = crate::compare::command_line();
    let r = validate(&args, &command)?;
    print!(
        "{}",
        std::fs::read_to_string(r.out.join("validate.md")).unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::predict::scaled_sharegpt;
    use super::*;
    use engine::workload::LengthDist;

    #[test]
    fn rounding_and_names() {
        assert_eq!(round2(0.0123), 0.012);
        assert!((round2(7.46) - 7.5).abs() < 1e-12);
        assert_eq!(round2(0.69), 0.69);
        assert_eq!(format!("{:?}", round2(0.8 * 0.8625)), "0.69");
        assert_eq!(round2(1234.0), 1200.0);
        assert_eq!(fmt_rate(2.0), "2");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(csv_header().split(',').count(), 4 + 3 * METRICS.len());
    }

    fn parse(extra: &[&str]) -> ValidateArgs {
        let mut argv = vec!["bench-native", "validate"];
        argv.extend_from_slice(extra);
        let crate::cli::Command::Validate(a) =
            <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
                .unwrap()
                .command
        else {
            panic!("not validate")
        };
        a
    }

    #[test]
    fn fleet_flags_are_checked_before_anything_runs() {
        // the default: one server, round-robin (a fleet of one)
        assert_eq!(
            fleet_spec(&parse(&[])).unwrap(),
            (1, RouterKind::RoundRobin)
        );
        let b = ["--balancer", "http://127.0.0.1:1"];
        let lb = |x: &[&str]| parse(&[&b[..], x].concat());
        assert_eq!(
            fleet_spec(&lb(&["--replicas", "2", "--router", "least_conn"])).unwrap(),
            (2, RouterKind::LeastOutstanding)
        );
        assert_eq!(
            fleet_spec(&lb(&["--replicas", "3", "--router", "leastconn"])).unwrap(),
            (3, RouterKind::LeastOutstanding)
        );
        let err = |a: &ValidateArgs| format!("{:#}", validate(a, "").unwrap_err());
        let e = err(&lb(&["--replicas", "0"]));
        assert!(e.contains("--replicas must be between 1 and 4096"), "{e}");
        let e = err(&lb(&["--replicas", "2", "--router", "fastest"]));
        assert!(e.contains("--router: unknown router 'fastest'"), "{e}");
        // more than one replica measured at --url alone would reach one replica only
        let e = err(&parse(&["--replicas", "2"]));
        assert!(e.contains("--replicas 2 needs --balancer URL"), "{e}");
        // a replay measures nothing: the recorded fleet needs no balancer
        let mut r = parse(&["--replicas", "2", "--replay", "/nonexistent"]);
        assert_eq!(fleet_spec(&r).unwrap().0, 2);
        r.router = Some("p2c".into());
        assert_eq!(fleet_spec(&r).unwrap().1, RouterKind::PowerOfD { d: 2 });
        // the neighbours of a measured fleet's replica, comma-separated
        let a = lb(&["--replicas", "2", "--mb-beside", "http://h:1,http://h:2"]);
        assert_eq!(a.mb_beside, ["http://h:1", "http://h:2"]);
        assert_eq!(fleet_spec(&a).unwrap().0, 2);
        // ... and nothing else
        for bad in [
            lb(&["--mb-beside", "http://h:1"]),
            parse(&[
                "--replicas",
                "2",
                "--replay",
                "/x",
                "--mb-beside",
                "http://h:1",
            ]),
        ] {
            let e = err(&bad);
            assert!(e.contains("--mb-beside is for a measured fleet"), "{e}");
        }
    }

    #[test]
    fn recorded_args_of_a_single_server_run_read_as_one_replica() {
        let old = r#"{"scale": 0.25, "max_len": 512, "seed": 0, "budget": 512, "slots": null, "kv_tokens": null}"#;
        let r: RecordedArgs = serde_json::from_str(old).unwrap();
        assert_eq!((r.replicas, r.router), (1, RouterKind::RoundRobin));
        assert!(!r.flags().contains("--replicas"));
        // a fleet run records its fleet; a replay's --router overrides the recorded one
        let a = parse(&["--balancer", "x", "--replicas", "2", "--router", "lor"]);
        let rec = RecordedArgs::of(&a);
        assert_eq!(
            (rec.replicas, rec.router),
            (2, RouterKind::LeastOutstanding)
        );
        assert!(rec
            .flags()
            .ends_with("--replicas 2 --router least_outstanding"));
        let back: RecordedArgs =
            serde_json::from_str(&serde_json::to_string(&rec).unwrap()).unwrap();
        assert_eq!(back, rec);
        let replay = parse(&["--replay", "d"]);
        assert_eq!(
            rec.apply(&replay).router.as_deref(),
            Some("least_outstanding")
        );
        let replay_rr = parse(&["--replay", "d", "--router", "round_robin"]);
        assert_eq!(rec.apply(&replay_rr).router.as_deref(), Some("round_robin"));
        assert_eq!(rec.apply(&replay_rr).replicas, 2);
    }

    #[test]
    fn scaled_lengths_stay_positive() {
        let LengthDist::Empirical { pairs } = scaled_sharegpt(0.1) else {
            panic!()
        };
        assert!(pairs.iter().all(|&(p, o)| p >= 1 && o >= 1));
    }
}
