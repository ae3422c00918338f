//! `bench-native run`: load test of an OpenAI-compatible streaming endpoint, open loop (or
//! closed-loop users, `run/users.rs`).
//!
//! * Arrivals come from the engine's [`Workload`] (Poisson, gamma, deterministic, trace) and
//!   are sent at absolute times `t0 + arrival` by a dedicated sender thread (OS sleep, then
//!   a short spin; real-time priority where permitted): no drift, no coordinated
//!   omission. Each row records the intended and the actual send time; latency is measured
//!   from the **intended** time, so client-side queueing (a `--max-concurrency` cap, a slow
//!   client) counts against the server, never silently disappears.
//! * Output length is forced (`max_tokens` + `ignore_eos`, optionally `min_tokens`); token
//!   counts come from `usage`. Every text chunk is timestamped (max gap, stalls).
//! * Files (all in `--out`): `requests.csv` (appended and flushed as each request
//!   finishes), `summary.json` + `summary.csv`, `metadata.json`, `metrics.csv` (`/metrics`
//!   sampled every `--metrics-interval`).
//! * Failures (HTTP errors, cut or stalled streams, a dead server) are error rows; the run
//!   goes on. Ctrl-C stops sending, marks in-flight requests `unfinished`, and still
//!   writes the summary of what finished. A request is `completed` only when its stream
//!   parsed, tokens arrived and `usage` is consistent ([`crate::client::StreamResult::judge`]);
//!   a run whose every request failed ends with a failure exit status.

mod row;
mod users;

use row::client_stats;
pub use users::Users;

pub use row::{
    error_kind, failure_reasons, failures_text, measured_prefix, prefix_text, summary_text,
    ClientStats, RequestRow, REQUEST_COLUMNS,
};

use crate::client::{
    check_chars_per_token, Api, ClientError, Endpoint, EndpointConfig, PreparedRequest,
    PromptBuilder,
};
use engine::metrics::{MetricsConfig, Summary};
use engine::record::{Outcome, RequestRecord};
use engine::workload::{ArrivalProcess, LengthDist, Request, UserSource, Workload};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use serde_json::{json, Value};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::Instant;

const RUN_EXAMPLES: &str = "\
Examples:
  # 2 req/s Poisson for 60 s, ShareGPT lengths, against llama-server on :8080
  bench-native run --url http://127.0.0.1:8080 --rate 2 --duration 60 --out results/run-2rps

  # 40 requests of exactly 128 prompt / 64 output tokens, bursty arrivals, at most 8 in flight
  bench-native run --rate 4 --arrivals gamma --burstiness 0.5 --lengths fixed \\
      --prompt-tokens 128 --output-tokens 64 --num-requests 40 --max-concurrency 8

  # shared system prompts, llama-server reusing each slot's cached prefix
  bench-native run --rate 2 --duration 60 --lengths fixed --prompt-tokens 32 \\
      --output-tokens 16 --system-prompt 2:0.8:256 --cache-prompt

  # 8 closed-loop users in multi-turn chats (each turn resends the chat so far), 2 s think time
  bench-native run --users 8 --think 2 --conversations 4:10:30 --duration 120 --cache-prompt

  # vLLM chat endpoint with an API key from $MY_KEY (never printed)
  bench-native run --url http://gpu:8000 --api chat --model Qwen/Qwen2.5-1.5B-Instruct \\
      --api-key-env MY_KEY --min-tokens --rate 1 --duration 300

Files written to --out: requests.csv (one row per request, flushed as it finishes),
summary.json, summary.csv (sweep columns), summary_all.csv, metadata.json (server props/version, KV blocks, workload, seed),
metrics.csv (the server's /metrics every --metrics-interval seconds).";

/// Arrival process kinds for the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrivals {
    Poisson,
    Gamma,
    Deterministic,
}

/// Length distribution kinds for the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lengths {
    /// The embedded 5,000 ShareGPT (prompt, output) pairs.
    Sharegpt,
    /// Lognormal prompt median 256 σ 0.55, output median 128 σ 0.70.
    Reference,
    /// Every request --prompt-tokens → --output-tokens.
    Fixed,
}

/// Connection options shared by `run` and `microbench`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Server base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Which OpenAI route to drive.
    #[arg(long, value_enum, default_value_t = Api::Completions)]
    pub api: Api,
    /// Model name (checked against /v1/models; default: the first one listed).
    #[arg(long)]
    pub model: Option<String>,
    /// Name of the environment variable holding the API key (sent as a bearer token).
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Do not send ignore_eos (outputs may then be shorter than asked).
    #[arg(long)]
    pub no_ignore_eos: bool,
    /// Also send min_tokens = max_tokens (vLLM; llama.cpp ignores it).
    #[arg(long)]
    pub min_tokens: bool,
    /// Characters per token when the server has no /tokenize route.
    #[arg(long, default_value_t = 4.0)]
    pub chars_per_token: f64,
    /// Never use /tokenize; size prompts by --chars-per-token only.
    #[arg(long)]
    pub no_tokenize: bool,
    /// llama.cpp: let the server reuse the prompt prefix its slot still holds
    /// (`cache_prompt: true`, its slot cache); without it every prompt is prefilled in
    /// full (`cache_prompt: false`).
    #[arg(long)]
    pub cache_prompt: bool,
    /// Per-request timeout [s] (whole request, stream included).
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
}

