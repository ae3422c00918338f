//! `bench-native run` (being built).

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

pub fn execute(_args: RunArgs) -> anyhow::Result<()> {
    anyhow::bail!("'run' is not built yet")
}
