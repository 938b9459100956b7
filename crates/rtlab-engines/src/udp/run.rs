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
use super::ping::{Link, PingMode, PingPlan, Pinger, Recv};
use super::reflect::{Action, ReflectCounts, Reflector};
use super::track::{Counts, Tracker};
use super::wire::{self, Kind};
use super::xdp::XdpLink;
use crate::timer::LoopEnd;
use rtlab_core::schema::Stream;
use rtlab_core::sink::{Recorder, RecorderConfig, Sink};
use rtlab_sys::memory::prefault_stack;
use rtlab_sys::net::{self as sysnet, AbsTimer, Buffer};
use rtlab_sys::sched::{current_affinity, current_policy, spawn_rt, Policy, ThreadSpec};
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
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

/// `--xdp`: the round trip through AF_XDP sockets (see `xdp.rs`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct XdpConfig {
    /// Attach the steering program on the generic path even where the driver takes it
    /// natively (`--xdp-attach generic`).
    #[serde(default)]
    pub generic: bool,
    /// Called with (netns, device) before the program is attached: the caller journals it.
    #[serde(skip)]
    pub journal: Option<XdpJournal>,
}

/// The journaling hook of [`XdpConfig`], called with (netns, device) before the program is
/// attached: Ok(a guard the run holds until the program is detached, and then drops, which
/// restores the journal), Err stops the run before anything is attached.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct XdpJournal(
    pub Arc<dyn Fn(Option<&str>, &str) -> Result<Box<dyn std::any::Any>, String> + Send + Sync>,
);

impl std::fmt::Debug for XdpJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("XdpJournal")
    }
}

impl PartialEq for XdpJournal {
    fn eq(&self, o: &XdpJournal) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

/// What the XDP path of a run had (labels `xdp_*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct XdpReport {
    pub dev: String,
    /// `native` or `generic`.
    pub attach: &'static str,
    /// `copy` or `zero-copy`.
    pub copy: &'static str,
    pub queue: u32,
    /// Frames the kernel dropped at the socket (rx ring full or no fill frame).
    pub rx_dropped: u64,
    /// Frames that reached the socket and did not parse as IPv4/UDP.
    pub malformed_frames: u64,
}

/// `--timestamps`: which kernel timestamps split each round trip into stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Timestamps {
    /// Taken by the kernel when the driver sends and receives (any driver that offers them).
    Software,
    /// Taken by the NIC (a NIC and driver that offer them).
    Hardware,
}

/// The stages of the round trips (`--timestamps`), and what the device offered.
pub struct StageOutcome {
    pub stamps: Box<super::link::Stamps>,
    pub dev: String,
    /// What the device's driver offers, in words.
    pub offers: String,
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
    /// The XDP path (None: the socket path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpConfig>,
    /// Split each round trip into stages from the kernel's timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<Timestamps>,
    /// Launch-time sending (`--txtime LEAD`): each request handed to the kernel this long
    /// before its slot with SO_TXTIME, to leave at the slot through an etf qdisc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txtime_lead_ns: Option<i64>,
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
    /// The XDP path (None: the socket path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XdpConfig>,
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
    #[error("--to {addr}: no reflector answered within {waited_ms} ms{}", no_reflector_why(addr, *launched_late, *refused))]
    NoReflector { addr: String, waited_ms: i64, launched_late: Option<(u64, u64)>, refused: bool },
    #[error(transparent)]
    Sys(#[from] SysError),
}

/// Why no reflector answered, as far as the pinger can tell, and what to do.
fn no_reflector_why(addr: &str, launched_late: Option<(u64, u64)>, refused: bool) -> String {
    match (launched_late, refused) {
        (Some((late, hellos)), _) if late > 0 => format!(
            ": the qdisc dropped {late} of the {hellos} hellos as released after their launch \
             time (etf woke later than its delta allows on this machine: raise the profile's \
             etf_delta, or the --txtime lead with it)"
        ),
        (_, true) => format!(
            " (ICMP port unreachable: nothing listens on that port; is `rtlab udp reflect \
             --bind {addr}` running there?)"
        ),
        _ => format!(" (is `rtlab udp reflect --bind {addr}` running there?)"),
    }
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
        if let Some(lead) = self.txtime_lead_ns {
            if self.mode != PingMode::Periodic {
                return Err(UdpError::Invalid("--txtime: launch times are slots of the periodic mode (not with --mode pingpong)".into()));
            }
            if lead <= 0 || lead >= self.period_ns {
                return Err(UdpError::Invalid(format!(
                    "--txtime {lead} ns: the lead must be above zero and below the period ({} ns)",
                    self.period_ns
                )));
            }
            if self.xdp.is_some() {
                return Err(UdpError::Invalid("--txtime with --xdp: launch times go through the etf qdisc, which AF_XDP frames bypass".into()));
            }
        }
        if self.xdp.is_some() && self.timestamps.is_some() {
            return Err(UdpError::Invalid("--timestamps with --xdp: the stages are measured on the socket path (the XDP path's tx stamps need AF_XDP tx metadata, not supported here)".into()));
        }
        if self.xdp.is_some() {
            check_xdp("--to", &to, &self.socket)?;
            if self.preflight_ns <= 0 {
                return Err(UdpError::Invalid("--xdp with --no-preflight: the XDP path learns the link-layer address to send to from the reflector's answer to the pre-flight hello".into()));
            }
        }
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
        if self.xdp.is_some() {
            check_xdp("--bind", &bind, &self.socket)?;
            if bind.ip().is_unspecified() {
                return Err(UdpError::Invalid(format!("--bind {bind}: with --xdp give the address of the device to steer (the XDP program matches one address), not the unspecified one")));
            }
        }
        Ok((bind, p))
    }
}

