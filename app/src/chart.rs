//! Charts, drawn with plotters onto any [`DrawingBackend`]: the page draws them onto a
//! canvas (plotters-canvas), the unit tests onto an SVG string.
//!
//! Each `draw_*` function takes plain data (no signals, no DOM) and returns the chart's
//! [`Geometry`] so the page can turn a mouse position back into data coordinates.

use crate::curves::{CurvePoint, ModelCurve};
use crate::measured::MeasuredSet;
use crate::metric::Metric;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
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

    /// Data y at pixel `py` (None outside the plot area; pixel rows grow downwards).
    pub fn y_at(&self, py: f64) -> Option<f64> {
        let (top, bottom) = (self.y_px.0 as f64, self.y_px.1 as f64);
        (py >= top && py <= bottom && bottom > top)
            .then(|| self.y.1 - (py - top) / (bottom - top) * (self.y.1 - self.y.0))
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
    /// Written across the plot area: why it is empty, say.
    pub note: Option<&'a str>,
}

/// The SLO lines: dark and dashed, unlike the light solid gridlines.
pub const SLO_COLOR: RGBColor = RGBColor(40, 40, 40);

/// Tick labels of a count axis (requests, batch, queue): whole numbers only.
fn count_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

/// The top of a count axis: at least 1, whole numbers a little above the largest count.
fn count_max(v: f64) -> f64 {
    nice_max(v.max(1.0)).ceil()
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

/// Draws the series legend in the house style (white, light border, 13 px) at `pos`.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)
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
    for s in c.measured {
        for p in &s.points {
            xmax = xmax.max(p.rate);
            if let Some((v, sd)) = p.get(m) {
                ymax = ymax.max(v + sd.unwrap_or(0.0));
            }
        }
    }
    // The data (simulated and measured) sets the scale; a model may raise it to at most
    // twice the data's top, so one model far off (the M/M/C baseline's TTFT is ~12 s
    // where the simulation's is ~2 s) does not squash everything else. Lines above are
    // drawn along the top edge.
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
    // Whether any series has a legend entry (else no empty legend box is drawn).
    let mut labelled = !sim.is_empty();
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
    for mc in c.models {
        let col = MODEL_COLORS[mc.slot % MODEL_COLORS.len()];
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
                labelled = true;
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
    if let Some(slo) = c.slo.filter(|s| *s < y.1) {
        labelled = true;
        chart
            .draw_series(DashedLineSeries::new(
                [(x.0, slo), (x.1, slo)],
                8,
                5,
                SLO_COLOR.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("SLO ({} ≤ {slo})", m.label()))
            .legend(|(x, y)| {
                DashedPathElement::new([(x, y), (x + 18, y)], 5, 3, SLO_COLOR.stroke_width(2))
            });
        let style = ("sans-serif", 13).into_font().color(&SLO_COLOR).pos(
            plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Right,
                plotters::style::text_anchor::VPos::Bottom,
            ),
        );
        chart
            .draw_series(std::iter::once(Text::new(
                format!("SLO {slo} "),
                (x.1, slo),
                style,
            )))
            .map_err(err)?;
    }
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
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            ));
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
            .draw_series(DashedLineSeries::new(
                [(slo, 0.0), (slo, 1.0)],
                8,
                5,
                SLO_COLOR.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("TTFT SLO ({slo} s)"))
            .legend(|(x, y)| {
                DashedPathElement::new([(x, y), (x + 18, y)], 5, 3, SLO_COLOR.stroke_width(2))
            });
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)?;
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

/// Height of a [`header`] line [px].
const HEADER_PX: i32 = 28;

/// A line above a chart: its caption (which run it shows), then a legend of line samples
/// — outside the plot, so the legend never covers the data.
fn header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    entries: &[(&str, RGBColor)],
) -> Result<(), String> {
    let text = ("sans-serif", 14).into_font().color(&RGBColor(29, 36, 48));
    let (mut x, y) = (12, 8);
    area.draw_text(caption, &text, (x, y)).map_err(err)?;
    x += area.estimate_text_size(caption, &text).map_err(err)?.0 as i32 + 28;
    let small = ("sans-serif", 13).into_font().color(&RGBColor(29, 36, 48));
    for (label, col) in entries {
        area.draw(&PathElement::new(
            vec![(x, y + 8), (x + 18, y + 8)],
            col.stroke_width(2),
        ))
        .map_err(err)?;
        x += 24;
        area.draw_text(label, &small, (x, y + 1)).map_err(err)?;
        x += area.estimate_text_size(label, &small).map_err(err)?.0 as i32 + 20;
    }
    Ok(())
}

