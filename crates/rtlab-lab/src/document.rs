//! Assembling and writing result documents (the schema lives in rtlab-core).

use rtlab_core::schema::{Environment, ResultDocument, Stream, ToolInfo, Warning, SCHEMA_VERSION};
use rtlab_core::warnings::{environment_warnings, Warn, MIN_SAMPLES_FOR_TAIL};
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
        command_line: rtlab_store::url::redact_args(std::env::args()),
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        duration_ns: 0,
        interrupted: false,
        probe: probe.into(),
        environment,
        config,
        streams: Vec::<Stream>::new(),
        warnings: Vec::<Warning>::new(),
        evidence: None,
        far: None,
        cost: None,
    }
}

/// Write text to a file atomically (temp + rename), or to stdout for `-`. A path that is
/// not a regular file (`/dev/null`, a FIFO, `/dev/stdout`) is written in place: renaming
/// over it would replace the device with a file.
pub fn write_text(text: &str, path: &str) -> std::io::Result<()> {
    if path == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        return out.flush();
    }
    let p = Path::new(path);
    if std::fs::metadata(p).is_ok_and(|m| !m.is_file()) {
        let mut f = std::fs::OpenOptions::new().write(true).open(p)?;
        return f.write_all(text.as_bytes());
    }
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

/// What every probe run reports in the same way.
pub struct RunFacts<'a> {
    /// Ok, or why mlockall failed (None: not asked).
    pub memory_lock: &'a Option<Result<(), String>>,
    pub any_other_policy: bool,
    pub mlockall_off_by_profile: bool,
    /// Why /dev/cpu_dma_latency could not be held, when it was asked for.
    pub cpu_dma_latency_error: Option<&'a str>,
    /// Samples of the stream that has the fewest.
    pub fewest_samples: u64,
    pub interrupted: bool,
}

/// What every engine says of its process: how long it ran, whether it was cut short, the
/// memory lock and the PM QoS hold it asked for (each None: not asked).
pub struct EngineRun<'a> {
    pub duration_ns: i64,
    pub interrupted: bool,
    pub memory_lock: &'a Option<Result<(), String>>,
    pub cpu_dma_latency: &'a Option<Result<i32, String>>,
}

impl<'a> EngineRun<'a> {
    pub fn of(
        duration_ns: i64,
        interrupted: bool,
        memory_lock: &'a Option<Result<(), String>>,
        cpu_dma_latency: &'a Option<Result<i32, String>>,
    ) -> Self {
        EngineRun { duration_ns, interrupted, memory_lock, cpu_dma_latency }
    }

    /// The probe's document of this run: its configuration and streams, the environment's
    /// memory lock and PM QoS hold as the run had them.
    pub fn document(
        &self,
        probe: &str,
        started: std::time::SystemTime,
        env: Environment,
        config: serde_json::Value,
        streams: Vec<Stream>,
    ) -> ResultDocument {
        let mut doc = new_document(probe, started, env, config);
        doc.duration_ns = self.duration_ns;
        doc.interrupted = self.interrupted;
        doc.environment.memory_locked = matches!(self.memory_lock, Some(Ok(())));
        doc.environment.cpu_dma_latency_us =
            self.cpu_dma_latency.as_ref().and_then(|r| r.as_ref().ok().copied());
        doc.streams = streams;
        doc
    }

    /// The facts [`run_warnings`] reads: this run's, and the probe's (a thread not at a
    /// real-time policy, the memory lock turned off by the profile, the fewest samples of a
    /// stream).
    pub fn facts(
        &self,
        any_other_policy: bool,
        mlockall_off_by_profile: bool,
        fewest_samples: u64,
    ) -> RunFacts<'a> {
        RunFacts {
            memory_lock: self.memory_lock,
            any_other_policy,
            mlockall_off_by_profile,
            cpu_dma_latency_error: match self.cpu_dma_latency {
                Some(Err(why)) => Some(why.as_str()),
                _ => None,
            },
            fewest_samples,
            interrupted: self.interrupted,
        }
    }
}

/// The warnings of a probe run, in one order for every probe: the process's, the PM QoS
/// hold, a run too short for its tail, the probe's own (`extra`), the interruption.
pub fn run_warnings(env: &Environment, f: &RunFacts<'_>, extra: Vec<Warn>) -> Vec<Warning> {
    let mut w = process_warnings(env, f.memory_lock, f.any_other_policy, f.mlockall_off_by_profile);
    if let Some(why) = f.cpu_dma_latency_error {
        w.push(Warn::CpuDmaLatencyUnavailable { why: why.to_string() });
    }
    if f.fewest_samples < MIN_SAMPLES_FOR_TAIL {
        w.push(Warn::RunTooShort { samples: f.fewest_samples, wanted: MIN_SAMPLES_FOR_TAIL });
    }
    w.extend(extra);
    if f.interrupted {
        w.push(Warn::Interrupted);
    }
    with_machine_state(w.iter().map(|w| w.to_warning()).collect())
}

/// `warnings` and, when a dead rtlab's journal is still in force on this machine, a warning
/// saying so: the result records the state the machine was measured in.
pub fn with_machine_state(mut warnings: Vec<Warning>) -> Vec<Warning> {
    if let Some(message) = crate::guard::stale_journal_warning() {
        warnings.push(Warning { code: "stale-journal".into(), message });
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mlock_warned(lock: Option<Result<(), String>>, off_by_profile: bool) -> bool {
        let env = Environment::default();
        process_warnings(&env, &lock, false, off_by_profile)
            .iter()
            .any(|w| matches!(w, Warn::MemoryNotLocked { .. }))
    }

    #[test]
    fn a_device_is_written_in_place_never_replaced() {
        use std::os::unix::fs::FileTypeExt;
        write_text("{}\n", "/dev/null").unwrap();
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.json");
        write_text("a", f.to_str().unwrap()).unwrap();
        write_text("b", f.to_str().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "b");
    }

    #[test]
    fn a_profile_that_turns_mlockall_off_is_not_warned_of() {
        assert!(!mlock_warned(None, true), "no-rt turns it off on purpose");
        assert!(mlock_warned(None, false), "--no-mlockall is said");
        assert!(mlock_warned(Some(Err("EPERM".into())), true), "a failed lock is always said");
        assert!(!mlock_warned(Some(Ok(())), false));
    }
}
