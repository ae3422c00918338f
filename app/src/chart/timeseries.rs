//! The server's state over one run: queue and running batch, and KV use.

use super::frame::{err, header, DrawResult, Geometry, HEADER_PX};
use super::palette::{MODEL_COLORS, SIM};
use super::scale::{count_label, count_max, nice_max, time_label};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One sample of the server's state over time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StatePoint {
    /// Time [s].
    pub t: f64,
    pub waiting: f64,
    pub running: f64,
    /// KV tokens in use [tokens].
    pub kv_used: f64,
    /// Prefix cache: tokens of the blocks in the cache, held by a request or idle
    /// [tokens] (0 with the cache off).
    #[serde(default)]
    pub kv_cached: f64,
}

/// Queue length and running batch (top) and KV use as a fraction of capacity (bottom)
/// over time, under a header naming the run (`caption`) with the legend; `window`
/// (0, 1] shows that first fraction of the run.
///
/// # Errors
/// The backend's drawing error, as text.
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
    let col_kv = MODEL_COLORS[1];
    let col_cached = MODEL_COLORS[2];
    let cached = pts.iter().any(|p| p.kv_cached > 0.0);
    let mut legend = vec![("waiting (queue)", col_w), ("running (batch)", SIM)];
    if cached {
        legend.extend([
            ("KV used", col_kv),
            ("KV in the prefix cache (held or idle)", col_cached),
        ]);
    }
    header(&head, caption, &legend)?;
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
    let geo = Geometry::of(&chart, x, (0.0, nmax));
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
        .y_desc(if cached {
            "KV / capacity"
        } else {
            "KV used / capacity"
        })
        .y_labels(6)
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    kv.draw_series(
        AreaSeries::new(
            pts.iter().map(|p| (p.t, p.kv_used / cap)),
            0.0,
            col_kv.mix(0.3),
        )
        .border_style(col_kv),
    )
    .map_err(err)?;
    if cached {
        // Dashed, so it reads apart from the used area without its colour.
        kv.draw_series(DashedLineSeries::new(
            pts.iter().map(|p| (p.t, p.kv_cached / cap)),
            6,
            4,
            col_cached.stroke_width(2),
        ))
        .map_err(err)?;
    }
    area.present().map_err(err)?;
    Ok(geo)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{svg, texts};
    use super::*;

    #[test]
    fn count_axes_have_whole_number_ticks() {
        let pts: Vec<StatePoint> = (0..50)
            .map(|i| StatePoint {
                t: i as f64,
                waiting: (i % 7) as f64,
                running: 3.0,
                kv_used: 0.0,
                kv_cached: 0.0,
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
    }

    #[test]
    fn the_timeseries_says_which_run_it_shows() {
        let pts: Vec<StatePoint> = (0..50)
            .map(|i| StatePoint {
                t: i as f64,
                waiting: (i % 7) as f64,
                running: 4.0,
                kv_used: 100.0 * i as f64,
                kv_cached: 0.0,
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
        assert!(!s.contains("prefix cache"), "no cache line without a cache");
    }

    #[test]
    fn the_prefix_cache_occupancy_is_drawn_with_its_legend() {
        let pts: Vec<StatePoint> = (0..50)
            .map(|i| StatePoint {
                t: i as f64,
                waiting: 0.0,
                running: 4.0,
                kv_used: 1000.0,
                kv_cached: 40.0 * i as f64,
            })
            .collect();
        let s = svg(|root| {
            draw_timeseries(root, &pts, 8192.0, "run", 1.0).unwrap();
        });
        assert!(
            s.contains("KV in the prefix cache (held or idle)"),
            "legend"
        );
        assert!(s.contains("stroke-dasharray") || s.matches("<polyline").count() >= 3);
    }
}
