//! `bench-native microbench`: the two curves a cost model needs, measured on a live server.
//!
//! * **Prefill**: one request at a time, `max_tokens = 1`, for each prompt length; the
//!   latency is the client-side TTFT (prefill emits the first token), median of
//!   `--repeats`; llama.cpp's own `timings.prompt_ms` is recorded beside it.
//! * **Decode**: N concurrent streams started together (short prompt, `--decode-tokens`
//!   output each); the step latency is the mean gap between consecutive chunks inside the
//!   window where all N streams are decoding (after the last first token, before the first
//!   stream ends). With `--pin-slots` (llama.cpp) stream i runs in slot i (`id_slot`), so
//!   the N decodes are consecutive slots and one micro-batch (llama.cpp with per-slot KV
//!   runs each run of consecutive slot ids as a separate forward pass; unpinned, the
//!   server's slot choice decides, and 2 streams in slots {0, 3} cost ≈ 2 single
//!   decodes); `--layouts` adds decode points in given slot sets (e.g. `0+2`, two
//!   micro-batches). `--long-prompt` adds a second curve with that prompt, so the context
//!   per stream varies and `fit` can identify the per-context-token cost. `--decode-rounds`
//!   repeats the whole decode curve, stream counts interleaved, so machine drift hits every
//!   point alike; the gaps of all rounds are pooled.
//! * **Mixed** (optional, `--mixed-streams`): k streams decode (short prompt) while one
//!   `--mixed-prompt`-token prompt is prefilled. Every iteration of that prefill carries
//!   k decodes and one prompt chunk, so the streams' inter-token gaps that end at the
//!   prompt's first token are the durations of those mixed iterations, one per chunk. With
//!   the server's token budget (`--budget`, llama.cpp `-b`: decodes first, then the prompt
//!   up to the budget) chunk i has `budget − k` tokens after `i·(budget − k)` already in
//!   KV; without it the whole prompt is one chunk. Each point is the median over the
//!   streams and the repeats.
//!
//! Writes `--out` (JSON, read by `fit`) and the same points as CSV next to it.

use crate::client::{Endpoint, PromptBuilder};
use crate::run::{RunError, ServerArgs};
use engine::metrics::percentile_type7;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;

const EXAMPLES: &str = "\
Examples:
  # default curves against llama-server on :8080 → microbench.json + microbench.csv
  bench-native microbench --url http://127.0.0.1:8080

  # longer prompts, more streams, then fit a cost model for the simulator
  bench-native microbench --prompt-lengths 32,128,512,1024 --streams 1,2,4,8,16 --out mb.json
  bench-native fit mb.json --out fit.json

  # also prefill a 512-token prompt while 1, 2 or 4 streams decode, on a -b 32 server
  bench-native microbench --mixed-streams 1,2,4 --mixed-prompt 512 --budget 32 --out mb.json

  # llama-server -np 4: decodes pinned to slots 0..n-1, two split layouts, a long-context
  # curve, every decode point measured in 2 interleaved rounds
  bench-native microbench --streams 1,2,3,4 --pin-slots --layouts 0+2,0+1+3 \
      --long-prompt 256 --decode-rounds 2 --out mb.json

  # with llama-server's slot cache: 32 new tokens after 256, 512 and 1024 cached ones
  bench-native microbench --cached-prefixes 256,512,1024 --cached-chunk 32 --out mb.json";

