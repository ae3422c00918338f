//! The load curve: one metric against the arrival rate — the simulation's mean with its
//! 95 % CI band, the analytical models' lines, the measured points with error bars, the
//! SLO line and the chosen rate.

use super::frame::{err, Chart, DrawResult, Geometry};
use super::legend::{self, Entry, Glyph, Shape};
use super::palette::{MEASURED_COLORS, MODEL_COLORS, SIM, SLO_COLOR};
use super::scale::nice_max;
use crate::curves::{CurvePoint, ModelCurve};
use crate::format;
use crate::measured::MeasuredSeries;
use crate::metric::Metric;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Everything the load-curve chart shows.
#[derive(Clone, Debug, Default)]
pub struct LoadChart<'a> {
    pub metric: Metric,
    pub points: &'a [CurvePoint],
    pub models: &'a [ModelCurve],
    /// Measured series, one line and marker shape each.
    pub measured: &'a [MeasuredSeries],
    /// The chosen rate, marked with a vertical line [req/s].
    pub chosen_rate: Option<f64>,
    /// A horizontal SLO line in the metric's unit.
    pub slo: Option<f64>,
    /// Written across the plot area: why it is empty, say.
    pub note: Option<&'a str>,
    /// Written under the chart (the report card's verdict, in exports).
    pub caption: Option<&'a str>,
}

/// Height of the caption band under an exported chart [px].
const CAPTION_PX: i32 = 44;

/// Metric vs arrival rate: simulation mean with its 95 % CI band, model lines, measured
/// series (a line through each run's points, ±1 sd bars), with the legend in a column
/// beside the plot, never over the data.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_load<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LoadChart<'_>,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let (main, below) = match c.caption {
        Some(_) => {
            let (m, b) = area.split_vertically(area.dim_in_pixel().1 as i32 - CAPTION_PX);
            (m, Some(b))
        }
        None => (area.clone(), None),
    };
    let (x, y) = ranges(c);
    let entries = entries(c, y);
    let (plot, side) = legend::column(&main, &entries)?;
    let metric = c.metric;
    let y_fmt = move |v: &f64| format::tick(metric, *v);
    let x_fmt = |v: &f64| format::sig3(*v);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("arrival rate λ [req/s]")
        .y_desc(c.metric.name())
        .y_label_formatter(&y_fmt)
        .x_label_formatter(&x_fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    draw_simulation(&mut chart, c, y)?;
    draw_models(&mut chart, c.models, y)?;
    draw_measured(&mut chart, c)?;
    draw_slo(&mut chart, c, x, y)?;
    if let Some(r) = c.chosen_rate {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(r, y.0), (r, y.1)],
                BLACK.mix(0.35).stroke_width(1),
            )))
            .map_err(err)?;
    }
    if let Some(note) = c.note {
        let style = ("sans-serif", 16)
            .into_font()
            .color(&RGBColor(179, 38, 30))
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart
            .draw_series(std::iter::once(Text::new(
                note.to_string(),
                ((x.0 + x.1) / 2.0, (y.0 + y.1) / 2.0),
                style,
            )))
            .map_err(err)?;
    }
    let mut geo = Geometry::of(&chart, x, y);
    if let Some(side) = side {
        geo.legend = Some(legend::draw_column(&side, &entries, geo.y_px.0)?);
    }
    if let (Some(text), Some(b)) = (c.caption, below) {
        draw_caption(&b, text)?;
    }
    area.present().map_err(err)?;
    Ok(geo)
}

/// The chart as an SVG document of `size` px, for print-quality exports.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn load_svg(c: &LoadChart<'_>, size: (u32, u32)) -> Result<String, String> {
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        draw_load(&root, c)?;
    }
    Ok(s)
}

