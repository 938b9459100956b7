//! `rtlab compare`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct CompareArgs {}

pub fn run(_a: CompareArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab compare: not built yet")
}
