//! `rtlab agent`: the far side of a run (`--far ssh:HOST` or `--far netns:NAME` start it).
//! It speaks rtlab's far protocol on stdin/stdout, so it is not meant to be run by hand; it
//! ends when its stdin closes, on `bye`, or when the near side falls silent for `--keepalive`,
//! and always puts its host back first.

use clap::Args;

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// End (restoring this host) when no message came from the near side for this long [6s].
    #[arg(long)]
    pub keepalive: Option<String>,
}

pub fn run(a: AgentArgs) -> anyhow::Result<u8> {
    let deadline = match &a.keepalive {
        Some(v) => super::duration_flag("--keepalive", v)?,
        None => rtlab_lab::far::protocol::KEEPALIVE_DEADLINE.as_nanos() as i64,
    };
    if deadline <= 0 {
        anyhow::bail!("--keepalive: must be above zero");
    }
    let code = rtlab_lab::far::agent::run(std::time::Duration::from_nanos(deadline as u64));
    Ok(code.clamp(0, 255) as u8)
}