/// The verdict under an exported chart, wrapped to two lines at most.
fn draw_caption<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
) -> Result<(), String> {
    let font = ("sans-serif", 14).into_font().color(&RGBColor(29, 36, 48));
    let max = area.dim_in_pixel().0.saturating_sub(24);
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split(' ') {
        let cur = lines.last_mut().expect("non-empty");
        let cand = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if !cur.is_empty() && area.estimate_text_size(&cand, &font).map_err(err)?.0 > max {
            lines.push(word.to_string());
        } else {
            *cur = cand;
        }
    }
    for (i, l) in lines.iter().take(2).enumerate() {
        area.draw_text(l, &font, (12, 4 + 18 * i as i32))
            .map_err(err)?;
    }
    Ok(())
}

/// The legend: the simulation, each model, each measured series, the SLO — in groups.
fn entries(c: &LoadChart<'_>, y: (f64, f64)) -> Vec<Entry> {
    let m = c.metric;
    let mut v = Vec::new();
    if c.points.iter().any(|p| p.get(m).mean.is_some()) {
        v.push(Entry {
            group: "simulation",
            label: "mean, 95 % CI band".into(),
            glyph: Glyph::Band(SIM),
        });
    }
    for mc in c.models {
        if mc.points.iter().any(|(_, v)| v.is_some_and(f64::is_finite)) {
            v.push(Entry {
                group: "models",
                label: mc.name.clone(),
                glyph: Glyph::Line {
                    col: MODEL_COLORS[mc.slot % MODEL_COLORS.len()],
                    dashed: false,
                },
            });
        }
    }
    for (i, s) in c.measured.iter().enumerate() {
        if s.points.iter().any(|p| p.point.get(m).is_some()) {
            v.push(Entry {
                group: "measured",
                label: s.name.trim_start_matches("measured: ").to_string(),
                glyph: Glyph::Marker {
                    shape: Shape::nth(i),
                    col: MEASURED_COLORS[i % MEASURED_COLORS.len()],
                },
            });
        }
    }
    if let Some(slo) = c.slo.filter(|s| *s < y.1) {
        v.push(Entry {
            group: "target",
            label: format!("SLO: {} ≤ {}", m.name(), format::value(m, slo)),
            glyph: Glyph::Line {
                col: SLO_COLOR,
                dashed: true,
            },
        });
    }
    v
}

/// The data ranges (x, y) of the chart.
///
/// The data (simulated and measured) sets the y scale; a model may raise it to at most
/// twice the data's top, so one model far off (the M/M/C baseline's TTFT is ~12 s where
/// the simulation's is ~2 s) does not squash everything else. Lines above are drawn
/// along the top edge.
fn ranges(c: &LoadChart<'_>) -> ((f64, f64), (f64, f64)) {
    let m = c.metric;
    let mut xmax: f64 = c.points.iter().map(|p| p.rate).fold(0.0, f64::max);
    let mut ymax: f64 = 0.0;
    for p in c.points {
        let a = p.get(m);
        if let Some(v) = a.mean {
            let top = v + a.ci95.unwrap_or(0.0);
            ymax = ymax.max(m.upper_bound().map_or(top, |b| top.min(b)));
        }
    }
    for s in c.measured {
        for p in s.points.iter().map(|p| &p.point) {
            xmax = xmax.max(p.rate);
            if let Some((v, sd)) = p.get(m) {
                ymax = ymax.max(v + sd.unwrap_or(0.0));
            }
        }
    }
    let data_top = ymax;
    let mut model_top: f64 = 0.0;
    for mc in c.models {
        for (r, v) in &mc.points {
            xmax = xmax.max(*r);
            if let Some(v) = v {
                model_top = model_top.max(*v);
            }
        }
    }
    ymax = if data_top > 0.0 {
        ymax.max(model_top.min(2.0 * data_top))
    } else {
        model_top
    };
    if let Some(r) = c.chosen_rate {
        xmax = xmax.max(r);
    }
    if m.is_fraction() {
        ymax = ymax.max(0.05);
    }
    ((0.0, nice_max(xmax)), (0.0, nice_max(ymax)))
}

