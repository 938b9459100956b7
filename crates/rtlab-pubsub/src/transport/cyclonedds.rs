//! `dds`: Eclipse Cyclone DDS through `cyclors` 0.4 (the C library, built from source).
//!
//! ROS 2 conventions, so that a ROS 2 node (any RMW) can be the peer: the DDS topic is
//! `rt/<topic>` and the message a stock `sensor_msgs/msg/CompressedImage`
//! ([`crate::ros_msg`]: header.stamp = send stamp, data = sequence number + payload). The
//! topic is a keyless "blob" topic (cyclors' cyclocut): rtlab writes and takes the
//! serialized sample itself (`dds_writecdr` / `dds_takecdr`), so no IDL compiler is needed.
//!
//! Network ([`DdsNetwork`], built into the Cyclone XML by [`config_xml`]):
//! - no interface (the default): traffic stays on loopback — the configuration names `lo`,
//!   turns multicast off and finds peers by unicast on 127.0.0.1 ([`loopback_config`]);
//! - an interface (a name such as `eth0`, or one of its addresses) with unicast peers:
//!   `<NetworkInterface name|address=..>`, multicast off, discovery sent to each peer;
//! - an interface without peers: multicast on (SPDP discovery on Cyclone's default group
//!   239.255.0.1; data by unicast whenever one unicast suffices).
//!
//! The interface is checked before Cyclone sees it (a name must be an interface of this
//! network namespace, `/proc/thread-self/net/dev`; an address must be assigned to one,
//! `/proc/thread-self/net/fib_trie` for IPv4, `/proc/thread-self/net/if_inet6` for IPv6), so
//! a typo is one clear line. Domains are per process: the first transport of a domain id
//! creates it with its configuration, later ones share it (reference counted); asking for
//! the same id with another configuration is an error, never a silent reuse.
//! Blocking wait: a waitset on a read condition; busy-poll: `dds_takecdr` until data.
//! Publishing copies the message once into Cyclone's serdata (Cyclone allocates it).
//!
//! The C API is called through rtlab-bindings' safe wrappers ([`rtlab_bindings::cyclonedds`]:
//! no `unsafe` here). Entities are deleted on drop (ports, then participant, then the domain
//! when its last transport goes). Never prints.

use crate::ros_msg;
use crate::transport::dds_common::{
    self, DdsPublisher, DdsSubscriber, Head, SampleReader, SampleWriter,
};
use crate::transport::*;
use rtlab_bindings::cyclonedds::{self, BlobReader, BlobWriter};
use rtlab_bindings::Failed;
use std::sync::Arc;

const NAME: &str = "cyclonedds";
/// The largest domain id rtlab uses: DDS's port mapping (7400 + 250 d) leaves room for
/// unicast discovery of 100 participant indexes up to domain 231 (232 overflows port 65535).
pub const MAX_DOMAIN: u32 = 231;
/// The DDS type name of the probe message (`sensor_msgs/msg/CompressedImage`).
pub const TYPE_NAME: &str = crate::ros_msg::TYPE_NAME;
/// Largest message offered (Cyclone fragments large samples).
pub const MAX_MESSAGE: usize = 64 << 20;

/// Cyclone DDS's threads: `recv`, `recvUC`, `recvMC` (receive), `tev` (timed events),
/// `dq.builtins`, `dq.user` (delivery queues), `gc`.
pub const THREADS: &[&str] = &["recv", "tev", "dq.", "gc"];

/// A failed Cyclone call, said as this transport's.
fn lib(e: Failed) -> TransportError {
    TransportError::Library { transport: NAME, what: e.what, why: e.why }
}

/// Cyclone configuration: loopback only, no multicast, unicast discovery on 127.0.0.1,
/// announced every second: without multicast a participant that starts later (a publisher
/// restarted) learns of this one only from its next announcement (Cyclone's default: 30 s).
pub fn loopback_config() -> String {
    concat!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/></Interfaces>",
        "<AllowMulticast>false</AllowMulticast></General>",
        "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex>",
        "<SPDPInterval>1s</SPDPInterval>",
        "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>"
    )
    .to_string()
}

