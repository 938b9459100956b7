//! `rtlab netns`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct NetnsArgs {}

pub fn run(_a: NetnsArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab netns: not built yet")
}
