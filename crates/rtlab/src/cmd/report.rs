//! `rtlab report`: not built yet (placeholder until its issue lands).

use clap::Args;

#[derive(Args, Debug)]
pub struct ReportArgs {}

pub fn run(_a: ReportArgs) -> anyhow::Result<u8> {
    anyhow::bail!("rtlab report: not built yet")
}
