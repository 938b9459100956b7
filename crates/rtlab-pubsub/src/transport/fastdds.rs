//! `fastdds`: eProsima Fast DDS 2.9 (ROS 2's default DDS), the system's library (Debian 12:
//! libfastrtps-dev 2.9.1, libfastcdr-dev 1.0.26) through a thin C++ shim
//! (rtlab-bindings' `fastdds/shim.cpp`, built as a shared object the binary embeds and
//! loads when the first participant is made, [`rtlab_bindings::fastdds`]: the rtlab binary
//! does not link Fast DDS, and a process holds one Fast DDS at most,
//! [`crate::dl::claim_fast_dds`]).
//!
//! ROS 2 conventions, exactly as [`crate::transport::cyclonedds`]: the DDS topic is `rt/<topic>`, the type
//! `sensor_msgs::msg::dds_::CompressedImage_` (keyless), the message the bytes
//! [`crate::ros_msg`] makes. The Fast DDS type is written by hand (no fastddsgen): its
//! serialize copies rtlab's serialized bytes, the 4-byte CDR encapsulation header included
//! (Fast DDS keeps that header inside `SerializedPayload_t::data`, as generated types do, and
//! the shim mirrors it in `SerializedPayload_t::encapsulation`), its deserialize copies the
//! first [`ros_msg::HEAD`] bytes out. So Cyclone DDS (`dds`), a ROS 2 node and this transport
//! read the same bytes (tested: Fast DDS to Cyclone and back, on one domain). No TypeObject
//! or TypeInformation is sent: types match by name, as Cyclone's blob topics do.
//!
//! Network ([`DdsNetwork`], the same meaning as for `dds`):
//! - no interface (the default): loopback only — UDPv4 with the interface whitelist
//!   127.0.0.1, no multicast locator at all, discovery announced by unicast to 127.0.0.1 on
//!   the ports of participant ids 0..[`MAX_INITIAL_PEERS`] (Cyclone's loopback configuration
//!   uses the same port mapping and indexes, so the two meet);
//! - an interface (a name such as `eth0`, or one of its IPv4 addresses; checked before Fast
//!   DDS sees it, by `dds`'s checks) with unicast peers: UDPv4 whitelisted to the interface's
//!   IPv4 addresses, no multicast, discovery to each peer (`host` or `host:port`; without a
//!   port the participant ids 0..[`MAX_INITIAL_PEERS`] of the domain);
//! - an interface without peers: Fast DDS's default discovery, by multicast (239.255.0.1)
//!   on that interface.
//!
//! Fast DDS 2.9's whitelist takes addresses, not names: a name is turned into its IPv4
//! addresses here (`getifaddrs`). Only UDPv4 is set up: an IPv6 interface address is refused.
//! A participant on an interface is made only once that interface is running (IFF_RUNNING,
//! [`LINK_WAIT_NS`] at most, then a one-line error): Fast DDS 2.9 drops a whitelisted
//! interface that is not running when the participant starts, and such a participant never
//! sends a packet (a veth pair's second end runs about a second after both are up; see
//! `wait_running`).
//! Besides UDPv4, Fast DDS's shared-memory transport is on, as in a default ROS 2 node:
//! Fast DDS participants of one host exchange data through /dev/shm (`fastrtps_*` segments),
//! anyone else (Cyclone, another host) by UDP; [`Transport::notes`] says which are on. The
//! segments go with the participant; a process that is killed or aborts leaves them (seen
//! here after Fast DDS's own assertion aborts, below; its `fastdds shm clean` removes them).
//! Domain ids as `dds`: [`MAX_DOMAIN`]; each transport is its own participant, with its own
//! network configuration (Fast DDS has no per-process domain configuration to share).
//!
//! Waits: blocking is `DataReader::wait_for_unread_message(timeout)`, then a take;
//! busy-poll spins on the non-blocking `take_next_sample`. Publishing encodes into a buffer
//! made at creation and writes it once (Fast DDS copies it into its own payload pool:
//! PREALLOCATED_WITH_REALLOC history memory, so large samples grow their slot); taking
//! copies the first [`ros_msg::HEAD`] bytes into a buffer made at creation. Reliable writers
//! wait (at most 2 s) for acknowledgements before they are deleted.
//!
//! Threads: Fast DDS 2.9 does not name its threads (no `pthread_setname_np` in the library:
//! they carry the name of the thread that created them). So that `--thread-priority` rules
//! can find them, the thread that creates a participant, writer or reader is renamed to a
//! marker for the call, and every thread that inherited the marker is renamed `fdds.N`
//! (N counts per process, in creation order). They are not named by role: seen here, the
//! first loopback participant of a process starts six, `fdds.2` and `fdds.4` blocked in
//! `recvfrom` on its two UDP sockets (the receive threads), the other four on futexes
//! (presumably the event thread, shared-memory listeners and watchdog); a role read from /proc at creation
//! would depend on whether a thread had reached its wait yet. `fdds.` matches them all.
//! Threads those threads start later inherit their `fdds.N` name.
//! [`FastDdsTransport::threads`] lists what was named.
//!
//! Limits: messages up to [`MAX_MESSAGE`] (tested at that size, both ways with Cyclone and
//! between processes; Fast DDS fragments them). Large samples from another DDS need the UDP
//! receive buffer ([`SOCKET_BUFFER`], capped by net.core.rmem_max; the notes warn below 4
//! MiB). Debian's libfastrtps is built with assertions: with the default 208 KiB receive
//! buffer, a Cyclone writer of 1-4 MiB samples deleted while some were still incomplete
//! made Fast DDS abort the reading process (`DataReaderInstance::update_state`: assertion
//! `NEW_VIEW_STATE == view_state`); not seen since the buffers are raised, but it is the
//! library's, and rtlab cannot catch it.
//! Fast DDS logs to stdout by default: its log consumers are removed, errors come back as
//! return codes. The shim's C API is called through rtlab-bindings' safe wrappers (no
//! `unsafe` here). Ports are deleted on drop, then the participant. Never prints.