/// Arguments of `microbench`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct MicrobenchArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Prompt lengths of the prefill curve [tokens].
    #[arg(long, value_delimiter = ',', default_value = "32,64,128,256,512")]
    pub prompt_lengths: Vec<u32>,
    /// Repeats per prompt length (the median is kept).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Concurrent stream counts of the decode curve.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub streams: Vec<u32>,
    /// Output tokens per decode stream.
    #[arg(long, default_value_t = 64)]
    pub decode_tokens: u32,
    /// Prompt tokens per decode stream.
    #[arg(long, default_value_t = 16)]
    pub decode_prompt: u32,
    /// Decode stream counts of the mixed probe (none: no probe). Each needs one more free
    /// slot than streams on the server.
    #[arg(long, value_delimiter = ',')]
    pub mixed_streams: Vec<u32>,
    /// Prompt prefilled while the mixed probe's streams decode [tokens].
    #[arg(long, default_value_t = 512)]
    pub mixed_prompt: u32,
    /// The server's per-iteration token budget (llama.cpp `-b`, vLLM
    /// `max_num_batched_tokens`), to place the mixed probe's prompt chunks.
    #[arg(long)]
    pub budget: Option<u32>,
    /// Run decode stream i in slot i (llama.cpp `id_slot`), and the mixed probe's prompt
    /// in the slot after its streams.
    #[arg(long)]
    pub pin_slots: bool,
    /// Extra decode points in these slot sets (`+`-separated slot ids, e.g. `0+2`);
    /// implies pinning.
    #[arg(long, value_delimiter = ',')]
    pub layouts: Vec<String>,
    /// Prompt of a second decode curve (longer context per stream) [tokens].
    #[arg(long)]
    pub long_prompt: Option<u32>,
    /// Prefixes of the cached-prefix probe [tokens]: each prompt is sent once to fill a
    /// slot, then again with `--cached-chunk` new tokens after it, with the server's
    /// prefix cache on (llama.cpp `cache_prompt`); the second prompt's time is the cost of
    /// new tokens attending to a cached context. None: no probe.
    #[arg(long, value_delimiter = ',')]
    pub cached_prefixes: Vec<u32>,
    /// New tokens after each cached prefix [tokens].
    #[arg(long, default_value_t = 32)]
    pub cached_chunk: u32,
    /// Rounds of the decode curve (interleaved; gaps pooled).
    #[arg(long, default_value_t = 1)]
    pub decode_rounds: usize,
    /// Pauses of the idle probe [s]: a lone shortest prompt sent this long after the
    /// previous request ended, in `--idle-rounds` interleaved rounds; `fit` turns the TTFT's
    /// growth with the pause into the server's wake-up after idle. `0` alone, or an empty
    /// list (`--idle-pauses ""`), turns the probe off.
    #[arg(long, value_delimiter = ',', default_value = "0,0.05,0.2,1,2")]
    pub idle_pauses: Vec<f64>,
    /// Rounds of the idle probe (each pause once per round; the median is kept).
    #[arg(long, default_value_t = 4)]
    pub idle_rounds: usize,
    /// Output JSON (a CSV with the same stem is written beside it).
    #[arg(long, default_value = "microbench.json")]
    pub out: PathBuf,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct MicrobenchConfig {
    pub endpoint: crate::client::EndpointConfig,
    pub prompt_lengths: Vec<u32>,
    pub repeats: usize,
    pub streams: Vec<u32>,
    pub decode_tokens: u32,
    pub decode_prompt: u32,
    pub timeout: Duration,
    pub chars_per_token: f64,
    pub use_tokenizer: bool,
    /// Decode stream counts of the mixed probe (empty: no probe).
    pub mixed_streams: Vec<u32>,
    /// Prompt of the mixed probe [tokens].
    pub mixed_prompt: u32,
    /// The server's per-iteration token budget; `None`: the prompt is one chunk.
    pub budget: Option<u32>,
    /// Decode stream i in slot i, the mixed probe's prompt after its streams (llama.cpp).
    pub pin_slots: bool,
    /// Extra decode points in these slot sets (pinned).
    pub layouts: Vec<Vec<u32>>,
    /// Prompt of a second decode curve [tokens].
    pub long_prompt: Option<u32>,
    /// Rounds of the decode curve, interleaved.
    pub decode_rounds: usize,
    /// Prefixes of the cached-prefix probe [tokens] (empty: no probe).
    pub cached_prefixes: Vec<u32>,
    /// New tokens after each cached prefix [tokens].
    pub cached_chunk: u32,
    /// Pauses of the idle probe [s] (fewer than two: no probe).
    pub idle_pauses: Vec<f64>,
    /// Rounds of the idle probe.
    pub idle_rounds: usize,
}

impl MicrobenchConfig {
    /// The same without the idle probe (a microbenchmark whose wake-up is measured
    /// elsewhere, or that runs beside busy neighbours).
    pub fn without_idle_probe(&self) -> MicrobenchConfig {
        MicrobenchConfig {
            idle_pauses: Vec::new(),
            ..self.clone()
        }
    }
}

/// One point of the idle probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdlePoint {
    /// Pause between the end of the previous request and this one's send [s].
    pub pause_s: f64,
    /// Prompt tokens (the shortest prefill prompt) [tokens].
    pub prompt_tokens: u32,
    /// Median client TTFT over the rounds [s].
    pub latency_s: f64,
    /// Every round's TTFT [s].
    pub samples_s: Vec<f64>,
}

/// One prefill point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefillPoint {
    /// Prompt length from `usage` [tokens].
    pub prompt_tokens: u32,
    /// Median client TTFT of the repeats [s].
    pub latency_s: f64,
    /// Every repeat's TTFT [s].
    pub samples_s: Vec<f64>,
    /// Median of the server's own prompt time, if reported [s]: llama.cpp's
    /// `timings.prompt_ms`; vLLM's queue + prefill time of the request from its `/metrics`
    /// histograms ([`crate::prom::vllm_prompt_time`], scraped before and after it).
    pub server_prompt_s: Option<f64>,
}

/// vLLM's (requests, queue + prefill seconds) so far, `None` for other servers.
async fn vllm_prompt_time(ep: &Endpoint) -> Option<(f64, f64)> {
    if ep.kind != crate::client::ServerKind::Vllm {
        return None;
    }
    let text = ep.get_text("/metrics").await.ok()?;
    crate::prom::vllm_prompt_time(&crate::prom::parse(&text))
}

