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
//! Contract: [`init`] once per process, then [`timer_open`] once, then [`spin`]; or
//! [`Publisher`]s and [`Subscriber`]s of `std_msgs/UInt8MultiArray` (rtlab-pubsub's `ros1`
//! transport). Every error is one line. The callback allocates nothing of rtlab's (it writes one sample into the ring
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
    init:
        unsafe extern "C" fn(*const c_char, *const c_char, *const c_char, u32, Err, usize) -> c_int,
    master_ok: unsafe extern "C" fn() -> c_int,
    pub_create: unsafe extern "C" fn(*const c_char, u32, c_int, Err, usize) -> *mut c_void,
    publish: unsafe extern "C" fn(*mut c_void, *const u8, usize, Err, usize) -> c_int,
    pub_subscribers: unsafe extern "C" fn(*mut c_void) -> u32,
    pub_sent: unsafe extern "C" fn(*mut c_void) -> i64,
    pub_delete: unsafe extern "C" fn(*mut c_void),
    sub_create: unsafe extern "C" fn(*const c_char, u32, c_int, c_int, Err, usize) -> *mut c_void,
    take: unsafe extern "C" fn(*mut c_void, *mut u8, usize, i64, Err, usize) -> i64,
    sub_publishers: unsafe extern "C" fn(*mut c_void) -> u32,
    sub_delete: unsafe extern "C" fn(*mut c_void),
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
                master_ok: lib.symbol("rros1_master_ok")?,
                pub_create: lib.symbol("rros1_pub_create")?,
                publish: lib.symbol("rros1_publish")?,
                pub_subscribers: lib.symbol("rros1_pub_subscribers")?,
                pub_sent: lib.symbol("rros1_pub_sent")?,
                pub_delete: lib.symbol("rros1_pub_delete")?,
                sub_create: lib.symbol("rros1_sub_create")?,
                take: lib.symbol("rros1_take")?,
                sub_publishers: lib.symbol("rros1_sub_publishers")?,
                sub_delete: lib.symbol("rros1_sub_delete")?,
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

/// `ros::init` as an anonymous node named `name` (no SIGINT handler, no rosout), once per
/// process, on the master `master` (None: ROS_MASTER_URI) with this node's address `ip` (None:
/// ROS_IP or the host name); fails when the master does not answer within
/// `master_timeout_ms`.
pub fn init(
    name: &str,
    master: Option<&str>,
    ip: Option<&str>,
    master_timeout_ms: u32,
) -> Result<(), String> {
    let a = api()?;
    let c = |s: &str| CString::new(s).map_err(|_| format!("{s:?}: a NUL byte"));
    let name = c(name)?;
    let master = master.map(c).transpose()?;
    let ip = ip.map(c).transpose()?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every string is NUL-terminated (or NULL where the shim takes NULL) and
    // outlives the call; err as `checked` says.
    checked(|e, n| unsafe {
        (a.init)(name.as_ptr(), ptr(&master), ptr(&ip), master_timeout_ms, e, n)
    })
}

/// Whether the master answers now.
pub fn master_ok() -> bool {
    // SAFETY: no arguments; false before init.
    api().is_ok_and(|a| unsafe { (a.master_ok)() } != 0)
}

/// Call a shim function that returns a handle (NULL with `err` filled on failure).
fn made(f: impl FnOnce(Err, usize) -> *mut c_void) -> Result<*mut c_void, String> {
    let mut err = [0 as c_char; 512];
    let h = f(err.as_mut_ptr(), err.len());
    if h.is_null() {
        // SAFETY: the shim wrote a NUL-terminated line (snprintf) before returning NULL.
        return Err(unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned());
    }
    Ok(h)
}

/// A publisher of `std_msgs/UInt8MultiArray` on this process's node (after [`init`]).
pub struct Publisher(*mut c_void);
// SAFETY: a roscpp Publisher may be used from any thread; this handle is used by one at a
// time (&mut self) and deleted once.
unsafe impl Send for Publisher {}

