//! roscpp (Debian's ROS 1, libroscpp 1.15) through rtlab's C++ shim (`roscpp/shim.cpp`, its
//! C API in `roscpp/shim.h`): one node in this process with one timer on a callback queue of
//! its own, spun on the calling thread, every callback written into a ring in shared memory
//! (`rtlab timer --mode roscpp*`; rtlab-engines `timer::roscpp` owns the ring and the process).
//!
//! The shim is built by this crate's `build.rs` against Debian's libroscpp-dev when the
//! build machine has it, embedded in the binary and loaded ([`load`]) from memory: the rtlab
//! binary links no roscpp, and runs where ROS 1 is not installed ([`load`] then says what to
//! install, in one line).
//!
//! Contract: [`init`] once per process, then [`timer_open`] once, then [`spin`]; every error
//! is one line. The callback allocates nothing of rtlab's (it writes one sample into the ring
//! and advances an atomic). Never prints (roscpp's console is set to fatal only).

use crate::dl::{Bind, Library};
use rtlab_sys::shared_ring::SharedRing;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// The roscpp version the shim was built against (`1.15.15`; empty: none was built).
pub const BUILT_VERSION: &str = env!("RTLAB_ROSCPP_VERSION");

/// The shim as the build made it (empty: built without roscpp).
static SHIM: &[u8] = include_bytes!(env!("RTLAB_ROSCPP_SHIM"));

/// Which roscpp timer (shim.h's `rros1_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `ros::Timer` on ROS time (CLOCK_REALTIME without a simulated clock).
    Timer = 0,
    /// `ros::WallTimer` (CLOCK_REALTIME).
    Wall = 1,
    /// `ros::SteadyTimer` (CLOCK_MONOTONIC).
    Steady = 2,
    /// S4's one-shot test on a `ros::Timer`.
    Oneshot = 3,
}

type Err = *mut c_char;

struct Api {
    init: unsafe extern "C" fn(*const c_char, u32, Err, usize) -> c_int,
    timer_open: unsafe extern "C" fn(c_int, i64, *mut c_void, Err, usize) -> c_int,
    spin: unsafe extern "C" fn(u64, i64, Err, usize) -> c_int,
    timer_thread: unsafe extern "C" fn() -> i32,
    callbacks: unsafe extern "C" fn() -> u64,
    master: unsafe extern "C" fn(*mut c_char, usize),
    shutdown: unsafe extern "C" fn(),
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

/// Load the shim (once per process). Errors: this rtlab was built without roscpp, or roscpp's
/// libraries are not installed here.
pub fn load() -> Result<(), String> {
    let api = API.get_or_init(|| {
        if SHIM.is_empty() {
            return Err("this rtlab was built without roscpp (its build machine had no libroscpp-dev: scripts/setup.sh installs it)".into());
        }
        let lib = Library::open_bytes("librtlab_roscpp.so", SHIM, Bind::NowLocal).map_err(|e| {
            format!("loading roscpp ({e}): install Debian's libroscpp-dev (ROS 1; scripts/setup.sh does)")
        })?;
        // SAFETY: each type below is the C declaration of the same name in shim.h.
        unsafe {
            Ok(Api {
                init: lib.symbol("rros1_init")?,
                timer_open: lib.symbol("rros1_timer_open")?,
                spin: lib.symbol("rros1_spin")?,
                timer_thread: lib.symbol("rros1_timer_thread")?,
                callbacks: lib.symbol("rros1_callbacks")?,
                master: lib.symbol("rros1_master")?,
                shutdown: lib.symbol("rros1_shutdown")?,
            })
        }
    });
    api.as_ref().map(|_| ()).map_err(Clone::clone)
}

fn api() -> Result<&'static Api, String> {
    match API.get() {
        Some(Ok(a)) => Ok(a),
        Some(Err(e)) => Err(e.clone()),
        None => Err("roscpp's shim is not loaded".into()),
    }
}

/// Call a shim function that fills `err` on failure.
fn checked(f: impl FnOnce(Err, usize) -> c_int) -> Result<(), String> {
    let mut err = [0 as c_char; 512];
    if f(err.as_mut_ptr(), err.len()) == 0 {
        return Ok(());
    }
    // SAFETY: the shim writes a NUL-terminated line of at most err.len() bytes (snprintf).
    Err(unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned())
}

/// `ros::init` as an anonymous node named `name` (no SIGINT handler, no rosout); fails when
/// the master (ROS_MASTER_URI) does not answer within `master_timeout_ms`.
pub fn init(name: &str, master_timeout_ms: u32) -> Result<(), String> {
    let a = api()?;
    let name = CString::new(name).map_err(|_| "a node name with a NUL byte".to_string())?;
    // SAFETY: name is NUL-terminated and outlives the call; err as `checked` says.
    checked(|e, n| unsafe { (a.init)(name.as_ptr(), master_timeout_ms, e, n) })
}

/// The node's timer of `kind` and `period_ns`, writing into `ring` (kept for the process's
/// life: roscpp's callbacks write into it until [`shutdown`]).
pub fn timer_open(kind: Kind, period_ns: i64, ring: &'static SharedRing) -> Result<(), String> {
    let a = api()?;
    // SAFETY: the ring's mapping is a `struct rros1_ring` with its slots (rtlab-sys
    // shared_ring has shim.h's layout) and lives for 'static; err as `checked` says.
    checked(|e, n| unsafe { (a.timer_open)(kind as c_int, period_ns, ring.as_ptr(), e, n) })
}

/// Spin the timer's queue on this thread until the ring's stop flag, `count` callbacks (0: no
/// limit) or `deadline_monotonic_ns` (0: none).
pub fn spin(count: u64, deadline_monotonic_ns: i64) -> Result<(), String> {
    let a = api()?;
    // SAFETY: err as `checked` says; the shim refuses a spin without a timer.
    checked(|e, n| unsafe { (a.spin)(count, deadline_monotonic_ns, e, n) })
}

/// The thread roscpp's timer thread queued callbacks from (None: none seen).
pub fn timer_thread() -> Option<i32> {
    // SAFETY: no arguments; reads an atomic.
    api().ok().map(|a| unsafe { (a.timer_thread)() }).filter(|t| *t != 0)
}

/// The callbacks the timer ran.
pub fn callbacks() -> u64 {
    // SAFETY: no arguments; reads a counter of the spinning thread, which has returned.
    api().ok().map(|a| unsafe { (a.callbacks)() }).unwrap_or(0)
}

/// The master's URI as roscpp read it.
pub fn master() -> String {
    let mut out = [0 as c_char; 512];
    if let Ok(a) = api() {
        // SAFETY: the shim writes at most out.len() bytes, NUL-terminated.
        unsafe { (a.master)(out.as_mut_ptr(), out.len()) };
    }
    // SAFETY: zeroed, or NUL-terminated by the shim.
    unsafe { CStr::from_ptr(out.as_ptr()) }.to_string_lossy().into_owned()
}

/// Stop the timer and shut roscpp down.
pub fn shutdown() {
    if let Ok(a) = api() {
        // SAFETY: no arguments; safe after a failed or no init.
        unsafe { (a.shutdown)() };
    }
}