/// The queue + prefill time [s] of the one request finished since `before` was scraped:
/// vLLM records a request's histograms when it finishes, so this waits (up to 2 s) for
/// the count to move by exactly one; `None` if it does not.
async fn vllm_prompt_time_after(ep: &Endpoint, before: (f64, f64)) -> Option<f64> {
    for _ in 0..40 {
        let (n, sum) = vllm_prompt_time(ep).await?;
        if n == before.0 + 1.0 {
            return Some((sum - before.1).max(0.0));
        }
        if n > before.0 + 1.0 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// One decode point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecodePoint {
    /// Concurrent streams [count].
    pub streams: u32,
    /// Mean inter-chunk gap while all streams decode [s].
    pub step_s: f64,
    /// Median of those gaps [s].
    pub step_p50_s: f64,
    /// Gaps averaged [count].
    pub gaps: usize,
    /// Mean context in KV over the streams during the window [tokens].
    pub context_tokens: f64,
    /// Slots the streams ran in (empty: the server chose).
    #[serde(default)]
    pub slots: Vec<u32>,
    /// Micro-batches per step: runs of consecutive slot ids (1 when the server chose).
    #[serde(default = "one")]
    pub ubatches: u32,
}

impl DecodePoint {
    /// The pinned slot ids joined by `sep` (empty when the streams were not pinned).
    pub fn slot_list(&self, sep: &str) -> String {
        self.slots
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(sep)
    }
}

fn one() -> u32 {
    1
}

/// Runs of consecutive ids in `slots` (sorted): the micro-batches llama.cpp with per-slot
/// KV splits their decodes into.
pub fn slot_runs(slots: &[u32]) -> u32 {
    let mut s = slots.to_vec();
    s.sort_unstable();
    s.dedup();
    (s.len() as u32).saturating_sub(s.windows(2).filter(|w| w[1] == w[0] + 1).count() as u32)
}

/// Parses a `--layouts` entry (`0+2`).
pub fn parse_layout(text: &str) -> Result<Vec<u32>, String> {
    text.split('+')
        .map(|x| {
            x.trim()
                .parse::<u32>()
                .map_err(|e| format!("layout {text}: {e}"))
        })
        .collect()
}

/// One mixed iteration: `streams` decodes plus one prompt chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MixedPoint {
    /// Decoding sequences in the iteration [count].
    pub streams: u32,
    /// Prompt tokens of the chunk [tokens].
    pub chunk_tokens: u32,
    /// Prompt tokens already in KV before the chunk [tokens].
    pub prefix_tokens: u64,
    /// Context in KV over the decoding streams [tokens].
    pub context_tokens: f64,
    /// Median iteration duration over the streams and repeats [s].
    pub step_s: f64,
    /// Gaps behind the median [count].
    pub gaps: usize,
}

/// One prompt of new tokens after a prefix the server found in its cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedPoint {
    /// Prompt tokens the server reported cached (median of the repeats) [tokens].
    pub prefix_tokens: u32,
    /// Prompt tokens it prefilled: the prompt's length less the cached ones [tokens].
    pub new_tokens: u32,
    /// Median client TTFT of the repeats [s].
    pub latency_s: f64,
    /// Median of the server's own prompt time, if it reports one [s].
    pub server_prompt_s: Option<f64>,
}

/// The microbenchmark's result file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicrobenchResult {
    pub prefill: Vec<PrefillPoint>,
    pub decode: Vec<DecodePoint>,
    /// Mixed iterations (absent in files written before the probe existed).
    #[serde(default)]
    pub mixed: Vec<MixedPoint>,
    /// Prompts after a cached prefix (absent: no cached-prefix probe).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cached: Vec<CachedPoint>,
    /// Lone prompts after pauses (absent: no idle probe).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<IdlePoint>,
    /// The server's per-iteration token budget, if given: a prefill point's prompt was
    /// processed in chunks of this many tokens (absent: in one iteration).
    #[serde(default)]
    pub budget: Option<u32>,
    /// Server description (see `run`'s metadata.json).
    #[serde(default)]
    pub metadata: Value,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    percentile_type7(&s, 0.5)
}

