//! A fleet's event logs: over every router and both KV modes, logging leaves the run as
//! it is, each request's events are all in the log of the replica the router chose, and
//! each replica's log is the one its own requests give on one server alone.

use super::*;
use engine::fleet::{simulate_fleet_logged, simulate_fleet_requests, FleetConfig, RouterKind};
use engine::sim::events::Event;
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
