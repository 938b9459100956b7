//! The near side's end of the link to a far agent.
//!
//! Contract: [`FarLink::open`] starts the agent (through ssh or `ip netns exec`), waits for its
//! hello, checks the protocol and says in one line what stands in the way (no rtlab there,
//! another version, another agent serving that host, ssh refused). While the link lives a
//! thread sends a keep-alive every second and a reader routes replies to their request and
//! role events to their role. Dropping the link says bye and waits (bounded) for the agent
//! to restore its host and end; the agent also ends by itself when this process dies (its
//! stdin closes) or falls silent. Nothing here prints.

use super::protocol::{
    line, parse, Facts, FarError, Finished, FromFar, Request, ToFar, KEEPALIVE_DEADLINE,
    KEEPALIVE_EVERY, MAX_LINE, PROTOCOL,
};
use super::FarSpec;
use crate::error::LabError;
use rtlab_core::lines::{BoundedLines, Line};
use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How long the agent may take to say hello (ssh: a connection and a login).
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request may take there (a profile, a load's start).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

type Waiting = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<serde_json::Value, FarError>>>>>;
type RoleRoutes = Arc<Mutex<HashMap<u64, mpsc::Sender<String>>>>;

/// The far agent as it introduced itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentHello {
    pub version: String,
    pub host: String,
    pub pid: u32,
    /// What it restored at its start (a killed agent's profile).
    pub restored: Option<String>,
}

/// What requests need of a link; cheap to clone, usable from any thread while the link
/// lives (a dead link answers every request with why it died).
#[derive(Clone)]
pub struct FarHandle {
    pub spec: FarSpec,
    /// The far host's name.
    pub host: String,
    writer: Arc<Mutex<Option<ChildStdin>>>,
    waiting: Waiting,
    roles: RoleRoutes,
    next: Arc<AtomicU64>,
    /// Why the link ended (None while it lives).
    ended: Arc<Mutex<Option<String>>>,
}

/// A live link to a far agent.
pub struct FarLink {
    pub hello: AgentHello,
    handle: FarHandle,
    child: Child,
    keepalive_stop: Arc<AtomicBool>,
}

impl std::ops::Deref for FarLink {
    type Target = FarHandle;
    fn deref(&self) -> &FarHandle {
        &self.handle
    }
}

fn send(writer: &Mutex<Option<ChildStdin>>, m: &ToFar) -> bool {
    let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
    match w.as_mut() {
        Some(s) => writeln!(s, "{}", line(m)).and_then(|_| s.flush()).is_ok(),
        None => false,
    }
}