/// The simulation: CI band, mean line, points.
fn draw_simulation<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
    y: (f64, f64),
) -> Result<(), String> {
    let m = c.metric;
    let sim: Vec<(f64, f64, f64)> = c
        .points
        .iter()
        .filter_map(|p| {
            p.get(m)
                .mean
                .map(|v| (p.rate, v, p.get(m).ci95.unwrap_or(0.0)))
        })
        .collect();
    if sim.is_empty() {
        return Ok(());
    }
    // A probability's interval stops at 1, as it does at 0.
    let top = m.upper_bound().unwrap_or(f64::INFINITY).min(y.1);
    let mut band: Vec<(f64, f64)> = sim.iter().map(|&(r, v, h)| (r, (v + h).min(top))).collect();
    band.extend(sim.iter().rev().map(|&(r, v, h)| (r, (v - h).max(0.0))));
    chart
        .draw_series(std::iter::once(Polygon::new(band, SIM.mix(0.18))))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            sim.iter().map(|&(r, v, _)| (r, v)),
            SIM.stroke_width(2),
        ))
        .map_err(err)?;
    chart
        .draw_series(
            sim.iter()
                .map(|&(r, v, _)| Circle::new((r, v), 3, SIM.filled())),
        )
        .map_err(err)?;
    Ok(())
}

/// The models' lines, broken where a model has no value (unstable regime).
fn draw_models<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    models: &[ModelCurve],
    y: (f64, f64),
) -> Result<(), String> {
    for mc in models {
        let col = MODEL_COLORS[mc.slot % MODEL_COLORS.len()];
        let mut segs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (r, v) in &mc.points {
            match v {
                Some(v) if v.is_finite() => {
                    segs.last_mut().expect("non-empty").push((*r, v.min(y.1)))
                }
                _ => segs.push(Vec::new()),
            }
        }
        for seg in segs.into_iter().filter(|s| !s.is_empty()) {
            chart
                .draw_series(LineSeries::new(seg, col.stroke_width(2)))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// The measured series: a thin line through each run's points, ±1 sd bars, and the
/// series' own marker shape and colour.
fn draw_measured<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
) -> Result<(), String> {
    for (i, set) in c.measured.iter().enumerate() {
        let col = MEASURED_COLORS[i % MEASURED_COLORS.len()];
        let shape = Shape::nth(i);
        let pts: Vec<(f64, f64, Option<f64>)> = set
            .points
            .iter()
            .filter_map(|p| p.point.get(c.metric).map(|(v, sd)| (p.point.rate, v, sd)))
            .collect();
        if pts.len() > 1 {
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|&(r, v, _)| (r, v)),
                    col.mix(0.8).stroke_width(1),
                ))
                .map_err(err)?;
        }
        chart
            .draw_series(pts.iter().filter_map(|&(r, v, sd)| {
                sd.map(|sd| {
                    PathElement::new(
                        vec![(r, (v - sd).max(0.0)), (r, v + sd)],
                        col.stroke_width(2),
                    )
                })
            }))
            .map_err(err)?;
        match shape.outline(4) {
            Some(o) => {
                chart
                    .draw_series(pts.iter().map(|&(r, v, _)| {
                        EmptyElement::at((r, v)) + Polygon::new(o.clone(), col.filled())
                    }))
                    .map_err(err)?;
            }
            None if shape == Shape::Cross => {
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&(r, v, _)| Cross::new((r, v), 6, col.stroke_width(3))),
                    )
                    .map_err(err)?;
            }
            None => {
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&(r, v, _)| Circle::new((r, v), 5, col.stroke_width(2))),
                    )
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}

