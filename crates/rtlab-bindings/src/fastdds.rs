//! eProsima Fast DDS through rtlab's C++ shim (`fastdds/shim.cpp`, its C API in
//! `fastdds/shim.h`): participants, writers and readers of one hand-written keyless type
//! whose samples are bytes serialized by the caller (the 4-byte CDR encapsulation header
//! first).
//!
//! The shim is built by this crate's `build.rs` twice: against Debian's Fast DDS 2.9
//! ([`Shim::Debian`]) and, when the build machine has one, against a ROS 2 installation's
//! Fast DDS 3 ([`Shim::Ros2`]). Both are embedded in the binary and loaded ([`load`]) from
//! memory when the first participant is made: the rtlab binary links no Fast DDS. A process
//! holds one Fast DDS ([`crate::dl::claim_fast_dds`], which the caller takes first).
//!
//! Contract: [`Participant::create`] refuses until a shim is loaded; writers and readers keep
//! their participant alive (an `Arc`) and are deleted on drop before it (a writer first
//! waits, at most its drain time, for acknowledgements). Errors are one line. Publishing and
//! taking allocate nothing here (Fast DDS copies a written sample into its own pool). Never
//! prints (the shim removes Fast DDS's log consumers).

use crate::dl::{Bind, Library};
use crate::{EntityQos, Failed};
use std::ffi::{c_char, c_int, CStr, CString};
use std::net::Ipv4Addr;
use std::sync::{Arc, OnceLock};

/// The Fast DDS version of Debian's library the shim was built against (`2.9.1`).
pub const DEBIAN_VERSION: &str = env!("RTLAB_FASTDDS29_VERSION");
/// The Fast DDS 3 version the second shim was built against (empty: none was built).
pub const ROS2_BUILT_VERSION: &str = env!("RTLAB_FASTDDS3_VERSION");

/// The shim (fastdds/shim.cpp) as the build made it, linked against libfastrtps.so.2.9.
static SHIM: &[u8] = include_bytes!(env!("RTLAB_FASTDDS_SHIM"));
/// The same shim built against a ROS 2 installation's Fast DDS 3 (empty: not built).
static SHIM3: &[u8] = include_bytes!(env!("RTLAB_FASTDDS3_SHIM"));

mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    /// shim.h's `fdds_on_data`.
    pub type OnData = unsafe extern "C" fn(arg: *mut c_void, reader: *mut c_void);

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

    /// The shim's functions (shim.h documents each), resolved once from the loaded object.
    pub struct Api {
        pub participant_create:
            unsafe extern "C" fn(*const Net, *mut *mut Participant, *mut c_char, usize) -> c_int,
        pub participant_delete: unsafe extern "C" fn(*mut Participant),
        pub writer_create: unsafe extern "C" fn(
            *mut Participant,
            *const c_char,
            *const c_char,
            *const Qos,
            *mut *mut Writer,
            *mut c_char,
            usize,
        ) -> c_int,
        pub write: unsafe extern "C" fn(*mut Writer, *const u8, usize) -> c_int,
        pub writer_matched: unsafe extern "C" fn(*mut Writer) -> i32,
        pub writer_wait_acked: unsafe extern "C" fn(*mut Writer, i64) -> c_int,
        pub writer_delete: unsafe extern "C" fn(*mut Writer, i64),
        pub reader_create: unsafe extern "C" fn(
            *mut Participant,
            *const c_char,
            *const c_char,
            *const Qos,
            *mut *mut Reader,
            *mut c_char,
            usize,
        ) -> c_int,
        pub reader_create_listened: unsafe extern "C" fn(
            *mut Participant,
            *const c_char,
            *const c_char,
            *const Qos,
            OnData,
            *mut c_void,
            *mut *mut Reader,
            *mut c_char,
            usize,
        ) -> c_int,
        pub take:
            unsafe extern "C" fn(*mut Reader, *mut u8, usize, *mut usize, *mut usize) -> c_int,
        pub take_in_callback:
            unsafe extern "C" fn(*mut c_void, *mut u8, usize, *mut usize, *mut usize) -> c_int,
        pub wait: unsafe extern "C" fn(*mut Reader, i64) -> c_int,
        pub reader_delete: unsafe extern "C" fn(*mut Reader),
    }
}

