//! The animation's picture of one [`Snapshot`], drawn with plotters onto any backend (the
//! page: a canvas; the tests: an SVG string): the queue, the B batch slots with each
//! request's phase, the KV cache as a grid of blocks, and the events of the last moments.
//!
//! Colours are the Okabe–Ito palette, which stays distinct under the common forms of
//! colour blindness, and every phase also differs by shape or pattern: a decode slot is
//! solid with a round token mark, a prefill slot is striped, an idle slot is an outline; a
//! request waiting after a preemption is a triangle, a fresh one a circle. With the prefix
//! cache on, a cached block that requests hold is solid with a dot, a cached block no one
//! holds (evictable) is pale and cross-hatched, and a request whose prompt hit the cache
//! carries a "hit" tag while it prefills.

use super::replay::{mark_text, Snapshot};
use super::{MarkKind, Tape};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Okabe–Ito colours.
pub const DECODE: RGBColor = RGBColor(0, 114, 178);
pub const PREFILL: RGBColor = RGBColor(230, 159, 0);
pub const ALERT: RGBColor = RGBColor(213, 94, 0);
pub const FIRST: RGBColor = RGBColor(0, 158, 115);
pub const FRESH: RGBColor = RGBColor(86, 180, 233);
pub const QUIET: RGBColor = RGBColor(120, 120, 120);
/// Okabe–Ito reddish purple: the prefix cache.
pub const CACHE: RGBColor = RGBColor(204, 121, 167);
const INK: RGBColor = RGBColor(30, 30, 30);
const PALE: RGBColor = RGBColor(225, 225, 225);

/// Canvas size [px].
pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 470;

/// Most queue marks and batch slots drawn (the rest are counted as "+n").
const QUEUE_COLS: usize = 14;
const QUEUE_ROWS: usize = 5;
const SLOT_COLS: usize = 8;
const SLOT_ROWS: usize = 4;
/// KV grid: at most this many cells (a cell holds several blocks when the pool is larger).
const KV_COLS: usize = 48;
const KV_ROWS: usize = 6;
/// The KV grid's top [px], and how far above it its header starts: a 15 px line with its
/// descenders clears the grid by a few pixels.
pub const KV_TOP: i32 = 282;
pub const KV_HEADER_GAP: i32 = 24;

/// What was drawn, for the page's text alternative and the e2e test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drawn {
    /// Queue length shown: marks drawn plus the "+n" overflow.
    pub queue: usize,
    /// Batch slots drawn with a request in them, plus the overflow.
    pub busy_slots: usize,
    /// KV blocks shown as used.
    pub kv_blocks: u64,
    /// Prefix cache: blocks shown as cached and evictable.
    pub kv_cached_idle: u64,
    /// Batch slots drawn with a prefix-hit tag.
    pub hit_tags: usize,
}

/// Grid codes of the prefix cache's blocks (the others are a slot's phase code, or
/// `i32::MIN` for a waiting request's reservation).
const HELD_CACHED: i32 = i32::MIN + 1;
const IDLE_CACHED: i32 = i32::MIN + 2;

type Area<'a, DB> = DrawingArea<DB, Shift>;

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&INK)
}

