//! One frame of the Watch view: the replay at the playback time drawn on the canvas (one
//! server's picture or a fleet's), and a fleet's table of per-replica counters.

use crate::watch::fleet::{describe_fleet, fleet_snapshot, replica_counters, MAX_SHOWN};
use crate::watch::fleet_scene::{draw_fleet, height};
use crate::watch::replay::{describe, snapshot, Snapshot};
use crate::watch::scene::{draw_scene, HEIGHT};
use crate::watch::Tape;
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

/// One replica's counters: queue, batch, KV use, completed.
pub(super) type ReplicaRow = (usize, String, String, u32);

/// What the frame drew, as the canvas's `data-*` attributes for the e2e test.
pub(super) struct FrameDrawn {
    pub queue: usize,
    pub busy_slots: usize,
    pub kv_blocks: u64,
    pub kv_cached_idle: u64,
    pub hit_tags: usize,
    /// A fleet's: replica panels and requests travelling from the router.
    pub panels: Option<(usize, usize)>,
}

/// Replays and draws one frame of `tape` at `t` onto `cv`: the fleet-wide snapshot (for
/// the counters and the histogram), what was drawn, the text alternative and, for a fleet,
/// each replica's counters.
pub(super) fn draw_frame(
    cv: &web_sys::HtmlCanvasElement,
    tape: &Tape,
    t: f64,
    flash: f64,
) -> Result<(Snapshot, FrameDrawn, String, Vec<ReplicaRow>), String> {
    let backend = |h: u32| {
        if cv.height() != h {
            cv.set_height(h);
        }
        CanvasBackend::with_canvas_object(cv.clone()).ok_or_else(|| "no canvas".to_string())
    };
    if let Some(f) = fleet_snapshot(tape, t, flash) {
        let n = f.replicas.len();
        let b = backend(height(n))?;
        let d = draw_fleet(&b.into_drawing_area(), tape, &f, flash).map_err(|e| e.to_string())?;
        let text = describe_fleet(tape, &f);
        let rows = f
            .replicas
            .iter()
            .map(|s| replica_counters(tape, s))
            .collect();
        let drawn = FrameDrawn {
            queue: d.queue,
            busy_slots: d.busy_slots,
            kv_blocks: d.kv_blocks,
            kv_cached_idle: f.fleet.kv_cached_idle,
            hit_tags: 0,
            panels: Some((d.panels, d.routed)),
        };
        return Ok((f.fleet, drawn, text, rows));
    }
    let s = snapshot(tape, t, flash);
    let b = backend(HEIGHT)?;
    let d = draw_scene(&b.into_drawing_area(), tape, &s, flash).map_err(|e| e.to_string())?;
    let text = describe(tape, &s);
    let drawn = FrameDrawn {
        queue: d.queue,
        busy_slots: d.busy_slots,
        kv_blocks: d.kv_blocks,
        kv_cached_idle: d.kv_cached_idle,
        hit_tags: d.hit_tags,
        panels: None,
    };
    Ok((s, drawn, text, Vec::new()))
}

/// A fleet's per-replica counters, one row per replica (nothing for one server).
pub(super) fn fleet_table(rows: Vec<ReplicaRow>) -> impl IntoView {
    let n = rows.len();
    (n > 1).then(|| {
        let note = (n > MAX_SHOWN).then(|| {
            format!("The picture shows replicas 1 to {MAX_SHOWN} of {n}; this table and the counters cover all {n}.")
        });
        view! {
            <div class="watch-replicas">
                <table id="watch-replicas">
                    <thead><tr><th>"replica"</th><th>"queue"</th><th>"batch"</th><th>"KV use"</th><th>"completed"</th></tr></thead>
                    <tbody>
                        {rows.into_iter().enumerate().map(|(i, (q, b, kv, done))| view! {
                            <tr class="watch-replica"><td>{i + 1}</td><td>{q}</td><td>{b}</td><td>{kv}</td><td>{done}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
                {note.map(|t| view! { <p class="hint" id="watch-replicas-cut">{t}</p> })}
            </div>
        }
    })
}