static API: OnceLock<Result<ffi::Api, String>> = OnceLock::new();

/// Which shim to load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shim {
    /// Built against Debian's Fast DDS 2.9 (libfastrtps).
    Debian,
    /// Built against a ROS 2 installation's Fast DDS 3 ([`ROS2_BUILT_VERSION`]); its Fast DDS
    /// must be loaded first (the shim finds it by soname).
    Ros2,
}

/// Whether this build has the shim for a ROS 2 installation's Fast DDS 3.
pub fn ros2_shim_built() -> bool {
    !SHIM3.is_empty() && !ROS2_BUILT_VERSION.is_empty()
}

/// Load the shim `shim` names (and with it its Fast DDS), once per process; later calls say
/// how the first went. The caller has claimed the process's Fast DDS
/// ([`crate::dl::claim_fast_dds`]), which keeps a second shim out.
pub fn load(shim: Shim) -> Result<(), String> {
    let api = API.get_or_init(|| {
        let (bytes, name) = match shim {
            Shim::Debian => (SHIM, "librtlab_fastdds29.so"),
            Shim::Ros2 => (SHIM3, "librtlab_fastdds3.so"),
        };
        let lib = Library::open_bytes(name, bytes, Bind::NowLocal).map_err(|e| match shim {
            Shim::Debian => format!("loading Fast DDS 2.9 ({e}): install Debian's libfastrtps2.9 and libfastcdr1 (scripts/setup.sh does)"),
            Shim::Ros2 => format!("loading the Fast DDS 3 shim: {e}"),
        })?;
        // SAFETY: each type below is the C declaration of the same name in shim.h.
        unsafe {
            Ok(ffi::Api {
                participant_create: lib.symbol("fdds_participant_create")?,
                participant_delete: lib.symbol("fdds_participant_delete")?,
                writer_create: lib.symbol("fdds_writer_create")?,
                write: lib.symbol("fdds_write")?,
                writer_matched: lib.symbol("fdds_writer_matched")?,
                writer_wait_acked: lib.symbol("fdds_writer_wait_acked")?,
                writer_delete: lib.symbol("fdds_writer_delete")?,
                reader_create: lib.symbol("fdds_reader_create")?,
                reader_create_listened: lib.symbol("fdds_reader_create_listened")?,
                take: lib.symbol("fdds_take")?,
                take_in_callback: lib.symbol("fdds_take_in_callback")?,
                wait: lib.symbol("fdds_wait")?,
                reader_delete: lib.symbol("fdds_reader_delete")?,
            })
        }
        // `lib` is never unloaded (dl's contract): the handle is simply not kept
    });
    api.as_ref().map(|_| ()).map_err(Clone::clone)
}

/// The loaded shim's functions. Every handle comes from a participant, made only once
/// [`load`] succeeded, so a handle's existence proves this is `Some`.
fn api() -> &'static ffi::Api {
    match API.get() {
        Some(Ok(a)) => a,
        _ => unreachable!("the Fast DDS shim is loaded before any participant exists"),
    }
}

/// The shim's error line from its buffer (`what` when it wrote none).
fn shim_err(what: &'static str, err: &[c_char]) -> Failed {
    // SAFETY: the buffer is NUL-terminated: zeroed before the call, and the shim writes with
    // snprintf (always terminated, never past its length).
    let why = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
    Failed::new(what, if why.is_empty() { "failed".into() } else { why })
}

/// What a participant is told about the network (shim.h's `fdds_net`).
#[derive(Clone, Debug)]
pub struct Net<'a> {
    pub domain: u32,
    /// IPv4 addresses UDPv4 may use (none: every interface).
    pub whitelist: &'a [Ipv4Addr],
    /// Unicast discovery peers: address and port (0: the ports of participant ids
    /// 0..`max_initial_peers`); none: multicast discovery.
    pub peers: &'a [(Ipv4Addr, u16)],
    pub max_initial_peers: u32,
    /// Fast DDS's shared-memory transport on, and its segment in bytes (0: its default).
    pub shm: bool,
    pub shm_segment: u32,
    /// SO_RCVBUF / SO_SNDBUF asked for (0: the system's default).
    pub receive_buffer: u32,
    pub send_buffer: u32,
}

