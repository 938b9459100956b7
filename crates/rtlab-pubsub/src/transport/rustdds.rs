//! `rustdds`: RustDDS 0.11.8, the pure-Rust DDS (crate `rustdds`, Atostek), no C library.
//!
//! ROS 2 conventions, as [`crate::transport::cyclonedds`]: the DDS topic is `rt/<topic>`, keyless, of type
//! `sensor_msgs::msg::dds_::CompressedImage_`, and the sample is rtlab's pre-encoded
//! [`crate::ros_msg`] CDR. RustDDS writes the 4-byte encapsulation header itself (from the
//! serializer adapter's `output_encoding`, here CDR_LE), so rtlab hands it the bytes after
//! that header: on the wire the sample is byte for byte what [`crate::transport::cyclonedds`] (Cyclone) sends,
//! and what a ROS 2 node reads. The reader's deserializer adapter reads sequence, stamp and
//! length from the first bytes of each sample (CDR/XCDR2, both byte orders) into a small
//! value, without a copy on rtlab's side.
//!
//! Network — the rule. RustDDS 0.11.8 cannot be limited to an interface
//! (`DomainParticipantBuilder::only_networks` is a placeholder, rustdds
//! src/dds/participant.rs): it binds its sockets to 0.0.0.0, joins 239.255.0.1 and sends
//! discovery by multicast on every up, multicast-capable, non-loopback interface with an
//! IPv4 address, and announces every non-loopback address as a unicast locator
//! (src/network/util.rs). It ignores `lo` entirely (both lists filter loopback), so it does
//! not work on loopback alone: on a host with only `lo` it discovers nothing. Hence, when
//! opened, the transport reads the interfaces of the calling thread's network namespace
//! (`/proc/thread-self/net/dev`, flags by SIOCGIFFLAGS on a socket of this thread) and:
//! - no `interface`: refuses if any interface other than `lo` is up (it would send discovery
//!   out of it) — run it where only the link under test is up (a network namespace) — and
//!   refuses as well when only `lo` is up (RustDDS would reach nobody);
//! - `interface = "all"`: the user accepts every interface (said in the notes);
//! - `interface = X` (a name, or one of its addresses, checked as [`crate::transport::cyclonedds`] does): X
//!   must be the only non-`lo` interface up here.
//!
//! RustDDS has no initial peers (unicast discovery): `peers` are refused; a far side is
//! found by multicast on the link's interface.
//!
//! One host: [`enter_private_netns`] moves the calling thread into a private network
//! namespace with `lo` and a veth link `rdds0` (198.18.0.1/24, multicast; its other end
//! `rdds1` up without an address, in the same namespace) — RustDDS's traffic never leaves it. The probe uses it for the
//! `rustdds` transport without an interface (root only; see probe.rs).
//!
//! Threads: RustDDS names its two threads `RustDDS discovery thread` and
//! `RustDDS Participant <n> event loop` (comm: `RustDDS discove`, `RustDDS Partici`; the
//! mio-extras timer threads each starts inherit its name); rtlab renames them `rdds.disc`
//! and `rdds.ev` (through `/proc/self/task/<tid>/comm`) once they have named themselves,
//! right after the participant is made (and again when a port is made, for a timer thread
//! started late), so that `--thread-priority rdds.ev=80` reaches the event loop (it
//! receives and sends everything) and its timers.
//!
//! QoS: reliability, history and durability map one to one, except volatile with reliable,
//! which is *closest*: RustDDS sends a reliable writer's kept samples (up to its history
//! depth) to a reader that matches after they were written (seen here: a volatile reader
//! got sample 0, written 1.4 s before discovery matched them). Largest message 64 KiB
//! ([`MAX_MESSAGE`]: larger samples, 256 KiB and 1 MiB, were lost entirely at the
//! conformance warm-up's pace). A reliable write blocks at most 1 s when RustDDS's queue
//! to its event loop is full, then fails ("Write operation timed out while blocking").
//!
//! Domains: `spec.domain` (default [`crate::default_dds_domain`]), at most
//! [`crate::transport::cyclonedds::MAX_DOMAIN`] (RTPS port mapping 7400 + 250 d + 11 + 2 i must fit in
//! 16 bits for RustDDS's 120 participant indexes). Blocking wait: the reader is a mio 0.8
//! event source (RustDDS's notification socket pair); `wait_take` polls it with the
//! timeout. Busy-poll: a non-blocking take. RustDDS owns its buffers: each publish copies
//! the message into a new `Bytes` (RustDDS keeps it in the writer history), each take
//! returns a `Vec` of samples and RustDDS allocates per received message internally.
//! Never prints (RustDDS logs through `log`, which has no logger here).