/// The command that runs the agent for `spec` (its keep-alive deadline passed along).
pub fn agent_command(spec: &FarSpec) -> Result<Command, LabError> {
    let deadline = format!("{}s", KEEPALIVE_DEADLINE.as_secs());
    match spec {
        FarSpec::Pair => Err(LabError::Failed(
            "--far pair: the far side in a scenario case's own namespaces (on the command line: `rtlab netns up`, then --far netns:rtlab-b)".into(),
        )),
        FarSpec::Netns(name) => {
            if !rtlab_engines::netns::exists(name) {
                return Err(LabError::Failed(format!(
                    "--far {spec}: no such network namespace (/run/netns/{name}); create it with `rtlab netns up`"
                )));
            }
            if rtlab_load::which("ip").is_none() {
                return Err(LabError::Missing(rtlab_core::error::Missing::tool("ip", "iproute2")));
            }
            // RTLAB_FAR_BIN: another rtlab there (an aarch64 build under qemu-user beside an
            // x86-64 near side), else this one
            let exe = match std::env::var_os("RTLAB_FAR_BIN").filter(|b| !b.is_empty()) {
                Some(b) => {
                    let b = std::path::PathBuf::from(b);
                    if !b.is_file() {
                        return Err(LabError::Failed(format!(
                            "--far {spec}: RTLAB_FAR_BIN={}: no such file (in a namespace it names the rtlab binary to run there)",
                            b.display()
                        )));
                    }
                    b
                }
                None => std::env::current_exe().map_err(|e| {
                    LabError::Failed(format!("--far {spec}: finding this rtlab binary: {e}"))
                })?,
            };
            let mut c = Command::new("ip");
            c.args(["netns", "exec", name]).arg(exe).args(["agent", "--keepalive", &deadline]);
            Ok(c)
        }
        FarSpec::Ssh { user, host, port } => {
            let words: Vec<String> = std::env::var("RTLAB_SSH")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.split_whitespace().map(String::from).collect())
                .unwrap_or_else(|| vec!["ssh".into()]);
            let ssh = words.iter().find(|w| w.ends_with("ssh")).unwrap_or(&words[0]);
            if rtlab_load::which(ssh).is_none() && !std::path::Path::new(ssh).exists() {
                return Err(LabError::Missing(rtlab_core::error::Missing::tool(
                    "ssh",
                    "openssh-client",
                )));
            }
            let mut c = Command::new(&words[0]);
            c.args(&words[1..]);
            // no password prompt (the run would hang), a dead link noticed by ssh too
            c.args(["-T", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=2", "-o"]);
            c.arg("ServerAliveCountMax=3");
            if let Some(p) = port {
                c.args(["-p", &p.to_string()]);
            }
            c.arg(match user {
                Some(u) => format!("{u}@{host}"),
                None => host.clone(),
            });
            let bin = std::env::var("RTLAB_FAR_BIN").unwrap_or_else(|_| "rtlab".into());
            c.arg(format!("{bin} agent --keepalive {deadline}"));
            Ok(c)
        }
    }
}

impl FarLink {
    /// Start the agent and shake hands.
    pub fn open(spec: &FarSpec) -> Result<FarLink, LabError> {
        let mut cmd = agent_command(spec)?;
        // a process group of its own: a terminal's Ctrl-C reaches only this process, which
        // ends the run and says bye (the agent then restores its host)
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::Failed(format!("--far {spec}: starting the agent: {e}")))?;
        let writer = Arc::new(Mutex::new(child.stdin.take()));
        let stdout = child.stdout.take().expect("piped");
        let last_err = super::protocol::last_stderr_line(child.stderr.take().expect("piped"));
        let waiting: Waiting = Arc::default();
        let roles: RoleRoutes = Arc::default();
        let ended: Arc<Mutex<Option<String>>> = Arc::default();
        let (hello_tx, hello_rx) = mpsc::channel::<FromFar>();
        let routes = Routes {
            waiting: waiting.clone(),
            roles: roles.clone(),
            ended: ended.clone(),
            last_err: last_err.clone(),
        };
        std::thread::spawn(move || read_agent(stdout, hello_tx, routes));
        let hello = match hello_rx.recv_timeout(HELLO_TIMEOUT) {
            Ok(FromFar::Hello { protocol, version, host, pid, refused, restored }) => {
                if protocol != PROTOCOL {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(LabError::Failed(format!(
                        "--far {spec}: the far host runs rtlab {version} (protocol {protocol}), this is rtlab {} (protocol {PROTOCOL}): install the same version on both",
                        super::protocol::version()
                    )));
                }
                if let Some(r) = refused {
                    let _ = child.wait();
                    return Err(LabError::Failed(format!("--far {spec}: {r}")));
                }
                AgentHello { version, host, pid, restored }
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(100));
                let why = last_err.lock().unwrap_or_else(|e| e.into_inner()).clone();
                return Err(LabError::Failed(hello_failure(spec, &why)));
            }
        };
        let link = FarLink {
            handle: FarHandle {
                spec: spec.clone(),
                host: hello.host.clone(),
                writer,
                waiting,
                roles,
                next: Arc::new(AtomicU64::new(1)),
                ended,
            },
            hello,
            child,
            keepalive_stop: Arc::new(AtomicBool::new(false)),
        };
        send(
            &link.handle.writer,
            &ToFar::Hello { protocol: PROTOCOL, version: super::protocol::version().into() },
        );
        let (w, stop) = (link.handle.writer.clone(), link.keepalive_stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(KEEPALIVE_EVERY);
                if stop.load(Ordering::Relaxed) || !send(&w, &ToFar::Keepalive) {
                    break;
                }
            }
        });
        Ok(link)
    }
}

/// Where the agent's messages go: replies to the requests waiting, events to their roles,
/// and why the link ended (with the agent's last line on stderr).
struct Routes {
    waiting: Waiting,
    roles: RoleRoutes,
    ended: Arc<Mutex<Option<String>>>,
    last_err: Arc<Mutex<String>>,
}

