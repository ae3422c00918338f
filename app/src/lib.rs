//! kvqueue web app: a static Leptos page that sweeps the engine's simulator over arrival
//! rates (in a Web Worker), overlays analytical models and dropped measurements, and
//! answers "what capacity meets my SLO, and what limits it".
//!
//! Everything but the page glue is plain Rust tested natively: [`params`] (the view and
//! its URL), [`measured`] (file parsers), [`curves`] (aggregation, CSV, capacity) and
//! [`chart`] (plotters drawing, generic over the backend), [`learn`] (the lessons and
//! their experiments), [`watch`] (the animation of a short run: its record, replay and
//! drawing), [`fleet`] (the Fleet view: replicas behind a router, its URL and work),
//! [`plan`] (the Plan view: the cheapest fleet that meets an SLO, its URL and work).

pub mod adopt;
pub mod as_run;
pub mod chart;
pub mod curves;
#[cfg(target_arch = "wasm32")]
pub mod drop;
#[cfg(target_arch = "wasm32")]
pub mod export;
pub mod fleet;
pub mod format;
pub mod job;
pub mod learn;
#[cfg(target_arch = "wasm32")]
pub mod learn_ui;
pub mod measured;
pub mod metric;
pub mod params;
pub mod plan;
pub mod pool;
pub mod report;
#[cfg(target_arch = "wasm32")]
pub mod report_ui;
#[cfg(target_arch = "wasm32")]
pub mod trace_ui;
#[cfg(target_arch = "wasm32")]
pub mod ui;
pub mod watch;
#[cfg(target_arch = "wasm32")]
pub mod watch_ui;
