//! The prefix cache (docs/model.md, Prefix caching): a hand-built scenario with its exact
//! hit and eviction counts, the conformance suite with the cache on for every policy
//! that runs paged KV, and the cache off (or with nothing shared) leaving every record
//! as it was.

use super::*;
use engine::sim::{simulate_requests, SimReport};
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

/// 8 blocks of 16 tokens, no watermark; group 1's system prompt is 48 tokens (3 blocks).
fn hand_built(prefix_cache: PrefixCache) -> SimConfig {
    let mut cfg = base(
        Policy::Continuous,
        KvMode::Paged,
        LengthDist::Fixed {
            prompt: 64,
            output: 4,
        },
        1.0,
    );
    cfg.workload.shared = Some(SharedTokens::Prefixes {
        system: system(1, 1.0, 48),
    });
    cfg.server.kv_tokens = 128;
    cfg.server.watermark = 0.0;
    cfg.server.prefix_cache = prefix_cache;
    cfg.horizon_s = 400.0;
    cfg
}

#[test]
fn two_requests_sharing_three_blocks_then_an_eviction() {
    // A (group 1, 64-token prompt, 4 output tokens) leaves its 4 full blocks cached
    // (the last output token is never computed: 67 tokens in KV); B (group 1, 60 tokens)
    // finds the 3 system-prompt blocks and caches none of its own (63 tokens in KV, 3
    // full blocks, all the group's). C (no group, 90 tokens = 6 blocks) finds 4 idle
    // cached blocks and 4 empty ones, so it evicts the 2 least recently used: A's block
    // 3 and the group's block 2 (a leaving request's block 0 goes last in line). C
    // leaves 5 full blocks of its own. D (group 1, 60 tokens) finds blocks 0 and 1
    // only, and its 2 new blocks evict one of C's.
    let reqs = [
        req(0, 0.0, 64, 1),
        req(1, 100.0, 60, 1),
        req(2, 200.0, 90, 0),
        req(3, 300.0, 60, 1),
    ];
    let on = simulate_requests(&hand_built(PrefixCache::Apc), reqs.into_iter());
    let off = simulate_requests(&hand_built(PrefixCache::Off), reqs.into_iter());
    let p = on.stats.prefix.as_ref().expect("the cache is on");
    assert_eq!(p.lookups, 4);
    assert_eq!(p.hit_lookups, 2);
    // Looked up: the full blocks of the first prompt − 1 tokens: 3 + 3 + 5 + 3.
    assert_eq!(p.query_blocks, 14);
    assert_eq!(p.hit_blocks, 3 + 2);
    assert_eq!(p.saved_tokens, 5 * 16);
    assert_eq!(p.query_tokens, 64 + 60 + 90 + 60);
    assert_eq!(p.evictions, 2 + 1, "{p:?}");
    // At the end: C's 4 left, and the group's 3 (D cached block 2 again).
    assert_eq!(p.cached_blocks_at_end, 7);
    assert_eq!(p.peak_cached_blocks, 7);
    assert_eq!(p.held_blocks_at_end, 0);
    assert_eq!(p.ttft_hit.n, 2);
    assert_eq!(p.ttft_miss.n, 2);
    assert_eq!(on.stats.kv_used_at_end_tokens, 0);
    assert!(off.stats.prefix.is_none());
    // The hits prefill less, so their first token comes sooner; the misses are unchanged.
    let ttft = |r: &SimReport, i: usize| r.records[i].ttft().unwrap();
    assert_eq!(ttft(&on, 0), ttft(&off, 0));
    assert_eq!(ttft(&on, 2), ttft(&off, 2));
    assert!(ttft(&on, 1) < ttft(&off, 1), "B skips 48 of 60 tokens");
    assert!(ttft(&on, 3) < ttft(&off, 3), "D skips 32 of 60 tokens");
    assert!(ttft(&on, 1) < ttft(&on, 3), "B skipped more than D");
}

#[test]
fn a_prompt_of_whole_cached_blocks_still_prefills_its_last_token() {
    // Both prompts are exactly 3 blocks: the lookup stops before the block holding the
    // last prompt token (as vLLM does), so the second finds 2 blocks, not 3.
    let reqs = [req(0, 0.0, 48, 1), req(1, 100.0, 48, 1)];
    let on = simulate_requests(&hand_built(PrefixCache::Apc), reqs.into_iter());
    let p = on.stats.prefix.unwrap();
    assert_eq!((p.query_blocks, p.hit_blocks, p.saved_tokens), (4, 2, 32));
}

#[test]
fn reserve_mode_with_the_prefix_cache_is_an_error() {
    let mut cfg = hand_built(PrefixCache::Apc);
    cfg.server.kv_mode = KvMode::Reserve;
    let e = simulate(&cfg).unwrap_err();
    assert!(matches!(e, engine::ConfigError::PrefixCache(_)), "{e}");
    assert!(e.to_string().contains("paged"), "{e}");
}

