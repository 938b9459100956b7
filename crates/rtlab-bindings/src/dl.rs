//! Shared libraries loaded at run time (`dlopen`): the Fast DDS shim this crate embeds
//! ([`crate::fastdds`]), and the libraries of a ROS 2 installation (rcl, its RMW, its type
//! support: rtlab-pubsub's `ros2`). Neither is linked into the rtlab binary, which therefore
//! runs where neither is installed; a transport that needs one says which file it could not
//! load, in one line.
//!
//! Contract: a library loaded here stays loaded for the life of the process (never
//! `dlclose`d: middleware libraries start threads and register static destructors that do
//! not survive an unload). [`claim_fast_dds`] keeps two Fast DDS versions out of one
//! process: Debian's 2.9 (`fastdds`) and a ROS 2 RMW's own (3.2 in the package registry's
//! ROS 2, 2.6 in Humble) export the same C++ symbols, and the one loaded first would answer
//! the other's calls (tried here: a crash in Fast CDR on the first publish).
//! Nothing here prints.

use std::ffi::{c_void, CStr, CString};
use std::path::Path;
use std::sync::Mutex;

/// A library loaded for the life of the process.
#[derive(Debug)]
pub struct Library {
    handle: *mut c_void,
    /// Where it came from (a path, or the embedded object's name).
    pub origin: String,
}

// SAFETY: a dlopen handle is a process-wide token; dlsym on it is thread-safe (glibc).
unsafe impl Send for Library {}
// SAFETY: as above; the handle is never written after creation.
unsafe impl Sync for Library {}

/// `dlopen` modes used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// Every symbol resolved now, visible to this library and its dependencies only.
    NowLocal,
    /// Functions resolved at their first call (libraries whose unused functions name
    /// symbols nobody provides: the ROS 2 wheels' Python bindings), visible to no one else.
    LazyLocal,
    /// Lazy and visible to every library loaded later (libpython for those bindings).
    LazyGlobal,
}

impl Bind {
    fn flags(self) -> libc::c_int {
        match self {
            Bind::NowLocal => libc::RTLD_NOW | libc::RTLD_LOCAL,
            Bind::LazyLocal => libc::RTLD_LAZY | libc::RTLD_LOCAL,
            Bind::LazyGlobal => libc::RTLD_LAZY | libc::RTLD_GLOBAL,
        }
    }
}

/// The loader's last error, in its words.
fn last_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
    // of this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Library {
    /// Load the file at `path` (its dependencies by the loader's usual search, or by soname
    /// when a library of that soname is already loaded).
    pub fn open(path: &Path, bind: Bind) -> Result<Library, String> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("{}: a path with a NUL byte", path.display()))?;
        // SAFETY: a NUL-terminated path; loading runs the library's initialisers, which is
        // what loading it is for (the callers load only the libraries they name).
        let handle = unsafe { libc::dlopen(c.as_ptr(), bind.flags()) };
        if handle.is_null() {
            return Err(last_error());
        }
        Ok(Library { handle, origin: path.display().to_string() })
    }

    /// Load a shared object held in memory (embedded in the binary): written to an
    /// anonymous file (`memfd_create`, never on disk) and loaded from `/proc/self/fd`.
    pub fn open_bytes(name: &str, bytes: &[u8], bind: Bind) -> Result<Library, String> {
        let cname = CString::new(name).map_err(|_| format!("{name}: a name with a NUL byte"))?;
        // SAFETY: a NUL-terminated name; the returned descriptor is owned below.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor this function owns from here on.
        let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        std::io::Write::write_all(&mut &file, bytes).map_err(|e| format!("writing {name}: {e}"))?;
        let mut lib = Library::open(Path::new(&format!("/proc/self/fd/{fd}")), bind)?;
        lib.origin = name.to_string();
        // the mapping outlives the descriptor: `file` closes it here
        drop(file);
        Ok(lib)
    }

    /// The address of `name` in this library (or its dependencies).
    ///
    /// # Safety
    /// `T` must be the exact C type of the symbol (a function pointer type matching its C
    /// declaration, or a pointer to data of its type).
    pub(crate) unsafe fn symbol<T: Copy>(&self, name: &str) -> Result<T, String> {
        assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
        let c = CString::new(name).map_err(|_| format!("{name}: a name with a NUL byte"))?;
        // clear a stale error, so that a NULL symbol is told from a failed lookup
        // SAFETY: dlerror only reads and resets this thread's error state.
        let _ = unsafe { libc::dlerror() };
        // SAFETY: the handle is this library's (open until drop); c is a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, c.as_ptr()) };
        if p.is_null() {
            return Err(format!("{name} not found in {} ({})", self.origin, last_error()));
        }
        // SAFETY: same size (asserted); the caller guarantees T is the symbol's type.
        Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
    }
}

/// The Fast DDS this process holds, once one is loaded (see the module's contract).
static FAST_DDS: Mutex<Option<String>> = Mutex::new(None);

/// Take this process's one Fast DDS for `who` (e.g. "Fast DDS 2.9 (the fastdds transport)").
/// The same `who` again is fine; another is refused with a line naming both.
pub fn claim_fast_dds(who: &str) -> Result<(), String> {
    let mut held = FAST_DDS.lock().unwrap_or_else(|e| e.into_inner());
    match held.as_deref() {
        None => {
            *held = Some(who.to_string());
            Ok(())
        }
        Some(h) if h == who => Ok(()),
        Some(h) => Err(format!(
            "this process already holds {h}; {who} cannot be loaded beside it (two Fast DDS versions export the same symbols and would call into each other): run them in separate processes (another transport on the far side is a process of its own)"
        )),
    }
}

/// Which Fast DDS this process holds, if any.
pub fn fast_dds_held() -> Option<String> {
    FAST_DDS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_a_line_naming_the_file() {
        let e = Library::open(Path::new("/nonexistent/librtlab_nothing.so"), Bind::NowLocal)
            .unwrap_err();
        assert!(e.contains("/nonexistent/librtlab_nothing.so"), "{e}");
    }

    #[test]
    fn libc_symbols_resolve_and_unknown_ones_are_named() {
        let lib = Library::open(Path::new("libc.so.6"), Bind::NowLocal).unwrap();
        // SAFETY: getpid's C type.
        let getpid: extern "C" fn() -> libc::pid_t = unsafe { lib.symbol("getpid") }.unwrap();
        assert_eq!(getpid() as u32, std::process::id());
        // SAFETY: never called.
        let e = unsafe { lib.symbol::<extern "C" fn()>("rtlab_no_such_symbol") }.unwrap_err();
        assert!(e.contains("rtlab_no_such_symbol"), "{e}");
    }

    #[test]
    fn an_embedded_object_that_is_not_elf_is_refused_with_its_name() {
        let e = Library::open_bytes("rtlab-test-object", b"not an ELF file", Bind::NowLocal)
            .unwrap_err();
        assert!(!e.is_empty());
    }
}
