//! Opening the UDP probe's link: the socket (in a network namespace when asked, its options
//! applied or refused), the pre-flight hellos that prove a reflector answers, and the
//! stamping device's checks (the XDP path opens in `xdp/open.rs`).

use super::config::{SocketConfig, SocketReport, Timestamps, UdpError, XdpReport, RX_BYTES};
use super::link::UdpLink;
use super::ping::{Link, Recv};
use super::wire::{self, Kind};
use super::xdp::XdpLink;
use rtlab_sys::net::{self as sysnet, Buffer};
use rtlab_sys::SysError;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

pub(super) fn in_netns<T: Send + 'static>(
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
pub(super) fn open_socket(
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
pub(super) fn apply_socket(
    s: &UdpSocket,
    ipv6: bool,
    c: &SocketConfig,
) -> Result<SocketReport, UdpError> {
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
pub(super) fn preflight(
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

/// What a ping's link is when opened: the socket's settings as the kernel has them, the
/// local address, the link, the XDP steering held (to detach after), the XDP path's report
/// and the device whose stamps are read (with what it offers).
pub(super) type OpenedPing =
    (SocketReport, String, AnyLink, Option<Held>, Option<XdpReport>, Option<(String, String)>);

/// Drop the steering program (the kernel detaches it with its link), then its journal
/// guard (which restores the journal: the program is gone by then).
pub(super) type Held = (rtlab_sys::xdp::Steering, Option<Box<dyn std::any::Any>>);
pub(super) fn detach(held: Option<Held>) {
    if let Some((steering, journaled)) = held {
        drop(steering);
        drop(journaled);
    }
}

/// The socket path's link or the XDP path's.
pub(super) enum AnyLink {
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
pub(super) fn check_etf(netns: Option<&str>, dev: &str) -> Result<(), UdpError> {
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
pub(super) fn stamp_device(
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
