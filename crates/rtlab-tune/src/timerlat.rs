//! rtla timerlat as a companion of a run: the kernel's own split of a wake-up latency into
//! its IRQ part and its thread part, per CPU, and (rtla >= 6.3) its auto-analysis of the
//! sample that crossed a threshold ("IRQ handler delay", "Blocking thread", ...).
//!
//! Contract: [`detect`] says whether `rtla timerlat top` can run here and
//! [`Availability::missing`] names, in one sentence, what is missing and how to get it;
//! [`start`] refuses with that sentence instead of letting rtla fail half-way. [`command`] is
//! pure and only uses options that rtla 6.1 (Debian 12, package `rtla`) accepts and later
//! versions still accept. rtla changes tracefs itself (a tracefs instance `timerlat_top`,
//! plus `osnoise_trace` with a trace file and `timerlat_aa` for the auto-analysis of rtla >=
//! 6.3, and the global `osnoise/` settings) and undoes all of it when it ends (duration over,
//! threshold hit, or SIGINT); killed with SIGKILL it leaves them, and the instance keeps the
//! timerlat threads (FIFO 95) firing. [`leftover_cleanup_action`] is the journal entry that
//! puts tracefs back in that case (`rtlab tune restore`). This module never prints, and the
//! rtla it starts always has a duration, so it ends on its own even if rtlab is killed.
//!
//! Sources: Documentation/trace/timerlat-tracer.rst, Documentation/trace/osnoise-tracer.rst,
//! Documentation/tools/rtla/rtla-timerlat-top.rst, tools/tracing/rtla/src/{timerlat_top.c,
//! osnoise.c,trace.c,utils.c} (torvalds/linux).

use crate::host::Host;
use crate::session::Action;
use crate::spike::TraceError;
use rtlab_core::error::Missing;
use serde::{Deserialize, Serialize};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the kernel's tracefs may be, in the order rtla's libtracefs looks.
pub const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs instances rtla timerlat top creates: the table's (`timerlat_top`), the saved
/// trace's (`osnoise_trace`, with `-t`/`-a`) and the auto-analysis' (`timerlat_aa`, rtla >= 6.3).
pub const RTLA_INSTANCES: [&str; 3] = ["timerlat_top", "osnoise_trace", "timerlat_aa"];

/// The global osnoise settings rtla timerlat writes (and restores when it ends normally).
pub const OSNOISE_SETTINGS: [&str; 5] =
    ["cpus", "timerlat_period_us", "stop_tracing_us", "stop_tracing_total_us", "print_stack"];

/// How long [`TimerlatRun::stop`] lets rtla finish after SIGINT (print, analyse, save the
/// trace, remove its instances) before it kills it.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

// ------------------------------------------------------------------ availability

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
    let rtla = crate::load::which("rtla");
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

// ------------------------------------------------------------------ the command

/// What the companion `rtla timerlat top` measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerlatConfig {
    /// CPUs timerlat runs on (its threads and timers); empty: all.
    pub cpus: Vec<usize>,
    /// Stop (and, from rtla 6.3, analyse) when a latency reaches this many us; 0: never stop.
    pub threshold_us: u64,
    /// FIFO priority of timerlat's threads (1-99); None: the tracer's default, FIFO 95.
    pub priority: Option<i32>,
    /// Period of timerlat's timer in us (100 us to 1 s); 0: the tracer's default, 1000.
    pub period_us: u64,
    /// How long rtla runs at most (whole seconds, rounded up); it also ends on SIGINT.
    pub duration: Duration,
    /// Where rtla saves the trace it stopped (only written when the threshold is hit).
    pub trace_file: Option<PathBuf>,
}

impl Default for TimerlatConfig {
    fn default() -> Self {
        TimerlatConfig {
            cpus: Vec::new(),
            threshold_us: 0,
            priority: None,
            period_us: 0,
            duration: Duration::from_secs(30),
            trace_file: None,
        }
    }
}

/// Check the values rtla and the tracer would refuse. Err names the field and what is accepted.
pub fn validate(cfg: &TimerlatConfig) -> Result<(), TraceError> {
    if let Some(p) = cfg.priority {
        if !(1..=99).contains(&p) {
            return Err(TraceError::Invalid(format!(
                "timerlat priority {p}: timerlat's threads take a FIFO priority of 1 to 99"
            )));
        }
    }
    if cfg.period_us != 0 && !(100..=1_000_000).contains(&cfg.period_us) {
        return Err(TraceError::Invalid(format!(
            "timerlat period {} us: the tracer accepts 100 us to 1 s (1000000 us)",
            cfg.period_us
        )));
    }
    if cfg.duration.is_zero() {
        return Err(TraceError::Invalid(
            "timerlat duration 0: give rtla a duration (it must end on its own if rtlab is killed)"
                .into(),
        ));
    }
    Ok(())
}

