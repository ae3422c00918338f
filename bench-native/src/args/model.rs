//! The model flags shared by `simulate`, `sweep` and `compare` (preset, policy, KV mode,
//! lengths, arrivals, cost, end rule, admission…) and the step that turns them into a
//! checked `SimConfig` for one grid point.

use super::limits::{self, Limits, Scope};
use super::trace::TraceFile;
pub use super::trace::TraceFormatArg;
use super::{load_cost, roofline, ArgError, PointFlags};
use anyhow::Context;
use clap::{Args, ValueEnum};
use engine::config::{Admission, EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
use engine::workload::{ArrivalProcess, LengthDist};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    Serial,
    Static,
    Continuous,
    Chunked,
    Sjf,
    /// llama.cpp's slots: chunked, prompts in slot order
    LlamaCpp,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Serial => Policy::Serial,
            PolicyArg::Static => Policy::Static,
            PolicyArg::Continuous => Policy::Continuous,
            PolicyArg::Chunked => Policy::Chunked,
            PolicyArg::Sjf => Policy::Sjf,
            PolicyArg::LlamaCpp => Policy::LlamaCpp,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KvModeArg {
    Reserve,
    Paged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LengthsArg {
    /// Lognormal prompt median 256 σ 0.55, output median 128 σ 0.70 (the reference study).
    Reference,
    /// The 5,000 embedded ShareGPT pairs.
    Sharegpt,
    /// Every request --prompt → --output tokens.
    Fixed,
    /// 50 % short 32→64, 50 % long 512→32.
    Mix,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ArrivalArg {
    Poisson,
    Gamma,
    Deterministic,
    /// Timestamped arrivals read from --trace FILE.
    Trace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// The reference study's simulator: continuous, token-exact reserve (loss), reference
    /// cost, first token after the first decode, everything stops at the horizon.
    Reference,
    /// vLLM-like: chunked prefill, paged KV (16-token blocks), ShareGPT, A10G table cost, drain.
    Vllm,
    /// The `llama_cpp` server model: `llama-server -np B -c K -b BUDGET` (slots own K/B
    /// tokens of KV each; requests capped at a slot; decodes first, then prompt chunks in
    /// slot order, slots taken least recently used first).
    LlamaCpp,
    /// The `vllm_v1` server model: vLLM V1 with `--max-num-seqs B`, K tokens of paged KV in
    /// --block-size blocks (16 unless given), `--max-num-batched-tokens BUDGET`; recompute
    /// preemption, no watermark; ShareGPT, A10G table cost, drain.
    VllmV1,
}

/// One grid point's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// [req/s] (ignored with a trace)
    pub rate: f64,
    pub batch: u32,
    /// [tokens]
    pub kv: u64,
    pub seed: u64,
}

/// Model flags shared by `simulate`, `sweep` and `compare`. Unset flags keep the preset's
/// values.
#[derive(Clone, Debug, Args)]
pub struct ModelArgs {
    /// Starting point for every other flag.
    #[arg(long, value_enum, default_value = "reference")]
    pub preset: Preset,
    /// Scheduling policy.
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// KV mode: reserve (loss system) or paged (queueing + preemption).
    #[arg(long, value_enum)]
    pub kv_mode: Option<KvModeArg>,
    /// KV block size [tokens].
    #[arg(long)]
    pub block_size: Option<u32>,
    /// Prefix cache (paged KV only): `apc` keeps full KV blocks keyed by their tokens and
    /// everything before them, as vLLM's automatic prefix caching does, so a request
    /// whose prompt begins like an earlier one skips that prefill; `slot` is
    /// llama-server's per-slot prompt cache (--preset llama-cpp only: each slot keeps its
    /// last sequence, a request reuses the common prefix with the slot it takes); `off`
    /// (default). Hits come from --system-prompt, --conversations, a Mooncake --trace's
    /// hash_ids, and a preempted request's own blocks.
    #[arg(long, value_enum, value_name = "MODE")]
    pub prefix_cache: Option<super::shared::PrefixCacheArg>,
    /// Shared system prompts: a SHARE of the requests begin with one of GROUPS system
    /// prompts of TOKENS tokens (added to the drawn prompt), group g (from 0) chosen with
    /// probability ∝ 1/(g+1)^ZIPF (default 0: all alike). Not with --trace.
    #[arg(long, value_name = "G:SHARE:TOKENS[:ZIPF]")]
    pub system_prompt: Option<String>,
    /// Multi-turn conversations: the arrivals start conversations of MEAN_TURNS turns on
    /// average (geometric, at most MAX_TURNS); each next turn arrives an exponential
    /// THINK_S [s] later and resends the conversation so far plus a new message (lengths
    /// from --lengths). Combines with --system-prompt. Not with --trace.
    #[arg(long, value_name = "MEAN:MAX:THINK_S")]
    pub conversations: Option<String>,
    /// Per-iteration token budget (chunked) [tokens].
    #[arg(long)]
    pub budget: Option<u32>,
    /// Request lengths.
    #[arg(long, value_enum)]
    pub lengths: Option<LengthsArg>,
    /// Prompt tokens for --lengths fixed.
    #[arg(long, default_value_t = 256)]
    pub prompt: u32,
    /// Output tokens for --lengths fixed.
    #[arg(long, default_value_t = 128)]
    pub output: u32,
    /// Arrival process (`trace`: the timestamps of --trace FILE).
    #[arg(long, value_enum)]
    pub arrivals: Option<ArrivalArg>,
    /// Gamma shape k (c_a² = 1/k) for --arrivals gamma.
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Arrivals from a file (implies --arrivals trace): a JSON list of requests
    /// `[{"arrival": s, "prompt": tokens, "output": tokens}, …]` (as `validate` writes in
    /// `sim/trace-<rate>.json`), a JSON list of arrival times [s] (lengths from --lengths),
    /// or a workload JSON as `run --workload` takes. The trace fixes the arrival times, so
    /// there is no rate to give; the horizon defaults to the last arrival (at least the
    /// preset's).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Format of --trace FILE (default: detected from its first line): `json` (the lists
    /// and workloads above), `mooncake` (JSONL: `timestamp` [ms], `input_length`,
    /// `output_length`, `hash_ids`), `burstgpt` (CSV: `Timestamp` [s], `Request tokens`,
    /// `Response tokens`; rows with 0 response tokens are failed requests, skipped and
    /// counted) or `azure` (CSV: `TIMESTAMP` date and time, `ContextTokens`,
    /// `GeneratedTokens`). Time 0 is the first line's timestamp.
    #[arg(long, value_enum, value_name = "FORMAT", requires = "trace")]
    pub trace_format: Option<TraceFormatArg>,
    /// The trace read once for every grid point.
    #[arg(skip)]
    pub trace_read: std::sync::OnceLock<TraceFile>,
    /// Cost model: `reference`, `a10g` (the measured vLLM/A10G table),
    /// `roofline:GPU:MODEL[:MEM_UTIL[:TP]]` (e.g. `roofline:H100:Llama-3.1-8B:0.9:1`; sets the KV
    /// capacity too unless --kv is given), or a JSON file of a CostModel (from `bench-native fit`:
    /// the model its `default` names, `ubatch` for llama.cpp and `linear` for vLLM, or
    /// `fit.json#linear` / `#table` / `#ubatch`; with its measured overheads and wake-up after
    /// idle).
    #[arg(long)]
    pub cost: Option<String>,
    /// Per-request front-end overhead [ms] (HTTP, tokenization, the server's task queue):
    /// each request reaches the scheduler this long after it arrives, and TTFT and E2E
    /// include it. Default: a `fit` file's `overhead_s`, else 0.
    #[arg(long)]
    pub overhead_ms: Option<f64>,
    /// Front-end overhead per prompt token [µs] (tokenization and the hand-off grow with
    /// the prompt), added to --overhead-ms. Default: a `fit` file's
    /// `overhead_per_token_s`, else 0.
    #[arg(long, value_name = "US")]
    pub overhead_per_token_us: Option<f64>,
    /// Scheduling overhead of every engine step [ms], added to every iteration's cost (the
    /// CPU work between forward passes; for a cost model that prices only the forward
    /// pass, such as a roofline). Default: a cost file's `step_overhead_s`, else 0.
    #[arg(long, value_name = "MS")]
    pub step_overhead_ms: Option<f64>,
    /// Arrivals stop at this time [s].
    #[arg(long)]
    pub horizon: Option<f64>,
    /// With a roofline cost: take the KV capacity from the GPU's memory (set by the caller
    /// when no explicit KV capacity was given).
    #[arg(skip)]
    pub roofline_kv: bool,
    /// Let accepted requests finish after the horizon (default for --preset vllm).
    #[arg(long, conflicts_with = "cut")]
    pub drain: bool,
    /// Stop everything at the horizon (default for --preset reference).
    #[arg(long)]
    pub cut: bool,
    /// Cap prompt + output at this many tokens.
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Threshold admission: accept an arrival only while fewer than N requests are in the
    /// system (waiting + running); the others are rejected. `simulate --dp-slo` computes
    /// the threshold from a p99 TTFT target instead.
    #[arg(long, value_name = "N")]
    pub max_in_system: Option<u32>,
    /// TTFT SLO for SLO goodput [s].
    #[arg(long)]
    pub slo_ttft: Option<f64>,
    /// TPOT SLO for SLO goodput [s].
    #[arg(long)]
    pub slo_tpot: Option<f64>,
    /// Refuse to start when the command would simulate more requests than this, estimated
    /// before it starts (rate × horizon per run, summed over a sweep's runs). Default: the
    /// engine's limits, 20,000,000 for one run, 50,000,000 for all runs of a sweep or
    /// compare.
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,
    /// The drain cap [horizons]: a drained run (--drain, or a preset that drains) may go
    /// on this many horizons after its arrivals stop. A run whose backlog the server could
    /// not serve within it even at its best case (estimated from the cost model before it
    /// starts) is refused; one that still gets there stops and is reported unstable.
    /// Default 1000.
    #[arg(long, value_name = "N")]
    pub max_drain_horizons: Option<f64>,
}

impl ModelArgs {
    /// Checks the flags that do not depend on the grid point.
    ///
    /// # Errors
    /// [`ArgError`] naming the first flag out of range or the conflicting flags.
    pub fn check_flags(&self) -> Result<(), ArgError> {
        let pos = |flag, what, x: Option<f64>| match x {
            Some(v) if !(v.is_finite() && v > 0.0) => {
                Err(ArgError::range(flag, what, super::num(v)))
            }
            _ => Ok(()),
        };
        if self.block_size == Some(0) {
            return Err(ArgError::range("--block-size", "at least 1 [tokens]", 0));
        }
        if self.budget == Some(0) {
            return Err(ArgError::range("--budget", "at least 1 [tokens]", 0));
        }
        if self.lengths == Some(LengthsArg::Fixed) {
            if self.prompt == 0 {
                return Err(ArgError::range("--prompt", "at least 1 [tokens]", 0));
            }
            if self.output == 0 {
                return Err(ArgError::range("--output", "at least 1 [tokens]", 0));
            }
        }
        if self.arrivals == Some(ArrivalArg::Gamma) {
            limits::check_burstiness(self.burstiness)?;
        }
        match (self.arrivals, &self.trace) {
            (Some(ArrivalArg::Trace), None) => {
                return Err(ArgError::Conflict(
                    "--arrivals trace needs --trace FILE (the timestamps)".into(),
                ))
            }
            (Some(a), Some(_)) if a != ArrivalArg::Trace => {
                return Err(ArgError::Conflict(format!(
                    "--trace FILE gives the arrivals; it cannot be combined with --arrivals {}",
                    a.to_possible_value()
                        .map_or("?".into(), |v| v.get_name().to_string())
                )))
            }
            _ => {}
        }
        for (flag, x) in [
            ("--overhead-ms", self.overhead_ms),
            ("--overhead-per-token-us", self.overhead_per_token_us),
            ("--step-overhead-ms", self.step_overhead_ms),
        ] {
            if let Some(v) = x.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(ArgError::range(flag, "a finite number >= 0", super::num(v)));
            }
        }
        pos("--horizon", "a finite number > 0 [s]", self.horizon)?;
        if let Some(h) = self.horizon.filter(|&h| h > limits::MAX_HORIZON_S) {
            return Err(ArgError::range(
                "--horizon",
                "at most 1e9 [s]",
                super::num(h),
            ));
        }
        pos("--slo-ttft", "a finite number > 0 [s]", self.slo_ttft)?;
        pos("--slo-tpot", "a finite number > 0 [s]", self.slo_tpot)?;
        if let Some(m) = self.max_model_len.filter(|&m| m < 2) {
            return Err(ArgError::range(
                "--max-model-len",
                "at least 2 (one prompt and one output token)",
                m,
            ));
        }
        if self.max_in_system == Some(0) {
            return Err(ArgError::range("--max-in-system", "at least 1", 0));
        }
        super::shared::shared_tokens(self.system_prompt.as_deref(), self.conversations.as_deref())?;
        if self.trace.is_some() && (self.system_prompt.is_some() || self.conversations.is_some()) {
            return Err(ArgError::Conflict(
                "--system-prompt and --conversations make their own requests; a --trace file \
                 gives the requests (a Mooncake trace's hash_ids say what they share)"
                    .into(),
            ));
        }
        limits::check_drain_horizons(self.max_drain_horizons)?;
        Ok(())
    }

    /// The trace of `--trace`, if any.
    ///
    /// # Errors
    /// The file cannot be read or is not a trace.
    pub fn trace_file(&self) -> anyhow::Result<Option<TraceFile>> {
        let Some(path) = self.trace.as_deref() else {
            return Ok(None);
        };
        if let Some(t) = self.trace_read.get() {
            return Ok(Some(t.clone()));
        }
        let t = TraceFile::read_as(path, self.trace_format)?;
        if let Some(note) = t.import_note() {
            eprintln!("{note}");
        }
        Ok(Some(self.trace_read.get_or_init(|| t).clone()))
    }

    /// The configuration at one grid point, every value checked against the flag it came
    /// from (`flags` names the point's own: `--rate` or `--rates`…), the run's work
    /// within the limits of a command of `scope`.
    ///
    /// # Errors
    /// [`ArgError`] naming the flag; a cost or trace file that cannot be read; what the
    /// engine still refuses (its own message).
    pub fn config(&self, p: Point, flags: PointFlags, scope: Scope) -> anyhow::Result<SimConfig> {
        self.check_flags()?;
        let trace = self.trace_file()?;
        if trace.is_none() && !(p.rate.is_finite() && p.rate > 0.0 && p.rate <= limits::MAX_RATE) {
            return Err(ArgError::range(
                flags.rate,
                "a finite number > 0 and at most 1e9 [req/s]",
                super::num(p.rate),
            )
            .into());
        }
        let slot_context = self.preset == Preset::LlamaCpp && self.max_model_len.is_none();
        if slot_context && p.batch >= 1 && p.kv / u64::from(p.batch) < 2 {
            return Err(ArgError::Conflict(format!(
                "--preset llama-cpp gives each of the {b} slots ({bf} {b}) {kf} / {b} = {slot} tokens \
                 of context ({kf} {k}); a request needs at least 2: raise {kf} to at least {min}",
                b = p.batch,
                bf = flags.batch,
                kf = flags.kv,
                k = p.kv,
                slot = p.kv / u64::from(p.batch),
                min = 2 * u64::from(p.batch),
            ))
            .into());
        }
        let mut c = self.preset_config(p);
        self.apply_server(&mut c);
        self.apply_workload(&mut c, p.rate, trace)?;
        self.apply_cost(&mut c)?;
        self.apply_run(&mut c);
        super::shared::check_prefix_cache(&c)?;
        check_point(&c, flags)?;
        let work = self.work_limits(scope);
        let command = match scope {
            Scope::Run => "this run",
            Scope::Sweep => "one run of this grid",
        };
        limits::check(
            command,
            c.expected_requests(),
            "rate × horizon",
            work.max_requests_per_run,
        )?;
        limits::check_drain(command, &c, work.max_drain_horizons)?;
        c.validate_with(&work).context("invalid configuration")?;
        Ok(c)
    }

    /// The work limits of a command of `scope` (`--max-requests` in place of the default).
    pub fn work_limits(&self, scope: Scope) -> Limits {
        limits::work_limits(self.max_requests, self.max_drain_horizons, scope)
    }

    fn preset_config(&self, p: Point) -> SimConfig {
        let mut c = match self.preset {
            Preset::Reference => SimConfig::reference(p.rate, p.batch, p.kv),
            Preset::Vllm => SimConfig::vllm_like(p.rate),
            Preset::LlamaCpp => {
                SimConfig::llama_cpp(p.rate, p.batch, p.kv, self.budget.unwrap_or(2048))
            }
            Preset::VllmV1 => {
                let bs = self.block_size.unwrap_or(16).max(1);
                SimConfig {
                    server: ServerConfig::vllm_v1(
                        p.batch,
                        p.kv / u64::from(bs),
                        bs,
                        self.budget.unwrap_or(2048),
                    ),
                    ..SimConfig::vllm_like(p.rate)
                }
            }
        };
        c.server.max_batch = p.batch;
        c.server.kv_tokens = p.kv;
        c.seed = p.seed;
        c
    }

    fn apply_server(&self, c: &mut SimConfig) {
        if let Some(p) = self.policy {
            c.server.policy = p.into();
        }
        if let Some(m) = self.kv_mode {
            c.server.kv_mode = match m {
                KvModeArg::Reserve => KvMode::Reserve,
                KvModeArg::Paged => KvMode::Paged,
            };
        }
        if let Some(b) = self.block_size {
            c.server.block_size = b;
        }
        if let Some(b) = self.budget {
            c.server.token_budget = b;
        }
        if let Some(n) = self.max_in_system {
            c.server.admission = Admission::MaxInSystem { max_in_system: n };
        }
        if let Some(p) = self.prefix_cache {
            c.server.prefix_cache = p.into();
        }
    }

    fn apply_workload(
        &self,
        c: &mut SimConfig,
        rate: f64,
        trace: Option<TraceFile>,
    ) -> anyhow::Result<()> {
        if let Some(l) = self.lengths {
            c.workload.lengths = match l {
                LengthsArg::Reference => LengthDist::reference(),
                LengthsArg::Sharegpt => LengthDist::sharegpt(),
                LengthsArg::Fixed => LengthDist::Fixed {
                    prompt: self.prompt,
                    output: self.output,
                },
                LengthsArg::Mix => LengthDist::short_long_mix(),
            };
        }
        match (self.arrivals, trace) {
            (_, Some(t)) => {
                let last = t.last_arrival();
                if self.lengths.is_none() {
                    if let Some(l) = t.lengths.clone() {
                        c.workload.lengths = l;
                    }
                }
                if t.max_model_len.is_some() {
                    c.workload.max_model_len = t.max_model_len;
                }
                c.workload.arrivals = t.arrivals;
                // A Mooncake trace's block ids name what its requests share: with the
                // prefix cache on, they key its blocks.
                if !c.server.prefix_cache.is_off() {
                    if let Some(blocks) = t.imported.and_then(|i| i.blocks) {
                        c.workload.shared = Some(engine::workload::SharedTokens::Blocks { blocks });
                    }
                }
                if self.horizon.is_none() {
                    c.horizon_s = c.horizon_s.max(last);
                }
            }
            (Some(ArrivalArg::Poisson), None) => {
                c.workload.arrivals = ArrivalProcess::Poisson { rate };
            }
            (Some(ArrivalArg::Gamma), None) => {
                c.workload.arrivals = ArrivalProcess::Gamma {
                    rate,
                    burstiness: self.burstiness,
                };
            }
            (Some(ArrivalArg::Deterministic), None) => {
                c.workload.arrivals = ArrivalProcess::Deterministic { rate };
            }
            (Some(ArrivalArg::Trace) | None, None) => {}
        }
        if let Some(shared) = super::shared::shared_tokens(
            self.system_prompt.as_deref(),
            self.conversations.as_deref(),
        )? {
            c.workload.shared = Some(shared);
        }
        c.workload.max_model_len = self.max_model_len.or(c.workload.max_model_len);
        Ok(())
    }

    fn apply_cost(&self, c: &mut SimConfig) -> anyhow::Result<()> {
        if let Some(cost) = &self.cost {
            if let Some(spec) = cost.strip_prefix("roofline:") {
                let (model, kv) = roofline(spec)?;
                c.cost = model;
                if self.roofline_kv {
                    c.server.kv_tokens = kv;
                }
            } else {
                let (model, overheads) = load_cost(cost)?;
                c.cost = model;
                overheads.apply(&mut c.server);
            }
        }
        if let Some(ms) = self.overhead_ms {
            c.server.overhead_s = ms / 1e3;
        }
        if let Some(us) = self.overhead_per_token_us {
            c.server.overhead_per_token_s = us / 1e6;
        }
        if let Some(ms) = self.step_overhead_ms {
            c.server.step_overhead_s = ms / 1e3;
        }
        Ok(())
    }

    fn apply_run(&self, c: &mut SimConfig) {
        if let Some(h) = self.horizon {
            c.horizon_s = h;
        }
        if self.drain {
            c.end = EndRule::Drain;
        }
        if self.cut {
            c.end = EndRule::Cut;
        }
        if self.preset == Preset::Reference
            && self.policy.is_some_and(|p| p != PolicyArg::Continuous)
        {
            // Outside reference mode proper, vLLM's convention: prefill emits token 1.
            c.first_token = FirstToken::AfterPrefill;
        }
        if let Some(x) = self.slo_ttft {
            c.metrics.slo_ttft_s = x;
        }
        if let Some(x) = self.slo_tpot {
            c.metrics.slo_tpot_s = x;
        }
    }
}

/// Checks one grid point's B and K against the rest of its configuration, naming the
/// point's flags (`flags`): B and K ≥ 1, one KV block fits in K, and K holds the smallest
/// request the workload makes.
///
/// # Errors
/// [`ArgError`] with the values the user set.
pub fn check_point(c: &SimConfig, flags: PointFlags) -> Result<(), ArgError> {
    let s = &c.server;
    let (b, k, bs) = (s.max_batch, s.kv_tokens, u64::from(s.block_size));
    if b == 0 {
        return Err(ArgError::range(flags.batch, "at least 1", 0));
    }
    if b > limits::MAX_BATCH {
        return Err(ArgError::range(flags.batch, "at most 65536", b));
    }
    if k == 0 {
        return Err(ArgError::range(flags.kv, "at least 1 [tokens]", 0));
    }
    if k > limits::MAX_KV_TOKENS {
        return Err(ArgError::range(flags.kv, "at most 2^40 [tokens]", k));
    }
    if bs > k {
        return Err(ArgError::Conflict(format!(
            "{kf} {k} holds no KV block of {bs} tokens (--block-size {bs}): raise {kf} or lower --block-size",
            kf = flags.kv
        )));
    }
    let need = match &c.workload.arrivals {
        ArrivalProcess::Trace { requests } => requests
            .iter()
            .map(|r| u64::from(r.prompt) + u64::from(r.output))
            .min()
            .unwrap_or(2),
        _ => c.workload.lengths.min_total(),
    };
    let need = c
        .workload
        .max_model_len
        .map_or(need, |cap| need.min(u64::from(cap)));
    if bs >= 1 && need.div_ceil(bs) > k / bs {
        let blocks = if bs > 1 {
            format!(" in {bs}-token blocks (--block-size)")
        } else {
            String::new()
        };
        return Err(ArgError::Conflict(format!(
            "{kf} {k} cannot hold one request: the smallest the workload makes is {need} tokens \
             (prompt + output){blocks}; raise {kf} to at least {min}",
            kf = flags.kv,
            min = need.div_ceil(bs) * bs
        )));
    }
    Ok(())
}
