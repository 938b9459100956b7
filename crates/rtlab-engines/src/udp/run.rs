//! Running the UDP probe: `udp ping` (the client) and `udp reflect` (the far side).
//!
//! Contract: the configs are checked before anything touches the system; sockets are
//! created (inside a network namespace when asked: only a helper thread enters it),
//! bound only where told, and given their options before the measuring thread starts;
//! a knob the kernel refuses is an error, not a silent default. The measuring thread is
//! created with its policy, priority and CPU already set (`spawn_rt`), memory is locked
//! (guard, undone on return), and everything it records into is allocated before it
//! starts. A ping first checks that a reflector answers (hello datagrams, not counted),
//! so a wrong address is one clear error instead of a run of losses. Ctrl-C raises the
//! stop flag: what was measured is returned. Nothing here prints.

use super::link::UdpLink;
use super::ping::{PingMode, PingPlan, Pinger};
use super::reflect::{Action, ReflectCounts, Reflector};
use super::track::{Counts, Tracker};
use super::wire::{self, Kind};
use crate::timer::LoopEnd;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::net::{self as sysnet, AbsTimer, Buffer};
use rtlab_sys::sched::{current_affinity, current_policy, spawn_rt, Policy, ThreadSpec};
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Real-time settings of the measuring thread (the shared type; its first CPU pins it).
pub use rtlab_core::rt::RtSettings as RtConfig;

/// Socket options (None: the kernel's default, untouched).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketConfig {
    /// SO_PRIORITY (0-6 for anyone; above 6, or an htb class id like 0x10010 = 1:10, as root).
    pub so_priority: Option<u32>,
    /// IP_TOS / IPV6_TCLASS byte.
    pub tos: Option<u8>,
    /// SO_BUSY_POLL, microseconds.
    pub busy_poll_us: Option<u32>,
    /// SO_RCVBUF / SO_SNDBUF, bytes.
    pub rcvbuf: Option<u32>,
    pub sndbuf: Option<u32>,
}

/// The options as the kernel reports them after they were set (what the run really had).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketReport {
    pub so_priority: Option<i32>,
    pub tos: Option<i32>,
    pub busy_poll_us: Option<i32>,
    /// As reported by getsockopt (the kernel doubles the value asked for).
    pub rcvbuf: Option<i32>,
    pub sndbuf: Option<i32>,
}

/// `udp ping`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UdpPingConfig {
    /// The reflector, IP:PORT or [IPv6]:PORT.
    pub to: String,
    /// Local address to bind (None: any, of the target's family, port chosen by the kernel).
    pub bind: Option<String>,
    /// Create the socket in this network namespace (`ip netns` name).
    pub netns: Option<String>,
    pub mode: PingMode,
    pub period_ns: i64,
    /// The UDP payload size, bytes (16..=65507).
    pub payload: usize,
    pub deadline_ns: i64,
    pub loss_timeout_ns: i64,
    pub duration_ns: Option<i64>,
    pub count: Option<u64>,
    pub window_ns: i64,
    pub rt: RtConfig,
    pub socket: SocketConfig,
    /// How long the pre-flight check waits for a reflector (0: no check).
    pub preflight_ns: i64,
    /// Raise this flag on the first round trip above its threshold (`--trace-on-spike`).
    #[serde(skip)]
    pub spike: Option<rtlab_core::sink::SpikeHook>,
}

/// `udp reflect`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UdpReflectConfig {
    /// Where to listen, IP:PORT or [IPv6]:PORT (never anywhere else).
    pub bind: String,
    pub netns: Option<String>,
    /// Leave requests with (seq + 1) % N == 0 unanswered (a known loss, for tests).
    pub drop_every: Option<u64>,
    pub duration_ns: Option<i64>,
    /// Stop after this many datagrams received.
    pub count: Option<u64>,
    pub window_ns: i64,
    pub rt: RtConfig,
    pub socket: SocketConfig,
    /// The cost window its thread counts in: None, its own (`reflect`, with the datagrams
    /// it received as messages); `udp` for the pair's reflector in the ping's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_window: Option<String>,
    /// Raise this flag on the first turnaround above its threshold (`--trace-on-spike`).
    #[serde(skip)]
    pub spike: Option<rtlab_core::sink::SpikeHook>,
}

