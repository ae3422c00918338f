//! `bench-native simulate` (being built).

/// Arguments of `simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {}

pub fn execute(_args: SimulateArgs) -> anyhow::Result<()> {
    anyhow::bail!("'simulate' is not built yet")
}
