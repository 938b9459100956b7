//! One module per command: flags -> config, run, render, write.

use crate::cli::{Cli, Command};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub mod compare;
pub mod export;
pub mod load;
pub mod netns;
pub mod pubsub;
pub mod report;
pub mod run;
pub mod runs;
pub mod timer;
pub mod tune;
pub mod udp;

pub fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Timer(a) => timer::run(a),
        Command::Udp(a) => udp::run(a),
        Command::Netns(a) => netns::run(a),
        Command::Pubsub(a) => pubsub::run(a),
        Command::Load(a) => load::run(a),
        Command::Tune(a) => tune::run(a),
        Command::Run(a) => run::run(a),
        Command::Runs(a) => runs::run(a),
        Command::Report(a) => report::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Export(a) => export::run(a),
    }
}

/// A flag raised by the first Ctrl-C (or SIGTERM); a second Ctrl-C exits at once.
/// The handler only sets the flag (nothing is printed from a signal handler).
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// Parse a duration flag, naming the flag on error.
pub fn duration_flag(flag: &str, v: &str) -> anyhow::Result<i64> {
    rtlab_core::units::parse_duration(v).map(|n| n.0).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
}

/// The CPU list of `--cpus`, checked against the online CPUs.
pub fn cpus_flag(v: &str) -> anyhow::Result<Vec<usize>> {
    let cpus =
        rtlab_sys::cpus::parse_cpu_list(v).map_err(|e| anyhow::anyhow!("--cpus {v}: {e}"))?;
    let (online, text) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    if cpus.is_empty() {
        anyhow::bail!("--cpus '{v}': no CPU given (online: {text})");
    }
    if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
        anyhow::bail!("--cpus {v}: CPU {c} is not online (online: {text})");
    }
    Ok(cpus)
}
