//! `ros1`: ROS 1 itself — roscpp (Debian's libroscpp 1.15) through rtlab's shim
//! (rtlab-bindings `roscpp`), one node per process, on a master: the user's
//! (`ROS_MASTER_URI`), or one rtlab starts for the process ([`roscpp::shared_master`]) and
//! names to its role processes.
//!
//! Messages are `std_msgs/UInt8MultiArray`, whose `data` is rtlab's message (the header,
//! then the payload): any ROS 1 node (rospy, roscpp, rostopic) can publish or take them. A
//! subscriber has a callback queue of its own, spun by its take on the caller's thread
//! (`callOne` with the wait's timeout: a blocking take sleeps in roscpp's condition
//! variable); the callback keeps the message and the take copies its header.
//!
//! QoS: reliable is TCPROS (TCP); best effort is TCPROS too (closest), unless `udpros`
//! (TransportSpec, `--udpros`) asks for UDPROS first (roscpp's datagram transport, falling
//! back to TCPROS where the publisher has none: rospy). UDPROS is opt-in, and one-way only
//! (the probe's configuration refuses it with a round trip). Its round trips stalled here in
//! 1 idle run in 6 to 15, in roscpp: the publisher answers `requestTopic`, connects its
//! datagram socket and sends, but the subscriber's side of that connection is never
//! completed, so nothing reads its socket (seen: 212 992 bytes queued) while roscpp's poll
//! thread spins on it (perf: `ros::PollManager::threadFunc` in `epoll_wait`, the busy loop of
//! ros_comm #2166); at exit roscpp's `~TransportUDP` asserts that the socket was never closed
//! (`int3`: SIGTRAP). One-way runs: 20 of 20 idle runs complete; a subscriber process died
//! once in twelve loaded runs, without a word (not traced). The history depth is roscpp's
//! queue size on both ends (keep-all: 0, unbounded); transient-local is a latched
//! publisher (its last message only). `tcp_nodelay` (TransportSpec) asks TCP_NODELAY.
//!
//! roscpp serializes each published message into a buffer of its own and deserializes each
//! taken one into a new message: it allocates per message, on its side (said in the notes).
//! Never prints.

use crate::transport::*;
use rtlab_bindings::roscpp;

const NAME: &str = "ros1";
/// The largest message offered (TCPROS itself carries up to 1 GB).
pub const MAX_MESSAGE: usize = 64 << 20;
/// How long a publisher lingers once roscpp handed its messages to its connections.
const LINGER_NS: u64 = 500_000_000;
/// How long opening waits for the master.
const MASTER_TIMEOUT_MS: u32 = 5_000;

fn lib(what: &'static str) -> impl Fn(String) -> TransportError {
    move |why| TransportError::Library { transport: NAME, what, why }
}

/// This process's roscpp node.
pub struct Ros1Transport {
    master: String,
    tcp_nodelay: bool,
    udpros: bool,
}

impl Ros1Transport {
    /// The node, on `master` (None: this process's [`roscpp::shared_master`]) with this node's
    /// address `ip` (None: ROS_IP or the host name).
    pub fn open(
        master: Option<&str>,
        ip: Option<&str>,
        tcp_nodelay: bool,
        udpros: bool,
    ) -> Result<Ros1Transport, TransportError> {
        roscpp::load().map_err(lib("loading roscpp"))?;
        let (master, ip) = match master {
            Some(m) => (m.to_string(), ip.map(str::to_string)),
            None => {
                let (m, our_ip) = roscpp::shared_master().map_err(lib("master"))?;
                (m, ip.map(str::to_string).or(our_ip))
            }
        };
        roscpp::init("rtlab_pubsub", Some(&master), ip.as_deref(), MASTER_TIMEOUT_MS)
            .map_err(lib("ros::init"))?;
        Ok(Ros1Transport { master, tcp_nodelay, udpros })
    }

    /// The master this process's node registered with.
    pub fn master(&self) -> &str {
        &self.master
    }
}

/// What `qos` becomes on roscpp (`udpros`: best effort asks for UDPROS).
fn qos_mapping(qos: &Qos, udpros: bool) -> QosMapping {
    let reliability = match (qos.reliability, udpros) {
        (Reliability::Reliable, _) => item(qos.reliability, "TCPROS (TCP)", Fidelity::Exact),
        (Reliability::BestEffort, true) => item(
            qos.reliability,
            "UDPROS where the publisher offers it (roscpp), else TCPROS (rospy has no UDPROS)",
            Fidelity::Closest,
        ),
        (Reliability::BestEffort, false) => item(
            qos.reliability,
            "TCPROS (roscpp's best effort is UDPROS, opt-in: --udpros)",
            Fidelity::Closest,
        ),
    };
    let history = match qos.history {
        History::KeepLast(n) => item(
            qos.history,
            format!("queue_size {n} on both ends (oldest dropped)"),
            Fidelity::Exact,
        ),
        History::KeepAll => item(qos.history, "queue_size 0 (unbounded)", Fidelity::Exact),
    };
    let durability = match qos.durability {
        Durability::Volatile => item(qos.durability, "not latched", Fidelity::Exact),
        Durability::TransientLocal => item(
            qos.durability,
            "latched publisher (its last message only, whatever the depth)",
            Fidelity::Closest,
        ),
    };
    QosMapping { reliability, history, durability }
}

fn queue(h: History) -> u32 {
    match h {
        History::KeepLast(n) => n,
        History::KeepAll => 0,
    }
}

