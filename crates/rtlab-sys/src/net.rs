//! Sockets for the UDP probe: socket options (SO_PRIORITY, IP_TOS / IPV6_TCLASS,
//! SO_BUSY_POLL, SO_RCVBUF / SO_SNDBUF), an absolute CLOCK_MONOTONIC timerfd and a
//! poll(2) on a socket and that timer, sockets created inside a network namespace, and
//! random run ids.
//!
//! Contract: the functions used in a hot loop ([`AbsTimer::arm`], [`wait2`], [`recv_dontwait`])
//! never allocate. Every failure carries the option or path and the value it concerns;
//! EPERM names the capability that is missing. [`socket_in_netns`] switches only a
//! short-lived helper thread into the namespace, never the calling thread, so nothing
//! has to be put back; [`unshare_netns`] moves the calling thread into a new private
//! namespace, [`save_netns`] / [`SavedNetns::restore`] bring it back. (socket(7), ip(7), ipv6(7), timerfd_create(2), poll(2), setns(2), unshare(2))

use crate::SysError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn set_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: i32,
    what: &str,
) -> Result<(), SysError> {
    let v: libc::c_int = value;
    // SAFETY: v is a live c_int and its size is passed; fd is owned by the caller.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = errno();
        let what = if e == libc::EPERM {
            format!("{what} (needs CAP_NET_ADMIN: run as root)")
        } else {
            what.to_string()
        };
        return Err(SysError::os(what, e));
    }
    Ok(())
}

fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are live and sized for a c_int.
    let rc = unsafe {
        libc::getsockopt(fd, level, name, &mut v as *mut libc::c_int as *mut libc::c_void, &mut len)
    };
    (rc == 0).then_some(v)
}

/// SO_PRIORITY: the skb priority of what the socket sends (qdisc band / class, VLAN PCP).
/// Values above 6 need CAP_NET_ADMIN.
pub fn set_priority(fd: RawFd, priority: i32) -> Result<(), SysError> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY, priority, &format!("SO_PRIORITY {priority}"))
}

/// The socket's SO_PRIORITY now.
pub fn priority(fd: RawFd) -> Option<i32> {
    get_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY)
}

/// IP_TOS (IPv4) or IPV6_TCLASS (IPv6): the TOS / traffic class byte of sent packets.
/// On IPv4 the kernel also derives SO_PRIORITY from it (ip(7)).
pub fn set_tos(fd: RawFd, ipv6: bool, tos: u8) -> Result<(), SysError> {
    if ipv6 {
        set_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_TCLASS,
            tos as i32,
            &format!("IPV6_TCLASS {tos:#04x}"),
        )
    } else {
        set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos as i32, &format!("IP_TOS {tos:#04x}"))
    }
}

/// The socket's TOS / traffic class now.
pub fn tos(fd: RawFd, ipv6: bool) -> Option<i32> {
    if ipv6 {
        get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        get_int(fd, libc::IPPROTO_IP, libc::IP_TOS)
    }
}

/// SO_BUSY_POLL: busy-poll the device queue for up to `us` microseconds on a blocking
/// receive (raising it needs CAP_NET_ADMIN).
pub fn set_busy_poll(fd: RawFd, us: u32) -> Result<(), SysError> {
    set_int(
        fd,
        libc::SOL_SOCKET,
        libc::SO_BUSY_POLL,
        us.min(i32::MAX as u32) as i32,
        &format!("SO_BUSY_POLL {us}"),
    )
}

/// The socket's SO_BUSY_POLL now (us).
pub fn busy_poll(fd: RawFd) -> Option<i32> {
    get_int(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL)
}

/// Which socket buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    Receive,
    Send,
}

/// Set a socket buffer size. The plain option is capped by net.core.{r,w}mem_max; as
/// root the FORCE variant is tried first so that the size asked for is the size given.
/// Returns the size the kernel reports afterwards (it doubles the value for bookkeeping).
pub fn set_buffer(fd: RawFd, which: Buffer, bytes: u32) -> Result<i32, SysError> {
    let (plain, force, name) = match which {
        Buffer::Receive => (libc::SO_RCVBUF, libc::SO_RCVBUFFORCE, "SO_RCVBUF"),
        Buffer::Send => (libc::SO_SNDBUF, libc::SO_SNDBUFFORCE, "SO_SNDBUF"),
    };
    let v = bytes.min(i32::MAX as u32) as i32;
    if set_int(fd, libc::SOL_SOCKET, force, v, "").is_err() {
        set_int(fd, libc::SOL_SOCKET, plain, v, &format!("{name} {bytes}"))?;
    }
    Ok(buffer(fd, which).unwrap_or(-1))
}

