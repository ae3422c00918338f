//! The Fleet view's charts: four load curves of the fleet (mean and p99 TTFT, mean TPOT,
//! throughput) in a 2 × 2 grid, each a [`draw_load`] with its legend beside it, and the
//! per-replica utilisation bars of one run.

use super::frame::{err, DrawResult, Geometry};
use super::legend::{self, Entry, Glyph};
use super::load::{draw_load, LoadChart};
use super::palette::{SIM, SLO_COLOR};
use crate::curves::{CurvePoint, ModelCurve};
use crate::fleet::{model_name, FleetDetail, FleetModel};
use crate::metric::Metric;
use engine::analytic::Predicted;
use plotters::coord::Shift;
use plotters::prelude::*;

/// The fleet's metrics, in the order of the grid (left to right, top to bottom).
pub const FLEET_METRICS: [Metric; 4] = [
    Metric::MeanTtft,
    Metric::P99Ttft,
    Metric::MeanTpot,
    Metric::Goodput,
];

/// The model's value of `m` (None for a metric it does not predict).
fn pick(x: &Predicted, m: Metric) -> Option<f64> {
    match m {
        Metric::MeanTtft => Some(x.ttft_mean_s),
        Metric::P99Ttft => Some(x.ttft_p99_s),
        Metric::MeanTpot => Some(x.tpot_mean_s),
        Metric::Goodput => Some(x.goodput_rps),
        _ => None,
    }
}

/// The model's line for `m`, named as [`model_name`] says.
pub fn fleet_model_curve(model: &FleetModel, m: Metric) -> Option<ModelCurve> {
    if model.points.is_empty() {
        return None;
    }
    Some(ModelCurve {
        name: model_name(model.router),
        slot: 0,
        points: model
            .points
            .iter()
            .map(|(r, x)| {
                (
                    *r,
                    x.as_ref()
                        .and_then(|x| pick(x, m))
                        .filter(|v| v.is_finite()),
                )
            })
            .collect(),
    })
}

/// The four load curves in a 2 × 2 grid; returns each panel's geometry.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_fleet_curves<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: &[CurvePoint],
    model: Option<&FleetModel>,
    chosen_rate: f64,
) -> Result<Vec<Geometry>, String> {
    area.fill(&WHITE).map_err(err)?;
    let mut out = Vec::new();
    for (panel, m) in area.split_evenly((2, 2)).iter().zip(FLEET_METRICS) {
        let models: Vec<ModelCurve> = model
            .and_then(|x| fleet_model_curve(x, m))
            .into_iter()
            .collect();
        let chart = LoadChart {
            metric: m,
            points,
            models: &models,
            chosen_rate: Some(chosen_rate),
            ..LoadChart::default()
        };
        out.push(draw_load(panel, &chart)?);
    }
    area.present().map_err(err)?;
    Ok(out)
}

/// One bar per replica: the fraction of the run it spent running iterations, the fleet's
/// mean as a dashed line, the legend in a column beside the plot.
///
/// # Errors
/// The backend's drawing error, as text.
pub fn draw_replicas<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    d: &FleetDetail,
) -> DrawResult {
    area.fill(&WHITE).map_err(err)?;
    let n = d.utilisation.len();
    let mean = if n > 0 {
        d.utilisation.iter().sum::<f64>() / n as f64
    } else {
        0.0
    };
    let entries = vec![
        Entry {
            group: "simulation, seed 0",
            label: format!(
                "utilisation per replica at λ = {} req/s",
                crate::format::sig3(d.rate)
            ),
            glyph: Glyph::Block(SIM),
        },
        Entry {
            group: "simulation, seed 0",
            label: format!("fleet mean {mean:.3}"),
            glyph: Glyph::Line {
                col: SLO_COLOR,
                dashed: true,
            },
        },
    ];
    let (plot, side) = legend::column(area, &entries)?;
    // Replica i is centred on x = i, so the axis' integer ticks name the bars.
    let x = (-0.5, n.max(1) as f64 - 0.5);
    let y = (0.0, 1.0);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d(x.0..x.1, y.0..y.1)
        .map_err(err)?;
    let step = (n / 16).max(1);
    let x_fmt = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize).is_multiple_of(step) {
            format!("{}", i as usize)
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.clamp(1, 64) + 1)
        .x_label_formatter(&x_fmt)
        .x_desc("replica")
        .y_desc("utilisation (busy fraction)")
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let gap = if n > 32 { 0.1 } else { 0.18 };
    chart
        .draw_series(d.utilisation.iter().enumerate().map(|(i, u)| {
            let i = i as f64;
            Rectangle::new(
                [(i - 0.5 + gap, 0.0), (i + 0.5 - gap, u.clamp(0.0, 1.0))],
                SIM.filled(),
            )
        }))
        .map_err(err)?;
    let mut dash = Vec::new();
    let mut t = x.0;
    while t < x.1 {
        dash.push(PathElement::new(
            vec![(t, mean), ((t + 0.25).min(x.1), mean)],
            SLO_COLOR.stroke_width(2),
        ));
        t += 0.4;
    }
    chart.draw_series(dash).map_err(err)?;
    let mut geo = Geometry::of(&chart, x, y);
    if let Some(side) = side {
        geo.legend = Some(legend::draw_column(&side, &entries, geo.y_px.0)?);
    }
    area.present().map_err(err)?;
    Ok(geo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::fleet::RouterKind;

    #[test]
    fn the_bars_chart_draws_one_bar_per_replica_and_the_curves_four_panels() {
        let d = FleetDetail {
            rate: 12.0,
            router: RouterKind::RoundRobin,
            utilisation: vec![0.5, 0.6, 0.7],
            routed: vec![10, 11, 12],
            imbalance: 1.2,
        };
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (900, 300)).into_drawing_area();
            draw_replicas(&root, &d).unwrap();
        }
        // One filled rectangle of the simulation's colour per replica, plus the legend's.
        let blue = s.matches("fill=\"#0072B2\"").count();
        assert_eq!(blue, 3 + 1, "{blue}");
        let mut s = String::new();
        {
            let root = SVGBackend::with_string(&mut s, (1200, 800)).into_drawing_area();
            let geos = draw_fleet_curves(&root, &[], None, 4.0).unwrap();
            assert_eq!(geos.len(), 4);
        }
    }
}
