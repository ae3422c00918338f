//! Empirical CDFs of TTFT: the simulation's sample and each measured one, with the SLO.

use super::frame::{err, Chart, DrawResult, Geometry};
use super::legend::{self, Entry, Glyph};
use super::palette::{MEASURED_COLORS, SIM, SLO_COLOR};
use super::scale::nice_max;
use crate::format;
use plotters::coord::Shift;
use plotters::prelude::*;

/// The empty frame of the chart on `area`: axes for `x` × `y`.
fn frame<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    x: (f64, f64),
    y: (f64, f64),
) -> Result<Chart<'a, DB>, String> {
    ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)
}

/// Each sample's CDF as (TTFT [s], fraction ≤), thinned to ≤ 2000 vertices.
fn lines(samples: &[(String, Vec<f64>)]) -> Vec<Vec<(f64, f64)>> {
    samples
        .iter()
        .map(|(_, v)| {
            let mut s = v.clone();
            s.sort_by(f64::total_cmp);
            let n = s.len().max(1) as f64;
            let step = (s.len() / 2000).max(1);
            s.iter()
                .enumerate()
                .step_by(step)
                .map(|(k, t)| (*t, (k + 1) as f64 / n))
                .collect()
        })
        .collect()
}

fn color(i: usize) -> RGBColor {
    if i == 0 {
        SIM
    } else {
        MEASURED_COLORS[(i - 1) % MEASURED_COLORS.len()]
    }
}

/// Empirical CDFs of TTFT samples [s], one line per labelled sample; the legend goes in
/// a corner no line passes through, else beside the plot.
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
    let lines = lines(samples);
    let slo = slo.filter(|s| *s < x.1);
    let mut entries: Vec<Entry> = samples
        .iter()
        .enumerate()
        .map(|(i, (label, _))| Entry {
            group: if i == 0 { "simulation" } else { "measured" },
            label: label.clone(),
            glyph: Glyph::Line {
                col: color(i),
                dashed: false,
            },
        })
        .collect();
    if let Some(slo) = slo {
        entries.push(Entry {
            group: "target",
            label: format!("TTFT SLO ({})", format::latency(slo)),
            glyph: Glyph::Line {
                col: SLO_COLOR,
                dashed: true,
            },
        });
    }
    // Where the lines are drawn, in pixels: the legend must not cover them.
    let corner = {
        let probe = frame(area, x, y)?;
        let mut drawn = Vec::new();
        for l in &lines {
            let px: Vec<(i32, i32)> = l.iter().map(|p| probe.backend_coord(p)).collect();
            drawn.extend(legend::trace(&px, 4.0));
        }
        if let Some(s) = slo {
            drawn.extend(legend::trace(
                &[
                    probe.backend_coord(&(s, 0.0)),
                    probe.backend_coord(&(s, 1.0)),
                ],
                4.0,
            ));
        }
        let (xr, yr) = probe.plotting_area().get_pixel_range();
        let plot = [xr.start, yr.start, xr.end, yr.end];
        let size = legend::size(area, &entries, legend::COLUMN_TEXT)?;
        legend::clear_corner(plot, size, &drawn, &[2, 3, 0, 1])
    };
    let (plot, side) = match corner {
        Some(_) => (area.clone(), None),
        None => legend::column(area, &entries)?,
    };
    let mut chart = frame(&plot, x, y)?;
    let x_fmt = |v: &f64| format::tick(crate::metric::Metric::MeanTtft, *v);
    chart
        .configure_mesh()
        .x_desc("TTFT")
        .y_desc("fraction of requests ≤ x")
        .x_label_formatter(&x_fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    for (i, pts) in lines.into_iter().enumerate() {
        chart
            .draw_series(LineSeries::new(pts, color(i).stroke_width(2)))
            .map_err(err)?;
    }
    if let Some(slo) = slo {
        chart
            .draw_series(DashedLineSeries::new(
                [(slo, 0.0), (slo, 1.0)],
                8,
                5,
                SLO_COLOR.stroke_width(2),
            ))
            .map_err(err)?;
    }
    let mut geo = Geometry::of(&chart, x, y);
    if !entries.is_empty() {
        geo.legend = Some(match (corner, side) {
            (Some(at), _) => legend::draw(area, &entries, at, legend::COLUMN_TEXT)?,
            (None, Some(side)) => legend::draw_column(&side, &entries, geo.y_px.0)?,
            (None, None) => return Err("no room for the legend".into()),
        });
    }
    area.present().map_err(err)?;
    Ok(geo)
}

#[cfg(test)]
mod tests {
    use super::super::testing::svg;
    use super::*;

    #[test]
    fn a_cdf_draws_its_line_and_the_slo() {
        let s = svg(|root| {
            draw_cdf(root, &[("sim".into(), vec![0.3, 0.1, 0.2])], Some(0.25)).unwrap();
        });
        assert!(s.contains("TTFT SLO (250 ms)") && s.contains("<polyline"));
    }

    #[test]
    fn the_cdf_legend_covers_no_line() {
        let sample: Vec<f64> = (1..=200).map(|i| 0.01 * i as f64).collect();
        let mut geo = Geometry::default();
        svg(|root| geo = draw_cdf(root, &[("sim".into(), sample.clone())], Some(1.0)).unwrap());
        let lb = geo.legend.expect("a legend");
        let n = sample.len() as f64;
        for (k, t) in sample.iter().enumerate() {
            let (px, py) = geo.px(*t, (k + 1) as f64 / n);
            let inside = (lb[0] as f64..=lb[2] as f64).contains(&px)
                && (lb[1] as f64..=lb[3] as f64).contains(&py);
            assert!(!inside, "({px}, {py}) under the legend {lb:?}");
        }
    }
}