/// A DomainParticipant, deleted on drop (after every writer and reader: they hold an `Arc`).
#[derive(Debug)]
pub struct Participant {
    handle: *mut ffi::Participant,
}

// SAFETY: a Fast DDS DomainParticipant may be used from any thread (Fast DDS locks inside;
// the shim's topic table has its own mutex); the pointer is only freed in Drop.
unsafe impl Send for Participant {}
// SAFETY: as above: every shim call on a participant is thread-safe.
unsafe impl Sync for Participant {}

impl Participant {
    /// A participant on `net` (Fast DDS starts its threads in this call). Errors: the shim
    /// not loaded, Fast DDS refusing (its line).
    pub fn create(net: &Net) -> Result<Participant, Failed> {
        const WHAT: &str = "create participant";
        if !matches!(API.get(), Some(Ok(_))) {
            return Err(Failed::new(WHAT, "the Fast DDS shim is not loaded"));
        }
        let c = |a: &Ipv4Addr| CString::new(a.to_string()).expect("no NUL in an IPv4 address");
        let white: Vec<CString> = net.whitelist.iter().map(c).collect();
        let white_ptrs: Vec<*const c_char> = white.iter().map(|c| c.as_ptr()).collect();
        let peer_strs: Vec<CString> = net.peers.iter().map(|(a, _)| c(a)).collect();
        let peers: Vec<ffi::Peer> = net
            .peers
            .iter()
            .zip(&peer_strs)
            .map(|((_, port), s)| ffi::Peer { address: s.as_ptr(), port: *port })
            .collect();
        let n = ffi::Net {
            domain: net.domain,
            whitelist: white_ptrs.as_ptr(),
            n_whitelist: white_ptrs.len(),
            peers: peers.as_ptr(),
            n_peers: peers.len(),
            max_initial_peers: net.max_initial_peers,
            shm: c_int::from(net.shm),
            shm_segment: net.shm_segment,
            receive_buffer: net.receive_buffer,
            send_buffer: net.send_buffer,
        };
        let mut err = [0 as c_char; 256];
        let mut h: *mut ffi::Participant = std::ptr::null_mut();
        // SAFETY: the shim is loaded (checked above); `n` and everything it points to (white,
        // peer_strs, peers) live across the call; the shim copies what it keeps; h and err
        // are valid out-buffers (err's length passed).
        let rc = unsafe { (api().participant_create)(&n, &mut h, err.as_mut_ptr(), err.len()) };
        if rc != 0 || h.is_null() {
            return Err(shim_err(WHAT, &err));
        }
        Ok(Participant { handle: h })
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: made by fdds_participant_create, deleted once; writers and readers hold an
        // Arc to us, so none is left.
        unsafe { (api().participant_delete)(self.handle) };
    }
}

fn native_qos(q: &EntityQos) -> ffi::Qos {
    ffi::Qos {
        reliable: c_int::from(q.reliable),
        keep_all: c_int::from(q.keep_last.is_none()),
        depth: q.keep_last.map_or(0, |n| n.min(i32::MAX as u32) as i32),
        transient_local: c_int::from(q.transient_local),
    }
}

/// A DataWriter (and its share of the topic), deleted on drop.
#[derive(Debug)]
pub struct Writer {
    _p: Arc<Participant>,
    w: *mut ffi::Writer,
    drain_ns: i64,
}

// SAFETY: a Fast DDS DataWriter may be used from any thread; the pointer is freed only in
// Drop, and the calls made through &self (write, matched, wait for acknowledgements) are
// thread-safe in Fast DDS (the DataWriter locks inside).
unsafe impl Send for Writer {}