impl ServerArgs {
    /// The endpoint configuration (reads the API key from the environment).
    pub fn endpoint(&self) -> EndpointConfig {
        EndpointConfig {
            url: self.url.clone(),
            api: self.api,
            model: self.model.clone(),
            api_key: std::env::var(&self.api_key_env)
                .ok()
                .filter(|k| !k.is_empty()),
            ignore_eos: !self.no_ignore_eos,
            min_tokens: self.min_tokens,
            cache_prompt: self.cache_prompt,
            // an invalid --timeout is reported by the command; keep the default here
            control_timeout: Duration::try_from_secs_f64(self.timeout)
                .ok()
                .filter(|d| !d.is_zero())
                .unwrap_or(Duration::from_secs(10)),
        }
    }
}

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
#[command(after_help = RUN_EXAMPLES)]
pub struct RunArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Mean arrival rate [req/s].
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Arrival process.
    #[arg(long, value_enum, default_value_t = Arrivals::Poisson)]
    pub arrivals: Arrivals,
    /// Gamma shape k (squared CV = 1/k; k < 1 is burstier than Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Request lengths.
    #[arg(long, value_enum, default_value_t = Lengths::Sharegpt)]
    pub lengths: Lengths,
    /// Prompt length for --lengths fixed [tokens].
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: u32,
    /// Output length for --lengths fixed [tokens].
    #[arg(long, default_value_t = 64)]
    pub output_tokens: u32,
    /// A workload JSON (engine `Workload`, e.g. a trace); overrides the options above.
    #[arg(long)]
    pub workload: Option<PathBuf>,
    /// Shared system prompts, GROUPS:SHARE:TOKENS[:ZIPF] as in `simulate`: that share of
    /// the requests begins with one of GROUPS system prompts of TOKENS tokens, the same
    /// text for every request of a group (and a different text for every --seed), so a
    /// prefix cache can hit on it (docs/model.md, Shared tokens).
    #[arg(
        long,
        value_name = "G:SHARE:TOKENS[:ZIPF]",
        conflicts_with = "workload"
    )]
    pub system_prompt: Option<String>,
    /// Multi-turn conversations, MEAN_TURNS:MAX_TURNS:THINK_S as in `simulate`: each turn
    /// resends the conversation so far (the earlier messages and the server's own answers)
    /// and a new message. Needs --users: a turn goes out after the answer to the one
    /// before.
    #[arg(long, value_name = "MEAN:MAX:THINK_S", requires = "users")]
    pub conversations: Option<String>,
    /// Closed-loop users instead of open-loop arrivals: U users, each sending its next
    /// request --think seconds after the answer to its last one ends, as `simulate
    /// --users` does (the same requests for the same --seed). --rate and --arrivals do not
    /// apply; --duration is when the users stop sending.
    #[arg(
        long,
        value_name = "U",
        conflicts_with_all = ["max_concurrency", "rate", "arrivals", "burstiness"]
    )]
    pub users: Option<u32>,
    /// The users' mean think time [s] (exponential; 0 sends at once).
    #[arg(long, default_value_t = 0.0, value_name = "S", requires = "users")]
    pub think: f64,
    /// Cap prompt + output to this many tokens (the server's max model length).
    #[arg(long)]
    pub max_model_len: Option<u32>,
    /// Arrivals are generated over [0, duration] [s].
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// At most this many requests (the first N arrivals).
    #[arg(long)]
    pub num_requests: Option<usize>,
    /// Seed of the arrival and length streams.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Requests sent one by one before the run (not recorded).
    #[arg(long, default_value_t = 2)]
    pub warmup_requests: usize,
    /// Arrivals before this time are written but left out of the summary [s].
    #[arg(long, default_value_t = 0.0)]
    pub warmup_s: f64,
    /// At most this many requests in flight; the rest wait in the client (recorded as
    /// client queue time, never dropped).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// A gap between chunks longer than this is a stall [ms].
    #[arg(long, default_value_t = 50.0)]
    pub stall_ms: f64,
    /// TTFT SLO for goodput [s].
    #[arg(long, default_value_t = 1.0)]
    pub slo_ttft: f64,
    /// TPOT SLO for goodput [s].
    #[arg(long, default_value_t = 0.05)]
    pub slo_tpot: f64,
    /// Sample /metrics every this many seconds (0 = never). Through a load balancer, 0:
    /// each sample is a request the balancer routes, taking a turn of round-robin.
    #[arg(long, default_value_t = 1.0)]
    pub metrics_interval: f64,
    /// Output directory.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("invalid workload: {0}")]
    Config(#[from] engine::ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("{0}")]
    Invalid(String),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A validated run configuration (what the library entry point takes).
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub endpoint: EndpointConfig,
    pub workload: Workload,
    pub seed: u64,
    /// Arrival horizon [s].
    pub horizon_s: f64,
    pub max_requests: Option<usize>,
    pub warmup_requests: usize,
    pub max_concurrency: Option<usize>,
    /// Closed-loop users in place of the workload's arrivals.
    pub users: Option<Users>,
    pub timeout: Duration,
    pub chars_per_token: f64,
    pub use_tokenizer: bool,
    pub metrics: MetricsConfig,
    /// `/metrics` sampling period; `None` = no scraping.
    pub metrics_interval: Option<Duration>,
    pub out_dir: PathBuf,
}

