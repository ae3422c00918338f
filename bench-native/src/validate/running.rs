//! The live `validate` run: microbenchmark the server, pick the rates, measure every
//! rate's trace (in rounds), microbenchmark again, then predict and report.

use super::predict::{capacity, predict_and_report, trace, Measured};
use super::replay::RecordedArgs;
use super::server::{length_cap, server_model, ServerModel};
use super::{colocation, fmt_rate, round2, ValidateArgs, ValidateReport, BESIDE};
use crate::client::{Endpoint, EndpointConfig};
use crate::fit;
use crate::microbench::{self, MicrobenchConfig};
use crate::run::{run_load, RunConfig};
use anyhow::{bail, Context};
use engine::metrics::Summary;
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use indicatif::ProgressBar;
use serde_json::Value;
use std::time::Duration;

/// Steps 1–5 against the server of `args.server`; `command` heads the report.
///
/// # Errors
/// An unreachable server, a failed microbenchmark or run, file errors.
pub(super) fn measure(args: &ValidateArgs, command: &str) -> anyhow::Result<ValidateReport> {
    let out = args.out.clone();
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
    if let Some(b) = &args.balancer {
        eprintln!(
            "fleet: measured through {b}, predicted as {} replicas behind {}",
            model.replicas,
            model.router.name()
        );
    }

    let mbc = microbench_config(args, &model, cap, &meta, &endpoint);
    eprintln!("1/4 microbenchmark (before the measurement)");
    let mb_pre = rt.block_on(microbench::microbench(&mbc, &ProgressBar::hidden()))?;
    microbench::write(&mb_pre, &out.join("microbench_pre.json"))?;

    // With --mb-beside: the same microbenchmark while the replicas sharing the machine
    // decode (colocation.rs), once, before the measurement.
    let mb_beside = if args.mb_beside.is_empty() {
        None
    } else {
        eprintln!(
            "1/4 microbenchmark beside busy neighbours ({})",
            args.mb_beside.join(", ")
        );
        let tokens = model
            .per_slot
            .map_or(512, |p| (p / 2).clamp(16, 1024) as u32);
        let b = rt.block_on(colocation::beside(
            &mbc,
            &args.mb_beside,
            model.slots,
            tokens,
        ))?;
        microbench::write(&b, &out.join(BESIDE))?;
        Some(b)
    };

    // 2. rates from the pre-measurement fit's saturation throughput (beside busy
    // neighbours, when they slow it: at saturation every replica is busy)
    let cost_pre = args.cost.of(&fit::fit(&mb_pre, false)?);
    let full = mb_beside
        .as_ref()
        .and_then(|b| colocation::slowdown(&mb_pre, b))
        .map_or(1.0, |s| s.factor);
    let capacity_pre = capacity(args, &model, &cost_pre.scaled(full), cap)?;
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
    // The measured runs go through the balancer when there is one; the microbenchmarks
    // stay on the one replica at --url.
    let run_endpoint = EndpointConfig {
        url: args
            .balancer
            .clone()
            .unwrap_or_else(|| endpoint.url.clone()),
        ..endpoint.clone()
    };
    let summaries = measure_rounds(args, &rt, &run_endpoint, &rates, &traces)?;
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
    // the wake-up after idle is measured once, before
    let mb_post = rt.block_on(microbench::microbench(
        &mbc.without_idle_probe(),
        &ProgressBar::hidden(),
    ))?;
    microbench::write(&mb_post, &out.join("microbench_post.json"))?;
    predict_and_report(
        args,
        command,
        &model,
        cap,
        (&mb_pre, &mb_post),
        mb_beside.as_ref(),
        measured,
    )
}

/// The microbenchmark of a server `model` with length cap `cap`: prompt lengths below the
/// cap, 1..=slots decode streams, and on llama-server decodes pinned to consecutive slots
/// plus two split layouts.
fn microbench_config(
    args: &ValidateArgs,
    model: &ServerModel,
    cap: u32,
    meta: &Value,
    endpoint: &EndpointConfig,
) -> MicrobenchConfig {
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
    MicrobenchConfig {
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
        cached_prefixes: vec![],
        cached_chunk: 32,
        idle_pauses: args.mb_idle_pauses.clone(),
        idle_rounds: args.mb_idle_rounds,
    }
}

/// Every rate's trace measured `--rounds` times (round k ≥ 2 in `repeat-<k>/`): the
/// summaries per rate, in round order.
fn measure_rounds(
    args: &ValidateArgs,
    rt: &tokio::runtime::Runtime,
    endpoint: &EndpointConfig,
    rates: &[f64],
    traces: &[Vec<TraceRequest>],
) -> anyhow::Result<Vec<Vec<Summary>>> {
    let out = &args.out;
    let rounds = args.rounds.max(1);
    let mut summaries: Vec<Vec<Summary>> = vec![Vec::new(); rates.len()];
    for round in 1..=rounds {
        let dir = if round == 1 {
            out.clone()
        } else {
            out.join(format!("repeat-{round}"))
        };
        for (i, (&rate, t)) in rates.iter().zip(traces).enumerate() {
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
                shared: None,
            };
            rc.seed = args.seed;
            rc.horizon_s = 1e6;
            rc.warmup_requests = 1;
            rc.timeout = Duration::from_secs_f64(args.server.timeout);
            rc.chars_per_token = args.server.chars_per_token;
            rc.use_tokenizer = !args.server.no_tokenize;
            if args.balancer.is_some() {
                // No /metrics scraping through a balancer: every scrape would take a
                // turn of its policy (round-robin's alternation of the trace's requests
                // broken once a second), and it would read one replica's counters.
                rc.metrics_interval = None;
            }
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
    Ok(summaries)
}
