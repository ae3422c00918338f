//! The event log: over every policy × KV mode (and both first-token rules, a context cost,
//! a cut run), the events reproduce the records (first tokens, finishes, admissions,
//! preemption counts, refusals), replayed they give the time series' queue and batch at
//! every sampling instant, and logging does not change the run.

use super::*;
use engine::sim::events::{Event, Phase};
use engine::sim::{simulate_logged, simulate_requests, SimReport};
use std::collections::HashMap;

/// Requests of `cfg`'s workload, the first `n`.
fn first_requests(cfg: &SimConfig, n: usize) -> Vec<engine::workload::Request> {
    let mut reqs = cfg.workload.generate(cfg.seed, cfg.horizon_s).unwrap();
    reqs.truncate(n);
    reqs
}

/// Per-request facts read off the log.
#[derive(Default, Debug)]
struct Seen {
    arrival: Option<(f64, bool)>,
    first_admitted: Option<f64>,
    first_token: Option<f64>,
    finished: Option<f64>,
    preemptions: u32,
    decodes: u32,
}

fn check_log(cfg: &SimConfig, rep: &SimReport, events: &[Event], label: &str) {
    let mut seen: HashMap<u64, Seen> = HashMap::new();
    let mut last_end: f64 = 0.0;
    let total_blocks = rep.stats.kv_capacity_tokens / u64::from(cfg.server.block_size.max(1));
    for e in events {
        match e {
            Event::Arrival {
                t_s, id, admitted, ..
            } => {
                let s = seen.entry(*id).or_default();
                assert!(s.arrival.is_none(), "{label}: {id} arrives twice");
                s.arrival = Some((*t_s, *admitted));
            }
            Event::Admitted { t_s, id } => {
                let s = seen.entry(*id).or_default();
                s.first_admitted.get_or_insert(*t_s);
            }
            Event::FirstToken { t_s, id } => {
                let s = seen.entry(*id).or_default();
                assert!(s.first_token.is_none(), "{label}: {id} first token twice");
                s.first_token = Some(*t_s);
            }
            Event::Finished { t_s, id } => seen.entry(*id).or_default().finished = Some(*t_s),
            Event::Preempted { id, .. } => seen.entry(*id).or_default().preemptions += 1,
            Event::Iteration(it) => {
                assert!(it.end_s > it.start_s, "{label}: empty iteration");
                assert!(
                    it.start_s >= last_end - 1e-9 * last_end.max(1.0),
                    "{label}: iterations overlap at {}",
                    it.start_s
                );
                last_end = it.end_s;
                assert!(it.slots.len() <= cfg.server.max_batch as usize, "{label}");
                let held: u64 = it.slots.iter().map(|s| s.kv_blocks).sum();
                assert!(held <= total_blocks, "{label}: {held} blocks held");
                for s in &it.slots {
                    if s.phase == Phase::Decode {
                        seen.entry(s.id).or_default().decodes += 1;
                    }
                }
            }
        }
    }
    assert_eq!(
        seen.len(),
        rep.records.len(),
        "{label}: every request logged"
    );
    for r in &rep.records {
        let s = &seen[&r.id];
        let (entry, admitted) = s.arrival.expect("arrival logged");
        assert_eq!(entry, r.arrival_s + cfg.server.overhead_s, "{label}");
        assert_eq!(
            admitted,
            r.outcome != Outcome::Rejected,
            "{label}: {}",
            r.id
        );
        assert_eq!(s.first_admitted, r.admitted_s, "{label}: admitted {}", r.id);
        assert_eq!(
            s.first_token, r.first_token_s,
            "{label}: first token {}",
            r.id
        );
        assert_eq!(s.finished, r.finish_s, "{label}: finish {}", r.id);
        assert_eq!(
            s.preemptions, r.preemptions,
            "{label}: preemptions {}",
            r.id
        );
        // Every token is a decode, but the one a finished prefill emits.
        let at_prefill = u32::from(cfg.first_token == FirstToken::AfterPrefill);
        if r.outcome == Outcome::Completed && r.preemptions == 0 {
            assert_eq!(
                s.decodes + at_prefill.min(r.output_tokens),
                r.output_tokens,
                "{label}: decodes of {}",
                r.id
            );
        }
    }
    check_replay(cfg, rep, events, label);
}

