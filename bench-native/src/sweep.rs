//! `bench-native sweep` and `merge` (being built).

/// Arguments of `sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {}

/// Arguments of `merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {}

pub fn execute(_args: SweepArgs) -> anyhow::Result<()> {
    anyhow::bail!("'sweep' is not built yet")
}

pub fn merge(_args: MergeArgs) -> anyhow::Result<()> {
    anyhow::bail!("'merge' is not built yet")
}
