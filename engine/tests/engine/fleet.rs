//! Fleets: N servers behind a router. The conformance suite over router × policy × KV
//! mode, one replica equal to one server, round-robin's every-N-th arrival, random
//! routing as N independent servers, the concurrency gate, and bad input.

use super::*;
use engine::fleet::{simulate_fleet, Client, FleetConfig, FleetReport, RouterKind};
use engine::metrics::Aggregate;

fn routers_for(kv: KvMode) -> Vec<RouterKind> {
    RouterKind::ALL
        .into_iter()
        .chain([RouterKind::PowerOfD { d: 3 }])
        .filter(|r| *r != RouterKind::KvAware || kv == KvMode::Paged)
        .collect()
}

/// Every invariant of a fleet run: per replica and fleet-wide.
fn check_fleet(cfg: &FleetConfig, label: &str) -> FleetReport {
    let rep = simulate_fleet(cfg).unwrap_or_else(|e| panic!("{label}: {e}"));
    let reqs = cfg
        .base
        .workload
        .generate(cfg.base.seed, cfg.base.horizon_s)
        .unwrap();
    // No request lost or duplicated; each one where the router sent it.
    assert_eq!(
        rep.records.len(),
        reqs.len(),
        "{label}: records vs arrivals"
    );
    assert_eq!(rep.routed_to.len(), reqs.len(), "{label}");
    for (i, (r, q)) in rep.records.iter().zip(&reqs).enumerate() {
        assert_eq!(r.id, i as u64, "{label}: ids 0..n exactly once");
        assert_eq!(r.arrival_s, q.arrival, "{label}");
        if r.outcome == Outcome::Completed {
            assert_eq!(r.output_tokens, q.output, "{label}: every token of {i}");
        }
    }
    let s = &rep.summary;
    assert_eq!(s.arrivals, reqs.len() as u64, "{label}");
    assert_eq!(
        s.completed + s.rejected + s.unfinished + s.errors,
        s.arrivals,
        "{label}"
    );
    let routed: u64 = rep.replicas.iter().map(|r| r.routed).sum();
    assert_eq!(routed, s.arrivals, "{label}: routed adds up");
    let (mut area, mut departed, mut sojourn) = (0.0, 0u64, 0.0);
    for (i, r) in rep.replicas.iter().enumerate() {
        let st = &r.stats;
        let l = format!("{label}/replica {i}");
        assert_eq!(st.arrivals, r.routed, "{l}: saw what it was sent");
        assert_eq!(
            rep.routed_to.iter().filter(|&&k| k as usize == i).count() as u64,
            r.routed,
            "{l}"
        );
        assert!(
            st.kv_peak_tokens <= st.kv_capacity_tokens,
            "{l}: KV over capacity"
        );
        if cfg.base.end == EndRule::Drain {
            assert_eq!(st.kv_used_at_end_tokens, 0, "{l}: KV not released");
        }
        assert!(st.time_monotone, "{l}: time went backwards");
        assert!(
            (0.0..=1.0 + 1e-12).contains(&r.utilisation),
            "{l}: utilisation {}",
            r.utilisation
        );
        // Little's law per replica (from entry, accepted requests).
        if cfg.base.end == EndRule::Drain && st.departed > 0 {
            let lambda = st.accepted as f64 / st.end_s;
            let w = st.sojourn_sum_s / st.departed as f64;
            let little = st.time_avg_in_system;
            assert!(
                (little - lambda * w).abs() <= tol::LITTLE_REL * little.max(1e-9) + 1e-9,
                "{l}: Little L={little} λW={}",
                lambda * w
            );
        }
        area += st.time_avg_in_system * st.end_s;
        departed += st.departed;
        sojourn += st.sojourn_sum_s;
    }
    // Little's law fleet-wide.
    if cfg.base.end == EndRule::Drain && departed > 0 {
        let accepted: u64 = rep.replicas.iter().map(|r| r.stats.accepted).sum();
        let lambda = accepted as f64 / rep.end_s;
        let little = rep.time_avg_in_system;
        assert!(
            (little * rep.end_s - area).abs() <= 1e-6 * area.max(1.0),
            "{label}"
        );
        assert!(
            (little - lambda * rep.mean_sojourn_s).abs()
                <= tol::LITTLE_REL * little.max(1e-9) + 1e-9,
            "{label}: fleet Little L={little} λW={}",
            lambda * rep.mean_sojourn_s
        );
        assert!((rep.mean_sojourn_s * departed as f64 - sojourn).abs() <= 1e-6 * sojourn.max(1.0));
    }
    assert!(
        rep.imbalance >= 1.0 - 1e-12,
        "{label}: imbalance {}",
        rep.imbalance
    );
    rep
}