/// The SLO line with its value written at the right end, when it is inside the chart.
fn draw_slo<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
    x: (f64, f64),
    y: (f64, f64),
) -> Result<(), String> {
    let Some(slo) = c.slo.filter(|s| *s < y.1) else {
        return Ok(());
    };
    chart
        .draw_series(DashedLineSeries::new(
            [(x.0, slo), (x.1, slo)],
            8,
            5,
            SLO_COLOR.stroke_width(2),
        ))
        .map_err(err)?;
    let style = ("sans-serif", 13)
        .into_font()
        .color(&SLO_COLOR)
        .pos(Pos::new(HPos::Right, VPos::Bottom));
    chart
        .draw_series(std::iter::once(Text::new(
            format!("SLO {} ", format::value(c.metric, slo)),
            (x.1, slo),
            style,
        )))
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{svg, texts};
    use super::*;
    use crate::measured::{group, MeasuredPoint, MeasuredSet, Setup, Source};
    use engine::metrics::Aggregate;

    fn curve() -> Vec<CurvePoint> {
        (1..=4)
            .map(|i| {
                let mut aggs = vec![Aggregate::default(); Metric::N];
                aggs[Metric::P99Ttft.index()] = Aggregate {
                    n: 5,
                    mean: Some(0.1 * i as f64),
                    std: Some(0.01),
                    ci95: Some(0.02),
                };
                CurvePoint {
                    rate: i as f64,
                    aggs,
                    slo_attainment: Some(1.0),
                }
            })
            .collect()
    }

    #[test]
    fn load_chart_draws_band_line_points_models_and_measured() {
        let pts = curve();
        let models = vec![ModelCurve {
            name: "M/M/c".into(),
            slot: 0,
            points: vec![(1.0, Some(0.1)), (2.0, None), (3.0, Some(0.3))],
        }];
        let mut mp = MeasuredPoint {
            rate: 2.5,
            values: vec![None; Metric::N],
        };
        mp.values[Metric::P99Ttft.index()] = Some((0.27, Some(0.02)));
        let measured = group(&[MeasuredSet {
            name: "run.csv".into(),
            source: Source::SummaryCsv,
            points: vec![mp],
            notes: vec![],
            setup: Setup::default(),
        }]);
        let chart = LoadChart {
            metric: Metric::P99Ttft,
            points: &pts,
            models: &models,
            measured: &measured,
            chosen_rate: Some(2.0),
            slo: Some(0.35),
            note: None,
            caption: None,
        };
        let mut geo = Geometry::default();
        let s = svg(|root| geo = draw_load(root, &chart).unwrap());
        assert!(s.contains("<polygon"), "CI band");
        assert_eq!(
            s.matches("<circle").count(),
            4,
            "one marker per simulated rate"
        );
        let t = texts(&s);
        for want in [
            "simulation",
            "mean, 95 % CI band",
            "models",
            "M/M/c",
            "measured",
            "run.csv",
            "target",
        ] {
            assert!(t.iter().any(|x| x == want), "{want} missing from {t:?}");
        }
        assert!(
            s.matches("<polyline").count() >= 4,
            "sim line, two model segments, legend, SLO"
        );
        // The legend sits beside the plot, not over it.
        let lb = geo.legend.expect("a legend");
        assert!(
            lb[0] >= geo.x_px.1,
            "legend {lb:?} overlaps the plot {geo:?}"
        );
        assert!(geo.x_px.1 > geo.x_px.0 && geo.x.1 >= 4.0);
        let mid = (geo.x_px.0 + geo.x_px.1) as f64 / 2.0;
        assert!((geo.x_at(mid).unwrap() - geo.x.1 / 2.0).abs() < 0.05);
    }

    #[test]
    fn the_slo_line_is_dashed_dark_and_labelled() {
        let pts = curve();
        let chart = LoadChart {
            metric: Metric::P99Ttft,
            points: &pts,
            slo: Some(0.35),
            ..LoadChart::default()
        };
        let s = svg(|root| {
            draw_load(root, &chart).unwrap();
        });
        // Dashes are separate short segments in the SLO colour, unlike the gridlines.
        let dark = format!(
            "stroke=\"#{:02X}{:02X}{:02X}\"",
            SLO_COLOR.0, SLO_COLOR.1, SLO_COLOR.2
        );
        assert!(
            s.matches(&dark).count() >= 10,
            "dashes: {}",
            s.matches(&dark).count()
        );
        let t = texts(&s);
        assert!(t.iter().any(|x| x.contains("SLO 350 ms")), "{t:?}");
        assert!(
            t.iter().any(|x| x.contains("SLO: p99 TTFT ≤ 350 ms")),
            "{t:?}"
        );
        assert!(t.iter().any(|x| x == "400 ms"), "ticks in ms: {t:?}");
    }

    #[test]
    fn an_empty_chart_can_say_why() {
        let s = svg(|root| {
            draw_load(
                root,
                &LoadChart {
                    metric: Metric::P99Ttft,
                    note: Some("no request fits in K = 10 tokens"),
                    ..LoadChart::default()
                },
            )
            .unwrap();
        });
        assert!(texts(&s)
            .iter()
            .any(|x| x == "no request fits in K = 10 tokens"));
        // Nothing to name: no (empty) legend box — only the background and plot rects.
        assert!(
            s.matches("<rect").count() <= 2,
            "{}",
            s.matches("<rect").count()
        );
    }

    #[test]
    fn empty_load_chart_still_draws_axes() {
        let s = svg(|root| {
            draw_load(
                root,
                &LoadChart {
                    metric: Metric::Blocking,
                    ..LoadChart::default()
                },
            )
            .unwrap();
        });
        assert!(s.contains("arrival rate"));
        assert!(!s.contains("<circle"));
    }

    /// A sweep of `n` files, one rate each, as `vllm bench serve` would record them.
    fn sweep(n: usize, prompts: u64) -> Vec<MeasuredSet> {
        (0..n)
            .map(|i| {
                let rate = 0.5 * (i + 1) as f64;
                let mut p = MeasuredPoint {
                    rate,
                    values: vec![None; Metric::N],
                };
                p.values[Metric::P99Ttft.index()] = Some((0.05 + 0.08 * rate, None));
                MeasuredSet {
                    name: format!("vllm_rate_{rate}.json"),
                    source: Source::VllmJson,
                    points: vec![p],
                    notes: vec![],
                    setup: Setup {
                        server: Some("vLLM".into()),
                        model: Some("Qwen/Qwen2.5-1.5B".into()),
                        prompts: Some(prompts),
                        rate: Some(rate),
                        ..Setup::default()
                    },
                }
            })
            .collect()
    }

    #[test]
    fn a_sweep_of_files_is_one_line_with_one_legend_entry_and_no_point_under_the_legend() {
        let mut files = sweep(8, 300);
        files.extend(sweep(4, 100));
        let series = group(&files);
        assert_eq!(series.len(), 2);
        let pts = curve();
        let chart = LoadChart {
            metric: Metric::P99Ttft,
            points: &pts,
            measured: &series,
            ..LoadChart::default()
        };
        let mut geo = Geometry::default();
        let s = svg(|root| geo = draw_load(root, &chart).unwrap());
        let t = texts(&s);
        let entries: Vec<&String> = t.iter().filter(|x| x.contains("prompts")).collect();
        assert_eq!(entries.len(), 2, "one entry per series: {t:?}");
        assert!(
            t.iter().all(|x| !x.contains(".json")),
            "no file names: {t:?}"
        );
        // The second series has its own marker: squares, drawn as polygons.
        assert!(s.matches("<polygon").count() > 4, "band + 4 squares");
        let lb = geo.legend.expect("a legend");
        for f in &files {
            let p = &f.points[0];
            let (px, py) = geo.px(p.rate, p.get(Metric::P99Ttft).unwrap().0);
            let inside = (lb[0] as f64..=lb[2] as f64).contains(&px)
                && (lb[1] as f64..=lb[3] as f64).contains(&py);
            assert!(!inside, "({px}, {py}) under the legend {lb:?}");
        }
    }

    #[test]
    fn an_export_caption_is_written_under_the_chart() {
        let pts = curve();
        let chart = LoadChart {
            metric: Metric::P99Ttft,
            points: &pts,
            caption: Some("The simulation is within 3 % of the run on mean TPOT."),
            ..LoadChart::default()
        };
        let mut geo = Geometry::default();
        let s = svg(|root| geo = draw_load(root, &chart).unwrap());
        assert!(texts(&s)
            .iter()
            .any(|x| x.starts_with("The simulation is within")));
        assert!(
            geo.y_px.1 < 480 - 44,
            "the plot ends above the caption: {geo:?}"
        );
    }
}
