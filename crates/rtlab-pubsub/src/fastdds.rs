//! `fastdds`: eProsima Fast DDS 2.9 (ROS 2's default DDS), the system's library (Debian 12:
//! libfastrtps-dev 2.9.1, libfastcdr-dev 1.0.26) through a thin C++ shim
//! (`fastdds/shim.cpp`, built by this crate's `build.rs` as a shared object the crate
//! embeds and loads when the first participant is made: the rtlab binary does not link Fast
//! DDS, and a process holds one Fast DDS at most, [`crate::dl::claim_fast_dds`]).
//!
//! ROS 2 conventions, exactly as [`crate::dds`]: the DDS topic is `rt/<topic>`, the type
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
//! return codes. This is a module with `unsafe` (the shim's C API); every block says why it
//! is sound. Ports are deleted on drop, then the participant. Never prints.
#![allow(unsafe_code)]

use crate::dds::{check_interface, classify, DdsNetwork, Iface};
use crate::ros_msg;
use crate::transport::*;
use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const NAME: &str = "fastdds";
/// The largest domain id, as `dds` ([`crate::dds::MAX_DOMAIN`]).
pub const MAX_DOMAIN: u32 = crate::dds::MAX_DOMAIN;
/// Largest message offered (tested at this size).
pub const MAX_MESSAGE: usize = 4 << 20;
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

/// What a process holds once the `fastdds` transport is loaded ([`crate::dl::claim_fast_dds`]).
pub const FAST_DDS: &str = "Fast DDS 2.9 (Debian's libfastrtps, the fastdds transport)";

/// Which Fast DDS library the transport runs on (`--fastdds-lib`, scenario key `fastdds_lib`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FastDdsLib {
    /// Debian's Fast DDS 2.9 (libfastrtps), the shim built against it.
    #[default]
    Debian,
    /// The Fast DDS of the ROS 2 installation (the one its rmw_fastrtps_cpp runs on: 3.2.2
    /// in the package registry's ROS 2), the shim built against it at build time: beside
    /// `ros2` the difference is rcl, the RMW and the type support alone.
    Ros2,
}

impl FastDdsLib {
    pub fn parse(s: &str) -> Option<FastDdsLib> {
        match s {
            "debian" => Some(FastDdsLib::Debian),
            "ros2" => Some(FastDdsLib::Ros2),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FastDdsLib::Debian => "debian",
            FastDdsLib::Ros2 => "ros2",
        }
    }
}

/// The Fast DDS version of Debian's library the shim was built against (`2.9.1`).
pub const DEBIAN_VERSION: &str = env!("RTLAB_FASTDDS29_VERSION");
/// The Fast DDS 3 version the second shim was built against (empty: none was built).
pub const ROS2_BUILT_VERSION: &str = env!("RTLAB_FASTDDS3_VERSION");

mod ffi {
    use std::ffi::{c_char, c_int};
    use std::sync::OnceLock;

    #[repr(C)]
    pub struct Participant {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct Writer {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct Reader {
        _private: [u8; 0],
    }
    #[repr(C)]
    pub struct Peer {
        pub address: *const c_char,
        pub port: u16,
    }
    #[repr(C)]
    pub struct Net {
        pub domain: u32,
        pub whitelist: *const *const c_char,
        pub n_whitelist: usize,
        pub peers: *const Peer,
        pub n_peers: usize,
        pub max_initial_peers: u32,
        pub shm: c_int,
        pub shm_segment: u32,
        pub receive_buffer: u32,
        pub send_buffer: u32,
    }
    #[repr(C)]
    pub struct Qos {
        pub reliable: c_int,
        pub keep_all: c_int,
        pub depth: i32,
        pub transient_local: c_int,
    }

