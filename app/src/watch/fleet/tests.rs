use super::super::fleet_scene::{draw_fleet, height, WIDTH};
use super::super::replay::snapshot_in;
use super::super::{record_run, MarkKind, WatchState};
use super::*;
use crate::params::Params;
use engine::config::{KvMode, Policy};
use engine::record::Outcome;
use plotters::prelude::*;

/// The reference server (reserve, refusals) and a paged one that preempts, as fleets.
fn fleets() -> Vec<(String, Params, u32, RouterKind)> {
    let reserve = Params {
        rate: 18.0,
        ..Params::default()
    };
    let paged = Params {
        policy: Policy::Chunked,
        kv_mode: KvMode::Paged,
        kv_tokens: 3072,
        block_size: 16,
        token_budget: 256,
        rate: 14.0,
        ..Params::default()
    };
    let mut out = Vec::new();
    for router in RouterKind::ALL {
        if router != RouterKind::KvAware {
            out.push((
                format!("reserve/{}", router.name()),
                reserve.clone(),
                3,
                router,
            ));
        }
        out.push((format!("paged/{}", router.name()), paged.clone(), 3, router));
    }
    out.push((
        "paged/12 replicas".into(),
        paged,
        12,
        RouterKind::LeastOutstanding,
    ));
    out
}

#[test]
fn each_request_is_at_the_replica_the_router_chose() {
    for (label, p, n, router) in fleets() {
        let tape = record_fleet(&p, 150, 2, n, router).unwrap_or_else(|e| panic!("{label}: {e}"));
        let f = tape.fleet.as_ref().unwrap();
        assert_eq!(f.replicas.len(), n as usize, "{label}");
        assert_eq!(f.routed_to.len(), 150, "{label}");
        assert_eq!(tape.records.len(), 150, "{label}");
        let mut arrivals = vec![0; 150];
        for (i, rt) in f.replicas.iter().enumerate() {
            for m in &rt.marks {
                assert_eq!(
                    f.routed_to[m.id as usize] as usize, i,
                    "{label}: #{} ({:?}) at replica {i}",
                    m.id, m.kind
                );
                if matches!(m.kind, MarkKind::Arrival | MarkKind::Rejected) {
                    arrivals[m.id as usize] += 1;
                }
            }
            for it in &rt.iterations {
                assert!(it
                    .slots
                    .iter()
                    .all(|s| f.routed_to[s.id() as usize] as usize == i));
            }
        }
        assert!(
            arrivals.iter().all(|&a| a == 1),
            "{label}: each arrives once"
        );
        // The fleet's marks are the replicas' together.
        let together: usize = f.replicas.iter().map(|r| r.marks.len()).sum();
        assert_eq!(tape.marks.len(), together, "{label}");
        // The router's choices as the page shows them: each request, once, at its arrival,
        // toward the replica it went to.
        for r in &tape.records {
            let fs = fleet_snapshot(&tape, r.arrival_s, 1e-9).unwrap();
            let shown = fs.routed.iter().find(|x| u64::from(x.id) == r.id).unwrap();
            assert_eq!(shown.replica, f.routed_to[r.id as usize], "{label}");
        }
    }
}

#[test]
fn replayed_replicas_match_their_records_and_time_series_at_every_instant() {
    let (mut preempted, mut refused) = (0, 0);
    for (label, p, n, router) in fleets() {
        let tape = record_fleet(&p, 150, 2, n, router).unwrap();
        let f = tape.fleet.as_ref().unwrap();
        let entry = p.sim_config(p.rate, 0).server;
        // Every event instant of the fleet, and every sampling instant of each replica.
        let mut instants: Vec<f64> = tape.marks.iter().map(|m| m.t_s).collect();
        for rt in &f.replicas {
            assert!(rt.timeseries.len() > 20, "{label}");
            instants.extend(rt.timeseries.iter().map(|tp| tp.t_s));
        }
        for &t in &instants {
            let fs = fleet_snapshot(&tape, t, 0.0).unwrap();
            let mut sum = (0, 0, 0, 0);
            for (i, s) in fs.replicas.iter().enumerate() {
                let mine = || {
                    tape.records
                        .iter()
                        .filter(move |r| f.routed_to[r.id as usize] as usize == i)
                };
                // In the replica: entered, not refused, not finished.
                let inside = mine()
                    .filter(|r| {
                        r.arrival_s + entry.entry_delay(r.prompt_tokens) <= t
                            && r.outcome != Outcome::Rejected
                            && r.finish_s.is_none_or(|x| x > t)
                    })
                    .count();
                assert_eq!(
                    s.queue.len() + s.running as usize,
                    inside,
                    "{label}: replica {i} at {t}"
                );
                let done = mine()
                    .filter(|r| r.finish_s.is_some_and(|x| x <= t))
                    .count();
                assert_eq!(s.completed as usize, done, "{label}: replica {i} at {t}");
                let firsts = mine()
                    .filter(|r| r.first_token_s.is_some_and(|x| x <= t))
                    .count();
                assert_eq!(s.first_tokens as usize, firsts, "{label}");
                assert!(s.kv_used_blocks <= tape.kv_blocks, "{label}");
                sum.0 += s.queue.len();
                sum.1 += s.running;
                sum.2 += s.completed;
                sum.3 += s.rejected;
            }
            let w = &fs.fleet;
            assert_eq!(
                (w.queue.len(), w.running, w.completed, w.rejected),
                sum,
                "{label}: the fleet is its replicas at {t}"
            );
            assert_eq!(w.ttft_done.len() as u32, w.completed, "{label}");
        }
        // At each replica's sampling instants, its queue and batch are its time series'.
        for (i, rt) in f.replicas.iter().enumerate() {
            for tp in &rt.timeseries {
                let s = snapshot_in(rt, &tape.records, tp.t_s, 0.0);
                assert_eq!(
                    s.queue.len() as u32,
                    tp.waiting,
                    "{label}/{i} at {}",
                    tp.t_s
                );
                assert_eq!(s.running, tp.running, "{label}/{i} at {}", tp.t_s);
                if !rt.paged {
                    assert_eq!(s.kv_used_blocks * rt.block_size, tp.kv_used_tokens);
                }
            }
        }
        let end = fleet_snapshot(&tape, tape.end_s, 0.0).unwrap();
        assert!(
            end.fleet.queue.is_empty() && end.fleet.running == 0,
            "{label}"
        );
        assert_eq!(end.fleet.kv_used_blocks, 0, "{label}");
        preempted += end.fleet.preempted;
        refused += end.fleet.rejected;
    }
    assert!(preempted > 0 && refused > 0, "{preempted} {refused}");
}

