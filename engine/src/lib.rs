//! kvqueue engine.
pub mod analytic;
pub mod config;
pub mod cost;
pub mod data;
pub mod error;
pub mod metrics;
pub mod record;
pub mod workload;
pub use config::{Admission, EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
pub use error::ConfigError;
