//! The picture of a fleet at one instant ([`FleetSnapshot`]), drawn with plotters onto any
//! backend: the router on the left, each request it sends drawn as a mark travelling from
//! it to the chosen replica's queue (the replica's panel flashes as it arrives), and one
//! panel per replica — up to [`MAX_SHOWN`] — with its queue, batch slots coloured by phase
//! and KV grid, smaller than the one-server picture but in its colours and patterns.

use super::fleet::{replica_counters, FleetSnapshot, MAX_SHOWN};
use super::replay::Snapshot;
use super::scene::{ALERT, CACHE, DECODE, FIRST, FRESH, PREFILL, QUIET};
use super::{MarkKind, Tape};
use plotters::coord::Shift;
use plotters::prelude::*;

const INK: RGBColor = RGBColor(30, 30, 30);
const PALE: RGBColor = RGBColor(225, 225, 225);

/// Canvas width [px] (the one-server picture's).
pub const WIDTH: u32 = super::scene::WIDTH;
/// The router's column [px].
const ROUTER_W: i32 = 200;
/// Header, one panel row, the space under the panels [px].
const TOP: i32 = 40;
const PANEL_H: i32 = 120;
const GAP: i32 = 10;
const BOTTOM: i32 = 64;
/// KV grid cell [px] and rows.
const CELL: i32 = 8;
const KV_ROWS: i32 = 4;
/// Batch slot size [px] and rows.
const SLOT_W: i32 = 24;
const SLOT_H: i32 = 17;
const SLOT_ROWS: i32 = 2;

/// What was drawn, for the page's text alternative and the e2e test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetDrawn {
    /// Replica panels drawn.
    pub panels: usize,
    /// Requests shown travelling from the router.
    pub routed: usize,
    /// Over the panels drawn: queue marks (plus "+n"), busy slots (plus "+n") and KV
    /// blocks shown as used.
    pub queue: usize,
    pub busy_slots: usize,
    pub kv_blocks: u64,
}

type Area<'a, DB> = DrawingArea<DB, Shift>;

fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&INK)
}

/// Panels drawn for `n` replicas, and their columns.
fn layout(n: usize) -> (usize, usize) {
    let shown = n.min(MAX_SHOWN);
    (shown, if shown <= 4 { 1 } else { 2 })
}

/// Canvas height [px] for a fleet of `n` replicas.
pub fn height(n: usize) -> u32 {
    let (shown, cols) = layout(n);
    let rows = shown.div_ceil(cols).max(1) as i32;
    (TOP + rows * (PANEL_H + GAP) + BOTTOM) as u32
}

/// Top-left corner and width of panel `i` [px].
fn panel_at(i: usize, cols: usize) -> (i32, i32, i32) {
    let w = (WIDTH as i32 - ROUTER_W - 10) / cols as i32 - 8;
    let (col, row) = ((i % cols) as i32, (i / cols) as i32);
    (ROUTER_W + col * (w + 8), TOP + row * (PANEL_H + GAP), w)
}

