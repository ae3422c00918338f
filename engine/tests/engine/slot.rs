//! llama.cpp's slot cache (docs/model.md, Slot cache): a hand-built scenario with every
//! request's exact reuse and slot, the conformance suite with the cache on, what it does
//! when nothing is shared, and the configurations it refuses.

use super::*;
use engine::cost::LinearCost;
use engine::sim::simulate_requests;
use engine::workload::{Conversations, Request, SharedTokens, SystemPrompts};
use engine::PrefixCache;

fn system(groups: u32, share: f64, tokens: u32) -> SystemPrompts {
    SystemPrompts {
        groups,
        share,
        tokens,
        zipf: 0.0,
    }
}

fn req(id: u64, arrival: f64, prompt: u32, group: u16) -> Request {
    Request {
        id,
        arrival,
        prompt,
        output: 4,
        class: 0,
        group,
        conv: 0,
    }
}

const BETA0: f64 = 0.01;
const BETA_PREFILL: f64 = 1e-3;

/// `llama-server -np 2 -c 512 -b 2048`, group system prompts of 40 tokens, and a cost
/// whose prefill iteration takes β0 + βp × prompt tokens, so a lone request's TTFT tells
/// how many tokens it prefilled.
fn two_slots(prefix_cache: PrefixCache) -> SimConfig {
    let mut cfg = SimConfig::llama_cpp(1.0, 2, 512, 2048);
    cfg.cost = CostModel::Linear(LinearCost {
        beta0: BETA0,
        beta_prefill: BETA_PREFILL,
        beta_decode: 1e-3,
        ..LinearCost::default()
    });
    cfg.workload.shared = Some(SharedTokens::Prefixes {
        system: system(2, 1.0, 40),
    });
    cfg.server.prefix_cache = prefix_cache;
    cfg.horizon_s = 1000.0;
    cfg.keep_records = true;
    cfg
}

/// Tokens request `i` prefilled, from its TTFT (it ran alone).
fn prefilled(rep: &engine::sim::SimReport, i: usize) -> f64 {
    ((rep.records[i].ttft().unwrap() - BETA0) / BETA_PREFILL).round()
}

#[test]
fn two_slots_exact_reuse_per_request() {
    // A (group 1, 50 tokens): a fresh server, no slot holds anything: the least recently
    // used slot, ties to the highest index, slot 1; nothing reused. Slot 1 then holds
    // A's 50 prompt + 3 generated tokens (the last sampled token is never computed).
    // A' (group 1, 60): slot 1 shares the 40 system tokens, 40/60 > 0.1: slot 1, 40
    // reused. B (group 2, 50): slot 1 shares only BOS (1/50): the LRU slot, 0, still
    // empty. A'' (group 1, 45): slot 1 shares 40 (0.89), slot 0 BOS: slot 1, 40 reused.
    // C (no group, 8 tokens): both slots share BOS, 1/8 > 0.1, the lower index wins:
    // slot 0, 1 reused. D and E (group 1, 50) together: D takes slot 1 (40 reused), E
    // the only idle slot left, 0 (C's tokens: BOS reused), and both prefill in one
    // iteration.
    let reqs = vec![
        req(0, 0.0, 50, 1),
        req(1, 100.0, 60, 1),
        req(2, 200.0, 50, 2),
        req(3, 300.0, 45, 1),
        req(4, 400.0, 8, 0),
        req(5, 500.0, 50, 1),
        req(6, 500.0, 50, 1),
    ];
    let on = simulate_requests(&two_slots(PrefixCache::Slot), reqs.clone().into_iter());
    let off = simulate_requests(&two_slots(PrefixCache::Off), reqs.into_iter());
    let reused = [0.0, 40.0, 0.0, 40.0, 1.0];
    for (i, hit) in reused.iter().enumerate() {
        let p = on.records[i].prompt_tokens as f64;
        assert_eq!(prefilled(&on, i), p - hit, "request {i}");
        assert_eq!(prefilled(&off, i), p, "request {i}, cache off");
    }
    // D and E share one prefill iteration of (50 − 40) + (50 − 1) tokens.
    for i in [5, 6] {
        assert_eq!(prefilled(&on, i), 10.0 + 49.0, "request {i}");
        assert_eq!(prefilled(&off, i), 100.0, "request {i}, cache off");
    }
    let p = on.stats.prefix.as_ref().expect("the slot cache reports");
    assert_eq!((p.lookups, p.hit_lookups), (7, 5));
    assert_eq!(p.query_tokens, 50 + 60 + 50 + 45 + 8 + 50 + 50);
    assert_eq!(p.saved_tokens, 40 + 40 + 1 + 40 + 1);
    // Token-exact: blocks are tokens, each prompt's last token never looked up.
    assert_eq!(p.query_blocks, p.query_tokens - 7);
    assert_eq!(p.hit_blocks, p.saved_tokens);
    assert_eq!(p.token_hit_rate, Some(122.0 / 313.0));
    // Dropped from a slot when a new request takes it: A' 53 − 40, A'' 63 − 40, C 53 − 1
    // (B's), D 48 − 40 (A''s), E 11 − 1 (C's).
    assert_eq!(p.evictions, 13 + 23 + 52 + 8 + 10);
    // Most tokens held: A' (63) and B (53) after B; at the end D's and E's 53 each.
    assert_eq!(p.peak_cached_blocks, 63 + 53);
    assert_eq!(p.cached_blocks_at_end, 53 + 53);
    assert_eq!(p.held_blocks_at_end, 0);
    assert_eq!((p.ttft_hit.n, p.ttft_miss.n), (5, 2));
    assert!(p.ttft_hit.mean.unwrap() < p.ttft_miss.mean.unwrap());
    assert_eq!(on.stats.kv_used_at_end_tokens, 0);
    assert!(off.stats.prefix.is_none());
}

