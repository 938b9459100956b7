//! `dds`: Eclipse Cyclone DDS through `cyclors` 0.4 (the C library, built from source).
//!
//! ROS 2 conventions, so that a ROS 2 node on rmw_cyclonedds could be the far side: the DDS
//! topic is `rt/<topic>`, the type name [`TYPE_NAME`], and the sample is the CDR (XCDR1,
//! little endian) of
//! ```text
//! uint64 seq; builtin_interfaces::msg::Time stamp {int32 sec; uint32 nanosec}; sequence<uint8> payload
//! ```
//! The topic is a keyless "blob" topic (cyclors' cyclocut): rtlab writes and takes the
//! serialized sample itself (`dds_writecdr` / `dds_takecdr`), so no IDL compiler is needed.
//! A message of `len` bytes (rtlab's 16-byte header included) carries `len - 16` payload
//! bytes; the stamp is CLOCK_MONOTONIC split into sec/nanosec.
//!
//! Traffic stays on loopback: every domain is created with a configuration that names the
//! `lo` interface, turns multicast off and finds peers by unicast on 127.0.0.1.
//! Blocking wait: a waitset on a read condition; busy-poll: `dds_takecdr` until data.
//! Publishing copies the message once into Cyclone's serdata (Cyclone allocates it).
//!
//! This is the one module of the crate with `unsafe`: calls into the C API. Every block
//! states why it is sound. Entities are deleted on drop (ports, then participant, then
//! the domain when its last transport goes). Never prints.
#![allow(unsafe_code)]

use crate::transport::*;
use cyclors::*;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

const NAME: &str = "dds";
/// The ROS 2-style DDS type name of the probe message.
pub const TYPE_NAME: &str = "rtlab_msgs::msg::dds_::Probe_";
/// Largest message offered (Cyclone fragments large samples).
pub const MAX_MESSAGE: usize = 64 << 20;
const ENCAPSULATION: [u8; 4] = [0x00, 0x01, 0x00, 0x00]; // CDR_LE
/// CDR body before the payload bytes: seq (8) + sec (4) + nanosec (4) + length (4).
const BODY_HEAD: usize = 20;

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

/// Domains this process created, with how many transports use each.
static DOMAINS: Mutex<Vec<(u32, dds_entity_t, usize)>> = Mutex::new(Vec::new());

fn acquire_domain(id: u32) -> Result<(), TransportError> {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = d.iter_mut().find(|e| e.0 == id) {
        e.2 += 1;
        return Ok(());
    }
    let cfg = CString::new(loopback_config()).expect("no NUL in the configuration");
    // SAFETY: cfg is a valid NUL-terminated string that outlives the call; Cyclone copies it.
    let h = unsafe { dds_create_domain(id, cfg.as_ptr()) };
    if h < 0 {
        return Err(lib("create domain (loopback configuration)", h));
    }
    d.push((id, h, 1));
    Ok(())
}

