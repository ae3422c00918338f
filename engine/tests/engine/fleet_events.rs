//! A fleet's event logs: over every router and both KV modes, logging leaves the run as
//! it is, each request's events are all in the log of the replica the router chose, and
//! each replica's log is the one its own requests give on one server alone.

use super::*;
use engine::fleet::{simulate_fleet_logged, simulate_fleet_requests, FleetConfig, RouterKind};
use engine::sim::events::{Event, Phase};
use engine::sim::simulate_logged;

fn id_of(e: &Event) -> Option<u64> {
    match e {
        Event::Arrival { id, .. }
        | Event::Admitted { id, .. }
        | Event::FirstToken { id, .. }
        | Event::Finished { id, .. }
        | Event::Preempted { id, .. } => Some(*id),
        Event::Iteration(_) => None,
    }
}

#[test]
fn each_replicas_log_holds_exactly_the_requests_routed_to_it() {
    for kv in [KvMode::Reserve, KvMode::Paged] {
        for router in RouterKind::ALL
            .into_iter()
            .filter(|r| *r != RouterKind::KvAware || kv == KvMode::Paged)
        {
            let label = format!("{}/{kv:?}", router.name());
            let mut cfg = base(Policy::Chunked, kv, lognormal(), 30.0);
            cfg.horizon_s = 10.0;
            cfg.keep_records = true;
            cfg.timeseries_points = 50;
            let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
            let fleet = FleetConfig::uniform(cfg.clone(), 3, router);
            let plain = simulate_fleet_requests(&fleet, reqs.iter().copied());
            let (rep, logs) = simulate_fleet_logged(&fleet, reqs.iter().copied());
            assert_eq!(rep, plain, "{label}: logging changes nothing");
            assert_eq!(logs.len(), 3, "{label}");
            assert_eq!(rep.routed_to.len(), reqs.len(), "{label}");
            let mut arrivals = vec![0u32; reqs.len()];
            for (i, log) in logs.iter().enumerate() {
                assert!(!log.is_empty(), "{label}: replica {i} logged nothing");
                for e in log {
                    let Some(id) = id_of(e) else {
                        let Event::Iteration(it) = e else {
                            unreachable!()
                        };
                        for s in &it.slots {
                            assert_eq!(rep.routed_to[s.id as usize] as usize, i, "{label}");
                        }
                        continue;
                    };
                    assert_eq!(
                        rep.routed_to[id as usize] as usize, i,
                        "{label}: request {id} in replica {i}'s log"
                    );
                    if matches!(e, Event::Arrival { .. }) {
                        arrivals[id as usize] += 1;
                    }
                }
                // The replica's log is the one-server log of its own requests.
                let mine = reqs
                    .iter()
                    .zip(&rep.routed_to)
                    .filter(|(_, &k)| k as usize == i)
                    .map(|(r, _)| *r);
                let (alone, alone_log) = simulate_logged(&cfg, mine);
                assert_eq!(rep.replicas[i].stats, alone.stats, "{label}/replica {i}");
                assert_eq!(*log, alone_log, "{label}/replica {i}: log");
            }
            assert!(
                arrivals.iter().all(|&a| a == 1),
                "{label}: every request arrives once, somewhere"
            );
        }
    }
}