/// A socket buffer size as the kernel reports it.
pub fn buffer(fd: RawFd, which: Buffer) -> Option<i32> {
    get_int(
        fd,
        libc::SOL_SOCKET,
        if which == Buffer::Receive { libc::SO_RCVBUF } else { libc::SO_SNDBUF },
    )
}

/// Receive one datagram without blocking (MSG_DONTWAIT). Ok(None): nothing queued.
/// Errors queued on the socket (ECONNREFUSED after an ICMP port unreachable) come back as Err.
#[inline]
pub fn recv_dontwait(fd: RawFd, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    // SAFETY: buf is a live, writable slice of the length passed.
    let n = unsafe {
        libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT)
    };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(e),
    }
}

/// A CLOCK_MONOTONIC timerfd armed at absolute times (TFD_TIMER_ABSTIME): it becomes
/// readable exactly when the time is reached, with no timer slack (timerfd_create(2)).
#[derive(Debug)]
pub struct AbsTimer {
    fd: OwnedFd,
}

impl AbsTimer {
    pub fn new() -> Result<AbsTimer, SysError> {
        // SAFETY: plain syscall; the returned fd is checked and owned below.
        let fd = unsafe {
            libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
        };
        if fd < 0 {
            return Err(SysError::os("timerfd_create(CLOCK_MONOTONIC)", errno()));
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        Ok(AbsTimer { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Fire once at the absolute CLOCK_MONOTONIC time `t_ns` (a time already past fires at once).
    #[inline]
    pub fn arm(&self, t_ns: i64) {
        let t = t_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: t / 1_000_000_000, tv_nsec: t % 1_000_000_000 },
        };
        // SAFETY: spec is a valid itimerspec; the old value is not asked for.
        unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }

    /// Consume an expiry so that the fd is no longer readable.
    #[inline]
    pub fn clear(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (not expired) is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut n as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// What [`wait2`] saw ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    pub a: bool,
    pub b: bool,
}

/// Block until `a` or `b` is readable (or an error / hang-up is pending on it), or a
/// signal arrives (then nothing is ready). `timeout_ms` < 0 waits forever.
#[inline]
pub fn wait2(a: RawFd, b: RawFd, timeout_ms: i32) -> Ready {
    let mut fds = [
        libc::pollfd { fd: a, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: b, events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: fds is a live array of two pollfd.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    if rc <= 0 {
        return Ready::default();
    }
    Ready { a: fds[0].revents != 0, b: fds[1].revents != 0 }
}

/// Run `f` on a helper thread that has entered the network namespace at `ns_path`
/// (e.g. `/run/netns/NAME`); a socket created there stays in that namespace for its
/// whole life, wherever it is used afterwards. The calling thread never changes namespace.
pub fn socket_in_netns<T: Send + 'static>(
    ns_path: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SysError> {
    let file = std::fs::File::open(ns_path).map_err(|e| SysError::Os {
        what: format!("opening network namespace {ns_path}"),
        source: e,
    })?;
    let path = ns_path.to_string();
    let h = std::thread::spawn(move || -> Result<T, SysError> {
        // SAFETY: file is an open namespace fd; setns changes only this helper thread,
        // which ends right after `f`.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            let e = errno();
            let what = if e == libc::EPERM {
                format!("entering network namespace {path} (needs CAP_SYS_ADMIN: run as root)")
            } else {
                format!("entering network namespace {path}")
            };
            return Err(SysError::os(what, e));
        }
        Ok(f())
    });
    h.join().map_err(|_| SysError::Os {
        what: format!("helper thread in {ns_path}"),
        source: std::io::Error::other("panicked"),
    })?
}

/// Move the calling thread into the network namespace at `ns_path` for the rest of its life
/// (threads and processes it creates afterwards are born there). Call it on a thread made
/// for the purpose, never on a thread that outlives the work.
pub fn enter_netns(ns_path: &str) -> Result<(), SysError> {
    let file = std::fs::File::open(ns_path).map_err(|e| SysError::Os {
        what: format!("opening network namespace {ns_path}"),
        source: e,
    })?;
    // SAFETY: file is an open namespace fd, valid for the call; setns changes only the
    // calling thread's namespace.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        let e = errno();
        let what = if e == libc::EPERM {
            format!("entering network namespace {ns_path} (needs CAP_SYS_ADMIN: run as root)")
        } else {
            format!("entering network namespace {ns_path}")
        };
        return Err(SysError::os(what, e));
    }
    Ok(())
}

/// The calling thread's network namespace, held open so that the thread can go back to it
/// ([`SavedNetns::restore`]) after [`unshare_netns`].
pub struct SavedNetns(std::fs::File);

/// Remember the calling thread's network namespace (`/proc/thread-self/ns/net`).
pub fn save_netns() -> Result<SavedNetns, SysError> {
    std::fs::File::open("/proc/thread-self/ns/net")
        .map(SavedNetns)
        .map_err(|e| SysError::Os { what: "opening /proc/thread-self/ns/net".into(), source: e })
}

impl SavedNetns {
    /// Move the calling thread back into the saved namespace.
    pub fn restore(&self) -> Result<(), SysError> {
        // SAFETY: self.0 is an open namespace fd, valid for the call; setns changes only the
        // calling thread's namespace.
        let rc = unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            return Err(SysError::os("returning to the saved network namespace", errno()));
        }
        Ok(())
    }
}

/// Why this process cannot make a network namespace (None: it can — effective uid 0, what
/// unshare(CLONE_NEWNET) and `ip netns` need here).
pub fn netns_unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    (unsafe { libc::geteuid() } != 0)
        .then_some("not root (a network namespace needs CAP_SYS_ADMIN)")
}

/// Move the calling thread (only it: namespaces are per thread in Linux) into a new, empty
/// network namespace (only a `lo`, down). Threads and processes it creates afterwards are
/// born there. The namespace has no name: it goes away with the last thread or process in
/// it (or the last open fd of it), so nothing has to be removed. (unshare(2))
pub fn unshare_netns() -> Result<(), SysError> {
    // SAFETY: unshare takes only flags; CLONE_NEWNET is allowed in a multithreaded process
    // and changes the calling thread alone.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if rc != 0 {
        let e = errno();
        let what = if e == libc::EPERM {
            "making a private network namespace (needs CAP_SYS_ADMIN: run as root)"
        } else {
            "making a private network namespace"
        };
        return Err(SysError::os(what, e));
    }
    Ok(())
}

