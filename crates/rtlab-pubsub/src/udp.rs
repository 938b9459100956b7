//! `udp`: plain UDP sockets on one host, the baseline.
//!
//! A publisher binds 127.0.0.1:0 and writes its port to `<dir>/<topic>.port` (removed on
//! drop). A subscriber binds 127.0.0.1:0 and sends a join datagram to that port until its
//! first message arrives (at most every 50 ms, off the measured path: only before data
//! flows). On each publish the publisher drains pending join datagrams without blocking and
//! sends the message to every joined subscriber (one `sendto` each). Buffers are
//! preallocated; nothing allocates per message. Never prints.

use crate::transport::*;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};

const NAME: &str = "udp";
/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
const JOIN: &[u8] = b"rtlab-pubsub-join";
const MAX_SUBSCRIBERS: usize = 64;

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

pub struct UdpTransport {
    dir: PathBuf,
}

impl UdpTransport {
    pub fn new(dir: PathBuf) -> Self {
        UdpTransport { dir }
    }
}

impl Default for UdpTransport {
    fn default() -> Self {
        Self::new(default_dir())
    }
}

impl Transport for UdpTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn max_message(&self) -> usize {
        MAX_DATAGRAM
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
    fn publisher(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Publisher>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_DATAGRAM, max_len)?;
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(io("bind publisher"))?;
        socket.set_nonblocking(true).map_err(io("set non-blocking"))?;
        let port = socket.local_addr().map_err(io("local address"))?.port();
        std::fs::create_dir_all(&self.dir).map_err(io("create the port-file directory"))?;
        let file = port_file(&self.dir, topic);
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, port.to_string()).map_err(io("write the port file"))?;
        std::fs::rename(&tmp, &file).map_err(io("write the port file"))?;
        Ok(Box::new(UdpPublisher {
            socket,
            file,
            subscribers: [None; MAX_SUBSCRIBERS],
            n: 0,
            buf: vec![0u8; max_len].into_boxed_slice(),
            join_buf: [0u8; 64],
        }))
    }
    fn subscriber(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Subscriber>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_DATAGRAM, max_len)?;
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(io("bind subscriber"))?;
        let mut s = UdpSubscriber {
            socket,
            file: port_file(&self.dir, topic),
            joined: false,
            last_join_ns: i64::MIN,
            nonblocking: false,
            timeout_ns: -1,
            buf: vec![0u8; max_len].into_boxed_slice(),
        };
        s.join();
        Ok(Box::new(s))
    }
}

struct UdpPublisher {
    socket: UdpSocket,
    file: PathBuf,
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
        let _ = std::fs::remove_file(&self.file);
    }
}

struct UdpSubscriber {
    socket: UdpSocket,
    file: PathBuf,
    joined: bool,
    last_join_ns: i64,
    nonblocking: bool,
    timeout_ns: i64,
    buf: Box<[u8]>,
}

impl UdpSubscriber {
    /// Ask the publisher (if its port file is there) to send to us; rate-limited.
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