/// What the XDP path cannot take: IPv6, and the socket options it has no socket for.
fn check_xdp(flag: &str, addr: &SocketAddr, c: &SocketConfig) -> Result<(), UdpError> {
    if addr.is_ipv6() {
        return Err(UdpError::Invalid(format!(
            "{flag} {addr}: --xdp builds IPv4 frames only (give an IPv4 address, or drop --xdp)"
        )));
    }
    for (set, opt) in [(c.rcvbuf.is_some(), "--rcvbuf"), (c.sndbuf.is_some(), "--sndbuf")] {
        if set {
            return Err(UdpError::Invalid(format!("{opt} with --xdp: the XDP path has no socket buffer or qdisc for it to act on (AF_XDP frames go from the ring to the driver)")));
        }
    }
    Ok(())
}

/// Run `f` in the network namespace `netns` (a helper thread enters it), or here.
fn in_netns<T: Send + 'static>(
    netns: Option<&str>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, UdpError> {
    match netns {
        None => Ok(f()),
        Some(ns) => {
            let path = if ns.contains('/') { ns.to_string() } else { format!("/run/netns/{ns}") };
            if !std::path::Path::new(&path).exists() {
                return Err(UdpError::Invalid(format!("--netns {ns}: no such network namespace ({path}); create it with `rtlab netns up`")));
            }
            sysnet::socket_in_netns(&path, f)
                .map_err(|e| UdpError::Invalid(format!("--netns {ns}: {e}")))
        }
    }
}

/// The XDP side of a run: the socket, the steering program, the device.
struct XdpSide {
    xsk: rtlab_sys::xdp::Xsk,
    steering: rtlab_sys::xdp::Steering,
    mac: [u8; 6],
    report: XdpReport,
    /// The journal's guard: dropped after `steering`.
    journaled: Option<Box<dyn std::any::Any>>,
}

