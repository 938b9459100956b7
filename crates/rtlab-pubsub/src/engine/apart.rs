//! A case's near side in a process of its own, when this process cannot load its Fast DDS.
//!
//! A process holds one Fast DDS ([`crate::dl::claim_fast_dds`]): Debian's 2.9 once the
//! `fastdds` transport was used, or the one under a `ros2` RMW (3.2 in the package registry's
//! ROS 2). A scenario that measures `ros2` and `fastdds` side by side, or a sweep that goes
//! from one to the other, runs its cases in one `rtlab run` process: the second kind of case
//! runs here instead, in `rtlab pubsub --engine-config JSON` (hidden), which runs the same
//! engine ([`super::run_with`]) with its own role processes and reports its progress
//! and its outcome as lines on stdout (`rtlab-engine {...}`); closing its stdin stops it, as
//! a role process. The outcome says it ran apart (a note).
//!
//! What it cannot do: a far side on another host or namespace (its agent belongs to the
//! calling process: refused in one line), and `--trace-on-spike`'s flag from the receivers
//! there (the publisher's send lateness and the kernel counters still come from here; the
//! note says so). Nothing here prints but the child's own lines.

use super::placement::{
    keep_last_line, last_line, spawn_piped, stop_when_stdin_closes, MAX_CHILD_LINE,
};
use super::{ProbeError, PubsubConfig, PubsubOutcome, TransportKind};
use rtlab_core::lines::{BoundedLines, Line};
use serde::{Deserialize, Serialize};
use std::io::{BufReader, Write};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The Fast DDS the transports of `cfg` would load in this process (the near side, and a
/// far transport on this host, which is opened here once to check its limits).
fn fast_dds_needed(cfg: &PubsubConfig, far_host: bool) -> Vec<String> {
    let mut kinds = vec![cfg.transport.kind];
    if !far_host {
        kinds.extend(cfg.far_transport);
    }
    let mut out = Vec::new();
    for k in kinds {
        match k {
            TransportKind::FastDds => match cfg.transport.fastdds_lib {
                crate::transport::fastdds::FastDdsLib::Debian => {
                    out.push(crate::transport::fastdds::FAST_DDS.to_string())
                }
                crate::transport::fastdds::FastDdsLib::Ros2 => {
                    if let Some(w) =
                        crate::ros2_installation(&cfg.transport).ok().and_then(|i| i.fast_dds())
                    {
                        out.push(w);
                    }
                }
            },
            TransportKind::Ros2 => {
                if let Some(w) =
                    crate::ros2_installation(&cfg.transport).ok().and_then(|i| i.fast_dds())
                {
                    out.push(w);
                }
            }
            _ => {}
        }
    }
    out
}

/// Why `cfg`'s near side cannot run in this process (another Fast DDS is loaded here), or
/// None when it can.
pub fn conflict(cfg: &PubsubConfig, far_host: bool) -> Option<String> {
    let held = crate::dl::fast_dds_held()?;
    fast_dds_needed(cfg, far_host)
        .into_iter()
        .find(|w| *w != held)
        .map(|w| format!("this process already holds {held}, and {w} cannot be loaded beside it"))
}

/// A line of the child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum EngineLine {
    Progress(usize, usize),
    Outcome(Box<PubsubOutcome>),
    Failed { text: String, bad_input: bool, rt: bool },
}

const MARK: &str = "rtlab-engine ";

fn line(e: &EngineLine) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{}", serde_json::to_string(e).unwrap_or_default());
    let _ = out.flush();
}