/// Queue length and running batch (top) and KV use as a fraction of capacity (bottom)
/// over time, under a header naming the run (`caption`) with the legend.
///
/// # Errors
/// The backend's drawing error, as text.
/// A time tick [s] with as few decimals as it needs ("100", "2.5").
fn time_label(v: &f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Queue, batch and KV use over time; `window` (0, 1] shows that first fraction of the run.
pub fn draw_timeseries<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    pts: &[StatePoint],
    kv_capacity: f64,
    caption: &str,
    window: f64,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    // The first `window` of the run (a fraction in (0, 1]; the samples up to it).
    let end = pts.last().map_or(0.0, |p| p.t) * window.clamp(1e-3, 1.0);
    let pts = &pts[..pts.partition_point(|p| p.t <= end)];
    let (head, rest) = area.split_vertically(HEADER_PX);
    let col_w = MODEL_COLORS[0];
    header(
        &head,
        caption,
        &[("waiting (queue)", col_w), ("running (batch)", SIM)],
    )?;
    let (top, bottom) = rest.split_vertically(rest.dim_in_pixel().1 as i32 * 3 / 5);
    let tmax = nice_max(pts.iter().map(|p| p.t).fold(0.0, f64::max));
    let nmax = count_max(
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
        .y_label_formatter(&count_label)
        .x_label_formatter(&time_label)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.t, p.waiting)),
            col_w.stroke_width(1),
        ))
        .map_err(err)?;
    chart
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.t, p.running)),
            SIM.stroke_width(1),
        ))
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
        .x_label_formatter(&time_label)
        .y_desc("KV used / capacity")
        .y_labels(6)
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
    /// Entered the running set for the first time: start of its first prefill [s]
    /// (None: rejected, never admitted, or not recorded — then waiting and prefill are
    /// drawn as one phase).
    #[serde(default)]
    pub admitted: Option<f64>,
    /// First token [s] (None: rejected or unfinished before it).
    pub first_token: Option<f64>,
    /// Finish [s].
    pub finish: Option<f64>,
    pub rejected: bool,
}

impl Span {
    /// The timeline span of a request record.
    pub fn of(r: &engine::record::RequestRecord) -> Span {
        Span {
            arrival: r.arrival_s,
            admitted: r.admitted_s,
            first_token: r.first_token_s,
            finish: r.finish_s,
            rejected: r.outcome == engine::record::Outcome::Rejected,
        }
    }

    /// (waiting, prefill, decode) durations [s], where known. Without an admission time
    /// the waiting phase is None and "prefill" runs from arrival to the first token.
    pub fn phases(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let wait = self.admitted.map(|a| a - self.arrival);
        let start = self.admitted.unwrap_or(self.arrival);
        let prefill = self.first_token.map(|f| f - start);
        let decode = match (self.first_token, self.finish) {
            (Some(f), Some(e)) => Some(e - f),
            _ => None,
        };
        (wait, prefill, decode)
    }

    /// One line for the hover read-out.
    pub fn describe(&self, index: usize) -> String {
        let ms = |v: Option<f64>| {
            v.map(|x| format!("{:.0} ms", x * 1e3))
                .unwrap_or_else(|| "—".into())
        };
        if self.rejected {
            return format!("request {index}: arrived {:.2} s, rejected", self.arrival);
        }
        let (w, p, d) = self.phases();
        let head = format!("request {index}: arrived {:.2} s", self.arrival);
        let tail = if self.finish.is_none() {
            " (unfinished)"
        } else {
            ""
        };
        match w {
            Some(_) => format!(
                "{head} · waiting {} · prefill {} · decode {}{tail}",
                ms(w),
                ms(p),
                ms(d)
            ),
            None => format!(
                "{head} · waiting + prefill {} · decode {}{tail}",
                ms(p),
                ms(d)
            ),
        }
    }
}

