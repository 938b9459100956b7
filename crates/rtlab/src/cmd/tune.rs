//! `rtlab tune`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct TuneArgs {}

pub fn run(_a: TuneArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab tune: not built yet")
}