/// Errors that stop the probe before it measures (exit 2 in the CLI).
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    #[error("{0}")]
    Invalid(String),
    #[error("{flag} {addr}: {why}")]
    Socket { flag: &'static str, addr: String, why: String },
    #[error("--to {addr}: no reflector answered within {waited_ms} ms{detail} (is `rtlab udp reflect --bind {addr}` running there?)")]
    NoReflector { addr: String, waited_ms: i64, detail: &'static str },
    #[error(transparent)]
    Sys(#[from] SysError),
}

const STACK_BYTES: usize = 512 * 1024;
const RX_BYTES: usize = 65536;

/// Parse `IP:PORT` / `[IPv6]:PORT`, naming the flag and what is accepted on error.
pub fn parse_addr(flag: &'static str, s: &str, port_zero_ok: bool) -> Result<SocketAddr, UdpError> {
    let a: SocketAddr = s.trim().parse().map_err(|_| UdpError::Invalid(format!(
        "{flag} '{s}': not an address with a port (accepted: IPv4:PORT or [IPv6]:PORT, e.g. 127.0.0.1:9000 or [::1]:9000)"
    )))?;
    if a.port() == 0 && !port_zero_ok {
        return Err(UdpError::Invalid(format!(
            "{flag} '{s}': port 0 is not a port to send to (give 1-65535)"
        )));
    }
    Ok(a)
}

fn check_rt(rt: &RtConfig, online: &[usize]) -> Result<Policy, UdpError> {
    let p = rt.policy;
    p.check_priority(rt.priority).map_err(|e| UdpError::Invalid(format!("--priority: {e}")))?;
    if let Some(c) = rt.cpu_of(0) {
        if !online.contains(&c) {
            return Err(UdpError::Invalid(format!(
                "--cpus: CPU {c} is not online (online: {online:?})"
            )));
        }
    }
    Ok(p)
}

impl UdpPingConfig {
    /// Check what can be checked before anything runs.
    pub fn validate(
        &self,
        online: &[usize],
    ) -> Result<(SocketAddr, Option<SocketAddr>, Policy), UdpError> {
        let to = parse_addr("--to", &self.to, false)?;
        let bind = self.bind.as_deref().map(|b| parse_addr("--bind", b, true)).transpose()?;
        if let Some(b) = bind {
            if b.is_ipv4() != to.is_ipv4() {
                return Err(UdpError::Invalid(format!(
                    "--bind {b}: not the family of --to {to} (both IPv4 or both IPv6)"
                )));
            }
        }
        if !(wire::MIN_LEN..=wire::MAX_LEN).contains(&self.payload) {
            return Err(UdpError::Invalid(format!(
                "--payload {}: out of range (accepted: {}..={} bytes)",
                self.payload,
                wire::MIN_LEN,
                wire::MAX_LEN
            )));
        }
        if self.mode == PingMode::Periodic && self.period_ns < 1_000 {
            return Err(UdpError::Invalid(format!(
                "--period {} ns: must be at least 1us",
                self.period_ns
            )));
        }
        if self.loss_timeout_ns <= 0 {
            return Err(UdpError::Invalid("--loss-timeout: must be above zero".into()));
        }
        if self.deadline_ns <= 0 {
            return Err(UdpError::Invalid("--deadline: must be above zero".into()));
        }
        if self.duration_ns.is_none() && self.count.is_none() {
            return Err(UdpError::Invalid("give --duration or --count".into()));
        }
        check_length(self.duration_ns, self.count, self.window_ns)?;
        let p = check_rt(&self.rt, online)?;
        Ok((to, bind, p))
    }

    /// Requests planned (0: not known ahead, pingpong by duration).
    pub fn planned(&self) -> u64 {
        match (self.mode, self.count, self.duration_ns) {
            (_, Some(c), None) => c,
            (PingMode::Periodic, c, Some(d)) => {
                let n = (d + self.period_ns - 1) / self.period_ns;
                c.map_or(n as u64, |c| c.min(n as u64))
            }
            (PingMode::Pingpong, c, Some(_)) => c.unwrap_or(0),
            (_, None, None) => 0,
        }
    }
}

/// The length and window flags both sides take: --duration, --count, --window.
fn check_length(
    duration_ns: Option<i64>,
    count: Option<u64>,
    window_ns: i64,
) -> Result<(), UdpError> {
    if matches!(duration_ns, Some(d) if d <= 0) {
        return Err(UdpError::Invalid("--duration: must be above zero".into()));
    }
    if count == Some(0) {
        return Err(UdpError::Invalid("--count 0: must be at least 1".into()));
    }
    if window_ns <= 0 {
        return Err(UdpError::Invalid("--window: must be above zero".into()));
    }
    Ok(())
}

impl UdpReflectConfig {
    pub fn validate(&self, online: &[usize]) -> Result<(SocketAddr, Policy), UdpError> {
        let bind = parse_addr("--bind", &self.bind, true)?; // port 0: the kernel picks one (reported)
        if self.drop_every == Some(0) {
            return Err(UdpError::Invalid("--drop-every 0: must be at least 1".into()));
        }
        check_length(self.duration_ns, self.count, self.window_ns)?;
        let p = check_rt(&self.rt, online)?;
        Ok((bind, p))
    }
}

fn io_why(e: &std::io::Error, addr: &SocketAddr) -> String {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) => format!("port {} is already in use", addr.port()),
        Some(libc::EADDRNOTAVAIL) => {
            format!("{} is not an address of this host (or of its network namespace)", addr.ip())
        }
        Some(libc::EACCES) => format!("permission denied (ports below 1024 need root): {e}"),
        Some(libc::ENETUNREACH) => format!("network unreachable: no route to {}", addr.ip()),
        Some(libc::EHOSTUNREACH) => format!("host unreachable: {}", addr.ip()),
        Some(libc::EAFNOSUPPORT) => format!(
            "address family not supported here (no {} on this host?)",
            if addr.is_ipv4() { "IPv4" } else { "IPv6" }
        ),
        _ => e.to_string(),
    }
}

