//! A check's verdict ([`Status`], [`Check`]) and the reads the checks share: the kernel
//! command line, the isolated CPUs, a file trimmed, the running tasks.

use rtlab_host::host::Host;
use serde::Serialize;

/// The verdict of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    /// Facts that are neither good nor bad (or could not be read).
    Info,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Info => "info",
        }
    }
}

/// One line of the check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    pub found: String,
    /// What to do (empty when nothing is to be done).
    pub remedy: String,
}

pub(super) fn c(
    id: &'static str,
    title: &'static str,
    status: Status,
    found: impl Into<String>,
    remedy: impl Into<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        found: found.into(),
        remedy: if status == Status::Pass { String::new() } else { remedy.into() },
    }
}

pub(super) fn cmdline_value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

pub(super) type Env = rtlab_core::schema::Environment;

/// The CPUs set apart for real-time work: isolcpus and nohz_full together.
pub(super) fn isolated_cpus(env: &rtlab_core::schema::Environment) -> Vec<usize> {
    let mut v = rtlab_sys::cpus::parse_cpu_list(&env.isolcpus).unwrap_or_default();
    if let Some(n) = env.nohz_full.as_deref().filter(|n| *n != "(null)") {
        v.extend(rtlab_sys::cpus::parse_cpu_list(n).unwrap_or_default());
    }
    v.sort_unstable();
    v.dedup();
    v
}

pub(super) fn read_trim(host: &dyn Host, p: &str) -> Option<String> {
    host.read(p).ok().map(|s| s.trim().to_string())
}

/// The comm of every process (from /proc/<pid>/comm under the root).
pub fn running_comms(host: &dyn Host) -> Vec<String> {
    rtlab_host::host::tasks(host).into_iter().map(|(_, c)| c).collect()
}

/// (pass, warn, fail) counts.
pub fn counts(checks: &[Check]) -> (usize, usize, usize) {
    let n = |s| checks.iter().filter(|c| c.status == s).count();
    (n(Status::Pass), n(Status::Warn), n(Status::Fail))
}
