//! The UDP probe's configuration: the ping's and the reflector's, socket and XDP options,
//! real-time settings, and their checks (made before anything touches the system).

use super::ping::PingMode;
use super::wire::{self};
use rtlab_sys::sched::Policy;
use rtlab_sys::SysError;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
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

pub(super) const STACK_BYTES: usize = 512 * 1024;
pub(super) const RX_BYTES: usize = 65536;

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
