use super::replay::{describe, snapshot};
use super::scene::{draw_scene, draw_ttft};
use super::*;
use crate::params::Preset;
use engine::config::Policy;
use engine::record::Outcome;
use plotters::prelude::*;

#[test]
fn watch_query_round_trips_and_reports() {
    let mut p = Preset::VllmA10g.params();
    p.rate = 5.5;
    let mut s = WatchState::of(p);
    s.requests = 120;
    s.seed = 3;
    s.at_s = 12.25;
    s.speed = 4.0;
    let q = s.to_query();
    assert!(q.starts_with("view=watch&"));
    assert!(wants_watch(&format!("?{q}")));
    let (back, errs) = WatchState::from_query(&format!("?{q}"));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(back, s);
    let (s, errs) = WatchState::from_query("view=watch&n=9999&speed=3&B=16&bogus=1");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(s.requests, DEFAULT_REQUESTS);
    assert_eq!(s.speed, 4.0, "snapped to a step");
    assert_eq!(s.params.max_batch, 16);
    assert!(!wants_watch("view=learn&lesson=1"));
}

#[test]
fn record_refuses_bad_sizes_and_bad_parameters() {
    assert!(record(&Params::default(), 0, 0).is_err());
    assert!(record(&Params::default(), MAX_REQUESTS + 1, 0).is_err());
    let p = Params {
        max_batch: 0,
        ..Params::default()
    };
    assert!(record(&p, 50, 0).is_err());
}

/// The watched configurations: the reference (reserve, refusals), a paged one that
/// preempts, chunked prefill, and every other policy.
fn watched() -> Vec<(String, Params)> {
    let mut out = vec![(
        "reference".to_string(),
        Params {
            rate: 6.0,
            ..Params::default()
        },
    )];
    for policy in Policy::ALL {
        out.push((
            format!("{policy:?}/paged"),
            Params {
                policy,
                kv_mode: engine::config::KvMode::Paged,
                kv_tokens: 3072,
                block_size: 16,
                token_budget: 256,
                rate: 5.0,
                ..Params::default()
            },
        ));
    }
    out
}

#[test]
fn replay_matches_the_engines_time_series_and_records() {
    let mut preempted = 0;
    let mut refused = 0;
    for (label, p) in watched() {
        let tape = record(&p, 200, 1).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(tape.records.len(), 200, "{label}");
        assert!(tape.timeseries.len() > 100, "{label}");
        for tp in &tape.timeseries {
            let s = snapshot(&tape, tp.t_s, 0.0);
            assert_eq!(
                s.queue.len() as u32,
                tp.waiting,
                "{label}: queue at {}",
                tp.t_s
            );
            assert_eq!(s.running, tp.running, "{label}: batch at {}", tp.t_s);
            if !tape.paged {
                assert_eq!(
                    s.kv_used_blocks * tape.block_size,
                    tp.kv_used_tokens,
                    "{label}: KV at {}",
                    tp.t_s
                );
            } else {
                // Paged decode runs take their blocks when the run starts.
                assert!(
                    s.kv_used_blocks * tape.block_size <= tp.kv_used_tokens,
                    "{label}"
                );
            }
            let done = tape
                .records
                .iter()
                .filter(|r| r.finish_s.is_some_and(|f| f <= tp.t_s))
                .count();
            assert_eq!(s.completed as usize, done, "{label}");
            assert_eq!(s.ttft_done.len(), done, "{label}");
            let firsts = tape
                .records
                .iter()
                .filter(|r| r.first_token_s.is_some_and(|f| f <= tp.t_s))
                .count();
            assert_eq!(s.first_tokens as usize, firsts, "{label}");
            if s.iteration.is_some() {
                assert_eq!(
                    s.slots.len() as u32,
                    s.running,
                    "{label}: slots at {}",
                    tp.t_s
                );
            }
        }
        let end = snapshot(&tape, tape.end_s, 0.0);
        assert!(end.queue.is_empty() && end.running == 0, "{label}: drained");
        assert_eq!(end.kv_used_blocks, 0, "{label}");
        preempted += end.preempted;
        refused += end.rejected;
        assert_eq!(
            end.rejected as usize,
            tape.records
                .iter()
                .filter(|r| r.outcome == Outcome::Rejected)
                .count()
        );
    }
    assert!(preempted > 0 && refused > 0, "{preempted} {refused}");
}

#[test]
fn stepping_moves_from_boundary_to_boundary() {
    let tape = record(&Params::default(), 50, 0).unwrap();
    let mut t = 0.0;
    let mut steps = 0;
    while t < tape.end_s {
        let next = tape.next_boundary(t);
        assert!(next > t);
        assert_eq!(tape.previous_boundary(next + 1e-9), next);
        t = next;
        steps += 1;
    }
    assert_eq!(steps, tape.iterations.len());
    assert_eq!(tape.next_boundary(tape.end_s), tape.end_s);
}

#[test]
fn the_scene_draws_what_the_snapshot_holds() {
    for (label, p) in watched().into_iter().take(3) {
        let tape = record(&p, 200, 1).unwrap();
        for tp in tape.timeseries.iter().step_by(37) {
            let s = snapshot(&tape, tp.t_s, 0.5);
            let mut svg = String::new();
            let drawn = {
                let root = SVGBackend::with_string(&mut svg, (scene::WIDTH, scene::HEIGHT))
                    .into_drawing_area();
                draw_scene(&root, &tape, &s, 0.5).unwrap()
            };
            assert_eq!(drawn.queue, s.queue.len(), "{label}");
            assert_eq!(drawn.busy_slots, s.slots.len(), "{label}");
            assert_eq!(drawn.kv_blocks, s.kv_used_blocks, "{label}");
            assert!(svg.contains(&format!("queue: {} waiting", s.queue.len())));
            let text = describe(&tape, &s);
            assert!(
                text.contains(&format!("{} waiting", s.queue.len())),
                "{text}"
            );
            let mut h = String::new();
            {
                let root = SVGBackend::with_string(&mut h, (300, 160)).into_drawing_area();
                draw_ttft(&root, &s.ttft_done, 2.0).unwrap();
            }
            assert!(h.contains(&format!("TTFT of {} finished", s.ttft_done.len())));
        }
    }
}