use crate::ros_msg;
use crate::transport::cyclonedds::{check_interface, classify, DdsNetwork, Iface};
use crate::transport::dds_common::{
    self, DdsPublisher, DdsSubscriber, Head, SampleReader, SampleWriter,
};
use crate::transport::ros2::install::Installation;
use crate::transport::*;
use rtlab_bindings::fastdds::{self as shim, Participant};
use rtlab_bindings::Failed;
use serde::{Deserialize, Serialize};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

mod library;

use library::load;
pub use library::{FastDdsLib, DEBIAN_VERSION, FAST_DDS, ROS2_BUILT_VERSION};

const NAME: &str = "fastdds";
/// The largest domain id, as `dds` ([`crate::transport::cyclonedds::MAX_DOMAIN`]).
pub const MAX_DOMAIN: u32 = crate::transport::cyclonedds::MAX_DOMAIN;
/// Largest message offered (tested at this size).
pub const MAX_MESSAGE: usize = 4 << 20;

/// Fast DDS 3 names every thread of its `dds.*`: `dds.udp.<port>` and `dds.shm.<port>`
/// (receive), `dds.ev.<n>` (events), `dds.asyn.<n>` (the asynchronous writer), `dds.tls.*`,
/// `dds.shm.wdog`.
pub const THREADS: &[&str] = &["dds."];

