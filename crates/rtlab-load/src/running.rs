//! A running load: its processes, forked by one long-lived spawner thread, watched while
//! the measurement runs, and stopped with a [`LoadReport`].
//!
//! Contract: every process is started with the parent-death signal
//! ([`rtlab_sys::process::die_with_parent`]) from the spawner thread, which lives until the
//! process exits, so the signal fires when rtlab dies and not before; each process leads its
//! own process group, killed whole by [`RunningLoad::stop`] or on drop. The pipes of a
//! child are drained by reader threads, so a chatty tool never blocks on a full pipe.

use crate::config::{command_of, server_command};
use crate::error::{last_line, need};
use crate::iperf::{parse_iperf, wait_listening};
use crate::{CpuTimes, LoadConfig, LoadError, TrafficSide};
use rtlab_core::error::Missing;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a load achieved (recorded with the result).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// The load's short name ([`LoadConfig::name`]).
    pub name: String,
    /// The argv that ran (the iperf3 client's, for traffic), time limit included.
    pub command: Vec<String>,
    /// From start to stop (nanoseconds).
    pub ran_ns: i64,
    /// The CPU load asked for: percent of each CPU worker's time (stress-ng --cpu-load);
    /// None: full load, or not a CPU load. Compare with `cpu_busy_percent*`, measured.
    #[serde(default)]
    pub cpu_load_percent: Option<u8>,
    /// Busy CPU over all CPUs during the load (percent, from /proc/stat; includes everything
    /// else running).
    pub cpu_busy_percent: f64,
    /// Busy CPU per CPU during the load (percent, from /proc/stat).
    pub cpu_busy_percent_per_cpu: Vec<f64>,
    /// Bit rate iperf3 measured (bits per second), for traffic.
    pub bitrate_bps: Option<f64>,
    /// UDP datagrams lost (percent), for UDP traffic.
    pub lost_percent: Option<f64>,
    /// The time limit passed to the tools (nanoseconds; None: no limit but the
    /// parent-death signal).
    #[serde(default)]
    pub max_duration_ns: Option<i64>,
    /// Alive until stopped (false: it ended early; see `ended`).
    pub alive_until_stop: bool,
    /// Why it ended early, if it did.
    pub ended: Option<String>,
}

