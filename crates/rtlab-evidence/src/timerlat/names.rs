//! The kernel's and rtla's names the timerlat files share: where tracefs may be, the
//! instances and osnoise settings rtla writes, and how long it has to stop.

use std::time::Duration;

/// Where the kernel's tracefs may be, in the order rtla's libtracefs looks.
pub const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs instances rtla timerlat top creates: the table's (`timerlat_top`), the saved
/// trace's (`osnoise_trace`, with `-t`/`-a`) and the auto-analysis' (`timerlat_aa`, rtla >= 6.3).
pub const RTLA_INSTANCES: [&str; 3] = ["timerlat_top", "osnoise_trace", "timerlat_aa"];

/// The global osnoise settings rtla timerlat writes (and restores when it ends normally).
pub const OSNOISE_SETTINGS: [&str; 5] =
    ["cpus", "timerlat_period_us", "stop_tracing_us", "stop_tracing_total_us", "print_stack"];

/// How long [`super::TimerlatRun::stop`] lets rtla finish after SIGINT (print, analyse, save the
/// trace, remove its instances) before it kills it.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