impl RunConfig {
    /// A small default configuration against `url`, writing to `out_dir` (tests start here).
    pub fn new(url: &str, out_dir: impl Into<PathBuf>) -> RunConfig {
        RunConfig {
            endpoint: EndpointConfig {
                url: url.to_string(),
                ..EndpointConfig::default()
            },
            workload: Workload::default(),
            seed: 0,
            horizon_s: 10.0,
            max_requests: None,
            warmup_requests: 1,
            max_concurrency: None,
            users: None,
            timeout: Duration::from_secs(60),
            chars_per_token: 4.0,
            use_tokenizer: true,
            metrics: MetricsConfig::default(),
            metrics_interval: Some(Duration::from_secs(1)),
            out_dir: out_dir.into(),
        }
    }
}

impl TryFrom<&RunArgs> for RunConfig {
    type Error = RunError;

    fn try_from(a: &RunArgs) -> Result<RunConfig, RunError> {
        let workload = match &a.workload {
            Some(p) => crate::args::trace::read_workload(p).map_err(|e| match e {
                crate::args::trace::WorkloadFileError::Io { source, .. } => io_err(p)(source),
                e => RunError::Invalid(e.to_string()),
            })?,
            None => {
                let arrivals = match a.arrivals {
                    Arrivals::Poisson => ArrivalProcess::Poisson { rate: a.rate },
                    Arrivals::Gamma => ArrivalProcess::Gamma {
                        rate: a.rate,
                        burstiness: a.burstiness,
                    },
                    Arrivals::Deterministic => ArrivalProcess::Deterministic { rate: a.rate },
                };
                let lengths = match a.lengths {
                    Lengths::Sharegpt => LengthDist::sharegpt(),
                    Lengths::Reference => LengthDist::reference(),
                    Lengths::Fixed => LengthDist::Fixed {
                        prompt: a.prompt_tokens,
                        output: a.output_tokens,
                    },
                };
                let shared = crate::args::shared::shared_tokens(
                    a.system_prompt.as_deref(),
                    a.conversations.as_deref(),
                )
                .map_err(|e| RunError::Invalid(e.to_string()))?;
                Workload {
                    arrivals,
                    lengths,
                    max_model_len: a.max_model_len,
                    shared,
                }
            }
        };
        if !(a.server.timeout > 0.0 && a.server.timeout.is_finite()) {
            return Err(RunError::Invalid("--timeout must be > 0".into()));
        }
        if a.max_concurrency == Some(0) {
            return Err(RunError::Invalid("--max-concurrency must be >= 1".into()));
        }
        check_chars_per_token(a.server.chars_per_token, 0, 0).map_err(RunError::Invalid)?;
        let users = a.users.map(|count| Users {
            count,
            think_s: a.think,
        });
        Ok(RunConfig {
            users,
            endpoint: a.server.endpoint(),
            workload,
            seed: a.seed,
            horizon_s: a.duration,
            max_requests: a.num_requests,
            warmup_requests: a.warmup_requests,
            max_concurrency: a.max_concurrency,
            timeout: Duration::from_secs_f64(a.server.timeout),
            chars_per_token: a.server.chars_per_token,
            use_tokenizer: !a.server.no_tokenize,
            metrics: MetricsConfig {
                stall_threshold_s: a.stall_ms / 1e3,
                slo_ttft_s: a.slo_ttft,
                slo_tpot_s: a.slo_tpot,
                warmup_s: a.warmup_s,
            },
            metrics_interval: (a.metrics_interval > 0.0)
                .then(|| Duration::from_secs_f64(a.metrics_interval)),
            out_dir: a.out.clone(),
        })
    }
}

/// What the server's own counters (`/metrics`) say happened during the run: the
/// difference between a scrape just before the first send and one after the last
/// request finished. `None` = the server does not export that counter.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerCounters {
    /// `vllm:num_preemptions_total` [count].
    pub preemptions: Option<f64>,
    /// `vllm:prompt_tokens_total` / `llamacpp:prompt_tokens_total` [tokens].
    pub prompt_tokens: Option<f64>,
    /// `vllm:generation_tokens_total` / `llamacpp:tokens_predicted_total` [tokens].
    pub generation_tokens: Option<f64>,
}

impl ServerCounters {
    fn between(before: &[Option<f64>; 7], after: &[Option<f64>; 7]) -> ServerCounters {
        let col = |name: &str| crate::prom::COLUMNS.iter().position(|c| *c == name);
        let delta = |name: &str| {
            let i = col(name)?;
            Some((after[i]? - before[i]?).max(0.0))
        };
        ServerCounters {
            preemptions: delta("preemptions_total"),
            prompt_tokens: delta("prompt_tokens_total"),
            generation_tokens: delta("generation_tokens_total"),
        }
    }
}

async fn scrape_once(ep: &Endpoint) -> Option<[Option<f64>; 7]> {
    let text = ep.get_text("/metrics").await.ok()?;
    Some(crate::prom::columns(&crate::prom::parse(&text)))
}