/// Request timeline: one row per request — waiting (arrival → admitted), prefill
/// (admitted → first token), decode (first token → finish); rejected requests crossed.
/// `first_token_after_decode` (the reference rules) says so in the prefill legend;
/// `caption` (which run it is) goes above the chart.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    spans: &[Span],
    first_token_after_decode: bool,
    caption: &str,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let (head, area) = area.split_vertically(HEADER_PX);
    header(&head, caption, &[])?;
    let area = &area;
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
        .y_label_formatter(&count_label)
        .disable_y_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let wait = RGBColor(190, 190, 190);
    let pre = MODEL_COLORS[0];
    let dec = SIM;
    let rej = MEASURED_COLORS[0];
    let row = |i: usize| (i as f64 + 0.1, i as f64 + 0.9);
    let any_admitted = spans.iter().any(|s| s.admitted.is_some());
    let any_merged = spans
        .iter()
        .any(|s| s.admitted.is_none() && !s.rejected && s.first_token.is_some());
    if any_admitted {
        chart
            .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
                let (a, b) = row(i);
                let end = s.admitted?;
                (end > s.arrival).then(|| Rectangle::new([(s.arrival, a), (end, b)], wait.filled()))
            }))
            .map_err(err)?
            .label("waiting (arrival → admitted)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], wait.filled()));
    }
    let pre_label = match (any_admitted, first_token_after_decode) {
        (true, false) => "prefill (admitted → first token)",
        (true, true) => "prefill + 1st decode step (reference rules: token 1 after it)",
        (false, _) => "waiting + prefill (until first token)",
    };
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            let start = s.admitted.unwrap_or(s.arrival);
            let end = s.first_token.or(s.finish)?;
            Some(Rectangle::new(
                [(start, a), (end, b)],
                pre.mix(0.85).filled(),
            ))
        }))
        .map_err(err)?
        .label(pre_label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 18, y + 5)], pre.filled()));
    if any_admitted && any_merged {
        // Measured requests mixed in have no admission time: say so.
        chart
            .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
            .map_err(err)?
            .label("(no admission time recorded: waiting included)")
            .legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], pre.mix(0.4).filled())
            });
    }
    chart
        .draw_series(spans.iter().enumerate().filter_map(|(i, s)| {
            let (a, b) = row(i);
            Some(Rectangle::new(
                [(s.first_token?, a), (s.finish?, b)],
                dec.mix(0.8).filled(),
            ))
        }))
        .map_err(err)?
        .label("decode (first token → finish)")
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
        .label("rejected (at arrival)")
        .legend(move |(x, y)| Cross::new((x + 9, y), 4, rej.stroke_width(2)));
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    area.present().map_err(err)?;
    Ok(geometry(&chart, x, y))
}

/// Colour `i` of the page's palette: 0 = simulation blue, then the model colours, then
/// the measured colours.
pub fn palette(i: u8) -> RGBColor {
    match i as usize {
        0 => SIM,
        i if i <= MODEL_COLORS.len() => MODEL_COLORS[i - 1],
        i => MEASURED_COLORS[(i - 1 - MODEL_COLORS.len()) % MEASURED_COLORS.len()],
    }
}

/// One line and/or set of dots of an [`XyPanel`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Series {
    pub name: String,
    /// Index into [`palette`].
    pub color: u8,
    pub points: Vec<(f64, f64)>,
    /// Join the points with a line.
    pub line: bool,
    /// Mark each point with a dot.
    pub dots: bool,
}

/// A plain x–y chart: the lessons' charts (several stack into one canvas).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct XyPanel {
    pub x_desc: String,
    pub y_desc: String,
    pub series: Vec<Series>,
    /// Labelled vertical lines (the chosen value, a capacity…) in data x.
    pub vlines: Vec<(String, f64)>,
    /// Labelled horizontal lines in data y.
    pub hlines: Vec<(String, f64)>,
    /// Plot x on a log₂ axis (x > 0), labelled with the plain values.
    pub x_log2: bool,
    /// Cap of the y axis (values above are clipped to it); None = fit the data.
    pub y_cap: Option<f64>,
    /// Start the x axis at zero (else at the smallest x).
    pub x_from_zero: bool,
    /// Where the legend goes (out of the data's way).
    #[serde(default)]
    pub legend: Corner,
}

/// A corner of a chart, for its legend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Corner {
    #[default]
    UpperLeft,
    UpperRight,
    LowerRight,
}