#[test]
fn slot_choice_follows_similarity_and_the_threshold() {
    // Two slots hold group 1 and group 2 (A on slot 1, B on slot 0). A group-2 request
    // goes to slot 0 though slot 1 was released longer ago; a group-2 request whose
    // shared part is only 10 % of its prompt (40 of 400, not above the threshold) goes
    // by LRU instead, to slot 1 (A's), and reuses only BOS.
    let reqs = vec![
        req(0, 0.0, 50, 1),
        req(1, 1.0, 50, 2),
        req(2, 100.0, 60, 2),
        req(3, 200.0, 400, 2),
    ];
    let on = simulate_requests(&two_slots(PrefixCache::Slot), reqs.into_iter());
    assert_eq!(prefilled(&on, 2), 20.0, "B's group on B's slot");
    assert_eq!(prefilled(&on, 3), 399.0, "10 % is not above the threshold");
    let p = on.stats.prefix.unwrap();
    assert_eq!(p.saved_tokens, 40 + 1);
}

fn shared_workloads() -> Vec<(&'static str, SharedTokens)> {
    vec![
        (
            "prefixes",
            SharedTokens::Prefixes {
                system: system(4, 0.7, 100),
            },
        ),
        (
            "conversations",
            SharedTokens::Conversations {
                conversations: Conversations {
                    mean_turns: 3.0,
                    max_turns: 6,
                    think_s: 4.0,
                },
                system: Some(system(2, 0.5, 40)),
            },
        ),
    ]
}