/// The argv of `rtla timerlat top` for `cfg` (pure). Options, all accepted by rtla 6.1:
/// `-q` (print the table once, at the end), `-n` (nanoseconds), `-d SECONDS`, `-p US`,
/// `-c LIST`, `-P f:PRIO`, `-a US` (stop at the threshold: thread and, from 6.3, IRQ latency;
/// save the stack at the IRQ; save the trace; from 6.3 print the auto-analysis) and
/// `-t=FILE` after `-a` (6.1's `-a` resets the file to timerlat_trace.txt, and 6.1 strips
/// the first character of a `--trace=` or `-t` argument, which must therefore be `=FILE`).
pub fn command(cfg: &TimerlatConfig) -> Vec<String> {
    let mut v: Vec<String> =
        ["rtla", "timerlat", "top", "-q", "-n"].iter().map(|s| s.to_string()).collect();
    let secs = (cfg.duration.as_secs() + u64::from(cfg.duration.subsec_nanos() > 0)).max(1);
    v.extend(["-d".to_string(), secs.to_string()]);
    if cfg.period_us > 0 {
        v.extend(["-p".to_string(), cfg.period_us.to_string()]);
    }
    if !cfg.cpus.is_empty() {
        v.extend(["-c".to_string(), crate::cpu_list(&cfg.cpus)]);
    }
    if let Some(p) = cfg.priority {
        v.extend(["-P".to_string(), format!("f:{p}")]);
    }
    if cfg.threshold_us > 0 {
        v.extend(["-a".to_string(), cfg.threshold_us.to_string()]);
        if let Some(f) = &cfg.trace_file {
            v.push(format!("-t={}", f.display()));
        }
    }
    v
}

// ------------------------------------------------------------------ leftovers

/// The journal entry to apply (through a [`crate::session::Session`]) before [`start`]: its
/// `did` does nothing; its `undo` (run by the session's restore, or by `rtlab tune restore`
/// after a kill -9) sets `nop` on and removes rtla's instances that are still there and writes
/// back the osnoise settings read now (and the OSNOISE_WORKLOAD option where the kernel has
/// `osnoise/options`). When rtla ended normally it has done all this itself and the undo only
/// rewrites the same values. None when this kernel has no timerlat (rtla changes nothing then).
/// An undo while an rtla still runs (rtlab killed, rtla not yet at its duration) stops its
/// tracer; removing the instance then fails (EBUSY) and the journal keeps the entry for a
/// second `rtlab tune restore`.
pub fn leftover_cleanup_action(host: &dyn Host) -> Option<Action> {
    let dir = tracefs_dir(host)?;
    if !detect_with(host, None, None).tracer {
        return None;
    }
    let real = host.path(&dir).display().to_string();
    let mut script = vec!["set -e".to_string(), format!("T={}", sh_quote(&real))];
    script.push(format!(
        "for i in {}; do d=\"$T/instances/$i\"; if [ -d \"$d\" ]; then echo nop > \"$d/current_tracer\"; rmdir \"$d\"; fi; done",
        RTLA_INSTANCES.join(" ")
    ));
    for s in OSNOISE_SETTINGS {
        let Ok(v) = host.read(&format!("{dir}/osnoise/{s}")) else { continue };
        let v = v.trim();
        if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || ",-_".contains(c)) {
            script.push(format!("echo {v} > \"$T/osnoise/{s}\""));
        }
    }
    if let Ok(opts) = host.read(&format!("{dir}/osnoise/options")) {
        let words: Vec<&str> = opts.split_whitespace().collect();
        if words.contains(&"NO_OSNOISE_WORKLOAD") {
            script.push("echo NO_OSNOISE_WORKLOAD > \"$T/osnoise/options\"".into());
        } else if words.contains(&"OSNOISE_WORKLOAD") {
            script.push("echo OSNOISE_WORKLOAD > \"$T/osnoise/options\"".into());
        }
    }
    Some(Action::Command {
        did: vec!["sh".into(), "-c".into(), ": rtla timerlat top starts: its tracefs instances and osnoise settings are put back on restore".into()],
        undo: vec!["sh".into(), "-c".into(), script.join("\n")],
    })
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

// ------------------------------------------------------------------ the run

/// A running `rtla timerlat top`; dropping it stops it like [`TimerlatRun::stop`].
pub struct TimerlatRun {
    child: Option<Child>,
    dir: PathBuf,
    argv: Vec<String>,
}

