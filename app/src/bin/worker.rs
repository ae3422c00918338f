//! Sweep worker (filled in when the engine's simulator lands).
fn main() {}
