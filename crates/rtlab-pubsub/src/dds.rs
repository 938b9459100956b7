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
//! This is the one module of the crate with `unsafe`: calls into the C API. Every block
//! states why it is sound. Entities are deleted on drop (ports, then participant, then
//! the domain when its last transport goes). Never prints.
#![allow(unsafe_code)]

use crate::ros_msg;
use crate::transport::*;
use cyclors::*;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

const NAME: &str = "cyclonedds";
/// The largest domain id rtlab uses: DDS's port mapping (7400 + 250 d) leaves room for
/// unicast discovery of 100 participant indexes up to domain 231 (232 overflows port 65535).
pub const MAX_DOMAIN: u32 = 231;
/// The DDS type name of the probe message (`sensor_msgs/msg/CompressedImage`).
pub const TYPE_NAME: &str = crate::ros_msg::TYPE_NAME;
/// Largest message offered (Cyclone fragments large samples).
pub const MAX_MESSAGE: usize = 64 << 20;

fn lib(what: &'static str, rc: i32) -> TransportError {
    // SAFETY: dds_strretcode returns a pointer to a static, NUL-terminated string for any code.
    let why = unsafe { CStr::from_ptr(dds_strretcode(rc)) }.to_string_lossy().into_owned();
    TransportError::Library { transport: NAME, what, why: format!("{why} ({rc})") }
}

/// Cyclone configuration: loopback only, no multicast, unicast discovery on 127.0.0.1.
pub fn loopback_config() -> String {
    concat!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/></Interfaces>",
        "<AllowMulticast>false</AllowMulticast></General>",
        "<Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex>",
        "<Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>"
    )
    .to_string()
}

/// Which network a DDS domain uses (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DdsNetwork {
    /// Interface name (`eth0`) or one of its addresses; None: loopback only.
    pub interface: Option<String>,
    /// Unicast discovery peers (addresses or host names, optionally `:PORT`); empty with an
    /// interface: multicast discovery.
    pub peers: Vec<String>,
}

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
    let peers = if net.peers.is_empty() {
        String::new()
    } else {
        let list: String = net.peers.iter().map(|p| format!("<Peer address=\"{p}\"/>")).collect();
        format!("<Peers>{list}</Peers>")
    };
    Ok(format!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces>{iface}</Interfaces>\
         <AllowMulticast>{multicast}</AllowMulticast></General>\
         <Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex>\
         {peers}</Discovery></Domain></CycloneDDS>"
    ))
}

/// A domain this process created: id, Cyclone handle, transports using it, configuration.
struct DomainEntry {
    id: u32,
    handle: dds_entity_t,
    users: usize,
    config: String,
}

/// Domains this process created, with how many transports use each.
static DOMAINS: Mutex<Vec<DomainEntry>> = Mutex::new(Vec::new());

fn acquire_domain(id: u32, config: &str) -> Result<(), TransportError> {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = d.iter_mut().find(|e| e.id == id) {
        if e.config != config {
            return Err(bad(
                "domain",
                format!(
                    "domain {id} is already open in this process with another network configuration \
                     (one configuration per domain per process; use another domain id)"
                ),
            ));
        }
        e.users += 1;
        return Ok(());
    }
    let cfg = CString::new(config).map_err(|_| bad("configuration", "NUL in the XML".into()))?;
    // SAFETY: cfg is a valid NUL-terminated string that outlives the call; Cyclone copies it.
    let h = unsafe { dds_create_domain(id, cfg.as_ptr()) };
    if h < 0 {
        return Err(lib("create domain", h));
    }
    d.push(DomainEntry { id, handle: h, users: 1, config: config.to_string() });
    Ok(())
}

fn release_domain(id: u32) {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = d.iter().position(|e| e.id == id) {
        d[i].users -= 1;
        if d[i].users == 0 {
            // SAFETY: the handle came from dds_create_domain and is deleted once, here.
            unsafe { dds_delete(d[i].handle) };
            d.remove(i);
        }
    }
}

struct Participant {
    domain: u32,
    handle: dds_entity_t,
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; deleting it also deletes any child left.
        unsafe { dds_delete(self.handle) };
        release_domain(self.domain);
    }
}

/// A participant of one DDS domain (one per process is the intent; several may share it).
pub struct DdsTransport {
    p: Arc<Participant>,
    net: DdsNetwork,
}

