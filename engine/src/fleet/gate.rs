//! A client that keeps at most `max` requests in flight (`vllm bench serve
//! --max-concurrency`): request i is sent at its arrival time or, when `max` are in
//! flight, when one of them ends, and never before request i − 1 (the benchmark's
//! semaphore is first come, first served).
//!
//! When every slot is taken, the next send waits for the next departure. The servers are
//! moved forward in time order only as far as nothing unknown could reach them: no
//! request can be sent before the earliest instant any server could next finish one.

use super::router::Route;
use super::{Fleet, Server};
use crate::workload::Request;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A free-slot instant, ordered as a number (instants are finite and ≥ 0).
#[derive(Clone, Copy, Debug)]
pub(super) struct At(pub(super) f64);

impl PartialEq for At {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for At {}

impl PartialOrd for At {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for At {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

pub(super) fn run<I: Iterator<Item = Request>>(
    fleet: &mut Fleet,
    servers: &mut [Box<dyn Server + '_>],
    router: &mut dyn Route,
    requests: I,
    max: usize,
) {
    for s in servers.iter_mut() {
        s.log_departures();
    }
    // Instants at which a slot became free and has not been taken since.
    let mut free: BinaryHeap<Reverse<At>> = (0..max).map(|_| Reverse(At(0.0))).collect();
    let mut gone = Vec::new();
    let mut last_send = 0.0f64;
    for mut r in requests {
        let earliest = r.arrival.max(last_send);
        collect(servers, &mut gone, &mut free);
        while free.is_empty() {
            if !wait_for_departure(servers, earliest) {
                // Every server has stopped (a cut run's horizon, a drain cap): what is
                // in flight never ends, so nothing more is sent.
                return;
            }
            collect(servers, &mut gone, &mut free);
        }
        let Reverse(At(slot)) = free.pop().expect("a slot is free");
        r.arrival = earliest.max(slot);
        last_send = r.arrival;
        fleet.send(servers, router, r);
    }
}

fn collect(
    servers: &mut [Box<dyn Server + '_>],
    gone: &mut Vec<(u64, f64)>,
    free: &mut BinaryHeap<Reverse<At>>,
) {
    for s in servers.iter_mut() {
        s.take_departures(gone);
    }
    free.extend(gone.drain(..).map(|(_, t)| Reverse(At(t))));
}

/// Moves the servers forward until one of them has finished a request; false if none
/// ever will. No request can be sent before `floor` nor before the next departure, which
/// is never before the earliest instant a server can next change (its wake), so servers
/// may run up to there.
pub(super) fn wait_for_departure(servers: &mut [Box<dyn Server + '_>], floor: f64) -> bool {
    let d = servers
        .iter()
        .filter(|s| !s.idle())
        .map(|s| s.wake())
        .fold(f64::INFINITY, f64::min);
    if !d.is_finite() {
        return false;
    }
    let limit = d.max(floor);
    for s in servers.iter_mut() {
        s.advance(limit);
    }
    if !servers.iter().any(|s| s.has_departures()) {
        // Nothing ended at `limit` itself, so nothing can be sent there either: the
        // servers waiting to plan at `limit` may now plan.
        let limit = limit.next_up();
        for s in servers.iter_mut() {
            s.advance(limit);
        }
    }
    true
}