#[test]
fn fleet_conformance_every_router_policy_and_kv_mode() {
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for router in routers_for(kv) {
                for (n, rate) in [(3, 20.0), (4, 40.0)] {
                    let mut base = base(policy, kv, lognormal(), rate);
                    base.horizon_s = 60.0;
                    let label = format!("{policy:?}/{kv:?}/{}/N={n}", router.name());
                    check_fleet(&FleetConfig::uniform(base.clone(), n, router), &label);
                    let cut = SimConfig {
                        end: EndRule::Cut,
                        ..base
                    };
                    check_fleet(
                        &FleetConfig::uniform(cut, n, router),
                        &format!("{label}/cut"),
                    );
                }
            }
        }
    }
}

#[test]
fn one_replica_is_the_single_server_record_for_record() {
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for cost in [CostModel::default(), context_linear_cost()] {
                for end in [EndRule::Drain, EndRule::Cut] {
                    let mut cfg = base(policy, kv, LengthDist::short_long_mix(), 9.0);
                    cfg.cost = cost.clone();
                    cfg.end = end;
                    cfg.horizon_s = 80.0;
                    cfg.server.overhead_s = 0.003;
                    let one = simulate(&cfg).unwrap();
                    for router in routers_for(kv) {
                        let label = format!("{policy:?}/{kv:?}/{end:?}/{}", router.name());
                        let fleet =
                            simulate_fleet(&FleetConfig::uniform(cfg.clone(), 1, router)).unwrap();
                        assert_eq!(
                            digest(&fleet.records),
                            digest(&one.records),
                            "{label}: records"
                        );
                        assert_eq!(fleet.summary, one.summary, "{label}: summary");
                        assert_eq!(fleet.replicas[0].stats, one.stats, "{label}: stats");
                        assert_eq!(fleet.replicas[0].timeseries, one.timeseries, "{label}");
                    }
                }
            }
        }
    }
}

/// Looking at a server between its steps moves it forward but never changes its run, nor
/// does sending it a request while a step is worked out (the step is kept, or cut where
/// the request can join): each server makes the same run as its own requests on one
/// server alone, for every policy, at a load where reserve-mode servers refuse requests.
#[test]
fn every_replica_run_equals_its_own_requests_simulated_alone() {
    let mut refused = 0;
    for (policy, kv, load) in Policy::ALL
        .into_iter()
        .flat_map(|p| [KvMode::Reserve, KvMode::Paged].map(|kv| (p, kv)))
        .flat_map(|(p, kv)| [(12.0, 4096), (30.0, 4096), (30.0, 1024)].map(|l| (p, kv, l)))
    {
        let (rate, kv_tokens) = load;
        for router in routers_for(kv) {
            let mut cfg = base(policy, kv, lognormal(), rate);
            cfg.server.kv_tokens = kv_tokens;
            cfg.horizon_s = 60.0;
            let fleet = simulate_fleet(&FleetConfig::uniform(cfg.clone(), 4, router)).unwrap();
            let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
            for (i, rep) in fleet.replicas.iter().enumerate() {
                let mine = reqs
                    .iter()
                    .zip(&fleet.routed_to)
                    .filter(|(_, &k)| k as usize == i)
                    .map(|(r, _)| *r);
                let alone = engine::sim::simulate_requests(&cfg, mine);
                let recs: Vec<_> = fleet
                    .records
                    .iter()
                    .zip(&fleet.routed_to)
                    .filter(|(_, &k)| k as usize == i)
                    .map(|(r, _)| r.clone())
                    .collect();
                let label = format!("{}/{policy:?}/{kv:?}/{load:?}/replica {i}", router.name());
                assert_eq!(digest(&recs), digest(&alone.records), "{label}");
                assert_eq!(rep.stats, alone.stats, "{label}");
            }
            if kv == KvMode::Reserve {
                refused += fleet.summary.rejected;
            }
        }
    }
    assert!(
        refused > 1000,
        "reserve-mode servers refuse requests: {refused}"
    );
}

