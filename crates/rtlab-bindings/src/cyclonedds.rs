//! Eclipse Cyclone DDS through `cyclors` 0.4 (the C library, built from source): domains,
//! participants, "blob" topics (cyclors' cyclocut: samples stay serialized, so no IDL
//! compiler is needed), writers and readers of serialized samples, and readers of the
//! built-in topics (who is in a domain).
//!
//! Contract: a domain is created with its XML configuration by the first participant of its
//! id in this process and deleted with the last one ([`Participant::create`]; the same id
//! with another configuration is refused: one configuration per domain per process).
//! Topics, writers and readers keep their participant alive (an `Arc`) and are deleted on
//! drop, children first; a reliable writer first waits (at most its drain time) until its
//! readers acknowledged everything. Writing copies the sample once into Cyclone's serdata;
//! taking copies the first bytes asked for. Errors are one line (Cyclone's words and code).
//! Never prints.

use crate::{EntityQos, Failed};
use cyclors::*;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

/// A failed call: Cyclone's words for `rc`, and the code.
fn failed(what: &'static str, rc: i32) -> Failed {
    // SAFETY: dds_strretcode returns a pointer to a static, NUL-terminated string for any code.
    let why = unsafe { CStr::from_ptr(dds_strretcode(rc)) }.to_string_lossy().into_owned();
    Failed::new(what, format!("{why} ({rc})"))
}

/// An entity handle deleted on drop (deleting an entity deletes its children; Cyclone checks
/// handles, so a handle already gone with its parent is refused harmlessly).
#[derive(Debug)]
struct Entity(dds_entity_t);

impl Entity {
    /// `rc` as a handle, or the failure of `what`.
    fn of(what: &'static str, rc: dds_entity_t) -> Result<Entity, Failed> {
        if rc < 0 {
            Err(failed(what, rc))
        } else {
            Ok(Entity(rc))
        }
    }
}

impl Drop for Entity {
    fn drop(&mut self) {
        // SAFETY: our handle, deleted once (a handle Cyclone no longer knows is an error code).
        unsafe { dds_delete(self.0) };
    }
}

/// A domain this process created: id, Cyclone handle, participants using it, configuration.
struct DomainEntry {
    id: u32,
    _handle: Entity,
    users: usize,
    config: String,
}

/// Domains this process created, with how many participants use each.
static DOMAINS: Mutex<Vec<DomainEntry>> = Mutex::new(Vec::new());

