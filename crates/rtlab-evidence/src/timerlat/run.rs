//! A running `rtla timerlat top`: started with its output captured, stopped with SIGINT (then
//! SIGKILL after a grace), and what it printed parsed.

use super::availability::detect;
use super::command::{command, validate, TimerlatConfig};
use super::names::{RTLA_INSTANCES, STOP_GRACE, TRACEFS_DIRS};
use super::report::{parse_top, TimerlatReport};
use crate::error::TraceError;
use rtlab_core::error::Missing;
use rtlab_host::host::Host;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let host = rtlab_host::host::RealHost::new();
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
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // its own group: a Ctrl-C meant for rtlab reaches rtla only through stop()
        .process_group(0);
    // stop() is a SIGINT: rtla must hear it even when rtlab was started with it ignored
    // (found: a CI started in the background of a script killed the stand-in after 5 s)
    rtlab_sys::process::default_stop_signals(&mut cmd);
    let child = cmd.spawn();
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
        let _ = rtlab_sys::tasks::kill_pid(c.id() as i32, 2);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{timerlat_config as cfg, DOC_61, DOC_AA};

    #[test]
    fn on_this_machine_start_names_what_is_missing() {
        let a = detect(&rtlab_host::host::RealHost::new());
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