/// Draws `f` (a snapshot of the fleet `tape`) onto `root`. `flash` is how long an event
/// stays highlighted [s].
///
/// # Errors
/// The backend's drawing error.
pub fn draw_fleet<DB: DrawingBackend>(
    root: &Area<'_, DB>,
    tape: &Tape,
    f: &FleetSnapshot,
    flash: f64,
) -> Result<FleetDrawn, DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let mut drawn = FleetDrawn::default();
    let n = f.replicas.len();
    let (shown, cols) = layout(n);
    let router = tape.fleet.as_ref().map_or("", |x| x.router.as_str());
    root.draw(&Text::new(
        format!(
            "{n} replicas behind the router ({router}) · fleet: {} waiting, {} running, {} completed, {} refused",
            f.fleet.queue.len(),
            f.fleet.running,
            f.fleet.completed,
            f.fleet.rejected
        ),
        (12, 10),
        font(15),
    ))?;

    let rows = shown.div_ceil(cols).max(1) as i32;
    let more_y = TOP + rows * (PANEL_H + GAP) + 4;
    // The router: a box at the middle of the panels.
    let mid = TOP + rows * (PANEL_H + GAP) / 2;
    let (rx0, ry0, rx1, ry1) = (24, mid - 26, 118, mid + 26);
    root.draw(&Rectangle::new(
        [(rx0, ry0), (rx1, ry1)],
        INK.mix(0.08).filled(),
    ))?;
    root.draw(&Rectangle::new(
        [(rx0, ry0), (rx1, ry1)],
        INK.stroke_width(2),
    ))?;
    root.draw(&Text::new("router", (rx0 + 22, ry0 + 8), font(15)))?;
    root.draw(&Text::new(
        format!("{} sent", f.fleet.arrived),
        (rx0 + 10, ry0 + 28),
        font(12),
    ))?;
    // Arrivals come in from the left.
    root.draw(&PathElement::new(
        vec![(4, mid), (rx0 - 4, mid)],
        INK.stroke_width(2),
    ))?;
    root.draw(&Polygon::new(
        vec![(rx0 - 10, mid - 5), (rx0 - 3, mid), (rx0 - 10, mid + 5)],
        INK.filled(),
    ))?;
    // The way from the router to replica i's queue: to the left of the panels, then (a
    // panel of the second column) along the gap above its row and down the gap between the
    // columns, so that no line crosses a panel.
    let way = |i: usize| -> Vec<(i32, i32)> {
        if i >= shown {
            return vec![
                (rx1, mid),
                (ROUTER_W - 12, more_y + 9),
                (ROUTER_W, more_y + 9),
            ];
        }
        let (x, y, _) = panel_at(i, cols);
        if x == ROUTER_W {
            vec![(rx1, mid), (ROUTER_W - 12, y + 40), (x, y + 40)]
        } else {
            let gy = y - GAP / 2;
            vec![
                (rx1, mid),
                (ROUTER_W - 12, gy),
                (x - 4, gy),
                (x - 4, y + 40),
                (x, y + 40),
            ]
        }
    };
    // Each request routed within the flash: its way to the chosen replica's queue and a
    // mark that travels along it in the first half of the flash.
    let mut receiving = vec![false; n];
    for r in &f.routed {
        let i = r.replica as usize;
        if let Some(x) = receiving.get_mut(i) {
            *x = true;
        }
        let way = way(i);
        let age = ((f.fleet.t_s - r.t_s) / flash.max(1e-9)).clamp(0.0, 1.0);
        root.draw(&PathElement::new(
            way.clone(),
            FRESH.mix(1.0 - 0.6 * age).stroke_width(2),
        ))?;
        let (mx, my) = along(&way, (2.0 * age).min(1.0));
        root.draw(&Circle::new((mx, my), 6, FRESH.filled()))?;
        root.draw(&Circle::new((mx, my), 6, INK.stroke_width(1)))?;
        drawn.routed += 1;
    }
    // The latest choices, as text under the router.
    for (k, r) in f.routed.iter().rev().take(4).enumerate() {
        root.draw(&Text::new(
            format!("#{} → replica {}", r.id, r.replica + 1),
            (rx0 - 14, ry1 + 12 + 17 * k as i32),
            font(13),
        ))?;
    }

    let replicas = tape.fleet.as_ref().map_or(&[][..], |x| &x.replicas[..]);
    for (i, (s, rt)) in f.replicas.iter().zip(replicas).enumerate().take(shown) {
        let (x, y, w) = panel_at(i, cols);
        draw_panel(
            root,
            (x, y, w),
            (i, rt, s),
            tape,
            receiving[i],
            flash,
            &mut drawn,
        )?;
    }
    if n > shown {
        let routed_more = f.replicas[shown..].iter().map(|s| s.arrived).sum::<u32>();
        root.draw(&Rectangle::new(
            [(ROUTER_W, more_y), (WIDTH as i32 - 18, more_y + 18)],
            QUIET.stroke_width(1),
        ))?;
        root.draw(&Text::new(
            format!(
                "replicas {}–{n} not drawn ({routed_more} requests sent to them); the counters and the histogram cover all {n}",
                shown + 1
            ),
            (ROUTER_W + 6, more_y + 2),
            font(13),
        ))?;
    }

    // Legend.
    let ly = height(n) as i32 - 22;
    let mut lx = 12;
    let mut keys = vec![
        ("decode", DECODE.mix(1.0), false),
        ("prefill", PREFILL.mix(1.0), true),
        ("idle in batch", QUIET.mix(1.0), false),
    ];
    if tape.prefix_cache {
        keys.push(("prefix cache", CACHE.mix(1.0), false));
    } else if !tape.paged {
        keys.push(("reserved, waiting", QUIET.mix(0.35), true));
    }
    keys.push(("just routed", FRESH.mix(1.0), false));
    for (label, color, striped) in keys {
        root.draw(&Rectangle::new(
            [(lx, ly - 7), (lx + 14, ly + 7)],
            color.filled(),
        ))?;
        if striped {
            root.draw(&PathElement::new(
                vec![(lx, ly + 7), (lx + 14, ly - 7)],
                WHITE.stroke_width(2),
            ))?;
        }
        root.draw(&Text::new(label, (lx + 20, ly - 7), font(13)))?;
        lx += 34 + 7 * label.len() as i32;
    }
    let (cx, cy) = (lx + 6, ly);
    root.draw(&Polygon::new(
        vec![(cx, cy - 6), (cx + 6, cy), (cx, cy + 6), (cx - 6, cy)],
        FIRST.filled(),
    ))?;
    root.draw(&Text::new("first token", (cx + 12, ly - 7), font(13)))?;
    let tx = cx + 100;
    root.draw(&PathElement::new(
        vec![(tx - 5, ly - 5), (tx + 5, ly + 5)],
        ALERT.stroke_width(3),
    ))?;
    root.draw(&PathElement::new(
        vec![(tx - 5, ly + 5), (tx + 5, ly - 5)],
        ALERT.stroke_width(3),
    ))?;
    root.draw(&Text::new("refused", (tx + 12, ly - 7), font(13)))?;
    Ok(drawn)
}

