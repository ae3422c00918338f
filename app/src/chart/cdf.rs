//! Empirical CDFs of TTFT: the simulation's sample and each measured one, with the SLO.

use super::frame::{draw_legend, err, DrawResult, Geometry};
use super::palette::{MEASURED_COLORS, SIM, SLO_COLOR};
use super::scale::nice_max;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

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
    Ok(Geometry::of(&chart, x, y))
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
        assert!(s.contains("TTFT SLO") && s.contains("<polyline"));
    }
}
