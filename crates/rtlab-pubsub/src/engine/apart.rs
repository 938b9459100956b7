//! A case's near side in a process of its own, when this process cannot hold its middleware.
//!
//! - A process holds one Fast DDS ([`crate::dl::claim_fast_dds`]): Debian's 2.9 once the
//!   `fastdds` transport was used, or the one under a `ros2` RMW (3.2 in the package
//!   registry's ROS 2). A scenario that measures `ros2` and `fastdds` side by side, or a sweep
//!   that goes from one to the other, runs its cases in one `rtlab run` process: the second
//!   kind of case runs apart ([`conflict`]).
//! - A process holds one roscpp node, for its life, on the master and in the network
//!   namespace of its first `ros::init` (roscpp cannot start again after `ros::shutdown`): a
//!   `ros1` case in a namespace of its own (a scenario's case pair, `--netns`) runs apart, and
//!   its master (rtlab's) ends with it ([`ROS1_APART`]).
//!
//! The case runs in `rtlab pubsub --engine-config JSON` (hidden), which runs the same engine
//! ([`super::run_with`]) with its own role processes and reports its progress and its outcome
//! as lines on stdout (`rtlab-engine {...}`). A far side stays with this process, which holds
//! its agent: the child asks for each far role (`start-role`, `stop-role`) and this process
//! starts it through the agent and writes the role's events to the child's stdin
//! (`rtlab-parent {...}`); a `stop` line, or stdin closing, stops the child. The outcome says
//! it ran apart (a note).
//!
//! What it cannot do: `--trace-on-spike`'s flag from the receivers there (the publisher's send
//! lateness and the kernel counters still come from here; the note says so). Nothing here
//! prints but the child's own lines.

use super::placement::{keep_last_line, last_line, spawn_piped, FarPlacement, MAX_CHILD_LINE};
use super::TransportKind;
use super::{FarRole, FarRoles, ProbeError, PubsubConfig, PubsubOutcome, RoleConfig, RoleEvent};
use rtlab_core::lines::{BoundedLines, Line};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::process::{ChildStdin, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Why a `ros1` case in a network namespace of its own runs apart.
pub const ROS1_APART: &str =
    "roscpp holds one node per process, on the master and in the network namespace it started in";

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

/// Why `cfg`'s near side cannot run in this process, or None when it can: another Fast DDS
/// is loaded here, or a `ros1` case has a network namespace of its own (`own_netns`).
pub fn conflict(cfg: &PubsubConfig, far_host: bool, own_netns: bool) -> Option<String> {
    if cfg.transport.kind == TransportKind::Ros1 && own_netns && cfg.by_hand.is_none() {
        return Some(ROS1_APART.into());
    }
    let held = crate::dl::fast_dds_held()?;
    fast_dds_needed(cfg, far_host).into_iter().find(|w| *w != held).map(|w| {
        format!("this process already holds {held}, and {w} cannot be loaded beside it: a process holds one Fast DDS")
    })
}

/// What the child is given: the configuration, and the far link's two addresses when the
/// roles are on a far host (this process starts them there).
#[derive(Debug, Serialize, Deserialize)]
struct ApartCase {
    cfg: PubsubConfig,
    far_link: Option<(String, String)>,
}

/// A line of the child.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum EngineLine {
    Progress(usize, usize),
    Outcome(Box<PubsubOutcome>),
    Failed {
        text: String,
        bad_input: bool,
        rt: bool,
    },
    /// Start this role on the far host.
    StartRole(Box<RoleConfig>),
    /// Stop the far role of this index.
    StopRole(usize),
}

/// A line of the parent, on the child's stdin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ParentLine {
    /// The far role of this index started (None), or why not.
    Started(usize, Option<String>),
    /// An event of the far role of this index.
    Event(usize, RoleEvent),
    /// Stop the case (as stdin closing does).
    Stop,
}

const MARK: &str = "rtlab-engine ";
const PARENT: &str = "rtlab-parent ";
/// How long the child waits for a far role to start (the agent's own set-up is shorter).
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn line(e: &EngineLine) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{MARK}{}", serde_json::to_string(e).unwrap_or_default());
    let _ = out.flush();
}