/// Fast DDS 2.9's threads, as rtlab names them (`fdds.N`: see the module doc).
pub const THREADS_2: &[&str] = &["fdds."];
/// Participant ids whose discovery ports an initial peer without a port is sent to.
pub const MAX_INITIAL_PEERS: u32 = 100;
/// UDP socket buffers asked for (bytes). Measured here: with the system default receive
/// buffer (208 KiB), Cyclone's reliable samples of 1-2 MiB reached a Fast DDS reader 0 to 5
/// times of 5 in 20 s (fragments dropped at the socket, retransmitted and dropped again);
/// with 4 MiB all 5 in under 2 s. The system caps it at net.core.rmem_max / wmem_max.
pub const SOCKET_BUFFER: u32 = 8 << 20;
/// How long a reliable writer waits for acknowledgements before it is deleted.
const DRAIN_NS: i64 = 2_000_000_000;
/// Fast DDS's shared-memory segment: `SharedMemTransportDescriptor`'s default (512 KiB),
/// which rtlab keeps unless told ([`Shm`]), as a default ROS 2 node does.
pub const SHM_SEGMENT: usize = 512 << 10;
/// The segment sizes offered ([`Shm::Segment`]).
pub const SHM_SEGMENT_MIN: u32 = 64 << 10;
pub const SHM_SEGMENT_MAX: u32 = 1 << 30;

/// Fast DDS's shared-memory transport (between Fast DDS participants of one host): as in a
/// default ROS 2 node, off (UDP only), or with another segment size (bytes; Fast DDS's usual
/// remedy for messages larger than the default segment, set in a ROS 2 node by an XML
/// profile).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shm {
    #[default]
    Default,
    Off,
    Segment(u32),
}

impl Shm {
    /// `off`, `default`, or a segment size (`4MiB`, `1048576`).
    pub fn parse(s: &str) -> Result<Shm, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Shm::Off),
            "default" => Ok(Shm::Default),
            _ => {
                let n = rtlab_core::units::parse_size(s)
                    .map_err(|e| format!("'{s}': off, default or a segment size ({e})"))?;
                let n = u32::try_from(n)
                    .ok()
                    .filter(|n| (SHM_SEGMENT_MIN..=SHM_SEGMENT_MAX).contains(n))
                    .ok_or_else(|| {
                        format!("'{s}': a segment between {SHM_SEGMENT_MIN} and {SHM_SEGMENT_MAX} bytes")
                    })?;
                Ok(Shm::Segment(n))
            }
        }
    }

    /// The label value: `off`, or the segment in bytes (`default`: none).
    pub fn label(self) -> Option<String> {
        match self {
            Shm::Default => None,
            Shm::Off => Some("off".into()),
            Shm::Segment(n) => Some(n.to_string()),
        }
    }
}

/// The note for a run whose largest message does not fit [`SHM_SEGMENT`] while Fast DDS is
/// on both sides (its shared memory carries them between participants of one host).
/// Measured here (2026-11-24, one host, 1 MiB one way at 100 Hz, reliable): keep-last 1 lost
/// 219-229 of 300, keep-last 10 lost none but took ~11 ms each; Fast DDS to Cyclone and
/// Cyclone to Fast DDS (UDP only), and Fast DDS best-effort, lost none at ~1.2-1.5 ms.
pub fn shm_segment_note(
    largest_payload: usize,
    fastdds_both_sides: bool,
    shm: Shm,
) -> Option<String> {
    let size = ros_msg::serialized_size(largest_payload);
    let (segment, whose) = match shm {
        Shm::Off => return None,
        Shm::Default => (SHM_SEGMENT, "its default, as in a ROS 2 node"),
        Shm::Segment(n) => (n as usize, "--fastdds-shm"),
    };
    (fastdds_both_sides && size > segment).then(|| {
        format!(
            "fastdds: messages of {size} bytes do not fit Fast DDS's shared-memory segment ({segment} bytes, {whose}): between Fast DDS participants of one host, reliable ones wait for repairs and a short keep-last history loses most of them (measured here at 1 MiB with the default segment, docs/pubsub.md); UDP (another DDS, another host) and best-effort were not affected; a larger segment: --fastdds-shm SIZE"
        )
    })
}

fn bad(what: &'static str, why: String) -> TransportError {
    TransportError::Library { transport: NAME, what, why }
}

/// The shim's error, said as this transport's.
fn ours(e: Failed) -> TransportError {
    bad(e.what, e.why)
}

