//! Where a case's roles run, starting them there, and running them: threads of this process
//! ([`run_role`]), processes of this host (started by a [`Launcher`], their body
//! [`role_main`], speaking [`RoleEvent`] lines), or a far host ([`FarPlacement`]: another
//! computer or a network namespace, through its agent's [`FarRoles`]). A started role is a
//! [`RoleHandle`]; [`Roles`] stops every one still running when dropped, also on an error
//! path.
//!
//! Set-up and tear-down around the loops ([`super::loops`]): nothing else here runs in the
//! measured phase. A role process prints nothing but its event lines.

use super::loops::{echo_loop, receive_loop};
use super::outcome::ProbeError;
use super::role::{event_line, parse_event, RoleConfig, RoleEvent, RoleKind};
use super::spec::open_transport;
use super::threads::{apply_thread_priorities, with_middleware, RtUse};
use crate::transport::{EchoStyle, Transport};
use rtlab_core::lines::{BoundedLines, Line};
use rtlab_sys::sched::{set_current_affinity, spawn_rt};
use std::io::{BufReader, Write};
use std::process::{Child, ChildStderr, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

/// How role processes are started: the command that runs [`role_main`] with this JSON.
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

/// Start role `rc`: on the `far` host, as a thread of this process on `transport`
/// (`in_process`), or as a process `launcher` starts; its events go to `events`, tagged
/// with its index.
pub(super) fn start_role(
    rc: RoleConfig,
    events: mpsc::Sender<(usize, RoleEvent)>,
    launcher: Launcher,
    far: Option<&FarPlacement>,
    in_process: bool,
    transport: &Arc<dyn Transport>,
) -> Result<RoleHandle, ProbeError> {
    let index = rc.index;
    if let Some(f) = far {
        let mut rc = rc;
        // the far host's CPUs are its own
        rc.rt.cpus = None;
        return f
            .roles
            .start(&rc, events)
            .map(RoleHandle::Far)
            .map_err(|e| ProbeError::Setup(format!("far subscriber {index}: {e}")));
    }
    if in_process {
        return start_thread(rc, events, transport.clone());
    }
    start_process(&rc, events, launcher)
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
        for line in BoundedLines::new(BufReader::new(stdout), MAX_CHILD_LINE) {
            let Line::Text(line) = line else { continue };
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

/// The longest line read from a role process or a case's near side apart (a whole case's
/// outcome is one line, far below it); a longer one is skipped.
pub(super) const MAX_CHILD_LINE: usize = 64 << 20;

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
        for line in BoundedLines::new(BufReader::new(stderr), 64 << 10) {
            let (Line::Text(line) | Line::TooLong { head: line, .. }) = line;
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

/// Run one role on the calling thread with an open transport.
pub fn run_role(
    rc: &RoleConfig,
    transport: Arc<dyn Transport>,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) {
    if rc.kind == RoleKind::Echo && rc.echo == EchoStyle::Callback {
        return run_callback_echo(rc, &*transport, stop, emit);
    }
    let sub = match transport.subscriber(&rc.topic_in, &rc.qos, rc.max_len) {
        Ok(s) => s,
        Err(e) => return emit(RoleEvent::Failed(e.to_string())),
    };
    // middleware threads exist once ports do (Cyclone starts `recv` lazily)
    if let Err(e) = apply_thread_priorities(
        &with_middleware(&rc.thread_priorities, rc.middleware_priority, &*transport),
        &rc.rt,
    ) {
        return emit(RoleEvent::Failed(e));
    }
    match rc.kind {
        RoleKind::Subscriber => {
            emit(RoleEvent::Ready);
            // cost: this thread's counters right before its loop and right after it
            let cost = rtlab_sys::usage::begin(&rc.cost_window);
            let r = receive_loop(sub, rc, stop, emit);
            cost.end();
            emit(RoleEvent::Done(Some(Box::new(r))));
        }
        RoleKind::Echo => {
            let topic = rc.topic_out.as_deref().unwrap_or("pong");
            let publisher = match transport.publisher(topic, &rc.qos, rc.max_len) {
                Ok(p) => p,
                Err(e) => return emit(RoleEvent::Failed(e.to_string())),
            };
            emit(RoleEvent::Ready);
            let cost = rtlab_sys::usage::begin(&rc.cost_window);
            let r = echo_loop(sub, publisher, rc, stop);
            cost.end();
            match r {
                Ok(()) => emit(RoleEvent::Done(None)),
                Err(e) => emit(RoleEvent::Failed(e.to_string())),
            }
        }
    }
}

/// An echo answering from the middleware's callback: this thread only waits for `stop` (or
/// the role's time, or the first error of a callback), then removes the callback.
fn run_callback_echo(
    rc: &RoleConfig,
    transport: &dyn Transport,
    stop: &AtomicBool,
    emit: &mut dyn FnMut(RoleEvent),
) {
    let topic = rc.topic_out.as_deref().unwrap_or("pong");
    let echo = match transport.callback_echo(&rc.topic_in, topic, &rc.qos, rc.max_len) {
        Ok(Some(e)) => e,
        Ok(None) => {
            return emit(RoleEvent::Failed(format!(
                "{}: no callback to answer from (--echo thread)",
                transport.name()
            )))
        }
        Err(e) => return emit(RoleEvent::Failed(e.to_string())),
    };
    if let Err(e) = apply_thread_priorities(
        &with_middleware(&rc.thread_priorities, rc.middleware_priority, transport),
        &rc.rt,
    ) {
        return emit(RoleEvent::Failed(e));
    }
    emit(RoleEvent::Ready);
    // cost: the callbacks run in the middleware's threads, counted with the process's
    let cost = rtlab_sys::usage::begin(&rc.cost_window);
    let give_up = rtlab_sys::clock::monotonic_ns() + rc.run_timeout_ns;
    let mut failed = None;
    while !stop.load(Ordering::Relaxed) && rtlab_sys::clock::monotonic_ns() < give_up {
        failed = echo.failed();
        if failed.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(echo);
    cost.end();
    match failed {
        None => emit(RoleEvent::Done(None)),
        Some(e) => emit(RoleEvent::Failed(e)),
    }
}

/// A flag raised when this process's stdin closes (the parent's stop), by a thread of its own.
pub(super) fn stop_when_stdin_closes() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        s2.store(true, Ordering::Relaxed);
    });
    stop
}

/// Write `e` as its line on stdout, flushed.
fn write_event(e: &RoleEvent) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", event_line(e));
    let _ = out.flush();
}

/// The body of a role process: `json` is a [`RoleConfig`]. Speaks [`RoleEvent`] lines on
/// stdout; stops when its stdin closes. Returns the exit code.
pub fn role_main(json: &str) -> i32 {
    let rc: RoleConfig = match serde_json::from_str(json) {
        Ok(rc) => rc,
        Err(e) => {
            write_event(&RoleEvent::Failed(format!("bad role configuration: {e}")));
            return 2;
        }
    };
    // policy first, then the middleware: its threads inherit the policy
    if let Err(e) = rc.rt.apply_policy_here() {
        write_event(&RoleEvent::Failed(format!("real-time settings: {e}")));
        return 1;
    }
    let transport = match open_transport(&rc.transport) {
        Ok(t) => t,
        Err(e) => {
            write_event(&RoleEvent::Failed(e.to_string()));
            return 1;
        }
    };
    let _lock = if rc.mlockall { rtlab_sys::memory::MemoryLock::lock_all().ok() } else { None };
    let stop = stop_when_stdin_closes();
    // pin this thread only (never the whole process: middleware threads float)
    if let Some(cpu) = rc.rt.cpu(1 + rc.index) {
        if let Err(e) = set_current_affinity(&[cpu]) {
            write_event(&RoleEvent::Failed(format!("real-time settings: {e}")));
            return 1;
        }
    }
    // its cost (this process's threads under the role's name, its max RSS) before Done
    let process = match rc.kind {
        RoleKind::Subscriber => format!("sub{}", rc.index),
        RoleKind::Echo => format!("pong{}", rc.index),
    };
    run_role(&rc, transport, &stop, &mut |e| {
        if matches!(e, RoleEvent::Done(_)) {
            for mut w in rtlab_sys::usage::take_windows_as(&process) {
                if let Some(kib) = rtlab_sys::usage::max_rss_kib(std::process::id()) {
                    w.processes.push(rtlab_core::cost::ProcessMemory {
                        process: process.clone(),
                        max_rss_kib: kib,
                    });
                }
                write_event(&RoleEvent::Cost(Box::new(w)));
            }
        }
        write_event(&e)
    });
    0
}