#[test]
fn conformance_with_the_slot_cache_on() {
    for (name, shared) in shared_workloads() {
        for (rate, slots, ctx) in [(2.0, 4, 4096), (8.0, 8, 8192)] {
            // llama-server's own configuration (token-exact, per-slot context) and the
            // shared suite's paged server (16-token blocks, a tight pool that preempts).
            let mut llama = SimConfig::llama_cpp(rate, slots, ctx, 256);
            llama.workload.lengths = LengthDist::short_long_mix();
            let mut paged = base(
                Policy::LlamaCpp,
                KvMode::Paged,
                LengthDist::short_long_mix(),
                rate,
            );
            paged.workload.max_model_len = Some(1024);
            paged.server.kv_tokens = 2048;
            for (kind, mut cfg) in [("llama", llama), ("paged", paged)] {
                cfg.workload.shared = Some(shared.clone());
                cfg.server.prefix_cache = PrefixCache::Slot;
                cfg.horizon_s = 150.0;
                cfg.keep_records = true;
                cfg.timeseries_points = 200;
                let label = format!("{kind}/{name}/λ={rate}/slots={slots}");
                check_conformance(&cfg, &label);
                let rep = simulate(&cfg).unwrap();
                let p = rep.stats.prefix.as_ref().unwrap();
                assert!(p.lookups >= rep.summary.completed, "{label}: {p:?}");
                assert!(p.saved_tokens <= p.query_tokens, "{label}");
                assert!(p.hit_blocks <= p.query_blocks, "{label}");
                assert!(
                    p.saved_tokens > p.hit_lookups,
                    "{label}: shared prompts reuse more than BOS: {p:?}"
                );
                assert_eq!(p.held_blocks_at_end, 0, "{label}: released at the end");
                assert_eq!(rep.stats.kv_used_at_end_tokens, 0, "{label}");
                let cut = SimConfig {
                    end: EndRule::Cut,
                    ..cfg
                };
                check_conformance(&cut, &format!("{label}/cut"));
            }
        }
    }
}

#[test]
fn with_nothing_shared_a_used_slot_gives_its_bos_token() {
    // Nothing shared: every prompt has only BOS in common with a used slot, so the slot
    // choice is the cache-off rule and each admission to a used slot reuses exactly one
    // token; only the first admission to each slot finds it empty, and a one-token
    // prompt reuses nothing.
    let slots = 4;
    let mut cfg = SimConfig::llama_cpp(3.0, slots, 4 * 2048, 512);
    cfg.workload.lengths = LengthDist::sharegpt();
    cfg.horizon_s = 200.0;
    let off = simulate(&cfg).unwrap();
    cfg.server.prefix_cache = PrefixCache::Slot;
    let on = simulate(&cfg).unwrap();
    assert_eq!(on.summary.completed, off.summary.completed);
    let p = on.stats.prefix.unwrap();
    assert!(p.lookups > 300, "a loaded run: {p:?}");
    assert_eq!(p.saved_tokens, p.hit_lookups, "one BOS token per hit");
    // Misses: each slot's first use, and the one-token prompts (their one token is
    // always evaluated).
    let one_token = cfg
        .workload
        .generate(cfg.seed, cfg.horizon_s)
        .unwrap()
        .iter()
        .filter(|r| r.prompt == 1)
        .count() as u64;
    assert!(one_token > 0, "ShareGPT has one-token prompts");
    let first_uses = p.lookups - p.hit_lookups - one_token;
    assert!(
        (1..=slots as u64).contains(&first_uses),
        "{first_uses} first uses of {slots} slots: {p:?}"
    );
    assert!(on.summary.ttft.mean.unwrap() <= off.summary.ttft.mean.unwrap());
}

#[test]
fn the_slot_cache_needs_the_llama_cpp_policy_and_paged_kv() {
    let mut cfg = two_slots(PrefixCache::Slot);
    cfg.server.policy = Policy::Chunked;
    let e = simulate(&cfg).unwrap_err();
    assert!(matches!(e, engine::ConfigError::PrefixCache(_)), "{e}");
    assert!(e.to_string().contains("llama_cpp policy"), "{e}");
    let mut cfg = two_slots(PrefixCache::Slot);
    cfg.server.kv_mode = KvMode::Reserve;
    let e = simulate(&cfg).unwrap_err();
    assert!(e.to_string().contains("paged"), "{e}");
    // vLLM's automatic prefix caching stays valid with llama.cpp's scheduling.
    simulate(&two_slots(PrefixCache::Apc)).unwrap();
    // Che's approximation is of one LRU block cache: it refuses the slot cache.
    let mut cfg = two_slots(PrefixCache::Slot);
    cfg.workload.lengths = LengthDist::Fixed {
        prompt: 32,
        output: 8,
    };
    cfg.workload.max_model_len = None;
    let e = engine::analytic::predict_prefix_cache(&cfg).unwrap_err();
    assert!(e.to_string().contains("slot cache"), "{e}");
}