/// Bind (and connect) a UDP socket, in the namespace `netns` when given.
fn open_socket(
    netns: Option<&str>,
    bind: SocketAddr,
    connect: Option<SocketAddr>,
    bind_flag: &'static str,
) -> Result<UdpSocket, UdpError> {
    let make = move || -> Result<UdpSocket, UdpError> {
        let s = UdpSocket::bind(bind).map_err(|e| UdpError::Socket {
            flag: bind_flag,
            addr: bind.to_string(),
            why: io_why(&e, &bind),
        })?;
        if let Some(to) = connect {
            s.connect(to).map_err(|e| UdpError::Socket {
                flag: "--to",
                addr: to.to_string(),
                why: io_why(&e, &to),
            })?;
        }
        Ok(s)
    };
    match netns {
        None => make(),
        Some(ns) => {
            let path = if ns.contains('/') { ns.to_string() } else { format!("/run/netns/{ns}") };
            if !std::path::Path::new(&path).exists() {
                return Err(UdpError::Invalid(format!("--netns {ns}: no such network namespace ({path}); create it with `rtlab netns up`")));
            }
            sysnet::socket_in_netns(&path, make)
                .map_err(|e| UdpError::Invalid(format!("--netns {ns}: {e}")))?
        }
    }
}

/// Apply the socket options and read back what the kernel took.
fn apply_socket(s: &UdpSocket, ipv6: bool, c: &SocketConfig) -> Result<SocketReport, UdpError> {
    let fd = s.as_raw_fd();
    let flagged = |flag: &str, e: SysError| UdpError::Invalid(format!("{flag}: {e}"));
    // TOS first: on IPv4 setting it also sets SO_PRIORITY, which an explicit --so-priority then overrides
    if let Some(t) = c.tos {
        sysnet::set_tos(fd, ipv6, t).map_err(|e| flagged("--tos", e))?;
    }
    if let Some(p) = c.so_priority {
        let p = i32::try_from(p)
            .map_err(|_| UdpError::Invalid(format!("--so-priority {p}: too large")))?;
        sysnet::set_priority(fd, p).map_err(|e| flagged("--so-priority", e))?;
    }
    if let Some(us) = c.busy_poll_us {
        sysnet::set_busy_poll(fd, us).map_err(|e| flagged("--busy-poll", e))?;
    }
    if let Some(b) = c.rcvbuf {
        sysnet::set_buffer(fd, Buffer::Receive, b).map_err(|e| flagged("--rcvbuf", e))?;
    }
    if let Some(b) = c.sndbuf {
        sysnet::set_buffer(fd, Buffer::Send, b).map_err(|e| flagged("--sndbuf", e))?;
    }
    Ok(SocketReport {
        so_priority: sysnet::priority(fd),
        tos: sysnet::tos(fd, ipv6),
        busy_poll_us: sysnet::busy_poll(fd),
        rcvbuf: sysnet::buffer(fd, Buffer::Receive),
        sndbuf: sysnet::buffer(fd, Buffer::Send),
    })
}

