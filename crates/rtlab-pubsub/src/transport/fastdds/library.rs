//! Which Fast DDS the transport runs on (`--fastdds-lib`): Debian's 2.9 or the ROS 2
//! installation's, its shim loaded once per process.

use crate::transport::ros2::install::Installation;
use rtlab_bindings::fastdds as shim;
use serde::{Deserialize, Serialize};

/// What a process holds once the `fastdds` transport is loaded ([`crate::dl::claim_fast_dds`]).
pub const FAST_DDS: &str = "Fast DDS 2.9 (Debian's libfastrtps, the fastdds transport)";

/// Which Fast DDS library the transport runs on (`--fastdds-lib`, scenario key `fastdds_lib`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FastDdsLib {
    /// Debian's Fast DDS 2.9 (libfastrtps), the shim built against it.
    #[default]
    Debian,
    /// The Fast DDS of the ROS 2 installation (the one its rmw_fastrtps_cpp runs on: 3.2.2
    /// in the package registry's ROS 2), the shim built against it at build time: beside
    /// `ros2` the difference is rcl, the RMW and the type support alone.
    Ros2,
}

impl FastDdsLib {
    pub fn parse(s: &str) -> Option<FastDdsLib> {
        match s {
            "debian" => Some(FastDdsLib::Debian),
            "ros2" => Some(FastDdsLib::Ros2),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            FastDdsLib::Debian => "debian",
            FastDdsLib::Ros2 => "ros2",
        }
    }
}

pub use rtlab_bindings::fastdds::{DEBIAN_VERSION, ROS2_BUILT_VERSION};

/// Load the Fast DDS shim for `ros2`'s Fast DDS when given, else Debian's (once per
/// process); the process holds that Fast DDS from then on ([`crate::dl::claim_fast_dds`]).
pub(super) fn load(ros2: Option<&Installation>) -> Result<(), String> {
    let (who, which) = match ros2 {
        None => (FAST_DDS.to_string(), shim::Shim::Debian),
        Some(inst) => (ros2_fast_dds(inst)?, shim::Shim::Ros2),
    };
    crate::dl::claim_fast_dds(&who)?;
    if let Some(inst) = ros2 {
        preload_fast_dds(inst)?;
    }
    shim::load(which)
}

/// The claim of `inst`'s Fast DDS, when the shim of this build fits it (the same major
/// and minor version: one soname, one ABI).
fn ros2_fast_dds(inst: &Installation) -> Result<String, String> {
    let built = ROS2_BUILT_VERSION;
    if !shim::ros2_shim_built() {
        return Err("--fastdds-lib ros2: this rtlab was built without a ROS 2 installation's Fast DDS 3 (scripts/setup.sh installs one; then rebuild)".into());
    }
    let who = inst.fast_dds().ok_or_else(|| {
        format!("--fastdds-lib ros2: {} runs no Fast DDS ({})", inst.rmw, inst.describe())
    })?;
    let have = inst.middleware.as_ref().and_then(|m| m.version.clone()).unwrap_or_default();
    let minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    if minor(&have) != minor(built) {
        return Err(format!(
            "--fastdds-lib ros2: {} has Fast DDS {have}, this rtlab's shim was built against {built}",
            inst.prefix.display()
        ));
    }
    Ok(who)
}

/// Load `inst`'s Fast DDS (its closure, by full path) so that the shim finds it by soname.
fn preload_fast_dds(inst: &Installation) -> Result<(), String> {
    let m = inst.middleware.as_ref().ok_or("no middleware")?;
    let order =
        crate::transport::ros2::elf::closure(std::slice::from_ref(&m.library), &inst.lib_dirs)?;
    for p in &order {
        crate::dl::Library::open(p, crate::dl::Bind::LazyLocal)
            .map_err(|e| format!("loading {}: {e}", p.display()))?;
    }
    Ok(())
}