/// What a run produced (also on disk in `out_dir`).
#[derive(Debug)]
pub struct RunReport {
    /// Rows in finishing order.
    pub rows: Vec<RequestRow>,
    pub summary: Summary,
    pub client: ClientStats,
    /// The server's counters over the run (when it exports `/metrics`).
    pub server: Option<ServerCounters>,
    pub metadata: Value,
    /// `/metrics` samples written.
    pub metrics_samples: usize,
    /// Stopped early (Ctrl-C).
    pub interrupted: bool,
    /// Requests in the schedule [count].
    pub scheduled: usize,
    /// How the sender thread was scheduled (real-time if permitted).
    pub sender_priority: SenderPriority,
    /// The prefix cache as the server reported it per request, if it did.
    pub prefix: Option<engine::metrics::PrefixSummary>,
}

/// Everything a server says about itself that helps interpret a run.
pub async fn server_metadata(ep: &Endpoint) -> Value {
    let mut m = json!({
        "base_url": ep.base, "model": ep.model, "server_kind": ep.kind, "api": ep.api,
        "context_tokens_per_sequence": ep.context_tokens,
    });
    for (key, path) in [
        ("props", "/props"),
        ("slots", "/slots"),
        ("version", "/version"),
        ("models", "/v1/models"),
    ] {
        if let Ok(v) = ep.get_json(path).await {
            m[key] = v;
        }
    }
    // KV capacity as the server reports it.
    let mut kv = json!({});
    if let Some(props) = m.get("props") {
        let n_ctx = props
            .pointer("/default_generation_settings/n_ctx")
            .and_then(Value::as_u64);
        let slots = props.get("total_slots").and_then(Value::as_u64);
        if let (Some(c), Some(s)) = (n_ctx, slots) {
            kv = json!({"block_size": 1, "blocks": c * s, "tokens": c * s, "slots": s, "tokens_per_slot": c,
                        "note": "llama.cpp: -c total KV tokens split equally over -np slots; token-granular"});
        }
    }
    if let Ok(text) = ep.get_text("/metrics").await {
        for s in crate::prom::parse(&text) {
            if s.name == "vllm:cache_config_info" {
                let get = |k| crate::prom::label(&s.labels, k).and_then(|v| v.parse::<u64>().ok());
                let (blocks, bs) = (get("num_gpu_blocks"), get("block_size"));
                kv = json!({"block_size": bs, "blocks": blocks, "tokens": blocks.zip(bs).map(|(a, b)| a * b),
                            "cache_config_info": s.labels});
            }
        }
        m["metrics_available"] = json!(true);
    } else {
        m["metrics_available"] = json!(false);
    }
    m["kv"] = kv;
    m
}

async fn scrape_metrics(
    ep: Endpoint,
    t0: Instant,
    every: Duration,
    path: PathBuf,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let Ok(file) = std::fs::File::create(&path) else {
        return 0;
    };
    let mut w = csv::Writer::from_writer(file);
    let mut header = vec!["t_s"];
    header.extend(crate::prom::COLUMNS);
    if w.write_record(&header).is_err() {
        return 0;
    }
    let _ = w.flush();
    let mut n = 0;
    let mut tick = tokio::time::interval_at(t0.max(Instant::now()), every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let t = t0.elapsed().as_secs_f64();
        let Ok(text) = ep.get_text("/metrics").await else {
            continue;
        };
        let cols = crate::prom::columns(&crate::prom::parse(&text));
        let mut rec = vec![format!("{t:.3}")];
        rec.extend(
            cols.iter()
                .map(|c| c.map(|x| x.to_string()).unwrap_or_default()),
        );
        if w.write_record(&rec).is_ok() && w.flush().is_ok() {
            n += 1;
        }
    }
    n
}

/// The sender thread sleeps (OS timer) until this long before a send time, then
/// busy-waits the rest. A sleep overshoots by ~50 µs (real-time) to ~110 µs (normal
/// priority, timer slack included), p99 < 170 µs, on the 2-core test VM.
const SPIN_WINDOW: Duration = Duration::from_micros(200);
/// Longest single sleep of the sender thread, so a stop (Ctrl-C) is seen promptly.
const SLEEP_SLICE: Duration = Duration::from_millis(10);

/// What every request task shares: the endpoint, the run clock, the limits, and where its
/// row goes.
#[derive(Clone, Debug)]
struct RequestCtx {
    ep: Endpoint,
    t0: Instant,
    timeout: Duration,
    stall_s: f64,
    sem: Option<Arc<Semaphore>>,
    sent: Arc<AtomicU64>,
    cancel: watch::Receiver<bool>,
    tx: mpsc::UnboundedSender<RequestRow>,
}

impl RequestCtx {
    /// Waits for a concurrency slot, sends, streams, and sends the row (or an
    /// `unfinished` row when the run is stopped first).
    async fn request(self, r: Request, req: PreparedRequest) {
        let tx = self.tx.clone();
        let (row, _) = self.serve(r, req).await;
        let _ = tx.send(row);
    }

    /// As [`RequestCtx::request`], and returns the answer's text if the request completed
    /// (`req` must keep it: [`PreparedRequest::keeping_text`]).
    async fn request_answered(self, r: Request, req: PreparedRequest) -> Option<String> {
        let tx = self.tx.clone();
        let (row, text) = self.serve(r, req).await;
        let answered = row.outcome == Outcome::Completed.as_str();
        let _ = tx.send(row);
        text.filter(|_| answered)
    }

