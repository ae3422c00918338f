//! Closed-loop users: at most U requests in the system, each user's requests one after
//! another, conversations turn after turn, the interactive response-time law, bad input.

use super::*;
use engine::fleet::{simulate_fleet, Client, FleetConfig, FleetReport, RouterKind};
use engine::workload::{Conversations, SharedTokens};

fn users(cfg: &SimConfig, n: u32, router: RouterKind, u: u32, think_s: f64) -> FleetReport {
    let mut fleet = FleetConfig::uniform(cfg.clone(), n, router);
    fleet.client = Client::Users { users: u, think_s };
    simulate_fleet(&fleet).unwrap()
}

/// Requests in the system (sent, not yet ended) just after each send.
fn max_in_system(rep: &FleetReport) -> usize {
    let end = |r: &engine::record::RequestRecord| r.finish_s.unwrap_or(r.arrival_s);
    rep.records
        .iter()
        .map(|r| {
            let t = r.arrival_s;
            rep.records
                .iter()
                .filter(|o| o.arrival_s <= t && end(o) > t)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn closed_loop_users_keep_at_most_u_in_the_system() {
    for kv in [KvMode::Reserve, KvMode::Paged] {
        for policy in [Policy::Continuous, Policy::Chunked] {
            for (n, u) in [(1u32, 1u32), (1, 5), (2, 12)] {
                let mut cfg = base(policy, kv, lognormal(), 1.0);
                cfg.horizon_s = 60.0;
                let rep = users(&cfg, n, RouterKind::LeastOutstanding, u, 0.5);
                let label = format!("{kv:?} {policy:?} N={n} U={u}");
                assert!(
                    rep.records.len() > 20 * u as usize,
                    "{label}: {}",
                    rep.records.len()
                );
                let most = max_in_system(&rep);
                assert!(most <= u as usize, "{label}: {most} in the system");
                assert_eq!(
                    most, u as usize,
                    "{label}: every user is busy at some point"
                );
                // Sent in time order, numbered in that order, nothing after the horizon,
                // every request answered (the users wait for each one).
                for (i, r) in rep.records.iter().enumerate() {
                    assert_eq!(r.id, i as u64, "{label}");
                    assert!(r.arrival_s <= cfg.horizon_s, "{label}");
                    assert_eq!(r.outcome, Outcome::Completed, "{label}");
                }
                assert!(rep
                    .records
                    .windows(2)
                    .all(|w| w[0].arrival_s <= w[1].arrival_s));
                if u == 1 {
                    // One user: each request after the answer to the last one.
                    for w in rep.records.windows(2) {
                        assert!(w[1].arrival_s >= w[0].finish_s.unwrap(), "{label}");
                    }
                }
            }
        }
    }
}

#[test]
fn the_interactive_response_time_law_holds() {
    // U = X (R + Z): throughput X, mean response time R (send to end), mean think Z.
    for (u, z) in [(4u32, 2.0), (10, 0.5), (3, 0.0)] {
        let mut cfg = base(Policy::Continuous, KvMode::Paged, lognormal(), 1.0);
        cfg.horizon_s = 3000.0;
        cfg.end = EndRule::Cut;
        let rep = users(&cfg, 1, RouterKind::RoundRobin, u, z);
        let done: Vec<_> = rep.records.iter().filter_map(|r| r.e2e()).collect();
        let x = done.len() as f64 / cfg.horizon_s;
        let r = done.iter().sum::<f64>() / done.len() as f64;
        let law = x * (r + z);
        assert!(
            (law - u as f64).abs() / (u as f64) < 0.03,
            "U={u} Z={z}: X (R + Z) = {law:.3} (X {x:.3}/s, R {r:.3} s)"
        );
    }
}

#[test]
fn a_users_conversation_goes_turn_after_turn() {
    let mut cfg = base(Policy::Chunked, KvMode::Paged, lognormal(), 1.0);
    cfg.server.prefix_cache = engine::PrefixCache::Apc;
    cfg.server.kv_tokens = 16_384;
    cfg.workload.shared = Some(SharedTokens::Conversations {
        conversations: Conversations {
            mean_turns: 4.0,
            max_turns: 10,
            think_s: 30.0,
        },
        system: None,
    });
    cfg.horizon_s = 120.0;
    let rep = users(&cfg, 1, RouterKind::RoundRobin, 1, 1.0);
    // One user: each turn resends the conversation so far, so within a conversation
    // the prompt holds the last prompt and its answer; a new conversation starts short.
    let mut turns = 0;
    for w in rep.records.windows(2) {
        assert!(w[1].arrival_s >= w[0].finish_s.unwrap());
        if w[1].prompt_tokens > w[0].prompt_tokens + w[0].output_tokens {
            turns += 1;
        }
    }
    assert!(
        turns * 2 > rep.records.len(),
        "{turns} of {} are later turns",
        rep.records.len()
    );
    // The later turns hit the cache the earlier ones filled.
    assert!(rep.replicas[0]
        .stats
        .prefix
        .as_ref()
        .and_then(|p| p.token_hit_rate)
        .is_some_and(|h| h > 0.3));
}

#[test]
fn bad_users_get_clear_errors() {
    let cfg = base(Policy::Continuous, KvMode::Reserve, lognormal(), 1.0);
    for (u, z, want) in [
        (0u32, 1.0, "users"),
        (2, -1.0, "think"),
        (2, f64::NAN, "think"),
    ] {
        let mut fleet = FleetConfig::uniform(cfg.clone(), 1, RouterKind::RoundRobin);
        fleet.client = Client::Users {
            users: u,
            think_s: z,
        };
        let e = simulate_fleet(&fleet).unwrap_err().to_string();
        assert!(e.contains(want), "{u} {z}: {e}");
    }
}
