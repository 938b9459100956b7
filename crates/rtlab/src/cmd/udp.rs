//! `rtlab udp`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct UdpArgs {}

pub fn run(_a: UdpArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab udp: not built yet")
}