/// The flags (`IFF_UP`, `IFF_LOOPBACK`, ...) of interface `name` in the calling thread's
/// network namespace (SIOCGIFFLAGS on a socket this thread makes: a socket belongs to the
/// namespace of the thread that creates it).
pub fn interface_flags(name: &str) -> Result<u32, SysError> {
    let what = || format!("reading the flags of interface {name}");
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(SysError::os(what(), libc::EINVAL));
    }
    // SAFETY: plain socket(2) call; the fd is owned right below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(SysError::os(what(), errno()));
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads ifr_name (NUL-terminated: the array was zeroed and the name
    // is shorter than IFNAMSIZ) and writes ifru_flags of the live `req`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if rc != 0 {
        return Err(SysError::os(what(), errno()));
    }
    // SAFETY: the kernel filled ifru_flags (a c_short) for SIOCGIFFLAGS.
    Ok(unsafe { req.ifr_ifru.ifru_flags } as u16 as u32)
}

/// IPv4 addresses assigned to interface `name` in the calling thread's network namespace
/// (getifaddrs(3), whose netlink socket belongs to that namespace); none when it cannot tell.
pub fn interface_ipv4(name: &str) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: head is a valid out-pointer; on success the list is ours until freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut at = head;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs made (not yet freed); ifa_name is a
        // NUL-terminated string; ifa_addr, when not null, points to a sockaddr whose family
        // says its type (sockaddr_in for AF_INET).
        unsafe {
            let ifa = &*at;
            if !ifa.ifa_addr.is_null()
                && (*ifa.ifa_addr).sa_family as libc::c_int == libc::AF_INET
                && std::ffi::CStr::from_ptr(ifa.ifa_name).to_bytes() == name.as_bytes()
            {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
            at = ifa.ifa_next;
        }
    }
    // SAFETY: the list from getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// A random u64 from the kernel (getrandom(2)); falls back to time and pid if it fails.