#[test]
fn round_robin_gives_each_replica_every_nth_arrival() {
    for n in [2u32, 3, 7] {
        let cfg = base(Policy::Continuous, KvMode::Reserve, lognormal(), 25.0);
        let rep = simulate_fleet(&FleetConfig::uniform(cfg, n, RouterKind::RoundRobin)).unwrap();
        for (id, &k) in rep.routed_to.iter().enumerate() {
            assert_eq!(k as usize, id % n as usize, "N={n}: request {id}");
        }
    }
}

/// Random routing at λ over N replicas is N independent servers at λ/N (Poisson
/// thinning): mean and p99 TTFT agree within their 95 % intervals over seeds.
#[test]
fn random_routing_matches_independent_servers_in_distribution() {
    let (n, rate, seeds) = (4u32, 24.0, 40u64);
    let mut fleet_mean = Vec::new();
    let mut fleet_p99 = Vec::new();
    let mut one_mean = Vec::new();
    let mut one_p99 = Vec::new();
    for seed in 0..seeds {
        let mut cfg = base(Policy::Continuous, KvMode::Reserve, lognormal(), rate);
        cfg.keep_records = false;
        cfg.timeseries_points = 0;
        cfg.seed = seed;
        cfg.horizon_s = 200.0;
        let f = simulate_fleet(&FleetConfig::uniform(cfg.clone(), n, RouterKind::Random)).unwrap();
        fleet_mean.push(f.summary.ttft.mean);
        fleet_p99.push(f.summary.ttft.p99);
        let mut single = cfg.clone();
        single.workload = single.workload.with_rate(rate / n as f64);
        single.horizon_s *= n as f64;
        single.seed = 1000 + seed;
        let s = simulate(&single).unwrap();
        one_mean.push(s.summary.ttft.mean);
        one_p99.push(s.summary.ttft.p99);
    }
    for (what, a, b) in [("mean", fleet_mean, one_mean), ("p99", fleet_p99, one_p99)] {
        let (a, b) = (Aggregate::of(a), Aggregate::of(b));
        let (am, bm) = (a.mean.unwrap(), b.mean.unwrap());
        let allowed = a.ci95.unwrap() + b.ci95.unwrap();
        assert!(
            (am - bm).abs() <= allowed,
            "TTFT {what}: fleet {am} vs independent {bm} (allowed {allowed})"
        );
    }
}

#[test]
fn least_outstanding_beats_round_robin_and_random_on_ttft_when_queues_form() {
    // Two slots a server, so requests queue and the count a router sees is the queue.
    let mut cfg = base(
        Policy::Continuous,
        KvMode::Reserve,
        LengthDist::short_long_mix(),
        16.0,
    );
    cfg.server.max_batch = 2;
    cfg.keep_records = false;
    cfg.horizon_s = 300.0;
    let ttft_at = |cfg: &SimConfig, router: RouterKind| {
        let r = simulate_fleet(&FleetConfig::uniform(cfg.clone(), 4, router)).unwrap();
        (r.summary.ttft.mean.unwrap(), r.imbalance)
    };
    let ttft = |router| ttft_at(&cfg, router);
    let (rr, rr_imb) = ttft(RouterKind::RoundRobin);
    let (rnd, rnd_imb) = ttft(RouterKind::Random);
    let (lor, lor_imb) = ttft(RouterKind::LeastOutstanding);
    assert!(
        lor < rr && rr < rnd,
        "TTFT lor {lor} < rr {rr} < random {rnd}"
    );
    assert!(
        lor_imb < rnd_imb && rr_imb < rnd_imb,
        "imbalance {lor_imb} {rr_imb} {rnd_imb}"
    );
}