/// Send hellos until one is answered or `wait_ns` has passed.
fn preflight(
    s: &UdpSocket,
    run_id: u64,
    payload: usize,
    to: SocketAddr,
    wait_ns: i64,
) -> Result<(), UdpError> {
    let start = rtlab_sys::clock::monotonic_ns();
    let mut tx = vec![0u8; payload];
    let mut rx = vec![0u8; RX_BYTES];
    let mut refused = false;
    let mut attempt = 0u64;
    while rtlab_sys::clock::monotonic_ns() - start < wait_ns {
        wire::write(&mut tx, Kind::Hello, run_id, attempt, rtlab_sys::clock::monotonic_ns());
        attempt += 1;
        if let Err(e) = s.send(&tx) {
            refused |= e.raw_os_error() == Some(libc::ECONNREFUSED);
        }
        let until = rtlab_sys::clock::monotonic_ns() + 200_000_000;
        while rtlab_sys::clock::monotonic_ns() < until {
            match sysnet::recv_dontwait(s.as_raw_fd(), &mut rx) {
                Ok(Some(n)) => {
                    if let Ok(h) = wire::parse(&rx[..n]) {
                        if h.kind == Kind::HelloReply && h.is_run(run_id) {
                            return Ok(());
                        }
                    }
                }
                Ok(None) => {
                    let left =
                        ((until - rtlab_sys::clock::monotonic_ns()) / 1_000_000).max(1) as i32;
                    sysnet::wait2(s.as_raw_fd(), -1, left.min(50));
                }
                Err(e) => refused |= e.raw_os_error() == Some(libc::ECONNREFUSED),
            }
        }
    }
    Err(UdpError::NoReflector {
        addr: to.to_string(),
        waited_ms: wait_ns / 1_000_000,
        detail: if refused { " (ICMP port unreachable: nothing listens on that port)" } else { "" },
    })
}

/// What a ping run measured.
pub struct PingOutcome {
    pub run_id: u64,
    pub counts: Counts,
    pub rtt: Recorder,
    pub lateness: Recorder,
    pub end: LoopEnd,
    pub duration_ns: i64,
    pub socket: SocketReport,
    pub local_addr: String,
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
    pub memory_lock: Option<Result<(), String>>,
    /// Requests whose fate the tracker remembers.
    pub ring_capacity: usize,
}

fn recorder(deadline_ns: i64, window_ns: i64, planned_span_ns: i64) -> Recorder {
    let window_capacity = ((planned_span_ns / window_ns.max(1)) as usize + 2).clamp(16, 1 << 16);
    Recorder::new(
        &RecorderConfig {
            deadline_ns,
            window_ns,
            window_capacity,
            max_samples: None,
            us_histogram_buckets: None,
            spike_threshold_ns: None,
        },
        None,
    )
}

/// Run `udp ping`. `on_progress(sent, planned)` is called about every 100 ms from the
/// calling thread (never from the measuring thread).
pub fn ping(
    cfg: &UdpPingConfig,
    stop: Arc<AtomicBool>,
    mut on_progress: impl FnMut(u64, u64),
) -> Result<PingOutcome, UdpError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let (to, bind, policy) = cfg.validate(&online)?;
    let local = bind.unwrap_or_else(|| {
        if to.is_ipv4() {
            "0.0.0.0:0".parse().unwrap()
        } else {
            "[::]:0".parse().unwrap()
        }
    });
    let sock = open_socket(cfg.netns.as_deref(), local, Some(to), "--bind")?;
    let socket = apply_socket(&sock, to.is_ipv6(), &cfg.socket)?;
    let local_addr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let run_id = sysnet::random_u64();
    if cfg.preflight_ns > 0 {
        preflight(&sock, run_id, cfg.payload, to, cfg.preflight_ns)?;
    }
    let timer = AbsTimer::new()?;
    let (lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);

    // everything the loop touches, allocated now
    let outstanding = match cfg.mode {
        PingMode::Periodic => (cfg.loss_timeout_ns / cfg.period_ns) as usize + 1024,
        PingMode::Pingpong => 1024,
    };
    let mut tracker = Tracker::new(
        outstanding.min(1 << 22),
        cfg.loss_timeout_ns,
        cfg.deadline_ns,
        run_id,
        cfg.payload,
    );
    let ring_capacity = tracker.capacity();
    let span = match (cfg.duration_ns, cfg.count) {
        (Some(d), _) => d,
        (None, Some(c)) if cfg.mode == PingMode::Periodic => c as i64 * cfg.period_ns,
        _ => 4096 * cfg.window_ns,
    };
    // a late send (the thread held off its CPU) is a spike as much as a slow round trip
    let mut rtt = recorder(cfg.deadline_ns, cfg.window_ns, span).with_hook(cfg.spike.as_ref());
    let mut lateness = recorder(i64::MAX, cfg.window_ns, span)
        .with_hook(cfg.spike.as_ref().map(|h| h.for_source(1)).as_ref());
    let mut tx = vec![0u8; cfg.payload];
    wire::write(&mut tx, Kind::Request, run_id, 0, 0);
    wire::fill(&mut tx);
    let mut rx = vec![0u8; RX_BYTES];
    let plan = PingPlan {
        mode: cfg.mode,
        period_ns: cfg.period_ns,
        count: cfg.count,
        duration_ns: cfg.duration_ns,
        loss_timeout_ns: cfg.loss_timeout_ns,
    };
    let progress = Arc::new(AtomicU64::new(0));
    let spec = ThreadSpec {
        name: "rtlab-udp-ping".into(),
        policy,
        priority: cfg.rt.priority,
        cpus: cfg.rt.cpu_of(0).map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let (stop_in, progress_in) = (stop.clone(), progress.clone());
    let period = cfg.period_ns;
    let mode = cfg.mode;
    let t0 = rtlab_sys::clock::monotonic_ns();
    let h = spawn_rt(&spec, move || {
        prefault_stack(STACK_BYTES / 4);
        let seen = (current_policy(), current_affinity());
        let mut link = UdpLink { sock, timer };
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin("udp");
        // the first slot one period from now, so the thread is settled when it comes
        let start =
            rtlab_sys::clock::monotonic_ns() + if mode == PingMode::Periodic { period } else { 0 };
        rtt.origin_monotonic_ns = Some(start);
        lateness.origin_monotonic_ns = Some(start);
        let end = Pinger {
            link: &mut link,
            tracker: &mut tracker,
            tx: &mut tx,
            rx: &mut rx,
            run_id,
            rtt: &mut rtt,
            lateness: &mut lateness,
            stop: &stop_in,
            progress: &progress_in,
        }
        .run(&plan, start);
        cost.end();
        rtlab_sys::usage::set_messages("udp", tracker.counts.sent);
        (tracker.counts, rtt, lateness, end, seen)
    })?;
    let planned = cfg.planned();
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed), planned);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (counts, rtt, lateness, end, (policy_seen, cpus_seen)) =
        h.join().map_err(|_| UdpError::Invalid("the ping thread panicked".into()))?;
    on_progress(counts.sent, planned);
    drop(lock_guard);
    Ok(PingOutcome {
        run_id,
        counts,
        rtt,
        lateness,
        end,
        duration_ns: rtlab_sys::clock::monotonic_ns() - t0,
        socket,
        local_addr,
        policy_seen,
        cpus_seen,
        memory_lock,
        ring_capacity,
    })
}