/// A `dds` check's error, said as this transport's.
fn as_ours(e: TransportError) -> TransportError {
    match e {
        TransportError::Library { what, why, .. } => bad(what, why),
        e => e,
    }
}

/// One unicast discovery peer: an IPv4 address and a port (0: participant ids 0..99).
fn resolve_peer(p: &str) -> Result<(std::net::Ipv4Addr, u16), TransportError> {
    use std::net::ToSocketAddrs;
    if p.is_empty() || p.chars().any(|c| c.is_whitespace() || "<>&\"'".contains(c)) {
        return Err(bad("peers", format!("{p:?} is not an address or host name")));
    }
    if let Ok(a) = p.parse::<std::net::Ipv4Addr>() {
        return Ok((a, 0));
    }
    if let Ok(std::net::SocketAddr::V4(s)) = p.parse::<std::net::SocketAddr>() {
        return Ok((*s.ip(), s.port()));
    }
    let (host, port) = match p.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') => match port.parse::<u16>() {
            Ok(n) => (h, n),
            Err(_) => return Err(bad("peers", format!("{p:?}: port {port:?} is not a number"))),
        },
        _ => (p, 0),
    };
    let addrs = (host, 0)
        .to_socket_addrs()
        .map_err(|e| bad("peers", format!("{p:?}: cannot resolve {host}: {e}")))?;
    for a in addrs {
        if let std::net::SocketAddr::V4(v4) = a {
            return Ok((*v4.ip(), port));
        }
    }
    Err(bad("peers", format!("{p:?} has no IPv4 address (fastdds uses UDPv4 only)")))
}

/// What the shim is told: the whitelist and the unicast discovery peers.
#[derive(Debug, PartialEq, Eq)]
struct NetPlan {
    whitelist: Vec<std::net::Ipv4Addr>,
    /// Empty: Fast DDS's default multicast discovery.
    peers: Vec<(std::net::Ipv4Addr, u16)>,
}

/// The plan for `net`, its interface checked here (see the module docs).
fn plan(net: &DdsNetwork) -> Result<NetPlan, TransportError> {
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
        let lo = std::net::Ipv4Addr::LOCALHOST;
        return Ok(NetPlan { whitelist: vec![lo], peers: vec![(lo, 0)] });
    };
    check_interface(interface).map_err(as_ours)?;
    let whitelist = match classify(interface) {
        Iface::Address(std::net::IpAddr::V4(a)) => vec![a],
        Iface::Address(std::net::IpAddr::V6(a)) => {
            return Err(bad(
                "interface",
                format!("{a} is an IPv6 address: fastdds sets up UDPv4 only (give an IPv4 address or the interface name)"),
            ))
        }
        Iface::Name(n) => {
            let v = rtlab_sys::net::interface_ipv4(n);
            if v.is_empty() {
                return Err(bad(
                    "interface",
                    format!("interface {n} has no IPv4 address (fastdds sets up UDPv4 only)"),
                ));
            }
            v
        }
    };
    let peers = net.peers.iter().map(|p| resolve_peer(p)).collect::<Result<Vec<_>, _>>()?;
    Ok(NetPlan { whitelist, peers })
}

/// How long a participant on an interface waits for that interface to be running (see
/// [`wait_running`]) before it gives up.
pub const LINK_WAIT_NS: i64 = 10_000_000_000;

