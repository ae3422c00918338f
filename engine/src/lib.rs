//! kvqueue engine.
pub mod cost;
pub mod data;
pub mod error;
pub mod metrics;
pub mod record;
pub mod workload;
pub use error::ConfigError;
