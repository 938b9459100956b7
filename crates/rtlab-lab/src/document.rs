//! Assembling and writing result documents (the schema lives in rtlab-core).

use anyhow::Context;
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

/// Write `doc` as pretty JSON to `path` (`-` = stdout), atomically for files.
pub fn write_json(doc: &ResultDocument, path: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(doc)? + "\n";
    write_text(&text, path).with_context(|| format!("--json {path}"))
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

/// Check early that an output file can be created, so no measurement is lost at the end.
pub fn check_writable(path: &str, flag: &str) -> anyhow::Result<()> {
    if path == "-" {
        return Ok(());
    }
    let p = Path::new(path);
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        anyhow::bail!("{flag} {path}: directory '{}' does not exist", dir.display());
    }
    let probe = dir.join(format!(".rtlab-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("{flag} {path}: cannot write in '{}'", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// The warnings every probe shares: the environment's, the memory lock (`None`: not asked
/// for, `--no-mlockall`) and a measuring thread under SCHED_OTHER.
pub fn process_warnings(
    env: &Environment,
    memory_lock: &Option<Result<(), String>>,
    any_other_policy: bool,
) -> Vec<Warn> {
    let mut w = environment_warnings(env);
    w.retain(|w| !matches!(w, Warn::MemoryNotLocked { .. }));
    match memory_lock {
        Some(Err(why)) => w.push(Warn::MemoryNotLocked { why: why.clone() }),
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
