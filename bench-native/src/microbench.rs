//! `bench-native microbench`: the two curves a cost model needs, measured on a live server.
//!
//! * **Prefill**: one request at a time, `max_tokens = 1`, for each prompt length; the
//!   latency is the client-side TTFT (prefill emits the first token), median of
//!   `--repeats`; llama.cpp's own `timings.prompt_ms` is recorded beside it.
//! * **Decode**: N concurrent streams started together (short prompt, `--decode-tokens`
//!   output each); the step latency is the mean gap between consecutive chunks inside the
//!   window where all N streams are decoding (after the last first token, before the first
//!   stream ends).
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
  bench-native fit mb.json --out fit.json";

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
    /// Median of the server's own prompt time, if reported [s].
    pub server_prompt_s: Option<f64>,
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
}

/// The microbenchmark's result file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicrobenchResult {
    pub prefill: Vec<PrefillPoint>,
    pub decode: Vec<DecodePoint>,
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
    let longest = cfg.prompt_lengths.iter().copied().max().unwrap_or(1) as u64 + 1;
    ep.check_fits(longest.max(cfg.decode_prompt as u64 + cfg.decode_tokens as u64))?;
    let mut prompts = PromptBuilder::new(cfg.chars_per_token);
    if cfg.use_tokenizer {
        let mut lens = cfg.prompt_lengths.clone();
        lens.push(cfg.decode_prompt);
        prompts.calibrate(&ep, lens).await;
    }
    let metadata = crate::run::server_metadata(&ep).await;
    pb.set_length((cfg.prompt_lengths.len() * cfg.repeats + cfg.streams.len()) as u64);
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
            let res = ep.stream(t0, &body, cfg.timeout).await;
            if let Some(e) = res.error {
                return Err(RunError::Invalid(format!(
                    "prefill of {len} tokens failed: {e}"
                )));
            }
            let first = res.token_chunk_s.first().copied().ok_or_else(|| {
                RunError::Invalid(format!("prefill of {len} tokens: the server sent no token"))
            })?;
            samples.push(first - res.sent_s);
            if let Some(t) = res.timings {
                server.push(t.prompt_ms / 1e3);
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

    let mut decode = Vec::new();
    for &n in &cfg.streams {
        let mut tasks = Vec::new();
        for _ in 0..n.max(1) {
            id += 1;
            let body = ep.body(&prompts.prompt(id, cfg.decode_prompt), cfg.decode_tokens);
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
        let step_s = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
        let context = n as f64 * (cfg.decode_prompt as f64 + cfg.decode_tokens as f64 / 2.0);
        decode.push(DecodePoint {
            streams: n,
            step_s,
            step_p50_s: median(&gaps).unwrap_or(f64::NAN),
            gaps: gaps.len(),
            context_tokens: context,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(MicrobenchResult {
        prefill,
        decode,
        metadata,
    })
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
        w.write_record([
            "decode_streams".to_string(),
            d.streams.to_string(),
            d.step_s.to_string(),
            d.step_p50_s.to_string(),
        ])?;
    }
    w.flush().map_err(|source| RunError::Io {
        path: csv_path.clone(),
        source,
    })?;
    Ok(csv_path)
}

pub fn execute(args: MicrobenchArgs) -> anyhow::Result<()> {
    let cfg = MicrobenchConfig {
        endpoint: args.server.endpoint(),
        prompt_lengths: args.prompt_lengths.clone(),
        repeats: args.repeats,
        streams: args.streams.clone(),
        decode_tokens: args.decode_tokens,
        decode_prompt: args.decode_prompt,
        timeout: Duration::from_secs_f64(args.server.timeout),
        chars_per_token: args.server.chars_per_token,
        use_tokenizer: !args.server.no_tokenize,
    };
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
            "decode  {:>6} streams: {:7.2} ms/step ({} gaps)",
            d.streams,
            d.step_s * 1e3,
            d.gaps
        );
    }
    println!("wrote {} and {}", args.out.display(), csv.display());
    Ok(())
}