/// The agent's stdout, line by line until it ends: its hello to `hello_tx`, then each message
/// routed; at the end, why, and every request and role still waiting woken.
fn read_agent(stdout: std::process::ChildStdout, hello_tx: mpsc::Sender<FromFar>, routes: Routes) {
    let Routes { waiting, roles, ended, last_err } = routes;
    let mut hello = Some(hello_tx);
    let mut too_long = None;
    for l in BoundedLines::new(BufReader::new(stdout), MAX_LINE) {
        let l = match l {
            Line::Text(l) => l,
            Line::TooLong { bytes, .. } => {
                too_long = Some(format!(
                    "the agent sent a line of {bytes} bytes, more than a message may have ({MAX_LINE}): the link is ended"
                ));
                break;
            }
        };
        match parse::<FromFar>(&l) {
            Some(h @ FromFar::Hello { .. }) => {
                if let Some(tx) = hello.take() {
                    let _ = tx.send(h);
                }
            }
            Some(FromFar::Reply { id, result }) => {
                let tx = waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                if let Some(tx) = tx {
                    let _ = tx.send(result);
                }
            }
            Some(FromFar::Event { role, line }) => {
                let r = roles.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(tx) = r.get(&role) {
                    let _ = tx.send(line);
                }
            }
            None => {}
        }
    }
    drop(hello);
    std::thread::sleep(Duration::from_millis(50));
    let why = last_err.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let why = too_long.unwrap_or(if why.is_empty() { "the agent ended".into() } else { why });
    *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    // wake every request still waiting, and every role still running
    waiting.lock().unwrap_or_else(|e| e.into_inner()).clear();
    roles.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

impl FarLink {
    /// The agent's process id when it runs on this machine (in a network namespace); None
    /// over ssh (the child there is ssh, not the agent).
    pub fn local_agent_pid(&self) -> Option<u32> {
        matches!(self.handle.spec, FarSpec::Netns(_)).then(|| self.child.id())
    }
}

impl FarHandle {
    /// Why the link ended, if it did.
    pub fn ended(&self) -> Option<String> {
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ask the agent; its reply, or one line saying why there is none (the far host lacks
    /// something: [`LabError::Missing`]).
    pub fn request(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<serde_json::Value, LabError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.waiting.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        let what = request_name(&request);
        if !send(&self.writer, &ToFar::Request { id, request: Box::new(request) }) {
            return Err(self.gone(what));
        }
        match rx.recv_timeout(timeout) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(match e.missing {
                Some(m) => LabError::Missing(rtlab_core::error::Missing {
                    what: format!("far side {} ({}): {}", self.spec, self.host, m.what),
                    ..m
                }),
                None => LabError::Failed(format!(
                    "far side {} ({}): {}",
                    self.spec, self.host, e.message
                )),
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(self.gone(what)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.waiting.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                Err(LabError::Failed(format!(
                    "far side {}: no answer to '{what}' within {} s (is the link down?)",
                    self.spec,
                    timeout.as_secs()
                )))
            }
        }
    }

    fn gone(&self, what: &str) -> LabError {
        std::thread::sleep(Duration::from_millis(100));
        let why = self.ended().unwrap_or_else(|| "the link is closed".into());
        LabError::Failed(format!("far side {}: '{what}' not answered: {why}", self.spec))
    }

    /// A typed reply.
    pub fn ask<T: for<'de> serde::Deserialize<'de>>(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<T, LabError> {
        let v = self.request(request, timeout)?;
        serde_json::from_value(v).map_err(|e| {
            LabError::Failed(format!("far side {}: a reply this rtlab cannot read: {e}", self.spec))
        })
    }

    /// The far host's facts.
    pub fn facts(&self) -> Result<Facts, LabError> {
        self.ask(Request::Facts, REQUEST_TIMEOUT)
    }

    /// Route role `role`'s event lines to a channel (before starting the role).
    pub fn route_role(&self, role: u64) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        self.roles.lock().unwrap_or_else(|e| e.into_inner()).insert(role, tx);
        rx
    }

    /// Stop routing role `role`.
    pub fn unroute_role(&self, role: u64) {
        self.roles.lock().unwrap_or_else(|e| e.into_inner()).remove(&role);
    }

    /// A fresh number (roles, requests).
    pub fn next_number(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Stop everything there and restore its profile; what it did.
    pub fn finish(&self) -> Result<Finished, LabError> {
        self.ask(Request::Finish, REQUEST_TIMEOUT)
    }

    /// The near and far addresses of the link: ssh's own connection, or for a namespace the
    /// first far address this process (in `near_netns` when given) has a route to.
    pub fn addresses(
        &self,
        facts: &Facts,
        near_netns: Option<&str>,
    ) -> Result<(String, String), LabError> {
        if let Some((near, far)) = facts.ssh_addresses() {
            return Ok((near, far));
        }
        let mut candidates: Vec<&(String, String)> = facts
            .addresses
            .iter()
            .filter(|(i, a)| i != "lo" && !a.starts_with("fe80") && !a.starts_with("127."))
            .collect();
        // IPv4 first
        candidates.sort_by_key(|(_, a)| a.contains(':'));
        for (_, far) in candidates {
            // a namespace of this machine is a neighbour: a route through a gateway (this
            // namespace's default route) does not lead to it
            if !directly_connected(far, near_netns) {
                continue;
            }
            if let Some(near) = route_source(far, near_netns) {
                return Ok((near, far.clone()));
            }
        }
        Err(LabError::Failed(format!(
            "--far {}: no address of the far side ({}) is on a link of {} (give --netns: the namespace joined to it, e.g. rtlab-a)",
            self.spec,
            facts.addresses.iter().map(|(i, a)| format!("{i} {a}")).collect::<Vec<_>>().join(", "),
            near_netns.map(|n| format!("netns {n}")).unwrap_or_else(|| "this namespace".into())
        )))
    }
}

/// Whether `ip route get ADDR` (in `netns`) reaches it without a gateway.
fn directly_connected(addr: &str, netns: Option<&str>) -> bool {
    let mut c = Command::new("ip");
    if let Some(ns) = netns {
        c.args(["-n", ns]);
    }
    match c.args(["route", "get", addr]).output() {
        Ok(o) if o.status.success() => {
            let out = String::from_utf8_lossy(&o.stdout);
            !out.split_whitespace().any(|w| w == "via")
        }
        _ => false,
    }
}

/// The source address this host would use to reach `far` (a UDP socket's connect: no packet
/// is sent), from network namespace `netns` when given.
fn route_source(far: &str, netns: Option<&str>) -> Option<String> {
    let ip: std::net::IpAddr = far.parse().ok()?;
    let target = std::net::SocketAddr::new(ip, 9);
    let probe = move || -> Option<String> {
        let any = if ip.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" };
        let s = std::net::UdpSocket::bind(any).ok()?;
        s.connect(target).ok()?;
        let local = s.local_addr().ok()?.ip();
        (!local.is_loopback() && !local.is_unspecified()).then(|| local.to_string())
    };
    match netns {
        None => probe(),
        Some(ns) => {
            let path = if ns.contains('/') { ns.to_string() } else { format!("/run/netns/{ns}") };
            rtlab_sys::net::socket_in_netns(&path, probe).ok().flatten()
        }
    }
}

fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Facts => "facts",
        Request::Check { .. } => "check",
        Request::Profile { .. } => "profile",
        Request::Load { .. } => "load",
        Request::Counters { .. } => "counters",
        Request::StopCounters => "stop counters",
        Request::Reflect { .. } => "reflect",
        Request::StopReflect => "stop reflect",
        Request::Role { .. } => "role",
        Request::StopRole { .. } => "stop role",
        Request::Clock => "clock",
        Request::Trace { .. } => "trace",
        Request::StopTrace => "stop trace",
        Request::TraceEvents { .. } => "trace events",
        Request::Finish => "finish",
    }
}

/// One line for an agent that never said hello, from its last stderr line.
fn hello_failure(spec: &FarSpec, stderr: &str) -> String {
    let hint = if stderr.contains("command not found") || stderr.contains("No such file") {
        "rtlab is not installed there, or not on the PATH of a non-interactive shell (install it, or set RTLAB_FAR_BIN to its path there)"
    } else if stderr.contains("Permission denied") || stderr.contains("Host key verification") {
        "ssh could not log in without a prompt (set up a key: ssh-copy-id; rtlab runs ssh with BatchMode=yes)"
    } else if stderr.contains("Could not resolve")
        || stderr.contains("Connection refused")
        || stderr.contains("timed out")
        || stderr.contains("No route")
    {
        "the far host is not reachable by ssh"
    } else {
        "the agent did not start"
    };
    if stderr.is_empty() {
        format!("--far {spec}: {hint}")
    } else {
        format!("--far {spec}: {hint}: {stderr}")
    }
}

impl Drop for FarLink {
    fn drop(&mut self) {
        self.keepalive_stop.store(true, Ordering::Relaxed);
        send(&self.handle.writer, &ToFar::Bye);
        drop(self.handle.writer.lock().unwrap_or_else(|e| e.into_inner()).take());
        // the agent restores its host, then ends
        rtlab_sys::process::wait_or_kill(&mut self.child, Duration::from_secs(15));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_failures_say_the_cause() {
        let s = FarSpec::parse("ssh:robot2").unwrap();
        let m = hello_failure(&s, "bash: line 1: rtlab: command not found");
        assert!(m.starts_with("--far ssh:robot2: rtlab is not installed there"), "{m}");
        let m = hello_failure(&s, "root@robot2: Permission denied (publickey).");
        assert!(m.contains("could not log in"), "{m}");
    }

    #[test]
    fn ssh_command_line() {
        std::env::remove_var("RTLAB_SSH");
        let c = agent_command(&FarSpec::parse("ssh:me@robot2:2222").unwrap());
        let Ok(c) = c else { return }; // no ssh client here: said by the error
        let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(c.get_program(), "ssh");
        assert!(args.windows(2).any(|w| w == ["-p", "2222"]), "{args:?}");
        assert!(args.contains(&"BatchMode=yes".to_string()));
        assert_eq!(args[args.len() - 2], "me@robot2");
        assert!(args.last().unwrap().ends_with("agent --keepalive 6s"), "{args:?}");
    }
}
