//! The calculator's chart: the tab on show (load curves, TTFT distribution, over time,
//! timeline) drawn onto its canvas.

use super::measured_io::{mark_drawn, slo_of};
use super::{now_ms, set_root_data, Ctx, Tab};
use crate::chart::{draw_cdf, draw_load, draw_timeline, draw_timeseries, LoadChart};
use crate::curves::diagnose;
use crate::job::model_curves;
use leptos::prelude::*;
use plotters::prelude::IntoDrawingArea;
use plotters_canvas::CanvasBackend;

pub(super) fn draw(c: Ctx, canvas: &web_sys::HtmlCanvasElement) {
    let Some(backend) = CanvasBackend::with_canvas_object(canvas.clone()) else {
        return;
    };
    let root = backend.into_drawing_area();
    let p = c.params.get();
    let res = match c.tab.get() {
        Tab::Load => {
            let points = c.points.get();
            let models = c.models.with(|m| {
                m.as_ref()
                    .map(|m| model_curves(m, p.metric))
                    .unwrap_or_default()
            });
            let measured = c.series.get();
            let slo = slo_of(&p);
            let note = c.swept.get_value().and_then(|s| diagnose(&s, &points));
            let chart = LoadChart {
                note: note.as_deref(),
                metric: p.metric,
                points: &points,
                models: &models,
                measured: &measured,
                chosen_rate: Some(p.rate),
                slo,
                caption: None,
            };
            let r = draw_load(&root, &chart);
            if let Ok(g) = &r {
                mark_drawn(canvas, g, &measured, p.metric);
            }
            if !points.is_empty() {
                set_root_data("chart-points", &points.len().to_string());
                let first = document()
                    .document_element()
                    .and_then(|e| e.get_attribute("data-first-chart-ms"))
                    .is_some();
                if !first {
                    set_root_data("first-chart-ms", &format!("{:.0}", now_ms()));
                }
            }
            r
        }
        Tab::Cdf => {
            let (rate, ttft) = c.detail.with(|d| {
                d.as_ref()
                    .map(|d| (d.rate, d.ttft.clone()))
                    .unwrap_or((p.rate, Vec::new()))
            });
            draw_cdf(&root, &[(detail_caption(rate), ttft)], Some(p.slo_ttft_s))
        }
        Tab::Time => {
            let d = c.detail.get().unwrap_or_default();
            let rate = if d.series.is_empty() { p.rate } else { d.rate };
            draw_timeseries(
                &root,
                &d.series,
                d.kv_capacity,
                &detail_caption(rate),
                c.window.get(),
            )
        }
        Tab::Timeline => {
            let d = c.detail.get().unwrap_or_default();
            let rate = if d.spans.is_empty() { p.rate } else { d.rate };
            let caption = format!(
                "{} · its first {} requests",
                detail_caption(rate),
                crate::job::TIMELINE_REQUESTS
            );
            draw_timeline(&root, &d.spans, d.first_token_after_decode, &caption)
        }
    };
    match res {
        Ok(g) => c.geo.set(g),
        Err(e) => c
            .run
            .update(|r| r.error = Some(format!("drawing failed: {e}"))),
    }
}

/// Which run the detail views (CDF, over time, timeline) show.
fn detail_caption(rate: f64) -> String {
    format!("simulation at λ = {rate} req/s (seed 0)")
}