/// Find the device holding `local`, journal, attach the steering program for `local` and
/// open the XDP socket on its queue 0; check that `payload` fits one frame.
fn open_xdp(
    netns: Option<&str>,
    local: SocketAddrV4,
    x: &XdpConfig,
    socket: &SocketConfig,
    payload: usize,
) -> Result<XdpSide, UdpError> {
    let (so_priority, busy_poll_us) = (socket.so_priority, socket.busy_poll_us);
    use rtlab_sys::xdp::{self as sx, AttachMode, Steer, Xsk};
    let ip = *local.ip();
    let (dev, ifindex, mac, mtu) = in_netns(netns, move || sx::device_of(ip))?
        .map_err(|e| UdpError::Invalid(format!("--xdp: {e}")))?;
    if payload + 28 > mtu as usize {
        return Err(UdpError::Invalid(format!("--payload {payload} with --xdp: above what one frame of {dev} carries (MTU {mtu}: at most {} bytes; the XDP path does not fragment)", (mtu as usize).saturating_sub(28))));
    }
    let journaled = match &x.journal {
        Some(j) => Some((j.0)(netns, &dev).map_err(|e| {
            UdpError::Invalid(format!("--xdp: journaling the XDP program on {dev}: {e}"))
        })?),
        None => None,
    };
    let generic = x.generic;
    let port = local.port();
    let (steering, xsk) = in_netns(netns, move || -> Result<_, SysError> {
        let s = sx::attach_steering(ifindex, Steer { ip, port }, generic)?;
        let xsk = Xsk::open(ifindex, 0, s.mode == AttachMode::Generic)?;
        s.insert(0, &xsk)?;
        Ok((s, xsk))
    })?
    .map_err(|e| UdpError::Invalid(format!("--xdp on {dev}: {e}")))?;
    if let Some(p) = so_priority {
        let p = i32::try_from(p)
            .map_err(|_| UdpError::Invalid(format!("--so-priority {p}: too large")))?;
        sysnet::set_priority(xsk.fd(), p)
            .map_err(|e| UdpError::Invalid(format!("--so-priority with --xdp: {e}")))?;
    }
    if let Some(us) = busy_poll_us {
        sx::set_busy_poll(&xsk, us)
            .map_err(|e| UdpError::Invalid(format!("--busy-poll {us} with --xdp: {e}")))?;
    }
    let report = XdpReport {
        dev,
        attach: steering.mode.name(),
        copy: xsk.mode.name(),
        queue: xsk.queue,
        rx_dropped: 0,
        malformed_frames: 0,
    };
    Ok(XdpSide { xsk, steering, mac, report, journaled })
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
    in_netns(netns, make)?
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

/// Send hellos until one is answered or `wait_ns` has passed. With launch times, the hellos'
/// refused launches are read from the error queue: when the qdisc drops them as late, that
/// is said rather than "no reflector".
fn preflight(
    s: &UdpSocket,
    run_id: u64,
    payload: usize,
    to: SocketAddr,
    wait_ns: i64,
    launch: Option<(i64, i64)>,
) -> Result<(), UdpError> {
    let start = rtlab_sys::clock::monotonic_ns();
    let mut tx = vec![0u8; payload];
    let mut rx = vec![0u8; RX_BYTES];
    let (mut err_buf, mut cmsg) = (vec![0u8; RX_BYTES + 256], [0u8; rtlab_sys::stamp::CMSG_BYTES]);
    let mut refused = false;
    let mut attempt = 0u64;
    let mut missed = 0u64;
    let fd = s.as_raw_fd();
    let mut drain_errors = |missed: &mut u64| {
        while let Some(r) = rtlab_sys::stamp::take_tx_stamp(fd, &mut err_buf, &mut cmsg) {
            *missed += r.launch_missed as u64;
        }
    };
    while rtlab_sys::clock::monotonic_ns() - start < wait_ns {
        let now = rtlab_sys::clock::monotonic_ns();
        wire::write(&mut tx, Kind::Hello, run_id, attempt, now);
        attempt += 1;
        // with launch times (an etf qdisc drops what has none) the hellos get one too
        let sent = match launch {
            Some((tai_offset, lead)) => {
                let at = (now + lead + tai_offset).max(0) as u64;
                rtlab_sys::stamp::send_at(s.as_raw_fd(), &tx, at).map(|_| ())
            }
            None => s.send(&tx).map(|_| ()),
        };
        if let Err(e) = sent {
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
            if launch.is_some() {
                drain_errors(&mut missed);
            }
        }
    }
    Err(UdpError::NoReflector {
        addr: to.to_string(),
        waited_ms: wait_ns / 1_000_000,
        launched_late: launch.map(|_| (missed, attempt)),
        refused,
    })
}

/// The pre-flight check of the XDP path: hellos go out through the kernel socket, the answer
/// comes back through the XDP socket; its source MAC is where the requests go.
fn preflight_xdp(
    s: &UdpSocket,
    xsk: &mut rtlab_sys::xdp::Xsk,
    run_id: u64,
    payload: usize,
    to: SocketAddr,
    wait_ns: i64,
) -> Result<[u8; 6], UdpError> {
    let now = rtlab_sys::clock::monotonic_ns;
    let start = now();
    let mut tx = vec![0u8; payload];
    let mut rx = vec![0u8; RX_BYTES];
    let mut refused = false;
    let mut attempt = 0u64;
    while now() - start < wait_ns {
        wire::write(&mut tx, Kind::Hello, run_id, attempt, now());
        attempt += 1;
        if let Err(e) = s.send(&tx) {
            refused |= e.raw_os_error() == Some(libc::ECONNREFUSED);
        }
        let until = now() + 200_000_000;
        while now() < until {
            // what reaches the kernel socket: ICMP errors (and answers the program let by)
            if let Err(e) = sysnet::recv_dontwait(s.as_raw_fd(), &mut rx) {
                refused |= e.raw_os_error() == Some(libc::ECONNREFUSED);
            }
            xsk.reap();
            if let Some(fr) = xsk.rx() {
                let f = xsk.frame(fr.addr);
                let f = &f[..(fr.len as usize).min(f.len())];
                let mac = super::xdp::parse(f).and_then(|u| {
                    let h = wire::parse(&f[u.payload.clone()]).ok()?;
                    (h.kind == Kind::HelloReply && h.is_run(run_id)).then_some(u.src_mac)
                });
                xsk.release(fr.addr);
                if let Some(m) = mac {
                    return Ok(m);
                }
                continue;
            }
            let left = ((until - now()) / 1_000_000).clamp(1, 50) as i32;
            sysnet::wait2(xsk.fd(), s.as_raw_fd(), left);
        }
    }
    Err(UdpError::NoReflector {
        addr: to.to_string(),
        waited_ms: wait_ns / 1_000_000,
        launched_late: None,
        refused,
    })
}

/// Drop the steering program (the kernel detaches it with its link), then its journal
/// guard (which restores the journal: the program is gone by then).
type Held = (rtlab_sys::xdp::Steering, Option<Box<dyn std::any::Any>>);
fn detach(held: Option<Held>) {
    if let Some((steering, journaled)) = held {
        drop(steering);
        drop(journaled);
    }
}

/// The socket path's link or the XDP path's.
enum AnyLink {
    Socket(UdpLink),
    Xdp(Box<XdpLink>),
}

impl Link for AnyLink {
    #[inline]
    fn now(&mut self) -> i64 {
        rtlab_sys::clock::monotonic_ns()
    }
    #[inline]
    fn send(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            AnyLink::Socket(l) => l.send(buf),
            AnyLink::Xdp(l) => l.send(buf),
        }
    }
    #[inline]
    fn recv_until(&mut self, buf: &mut [u8], until_ns: i64) -> Recv {
        match self {
            AnyLink::Socket(l) => l.recv_until(buf, until_ns),
            AnyLink::Xdp(l) => l.recv_until(buf, until_ns),
        }
    }
    #[inline]
    fn send_at(&mut self, buf: &[u8], launch_ns: i64) -> std::io::Result<()> {
        match self {
            AnyLink::Socket(l) => l.send_at(buf, launch_ns),
            AnyLink::Xdp(l) => l.send_at(buf, launch_ns),
        }
    }
    #[inline]
    fn on_start(&mut self, start: i64) {
        if let AnyLink::Socket(l) = self {
            l.on_start(start)
        }
    }
    #[inline]
    fn on_send(&mut self, seq: u64) {
        if let AnyLink::Socket(l) = self {
            l.on_send(seq)
        }
    }
    #[inline]
    fn on_sample(&mut self, seq: u64, at_ns: i64) {
        if let AnyLink::Socket(l) = self {
            l.on_sample(seq, at_ns)
        }
    }
}

