//! The load curve: one metric against the arrival rate — the simulation's mean with its
//! 95 % CI band, the analytical models' lines, the measured points with error bars, the
//! SLO line and the chosen rate.

use super::frame::{draw_legend, err, Chart, DrawResult, Geometry};
use super::palette::{MEASURED_COLORS, MODEL_COLORS, SIM, SLO_COLOR};
use super::scale::nice_max;
use crate::curves::{CurvePoint, ModelCurve};
use crate::measured::MeasuredSet;
use crate::metric::Metric;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Everything the load-curve chart shows.
#[derive(Clone, Debug, Default)]
pub struct LoadChart<'a> {
    pub metric: Metric,
    pub points: &'a [CurvePoint],
    pub models: &'a [ModelCurve],
    pub measured: &'a [MeasuredSet],
    /// The chosen rate, marked with a vertical line [req/s].
    pub chosen_rate: Option<f64>,
    /// A horizontal SLO line in the metric's unit.
    pub slo: Option<f64>,
    /// Written across the plot area: why it is empty, say.
    pub note: Option<&'a str>,
}

/// Metric vs arrival rate: simulation mean with its 95 % CI band, model lines, measured
/// points with error bars.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_load<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LoadChart<'_>,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let (x, y) = ranges(c);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("arrival rate λ [req/s]")
        .y_desc(c.metric.label())
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    // Whether any series has a legend entry (else no empty legend box is drawn).
    let mut labelled = draw_simulation(&mut chart, c, y)?;
    labelled |= draw_models(&mut chart, c.models, y)?;
    labelled |= draw_measured(&mut chart, c)?;
    labelled |= draw_slo(&mut chart, c, x, y)?;
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
    if labelled {
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    area.present().map_err(err)?;
    Ok(Geometry::of(&chart, x, y))
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
            ymax = ymax.max(v + a.ci95.unwrap_or(0.0));
        }
    }
    for s in c.measured {
        for p in &s.points {
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

/// The simulation: CI band, mean line, points. True if it drew a legend entry.
fn draw_simulation<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
    y: (f64, f64),
) -> Result<bool, String> {
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
        return Ok(false);
    }
    let mut band: Vec<(f64, f64)> = sim.iter().map(|&(r, v, h)| (r, (v + h).min(y.1))).collect();
    band.extend(sim.iter().rev().map(|&(r, v, h)| (r, (v - h).max(0.0))));
    chart
        .draw_series(std::iter::once(Polygon::new(band, SIM.mix(0.18))))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            sim.iter().map(|&(r, v, _)| (r, v)),
            SIM.stroke_width(2),
        ))
        .map_err(err)?
        .label("simulation (mean, 95 % CI band)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], SIM.stroke_width(2)));
    chart
        .draw_series(
            sim.iter()
                .map(|&(r, v, _)| Circle::new((r, v), 3, SIM.filled())),
        )
        .map_err(err)?;
    Ok(true)
}

/// The models' lines, broken where a model has no value (unstable regime). True if any
/// drew a legend entry.
fn draw_models<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    models: &[ModelCurve],
    y: (f64, f64),
) -> Result<bool, String> {
    let mut labelled = false;
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
        let mut first = true;
        for seg in segs.into_iter().filter(|s| !s.is_empty()) {
            let s = chart
                .draw_series(LineSeries::new(seg, col.stroke_width(2)))
                .map_err(err)?;
            if first {
                s.label(mc.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
                first = false;
                labelled = true;
            }
        }
    }
    Ok(labelled)
}

/// The measured sets: crosses with ±1 sd bars. True if any set had a point.
fn draw_measured<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
) -> Result<bool, String> {
    let mut labelled = false;
    for (i, set) in c.measured.iter().enumerate() {
        let col = MEASURED_COLORS[i % MEASURED_COLORS.len()];
        let pts: Vec<(f64, f64, Option<f64>)> = set
            .points
            .iter()
            .filter_map(|p| p.get(c.metric).map(|(v, sd)| (p.rate, v, sd)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        labelled = true;
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
        chart
            .draw_series(
                pts.iter()
                    .map(|&(r, v, _)| Cross::new((r, v), 6, col.stroke_width(3))),
            )
            .map_err(err)?
            .label(format!("measured: {}", set.name))
            .legend(move |(x, y)| Cross::new((x + 9, y), 5, col.stroke_width(3)));
    }
    Ok(labelled)
}

/// The SLO line with its value written at the right end, when it is inside the chart.
/// True if it drew it.
fn draw_slo<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    c: &LoadChart<'_>,
    x: (f64, f64),
    y: (f64, f64),
) -> Result<bool, String> {
    let Some(slo) = c.slo.filter(|s| *s < y.1) else {
        return Ok(false);
    };
    chart
        .draw_series(DashedLineSeries::new(
            [(x.0, slo), (x.1, slo)],
            8,
            5,
            SLO_COLOR.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("SLO ({} ≤ {slo})", c.metric.label()))
        .legend(|(x, y)| {
            DashedPathElement::new([(x, y), (x + 18, y)], 5, 3, SLO_COLOR.stroke_width(2))
        });
    let style = ("sans-serif", 13)
        .into_font()
        .color(&SLO_COLOR)
        .pos(Pos::new(HPos::Right, VPos::Bottom));
    chart
        .draw_series(std::iter::once(Text::new(
            format!("SLO {slo} "),
            (x.1, slo),
            style,
        )))
        .map_err(err)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{svg, texts};
    use super::*;
    use crate::measured::{MeasuredPoint, Source};
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
        let measured = vec![MeasuredSet {
            name: "run.csv".into(),
            source: Source::SummaryCsv,
            points: vec![mp],
            notes: vec![],
        }];
        let chart = LoadChart {
            metric: Metric::P99Ttft,
            points: &pts,
            models: &models,
            measured: &measured,
            chosen_rate: Some(2.0),
            slo: Some(0.35),
            note: None,
        };
        let mut geo = Geometry::default();
        let s = svg(|root| geo = draw_load(root, &chart).unwrap());
        assert!(s.contains("<polygon"), "CI band");
        assert_eq!(
            s.matches("<circle").count(),
            4,
            "one marker per simulated rate"
        );
        assert!(s.contains("simulation (mean, 95 % CI band)"));
        assert!(s.contains("M/M/c") && s.contains("measured: run.csv") && s.contains("SLO"));
        assert!(
            s.matches("<polyline").count() >= 4,
            "sim line, two model segments, legend, SLO"
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
        assert!(t.iter().any(|x| x.contains("SLO 0.35")), "{t:?}");
        assert!(t.iter().any(|x| x.contains("SLO (p99 TTFT")), "{t:?}");
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
}