/// Wait (at most `limit_ns`) until an interface holding a whitelisted address is running;
/// how long it waited, or the one-line error. Fast DDS 2.9 keeps only the *running*
/// interfaces of its whitelist when a participant starts (`UDPv4Transport` filters the
/// whitelist through `IPFinder::getIPs`, which skips interfaces without IFF_RUNNING); a
/// participant left with none binds a placeholder address (192.0.2.0), announces nothing and
/// never sends a packet, for its whole life (measured here: the second end of a fresh veth
/// pair ran 1.0 s after both were up, and a run started right after the link was made reached
/// no one; issue 24). Cyclone DDS and RustDDS take the interface as it is. Loopback (no
/// interface asked) is not checked. The waiting itself: [`crate::transport::cyclonedds::wait_running`].
fn wait_running(
    whitelist: &[std::net::Ipv4Addr],
    interface: &str,
    limit_ns: i64,
) -> Result<i64, TransportError> {
    let holds = |n: &str| rtlab_sys::net::interface_ipv4(n).iter().any(|a| whitelist.contains(a));
    crate::transport::cyclonedds::wait_running(&holds, limit_ns).map_err(|name| {
        let name = if name.is_empty() { interface.to_string() } else { name };
        bad(
            "interface",
            format!(
                "interface {name} is not running (no carrier: `ip link` shows NO-CARRIER or state DOWN) after {} s: Fast DDS 2.9 leaves out an interface that is not running when its participant starts, and that participant would reach no one; bring the link up first",
                limit_ns / 1_000_000_000
            ),
        )
    })
}

/// The UDP socket buffer to ask for: [`SOCKET_BUFFER`], or less when the system allows
/// less (`/proc/sys/net/core/{rmem_max,wmem_max}`, which caps SO_RCVBUF/SO_SNDBUF).
fn socket_buffer(max_name: &str) -> u32 {
    let max = std::fs::read_to_string(format!("/proc/sys/net/core/{max_name}"))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .unwrap_or(0);
    SOCKET_BUFFER.min(max)
}

/// Threads named so far in this process (`fdds.N`), and markers handed out.
static THREADS_NAMED: AtomicU32 = AtomicU32::new(0);
static MARKERS: AtomicU32 = AtomicU32::new(0);

/// Run `f` with this thread named by a fresh marker, then rename every other thread of the
/// process that inherited the marker (threads `f` made Fast DDS start) `fdds.N`. Returns
/// `f`'s result and the names given. Renaming is best effort: a failure leaves a name.
fn naming_new_threads<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let own = std::fs::read_to_string("/proc/thread-self/comm").unwrap_or_default();
    let own = own.trim_end_matches('\n');
    let marker = format!("fdds.new{}", MARKERS.fetch_add(1, Ordering::Relaxed) % 1_000_000);
    let marked = std::fs::write("/proc/thread-self/comm", &marker).is_ok();
    let out = f();
    if !marked {
        return (out, Vec::new());
    }
    let _ = std::fs::write("/proc/thread-self/comm", own);
    let me = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut tids: Vec<u32> = std::fs::read_dir("/proc/self/task")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable(); // creation order (tids grow until they wrap)
    let mut names = Vec::new();
    for tid in tids {
        if tid.to_string() == me {
            continue;
        }
        let comm = format!("/proc/self/task/{tid}/comm");
        let Ok(c) = std::fs::read_to_string(&comm) else { continue };
        if c.trim_end_matches('\n') != marker {
            continue;
        }
        let name = format!("fdds.{}", THREADS_NAMED.fetch_add(1, Ordering::Relaxed));
        if std::fs::write(&comm, &name).is_ok() {
            names.push(name);
        }
    }
    (out, names)
}

/// One Fast DDS participant (one per process is the intent; several may coexist).
pub struct FastDdsTransport {
    p: Arc<Participant>,
    domain: u32,
    net: DdsNetwork,
    plan: NetPlan,
    /// SO_RCVBUF, SO_SNDBUF asked for.
    buffers: (u32, u32),
    shm: Shm,
    /// How long the participant waited for its interface to be running ([`wait_running`]).
    link_wait_ns: i64,
    /// The Fast DDS version it runs on (`2.9.1`, `3.2.2`), and the library in words.
    version: String,
    library: String,
    threads: std::sync::Mutex<Vec<String>>,
}

impl FastDdsTransport {
    /// A participant in domain `domain`, loopback only.
    pub fn new(domain: u32) -> Result<Self, TransportError> {
        Self::with_network(domain, &DdsNetwork::default())
    }