    async fn serve(mut self, r: Request, req: PreparedRequest) -> (RequestRow, Option<String>) {
        let work = async {
            let _permit = match &self.sem {
                Some(s) => Some(
                    s.clone()
                        .acquire_owned()
                        .await
                        .expect("semaphore never closed"),
                ),
                None => None,
            };
            let queued = self
                .sem
                .as_ref()
                .map(|_| (self.t0.elapsed().as_secs_f64() - r.arrival).max(0.0));
            self.sent.fetch_add(1, Ordering::Relaxed);
            (
                queued,
                self.ep.stream_prepared(self.t0, req, self.timeout).await,
            )
        };
        // `work` first: on the sender thread's poll nothing may come before the stamp that
        // could wait for a lock held by a (preempted) runtime thread
        tokio::select! {
            biased;
            (q, mut res) = work => {
                let text = res.text.take();
                (RequestRow::from_result(&r, q, Some(res), self.stall_s), text)
            }
            _ = self.cancel.changed() => (RequestRow::from_result(&r, None, None, self.stall_s), None),
        }
    }

    /// Whether sending should end: the run was stopped, or nobody reads the rows any more.
    fn stopped(&self) -> bool {
        *self.cancel.borrow() || self.tx.is_closed()
    }
}

/// Blocks the calling thread until `at` (OS sleep, then a busy-wait over the last
/// [`SPIN_WINDOW`]). Returns `false`, early, if `stopped()` turns true.
fn wait_until(at: std::time::Instant, stopped: impl Fn() -> bool) -> bool {
    loop {
        if stopped() {
            return false;
        }
        let left = at.saturating_duration_since(std::time::Instant::now());
        if left <= SPIN_WINDOW {
            break;
        }
        std::thread::sleep((left - SPIN_WINDOW).min(SLEEP_SLICE));
    }
    while std::time::Instant::now() < at {
        std::hint::spin_loop();
    }
    true
}

/// The open-loop sender, on its own OS thread so that neither tokio's 1 ms timer wheel
/// nor the tasks parsing streams delay a send. At each send time it polls the request's
/// future once itself, inside the runtime's context: that first poll takes the
/// concurrency slot (if free), stamps the send time and hands the request to the HTTP
/// client (the pooled connection's task, or a new connection). Then the runtime owns the
/// future; its first poll there also replaces the no-op waker of the first poll.
fn send_schedule(
    rt: tokio::runtime::Handle,
    ctx: RequestCtx,
    reqs: Vec<Request>,
    prompts: PromptBuilder,
) -> SenderPriority {
    let priority = SenderPriority::raise();
    let t0 = ctx.t0.into_std();
    for r in reqs {
        let req = ctx
            .ep
            .prepare(&ctx.ep.body(&prompts.request_prompt(&r), r.output));
        let at = t0 + Duration::from_secs_f64(r.arrival);
        let mut task: Pin<Box<dyn Future<Output = ()> + Send>> =
            Box::pin(ctx.clone().request(r, req));
        if !wait_until(at, || ctx.stopped()) {
            break;
        }
        let _in_runtime = rt.enter();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if task.as_mut().poll(&mut cx).is_pending() {
            rt.spawn(task);
        }
    }
    priority
}

/// How the sender thread was scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SenderPriority {
    /// `SCHED_FIFO` at its lowest level: the sender runs as soon as it wakes, ahead of the
    /// stream-reading threads and of anything else on the machine that is not real-time.
    Realtime,
    /// The OS's default policy: real-time was not permitted (it needs root, `CAP_SYS_NICE`
    /// or an `RLIMIT_RTPRIO`), or not asked for (one core only, or not Linux). When other
    /// processes keep the cores busy, a wake-up can wait for their time slice
    /// (milliseconds).
    Normal,
}

impl SenderPriority {
    /// Asks for `SCHED_FIFO` for the calling thread; best effort, never fails. Not on a
    /// single core: the sender spins up to [`SPIN_WINDOW`] per request (at rate λ, up to
    /// λ × 200 µs per second: 4 % of a core at 200 req/s), which a real-time thread must
    /// not take from the only core the stream readers have.
    fn raise() -> SenderPriority {
        #[cfg(target_os = "linux")]
        {
            use thread_priority::{
                set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
                ThreadPriority, ThreadSchedulePolicy,
            };
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let fifo = ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo);
            if cores >= 2
                && set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, fifo)
                    .is_ok()
            {
                return SenderPriority::Realtime;
            }
        }
        SenderPriority::Normal
    }
}

fn status(pb: &ProgressBar, sent: u64, done: u64, errors: u64) {
    pb.set_message(format!(
        "{} in flight, {errors} errors",
        sent.saturating_sub(done)
    ));
}