/// The last bytes a pipe gave, read by a thread so the child never blocks on it.
struct Drain {
    text: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Drain {
    /// Keep at most `keep` bytes (the tail), or everything with `usize::MAX`.
    fn start(pipe: Option<impl Read + Send + 'static>, keep: usize) -> Drain {
        let text = Arc::new(Mutex::new(String::new()));
        let reader = pipe.and_then(|mut p| {
            let t = Arc::clone(&text);
            std::thread::Builder::new()
                .name("rtlab-load-pipe".into())
                .spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = p.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let mut s = t.lock().unwrap_or_else(|e| e.into_inner());
                        s.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if s.len() > keep {
                            let mut cut = s.len() - keep;
                            while !s.is_char_boundary(cut) {
                                cut += 1;
                            }
                            s.drain(..cut);
                        }
                    }
                })
                .ok()
        });
        Drain { text, reader }
    }

    /// What was read, after waiting up to `wait` for the pipe's end (a grandchild may hold
    /// it open: then what was read so far).
    fn text(&mut self, wait: Duration) -> String {
        let end = Instant::now() + wait;
        if let Some(r) = &self.reader {
            while !r.is_finished() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            if r.is_finished() {
                let _ = self.reader.take().map(|r| r.join());
            }
        }
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One process of a load.
struct Proc {
    what: String,
    child: Child,
    stderr: Drain,
    stdout: Drain,
}

/// A request to the spawner thread.
struct SpawnRequest {
    cmd: Command,
    reply: mpsc::Sender<std::io::Result<Child>>,
}

/// The spawner thread's queue; the thread is started on first use and never ends, so the
/// parent-death signal of the children it forks fires only when the process dies.
fn spawner() -> Option<&'static mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnRequest>();
            std::thread::Builder::new()
                .name("rtlab-load-spawner".into())
                .spawn(move || {
                    for mut r in rx {
                        let _ = r.reply.send(r.cmd.spawn());
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Spawn `cmd` on the spawner thread.
fn spawn_on_spawner(cmd: Command) -> std::io::Result<Child> {
    let gone = || std::io::Error::other("the load spawner thread is not running");
    let s = spawner().ok_or_else(gone)?;
    let (tx, rx) = mpsc::channel();
    s.send(SpawnRequest { cmd, reply: tx }).map_err(|_| gone())?;
    rx.recv().map_err(|_| gone())?
}

/// The Debian package of a tool rtlab runs (None: a user's program).
fn package_of(program: &str) -> Option<&'static str> {
    match program {
        "stress-ng" => Some("stress-ng"),
        "iperf3" => Some("iperf3"),
        "ip" => Some("iproute2"),
        _ => None,
    }
}

fn spawn(argv: &[String], what: &str, capture_stdout: bool) -> Result<Proc, LoadError> {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]).stdin(Stdio::null()).stderr(Stdio::piped()).process_group(0);
    c.stdout(if capture_stdout { Stdio::piped() } else { Stdio::null() });
    rtlab_sys::process::die_with_parent(&mut c);
    let mut child = spawn_on_spawner(c).map_err(|e| match (e.kind(), package_of(&argv[0])) {
        (std::io::ErrorKind::NotFound, Some(pkg)) => Missing::tool(&argv[0], pkg).into(),
        _ => LoadError::Start { what: what.into(), source: e },
    })?;
    let stderr = Drain::start(child.stderr.take(), 8192);
    let stdout = Drain::start(child.stdout.take(), usize::MAX);
    Ok(Proc { what: what.into(), child, stderr, stdout })
}

/// A load that runs; stop it (or drop it) to end every process it started.
pub struct RunningLoad {
    name: String,
    command: Vec<String>,
    children: Vec<Proc>,
    started: Instant,
    cpu0: CpuTimes,
    died: Option<String>,
    iperf_client: Option<usize>,
    udp: bool,
    cpu_load: Option<u8>,
    max_duration: Option<Duration>,
    tool_limited: bool,
    /// stress-ng's files (`--temp-path`), removed once the load is stopped.
    scratch: Option<PathBuf>,
}

impl RunningLoad {
    /// Start a load (checks the tools are there first, and that it is still alive a moment
    /// later: a tool that refuses its arguments says so now, not after the window).
    ///
    /// `max_duration`: the time limit passed to the tools themselves, the guard for when
    /// rtlab dies in a way the parent-death signal misses; give the case's planned time
    /// under load plus a margin ([`crate::max_duration_for`]). None: no limit but the
    /// signal (a user command always gets only the signal). A load that reaches its limit
    /// before it is stopped shows as [`LoadError::Expired`].
    pub fn start(
        cfg: &LoadConfig,
        max_duration: Option<Duration>,
    ) -> Result<RunningLoad, LoadError> {
        cfg.validate().map_err(LoadError::Invalid)?;
        let scratch = match cfg {
            LoadConfig::Stress { io, hdd, .. } if *io > 0 || *hdd > 0 => Some(scratch_dir()?),
            _ => None,
        };
        let temp = scratch.clone().unwrap_or_else(std::env::temp_dir);
        let command = command_of(cfg, max_duration, &temp);
        let mut l = RunningLoad {
            name: cfg.name(),
            command: command.clone(),
            children: Vec::new(),
            started: Instant::now(),
            cpu0: CpuTimes::read(std::path::Path::new("/")),
            died: None,
            iperf_client: None,
            udp: false,
            cpu_load: cfg.cpu_load(),
            max_duration,
            tool_limited: !matches!(cfg, LoadConfig::Command { .. }),
            scratch,
        };
        // from here on, an error drops `l`, which kills what was started
        match cfg {
            LoadConfig::Stress { .. } => {
                need("stress-ng", "stress-ng")?;
                l.children.push(spawn(&command, "stress-ng", false)?);
            }
            LoadConfig::Traffic(t) => {
                need("iperf3", "iperf3")?;
                if t.netns.is_some() || t.client_netns.is_some() {
                    need("ip", "iproute2")?;
                }
                l.udp = t.protocol == "udp";
                if t.side != TrafficSide::Client {
                    l.children.push(spawn(
                        &server_command(t, max_duration),
                        "iperf3 server",
                        false,
                    )?);
                    let server = &mut l.children[0];
                    if let Err(e) = wait_listening(t, &mut server.child) {
                        let stderr = last_line(&server.stderr.text(Duration::from_millis(300)));
                        return Err(match e {
                            LoadError::Died { what, status, .. } => {
                                LoadError::Died { what, status, stderr }
                            }
                            e => e,
                        });
                    }
                }
                if t.side != TrafficSide::Server {
                    l.iperf_client = Some(l.children.len());
                    l.children.push(spawn(&command, "iperf3 client", true)?);
                }
            }
            LoadConfig::Command { argv } => {
                l.children.push(spawn(argv, &argv[0], false)?);
            }
        }
        std::thread::sleep(Duration::from_millis(150));
        l.check_alive()?;
        Ok(l)
    }

    /// The load's short name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The argv that runs (the iperf3 client's, for traffic), time limit included.
    pub fn command(&self) -> &[String] {
        &self.command
    }

    /// The pids of the processes this load started; each leads its own process group.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|p| p.child.id()).collect()
    }

    /// Err if any process of the load has ended ([`LoadError::Expired`] if it reached the
    /// time limit, else [`LoadError::Died`] with the last line it wrote to stderr).
    pub fn check_alive(&mut self) -> Result<(), LoadError> {
        for p in self.children.iter_mut() {
            if let Ok(Some(st)) = p.child.try_wait() {
                let expired = match self.max_duration {
                    Some(d) if self.tool_limited && st.success() => {
                        (self.started.elapsed() >= d).then(|| crate::tool_seconds(d))
                    }
                    _ => None,
                };
                let err = match expired {
                    Some(limit_s) => LoadError::Expired { what: p.what.clone(), limit_s },
                    None => LoadError::Died {
                        what: p.what.clone(),
                        status: st.to_string(),
                        stderr: last_line(&p.stderr.text(Duration::from_millis(300))),
                    },
                };
                self.died = Some(err.to_string());
                return Err(err);
            }
        }
        Ok(())
    }

    /// Stop every process (SIGTERM to its group, SIGKILL after 2 s) and report.
    pub fn stop(mut self) -> LoadReport {
        let alive = self.check_alive().is_ok();
        let cpu1 = CpuTimes::read(std::path::Path::new("/"));
        let ran_ns = self.started.elapsed().as_nanos() as i64;
        let mut children = std::mem::take(&mut self.children);
        // the client first, so that iperf3 prints its --json summary
        if let Some(i) = self.iperf_client {
            children[..=i].rotate_right(1);
        }
        let mut iperf_json = None;
        for (k, p) in children.iter_mut().enumerate() {
            terminate(&mut p.child);
            if k == 0 && self.iperf_client.is_some() {
                iperf_json = Some(p.stdout.text(Duration::from_secs(2)));
            }
        }
        self.remove_scratch();
        let (all, per) = self.cpu0.busy_percent(&cpu1);
        let (bitrate, lost) =
            iperf_json.as_deref().map(|j| parse_iperf(j, self.udp)).unwrap_or((None, None));
        LoadReport {
            name: self.name.clone(),
            command: self.command.clone(),
            ran_ns,
            cpu_load_percent: self.cpu_load,
            cpu_busy_percent: all,
            cpu_busy_percent_per_cpu: per,
            bitrate_bps: bitrate,
            lost_percent: lost,
            max_duration_ns: self.max_duration.map(|d| d.as_nanos().min(i64::MAX as u128) as i64),
            alive_until_stop: alive,
            ended: self.died.clone(),
        }
    }
}