use crate::ros_msg;
use crate::transport::*;
use ::rustdds::no_key::{DataReader, DataWriter};
use ::rustdds::{
    policy, DomainParticipant, DomainParticipantBuilder, QosPolicies, QosPolicyBuilder,
    RepresentationIdentifier, StatusEvented, Topic, TopicKind,
};
use bytes::Bytes;

const NAME: &str = "rustdds";
/// Largest message offered. RustDDS 0.11 fragments every sample above 1024 bytes
/// (DATA_FRAG, one datagram each); written every ~5 ms (the conformance warm-up), 1 MiB
/// samples never arrived (1000 written, none reassembled) and 256 KiB samples none at
/// all in 16 of 17 conformance runs here, while 64 KiB passed every run.
pub const MAX_MESSAGE: usize = 64 << 10;
/// The interface value that accepts every interface.
pub const ALL_INTERFACES: &str = "all";
/// The veth end [`enter_private_netns`] makes (the only non-`lo` interface up there).
pub const PRIVATE_IF: &str = "rdds0";
/// Its address.
pub const PRIVATE_ADDR: &str = "198.18.0.1";

fn lib(what: &'static str, why: impl std::fmt::Display) -> TransportError {
    TransportError::Library { transport: NAME, what, why: why.to_string() }
}

/// The interfaces of this thread's network namespace RustDDS uses: up, not loopback, with
/// an IPv4 address (`/proc/thread-self/net/dev`, flags by SIOCGIFFLAGS, addresses by
/// getifaddrs; RustDDS 0.11 takes the IPv4 addresses of the interfaces, so one without
/// any, like the private namespace's `rdds1`, carries nothing of it).
pub fn non_lo_interfaces_up() -> Vec<String> {
    crate::transport::cyclonedds::interface_names()
        .into_iter()
        .filter(|n| {
            let flags = rtlab_sys::net::interface_flags(n).unwrap_or(0);
            flags & libc::IFF_UP as u32 != 0
                && flags & libc::IFF_LOOPBACK as u32 == 0
                && !rtlab_sys::net::interface_ipv4(n).is_empty()
        })
        .collect()
}

/// What the network rule decided (see the module docs), for the notes.
#[derive(Clone, Debug)]
enum Net {
    /// The one non-lo interface up (named or found by its address).
    One(String),
    /// Every interface, accepted by the user.
    All(Vec<String>),
}

