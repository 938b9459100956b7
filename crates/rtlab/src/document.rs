//! The CLI's output files: the result document as JSON, text files written atomically,
//! and the early check that an output can be written (so nothing measured is lost).

use anyhow::Context;
use rtlab_core::schema::ResultDocument;
use std::path::Path;

pub use rtlab_lab::document::write_text;

/// Write `doc` as pretty JSON to `path` (`-` = stdout), atomically for files.
pub fn write_json(doc: &ResultDocument, path: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(doc)? + "\n";
    write_text(&text, path).with_context(|| format!("--json {path}"))
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