/// SIGTERM to the child's group, SIGKILL to what is left after 2 s, then reap.
fn terminate(c: &mut Child) {
    let pgid = c.id() as i32;
    if let Ok(None) = c.try_wait() {
        let _ = rtlab_sys::tasks::kill_group(pgid, 15);
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // what is left of the group (workers of stress-ng) goes too
    let _ = rtlab_sys::tasks::kill_group(pgid, 9);
    let _ = c.kill();
    let _ = c.wait();
}

impl RunningLoad {
    /// stress-ng's directory, once no process of the load is left.
    fn remove_scratch(&mut self) {
        if let Some(d) = self.scratch.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A new directory for stress-ng's files, `rtlab-load-PID-N` in the temporary directory
/// (removed when the load stops). Those of a process that is gone (an rtlab killed with
/// SIGKILL: its stress-ng's workers ended by the same signal leave theirs) go first.
fn scratch_dir() -> Result<PathBuf, LoadError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::temp_dir();
    remove_left_scratch(&base);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = base.join(format!("rtlab-load-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).map_err(|source| LoadError::Start {
        what: format!("stress-ng's directory {}", d.display()),
        source,
    })?;
    Ok(d)
}

/// Remove the `rtlab-load-PID-N` directories in `base` of processes no longer running.
fn remove_left_scratch(base: &Path) {
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("rtlab-load-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        for p in self.children.iter_mut() {
            terminate(&mut p.child);
        }
        self.remove_scratch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_keep_their_tail() {
        let mut d = Drain::start(Some(&b"first line\nsecond line\n"[..]), 12);
        assert_eq!(d.text(Duration::from_secs(5)), "second line\n");
        assert_eq!(last_line("a\nb\n\n"), ": b");
        assert_eq!(last_line(""), "");
    }

    #[test]
    fn a_missing_user_command_is_not_a_missing_package() {
        let e = RunningLoad::start(
            &LoadConfig::Command { argv: vec!["rtlab-no-such-command".into()] },
            None,
        )
        .err()
        .unwrap();
        assert!(e.missing().is_none(), "{e}");
        assert_eq!(package_of("ip"), Some("iproute2"));
    }

    #[test]
    fn invalid_loads_are_refused_before_anything_starts() {
        let e = RunningLoad::start(
            &LoadConfig::Stress { cpu: 0, vm: 0, io: 0, hdd: 0, cpu_method: None, cpu_load: None },
            None,
        )
        .err()
        .unwrap();
        assert!(matches!(e, LoadError::Invalid(_)), "{e}");
    }
}
