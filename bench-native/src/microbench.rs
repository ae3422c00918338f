//! `bench-native microbench` (being built).

/// Arguments of `microbench`.
#[derive(Debug, clap::Args)]
pub struct MicrobenchArgs {}

pub fn execute(_args: MicrobenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("'microbench' is not built yet")
}