/// Draws `s` (a snapshot of `tape`) onto `root`. `flash` is how long an event stays
/// highlighted [s].
///
/// # Errors
/// The backend's drawing error.
pub fn draw_scene<DB: DrawingBackend>(
    root: &Area<'_, DB>,
    tape: &Tape,
    s: &Snapshot,
    flash: f64,
) -> Result<Drawn, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let mut drawn = Drawn::default();
    let recent = |kind: MarkKind, id: u32| {
        s.recent
            .iter()
            .any(|m| m.kind == kind && m.id == id && m.t_s > s.t_s - flash)
    };
    let preempted_before = |id: u32| {
        tape.records
            .get(id as usize)
            .is_some_and(|r| r.preemptions > 0)
            && tape
                .marks
                .iter()
                .any(|m| m.kind == MarkKind::Preempted && m.id == id && m.t_s <= s.t_s)
    };

    // Queue: front on the right, next to the batch.
    let (qx0, qy0, qstep) = (20i32, 56i32, 20i32);
    root.draw(&Text::new(
        format!("queue: {} waiting", s.queue.len()),
        (qx0, 28),
        font(15),
    ))?;
    let shown = s.queue.len().min(QUEUE_COLS * QUEUE_ROWS);
    for (k, id) in s.queue.iter().take(shown).enumerate() {
        let (col, row) = (k % QUEUE_COLS, k / QUEUE_COLS);
        let x = qx0 + (QUEUE_COLS - 1 - col) as i32 * qstep + 9;
        let y = qy0 + row as i32 * qstep + 9;
        let fill = if recent(MarkKind::Arrival, *id) {
            FRESH.filled()
        } else {
            WHITE.filled()
        };
        if preempted_before(*id) {
            let tri = vec![(x, y - 8), (x - 8, y + 7), (x + 8, y + 7)];
            root.draw(&Polygon::new(tri.clone(), fill))?;
            root.draw(&PathElement::new(
                [tri.clone(), vec![tri[0]]].concat(),
                ALERT.stroke_width(2),
            ))?;
        } else {
            root.draw(&Circle::new((x, y), 8, fill))?;
            root.draw(&Circle::new((x, y), 8, INK.stroke_width(1)))?;
        }
        drawn.queue += 1;
    }
    if s.queue.len() > shown {
        let more = s.queue.len() - shown;
        root.draw(&Text::new(
            format!("+{more} more"),
            (qx0, qy0 + QUEUE_ROWS as i32 * qstep + 4),
            font(13),
        ))?;
        drawn.queue += more;
    }
    // Refused arrivals, as crosses at the queue's door.
    let refused: Vec<_> = s
        .recent
        .iter()
        .filter(|m| m.kind == MarkKind::Rejected && m.t_s > s.t_s - flash)
        .collect();
    let ry = qy0 + QUEUE_ROWS as i32 * qstep + 26;
    root.draw(&Text::new(
        format!("refused: {}", s.rejected),
        (qx0, ry),
        font(13),
    ))?;
    for (k, _) in refused.iter().take(10).enumerate() {
        let x = qx0 + 90 + k as i32 * 18;
        let c = ALERT.stroke_width(3);
        root.draw(&PathElement::new(vec![(x - 6, ry - 6), (x + 6, ry + 6)], c))?;
        root.draw(&PathElement::new(vec![(x - 6, ry + 6), (x + 6, ry - 6)], c))?;
    }
    // Arrow into the batch.
    let ax = qx0 + QUEUE_COLS as i32 * qstep + 6;
    root.draw(&PathElement::new(
        vec![(ax, 100), (ax + 22, 100)],
        INK.stroke_width(2),
    ))?;
    root.draw(&Polygon::new(
        vec![(ax + 22, 94), (ax + 30, 100), (ax + 22, 106)],
        INK.filled(),
    ))?;

    // Batch slots.
    let (bx0, by0, bw, bh) = (ax + 44, 44i32, 60i32, 44i32);
    let b = tape.max_batch as usize;
    let (prefill, decode, idle) = super::replay::phase_counts(&s.slots);
    root.draw(&Text::new(
        format!(
            "batch: {} of B = {b} ({prefill} prefill, {decode} decode, {idle} idle)",
            s.slots.len()
        ),
        (bx0, 28),
        font(15),
    ))?;
    let slots_shown = b.min(SLOT_COLS * SLOT_ROWS);
    for k in 0..slots_shown {
        let (col, row) = (k % SLOT_COLS, k / SLOT_COLS);
        let x = bx0 + col as i32 * (bw + 6);
        let y = by0 + row as i32 * (bh + 6);
        let r = [(x, y), (x + bw, y + bh)];
        match s.slots.get(k) {
            None => {
                root.draw(&Rectangle::new(r, PALE.stroke_width(1)))?;
            }
            Some(sl) => {
                drawn.busy_slots += 1;
                match sl.1 {
                    -1 => {
                        root.draw(&Rectangle::new(r, DECODE.filled()))?;
                        root.draw(&Circle::new((x + bw - 10, y + 10), 5, WHITE.filled()))?;
                        root.draw(&Text::new(
                            format!("#{} D", sl.0),
                            (x + 5, y + 24),
                            font(13).color(&WHITE),
                        ))?;
                    }
                    0 => {
                        root.draw(&Rectangle::new(r, QUIET.stroke_width(2)))?;
                        root.draw(&Text::new(
                            format!("#{} idle", sl.0),
                            (x + 5, y + 24),
                            font(12),
                        ))?;
                    }
                    n => {
                        root.draw(&Rectangle::new(r, PREFILL.mix(0.35).filled()))?;
                        // Stripes: the prefill pattern.
                        for d in (-bh..bw).step_by(9) {
                            let (x0, y0) = (x + d.max(0), y + bh - (-d).max(0));
                            let len = (bw - d.max(0)).min(bh - (-d).max(0));
                            root.draw(&PathElement::new(
                                vec![(x0, y0), (x0 + len, y0 - len)],
                                PREFILL.stroke_width(3),
                            ))?;
                        }
                        root.draw(&Rectangle::new(r, PREFILL.stroke_width(2)))?;
                        root.draw(&Text::new(
                            format!("#{} P{n}", sl.0),
                            (x + 5, y + 24),
                            font(13),
                        ))?;
                    }
                }
                let hit = tape
                    .records
                    .get(sl.0 as usize)
                    .map_or(0, |r| r.cached_tokens);
                if hit > 0 && (sl.1 > 0 || recent(MarkKind::Hit, sl.0)) {
                    // A prefix hit: a tag in the slot's corner while the rest of the
                    // prompt prefills.
                    let r = [(x + bw - 24, y + 1), (x + bw - 1, y + 15)];
                    root.draw(&Rectangle::new(r, CACHE.filled()))?;
                    root.draw(&Text::new(
                        "hit",
                        (x + bw - 21, y + 1),
                        font(12).color(&WHITE),
                    ))?;
                    drawn.hit_tags += 1;
                }
                if s.first_token_soon.contains(&sl.0) || recent(MarkKind::FirstToken, sl.0) {
                    // First token: a green diamond on the slot.
                    let (cx, cy) = (x + 10, y + 10);
                    root.draw(&Polygon::new(
                        vec![(cx, cy - 7), (cx + 7, cy), (cx, cy + 7), (cx - 7, cy)],
                        FIRST.filled(),
                    ))?;
                    root.draw(&PathElement::new(
                        vec![
                            (cx, cy - 7),
                            (cx + 7, cy),
                            (cx, cy + 7),
                            (cx - 7, cy),
                            (cx, cy - 7),
                        ],
                        WHITE.stroke_width(1),
                    ))?;
                }
            }
        }
    }
    if s.slots.len() > slots_shown {
        drawn.busy_slots += s.slots.len() - slots_shown;
    }
    if b > slots_shown {
        let y = by0 + SLOT_ROWS as i32 * (bh + 6) - 4;
        root.draw(&Text::new(
            format!(
                "+{} more slots ({} busy)",
                b - slots_shown,
                s.slots.len().saturating_sub(slots_shown)
            ),
            (bx0, y),
            font(13),
        ))?;
    }
    // Finished and preempted lately, to the right of the batch.
    let fx = bx0 + SLOT_COLS as i32 * (bw + 6) + 4;
    let done_recent = s
        .recent
        .iter()
        .filter(|m| m.kind == MarkKind::Finished && m.t_s > s.t_s - flash)
        .count();
    root.draw(&Text::new(
        format!("done: {}", s.completed),
        (fx, 60),
        font(13),
    ))?;
    for k in 0..done_recent.min(8) {
        let (x, y) = (fx + 6 + (k as i32 % 4) * 16, 78 + (k as i32 / 4) * 18);
        root.draw(&PathElement::new(
            vec![(x - 5, y), (x - 1, y + 5), (x + 7, y - 6)],
            FIRST.stroke_width(3),
        ))?;
    }

    // KV cache grid.
    let (kx0, ky0) = (20i32, KV_TOP);
    let total = tape.kv_blocks.max(1);
    let cells = (KV_COLS * KV_ROWS) as u64;
    let per_cell = total.div_ceil(cells).max(1);
    let n_cells = total.div_ceil(per_cell) as usize;
    let cached = if tape.prefix_cache {
        format!(" · {} cached, evictable", s.kv_cached_idle)
    } else {
        String::new()
    };
    root.draw(&Text::new(
        format!(
            "KV cache: {} of {} blocks in use ({:.0} %){cached} · one cell = {} block{} of {} token{}",
            s.kv_used_blocks,
            tape.kv_blocks,
            100.0 * s.kv_used_blocks as f64 / total as f64,
            per_cell,
            if per_cell == 1 { "" } else { "s" },
            tape.block_size,
            if tape.block_size == 1 { "" } else { "s" }
        ),
        (kx0, ky0 - KV_HEADER_GAP),
        font(15),
    ))?;
    // Owner of each block, in order: (phase code, owner index) per block range.
    let phase_of = |id: u32| s.slots.iter().find(|sl| sl.0 == id).map(|sl| sl.1);
    let mut ranges = Vec::new();
    let mut at = 0u64;
    for (k, (id, blocks, running)) in s.kv_owners.iter().enumerate() {
        let code = if *running {
            phase_of(*id).unwrap_or(0)
        } else {
            i32::MIN
        };
        ranges.push((at, at + *blocks as u64, code, k));
        at += *blocks as u64;
    }
    // The cache's blocks after the requests' own: held (in use), then evictable.
    let k = ranges.len();
    ranges.push((at, at + s.kv_cached_held, HELD_CACHED, k));
    at += s.kv_cached_held;
    drawn.kv_blocks = at;
    ranges.push((at, at + s.kv_cached_idle, IDLE_CACHED, k + 1));
    drawn.kv_cached_idle = s.kv_cached_idle;
    let (cw, ch) = (18i32, 18i32);
    let mut r = 0;
    for c in 0..n_cells {
        let (b0, b1) = (c as u64 * per_cell, ((c as u64 + 1) * per_cell).min(total));
        let x = kx0 + (c % KV_COLS) as i32 * (cw + 1);
        let y = ky0 + (c / KV_COLS) as i32 * (ch + 1);
        let rect = [(x, y), (x + cw, y + ch)];
        while r < ranges.len() && ranges[r].1 <= b0 {
            r += 1;
        }
        let used = ranges
            .iter()
            .skip(r)
            .take_while(|o| o.0 < b1)
            .map(|o| o.1.min(b1) - o.0.max(b0))
            .sum::<u64>();
        if used == 0 {
            root.draw(&Rectangle::new(rect, PALE.filled()))?;
            continue;
        }
        let Some(&(_, _, code, k)) = ranges.get(r) else {
            continue;
        };
        let frac = used as f64 / (b1 - b0) as f64;
        let top = y + ch - (frac * ch as f64).round() as i32;
        root.draw(&Rectangle::new(rect, PALE.filled()))?;
        let shade = if k % 2 == 0 { 1.0 } else { 0.7 };
        let fill = match code {
            -1 => DECODE.mix(shade),
            0 => QUIET.mix(shade),
            i32::MIN => QUIET.mix(0.35 * shade),
            HELD_CACHED => CACHE.mix(1.0),
            IDLE_CACHED => CACHE.mix(0.3),
            _ => PREFILL.mix(shade),
        };
        root.draw(&Rectangle::new([(x, top), (x + cw, y + ch)], fill.filled()))?;
        if code == HELD_CACHED {
            root.draw(&Circle::new((x + cw / 2, y + ch / 2), 3, WHITE.filled()))?;
        } else if code == IDLE_CACHED {
            // Evictable: cross-hatched.
            for (a, b) in [((x, top), (x + cw, y + ch)), ((x, y + ch), (x + cw, top))] {
                root.draw(&PathElement::new(vec![a, b], CACHE.stroke_width(2)))?;
            }
        } else if code > 0 || code == i32::MIN {
            // Prefill and reservations of the waiting: striped, as their slots.
            root.draw(&PathElement::new(
                vec![(x, y + ch), (x + cw, y)],
                WHITE.stroke_width(2),
            ))?;
        }
    }
    // Legend.
    let ly = ky0 + KV_ROWS as i32 * (ch + 1) + 22;
    let mut lx = kx0;
    // With the prefix cache (paged, so nothing is reserved) the cache's two kinds of
    // block take the reservation's place.
    let mut keys = vec![
        ("decode", DECODE.mix(1.0), 0),
        ("prefill", PREFILL.mix(1.0), 1),
    ];
    if tape.prefix_cache {
        keys.push(("cache, in use", CACHE.mix(1.0), HELD_CACHED));
        keys.push(("cache, evictable", CACHE.mix(0.3), IDLE_CACHED));
    } else {
        keys.push(("reserved, waiting", QUIET.mix(0.35), 1));
    }
    keys.push(("idle in batch", QUIET.mix(1.0), 0));
    for (label, color, pattern) in keys {
        root.draw(&Rectangle::new(
            [(lx, ly - 10), (lx + 14, ly + 4)],
            color.filled(),
        ))?;
        match pattern {
            1 => root.draw(&PathElement::new(
                vec![(lx, ly + 4), (lx + 14, ly - 10)],
                WHITE.stroke_width(2),
            ))?,
            HELD_CACHED => root.draw(&Circle::new((lx + 7, ly - 3), 3, WHITE.filled()))?,
            IDLE_CACHED => {
                for (a, b) in [
                    ((lx, ly - 10), (lx + 14, ly + 4)),
                    ((lx, ly + 4), (lx + 14, ly - 10)),
                ] {
                    root.draw(&PathElement::new(vec![a, b], CACHE.stroke_width(2)))?;
                }
            }
            _ => {}
        }
        root.draw(&Text::new(label, (lx + 20, ly - 8), font(13)))?;
        lx += 40 + 8 * label.len() as i32;
    }
    let (cx, cy) = (lx + 8, ly - 3);
    root.draw(&Polygon::new(
        vec![(cx, cy - 7), (cx + 7, cy), (cx, cy + 7), (cx - 7, cy)],
        FIRST.filled(),
    ))?;
    root.draw(&Text::new("first token", (cx + 12, ly - 8), font(13)))?;
    let tx = cx + 100;
    root.draw(&Polygon::new(
        vec![(tx, cy - 7), (tx - 7, cy + 6), (tx + 7, cy + 6)],
        WHITE.filled(),
    ))?;
    root.draw(&PathElement::new(
        vec![
            (tx, cy - 7),
            (tx - 7, cy + 6),
            (tx + 7, cy + 6),
            (tx, cy - 7),
        ],
        ALERT.stroke_width(2),
    ))?;
    root.draw(&Text::new(
        "preempted, waiting",
        (tx + 12, ly - 8),
        font(13),
    ))?;

    // The latest events, as text.
    let ey = ly + 18;
    for (k, m) in s.recent.iter().rev().take(3).enumerate() {
        let color = match m.kind {
            MarkKind::Rejected | MarkKind::Preempted => ALERT,
            MarkKind::FirstToken | MarkKind::Finished => FIRST,
            MarkKind::Hit => CACHE,
            _ => INK,
        };
        root.draw(&Text::new(
            mark_text(m),
            (kx0 + k as i32 * 300, ey),
            font(13).color(&color),
        ))?;
    }
    Ok(drawn)
}