#[test]
fn the_fleet_url_round_trips_and_one_server_urls_stay_as_they_were() {
    let s = WatchState::of_fleet(Params::default(), 9.5, 6, RouterKind::PowerOfD { d: 2 });
    let q = s.to_query();
    assert!(q.contains("&replicas=6&router=power_of_2&"), "{q}");
    assert!(q.contains("rate=9.5") || q.contains("9.5"), "{q}");
    let (back, errs) = WatchState::from_query(&q);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(back, s);
    assert!(back.is_fleet() && !back.same_run(&WatchState::of(Params::default())));
    let one = WatchState::of(Params::default()).to_query();
    assert!(
        !one.contains("replicas") && !one.contains("router"),
        "{one}"
    );
    let (bad, errs) = WatchState::from_query("view=watch&replicas=0&router=nope");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(bad.replicas, 1);
    // A KV-aware router needs paged servers: a readable refusal, not a panic.
    let err = record_run(&Params::default(), 50, 0, 3, RouterKind::KvAware).unwrap_err();
    assert!(err.contains("paged"), "{err}");
    assert!(record_fleet(&Params::default(), 50, 0, 999, RouterKind::Random).is_err());
}

#[test]
fn stepping_a_fleet_visits_every_replicas_iteration_boundaries() {
    let p = Params {
        rate: 12.0,
        ..Params::default()
    };
    let tape = record_fleet(&p, 60, 0, 3, RouterKind::RoundRobin).unwrap();
    let f = tape.fleet.as_ref().unwrap();
    let mut ends: Vec<f64> = f
        .replicas
        .iter()
        .flat_map(|r| r.iterations.iter().map(|it| it.end_s))
        .collect();
    ends.sort_by(f64::total_cmp);
    ends.dedup();
    let mut t = 0.0;
    let mut visited = Vec::new();
    while t < tape.end_s {
        let next = tape.next_boundary(t);
        assert!(next > t);
        assert_eq!(tape.previous_boundary(next + 1e-9), next);
        visited.push(next);
        t = next;
    }
    assert_eq!(visited, ends);
}

#[test]
fn the_fleet_scene_draws_each_replica_and_the_routers_choices() {
    for (label, p, n, router) in fleets()
        .into_iter()
        .filter(|f| f.3 == RouterKind::LeastOutstanding || f.3 == RouterKind::RoundRobin)
    {
        let tape = record_fleet(&p, 150, 2, n, router).unwrap();
        let shown = (n as usize).min(MAX_SHOWN);
        let rt = &tape.fleet.as_ref().unwrap().replicas[0];
        for tp in rt.timeseries.iter().step_by(29) {
            let fs = fleet_snapshot(&tape, tp.t_s, 0.5).unwrap();
            let mut svg = String::new();
            let drawn = {
                let root = SVGBackend::with_string(&mut svg, (WIDTH, height(n as usize)))
                    .into_drawing_area();
                draw_fleet(&root, &tape, &fs, 0.5).unwrap()
            };
            assert_eq!(drawn.panels, shown, "{label}");
            assert_eq!(drawn.routed, fs.routed.len(), "{label}");
            let drawn_replicas = &fs.replicas[..shown];
            assert_eq!(
                drawn.queue,
                drawn_replicas.iter().map(|s| s.queue.len()).sum::<usize>(),
                "{label}"
            );
            assert_eq!(
                drawn.busy_slots,
                drawn_replicas.iter().map(|s| s.slots.len()).sum::<usize>(),
                "{label}"
            );
            for (i, s) in drawn_replicas.iter().enumerate() {
                let (q, b, kv, done) = replica_counters(rt, s);
                let title = format!(
                    "replica {} · queue {q} · batch {b} · KV {kv} · done {done}",
                    i + 1
                );
                assert!(svg.contains(&title), "{label}: {title}");
            }
            // The newest four choices are written under the router.
            for r in fs.routed.iter().rev().take(4) {
                let choice = format!("#{} → replica {}", r.id, r.replica + 1);
                assert!(svg.contains(&choice), "{label}: {choice}");
            }
            assert_eq!(svg.contains("not drawn"), n as usize > MAX_SHOWN, "{label}");
            let text = describe_fleet(&tape, &fs);
            assert!(text.contains(&format!("fleet of {n} replicas")), "{text}");
            assert_eq!(text.matches("; replica ").count(), n as usize, "{text}");
        }
    }
}
