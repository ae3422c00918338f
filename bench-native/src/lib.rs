//! bench-native library: the logic behind each subcommand, callable from tests.
pub mod args;
pub mod cli;
pub mod client;
pub mod compare;
pub mod fit;
pub mod fleet;
pub mod like;
pub mod microbench;
pub mod plan;
pub mod prom;
pub mod run;
pub mod server_sweep;
pub mod simulate;
pub mod sse;
pub mod sweep;
pub mod table;
pub mod validate;