/// Bins of the TTFT histogram.
pub const TTFT_BINS: usize = 20;

/// The TTFT histogram of the requests finished so far (`done`), on fixed axes up to the
/// run's largest TTFT (`max`) so the bars grow in place.
///
/// # Errors
/// The backend's drawing error.
pub fn draw_ttft<DB: DrawingBackend>(
    root: &Area<'_, DB>,
    done: &[f64],
    max: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let max = if max > 0.0 { max } else { 1.0 };
    let mut bins = [0u32; TTFT_BINS];
    for &v in done {
        let i = ((v / max) * TTFT_BINS as f64).floor() as usize;
        bins[i.min(TTFT_BINS - 1)] += 1;
    }
    let top = bins.iter().copied().max().unwrap_or(0).max(1);
    let (w, h) = root.dim_in_pixel();
    let (x0, y0, x1, y1) = (34i32, 24i32, w as i32 - 10, h as i32 - 26);
    root.draw(&Text::new(
        format!("TTFT of {} finished", done.len()),
        (x0, 4),
        font(13),
    ))?;
    let bw = (x1 - x0) as f64 / TTFT_BINS as f64;
    for (i, &c) in bins.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let bx = x0 + (i as f64 * bw).round() as i32;
        let top_y = y1 - ((c as f64 / top as f64) * (y1 - y0) as f64).round() as i32;
        root.draw(&Rectangle::new(
            [
                (bx + 1, top_y),
                ((x0 + ((i + 1) as f64 * bw).round() as i32) - 1, y1),
            ],
            DECODE.filled(),
        ))?;
    }
    root.draw(&PathElement::new(
        vec![(x0, y1), (x1, y1)],
        INK.stroke_width(1),
    ))?;
    root.draw(&PathElement::new(
        vec![(x0, y0), (x0, y1)],
        INK.stroke_width(1),
    ))?;
    root.draw(&Text::new(top.to_string(), (4, y0 - 6), font(11)))?;
    root.draw(&Text::new("0 s", (x0 - 8, y1 + 6), font(11)))?;
    root.draw(&Text::new(
        format!("{max:.2} s"),
        (x1 - 40, y1 + 6),
        font(11),
    ))?;
    Ok(())
}
