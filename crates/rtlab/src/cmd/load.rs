//! `rtlab load`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct LoadArgs {}

pub fn run(_a: LoadArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab load: not built yet")
}
