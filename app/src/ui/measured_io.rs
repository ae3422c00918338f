//! The page's measured results (browser only): reading what was dropped or picked into
//! series, marking where the load chart drew them, and the chart's print-quality export.

use super::Ctx;
use crate::chart::{load_svg, Geometry, LoadChart};
use crate::job::model_curves;
use crate::measured::{self, Context, MeasuredSeries, MeasuredSet};
use crate::metric::Metric;
use crate::params::Params;
use crate::report_ui::{first_verdict, ReportSignals};
use engine::metrics::MetricsConfig;
use leptos::prelude::*;

/// Writes where the legend and the measured points are drawn onto the canvas
/// (`data-legend-box`, `data-measured-px`, in canvas pixels), so tests can check that no
/// point is under the legend.
pub(super) fn mark_drawn(
    canvas: &web_sys::HtmlCanvasElement,
    g: &Geometry,
    series: &[MeasuredSeries],
    m: Metric,
) {
    let legend = g
        .legend
        .map(|b| format!("[{},{},{},{}]", b[0], b[1], b[2], b[3]))
        .unwrap_or_else(|| "null".into());
    let pts: Vec<String> = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter_map(|p| {
            let (v, _) = p.point.get(m)?;
            let (x, y) = g.px(p.point.rate, v);
            Some(format!("[{x:.1},{y:.1}]"))
        })
        .collect();
    let _ = canvas.set_attribute("data-legend-box", &legend);
    let _ = canvas.set_attribute("data-measured-px", &format!("[{}]", pts.join(",")));
    let _ = canvas.set_attribute("data-series", &series.len().to_string());
}

/// The load chart as SVG with the first report card's verdict under it (exports).
pub(super) fn chart_svg(c: Ctx) -> Result<String, String> {
    let p = c.params.get_untracked();
    let points = c.points.get_untracked();
    let models = c.models.with_untracked(|m| {
        m.as_ref()
            .map(|m| model_curves(m, p.metric))
            .unwrap_or_default()
    });
    let measured = c.series.get_untracked();
    let verdict = first_verdict(report_signals(c));
    let chart = LoadChart {
        note: None,
        metric: p.metric,
        points: &points,
        models: &models,
        measured: &measured,
        chosen_rate: Some(p.rate),
        slo: slo_of(&p),
        caption: verdict.as_deref(),
    };
    load_svg(&chart, (EXPORT_W, EXPORT_H))
}

/// The size of an exported chart [px] (the PNG has twice as many in each direction).
pub(super) const EXPORT_W: u32 = 1000;
pub(super) const EXPORT_H: u32 = 600;

/// The SLO line of the load chart's metric, if it has one.
pub(super) fn slo_of(p: &Params) -> Option<f64> {
    match p.metric {
        Metric::MeanTtft | Metric::P50Ttft | Metric::P95Ttft | Metric::P99Ttft => {
            Some(p.slo_ttft_s)
        }
        Metric::MeanTpot | Metric::P99Tpot => Some(p.slo_tpot_s),
        _ => None,
    }
}

pub(super) fn report_signals(c: Ctx) -> ReportSignals {
    ReportSignals {
        series: c.series,
        points: c.points,
        models: c.models,
        params: c.params,
        model: c.report_model,
        as_run: c.as_run,
        simulate: Callback::new(move |series| super::as_run_view::start(c, series)),
    }
}

/// The context measured files are read in: the view's B, K and SLOs.
pub(super) fn read_context(c: Ctx) -> Context {
    let p = c.params.get_untracked();
    Context {
        max_batch: p.max_batch,
        kv_tokens: p.kv_tokens,
        metrics: MetricsConfig {
            slo_ttft_s: p.slo_ttft_s,
            slo_tpot_s: p.slo_tpot_s,
            ..MetricsConfig::default()
        },
    }
}

/// Adds what was dropped or picked: loose files and folders (or zips) of runs. One file
/// gets its own message; several get one line saying which series they formed.
pub(super) fn take_dropped(c: Ctx, d: crate::drop::Dropped) {
    let ctx = read_context(c);
    let mut added: Vec<MeasuredSet> = Vec::new();
    let mut problems = d.problems;
    let mut single: Option<String> = None;
    let lone = d.files.len() == 1 && d.folders.is_empty();
    for (name, text) in d.files {
        match measured::parse(&name, &text, &ctx) {
            Ok(set) => {
                if lone {
                    let n = set.points.len();
                    let mut msg = format!(
                        "{name}: {} with {n} point{} overlaid",
                        set.source.label(),
                        if n == 1 { "" } else { "s" }
                    );
                    for note in &set.notes {
                        msg.push_str(&format!(" — {note}"));
                    }
                    single = Some(msg);
                }
                added.push(set);
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    let mut skipped = 0;
    for (folder, files) in d.folders {
        let r = measured::folder::read(&files, &ctx);
        if r.sets.is_empty() && r.problems.is_empty() {
            problems.push(format!(
                "{folder}: no run found (a bench-native run folder has requests.csv or summary.csv beside metadata.json; vLLM results are JSON)"
            ));
        }
        problems.extend(r.problems);
        skipped += r.skipped;
        added.extend(r.sets);
    }
    let n_added = added.len();
    let names: Vec<String> = measured::group(&added)
        .into_iter()
        .map(|s| s.name)
        .collect();
    if !added.is_empty() {
        c.measured.update(|v| {
            v.retain(|s| !added.iter().any(|a| a.name == s.name));
            v.extend(added);
        });
    }
    let msg = match (single, problems.is_empty()) {
        (Some(m), true) => (true, m),
        _ if n_added == 0 => (false, problems.join("; ")),
        _ => {
            let mut m = format!(
                "{n_added} file{} read into {} series: {}",
                if n_added == 1 { "" } else { "s" },
                names.len(),
                names.join("; ")
            );
            if skipped > 0 {
                m.push_str(&format!(" ({skipped} other files in the folder skipped)"));
            }
            if !problems.is_empty() {
                m.push_str(&format!(" — not read: {}", problems.join("; ")));
            }
            (problems.is_empty(), m)
        }
    };
    c.file_msg.set(Some(msg));
}