fn check_network(interface: Option<&str>, peers: &[String]) -> Result<Net, TransportError> {
    if !peers.is_empty() {
        return Err(lib(
            "peers",
            format!(
                "peers {peers:?}: RustDDS 0.11 has no unicast discovery peers; it discovers by multicast on the link's interface (drop the peers)"
            ),
        ));
    }
    let up = non_lo_interfaces_up();
    match interface {
        Some(ALL_INTERFACES) => Ok(Net::All(up)),
        None => match up.first() {
            None => Err(lib(
                "network",
                "no interface but lo is up here, and RustDDS 0.11 ignores lo (no multicast socket, no locator on it): it would reach nobody; run it on a link (a network namespace with a veth: --far netns:NAME; the probe makes one itself when run as root)".to_string(),
            )),
            Some(first) => Err(lib(
                "network",
                format!(
                    "RustDDS 0.11 cannot be limited to one interface and would send discovery out of {}: run it where only the link under test is up (a network namespace: --far netns:NAME, or a scenario's far = \"pair\"), or pass --interface all",
                    if up.len() == 1 { first.clone() } else { up.join(", ") }
                ),
            )),
        },
        Some(x) => {
            crate::transport::cyclonedds::check_interface(x).map_err(|e| match e {
                TransportError::Library { what, why, .. } => lib(what, why),
                e => e,
            })?;
            let named = match crate::transport::cyclonedds::classify(x) {
                crate::transport::cyclonedds::Iface::Address(a) if a.is_loopback() => {
                    return Err(lib(
                        "interface",
                        format!("{a} is a loopback address: RustDDS 0.11 does not use lo"),
                    ));
                }
                crate::transport::cyclonedds::Iface::Address(_) => None,
                crate::transport::cyclonedds::Iface::Name("lo") => {
                    return Err(lib("interface", "lo: RustDDS 0.11 does not use lo".to_string()));
                }
                crate::transport::cyclonedds::Iface::Name(n) => Some(n.to_string()),
            };
            let ok = match (&named, up.as_slice()) {
                (Some(n), [only]) => n == only,
                // an address assigned here, not loopback, with exactly one non-lo interface up:
                // it is on that one
                (None, [_]) => true,
                _ => false,
            };
            if !ok {
                let others: Vec<&str> =
                    up.iter().map(String::as_str).filter(|u| Some(*u) != named.as_deref()).collect();
                return Err(lib(
                    "network",
                    if up.is_empty() {
                        format!("--interface {x}: it is not up (no interface but lo is up here): RustDDS 0.11 would reach nobody")
                    } else {
                        format!(
                            "--interface {x}: RustDDS 0.11 cannot be limited to one interface and would also use {}: run it where {x} is the only interface up besides lo (a network namespace), or pass --interface all",
                            others.join(", ")
                        )
                    },
                ));
            }
            Ok(Net::One(named.unwrap_or_else(|| up[0].clone())))
        }
    }
}

/// A private network namespace for RustDDS on one host (see [`enter_private_netns`]); the
/// calling thread goes back to its own namespace when this is dropped (or `leave`).
pub struct PrivateNetns {
    saved: Option<rtlab_sys::net::SavedNetns>,
}

impl PrivateNetns {
    /// Move the thread back into the namespace it had (idempotent).
    pub fn leave(&mut self) -> Result<(), String> {
        if let Some(s) = self.saved.take() {
            s.restore().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl Drop for PrivateNetns {
    fn drop(&mut self) {
        let _ = self.leave();
    }
}

fn run_ip(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running `ip` (iproute2): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Move the calling thread into a new private network namespace (root: CAP_SYS_ADMIN) set
/// up for RustDDS: `lo` up, and a veth pair `rdds0`/`rdds1` whose end [`PRIVATE_IF`] is up
/// with [`PRIVATE_ADDR`]/24 and multicast (no IPv6 address); `rdds1` is up without an
/// address (carrier on `rdds0`, which Fast DDS's multicast needs), in the same namespace, so
/// the traffic stays inside. `ip` runs as a child of this thread: it inherits the thread's
/// namespace. Threads and processes this thread creates from now on are born in it (the
/// probe's role processes included); the namespace has no name and disappears with its
/// last thread or process, so nothing is left to remove. Returns a guard that moves the
/// thread back. Errors are one line saying why and what to do.
pub fn enter_private_netns() -> Result<PrivateNetns, String> {
    let saved = rtlab_sys::net::save_netns().map_err(|e| e.to_string())?;
    rtlab_sys::net::unshare_netns().map_err(|e| e.to_string())?;
    let mut g = PrivateNetns { saved: Some(saved) };
    let addr = format!("{PRIVATE_ADDR}/24");
    let setup = [
        vec!["link", "set", "lo", "up"],
        vec!["link", "add", PRIVATE_IF, "type", "veth", "peer", "name", "rdds1"],
        vec!["link", "set", PRIVATE_IF, "addrgenmode", "none"],
        vec!["link", "set", PRIVATE_IF, "multicast", "on"],
        vec!["addr", "add", &addr, "dev", PRIVATE_IF],
        vec!["link", "set", PRIVATE_IF, "up"],
        // the other end up too (no address; what reaches it stays in this namespace): Fast
        // DDS's multicast discovery reached no one over a veth end without carrier (RustDDS's
        // and Cyclone's did)
        vec!["link", "set", "rdds1", "up"],
    ];
    for a in &setup {
        if let Err(e) = run_ip(a) {
            let _ = g.leave();
            return Err(format!("setting up the private network namespace: {e}"));
        }
    }
    Ok(g)
}

/// (tid, comm) of this process's threads.
fn threads() -> Vec<(String, String)> {
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| {
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), comm.trim().to_string()))
        })
        .collect()
}