fn shared_workloads() -> Vec<(&'static str, Option<SharedTokens>)> {
    vec![
        (
            "prefixes",
            Some(SharedTokens::Prefixes {
                system: system(4, 0.7, 100),
            }),
        ),
        (
            "conversations",
            Some(SharedTokens::Conversations {
                conversations: Conversations {
                    mean_turns: 3.0,
                    max_turns: 6,
                    think_s: 4.0,
                },
                system: Some(system(2, 0.5, 40)),
            }),
        ),
    ]
}

#[test]
fn conformance_with_the_prefix_cache_on_every_paged_policy() {
    for policy in Policy::ALL {
        for (name, shared) in shared_workloads() {
            for (rate, kv) in [(2.0, 4096), (8.0, 2048)] {
                let mut cfg = base(policy, KvMode::Paged, LengthDist::short_long_mix(), rate);
                cfg.workload.shared = shared.clone();
                cfg.workload.max_model_len = Some(1024);
                cfg.server.kv_tokens = kv;
                cfg.server.prefix_cache = PrefixCache::Apc;
                let label = format!("{policy:?}/{name}/λ={rate}/K={kv}");
                // Every invariant of a run; in debug builds the KV manager also walks its
                // table at every release (no block both idle and held, counts agree,
                // held + idle cached blocks within capacity).
                check_conformance(&cfg, &label);
                let rep = simulate(&cfg).unwrap();
                let p = rep.stats.prefix.as_ref().unwrap();
                let blocks = kv / 16;
                assert!(p.peak_cached_blocks <= blocks, "{label}: {p:?}");
                assert!(p.cached_blocks_at_end <= blocks, "{label}");
                assert_eq!(p.held_blocks_at_end, 0, "{label}: released at the end");
                assert_eq!(rep.stats.kv_used_at_end_tokens, 0, "{label}");
                assert!(p.hit_blocks <= p.query_blocks, "{label}");
                assert!(p.hit_blocks > 0, "{label}: shared prompts hit");
                assert!(
                    rep.timeseries.iter().all(|t| t.kv_cached_tokens <= kv),
                    "{label}"
                );
                // Cut runs hold what is still running at the end.
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
fn the_cache_changes_nothing_when_nothing_is_shared_or_it_is_off() {
    for policy in Policy::ALL {
        let mut cfg = base(policy, KvMode::Paged, LengthDist::sharegpt(), 6.0);
        cfg.server.kv_tokens = 16384;
        let off = simulate(&cfg).unwrap();
        assert!(off.summary.completed > 100, "{policy:?}: a loaded run");
        assert_eq!(off.summary.preemptions, 0, "{policy:?}");
        // Nothing shared and no preemption (a preempted request finds its own blocks):
        // blocks are cached and evicted but never hit, and cached blocks count as free,
        // so every decision and record is the same.
        cfg.server.prefix_cache = PrefixCache::Apc;
        let on = simulate(&cfg).unwrap();
        assert_eq!(digest(&on.records), digest(&off.records), "{policy:?}");
        assert_eq!(on.summary, off.summary, "{policy:?}");
        let p = on.stats.prefix.unwrap();
        assert_eq!(p.hit_blocks, 0);
        assert!(
            p.peak_cached_blocks > 0,
            "{policy:?}: own blocks are cached"
        );
        // Off: no prefix report, and the time series writes nothing new.
        assert!(off.stats.prefix.is_none());
        let json = serde_json::to_string(&off.timeseries).unwrap();
        assert!(!json.contains("kv_cached_tokens"));
    }
}

/// The validation grid of Che's approximation (docs/accuracy.md, Prefix cache): a
/// vLLM-like server (chunked, 16-token blocks, the A10G table cost) under 4 req/s of
/// fixed 128 → 64-token requests, a share of them behind one of G system prompts of 512
/// tokens (Zipf 1 popularity), at two KV sizes.
fn model_grid() -> Vec<(f64, u32, u64)> {
    let mut g = Vec::new();
    for share in [0.5, 0.9] {
        for groups in [4, 32] {
            for kv in [8192, 32768] {
                g.push((share, groups, kv));
            }
        }
    }
    g
}

fn grid_config(share: f64, groups: u32, kv: u64, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::vllm_like(4.0);
    cfg.workload.lengths = LengthDist::Fixed {
        prompt: 128,
        output: 64,
    };
    cfg.workload.shared = Some(SharedTokens::Prefixes {
        system: SystemPrompts {
            groups,
            share,
            tokens: 512,
            zipf: 1.0,
        },
    });
    cfg.server.max_batch = 32;
    cfg.server.kv_tokens = kv;
    cfg.server.prefix_cache = PrefixCache::Apc;
    cfg.horizon_s = 600.0;
    cfg.seed = seed;
    cfg.keep_records = false;
    cfg.timeseries_points = 0;
    cfg
}

#[test]
fn che_hit_rate_and_mean_ttft_match_the_simulator() {
    use engine::analytic::predict_prefix_cache;
    use engine::metrics::Aggregate;
    println!("share groups kv_tokens | hit_sim ± ci95 hit_model | ttft_sim_ms ± ci95 ttft_model_ms | ttft_off_model_ms");
    for (share, groups, kv) in model_grid() {
        let runs: Vec<_> = (0..5)
            .map(|seed| simulate(&grid_config(share, groups, kv, seed)).unwrap())
            .collect();
        let hit = Aggregate::of(
            runs.iter()
                .map(|r| r.stats.prefix.as_ref().unwrap().block_hit_rate),
        );
        let ttft = Aggregate::of(runs.iter().map(|r| r.summary.ttft.mean));
        let m = predict_prefix_cache(&grid_config(share, groups, kv, 0)).unwrap();
        let (hs, hc) = (hit.mean.unwrap(), hit.ci95.unwrap());
        let (ts, tc) = (ttft.mean.unwrap(), ttft.ci95.unwrap());
        let tm = m.ttft_mean_s.unwrap();
        println!(
            "{share} {groups} {kv} | {hs:.4} ± {hc:.4} {:.4} | {:.2} ± {:.2} {:.2} | {:.2}",
            m.block_hit_rate,
            ts * 1e3,
            tc * 1e3,
            tm * 1e3,
            m.ttft_mean_off_s.unwrap() * 1e3
        );
        // The seeds' 95 % interval, widened by the model's own approximation error:
        // Che's (independent references, no burst misses) and the batching model's.
        assert!(
            (m.block_hit_rate - hs).abs() <= 2.0 * hc + 0.03,
            "hit rate {share}/{groups}/{kv}: model {} vs {hs} ± {hc}",
            m.block_hit_rate
        );
        assert!(
            (tm - ts).abs() <= 2.0 * tc + 0.05 * ts,
            "mean TTFT {share}/{groups}/{kv}: model {tm} vs {ts} ± {tc}"
        );
    }
}

#[test]
fn prefix_affinity_routing_keeps_each_group_on_one_server() {
    use engine::fleet::{simulate_fleet, FleetConfig, RouterKind};
    // 4 servers, each with room for a few of the 32 system prompts: spreading every group
    // over every server evicts them; affinity keeps each on one.
    let mut one = grid_config(0.9, 32, 8192, 1);
    one.workload = one.workload.with_rate(12.0);
    one.keep_records = true;
    let hit_rate = |router| {
        let rep = simulate_fleet(&FleetConfig::uniform(one.clone(), 4, router)).unwrap();
        assert_eq!(rep.summary.completed, rep.summary.arrivals, "{router:?}");
        let (mut hit, mut looked) = (0, 0);
        for r in &rep.replicas {
            let p = r.stats.prefix.as_ref().unwrap();
            assert_eq!(p.held_blocks_at_end, 0);
            hit += p.hit_blocks;
            looked += p.query_blocks;
        }
        (hit as f64 / looked as f64, rep)
    };
    let (rr, _) = hit_rate(RouterKind::RoundRobin);
    let (aff, rep) = hit_rate(RouterKind::PrefixAffinity);
    assert!(aff > rr + 0.1, "affinity {aff} vs round robin {rr}");
    // The fleet-wide figures: the replicas' counts summed, rates of the sums, TTFT of
    // hits and misses over every replica's requests.
    let fleet = rep.prefix.as_ref().expect("fleet-wide prefix summary");
    let sum = |f: fn(&engine::metrics::PrefixSummary) -> u64| -> u64 {
        rep.replicas
            .iter()
            .map(|r| f(r.stats.prefix.as_ref().unwrap()))
            .sum()
    };
    assert_eq!(fleet.hit_blocks, sum(|p| p.hit_blocks));
    assert_eq!(fleet.query_tokens, sum(|p| p.query_tokens));
    assert_eq!(fleet.saved_tokens, sum(|p| p.saved_tokens));
    assert_eq!(fleet.evictions, sum(|p| p.evictions));
    assert_eq!(fleet.block_hit_rate, Some(aff));
    assert_eq!(
        fleet.ttft_hit.n + fleet.ttft_miss.n,
        sum(|p| p.ttft_hit.n + p.ttft_miss.n)
    );
    // One replica: the one server's own summary.
    let alone = simulate(&one).unwrap();
    let single = simulate_fleet(&FleetConfig::uniform(
        one.clone(),
        1,
        RouterKind::RoundRobin,
    ))
    .unwrap();
    assert_eq!(single.prefix, alone.stats.prefix);
    // Every request of a group went to one server.
    let recs = one.workload.generate(one.seed, one.horizon_s).unwrap();
    let mut server_of = std::collections::HashMap::new();
    for (q, &to) in recs.iter().zip(&rep.routed_to) {
        if q.group > 0 {
            assert_eq!(
                *server_of.entry(q.group).or_insert(to),
                to,
                "group {}",
                q.group
            );
        }
    }
    assert!(
        server_of
            .values()
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 1
    );
    assert_eq!(
        RouterKind::parse("prefix-affinity"),
        Some(RouterKind::PrefixAffinity)
    );
}