fn socket_labels(labels: &mut BTreeMap<String, String>, s: &SocketReport) {
    let mut put = |k: &str, v: Option<i32>| {
        labels.insert(k.into(), v.map(|v| v.to_string()).unwrap_or_else(|| "unknown".into()));
    };
    put("so_priority", s.so_priority);
    put("tos", s.tos);
    put("busy_poll_us", s.busy_poll_us);
    put("rcvbuf", s.rcvbuf);
    put("sndbuf", s.sndbuf);
}

fn rt_labels(
    labels: &mut BTreeMap<String, String>,
    rt: &RtConfig,
    seen: &(Option<Policy>, i32),
    cpus: &[usize],
) {
    labels.insert("policy".into(), rt.policy.name().into());
    labels.insert("priority".into(), rt.priority.to_string());
    labels
        .insert("cpu".into(), rt.cpu_of(0).map(|c| c.to_string()).unwrap_or_else(|| "any".into()));
    labels.insert("policy_seen".into(), seen.0.map(|p| p.name()).unwrap_or("unknown").into());
    labels.insert("priority_seen".into(), seen.1.to_string());
    labels.insert("cpus_seen".into(), format!("{cpus:?}"));
}

/// The RTT definition, as DESIGN.md words it.
pub const RTT_DEFINITION: &str = "RTT = reply received - request sent, both on the client's CLOCK_MONOTONIC (S1: T2 - T1); first replies within the loss timeout only";