    /// A participant in domain `domain` on the network `net` (see the module docs).
    /// Errors: domain above [`MAX_DOMAIN`], an interface not found here (or without IPv4),
    /// a peer that is not an IPv4 address or resolvable host, Fast DDS refusing.
    pub fn with_network(domain: u32, net: &DdsNetwork) -> Result<Self, TransportError> {
        Self::with_shm(domain, net, Shm::Default)
    }

    /// As [`Self::with_network`], with Fast DDS's shared-memory transport as `shm` says.
    pub fn with_shm(domain: u32, net: &DdsNetwork, shm: Shm) -> Result<Self, TransportError> {
        Self::with_lib(domain, net, shm, None)
    }

    /// As [`Self::with_shm`], on the Fast DDS of the ROS 2 installation `ros2` when given
    /// ([`FastDdsLib::Ros2`]), else on Debian's.
    pub fn with_lib(
        domain: u32,
        net: &DdsNetwork,
        shm: Shm,
        ros2: Option<&Installation>,
    ) -> Result<Self, TransportError> {
        if let Shm::Segment(n) = shm {
            if !(SHM_SEGMENT_MIN..=SHM_SEGMENT_MAX).contains(&n) {
                return Err(bad(
                    "shared memory",
                    format!(
                        "segment of {n} bytes: between {SHM_SEGMENT_MIN} and {SHM_SEGMENT_MAX}"
                    ),
                ));
            }
        }
        if domain > MAX_DOMAIN {
            return Err(bad("domain", format!("domain id {domain} above {MAX_DOMAIN}")));
        }
        let plan = plan(net)?;
        let link_wait_ns = match net.interface.as_deref() {
            Some(i) => wait_running(&plan.whitelist, i, LINK_WAIT_NS)?,
            None => 0,
        };
        let version = match ros2 {
            None => DEBIAN_VERSION.to_string(),
            Some(i) => i.middleware.as_ref().and_then(|m| m.version.clone()).unwrap_or_default(),
        };
        load(ros2).map_err(|e| bad("library", e))?;
        let library = match ros2 {
            None => format!("eProsima Fast DDS {version} (Debian's libfastrtps)"),
            Some(i) => format!(
                "eProsima Fast DDS {version} (ROS 2 {}'s, the library its {} runs on, in {})",
                i.distro,
                i.rmw,
                i.prefix.display()
            ),
        };
        let buffers = (socket_buffer("rmem_max"), socket_buffer("wmem_max"));
        let n = shim::Net {
            domain,
            whitelist: &plan.whitelist,
            peers: &plan.peers,
            max_initial_peers: MAX_INITIAL_PEERS,
            shm: shm != Shm::Off,
            shm_segment: match shm {
                Shm::Segment(n) => n,
                _ => 0,
            },
            receive_buffer: buffers.0,
            send_buffer: buffers.1,
        };
        let (p, names) = naming_new_threads(|| Participant::create(&n));
        Ok(FastDdsTransport {
            p: Arc::new(p.map_err(ours)?),
            domain,
            net: net.clone(),
            plan,
            buffers,
            shm,
            link_wait_ns,
            threads: std::sync::Mutex::new(names),
            version,
            library,
        })
    }

    /// The names given to Fast DDS's threads so far by this transport (`fdds.N`).
    pub fn threads(&self) -> Vec<String> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record_threads(&self, names: Vec<String>) {
        if !names.is_empty() {
            self.threads.lock().unwrap_or_else(|e| e.into_inner()).extend(names);
        }
    }

    fn names(topic: &str) -> Result<(CString, CString), TransportError> {
        let t =
            CString::new(format!("rt/{topic}")).map_err(|_| bad("topic", "NUL in name".into()))?;
        let ty = CString::new(ros_msg::TYPE_NAME).map_err(|_| bad("type", "NUL".into()))?;
        Ok((t, ty))
    }

