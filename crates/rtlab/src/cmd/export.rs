//! `rtlab export`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct ExportArgs {}

pub fn run(_a: ExportArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab export: not built yet")
}
