//! `rtlab agent`: the far side of a run, driven by the near rtlab over stdin/stdout
//! ([`super::protocol`]).
//!
//! Contract: the agent serves one near side at a time per host (the far lock, next to the
//! machine lock: a second agent says who holds it and ends). At its start it restores what a
//! killed agent left journaled on this host (`/var/lib/rtlab/far-journal`). It runs what it
//! is asked — a profile (journaled here before any change), loads, a UDP reflector, pub/sub
//! role processes, a kernel-counter sampler, a trace of an application there — and ends, stopping them all and restoring the
//! profile, on `bye`, when its stdin closes (the near side died, ssh dropped), or when no
//! message came within the keep-alive deadline (the link is down). Role processes die with
//! the agent (PR_SET_PDEATHSIG). It never measures in its own main thread and never prints
//! anything but protocol lines on stdout (a last line on stderr when it ends abnormally).

use super::protocol::{
    line, parse, Facts, FarError, Finished, FromFar, Reflected, Request, ToFar, MAX_LINE, PROTOCOL,
};
use rtlab_core::lines::{BoundedLines, Line};
use rtlab_engines::udp::run::{self as udp_run, ReflectOutcome, UdpReflectConfig};
use rtlab_host::session::Session;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Where the agent journals its profile on its host (apart from a near rtlab's journal on
/// the same machine, e.g. with `--far netns:`).
pub fn far_journal() -> PathBuf {
    std::env::var_os("RTLAB_FAR_JOURNAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/rtlab/far-journal"))
}

/// The agent's lock on its host (`RTLAB_LOCK` + `.far` when set, as in tests).
pub fn far_lock() -> PathBuf {
    let mut p = crate::guard::lock_path().into_os_string();
    p.push(".far");
    PathBuf::from(p)
}

/// The agent's writer: protocol lines on stdout, one at a time.
#[derive(Clone)]
struct Out {
    out: Arc<Mutex<std::io::Stdout>>,
    broken: Arc<AtomicBool>,
}

impl Out {
    fn send(&self, m: &FromFar) {
        let mut o = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if writeln!(o, "{}", line(m)).and_then(|_| o.flush()).is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }
}

struct Role {
    child: Child,
    stdin: Option<ChildStdin>,
}

/// A running reflector: its stop flag, configuration and thread.
type Reflector =
    (Arc<AtomicBool>, UdpReflectConfig, std::thread::JoinHandle<Result<ReflectOutcome, String>>);

/// Everything the agent started.
#[derive(Default)]
struct State {
    session: Option<Session<'static>>,
    profile_report: Option<serde_json::Value>,
    loads: Vec<rtlab_load::RunningLoad>,
    reflector: Option<Reflector>,
    roles: Vec<(u64, Role)>,
    sampler: Option<(rtlab_evidence::counters::CounterSampler, i64)>,
    tracer: super::tracer::Tracer,
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "far".into())
}

/// Every address of every interface of this network namespace (`ip -o addr`).
fn addresses() -> Vec<(String, String)> {
    let out = Command::new("ip").args(["-o", "addr", "show", "up"]).output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = w.iter().position(|x| *x == "inet" || *x == "inet6")?;
            let addr = w.get(at + 1)?.split('/').next()?;
            Some((w.get(1)?.trim_end_matches(':').to_string(), addr.to_string()))
        })
        .collect()
}

fn missing_error(what: String, m: Option<&rtlab_core::error::Missing>) -> FarError {
    FarError { message: what, missing: m.cloned() }
}

/// What the near side learns of this host first.
fn facts() -> Facts {
    Facts {
        host: host_name(),
        version: super::protocol::version().into(),
        pid: std::process::id(),
        root: rtlab_sys::tasks::is_root(),
        addresses: addresses(),
        ssh_connection: std::env::var("SSH_CONNECTION").ok(),
        environment: rtlab_sys::env::detect(std::path::Path::new("/")),
    }
}

/// Are the tools there, and may a thread run at `policy` `priority` here?
fn check(
    tools: &[String],
    policy: rtlab_core::rt::Policy,
    priority: i32,
) -> Result<serde_json::Value, FarError> {
    for t in tools {
        if rtlab_load::which(t).is_none() {
            let m = rtlab_core::error::Missing::tool(t, t);
            return Err(missing_error(format!("{t} is not installed there"), Some(&m)));
        }
    }
    if policy.is_realtime() {
        let probe = rtlab_sys::sched::ThreadSpec {
            name: "rtlab-check".into(),
            policy,
            priority,
            cpus: None,
            stack_bytes: 64 * 1024,
        };
        let ok = rtlab_sys::sched::spawn_rt(&probe, || ()).map(|t| t.join());
        if let Err(e) = ok {
            let m = crate::error::refused(policy.name(), priority);
            return Err(missing_error(format!("{}: {e}", m.what), Some(&m)));
        }
    }
    Ok(serde_json::Value::Null)
}