/// Splits a line into the pieces that stay at or below `cap`, ending each piece where
/// it crosses the cap (so a clipped line leaves the chart instead of running along its
/// top edge).
pub fn clip_line(pts: &[(f64, f64)], cap: f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (i, &(x, y)) in pts.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| pts[j]);
        let cross = |(x0, y0): (f64, f64)| (x0 + (x - x0) * (cap - y0) / (y - y0), cap);
        match prev {
            Some(p) if (p.1 > cap) != (y > cap) => {
                let c = cross(p);
                if y > cap {
                    out.last_mut().expect("non-empty").push(c);
                    out.push(Vec::new());
                } else {
                    out.last_mut().expect("non-empty").push(c);
                    out.last_mut().expect("non-empty").push((x, y));
                }
            }
            _ if y <= cap => out.last_mut().expect("non-empty").push((x, y)),
            _ => {}
        }
    }
    out.retain(|s| s.len() > 1 || s.iter().any(|q| q.1 < cap));
    out
}

/// The nearest point of every series of every panel to data x `x` (in the panel's own
/// axis: log₂ for log panels), as one hover line.
pub fn panels_hover_text(panels: &[XyPanel], x: f64) -> String {
    let mut parts = Vec::new();
    for p in panels {
        let x_real = if p.x_log2 { 2f64.powf(x) } else { x };
        for s in &p.series {
            let Some(&(px, py)) = s.points.iter().min_by(|a, b| {
                let d = |q: f64| {
                    if p.x_log2 {
                        (q.max(1e-9).log2() - x).abs()
                    } else {
                        (q - x_real).abs()
                    }
                };
                d(a.0).total_cmp(&d(b.0))
            }) else {
                continue;
            };
            parts.push(format!("{} at {}: {}", s.name, short(px), short(py)));
        }
    }
    parts.join(" · ")
}

