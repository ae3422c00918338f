//! Charts, drawn with plotters onto any [`DrawingBackend`]: the page draws them onto a
//! canvas (plotters-canvas), the unit tests onto an SVG string.
//!
//! Each `draw_*` function takes plain data (no signals, no DOM) and returns the chart's
//! [`Geometry`] so the page can turn a mouse position back into data coordinates.

use crate::curves::{CurvePoint, ModelCurve};
use crate::measured::MeasuredSet;
use crate::metric::Metric;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Colours of the series (simulation, models, measured sets).
pub const SIM: RGBColor = RGBColor(31, 119, 180);
pub const MODEL_COLORS: [RGBColor; 5] = [
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];
pub const MEASURED_COLORS: [RGBColor; 3] = [
    RGBColor(214, 39, 40),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];

/// Where the plot area is in pixels and which data range it shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Geometry {
    pub x_px: (i32, i32),
    pub y_px: (i32, i32),
    pub x: (f64, f64),
    pub y: (f64, f64),
}

impl Geometry {
    /// Data x at pixel `px` (None outside the plot area).
    pub fn x_at(&self, px: f64) -> Option<f64> {
        let (a, b) = (self.x_px.0 as f64, self.x_px.1 as f64);
        (px >= a && px <= b && b > a).then(|| self.x.0 + (px - a) / (b - a) * (self.x.1 - self.x.0))
    }
}

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
}

type DrawResult = Result<Geometry, String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    v * 1.08
}

fn geometry<DB: DrawingBackend>(
    chart: &ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    x: (f64, f64),
    y: (f64, f64),
) -> Geometry {
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    Geometry {
        x_px: (xr.start, xr.end),
        y_px: (yr.start, yr.end),
        x,
        y,
    }
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
    let m = c.metric;
    let mut xmax: f64 = c.points.iter().map(|p| p.rate).fold(0.0, f64::max);
    let mut ymax: f64 = 0.0;
    for p in c.points {
        let a = p.get(m);
        if let Some(v) = a.mean {
            ymax = ymax.max(v + a.ci95.unwrap_or(0.0));
        }
    }
    for mc in c.models {
        for (r, v) in &mc.points {
            xmax = xmax.max(*r);
            if let Some(v) = v {
                ymax = ymax.max(*v);
            }
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
    if let Some(r) = c.chosen_rate {
        xmax = xmax.max(r);
    }
    if m.is_fraction() {
        ymax = ymax.max(0.05);
    }
    let x = (0.0, nice_max(xmax));
    let y = (0.0, nice_max(ymax));
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("arrival rate λ [req/s]")
        .y_desc(m.label())
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;

    // Simulation: CI band, mean line, points.
    let sim: Vec<(f64, f64, f64)> = c
        .points
        .iter()
        .filter_map(|p| {
            p.get(m)
                .mean
                .map(|v| (p.rate, v, p.get(m).ci95.unwrap_or(0.0)))
        })
        .collect();
    if !sim.is_empty() {
        let mut band: Vec<(f64, f64)> =
            sim.iter().map(|&(r, v, h)| (r, (v + h).min(y.1))).collect();
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
    }
    for (i, mc) in c.models.iter().enumerate() {
        let col = MODEL_COLORS[i % MODEL_COLORS.len()];
        // Break the line where the model has no value (unstable regime).
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
            }
        }
    }
    for (i, set) in c.measured.iter().enumerate() {
        let col = MEASURED_COLORS[i % MEASURED_COLORS.len()];
        let pts: Vec<(f64, f64, Option<f64>)> = set
            .points
            .iter()
            .filter_map(|p| p.get(m).map(|(v, sd)| (p.rate, v, sd)))
            .collect();
        if pts.is_empty() {
            continue;
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
        chart
            .draw_series(
                pts.iter()
                    .map(|&(r, v, _)| Cross::new((r, v), 6, col.stroke_width(3))),
            )
            .map_err(err)?
            .label(format!("measured: {}", set.name))
            .legend(move |(x, y)| Cross::new((x + 9, y), 5, col.stroke_width(3)));
    }
    if let Some(slo) = c.slo.filter(|s| *s < y.1) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x.0, slo), (x.1, slo)],
                RGBColor(120, 120, 120).stroke_width(1),
            )))
            .map_err(err)?
            .label("SLO")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(120, 120, 120)));
    }
    if let Some(r) = c.chosen_rate {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(r, y.0), (r, y.1)],
                BLACK.mix(0.35).stroke_width(1),
            )))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(geometry(&chart, x, y))
}

/// Empirical CDFs of TTFT samples [s], one line per labelled sample.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_cdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    samples: &[(String, Vec<f64>)],
    slo: Option<f64>,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let xmax = samples
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0, f64::max);
    let x = (0.0, nice_max(xmax.max(slo.unwrap_or(0.0) * 0.5)));
    let y = (0.0, 1.0);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("TTFT [s]")
        .y_desc("fraction of requests ≤ x")
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    for (i, (label, v)) in samples.iter().enumerate() {
        let col = if i == 0 {
            SIM
        } else {
            MEASURED_COLORS[(i - 1) % MEASURED_COLORS.len()]
        };
        let mut s = v.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len().max(1) as f64;
        // Thin very large samples to ≤ 2000 vertices.
        let step = (s.len() / 2000).max(1);
        let pts: Vec<(f64, f64)> = s
            .iter()
            .enumerate()
            .step_by(step)
            .map(|(k, t)| (*t, (k + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, col.stroke_width(2)))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
    }
    if let Some(slo) = slo.filter(|s| *s < x.1) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(slo, 0.0), (slo, 1.0)],
                RGBColor(120, 120, 120),
            )))
            .map_err(err)?
            .label("TTFT SLO")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(120, 120, 120)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(geometry(&chart, x, y))
}