    /// The shim's functions, resolved once from the embedded shared object.
    struct Api {
        participant_create:
            unsafe extern "C" fn(*const Net, *mut *mut Participant, *mut c_char, usize) -> c_int,
        participant_delete: unsafe extern "C" fn(*mut Participant),
        writer_create: unsafe extern "C" fn(
            *mut Participant,
            *const c_char,
            *const c_char,
            *const Qos,
            *mut *mut Writer,
            *mut c_char,
            usize,
        ) -> c_int,
        write: unsafe extern "C" fn(*mut Writer, *const u8, usize) -> c_int,
        writer_matched: unsafe extern "C" fn(*mut Writer) -> i32,
        writer_wait_acked: unsafe extern "C" fn(*mut Writer, i64) -> c_int,
        writer_delete: unsafe extern "C" fn(*mut Writer, i64),
        reader_create: unsafe extern "C" fn(
            *mut Participant,
            *const c_char,
            *const c_char,
            *const Qos,
            *mut *mut Reader,
            *mut c_char,
            usize,
        ) -> c_int,
        take: unsafe extern "C" fn(*mut Reader, *mut u8, usize, *mut usize, *mut usize) -> c_int,
        wait: unsafe extern "C" fn(*mut Reader, i64) -> c_int,
        reader_delete: unsafe extern "C" fn(*mut Reader),
    }

    /// The shim (fastdds/shim.cpp) as the build made it, linked against libfastrtps.so.2.9.
    static SHIM: &[u8] = include_bytes!(env!("RTLAB_FASTDDS_SHIM"));
    /// The same shim built against a ROS 2 installation's Fast DDS 3 (empty: not built).
    static SHIM3: &[u8] = include_bytes!(env!("RTLAB_FASTDDS3_SHIM"));
    static API: OnceLock<Result<Api, String>> = OnceLock::new();

    /// Which shim to load: Debian's, or the one for `inst`'s Fast DDS 3.
    pub enum Which<'a> {
        Debian,
        Ros2(&'a crate::ros2::install::Installation),
    }

    /// Load the shim `which` names (and with it its Fast DDS) once per process; the process
    /// holds that Fast DDS from then on (`dl::claim_fast_dds`).
    pub fn load(which: Which) -> Result<(), String> {
        let (who, bytes, name) = match &which {
            Which::Debian => (super::FAST_DDS.to_string(), SHIM, "librtlab_fastdds29.so"),
            Which::Ros2(inst) => {
                let who = ros2_fast_dds(inst)?;
                (who, SHIM3, "librtlab_fastdds3.so")
            }
        };
        crate::dl::claim_fast_dds(&who)?;
        if let Which::Ros2(inst) = &which {
            preload_fast_dds(inst)?;
        }
        let api = API.get_or_init(|| {
            let lib = crate::dl::Library::open_bytes(name, bytes, crate::dl::Bind::NowLocal)
                .map_err(|e| match which {
                    Which::Debian => format!("loading Fast DDS 2.9 ({e}): install Debian's libfastrtps2.9 and libfastcdr1 (scripts/setup.sh does)"),
                    Which::Ros2(_) => format!("loading the Fast DDS 3 shim: {e}"),
                })?;
            // SAFETY: each type below is the C declaration of the same name in shim.h.
            unsafe {
                Ok(Api {
                    participant_create: lib.symbol("fdds_participant_create")?,
                    participant_delete: lib.symbol("fdds_participant_delete")?,
                    writer_create: lib.symbol("fdds_writer_create")?,
                    write: lib.symbol("fdds_write")?,
                    writer_matched: lib.symbol("fdds_writer_matched")?,
                    writer_wait_acked: lib.symbol("fdds_writer_wait_acked")?,
                    writer_delete: lib.symbol("fdds_writer_delete")?,
                    reader_create: lib.symbol("fdds_reader_create")?,
                    take: lib.symbol("fdds_take")?,
                    wait: lib.symbol("fdds_wait")?,
                    reader_delete: lib.symbol("fdds_reader_delete")?,
                })
            }
            // `lib` is never unloaded (dl's contract): the handle is simply not kept
        });
        api.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// The claim of `inst`'s Fast DDS, when the shim of this build fits it (the same major
    /// and minor version: one soname, one ABI).
    fn ros2_fast_dds(inst: &crate::ros2::install::Installation) -> Result<String, String> {
        let built = super::ROS2_BUILT_VERSION;
        if SHIM3.is_empty() || built.is_empty() {
            return Err("--fastdds-lib ros2: this rtlab was built without a ROS 2 installation's Fast DDS 3 (scripts/setup.sh installs one; then rebuild)".into());
        }
        let who = inst.fast_dds().ok_or_else(|| {
            format!("--fastdds-lib ros2: {} runs no Fast DDS ({})", inst.rmw, inst.describe())
        })?;
        let have = inst.middleware.as_ref().and_then(|m| m.version.clone()).unwrap_or_default();
        let minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
        if minor(&have) != minor(built) {
            return Err(format!(
                "--fastdds-lib ros2: {} has Fast DDS {have}, this rtlab's shim was built against {built}",
                inst.prefix.display()
            ));
        }
        Ok(who)
    }

    /// Load `inst`'s Fast DDS (its closure, by full path) so that the shim finds it by soname.
    fn preload_fast_dds(inst: &crate::ros2::install::Installation) -> Result<(), String> {
        let m = inst.middleware.as_ref().ok_or("no middleware")?;
        let order = crate::ros2::elf::closure(std::slice::from_ref(&m.library), &inst.lib_dirs)?;
        for p in &order {
            crate::dl::Library::open(p, crate::dl::Bind::LazyLocal)
                .map_err(|e| format!("loading {}: {e}", p.display()))?;
        }
        Ok(())
    }

    fn api() -> &'static Api {
        match API.get() {
            Some(Ok(a)) => a,
            // every handle below comes from a participant, made only after load() succeeded
            _ => unreachable!("the Fast DDS shim is loaded before any participant exists"),
        }
    }