    /// A writer of the probe message on `rt/<topic>`.
    fn writer(&self, topic: &str, qos: &Qos) -> Result<shim::Writer, TransportError> {
        let (t, ty) = Self::names(topic)?;
        let q = crate::transport::cyclonedds::entity_qos(qos);
        let (w, names) =
            naming_new_threads(|| shim::Writer::create(&self.p, &t, &ty, &q, DRAIN_NS));
        self.record_threads(names);
        w.map_err(ours)
    }

    /// A reader of the probe message on `rt/<topic>`.
    fn reader(&self, topic: &str, qos: &Qos) -> Result<shim::Reader, TransportError> {
        let (t, ty) = Self::names(topic)?;
        let q = crate::transport::cyclonedds::entity_qos(qos);
        let (r, names) = naming_new_threads(|| shim::Reader::create(&self.p, &t, &ty, &q));
        self.record_threads(names);
        r.map_err(ours)
    }
}

impl Transport for FastDdsTransport {
    fn about(&self) -> About {
        About { name: NAME, max_message: MAX_MESSAGE }
    }
    fn map_qos(&self, qos: &Qos) -> Result<QosMapping, TransportError> {
        Ok(exact_dds_mapping(
            qos,
            &DdsQosNames {
                reliable: "RELIABLE_RELIABILITY_QOS, max_blocking_time 1 s",
                best_effort: "BEST_EFFORT_RELIABILITY_QOS",
                keep_last: "KEEP_LAST_HISTORY_QOS depth {n} (resource limits raised to it)",
                keep_all: "KEEP_ALL_HISTORY_QOS, resource limits unlimited",
                volatile: "VOLATILE_DURABILITY_QOS",
                transient_local: "TRANSIENT_LOCAL_DURABILITY_QOS",
            },
        ))
    }
    fn publisher(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Publisher> {
        self.check(qos, max_len)?;
        Ok(Box::new(DdsPublisher::new(self.writer(topic, qos)?, max_len)))
    }
    fn subscriber(&self, topic: &str, qos: &Qos, max_len: usize) -> Made<dyn Subscriber> {
        self.check(qos, max_len)?;
        Ok(Box::new(DdsSubscriber::new(self.reader(topic, qos)?)))
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
        let on_data = dds_common::answering(NAME, state, |t: &shim::Taker, head| {
            Ok(match t.take(head).map_err(ours)? {
                shim::Taken::Sample { copied, .. } => Head::Data(copied),
                shim::Taken::NoData => Head::NoData,
                shim::Taken::Nothing => Head::Nothing,
            })
        });
        let (t, ty) = Self::names(topic_in)?;
        let q = crate::transport::cyclonedds::entity_qos(qos);
        let (reader, names) = naming_new_threads(|| {
            shim::ListenedReader::create(&self.p, &t, &ty, &q, Box::new(on_data))
        });
        self.record_threads(names);
        Ok(Some(Box::new(Answering { _ports: reader.map_err(ours)?, tally })))
    }
    fn thread_names(&self) -> &'static [&'static str] {
        if self.version.starts_with("2.") {
            THREADS_2
        } else {
            THREADS
        }
    }
    fn labels(&self) -> Vec<(&'static str, String)> {
        vec![("fastdds_version", self.version.clone())]
    }
    fn notes(&self) -> Vec<String> {
        let (rcv, snd) = self.buffers;
        let mut v = vec![format!(
            "fastdds: {}, domain {}, transports {}{}; participants of one process deliver intraprocess (Fast DDS's default); topic rt/<topic>, type {} (header.stamp = send stamp, data = sequence + payload); UDP socket buffers asked {rcv} / {snd} bytes; {}",
            self.library,
            self.domain,
            match self.shm {
                Shm::Default => format!("shared memory (Fast DDS participants of this host; segment {SHM_SEGMENT} bytes, Fast DDS's default) + "),
                Shm::Segment(n) => format!("shared memory (Fast DDS participants of this host; segment {n} bytes, --fastdds-shm) + "),
                Shm::Off => String::new(),
            },
            network_note(&self.net, &self.plan),
            ros_msg::ROS_TYPE,
            if self.version.starts_with("2.") {
                "threads named fdds.N by rtlab"
            } else {
                "threads named by Fast DDS (dds.udp.*, dds.ev.*, dds.shm.*, dds.asyn.*)"
            }
        )];
        if self.link_wait_ns >= 20_000_000 {
            v.push(format!(
                "fastdds: waited {} for interface {} to be running before making the participant (Fast DDS 2.9 leaves out whitelisted interfaces that are not running when a participant starts)",
                rtlab_core::units::Nanos(self.link_wait_ns),
                self.net.interface.as_deref().unwrap_or("lo")
            ));
        }
        if self.shm == Shm::Off {
            v.push("fastdds: shared memory off (--fastdds-shm off): Fast DDS participants of this host exchange everything by UDP".into());
        }
        if (rcv as usize) < MAX_MESSAGE {
            v.push(format!(
                "fastdds: the UDP receive buffer is {rcv} bytes (net.core.rmem_max caps it): reliable samples larger than that from another DDS (Cyclone, another host) may arrive late or never; raise net.core.rmem_max to at least {SOCKET_BUFFER}"
            ));
        }
        v
    }
}

