//! `rtlab pubsub`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct PubsubArgs {}

pub fn run(_a: PubsubArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab pubsub: not built yet")
}
