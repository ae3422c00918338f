//! The server's state at one instant of a watched run, replayed from its [`Tape`]: every
//! event at or before the instant has happened, as in the engine's time series
//! ([`engine::sim::TimePoint`]). Replaying from the start costs O(events) — a few
//! thousand for a few hundred requests, microseconds — so scrubbing backwards is as cheap
//! as playing forwards.

use super::{Mark, MarkKind, TSlot, Tape};
use engine::record::RequestRecord;
use std::collections::HashMap;

/// How long an event stays highlighted after it happens [s of simulated time] at speed 1
/// (the view scales it with the speed).
pub const FLASH_S: f64 = 0.4;

/// The state at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub t_s: f64,
    /// Waiting requests, front first (a preempted request goes back to the front).
    pub queue: Vec<u32>,
    /// The iteration under way (start ≤ t < end), by index into the tape.
    pub iteration: Option<usize>,
    /// Its slots (empty between iterations).
    pub slots: Vec<TSlot>,
    /// Requests in the running set (admitted, not finished or preempted).
    pub running: u32,
    /// KV blocks in use: the running set's (paged: as held in the iteration under way),
    /// plus, in reserve mode, the reservations of the waiting.
    pub kv_used_blocks: u64,
    /// Who holds KV, in order: (request, blocks it holds alone, whether it is running).
    pub kv_owners: Vec<(u32, u32, bool)>,
    /// Prefix cache: cached blocks the running requests hold (shared, each counted once;
    /// part of `kv_used_blocks`), and cached blocks no one holds (free, evictable).
    pub kv_cached_held: u64,
    pub kv_cached_idle: u64,
    /// Requests admitted so far (first admissions), their prompt tokens, those whose
    /// first admission hit the prefix cache, and the prompt tokens it found [tokens].
    pub admissions: u32,
    pub admitted_prompt_tokens: u64,
    pub hits: u32,
    pub hit_tokens: u64,
    pub arrived: u32,
    pub rejected: u32,
    pub completed: u32,
    pub preempted: u32,
    pub first_tokens: u32,
    /// TTFT of the requests completed so far [s].
    pub ttft_done: Vec<f64>,
    /// Events within `flash` before the instant, newest last.
    pub recent: Vec<Mark>,
    /// Requests whose first token comes at the end of the iteration under way.
    pub first_token_soon: Vec<u32>,
}

/// The state of `tape` at `t` [s]; events within `flash` [s] before `t` are `recent`.
pub fn snapshot(tape: &Tape, t: f64, flash: f64) -> Snapshot {
    snapshot_in(tape, &tape.records, t, flash)
}

/// [`snapshot`] of a tape whose requests' records are `records` (by id): a fleet's
/// replica, whose records are the fleet's.
pub fn snapshot_in(tape: &Tape, records: &[RequestRecord], t: f64, flash: f64) -> Snapshot {
    let mut s = Snapshot {
        t_s: t,
        ..Snapshot::default()
    };
    let mut reserved: HashMap<u32, u32> = HashMap::new();
    let mut admitted = std::collections::HashSet::new();
    let mut running = 0i64;
    let upto = tape.marks.partition_point(|m| m.t_s <= t);
    for m in &tape.marks[..upto] {
        match m.kind {
            MarkKind::Arrival => {
                s.arrived += 1;
                s.queue.push(m.id);
                if !tape.paged {
                    reserved.insert(m.id, m.blocks);
                }
            }
            MarkKind::Rejected => {
                s.arrived += 1;
                s.rejected += 1;
            }
            MarkKind::Admitted => {
                if let Some(i) = s.queue.iter().position(|x| *x == m.id) {
                    s.queue.remove(i);
                }
                running += 1;
                if admitted.insert(m.id) {
                    s.admissions += 1;
                    s.admitted_prompt_tokens += records
                        .get(m.id as usize)
                        .map_or(0, |r| u64::from(r.prompt_tokens));
                }
            }
            MarkKind::Hit => {
                s.hits += 1;
                s.hit_tokens += u64::from(m.blocks);
            }
            MarkKind::Preempted => {
                s.preempted += 1;
                s.queue.insert(0, m.id);
                running -= 1;
            }
            MarkKind::FirstToken => s.first_tokens += 1,
            MarkKind::Finished => {
                s.completed += 1;
                running -= 1;
                reserved.remove(&m.id);
                if let Some(ttft) = records.get(m.id as usize).and_then(|r| r.ttft()) {
                    s.ttft_done.push(ttft);
                }
            }
        }
        if m.t_s > t - flash {
            s.recent.push(*m);
        }
    }
    s.running = running.max(0) as u32;
    let i = tape.iterations.partition_point(|it| it.start_s <= t);
    if let Some(it) = i.checked_sub(1).map(|i| (i, &tape.iterations[i])) {
        if t < it.1.end_s {
            s.iteration = Some(it.0);
            s.slots = it.1.slots.clone();
            s.kv_cached_held = it.1.cached_held;
            s.kv_cached_idle = it.1.cached_idle;
            let end = it.1.end_s;
            let from = upto;
            s.first_token_soon = tape.marks[from..]
                .iter()
                .take_while(|m| m.t_s <= end)
                .filter(|m| m.kind == MarkKind::FirstToken && m.t_s == end)
                .map(|m| m.id)
                .collect();
        }
    }
    // KV: the running set's blocks, then the waiting requests' reservations.
    if tape.paged {
        for sl in &s.slots {
            s.kv_owners.push((sl.id(), sl.own(), true));
        }
    } else {
        for sl in &s.slots {
            if let Some(b) = reserved.remove(&sl.id()) {
                s.kv_owners.push((sl.id(), b, true));
            }
        }
        // Reserved but not in the iteration under way: waiting (or admitted between
        // iterations), in arrival order.
        let mut rest: Vec<(u32, u32)> = reserved.into_iter().collect();
        rest.sort_unstable();
        for (id, b) in rest {
            s.kv_owners.push((id, b, false));
        }
    }
    s.kv_used_blocks = s.kv_owners.iter().map(|o| o.1 as u64).sum::<u64>() + s.kv_cached_held;
    s
}