#[test]
fn concurrency_gate_keeps_at_most_max_in_flight() {
    for kv in [KvMode::Reserve, KvMode::Paged] {
        for max in [1u32, 3, 8] {
            let mut cfg = base(Policy::Chunked, kv, lognormal(), 40.0);
            cfg.horizon_s = 40.0;
            let mut fleet = FleetConfig::uniform(cfg.clone(), 2, RouterKind::LeastOutstanding);
            fleet.client = Client::MaxConcurrency { max };
            let rep = simulate_fleet(&fleet).unwrap();
            let reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
            assert_eq!(rep.records.len(), reqs.len(), "every request is sent");
            // Sends in order, never before the request's own arrival.
            for (r, q) in rep.records.iter().zip(&reqs) {
                assert!(r.arrival_s >= q.arrival, "sent before it arrived");
            }
            assert!(rep
                .records
                .windows(2)
                .all(|w| w[0].arrival_s <= w[1].arrival_s));
            // In flight = sent and not yet ended, checked at every send.
            let ends: Vec<f64> = rep
                .records
                .iter()
                .map(|r| r.finish_s.unwrap_or(r.arrival_s))
                .collect();
            for r in &rep.records {
                let t = r.arrival_s;
                let in_flight = rep
                    .records
                    .iter()
                    .zip(&ends)
                    .filter(|(o, &e)| o.arrival_s <= t && e > t)
                    .count();
                assert!(
                    in_flight <= max as usize,
                    "{kv:?} max={max}: {in_flight} in flight at {t}"
                );
            }
            if max == 1 {
                // One at a time: each is sent when the last one ends (or on arrival).
                for w in rep.records.windows(2) {
                    assert!(w[1].arrival_s >= w[0].finish_s.unwrap(), "overlap at max 1");
                }
            }
        }
    }
}

#[test]
fn a_gate_wider_than_the_load_is_the_open_loop() {
    let cfg = base(Policy::Continuous, KvMode::Paged, lognormal(), 5.0);
    let open = simulate_fleet(&FleetConfig::uniform(
        cfg.clone(),
        2,
        RouterKind::LeastTokens,
    ))
    .unwrap();
    let mut gated = FleetConfig::uniform(cfg, 2, RouterKind::LeastTokens);
    gated.client = Client::MaxConcurrency { max: 100_000 };
    let gated = simulate_fleet(&gated).unwrap();
    assert_eq!(digest(&open.records), digest(&gated.records));
}

#[test]
fn bad_fleets_get_clear_errors() {
    let cfg = base(Policy::Continuous, KvMode::Reserve, lognormal(), 5.0);
    let none = FleetConfig::uniform(cfg.clone(), 0, RouterKind::RoundRobin);
    let e = simulate_fleet(&none).unwrap_err().to_string();
    assert!(e.contains("replicas"), "{e}");
    let kv = FleetConfig::uniform(cfg.clone(), 2, RouterKind::KvAware);
    let e = simulate_fleet(&kv).unwrap_err().to_string();
    assert!(e.contains("kv_aware") && e.contains("paged"), "{e}");
    let d0 = FleetConfig::uniform(cfg.clone(), 2, RouterKind::PowerOfD { d: 0 });
    assert!(simulate_fleet(&d0).unwrap_err().to_string().contains("d"));
    let mut gate0 = FleetConfig::uniform(cfg, 2, RouterKind::RoundRobin);
    gate0.client = Client::MaxConcurrency { max: 0 };
    assert!(simulate_fleet(&gate0)
        .unwrap_err()
        .to_string()
        .contains("max_concurrency"));
    for s in [
        "rr",
        "least_conn",
        "jsq",
        "p2c",
        "power_of_5",
        "kv-aware",
        "random",
    ] {
        assert!(RouterKind::parse(s).is_some(), "{s}");
    }
    assert_eq!(RouterKind::parse("power_of_x"), None);
    for r in RouterKind::ALL {
        assert_eq!(RouterKind::parse(&r.name()), Some(r));
    }
}
