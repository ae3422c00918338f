//! Writes the sample traces of `data/traces/` (docs/model.md, Imported traces): made by
//! this program from seeded random numbers, in the documented columns of Mooncake
//! (JSONL), BurstGPT (CSV) and the Azure LLM inference trace (CSV). No real trace's data.
//!
//! ```text
//! cargo run --release -p engine --example trace_samples                # data/traces/*
//! cargo run --release -p engine --example trace_samples -- --mooncake-requests 1000000 \
//!     --out /tmp/mooncake-1m.jsonl                                       # one big Mooncake file
//! ```
//!
//! The Mooncake sample is chat traffic with shared tokens: conversations start as a
//! Poisson process (0.5 per second); each belongs to one of 4 groups whose 1,024-token
//! system prompt (2 blocks of 512) it begins with; a conversation has 1–6 turns, 20 s
//! apart on average (exponential), and turn k's prompt is the whole conversation so far
//! plus a new user message (lognormal, median 120 tokens). Output lengths are lognormal
//! (median 180). Hash ids follow Mooncake's rule: one id per 512-token block of the
//! prompt, equal ids for equal prefixes (the group's system prompt blocks; a
//! conversation's earlier full prompt blocks), fresh ids otherwise.

use engine::workload::import::{self, BlockIds, ImportedTrace, Skipped, TraceFormat};
use engine::workload::{ArrivalProcess, LengthDist, TraceRequest, Workload};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use std::fmt::Write;

const BLOCK: u32 = import::MOONCAKE_BLOCK_TOKENS;

/// Chat traffic with shared prefixes, `n` requests, in Mooncake's columns.
fn mooncake(n: usize, seed: u64) -> ImportedTrace {
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    let starts = Exp::new(0.5).expect("rate > 0");
    let think = Exp::new(1.0 / 20.0).expect("rate > 0");
    let user = LogNormal::new(120f64.ln(), 0.8).expect("sigma > 0");
    let answer = LogNormal::new(180f64.ln(), 0.6).expect("sigma > 0");
    let groups = 4u32;
    let system = 2 * BLOCK;
    // Ids 0..8: the groups' system prompt blocks; then fresh ids.
    let mut next_id = groups * 2;
    let mut rows: Vec<(f64, u32, u32, Vec<u32>)> = Vec::with_capacity(n + 8);
    let mut t = 0.0;
    while rows.len() < n {
        t += starts.sample(&mut rng);
        let g = rng.random_range(0..groups);
        let turns = rng.random_range(1..=6);
        let mut at = t;
        let mut history = system;
        let mut stable: Vec<u32> = vec![2 * g, 2 * g + 1];
        for _ in 0..turns {
            let prompt = history + (user.sample(&mut rng) as u32).max(1);
            let mut ids = stable.clone();
            while (ids.len() as u32) < prompt.div_ceil(BLOCK) {
                ids.push(next_id);
                next_id += 1;
            }
            let output = (answer.sample(&mut rng) as u32).clamp(1, 4096);
            // The next turn shares this prompt's full blocks.
            stable = ids[..(prompt / BLOCK) as usize].to_vec();
            rows.push((at, prompt, output, ids));
            history = prompt + output;
            at += think.sample(&mut rng);
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.truncate(n);
    let mut blocks = BlockIds {
        block_tokens: BLOCK,
        offsets: vec![0],
        ids: Vec::new(),
        shared: Vec::new(),
    };
    let t0 = rows.first().map_or(0.0, |r| r.0);
    let requests = rows
        .into_iter()
        .map(|(at, prompt, output, ids)| {
            blocks.ids.extend(ids);
            blocks.offsets.push(blocks.ids.len() as u32);
            TraceRequest {
                arrival: ((at - t0) * 1000.0).round() / 1000.0,
                prompt,
                output,
                class: 0,
            }
        })
        .collect();
    ImportedTrace {
        requests,
        blocks: Some(blocks),
        skipped: Skipped::default(),
        lines: 0,
    }
}

/// Requests from the engine's own generator: gamma arrivals, lognormal lengths.
fn generated(
    rate: f64,
    burstiness: f64,
    lengths: LengthDist,
    n: usize,
    seed: u64,
) -> Vec<TraceRequest> {
    let w = Workload {
        arrivals: ArrivalProcess::Gamma { rate, burstiness },
        lengths,
        max_model_len: None,
        shared: None,
    };
    w.stream(seed, 1e9)
        .expect("valid workload")
        .take(n)
        .map(|r| TraceRequest {
            arrival: (r.arrival * 1000.0).round() / 1000.0,
            prompt: r.prompt,
            output: r.output,
            class: 0,
        })
        .collect()
}

/// BurstGPT's columns, with every 16th request failed (0 response tokens, as the real
/// trace records failures).
fn burstgpt(n: usize, seed: u64) -> String {
    let reqs = generated(
        2.0,
        0.25,
        LengthDist::Lognormal {
            prompt_median: 600.0,
            prompt_sigma: 1.0,
            output_median: 250.0,
            output_sigma: 0.8,
        },
        n,
        seed,
    );
    let mut s =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for (i, r) in reqs.iter().enumerate() {
        let model = if i % 5 == 0 { "GPT-4" } else { "ChatGPT" };
        let out = if i % 16 == 15 { 0 } else { r.output };
        let _ = writeln!(
            s,
            "{},{model},{},{out},{},Conversation log",
            r.arrival,
            r.prompt,
            r.prompt + out
        );
    }
    s
}

/// The Azure trace's columns: long contexts, short outputs (code completion).
fn azure(n: usize, seed: u64) -> String {
    let reqs = generated(
        4.0,
        0.5,
        LengthDist::Lognormal {
            prompt_median: 1800.0,
            prompt_sigma: 0.9,
            output_median: 20.0,
            output_sigma: 1.0,
        },
        n,
        seed,
    );
    import::render(
        &ImportedTrace {
            requests: reqs,
            ..ImportedTrace::default()
        },
        TraceFormat::Azure,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if let Some(n) = flag("--mooncake-requests") {
        let n: usize = n.parse().expect("--mooncake-requests N");
        let out = flag("--out").expect("--out FILE");
        let text = import::render(&mooncake(n, 1), TraceFormat::Mooncake);
        std::fs::write(&out, text).expect("writing --out");
        println!("wrote {n} requests to {out}");
        return;
    }
    let dir = flag("--out").unwrap_or_else(|| "data/traces".into());
    std::fs::create_dir_all(&dir).expect("creating the output directory");
    let files = [
        (
            "mooncake-sample.jsonl",
            import::render(&mooncake(300, 1), TraceFormat::Mooncake),
        ),
        ("burstgpt-sample.csv", burstgpt(300, 2)),
        ("azure-sample.csv", azure(300, 3)),
    ];
    for (name, text) in files {
        let path = format!("{dir}/{name}");
        std::fs::write(&path, &text).expect("writing a sample");
        let format = TraceFormat::detect(&text).expect("a sample's format is detected");
        let t = import::import(&text, format).expect("a sample imports");
        println!(
            "{path}: {} requests, {} skipped, last arrival {:.1} s",
            t.requests.len(),
            t.skipped.total(),
            t.requests.last().map_or(0.0, |r| r.arrival)
        );
    }
}