impl DdsTransport {
    /// The participant's entity (for built-in topic readers, [`crate::dds_graph`]).
    pub(crate) fn participant(&self) -> dds_entity_t {
        self.p.handle
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
        acquire_domain(domain, &config)?;
        // SAFETY: null QoS and listener are accepted (defaults).
        let h = unsafe { dds_create_participant(domain, std::ptr::null(), std::ptr::null()) };
        if h < 0 {
            release_domain(domain);
            return Err(lib("create participant", h));
        }
        Ok(DdsTransport { p: Arc::new(Participant { domain, handle: h }), net: net.clone() })
    }

    /// A "blob" topic (cyclocut: the samples stay serialized) named `dds_name`, of type
    /// `type_name`, keyless or keyed.
    fn blob_topic(
        &self,
        dds_name: &str,
        type_name: &str,
        keyless: bool,
    ) -> Result<dds_entity_t, TransportError> {
        let nul =
            |what| TransportError::Library { transport: NAME, what, why: "NUL in name".into() };
        let name = CString::new(dds_name).map_err(|_| nul("topic"))?;
        let ty = CString::new(type_name).map_err(|_| nul("type name"))?;
        // SAFETY: both strings are valid and NUL-terminated for the call; cyclocut copies them
        // (the pointers are *mut only because of the C signature; nothing is written).
        let t = unsafe {
            cdds_create_blob_topic(
                self.p.handle,
                name.as_ptr() as *mut _,
                ty.as_ptr() as *mut _,
                keyless,
            )
        };
        if t < 0 {
            return Err(lib("create topic", t));
        }
        Ok(t)
    }

    /// The probe message's topic: ROS 2 naming (`rt/<topic>`), [`TYPE_NAME`], keyless.
    fn topic(&self, topic: &str) -> Result<dds_entity_t, TransportError> {
        self.blob_topic(&format!("rt/{topic}"), TYPE_NAME, true)
    }

    /// A writer on topic `t` (which it takes over: deleted with it, also on an error).
    fn writer_on(&self, t: dds_entity_t, qos: &Qos) -> Result<WriterEntities, TransportError> {
        let q = NativeQos::of(qos);
        // SAFETY: participant and topic are live handles; q is a valid QoS for the call.
        let w = unsafe { dds_create_writer(self.p.handle, t, q.0, std::ptr::null()) };
        if w < 0 {
            // SAFETY: t is our topic handle.
            unsafe { dds_delete(t) };
            return Err(lib("create writer", w));
        }
        let mut sertype: *const ddsi_sertype = std::ptr::null();
        // SAFETY: w is a live writer; sertype is a valid out-pointer.
        let rc = unsafe { dds_get_entity_sertype(w, &mut sertype) };
        if rc < 0 || sertype.is_null() {
            // SAFETY: our handles.
            unsafe {
                dds_delete(w);
                dds_delete(t);
            }
            return Err(lib("writer sertype", rc));
        }
        Ok(WriterEntities {
            _p: self.p.clone(),
            writer: w,
            topic: t,
            sertype,
            reliable: qos.reliability == Reliability::Reliable,
        })
    }

    /// A reader on topic `t` with a waitset on its read condition (it takes the topic over:
    /// deleted with it, also on an error).
    fn reader_on(&self, t: dds_entity_t, qos: &Qos) -> Result<ReaderEntities, TransportError> {
        let q = NativeQos::of(qos);
        // SAFETY: live participant and topic; valid QoS.
        let r = unsafe { dds_create_reader(self.p.handle, t, q.0, std::ptr::null()) };
        if r < 0 {
            // SAFETY: our topic handle.
            unsafe { dds_delete(t) };
            return Err(lib("create reader", r));
        }
        // SAFETY: live handles; the waitset and condition become children we delete on drop.
        let (ws, cond) = unsafe {
            let ws = dds_create_waitset(self.p.handle);
            let cond = dds_create_readcondition(r, DDS_ANY_STATE);
            if ws >= 0 && cond >= 0 {
                dds_waitset_attach(ws, cond, r as dds_attach_t);
            }
            (ws, cond)
        };
        if ws < 0 || cond < 0 {
            // SAFETY: our handles (negative ones are rejected by dds_delete harmlessly).
            unsafe {
                dds_delete(cond);
                dds_delete(ws);
                dds_delete(r);
                dds_delete(t);
            }
            return Err(lib("create waitset", ws.min(cond)));
        }
        Ok(ReaderEntities { _p: self.p.clone(), reader: r, topic: t, waitset: ws, cond })
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
        let t = self.blob_topic(topic, type_name, keyless)?;
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
        let t = self.blob_topic(topic, type_name, keyless)?;
        Ok(RawWriter { w: self.writer_on(t, qos)? })
    }
}