/// What the network configuration is, in words (for the notes).
fn network_note(net: &DdsNetwork, plan: &NetPlan) -> String {
    let white: Vec<String> = plan.whitelist.iter().map(|a| a.to_string()).collect();
    dds_common::network_note(
        net,
        "UDPv4 loopback only (whitelist 127.0.0.1, no multicast, unicast discovery to 127.0.0.1)",
        |i| format!("UDPv4 on interface {i} (whitelist {})", white.join(", ")),
        "multicast discovery (239.255.0.1)",
    )
}

impl SampleWriter for shim::Writer {
    const TRANSPORT: &'static str = NAME;
    fn write_sample(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        self.write(sample).map_err(ours)
    }
    /// The DataWriter's publication-matched status: `current_count`.
    fn matched_now(&self) -> Option<usize> {
        usize::try_from(self.matched()).ok()
    }
    /// `DataWriter::wait_for_acknowledgments`.
    fn wait_acked(&self, timeout_ns: i64) -> Option<bool> {
        self.wait_acknowledged(timeout_ns)
    }
}

impl SampleReader for shim::Reader {
    const TRANSPORT: &'static str = NAME;
    fn take_head(&mut self, head: &mut [u8]) -> Result<Option<usize>, TransportError> {
        match self.take(head).map_err(ours)? {
            shim::Taken::Sample { copied, .. } => Ok(Some(copied)),
            // nothing, or a dispose/unregister without data
            shim::Taken::Nothing | shim::Taken::NoData => Ok(None),
        }
    }
    /// `DataReader::wait_for_unread_message` (a timeout is no error: the take says).
    fn wait(&mut self, timeout_ns: i64) -> Result<(), TransportError> {
        shim::Reader::wait(self, timeout_ns);
        Ok(())
    }
}

/// A writer of serialized samples given whole (encapsulation header first) on a DDS topic
/// of any keyless type: for tests and peers rtlab has no type support for.
pub struct RawWriter {
    w: shim::Writer,
}

impl RawWriter {
    /// Write one serialized sample (encapsulation header included).
    pub fn write(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        self.w.write(sample).map_err(ours)
    }
    /// Readers matched now.
    pub fn matched(&self) -> i32 {
        self.w.matched()
    }
}

impl FastDdsTransport {
    /// A raw writer on the probe message's topic `rt/<topic>` (for tests: malformed input).
    pub fn raw_writer(&self, topic: &str, qos: &Qos) -> Result<RawWriter, TransportError> {
        Ok(RawWriter { w: self.writer(topic, qos)? })
    }
}

#[cfg(test)]
mod tests;
