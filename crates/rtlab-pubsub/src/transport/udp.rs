//! `udp`: plain UDP sockets, the baseline — on one host (loopback) or across hosts.
//!
//! Loopback mode (no bind address, [`UdpTransport::new`]): a publisher binds 127.0.0.1:0
//! and writes its port to `<dir>/<topic>.port` (removed on drop). A subscriber binds
//! 127.0.0.1:0 and sends a join datagram to that port.
//!
//! Across hosts ([`UdpTransport::across`]: a bind address and the peers' addresses): a
//! publisher of topic T binds `ADDR:port_of(T)` — [`port_of`] is FNV-1a 32 of the topic's
//! bytes, `20000 + h % 40000`, the same on every host, so no file has to cross — and writes
//! no port file; a port already in use is one error naming the topic and the port. A
//! subscriber binds `ADDR:0` and sends its join datagram to `PEER:port_of(T)` for every
//! peer address (list the publisher's host, which may be this one), and to 127.0.0.1 at the
//! port of a loopback publisher's port file when one exists here. IPv6 addresses work the
//! same way (`[addr]:port`; link-local addresses with a scope are not supported).
//!
//! In both modes a subscriber sends its join until its first message arrives (at most
//! every 50 ms, off the measured path: only before data flows). On each publish the
//! publisher drains pending join datagrams without blocking and sends the message to every
//! joined subscriber (one `sendto` each). Buffers are preallocated; nothing allocates per
//! message. Never prints.

use crate::transport::*;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};

const NAME: &str = "udp";
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
const JOIN: &[u8] = b"rtlab-pubsub-join";
const MAX_SUBSCRIBERS: usize = 64;
/// Most peers a subscriber sends its join to.
const MAX_PEERS: usize = 16;

/// Where publishers write their port files.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join("rtlab-pubsub-udp")
}

fn port_file(dir: &Path, topic: &str) -> PathBuf {
    let safe: String = topic
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    dir.join(format!("{safe}.port"))
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> TransportError {
    move |source| TransportError::Io { transport: NAME, what, source }
}

/// The publisher port of `topic` across hosts: FNV-1a 32 of the topic's bytes `h`, then
/// `20000 + h % 40000` (so always in 20000..=59999, the same on every host and version).
pub fn port_of(topic: &str) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for b in topic.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (20_000 + h % 40_000) as u16
}

/// Where this transport binds and whom its subscribers ask.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Net {
    /// 127.0.0.1, publishers found through port files.
    Loopback,
    /// Bound to `bind`; publishers on `port_of(topic)`; joins sent to `peers`.
    Across { bind: IpAddr, peers: Vec<IpAddr> },
}

/// Plain UDP (see the module docs for both modes).
pub struct UdpTransport {
    dir: PathBuf,
    net: Net,
}

fn bad(what: &'static str, why: String) -> TransportError {
    TransportError::Library { transport: NAME, what, why }
}

impl UdpTransport {
    /// Loopback mode, port files in `dir`.
    pub fn new(dir: PathBuf) -> Self {
        UdpTransport { dir, net: Net::Loopback }
    }