/// A writer and its topic, deleted on drop; writes serialized samples.
struct WriterEntities {
    _p: Arc<Participant>,
    writer: dds_entity_t,
    topic: dds_entity_t,
    sertype: *const ddsi_sertype,
    /// Reliable: on drop, wait (at most [`DRAIN_NS`]) until matched readers acknowledged
    /// everything, so the last messages are not lost with the writer.
    reliable: bool,
}

/// How long a reliable writer waits for acknowledgements before it is deleted.
const DRAIN_NS: i64 = 2_000_000_000;

// SAFETY: the raw sertype pointer is owned by the writer (kept alive with it) and only read
// by Cyclone, which is thread-safe; the struct is used by one thread at a time (&mut).
unsafe impl Send for WriterEntities {}

impl WriterEntities {
    /// Write one serialized sample (encapsulation header included).
    fn write(&self, sample: &[u8]) -> Result<(), TransportError> {
        let iov = iovec { iov_base: sample.as_ptr() as *mut _, iov_len: sample.len() };
        // SAFETY: iov points to `sample` for the call (Cyclone copies it, never writes through
        // it); sertype belongs to our live writer; dds_writecdr takes the serdata reference.
        let rc = unsafe {
            let sd = ddsi_serdata_from_ser_iov(
                self.sertype,
                ddsi_serdata_kind_SDK_DATA,
                1,
                &iov,
                sample.len(),
            );
            if sd.is_null() {
                return Err(TransportError::Library {
                    transport: NAME,
                    what: "serialize",
                    why: "serdata allocation failed".into(),
                });
            }
            dds_writecdr(self.writer, sd)
        };
        if rc < 0 {
            return Err(lib("write", rc));
        }
        Ok(())
    }
}

impl Drop for WriterEntities {
    fn drop(&mut self) {
        // SAFETY: our handles, deleted once; waiting for acks on a live writer only reads it
        // (it returns at once when nothing is unacknowledged or no reader is matched).
        unsafe {
            if self.reliable {
                dds_wait_for_acks(self.writer, DRAIN_NS);
            }
            dds_delete(self.writer);
            dds_delete(self.topic);
        }
    }
}

/// A reader, its topic, waitset and read condition, deleted on drop (children first).
struct ReaderEntities {
    _p: Arc<Participant>,
    reader: dds_entity_t,
    topic: dds_entity_t,
    waitset: dds_entity_t,
    cond: dds_entity_t,
}

impl ReaderEntities {
    /// Take the next sample and copy its first `buf.len()` serialized bytes (the
    /// encapsulation header first) into `buf`: (serialized size, bytes copied), with size 0
    /// for a sample without data (a dispose); None when there was no sample.
    fn take_head(&self, buf: &mut [u8]) -> Result<Option<(usize, usize)>, TransportError> {
        let mut sd: *mut ddsi_serdata = std::ptr::null_mut();
        // SAFETY: dds_sample_info_t is plain data; all-zero is a valid value to be overwritten.
        let mut info: dds_sample_info_t = unsafe { std::mem::zeroed() };
        // SAFETY: live reader; sd and info are valid for one sample.
        let n = unsafe { dds_takecdr(self.reader, &mut sd, 1, &mut info, DDS_ANY_STATE) };
        if n < 0 {
            return Err(lib("take", n));
        }
        if n == 0 || sd.is_null() {
            return Ok(None);
        }
        let (mut size, mut got) = (0usize, 0usize);
        // SAFETY: sd is a live serdata we hold one reference to; to_ser_ref gives a view of
        // the bytes asked for, valid until to_ser_unref; we copy out and release both.
        unsafe {
            if info.valid_data {
                size = ddsi_serdata_size(sd) as usize;
                let want = size.min(buf.len());
                if want > 0 {
                    let mut iov = iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
                    let r = ddsi_serdata_to_ser_ref(sd, 0, want, &mut iov);
                    if !r.is_null() && !iov.iov_base.is_null() {
                        got = iov.iov_len.min(want);
                        std::ptr::copy_nonoverlapping(
                            iov.iov_base as *const u8,
                            buf.as_mut_ptr(),
                            got,
                        );
                    }
                    if !r.is_null() {
                        ddsi_serdata_to_ser_unref(r, &iov);
                    }
                }
            }
            ddsi_serdata_unref(sd);
        }
        Ok(Some((size, got)))
    }

