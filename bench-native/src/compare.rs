//! `bench-native compare` (being built).

/// Arguments of `compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {}

pub fn execute(_args: CompareArgs) -> anyhow::Result<()> {
    anyhow::bail!("'compare' is not built yet")
}
