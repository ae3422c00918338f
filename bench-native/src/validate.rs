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
//! Arrival rates default to fractions of the saturation throughput that the fitted model
//! itself predicts (`--load`), so "light to past saturation" holds on a slow or loaded
//! machine; `--rates` gives them in req/s instead.

use crate::client::Endpoint;
use crate::fit;
use crate::microbench::{
    self, DecodePoint, MicrobenchConfig, MicrobenchResult, MixedPoint, PrefillPoint,
};
use crate::run::{run_load, RunConfig, ServerArgs};
use anyhow::{bail, Context};
use engine::config::{EndRule, FirstToken, ServerConfig, SimConfig};
use engine::cost::CostModel;
use engine::metrics::Summary;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use indicatif::ProgressBar;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  # a llama-server with 4 slots, 8192 KV tokens, -b 512 (1 thread) on :8080
  llama-server -m tiny.gguf --port 8080 -np 4 -c 8192 -b 512 -ub 512 -t 1 --metrics
  bench-native validate --url http://127.0.0.1:8080 --budget 512 --out results/validate_llama

  # fixed rates, more requests per rate, the linear cost model
  bench-native validate --rates 1,2,4,8 --requests 80 --cost linear --out /tmp/val

  # every rate measured twice: the report states the measurement's own noise
  bench-native validate --url http://127.0.0.1:8080 --budget 512 --rounds 2 --out /tmp/val2

  # the same measurements, predicted again by this build's models (no server)
  bench-native validate --replay results/validate_llama --out /tmp/replay

Files written to --out: validate.md (table, command at the top), validate.csv (one row per
rate: predicted, measured and relative error of each metric), microbench.json/.csv,
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
    /// Output directory.
    #[arg(long, default_value = "results/validate")]
    pub out: PathBuf,
    /// Re-predict a finished `validate` directory instead of measuring: its pooled
    /// microbenchmarks are re-fitted and its traces re-simulated with this build's models,
    /// against its measurements (no server needed). Reads DIR, writes --out (may be DIR).
    /// The server and workload (--scale, --max-len, --seed, --budget, --slots,
    /// --kv-tokens) are the recorded run's, from DIR's `run_args.json` or its report's
    /// command; the model options (--cost…) are this command's.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
}

/// Reads one metric from a summary.
pub type Getter = fn(&Summary) -> Option<f64>;

/// The metrics compared, with how to read them from a summary.
pub const METRICS: [(&str, Getter); 6] = [
    ("ttft_mean_s", |s| s.ttft.mean),
    ("ttft_p50_s", |s| s.ttft.p50),
    ("ttft_p99_s", |s| s.ttft.p99),
    ("tpot_mean_s", |s| s.tpot.mean),
    ("e2e_mean_s", |s| s.e2e.mean),
    ("throughput_rps", |s| Some(s.throughput_rps)),
];

/// One rate's comparison.
#[derive(Clone, Debug)]
pub struct RateResult {
    pub rate: f64,
    /// Rate / predicted saturation throughput.
    pub load: f64,
    pub predicted: Summary,
    /// The prediction of the other cost model.
    pub predicted_alt: Summary,
    pub measured: Summary,
    /// The same trace measured again, in later rounds (`--rounds`).
    pub repeats: Vec<Summary>,
}

impl RateResult {
    /// (metric, predicted, measured, relative error) for every compared metric.
    pub fn errors(&self, alt: bool) -> Vec<(&'static str, f64, f64, f64)> {
        let p = if alt {
            &self.predicted_alt
        } else {
            &self.predicted
        };
        relative_differences(p, &self.measured).collect()
    }

    /// |relative difference| of every later round from the first, over every metric
    /// ((repeat − first) / first, as a prediction's error would be).
    pub fn repeat_differences(&self) -> Vec<f64> {
        let first = &self.measured;
        self.repeats
            .iter()
            .flat_map(|rep| relative_differences(rep, first).map(|c| c.3.abs()))
            .collect()
    }

    /// |relative error| of the prediction against every later round, over every metric.
    pub fn errors_against_repeats(&self) -> Vec<f64> {
        self.repeats
            .iter()
            .flat_map(|rep| relative_differences(&self.predicted, rep).map(|c| c.3.abs()))
            .collect()
    }
}

