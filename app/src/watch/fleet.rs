//! Watching a fleet: N copies of the calculator's server behind a router
//! ([`engine::fleet`]), recorded with every replica's event log
//! ([`engine::fleet::simulate_fleet_logged`]) and replayed replica by replica.
//!
//! A fleet's [`Tape`] holds the whole fleet — every request's record, every replica's
//! marks merged in time order — so [`super::replay::snapshot`] of it gives the fleet-wide
//! counters (waiting, running, completed, TTFT so far); its [`FleetTape`] holds where the
//! router sent each request and each replica's own tape, whose snapshot
//! ([`super::replay::snapshot_in`]) gives that replica's queue, batch and KV.

use super::replay::{snapshot, snapshot_in, Snapshot};
use super::{watched_requests, Mark, Tape};
use crate::fleet::MAX_PAGE_REPLICAS;
use crate::params::{fmt_num, page_message, Params};
use engine::fleet::{simulate_fleet_logged, FleetConfig, RouterKind};
use engine::limits::Limits;
use serde::{Deserialize, Serialize};

/// Most replicas drawn; the counters, the histogram and the router's choices cover them all.
pub const MAX_SHOWN: usize = 8;

/// A watched fleet's router and replicas.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetTape {
    /// The router, as the page names it.
    pub router: String,
    /// The replica the router sent each request to, by id.
    pub routed_to: Vec<u32>,
    /// Each replica's run: its iterations, marks, time series and end (its records are
    /// the fleet's, in the fleet's tape).
    pub replicas: Vec<Tape>,
}

impl FleetTape {
    /// The first iteration boundary of any replica after `t`, or `end` [s].
    pub(super) fn next_boundary(&self, t: f64, end: f64) -> f64 {
        self.replicas
            .iter()
            .map(|r| r.next_boundary(t))
            .filter(|&b| b > t)
            .fold(end, f64::min)
    }

    /// The last iteration boundary of any replica before `t` (0 if none) [s].
    pub(super) fn previous_boundary(&self, t: f64) -> f64 {
        self.replicas
            .iter()
            .map(|r| r.previous_boundary(t))
            .fold(0.0, f64::max)
    }
}

/// Simulates the first `requests` requests of `params`' workload, at the fleet-wide rate
/// `params.rate`, through `replicas` copies of its server behind `router`, with every
/// replica's event log on. The run drains, as [`super::record`]'s does.
///
/// # Errors
/// A readable message for parameters the page or the engine refuses (N outside 1 to
/// [`MAX_PAGE_REPLICAS`], a KV-aware router over reserve-mode servers, …).
pub fn record_fleet(
    params: &Params,
    requests: u32,
    seed: u64,
    replicas: u32,
    router: RouterKind,
) -> Result<Tape, String> {
    if !(1..=MAX_PAGE_REPLICAS).contains(&replicas) {
        return Err(format!(
            "watch: {replicas} replicas; the page watches 1 to {MAX_PAGE_REPLICAS}"
        ));
    }
    let (cfg, reqs) = watched_requests(params, requests, seed)?;
    let fleet = FleetConfig::uniform(cfg.clone(), replicas, router);
    fleet
        .validate_with(&Limits::default())
        .map_err(|e| page_message(&e.to_string()))?;
    let (report, logs) = simulate_fleet_logged(&fleet, reqs.into_iter());
    let tapes: Vec<Tape> = logs
        .into_iter()
        .zip(&report.replicas)
        .map(|(log, rep)| {
            let mut t = Tape::new(params, &cfg, &report.records, log, rep.stats.end_s);
            t.timeseries = rep.timeseries.clone();
            t
        })
        .collect();
    // Stable: equal times keep each replica's own order.
    let mut marks: Vec<Mark> = tapes.iter().flat_map(|t| t.marks.iter().copied()).collect();
    marks.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut tape = Tape::new(params, &cfg, &report.records, Vec::new(), report.end_s);
    tape.policy = format!(
        "{} · {} replicas · {}",
        tape.policy,
        replicas,
        router.name()
    );
    tape.marks = marks;
    tape.records = report.records;
    tape.fleet = Some(FleetTape {
        router: router.name(),
        routed_to: report.routed_to,
        replicas: tapes,
    });
    Ok(tape)
}

