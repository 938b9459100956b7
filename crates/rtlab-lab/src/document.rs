//! Assembling and writing result documents (the schema lives in rtlab-core).

use rtlab_core::schema::{Environment, ResultDocument, Stream, ToolInfo, Warning, SCHEMA_VERSION};
use rtlab_core::warnings::{environment_warnings, Warn};
use std::io::Write;
use std::path::Path;

pub fn new_document(
    probe: &str,
    started: std::time::SystemTime,
    environment: Environment,
    config: serde_json::Value,
) -> ResultDocument {
    ResultDocument {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo { name: "rtlab".into(), version: env!("CARGO_PKG_VERSION").into() },
        command_line: std::env::args().collect(),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        duration_ns: 0,
        interrupted: false,
        probe: probe.into(),
        environment,
        config,
        streams: Vec::<Stream>::new(),
        warnings: Vec::<Warning>::new(),
        evidence: None,
    }
}

/// Write text to a file atomically (temp + rename), or to stdout for `-`.
pub fn write_text(text: &str, path: &str) -> std::io::Result<()> {
    if path == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        return out.flush();
    }
    let p = Path::new(path);
    let tmp =
        p.with_extension(format!("{}.tmp", p.extension().and_then(|e| e.to_str()).unwrap_or("")));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, p)
}

/// The warnings every probe shares: the environment's, the memory lock (`None`: not asked
/// for: `--no-mlockall`, or a profile that turns it off on purpose, which is no warning)
/// and a measuring thread under SCHED_OTHER.
pub fn process_warnings(
    env: &Environment,
    memory_lock: &Option<Result<(), String>>,
    any_other_policy: bool,
    mlockall_off_by_profile: bool,
) -> Vec<Warn> {
    let mut w = environment_warnings(env);
    w.retain(|w| !matches!(w, Warn::MemoryNotLocked { .. }));
    match memory_lock {
        Some(Err(why)) => w.push(Warn::MemoryNotLocked { why: why.clone() }),
        None if mlockall_off_by_profile => {}
        None => w.push(Warn::MemoryNotLocked { why: "--no-mlockall".into() }),
        Some(Ok(())) => {}
    }
    if any_other_policy {
        w.push(if rtlab_sys::sched::may_use_realtime() {
            Warn::NotRealtimePolicy
        } else {
            Warn::NoRtPrivilege
        });
    }
    w
}