/// The child's stdin, shared by the threads that write to it; None once closed.
type SharedStdin = Arc<Mutex<Option<ChildStdin>>>;

fn tell(stdin: &SharedStdin, l: &ParentLine) {
    let mut g = stdin.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = g.as_mut() {
        let text = serde_json::to_string(l).unwrap_or_default();
        if writeln!(s, "{PARENT}{text}").and_then(|()| s.flush()).is_err() {
            *g = None;
        }
    }
}

/// The far roles the child asked for, started through this process's agent.
struct FarHere<'a> {
    far: Option<&'a FarPlacement<'a>>,
    events: mpsc::Sender<(usize, RoleEvent)>,
    started: Vec<(usize, Box<dyn FarRole>)>,
}

impl FarHere<'_> {
    fn start(&mut self, rc: &RoleConfig, stdin: &SharedStdin) {
        let got = match self.far {
            Some(f) => f.roles.start(rc, self.events.clone()),
            None => Err("no far side in this run".into()),
        };
        let why = match got {
            Ok(r) => {
                self.started.push((rc.index, r));
                None
            }
            Err(e) => Some(e),
        };
        tell(stdin, &ParentLine::Started(rc.index, why));
    }

    /// Stop the far role of `index`; it leaves the list (stopped once).
    fn stop(&mut self, index: usize) {
        self.started.retain_mut(|(i, r)| {
            if *i == index {
                r.stop();
            }
            *i != index
        });
    }
}

impl Drop for FarHere<'_> {
    /// Every far role the child did not stop is asked to (it may have ended without asking).
    fn drop(&mut self) {
        for (_, r) in self.started.iter_mut() {
            r.stop();
        }
    }
}

