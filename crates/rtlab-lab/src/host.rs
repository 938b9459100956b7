//! The machine this lab runs on, one for the whole process: probes, profiles, journals and
//! the far agent all reach it here.
//!
//! Contract: this room imports nothing of the lab.

use rtlab_host::host::RealHost;

/// The machine, for every case of the run (profiles borrow it).
pub fn host() -> &'static RealHost {
    static HOST: std::sync::OnceLock<RealHost> = std::sync::OnceLock::new();
    HOST.get_or_init(RealHost::new)
}