pub use crate::transport::dds_common::DdsNetwork;

fn bad(what: &'static str, why: String) -> TransportError {
    TransportError::Library { transport: NAME, what, why }
}

/// The interface as Cyclone is told it: an address (`address="..."`) or a name.
pub(crate) enum Iface<'a> {
    Name(&'a str),
    Address(std::net::IpAddr),
}

pub(crate) fn classify(interface: &str) -> Iface<'_> {
    match interface.parse::<std::net::IpAddr>() {
        Ok(a) => Iface::Address(a),
        Err(_) => Iface::Name(interface),
    }
}

/// Interface names of this thread's network namespace (`/proc/thread-self/net/dev`).
/// Wait (at most `limit_ns`) until one of the interfaces of this network namespace that
/// `select` picks (by name) is running (IFF_RUNNING: up, with its carrier, the kernel's
/// operational state "up"). Ok: how long it waited (0 when `select` picks none: nothing to
/// wait for); Err: the name of the interface still not running at the limit.
///
/// Why (`fastdds` and `ros2` wait before their participant exists): Fast DDS keeps only the
/// *running* interfaces when a participant starts (2.9's and 3.2's IPFinder skip interfaces
/// without IFF_RUNNING), and a participant left without its interface reaches no one for its
/// whole life; a veth end runs only once the kernel's link watch saw its carrier, up to a
/// second after both ends are up, an Ethernet port after its autonegotiation.
pub(crate) fn wait_running(select: &dyn Fn(&str) -> bool, limit_ns: i64) -> Result<i64, String> {
    let start = rtlab_sys::clock::monotonic_ns();
    loop {
        let names: Vec<String> = interface_names().into_iter().filter(|n| select(n)).collect();
        if names.is_empty() {
            return Ok(0);
        }
        let running = names.iter().any(|n| {
            rtlab_sys::net::interface_flags(n).is_ok_and(|f| f & libc::IFF_RUNNING as u32 != 0)
        });
        if running {
            return Ok(rtlab_sys::clock::monotonic_ns() - start);
        }
        if rtlab_sys::clock::monotonic_ns() - start >= limit_ns {
            return Err(names[0].clone());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub(crate) fn interface_names() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap_or_default();
    text.lines().skip(2).filter_map(|l| l.split_once(':')).map(|(n, _)| n.trim().into()).collect()
}

/// IPv4 addresses assigned here: `|-- A.B.C.D` entries of the fib trie marked `/32 host LOCAL`.
fn local_ipv4(fib_trie: &str) -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut last: Option<std::net::Ipv4Addr> = None;
    for l in fib_trie.lines() {
        let t = l.trim();
        if let Some(a) = t.strip_prefix("|-- ") {
            last = a.trim().parse().ok();
        } else if t.starts_with("+--") {
            last = None;
        } else if t.starts_with("/32 host LOCAL") {
            if let Some(a) = last {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// IPv6 addresses assigned here (`/proc/net/if_inet6`: 32 hex digits, index, ..., name).
fn local_ipv6(if_inet6: &str) -> Vec<std::net::Ipv6Addr> {
    if_inet6
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|h| u128::from_str_radix(h, 16).ok())
        .map(std::net::Ipv6Addr::from)
        .collect()
}

/// Whether `a` is assigned to an interface of this thread's network namespace.
pub(crate) fn address_is_local(a: std::net::IpAddr) -> bool {
    match a {
        std::net::IpAddr::V4(v4) => {
            let t = std::fs::read_to_string("/proc/thread-self/net/fib_trie").unwrap_or_default();
            local_ipv4(&t).contains(&v4)
        }
        std::net::IpAddr::V6(v6) => {
            let t = std::fs::read_to_string("/proc/thread-self/net/if_inet6").unwrap_or_default();
            local_ipv6(&t).contains(&v6)
        }
    }
}

/// Check the interface exists here (before Cyclone does, for a one-line error).
pub(crate) fn check_interface(interface: &str) -> Result<(), TransportError> {
    match classify(interface) {
        Iface::Name(n) => {
            if n.is_empty() || !interface_names().iter().any(|x| x == n) {
                return Err(bad(
                    "interface",
                    format!("no network interface named {n:?} in this network namespace"),
                ));
            }
        }
        Iface::Address(a) => {
            if !address_is_local(a) {
                return Err(bad(
                    "interface",
                    format!(
                        "address {a} is not assigned to any interface of this network namespace"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The Cyclone configuration XML for `net` (interface None: exactly [`loopback_config`]).
/// Checks the interface exists here and the peers are plain addresses/host names.
pub fn config_xml(net: &DdsNetwork) -> Result<String, TransportError> {
    let Some(interface) = net.interface.as_deref() else {
        if !net.peers.is_empty() {
            return Err(bad(
                "peers",
                format!(
                    "peers {:?} given without an interface (loopback-only has peer 127.0.0.1; name the interface that reaches them)",
                    net.peers
                ),
            ));
        }
        return Ok(loopback_config());
    };
    check_interface(interface)?;
    for p in &net.peers {
        if p.is_empty() || p.chars().any(|c| c.is_whitespace() || "<>&\"'".contains(c)) {
            return Err(bad("peers", format!("{p:?} is not an address or host name")));
        }
    }
    let iface = match classify(interface) {
        Iface::Name(n) => format!("<NetworkInterface name=\"{n}\"/>"),
        Iface::Address(a) => format!("<NetworkInterface address=\"{a}\"/>"),
    };
    let multicast = if net.peers.is_empty() { "true" } else { "false" };
    // unicast discovery: announced every second, as on loopback (a peer that starts later
    // hears of this participant at its next announcement)
    let peers = if net.peers.is_empty() {
        String::new()
    } else {
        let list: String = net.peers.iter().map(|p| format!("<Peer address=\"{p}\"/>")).collect();
        format!("<SPDPInterval>1s</SPDPInterval><Peers>{list}</Peers>")
    };
    Ok(format!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces>{iface}</Interfaces>\
         <AllowMulticast>{multicast}</AllowMulticast></General>\
         <Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex>\
         {peers}</Discovery></Domain></CycloneDDS>"
    ))
}

/// A participant of one DDS domain (one per process is the intent; several may share it).
pub struct CycloneDdsTransport {
    p: Arc<cyclonedds::Participant>,
    net: DdsNetwork,
}

impl CycloneDdsTransport {
    /// The participant (for built-in topic readers, [`crate::observe::dds_graph`]).
    pub(crate) fn participant(&self) -> &Arc<cyclonedds::Participant> {
        &self.p
    }

    /// A participant in DDS domain `domain` (loopback configuration).
    pub fn new(domain: u32) -> Result<Self, TransportError> {
        Self::with_network(domain, &DdsNetwork::default())
    }

    /// A participant in DDS domain `domain` on the network `net` (see the module docs).
    /// Errors: domain above [`MAX_DOMAIN`], an interface not found here, a peer that is not an
    /// address, the domain already open in this process with another configuration.
    pub fn with_network(domain: u32, net: &DdsNetwork) -> Result<Self, TransportError> {
        if domain > MAX_DOMAIN {
            return Err(bad("domain", format!("domain id {domain} above {MAX_DOMAIN}")));
        }
        let config = config_xml(net)?;
        let p = cyclonedds::Participant::create(domain, &config).map_err(lib)?;
        Ok(CycloneDdsTransport { p: Arc::new(p), net: net.clone() })
    }

    /// The probe message's topic: ROS 2 naming (`rt/<topic>`), [`TYPE_NAME`], keyless.
    fn topic(&self, topic: &str) -> Result<cyclonedds::Topic, TransportError> {
        cyclonedds::Topic::blob(&self.p, &format!("rt/{topic}"), TYPE_NAME, true).map_err(lib)
    }

    /// A writer on topic `t` (which it takes over: deleted with it, also on an error).
    fn writer_on(&self, t: cyclonedds::Topic, qos: &Qos) -> Result<BlobWriter, TransportError> {
        BlobWriter::create(&self.p, t, &entity_qos(qos), DRAIN_NS).map_err(lib)
    }

    /// A reader on topic `t` with a waitset on its read condition (it takes the topic over:
    /// deleted with it, also on an error).
    fn reader_on(&self, t: cyclonedds::Topic, qos: &Qos) -> Result<BlobReader, TransportError> {
        BlobReader::create(&self.p, t, &entity_qos(qos)).map_err(lib)
    }

    /// A reader of DDS topic `topic` (full DDS name, e.g. `rt/joint_states`) of type
    /// `type_name`, with `qos` (make it compatible with the writers': a reliable reader
    /// does not match a best-effort writer).
    pub fn raw_reader(
        &self,
        topic: &str,
        type_name: &str,
        keyless: bool,
        qos: &Qos,
    ) -> Result<RawReader, TransportError> {
        let t = cyclonedds::Topic::blob(&self.p, topic, type_name, keyless).map_err(lib)?;
        Ok(RawReader { r: self.reader_on(t, qos)? })
    }

    /// A writer of DDS topic `topic` (full DDS name) of type `type_name`.
    pub fn raw_writer(
        &self,
        topic: &str,
        type_name: &str,
        keyless: bool,
        qos: &Qos,
    ) -> Result<RawWriter, TransportError> {
        let t = cyclonedds::Topic::blob(&self.p, topic, type_name, keyless).map_err(lib)?;
        Ok(RawWriter { w: self.writer_on(t, qos)? })
    }
}

/// How long a reliable writer waits for acknowledgements before it is deleted.
const DRAIN_NS: i64 = 2_000_000_000;

/// A sample of any type, as [`RawReader`] takes it: its serialized size and first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSample {
    /// Serialized size, the 4-byte encapsulation header included.
    pub size: usize,
    /// The first bytes after the encapsulation header (`head_len` of them valid).
    pub head: [u8; 16],
    pub head_len: usize,
    /// The encapsulation: 0x0001 CDR little endian, 0x0000 big endian (XCDR2: 0x0007/0x0006).
    pub encapsulation: u16,
}

/// A reader of a topic of any type (`observe`): it keeps the serialized bytes, so it needs
/// no type support; the topic is made with the discovered type name.
pub struct RawReader {
    r: BlobReader,
}

/// A writer of a topic of any type: it writes serialized samples given whole (the 4-byte
/// encapsulation header first). For peers and tests of types rtlab has no support for.
pub struct RawWriter {
    w: BlobWriter,
}

impl RawWriter {
    /// Write one serialized sample (encapsulation header included).
    pub fn write(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        self.w.write(sample).map_err(lib)
    }
    /// Readers matched now (0 when Cyclone cannot tell).
    pub fn matched(&self) -> usize {
        self.w.matched().unwrap_or(0)
    }
}

impl RawReader {
    /// Writers this reader is matched with now.
    pub fn matched(&self) -> u32 {
        self.r.matched()
    }

    /// The next sample, or None (nothing, or a dispose without data).
    pub fn try_take(&mut self) -> Result<Option<RawSample>, TransportError> {
        let mut buf = [0u8; 20];
        let Some((size, got)) = self.r.take_head(&mut buf).map_err(lib)? else { return Ok(None) };
        if got < 4 {
            return Ok(None);
        }
        let mut head = [0u8; 16];
        head[..got - 4].copy_from_slice(&buf[4..got]);
        Ok(Some(RawSample {
            size,
            head,
            head_len: got - 4,
            encapsulation: u16::from_be_bytes([buf[0], buf[1]]),
        }))
    }

    /// The next sample's serialized bytes (the encapsulation header first) copied into
    /// `buf`: (serialized size, bytes copied); a size above `buf.len()` means it was cut.
    /// None when there was no sample.
    pub fn try_take_bytes(
        &mut self,
        buf: &mut [u8],
    ) -> Result<Option<(usize, usize)>, TransportError> {
        self.r.take_head(buf).map_err(lib)
    }

    /// The next sample, waiting at most `timeout_ns` for one.
    pub fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<RawSample>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        self.r.wait(timeout_ns).map_err(lib)?;
        self.try_take()
    }
}

/// The QoS `q` in the words of the DDS libraries' wrappers (Cyclone, the Fast DDS shim).
pub(crate) fn entity_qos(q: &Qos) -> rtlab_bindings::EntityQos {
    rtlab_bindings::EntityQos {
        reliable: q.reliability == Reliability::Reliable,
        keep_last: match q.history {
            History::KeepLast(n) => Some(n),
            History::KeepAll => None,
        },
        transient_local: q.durability == Durability::TransientLocal,
    }
}

impl Transport for CycloneDdsTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn thread_names(&self) -> &'static [&'static str] {
        THREADS
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        Ok(exact_dds_mapping(
            qos,
            &DdsQosNames {
                reliable: "DDS_RELIABILITY_RELIABLE, max_blocking_time 1 s",
                best_effort: "DDS_RELIABILITY_BEST_EFFORT",
                keep_last: "DDS_HISTORY_KEEP_LAST depth {n}",
                keep_all: "DDS_HISTORY_KEEP_ALL",
                volatile: "DDS_DURABILITY_VOLATILE",
                transient_local: "DDS_DURABILITY_TRANSIENT_LOCAL",
            },
        ))
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        let w = self.writer_on(self.topic(topic)?, qos)?;
        Ok(Box::new(DdsPublisher::new(w, max_len)))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        Ok(Box::new(DdsSubscriber::new(self.reader_on(self.topic(topic)?, qos)?)))
    }
    fn callback_echo(
        &self,
        topic_in: &str,
        topic_out: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Option<Box<dyn CallbackEcho>>, TransportError> {
        let state = Arc::new(EchoState::new(self.publisher(topic_out, qos, max_len)?));
        let tally = state.tally();
        let on_data = dds_common::answering(NAME, state, |t: &cyclonedds::Taker, head| {
            Ok(match t.take_head(head).map_err(lib)? {
                Some((size, got)) if size > 0 => Head::Data(got),
                Some(_) => Head::NoData,
                None => Head::Nothing,
            })
        });
        let reader = cyclonedds::ListenedReader::create(
            &self.p,
            self.topic(topic_in)?,
            &entity_qos(qos),
            Box::new(on_data),
        )
        .map_err(lib)?;
        Ok(Some(Box::new(Answering { _ports: reader, tally })))
    }
    fn notes(&self) -> Vec<String> {
        vec![format!(
            "cyclonedds: Cyclone DDS (cyclors 0.4), domain {}, {}; topic rt/<topic>, type {} (header.stamp = send stamp, data = sequence + payload)",
            self.p.domain(),
            network_note(&self.net),
            ros_msg::ROS_TYPE
        )]
    }
}

/// What the network configuration is, in words (for the notes).
fn network_note(net: &DdsNetwork) -> String {
    let iface = |i: &str| match classify(i) {
        Iface::Name(n) => format!("interface {n}"),
        Iface::Address(a) => format!("interface with address {a}"),
    };
    dds_common::network_note(
        net,
        "loopback only (lo, no multicast, unicast peer 127.0.0.1)",
        iface,
        "multicast on (discovery by multicast, SPDP to 239.255.0.1)",
    )
}

impl SampleWriter for BlobWriter {
    const TRANSPORT: &'static str = NAME;
    fn write_sample(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        self.write(sample).map_err(lib)
    }
    /// The writer's publication-matched status: `current_count`.
    fn matched_now(&self) -> Option<usize> {
        self.matched()
    }
    /// `dds_wait_for_acks` (every matched reliable reader; OK at once without one).
    fn wait_acked(&self, timeout_ns: i64) -> Option<bool> {
        self.wait_acknowledged(timeout_ns)
    }
}

impl SampleReader for BlobReader {
    const TRANSPORT: &'static str = NAME;
    fn take_head(&mut self, head: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match BlobReader::take_head(self, head).map_err(lib)? {
            Some((size, got)) if size > 0 => Ok(Some(got)),
            // nothing, or a dispose/unregister without data
            _ => Ok(None),
        }
    }
    fn wait(&mut self, timeout_ns: i64) -> Result<(), TransportError> {
        BlobReader::wait(self, timeout_ns).map_err(lib)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(interface: Option<&str>, peers: &[&str]) -> DdsNetwork {
        DdsNetwork {
            interface: interface.map(Into::into),
            peers: peers.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn no_interface_is_exactly_the_loopback_configuration() {
        assert_eq!(config_xml(&DdsNetwork::default()).unwrap(), loopback_config());
        assert!(config_xml(&net(None, &["10.0.0.1"]))
            .unwrap_err()
            .to_string()
            .contains("10.0.0.1"));
    }

    #[test]
    fn interface_by_name_or_address_with_peers_or_multicast() {
        let x = config_xml(&net(Some("lo"), &["127.0.0.1", "localhost:7410"])).unwrap();
        assert!(x.contains("<NetworkInterface name=\"lo\"/>"), "{x}");
        assert!(x.contains("<AllowMulticast>false</AllowMulticast>"), "{x}");
        assert!(
            x.contains(
                "<Peers><Peer address=\"127.0.0.1\"/><Peer address=\"localhost:7410\"/></Peers>"
            ),
            "{x}"
        );
        let x = config_xml(&net(Some("127.0.0.1"), &[])).unwrap();
        assert!(x.contains("<NetworkInterface address=\"127.0.0.1\"/>"), "{x}");
        assert!(x.contains("<AllowMulticast>true</AllowMulticast>") && !x.contains("Peers"), "{x}");
    }

    #[test]
    fn unknown_interface_or_odd_peer_is_one_clear_line() {
        let e = config_xml(&net(Some("nosuchif0"), &[])).unwrap_err().to_string();
        assert!(e.contains("nosuchif0") && !e.contains('\n'), "{e}");
        let e = config_xml(&net(Some("192.0.2.254"), &[])).unwrap_err().to_string();
        assert!(e.contains("192.0.2.254"), "{e}");
        let e = config_xml(&net(Some("lo"), &["a\"b"])).unwrap_err().to_string();
        assert!(e.contains("peers"), "{e}");
    }

    #[test]
    fn fib_trie_local_addresses() {
        let t = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     \
                 +-- 127.0.0.0/8 2 0 2\n           |-- 127.0.0.0\n              /8 host LOCAL\n           \
                 |-- 127.0.0.1\n              /32 host LOCAL\n        |-- 127.255.255.255\n           \
                 /32 link BROADCAST\n           |-- 192.0.2.0\n              /24 link UNICAST\n           \
                 |-- 192.0.2.2\n              /32 host LOCAL\n";
        let v = local_ipv4(t);
        assert_eq!(
            v,
            [std::net::Ipv4Addr::new(127, 0, 0, 1), std::net::Ipv4Addr::new(192, 0, 2, 2)]
        );
        let v6 = local_ipv6("00000000000000000000000000000001 01 80 10 80       lo\n");
        assert_eq!(v6, vec![std::net::Ipv6Addr::LOCALHOST]);
    }

    #[test]
    fn same_domain_with_another_configuration_is_refused() {
        let domain = 200 + std::process::id() % 30;
        let a = CycloneDdsTransport::new(domain).unwrap();
        let e = CycloneDdsTransport::with_network(domain, &net(Some("lo"), &["127.0.0.2"]))
            .err()
            .expect("another configuration must be refused")
            .to_string();
        assert!(e.contains(&format!("domain {domain}")) && e.contains("another"), "{e}");
        let b = CycloneDdsTransport::new(domain).unwrap(); // the same configuration is shared
        assert!(a.notes()[0].contains(&format!("domain {domain}, loopback only")));
        drop((a, b));
        // gone with its last user: now the other configuration may have it
        let c =
            CycloneDdsTransport::with_network(domain, &net(Some("lo"), &["127.0.0.2"])).unwrap();
        assert!(
            c.notes()[0].contains("interface lo, no multicast, unicast discovery peers 127.0.0.2"),
            "{:?}",
            c.notes()
        );
    }
}