fn acquire_domain(id: u32, config: &str) -> Result<(), Failed> {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = d.iter_mut().find(|e| e.id == id) {
        if e.config != config {
            return Err(Failed::new(
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
    let cfg = CString::new(config).map_err(|_| Failed::new("configuration", "NUL in the XML"))?;
    // SAFETY: cfg is a valid NUL-terminated string that outlives the call; Cyclone copies it.
    let h = Entity::of("create domain", unsafe { dds_create_domain(id, cfg.as_ptr()) })?;
    d.push(DomainEntry { id, _handle: h, users: 1, config: config.to_string() });
    Ok(())
}

fn release_domain(id: u32) {
    let mut d = DOMAINS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = d.iter().position(|e| e.id == id) {
        d[i].users -= 1;
        if d[i].users == 0 {
            d.remove(i); // its handle is deleted with it
        }
    }
}

/// A participant of one domain; the domain goes with its last participant.
#[derive(Debug)]
pub struct Participant {
    domain: u32,
    handle: dds_entity_t,
}

impl Participant {
    /// A participant in domain `domain`, created with the XML `config` when this process has
    /// no participant there yet. Errors: Cyclone refusing, the domain already open here with
    /// another configuration.
    pub fn create(domain: u32, config: &str) -> Result<Participant, Failed> {
        acquire_domain(domain, config)?;
        // SAFETY: null QoS and listener are accepted (defaults).
        let h = unsafe { dds_create_participant(domain, std::ptr::null(), std::ptr::null()) };
        if h < 0 {
            release_domain(domain);
            return Err(failed("create participant", h));
        }
        Ok(Participant { domain, handle: h })
    }

    /// The domain id.
    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// The participant's GUID.
    pub fn guid(&self) -> [u8; 16] {
        let mut own = dds_guid_t { v: [0; 16] };
        // SAFETY: our live participant; own is a local out-value.
        unsafe { dds_get_guid(self.handle, &mut own) };
        own.v
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: the handle is ours; deleting it also deletes any child left.
        unsafe { dds_delete(self.handle) };
        release_domain(self.domain);
    }
}

/// A "blob" topic (cyclocut: the samples stay serialized), deleted on drop.
#[derive(Debug)]
pub struct Topic {
    t: Entity,
}

impl Topic {
    /// Topic `dds_name` of type `type_name`, keyless or keyed, under participant `p`.
    pub fn blob(
        p: &Participant,
        dds_name: &str,
        type_name: &str,
        keyless: bool,
    ) -> Result<Topic, Failed> {
        let name = CString::new(dds_name).map_err(|_| Failed::new("topic", "NUL in name"))?;
        let ty = CString::new(type_name).map_err(|_| Failed::new("type name", "NUL in name"))?;
        // SAFETY: both strings are valid and NUL-terminated for the call; cyclocut copies them
        // (the pointers are *mut only because of the C signature; nothing is written).
        let t = unsafe {
            cdds_create_blob_topic(
                p.handle,
                name.as_ptr() as *mut _,
                ty.as_ptr() as *mut _,
                keyless,
            )
        };
        Ok(Topic { t: Entity::of("create topic", t)? })
    }
}

/// A dds_qos_t deleted on drop.
struct NativeQos(*mut dds_qos_t);

impl NativeQos {
    fn of(q: &EntityQos) -> NativeQos {
        // SAFETY: dds_create_qos returns a fresh QoS object we own; the setters only write into it.
        unsafe {
            let p = dds_create_qos();
            if q.reliable {
                dds_qset_reliability(
                    p,
                    dds_reliability_kind_DDS_RELIABILITY_RELIABLE,
                    1_000_000_000,
                );
            } else {
                dds_qset_reliability(p, dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0);
            }
            match q.keep_last {
                Some(n) => dds_qset_history(
                    p,
                    dds_history_kind_DDS_HISTORY_KEEP_LAST,
                    n.min(i32::MAX as u32) as i32,
                ),
                None => dds_qset_history(p, dds_history_kind_DDS_HISTORY_KEEP_ALL, 0),
            }
            if q.transient_local {
                dds_qset_durability(p, dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL);
            } else {
                dds_qset_durability(p, dds_durability_kind_DDS_DURABILITY_VOLATILE);
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

/// A writer of serialized samples and its topic, deleted on drop.
pub struct BlobWriter {
    writer: Entity,
    sertype: *const ddsi_sertype,
    /// Reliable: on drop, wait (at most `drain_ns`) until matched readers acknowledged
    /// everything, so the last messages are not lost with the writer.
    drain_ns: Option<i64>,
    _topic: Topic,
    _p: Arc<Participant>,
}

// SAFETY: the raw sertype pointer is owned by the writer (kept alive with it: the writer and
// its participant are deleted only with this value) and only read by Cyclone, which is
// thread-safe; writing needs only the handle, which Cyclone checks.
unsafe impl Send for BlobWriter {}

impl BlobWriter {
    /// A writer on `topic` (which it takes over: deleted with it, also on an error) with
    /// `qos`; a reliable one drains for at most `drain_ns` when dropped.
    pub fn create(
        p: &Arc<Participant>,
        topic: Topic,
        qos: &EntityQos,
        drain_ns: i64,
    ) -> Result<BlobWriter, Failed> {
        let q = NativeQos::of(qos);
        // SAFETY: participant and topic are live handles; q is a valid QoS for the call.
        let w = unsafe { dds_create_writer(p.handle, topic.t.0, q.0, std::ptr::null()) };
        let writer = Entity::of("create writer", w)?;
        let mut sertype: *const ddsi_sertype = std::ptr::null();
        // SAFETY: w is a live writer; sertype is a valid out-pointer.
        let rc = unsafe { dds_get_entity_sertype(w, &mut sertype) };
        if rc < 0 || sertype.is_null() {
            return Err(failed("writer sertype", rc));
        }
        Ok(BlobWriter {
            writer,
            sertype,
            drain_ns: qos.reliable.then_some(drain_ns),
            _topic: topic,
            _p: p.clone(),
        })
    }

    /// Write one serialized sample (encapsulation header included).
    #[inline]
    pub fn write(&self, sample: &[u8]) -> Result<(), Failed> {
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
                return Err(Failed::new("serialize", "serdata allocation failed"));
            }
            dds_writecdr(self.writer.0, sd)
        };
        if rc < 0 {
            return Err(failed("write", rc));
        }
        Ok(())
    }

    /// The publication-matched status' `current_count` (None: Cyclone could not tell).
    pub fn matched(&self) -> Option<usize> {
        // SAFETY: all-zero is a valid value of this plain C status struct, overwritten.
        let mut st: dds_publication_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: live writer; st is a local out-value.
        let rc = unsafe { dds_get_publication_matched_status(self.writer.0, &mut st) };
        (rc >= 0).then_some(st.current_count as usize)
    }

    /// `dds_wait_for_acks` (every matched reliable reader; OK at once without one): Some(true)
    /// when acknowledged, Some(false) at the timeout, None on an error.
    pub fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        // SAFETY: live writer; waiting only reads it.
        let rc = unsafe { dds_wait_for_acks(self.writer.0, timeout_ns.max(0)) };
        match rc {
            0 => Some(true),
            DDS_RETCODE_TIMEOUT => Some(false),
            _ => None,
        }
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        if let Some(drain_ns) = self.drain_ns {
            // SAFETY: a live writer; waiting for acks only reads it (it returns at once when
            // nothing is unacknowledged or no reader is matched). The writer, then its topic,
            // are deleted after this, as the fields drop.
            unsafe { dds_wait_for_acks(self.writer.0, drain_ns) };
        }
    }
}

/// A reader of serialized samples, its topic, waitset and read condition, deleted on drop
/// (children first).
pub struct BlobReader {
    // in the order they are deleted (fields drop in declaration order): children first
    cond: Entity,
    waitset: Entity,
    reader: Entity,
    _topic: Topic,
    _p: Arc<Participant>,
}

impl BlobReader {
    /// A reader on `topic` with `qos` and a waitset on its read condition (it takes the topic
    /// over: deleted with it, also on an error).
    pub fn create(
        p: &Arc<Participant>,
        topic: Topic,
        qos: &EntityQos,
    ) -> Result<BlobReader, Failed> {
        let q = NativeQos::of(qos);
        // SAFETY: live participant and topic; valid QoS.
        let r = unsafe { dds_create_reader(p.handle, topic.t.0, q.0, std::ptr::null()) };
        let reader = Entity::of("create reader", r)?;
        // SAFETY: live handles; the waitset and condition become children deleted on drop.
        let (ws, cond) = unsafe {
            let ws = dds_create_waitset(p.handle);
            let cond = dds_create_readcondition(r, DDS_ANY_STATE);
            if ws >= 0 && cond >= 0 {
                dds_waitset_attach(ws, cond, r as dds_attach_t);
            }
            (ws, cond)
        };
        if ws < 0 || cond < 0 {
            // negative handles are refused by dds_delete harmlessly
            drop((Entity(cond), Entity(ws)));
            return Err(failed("create waitset", ws.min(cond)));
        }
        Ok(BlobReader {
            cond: Entity(cond),
            waitset: Entity(ws),
            reader,
            _topic: topic,
            _p: p.clone(),
        })
    }

    /// Take the next sample and copy its first `buf.len()` serialized bytes (the
    /// encapsulation header first) into `buf`: (serialized size, bytes copied), with size 0
    /// for a sample without data (a dispose); None when there was no sample.
    pub fn take_head(&self, buf: &mut [u8]) -> Result<Option<(usize, usize)>, Failed> {
        take_head(self.reader.0, buf)
    }

    /// Wait at most `timeout_ns` for data.
    pub fn wait(&self, timeout_ns: i64) -> Result<(), Failed> {
        // SAFETY: live waitset; no attachment output wanted (null, 0).
        let rc =
            unsafe { dds_waitset_wait(self.waitset.0, std::ptr::null_mut(), 0, timeout_ns.max(0)) };
        if rc < 0 {
            return Err(failed("wait", rc));
        }
        Ok(())
    }

    /// Writers this reader is matched with now (0 when Cyclone cannot tell).
    pub fn matched(&self) -> u32 {
        // SAFETY: all-zero is a valid value of this plain C status struct, overwritten.
        let mut st: dds_subscription_matched_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: live reader; st is a local out-value.
        let rc = unsafe { dds_get_subscription_matched_status(self.reader.0, &mut st) };
        if rc < 0 {
            0
        } else {
            st.current_count
        }
    }
}

impl Drop for BlobReader {
    fn drop(&mut self) {
        // SAFETY: our live handles; the condition is detached before the fields drop (the
        // condition, the waitset, the reader, then the topic: children first).
        unsafe { dds_waitset_detach(self.waitset.0, self.cond.0) };
    }
}

/// [`BlobReader::take_head`] on reader `reader`.
fn take_head(reader: dds_entity_t, buf: &mut [u8]) -> Result<Option<(usize, usize)>, Failed> {
    let mut sd: *mut ddsi_serdata = std::ptr::null_mut();
    // SAFETY: dds_sample_info_t is plain data; all-zero is a valid value to be overwritten.
    let mut info: dds_sample_info_t = unsafe { std::mem::zeroed() };
    // SAFETY: a live reader (the caller's); sd and info are valid for one sample.
    let n = unsafe { dds_takecdr(reader, &mut sd, 1, &mut info, DDS_ANY_STATE) };
    if n < 0 {
        return Err(failed("take", n));
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
                    std::ptr::copy_nonoverlapping(iov.iov_base as *const u8, buf.as_mut_ptr(), got);
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

/// The reader a data-available callback runs for: take from it there.
pub struct Taker(dds_entity_t);

impl Taker {
    /// [`BlobReader::take_head`], from inside the callback.
    #[inline]
    pub fn take_head(&self, buf: &mut [u8]) -> Result<Option<(usize, usize)>, Failed> {
        take_head(self.0, buf)
    }
}

/// What a [`ListenedReader`] calls when data is available, in Cyclone's delivery thread.
pub type OnData = Box<dyn Fn(&Taker) + Send + Sync>;

/// A reader of serialized samples whose data-available listener calls an [`OnData`] (its
/// topic with it), deleted on drop: deleting the reader waits for a call that runs, so the
/// closure outlives every call. Cyclone runs one reader's listener one call at a time.
pub struct ListenedReader {
    // deleted first (fields drop in declaration order), then the closure it calls
    _reader: Entity,
    _topic: Topic,
    _on_data: Box<OnData>,
    _p: Arc<Participant>,
}

unsafe extern "C" fn data_available(reader: dds_entity_t, arg: *mut std::os::raw::c_void) {
    // SAFETY: arg is the `Box<OnData>` of the ListenedReader whose reader this is; it lives
    // until after the reader is deleted, and deleting waits for a call that runs.
    let f = unsafe { &*(arg as *const OnData) };
    f(&Taker(reader));
}

impl ListenedReader {
    /// A reader on `topic` (taken over: deleted with it, also on an error) with `qos`, whose
    /// data-available listener calls `on_data`.
    pub fn create(
        p: &Arc<Participant>,
        topic: Topic,
        qos: &EntityQos,
        on_data: OnData,
    ) -> Result<ListenedReader, Failed> {
        let on_data = Box::new(on_data);
        let arg = &*on_data as *const OnData as *mut std::os::raw::c_void;
        let q = NativeQos::of(qos);
        // SAFETY: the listener is ours, copied by dds_create_reader and deleted after it;
        // arg stays valid as long as the reader (see `data_available`); live participant and
        // topic; valid QoS.
        let r = unsafe {
            let l = dds_create_listener(arg);
            if l.is_null() {
                return Err(Failed::new("create listener", "out of memory"));
            }
            dds_lset_data_available(l, Some(data_available));
            let r = dds_create_reader(p.handle, topic.t.0, q.0, l);
            dds_delete_listener(l);
            r
        };
        let reader = Entity::of("create reader", r)?;
        Ok(ListenedReader { _reader: reader, _topic: topic, _on_data: on_data, _p: p.clone() })
    }
}

/// A built-in topic of a domain (DCPSParticipant, DCPSPublication, DCPSSubscription).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    Participants,
    Publications,
    Subscriptions,
}

/// A durability kind an endpoint offers or requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    TransientLocal,
    Transient,
    Persistent,
}

/// The QoS policies an endpoint offers (writer) or requests (reader), as far as rtlab reads
/// them; a policy the endpoint did not announce has DDS's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policies {
    pub reliable: bool,
    pub durability: Durability,
    pub keep_all: bool,
    /// The keep-last depth.
    pub depth: i32,
    /// The Deadline QoS's period, ns (None: infinite, the default).
    pub deadline_ns: Option<i64>,
}

/// A writer or reader of the domain, as its built-in topic announces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltinEndpoint {
    pub guid: [u8; 16],
    pub participant: [u8; 16],
    pub topic: String,
    pub type_name: String,
    pub policies: Policies,
}

/// A reader of one built-in topic, deleted on drop.
pub struct BuiltinReader {
    reader: Entity,
    which: Builtin,
    _p: Arc<Participant>,
}

/// Samples taken per call.
const BATCH: usize = 256;

impl BuiltinReader {
    /// A reader of built-in topic `which` under `p` (default QoS).
    pub fn create(p: &Arc<Participant>, which: Builtin) -> Result<BuiltinReader, Failed> {
        let topic = match which {
            Builtin::Participants => DDS_BUILTIN_TOPIC_DCPSPARTICIPANT,
            Builtin::Publications => DDS_BUILTIN_TOPIC_DCPSPUBLICATION,
            Builtin::Subscriptions => DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION,
        };
        // SAFETY: a reader of a built-in topic under our live participant, default QoS.
        let r = unsafe { dds_create_reader(p.handle, topic, std::ptr::null(), std::ptr::null()) };
        if r < 0 {
            return Err(Failed::new("create a built-in topic reader", format!("code {r}")));
        }
        Ok(BuiltinReader { reader: Entity(r), which, _p: p.clone() })
    }

    /// Take every participant announced (a [`Builtin::Participants`] reader): their GUIDs.
    pub fn take_participants(&self, mut f: impl FnMut([u8; 16])) -> Result<(), Failed> {
        if self.which != Builtin::Participants {
            return Err(Failed::new("read the built-in topics", "not a participant reader"));
        }
        // SAFETY: this reader's samples are dds_builtintopic_participant (checked above).
        unsafe { self.take_all::<dds_builtintopic_participant>(|s| f(s.key.v)) }
    }

    /// Take every endpoint announced (a [`Builtin::Publications`] or
    /// [`Builtin::Subscriptions`] reader).
    pub fn take_endpoints(&self, mut f: impl FnMut(BuiltinEndpoint)) -> Result<(), Failed> {
        if self.which == Builtin::Participants {
            return Err(Failed::new("read the built-in topics", "not an endpoint reader"));
        }
        let endpoint = |s: &dds_builtintopic_endpoint| BuiltinEndpoint {
            guid: s.key.v,
            participant: s.participant_key.v,
            topic: cstr(s.topic_name),
            type_name: cstr(s.type_name),
            policies: policies(s.qos),
        };
        // SAFETY: this reader's samples are dds_builtintopic_endpoint (checked above).
        unsafe { self.take_all::<dds_builtintopic_endpoint>(|s| f(endpoint(s))) }
    }

    /// Take every sample, handing each valid one to `f`.
    ///
    /// # Safety
    /// `T` must be the C type of this reader's samples.
    unsafe fn take_all<T>(&self, mut f: impl FnMut(&T)) -> Result<(), Failed> {
        loop {
            let mut bufs: [*mut std::os::raw::c_void; BATCH] = [std::ptr::null_mut(); BATCH];
            // SAFETY: an all-zero sample info is a valid (unread) value of this plain C struct.
            let mut infos: [dds_sample_info_t; BATCH] = unsafe { std::mem::zeroed() };
            // SAFETY: bufs holds BATCH null pointers (Cyclone lends the samples) and infos
            // BATCH entries; the loan is returned below before the next take.
            let n = unsafe {
                dds_take(self.reader.0, bufs.as_mut_ptr(), infos.as_mut_ptr(), BATCH, BATCH as u32)
            };
            if n < 0 {
                return Err(Failed::new("read the built-in topics", format!("code {n}")));
            }
            for i in 0..n as usize {
                if infos[i].valid_data && !bufs[i].is_null() {
                    // SAFETY: a valid sample of this reader is a T (the caller's promise),
                    // lent until dds_return_loan.
                    f(unsafe { &*(bufs[i] as *const T) });
                }
            }
            if n > 0 {
                // SAFETY: returns exactly the loan dds_take made.
                unsafe { dds_return_loan(self.reader.0, bufs.as_mut_ptr(), n) };
            }
            if (n as usize) < BATCH {
                return Ok(());
            }
        }
    }
}

/// The policies of a QoS owned by a lent sample (DDS's defaults where none is set).
fn policies(q: *const dds_qos_t) -> Policies {
    let mut rel: dds_reliability_kind_t = dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT;
    let mut blocking: dds_duration_t = 0;
    let mut dur: dds_durability_kind_t = dds_durability_kind_DDS_DURABILITY_VOLATILE;
    let mut hist: dds_history_kind_t = dds_history_kind_DDS_HISTORY_KEEP_LAST;
    let mut depth: i32 = 1;
    let mut deadline: dds_duration_t = i64::MAX;
    if !q.is_null() {
        // SAFETY: q is a QoS owned by the sample being read (valid until the loan is
        // returned); the out-pointers are locals; an unset policy leaves them untouched.
        unsafe {
            dds_qget_reliability(q, &mut rel, &mut blocking);
            dds_qget_durability(q, &mut dur);
            dds_qget_history(q, &mut hist, &mut depth);
            dds_qget_deadline(q, &mut deadline);
        }
    }
    Policies {
        reliable: rel == dds_reliability_kind_DDS_RELIABILITY_RELIABLE,
        durability: match dur {
            x if x == dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL => {
                Durability::TransientLocal
            }
            x if x == dds_durability_kind_DDS_DURABILITY_TRANSIENT => Durability::Transient,
            x if x == dds_durability_kind_DDS_DURABILITY_PERSISTENT => Durability::Persistent,
            _ => Durability::Volatile,
        },
        keep_all: hist == dds_history_kind_DDS_HISTORY_KEEP_ALL,
        depth,
        // DDS_INFINITY is i64::MAX: no deadline
        deadline_ns: (deadline > 0 && deadline < i64::MAX).then_some(deadline),
    }
}

/// A string owned by a lent sample, copied ("" for none).
fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: a non-null, NUL-terminated string owned by the loaned sample.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}