/// The prefix cache's hit counter: "h of a admitted hit · x % of their prompt tokens"
/// (first admissions; the rate is [`engine::metrics::hit_rate`]).
pub fn hits_text(s: &Snapshot) -> String {
    format!(
        "{} of {} admitted · {} of prompt tokens",
        s.hits,
        s.admissions,
        engine::metrics::hit_rate(s.hit_tokens, s.admitted_prompt_tokens)
            .map_or("—".into(), |r| format!("{:.1} %", 100.0 * r))
    )
}

/// Counts of the slots of a snapshot: (prefilling, decoding, idle).
pub fn phase_counts(slots: &[TSlot]) -> (u32, u32, u32) {
    slots.iter().fold((0, 0, 0), |(p, d, i), s| match s.1 {
        -1 => (p, d + 1, i),
        0 => (p, d, i + 1),
        _ => (p + 1, d, i),
    })
}

/// A one-line description of a snapshot, for screen readers and the e2e test.
pub fn describe(tape: &Tape, s: &Snapshot) -> String {
    let (p, d, i) = phase_counts(&s.slots);
    let mut text = format!(
        "t = {:.3} s: {} waiting; batch {} of {} ({p} prefill, {d} decode{}); KV {} of {} blocks ({:.0} %); {} completed, {} refused, {} preempted",
        s.t_s,
        s.queue.len(),
        s.running,
        tape.max_batch,
        if i > 0 { format!(", {i} idle") } else { String::new() },
        s.kv_used_blocks,
        tape.kv_blocks,
        100.0 * s.kv_used_blocks as f64 / tape.kv_blocks.max(1) as f64,
        s.completed,
        s.rejected,
        s.preempted
    );
    if tape.prefix_cache {
        text.push_str(&format!(
            "; prefix cache: {} blocks cached and evictable, hits {}",
            s.kv_cached_idle,
            hits_text(s)
        ));
    }
    if let Some(m) = s.recent.last() {
        text.push_str(&format!("; last event: {}", mark_text(m)));
    }
    text
}

/// An event as text.
pub fn mark_text(m: &Mark) -> String {
    let what = match m.kind {
        MarkKind::Arrival => "arrived",
        MarkKind::Rejected => "refused",
        MarkKind::Admitted => "admitted",
        MarkKind::FirstToken => "first token",
        MarkKind::Finished => "finished",
        MarkKind::Preempted => "preempted",
        MarkKind::Hit => {
            return format!(
                "#{} hit: {} tokens cached at {:.3} s",
                m.id, m.blocks, m.t_s
            )
        }
    };
    format!("#{} {what} at {:.3} s", m.id, m.t_s)
}