/// Runs both curves.
///
/// # Errors
/// Pre-flight failures, or a request that fails (a microbenchmark with holes is useless).
pub async fn microbench(
    cfg: &MicrobenchConfig,
    pb: &ProgressBar,
) -> Result<MicrobenchResult, RunError> {
    let ep = Endpoint::connect(&cfg.endpoint)
        .await?
        .without_connection_reuse()?;
    // the longest prompt with one output token (a cached-prefix probe's second prompt too)
    let longest = cfg
        .prompt_lengths
        .iter()
        .copied()
        .chain(cfg.cached_prefixes.iter().map(|p| p + cfg.cached_chunk))
        .max()
        .unwrap_or(1) as u64
        + 1;
    let decode_prompt = cfg.long_prompt.unwrap_or(0).max(cfg.decode_prompt);
    ep.check_fits(longest.max(decode_prompt as u64 + cfg.decode_tokens as u64))?;
    let mut prompts = PromptBuilder::new(cfg.chars_per_token);
    if cfg.use_tokenizer {
        let mut lens = cfg.prompt_lengths.clone();
        lens.push(cfg.decode_prompt);
        lens.extend(cfg.long_prompt);
        if !cfg.mixed_streams.is_empty() {
            lens.push(cfg.mixed_prompt);
        }
        for &p in &cfg.cached_prefixes {
            lens.extend([p, p + cfg.cached_chunk]);
        }
        prompts.calibrate(&ep, lens).await;
    }
    let metadata = crate::run::server_metadata(&ep).await;
    pb.set_length(
        (cfg.prompt_lengths.len() * cfg.repeats
            + (cfg.streams.len() + cfg.layouts.len())
                * (1 + cfg.long_prompt.is_some() as usize)
                * cfg.decode_rounds.max(1)
            + cfg.mixed_streams.len() * cfg.repeats
            + cfg.cached_prefixes.len() * cfg.repeats
            + idle_probe_len(cfg)) as u64,
    );
    let t0 = Instant::now();
    // warm-up
    let _ = ep
        .stream(
            t0,
            &ep.body(&prompts.prompt(u64::MAX, cfg.decode_prompt), 4),
            cfg.timeout,
        )
        .await;

    let mut prefill = Vec::new();
    let mut id = 0u64;
    for &len in &cfg.prompt_lengths {
        let (mut samples, mut server, mut used) = (Vec::new(), Vec::new(), len);
        for _ in 0..cfg.repeats.max(1) {
            id += 1;
            let body = ep.body(&prompts.prompt(id, len), 1);
            let before = vllm_prompt_time(&ep).await;
            let res = ep.stream(t0, &body, cfg.timeout).await;
            samples.push(client_ttft(&res, || format!("prefill of {len} tokens"))?);
            if let Some(t) = res.timings {
                server.push(t.prompt_ms / 1e3);
            } else if let Some(b) = before {
                if let Some(x) = vllm_prompt_time_after(&ep, b).await {
                    server.push(x);
                }
            }
            if let Some(u) = res.usage {
                used = u.prompt_tokens;
            }
            pb.inc(1);
        }
        let latency_s = median(&samples).unwrap_or(f64::NAN);
        prefill.push(PrefillPoint {
            prompt_tokens: used,
            latency_s,
            samples_s: samples,
            server_prompt_s: median(&server),
        });
    }

    // Every decode point: (streams, slots or empty = the server's choice, prompt),
    // measured in `decode_rounds` interleaved rounds, gaps pooled.
    let mut points: Vec<(u32, Vec<u32>, u32)> = Vec::new();
    for prompt in std::iter::once(cfg.decode_prompt).chain(cfg.long_prompt) {
        for &n in &cfg.streams {
            let n = n.max(1);
            let slots = if cfg.pin_slots {
                (0..n).collect()
            } else {
                Vec::new()
            };
            points.push((n, slots, prompt));
        }
        for l in cfg.layouts.iter().filter(|l| !l.is_empty()) {
            points.push((l.len() as u32, l.clone(), prompt));
        }
    }
    let mut gaps: Vec<Vec<f64>> = vec![Vec::new(); points.len()];
    for _ in 0..cfg.decode_rounds.max(1) {
        for (g, (n, slots, prompt)) in gaps.iter_mut().zip(&points) {
            let got = decode_gaps(cfg, &ep, &prompts, &mut id, *n, slots, *prompt, t0).await?;
            g.extend(got);
            pb.inc(1);
        }
    }
    let mut decode = Vec::new();
    for (g, (n, slots, prompt)) in gaps.iter().zip(&points) {
        let context = *n as f64 * (*prompt as f64 + cfg.decode_tokens as f64 / 2.0);
        decode.push(DecodePoint {
            streams: *n,
            step_s: g.iter().sum::<f64>() / g.len().max(1) as f64,
            step_p50_s: median(g).unwrap_or(f64::NAN),
            gaps: g.len(),
            context_tokens: context,
            slots: slots.clone(),
            ubatches: if slots.is_empty() {
                1
            } else {
                slot_runs(slots)
            },
        });
    }

    let mut mixed = Vec::new();
    for &k in &cfg.mixed_streams {
        // gaps[i]: the durations seen for chunk i over the streams and repeats
        let mut gaps: Vec<Vec<f64>> = Vec::new();
        let mut shape = Vec::new();
        for _ in 0..cfg.repeats.max(1) {
            // A probe whose timing a busy client or server blurred is run again.
            let mut attempt = 1;
            let probe = loop {
                match mixed_probe(cfg, &ep, &mut prompts, &mut id, k, attempt, t0).await? {
                    Ok(p) => break p,
                    Err(_) if attempt < MIXED_ATTEMPTS => attempt += 1,
                    Err(miss) => {
                        return Err(RunError::Invalid(format!(
                            "mixed probe with {k} streams, {MIXED_ATTEMPTS} attempts: {miss}"
                        )))
                    }
                }
            };
            if gaps.len() < probe.gaps.len() {
                gaps.resize(probe.gaps.len(), Vec::new());
                shape = probe.shape;
            }
            for (g, p) in gaps.iter_mut().zip(probe.gaps) {
                g.extend(p);
            }
            pb.inc(1);
        }
        for (g, (chunk, prefix, context)) in gaps.iter().zip(shape) {
            if let Some(step_s) = median(g) {
                mixed.push(MixedPoint {
                    streams: k,
                    chunk_tokens: chunk,
                    prefix_tokens: prefix,
                    context_tokens: context,
                    step_s,
                    gaps: g.len(),
                });
            }
        }
    }
    let cached = cached_probe(cfg, &ep, &prompts, &mut id, t0, pb).await?;
    let idle = idle_probe(cfg, &ep, &prompts, &mut id, t0, pb).await?;
    pb.finish_and_clear();
    Ok(MicrobenchResult {
        prefill,
        decode,
        cached,
        idle,
        mixed,
        budget: cfg.budget,
        metadata,
    })
}