/// (metric, a, b, (a − b) / b) for every compared metric (NaN where either has no value).
fn relative_differences<'a>(
    a: &'a Summary,
    b: &'a Summary,
) -> impl Iterator<Item = (&'static str, f64, f64, f64)> + 'a {
    METRICS.iter().map(move |(name, get)| {
        let (x, y) = (get(a).unwrap_or(f64::NAN), get(b).unwrap_or(f64::NAN));
        (*name, x, y, (x - y) / y)
    })
}

/// How a metric's values are shown in the tables: the factor to ms for times, and the
/// decimals (TPOT and throughput 2, other times whole ms).
fn display_unit(name: &str) -> (f64, usize) {
    if !name.ends_with("_s") {
        (1.0, 2)
    } else if name.starts_with("tpot") {
        (1e3, 2)
    } else {
        (1e3, 0)
    }
}

/// Everything `validate` produced.
#[derive(Clone, Debug)]
pub struct ValidateReport {
    pub rates: Vec<RateResult>,
    /// Predicted saturation throughput [req/s].
    pub capacity_rps: f64,
    /// Median |relative error| over every (rate, metric) cell, chosen / other cost model.
    pub median_abs_rel_error: f64,
    pub median_abs_rel_error_alt: f64,
    /// With `--rounds` ≥ 2: median |relative difference| of the later rounds' measurements
    /// from the first's, and the prediction's median |relative error| against them.
    pub repeat_noise: Option<(f64, f64)>,
    pub out: PathBuf,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    engine::metrics::percentile_type7(&v, 0.5).unwrap_or(f64::NAN)
}

/// ShareGPT pairs scaled by `scale` (each length ≥ 1).
fn scaled_sharegpt(scale: f64) -> LengthDist {
    let LengthDist::Empirical { pairs } = LengthDist::sharegpt() else {
        unreachable!("sharegpt is empirical")
    };
    let s = |x: u32| ((x as f64 * scale).round() as u32).max(1);
    LengthDist::Empirical {
        pairs: pairs.into_iter().map(|(p, o)| (s(p), s(o))).collect(),
    }
}

/// The first `n` requests of the scaled, capped ShareGPT workload at `rate`, as a trace.
fn trace(args: &ValidateArgs, rate: f64, cap: u32) -> anyhow::Result<Vec<TraceRequest>> {
    let w = Workload {
        arrivals: ArrivalProcess::Poisson { rate },
        lengths: scaled_sharegpt(args.scale),
        max_model_len: Some(cap),
    };
    let horizon = args.requests as f64 / rate * 4.0 + 60.0;
    Ok(w.stream(args.seed, horizon)?
        .take(args.requests)
        .map(|r| TraceRequest {
            arrival: r.arrival,
            prompt: r.prompt,
            output: r.output,
            class: r.class,
        })
        .collect())
}

/// What the simulator is told about the server.
#[derive(Clone, Debug)]
struct ServerModel {
    slots: u32,
    kv_tokens: u64,
    block_size: u32,
    per_slot: Option<u64>,
    budget: u32,
}

/// How [`sim_config`] models the server's KV cache, in words.
fn kv_text(m: &ServerModel) -> String {
    if m.block_size <= 1 {
        "the `llama_cpp` server model (policy `llama_cpp`: decodes first, then prompt chunks in slot order; token-granular KV, each request capped at its slot's context, so slots never block or preempt)".into()
    } else {
        format!(
            "the `vllm_v1` server model (policy `chunked`, `paged` KV of {} blocks × {} tokens read from the server, recompute preemption, no watermark)",
            m.kv_tokens / m.block_size as u64,
            m.block_size
        )
    }
}

fn sim_config(
    m: &ServerModel,
    cost: &CostModel,
    overhead_s: f64,
    requests: Vec<TraceRequest>,
) -> SimConfig {
    let mut c = SimConfig::vllm_like(1.0);
    c.workload = Workload {
        arrivals: ArrivalProcess::Trace { requests },
        lengths: LengthDist::Fixed {
            prompt: 1,
            output: 1,
        },
        max_model_len: None,
    };
    // The named server models (engine::config): what each server's scheduler does.
    c.server = if m.block_size <= 1 {
        ServerConfig::llama_cpp(m.slots, m.kv_tokens, m.budget)
    } else {
        ServerConfig::vllm_v1(
            m.slots,
            m.kv_tokens / m.block_size as u64,
            m.block_size,
            m.budget,
        )
    };
    c.server.overhead_s = overhead_s;
    c.cost = cost.clone();
    c.first_token = FirstToken::AfterPrefill;
    c.end = EndRule::Drain;
    c.horizon_s = 1e6;
    c
}

/// Simulates trace `t`; with `records`, also writes every simulated request there (the
/// per-request CSV columns of `bench-native simulate --records`, ids as in the trace and
/// in the real run's `requests.csv`).
fn simulate(
    m: &ServerModel,
    cost: &CostModel,
    overhead_s: f64,
    t: &[TraceRequest],
    records: Option<&Path>,
) -> anyhow::Result<Summary> {
    let mut cfg = sim_config(m, cost, overhead_s, t.to_vec());
    cfg.keep_records = records.is_some();
    cfg.validate().context("simulator configuration")?;
    let rep = engine::sim::simulate(&cfg)?;
    if let Some(path) = records {
        let csv = format!(
            "{}\n{}",
            engine::sweep::RECORD_COLUMNS,
            engine::sweep::records_csv(&rep.records, "")
        );
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(rep.summary)
}

/// What a replay reads of the run it replays.
pub const RECORDED_ARGS: &str = "run_args.json";

/// The arguments that describe a run's server and workload. A replay takes them from the
/// recording ([`RECORDED_ARGS`], or the command at the top of an older run's
/// `validate.md`), so it simulates the server and draws the saturation estimate the run
/// had, whatever its own command line says.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordedArgs {
    pub scale: f64,
    pub max_len: u32,
    pub seed: u64,
    pub budget: u32,
    pub slots: Option<u32>,
    pub kv_tokens: Option<u64>,
}

impl RecordedArgs {
    pub fn of(a: &ValidateArgs) -> RecordedArgs {
        RecordedArgs {
            scale: a.scale,
            max_len: a.max_len,
            seed: a.seed,
            budget: a.budget,
            slots: a.slots,
            kv_tokens: a.kv_tokens,
        }
    }

    /// `a` with these in place of its own.
    pub fn apply(self, a: &ValidateArgs) -> ValidateArgs {
        ValidateArgs {
            scale: self.scale,
            max_len: self.max_len,
            seed: self.seed,
            budget: self.budget,
            slots: self.slots,
            kv_tokens: self.kv_tokens,
            ..a.clone()
        }
    }

    /// As command-line flags.
    pub fn flags(&self) -> String {
        let mut s = format!(
            "--scale {} --max-len {} --seed {} --budget {}",
            self.scale, self.max_len, self.seed, self.budget
        );
        if let Some(n) = self.slots {
            let _ = write!(s, " --slots {n}");
        }
        if let Some(k) = self.kv_tokens {
            let _ = write!(s, " --kv-tokens {k}");
        }
        s
    }

    fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let p = dir.join(RECORDED_ARGS);
        std::fs::write(&p, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", p.display()))
    }

    /// From `dir`'s [`RECORDED_ARGS`], else from the `validate` command its `validate.md`
    /// starts with; `None` if it has neither.
    pub fn read(dir: &Path) -> anyhow::Result<Option<RecordedArgs>> {
        let p = dir.join(RECORDED_ARGS);
        if p.exists() {
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            let r = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a {RECORDED_ARGS}", p.display()))?;
            return Ok(Some(r));
        }
        Ok(std::fs::read_to_string(dir.join("validate.md"))
            .ok()
            .and_then(|md| RecordedArgs::from_report(&md)))
    }

    /// From the first `bench-native validate` command (not a replay) in a report's
    /// text blocks.
    pub fn from_report(md: &str) -> Option<RecordedArgs> {
        md.split("```text\n").skip(1).find_map(|block| {
            let line = block.lines().next()?;
            let words = split_command(line);
            if words.get(1).map(String::as_str) != Some("validate") {
                return None;
            }
            match <crate::cli::Cli as clap::Parser>::try_parse_from(words)
                .ok()?
                .command
            {
                crate::cli::Command::Validate(a) if a.replay.is_none() => {
                    Some(RecordedArgs::of(&a))
                }
                _ => None,
            }
        })
    }
}

/// Splits a command line as written by `compare::command_line` (words with spaces are in
/// single quotes).
fn split_command(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.trim().chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn server_model(args: &ValidateArgs, meta: &Value) -> anyhow::Result<ServerModel> {
    let kv = &meta["kv"];
    let slots = args
        .slots
        .or_else(|| kv["slots"].as_u64().map(|s| s as u32))
        .context("the server does not report its slots (max_num_seqs): pass --slots")?;
    let kv_tokens = args
        .kv_tokens
        .or_else(|| kv["tokens"].as_u64())
        .context("the server does not report its KV capacity: pass --kv-tokens")?;
    let block_size = kv["block_size"].as_u64().unwrap_or(1).max(1) as u32;
    let per_slot = kv["tokens_per_slot"]
        .as_u64()
        .or_else(|| meta["context_tokens_per_sequence"].as_u64());
    if slots == 0 {
        bail!("slots must be >= 1");
    }
    Ok(ServerModel {
        slots,
        kv_tokens,
        block_size,
        per_slot,
        budget: args.budget,
    })
}

fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Rounds to two significant digits.
fn round2(x: f64) -> f64 {
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

/// Runs the whole pipeline; `command` is recorded at the top of the markdown.
///
/// # Errors
/// An unreachable server, a failed microbenchmark or run, file errors.
pub fn validate(args: &ValidateArgs, command: &str) -> anyhow::Result<ValidateReport> {
    if args.requests == 0 || args.scale.is_nan() || args.scale <= 0.0 || args.max_len < 2 {
        bail!("--requests must be >= 1, --scale > 0, --max-len >= 2");
    }
    let out = args.out.clone();
    std::fs::create_dir_all(out.join("sim"))
        .with_context(|| format!("creating {}", out.display()))?;
    if let Some(dir) = &args.replay {
        let rec = read_recorded(dir)?;
        // The server and workload the run was recorded with, not this command's.
        let recorded = match RecordedArgs::read(dir)? {
            Some(r) => {
                eprintln!("replaying {}: recorded with {}", dir.display(), r.flags());
                r.write(&out)?;
                r
            }
            None => {
                let own = RecordedArgs::of(args);
                eprintln!(
                    "warning: {} records neither {RECORDED_ARGS} nor its command; assuming {}",
                    dir.display(),
                    own.flags()
                );
                own
            }
        };
        // the report's workload line: the recorded traces' length
        let args = &ValidateArgs {
            requests: rec.measured[0].1.len(),
            ..recorded.apply(args)
        };
        let model = server_model(args, &rec.meta)?;
        let cap = length_cap(args, &model);
        eprintln!(
            "replaying {}: {} rates, re-fitting its microbenchmarks",
            dir.display(),
            rec.measured.len()
        );
        return predict_and_report(
            args,
            command,
            &model,
            cap,
            (&rec.pre, &rec.post),
            rec.measured,
        );
    }
    RecordedArgs::of(args).write(&out)?;
    let rt = crate::run::runtime()?;
    let endpoint = args.server.endpoint();
    let meta = rt.block_on(async {
        let ep = Endpoint::connect(&endpoint).await?;
        Ok::<_, crate::client::ClientError>(crate::run::server_metadata(&ep).await)
    })?;
    let model = server_model(args, &meta)?;
    let cap = length_cap(args, &model);
    eprintln!(
        "server: {} slots, {} KV tokens (per slot {:?}), budget {} (from --budget); lengths ShareGPT × {} capped at {cap}",
        model.slots, model.kv_tokens, model.per_slot, model.budget, args.scale
    );

    // 1. microbenchmark
    let mut prompts: Vec<u32> = args
        .mb_prompts
        .iter()
        .copied()
        .filter(|&p| p >= 1 && p < cap)
        .collect();
    if prompts.len() < 2 {
        prompts = vec![(cap / 8).max(1), (cap / 2).max(2)];
    }
    let mut streams: Vec<u32> = (1..=model.slots.min(8)).collect();
    if model.slots > 8 {
        streams.extend([16, 32, 64, 128].into_iter().filter(|&s| s < model.slots));
        streams.push(model.slots);
    }
    let decode_tokens = args.mb_decode_tokens.min(cap.saturating_sub(17)).max(8);
    let llama = meta.get("server_kind").and_then(Value::as_str) == Some("llama_cpp");
    let mbc = MicrobenchConfig {
        endpoint: endpoint.clone(),
        prompt_lengths: prompts,
        repeats: args.mb_repeats.max(1),
        streams,
        decode_tokens,
        decode_prompt: 16,
        timeout: Duration::from_secs_f64(args.server.timeout),
        chars_per_token: args.server.chars_per_token,
        use_tokenizer: !args.server.no_tokenize,
        mixed_streams: args
            .mb_mixed_streams
            .iter()
            .copied()
            .filter(|&k| k >= 1 && k < model.slots)
            .collect(),
        mixed_prompt: args.mb_mixed_prompt.min(cap.saturating_sub(1)).max(1),
        budget: Some(model.budget),
        // llama.cpp: decodes pinned to consecutive slots, plus two split layouts
        pin_slots: llama,
        layouts: if llama {
            [vec![0, 2], vec![0, 1, 3]]
                .into_iter()
                .filter(|l| l.iter().all(|&s| s < model.slots))
                .collect()
        } else {
            Vec::new()
        },
        long_prompt: Some(args.mb_long_prompt.min(cap / 2)).filter(|&p| p > 16),
        decode_rounds: args.mb_decode_rounds.max(1),
    };
    eprintln!("1/4 microbenchmark (before the measurement)");
    let mb_pre = rt.block_on(microbench::microbench(&mbc, &ProgressBar::hidden()))?;
    microbench::write(&mb_pre, &out.join("microbench_pre.json"))?;

    // 2. rates from the pre-measurement fit's saturation throughput
    let capacity_pre = capacity(args, &model, &args.cost.of(&fit::fit(&mb_pre, false)?), cap)?;
    let rates: Vec<f64> = match &args.rates {
        Some(r) => r.clone(),
        None => args.load.iter().map(|l| round2(l * capacity_pre)).collect(),
    };
    if rates.is_empty() || rates.iter().any(|r| !(*r > 0.0 && r.is_finite())) {
        bail!("rates must be positive: {rates:?}");
    }
    eprintln!("2/4 predicted saturation {capacity_pre:.2} req/s; rates {rates:?}");

    // 3. measure every rate's trace, right after the microbenchmark; with --rounds, every
    // rate again in later rounds
    let mut traces = Vec::new();
    for &rate in &rates {
        let t = trace(args, rate, cap)?;
        let tp = out
            .join("sim")
            .join(format!("trace-{}.json", fmt_rate(rate)));
        std::fs::write(&tp, serde_json::to_string(&t)? + "\n")
            .with_context(|| format!("writing {}", tp.display()))?;
        traces.push(t);
    }
    let rounds = args.rounds.max(1);
    let mut summaries: Vec<Vec<Summary>> = vec![Vec::new(); rates.len()];
    for round in 1..=rounds {
        let dir = if round == 1 {
            out.clone()
        } else {
            out.join(format!("repeat-{round}"))
        };
        for (i, (&rate, t)) in rates.iter().zip(&traces).enumerate() {
            eprintln!(
                "3/4 measuring rate {} req/s ({}/{}{}), {} requests",
                fmt_rate(rate),
                i + 1,
                rates.len(),
                if rounds > 1 {
                    format!(", round {round}/{rounds}")
                } else {
                    String::new()
                },
                t.len()
            );
            let mut rc =
                RunConfig::new(&endpoint.url, dir.join(format!("rate-{}", fmt_rate(rate))));
            rc.endpoint = endpoint.clone();
            rc.workload = Workload {
                arrivals: ArrivalProcess::Trace {
                    requests: t.clone(),
                },
                lengths: LengthDist::Fixed {
                    prompt: 1,
                    output: 1,
                },
                max_model_len: None,
            };
            rc.seed = args.seed;
            rc.horizon_s = 1e6;
            rc.warmup_requests = 1;
            rc.timeout = Duration::from_secs_f64(args.server.timeout);
            rc.chars_per_token = args.server.chars_per_token;
            rc.use_tokenizer = !args.server.no_tokenize;
            let rep = rt.block_on(run_load(
                &rc,
                &ProgressBar::hidden(),
                std::future::pending(),
            ))?;
            if rep.summary.errors > 0 {
                eprintln!(
                    "  warning: {} failed requests at {} req/s",
                    rep.summary.errors,
                    fmt_rate(rate)
                );
            }
            summaries[i].push(rep.summary);
        }
    }
    let measured: Vec<Measured> = rates
        .iter()
        .zip(traces)
        .zip(summaries)
        .map(|((&rate, t), mut s)| {
            let first = s.remove(0);
            (rate, t, first, s)
        })
        .collect();

    // 4. microbenchmark again, fit the pooled curves, simulate every trace
    eprintln!("4/4 microbenchmark (after the measurement), fit, simulate");
    let mb_post = rt.block_on(microbench::microbench(&mbc, &ProgressBar::hidden()))?;
    microbench::write(&mb_post, &out.join("microbench_post.json"))?;
    predict_and_report(args, command, &model, cap, (&mb_pre, &mb_post), measured)
}

/// prompt + output ≤ the per-slot context (one token of slack for BOS) and `--max-len`.
fn length_cap(args: &ValidateArgs, model: &ServerModel) -> u32 {
    match model.per_slot {
        Some(c) => args.max_len.min(c.saturating_sub(1).max(2) as u32),
        None => args.max_len,
    }
}

/// What a finished `validate` directory recorded.
struct Recorded {
    meta: Value,
    pre: MicrobenchResult,
    post: MicrobenchResult,
    /// (rate, trace, measured summary, later rounds' summaries), by rate.
    measured: Vec<Measured>,
}

/// One rate: (rate, trace, first round's summary, later rounds' summaries).
type Measured = (f64, Vec<TraceRequest>, Summary, Vec<Summary>);

/// Reads a `validate` output directory: the two microbenchmarks, and per `rate-<r>/` its
/// `summary.json` and the trace `sim/trace-<r>.json`.
fn read_recorded(dir: &Path) -> anyhow::Result<Recorded> {
    let json = |p: PathBuf| -> anyhow::Result<Value> {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", p.display()))
    };
    let mb = |name: &str| -> anyhow::Result<MicrobenchResult> {
        Ok(fit::read_microbench(&dir.join(name))?)
    };
    let (pre, post) = (mb("microbench_pre.json")?, mb("microbench_post.json")?);
    let mut measured = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(r) = name.strip_prefix("rate-") else {
            continue;
        };
        let summary = json(e.path().join("summary.json"))?;
        // the nominal rate the trace was drawn at (the summary has the realised one)
        let rate = r
            .parse()
            .ok()
            .or_else(|| summary["arrival_rate_rps"].as_f64())
            .with_context(|| format!("{name}: no arrival rate"))?;
        let m: Summary = serde_json::from_value(summary["summary"].clone())
            .with_context(|| format!("{name}/summary.json: no summary"))?;
        let t: Vec<TraceRequest> =
            serde_json::from_value(json(dir.join("sim").join(format!("trace-{r}.json")))?)
                .with_context(|| format!("sim/trace-{r}.json is not a trace"))?;
        let mut repeats = Vec::new();
        for k in 2.. {
            let p = dir
                .join(format!("repeat-{k}"))
                .join(&name)
                .join("summary.json");
            if !p.exists() {
                break;
            }
            let v = json(p)?;
            repeats.push(
                serde_json::from_value(v["summary"].clone())
                    .with_context(|| format!("repeat-{k}/{name}/summary.json: no summary"))?,
            );
        }
        measured.push((rate, t, m, repeats));
    }
    if measured.is_empty() {
        bail!(
            "{}: no rate-<r>/ directories of a validate run",
            dir.display()
        );
    }
    measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Recorded {
        meta: pre.metadata.clone(),
        pre,
        post,
        measured,
    })
}

/// Steps 4–5: fit the pooled microbenchmarks, simulate every measured trace, write the
/// report.
fn predict_and_report(
    args: &ValidateArgs,
    command: &str,
    model: &ServerModel,
    cap: u32,
    (mb_pre, mb_post): (&MicrobenchResult, &MicrobenchResult),
    measured: Vec<Measured>,
) -> anyhow::Result<ValidateReport> {
    let out = &args.out;
    let mb = pool(mb_pre, mb_post);
    let mb_path = out.join("microbench.json");
    microbench::write(&mb, &mb_path)?;
    let f = fit::fit(&mb, false)?;
    fit::write(&f, &mb_path, &out.join("fit.json"))?;
    let (cost, alt) = (args.cost.of(&f), args.cost.alt().of(&f));
    let capacity_rps = capacity(args, model, &cost, cap)?;
    let mut results = Vec::new();
    for (rate, t, m, repeats) in measured {
        results.push(RateResult {
            rate,
            load: rate / capacity_rps,
            predicted: simulate(
                model,
                &cost,
                f.overhead_s,
                &t,
                Some(
                    &out.join("sim")
                        .join(format!("requests-{}.csv", fmt_rate(rate))),
                ),
            )?,
            predicted_alt: simulate(model, &alt, f.overhead_s, &t, None)?,
            measured: m,
            repeats,
        });
    }

    // 5. report
    let cells = |alt: bool| {
        median(
            results
                .iter()
                .flat_map(|r| r.errors(alt).into_iter().map(|e| e.3.abs()))
                .collect(),
        )
    };
    let differences: Vec<f64> = results
        .iter()
        .flat_map(RateResult::repeat_differences)
        .collect();
    let repeat_noise = (!differences.is_empty()).then(|| {
        (
            median(differences),
            median(
                results
                    .iter()
                    .flat_map(RateResult::errors_against_repeats)
                    .collect(),
            ),
        )
    });
    let report = ValidateReport {
        median_abs_rel_error: cells(false),
        median_abs_rel_error_alt: cells(true),
        repeat_noise,
        rates: results,
        capacity_rps,
        out: out.clone(),
    };
    write_csv(&report, &out.join("validate.csv"))?;
    let md = markdown(&report, args, model, cap, command, &f, (mb_pre, mb_post));
    std::fs::write(out.join("validate.md"), &md)
        .with_context(|| format!("writing {}", out.join("validate.md").display()))?;
    eprintln!("4/4 wrote {}", out.join("validate.md").display());
    Ok(report)
}

fn steps(m: &MicrobenchResult) -> String {
    m.decode
        .iter()
        .map(|d| {
            if d.slots.is_empty() {
                format!("{:.1}", d.step_s * 1e3)
            } else {
                format!(
                    "{{{}}}@{:.0}: {:.1}",
                    d.slot_list(","),
                    d.context_tokens,
                    d.step_s * 1e3
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Two microbenchmarks of the same points as one: prefill = median of all samples,
/// decode = gap-weighted mean step (machine load drifts; pooling averages it out).
pub fn pool(a: &MicrobenchResult, b: &MicrobenchResult) -> MicrobenchResult {
    let prefill = a
        .prefill
        .iter()
        .zip(&b.prefill)
        .map(|(x, y)| {
            let samples: Vec<f64> = x.samples_s.iter().chain(&y.samples_s).copied().collect();
            PrefillPoint {
                prompt_tokens: x.prompt_tokens,
                latency_s: median(samples.clone()),
                samples_s: samples,
                server_prompt_s: x
                    .server_prompt_s
                    .zip(y.server_prompt_s)
                    .map(|(p, q)| (p + q) / 2.0),
            }
        })
        .collect();
    let decode = a
        .decode
        .iter()
        .zip(&b.decode)
        .map(|(x, y)| {
            let n = (x.gaps + y.gaps).max(1) as f64;
            DecodePoint {
                streams: x.streams,
                step_s: (x.step_s * x.gaps as f64 + y.step_s * y.gaps as f64) / n,
                step_p50_s: (x.step_p50_s + y.step_p50_s) / 2.0,
                gaps: x.gaps + y.gaps,
                ..x.clone()
            }
        })
        .collect();
    let mixed = if a.mixed.len() == b.mixed.len() {
        a.mixed
            .iter()
            .zip(&b.mixed)
            .map(|(x, y)| MixedPoint {
                step_s: (x.step_s * x.gaps as f64 + y.step_s * y.gaps as f64)
                    / (x.gaps + y.gaps).max(1) as f64,
                gaps: x.gaps + y.gaps,
                ..x.clone()
            })
            .collect()
    } else {
        a.mixed.iter().chain(&b.mixed).cloned().collect()
    };
    MicrobenchResult {
        prefill,
        decode,
        mixed,
        budget: a.budget,
        metadata: a.metadata.clone(),
    }
}

/// Predicted saturation throughput: everything arrives at once, the drain rate [req/s].
fn capacity(
    args: &ValidateArgs,
    m: &ServerModel,
    cost: &CostModel,
    cap: u32,
) -> anyhow::Result<f64> {
    let burst = Workload {
        arrivals: ArrivalProcess::Poisson { rate: 1e6 },
        lengths: scaled_sharegpt(args.scale),
        max_model_len: Some(cap),
    };
    let t: Vec<TraceRequest> = burst
        .stream(args.seed, 1.0)?
        .take(400)
        .map(|r| TraceRequest {
            arrival: r.arrival,
            prompt: r.prompt,
            output: r.output,
            class: 0,
        })
        .collect();
    // The drain rate does not depend on the per-request overhead.
    Ok(simulate(m, cost, 0.0, &t, None)?.throughput_rps)
}

/// The CSV header of `validate.csv`.
pub fn csv_header() -> String {
    let mut h = String::from("rate_rps,load,completed_pred,completed_meas");
    for (m, _) in METRICS {
        let _ = write!(h, ",{m}_pred,{m}_meas,{m}_rel_err");
    }
    h
}

fn write_csv(r: &ValidateReport, path: &Path) -> anyhow::Result<()> {
    let mut s = csv_header() + "\n";
    for x in &r.rates {
        let _ = write!(
            s,
            "{},{:.4},{},{}",
            x.rate, x.load, x.predicted.completed, x.measured.completed
        );
        for (_, p, m, e) in x.errors(false) {
            let _ = write!(s, ",{p},{m},{e}");
        }
        s.push('\n');
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

fn markdown(
    r: &ValidateReport,
    args: &ValidateArgs,
    m: &ServerModel,
    cap: u32,
    command: &str,
    f: &fit::Fit,
    (pre, post): (&MicrobenchResult, &MicrobenchResult),
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Simulator vs real server\n\n```text\n{command}\n```\n");
    let _ = writeln!(
        s,
        "Server: {} slots, {} KV tokens (per slot {}), token budget {} (llama.cpp `-b`, vLLM \
         `max_num_batched_tokens`). Model: max_batch = slots, {}, budget as the \
         server's, first token after prefill, drain; cost = fitted **{:?}** (relative RMS \
         over the microbenchmark's points: linear {:.1} %, micro-batch {:.1} %, split slot \
         layouts included), plus a per-request front-end overhead of {:.2} ms (a lone \
         prompt's client TTFT minus the server's prompt time). \
         Workload: ShareGPT lengths × {}, prompt + output ≤ {cap}, Poisson, seed {}, {} \
         requests per rate, the same trace replayed against the server and simulated. \
         Predicted saturation {:.2} req/s.\n",
        m.slots,
        m.kv_tokens,
        m.per_slot.map_or("-".into(), |p| p.to_string()),
        m.budget,
        kv_text(m),
        args.cost,
        f.linear_rel_rms * 100.0,
        f.ubatch_rel_rms * 100.0,
        f.overhead_s * 1e3,
        args.scale,
        args.seed,
        args.requests,
        r.capacity_rps
    );
    let _ = writeln!(
        s,
        "Machine drift (the cost model pools a microbenchmark before and after the \
         measurement): decode step at 1..{} streams {} ms before, {} ms after; prefill of \
         {} tokens {:.1} ms before, {:.1} ms after.\n",
        m.slots.min(8),
        steps(pre),
        steps(post),
        pre.prefill.last().map_or(0, |p| p.prompt_tokens),
        pre.prefill.last().map_or(f64::NAN, |p| p.latency_s * 1e3),
        post.prefill.last().map_or(f64::NAN, |p| p.latency_s * 1e3),
    );
    let split: Vec<String> = f
        .ubatch_residuals
        .iter()
        .filter(|r| r.0.starts_with("decode_streams_in_") && !r.0.contains("_in_1_"))
        .map(|r| format!("{} ({}): {:.1} / {:.1} ms", r.0, r.1, r.3 * 1e3, r.2 * 1e3))
        .collect();
    if !split.is_empty() {
        let _ = writeln!(
            s,
            "Decode steps in split slot layouts (not fitted; the micro-batch model sums one \
             forward pass per run of consecutive slots), predicted / measured: {}.\n",
            split.join("; ")
        );
    }
    let _ = writeln!(
        s,
        "Each cell: predicted / measured (relative error = (pred − meas) / meas). Times in ms, \
         throughput in completed req/s; latencies from the intended send time.\n"
    );
    let _ = writeln!(
        s,
        "| rate [req/s] | load | TTFT mean | TTFT p50 | TTFT p99 | TPOT mean | E2E mean | throughput |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for x in &r.rates {
        let _ = write!(s, "| {} | {:.2} ", fmt_rate(x.rate), x.load);
        for (name, p, me, e) in x.errors(false) {
            let (k, d) = display_unit(name);
            let _ = write!(s, "| {:.d$} / {:.d$} ({:+.0} %) ", p * k, me * k, e * 100.0);
        }
        s.push_str("|\n");
    }
    let _ = writeln!(
        s,
        "\n**Median |relative error| over all {} cells: {:.1} %** ({:?} cost); with the {} \
         cost model instead: {:.1} %.\n",
        r.rates.len() * METRICS.len(),
        r.median_abs_rel_error * 100.0,
        args.cost,
        format!("{:?}", args.cost.alt()).to_lowercase(),
        r.median_abs_rel_error_alt * 100.0
    );
    if let Some((noise, against)) = r.repeat_noise {
        let rounds = r.rates.first().map_or(1, |x| 1 + x.repeats.len());
        let _ = writeln!(
            s,
            "**Measurement noise ({rounds} rounds):** the same traces measured again after the \
             first round moved by a median {:.1} % from it (|relative difference| over the same \
             cells). A prediction cannot be expected to be closer to one measurement than \
             repeated measurements are to each other. The prediction against the later rounds: \
             median {:.1} %. Measured values round by round (the later rounds' runs are in \
             `repeat-<k>/`), prediction last:\n",
            noise * 100.0,
            against * 100.0
        );
        let _ = writeln!(
            s,
            "| rate [req/s] | TTFT mean | TTFT p50 | TTFT p99 | TPOT mean | E2E mean | throughput |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|");
        for x in &r.rates {
            let _ = write!(s, "| {} ", fmt_rate(x.rate));
            for (name, get) in METRICS {
                let (k, d) = display_unit(name);
                let v = |m: &Summary| get(m).map_or("–".into(), |v| format!("{:.d$}", v * k));
                let rounds: Vec<String> = std::iter::once(&x.measured)
                    .chain(&x.repeats)
                    .map(v)
                    .collect();
                let _ = write!(s, "| {} → {} ", rounds.join(" / "), v(&x.predicted));
            }
            s.push_str("|\n");
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "Per metric, median |relative error| over rates: {}.\n",
        METRICS
            .iter()
            .enumerate()
            .map(|(i, (name, _))| format!(
                "{name} {:.1} %",
                median(r.rates.iter().map(|x| x.errors(false)[i].3.abs()).collect()) * 100.0
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s
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
    use super::*;

    #[test]
    fn a_report_gives_back_the_server_and_workload_of_its_command() {
        let md = "# Simulator vs real server\n\n```text\nbench-native validate --url http://127.0.0.1:18011 \
                  --min-tokens --slots 4 --budget 256 --scale 0.5 --seed 7 --out 'my runs/a'\n```\n\nServer: …";
        let r = RecordedArgs::from_report(md).expect("a validate command");
        assert_eq!(
            r,
            RecordedArgs {
                scale: 0.5,
                max_len: 512,
                seed: 7,
                budget: 256,
                slots: Some(4),
                kv_tokens: None,
            }
        );
        assert_eq!(
            r.flags(),
            "--scale 0.5 --max-len 512 --seed 7 --budget 256 --slots 4"
        );
        // a replay's report names the replay, not the run: nothing to take from it
        let replay = "```text\nbench-native validate --replay results/x --out /tmp/y\n```";
        assert_eq!(RecordedArgs::from_report(replay), None);
        // notes without a command, or another subcommand
        assert_eq!(RecordedArgs::from_report("Server started by hand"), None);
        assert_eq!(
            RecordedArgs::from_report("```text\nbench-native sweep\n```"),
            None
        );
        assert_eq!(
            split_command("bench-native run --out 'a b' --rate 1"),
            ["bench-native", "run", "--out", "a b", "--rate", "1"]
        );
    }

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

    #[test]
    fn scaled_lengths_stay_positive() {
        let LengthDist::Empirical { pairs } = scaled_sharegpt(0.1) else {
            panic!()
        };
        assert!(pairs.iter().all(|&(p, o)| p >= 1 && o >= 1));
    }
}