/// Run `cfg` in `exe pubsub --engine-config JSON`, from the calling thread (its network
/// namespace is the child's). `why` (from [`conflict`]) goes into the notes.
pub fn run_apart(
    cfg: &PubsubConfig,
    exe: &std::path::Path,
    why: &str,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    let json = serde_json::to_string(cfg).map_err(|e| ProbeError::Setup(e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["pubsub", "--engine-config", &json]);
    rtlab_sys::process::die_with_parent(&mut cmd);
    // a group of its own: a terminal's Ctrl-C reaches this process, which stops the child
    // by closing its stdin (and keeps what it measured)
    let mut child = spawn_piped(&mut cmd)
        .map_err(|e| ProbeError::Setup(format!("starting the case's own process: {e}")))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let (last_err, err_reader) = keep_last_line(child.stderr.take().expect("piped"));
    // the stop flag closes the child's stdin
    let done = Arc::new(AtomicBool::new(false));
    let (d2, s2) = (done.clone(), stop.clone());
    let stopper = std::thread::spawn(move || {
        let mut stdin = stdin;
        while !d2.load(Ordering::Relaxed) {
            if s2.load(Ordering::Relaxed) {
                drop(stdin.take());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        drop(stdin);
    });
    let mut result: Option<Result<PubsubOutcome, ProbeError>> = None;
    // our own binary's lines; bounded all the same (a broken child cannot exhaust memory)
    for l in BoundedLines::new(BufReader::new(stdout), MAX_CHILD_LINE) {
        let Line::Text(l) = l else { continue };
        let Some(at) = l.find(MARK) else { continue };
        match serde_json::from_str::<EngineLine>(&l[at + MARK.len()..]) {
            Ok(EngineLine::Progress(d, t)) => progress(d, t),
            Ok(EngineLine::Outcome(o)) => result = Some(Ok(*o)),
            Ok(EngineLine::Failed { text, bad_input, rt }) => {
                result = Some(Err(if rt {
                    ProbeError::Rt(text)
                } else if bad_input {
                    ProbeError::Invalid(text)
                } else {
                    ProbeError::Setup(text)
                }))
            }
            Err(_) => {}
        }
    }
    done.store(true, Ordering::Relaxed);
    let _ = stopper.join();
    rtlab_sys::process::wait_or_kill(&mut child, std::time::Duration::from_secs(10));
    let _ = err_reader.join();
    let mut outcome = result.unwrap_or_else(|| {
        let why = last_line(&last_err);
        Err(ProbeError::Setup(format!(
            "the case's own process ended without an outcome: {}",
            if why.is_empty() { "no message" } else { why.as_str() }
        )))
    })?;
    for w in std::mem::take(&mut outcome.cost_windows) {
        rtlab_sys::usage::adopt(w);
    }
    outcome.notes.push(format!(
        "this case ran in a process of its own ({why}: a process holds one Fast DDS){}",
        if cfg.spike.is_some() {
            "; --trace-on-spike: its receivers cannot raise the spike flag there, the publisher's send lateness here could not either"
        } else {
            ""
        }
    ));
    Ok(outcome)
}

/// The body of `rtlab pubsub --engine-config JSON`: the engine on this process's own
/// transport, role processes started from this binary, lines on stdout. Returns the exit code.
pub fn engine_main(json: &str) -> i32 {
    let cfg: PubsubConfig = match serde_json::from_str(json) {
        Ok(c) => c,
        Err(e) => {
            line(&EngineLine::Failed {
                text: format!("bad engine configuration: {e}"),
                bad_input: true,
                rt: false,
            });
            return 2;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            line(&EngineLine::Failed {
                text: format!("finding the rtlab binary: {e}"),
                bad_input: false,
                rt: false,
            });
            return 1;
        }
    };
    let _lock = if cfg.rt.mlockall { rtlab_sys::memory::MemoryLock::lock_all().ok() } else { None };
    let stop = stop_when_stdin_closes();
    let launcher = move |json: &str| {
        let mut c = Command::new(&exe);
        c.args(["pubsub", "--role-config", json]);
        c
    };
    match super::run_with(&cfg, &launcher, None, stop, &mut |d, t| {
        line(&EngineLine::Progress(d, t))
    }) {
        Ok(mut o) => {
            // what its windows cost here (this process's threads under `apart`)
            o.cost_windows = rtlab_sys::usage::take_windows_as("apart");
            let rss = rtlab_sys::usage::max_rss_kib(std::process::id());
            for w in o.cost_windows.iter_mut() {
                w.processes.extend(rss.map(|kib| rtlab_core::cost::ProcessMemory {
                    process: "apart".into(),
                    max_rss_kib: kib,
                }));
            }
            line(&EngineLine::Outcome(Box::new(o)));
            0
        }
        Err(e) => {
            let (bad_input, rt) = (e.is_bad_input(), matches!(e, ProbeError::Rt(_)));
            line(&EngineLine::Failed { text: e.to_string(), bad_input, rt });
            if bad_input {
                2
            } else {
                1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_lines_round_trip() {
        let l = EngineLine::Failed { text: "x".into(), bad_input: true, rt: false };
        let s = serde_json::to_string(&l).unwrap();
        assert!(matches!(
            serde_json::from_str(&s).unwrap(),
            EngineLine::Failed { bad_input: true, .. }
        ));
        let p: EngineLine =
            serde_json::from_str(&serde_json::to_string(&EngineLine::Progress(2, 5)).unwrap())
                .unwrap();
        assert!(matches!(p, EngineLine::Progress(2, 5)));
    }
}