    /// Wait at most `timeout_ns` for data.
    fn wait(&self, timeout_ns: i64) -> Result<(), TransportError> {
        // SAFETY: live waitset; no attachment output wanted (null, 0).
        let rc =
            unsafe { dds_waitset_wait(self.waitset, std::ptr::null_mut(), 0, timeout_ns.max(0)) };
        if rc < 0 {
            return Err(lib("wait", rc));
        }
        Ok(())
    }
}

impl Drop for ReaderEntities {
    fn drop(&mut self) {
        // SAFETY: our handles, deleted once, children first.
        unsafe {
            dds_waitset_detach(self.waitset, self.cond);
            dds_delete(self.cond);
            dds_delete(self.waitset);
            dds_delete(self.reader);
            dds_delete(self.topic);
        }
    }
}

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
    r: ReaderEntities,
}

/// A writer of a topic of any type: it writes serialized samples given whole (the 4-byte
/// encapsulation header first). For peers and tests of types rtlab has no support for.
pub struct RawWriter {
    w: WriterEntities,
}

impl RawWriter {
    /// Write one serialized sample (encapsulation header included).
    pub fn write(&mut self, sample: &[u8]) -> Result<(), TransportError> {
        self.w.write(sample)
    }
}

impl RawReader {
    /// Writers this reader is matched with now.
    pub fn matched(&self) -> u32 {
        // SAFETY: all-zero is a valid value of this plain C status struct, overwritten.
        let mut st: dds_subscription_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: live reader; st is a local out-value.
        let rc = unsafe { dds_get_subscription_matched_status(self.r.reader, &mut st) };
        if rc < 0 {
            0
        } else {
            st.current_count
        }
    }

    /// The next sample, or None (nothing, or a dispose without data).
    pub fn try_take(&mut self) -> Result<Option<RawSample>, TransportError> {
        let mut buf = [0u8; 20];
        let Some((size, got)) = self.r.take_head(&mut buf)? else { return Ok(None) };
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
        self.r.take_head(buf)
    }

    /// The next sample, waiting at most `timeout_ns` for one.
    pub fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<RawSample>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        self.r.wait(timeout_ns)?;
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

/// A dds_qos_t deleted on drop.
struct NativeQos(*mut dds_qos_t);

impl NativeQos {
    fn of(q: &Qos) -> NativeQos {
        // SAFETY: dds_create_qos returns a fresh QoS object we own; the setters only write into it.
        unsafe {
            let p = dds_create_qos();
            match q.reliability {
                Reliability::Reliable => dds_qset_reliability(
                    p,
                    dds_reliability_kind_DDS_RELIABILITY_RELIABLE,
                    1_000_000_000,
                ),
                Reliability::BestEffort => {
                    dds_qset_reliability(p, dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0)
                }
            }
            match q.history {
                History::KeepLast(n) => dds_qset_history(
                    p,
                    dds_history_kind_DDS_HISTORY_KEEP_LAST,
                    n.min(i32::MAX as u32) as i32,
                ),
                History::KeepAll => dds_qset_history(p, dds_history_kind_DDS_HISTORY_KEEP_ALL, 0),
            }
            match q.durability {
                Durability::Volatile => {
                    dds_qset_durability(p, dds_durability_kind_DDS_DURABILITY_VOLATILE)
                }
                Durability::TransientLocal => {
                    dds_qset_durability(p, dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL)
                }
            }
            NativeQos(p)
        }
    }
}

impl Drop for NativeQos {
    fn drop(&mut self) {
        // SAFETY: created by dds_create_qos, deleted once.
        unsafe { dds_delete_qos(self.0) };
    }
}

impl Transport for DdsTransport {
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
                reliable: "DDS_RELIABILITY_RELIABLE, max_blocking_time 1 s",
                best_effort: "DDS_RELIABILITY_BEST_EFFORT",
                keep_last: "DDS_HISTORY_KEEP_LAST depth {n}",
                keep_all: "DDS_HISTORY_KEEP_ALL",
                volatile: "DDS_DURABILITY_VOLATILE",
                transient_local: "DDS_DURABILITY_TRANSIENT_LOCAL",
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
        let w = self.writer_on(self.topic(topic)?, qos)?;
        let mut buf = vec![0u8; ros_msg::serialized_size(max_len)].into_boxed_slice();
        ros_msg::init(&mut buf);
        Ok(Box::new(DdsPublisher { w, buf, max_len }))
    }
    fn subscriber(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Subscriber>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_MESSAGE, max_len)?;
        Ok(Box::new(DdsSubscriber {
            r: self.reader_on(self.topic(topic)?, qos)?,
            head: [0u8; ros_msg::HEAD],
        }))
    }
    fn notes(&self) -> Vec<String> {
        vec![format!(
            "cyclonedds: Cyclone DDS (cyclors 0.4), domain {}, {}; topic rt/<topic>, type {} (header.stamp = send stamp, data = sequence + payload)",
            self.p.domain,
            network_note(&self.net),
            ros_msg::ROS_TYPE
        )]
    }
}