/// Replays the log (sorted by time, stably) and compares the queue, the batch and (in
/// reserve mode) the KV in use with the time series at every sampling instant.
fn check_replay(cfg: &SimConfig, rep: &SimReport, events: &[Event], label: &str) {
    let mut order: Vec<&Event> = events.iter().collect();
    order.sort_by(|a, b| a.t_s().total_cmp(&b.t_s()));
    let (mut waiting, mut running, mut reserved) = (0i64, 0i64, 0i64);
    let mut holds: HashMap<u64, u64> = HashMap::new();
    let mut i = 0;
    let mut checked = 0;
    for p in &rep.timeseries {
        while i < order.len() && order[i].t_s() <= p.t_s {
            match order[i] {
                Event::Arrival {
                    admitted: true,
                    reserved_blocks,
                    id,
                    ..
                } => {
                    waiting += 1;
                    reserved += *reserved_blocks as i64;
                    holds.insert(*id, *reserved_blocks);
                }
                Event::Admitted { .. } => {
                    waiting -= 1;
                    running += 1;
                }
                Event::Preempted { .. } => {
                    waiting += 1;
                    running -= 1;
                }
                Event::Finished { id, .. } => {
                    running -= 1;
                    reserved -= holds.remove(id).unwrap_or(0) as i64;
                }
                _ => {}
            }
            i += 1;
        }
        assert_eq!(waiting, p.waiting as i64, "{label}: queue at {}", p.t_s);
        assert_eq!(running, p.running as i64, "{label}: batch at {}", p.t_s);
        if cfg.server.kv_mode == KvMode::Reserve {
            let bs = u64::from(cfg.server.block_size.max(1)) as i64;
            assert_eq!(
                reserved * bs,
                p.kv_used_tokens as i64,
                "{label}: KV at {}",
                p.t_s
            );
        }
        checked += 1;
    }
    assert!(checked > 20, "{label}: {checked} instants checked");
}

fn logged_run(cfg: &SimConfig, label: &str) -> (SimReport, Vec<Event>) {
    let reqs = first_requests(cfg, 200);
    let plain = simulate_requests(cfg, reqs.clone().into_iter());
    let (rep, events) = simulate_logged(cfg, reqs.into_iter());
    assert_eq!(rep, plain, "{label}: logging changed the run");
    check_log(cfg, &rep, &events, label);
    (rep, events)
}

#[test]
fn events_reproduce_the_records_for_every_policy_and_kv_mode() {
    let lengths = LengthDist::Lognormal {
        prompt_median: 64.0,
        prompt_sigma: 0.8,
        output_median: 48.0,
        output_sigma: 0.9,
    };
    let mut preempted = 0;
    let mut refused = 0;
    for policy in Policy::ALL {
        for kv in [KvMode::Reserve, KvMode::Paged] {
            for first in [FirstToken::AfterPrefill, FirstToken::AfterFirstDecode] {
                let mut cfg = base(policy, kv, lengths.clone(), 9.0);
                cfg.first_token = first;
                // Small enough that paged runs preempt and reserve runs refuse.
                cfg.server.kv_tokens = 1024;
                cfg.horizon_s = 40.0;
                let label = format!("{policy:?}/{kv:?}/{first:?}");
                let (rep, _) = logged_run(&cfg, &label);
                preempted += rep.summary.preemptions;
                refused += rep.summary.rejected;
                // A context-dependent cost keeps every field exact (no decode set).
                cfg.cost = context_linear_cost();
                let (rep, _) = logged_run(&cfg, &format!("{label}/context cost"));
                preempted += rep.summary.preemptions;
                // Cut at the horizon, with the per-request overhead.
                cfg.end = EndRule::Cut;
                cfg.server.overhead_s = 0.01;
                let (rep, _) = logged_run(&cfg, &format!("{label}/cut"));
                preempted += rep.summary.preemptions;
            }
        }
    }
    assert!(preempted > 0, "some paged run preempts");
    assert!(refused > 0, "some reserve run refuses");
}

#[test]
fn a_jumped_decode_run_expands_into_its_iterations() {
    // One long request alone: after its prefill the event loop jumps its decode run in
    // few steps, but the log has one iteration per token, back to back.
    let mut cfg = base(
        Policy::Continuous,
        KvMode::Paged,
        LengthDist::Fixed {
            prompt: 100,
            output: 200,
        },
        1.0,
    );
    cfg.first_token = FirstToken::AfterFirstDecode;
    let req = engine::workload::Request {
        id: 0,
        class: 0,
        arrival: 0.5,
        prompt: 100,
        output: 200,
        group: 0,
        conv: 0,
    };
    let (rep, events) = simulate_logged(&cfg, std::iter::once(req));
    assert!(rep.stats.steps < 10, "{} steps", rep.stats.steps);
    let its: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Iteration(it) => Some(it),
            _ => None,
        })
        .collect();
    assert_eq!(its.len() as u64, rep.stats.iterations);
    assert_eq!(its.len(), 201, "one prefill and 200 decodes");
    for w in its.windows(2) {
        assert_eq!(w[0].end_s, w[1].start_s, "back to back");
    }
    // Paged: the request's blocks grow by one every 16 tokens of context.
    let blocks: Vec<u64> = its.iter().map(|it| it.slots[0].kv_blocks).collect();
    assert_eq!(blocks[0], 7, "the prompt's 100 tokens");
    assert_eq!(*blocks.last().unwrap(), 300u64.div_ceil(16));
    assert!(blocks.windows(2).all(|w| w[1] >= w[0]));
}