pub fn random_u64() -> u64 {
    let mut v: u64 = 0;
    // SAFETY: writes at most 8 bytes into a live u64.
    let n = unsafe { libc::getrandom(&mut v as *mut u64 as *mut libc::c_void, 8, 0) };
    if n == 8 {
        return v;
    }
    let t = crate::clock::realtime_ns() as u64;
    t ^ ((std::process::id() as u64) << 32) ^ 0x9e37_79b9_7f4a_7c15
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn options_are_set_and_read_back() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_raw_fd();
        set_priority(fd, 5).unwrap();
        assert_eq!(priority(fd), Some(5));
        set_tos(fd, false, 0xb8).unwrap();
        assert_eq!(tos(fd, false), Some(0xb8));
        let got = set_buffer(fd, Buffer::Receive, 256 * 1024).unwrap();
        assert!(got >= 4096, "{got}");
        assert!(buffer(fd, Buffer::Send).unwrap() > 0);
        // SO_PRIORITY above 6 without CAP_NET_ADMIN is refused; as root it is taken
        if let Err(e) = set_priority(fd, 7) {
            assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
        }
    }

    #[test]
    fn ipv6_traffic_class() {
        let Ok(s) = UdpSocket::bind("[::1]:0") else { return }; // no IPv6 here
        set_tos(s.as_raw_fd(), true, 0x10).unwrap();
        assert_eq!(tos(s.as_raw_fd(), true), Some(0x10));
    }

    #[test]
    fn timer_and_socket_wake_a_wait() {
        let t = AbsTimer::new().unwrap();
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let now = crate::clock::monotonic_ns();
        t.arm(now + 2_000_000);
        let r = wait2(s.as_raw_fd(), t.fd(), 2_000);
        assert_eq!(r, Ready { a: false, b: true });
        assert!(crate::clock::monotonic_ns() >= now + 2_000_000);
        t.clear();
        s.send_to(b"hello", s.local_addr().unwrap()).unwrap();
        let r = wait2(s.as_raw_fd(), t.fd(), 2_000);
        assert!(r.a && !r.b);
        let mut buf = [0u8; 16];
        assert_eq!(recv_dontwait(s.as_raw_fd(), &mut buf).unwrap(), Some(5));
        assert_eq!(recv_dontwait(s.as_raw_fd(), &mut buf).unwrap(), None);
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(random_u64(), random_u64());
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let e = socket_in_netns("/run/netns/rtlab-no-such-ns", || ()).unwrap_err().to_string();
        assert!(e.contains("rtlab-no-such-ns"), "{e}");
    }
}

/// Whether the interface `name` is running (IFF_RUNNING: up, with its carrier; a veth whose
/// peer is down is not), asked through `sock`, any socket of the interface's network
/// namespace (netdevice(7), SIOCGIFFLAGS). An interface that does not exist (any more) is
/// an error.
pub fn link_running(sock: &impl AsRawFd, name: &str) -> Result<bool, SysError> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= req.ifr_name.len() {
        return Err(SysError::os(format!("interface name '{name}'"), libc::EINVAL));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a valid socket fd and a valid ifreq the kernel fills in.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) };
    if rc != 0 {
        return Err(SysError::os(format!("SIOCGIFFLAGS of {name}"), errno()));
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    Ok(flags as libc::c_int & libc::IFF_RUNNING != 0)
}

#[cfg(test)]
mod link_tests {
    use super::*;

    #[test]
    fn loopback_is_running_and_a_missing_interface_is_an_error() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(link_running(&s, "lo").unwrap());
        let e = link_running(&s, "rtlab-nosuch0").unwrap_err();
        assert!(e.to_string().contains("rtlab-nosuch0"), "{e}");
        assert!(link_running(&s, "an-interface-name-too-long").is_err());
    }
}