impl State {
    fn handle(&mut self, req: Request, out: &Out) -> Result<serde_json::Value, FarError> {
        match req {
            Request::Facts => Ok(json(&facts())),
            Request::Check { tools, policy, priority } => check(&tools, policy, priority),
            Request::Profile { name, profile, rt_cpu } => self.profile(name, profile, rt_cpu),
            Request::Load { loads, limit_ns } => {
                let limit = Duration::from_nanos(limit_ns.max(0) as u64);
                for cfg in &loads {
                    let mut l = rtlab_load::RunningLoad::start(cfg, Some(limit))
                        .map_err(|e| missing_error(format!("load: {e}"), e.missing()))?;
                    std::thread::sleep(Duration::from_millis(200));
                    l.check_alive().map_err(|e| FarError::new(format!("load: {e}")))?;
                    self.loads.push(l);
                }
                Ok(serde_json::Value::Null)
            }
            Request::Counters { window_ns } => {
                if self.sampler.is_none() {
                    let period = rtlab_evidence::counters::sample_period(window_ns);
                    let s = rtlab_evidence::counters::CounterSampler::start_off(
                        Duration::from_nanos(period as u64),
                        1 << 14,
                        &[],
                    );
                    self.sampler = Some((s, window_ns));
                }
                Ok(serde_json::Value::Null)
            }
            Request::StopCounters => {
                let (s, window_ns) =
                    self.sampler.take().ok_or_else(|| FarError::new("no sampling runs"))?;
                let sampled = s.stop();
                let n = sampled.deltas.len() + 1;
                Ok(json(&sampled.align(None, window_ns, n)))
            }
            Request::Reflect { config } => self.reflect(config),
            Request::StopReflect => self.stop_reflect(),
            Request::Role { role, config } => {
                let child = start_role(role, &config, out)
                    .map_err(|e| FarError::new(format!("role process: {e}")))?;
                self.roles.push((role, child));
                Ok(serde_json::Value::Null)
            }
            Request::StopRole { role } => {
                if let Some(r) = self.roles.iter_mut().find(|r| r.0 == role) {
                    drop(r.1.stdin.take());
                }
                Ok(serde_json::Value::Null)
            }
            Request::Clock => Ok(json(&super::protocol::FarClock {
                monotonic_ns: rtlab_sys::clock::monotonic_ns(),
            })),
            Request::Trace { trace } => self.tracer.start(trace),
            Request::StopTrace => self.tracer.stop().map(|t| json(&t)),
            Request::TraceEvents { process, from } => {
                self.tracer.page(process, from).map(|p| json(&p))
            }
            Request::Finish => Ok(json(&self.finish())),
        }
    }

    /// Apply a profile here, journaled on this host first.
    fn profile(
        &mut self,
        name: String,
        profile: rtlab_tune::profile::Profile,
        rt_cpu: Option<usize>,
    ) -> Result<serde_json::Value, FarError> {
        if self.session.is_some() {
            return Err(FarError::new("a profile is applied there already"));
        }
        let named = rtlab_tune::profile::NamedProfile { name: name.clone(), profile };
        let target = rtlab_tune::profile::Target { rt_cpu, pids: vec![], ..Default::default() };
        let (session, outcomes) =
            rtlab_tune::profile::apply_named(crate::host::host(), &named, &target, &far_journal())
                .map_err(|e| FarError::new(format!("profile {name}: {e}")))?;
        self.session = Some(session);
        let report = serde_json::json!({
            "profile": name,
            "steps": outcomes.iter().map(|o| serde_json::json!({ "what": o.what, "status": o.status, "detail": o.detail })).collect::<Vec<_>>(),
        });
        self.profile_report = Some(report.clone());
        Ok(report)
    }