/// A lone prompt's client TTFT [s]; its error, or no token, is an error naming `what`.
fn client_ttft(
    res: &crate::client::StreamResult,
    what: impl Fn() -> String,
) -> Result<f64, RunError> {
    if let Some(e) = &res.error {
        return Err(RunError::Invalid(format!("{} failed: {e}", what())));
    }
    let first = res
        .token_chunk_s
        .first()
        .copied()
        .ok_or_else(|| RunError::Invalid(format!("{}: the server sent no token", what())))?;
    Ok(first - res.sent_s)
}

/// Requests the idle probe sends (0 without it).
fn idle_probe_len(cfg: &MicrobenchConfig) -> usize {
    if cfg.idle_pauses.len() < 2 {
        0
    } else {
        cfg.idle_pauses.len() * cfg.idle_rounds.max(1)
    }
}

/// The idle probe: in each round, for each pause, a lone prompt of the shortest prefill
/// length (one output token) sent that long after the previous request ended; the
/// client TTFT of each. Rounds interleave the pauses, so the machine's drift hits every
/// pause alike.
async fn idle_probe(
    cfg: &MicrobenchConfig,
    ep: &Endpoint,
    prompts: &PromptBuilder,
    id: &mut u64,
    t0: Instant,
    pb: &ProgressBar,
) -> Result<Vec<IdlePoint>, RunError> {
    if idle_probe_len(cfg) == 0 {
        return Ok(Vec::new());
    }
    let len = cfg.prompt_lengths.iter().copied().min().unwrap_or(4).max(1);
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); cfg.idle_pauses.len()];
    let mut used = len;
    for _ in 0..cfg.idle_rounds.max(1) {
        for (k, &pause) in cfg.idle_pauses.iter().enumerate() {
            tokio::time::sleep(Duration::from_secs_f64(pause)).await;
            *id += 1;
            let res = ep
                .stream(t0, &ep.body(&prompts.prompt(*id, len), 1), cfg.timeout)
                .await;
            samples[k].push(client_ttft(&res, || {
                format!("idle probe ({len}-token prompt after {pause} s)")
            })?);
            if let Some(u) = res.usage {
                used = u.prompt_tokens;
            }
            pb.inc(1);
        }
    }
    Ok(cfg
        .idle_pauses
        .iter()
        .zip(samples)
        .map(|(&pause_s, s)| IdlePoint {
            pause_s,
            prompt_tokens: used,
            latency_s: median(&s).unwrap_or(f64::NAN),
            samples_s: s,
        })
        .collect())
}