/// Start `rtla timerlat top` for `cfg`, its stdout captured to a temporary file. Err (one
/// line) when rtla cannot run here ([`Availability::missing`]), when `cfg` is refused,
/// when an instance of rtla is already in tracefs, or when rtla exits at once.
pub fn start(cfg: &TimerlatConfig) -> Result<TimerlatRun, TraceError> {
    validate(cfg)?;
    let host = crate::host::RealHost::new();
    let a = detect(&host);
    if let Some(m) = a.missing() {
        return Err(Missing {
            need: rtlab_core::error::Need::Tool { program: "rtla".into(), package: "rtla".into() },
            what: m,
            fix: "see the line before; on Debian: apt-get install rtla, and a kernel with CONFIG_TIMERLAT_TRACER".into(),
        }
        .into());
    }
    let dir = a.tracefs.as_deref().unwrap_or(TRACEFS_DIRS[0]);
    if let Some(i) =
        RTLA_INSTANCES.iter().map(|i| format!("{dir}/instances/{i}")).find(|p| host.exists(p))
    {
        return Err(TraceError::Failed(format!(
            "tracefs instance {i} exists: another rtla timerlat runs, or one was killed and left it (`rtlab tune restore` if rtlab journaled it, else `echo nop > {i}/current_tracer; rmdir {i}`)"
        )));
    }
    let mut cfg = cfg.clone();
    if let Some(f) = cfg.trace_file.as_mut().filter(|f| f.is_relative()) {
        // rtla runs in a temporary directory
        *f = std::env::current_dir()
            .map_err(|e| TraceError::Io { what: "the current directory".into(), source: e })?
            .join(&*f);
    }
    let mut argv = command(&cfg);
    argv[0] = a.rtla.clone().unwrap_or_else(|| "rtla".into());
    launch(argv, Duration::from_millis(300))
}

