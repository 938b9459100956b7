//! The machine this lab runs on, one for the whole process: probes, profiles, journals and
//! the far agent all reach it here.
//!
//! Contract: this room imports nothing of the lab.

use rtlab_host::host::RealHost;

pub use rtlab_host::cpu_list;
pub use rtlab_host::host::Host;

/// This machine's online CPUs, and the kernel's text of them (`0-3`).
pub fn online_cpus() -> (Vec<usize>, String) {
    rtlab_sys::cpus::online_cpus(std::path::Path::new("/"))
}

/// The machine, for every case of the run (profiles borrow it).
pub fn host() -> &'static RealHost {
    static HOST: std::sync::OnceLock<RealHost> = std::sync::OnceLock::new();
    HOST.get_or_init(RealHost::new)
}