impl PingOutcome {
    /// `ping` (RTT, with every counter) and, in periodic mode, `ping.send_lateness`.
    pub fn streams(&self, cfg: &UdpPingConfig) -> Vec<Stream> {
        let c = &self.counts;
        let mut labels = BTreeMap::new();
        labels.insert("mode".into(), cfg.mode.name().into());
        labels.insert("to".into(), cfg.to.clone());
        labels.insert("from".into(), self.local_addr.clone());
        if let Some(ns) = &cfg.netns {
            labels.insert("netns".into(), ns.clone());
        }
        labels.insert("payload".into(), cfg.payload.to_string());
        if cfg.mode == PingMode::Periodic {
            labels.insert("period_ns".into(), cfg.period_ns.to_string());
        }
        labels.insert("loss_timeout_ns".into(), cfg.loss_timeout_ns.to_string());
        labels.insert("run_id".into(), format!("{:016x}", self.run_id));
        labels.insert("sent".into(), c.sent.to_string());
        labels.insert("foreign".into(), c.foreign.to_string());
        labels.insert("stale".into(), c.stale.to_string());
        labels.insert("send_errors".into(), c.send_errors.to_string());
        labels.insert("receive_errors".into(), c.receive_errors.to_string());
        labels.insert("hello_replies".into(), c.hello_replies.to_string());
        labels.insert("ring".into(), self.ring_capacity.to_string());
        rt_labels(&mut labels, &cfg.rt, &self.policy_seen, &self.cpus_seen);
        socket_labels(&mut labels, &self.socket);
        let mut s = Stream::from_recorder("ping", "rtt", RTT_DEFINITION, labels.clone(), &self.rtt);
        s.stats.lost = Some(c.lost);
        s.stats.late = Some(c.late);
        s.stats.duplicates = Some(c.duplicates);
        s.stats.out_of_order = Some(c.out_of_order);
        s.stats.malformed = Some(c.malformed);
        if cfg.mode == PingMode::Pingpong {
            s.stats.overruns = None;
        }
        let mut out = vec![s];
        if cfg.mode == PingMode::Periodic {
            let mut l = Stream::from_recorder(
                "ping.send_lateness",
                "send_lateness",
                "request sent - its slot on the absolute grid start + k*T (client CLOCK_MONOTONIC): the sender's own wake-up latency",
                labels,
                &self.lateness,
            );
            l.deadline_ns = cfg.period_ns;
            l.stats.missed = None;
            l.stats.overruns = None;
            out.push(l);
        }
        out
    }
}

/// What a reflector saw.
pub struct ReflectOutcome {
    pub counts: ReflectCounts,
    pub forward_lost: u64,
    /// Reply sent - request received, on the reflector's clock.
    pub turnaround: Recorder,
    pub end: LoopEnd,
    pub duration_ns: i64,
    pub socket: SocketReport,
    pub local_addr: String,
    pub policy_seen: (Option<Policy>, i32),
    pub cpus_seen: Vec<usize>,
    pub memory_lock: Option<Result<(), String>>,
}

/// Run `udp reflect` until the stop flag, the duration or the count. `on_ready(addr)` is
/// called once the socket is bound (before any datagram is taken); `on_progress(received)`
/// about every 100 ms, from the calling thread.
pub fn reflect(
    cfg: &UdpReflectConfig,
    stop: Arc<AtomicBool>,
    on_ready: impl FnOnce(&str),
    mut on_progress: impl FnMut(u64),
) -> Result<ReflectOutcome, UdpError> {
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let (bind, policy) = cfg.validate(&online)?;
    let sock = open_socket(cfg.netns.as_deref(), bind, None, "--bind")?;
    let socket = apply_socket(&sock, bind.is_ipv6(), &cfg.socket)?;
    sock.set_nonblocking(true).map_err(|e| UdpError::Invalid(format!("--bind {bind}: {e}")))?;
    let local_addr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let (lock_guard, memory_lock) = crate::hold::lock_memory(cfg.rt.mlockall);
    let mut turnaround =
        recorder(i64::MAX, cfg.window_ns, cfg.duration_ns.unwrap_or(4096 * cfg.window_ns))
            .with_hook(cfg.spike.as_ref());
    let mut reflector = Reflector::new(cfg.drop_every);
    let mut buf = vec![0u8; RX_BYTES];
    let progress = Arc::new(AtomicU64::new(0));
    let spec = ThreadSpec {
        name: "rtlab-udp-refl".into(),
        policy,
        priority: cfg.rt.priority,
        cpus: cfg.rt.cpu_of(0).map(|c| vec![c]),
        stack_bytes: STACK_BYTES,
    };
    let (stop_in, progress_in) = (stop.clone(), progress.clone());
    let (duration, count) = (cfg.duration_ns, cfg.count);
    let cost_window = cfg.cost_window.clone();
    let t0 = rtlab_sys::clock::monotonic_ns();
    let h = spawn_rt(&spec, move || {
        prefault_stack(STACK_BYTES / 4);
        let seen = (current_policy(), current_affinity());
        let fd = sock.as_raw_fd();
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin(cost_window.as_deref().unwrap_or("reflect"));
        let start = rtlab_sys::clock::monotonic_ns();
        turnaround.origin_monotonic_ns = Some(start);
        let mut index = 0u64;
        let end = loop {
            if stop_in.load(Ordering::Relaxed) {
                break LoopEnd::Interrupted;
            }
            if matches!(count, Some(c) if reflector.counts.received >= c) {
                break LoopEnd::Count;
            }
            let now = rtlab_sys::clock::monotonic_ns();
            if matches!(duration, Some(d) if now - start >= d) {
                break LoopEnd::Duration;
            }
            match sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let t_recv = rtlab_sys::clock::monotonic_ns();
                    if let Action::Answer(len) = reflector.handle(&mut buf, n) {
                        if sock.send_to(&buf[..len], from).is_err() {
                            reflector.counts.send_errors += 1;
                        }
                        let t_done = rtlab_sys::clock::monotonic_ns();
                        turnaround.record(index, t_recv - start, t_done - t_recv);
                        index += 1;
                    }
                    progress_in.store(reflector.counts.received, Ordering::Relaxed);
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::Interrupted =>
                {
                    // wake at least every 100 ms to see the stop flag and the duration
                    let left = duration
                        .map(|d| ((start + d - now) / 1_000_000 + 1).clamp(1, 100) as i32)
                        .unwrap_or(100);
                    sysnet::wait2(fd, -1, left);
                }
                Err(_) => {} // an ICMP error queued on the socket: nothing to answer
            }
        };
        cost.end();
        if cost_window.is_none() {
            rtlab_sys::usage::set_messages("reflect", reflector.counts.received);
        }
        (reflector, turnaround, end, seen)
    })?;
    on_ready(&local_addr);
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (reflector, turnaround, end, (policy_seen, cpus_seen)) =
        h.join().map_err(|_| UdpError::Invalid("the reflector thread panicked".into()))?;
    on_progress(reflector.counts.received);
    drop(lock_guard);
    let forward_lost = reflector.forward_lost();
    Ok(ReflectOutcome {
        counts: reflector.counts,
        forward_lost,
        turnaround,
        end,
        duration_ns: rtlab_sys::clock::monotonic_ns() - t0,
        socket,
        local_addr,
        policy_seen,
        cpus_seen,
        memory_lock,
    })
}