/// The cached-prefix probe: per prefix, `repeats` times, a prompt of the prefix (to fill
/// a slot) and then the same prompt with `cached_chunk` new tokens, with the prefix cache
/// on; the second one's TTFT, the server's prompt time and its cached count.
async fn cached_probe(
    cfg: &MicrobenchConfig,
    ep: &Endpoint,
    prompts: &PromptBuilder,
    id: &mut u64,
    t0: Instant,
    pb: &ProgressBar,
) -> Result<Vec<CachedPoint>, RunError> {
    if cfg.cached_prefixes.is_empty() {
        return Ok(Vec::new());
    }
    let ep = ep.clone().with_cache_prompt(true);
    let mut points = Vec::new();
    for &prefix in &cfg.cached_prefixes {
        let (mut ttft, mut server, mut cached, mut prompt) =
            (Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..cfg.repeats.max(1) {
            *id += 1;
            let fill = ep
                .stream(t0, &ep.body(&prompts.prompt(*id, prefix), 1), cfg.timeout)
                .await;
            if let Some(e) = fill.error {
                return Err(RunError::Invalid(format!(
                    "cached-prefix probe, prefix of {prefix} tokens: {e}"
                )));
            }
            let body = ep.body(&prompts.prompt(*id, prefix + cfg.cached_chunk), 1);
            let res = ep.stream(t0, &body, cfg.timeout).await;
            let what = format!(
                "cached-prefix probe, {} tokens after {prefix}",
                cfg.cached_chunk
            );
            let first = client_ttft(&res, || what.clone())?;
            let hit = res.cached_tokens.ok_or_else(|| {
                RunError::Invalid(format!(
                    "{what}: the server reports no cached tokens (llama.cpp's timings.cache_n; \
                     vLLM's usage.prompt_tokens_details.cached_tokens, which it sends when \
                     started with --enable-prompt-tokens-details)"
                ))
            })?;
            if u64::from(hit) * 2 < u64::from(prefix) {
                return Err(RunError::Invalid(format!(
                    "{what}: the server reused {hit} tokens of the {prefix}-token prefix; is its \
                     prefix cache on?"
                )));
            }
            ttft.push(first);
            server.extend(
                res.timings
                    .map(|t| t.prompt_ms / 1e3)
                    .filter(|x| x.is_finite()),
            );
            cached.push(f64::from(hit));
            prompt = res
                .usage
                .map_or(prefix + cfg.cached_chunk, |u| u.prompt_tokens);
            pb.inc(1);
        }
        let hit = median(&cached).unwrap_or(0.0).round() as u32;
        points.push(CachedPoint {
            prefix_tokens: hit,
            new_tokens: prompt.saturating_sub(hit).max(1),
            latency_s: median(&ttft).unwrap_or(f64::NAN),
            server_prompt_s: median(&server),
        });
    }
    Ok(points)
}

/// One decode measurement: `n` streams (in `slots`, if given) of a `prompt`-token prompt
/// started together; the gaps between consecutive chunks while all of them decode [s].
#[allow(clippy::too_many_arguments)]
async fn decode_gaps(
    cfg: &MicrobenchConfig,
    ep: &Endpoint,
    prompts: &PromptBuilder,
    id: &mut u64,
    n: u32,
    slots: &[u32],
    prompt: u32,
    t0: Instant,
) -> Result<Vec<f64>, RunError> {
    let mut tasks = Vec::new();
    for i in 0..n as usize {
        *id += 1;
        let mut body = ep.body(&prompts.prompt(*id, prompt), cfg.decode_tokens);
        if let Some(&slot) = slots.get(i) {
            body["id_slot"] = serde_json::json!(slot);
        }
        let (ep, timeout) = (ep.clone(), cfg.timeout);
        tasks.push(tokio::spawn(
            async move { ep.stream(t0, &body, timeout).await },
        ));
    }
    let mut results = Vec::new();
    for t in tasks {
        let r = t.await.map_err(|e| RunError::Invalid(e.to_string()))?;
        if let Some(e) = &r.error {
            return Err(RunError::Invalid(format!(
                "decode with {n} streams failed: {e}"
            )));
        }
        results.push(r);
    }
    let start = results
        .iter()
        .filter_map(|r| r.token_chunk_s.first().copied())
        .fold(f64::MIN, f64::max);
    let end = results
        .iter()
        .filter_map(|r| r.token_chunk_s.last().copied())
        .fold(f64::MAX, f64::min);
    let mut gaps = Vec::new();
    for r in &results {
        for w in r.token_chunk_s.windows(2) {
            if w[0] >= start && w[1] <= end {
                gaps.push(w[1] - w[0]);
            }
        }
    }
    if gaps.is_empty() {
        // streams did not overlap enough: fall back to every gap
        gaps = results
            .iter()
            .flat_map(|r| r.token_chunk_s.windows(2).map(|w| w[1] - w[0]))
            .collect();
    }
    Ok(gaps)
}

/// One run of the mixed probe with `k` streams.
struct MixedProbe {
    /// Per chunk, one duration per stream [s].
    gaps: Vec<Vec<f64>>,
    /// Per chunk: (chunk tokens, prefix tokens, context over the streams).
    shape: Vec<(u32, u64, f64)>,
}

/// The prompt's chunks under `budget` with `k` decodes first: (chunk, prefix) each.
pub fn mixed_chunks(prompt: u32, k: u32, budget: Option<u32>) -> Vec<(u32, u64)> {
    let per = budget.map_or(prompt, |b| b.saturating_sub(k)).max(1);
    (0..prompt.div_ceil(per))
        .map(|i| (per.min(prompt - i * per), (i * per) as u64))
        .collect()
}

/// Attempts of one mixed probe before its timing miss is an error.
const MIXED_ATTEMPTS: u32 = 5;

/// Starts `k` decode streams, sends the probe prompt once they decode, and reads the
/// streams' gaps that end at the prompt's first token (the prompt's iterations). The inner
/// error is a timing miss: a stream's tokens do not show the prompt's iterations (two
/// tokens delivered together, say), so the probe may be run again.
async fn mixed_probe(
    cfg: &MicrobenchConfig,
    ep: &Endpoint,
    prompts: &mut PromptBuilder,
    id: &mut u64,
    k: u32,
    attempt: u32,
    t0: Instant,
) -> Result<Result<MixedProbe, String>, RunError> {
    let fail = |why: String| RunError::Invalid(format!("mixed probe with {k} streams: {why}"));
    let n_chunks = mixed_chunks(cfg.mixed_prompt, k, cfg.budget).len() as u32;
    // enough tokens to decode through the warm-up, every chunk and a margin; longer on
    // each attempt, for a server whose front end is slow to hand the prompt over while
    // the streams keep the cores busy (the streams then end before the prompt's first token)
    let out = (96 + 2 * n_chunks) * attempt.max(1);
    let mut tasks = Vec::new();
    for slot in 0..k.max(1) {
        *id += 1;
        let mut body = ep.body(&prompts.prompt(*id, cfg.decode_prompt), out);
        if cfg.pin_slots {
            body["id_slot"] = serde_json::json!(slot);
        }
        let (ep, timeout) = (ep.clone(), cfg.timeout);
        tasks.push(tokio::spawn(
            async move { ep.stream(t0, &body, timeout).await },
        ));
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    *id += 1;
    let mut body = ep.body(&prompts.prompt(*id, cfg.mixed_prompt), 1);
    if cfg.pin_slots {
        body["id_slot"] = serde_json::json!(k.max(1));
    }
    let long = ep.stream(t0, &body, cfg.timeout).await;
    if let Some(e) = long.error {
        return Err(fail(e));
    }
    let first = *long
        .token_chunk_s
        .first()
        .ok_or_else(|| fail("the prompt got no token".into()))?;
    let prompt = long.usage.map_or(cfg.mixed_prompt, |u| u.prompt_tokens);
    let chunks = mixed_chunks(prompt, k, cfg.budget);
    let n = chunks.len();
    let mut gaps = vec![Vec::new(); n];
    let mut generated = vec![0.0; n];
    for t in tasks {
        let r = t.await.map_err(|e| fail(e.to_string()))?;
        if let Some(e) = r.error {
            return Err(fail(e));
        }
        let ts = &r.token_chunk_s;
        // the stream's token of the iteration that gave the prompt its first token
        let Some(m) =
            (0..ts.len()).min_by(|&a, &b| (ts[a] - first).abs().total_cmp(&(ts[b] - first).abs()))
        else {
            continue;
        };
        let last_gap = if m > 0 { ts[m] - ts[m - 1] } else { 0.0 };
        // it must be that iteration (not a neighbour), decoding before and after
        if m < n || m + 1 >= ts.len() || (ts[m] - first).abs() > 0.5 * last_gap {
            return Ok(Err(format!(
                "a stream was not decoding through the prompt's {n} iterations (token {m} of {}, \
                 {:.1} ms from the prompt's first token, {:.1} ms after its previous token)",
                ts.len(),
                (ts[m] - first) * 1e3,
                last_gap * 1e3
            )));
        }
        for i in 0..n {
            let j = m - n + 1 + i;
            gaps[i].push(ts[j] - ts[j - 1]);
            generated[i] += j as f64 / k.max(1) as f64;
        }
    }
    let shape = chunks
        .iter()
        .zip(&generated)
        .map(|(&(c, p), g)| (c, p, k as f64 * (cfg.decode_prompt as f64 + g)))
        .collect();
    Ok(Ok(MixedProbe { gaps, shape }))
}

/// Writes the JSON and a CSV (`curve,x,latency_s,extra_s`) with the same stem.
///
/// # Errors
/// File errors.
pub fn write(result: &MicrobenchResult, path: &Path) -> Result<PathBuf, RunError> {
    let io = |source| RunError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text =
        serde_json::to_string_pretty(result).map_err(|e| RunError::Invalid(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|source| RunError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let csv_path = path.with_extension("csv");
    let mut w = csv::Writer::from_path(&csv_path)?;
    w.write_record(["curve", "x", "latency_s", "server_or_p50_s"])?;
    for p in &result.prefill {
        let extra = p.server_prompt_s.map(|x| x.to_string()).unwrap_or_default();
        w.write_record([
            "prefill_tokens".to_string(),
            p.prompt_tokens.to_string(),
            p.latency_s.to_string(),
            extra,
        ])?;
    }
    for d in &result.decode {
        let curve = if d.slots.is_empty() {
            format!("decode_streams_at_{:.0}_context", d.context_tokens)
        } else {
            format!(
                "decode_streams_in_slots_{}_at_{:.0}_context",
                d.slot_list("+"),
                d.context_tokens
            )
        };
        w.write_record([
            curve,
            d.streams.to_string(),
            d.step_s.to_string(),
            d.step_p50_s.to_string(),
        ])?;
    }
    for m in &result.mixed {
        w.write_record([
            format!(
                "mixed_{}_streams_{}_token_chunk_at_prefix",
                m.streams, m.chunk_tokens
            ),
            m.prefix_tokens.to_string(),
            m.step_s.to_string(),
            String::new(),
        ])?;
    }
    for c in &result.cached {
        w.write_record([
            format!("cached_{}_new_tokens_at_prefix", c.new_tokens),
            c.prefix_tokens.to_string(),
            c.latency_s.to_string(),
            String::new(),
        ])?;
    }
    for p in &result.idle {
        w.write_record([
            format!("prefill_{}_tokens_after_pause_s", p.prompt_tokens),
            p.pause_s.to_string(),
            p.latency_s.to_string(),
            String::new(),
        ])?;
    }
    w.flush().map_err(|source| RunError::Io {
        path: csv_path.clone(),
        source,
    })?;
    Ok(csv_path)
}

impl MicrobenchArgs {
    /// The validated configuration: `--chars-per-token` checked as `run` checks it, against
    /// the shortest and longest prompt the probes build; `--timeout` > 0; slot layouts
    /// parsed.
    ///
    /// # Errors
    /// A message naming the flag.
    pub fn config(&self) -> anyhow::Result<MicrobenchConfig> {
        let prompts = self
            .prompt_lengths
            .iter()
            .copied()
            .chain([self.decode_prompt, self.mixed_prompt])
            .chain(self.long_prompt)
            .chain(self.cached_prefixes.iter().map(|p| p + self.cached_chunk));
        let (shortest, longest) = prompts.fold((u32::MAX, 0), |(lo, hi), p| (lo.min(p), hi.max(p)));
        crate::client::check_chars_per_token(self.server.chars_per_token, shortest, longest)
            .map_err(anyhow::Error::msg)?;
        // as `run` checks it; a negative, NaN or huge value would panic in `Duration`
        let timeout = Duration::try_from_secs_f64(self.server.timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--timeout must be a finite number of seconds > 0 (got {})",
                    self.server.timeout
                )
            })?;
        if let Some(p) = self
            .idle_pauses
            .iter()
            .find(|p| !(p.is_finite() && (0.0..=60.0).contains(*p)))
        {
            anyhow::bail!("--idle-pauses must be seconds from 0 to 60 (got {p})");
        }
        if self.idle_pauses.windows(2).any(|w| w[1] <= w[0]) {
            anyhow::bail!(
                "--idle-pauses must increase (got {:?}); the first, normally 0, is the baseline",
                self.idle_pauses
            );
        }
        if self.cached_prefixes.contains(&0) || self.cached_chunk == 0 {
            anyhow::bail!(
                "--cached-prefixes and --cached-chunk must be ≥ 1 token (got {:?} and {}): \
                 the probe sends a prefix, then new tokens after it",
                self.cached_prefixes,
                self.cached_chunk
            );
        }
        Ok(MicrobenchConfig {
            endpoint: self.server.endpoint(),
            prompt_lengths: self.prompt_lengths.clone(),
            repeats: self.repeats,
            streams: self.streams.clone(),
            decode_tokens: self.decode_tokens,
            decode_prompt: self.decode_prompt,
            timeout,
            chars_per_token: self.server.chars_per_token,
            use_tokenizer: !self.server.no_tokenize,
            mixed_streams: self.mixed_streams.clone(),
            mixed_prompt: self.mixed_prompt,
            budget: self.budget,
            pin_slots: self.pin_slots || !self.layouts.is_empty(),
            layouts: self
                .layouts
                .iter()
                .map(|l| parse_layout(l))
                .collect::<Result<_, _>>()
                .map_err(anyhow::Error::msg)?,
            long_prompt: self.long_prompt,
            decode_rounds: self.decode_rounds,
            cached_prefixes: self.cached_prefixes.clone(),
            cached_chunk: self.cached_chunk,
            idle_pauses: self.idle_pauses.clone(),
            idle_rounds: self.idle_rounds,
        })
    }
}

pub fn execute(args: MicrobenchArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let rt = crate::run::runtime()?;
    let pb = crate::run::progress_bar(false);
    let result = rt.block_on(microbench(&cfg, &pb))?;
    let csv = write(&result, &args.out)?;
    for p in &result.prefill {
        println!(
            "prefill {:>6} tokens: {:8.2} ms",
            p.prompt_tokens,
            p.latency_s * 1e3
        );
    }
    for d in &result.decode {
        println!(
            "decode  {:>6} streams in {:?} ({} micro-batches, {:.0} context tokens): {:7.2} ms/step ({} gaps)",
            d.streams,
            d.slots,
            d.ubatches,
            d.context_tokens,
            d.step_s * 1e3,
            d.gaps
        );
    }
    for m in &result.mixed {
        println!(
            "mixed   {:>2} streams + {:>4}-token chunk after {:>5}: {:7.2} ms",
            m.streams,
            m.chunk_tokens,
            m.prefix_tokens,
            m.step_s * 1e3
        );
    }
    for c in &result.cached {
        println!(
            "cached  {:>4} new tokens after {:>5} cached: {:7.2} ms",
            c.new_tokens,
            c.prefix_tokens,
            c.latency_s * 1e3
        );
    }
    println!("wrote {} and {}", args.out.display(), csv.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_layouts_count_runs_of_consecutive_slots() {
        assert_eq!(slot_runs(&[0]), 1);
        assert_eq!(slot_runs(&[0, 1, 2, 3]), 1);
        assert_eq!(slot_runs(&[2, 0]), 2);
        assert_eq!(slot_runs(&[0, 1, 3]), 2);
        assert_eq!(slot_runs(&[]), 0);
        assert_eq!(parse_layout("0+1+3"), Ok(vec![0, 1, 3]));
        assert!(parse_layout("0+x").is_err());
    }

    #[test]
    fn decode_points_written_before_layouts_read_as_one_micro_batch() {
        let d: DecodePoint = serde_json::from_str(
            r#"{"streams": 2, "step_s": 0.01, "step_p50_s": 0.01, "gaps": 9, "context_tokens": 128}"#,
        )
        .unwrap();
        assert_eq!((d.ubatches, d.slots.len()), (1, 0));
    }
}
