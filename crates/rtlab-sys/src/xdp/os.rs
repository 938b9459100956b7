//! The system-call helpers the XDP path shares: errno, owning a descriptor, a device's name,
//! zeroed C structs.

use std::os::fd::{FromRawFd, OwnedFd};

/// The calling thread's errno.
pub(super) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Own a descriptor the kernel just returned.
pub(super) fn owned(fd: i32) -> OwnedFd {
    // SAFETY: fd is a fresh descriptor returned by the kernel that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The device's name for messages.
pub(super) fn dev_name(ifindex: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("ifindex {ifindex}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// An all-zero C struct.
pub(super) fn unsafe_zeroed<T>() -> T {
    // SAFETY: used only for C structs of integers, for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}