/// Rename every thread of this process still called by RustDDS's names: its discovery
/// thread (and the mio-extras timer threads it starts, which inherit its name)
/// `rdds.disc`, its event loop (and its timer threads) `rdds.ev`. Returns (renamed,
/// discovery seen, event loop seen).
fn rename_pass() -> (usize, bool, bool) {
    let (mut n, mut disc, mut ev) = (0, false, false);
    for t in threads() {
        let new = if t.1.starts_with("RustDDS discove") {
            disc = true;
            "rdds.disc"
        } else if t.1.starts_with("RustDDS Partici") {
            ev = true;
            "rdds.ev"
        } else {
            continue;
        };
        if std::fs::write(format!("/proc/self/task/{}/comm", t.0), new).is_ok() {
            n += 1;
        }
    }
    (n, disc, ev)
}

/// Rename a new participant's threads (see [`rename_pass`]). A Rust thread names itself
/// when it starts running, and the timer threads start after that: so passes repeat until
/// both threads were seen and three passes in a row found nothing more (at most 1 s).
fn rename_threads() {
    let end = rtlab_sys::clock::monotonic_ns() + 1_000_000_000;
    let (mut disc, mut ev, mut quiet) = (false, false, 0);
    while rtlab_sys::clock::monotonic_ns() < end {
        let (n, d, e) = rename_pass();
        disc |= d;
        ev |= e;
        if disc && ev {
            quiet = if n == 0 { quiet + 1 } else { 0 };
            if quiet >= 3 {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// A RustDDS participant of one DDS domain.
pub struct RustDdsTransport {
    dp: DomainParticipant,
    publisher: ::rustdds::Publisher,
    subscriber: ::rustdds::Subscriber,
    domain: u32,
    net: Net,
}

impl RustDdsTransport {
    /// A participant in DDS domain `domain` on the network the rule allows (module docs).
    pub fn new(
        domain: u32,
        interface: Option<&str>,
        peers: &[String],
    ) -> Result<Self, TransportError> {
        if domain > crate::transport::cyclonedds::MAX_DOMAIN {
            return Err(lib(
                "domain",
                format!("domain id {domain} above {}", crate::transport::cyclonedds::MAX_DOMAIN),
            ));
        }
        let net = check_network(interface, peers)?;
        let dp = DomainParticipantBuilder::new(domain as u16)
            .build()
            .map_err(|e| lib("create participant", e))?;
        rename_threads();
        let q = QosPolicyBuilder::new().build();
        let publisher = dp.create_publisher(&q).map_err(|e| lib("create publisher", e))?;
        let subscriber = dp.create_subscriber(&q).map_err(|e| lib("create subscriber", e))?;
        Ok(RustDdsTransport { dp, publisher, subscriber, domain, net })
    }

    fn topic(&self, topic: &str, q: &QosPolicies) -> Result<Topic, TransportError> {
        self.dp
            .create_topic(
                format!("rt/{topic}"),
                ros_msg::TYPE_NAME.to_string(),
                q,
                TopicKind::NoKey,
            )
            .map_err(|e| lib("create topic", e))
    }
}

fn native_qos(q: &Qos) -> QosPolicies {
    let reliability = match q.reliability {
        Reliability::Reliable => policy::Reliability::Reliable {
            max_blocking_time: ::rustdds::Duration::from_millis(1000),
        },
        Reliability::BestEffort => policy::Reliability::BestEffort,
    };
    let history = match q.history {
        History::KeepLast(n) => policy::History::KeepLast { depth: n.min(i32::MAX as u32) as i32 },
        History::KeepAll => policy::History::KeepAll,
    };
    let durability = match q.durability {
        Durability::Volatile => policy::Durability::Volatile,
        Durability::TransientLocal => policy::Durability::TransientLocal,
    };
    QosPolicyBuilder::new().reliability(reliability).history(history).durability(durability).build()
}

/// The outgoing sample: the serialized message after its encapsulation header.
pub struct RawOut(Bytes);

/// Hands RustDDS the bytes as they are (CDR little endian, as [`ros_msg::init`] wrote).
pub struct RawSerializer;

#[derive(Debug)]
pub struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl std::error::Error for Never {}

impl ::rustdds::no_key::SerializerAdapter<RawOut> for RawSerializer {
    type Error = Never;
    fn output_encoding() -> RepresentationIdentifier {
        RepresentationIdentifier::CDR_LE
    }
    fn to_bytes(value: &RawOut) -> Result<Bytes, Never> {
        Ok(value.0.clone()) // a reference count, not a copy
    }
}

/// What a take yields: the header of one sample, or why it is not an rtlab message.
pub struct RawIn(Result<ros_msg::Decoded, ros_msg::Malformed>);

/// Reads sequence, stamp and length from the first bytes of a sample.
#[derive(Clone)]
pub struct RawDecoder;

pub struct RawDeserializer;

const ENCODINGS: [RepresentationIdentifier; 4] = [
    RepresentationIdentifier::CDR_LE,
    RepresentationIdentifier::CDR_BE,
    RepresentationIdentifier::XCDR2_LE,
    RepresentationIdentifier::XCDR2_BE,
];

impl ::rustdds::no_key::DeserializerAdapter<RawIn> for RawDeserializer {
    type Error = Never;
    type Decoded = RawIn;
    fn supported_encodings() -> &'static [RepresentationIdentifier] {
        &ENCODINGS
    }
    fn transform_decoded(decoded: RawIn) -> RawIn {
        decoded
    }
}

impl ::rustdds::no_key::DefaultDecoder<RawIn> for RawDeserializer {
    type Decoder = RawDecoder;
    const DECODER: RawDecoder = RawDecoder;
}

impl ::rustdds::no_key::Decode<RawIn> for RawDecoder {
    type Error = Never;
    fn decode_bytes(
        self,
        input: &[u8],
        encoding: RepresentationIdentifier,
    ) -> Result<RawIn, Never> {
        // ros_msg::decode reads the encapsulation header first: put it back in front of
        // the head of the sample, on the stack
        let mut head = [0u8; ros_msg::HEAD];
        head[..2].copy_from_slice(&encoding.to_bytes());
        let n = input.len().min(ros_msg::HEAD - 4);
        head[4..4 + n].copy_from_slice(&input[..n]);
        Ok(RawIn(ros_msg::decode(&head[..4 + n])))
    }
}

/// How long a reliable writer waits for acknowledgements before it is dropped.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

struct RustDdsPublisher {
    w: DataWriter<RawOut, RawSerializer>,
    buf: Box<[u8]>,
    max_len: usize,
    reliable: bool,
    /// Readers matched, as the writer's last `PublicationMatched` status said (RustDDS 0.11
    /// has no matched-status call: `get_publication_matched_status` is commented out, and
    /// `get_matched_subscriptions` is a `todo!()`).
    matched: std::cell::Cell<usize>,
    /// Keeps the participant alive as long as the writer.
    _dp: DomainParticipant,
}

impl Publisher for RustDdsPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.max_len, len)?;
        let size = ros_msg::encode(&mut self.buf, seq, stamp_ns, len);
        // RustDDS takes an owned buffer and keeps it in the writer history: one copy
        let b = Bytes::copy_from_slice(&self.buf[4..size]);
        self.w.write(RawOut(b), None).map_err(|e| lib("write", e))
    }
    /// From the writer's status events: each `PublicationMatched` carries the current count.
    /// RustDDS queues at most 4 status events and drops newer ones while the queue is full,
    /// so with more than 4 matches (or losses) between two calls the count is the one of the
    /// 4th event: a lower bound; a later event corrects it.
    fn matched(&self) -> Option<usize> {
        while let Some(e) = self.w.try_recv_status() {
            if let ::rustdds::DataWriterStatus::PublicationMatched { current, .. } = e {
                self.matched.set(usize::try_from(current.count()).unwrap_or(0));
            }
        }
        Some(self.matched.get())
    }
    /// `DataWriter::wait_for_acknowledgments` (every matched reliable reader).
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        let t = std::time::Duration::from_nanos(timeout_ns.max(0) as u64);
        self.w.wait_for_acknowledgments(t).ok()
    }
}

