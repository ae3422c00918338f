//! Plain x–y panels, the lessons' charts: series of lines and dots, labelled vertical
//! and horizontal lines, an optional log₂ x axis, several panels stacked on one canvas.

use super::frame::{draw_legend, err, Chart, DrawResult, Geometry};
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
            .flat_map(|s| s.points.iter().map(|q| q.1))
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

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &XyPanel) -> DrawResult {
    let (x0, x1) = p.x_range();
    let y = p.y_range();
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
    draw_legend(
        &mut chart,
        match p.legend {
            Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
            Corner::UpperRight => SeriesLabelPosition::UpperRight,
            Corner::LowerRight => SeriesLabelPosition::LowerRight,
        },
    )?;
    Ok(Geometry::of(&chart, (x0, x1), y))
}

/// One series: its line clipped at the top `ymax`, its dots below it, one legend entry.
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
    let mut labelled = false;
    if s.line {
        for piece in clip_line(&pts, ymax) {
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
                    .filter(|(_, b)| *b <= ymax)
                    .map(|&(a, b)| Circle::new((a, b), 4, col.filled())),
            )
            .map_err(err)?;
        if !labelled {
            d.label(s.name.clone())
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, col.filled()));
        }
    }
    Ok(())
}

/// The labelled vertical lines (label at the top) and horizontal lines (label in the
/// legend) that fall inside the chart's range `x` × `y`.
fn draw_rules<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    p: &XyPanel,
    (x0, x1): (f64, f64),
    y: (f64, f64),
) -> Result<(), String> {
    let grey = RGBColor(110, 110, 110);
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
    }
}
