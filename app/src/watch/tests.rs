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

#[test]
fn the_prefix_cache_shows_its_blocks_and_hits_as_the_engine_counts_them() {
    use crate::learn::{watch_links, Lesson, LessonState};
    let p = watch_links(&LessonState::new(Lesson::Caches))[0]
        .params
        .clone();
    // The URL carries the cache's settings.
    let q = WatchState::of(p.clone()).to_query();
    assert!(q.contains("pc=apc") && q.contains("sp=1"), "{q}");
    assert_eq!(WatchState::from_query(&q).0.params, p);
    let tape = record(&p, 300, 0).unwrap();
    assert!(tape.prefix_cache && tape.paged);
    let bs = tape.block_size;
    let hit_records: Vec<_> = tape
        .records
        .iter()
        .filter(|r| r.cached_tokens > 0)
        .collect();
    assert!(hit_records.len() > 100, "{} hits", hit_records.len());
    let mut idle_seen = 0;
    for tp in &tape.timeseries {
        let s = snapshot(&tape, tp.t_s, 0.0);
        let hits = hit_records
            .iter()
            .filter(|r| r.admitted_s.is_some_and(|a| a <= tp.t_s))
            .count();
        assert_eq!(s.hits as usize, hits, "hits at {}", tp.t_s);
        assert!(
            s.kv_used_blocks * bs <= tp.kv_used_tokens,
            "KV at {}",
            tp.t_s
        );
        // The time series samples after the iteration's end (its blocks registered in
        // the cache), the animation during it: the cache's blocks only bound each other.
        assert!(s.kv_cached_held <= s.kv_used_blocks);
        assert!(s.kv_used_blocks + s.kv_cached_idle <= tape.kv_blocks);
        idle_seen = idle_seen.max(s.kv_cached_idle);
    }
    assert!(idle_seen > 0, "no evictable block ever shown");
    let end = snapshot(&tape, tape.end_s, 0.0);
    assert_eq!(end.hits as usize, hit_records.len());
    assert_eq!(
        end.hit_tokens,
        hit_records
            .iter()
            .map(|r| u64::from(r.cached_tokens))
            .sum::<u64>()
    );
    assert_eq!(end.admissions as usize, tape.records.len());
    assert!(replay::hits_text(&end).contains(&format!("{} of 300 admitted", end.hits)));
    // A moment with evictable blocks and a hit prefilling: the scene draws both.
    let s = tape
        .iterations
        .iter()
        .map(|it| snapshot(&tape, it.start_s, 0.5))
        .find(|s| {
            s.kv_cached_idle > 0
                && s.slots
                    .iter()
                    .any(|sl| sl.1 > 0 && tape.records[sl.0 as usize].cached_tokens > 0)
        })
        .expect("a hit prefilling beside evictable blocks");
    let mut svg = String::new();
    let drawn = {
        let root =
            SVGBackend::with_string(&mut svg, (scene::WIDTH, scene::HEIGHT)).into_drawing_area();
        draw_scene(&root, &tape, &s, 0.5).unwrap()
    };
    assert_eq!(drawn.kv_blocks, s.kv_used_blocks);
    assert_eq!(drawn.kv_cached_idle, s.kv_cached_idle);
    assert!(drawn.hit_tags > 0);
    assert!(svg.contains("cached, evictable") && svg.contains("cache, evictable"));
    assert!(describe(&tape, &s).contains("prefix cache:"));
    let hit = tape.marks.iter().find(|m| m.kind == MarkKind::Hit).unwrap();
    assert!(replay::mark_text(hit).contains("tokens cached"));
}