impl Publisher {
    /// Advertise `topic` with roscpp's queue of `queue` (0: unbounded), latched or not.
    pub fn new(topic: &str, queue: u32, latch: bool) -> Result<Publisher, String> {
        let a = api()?;
        let topic = CString::new(topic).map_err(|_| "a topic with a NUL byte".to_string())?;
        // SAFETY: topic is NUL-terminated and outlives the call; err as `made` says.
        made(|e, n| unsafe { (a.pub_create)(topic.as_ptr(), queue, c_int::from(latch), e, n) })
            .map(Publisher)
    }
    /// Publish `data` as the message's `data`.
    pub fn publish(&mut self, data: &[u8]) -> Result<(), String> {
        let a = api()?;
        // SAFETY: a live handle; data is valid for its length during the call.
        checked(|e, n| unsafe { (a.publish)(self.0, data.as_ptr(), data.len(), e, n) })
    }
    /// The fewest messages roscpp has written to any subscriber's link (None: no link).
    pub fn sent(&self) -> Option<u64> {
        // SAFETY: a live handle.
        let n = api().map_or(-1, |a| unsafe { (a.pub_sent)(self.0) });
        u64::try_from(n).ok()
    }
    /// The subscribers connected now.
    pub fn subscribers(&self) -> u32 {
        // SAFETY: a live handle (the API exists: it made it).
        api().map_or(0, |a| unsafe { (a.pub_subscribers)(self.0) })
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            // SAFETY: a live handle, deleted once.
            unsafe { (a.pub_delete)(self.0) };
        }
    }
}

/// A subscriber of `std_msgs/UInt8MultiArray` with a callback queue of its own.
pub struct Subscriber(*mut c_void);
// SAFETY: its queue is spun by whichever thread holds it (&mut self), one at a time.
unsafe impl Send for Subscriber {}