/// What the network configuration is, in words (for the notes).
fn network_note(net: &DdsNetwork) -> String {
    match net.interface.as_deref() {
        None => "loopback only (lo, no multicast, unicast peer 127.0.0.1)".into(),
        Some(i) => {
            let iface = match classify(i) {
                Iface::Name(n) => format!("interface {n}"),
                Iface::Address(a) => format!("interface with address {a}"),
            };
            if net.peers.is_empty() {
                format!("{iface}, multicast on (discovery by multicast, SPDP to 239.255.0.1)")
            } else {
                format!("{iface}, no multicast, unicast discovery peers {}", net.peers.join(", "))
            }
        }
    }
}

struct DdsPublisher {
    w: WriterEntities,
    buf: Box<[u8]>,
    max_len: usize,
}

impl Publisher for DdsPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.max_len, len)?;
        let size = ros_msg::encode(&mut self.buf, seq, stamp_ns, len);
        self.w.write(&self.buf[..size])
    }
    /// The writer's publication-matched status: `current_count`.
    fn matched(&self) -> Option<usize> {
        // SAFETY: all-zero is a valid value of this plain C status struct, overwritten.
        let mut st: dds_publication_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: live writer; st is a local out-value.
        let rc = unsafe { dds_get_publication_matched_status(self.w.writer, &mut st) };
        (rc >= 0).then_some(st.current_count as usize)
    }
    /// `dds_wait_for_acks` (every matched reliable reader; OK at once without one).
    fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        // SAFETY: live writer; waiting only reads it.
        let rc = unsafe { dds_wait_for_acks(self.w.writer, timeout_ns.max(0)) };
        match rc {
            0 => Some(true),
            DDS_RETCODE_TIMEOUT => Some(false),
            _ => None,
        }
    }
}

struct DdsSubscriber {
    r: ReaderEntities,
    /// The first bytes of each sample (sequence and stamp are read from there).
    head: [u8; ros_msg::HEAD],
}

impl Subscriber for DdsSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
        let got = match self.r.take_head(&mut self.head)? {
            Some((size, got)) if size > 0 => got,
            // nothing, or a dispose/unregister without data
            _ => return Ok(None),
        };
        match ros_msg::decode(&self.head[..got]) {
            Ok(d) => Ok(Some(Received { seq: d.seq, stamp_ns: d.stamp_ns, len: d.len })),
            Err(m) => Err(TransportError::Malformed { transport: NAME, why: m.reason() }),
        }
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        self.r.wait(timeout_ns)?;
        self.try_take()
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
        let a = DdsTransport::new(domain).unwrap();
        let e = DdsTransport::with_network(domain, &net(Some("lo"), &["127.0.0.2"]))
            .err()
            .expect("another configuration must be refused")
            .to_string();
        assert!(e.contains(&format!("domain {domain}")) && e.contains("another"), "{e}");
        let b = DdsTransport::new(domain).unwrap(); // the same configuration is shared
        assert!(a.notes()[0].contains(&format!("domain {domain}, loopback only")));
        drop((a, b));
        // gone with its last user: now the other configuration may have it
        let c = DdsTransport::with_network(domain, &net(Some("lo"), &["127.0.0.2"])).unwrap();
        assert!(
            c.notes()[0].contains("interface lo, no multicast, unicast discovery peers 127.0.0.2"),
            "{:?}",
            c.notes()
        );
    }
}
