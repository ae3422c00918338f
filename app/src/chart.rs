//! Charts, drawn with plotters onto any [`DrawingBackend`]: the page draws them onto a
//! canvas (plotters-canvas), the unit tests onto an SVG string.
//!
//! Each `draw_*` function takes plain data (no signals, no DOM) and returns the chart's
//! [`Geometry`] so the page can turn a mouse position back into data coordinates:
//!
//! * [`draw_load`] — a metric against the arrival rate (simulation, models, measured);
//! * [`draw_cdf`] — empirical CDFs of TTFT;
//! * [`draw_timeseries`] — queue, batch and KV use over one run;
//! * [`draw_timeline`] — one row per request, its phases;
//! * [`draw_panels`] — the lessons' plain x–y panels;
//! * [`draw_fleet_curves`], [`draw_replicas`] — the Fleet view's load curves and
//!   per-replica utilisation bars.
//!
//! [`DrawingBackend`]: plotters::prelude::DrawingBackend

mod cdf;
mod fleet;
mod frame;
pub mod legend;
mod load;
mod palette;
mod panels;
mod scale;
#[cfg(test)]
mod testing;
mod timeline;
mod timeseries;

pub use cdf::draw_cdf;
pub use fleet::{draw_fleet_curves, draw_replicas, fleet_model_curve, FLEET_METRICS};
pub use frame::Geometry;
pub use load::{draw_load, load_svg, LoadChart};
pub use palette::{palette, MEASURED_COLORS, MODEL_COLORS, SIM, SLO_COLOR};
pub use panels::{clip_line, draw_panels, panels_hover_text, Corner, Series, XyPanel};
pub use timeline::{draw_timeline, Span};
pub use timeseries::{draw_timeseries, StatePoint};