impl Writer {
    /// A writer on DDS topic `topic` of type `type_name` (the shim's keyless byte type); when
    /// deleted it waits at most `drain_ns` for acknowledgements (reliable).
    pub fn create(
        p: &Arc<Participant>,
        topic: &CStr,
        type_name: &CStr,
        qos: &EntityQos,
        drain_ns: i64,
    ) -> Result<Writer, Failed> {
        let q = native_qos(qos);
        let mut err = [0 as c_char; 256];
        let mut w: *mut ffi::Writer = std::ptr::null_mut();
        // SAFETY: live participant (we hold it); strings, QoS and out-buffers valid for the call.
        let rc = unsafe {
            (api().writer_create)(
                p.handle,
                topic.as_ptr(),
                type_name.as_ptr(),
                &q,
                &mut w,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rc != 0 || w.is_null() {
            return Err(shim_err("create writer", &err));
        }
        Ok(Writer { _p: p.clone(), w, drain_ns })
    }

    /// Write one serialized sample (Fast DDS copies it).
    #[inline]
    pub fn write(&mut self, sample: &[u8]) -> Result<(), Failed> {
        // SAFETY: live writer; sample is valid for the call (Fast DDS copies it).
        if unsafe { (api().write)(self.w, sample.as_ptr(), sample.len()) } != 0 {
            return Err(Failed::new("write", "DataWriter::write refused the sample"));
        }
        Ok(())
    }

    /// Readers matched now (the publication-matched status' `current_count`).
    pub fn matched(&self) -> i32 {
        // SAFETY: live writer.
        unsafe { (api().writer_matched)(self.w) }
    }

    /// `DataWriter::wait_for_acknowledgments` for at most `timeout_ns`: Some(true) when every
    /// matched reliable reader acknowledged everything, Some(false) at the timeout, None on
    /// an error.
    pub fn wait_acknowledged(&self, timeout_ns: i64) -> Option<bool> {
        // SAFETY: live writer.
        match unsafe { (api().writer_wait_acked)(self.w, timeout_ns.max(0)) } {
            1 => Some(true),
            0 => Some(false),
            _ => None,
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // SAFETY: made by fdds_writer_create, deleted once (the participant outlives it: Arc).
        unsafe { (api().writer_delete)(self.w, self.drain_ns) };
    }
}

/// What a take found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// A sample with data: its serialized size, and the bytes copied into the buffer.
    Sample { size: usize, copied: usize },
    /// A sample without data (a dispose or unregister).
    NoData,
    /// Nothing to take.
    Nothing,
}

/// A DataReader (and its share of the topic), deleted on drop.
#[derive(Debug)]
pub struct Reader {
    _p: Arc<Participant>,
    r: *mut ffi::Reader,
}

// SAFETY: as Writer: the pointer is freed only in Drop; take and wait need &mut self, so
// one thread at a time uses it.
unsafe impl Send for Reader {}

impl Reader {
    /// A reader on DDS topic `topic` of type `type_name` (the shim's keyless byte type).
    pub fn create(
        p: &Arc<Participant>,
        topic: &CStr,
        type_name: &CStr,
        qos: &EntityQos,
    ) -> Result<Reader, Failed> {
        let q = native_qos(qos);
        let mut err = [0 as c_char; 256];
        let mut r: *mut ffi::Reader = std::ptr::null_mut();
        // SAFETY: live participant; strings, QoS and out-buffers valid for the call.
        let rc = unsafe {
            (api().reader_create)(
                p.handle,
                topic.as_ptr(),
                type_name.as_ptr(),
                &q,
                &mut r,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rc != 0 || r.is_null() {
            return Err(shim_err("create reader", &err));
        }
        Ok(Reader { _p: p.clone(), r })
    }

    /// Take the next sample, copying at most `buf.len()` of its first bytes into `buf`.
    /// Never blocks.
    #[inline]
    pub fn take(&mut self, buf: &mut [u8]) -> Result<Taken, Failed> {
        let (mut size, mut copied) = (0usize, 0usize);
        // SAFETY: live reader; buf is a buffer of the length passed; size/copied are locals.
        let rc =
            unsafe { (api().take)(self.r, buf.as_mut_ptr(), buf.len(), &mut size, &mut copied) };
        taken(rc, size, copied, buf.len())
    }

    /// Wait at most `timeout_ns` for an unread sample (`wait_for_unread_message`): whether
    /// there is one.
    pub fn wait(&mut self, timeout_ns: i64) -> bool {
        // SAFETY: live reader.
        unsafe { (api().wait)(self.r, timeout_ns.max(0)) == 1 }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: made by fdds_reader_create, deleted once.
        unsafe { (api().reader_delete)(self.r) };
    }
}

/// What the shim's take said (`rc`, with the sizes it wrote), for a buffer of `cap` bytes.
fn taken(rc: c_int, size: usize, copied: usize, cap: usize) -> Result<Taken, Failed> {
    match rc {
        1 => Ok(Taken::Sample { size, copied: copied.min(cap) }),
        2 => Ok(Taken::NoData),
        0 => Ok(Taken::Nothing),
        _ => Err(Failed::new("take", "DataReader::take_next_sample failed")),
    }
}

/// The DataReader a data-available callback runs for: take from it there.
pub struct Taker(*mut std::ffi::c_void);

impl Taker {
    /// [`Reader::take`], from inside the callback.
    #[inline]
    pub fn take(&self, buf: &mut [u8]) -> Result<Taken, Failed> {
        let (mut size, mut copied) = (0usize, 0usize);
        // SAFETY: the DataReader Fast DDS named for this call (valid during it); buf is a
        // buffer of the length passed; size/copied are locals.
        let rc = unsafe {
            (api().take_in_callback)(self.0, buf.as_mut_ptr(), buf.len(), &mut size, &mut copied)
        };
        taken(rc, size, copied, buf.len())
    }
}

/// What a [`ListenedReader`] calls when data is available, in Fast DDS's receive thread.
pub type OnData = Box<dyn Fn(&Taker) + Send + Sync>;

/// A DataReader whose listener calls an [`OnData`], deleted on drop: the shim waits for a
/// running call and lets no later one through before the reader goes, so the closure
/// outlives every call. Fast DDS may run calls of one reader concurrently (from its UDP and
/// shared-memory receive threads): the closure must allow it.
pub struct ListenedReader {
    // deleted first (fields drop in declaration order), then the closure it calls
    _r: Reader,
    _on_data: Box<OnData>,
}

unsafe extern "C" fn data_available(arg: *mut std::ffi::c_void, reader: *mut std::ffi::c_void) {
    // SAFETY: arg is the `Box<OnData>` of the ListenedReader whose listener calls this; it
    // lives until after the reader is deleted, which waits for a running call.
    let f = unsafe { &*(arg as *const OnData) };
    f(&Taker(reader));
}

impl ListenedReader {
    /// A reader on DDS topic `topic` of type `type_name` whose data-available listener calls
    /// `on_data`.
    pub fn create(
        p: &Arc<Participant>,
        topic: &CStr,
        type_name: &CStr,
        qos: &EntityQos,
        on_data: OnData,
    ) -> Result<ListenedReader, Failed> {
        let on_data = Box::new(on_data);
        let arg = &*on_data as *const OnData as *mut std::ffi::c_void;
        let q = native_qos(qos);
        let mut err = [0 as c_char; 256];
        let mut r: *mut ffi::Reader = std::ptr::null_mut();
        // SAFETY: live participant; strings, QoS and out-buffers valid for the call; arg
        // stays valid as long as the reader (see `data_available`).
        let rc = unsafe {
            (api().reader_create_listened)(
                p.handle,
                topic.as_ptr(),
                type_name.as_ptr(),
                &q,
                data_available,
                arg,
                &mut r,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rc != 0 || r.is_null() {
            return Err(shim_err("create reader", &err));
        }
        Ok(ListenedReader { _r: Reader { _p: p.clone(), r }, _on_data: on_data })
    }
}

// SAFETY: as Reader; the closure is Send + Sync.
unsafe impl Send for ListenedReader {}