/// Drives the load described by `cfg` against the server; `stop` resolving (e.g. Ctrl-C)
/// ends the run early. Writes every file into `cfg.out_dir` and returns the report.
///
/// # Errors
/// Pre-flight failures (unreachable server, unknown model, requests that cannot fit the
/// server's context, invalid workload) and file errors. Per-request failures are rows.
pub async fn run_load(
    cfg: &RunConfig,
    pb: &ProgressBar,
    stop: impl Future<Output = ()>,
) -> Result<RunReport, RunError> {
    check_chars_per_token(cfg.chars_per_token, 0, 0).map_err(RunError::Invalid)?;
    let conversations = matches!(
        cfg.workload.shared,
        Some(engine::workload::SharedTokens::Conversations { .. })
    );
    if conversations && cfg.users.is_none() {
        return Err(RunError::Invalid(
            "conversations need closed-loop users (--users): a turn resends the answer to \
             the one before, so it goes out after that answer"
                .into(),
        ));
    }
    let ep = Endpoint::connect(&cfg.endpoint).await?;
    let mut workload = cfg.workload.clone();
    if conversations && workload.max_model_len.is_none() {
        // A conversation ends before it outgrows the server's context.
        workload.max_model_len = ep.context_tokens.map(|c| c.min(u32::MAX as u64) as u32);
    }
    // The open loop's requests, drawn beforehand; the users draw theirs as they go (the
    // first few here are the warm-ups' lengths).
    let mut reqs: Vec<Request> = Vec::new();
    let limit = match cfg.users {
        None => cfg.max_requests,
        Some(_) => Some(cfg.warmup_requests),
    };
    for r in workload.stream(cfg.seed, cfg.horizon_s)? {
        if limit.is_some_and(|m| reqs.len() >= m) {
            break;
        }
        reqs.push(r);
    }
    let prompt_lens = reqs.iter().map(|r| r.prompt);
    let (shortest, longest) = (prompt_lens.clone().min(), prompt_lens.max());
    check_chars_per_token(
        cfg.chars_per_token,
        shortest.unwrap_or(0),
        longest.unwrap_or(0),
    )
    .map_err(RunError::Invalid)?;
    if let Some(need) = reqs.iter().map(Request::total_tokens).max() {
        ep.check_fits(need)?;
    }
    let users = match cfg.users {
        Some(u) => Some(
            UserSource::new(&workload, cfg.seed, u.count, u.think_s).map_err(|e| {
                RunError::Invalid(format!("--users {} --think {}: {e}", u.count, u.think_s))
            })?,
        ),
        None => None,
    };
    std::fs::create_dir_all(&cfg.out_dir).map_err(io_err(&cfg.out_dir))?;

    let mut prompts = PromptBuilder::new(cfg.chars_per_token);
    let system = workload.system_prompts().map(|s| s.tokens).unwrap_or(0);
    prompts.set_system(system, cfg.seed);
    // The tokens the server adds (BOS) first: a grouped request's own part is sized with
    // them (`lengths_of`), so its length must be known before the lengths are listed.
    if cfg.use_tokenizer && prompts.calibrate(&ep, []).await {
        let mut lens: Vec<u32> = reqs.iter().flat_map(|r| prompts.lengths_of(r)).collect();
        lens.sort_unstable();
        lens.dedup();
        prompts.calibrate(&ep, lens).await;
    }
    let mut metadata = server_metadata(&ep).await;
    metadata["run"] = json!({
        "tool": concat!("bench-native ", env!("CARGO_PKG_VERSION")),
        "started_unix_s": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0),
        "workload": workload, "arrival_rate_rps": if cfg.users.is_some() { None } else { Some(workload.rate()) }, "seed": cfg.seed, "horizon_s": cfg.horizon_s,
        "requests_scheduled": if cfg.users.is_some() { None } else { Some(reqs.len()) }, "users": cfg.users,
        "warmup_requests": cfg.warmup_requests, "max_concurrency": cfg.max_concurrency,
        "timeout_s": cfg.timeout.as_secs_f64(), "metrics": cfg.metrics,
        "prompt_sizing": if prompts.tokenized { "server /tokenize".to_string() } else { format!("{} chars per token", cfg.chars_per_token) },
        "ignore_eos": cfg.endpoint.ignore_eos, "min_tokens": cfg.endpoint.min_tokens, "cache_prompt": cfg.endpoint.cache_prompt,
        "api_key": if cfg.endpoint.api_key.is_some() { "set (not recorded)" } else { "none" },
    });
    let meta_path = cfg.out_dir.join("metadata.json");
    write_json(&meta_path, &metadata)?;

    // Warm-up: sequential, not recorded.
    let warm_t0 = Instant::now();
    for (i, r) in reqs.iter().take(cfg.warmup_requests).enumerate() {
        let body = ep.body(
            &prompts.prompt(u64::MAX - i as u64, r.prompt),
            r.output.min(16),
        );
        let _ = ep.stream(warm_t0, &body, cfg.timeout).await;
    }

    let csv_path = cfg.out_dir.join("requests.csv");
    let file = std::fs::File::create(&csv_path).map_err(io_err(&csv_path))?;
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(file);
    writer.write_record(REQUEST_COLUMNS)?;
    writer.flush().map_err(io_err(&csv_path))?;

    let counters_before = scrape_once(&ep).await;
    let t0 = Instant::now() + Duration::from_millis(20);
    let (stop_tx, stop_rx) = watch::channel(false);
    let scraper = cfg.metrics_interval.map(|every| {
        tokio::spawn(scrape_metrics(
            ep.clone(),
            t0,
            every,
            cfg.out_dir.join("metrics.csv"),
            stop_rx.clone(),
        ))
    });

    let sent = Arc::new(AtomicU64::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel::<RequestRow>();
    let ctx = RequestCtx {
        ep: ep.clone(),
        t0,
        timeout: cfg.timeout,
        stall_s: cfg.metrics.stall_threshold_s,
        sem: cfg.max_concurrency.map(|n| Arc::new(Semaphore::new(n))),
        sent: sent.clone(),
        cancel: stop_rx.clone(),
        tx,
    };
    // The open loop's sender thread, or the closed loop's users (driven here, in turn
    // with the rows they produce).
    let mut scheduled = reqs.len();
    let (sender, mut driver) = match users {
        None => {
            pb.set_length(reqs.len() as u64);
            let rt = tokio::runtime::Handle::current();
            let thread = std::thread::Builder::new()
                .name("kvqueue-sender".into())
                .spawn(move || send_schedule(rt, ctx, reqs, prompts))
                .map_err(|e| RunError::Invalid(format!("cannot start the sender thread: {e}")))?;
            (Some(thread), None)
        }
        Some(source) => {
            scheduled = usize::MAX;
            let driver = users::Driver {
                source,
                tokenize: prompts.tokenized,
                prompts,
                horizon_s: cfg.horizon_s,
                max_requests: cfg.max_requests,
            };
            (None, Some(Box::pin(driver.drive(&ep, ctx))))
        }
    };

    let mut rows = Vec::new();
    let mut errors = 0u64;
    let mut interrupted = false;
    let stop = stop;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            biased;
            row = rx.recv() => {
                let Some(row) = row else { break };
                writer.serialize(&row)?;
                writer.flush().map_err(io_err(&csv_path))?;
                if row.outcome != "completed" {
                    errors += 1;
                }
                rows.push(row);
                if cfg.users.is_some() {
                    pb.set_length(sent.load(Ordering::Relaxed).max(rows.len() as u64));
                }
                pb.inc(1);
                status(pb, sent.load(Ordering::Relaxed), rows.len() as u64, errors);
                if rows.len() == scheduled {
                    break;
                }
            }
            n = async { driver.as_mut().expect("while driving").await }, if driver.is_some() => {
                // Every user is done and every answer is in: the channel closes once the
                // rows already sent are read.
                scheduled = n;
                driver = None;
                if rows.len() == scheduled {
                    break;
                }
            }
            _ = &mut stop, if !interrupted => {
                interrupted = true;
                let _ = stop_tx.send(true);
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => status(pb, sent.load(Ordering::Relaxed), rows.len() as u64, errors),
        }
    }
    let sender_priority = match sender {
        Some(thread) => tokio::task::spawn_blocking(move || thread.join())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(SenderPriority::Normal),
        // The users' sends are timed by the runtime, not by a thread of their own.
        None => SenderPriority::Normal,
    };
    let _ = stop_tx.send(true);
    let metrics_samples = match scraper {
        Some(h) => h.await.unwrap_or(0),
        None => 0,
    };
    pb.finish_and_clear();

    let records: Vec<RequestRecord> = rows.iter().map(RequestRow::record).collect();
    let end = rows
        .iter()
        .filter_map(|r| r.last_token_s.or(r.actual_send_s))
        .fold(0.0f64, f64::max);
    let window = (end - cfg.metrics.warmup_s).max(0.0);
    let mut summary = engine::metrics::summarize(&records, &cfg.metrics, window);
    let client = client_stats(&rows);
    // A client cannot see preemptions; the server's own counter can (vLLM).
    let server = match (counters_before, scrape_once(&ep).await) {
        (Some(b), Some(a)) => Some(ServerCounters::between(&b, &a)),
        _ => None,
    };
    if let Some(p) = server.as_ref().and_then(|c| c.preemptions) {
        summary.preemptions = p.round() as u64;
    }
    let failures: Vec<Value> = failure_reasons(&rows)
        .into_iter()
        .map(|(reason, count)| json!({"reason": reason, "count": count}))
        .collect();
    let prefix = measured_prefix(&rows, cfg.metrics.warmup_s);
    let summary_json = json!({
        "summary": summary, "client": client, "server_counters": server, "failures": failures,
        "prefix_cache": prefix,
        "arrival_rate_rps": cfg.workload.rate(), "seed": cfg.seed,
        "scheduled": scheduled, "written": rows.len(), "interrupted": interrupted,
        "sender_priority": sender_priority,
        "note": "summary computed by engine::metrics::summarize over requests.csv; latencies from the intended send time",
    });
    write_json(&cfg.out_dir.join("summary.json"), &summary_json)?;
    write_summary_csv(&cfg.out_dir.join("summary_all.csv"), cfg, &summary, &client)?;
    write_sweep_row(&cfg.out_dir.join("summary.csv"), cfg, &summary, &metadata)?;
    Ok(RunReport {
        rows,
        summary,
        client,
        server,
        metadata,
        metrics_samples,
        interrupted,
        scheduled,
        sender_priority,
        prefix,
    })
}