/// Whether this kernel has the etf qdisc (built in, a module, or loaded).
fn kernel_has_etf() -> bool {
    if std::path::Path::new("/sys/module/sch_etf").exists() {
        return true;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else { return true };
    let dir = format!("/lib/modules/{}", release.trim());
    ["modules.builtin", "modules.dep"].iter().any(|f| {
        std::fs::read_to_string(format!("{dir}/{f}"))
            .map(|s| s.contains("sch_etf"))
            .unwrap_or(false)
    })
}

/// `--txtime`: the device's qdisc must honour launch times (an etf qdisc, root or a child).
fn check_etf(netns: Option<&str>, dev: &str) -> Result<(), UdpError> {
    let d = dev.to_string();
    let shown = in_netns(netns, move || {
        std::process::Command::new("tc").args(["qdisc", "show", "dev", &d]).output()
    })?
    .map_err(|e| {
        UdpError::Invalid(format!("--txtime: running tc(8) to read {dev}'s qdisc: {e}"))
    })?;
    let text = String::from_utf8_lossy(&shown.stdout);
    if text.lines().any(|l| l.starts_with("qdisc etf ")) {
        return Ok(());
    }
    if !kernel_has_etf() {
        return Err(UdpError::Invalid("--txtime: this kernel has no etf qdisc (CONFIG_NET_SCH_ETF: sch_etf is neither built in nor a module), so launch times cannot be honoured here".into()));
    }
    let root = text
        .lines()
        .find(|l| l.contains(" root "))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("none");
    Err(UdpError::Invalid(format!("--txtime: {dev} has no etf qdisc (root: {root}) to honour the launch times: apply a profile with qdisc = [\"etf\"], or `tc qdisc replace dev {dev} root etf clockid CLOCK_TAI delta 300000`")))
}

/// The device `local` leaves by and what it offers; for `--timestamps hardware`, an error
/// (none of this machine's devices offer them: said, not pretended).
fn stamp_device(
    netns: Option<&str>,
    local: SocketAddr,
    ts: Timestamps,
) -> Result<(String, String), UdpError> {
    let SocketAddr::V4(l4) = local else {
        return Ok(("?".into(), "not asked (IPv6)".into()));
    };
    let ip = *l4.ip();
    let (dev, bits) = in_netns(netns, move || -> Result<_, SysError> {
        let (dev, ..) = rtlab_sys::xdp::device_of(ip)?;
        let bits = rtlab_sys::stamp::device_offers(&dev)?;
        Ok((dev, bits))
    })?
    .map_err(|e| UdpError::Invalid(format!("--timestamps: {e}")))?;
    let offers = rtlab_sys::stamp::describe_offers(bits);
    if ts == Timestamps::Hardware {
        let why = if rtlab_sys::stamp::offers_hardware(bits) {
            "rtlab does not take hardware timestamps yet (it would set the NIC's timestamping with SIOCSHWTSTAMP and read its PHC): use --timestamps software".to_string()
        } else {
            format!("{dev} offers no hardware timestamps (its driver gives: {offers}): use --timestamps software")
        };
        return Err(UdpError::Invalid(format!("--timestamps hardware: {why}")));
    }
    Ok((dev, offers))
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
    /// The XDP path's facts (None: the socket path).
    pub xdp: Option<XdpReport>,
    /// The round trips' stages (`--timestamps`).
    pub stages: Option<StageOutcome>,
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

/// What a ping's link is when opened: the socket's settings as the kernel has them, the
/// local address, the link, the XDP steering held (to detach after), the XDP path's report
/// and the device whose stamps are read (with what it offers).
type OpenedPing =
    (SocketReport, String, AnyLink, Option<Held>, Option<XdpReport>, Option<(String, String)>);

/// The socket path of a ping: its settings, the kernel's stamps and launch times where
/// asked for, the preflight.
fn open_ping_socket(
    cfg: &UdpPingConfig,
    sock: UdpSocket,
    to: SocketAddr,
    run_id: u64,
    timer: AbsTimer,
) -> Result<OpenedPing, UdpError> {
    let socket = apply_socket(&sock, to.is_ipv6(), &cfg.socket)?;
    let local_addr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    // launch times need the launch stamps: software timestamps come with them
    let ts = cfg.timestamps.or(cfg.txtime_lead_ns.map(|_| Timestamps::Software));
    let stamps = match ts {
        None => None,
        Some(ts) => {
            let local =
                sock.local_addr().map_err(|e| UdpError::Invalid(format!("--to {to}: {e}")))?;
            Some(stamp_device(cfg.netns.as_deref(), local, ts)?)
        }
    };
    let tai_offset = match (cfg.txtime_lead_ns, &stamps) {
        (Some(_), Some((dev, _))) => {
            check_etf(cfg.netns.as_deref(), dev)?;
            rtlab_sys::stamp::enable_txtime(sock.as_raw_fd(), libc::CLOCK_TAI, true)
                .map_err(|e| UdpError::Invalid(format!("--txtime: {e}")))?;
            Some(rtlab_sys::stamp::tai_ns() - rtlab_sys::clock::monotonic_ns())
        }
        _ => None,
    };
    let enable = |tx: bool| {
        rtlab_sys::stamp::enable_software(sock.as_raw_fd(), tx)
            .map_err(|e| UdpError::Invalid(format!("--timestamps software: {e}")))
    };
    if stamps.is_some() {
        // rx stamps before the hellos: the kernel turns them on through a work item,
        // which has run by the first request; tx stamps after (they would wait on
        // the error queue)
        enable(false)?;
    }
    if cfg.preflight_ns > 0 {
        let launch = tai_offset.zip(cfg.txtime_lead_ns);
        preflight(&sock, run_id, cfg.payload, to, cfg.preflight_ns, launch)?;
    }
    if stamps.is_some() {
        enable(true)?;
    }
    let link = UdpLink { sock, timer, stamps: None, tai_offset };
    Ok((socket, local_addr, AnyLink::Socket(link), None, None, stamps))
}

/// The XDP path of a ping: an AF_XDP socket on the device holding the local address, the
/// peer's MAC found by the preflight, the frames' header.
fn open_ping_xdp(
    cfg: &UdpPingConfig,
    x: &XdpConfig,
    sock: UdpSocket,
    to: SocketAddr,
    run_id: u64,
    timer: AbsTimer,
) -> Result<OpenedPing, UdpError> {
    let (SocketAddr::V4(l4), SocketAddr::V4(to4)) =
        (sock.local_addr().map_err(|e| UdpError::Invalid(format!("--to {to}: {e}")))?, to)
    else {
        return Err(UdpError::Invalid(format!("--to {to}: --xdp builds IPv4 frames only")));
    };
    let mut side = open_xdp(cfg.netns.as_deref(), l4, x, &cfg.socket, cfg.payload)?;
    let dst_mac = preflight_xdp(&sock, &mut side.xsk, run_id, cfg.payload, to, cfg.preflight_ns)?;
    let tos = cfg.socket.tos.unwrap_or(0);
    let header = super::xdp::header(side.mac, dst_mac, l4, to4, tos, cfg.payload);
    let socket = SocketReport {
        so_priority: sysnet::priority(side.xsk.fd()),
        tos: Some(tos as i32),
        busy_poll_us: cfg.socket.busy_poll_us.map(|u| u as i32),
        ..Default::default()
    };
    let link = XdpLink {
        xsk: side.xsk,
        timer,
        header,
        busy: cfg.socket.busy_poll_us.is_some(),
        malformed_frames: 0,
        _sock: sock,
    };
    let held = (side.steering, side.journaled);
    Ok((socket, l4.to_string(), AnyLink::Xdp(Box::new(link)), Some(held), Some(side.report), None))
}

/// A ping's recorders, sized for its span: the round trips (held to the deadline) and the
/// send lateness; with the kernel's stamps, the link's stage recorders too.
fn ping_recorders(
    cfg: &UdpPingConfig,
    outstanding: usize,
    link: &mut AnyLink,
    stamps: bool,
) -> (Recorder, Recorder) {
    let span = match (cfg.duration_ns, cfg.count) {
        (Some(d), _) => d,
        (None, Some(c)) if cfg.mode == PingMode::Periodic => c as i64 * cfg.period_ns,
        _ => 4096 * cfg.window_ns,
    };
    // a late send (the thread held off its CPU) is a spike as much as a slow round trip
    let rtt = recorder(cfg.deadline_ns, cfg.window_ns, span).with_hook(cfg.spike.as_ref());
    let lateness = recorder(i64::MAX, cfg.window_ns, span)
        .with_hook(cfg.spike.as_ref().map(|h| h.for_source(1)).as_ref());
    if let (AnyLink::Socket(l), true) = (link, stamps) {
        let window = cfg.window_ns;
        let launch = cfg.txtime_lead_ns.is_some();
        l.stamps =
            Some(Box::new(super::link::Stamps::new(cfg.payload, outstanding, launch, || {
                recorder(i64::MAX, window, span)
            })));
    }
    (rtt, lateness)
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
    let run_id = sysnet::random_u64();
    let timer = AbsTimer::new()?;
    let (socket, local_addr, mut link, steering, xdp_report, stamp_dev) = match &cfg.xdp {
        None => open_ping_socket(cfg, sock, to, run_id, timer)?,
        Some(x) => open_ping_xdp(cfg, x, sock, to, run_id, timer)?,
    };
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
    let (mut rtt, mut lateness) = ping_recorders(cfg, outstanding, &mut link, stamp_dev.is_some());
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
        lead_ns: cfg.txtime_lead_ns.unwrap_or(0),
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
        let mut link = link;
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
        let (xdp_seen, stamps) = match link {
            AnyLink::Xdp(l) => (Some((l.xsk.stats().rx_dropped, l.malformed_frames)), None),
            AnyLink::Socket(l) => (None, l.stamps),
        };
        (tracker.counts, rtt, lateness, end, (seen, xdp_seen, stamps))
    })?;
    let planned = cfg.planned();
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed), planned);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (counts, rtt, lateness, end, ((policy_seen, cpus_seen), xdp_seen, stamps)) =
        h.join().map_err(|_| UdpError::Invalid("the ping thread panicked".into()))?;
    let stages = match (stamps, stamp_dev) {
        (Some(stamps), Some((dev, offers))) => Some(StageOutcome { stamps, dev, offers }),
        _ => None,
    };
    on_progress(counts.sent, planned);
    drop(lock_guard);
    detach(steering);
    let xdp = xdp_report.map(|mut r| {
        if let Some((dropped, malformed)) = xdp_seen {
            (r.rx_dropped, r.malformed_frames) = (dropped, malformed);
        }
        r
    });
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
        xdp,
        stages,
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

