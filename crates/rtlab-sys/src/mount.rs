//! Mounting a filesystem (tracefs, where the kernel has not: the spike tracer's session)
//! and unmounting it again.
//!
//! Contract: thin, checked wrappers; errors carry the path and the errno. Nothing here keeps
//! state: rtlab-tune's journal records a mount before it is made. (mount(2), umount(2))

use crate::SysError;
use std::ffi::CString;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Mount a filesystem of type `fstype` (e.g. tracefs) on `target`.
pub fn mount_fs(fstype: &str, target: &str) -> Result<(), SysError> {
    let src = CString::new(fstype).map_err(|_| SysError::os("mount: NUL in type", libc::EINVAL))?;
    let tgt =
        CString::new(target).map_err(|_| SysError::os("mount: NUL in target", libc::EINVAL))?;
    // SAFETY: all strings are NUL-terminated and outlive the call; data is null.
    if unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), src.as_ptr(), 0, std::ptr::null()) } < 0 {
        return Err(SysError::os(format!("mount -t {fstype} {target}"), errno()));
    }
    Ok(())
}

/// Unmount `target`.
pub fn umount_fs(target: &str) -> Result<(), SysError> {
    let tgt =
        CString::new(target).map_err(|_| SysError::os("umount: NUL in target", libc::EINVAL))?;
    // SAFETY: tgt is NUL-terminated and outlives the call.
    if unsafe { libc::umount(tgt.as_ptr()) } < 0 {
        return Err(SysError::os(format!("umount {target}"), errno()));
    }
    Ok(())
}