fn write_json(path: &Path, v: &impl Serialize) -> Result<(), RunError> {
    let text = serde_json::to_string_pretty(v).map_err(|e| RunError::Invalid(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(io_err(path))
}

/// Flattens a JSON object into `(a_b_c, value)` pairs in field order.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        x => out.push((prefix.to_string(), x.to_string())),
    }
}

/// The summary as one row in the simulator's sweep columns (`engine::sweep`): the same
/// header as a simulated sweep, so the page and `compare` read both. B is the server's
/// slot count and K its KV tokens when the server reports them (0 otherwise).
fn write_sweep_row(
    path: &Path,
    cfg: &RunConfig,
    s: &Summary,
    metadata: &Value,
) -> Result<(), RunError> {
    let kv = &metadata["kv"];
    let slots = kv["slots"].as_u64().unwrap_or(0) as u32;
    let tokens = kv["tokens"].as_u64().unwrap_or(0);
    let labels = engine::sweep::RowLabels {
        policy: "measured",
        kv_mode: "server",
        block_size: kv["block_size"].as_u64().unwrap_or(0) as u32,
        token_budget: 0,
        horizon_s: s.window_s,
    };
    let agg = engine::sweep::PointAggregate::of(std::slice::from_ref(s));
    let row = engine::sweep::summary_row_of(cfg.workload.rate(), slots, tokens, &agg, &labels);
    std::fs::write(
        path,
        format!("{}\n{row}\n", engine::sweep::summary_header()),
    )
    .map_err(io_err(path))
}