/// `path` (socket / xdp) and, on the XDP path, what it had.
fn path_labels(labels: &mut BTreeMap<String, String>, x: Option<&XdpReport>) {
    labels.insert("path".into(), if x.is_some() { "xdp" } else { "socket" }.into());
    if let Some(x) = x {
        labels.insert("xdp_dev".into(), x.dev.clone());
        labels.insert("xdp_attach".into(), x.attach.into());
        labels.insert("xdp_copy".into(), x.copy.into());
        labels.insert("xdp_queue".into(), x.queue.to_string());
        labels.insert("xdp_rx_dropped".into(), x.rx_dropped.to_string());
        labels.insert("xdp_malformed_frames".into(), x.malformed_frames.to_string());
    }
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
        if let Some(lead) = cfg.txtime_lead_ns {
            // launch times: a request's send stamp is its slot, when it is to leave
            labels.insert("txtime_lead_ns".into(), lead.to_string());
        }
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
        path_labels(&mut labels, self.xdp.as_ref());
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
        let launch = self.stages.as_ref().and_then(|s| s.stamps.launch.as_ref());
        if let (PingMode::Periodic, Some(launch), Some(st)) = (cfg.mode, launch, &self.stages) {
            // launch times: the send lateness is the launch's, the hand-off is its own stream
            let mut labels = labels.clone();
            labels.insert("txtime_lead_ns".into(), cfg.txtime_lead_ns.unwrap_or(0).to_string());
            labels.insert("launch_errors".into(), st.stamps.launch_errors.to_string());
            labels.insert("no_tx_stamp".into(), st.stamps.no_tx_stamp.to_string());
            for (name, what, def, r) in [
                ("ping.send_lateness", "send_lateness", "the request's driver tx software timestamp (its launch through the etf qdisc, CLOCK_REALTIME) - its slot on the absolute grid start + k*T: how far from its slot it really left", launch),
                ("ping.handoff_lateness", "handoff_lateness", "request handed to the kernel with SO_TXTIME - (its slot - the lead) (client CLOCK_MONOTONIC): the sender's own wake-up latency", &self.lateness),
            ] {
                let mut l = Stream::from_recorder(name, what, def, labels.clone(), r);
                l.deadline_ns = cfg.period_ns;
                l.stats.missed = None;
                l.stats.overruns = None;
                out.push(l);
            }
        } else if cfg.mode == PingMode::Periodic {
            let mut l = Stream::from_recorder(
                "ping.send_lateness",
                "send_lateness",
                "request sent - its slot on the absolute grid start + k*T (client CLOCK_MONOTONIC): the sender's own wake-up latency",
                labels.clone(),
                &self.lateness,
            );
            l.deadline_ns = cfg.period_ns;
            l.stats.missed = None;
            l.stats.overruns = None;
            out.push(l);
        }
        if let Some(st) = self.stages.as_ref().filter(|_| cfg.timestamps.is_some()) {
            let mut labels = labels.clone();
            labels.insert("timestamps".into(), "software".into());
            labels.insert("timestamps_dev".into(), st.dev.clone());
            labels.insert("timestamps_offered".into(), st.offers.clone());
            labels.insert("no_tx_stamp".into(), st.stamps.no_tx_stamp.to_string());
            labels.insert("no_rx_stamp".into(), st.stamps.no_rx_stamp.to_string());
            for (name, what, def, r) in [
                ("ping.tx_stack", "tx_stack", "the request's driver tx software timestamp - the user's CLOCK_REALTIME read right before send(): the sender's stack (syscall, UDP/IP, qdisc, driver)", &st.stamps.tx_stack),
                ("ping.wire", "wire", "the reply's rx software timestamp - the request's tx software timestamp (kernel CLOCK_REALTIME): the link both ways and the far side, its reflector included", &st.stamps.wire),
                ("ping.rx_wakeup", "rx_wakeup", "the user's CLOCK_REALTIME read when it took the reply - the reply's rx software timestamp: the receive stack and the pinger's wake-up (scheduler)", &st.stamps.rx_wakeup),
            ] {
                let mut s = Stream::from_recorder(name, what, def, labels.clone(), r);
                s.deadline_ns = 0;
                s.stats.missed = None;
                s.stats.overruns = None;
                out.push(s);
            }
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
    /// The XDP path's facts (None: the socket path).
    pub xdp: Option<XdpReport>,
}

/// What a reflector loop reads each round (the socket path's and the XDP path's; `busy`:
/// the XDP path's busy polling).
struct XdpLoop<'a> {
    start: i64,
    duration: Option<i64>,
    count: Option<u64>,
    busy: bool,
    stop: &'a AtomicBool,
    progress: &'a AtomicU64,
}

