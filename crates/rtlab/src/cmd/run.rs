//! `rtlab run`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct RunArgs {}

pub fn run(_a: RunArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab run: not built yet")
}