/// Every field of [`Summary`] and the client statistics, flattened into one row (field
/// order, `_` joined, latencies [s]) after the run's identifying columns.
fn write_summary_csv(
    path: &Path,
    cfg: &RunConfig,
    s: &Summary,
    c: &ClientStats,
) -> Result<(), RunError> {
    let mut cols = vec![
        ("source".to_string(), "measured".to_string()),
        ("arrival_rate".to_string(), cfg.workload.rate().to_string()),
        ("seed".to_string(), cfg.seed.to_string()),
    ];
    flatten(
        "",
        &serde_json::to_value(s).map_err(|e| RunError::Invalid(e.to_string()))?,
        &mut cols,
    );
    flatten(
        "",
        &serde_json::to_value(c).map_err(|e| RunError::Invalid(e.to_string()))?,
        &mut cols,
    );
    let mut w = csv::Writer::from_path(path)?;
    w.write_record(cols.iter().map(|c| c.0.as_str()))?;
    w.write_record(cols.iter().map(|c| c.1.as_str()))?;
    w.flush().map_err(io_err(path))
}

/// Runs `cfg` to the end on `rt`, with no progress bar and no stop signal (what tests,
/// examples and pipelines call).
///
/// # Errors
/// As [`run_load`].
pub fn run_to_end(rt: &tokio::runtime::Runtime, cfg: &RunConfig) -> Result<RunReport, RunError> {
    rt.block_on(run_load(
        cfg,
        &ProgressBar::hidden(),
        std::future::pending(),
    ))
}

/// A progress bar on stderr (hidden when `quiet` or stderr is not a terminal).
pub fn progress_bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} finished ({per_sec}) {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// A tokio runtime for the CLI (2 worker threads is plenty for a load generator on loopback).
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Writes `text` to stdout. A closed reader (`run … | head -1`) is not an error: the
/// output stops there quietly, as ripgrep does; any other write error is.
fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `bench-native run`: the load test, its summary on stdout, and a failure exit status
/// when every request failed (the files are written all the same).
///
/// # Errors
/// Invalid options, pre-flight failures, file errors, and a run whose every request
/// failed.
pub fn execute(args: RunArgs) -> anyhow::Result<()> {
    let cfg = RunConfig::try_from(&args)?;
    let rt = runtime()?;
    let pb = progress_bar(args.quiet);
    let report = rt.block_on(run_load(&cfg, &pb, async {
        let _ = tokio::signal::ctrl_c().await;
    }))?;
    if report.interrupted {
        eprintln!(
            "interrupted: {} of {} scheduled requests written",
            report.rows.len(),
            report.scheduled
        );
    }
    let mut text = summary_text(&report.summary, &report.client) + "\n";
    if let Some(p) = &report.prefix {
        text += &(prefix_text(p) + "\n");
    }
    let failures = failures_text(&report.rows);
    if let Some((failed, why)) = &failures {
        text += &format!(
            "failed: {failed} of {} requests: {why}\n",
            report.rows.len()
        );
    }
    if report.sender_priority == SenderPriority::Normal && cfg.users.is_none() {
        text += "sender thread: normal priority (SCHED_FIFO not permitted or one core); on a \
                 busy machine sends can be late by a time slice\n";
    }
    text += &format!(
        "files: {}/{{requests.csv, summary.json, summary.csv, metadata.json, metrics.csv}}\n",
        cfg.out_dir.display()
    );
    print_out(&text)?;
    let all_failed = !report.rows.is_empty()
        && report
            .rows
            .iter()
            .all(|r| r.outcome == Outcome::Error.as_str());
    match failures {
        Some((failed, why)) if all_failed => anyhow::bail!(
            "all {failed} requests failed: {why} (rows in {})",
            cfg.out_dir.join("requests.csv").display()
        ),
        _ => Ok(()),
    }
}