impl Transport for Ros1Transport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        Ok(qos_mapping(qos, self.udpros))
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let latch = qos.durability == Durability::TransientLocal;
        let p = roscpp::Publisher::new(&ros_name(topic), queue(qos.history), latch)
            .map_err(lib("advertise"))?;
        Ok(Box::new(Ros1Publisher { p, buf: vec![0u8; max_len], published: 0 }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        let udp = self.udpros && qos.reliability == Reliability::BestEffort;
        let s =
            roscpp::Subscriber::new(&ros_name(topic), queue(qos.history), self.tcp_nodelay, udp)
                .map_err(lib("subscribe"))?;
        Ok(Box::new(Ros1Subscriber { s, buf: [0u8; HEADER_LEN] }))
    }
    fn notes(&self) -> Vec<String> {
        vec![
            format!("ros1: roscpp {} (std_msgs/UInt8MultiArray, rtlab's message as its data), master {}", roscpp::BUILT_VERSION, self.master),
            "ros1: roscpp serializes each published message into a buffer of its own and deserializes each taken one into a new message (allocations on its side, per message)".into(),
        ]
    }
    fn labels(&self) -> Vec<(&'static str, String)> {
        vec![("roscpp", roscpp::BUILT_VERSION.to_string())]
    }
}

/// A ROS 1 graph name for rtlab's topic (`rtlab_1_2_3` -> `/rtlab_1_2_3`).
fn ros_name(topic: &str) -> String {
    if topic.starts_with('/') {
        topic.to_string()
    } else {
        format!("/{topic}")
    }
}

struct Ros1Publisher {
    p: roscpp::Publisher,
    buf: Vec<u8>,
    /// Messages handed to roscpp (warm-ups included).
    published: u64,
}

impl Publisher for Ros1Publisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        encode_header(&mut self.buf, seq, stamp_ns);
        self.p.publish(&self.buf[..len]).map_err(lib("publish"))?;
        self.published += 1;
        Ok(())
    }
    fn matched(&self) -> Option<usize> {
        Some(self.p.subscribers() as usize)
    }
    /// TCPROS has no acknowledgements (a ROS 1 node that exits right after publishing loses
    /// its last messages). What stands for one: roscpp has handed every message to every
    /// subscriber's connection (its links' `messages_sent`), and then [`LINGER_NS`] more for
    /// its poll thread to write them to the sockets, from where the kernel delivers them
    /// even after the publisher closes. A link that joined late, or a queue that overflowed,
    /// never gets there: false after the timeout.
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        let end = rtlab_sys::clock::monotonic_ns().saturating_add(timeout_ns);
        loop {
            match self.p.sent() {
                Some(n) if n >= self.published => {
                    std::thread::sleep(std::time::Duration::from_nanos(LINGER_NS));
                    return Some(true);
                }
                None => return Some(self.p.subscribers() == 0),
                _ => {}
            }
            if rtlab_sys::clock::monotonic_ns() >= end {
                return Some(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

struct Ros1Subscriber {
    s: roscpp::Subscriber,
    buf: [u8; HEADER_LEN],
}

impl Ros1Subscriber {
    fn take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        let Some(len) = self.s.take(&mut self.buf, timeout_ns).map_err(lib("take"))? else {
            return Ok(None);
        };
        let (seq, stamp_ns) = decode_header(&self.buf[..len.min(HEADER_LEN)])
            .ok_or(TransportError::Malformed { transport: NAME, why: "shorter than a header" })?;
        Ok(Some(Received { seq, stamp_ns, len }))
    }
}

impl Subscriber for Ros1Subscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        self.take(0)
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        self.take(timeout_ns.max(1))
    }
}

/// Watches the master while a run measures: once it stops answering (checked every 250 ms),
/// the run's stop flag is raised (the case ends as on Ctrl-C, what it measured kept) and
/// [`MasterWatch::lost`] says when and which master. Established TCPROS links outlive their
/// master, so without this a run would go on as if nothing happened while no new node could
/// join.
pub struct MasterWatch {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    lost: std::sync::Arc<std::sync::OnceLock<String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MasterWatch {
    pub fn start(
        master: String,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> MasterWatch {
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lost = std::sync::Arc::new(std::sync::OnceLock::new());
        let (d, l) = (done.clone(), lost.clone());
        let started = std::time::Instant::now();
        let thread = std::thread::Builder::new()
            .name("rtlab-ros1-watch".into())
            .spawn(move || {
                while !d.load(Ordering::Relaxed) {
                    if !roscpp::master_ok() {
                        let _ = l.set(format!(
                            "ros1: the ROS master at {master} stopped answering {:.1} s into the run: the run ended there (what was measured before is kept)",
                            started.elapsed().as_secs_f64()
                        ));
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            })
            .ok();
        MasterWatch { done, lost, thread }
    }

    /// Why the run ended early (None: the master answered throughout).
    pub fn lost(&self) -> Option<String> {
        self.lost.get().cloned()
    }
}

impl Drop for MasterWatch {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_effort_is_udpros_only_when_asked() {
        let be = Qos { reliability: Reliability::BestEffort, ..Qos::default() };
        assert!(qos_mapping(&be, false).reliability.native.starts_with("TCPROS"));
        assert!(qos_mapping(&be, true).reliability.native.starts_with("UDPROS"));
        let rel = Qos { reliability: Reliability::Reliable, ..Qos::default() };
        assert_eq!(qos_mapping(&rel, true).reliability.fidelity, Fidelity::Exact);
        assert_eq!(
            qos_mapping(&rel, false).history.native,
            "queue_size 5 on both ends (oldest dropped)"
        );
    }

    #[test]
    fn names_and_queues() {
        assert_eq!(ros_name("rtlab_1_2_3"), "/rtlab_1_2_3");
        assert_eq!(ros_name("/chatter"), "/chatter");
        assert_eq!(queue(History::KeepLast(5)), 5);
        assert_eq!(queue(History::KeepAll), 0);
    }
}