impl Subscriber {
    /// Subscribe to `topic` with roscpp's queue of `queue` (0: unbounded); over UDPROS
    /// (`udp`) or TCPROS, with TCP_NODELAY or not.
    pub fn new(
        topic: &str,
        queue: u32,
        tcp_nodelay: bool,
        udp: bool,
    ) -> Result<Subscriber, String> {
        let a = api()?;
        let topic = CString::new(topic).map_err(|_| "a topic with a NUL byte".to_string())?;
        // SAFETY: topic is NUL-terminated and outlives the call; err as `made` says.
        made(|e, n| unsafe {
            (a.sub_create)(topic.as_ptr(), queue, c_int::from(tcp_nodelay), c_int::from(udp), e, n)
        })
        .map(Subscriber)
    }
    /// The next message's length (its first `buf.len()` bytes copied into `buf`), waiting at
    /// most `timeout_ns`; None when none came.
    pub fn take(&mut self, buf: &mut [u8], timeout_ns: i64) -> Result<Option<usize>, String> {
        let a = api()?;
        let mut err = [0 as c_char; 512];
        // SAFETY: a live handle; buf is valid for writes of its length; err as `checked`.
        let n = unsafe {
            (a.take)(self.0, buf.as_mut_ptr(), buf.len(), timeout_ns, err.as_mut_ptr(), err.len())
        };
        match n {
            n if n > 0 => Ok(Some(n as usize)),
            0 => Ok(None),
            // SAFETY: the shim wrote a NUL-terminated line before returning -1.
            _ => Err(unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned()),
        }
    }
    /// The publishers connected now.
    pub fn publishers(&self) -> u32 {
        // SAFETY: a live handle.
        api().map_or(0, |a| unsafe { (a.sub_publishers)(self.0) })
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if let Ok(a) = api() {
            // SAFETY: a live handle, deleted once.
            unsafe { (a.sub_delete)(self.0) };
        }
    }
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

/// A ROS master: the user's (`ROS_MASTER_URI`), or Debian's `rosmaster --core` started here
/// on a port free on loopback, listening on every address, and stopped on drop. Its
/// `ROS_HOME` (where it writes its log) is a directory of its own, removed as soon as it
/// answers: its open log lives on unlinked, and nothing is left behind even when it is never
/// dropped ([`shared_master`]).
pub struct Master {
    pub uri: String,
    child: Option<std::process::Child>,
    /// The variables a node of this master needs (ROS_MASTER_URI, and ROS_IP for one
    /// started here: loopback).
    pub env: Vec<(String, String)>,
}

impl Master {
    /// The user's master, or one started here (it answers before this returns).
    pub fn start() -> Result<Master, String> {
        use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
        use std::process::{Command, Stdio};
        use std::time::{Duration, Instant};
        if let Ok(uri) = std::env::var("ROS_MASTER_URI") {
            return Ok(Master { uri, child: None, env: Vec::new() });
        }
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port for the ROS master: {e}"))?
            .port();
        let home = std::env::temp_dir().join(format!("rtlab-ros1-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        let mut cmd = Command::new("rosmaster");
        // neither ROS_IP nor ROS_HOSTNAME: it listens on every address of its namespace (a
        // far node reaches it on the link), whatever the caller's environment says
        cmd.args(["--core", "-p", &port.to_string(), "-w", "1"])
            .env("ROS_HOME", &home)
            .env_remove("ROS_IP")
            .env_remove("ROS_HOSTNAME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // a group of its own: the terminal's Ctrl-C stops rtlab, which stops the master
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        rtlab_sys::process::die_with_parent(&mut cmd);
        let spawned = cmd.spawn();
        let gone = |why: String| {
            let _ = std::fs::remove_dir_all(&home);
            why
        };
        let mut child = spawned.map_err(|e| {
            gone(format!("rosmaster: {e} (Debian's python3-rosmaster is ROS 1's master: scripts/setup.sh installs it)"))
        })?;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
                return Err(gone(format!(
                    "rosmaster on port {port} ended ({status}) before it answered: {last}"
                )));
            }
            if Instant::now() >= until {
                let _ = child.kill();
                let _ = child.wait();
                return Err(gone(format!("rosmaster on port {port} did not answer within 15 s")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&home);
        let uri = format!("http://127.0.0.1:{port}/");
        let mut env = vec![("ROS_MASTER_URI".to_string(), uri.clone())];
        if std::env::var_os("ROS_IP").is_none() && std::env::var_os("ROS_HOSTNAME").is_none() {
            env.push(("ROS_IP".into(), "127.0.0.1".into()));
        }
        Ok(Master { uri, child: Some(child), env })
    }

    /// Whether rtlab started this master (else it is the user's).
    pub fn ours(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = rtlab_sys::tasks::kill_pid(c.id() as i32, libc::SIGTERM);
            rtlab_sys::process::wait_or_kill(&mut c, std::time::Duration::from_secs(5));
        }
    }
}

/// This process's master for its in-process node (a process has one roscpp node, on one
/// master): the user's, or one started on a thread of its own that lives as long as the
/// process, so that the master, started with the parent-death signal, ends with rtlab.
pub fn shared_master() -> Result<(String, Option<String>), String> {
    static SHARED: OnceLock<Result<(String, bool), String>> = OnceLock::new();
    let got = SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("rtlab-rosmaster".into()).spawn(move || {
            match Master::start() {
                Ok(m) => {
                    let _ = tx.send(Ok((m.uri.clone(), m.ours())));
                    // keep the master (and this thread, its parent) for the process's life
                    loop {
                        std::thread::park();
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
        spawned.map_err(|e| format!("starting the ROS master's thread: {e}"))?;
        rx.recv().map_err(|_| "the ROS master's thread ended".to_string())?
    });
    got.clone().map(|(uri, ours)| (uri, ours.then(|| "127.0.0.1".to_string())))
}
