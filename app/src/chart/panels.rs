//! Plain x–y panels, the lessons' charts: series of lines and dots, labelled vertical
//! and horizontal lines, an optional log₂ x axis, several panels stacked on one canvas.

use super::frame::{err, Chart, DrawResult, Geometry};
use super::legend::{self, Entry, Glyph};
use super::palette::palette;
use super::scale::nice_max;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
    /// Half-widths of each point's 95 % interval, drawn as a whisker through its dot
    /// (same order as `points`; empty: no intervals).
    #[serde(default)]
    pub ci: Vec<f64>,
}

impl Series {
    /// Each point's interval (x, y, low, high) where it has one.
    fn whiskers(&self) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
        self.points
            .iter()
            .zip(&self.ci)
            .filter(|(_, h)| h.is_finite() && **h > 0.0)
            .map(|(&(x, y), h)| (x, y, (y - h).max(0.0), y + h))
    }
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
            let ci = s
                .points
                .iter()
                .position(|q| q.0 == px)
                .and_then(|i| s.ci.get(i))
                .filter(|h| **h > 0.0)
                .map(|h| format!(" ± {}", short(*h)))
                .unwrap_or_default();
            parts.push(format!("{} at {}: {}{ci}", s.name, short(px), short(py)));
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

impl XyPanel {
    /// x as plotted: log₂ on a log panel.
    fn tx(&self, x: f64) -> f64 {
        if self.x_log2 {
            x.max(1e-9).log2()
        } else {
            x
        }
    }

    /// The plotted x range: every point and vertical line, with room at the ends.
    fn x_range(&self) -> (f64, f64) {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|q| q.0))
            .chain(self.vlines.iter().map(|v| v.1))
            .map(|x| self.tx(x))
            .filter(|x| x.is_finite());
        let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        if !x0.is_finite() {
            (x0, x1) = (0.0, 1.0);
        }
        if self.x_from_zero {
            x0 = x0.min(0.0);
        }
        if self.x_log2 {
            (x0, x1) = (x0 - 0.3, x1 + 0.3);
        } else {
            x1 = x0 + nice_max(x1 - x0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        (x0, x1)
    }

    /// The y range: from zero to the largest value (or the cap).
    fn y_range(&self) -> (f64, f64) {
        let ymax = self
            .series
            .iter()
            .flat_map(|s| {
                s.points
                    .iter()
                    .map(|q| q.1)
                    .chain(s.whiskers().map(|w| w.3))
            })
            .chain(self.hlines.iter().map(|h| h.1))
            .filter(|y| y.is_finite())
            .fold(0.0, f64::max);
        let ymax = match self.y_cap {
            Some(c) => ymax.min(c),
            None => ymax,
        };
        (0.0, nice_max(ymax))
    }
}

/// A tick with at most three decimals and none it does not need.
fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The empty frame of a panel on `area`: axes for `x` × `y`.
fn frame<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    x: (f64, f64),
    y: (f64, f64),
) -> Result<Chart<'a, DB>, String> {
    ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)
}

/// The group a series' colour puts it in (see [`palette`]): the models' colours are
/// models; the panels hold no measurements, so every other colour is a simulation (a
/// second simulated series takes the first colour after the models').
fn group_of(color: u8) -> &'static str {
    match color {
        1..=5 => "models",
        _ => "simulation",
    }
}

/// The panel's legend: its series grouped by kind, then its horizontal lines.
fn entries(p: &XyPanel) -> Vec<Entry> {
    let mut series: Vec<&Series> = p.series.iter().filter(|s| !s.points.is_empty()).collect();
    // Grouped: simulation first, then the models (stable within a group).
    series.sort_by_key(|s| group_of(s.color) == "models");
    let mut v: Vec<Entry> = series
        .into_iter()
        .map(|s| Entry {
            group: group_of(s.color),
            label: s.name.clone(),
            glyph: if s.line {
                Glyph::Line {
                    col: palette(s.color),
                    dashed: false,
                }
            } else {
                Glyph::Marker {
                    shape: legend::Shape::Circle,
                    col: palette(s.color),
                }
            },
        })
        .collect();
    v.extend(p.hlines.iter().map(|(label, _)| Entry {
        group: "reference lines",
        label: label.clone(),
        glyph: Glyph::Line {
            col: RULE,
            dashed: false,
        },
    }));
    v
}

/// The grey of the labelled vertical and horizontal lines.
const RULE: RGBColor = RGBColor(110, 110, 110);

