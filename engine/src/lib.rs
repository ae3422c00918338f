//! kvqueue engine.
pub mod analytic;
pub mod config;
pub mod cost;
pub mod data;
pub mod error;
pub mod kv_cache;
pub mod metrics;
pub mod record;
pub mod scheduler;
pub mod sim;
pub mod sweep;
pub mod workload;
pub use config::{Admission, EndRule, FirstToken, KvMode, Policy, ServerConfig, SimConfig};
pub use error::ConfigError;
