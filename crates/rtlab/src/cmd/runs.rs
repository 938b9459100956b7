//! `rtlab runs`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct RunsArgs {}

pub fn run(_a: RunsArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab runs: not built yet")
}