/// The reflector on the socket path: answer each request as it comes (non-blocking
/// receives, a poll of at most 100 ms between them to see the stop flag and the duration).
fn reflect_socket(
    sock: &UdpSocket,
    reflector: &mut Reflector,
    turnaround: &mut Recorder,
    buf: &mut [u8],
    l: &XdpLoop,
) -> LoopEnd {
    let fd = sock.as_raw_fd();
    let mut index = 0u64;
    loop {
        if l.stop.load(Ordering::Relaxed) {
            break LoopEnd::Interrupted;
        }
        if matches!(l.count, Some(c) if reflector.counts.received >= c) {
            break LoopEnd::Count;
        }
        let now = rtlab_sys::clock::monotonic_ns();
        if matches!(l.duration, Some(d) if now - l.start >= d) {
            break LoopEnd::Duration;
        }
        match sock.recv_from(buf) {
            Ok((n, from)) => {
                let t_recv = rtlab_sys::clock::monotonic_ns();
                if let Action::Answer(len) = reflector.handle(buf, n) {
                    if sock.send_to(&buf[..len], from).is_err() {
                        reflector.counts.send_errors += 1;
                    }
                    let t_done = rtlab_sys::clock::monotonic_ns();
                    turnaround.record(index, t_recv - l.start, t_done - t_recv);
                    index += 1;
                }
                l.progress.store(reflector.counts.received, Ordering::Relaxed);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::Interrupted =>
            {
                // wake at least every 100 ms to see the stop flag and the duration
                let left = l
                    .duration
                    .map(|d| ((l.start + d - now) / 1_000_000 + 1).clamp(1, 100) as i32)
                    .unwrap_or(100);
                sysnet::wait2(fd, -1, left);
            }
            Err(_) => {} // an ICMP error queued on the socket: nothing to answer
        }
    }
}

/// The reflector on the XDP path: take a frame, answer it in place and put it on the tx
/// ring, or give it back. The turnaround is stamped as on the socket path: from the frame
/// taken to the kick that sends the answer returned.
fn reflect_xdp(
    xsk: &mut rtlab_sys::xdp::Xsk,
    reflector: &mut Reflector,
    turnaround: &mut Recorder,
    l: &XdpLoop,
    malformed_frames: &mut u64,
) -> LoopEnd {
    use rtlab_sys::xdp::Frame;
    let now = rtlab_sys::clock::monotonic_ns;
    let mut index = 0u64;
    let mut polls = 0u32;
    loop {
        if l.stop.load(Ordering::Relaxed) {
            return LoopEnd::Interrupted;
        }
        if matches!(l.count, Some(c) if reflector.counts.received >= c) {
            return LoopEnd::Count;
        }
        xsk.reap();
        let Some(fr) = xsk.rx() else {
            if l.busy {
                xsk.poke_rx();
                polls += 1;
                if polls.is_multiple_of(1024)
                    && matches!(l.duration, Some(d) if now() - l.start >= d)
                {
                    return LoopEnd::Duration;
                }
                std::hint::spin_loop();
            } else {
                let t = now();
                if matches!(l.duration, Some(d) if t - l.start >= d) {
                    return LoopEnd::Duration;
                }
                // wake at least every 100 ms to see the stop flag and the duration
                let left = l
                    .duration
                    .map(|d| ((l.start + d - t) / 1_000_000 + 1).clamp(1, 100) as i32)
                    .unwrap_or(100);
                sysnet::wait2(xsk.fd(), -1, left);
            }
            continue;
        };
        let t_recv = now();
        let f = xsk.frame(fr.addr);
        let len = (fr.len as usize).min(f.len());
        let answered = match super::xdp::parse(&f[..len]) {
            Some(u) => {
                let n = u.payload.len();
                match reflector.handle(&mut f[u.payload.clone()], n) {
                    Action::Answer(_) => {
                        super::xdp::answer_in_place(&mut f[..len], &u);
                        true
                    }
                    Action::Ignore => false,
                }
            }
            None => {
                reflector.counts.received += 1;
                reflector.counts.malformed += 1;
                *malformed_frames += 1;
                false
            }
        };
        if answered {
            if !xsk.tx(Frame { addr: fr.addr, len: len as u32 }) {
                reflector.counts.send_errors += 1;
                xsk.release(fr.addr);
            } else if xsk.kick().is_err() {
                reflector.counts.send_errors += 1;
            }
            turnaround.record(index, t_recv - l.start, now() - t_recv);
            index += 1;
        } else {
            xsk.release(fr.addr);
        }
        l.progress.store(reflector.counts.received, Ordering::Relaxed);
    }
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
    sock.set_nonblocking(true).map_err(|e| UdpError::Invalid(format!("--bind {bind}: {e}")))?;
    let local = sock.local_addr().map_err(|e| UdpError::Invalid(format!("--bind {bind}: {e}")))?;
    let local_addr = local.to_string();
    let (socket, xdp_side) = match (&cfg.xdp, local) {
        (None, _) => (apply_socket(&sock, bind.is_ipv6(), &cfg.socket)?, None),
        (Some(x), SocketAddr::V4(l4)) => {
            // the largest payload one frame of the device carries is checked per frame
            let side = open_xdp(cfg.netns.as_deref(), l4, x, &cfg.socket, 16)?;
            let report = SocketReport {
                so_priority: sysnet::priority(side.xsk.fd()),
                busy_poll_us: cfg.socket.busy_poll_us.map(|u| u as i32),
                ..Default::default()
            };
            (report, Some(side))
        }
        (Some(_), a) => {
            return Err(UdpError::Invalid(format!("--bind {a}: --xdp builds IPv4 frames only")))
        }
    };
    let busy = cfg.socket.busy_poll_us.is_some();
    let (mut xsk, steering, xdp_report) = match xdp_side {
        Some(x) => (Some(x.xsk), Some((x.steering, x.journaled)), Some(x.report)),
        None => (None, None, None),
    };
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
        // cost: this thread's counters right before its loop and right after it
        let cost = rtlab_sys::usage::begin(cost_window.as_deref().unwrap_or("reflect"));
        let start = rtlab_sys::clock::monotonic_ns();
        turnaround.origin_monotonic_ns = Some(start);
        let mut xdp_seen = None;
        let end = if let Some(xsk) = xsk.as_mut() {
            let mut malformed_frames = 0u64;
            let end = reflect_xdp(
                xsk,
                &mut reflector,
                &mut turnaround,
                &XdpLoop { start, duration, count, busy, stop: &stop_in, progress: &progress_in },
                &mut malformed_frames,
            );
            xdp_seen = Some((xsk.stats().rx_dropped, malformed_frames));
            end
        } else {
            let l =
                XdpLoop { start, duration, count, busy, stop: &stop_in, progress: &progress_in };
            reflect_socket(&sock, &mut reflector, &mut turnaround, &mut buf, &l)
        };
        drop(xsk);
        cost.end();
        if cost_window.is_none() {
            rtlab_sys::usage::set_messages("reflect", reflector.counts.received);
        }
        (reflector, turnaround, end, (seen, xdp_seen))
    })?;
    on_ready(&local_addr);
    while !h.is_finished() {
        on_progress(progress.load(Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (reflector, turnaround, end, ((policy_seen, cpus_seen), xdp_seen)) =
        h.join().map_err(|_| UdpError::Invalid("the reflector thread panicked".into()))?;
    on_progress(reflector.counts.received);
    drop(lock_guard);
    detach(steering);
    let xdp = xdp_report.map(|mut r| {
        if let Some((dropped, malformed)) = xdp_seen {
            (r.rx_dropped, r.malformed_frames) = (dropped, malformed);
        }
        r
    });
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
        xdp,
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
        path_labels(&mut labels, self.xdp.as_ref());
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
            xdp: None,
            timestamps: None,
            txtime_lead_ns: None,
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
            xdp: None,
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
