//! Closed-loop users in front of the fleet ([`crate::workload::UserSource`]): each of U
//! users sends a request, waits for it to end (answered, or refused), thinks, and sends
//! the next one. At most U requests are ever in the system.
//!
//! The next send is the earliest user's ready instant, and it can only be taken once no
//! server could end a request before it: a departure could make another user ready
//! earlier. So the servers are moved forward, in time order, to the earliest instant any
//! of them can next change, until that instant lies past the next send. Users send
//! nothing after the horizon.

use super::gate::{wait_for_departure, At};
use super::router::Route;
use super::{Fleet, Server};
use crate::workload::UserSource;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub(super) fn run(
    fleet: &mut Fleet,
    servers: &mut [Box<dyn Server + '_>],
    router: &mut dyn Route,
    source: &mut UserSource<'_>,
    horizon: f64,
) {
    for s in servers.iter_mut() {
        s.log_departures();
    }
    // Users ready to send, earliest first (ties: the lower user first).
    let mut ready: BinaryHeap<Reverse<(At, usize)>> =
        (0..source.users()).map(|u| Reverse((At(0.0), u))).collect();
    // The user of each request sent, by request id.
    let mut owner: Vec<u32> = Vec::new();
    let mut gone = Vec::new();
    loop {
        for s in servers.iter_mut() {
            s.take_departures(&mut gone);
        }
        for (id, t) in gone.drain(..) {
            let u = owner[id as usize] as usize;
            ready.push(Reverse((At(t + source.think(u)), u)));
        }
        let next = ready.peek().map(|Reverse((At(t), _))| *t);
        let change = servers
            .iter()
            .filter(|s| !s.idle())
            .map(|s| s.wake())
            .fold(f64::INFINITY, f64::min);
        match next {
            Some(t) if t <= horizon && t <= change => {
                let Reverse((_, u)) = ready.pop().expect("just seen");
                let Some(r) = source.next(u, t) else {
                    // The workload has no more requests: nothing more is sent.
                    return;
                };
                owner.push(u as u32);
                fleet.send(servers, router, r);
            }
            // Every user waits past the horizon, or for an answer: a departure comes
            // first, if any server will ever end one.
            _ => {
                if next.is_some_and(|t| t > horizon) && change > horizon {
                    return;
                }
                if !wait_for_departure(servers, change.min(next.unwrap_or(change))) {
                    return;
                }
            }
        }
    }
}