    // The shim's C API under its C names (shim.h documents each). Unsafe as the C calls are.
    pub unsafe fn fdds_participant_create(
        net: *const Net,
        out: *mut *mut Participant,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int {
        (api().participant_create)(net, out, err, err_len)
    }
    pub unsafe fn fdds_participant_delete(p: *mut Participant) {
        (api().participant_delete)(p)
    }
    pub unsafe fn fdds_writer_create(
        p: *mut Participant,
        topic: *const c_char,
        type_name: *const c_char,
        qos: *const Qos,
        out: *mut *mut Writer,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int {
        (api().writer_create)(p, topic, type_name, qos, out, err, err_len)
    }
    #[inline]
    pub unsafe fn fdds_write(w: *mut Writer, sample: *const u8, len: usize) -> c_int {
        (api().write)(w, sample, len)
    }
    pub unsafe fn fdds_writer_matched(w: *mut Writer) -> i32 {
        (api().writer_matched)(w)
    }
    pub unsafe fn fdds_writer_wait_acked(w: *mut Writer, timeout_ns: i64) -> c_int {
        (api().writer_wait_acked)(w, timeout_ns)
    }
    pub unsafe fn fdds_writer_delete(w: *mut Writer, drain_ns: i64) {
        (api().writer_delete)(w, drain_ns)
    }
    pub unsafe fn fdds_reader_create(
        p: *mut Participant,
        topic: *const c_char,
        type_name: *const c_char,
        qos: *const Qos,
        out: *mut *mut Reader,
        err: *mut c_char,
        err_len: usize,
    ) -> c_int {
        (api().reader_create)(p, topic, type_name, qos, out, err, err_len)
    }
    #[inline]
    pub unsafe fn fdds_take(
        r: *mut Reader,
        buf: *mut u8,
        cap: usize,
        size: *mut usize,
        copied: *mut usize,
    ) -> c_int {
        (api().take)(r, buf, cap, size, copied)
    }
    #[inline]
    pub unsafe fn fdds_wait(r: *mut Reader, timeout_ns: i64) -> c_int {
        (api().wait)(r, timeout_ns)
    }
    pub unsafe fn fdds_reader_delete(r: *mut Reader) {
        (api().reader_delete)(r)
    }
}

fn bad(what: &'static str, why: String) -> TransportError {
    TransportError::Library { transport: NAME, what, why }
}

/// A `dds` check's error, said as this transport's.
fn as_ours(e: TransportError) -> TransportError {
    match e {
        TransportError::Library { what, why, .. } => bad(what, why),
        e => e,
    }
}

/// The shim's error line from its buffer.
fn shim_err(what: &'static str, err: &[c_char]) -> TransportError {
    // SAFETY: the buffer is NUL-terminated: zeroed before the call, and the shim writes with
    // snprintf (always terminated, never past its length).
    let why = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
    bad(what, if why.is_empty() { "failed".into() } else { why })
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
/// interface asked) is not checked. The waiting itself: [`crate::dds::wait_running`].
fn wait_running(
    whitelist: &[std::net::Ipv4Addr],
    interface: &str,
    limit_ns: i64,
) -> Result<i64, TransportError> {
    let holds = |n: &str| rtlab_sys::net::interface_ipv4(n).iter().any(|a| whitelist.contains(a));
    crate::dds::wait_running(&holds, limit_ns).map_err(|name| {
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

struct Participant {
    handle: *mut ffi::Participant,
}

// SAFETY: a Fast DDS DomainParticipant may be used from any thread (Fast DDS locks inside;
// the shim's topic table has its own mutex); the pointer is only freed in Drop.
unsafe impl Send for Participant {}
// SAFETY: as above: every shim call on a participant is thread-safe.
unsafe impl Sync for Participant {}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: made by fdds_participant_create, deleted once; ports hold an Arc to us, so
        // none is left.
        unsafe { ffi::fdds_participant_delete(self.handle) };
    }
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
        ros2: Option<&crate::ros2::install::Installation>,
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
        let (which, version) = match ros2 {
            None => (ffi::Which::Debian, DEBIAN_VERSION.to_string()),
            Some(i) => (
                ffi::Which::Ros2(i),
                i.middleware.as_ref().and_then(|m| m.version.clone()).unwrap_or_default(),
            ),
        };
        ffi::load(which).map_err(|e| bad("library", e))?;
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
        let nul = || bad("network", "NUL in an address".into());
        let white: Vec<CString> = plan
            .whitelist
            .iter()
            .map(|a| CString::new(a.to_string()))
            .collect::<Result<_, _>>()
            .map_err(|_| nul())?;
        let white_ptrs: Vec<*const c_char> = white.iter().map(|c| c.as_ptr()).collect();
        let peer_strs: Vec<CString> = plan
            .peers
            .iter()
            .map(|(a, _)| CString::new(a.to_string()))
            .collect::<Result<_, _>>()
            .map_err(|_| nul())?;
        let peers: Vec<ffi::Peer> = plan
            .peers
            .iter()
            .zip(&peer_strs)
            .map(|((_, port), s)| ffi::Peer { address: s.as_ptr(), port: *port })
            .collect();
        let n = ffi::Net {
            domain,
            whitelist: white_ptrs.as_ptr(),
            n_whitelist: white_ptrs.len(),
            peers: peers.as_ptr(),
            n_peers: peers.len(),
            max_initial_peers: MAX_INITIAL_PEERS,
            shm: c_int::from(shm != Shm::Off),
            shm_segment: match shm {
                Shm::Segment(n) => n,
                _ => 0,
            },
            receive_buffer: buffers.0,
            send_buffer: buffers.1,
        };
        let mut err = [0 as c_char; 256];
        let mut h: *mut ffi::Participant = std::ptr::null_mut();
        // SAFETY: `n` and everything it points to (white, peer_strs, peers) live across the
        // call; the shim copies what it keeps; h and err are valid out-buffers (err's length
        // passed).
        let (rc, names) = naming_new_threads(|| unsafe {
            ffi::fdds_participant_create(&n, &mut h, err.as_mut_ptr(), err.len())
        });
        if rc != 0 || h.is_null() {
            return Err(shim_err("create participant", &err));
        }
        Ok(FastDdsTransport {
            p: Arc::new(Participant { handle: h }),
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
    fn writer(&self, topic: &str, qos: &Qos) -> Result<Writer, TransportError> {
        let (t, ty) = Self::names(topic)?;
        let q = native_qos(qos);
        let mut err = [0 as c_char; 256];
        let mut w: *mut ffi::Writer = std::ptr::null_mut();
        // SAFETY: live participant (we hold it); strings, QoS and out-buffers valid for the call.
        let (rc, names) = naming_new_threads(|| unsafe {
            ffi::fdds_writer_create(
                self.p.handle,
                t.as_ptr(),
                ty.as_ptr(),
                &q,
                &mut w,
                err.as_mut_ptr(),
                err.len(),
            )
        });
        self.record_threads(names);
        if rc != 0 || w.is_null() {
            return Err(shim_err("create writer", &err));
        }
        Ok(Writer { _p: self.p.clone(), w })
    }

    /// A reader of the probe message on `rt/<topic>`.
    fn reader(&self, topic: &str, qos: &Qos) -> Result<Reader, TransportError> {
        let (t, ty) = Self::names(topic)?;
        let q = native_qos(qos);
        let mut err = [0 as c_char; 256];
        let mut r: *mut ffi::Reader = std::ptr::null_mut();
        // SAFETY: live participant; strings, QoS and out-buffers valid for the call.
        let (rc, names) = naming_new_threads(|| unsafe {
            ffi::fdds_reader_create(
                self.p.handle,
                t.as_ptr(),
                ty.as_ptr(),
                &q,
                &mut r,
                err.as_mut_ptr(),
                err.len(),
            )
        });
        self.record_threads(names);
        if rc != 0 || r.is_null() {
            return Err(shim_err("create reader", &err));
        }
        Ok(Reader { _p: self.p.clone(), r })
    }
}

fn native_qos(q: &Qos) -> ffi::Qos {
    ffi::Qos {
        reliable: c_int::from(q.reliability == Reliability::Reliable),
        keep_all: c_int::from(q.history == History::KeepAll),
        depth: match q.history {
            History::KeepLast(n) => n.min(i32::MAX as u32) as i32,
            History::KeepAll => 0,
        },
        transient_local: c_int::from(q.durability == Durability::TransientLocal),
    }
}

/// A DataWriter (and its share of the topic), deleted on drop.
struct Writer {
    _p: Arc<Participant>,
    w: *mut ffi::Writer,
}

// SAFETY: a Fast DDS DataWriter may be used from any thread; we use it from one at a time
// (&mut); the pointer is freed only in Drop.
unsafe impl Send for Writer {}

impl Writer {
    /// Subscribers matched now.
    fn matched(&self) -> i32 {
        // SAFETY: live writer.
        unsafe { ffi::fdds_writer_matched(self.w) }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // SAFETY: made by fdds_writer_create, deleted once (the participant outlives it: Arc).
        unsafe { ffi::fdds_writer_delete(self.w, DRAIN_NS) };
    }
}

/// A DataReader (and its share of the topic), deleted on drop.
struct Reader {
    _p: Arc<Participant>,
    r: *mut ffi::Reader,
}

// SAFETY: as Writer: used from one thread at a time, freed only in Drop.
unsafe impl Send for Reader {}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: made by fdds_reader_create, deleted once.
        unsafe { ffi::fdds_reader_delete(self.r) };
    }
}

impl Transport for FastDdsTransport {
    fn name(&self) -> &'static str {
        NAME
    }
    fn max_message(&self) -> usize {
        MAX_MESSAGE
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
    fn publisher(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Publisher>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let w = self.writer(topic, qos)?;
        let mut buf = vec![0u8; ros_msg::serialized_size(max_len)].into_boxed_slice();
        ros_msg::init(&mut buf);
        Ok(Box::new(FastDdsPublisher { w, buf, max_len }))
    }
    fn subscriber(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Subscriber>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_MESSAGE, max_len)?;
        Ok(Box::new(FastDdsSubscriber { r: self.reader(topic, qos)?, head: [0u8; ros_msg::HEAD] }))
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
    match net.interface.as_deref() {
        None => "UDPv4 loopback only (whitelist 127.0.0.1, no multicast, unicast discovery to 127.0.0.1)".into(),
        Some(i) => {
            let iface = format!("UDPv4 on interface {i} (whitelist {})", white.join(", "));
            if net.peers.is_empty() {
                format!("{iface}, multicast discovery (239.255.0.1)")
            } else {
                format!("{iface}, no multicast, unicast discovery peers {}", net.peers.join(", "))
            }
        }
    }
}

struct FastDdsPublisher {
    w: Writer,
    buf: Box<[u8]>,
    max_len: usize,
}

impl Publisher for FastDdsPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.max_len, len)?;
        let size = ros_msg::encode(&mut self.buf, seq, stamp_ns, len);
        // SAFETY: live writer; buf[..size] is valid for the call (Fast DDS copies it).
        let rc = unsafe { ffi::fdds_write(self.w.w, self.buf.as_ptr(), size) };
        if rc != 0 {
            return Err(TransportError::Library {
                transport: NAME,
                what: "write",
                why: "DataWriter::write refused the sample".into(),
            });
        }
        Ok(())
    }
    /// The DataWriter's publication-matched status: `current_count`.
    fn matched(&self) -> Option<usize> {
        usize::try_from(self.w.matched()).ok()
    }
    /// `DataWriter::wait_for_acknowledgments`.
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        // SAFETY: live writer.
        match unsafe { ffi::fdds_writer_wait_acked(self.w.w, timeout_ns.max(0)) } {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        }
    }
}

struct FastDdsSubscriber {
    r: Reader,
    /// The first bytes of each sample (sequence and stamp are read from there).
    head: [u8; ros_msg::HEAD],
}

impl Subscriber for FastDdsSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let (mut size, mut copied) = (0usize, 0usize);
        // SAFETY: live reader; head is a buffer of the length passed; size/copied are locals.
        let rc = unsafe {
            ffi::fdds_take(
                self.r.r,
                self.head.as_mut_ptr(),
                self.head.len(),
                &mut size,
                &mut copied,
            )
        };
        match rc {
            1 => match ros_msg::decode(&self.head[..copied.min(self.head.len())]) {
                Ok(d) => Ok(Some(Received { seq: d.seq, stamp_ns: d.stamp_ns, len: d.len })),
                Err(m) => Err(TransportError::Malformed { transport: NAME, why: m.reason() }),
            },
            // nothing, or a dispose/unregister without data
            0 | 2 => Ok(None),
            _ => Err(TransportError::Library {
                transport: NAME,
                what: "take",
                why: "DataReader::take_next_sample failed".into(),
            }),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        // SAFETY: live reader.
        unsafe { ffi::fdds_wait(self.r.r, timeout_ns.max(0)) };
        self.try_take()
    }
}

/// A writer of serialized samples given whole (encapsulation header first) on a DDS topic
/// of any keyless type: for tests and peers rtlab has no type support for.
pub struct RawWriter {
    w: Writer,
}

impl RawWriter {
    /// Write one serialized sample (encapsulation header included).
    pub fn write(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        // SAFETY: live writer; sample is valid for the call (Fast DDS copies it).
        if unsafe { ffi::fdds_write(self.w.w, sample.as_ptr(), sample.len()) } != 0 {
            return Err(bad("write", "DataWriter::write refused the sample".into()));
        }
        Ok(())
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
mod tests {
    use super::*;

    fn net(interface: Option<&str>, peers: &[&str]) -> DdsNetwork {
        DdsNetwork {
            interface: interface.map(Into::into),
            peers: peers.iter().map(|p| p.to_string()).collect(),
        }
    }

    #[test]
    fn the_shm_segment_note_comes_only_when_fast_dds_is_on_both_sides_and_a_message_exceeds_it() {
        let d = Shm::Default;
        assert!(shm_segment_note(64 << 10, true, d).is_none());
        assert!(shm_segment_note(1 << 20, false, d).is_none(), "another DDS on the far side: UDP");
        let n = shm_segment_note(1 << 20, true, d).expect("1 MiB exceeds 512 KiB");
        assert!(n.starts_with("fastdds: messages of ") && n.contains("524288"), "{n}");
        assert!(shm_segment_note(SHM_SEGMENT, true, d).is_some(), "the header makes it larger");
        assert!(shm_segment_note(1 << 20, true, Shm::Off).is_none(), "no shared memory");
        assert!(shm_segment_note(1 << 20, true, Shm::Segment(4 << 20)).is_none());
        let n = shm_segment_note(4 << 20, true, Shm::Segment(4 << 20)).unwrap();
        assert!(n.contains("4194304 bytes, --fastdds-shm"), "{n}");
    }

    #[test]
    fn shm_settings_parse_or_say_why_not() {
        assert_eq!(Shm::parse("off"), Ok(Shm::Off));
        assert_eq!(Shm::parse("default"), Ok(Shm::Default));
        assert_eq!(Shm::parse("4MiB"), Ok(Shm::Segment(4 << 20)));
        assert_eq!(Shm::Segment(4 << 20).label().as_deref(), Some("4194304"));
        assert_eq!(Shm::Default.label(), None);
        let e = Shm::parse("1kib").unwrap_err();
        assert!(e.contains("between 65536"), "{e}");
        let e = Shm::parse("lots").unwrap_err();
        assert!(e.starts_with("'lots': off, default or a segment size"), "{e}");
    }

    #[test]
    fn loopback_plan_and_interfaces_by_name_or_address() {
        let lo = std::net::Ipv4Addr::LOCALHOST;
        assert_eq!(
            plan(&DdsNetwork::default()).unwrap(),
            NetPlan { whitelist: vec![lo], peers: vec![(lo, 0)] }
        );
        let p = plan(&net(Some("lo"), &["127.0.0.1", "127.0.0.2:7410", "localhost"])).unwrap();
        assert_eq!(p.whitelist, vec![lo]);
        assert_eq!(p.peers, vec![(lo, 0), (std::net::Ipv4Addr::new(127, 0, 0, 2), 7410), (lo, 0)]);
        let p = plan(&net(Some("127.0.0.1"), &[])).unwrap();
        assert_eq!(p, NetPlan { whitelist: vec![lo], peers: vec![] });
    }

    #[test]
    fn bad_interface_or_peer_is_one_clear_line() {
        for (n, want) in [
            (net(Some("nosuchif0"), &[]), "nosuchif0"),
            (net(Some("192.0.2.254"), &[]), "192.0.2.254"),
            (net(None, &["10.0.0.1"]), "10.0.0.1"),
            (net(Some("lo"), &["a\"b"]), "peers"),
            (net(Some("::1"), &[]), "IPv6"),
        ] {
            let e = FastDdsTransport::with_network(100, &n).err().expect("refused").to_string();
            assert!(e.starts_with("fastdds: ") && e.contains(want) && !e.contains('\n'), "{e}");
        }
        let e = FastDdsTransport::new(MAX_DOMAIN + 1).err().expect("refused").to_string();
        assert!(e.contains("domain id 232"), "{e}");
    }
}