/// The pixels a panel's data are drawn at on `chart`: every point, every line, every
/// labelled rule and the label at the top of each vertical one.
fn drawn_pixels<DB: DrawingBackend>(
    chart: &Chart<'_, DB>,
    p: &XyPanel,
    (x0, x1): (f64, f64),
    y: (f64, f64),
) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for s in &p.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(a, b)| (p.tx(a), b))
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .collect();
        if s.line {
            for piece in clip_line(&pts, y.1) {
                let px: Vec<(i32, i32)> = piece.iter().map(|q| chart.backend_coord(q)).collect();
                out.extend(legend::trace(&px, 4.0));
            }
        }
        out.extend(
            pts.iter()
                .filter(|q| q.1 <= y.1)
                .map(|q| chart.backend_coord(q)),
        );
        for (wx, _, lo, hi) in s.whiskers().filter(|w| w.1 <= y.1) {
            let wx = p.tx(wx);
            out.extend(legend::trace(
                &[
                    chart.backend_coord(&(wx, lo)),
                    chart.backend_coord(&(wx, hi.min(y.1))),
                ],
                4.0,
            ));
        }
    }
    for (label, v) in &p.vlines {
        let v = p.tx(*v);
        if v < x0 || v > x1 {
            continue;
        }
        let top = chart.backend_coord(&(v, y.1));
        out.extend(legend::trace(&[top, chart.backend_coord(&(v, y.0))], 4.0));
        // The label runs about 7 px per character from its line, into the plot.
        let w = 7 * (label.chars().count() as i32 + 2);
        let dir = if v > x0 + 0.5 * (x1 - x0) { -1 } else { 1 };
        out.extend(legend::trace(
            &[(top.0, top.1 + 8), (top.0 + dir * w, top.1 + 8)],
            4.0,
        ));
    }
    for (_, h) in &p.hlines {
        if *h <= y.1 {
            out.extend(legend::trace(
                &[
                    chart.backend_coord(&(x0, *h)),
                    chart.backend_coord(&(x1, *h)),
                ],
                4.0,
            ));
        }
    }
    out
}

/// The corners to try, the panel's preferred one first.
fn corners(c: Corner) -> [usize; 4] {
    match c {
        Corner::UpperLeft => [0, 1, 2, 3],
        Corner::UpperRight => [1, 0, 2, 3],
        Corner::LowerRight => [2, 1, 0, 3],
    }
}

/// One panel; the legend goes in a corner no point, line or label of the panel passes
/// through (the panel's preferred corner first), else in a column beside it.
fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &XyPanel) -> DrawResult {
    let (x0, x1) = p.x_range();
    let y = p.y_range();
    let entries = entries(p);
    let corner = if entries.is_empty() {
        None
    } else {
        let probe = frame(area, (x0, x1), y)?;
        let drawn = drawn_pixels(&probe, p, (x0, x1), y);
        let (xr, yr) = probe.plotting_area().get_pixel_range();
        let size = legend::size(area, &entries, legend::COLUMN_TEXT)?;
        legend::clear_corner(
            [xr.start, yr.start, xr.end, yr.end],
            size,
            &drawn,
            &corners(p.legend),
        )
    };
    let (plot, side) = match corner {
        Some(_) => (area.clone(), None),
        None => legend::column(area, &entries)?,
    };
    let mut chart = frame(&plot, (x0, x1), y)?;
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
            tick(*v)
        }
    };
    let fmt_y = |v: &f64| tick(*v);
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
        draw_series(&mut chart, p, s, y.1)?;
    }
    draw_rules(&mut chart, p, (x0, x1), y)?;
    let mut geo = Geometry::of(&chart, (x0, x1), y);
    geo.legend = match (corner, side) {
        (Some(at), _) => Some(legend::draw(area, &entries, at, legend::COLUMN_TEXT)?),
        (None, Some(side)) => Some(legend::draw_column(&side, &entries, geo.y_px.0)?),
        (None, None) => None,
    };
    Ok(geo)
}

