//! What the kernel's own noise tracers (osnoise, hwlat) share around a run: a journaled
//! session, tracefs mounted (journaled) when it is not, everything put back after, and a
//! restore that left changes said on the run's report.

use rtlab_host::host::Host;
use rtlab_host::session::{Action, Session};
use std::path::Path;

/// Run `body` for `--tracer NAME` in a journaled session with tracefs at `dir` (mounted
/// there first when it is not), then restore; `notes` is where the report says a restore
/// that left changes. Err: one line naming what failed.
pub(crate) fn run_journaled<R>(
    host: &dyn Host,
    journal: &Path,
    dir: &str,
    tracer: &str,
    notes: fn(&mut R) -> &mut Vec<String>,
    body: impl FnOnce(&mut Session<'_>) -> Result<R, String>,
) -> Result<R, String> {
    let mut s = Session::begin(host, journal, &format!("rtlab noise --tracer {tracer}"))
        .map_err(|e| format!("--tracer {tracer}: {e}"))?;
    let mounted = if host.exists(&format!("{dir}/available_tracers")) {
        Ok(())
    } else {
        s.apply(&Action::Mount { fstype: "tracefs".into(), target: dir.into() })
            .map(|_| ())
            .map_err(|e| format!("--tracer {tracer}: mounting tracefs: {e}"))
    };
    let result = mounted.and_then(|()| body(&mut s));
    let restored = s.restore();
    let mut report = result?;
    if !restored.is_clean() {
        notes(&mut report).push(format!(
            "tracefs NOT fully restored ({} changes): run `rtlab tune restore`",
            restored.failed.len()
        ));
    }
    Ok(report)
}