fn release_domain(id: u32) {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = d.iter().position(|e| e.0 == id) {
        d[i].2 -= 1;
        if d[i].2 == 0 {
            // SAFETY: the handle came from dds_create_domain and is deleted once, here.
            unsafe { dds_delete(d[i].1) };
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

pub struct DdsTransport {
    p: Arc<Participant>,
}

impl DdsTransport {
    /// A participant in DDS domain `domain` (loopback configuration).
    pub fn new(domain: u32) -> Result<Self, TransportError> {
        if domain > 232 {
            return Err(TransportError::Library {
                transport: NAME,
                what: "domain",
                why: format!("domain id {domain} above 232"),
            });
        }
        acquire_domain(domain)?;
        // SAFETY: null QoS and listener are accepted (defaults).
        let h = unsafe { dds_create_participant(domain, std::ptr::null(), std::ptr::null()) };
        if h < 0 {
            release_domain(domain);
            return Err(lib("create participant", h));
        }
        Ok(DdsTransport { p: Arc::new(Participant { domain, handle: h }) })
    }

    fn topic(&self, topic: &str) -> Result<dds_entity_t, TransportError> {
        let name = CString::new(format!("rt/{topic}")).map_err(|_| TransportError::Library {
            transport: NAME,
            what: "topic",
            why: "NUL in name".into(),
        })?;
        let ty = CString::new(TYPE_NAME).expect("no NUL");
        // SAFETY: both strings are valid and NUL-terminated for the call; cyclocut copies them
        // (the pointers are *mut only because of the C signature; nothing is written).
        let t = unsafe {
            cdds_create_blob_topic(
                self.p.handle,
                name.as_ptr() as *mut _,
                ty.as_ptr() as *mut _,
                true,
            )
        };
        if t < 0 {
            return Err(lib("create topic", t));
        }
        Ok(t)
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
        let reliability = match qos.reliability {
            Reliability::Reliable => item(
                qos.reliability,
                "DDS_RELIABILITY_RELIABLE, max_blocking_time 1 s",
                Fidelity::Exact,
            ),
            Reliability::BestEffort => {
                item(qos.reliability, "DDS_RELIABILITY_BEST_EFFORT", Fidelity::Exact)
            }
        };
        let history = match qos.history {
            History::KeepLast(n) => {
                item(qos.history, format!("DDS_HISTORY_KEEP_LAST depth {n}"), Fidelity::Exact)
            }
            History::KeepAll => item(qos.history, "DDS_HISTORY_KEEP_ALL", Fidelity::Exact),
        };
        let durability = match qos.durability {
            Durability::Volatile => {
                item(qos.durability, "DDS_DURABILITY_VOLATILE", Fidelity::Exact)
            }
            Durability::TransientLocal => {
                item(qos.durability, "DDS_DURABILITY_TRANSIENT_LOCAL", Fidelity::Exact)
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
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let t = self.topic(topic)?;
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
        let size = ENCAPSULATION.len() + BODY_HEAD + (max_len - HEADER_LEN);
        let mut buf = vec![0u8; size].into_boxed_slice();
        buf[..4].copy_from_slice(&ENCAPSULATION);
        Ok(Box::new(DdsPublisher {
            _p: self.p.clone(),
            writer: w,
            topic: t,
            sertype,
            buf,
            max_len,
        }))
    }
    fn subscriber(
        &self,
        topic: &str,
        qos: &Qos,
        max_len: usize,
    ) -> Result<Box<dyn Subscriber>, TransportError> {
        self.map_qos(qos)?;
        check_len(NAME, MAX_MESSAGE, max_len)?;
        let t = self.topic(topic)?;
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
        Ok(Box::new(DdsSubscriber { _p: self.p.clone(), reader: r, topic: t, waitset: ws, cond }))
    }
    fn notes(&self) -> Vec<String> {
        vec![format!(
            "dds: Cyclone DDS (cyclors 0.4), domain {}, loopback only (lo, no multicast, unicast peer 127.0.0.1); topic rt/<topic>, type {TYPE_NAME}",
            self.p.domain
        )]
    }
}

struct DdsPublisher {
    _p: Arc<Participant>,
    writer: dds_entity_t,
    topic: dds_entity_t,
    sertype: *const ddsi_sertype,
    buf: Box<[u8]>,
    max_len: usize,
}

// SAFETY: the raw sertype pointer is owned by the writer (kept alive with it) and only read
// by Cyclone, which is thread-safe; the struct is used by one thread at a time (&mut).
unsafe impl Send for DdsPublisher {}

impl Publisher for DdsPublisher {
    fn publish(&mut self, seq: u64, stamp_ns: i64, len: usize) -> Result<(), TransportError> {
        check_len(NAME, self.max_len, len)?;
        let b = &mut self.buf[4..];
        b[0..8].copy_from_slice(&seq.to_le_bytes());
        b[8..12].copy_from_slice(&(stamp_ns.div_euclid(1_000_000_000) as i32).to_le_bytes());
        b[12..16].copy_from_slice(&(stamp_ns.rem_euclid(1_000_000_000) as u32).to_le_bytes());
        b[16..20].copy_from_slice(&((len - HEADER_LEN) as u32).to_le_bytes());
        let size = 4 + BODY_HEAD + (len - HEADER_LEN);
        let iov = iovec { iov_base: self.buf.as_mut_ptr() as *mut _, iov_len: size };
        // SAFETY: iov points into our buffer of at least `size` bytes for the call (Cyclone
        // copies it); sertype belongs to our live writer; dds_writecdr takes the serdata ref.
        let rc = unsafe {
            let sd =
                ddsi_serdata_from_ser_iov(self.sertype, ddsi_serdata_kind_SDK_DATA, 1, &iov, size);
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

impl Drop for DdsPublisher {
    fn drop(&mut self) {
        // SAFETY: our handles, deleted once.
        unsafe {
            dds_delete(self.writer);
            dds_delete(self.topic);
        }
    }
}

struct DdsSubscriber {
    _p: Arc<Participant>,
    reader: dds_entity_t,
    topic: dds_entity_t,
    waitset: dds_entity_t,
    cond: dds_entity_t,
}

impl Subscriber for DdsSubscriber {
    fn try_take(&mut self) -> Result<Option<Received>, TransportError> {
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
        let mut head = [0u8; 4 + BODY_HEAD];
        let mut ok = false;
        // SAFETY: sd is a live serdata we hold one reference to; to_ser_ref gives a view of
        // `want` bytes valid until to_ser_unref; we copy out and release both references.
        unsafe {
            let size = ddsi_serdata_size(sd) as usize;
            if info.valid_data && size >= head.len() {
                let mut iov = iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
                let r = ddsi_serdata_to_ser_ref(sd, 0, head.len(), &mut iov);
                if !r.is_null() && !iov.iov_base.is_null() && iov.iov_len >= head.len() {
                    std::ptr::copy_nonoverlapping(
                        iov.iov_base as *const u8,
                        head.as_mut_ptr(),
                        head.len(),
                    );
                    ok = true;
                }
                if !r.is_null() {
                    ddsi_serdata_to_ser_unref(r, &iov);
                }
            }
            ddsi_serdata_unref(sd);
        }
        if !ok {
            // a dispose/unregister without data, or a sample shorter than the message head
            return Ok(None);
        }
        let b = &head[4..];
        let seq = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
        let sec = i32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        let nsec = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        let plen = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")) as usize;
        Ok(Some(Received {
            seq,
            stamp_ns: sec as i64 * 1_000_000_000 + nsec as i64,
            len: plen + HEADER_LEN,
        }))
    }
    fn wait_take(&mut self, timeout_ns: i64) -> Result<Option<Received>, TransportError> {
        if let Some(r) = self.try_take()? {
            return Ok(Some(r));
        }
        // SAFETY: live waitset; no attachment output wanted (null, 0).
        let rc =
            unsafe { dds_waitset_wait(self.waitset, std::ptr::null_mut(), 0, timeout_ns.max(0)) };
        if rc < 0 {
            return Err(lib("wait", rc));
        }
        self.try_take()
    }
}

impl Drop for DdsSubscriber {
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
