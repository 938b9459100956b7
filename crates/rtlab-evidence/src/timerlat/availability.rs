//! Whether `rtla timerlat top` can run here: the timerlat tracer in tracefs, rtla on PATH
//! and its version; [`Availability::missing`] says in one sentence what is missing.

use super::names::TRACEFS_DIRS;
use rtlab_host::host::Host;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::{Command, Stdio};

/// Whether `rtla timerlat` can run on this machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Availability {
    /// `timerlat` is listed in `<tracefs>/available_tracers`.
    pub tracer: bool,
    /// The rtla program found on PATH.
    pub rtla: Option<String>,
    /// Its version (`rtla --version`: "6.1").
    pub rtla_version: Option<String>,
    /// The tracefs directory whose `available_tracers` was read.
    #[serde(default)]
    pub tracefs: Option<String>,
    /// Why `available_tracers` could not be read, when it exists but is unreadable.
    #[serde(default)]
    pub read_error: Option<String>,
}

impl Availability {
    /// One sentence naming exactly what is missing and how to get it; None if rtla timerlat
    /// can run.
    pub fn missing(&self) -> Option<String> {
        let mut parts = Vec::new();
        match (&self.tracefs, &self.read_error) {
            (None, _) => parts.push(
                "tracefs is not mounted (no /sys/kernel/tracing/available_tracers: `mount -t tracefs nodev /sys/kernel/tracing`, on a kernel with CONFIG_FTRACE)"
                    .to_string(),
            ),
            (Some(dir), Some(e)) => parts.push(format!("{dir}/available_tracers cannot be read ({e}): rtla timerlat needs root")),
            (Some(dir), None) if !self.tracer => parts.push(format!(
                "this kernel has no timerlat tracer ({dir}/available_tracers lacks `timerlat`: it needs a kernel built with CONFIG_TIMERLAT_TRACER=y)"
            )),
            _ => {}
        }
        if self.rtla.is_none() {
            parts
                .push("rtla is not installed (Debian package `rtla`: apt-get install rtla)".into());
        }
        if parts.is_empty() {
            None
        } else {
            Some(format!("rtla timerlat cannot run: {}", parts.join(", and ")))
        }
    }
}

/// Look for the timerlat tracer under `host` and for rtla on PATH.
pub fn detect(host: &dyn Host) -> Availability {
    let rtla = rtlab_load::which("rtla");
    let version = rtla.as_deref().and_then(rtla_version);
    detect_with(host, rtla.map(|p| p.display().to_string()), version)
}

/// [`detect`] with the rtla lookup given (tests, fake roots).
pub fn detect_with(
    host: &dyn Host,
    rtla: Option<String>,
    rtla_version: Option<String>,
) -> Availability {
    let mut a = Availability { rtla, rtla_version, ..Availability::default() };
    let Some(dir) = tracefs_dir(host) else { return a };
    match host.read(&format!("{dir}/available_tracers")) {
        Ok(t) => a.tracer = t.split_whitespace().any(|w| w == "timerlat"),
        Err(e) => a.read_error = Some(e.to_string()),
    }
    a.tracefs = Some(dir);
    a
}

/// The tracefs directory (kernel path) that has `available_tracers` (also when it cannot
/// be looked into: tracefs is mode 700, so a user who is not root gets EACCES, not ENOENT).
pub fn tracefs_dir(host: &dyn Host) -> Option<String> {
    TRACEFS_DIRS
        .iter()
        .find(|d| match std::fs::metadata(host.path(&format!("{d}/available_tracers"))) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
        })
        .map(|d| d.to_string())
}

/// `rtla --version` prints "rtla version 6.1" (with its usage, to stderr, exit 1 in 6.1).
fn rtla_version(rtla: &Path) -> Option<String> {
    let out = Command::new(rtla).arg("--version").stdin(Stdio::null()).output().ok()?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    parse_version(&text)
}

fn parse_version(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        while let Some(x) = w.next() {
            if x == "version" {
                return w
                    .next()
                    .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
                    .map(String::from);
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fake_tracefs;

    #[test]
    fn detect_on_a_fake_root_with_and_without_timerlat() {
        let d = tempfile::tempdir().unwrap();
        let host = rtlab_host::host::FakeHost::new(d.path());
        // no tracefs at all
        let a = detect_with(&host, None, None);
        assert_eq!((a.tracer, a.tracefs.as_deref()), (false, None));
        let m = a.missing().unwrap();
        assert!(m.contains("tracefs is not mounted") && m.contains("Debian package `rtla`"), "{m}");
        // this machine's kernel: no timerlat
        rtlab_host::testing::put(
            d.path(),
            "sys/kernel/tracing/available_tracers",
            "blk function nop\n",
        );
        let a = detect_with(&host, Some("/usr/bin/rtla".into()), Some("6.1".into()));
        assert!(!a.tracer);
        assert_eq!(a.tracefs.as_deref(), Some("/sys/kernel/tracing"));
        let m = a.missing().unwrap();
        assert_eq!(
            m,
            "rtla timerlat cannot run: this kernel has no timerlat tracer (/sys/kernel/tracing/available_tracers lacks `timerlat`: it needs a kernel built with CONFIG_TIMERLAT_TRACER=y)"
        );
        assert!(!m.contains('\n'));
        let a = detect_with(&host, None, None);
        assert!(a
            .missing()
            .unwrap()
            .contains(", and rtla is not installed (Debian package `rtla`: apt-get install rtla)"));
        // a kernel with timerlat
        fake_tracefs(d.path(), "timerlat osnoise hwlat blk function nop\n");
        let a = detect_with(&host, Some("/usr/bin/rtla".into()), Some("6.1".into()));
        assert!(a.tracer);
        assert_eq!(a.missing(), None);
        let a = detect_with(&host, None, None);
        assert_eq!(a.missing().unwrap(), "rtla timerlat cannot run: rtla is not installed (Debian package `rtla`: apt-get install rtla)");
        // the debugfs location
        let d2 = tempfile::tempdir().unwrap();
        rtlab_host::testing::put(
            d2.path(),
            "sys/kernel/debug/tracing/available_tracers",
            "timerlat nop\n",
        );
        let a = detect_with(&rtlab_host::host::FakeHost::new(d2.path()), Some("rtla".into()), None);
        assert_eq!((a.tracer, a.tracefs.as_deref()), (true, Some("/sys/kernel/debug/tracing")));
    }

    #[test]
    fn the_version_is_read_from_rtlas_usage() {
        assert_eq!(
            parse_version("\nrtla version 6.1\n\n  usage: rtla COMMAND ...\n"),
            Some("6.1".into())
        );
        assert_eq!(parse_version("usage: no version here\n"), None);
    }
}