/// Spawn `argv` (an rtla command line) in a fresh temporary directory with stdout and stderr
/// captured there; Err if it is gone within `settle`.
fn launch(argv: Vec<String>, settle: Duration) -> Result<TimerlatRun, TraceError> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rtlab-timerlat-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| TraceError::Io { what: format!("creating {}", dir.display()), source: e })?;
    let file = |name: &str| {
        std::fs::File::create(dir.join(name)).map_err(|e| TraceError::Io {
            what: format!("creating {}", dir.join(name).display()),
            source: e,
        })
    };
    let (out, err) = (file("stdout")?, file("stderr")?);
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // its own group: a Ctrl-C meant for rtlab reaches rtla only through stop()
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(TraceError::Io { what: format!("starting {}", argv[0]), source: e });
        }
    };
    let end = Instant::now() + settle;
    while Instant::now() < end {
        if let Ok(Some(st)) = child.try_wait() {
            let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
            return Err(TraceError::Failed(format!(
                "`{}` exited at once ({st}): {}",
                argv.join(" "),
                last_line(&stderr)
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(TimerlatRun { child: Some(child), dir, argv })
}

fn last_line(text: &str) -> String {
    text.lines()
        .rfind(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| "no message".into())
}

impl TimerlatRun {
    /// The argv that runs.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The pid of rtla.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// True while rtla runs (it ends on its own at its duration or at the threshold).
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Stop rtla (SIGINT, [`STOP_GRACE`] to finish, then SIGKILL) and parse what it printed.
    pub fn stop(self) -> TimerlatReport {
        self.stop_within(STOP_GRACE)
    }

    /// [`TimerlatRun::stop`] with another grace.
    pub fn stop_within(mut self, grace: Duration) -> TimerlatReport {
        let (status, killed) = self.end(grace);
        let raw = std::fs::read_to_string(self.dir.join("stdout")).unwrap_or_default();
        let stderr = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
        let mut report = parse_top(&raw);
        if killed {
            report.error = Some(format!(
                "rtla did not end within {} ms of SIGINT and was killed: its tracefs instances may be left (`rtlab tune restore` removes them when journaled)",
                grace.as_millis()
            ));
        } else if let Some(st) =
            status.filter(|s| !s.success() && (s.code() != Some(2) || !report.stopped_by_threshold))
        {
            // newer rtla exits 2 when the threshold stopped the trace: a result, not a failure
            report.error =
                Some(format!("`{}` failed ({st}): {}", self.argv.join(" "), last_line(&stderr)));
        }
        report
    }

    /// SIGINT, wait up to `grace`, SIGKILL; (exit status, killed).
    fn end(&mut self, grace: Duration) -> (Option<std::process::ExitStatus>, bool) {
        let Some(mut c) = self.child.take() else { return (None, false) };
        if let Ok(Some(st)) = c.try_wait() {
            return (Some(st), false);
        }
        let _ = rtlab_sys::tune_sys::kill_pid(c.id() as i32, 2);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Ok(Some(st)) = c.try_wait() {
                return (Some(st), false);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        (c.wait().ok(), true)
    }
}

impl Drop for TimerlatRun {
    fn drop(&mut self) {
        self.end(STOP_GRACE);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ------------------------------------------------------------------ the report

/// One CPU's row of the table (all values in ns; None where rtla printed `-`: no sample).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerlatCpu {
    pub cpu: usize,
    /// Timer IRQs seen (the `#COUNT` column).
    pub count: u64,
    pub irq_min_ns: Option<u64>,
    pub irq_avg_ns: Option<u64>,
    pub irq_max_ns: Option<u64>,
    pub thread_min_ns: Option<u64>,
    pub thread_avg_ns: Option<u64>,
    pub thread_max_ns: Option<u64>,
    /// "Ret user" columns: only with the user-space threads of newer rtla (`-u`, its default where the kernel has them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_avg_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_max_ns: Option<u64>,
}

/// What `rtla timerlat top` printed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimerlatReport {
    /// The last table printed, one row per CPU.
    pub per_cpu: Vec<TimerlatCpu>,
    /// The auto-analysis block (rtla >= 6.3, when the threshold was hit), line by line.
    pub analysis: Vec<String>,
    /// rtla said "hit stop tracing": a latency reached the threshold.
    pub stopped_by_threshold: bool,
    /// The trace file rtla said it saved.
    #[serde(default)]
    pub trace_file: Option<String>,
    /// Why the run went wrong (rtla failed or had to be killed), one line.
    #[serde(default)]
    pub error: Option<String>,
    /// Everything rtla printed on stdout.
    pub raw: String,
}

impl TimerlatReport {
    /// The CPU with the largest thread latency, and that latency.
    pub fn worst_thread(&self) -> Option<(usize, u64)> {
        self.per_cpu.iter().filter_map(|c| Some((c.cpu, c.thread_max_ns?))).max_by_key(|c| c.1)
    }
}

/// Drop terminal escapes (`ESC c`, `ESC [ ... m`) that rtla prints on a terminal.
fn strip_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // ESC [ ... letter, or a two-character escape such as ESC c
        if it.next() == Some('[') {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

/// Four columns `cur min avg max`; `-` is no sample.
fn block(text: &str, scale: u64) -> Option<[Option<u64>; 4]> {
    let w: Vec<&str> = text.split_whitespace().take(4).collect();
    if w.len() < 4 {
        return None;
    }
    let mut v = [None; 4];
    for (i, x) in w.iter().enumerate() {
        v[i] = match *x {
            "-" => None,
            n => Some(n.parse::<u64>().ok()?.saturating_mul(scale)),
        };
    }
    Some(v)
}

/// Parse the output of `rtla timerlat top` (any version from 6.1; the table in us or, with
/// `-n`, ns). The last table printed wins (without `-q` rtla reprints it every second).
pub fn parse_top(text: &str) -> TimerlatReport {
    let clean = strip_escapes(text);
    let mut r = TimerlatReport { raw: text.to_string(), ..TimerlatReport::default() };
    let mut scale = 1000;
    let mut in_analysis = false;
    for line in clean.lines() {
        let t = line.trim();
        if let Some(rest) =
            t.strip_prefix("Saving trace to ").or_else(|| t.strip_prefix("saving trace to "))
        {
            r.trace_file = Some(rest.trim().to_string());
            continue;
        }
        if t.starts_with("## CPU") {
            in_analysis = true;
        } else if t.contains("hit stop tracing") {
            r.stopped_by_threshold = true;
            continue;
        }
        if in_analysis || t.starts_with("Max timerlat IRQ latency from idle") {
            if !t.is_empty() {
                r.analysis.push(line.trim_end().to_string());
            }
            continue;
        }
        if t.contains("IRQ Timer Latency (") {
            scale = if t.contains("Latency (ns)") { 1 } else { 1000 };
            continue;
        }
        if t.starts_with("CPU COUNT") {
            r.per_cpu.clear();
            continue;
        }
        let parts: Vec<&str> = t.split('|').collect();
        if parts.len() < 3 {
            continue;
        }
        let Some((cpu, count)) = parts[0].trim().split_once(" #") else { continue };
        let (Ok(cpu), Ok(count)) = (cpu.trim().parse::<usize>(), count.trim().parse::<u64>())
        else {
            continue;
        };
        let (Some(irq), Some(thread)) = (block(parts[1], scale), block(parts[2], scale)) else {
            continue;
        };
        let user = parts.get(3).and_then(|p| block(p, scale));
        r.per_cpu.push(TimerlatCpu {
            cpu,
            count,
            irq_min_ns: irq[1],
            irq_avg_ns: irq[2],
            irq_max_ns: irq[3],
            thread_min_ns: thread[1],
            thread_avg_ns: thread[2],
            thread_max_ns: thread[3],
            user_avg_ns: user.and_then(|u| u[2]),
            user_max_ns: user.and_then(|u| u[3]),
        });
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TimerlatConfig {
        TimerlatConfig { duration: Duration::from_secs(30), ..TimerlatConfig::default() }
    }

    #[test]
    fn the_command_for_several_configs() {
        assert_eq!(command(&cfg()).join(" "), "rtla timerlat top -q -n -d 30");
        let c = TimerlatConfig {
            cpus: vec![3, 1, 2],
            threshold_us: 40,
            priority: Some(95),
            period_us: 500,
            duration: Duration::from_millis(2500),
            trace_file: Some("/tmp/rtlab-tl.txt".into()),
        };
        assert_eq!(
            command(&c).join(" "),
            "rtla timerlat top -q -n -d 3 -p 500 -c 1-3 -P f:95 -a 40 -t=/tmp/rtlab-tl.txt"
        );
        // a trace file is only written when the threshold stops the trace: no threshold, no -t
        let c = TimerlatConfig {
            cpus: vec![0, 2],
            trace_file: Some("/tmp/x".into()),
            duration: Duration::from_millis(10),
            ..cfg()
        };
        assert_eq!(command(&c).join(" "), "rtla timerlat top -q -n -d 1 -c 0,2");
        // without a file, -a alone (rtla writes timerlat_trace.txt in its temporary directory)
        let c = TimerlatConfig { threshold_us: 100, ..cfg() };
        assert_eq!(command(&c).join(" "), "rtla timerlat top -q -n -d 30 -a 100");
    }

    #[test]
    fn bad_values_are_refused_with_the_field() {
        assert!(validate(&cfg()).is_ok());
        let e = validate(&TimerlatConfig { priority: Some(0), ..cfg() }).unwrap_err().to_string();
        assert!(e.contains("priority 0") && e.contains("1 to 99"), "{e}");
        let e = validate(&TimerlatConfig { period_us: 50, ..cfg() }).unwrap_err().to_string();
        assert!(e.contains("period 50 us"), "{e}");
        assert!(validate(&TimerlatConfig { period_us: 1_000_001, ..cfg() }).is_err());
        assert!(validate(&TimerlatConfig { duration: Duration::ZERO, ..cfg() }).is_err());
    }

    /// The example of Documentation/tools/rtla/rtla-timerlat-top.rst as of v6.1 (torvalds/
    /// linux; installed by Debian's rtla 6.1 as rtla-timerlat-top(1)): `rtla timerlat top -s
    /// 30 -T 30 -t`, the plain table of rtla 6.1 (no auto-analysis). The "<--- CPU with
    /// spike" note is the document's.
    const DOC_61: &str = "                 Timer Latency
  0 00:00:59   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  0 #58634     |        1         0         1        10 |       11         2        10        23
  1 #58634     |        1         0         1         9 |       12         2         9        23
  2 #58634     |        0         0         1        11 |       10         2         9        23
  3 #58634     |        1         0         1        11 |       11         2         9        24
  4 #58634     |        1         0         1        10 |       11         2         9        26
  5 #58634     |        1         0         1         8 |       10         2         9        25
  6 #58634     |       12         0         1        12 |       30         2        10        30 <--- CPU with spike
  7 #58634     |        1         0         1         9 |       11         2         9        23
  8 #58633     |        1         0         1         9 |       11         2         9        26
  9 #58633     |        1         0         1         9 |       10         2         9        26
 10 #58633     |        1         0         1        13 |       11         2         9        28
 11 #58633     |        1         0         1        13 |       12         2         9        24
 12 #58633     |        1         0         1         8 |       10         2         9        23
 13 #58633     |        1         0         1        10 |       10         2         9        22
 14 #58633     |        1         0         1        18 |       12         2         9        27
 15 #58633     |        1         0         1        10 |       11         2         9        28
 16 #58633     |        0         0         1        11 |        7         2         9        26
 17 #58633     |        1         0         1        13 |       10         2         9        24
 18 #58633     |        1         0         1         9 |       13         2         9        22
 19 #58633     |        1         0         1        10 |       11         2         9        23
 20 #58633     |        1         0         1        12 |       11         2         9        28
 21 #58633     |        1         0         1        14 |       11         2         9        24
 22 #58633     |        1         0         1         8 |       11         2         9        22
 23 #58633     |        1         0         1        10 |       11         2         9        27
timerlat hit stop tracing
saving trace to timerlat_trace.txt
";

    /// The example of Documentation/tools/rtla/rtla-timerlat-top.rst (torvalds/linux, current):
    /// `timerlat -a 40 -c 1-23 -q`, with the auto-analysis of rtla >= 6.3 (the document's
    /// two-space literal-block indent removed). Documentation/tools/rtla/rtla-timerlat.rst
    /// has no example output.
    const DOC_AA: &str = "                                     Timer Latency
  0 00:00:12   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  1 #12322     |        0         0         1        15 |       10         3         9        31
  2 #12322     |        3         0         1        12 |       10         3         9        23
  3 #12322     |        1         0         1        21 |        8         2         8        34
  4 #12322     |        1         0         1        17 |       10         2        11        33
  5 #12322     |        0         0         1        12 |        8         3         8        25
  6 #12322     |        1         0         1        14 |       16         3        11        35
  7 #12322     |        0         0         1        14 |        9         2         8        29
  8 #12322     |        1         0         1        22 |        9         3         9        34
  9 #12322     |        0         0         1        14 |        8         2         8        24
 10 #12322     |        1         0         0        12 |        9         3         8        24
 11 #12322     |        0         0         0        15 |        6         2         7        29
 12 #12321     |        1         0         0        13 |        5         3         8        23
 13 #12319     |        0         0         1        14 |        9         3         9        26
 14 #12321     |        1         0         0        13 |        6         2         8        24
 15 #12321     |        1         0         1        15 |       12         3        11        27
 16 #12318     |        0         0         1        13 |        7         3        10        24
 17 #12319     |        0         0         1        13 |       11         3         9        25
 18 #12318     |        0         0         0        12 |        8         2         8        20
 19 #12319     |        0         0         1        18 |       10         2         9        28
 20 #12317     |        0         0         0        20 |        9         3         8        34
 21 #12318     |        0         0         0        13 |        8         3         8        28
 22 #12319     |        0         0         1        11 |        8         3        10        22
 23 #12320     |       28         0         1        28 |       41         3        11        41
rtla timerlat hit stop tracing
## CPU 23 hit stop tracing, analyzing it ##
IRQ handler delay:                                        27.49 us (65.52 %)
IRQ latency:                                              28.13 us
Timerlat IRQ duration:                                     9.59 us (22.85 %)
Blocking thread:                                           3.79 us (9.03 %)
                       objtool:49256                       3.79 us
  Blocking thread stacktrace
              -> timerlat_irq
              -> __hrtimer_run_queues
              -> hrtimer_interrupt
              -> __sysvec_apic_timer_interrupt
              -> sysvec_apic_timer_interrupt
              -> asm_sysvec_apic_timer_interrupt
              -> _raw_spin_unlock_irqrestore
              -> cgroup_rstat_flush_locked
              -> cgroup_rstat_flush_irqsafe
              -> mem_cgroup_flush_stats
              -> mem_cgroup_wb_stats
              -> balance_dirty_pages
              -> balance_dirty_pages_ratelimited_flags
              -> btrfs_buffered_write
              -> btrfs_do_write_iter
              -> vfs_write
              -> __x64_sys_pwrite64
              -> do_syscall_64
              -> entry_SYSCALL_64_after_hwframe
------------------------------------------------------------------------
  Thread latency:                                          41.96 us (100%)

The system has exit from idle latency!
  Max timerlat IRQ latency from idle: 17.48 us in cpu 4
Saving trace to timerlat_trace.txt
";

    #[test]
    fn the_plain_table_of_rtla_6_1_is_parsed() {
        let r = parse_top(DOC_61);
        assert_eq!(r.per_cpu.len(), 24);
        assert_eq!(
            r.per_cpu[6],
            TimerlatCpu {
                cpu: 6,
                count: 58634,
                irq_min_ns: Some(0),
                irq_avg_ns: Some(1000),
                irq_max_ns: Some(12_000),
                thread_min_ns: Some(2000),
                thread_avg_ns: Some(10_000),
                thread_max_ns: Some(30_000),
                user_avg_ns: None,
                user_max_ns: None,
            }
        );
        assert_eq!(
            (r.per_cpu[23].cpu, r.per_cpu[23].count, r.per_cpu[23].irq_max_ns),
            (23, 58633, Some(10_000))
        );
        assert_eq!(r.worst_thread(), Some((6, 30_000)));
        assert!(r.stopped_by_threshold);
        assert!(r.analysis.is_empty());
        assert_eq!(r.trace_file.as_deref(), Some("timerlat_trace.txt"));
        assert_eq!(r.raw, DOC_61);
    }

    #[test]
    fn the_auto_analysis_is_parsed() {
        let r = parse_top(DOC_AA);
        assert_eq!(r.per_cpu.len(), 23);
        assert_eq!(r.per_cpu[0].cpu, 1);
        let c23 = &r.per_cpu[22];
        assert_eq!(
            (c23.cpu, c23.count, c23.irq_max_ns, c23.thread_max_ns, c23.thread_avg_ns),
            (23, 12320, Some(28_000), Some(41_000), Some(11_000))
        );
        assert_eq!(r.worst_thread(), Some((23, 41_000)));
        assert!(r.stopped_by_threshold);
        assert_eq!(r.analysis[0], "## CPU 23 hit stop tracing, analyzing it ##");
        assert!(
            r.analysis[1].starts_with("IRQ handler delay:")
                && r.analysis[1].ends_with("27.49 us (65.52 %)")
        );
        assert!(r.analysis.iter().any(|l| l.starts_with("Blocking thread:")));
        assert!(r
            .analysis
            .iter()
            .any(|l| l.trim() == "objtool:49256                       3.79 us"));
        assert!(r.analysis.iter().any(|l| l.trim() == "-> _raw_spin_unlock_irqrestore"));
        assert_eq!(
            r.analysis.last().unwrap().trim(),
            "Max timerlat IRQ latency from idle: 17.48 us in cpu 4"
        );
        assert!(!r.analysis.iter().any(|l| l.contains("Saving trace")), "{:?}", r.analysis);
        assert_eq!(r.trace_file.as_deref(), Some("timerlat_trace.txt"));
    }

    #[test]
    fn nanoseconds_dashes_user_columns_escapes_and_the_last_table() {
        // -n, a CPU without thread samples, newer rtla's "Ret user" block and ALL summary,
        // two tables (without -q), terminal escapes
        let t = "\u{1b}c\u{1b}[2;37;40m                                     Timer Latency\u{1b}[0;0;0m
  0 00:00:01   |          IRQ Timer Latency (ns)        |         Thread Timer Latency (ns)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  0 #10        |      100       100       100       100 |      200       200       200       200
\u{1b}c                                     Timer Latency
  0 00:00:02   |          IRQ Timer Latency (ns)        |         Thread Timer Latency (ns)      |    Ret user Timer Latency (ns)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max |      cur       min       avg       max
  0 #20        |     1500      1000      1200      4100 |        -         -         -         - |     3000      2500      2900      9100
  1 #20        |      900       800       950      2000 |     2500      2000      2300      7000 |     4000      3500      3900      8000
---------------|----------------------------------------|---------------------------------------|-|---------------------------------------
ALL #40     e0 |                800      1075      4100 |               2000      2300      7000 |               2500      3400      9100
";
        let r = parse_top(t);
        assert_eq!(r.per_cpu.len(), 2, "{:?}", r.per_cpu);
        let c0 = &r.per_cpu[0];
        assert_eq!((c0.count, c0.irq_min_ns, c0.irq_max_ns), (20, Some(1000), Some(4100)));
        assert_eq!((c0.thread_avg_ns, c0.thread_max_ns), (None, None));
        assert_eq!((c0.user_avg_ns, c0.user_max_ns), (Some(2900), Some(9100)));
        assert_eq!(r.per_cpu[1].thread_max_ns, Some(7000));
        assert_eq!(r.worst_thread(), Some((1, 7000)));
        assert!(!r.stopped_by_threshold);
        assert!(r.analysis.is_empty());
        assert!(parse_top("").per_cpu.is_empty());
    }

    fn fake_tracefs(root: &Path, tracers: &str) {
        crate::testing::put(root, "sys/kernel/tracing/available_tracers", tracers);
        for (f, v) in [
            ("cpus", "0-1\n"),
            ("timerlat_period_us", "1000\n"),
            ("stop_tracing_us", "0\n"),
            ("stop_tracing_total_us", "0\n"),
            ("print_stack", "0\n"),
        ] {
            crate::testing::put(root, &format!("sys/kernel/tracing/osnoise/{f}"), v);
        }
        crate::testing::put(
            root,
            "sys/kernel/tracing/osnoise/options",
            "DEFAULTS OSNOISE_WORKLOAD NO_OSNOISE_PANIC_ON_STOP\n",
        );
        std::fs::create_dir_all(root.join("sys/kernel/tracing/instances")).unwrap();
    }

    #[test]
    fn detect_on_a_fake_root_with_and_without_timerlat() {
        let d = tempfile::tempdir().unwrap();
        let host = crate::host::FakeHost::new(d.path());
        // no tracefs at all
        let a = detect_with(&host, None, None);
        assert_eq!((a.tracer, a.tracefs.as_deref()), (false, None));
        let m = a.missing().unwrap();
        assert!(m.contains("tracefs is not mounted") && m.contains("Debian package `rtla`"), "{m}");
        // this machine's kernel: no timerlat
        crate::testing::put(d.path(), "sys/kernel/tracing/available_tracers", "blk function nop\n");
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
        crate::testing::put(
            d2.path(),
            "sys/kernel/debug/tracing/available_tracers",
            "timerlat nop\n",
        );
        let a = detect_with(&crate::host::FakeHost::new(d2.path()), Some("rtla".into()), None);
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

    #[test]
    fn on_this_machine_start_names_what_is_missing() {
        let a = detect(&crate::host::RealHost::new());
        let Some(m) = a.missing() else {
            return; // the kernel has timerlat and rtla is installed: nothing missing to name
        };
        let e = start(&TimerlatConfig { duration: Duration::from_secs(1), ..cfg() })
            .err()
            .expect("start must refuse");
        // what is missing is a Missing (the case goes on without rtla), in the same words
        assert_eq!(e.missing().map(|x| x.what.clone()), Some(m));
        let e = e.to_string();
        assert!(!e.contains('\n'));
        if !a.tracer && a.tracefs.is_some() && a.read_error.is_none() {
            assert!(
                e.contains("no timerlat tracer") && e.contains("CONFIG_TIMERLAT_TRACER"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_leftover_action_removes_the_instances_and_writes_the_settings_back() {
        let d = tempfile::tempdir().unwrap();
        let host = crate::host::FakeHost::new(d.path());
        crate::testing::put(d.path(), "sys/kernel/tracing/available_tracers", "blk function nop\n");
        assert_eq!(leftover_cleanup_action(&host), None, "no timerlat: rtla changes nothing");
        fake_tracefs(d.path(), "timerlat nop\n");
        let Some(Action::Command { did, undo }) = leftover_cleanup_action(&host) else {
            panic!("an action")
        };
        assert_eq!(did[..2], ["sh", "-c"]);
        let script = &undo[2];
        for i in RTLA_INSTANCES {
            assert!(script.contains(i), "{script}");
        }
        assert!(script.contains("echo 0-1 > \"$T/osnoise/cpus\""), "{script}");
        assert!(script.contains("echo 1000 > \"$T/osnoise/timerlat_period_us\""), "{script}");
        assert!(script.contains("echo OSNOISE_WORKLOAD > \"$T/osnoise/options\""), "{script}");

        // journaled through a session: the restore runs the undo (the fake machine logs it)
        let journal = d.path().join("journal.trace");
        {
            let mut s = crate::session::Session::begin(&host, &journal, "test").unwrap();
            s.apply(&leftover_cleanup_action(&host).unwrap()).unwrap();
            // rtla (killed) left a changed setting behind
            crate::testing::put(d.path(), "sys/kernel/tracing/osnoise/timerlat_period_us", "250\n");
        }
        assert!(
            host.commands().iter().any(|c| c.starts_with("sh -c set -e")),
            "{:?}",
            host.commands()
        );
        assert!(!journal.exists());

        // the script itself, run on the fake tree: the settings go back
        let out = Command::new("sh").args(["-c", script]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/kernel/tracing/osnoise/timerlat_period_us"))
                .unwrap()
                .trim(),
            "1000"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/kernel/tracing/osnoise/options"))
                .unwrap()
                .trim(),
            "OSNOISE_WORKLOAD"
        );
    }

    #[test]
    fn a_run_is_stopped_with_sigint_and_its_output_parsed() {
        // a stand-in for rtla that prints the 6.1 table when interrupted, like rtla -q
        let script =
            format!("trap 'cat <<\"EOF\"\n{DOC_61}EOF\nexit 0' INT; while :; do sleep 0.05; done");
        let run = launch(vec!["sh".into(), "-c".into(), script], Duration::from_millis(100))
            .expect("the stand-in starts");
        let dir = run.dir.clone();
        let r = run.stop_within(Duration::from_secs(5));
        assert_eq!(r.error, None);
        assert_eq!(r.per_cpu.len(), 24);
        assert!(r.stopped_by_threshold);
        assert!(!dir.exists(), "the temporary directory is removed");
    }

    #[test]
    fn a_run_that_hits_the_threshold_ends_alone_and_exit_2_is_no_error() {
        // newer rtla (common.c: PASSED 0, ERROR 1, FAILED 2) exits 2 when the threshold stopped the trace
        let script = format!("cat <<\"EOF\"\n{DOC_AA}EOF\nsleep 0.2; exit 2");
        let mut run =
            launch(vec!["sh".into(), "-c".into(), script], Duration::from_millis(50)).unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while run.is_running() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = run.stop_within(Duration::from_secs(1));
        assert_eq!(r.error, None);
        assert!(r.stopped_by_threshold && !r.analysis.is_empty());
        // an exit 2 without a threshold hit is a failure, with rtla's last line
        let run = launch(
            vec![
                "sh".into(),
                "-c".into(),
                "sleep 0.2; echo 'Error iterating on events' >&2; exit 2".into(),
            ],
            Duration::from_millis(50),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let r = run.stop_within(Duration::from_secs(1));
        assert!(
            r.error.as_deref().unwrap().ends_with(": Error iterating on events"),
            "{:?}",
            r.error
        );
    }

    #[test]
    fn a_run_that_ignores_sigint_is_killed_and_says_so() {
        let run = launch(
            vec!["sh".into(), "-c".into(), "trap '' INT; while :; do sleep 0.05; done".into()],
            Duration::from_millis(50),
        )
        .unwrap();
        let r = run.stop_within(Duration::from_millis(200));
        assert!(r.error.as_deref().unwrap().contains("was killed"), "{:?}", r.error);
        assert!(r.per_cpu.is_empty());
    }

    #[test]
    fn a_run_that_fails_at_once_gives_its_last_line() {
        let e = launch(vec!["sh".into(), "-c".into(), "echo 'Tracer timerlat not found!' >&2; echo 'Failed to enable timerlat tracer' >&2; exit 1".into()], Duration::from_millis(500))
            .err()
            .expect("an error")
            .to_string();
        assert!(e.ends_with(": Failed to enable timerlat tracer"), "{e}");
        assert!(!e.contains('\n'));
    }
}