impl ReflectOutcome {
    /// One stream, `reflector`: the turnaround samples and what the forward path showed.
    pub fn streams(&self, cfg: &UdpReflectConfig) -> Vec<Stream> {
        let c = &self.counts;
        let mut labels = BTreeMap::new();
        labels.insert("bind".into(), self.local_addr.clone());
        if let Some(ns) = &cfg.netns {
            labels.insert("netns".into(), ns.clone());
        }
        for (k, v) in [
            ("received", c.received),
            ("answered", c.answered),
            ("hellos", c.hellos),
            ("dropped_on_purpose", c.dropped),
            ("foreign", c.foreign),
            ("send_errors", c.send_errors),
            ("runs", c.runs.len() as u64),
            ("other_runs_requests", c.other_runs_requests),
        ] {
            labels.insert(k.into(), v.to_string());
        }
        if let Some(n) = cfg.drop_every {
            labels.insert("drop_every".into(), n.to_string());
        }
        rt_labels(&mut labels, &cfg.rt, &self.policy_seen, &self.cpus_seen);
        socket_labels(&mut labels, &self.socket);
        let mut s = Stream::from_recorder(
            "reflector",
            "turnaround",
            "reply sent - request received, on the reflector's CLOCK_MONOTONIC (the reflector's share of the RTT); lost = requests never received below the highest sequence number of each run (forward path)",
            labels,
            &self.turnaround,
        );
        s.deadline_ns = 0;
        s.stats.missed = None;
        s.stats.overruns = None;
        s.stats.lost = Some(self.forward_lost);
        s.stats.duplicates = Some(c.runs.iter().map(|r| r.duplicates).sum());
        s.stats.out_of_order = Some(c.runs.iter().map(|r| r.out_of_order).sum());
        s.stats.malformed = Some(c.malformed + c.foreign);
        vec![s]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping_cfg(to: &str) -> UdpPingConfig {
        UdpPingConfig {
            to: to.into(),
            bind: None,
            netns: None,
            mode: PingMode::Periodic,
            period_ns: 1_000_000,
            payload: 500,
            deadline_ns: 1_000_000,
            loss_timeout_ns: 500_000_000,
            duration_ns: None,
            count: Some(200),
            window_ns: 1_000_000_000,
            rt: RtConfig::normal(),
            socket: SocketConfig::default(),
            preflight_ns: 2_000_000_000,
            spike: None,
        }
    }

    fn reflect_cfg(drop_every: Option<u64>) -> UdpReflectConfig {
        UdpReflectConfig {
            bind: "127.0.0.1:0".into(),
            netns: None,
            drop_every,
            duration_ns: None,
            count: None,
            window_ns: 1_000_000_000,
            rt: RtConfig::normal(),
            socket: SocketConfig::default(),
            cost_window: None,
            spike: None,
        }
    }

    #[test]
    fn validation_names_the_flag() {
        let online = [0usize, 1];
        let bad = |f: &dyn Fn(&mut UdpPingConfig)| {
            let mut c = ping_cfg("127.0.0.1:9");
            f(&mut c);
            c.validate(&online).unwrap_err().to_string()
        };
        assert!(bad(&|c| c.to = "nonsense".into()).contains("--to 'nonsense'"));
        assert!(bad(&|c| c.to = "127.0.0.1:0".into()).contains("port 0"));
        assert!(bad(&|c| c.payload = 15).contains("--payload 15"));
        assert!(bad(&|c| c.payload = 65508).contains("16..=65507"));
        assert!(bad(&|c| c.bind = Some("[::1]:0".into())).contains("family"));
        assert!(bad(&|c| c.rt.cpus = Some(vec![7])).contains("CPU 7"));
        assert!(bad(&|c| c.rt.policy = rtlab_core::rt::Policy::Fifo).contains("--priority"));
        assert!(bad(&|c| c.count = None).contains("--duration or --count"));
        let r = reflect_cfg(Some(0));
        assert!(r.validate(&online).unwrap_err().to_string().contains("--drop-every 0"));
    }

    #[test]
    fn planned_requests() {
        let mut c = ping_cfg("127.0.0.1:9");
        c.count = None;
        c.duration_ns = Some(20_000_000_000);
        assert_eq!(c.planned(), 20_000);
        c.count = Some(5);
        assert_eq!(c.planned(), 5);
        c.mode = PingMode::Pingpong;
        c.count = None;
        assert_eq!(c.planned(), 0);
    }

    /// A real run on loopback: a reflector thread and a pinger, with a known loss.
    #[test]
    fn loopback_run_counts_exactly_the_dropped_requests() {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let rstop = stop.clone();
        let r = std::thread::spawn(move || {
            reflect(&reflect_cfg(Some(50)), rstop, |a| tx.send(a.to_string()).unwrap(), |_| {})
                .unwrap()
        });
        let addr = rx.recv().unwrap();
        let cfg = ping_cfg(&addr);
        let out = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
        stop.store(true, Ordering::Relaxed);
        let refl = r.join().unwrap();
        let c = out.counts;
        // 200 slots, each sent or skipped (an overrun: the sender late past it, noise here)
        assert_eq!(c.sent + out.rtt.overruns, 200, "{c:?}");
        let dropped = c.sent / 50; // seqs 49, 99, 149, 199 of those sent
        assert_eq!(c.lost, dropped, "{c:?}");
        assert_eq!(c.samples, c.sent - dropped);
        assert_eq!((c.late, c.duplicates, c.malformed), (0, 0, 0));
        assert!(out.rtt.running.min > 0);
        assert_eq!(refl.counts.dropped, dropped);
        assert_eq!(refl.counts.runs.len(), 1);
        assert_eq!(refl.counts.runs[0].requests, c.sent);
        assert_eq!(refl.forward_lost, 0);
        assert!(refl.counts.hellos >= 1);
        let streams = out.streams(&cfg);
        assert_eq!(streams[0].stats.lost, Some(dropped));
        assert_eq!(streams[0].stats.count, c.sent - dropped);
        assert_eq!(streams[1].name, "ping.send_lateness");
        assert_eq!(streams[1].stats.count, c.sent);
        let rs = refl.streams(&reflect_cfg(Some(50)));
        assert_eq!(rs[0].stats.count, c.sent - dropped + refl.counts.hellos);
    }

    #[test]
    fn pingpong_on_loopback() {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let rstop = stop.clone();
        let r = std::thread::spawn(move || {
            reflect(&reflect_cfg(None), rstop, |a| tx.send(a.to_string()).unwrap(), |_| {}).unwrap()
        });
        let mut cfg = ping_cfg(&rx.recv().unwrap());
        cfg.mode = PingMode::Pingpong;
        cfg.count = Some(2000);
        cfg.payload = 16;
        let out = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).unwrap();
        stop.store(true, Ordering::Relaxed);
        r.join().unwrap();
        assert_eq!((out.counts.sent, out.counts.samples, out.counts.lost), (2000, 2000, 0));
        assert_eq!(out.streams(&cfg).len(), 1);
    }

    #[test]
    fn no_reflector_is_one_clear_error() {
        // a port nothing listens on: bind one, learn its number, close it
        let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut cfg = ping_cfg(&format!("127.0.0.1:{port}"));
        cfg.preflight_ns = 300_000_000;
        let e = ping(&cfg, Arc::new(AtomicBool::new(false)), |_, _| {}).err().unwrap().to_string();
        assert!(e.contains("no reflector answered") && e.contains("port unreachable"), "{e}");
    }

    #[test]
    fn a_port_in_use_is_named() {
        let held = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut cfg = reflect_cfg(None);
        cfg.bind = held.local_addr().unwrap().to_string();
        let e = reflect(&cfg, Arc::new(AtomicBool::new(true)), |_| {}, |_| {})
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("already in use"), "{e}");
    }
}
