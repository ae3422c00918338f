//! `bench-native fit` (being built).

/// Arguments of `fit`.
#[derive(Debug, clap::Args)]
pub struct FitArgs {}

pub fn execute(_args: FitArgs) -> anyhow::Result<()> {
    anyhow::bail!("'fit' is not built yet")
}