impl Drop for RustDdsPublisher {
    fn drop(&mut self) {
        if self.reliable {
            let _ = self.w.wait_for_acknowledgments(DRAIN);
        }
    }
}

struct RustDdsSubscriber {
    r: DataReader<RawIn, RawDeserializer>,
    /// Keeps the participant alive as long as the reader.
    _dp: DomainParticipant,
    poll: mio::Poll,
    events: mio::Events,
}

impl Subscriber for RustDdsSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let s = match self.r.take_next_sample() {
            Ok(Some(s)) => s,
            Ok(None) => return Ok(None),
            Err(e) => return Err(lib("take", e)),
        };
        match s.into_value().0 {
            Ok(d) => Ok(Some(Received { seq: d.seq, stamp_ns: d.stamp_ns, len: d.len })),
            Err(m) => Err(TransportError::Malformed { transport: NAME, why: m.reason() }),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        // a take drains RustDDS's notifications first, so data arriving after it wakes the poll
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        let t = std::time::Duration::from_nanos(timeout_ns.max(0) as u64);
        match self.poll.poll(&mut self.events, Some(t)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TransportError::Io { transport: NAME, what: "poll", source: e }),
        }
        self.try_take()
    }
}

impl Drop for RustDdsSubscriber {
    fn drop(&mut self) {
        let _ = self.poll.registry().deregister(&mut self.r);
    }
}