fn short(v: f64) -> String {
    let whole = v.abs() < 1e6 && (v - v.round()).abs() < 1e-9;
    if whole || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Stacks `panels` vertically on `area`; the returned geometry is the first panel's.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_panels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panels: &[XyPanel],
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let n = panels.len().max(1);
    let areas = area.split_evenly((n, 1));
    let mut first = None;
    for (p, a) in panels.iter().zip(areas.iter()) {
        let g = draw_panel(a, p)?;
        first.get_or_insert(g);
    }
    area.present().map_err(err)?;
    Ok(first.unwrap_or_default())
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &XyPanel) -> DrawResult {
    let tx = |x: f64| if p.x_log2 { x.max(1e-9).log2() } else { x };
    let xs = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.0))
        .chain(p.vlines.iter().map(|v| v.1))
        .map(tx)
        .filter(|x| x.is_finite());
    let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if p.x_from_zero {
        x0 = x0.min(0.0);
    }
    if p.x_log2 {
        (x0, x1) = (x0 - 0.3, x1 + 0.3);
    } else {
        x1 = x0 + nice_max(x1 - x0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let ymax = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.1))
        .chain(p.hlines.iter().map(|h| h.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let ymax = match p.y_cap {
        Some(c) => ymax.min(c),
        None => ymax,
    };
    let y = (0.0, nice_max(ymax));
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y.0..y.1)
        .map_err(err)?;
    let log2 = p.x_log2;
    let fmt_x = move |v: &f64| {
        if log2 {
            let b = 2f64.powf(*v);
            if (b - b.round()).abs() < 0.02 {
                format!("{}", b.round())
            } else {
                String::new()
            }
        } else {
            let s = format!("{v:.3}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    };
    let fmt_y = |v: &f64| {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    chart
        .configure_mesh()
        .x_desc(p.x_desc.as_str())
        .y_desc(p.y_desc.as_str())
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&fmt_y)
        .x_labels(if log2 {
            ((x1 - x0) * 4.0) as usize + 1
        } else {
            10
        })
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    for s in &p.series {
        let col = palette(s.color);
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(a, b)| (tx(a), b))
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .collect();
        if pts.is_empty() {
            continue;
        }
        let mut labelled = false;
        if s.line {
            for piece in clip_line(&pts, y.1) {
                let drawn = chart
                    .draw_series(LineSeries::new(piece, col.stroke_width(2)))
                    .map_err(err)?;
                if !labelled {
                    drawn.label(s.name.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                    });
                    labelled = true;
                }
            }
        }
        if s.dots {
            let d = chart
                .draw_series(
                    pts.iter()
                        .filter(|(_, b)| *b <= y.1)
                        .map(|&(a, b)| Circle::new((a, b), 4, col.filled())),
                )
                .map_err(err)?;
            if !labelled {
                d.label(s.name.clone())
                    .legend(move |(x, y)| Circle::new((x + 9, y), 4, col.filled()));
            }
        }
    }
    let grey = RGBColor(110, 110, 110);
    for (label, v) in &p.vlines {
        let v = tx(*v);
        if v < x0 || v > x1 {
            continue;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(v, y.0), (v, y.1)],
                grey.stroke_width(1),
            )))
            .map_err(err)?;
        // Labels in the right half end at their line, so they stay on the chart.
        let right = v > x0 + 0.5 * (x1 - x0);
        let hpos = if right {
            plotters::style::text_anchor::HPos::Right
        } else {
            plotters::style::text_anchor::HPos::Left
        };
        let style = ("sans-serif", 12).into_font().color(&grey).pos(
            plotters::style::text_anchor::Pos::new(hpos, plotters::style::text_anchor::VPos::Top),
        );
        let pad = (x1 - x0) * 0.004 * if right { -1.0 } else { 1.0 };
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {label} "),
                (v + pad, y.1),
                style,
            )))
            .map_err(err)?;
    }
    for (label, h) in &p.hlines {
        if *h > y.1 {
            continue;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x0, *h), (x1, *h)],
                grey.stroke_width(1),
            )))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], grey));
    }
    draw_legend(
        &mut chart,
        match p.legend {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
        },
    )?;
    Ok(geometry(&chart, (x0, x1), y))
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

    /// The text of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                Some(
                    t.split_once('>')?
                        .1
                        .split_once("</text>")?
                        .0
                        .trim()
                        .to_string(),
                )
            })
            .collect()
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
    fn count_axes_have_whole_number_ticks() {
        let pts: Vec<StatePoint> = (0..50)
            .map(|i| StatePoint {
                t: i as f64,
                waiting: (i % 7) as f64,
                running: 3.0,
                kv_used: 0.0,
            })
            .collect();
        let s = svg(|root| {
            draw_timeseries(root, &pts, 8192.0, "run", 1.0).unwrap();
        });
        let t = texts(&s);
        for n in ["0", "1", "6"] {
            assert!(t.iter().any(|x| x == n), "tick {n} in {t:?}");
        }
        // (Time runs 0, 5, 10 … s: a 6.0 or 7.0 could only be a count with decimals.)
        assert!(!t.iter().any(|x| x == "6.0" || x == "7.0"), "{t:?}");
        // The legend is in the header, not over the data: its labels sit above the plot.
        let legend_y = |label: &str| -> i32 {
            let at = s.find(label).expect(label);
            let tag = &s[s[..at].rfind("<text").unwrap()..at];
            let y = tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap();
            y.parse().unwrap()
        };
        assert!(legend_y("waiting (queue)") < HEADER_PX);
        assert!(legend_y("running (batch)") < HEADER_PX);
        let spans: Vec<Span> = (0..12)
            .map(|i| Span {
                arrival: i as f64,
                first_token: Some(i as f64 + 0.5),
                finish: Some(i as f64 + 1.0),
                ..Span::default()
            })
            .collect();
        let s = svg(|root| {
            draw_timeline(root, &spans, false, "run").unwrap();
        });
        let t = texts(&s);
        assert!(t.iter().any(|x| x == "10"), "{t:?}");
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
            draw_timeseries(
                root,
                &pts,
                8192.0,
                "simulation at λ = 4 req/s (seed 0)",
                1.0,
            )
            .unwrap();
        });
        assert!(s.contains("waiting") && s.contains("KV used"));
        assert!(
            s.contains("simulation at λ = 4 req/s (seed 0)"),
            "says which run"
        );
        let spans = vec![
            Span {
                arrival: 0.0,
                admitted: Some(0.1),
                first_token: Some(0.2),
                finish: Some(1.0),
                rejected: false,
            },
            Span {
                arrival: 0.5,
                rejected: true,
                ..Span::default()
            },
        ];
        let s = svg(|root| {
            draw_timeline(root, &spans, false, "λ = 4 req/s (seed 0)").unwrap();
        });
        assert!(
            s.matches("<rect").count() >= 4,
            "three phases plus the background"
        );
        assert!(s.contains("rejected") && s.contains("waiting (arrival"));
        assert!(s.contains("prefill (admitted"));
        let s = svg(|root| {
            draw_timeline(root, &spans, true, "").unwrap();
        });
        assert!(
            s.contains("reference rules"),
            "the legend says the first token waits for a decode"
        );
        // Measured spans (no admission time) keep the merged phase.
        let merged = [Span {
            admitted: None,
            ..spans[0]
        }];
        let s = svg(|root| {
            draw_timeline(root, &merged, false, "").unwrap();
        });
        assert!(s.contains("waiting + prefill") && !s.contains("waiting (arrival"));
    }

    #[test]
    fn clipped_lines_leave_the_chart_at_the_cap() {
        let pts = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0), (3.0, 1.0), (4.0, 2.0)];
        let pieces = clip_line(&pts, 4.0);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0], vec![(0.0, 1.0), (1.0, 3.0), (1.5, 4.0)]);
        assert_eq!(pieces[1], vec![(2.25, 4.0), (3.0, 1.0), (4.0, 2.0)]);
        assert_eq!(clip_line(&[(0.0, 9.0), (1.0, 9.0)], 4.0).len(), 0);
        assert_eq!(clip_line(&pts, 10.0), vec![pts.to_vec()]);
    }

    #[test]
    fn span_phases_and_hover_text() {
        let s = Span {
            arrival: 1.0,
            admitted: Some(1.25),
            first_token: Some(1.3),
            finish: Some(2.3),
            rejected: false,
        };
        let (w, p, d) = s.phases();
        assert!((w.unwrap() - 0.25).abs() < 1e-12);
        assert!((p.unwrap() - 0.05).abs() < 1e-12);
        assert!((d.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(
            s.describe(3),
            "request 3: arrived 1.00 s · waiting 250 ms · prefill 50 ms · decode 1000 ms"
        );
        let r = Span {
            arrival: 2.0,
            rejected: true,
            ..Span::default()
        };
        assert!(r.describe(4).ends_with("rejected"));
        let m = Span {
            admitted: None,
            ..s
        };
        assert!(m.describe(0).contains("waiting + prefill 300 ms"));
        let rec = engine::record::RequestRecord {
            id: 0,
            class: 0,
            arrival_s: 1.0,
            first_token_s: Some(1.3),
            finish_s: Some(2.3),
            prompt_tokens: 10,
            output_tokens: 5,
            max_gap_s: 0.0,
            stalls: 0,
            preemptions: 0,
            outcome: engine::record::Outcome::Completed,
            admitted_s: Some(1.25),
        };
        assert_eq!(Span::of(&rec), s);
    }

    #[test]
    fn panels_draw_series_lines_and_log_axis() {
        let p = XyPanel {
            x_desc: "B".into(),
            y_desc: "tokens/s".into(),
            series: vec![
                Series {
                    name: "sim".into(),
                    color: 0,
                    points: vec![(1.0, 10.0), (8.0, 60.0), (64.0, 90.0)],
                    line: true,
                    dots: true,
                },
                Series {
                    name: "model".into(),
                    color: 1,
                    points: vec![(1.0, 12.0), (64.0, 1e9)],
                    line: true,
                    dots: false,
                },
            ],
            vlines: vec![("B = 8".into(), 8.0)],
            hlines: vec![("goal".into(), 50.0)],
            x_log2: true,
            y_cap: Some(100.0),
            x_from_zero: false,
            legend: Corner::UpperRight,
        };
        let mut g = Geometry::default();
        let s = svg(|root| g = draw_panels(root, &[p.clone(), p.clone()]).unwrap());
        assert_eq!(s.matches("<circle").count(), 6, "three dots per panel");
        for want in [" B = 8 ", "goal\n", "\n64\n", "\n8\n"] {
            assert!(s.contains(want), "{want} missing from {s}");
        }
        assert!(g.y.1 < 200.0, "the cap holds the axis: {g:?}");
        assert!(g.x.0 < 0.0 && g.x.1 > 6.0, "log2 axis: {g:?}");
        let mid = (g.y_px.0 + g.y_px.1) as f64 / 2.0;
        assert!((g.y_at(mid).unwrap() - g.y.1 / 2.0).abs() < 1.0);
        assert_eq!(
            panels_hover_text(std::slice::from_ref(&p), 2.5),
            "sim at 8: 60 · model at 1: 12"
        );
        assert_eq!(palette(0), SIM);
        assert_eq!(palette(1), MODEL_COLORS[0]);
        assert_eq!(palette(6), MEASURED_COLORS[0]);
    }
}