/// One sample of the server's state over time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatePoint {
    /// Time [s].
    pub t: f64,
    pub waiting: f64,
    pub running: f64,
    /// KV tokens in use [tokens].
    pub kv_used: f64,
}

/// Queue length and running batch (top) and KV use as a fraction of capacity (bottom)
/// over time.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_timeseries<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    pts: &[StatePoint],
    kv_capacity: f64,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let (top, bottom) = area.split_vertically(area.dim_in_pixel().1 as i32 * 3 / 5);
    let tmax = nice_max(pts.iter().map(|p| p.t).fold(0.0, f64::max));
    let nmax = nice_max(
        pts.iter()
            .map(|p| p.waiting.max(p.running))
            .fold(1.0, f64::max),
    );
    let x = (0.0, tmax);
    let mut chart = ChartBuilder::on(&top)
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, 0.0..nmax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_desc("requests")
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let col_w = MODEL_COLORS[0];
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.t, p.waiting)),
            col_w.stroke_width(1),
        ))
        .map_err(err)?
        .label("waiting")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col_w.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.t, p.running)),
            SIM.stroke_width(1),
        ))
        .map_err(err)?
        .label("running (batch)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], SIM.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    let geo = geometry(&chart, x, (0.0, nmax));
    let cap = kv_capacity.max(1.0);
    let mut kv = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, 0.0..1.05)
        .map_err(err)?;
    kv.configure_mesh()
        .x_desc("time [s]")
        .y_desc("KV used / capacity")
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let col_kv = MODEL_COLORS[1];
    kv.draw_series(
        AreaSeries::new(
            pts.iter().map(|p| (p.t, p.kv_used / cap)),
            0.0,
            col_kv.mix(0.3),
        )
        .border_style(col_kv),
    )
    .map_err(err)?;
    area.present().map_err(err)?;
    Ok(geo)
}

/// One request of a short run, for the timeline view.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Span {
    /// Arrival [s].
    pub arrival: f64,
    /// First token [s] (None: rejected or unfinished before it).
    pub first_token: Option<f64>,
    /// Finish [s].
    pub finish: Option<f64>,
    pub rejected: bool,
}

/// Request timeline: one row per request, waiting + prefill (arrival → first token) and
/// decode (first token → finish).
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spans: &[Span],
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let tmax = nice_max(
        spans
            .iter()
            .map(|s| s.finish.or(s.first_token).unwrap_or(s.arrival))
            .fold(0.0, f64::max),
    );
    let n = spans.len().max(1) as f64;
    let x = (0.0, tmax);
    let y = (0.0, n);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time [s]")
        .y_desc("request (arrival order)")
        .disable_y_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let wait = MODEL_COLORS[0];
    let dec = SIM;
    let rej = MEASURED_COLORS[0];
    let row = |i: usize| (i as f64 + 0.1, i as f64 + 0.9);
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            let end = s.first_token.or(s.finish)?;
            Some(Rectangle::new(
                [(s.arrival, a), (end, b)],
                wait.mix(0.8).filled(),
            ))
        }))
        .map_err(err)?
        .label("waiting + prefill (until first token)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], wait.filled()));
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            Some(Rectangle::new(
                [(s.first_token?, a), (s.finish?, b)],
                dec.mix(0.8).filled(),
            ))
        }))
        .map_err(err)?
        .label("decode")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], dec.filled()));
    chart
        .draw_series(
            spans
                .iter()
                .enumerate()
                .filter(|(_, s)| s.rejected)
                .map(|(i, s)| Cross::new((s.arrival, i as f64 + 0.5), 4, rej.stroke_width(2))),
        )
        .map_err(err)?
        .label("rejected")
        .legend(move |(x, y)| Cross::new((x + 9, y), 4, rej.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(geometry(&chart, x, y))
}

#[cfg(test)]
mod tests {
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

    fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>)) -> String {
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (800, 480)).into_drawing_area();
            draw(&root);
        }
        s
    }

    #[test]
    fn load_chart_draws_band_line_points_models_and_measured() {
        let pts = curve();
        let models = vec![ModelCurve {
            name: "M/M/c".into(),
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

    #[test]
    fn cdf_timeseries_and_timeline_draw() {
        let s = svg(|root| {
            draw_cdf(root, &[("sim".into(), vec![0.3, 0.1, 0.2])], Some(0.25)).unwrap();
        });
        assert!(s.contains("TTFT SLO") && s.contains("<polyline"));
        let pts: Vec<StatePoint> = (0..50)
            .map(|i| StatePoint {
                t: i as f64,
                waiting: (i % 7) as f64,
                running: 4.0,
                kv_used: 100.0 * i as f64,
            })
            .collect();
        let s = svg(|root| {
            draw_timeseries(root, &pts, 8192.0).unwrap();
        });
        assert!(s.contains("waiting") && s.contains("KV used"));
        let spans = vec![
            Span {
                arrival: 0.0,
                first_token: Some(0.2),
                finish: Some(1.0),
                rejected: false,
            },
            Span {
                arrival: 0.5,
                first_token: None,
                finish: None,
                rejected: true,
            },
        ];
        let s = svg(|root| {
            draw_timeline(root, &spans).unwrap();
        });
        assert!(
            s.matches("<rect").count() >= 3,
            "two bars plus the background"
        );
        assert!(s.contains("rejected"));
    }
}