impl Transport for RustDdsTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        let mut m = exact_dds_mapping(
            qos,
            &DdsQosNames {
                reliable: "Reliability::Reliable, max_blocking_time 1 s",
                best_effort: "Reliability::BestEffort",
                keep_last: "History::KeepLast depth {n}",
                keep_all: "History::KeepAll",
                volatile: "Durability::Volatile",
                transient_local: "Durability::TransientLocal (the writer's kept history is offered to late readers)",
            },
        );
        // seen here: a volatile reliable reader got sample 0, written 1.4 s before discovery
        // matched the two
        if qos.durability == Durability::Volatile && qos.reliability == Reliability::Reliable {
            m.durability = item(
                qos.durability,
                "Durability::Volatile, but RustDDS 0.11 sends a reliable writer's kept samples (up to its history depth) to a reader that matches after they were written, as transient-local would",
                Fidelity::Closest,
            );
        }
        Ok(m)
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let q = native_qos(qos);
        let t = self.topic(topic, &q)?;
        let w = self
            .publisher
            .create_datawriter_no_key::<RawOut, RawSerializer>(&t, Some(q))
            .map_err(|e| lib("create writer", e))?;
        let mut buf = vec![0u8; ros_msg::serialized_size(max_len)].into_boxed_slice();
        ros_msg::init(&mut buf);
        rename_pass(); // a timer thread started late
        Ok(Box::new(RustDdsPublisher {
            w,
            buf,
            max_len,
            reliable: qos.reliability == Reliability::Reliable,
            matched: std::cell::Cell::new(0),
            _dp: self.dp.clone(),
        }))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        let q = native_qos(qos);
        let t = self.topic(topic, &q)?;
        let mut r = self
            .subscriber
            .create_datareader_no_key::<RawIn, RawDeserializer>(&t, Some(q))
            .map_err(|e| lib("create reader", e))?;
        let poll = mio::Poll::new().map_err(|e| TransportError::Io {
            transport: NAME,
            what: "mio poll",
            source: e,
        })?;
        poll.registry().register(&mut r, mio::Token(0), mio::Interest::READABLE).map_err(|e| {
            TransportError::Io { transport: NAME, what: "register reader", source: e }
        })?;
        rename_pass(); // a timer thread started late
        Ok(Box::new(RustDdsSubscriber {
            r,
            _dp: self.dp.clone(),
            poll,
            events: mio::Events::with_capacity(4),
        }))
    }
    fn notes(&self) -> Vec<String> {
        let net = match &self.net {
            Net::One(i) => format!("interface {i} (the only one up besides lo; RustDDS 0.11 uses every interface up, by multicast discovery on 239.255.0.1)"),
            Net::All(v) => format!("every interface (--interface all: RustDDS 0.11 cannot be limited to one; up here: {})", if v.is_empty() { "none but lo".to_string() } else { v.join(", ") }),
        };
        vec![format!(
            "rustdds: RustDDS 0.11.8 (pure Rust), domain {}, {net}; topic rt/<topic>, type {} (header.stamp = send stamp, data = sequence + payload); threads rdds.ev, rdds.disc; RustDDS owns its buffers: each publish copies the message into a new buffer it keeps (writer history), each take returns a sample RustDDS allocated",
            self.domain,
            ros_msg::ROS_TYPE
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::rustdds::no_key::Decode;

    #[test]
    fn decoder_reads_the_head_with_the_encapsulation_given_apart() {
        let mut b = vec![0u8; ros_msg::serialized_size(64)];
        ros_msg::init(&mut b);
        let n = ros_msg::encode(&mut b, 42, 1_000_000_007, 64);
        let r = RawDecoder.decode_bytes(&b[4..n], RepresentationIdentifier::CDR_LE).unwrap();
        assert_eq!(r.0, Ok(ros_msg::Decoded { seq: 42, stamp_ns: 1_000_000_007, len: 64 }));
        let r = RawDecoder.decode_bytes(&b[4..20], RepresentationIdentifier::CDR_LE).unwrap();
        assert_eq!(r.0, Err(ros_msg::Malformed::Truncated));
    }

    #[test]
    fn peers_and_big_domains_are_refused_in_one_line() {
        let e = check_network(Some(ALL_INTERFACES), &["10.0.0.1".into()]).err().unwrap();
        assert!(e.to_string().starts_with("rustdds: peers") && !e.to_string().contains('\n'));
        let e = RustDdsTransport::new(232, Some(ALL_INTERFACES), &[]).err().unwrap().to_string();
        assert!(e.contains("232"), "{e}");
        let e = check_network(Some("nosuchrdds0"), &[]).err().unwrap().to_string();
        assert!(e.starts_with("rustdds: interface") && e.contains("nosuchrdds0"), "{e}");
        let e = check_network(Some("127.0.0.1"), &[]).err().unwrap().to_string();
        assert!(e.contains("loopback"), "{e}");
    }
}