/// Run `cfg` in `exe pubsub --engine-config JSON`, from the calling thread (its network
/// namespace is the child's), its roles on `far` when given (started here, for the child).
/// `why` (from [`conflict`]) goes into the notes.
pub fn run_apart(
    cfg: &PubsubConfig,
    exe: &std::path::Path,
    why: &str,
    far: Option<&FarPlacement>,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    let case =
        ApartCase { cfg: cfg.clone(), far_link: far.map(|f| (f.near.clone(), f.far.clone())) };
    let json = serde_json::to_string(&case).map_err(|e| ProbeError::Setup(e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["pubsub", "--engine-config", &json]);
    rtlab_sys::process::die_with_parent(&mut cmd);
    // a group of its own: a terminal's Ctrl-C reaches this process, which stops the child
    // with a line (and keeps what it measured)
    let mut child = spawn_piped(&mut cmd)
        .map_err(|e| ProbeError::Setup(format!("starting the case's own process: {e}")))?;
    let stdin: SharedStdin = Arc::new(Mutex::new(child.stdin.take()));
    let stdout = child.stdout.take().expect("piped");
    let (last_err, err_reader) = keep_last_line(child.stderr.take().expect("piped"));
    // the stop flag tells the child once (its far roles' reports still reach it)
    let done = Arc::new(AtomicBool::new(false));
    let (d2, s2, in2) = (done.clone(), stop.clone(), stdin.clone());
    let stopper = std::thread::spawn(move || {
        while !d2.load(Ordering::Relaxed) {
            if s2.load(Ordering::Relaxed) {
                tell(&in2, &ParentLine::Stop);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    // the far roles' events, written to the child as they come
    let (events, from_far) = mpsc::channel::<(usize, RoleEvent)>();
    let in3 = stdin.clone();
    std::thread::spawn(move || {
        for (i, e) in from_far {
            tell(&in3, &ParentLine::Event(i, e));
        }
    });
    let mut far_here = FarHere { far, events, started: Vec::new() };
    let mut result: Option<Result<PubsubOutcome, ProbeError>> = None;
    // our own binary's lines; bounded all the same (a broken child cannot exhaust memory)
    for l in BoundedLines::new(BufReader::new(stdout), MAX_CHILD_LINE) {
        let Line::Text(l) = l else { continue };
        let Some(at) = l.find(MARK) else { continue };
        match serde_json::from_str::<EngineLine>(&l[at + MARK.len()..]) {
            Ok(EngineLine::StartRole(rc)) => far_here.start(&rc, &stdin),
            Ok(EngineLine::StopRole(i)) => far_here.stop(i),
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
    drop(far_here);
    // closing stdin ends the event writer with it (a far role that never ends keeps only
    // its sender)
    drop(stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
    rtlab_sys::process::wait_or_kill(&mut child, Duration::from_secs(10));
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
        "this case ran in a process of its own ({why}){}",
        if cfg.spike.is_some() {
            "; --trace-on-spike: its receivers cannot raise the spike flag there, the publisher's send lateness here could not either"
        } else {
            ""
        }
    ));
    Ok(outcome)
}

/// The child's far roles: each started by the parent, its events read from stdin.
#[derive(Default)]
struct RelayRoles {
    routes: Mutex<HashMap<usize, Route>>,
}

struct Route {
    events: mpsc::Sender<(usize, RoleEvent)>,
    started: Option<mpsc::SyncSender<Option<String>>>,
}

impl FarRoles for RelayRoles {
    fn start(
        &self,
        rc: &RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
    ) -> Result<Box<dyn FarRole>, String> {
        let (tx, rx) = mpsc::sync_channel(1);
        let route = Route { events, started: Some(tx) };
        self.routes.lock().unwrap_or_else(|e| e.into_inner()).insert(rc.index, route);
        line(&EngineLine::StartRole(Box::new(rc.clone())));
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(None) => Ok(Box::new(RelayRole(rc.index))),
            Ok(Some(why)) => Err(why),
            Err(_) => {
                Err(format!("the parent did not start it within {} s", START_TIMEOUT.as_secs()))
            }
        }
    }
}

/// A far role the parent started.
struct RelayRole(usize);

impl FarRole for RelayRole {
    fn stop(&mut self) {
        line(&EngineLine::StopRole(self.0));
    }
}

/// Read the parent's lines: far roles' starts and events go to their routes; `stop`, or
/// stdin closing, sets the returned flag.
fn read_parent(relay: Arc<RelayRoles>) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    std::thread::spawn(move || {
        for l in BoundedLines::new(std::io::stdin().lock(), MAX_CHILD_LINE) {
            let Line::Text(l) = l else { continue };
            let Some(at) = l.find(PARENT) else { continue };
            let mut routes = relay.routes.lock().unwrap_or_else(|e| e.into_inner());
            match serde_json::from_str::<ParentLine>(&l[at + PARENT.len()..]) {
                Ok(ParentLine::Stop) => s2.store(true, Ordering::Relaxed),
                Ok(ParentLine::Started(i, why)) => {
                    if let Some(tx) = routes.get_mut(&i).and_then(|r| r.started.take()) {
                        let _ = tx.send(why);
                    }
                }
                Ok(ParentLine::Event(i, e)) => {
                    if let Some(r) = routes.get(&i) {
                        let _ = r.events.send((i, e));
                    }
                }
                Err(_) => {}
            }
        }
        s2.store(true, Ordering::Relaxed);
    });
    stop
}

/// The body of `rtlab pubsub --engine-config JSON`: the engine on this process's own
/// transport, role processes started from this binary (or far roles the parent starts),
/// lines on stdout. Returns the exit code.
pub fn engine_main(json: &str) -> i32 {
    let ApartCase { cfg, far_link } = match serde_json::from_str(json) {
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
    let relay = Arc::new(RelayRoles::default());
    let stop = read_parent(relay.clone());
    let launcher = move |json: &str| {
        let mut c = Command::new(&exe);
        c.args(["pubsub", "--role-config", json]);
        c
    };
    let placement = far_link.map(|(near, far)| FarPlacement { near, far, roles: relay.as_ref() });
    match super::run_with(&cfg, &launcher, placement.as_ref(), stop, &mut |d, t| {
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
        let l = ParentLine::Event(3, RoleEvent::Warm(7));
        let back: ParentLine = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert!(matches!(back, ParentLine::Event(3, RoleEvent::Warm(7))));
        let l = ParentLine::Started(1, Some("no agent".into()));
        let back: ParentLine = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert!(matches!(back, ParentLine::Started(1, Some(w)) if w == "no agent"));
    }
}