/// Least tokens routes each request to a replica of least outstanding work as a real
/// router sees it at that instant: the prompt and output of every request it has sent
/// and not seen finish or be refused, less every token already streamed back, to the
/// iteration. Replayed from the replicas' event logs (each decode slot streams a token
/// at its iteration's end), so a router that saw a server's tokens only when the server
/// was next moved, after a run of several iterations, fails it.
#[test]
fn least_tokens_sees_every_token_streamed_by_each_arrival() {
    for policy in [Policy::Continuous, Policy::Chunked] {
        let label = format!("{policy:?}");
        let mut cfg = base(policy, KvMode::Reserve, lognormal(), 40.0);
        cfg.horizon_s = 20.0;
        cfg.first_token = FirstToken::AfterFirstDecode;
        let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
        let n = 4;
        let fleet = FleetConfig::uniform(cfg.clone(), n, RouterKind::LeastTokens);
        let (rep, logs) = simulate_fleet_logged(&fleet, reqs.iter().copied());
        // Per replica, in time order: (t, work change, outstanding change).
        let mut changes: Vec<Vec<(f64, i64, i64)>> = vec![Vec::new(); n as usize];
        let mut multi_token_runs = 0;
        for (i, log) in logs.iter().enumerate() {
            for e in log {
                match e {
                    Event::Arrival {
                        t_s, id, admitted, ..
                    } if !admitted => {
                        let r = &reqs[*id as usize];
                        changes[i].push((*t_s, -i64::from(r.prompt + r.output), -1));
                    }
                    Event::Finished { t_s, id } => {
                        changes[i].push((*t_s, -i64::from(reqs[*id as usize].prompt), -1));
                    }
                    Event::Iteration(it) => {
                        let tokens = it.slots.iter().filter(|s| s.phase == Phase::Decode).count();
                        changes[i].push((it.end_s, -(tokens as i64), 0));
                    }
                    _ => {}
                }
            }
            changes[i].sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let mut seen = vec![(0i64, 0i64); n as usize];
        let mut next = vec![0usize; n as usize];
        for (id, r) in reqs.iter().enumerate() {
            for j in 0..n as usize {
                while next[j] < changes[j].len() && changes[j][next[j]].0 <= r.arrival {
                    let (_, dw, dn) = changes[j][next[j]];
                    seen[j].0 += dw;
                    seen[j].1 += dn;
                    next[j] += 1;
                }
            }
            let least = *seen.iter().min().unwrap();
            let to = rep.routed_to[id] as usize;
            assert_eq!(
                seen[to], least,
                "{label}: request {id} at {}: {seen:?}",
                r.arrival
            );
            seen[to].0 += i64::from(r.prompt + r.output);
            seen[to].1 += 1;
        }
        // The runs a router must see into: iterations jumped as one step.
        for (i, replica) in rep.replicas.iter().enumerate() {
            multi_token_runs += replica.stats.iterations - replica.stats.steps;
            assert!(replica.routed > 0, "{label}: replica {i} got nothing");
        }
        assert!(multi_token_runs > 1000, "{label}: {multi_token_runs}");
    }
}

/// The KV-aware router routes each request to a replica of least KV use as a real router
/// reads it at that instant (a paged server reports the blocks of the iteration it is
/// running, each sequence's block for that iteration's token taken when it is scheduled),
/// then of fewest outstanding requests. Replayed from the replicas' event logs, so a
/// router that saw a run's block growth only when the server was next moved, after a run
/// of several iterations, fails it.
#[test]
fn kv_aware_sees_the_blocks_of_each_running_iteration() {
    for policy in [Policy::Continuous, Policy::Chunked] {
        let label = format!("{policy:?}");
        let mut cfg = base(policy, KvMode::Paged, lognormal(), 40.0);
        cfg.horizon_s = 20.0;
        cfg.server.max_batch = 16;
        let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
        let n = 4;
        let fleet = FleetConfig::uniform(cfg.clone(), n, RouterKind::KvAware);
        let (rep, logs) = simulate_fleet_logged(&fleet, reqs.iter().copied());
        // Per replica: its iterations as (start, end, blocks in use), in time order, and
        // the instants its outstanding requests fall.
        let mut iterations: Vec<Vec<(f64, f64, u64)>> = vec![Vec::new(); n as usize];
        let mut leaves: Vec<Vec<f64>> = vec![Vec::new(); n as usize];
        for (i, log) in logs.iter().enumerate() {
            for e in log {
                match e {
                    Event::Arrival { t_s, admitted, .. } if !admitted => leaves[i].push(*t_s),
                    Event::Finished { t_s, .. } => leaves[i].push(*t_s),
                    Event::Iteration(it) => {
                        let held: u64 =
                            it.slots.iter().map(|s| s.kv_blocks - s.cached_blocks).sum();
                        iterations[i].push((it.start_s, it.end_s, held + it.cached_held_blocks));
                    }
                    _ => {}
                }
            }
            leaves[i].sort_by(f64::total_cmp);
        }
        let mut outstanding = vec![0i64; n as usize];
        let (mut next_leave, mut next_it) = (vec![0; n as usize], vec![0; n as usize]);
        for (id, r) in reqs.iter().enumerate() {
            let t = r.arrival;
            let mut seen = Vec::new();
            for j in 0..n as usize {
                while next_leave[j] < leaves[j].len() && leaves[j][next_leave[j]] <= t {
                    outstanding[j] -= 1;
                    next_leave[j] += 1;
                }
                let its = &iterations[j];
                while next_it[j] < its.len() && its[next_it[j]].1 <= t {
                    next_it[j] += 1;
                }
                let used = match its.get(next_it[j]) {
                    // (One that starts at `t` is the prefill of the request being routed.)
                    Some(&(start, _, used)) if start < t => used,
                    _ => 0,
                };
                seen.push((used, outstanding[j]));
            }
            let to = rep.routed_to[id] as usize;
            let least = *seen.iter().min().unwrap();
            assert_eq!(seen[to], least, "{label}: request {id} at {t}: {seen:?}");
            outstanding[to] += 1;
        }
        let mut multi = 0;
        for replica in &rep.replicas {
            multi += replica.stats.iterations - replica.stats.steps;
        }
        assert!(
            multi > 1000,
            "{label}: {multi} iterations jumped inside runs"
        );
    }
}