    /// Across hosts: bind `bind` (an IP address of this host), subscribers join publishers
    /// at each of `peers` (IP addresses); loopback publishers' port files are looked up in
    /// `dir`. Errors: an address that does not parse.
    pub fn across(dir: PathBuf, bind: &str, peers: &[String]) -> Result<Self, TransportError> {
        let bind: IpAddr = bind.parse().map_err(|_| {
            bad("interface", format!("{bind:?} is not an IP address (udp binds an address)"))
        })?;
        if bind.is_unspecified() || bind.is_multicast() {
            return Err(bad("interface", format!("{bind} is not a unicast address of this host")));
        }
        let peers = peers
            .iter()
            .map(|p| {
                p.parse::<IpAddr>().map_err(|_| {
                    bad("peers", format!("{p:?} is not an IP address (the port is port_of(topic))"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UdpTransport { dir, net: Net::Across { bind, peers } })
    }

    /// From a transport spec's fields: `interface` None is loopback mode (then `peers` must
    /// be empty), Some(address) is [`UdpTransport::across`]; port files in [`default_dir`].
    pub fn from_spec(interface: Option<&str>, peers: &[String]) -> Result<Self, TransportError> {
        match interface {
            None if peers.is_empty() => Ok(Self::default()),
            None => Err(bad(
                "peers",
                format!("peers {peers:?} given without an address to bind (the interface)"),
            )),
            Some(a) => Self::across(default_dir(), a, peers),
        }
    }

    fn bind_addr(&self) -> IpAddr {
        match &self.net {
            Net::Loopback => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Net::Across { bind, .. } => *bind,
        }
    }
}

impl Default for UdpTransport {
    fn default() -> Self {
        Self::new(default_dir())
    }
}

/// A bind error, in one clear line when the address is not this host's.
fn bind_error(at: SocketAddr, what: &'static str, e: std::io::Error) -> TransportError {
    if e.kind() == ErrorKind::AddrNotAvailable {
        bad(what, format!("{} is not an address of this host (network namespace)", at.ip()))
    } else {
        io(what)(e)
    }
}

fn bind(at: SocketAddr, what: &'static str) -> Result<UdpSocket, TransportError> {
    UdpSocket::bind(at).map_err(|e| bind_error(at, what, e))
}

impl Transport for UdpTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_DATAGRAM }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        let reliability = match qos.reliability {
            Reliability::BestEffort => item(
                qos.reliability,
                "UDP datagrams (lost when a socket buffer is full)",
                Fidelity::Exact,
            ),
            Reliability::Reliable => {
                return Err(TransportError::QosUnsupported {
                    transport: NAME,
                    setting: "--reliability",
                    asked: qos.reliability.to_string(),
                    why: "plain UDP has no retransmission (use best-effort)".into(),
                })
            }
        };
        let history = item(qos.history, "kernel socket receive buffer (default SO_RCVBUF, bytes not messages; newest dropped when full)", Fidelity::Closest);
        let durability = match qos.durability {
            Durability::Volatile => {
                item(qos.durability, "late subscribers get only new datagrams", Fidelity::Exact)
            }
            Durability::TransientLocal => {
                return Err(TransportError::QosUnsupported {
                    transport: NAME,
                    setting: "--durability",
                    asked: qos.durability.to_string(),
                    why: "plain UDP keeps nothing for late subscribers (use volatile)".into(),
                })
            }
        };
        Ok(QosMapping { reliability, history, durability })
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let (socket, file) = match &self.net {
            Net::Loopback => {
                let socket = UdpSocket::bind("127.0.0.1:0").map_err(io("bind publisher"))?;
                socket.set_nonblocking(true).map_err(io("set non-blocking"))?;
                let port = socket.local_addr().map_err(io("local address"))?.port();
                std::fs::create_dir_all(&self.dir).map_err(io("create the port-file directory"))?;
                let file = port_file(&self.dir, topic);
                let tmp = file.with_extension("tmp");
                std::fs::write(&tmp, port.to_string()).map_err(io("write the port file"))?;
                std::fs::rename(&tmp, &file).map_err(io("write the port file"))?;
                (socket, Some(file))
            }
            Net::Across { bind: addr, .. } => {
                let port = port_of(topic);
                let at = SocketAddr::new(*addr, port);
                let socket = UdpSocket::bind(at).map_err(|e| match e.kind() {
                    ErrorKind::AddrInUse => bad(
                        "bind publisher",
                        format!(
                            "topic {topic:?}: its port {port} (port_of) on {addr} is in use (another publisher of this topic, or another program)"
                        ),
                    ),
                    _ => bind_error(at, "bind publisher", e),
                })?;
                socket.set_nonblocking(true).map_err(io("set non-blocking"))?;
                (socket, None)
            }
        };
        Ok(Box::new(UdpPublisher {
            socket,
            file,
            subscribers: [None; MAX_SUBSCRIBERS],
            n: 0,
            buf: vec![0u8; max_len].into_boxed_slice(),
            join_buf: [0u8; 64],
        }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        let socket = bind(SocketAddr::new(self.bind_addr(), 0), "bind subscriber")?;
        let mut joins = [None; MAX_PEERS];
        if let Net::Across { peers, .. } = &self.net {
            if peers.len() > MAX_PEERS {
                return Err(bad(
                    "peers",
                    format!("at most {MAX_PEERS} peers, {} given", peers.len()),
                ));
            }
            let port = port_of(topic);
            for (slot, p) in joins.iter_mut().zip(peers) {
                *slot = Some(SocketAddr::new(*p, port));
            }
        }
        let mut s = UdpSubscriber {
            socket,
            file: port_file(&self.dir, topic),
            joins,
            joined: false,
            last_join_ns: i64::MIN,
            nonblocking: false,
            timeout_ns: -1,
            buf: vec![0u8; max_len].into_boxed_slice(),
        };
        s.join();
        Ok(Box::new(s))
    }
    fn notes(&self) -> Vec<String> {
        match &self.net {
            Net::Loopback => Vec::new(),
            Net::Across { bind, peers } => {
                let peers: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
                vec![format!(
                    "udp: across hosts, bound to {bind}; a publisher of topic T on {bind}:port_of(T) (FNV-1a 32 of T's bytes, 20000 + h % 40000); subscribers join at peers [{}]",
                    peers.join(", ")
                )]
            }
        }
    }
}

struct UdpPublisher {
    socket: UdpSocket,
    /// The port file (loopback mode only).
    file: Option<PathBuf>,
    subscribers: [Option<SocketAddr>; MAX_SUBSCRIBERS],
    n: usize,
    buf: Box<[u8]>,
    join_buf: [u8; 64],
}

impl UdpPublisher {
    fn accept_joins(&mut self) {
        for _ in 0..MAX_SUBSCRIBERS {
            match self.socket.recv_from(&mut self.join_buf) {
                Ok((n, from)) if &self.join_buf[..n] == JOIN => {
                    if !self.subscribers[..self.n].contains(&Some(from)) && self.n < MAX_SUBSCRIBERS
                    {
                        self.subscribers[self.n] = Some(from);
                        self.n += 1;
                    }
                }
                Ok(_) => {}
                Err(_) => return, // WouldBlock (nothing pending) or an ICMP error report
            }
        }
    }
}

impl Publisher for UdpPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.buf.len(), len)?;
        self.accept_joins();
        encode_header(&mut self.buf, seq, stamp_ns);
        for to in self.subscribers[..self.n].iter().flatten() {
            match self.socket.send_to(&self.buf[..len], to) {
                Ok(_) => {}
                // a full socket buffer or a departed subscriber: the datagram is lost
                Err(e)
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::ConnectionRefused) => {
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) => return Err(io("send")(e)),
            }
        }
        Ok(())
    }
}

