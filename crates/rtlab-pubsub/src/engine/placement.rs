//! Where a case's roles run, and starting them there: threads of this process, processes of
//! this host (started by a [`Launcher`], speaking [`RoleEvent`] lines), or a far host
//! ([`FarPlacement`]: another computer or a network namespace, through its agent's
//! [`FarRoles`]). A started role is a [`RoleHandle`]; [`Roles`] stops every one still
//! running when dropped, also on an error path.
//!
//! Set-up and tear-down only: nothing here runs in the measured phase.

use super::case::CaseSetup;
use super::outcome::ProbeError;
use super::role::{parse_event, run_role, RoleConfig, RoleEvent};
use super::threads::RtUse;
use crate::transport::Transport;
use rtlab_sys::sched::spawn_rt;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// How role processes are started: the command that runs [`role_main`](super::role_main) with this JSON.
pub type Launcher<'a> = &'a dyn Fn(&str) -> Command;

/// Roles on a far host: another computer, or a network namespace, reached through an agent.
pub trait FarRoles: Sync {
    /// Start role `rc` there; its events go to `events`, tagged with `rc.index`, ending with
    /// `Done` or `Failed` (also when the link to the far host is lost).
    fn start(
        &self,
        rc: &RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
    ) -> Result<Box<dyn FarRole>, String>;
}

/// A role started on a far host.
pub trait FarRole: Send {
    /// Ask it to stop: it reports (`Done`) and ends.
    fn stop(&mut self);
}

/// Where the roles run when they are on a far host, and the two addresses of the link.
pub struct FarPlacement<'a> {
    /// This host's address on the link.
    pub near: String,
    /// The far host's address on the link.
    pub far: String,
    pub roles: &'a dyn FarRoles,
}

/// A started role: a thread or a process, with its stop signal.
pub(super) enum RoleHandle {
    Thread {
        stop: Arc<AtomicBool>,
        thread: Option<rtlab_sys::sched::RtThread<()>>,
    },
    Process {
        child: Child,
        stdin: Option<ChildStdin>,
    },
    /// On the far host (its agent waits for it to end).
    Far(Box<dyn FarRole>),
}

impl RoleHandle {
    pub(super) fn stop(&mut self) {
        match self {
            RoleHandle::Thread { stop, .. } => stop.store(true, Ordering::Relaxed),
            RoleHandle::Process { stdin, .. } => drop(stdin.take()), // EOF = stop
            RoleHandle::Far(r) => r.stop(),
        }
    }
    fn finish(mut self) {
        self.stop();
        match self {
            RoleHandle::Thread { thread, .. } => {
                if let Some(t) = thread {
                    let _ = t.join();
                }
            }
            RoleHandle::Far(_) => {}
            RoleHandle::Process { mut child, .. } => {
                rtlab_sys::process::wait_or_kill(&mut child, std::time::Duration::from_secs(5));
            }
        }
    }
}

/// Stops every role still running when dropped (also on an error path).
pub(super) struct Roles(pub(super) Vec<RoleHandle>);

impl Drop for Roles {
    fn drop(&mut self) {
        for r in self.0.drain(..) {
            r.finish();
        }
    }
}

impl CaseSetup<'_> {
    /// Start role `rc`: on the far host, as a thread of this process, or as a process
    /// `launcher` starts; its events go to `events`, tagged with its index.
    pub(super) fn start_role(
        &self,
        rc: RoleConfig,
        events: mpsc::Sender<(usize, RoleEvent)>,
        launcher: Launcher,
    ) -> Result<RoleHandle, ProbeError> {
        let index = rc.index;
        if let Some(f) = self.far {
            let mut rc = rc;
            // the far host's CPUs are its own
            rc.rt.cpus = None;
            return f
                .roles
                .start(&rc, events)
                .map(RoleHandle::Far)
                .map_err(|e| ProbeError::Setup(format!("far subscriber {index}: {e}")));
        }
        if self.in_process {
            return start_thread(rc, events, self.transport.clone());
        }
        start_process(&rc, events, launcher)
    }
}

/// Role `rc` on an app thread of this process, on `transport`.
fn start_thread(
    rc: RoleConfig,
    events: mpsc::Sender<(usize, RoleEvent)>,
    transport: Arc<dyn Transport>,
) -> Result<RoleHandle, ProbeError> {
    let index = rc.index;
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let spec = rc.rt.spec(&format!("rtlab-sub{index}"), 1 + index);
    let thread = spawn_rt(&spec, move || {
        let mut emit = |e: RoleEvent| {
            let _ = events.send((index, e));
        };
        run_role(&rc, transport, &s2, &mut emit);
    })
    .map_err(|e| ProbeError::Rt(e.to_string()))?;
    Ok(RoleHandle::Thread { stop, thread: Some(thread) })
}

/// Role `rc` in a process `launcher` starts: the events of its stdout go to `events`; one
/// that ends without its last event is `Failed` with the last line it wrote on stderr.
fn start_process(
    rc: &RoleConfig,
    events: mpsc::Sender<(usize, RoleEvent)>,
    launcher: Launcher,
) -> Result<RoleHandle, ProbeError> {
    let index = rc.index;
    let json = serde_json::to_string(rc).map_err(|e| ProbeError::Setup(e.to_string()))?;
    let mut cmd = launcher(&json);
    let mut child = spawn_piped(&mut cmd)
        .map_err(|e| ProbeError::Setup(format!("starting subscriber process {index}: {e}")))?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let (last_err, _) = keep_last_line(child.stderr.take().expect("piped"));
    std::thread::spawn(move || {
        let mut ended = false;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(e) = parse_event(&line) {
                ended |= matches!(e, RoleEvent::Done(_) | RoleEvent::Failed(_));
                let _ = events.send((index, e));
            }
        }
        if !ended {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let why = last_line(&last_err);
            let why = if why.is_empty() { "exited without a report".to_string() } else { why };
            let _ = events
                .send((index, RoleEvent::Failed(format!("subscriber process {index}: {why}"))));
        }
    });
    Ok(RoleHandle::Process { child, stdin })
}

/// Start `cmd` (a role process, or a case's near side apart) with stdin, stdout and stderr
/// piped, in a process group of its own: a terminal's Ctrl-C reaches only the parent, which
/// stops the child itself (closing its stdin) and keeps what it measured. No middleware
/// socket of this process goes with it (a Fast DDS port held by a child moved its
/// participant to the next id and outlived the parent's participant).
pub(super) fn spawn_piped(cmd: &mut Command) -> std::io::Result<Child> {
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    rtlab_sys::process::close_inherited_fds(cmd);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()
}

/// A thread that keeps the last non-empty line of a child's `stderr` (read it with
/// [`last_line`]) until the child closes it.
pub(super) fn keep_last_line(stderr: ChildStderr) -> (Arc<Mutex<String>>, JoinHandle<()>) {
    let last = Arc::new(Mutex::new(String::new()));
    let l2 = last.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !line.trim().is_empty() {
                *l2.lock().unwrap_or_else(|e| e.into_inner()) = line;
            }
        }
    });
    (last, reader)
}

/// The line [`keep_last_line`] kept so far ("" if none).
pub(super) fn last_line(last: &Mutex<String>) -> String {
    last.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
