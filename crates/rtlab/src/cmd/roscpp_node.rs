//! `rtlab roscpp-node JSON`: one roscpp node with one timer, started by `rtlab timer --mode
//! roscpp*` in a process of its own (rtlab-lab `probes::roscpp_node`), so not meant to be run
//! by hand. It prints one JSON line, its report; exit 0 when it ran, 2 when it could not.

use clap::Args;

#[derive(Args, Debug)]
pub struct RoscppNodeArgs {
    /// The node's configuration (JSON), from its parent.
    pub config: String,
}

pub fn run(a: RoscppNodeArgs) -> anyhow::Result<u8> {
    let (code, report) = rtlab_lab::probes::roscpp_node::run(&a.config);
    println!("{}", serde_json::to_string(&report)?);
    Ok(code)
}
