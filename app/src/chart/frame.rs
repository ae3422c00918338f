//! What every chart's frame shares: the [`Geometry`] it hands back to the page and the
//! header line above a chart (legends: [`super::legend`]).

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Where the plot area is in pixels and which data range it shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Geometry {
    pub x_px: (i32, i32),
    pub y_px: (i32, i32),
    pub x: (f64, f64),
    pub y: (f64, f64),
    /// The legend's box `[x0, y0, x1, y1]` [px], when the chart has a legend.
    pub legend: Option<[i32; 4]>,
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

    /// The pixel of data point (`x`, `y`) (the inverse of [`Geometry::x_at`] and
    /// [`Geometry::y_at`]).
    pub fn px(&self, x: f64, y: f64) -> (f64, f64) {
        let (a, b) = (self.x_px.0 as f64, self.x_px.1 as f64);
        let (top, bottom) = (self.y_px.0 as f64, self.y_px.1 as f64);
        let fx = (x - self.x.0) / (self.x.1 - self.x.0);
        let fy = (y - self.y.0) / (self.y.1 - self.y.0);
        (a + fx * (b - a), bottom - fy * (bottom - top))
    }

    /// The plot area `[x0, y0, x1, y1]` [px].
    pub fn plot_box(&self) -> [i32; 4] {
        [self.x_px.0, self.y_px.0, self.x_px.1, self.y_px.1]
    }

    /// The geometry of `chart`, which shows data range `x` × `y`.
    pub(super) fn of<DB: DrawingBackend>(
        chart: &Chart<'_, DB>,
        x: (f64, f64),
        y: (f64, f64),
    ) -> Geometry {
        let (xr, yr) = chart.plotting_area().get_pixel_range();
        Geometry {
            x_px: (xr.start, xr.end),
            y_px: (yr.start, yr.end),
            x,
            y,
            legend: None,
        }
    }
}

/// What a `draw_*` function returns: the chart's geometry, or the backend's error as text.
pub(super) type DrawResult = Result<Geometry, String>;

/// A backend's (or plotters') error as text.
pub(super) fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Height of a [`header`] line [px].
pub(super) const HEADER_PX: i32 = 28;

/// A line above a chart: its caption (which run it shows), then a legend of line samples
/// — outside the plot, so the legend never covers the data.
pub(super) fn header<DB: DrawingBackend>(
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

/// A chart with plain `f64` axes, as every chart here has.
pub(super) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