    /// Start a UDP reflector in a thread of its own; its address once it listens.
    fn reflect(&mut self, mut config: UdpReflectConfig) -> Result<serde_json::Value, FarError> {
        // the XDP program is attached on this side: journaled here
        if let Some(x) = config.xdp.as_mut() {
            x.journal = Some(crate::guard::xdp_journal());
        }
        if self.reflector.is_some() {
            return Err(FarError::new("a reflector runs there already"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel();
        let (s2, c2) = (stop.clone(), config.clone());
        let h = std::thread::spawn(move || {
            let tx2 = tx.clone();
            udp_run::reflect(&c2, s2, |a| drop(tx.send(Ok(a.to_string()))), |_| {}).map_err(|e| {
                let m = e.to_string();
                let _ = tx2.send(Err(m.clone()));
                m
            })
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(addr)) => {
                self.reflector = Some((stop, config, h));
                Ok(serde_json::Value::String(addr))
            }
            Ok(Err(e)) => Err(FarError::new(format!("reflector: {e}"))),
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(FarError::new("reflector: not listening after 10 s"))
            }
        }
    }

    /// Stop the reflector: its streams (labelled with this host) and its counts.
    fn stop_reflect(&mut self) -> Result<serde_json::Value, FarError> {
        let (stop, cfg, h) =
            self.reflector.take().ok_or_else(|| FarError::new("no reflector runs"))?;
        stop.store(true, Ordering::Relaxed);
        let outcome = h
            .join()
            .map_err(|_| FarError::new("reflector panicked"))?
            .map_err(|e| FarError::new(format!("reflector: {e}")))?;
        let mut streams = outcome.streams(&cfg);
        let host = host_name();
        for s in &mut streams {
            s.labels.insert("host".into(), host.clone());
        }
        // its window's cost: the reflector's thread, this agent's threads, its max RSS
        let cost = rtlab_sys::usage::take_windows_as("agent")
            .into_iter()
            .find(|w| w.name == "reflect")
            .map(|mut w| {
                w.processes.extend(rtlab_sys::usage::max_rss_kib(std::process::id()).map(|kib| {
                    rtlab_core::cost::ProcessMemory { process: "agent".into(), max_rss_kib: kib }
                }));
                w
            });
        let r = Reflected {
            cost,
            streams,
            outcome: serde_json::json!({
                "counts": outcome.counts,
                "forward_lost": outcome.forward_lost,
                "duration_ns": outcome.duration_ns,
                "socket": outcome.socket,
                "local_addr": outcome.local_addr,
                "cpus_seen": outcome.cpus_seen,
                "memory_locked": matches!(outcome.memory_lock, Some(Ok(()))),
            }),
        };
        Ok(json(&r))
    }

    /// Stop everything started, restore the profile (newest first: roles, reflector,
    /// sampler, profile, loads: the profile treated the loads as "other tasks").
    fn finish(&mut self) -> Finished {
        let mut f = Finished::default();
        // a trace still running: its application stopped (SIGINT, SIGKILL 5 s later)
        drop(std::mem::take(&mut self.tracer));
        for (_, mut r) in self.roles.drain(..) {
            drop(r.stdin.take());
            if !rtlab_sys::process::wait_or_kill(&mut r.child, Duration::from_secs(5)) {
                f.notes.push("a role process did not end within 5 s: killed".into());
            }
        }
        if let Some((stop, _, h)) = self.reflector.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
        if let Some((s, window_ns)) = self.sampler.take() {
            let sampled = s.stop();
            let n = sampled.deltas.len() + 1;
            f.counters = Some(sampled.align(None, window_ns, n));
        }
        if let Some(mut session) = self.session.take() {
            let r = session.restore();
            f.restored = Some(r.is_clean());
            if !r.is_clean() {
                f.notes.push(format!(
                    "far profile NOT fully restored ({} changes): run `rtlab tune restore` there",
                    r.failed.len()
                ));
            }
        }
        f.profile = self.profile_report.take();
        let reports: Vec<_> = self.loads.drain(..).map(|l| l.stop()).collect();
        if !reports.is_empty() {
            f.load = serde_json::to_value(&reports).ok();
        }
        f
    }
}

impl Drop for State {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Anything serializable as a JSON value (our types always are).
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// Start `rtlab pubsub --role-config JSON` here and relay its event lines as `role`'s events.
fn start_role(role: u64, config: &str, out: &Out) -> Result<Role, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["pubsub", "--role-config", config]);
    rtlab_sys::process::die_with_parent(&mut cmd);
    rtlab_sys::process::close_inherited_fds(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let last_err = super::protocol::last_stderr_line(child.stderr.take().expect("piped"));
    let out = out.clone();
    std::thread::spawn(move || {
        let mut ended = false;
        // a role's line longer than a message may be is not an event: skipped
        for l in BoundedLines::new(BufReader::new(stdout), MAX_LINE) {
            let Line::Text(l) = l else { continue };
            if let Some(e) = rtlab_pubsub::engine::parse_event(&l) {
                ended |= e.is_last();
                out.send(&FromFar::Event { role, line: l });
            }
        }
        if !ended {
            std::thread::sleep(Duration::from_millis(50));
            let why = last_err.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let why = if why.is_empty() { "exited without a report".into() } else { why };
            let e = rtlab_pubsub::engine::RoleEvent::Failed(format!("far role process: {why}"));
            out.send(&FromFar::Event { role, line: rtlab_pubsub::engine::event_line(&e) });
        }
    });
    Ok(Role { child, stdin })
}

/// Run the agent until the near side says bye, goes away, or falls silent for `deadline`.
/// Returns the exit code: 0 after `bye`, 1 when the link ended otherwise, 2 when refused.
pub fn run(deadline: Duration) -> i32 {
    let out = Out {
        out: Arc::new(Mutex::new(std::io::stdout())),
        broken: Arc::new(AtomicBool::new(false)),
    };
    let lock = rtlab_host::lock::MachineLock::acquire(&far_lock(), "rtlab agent", false);
    let mut refused = None;
    let mut restored = None;
    match &lock {
        Err(rtlab_host::lock::LockError::Busy { pid, holder }) => {
            refused = Some(format!(
                "another rtlab agent serves this host (pid {pid}: {holder}); one near side at a time"
            ));
        }
        // not root: no lock file to take, and nothing here will change the machine
        Err(_) => {}
        Ok(_) => {
            // a killed agent's changes, left journaled: put back before anything else
            let j = far_journal();
            if let Some(p) = rtlab_host::journal::pending(&j) {
                let what = p.describe();
                restored =
                    Some(match rtlab_host::journal::restore_journal(crate::host::host(), &j) {
                        Ok(r) if r.is_clean() => {
                            format!("restored what a killed agent left: {what}")
                        }
                        Ok(r) => format!(
                            "restoring what a killed agent left ({what}): {} changes failed",
                            r.failed.len()
                        ),
                        Err(e) => format!("restoring what a killed agent left: {e}"),
                    });
            }
        }
    }
    out.send(&FromFar::Hello {
        protocol: PROTOCOL,
        version: super::protocol::version().into(),
        host: host_name(),
        pid: std::process::id(),
        refused: refused.clone(),
        restored,
    });
    if let Some(r) = refused {
        eprintln!("rtlab agent: {r}");
        return 2;
    }
    let (tx, rx) = mpsc::channel::<Option<Line>>();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for l in BoundedLines::new(stdin.lock(), MAX_LINE) {
            if tx.send(Some(l)).is_err() {
                return;
            }
        }
        let _ = tx.send(None);
    });
    let mut state = State::default();
    let why = loop {
        if out.broken.load(Ordering::Relaxed) {
            break "its stdout closed".to_string();
        }
        match rx.recv_timeout(deadline) {
            Ok(Some(Line::TooLong { bytes, .. })) => {
                break format!(
                    "the near side sent a line of {bytes} bytes, more than a message may have ({MAX_LINE}): the link is ended"
                );
            }
            Ok(Some(Line::Text(l))) => match parse::<ToFar>(&l) {
                None | Some(ToFar::Keepalive) => {}
                Some(ToFar::Hello { protocol, version }) if protocol != PROTOCOL => {
                    eprintln!(
                        "rtlab agent: the near side runs rtlab {version} (protocol {protocol}), this is rtlab {} (protocol {PROTOCOL})",
                        super::protocol::version()
                    );
                    return 2;
                }
                Some(ToFar::Hello { .. }) => {}
                Some(ToFar::Request { id, request }) => {
                    let result = state.handle(*request, &out);
                    out.send(&FromFar::Reply { id, result });
                }
                Some(ToFar::Bye) => {
                    drop(state);
                    return 0;
                }
            },
            Ok(None) => break "the near side went away (stdin closed)".to_string(),
            Err(_) => {
                break "no message from the near side within the keep-alive deadline".to_string()
            }
        }
    };
    drop(state);
    eprintln!("rtlab agent: {why}: stopped everything and restored this host");
    drop(lock);
    1
}