/// The point a fraction `k` (0 to 1) of the way along the polyline `way`.
fn along(way: &[(i32, i32)], k: f64) -> (i32, i32) {
    let len = |a: (i32, i32), b: (i32, i32)| f64::from(b.0 - a.0).hypot(f64::from(b.1 - a.1));
    let total: f64 = way.windows(2).map(|w| len(w[0], w[1])).sum();
    let mut left = k * total;
    for w in way.windows(2) {
        let l = len(w[0], w[1]);
        if left <= l && l > 0.0 {
            let f = left / l;
            return (
                w[0].0 + (f64::from(w[1].0 - w[0].0) * f).round() as i32,
                w[0].1 + (f64::from(w[1].1 - w[0].1) * f).round() as i32,
            );
        }
        left -= l;
    }
    way.last().copied().unwrap_or((0, 0))
}

/// One replica's panel: its counters, queue, batch slots and KV grid.
fn draw_panel<DB: DrawingBackend>(
    root: &Area<'_, DB>,
    (x, y, w): (i32, i32, i32),
    (i, rt, s): (usize, &Tape, &Snapshot),
    fleet: &Tape,
    receiving: bool,
    flash: f64,
    drawn: &mut FleetDrawn,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    drawn.panels += 1;
    let frame = [(x, y), (x + w, y + PANEL_H)];
    if receiving {
        root.draw(&Rectangle::new(frame, FRESH.mix(0.12).filled()))?;
        root.draw(&Rectangle::new(frame, FRESH.stroke_width(3)))?;
    } else {
        root.draw(&Rectangle::new(frame, QUIET.stroke_width(1)))?;
    }
    let (q, b, kv, done) = replica_counters(rt, s);
    root.draw(&Text::new(
        format!(
            "replica {} · queue {q} · batch {b} · KV {kv} · done {done}",
            i + 1
        ),
        (x + 6, y + 5),
        font(14),
    ))?;
    let recent = |kind: MarkKind, id: u32| {
        s.recent
            .iter()
            .any(|m| m.kind == kind && m.id == id && m.t_s > s.t_s - flash)
    };

    // Queue: front on the right, next to the batch; two rows.
    let qw = (w * 3 / 10).max(60);
    let step = 13;
    let qcols = ((qw - 8) / step).max(1) as usize;
    let (qx0, qy0) = (x + 6, y + 30);
    let cap = qcols * 2;
    let shown = s.queue.len().min(cap);
    for (k, id) in s.queue.iter().take(shown).enumerate() {
        let (col, row) = (k % qcols, k / qcols);
        let cx = qx0 + (qcols - 1 - col) as i32 * step + 6;
        let cy = qy0 + row as i32 * 17 + 8;
        let fill = if recent(MarkKind::Arrival, *id) {
            FRESH.filled()
        } else {
            WHITE.filled()
        };
        let edge = if fleet
            .records
            .get(*id as usize)
            .is_some_and(|r| r.preemptions > 0)
            && s.recent
                .iter()
                .any(|m| m.kind == MarkKind::Preempted && m.id == *id)
        {
            ALERT.stroke_width(2)
        } else {
            INK.stroke_width(1)
        };
        root.draw(&Circle::new((cx, cy), 5, fill))?;
        root.draw(&Circle::new((cx, cy), 5, edge))?;
        drawn.queue += 1;
    }
    if s.queue.len() > shown {
        drawn.queue += s.queue.len() - shown;
        root.draw(&Text::new(
            format!("+{}", s.queue.len() - shown),
            (qx0, qy0 + 36),
            font(12),
        ))?;
    }
    // Refused lately: crosses at the queue's door.
    let refused = s
        .recent
        .iter()
        .filter(|m| m.kind == MarkKind::Rejected && m.t_s > s.t_s - flash)
        .count();
    for k in 0..refused.min(4) as i32 {
        let (cx, cy) = (qx0 + qw - 4 - k * 12, qy0 + 44);
        let c = ALERT.stroke_width(3);
        root.draw(&PathElement::new(
            vec![(cx - 4, cy - 4), (cx + 4, cy + 4)],
            c,
        ))?;
        root.draw(&PathElement::new(
            vec![(cx - 4, cy + 4), (cx + 4, cy - 4)],
            c,
        ))?;
    }

    // Batch slots.
    let bx0 = x + qw + 16;
    root.draw(&Polygon::new(
        vec![
            (bx0 - 12, qy0 + 12),
            (bx0 - 5, qy0 + 17),
            (bx0 - 12, qy0 + 22),
        ],
        INK.filled(),
    ))?;
    let bcols = (((x + w - 8 - bx0) / (SLOT_W + 3)).max(1) as usize).min(16);
    let b = rt.max_batch as usize;
    let slots_shown = b.min(bcols * SLOT_ROWS as usize);
    for k in 0..slots_shown {
        let (col, row) = ((k % bcols) as i32, (k / bcols) as i32);
        let sx = bx0 + col * (SLOT_W + 3);
        let sy = qy0 + row * (SLOT_H + 3);
        let r = [(sx, sy), (sx + SLOT_W, sy + SLOT_H)];
        let Some(sl) = s.slots.get(k) else {
            root.draw(&Rectangle::new(r, PALE.stroke_width(1)))?;
            continue;
        };
        drawn.busy_slots += 1;
        match sl.1 {
            -1 => root.draw(&Rectangle::new(r, DECODE.filled()))?,
            0 => root.draw(&Rectangle::new(r, QUIET.stroke_width(2)))?,
            _ => {
                root.draw(&Rectangle::new(r, PREFILL.mix(0.35).filled()))?;
                root.draw(&PathElement::new(
                    vec![(sx, sy + SLOT_H), (sx + SLOT_H, sy)],
                    PREFILL.stroke_width(3),
                ))?;
                root.draw(&Rectangle::new(r, PREFILL.stroke_width(2)))?;
            }
        }
        if s.first_token_soon.contains(&sl.0) || recent(MarkKind::FirstToken, sl.0) {
            let (cx, cy) = (sx + SLOT_W - 7, sy + SLOT_H / 2);
            root.draw(&Polygon::new(
                vec![(cx, cy - 5), (cx + 5, cy), (cx, cy + 5), (cx - 5, cy)],
                FIRST.filled(),
            ))?;
        }
    }
    if s.slots.len() > slots_shown {
        drawn.busy_slots += s.slots.len() - slots_shown;
    }
    if b > slots_shown {
        root.draw(&Text::new(
            format!("+{} slots", b - slots_shown),
            (bx0, qy0 + SLOT_ROWS * (SLOT_H + 3) - 2),
            font(12),
        ))?;
    }

    // KV grid: each cell a share of the pool, filled in owner order as in the one-server
    // grid (running sequences by phase, then reservations, then the prefix cache).
    let ky0 = y + PANEL_H - KV_ROWS * CELL - 6;
    root.draw(&Text::new("KV", (x + 6, ky0 + 8), font(12)))?;
    let kx0 = x + 28;
    let kcols = ((x + w - 6 - kx0) / CELL).max(1) as u64;
    let total = rt.kv_blocks.max(1);
    let per_cell = total.div_ceil(kcols * KV_ROWS as u64).max(1);
    let cells = total.div_ceil(per_cell);
    let phase_of = |id: u32| s.slots.iter().find(|sl| sl.0 == id).map_or(0, |sl| sl.1);
    let mut ranges: Vec<(u64, RGBAColor)> = Vec::new();
    for (id, blocks, running) in &s.kv_owners {
        let color = if *running {
            match phase_of(*id) {
                -1 => DECODE.mix(1.0),
                0 => QUIET.mix(1.0),
                _ => PREFILL.mix(1.0),
            }
        } else {
            QUIET.mix(0.35)
        };
        ranges.push((u64::from(*blocks), color));
    }
    ranges.push((s.kv_cached_held, CACHE.mix(1.0)));
    ranges.push((s.kv_cached_idle, CACHE.mix(0.3)));
    drawn.kv_blocks += s.kv_used_blocks;
    // Cell c shows the owner of its first block, filled as far as its blocks are used.
    let mut bounds = Vec::with_capacity(ranges.len());
    let mut at = 0u64;
    for (blocks, color) in ranges {
        bounds.push((at, at + blocks, color));
        at += blocks;
    }
    let mut r = 0;
    for c in 0..cells {
        let (b0, b1) = (c * per_cell, ((c + 1) * per_cell).min(total));
        let cx = kx0 + (c % kcols) as i32 * CELL;
        let cy = ky0 + (c / kcols) as i32 * CELL;
        let rect = [(cx, cy), (cx + CELL - 1, cy + CELL - 1)];
        root.draw(&Rectangle::new(rect, PALE.filled()))?;
        while r < bounds.len() && bounds[r].1 <= b0 {
            r += 1;
        }
        let used: u64 = bounds[r..]
            .iter()
            .take_while(|o| o.0 < b1)
            .map(|o| o.1.min(b1) - o.0.max(b0))
            .sum();
        if used == 0 {
            continue;
        }
        let Some(&(_, _, color)) = bounds.get(r) else {
            continue;
        };
        let top =
            cy + CELL - 1 - ((used as f64 / (b1 - b0) as f64) * (CELL - 1) as f64).round() as i32;
        root.draw(&Rectangle::new(
            [(cx, top), (cx + CELL - 1, cy + CELL - 1)],
            color.filled(),
        ))?;
    }
    Ok(())
}
