//! bench-native library: the logic behind each subcommand, callable from tests.
pub mod cli;
pub mod compare;
pub mod fit;
pub mod microbench;
pub mod run;
pub mod simulate;
pub mod sweep;
pub mod client;
pub mod prom;
pub mod sse;