/// One series: its line clipped at the top `ymax`, its dots below it.
fn draw_series<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    p: &XyPanel,
    s: &Series,
    ymax: f64,
) -> Result<(), String> {
    let col = palette(s.color);
    let pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .map(|&(a, b)| (p.tx(a), b))
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .collect();
    if pts.is_empty() {
        return Ok(());
    }
    if s.line {
        for piece in clip_line(&pts, ymax) {
            chart
                .draw_series(LineSeries::new(piece, col.stroke_width(2)))
                .map_err(err)?;
        }
    }
    if s.dots {
        chart
            .draw_series(
                pts.iter()
                    .filter(|(_, b)| *b <= ymax)
                    .map(|&(a, b)| Circle::new((a, b), 4, col.filled())),
            )
            .map_err(err)?;
        // A point above the cap is off the chart, and so is its interval.
        for (x, _, lo, hi) in s.whiskers().filter(|w| w.1 <= ymax) {
            let x = p.tx(x);
            chart
                .draw_series(LineSeries::new(
                    [(x, lo), (x, hi.min(ymax))],
                    col.stroke_width(2),
                ))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// The labelled vertical lines (label at the top) and horizontal lines (label in the
/// legend, [`entries`]) that fall inside the chart's range `x` × `y`.
fn draw_rules<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    p: &XyPanel,
    (x0, x1): (f64, f64),
    y: (f64, f64),
) -> Result<(), String> {
    let grey = RULE;
    for (label, v) in &p.vlines {
        let v = p.tx(*v);
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
        let hpos = if right { HPos::Right } else { HPos::Left };
        let style = ("sans-serif", 12)
            .into_font()
            .color(&grey)
            .pos(Pos::new(hpos, VPos::Top));
        let pad = (x1 - x0) * 0.004 * if right { -1.0 } else { 1.0 };
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {label} "),
                (v + pad, y.1),
                style,
            )))
            .map_err(err)?;
    }
    for (_, h) in &p.hlines {
        if *h > y.1 {
            continue;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x0, *h), (x1, *h)],
                grey.stroke_width(1),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::svg;
    use super::*;

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
                    ci: vec![],
                },
                Series {
                    name: "model".into(),
                    color: 1,
                    points: vec![(1.0, 12.0), (64.0, 1e9)],
                    line: true,
                    dots: false,
                    ci: vec![],
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
        // Grouped legend entries, and no drawn point under the legend.
        let t = super::super::testing::texts(&s);
        for want in ["simulation", "models", "reference lines"] {
            assert!(t.iter().any(|x| x == want), "{want} missing from {t:?}");
        }
        let lb = g.legend.expect("a legend");
        for &(x, y) in &p.series[0].points {
            let (px, py) = g.px(x.log2(), y);
            assert!(
                !((lb[0] as f64..=lb[2] as f64).contains(&px)
                    && (lb[1] as f64..=lb[3] as f64).contains(&py)),
                "({px}, {py}) under {lb:?}"
            );
        }
        assert!(g.y.1 < 200.0, "the cap holds the axis: {g:?}");
        assert!(g.x.0 < 0.0 && g.x.1 > 6.0, "log2 axis: {g:?}");
        let mid = (g.y_px.0 + g.y_px.1) as f64 / 2.0;
        assert!((g.y_at(mid).unwrap() - g.y.1 / 2.0).abs() < 1.0);
        assert_eq!(
            panels_hover_text(std::slice::from_ref(&p), 2.5),
            "sim at 8: 60 · model at 1: 12"
        );
    }

    #[test]
    fn intervals_are_drawn_as_whiskers_and_raise_the_axis() {
        let mut p = XyPanel {
            series: vec![Series {
                name: "sim".into(),
                color: 0,
                points: vec![(1.0, 1.0), (2.0, 2.0)],
                line: false,
                dots: true,
                ci: vec![],
            }],
            // The same axes with and without intervals.
            hlines: vec![("top".into(), 4.0)],
            ..XyPanel::default()
        };
        let plain = svg(|root| {
            draw_panels(root, std::slice::from_ref(&p)).unwrap();
        });
        p.series[0].ci = vec![0.5, 1.5];
        let with = svg(|root| {
            draw_panels(root, std::slice::from_ref(&p)).unwrap();
        });
        assert_eq!(
            with.matches("<polyline").count(),
            plain.matches("<polyline").count() + 2,
            "one whisker per interval"
        );
        assert!(
            p.y_range().1 >= 3.5,
            "the axis holds the top of the interval"
        );
        assert_eq!(
            panels_hover_text(std::slice::from_ref(&p), 2.0),
            "sim at 2: 2 ± 1.50"
        );
    }

    #[test]
    fn a_second_simulated_series_is_listed_under_simulation() {
        let sim = |name: &str, color| Series {
            name: name.into(),
            color,
            points: vec![(1.0, 1.0)],
            line: false,
            dots: true,
            ci: vec![],
        };
        let p = XyPanel {
            series: vec![
                sim("model", 1),
                sim("p99 (simulation)", 6),
                sim("mean (simulation)", 0),
            ],
            ..XyPanel::default()
        };
        let groups: Vec<_> = entries(&p)
            .iter()
            .map(|e| (e.group, e.label.clone()))
            .collect();
        assert_eq!(
            groups,
            vec![
                ("simulation", "p99 (simulation)".to_string()),
                ("simulation", "mean (simulation)".to_string()),
                ("models", "model".to_string()),
            ]
        );
    }

    /// Every lesson's panels, drawn as the Learn view draws them: no point and no line of
    /// a panel passes under its legend.
    #[test]
    fn no_lesson_panel_hides_data_under_its_legend() {
        use crate::learn::{run, Lesson, LessonState};
        for lesson in Lesson::ALL {
            let out = run(&LessonState::new(lesson)).unwrap();
            let n = out.panels.len().max(1) as u32;
            let mut s = String::new();
            // The Learn view's canvas: 900 px wide, 430 px for one panel, 620 for more.
            let h = if n > 1 { 620 } else { 430 };
            let root = SVGBackend::with_string(&mut s, (900, h)).into_drawing_area();
            for (p, a) in out
                .panels
                .iter()
                .zip(root.split_evenly((n as usize, 1)).iter())
            {
                let g = draw_panel(a, p).unwrap();
                let Some(lb) = g.legend else { continue };
                if lb[0] >= g.x_px.1 {
                    // In a column beside the plot.
                    continue;
                }
                let probe = frame(a, g.x, g.y).unwrap();
                for (x, y) in drawn_pixels(&probe, p, g.x, g.y) {
                    assert!(
                        !legend::inside(lb, (x, y), 0),
                        "{lesson:?}: ({x}, {y}) under the legend {lb:?} of '{}'",
                        p.y_desc
                    );
                }
            }
        }
    }
}