/// A request on its way through the router: its id, the replica chosen (from 0) and when
/// it arrived [s].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Routed {
    pub id: u32,
    pub replica: u32,
    pub t_s: f64,
}

/// A fleet at one instant: the whole fleet's counters, each replica's state, and the
/// requests the router sent within the flash before the instant (newest last).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetSnapshot {
    /// Fleet-wide: waiting, running, completed, refused, TTFT so far; its KV counts are
    /// the replicas' sums, in blocks of one replica's size.
    pub fleet: Snapshot,
    pub replicas: Vec<Snapshot>,
    pub routed: Vec<Routed>,
}

/// The state of a fleet's `tape` at `t` [s] (None for one server's tape).
pub fn fleet_snapshot(tape: &Tape, t: f64, flash: f64) -> Option<FleetSnapshot> {
    let f = tape.fleet.as_ref()?;
    let replicas: Vec<Snapshot> = f
        .replicas
        .iter()
        .map(|r| snapshot_in(r, &tape.records, t, flash))
        .collect();
    let mut fleet = snapshot(tape, t, flash);
    fleet.kv_owners.clear();
    fleet.kv_used_blocks = replicas.iter().map(|s| s.kv_used_blocks).sum();
    fleet.kv_cached_held = replicas.iter().map(|s| s.kv_cached_held).sum();
    fleet.kv_cached_idle = replicas.iter().map(|s| s.kv_cached_idle).sum();
    fleet.slots = replicas
        .iter()
        .flat_map(|s| s.slots.iter().copied())
        .collect();
    // Requests are in arrival order, so those routed lately are a suffix of the arrived.
    let arrived = tape.records.partition_point(|r| r.arrival_s <= t);
    let from = tape.records[..arrived].partition_point(|r| r.arrival_s <= t - flash);
    let routed = tape.records[from..arrived]
        .iter()
        .filter_map(|r| {
            let replica = *f.routed_to.get(r.id as usize)?;
            Some(Routed {
                id: r.id as u32,
                replica,
                t_s: r.arrival_s,
            })
        })
        .collect();
    Some(FleetSnapshot {
        fleet,
        replicas,
        routed,
    })
}

/// One replica's counters as text: queue, batch, KV use, completed.
pub fn replica_counters(tape: &Tape, s: &Snapshot) -> (usize, String, String, u32) {
    (
        s.queue.len(),
        format!("{} of {}", s.running, tape.max_batch),
        format!(
            "{:.0} %",
            100.0 * s.kv_used_blocks as f64 / tape.kv_blocks.max(1) as f64
        ),
        s.completed,
    )
}

/// A one-line description of a fleet snapshot, for screen readers and the e2e test.
pub fn describe_fleet(tape: &Tape, f: &FleetSnapshot) -> String {
    let n = f.replicas.len();
    let s = &f.fleet;
    let mut text = format!(
        "t = {:.3} s: fleet of {n} replicas behind {}: {} waiting; batch {} of {}; KV {} of {} blocks; {} completed, {} refused, {} preempted",
        s.t_s,
        tape.fleet.as_ref().map_or("", |f| f.router.as_str()),
        s.queue.len(),
        s.running,
        u64::from(tape.max_batch) * n as u64,
        s.kv_used_blocks,
        tape.kv_blocks * n as u64,
        s.completed,
        s.rejected,
        s.preempted
    );
    for (i, r) in f.replicas.iter().enumerate() {
        let (q, b, kv, done) = replica_counters(tape, r);
        text.push_str(&format!(
            "; replica {}: queue {q}, batch {b}, KV {kv}, {done} completed",
            i + 1
        ));
    }
    if let Some(r) = f.routed.last() {
        text.push_str(&format!(
            "; last routed: #{} to replica {} at {} s",
            r.id,
            r.replica + 1,
            fmt_num((r.t_s * 1e3).round() / 1e3)
        ));
    }
    text
}

#[cfg(test)]
mod tests;
