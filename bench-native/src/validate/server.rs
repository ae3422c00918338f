//! What the simulator is told about the server: its slots, KV cache and budget, read from
//! its metadata or the flags, and how that maps onto the engine's named server models.

use super::ValidateArgs;
use anyhow::{bail, Context};
use engine::fleet::RouterKind;
use serde_json::Value;

/// What the simulator is told about the server.
#[derive(Clone, Debug)]
pub(super) struct ServerModel {
    pub(super) slots: u32,
    pub(super) kv_tokens: u64,
    pub(super) block_size: u32,
    pub(super) per_slot: Option<u64>,
    pub(super) budget: u32,
    /// Copies of this server behind `router` (1: the server alone).
    pub(super) replicas: u32,
    pub(super) router: RouterKind,
}

/// How [`sim_config`] models the server's KV cache, in words.
pub(super) fn kv_text(m: &ServerModel) -> String {
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

pub(super) fn server_model(args: &ValidateArgs, meta: &Value) -> anyhow::Result<ServerModel> {
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
    let (replicas, router) = super::fleet_spec(args)?;
    Ok(ServerModel {
        slots,
        kv_tokens,
        block_size,
        per_slot,
        budget: args.budget,
        replicas,
        router,
    })
}

/// prompt + output ≤ the per-slot context (one token of slack for BOS) and `--max-len`.
pub(super) fn length_cap(args: &ValidateArgs, model: &ServerModel) -> u32 {
    match model.per_slot {
        Some(c) => args.max_len.min(c.saturating_sub(1).max(2) as u32),
        None => args.max_len,
    }
}