impl Drop for UdpPublisher {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

struct UdpSubscriber {
    socket: UdpSocket,
    file: PathBuf,
    /// Across hosts: `PEER:port_of(topic)` for each peer.
    joins: [Option<SocketAddr>; MAX_PEERS],
    joined: bool,
    last_join_ns: i64,
    nonblocking: bool,
    timeout_ns: i64,
    buf: Box<[u8]>,
}

impl UdpSubscriber {
    /// Ask the publisher (the loopback one if its port file is there, and every peer's) to
    /// send to us; rate-limited.
    fn join(&mut self) {
        let now = rtlab_sys::clock::monotonic_ns();
        if now.saturating_sub(self.last_join_ns) < 50_000_000 {
            return;
        }
        self.last_join_ns = now;
        if let Some(port) =
            std::fs::read_to_string(&self.file).ok().and_then(|s| s.trim().parse::<u16>().ok())
        {
            let _ = self.socket.send_to(JOIN, ("127.0.0.1", port));
        }
        for to in self.joins.iter().flatten() {
            let _ = self.socket.send_to(JOIN, to);
        }
    }

    fn got(&mut self, n: usize) -> Option<Received> {
        self.joined = true;
        decode_header(&self.buf[..n]).map(|(seq, stamp_ns)| Received { seq, stamp_ns, len: n })
    }
}

impl Subscriber for UdpSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        if !self.joined {
            self.join();
        }
        if !self.nonblocking {
            self.socket.set_nonblocking(true).map_err(io("set non-blocking"))?;
            self.nonblocking = true;
        }
        match self.socket.recv(&mut self.buf) {
            Ok(n) => Ok(self.got(n)),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::ConnectionRefused) => {
                Ok(None)
            }
            Err(e) => Err(io("receive")(e)),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        let mut timeout_ns = timeout_ns.max(1_000);
        if !self.joined {
            self.join();
            timeout_ns = timeout_ns.min(50_000_000); // come back to re-send the join
        }
        if self.nonblocking {
            self.socket.set_nonblocking(false).map_err(io("set blocking"))?;
            self.nonblocking = false;
        }
        if self.timeout_ns != timeout_ns {
            self.socket
                .set_read_timeout(Some(std::time::Duration::from_nanos(timeout_ns as u64)))
                .map_err(io("set the receive timeout"))?;
            self.timeout_ns = timeout_ns;
        }
        match self.socket.recv(&mut self.buf) {
            Ok(n) => Ok(self.got(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock
                        | ErrorKind::TimedOut
                        | ErrorKind::ConnectionRefused
                        | ErrorKind::Interrupted
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(io("receive")(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_of_is_stable_and_in_range() {
        // FNV-1a 32 of "" is 0x811c9dc5 = 2166136261; of "a" 0xe40c292c = 3826002220
        assert_eq!(port_of(""), (20_000 + 2_166_136_261u32 % 40_000) as u16);
        assert_eq!(port_of("a"), (20_000 + 3_826_002_220u32 % 40_000) as u16);
        for t in ["rtlab_1_2_3", "x", "a/b", "很长的主题"] {
            assert_eq!(port_of(t), port_of(t));
            assert!((20_000..=59_999).contains(&port_of(t)));
        }
    }

    #[test]
    fn spec_fields_are_checked() {
        assert!(UdpTransport::from_spec(None, &[]).unwrap().notes().is_empty());
        assert!(UdpTransport::from_spec(None, &["10.0.0.1".into()]).is_err());
        let e = UdpTransport::from_spec(Some("eth0"), &[]).err().unwrap().to_string();
        assert!(e.contains("eth0"), "{e}");
        let e = UdpTransport::from_spec(Some("127.0.0.1"), &["x:1".into()]).err().unwrap();
        assert!(e.to_string().contains("x:1"));
        let t = UdpTransport::from_spec(Some("::1"), &["::1".into()]).unwrap();
        assert!(t.notes()[0].contains("bound to ::1"), "{:?}", t.notes());
    }

    #[test]
    fn across_on_loopback_delivers_and_a_second_publisher_is_refused() {
        let dir = std::env::temp_dir().join(format!("rtlab-udp-across-{}", std::process::id()));
        let t = UdpTransport::across(dir, "127.0.0.1", &["127.0.0.1".into()]).unwrap();
        let topic = format!("rtlab_udp_across_{}", std::process::id());
        let q = Qos::default();
        let mut p = t.publisher(&topic, &q, 64).unwrap();
        let e = t.publisher(&topic, &q, 64).err().unwrap().to_string();
        assert!(e.contains(&topic) && e.contains(&port_of(&topic).to_string()), "{e}");
        let mut s = t.subscriber(&topic, &q, 64).unwrap();
        let mut got = None;
        for k in 0..400u64 {
            p.publish(k, 0, 32).unwrap();
            if let Some(r) = s.wait_take(5_000_000).unwrap() {
                got = Some(r);
                break;
            }
        }
        assert_eq!(got.map(|r| r.len), Some(32));
        let e = UdpTransport::across(PathBuf::new(), "192.0.2.254", &[])
            .unwrap()
            .subscriber(&topic, &q, 64)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("192.0.2.254") && e.contains("not an address"), "{e}");
    }
}
