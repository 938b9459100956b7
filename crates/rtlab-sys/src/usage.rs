//! What a case cost, read from the kernel: a thread's own counters (getrusage(2)
//! `RUSAGE_THREAD`), every thread of a process by /proc (`/proc/PID/task/TID/stat`, `comm`,
//! `status`), a process's max RSS (`VmHWM`), and the collector of measured windows.
//!
//! Contract: a measuring thread calls [`begin`] right before its measuring loop and
//! [`Measuring::end`] right after it, never inside it: they read /proc, allocate and take a
//! lock. The first `begin` of a window also snapshots every thread of the process (the
//! window's start for the middleware's threads); each `end` snapshots them again (the last
//! one is the window's end). [`take_windows`] gives the windows measured since the last call
//! (the lab does it after each case; one case is measured at a time per process).
//! (proc(5): <https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html>; getrusage(2).)

use rtlab_core::cost::{groups_between, CostWindow, MeasuringThread, TaskSnapshot, Usage};
use std::sync::Mutex;

/// The calling thread's counters (getrusage(RUSAGE_THREAD)); None where the kernel refuses.
pub fn thread_usage() -> Option<Usage> {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own; no other effect.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
    let r = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    if r != 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec * 1_000_000_000 + t.tv_usec * 1_000;
    Some(Usage {
        user_ns: tv(ru.ru_utime),
        system_ns: tv(ru.ru_stime),
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    })
}

/// One clock tick of proc(5)'s `utime` and `stime`, in ns (`sysconf(_SC_CLK_TCK)`).
pub fn ticks_ns() -> i64 {
    // SAFETY: sysconf reads a constant of the system; no memory is touched.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as i64 } else { 100 }
}

/// Parse one `/proc/PID/task/TID/stat` line: (comm, usage without context switches).
pub fn parse_stat(line: &str, tick_ns: i64) -> Option<(String, Usage)> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    // fields after ")": 3 state, 4 ppid, ... 10 minflt, 11 cminflt, 12 majflt, 13 cmajflt,
    // 14 utime, 15 stime (1-based field numbers of proc(5))
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    let f = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some((
        comm,
        Usage {
            minor_faults: f(10)?,
            major_faults: f(12)?,
            user_ns: f(14)? as i64 * tick_ns,
            system_ns: f(15)? as i64 * tick_ns,
            ..Default::default()
        },
    ))
}

/// A `/proc/PID/task/TID/stat` line's policy and real-time priority (fields 41 and 40 of
/// proc(5)): (`fifo`, 75), (`other`, 0); None when the line is cut short.
pub fn parse_sched(line: &str) -> Option<(&'static str, i32)> {
    let rest: Vec<&str> = line.get(line.rfind(')')? + 1..)?.split_whitespace().collect();
    let f = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let policy = crate::sched::policy_word(f(41)?).unwrap_or("unknown");
    Some((policy, f(40)? as i32))
}

/// Every thread of process `pid` now (None: its /proc/PID/task is not readable).
pub fn process_threads(pid: u32) -> Option<Vec<TaskSnapshot>> {
    let tick = ticks_ns();
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut v = Vec::new();
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let Some((comm, mut usage)) = parse_stat(&stat, tick) else { continue };
        let (policy, priority) = parse_sched(&stat).unwrap_or(("", 0));
        if let Some(ns) = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<i64>().ok()))
        {
            (usage.user_ns, usage.system_ns) = split_runtime(ns, usage.user_ns, usage.system_ns);
        }
        if let Ok(status) = std::fs::read_to_string(e.path().join("status")) {
            usage.voluntary_switches =
                status_field(&status, "voluntary_ctxt_switches:").unwrap_or(0);
            usage.involuntary_switches =
                status_field(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
        }
        v.push(TaskSnapshot { tid, comm, usage, policy: policy.into(), priority });
    }
    Some(v)
}

/// A thread's exact time on a CPU (`schedstat`'s first field, ns) split into user and system
/// by the tick-sampled `utime` : `stime` of its stat, as the kernel's own `cputime_adjust`
/// does for getrusage (no system tick seen: all user; no user tick: all system).
pub fn split_runtime(runtime_ns: i64, utime: i64, stime: i64) -> (i64, i64) {
    if stime == 0 {
        (runtime_ns, 0)
    } else if utime == 0 {
        (0, runtime_ns)
    } else {
        let user = (runtime_ns as i128 * utime as i128 / (utime + stime) as i128) as i64;
        (user, runtime_ns - user)
    }
}

fn status_field(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// A process's max RSS (`VmHWM` of /proc/PID/status), KiB.
pub fn max_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field(&s, "VmHWM:")
}

/// A process's resident memory now (`VmRSS` of /proc/PID/status), KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field(&s, "VmRSS:")
}

/// The name of the calling thread (its `comm`).
fn own_comm() -> String {
    std::fs::read_to_string("/proc/thread-self/comm")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| std::thread::current().name().unwrap_or("?").to_string())
}

struct Open {
    name: String,
    start_ns: i64,
    end_ns: i64,
    messages: Option<u64>,
    start: Option<Vec<TaskSnapshot>>,
    end: Option<Vec<TaskSnapshot>>,
    measuring: Vec<MeasuringThread>,
    merged: Vec<CostWindow>,
    running: usize,
}

static WINDOWS: Mutex<Vec<Open>> = Mutex::new(Vec::new());
/// Windows measured whole in another process (a case `apart`), given back by [`take_windows`].
static ADOPTED: Mutex<Vec<CostWindow>> = Mutex::new(Vec::new());

/// Keep a window measured whole in another process (a case run `apart`).
pub fn adopt(window: CostWindow) {
    ADOPTED.lock().unwrap_or_else(|e| e.into_inner()).push(window);
}

/// A measuring thread inside its window (from [`begin`]).
#[must_use = "call end() right after the measuring loop"]
pub struct Measuring {
    window: String,
    thread: String,
    policy: String,
    priority: i32,
    start_ns: i64,
    start: Option<Usage>,
}

/// Right before the calling thread's measuring loop: its counters, and (first thread of
/// `window`) every thread of the process.
pub fn begin(window: &str) -> Measuring {
    let now = crate::clock::monotonic_ns();
    {
        let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
        match w.iter_mut().find(|o| o.name == window) {
            Some(o) => o.running += 1,
            None => w.push(Open {
                name: window.into(),
                start_ns: now,
                end_ns: now,
                messages: None,
                start: process_threads(std::process::id()),
                end: None,
                measuring: Vec::new(),
                merged: Vec::new(),
                running: 1,
            }),
        }
    }
    let (policy, priority) = crate::sched::current_policy();
    Measuring {
        window: window.into(),
        thread: own_comm(),
        policy: policy.map(|p| p.name()).unwrap_or("unknown").into(),
        priority,
        start_ns: crate::clock::monotonic_ns(),
        start: thread_usage(),
    }
}

impl Measuring {
    /// Right after the measuring loop: the thread's counters over its window, and every
    /// thread of the process again.
    pub fn end(self) {
        let u = thread_usage();
        let now = crate::clock::monotonic_ns();
        let snap = process_threads(std::process::id());
        let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(o) = w.iter_mut().find(|o| o.name == self.window) else { return };
        o.running = o.running.saturating_sub(1);
        // the newest snapshot is the window's end (two threads may end in either order)
        if snap.is_some() && (o.end.is_none() || now >= o.end_ns) {
            o.end = snap;
        }
        o.end_ns = o.end_ns.max(now);
        if let (Some(a), Some(b)) = (self.start, u) {
            o.measuring.push(MeasuringThread {
                process: String::new(),
                thread: self.thread,
                policy: self.policy,
                priority: self.priority,
                window_ns: now - self.start_ns,
                usage: b.since(&a),
            });
        }
    }
}

/// The messages of window `window` (pub/sub: published; udp: requests), set once it ended.
pub fn set_messages(window: &str, messages: u64) {
    let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(o) = w.iter_mut().find(|o| o.name == window) {
        o.messages = Some(o.messages.unwrap_or(0) + messages);
    }
}

/// Add a window measured in a role process (its measuring threads, its threads by group, its
/// max RSS) to this process's open window of the same name.
pub fn merge(window: CostWindow) {
    let mut w = WINDOWS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(o) = w.iter_mut().find(|o| o.name == window.name) {
        o.merged.push(window);
    }
}

/// The windows measured in this process since the last call, with this process's threads
/// by group (process name `rtlab`), and forget them.
pub fn take_windows() -> Vec<CostWindow> {
    take_windows_as("rtlab")
}

/// [`take_windows`] with this process's threads under the name `process` (a role's).
pub fn take_windows_as(process: &str) -> Vec<CostWindow> {
    let mut done: Vec<Open> =
        std::mem::take(&mut *WINDOWS.lock().unwrap_or_else(|e| e.into_inner()));
    let merged: Vec<Vec<CostWindow>> =
        done.iter_mut().map(|o| std::mem::take(&mut o.merged)).collect();
    done.into_iter()
        .map(|o| CostWindow {
            groups: match (&o.start, &o.end) {
                (Some(s), Some(e)) => groups_between(process, s, e),
                _ => Vec::new(),
            },
            name: o.name,
            window_ns: o.end_ns - o.start_ns,
            messages: o.messages,
            measuring: o
                .measuring
                .into_iter()
                .map(|t| MeasuringThread { process: process.into(), ..t })
                .collect(),
            processes: Vec::new(),
        })
        .zip(merged)
        .map(|(mut w, m)| {
            for x in m {
                w.merge(x);
            }
            w
        })
        .chain(std::mem::take(&mut *ADOPTED.lock().unwrap_or_else(|e| e.into_inner())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_parses_with_spaces_and_parentheses_in_its_name() {
        let line = "4242 (dds.udp (7400)) S 1 2 3 4 5 6 70 0 3 0 250 12 0 0 20 0 9 0 100 0 0";
        let (comm, u) = parse_stat(line, 10_000_000).unwrap();
        assert_eq!(comm, "dds.udp (7400)");
        assert_eq!((u.minor_faults, u.major_faults), (70, 3));
        assert_eq!((u.user_ns, u.system_ns), (2_500_000_000, 120_000_000));
        assert!(parse_stat("garbage", 1).is_none());
    }

    #[test]
    fn a_stat_line_says_its_policy_and_priority() {
        // fields 3 (state) to 52 after the name; 40: rt_priority, 41: policy (1: SCHED_FIFO)
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[0] = "S".into();
        f[40 - 3] = "75".into();
        f[41 - 3] = "1".into();
        let line = format!("4242 (dds.udp (7400)) {}", f.join(" "));
        assert_eq!(parse_sched(&line), Some(("fifo", 75)));
        f[41 - 3] = "0".into();
        f[40 - 3] = "0".into();
        assert_eq!(parse_sched(&format!("1 (x) {}", f.join(" "))), Some(("other", 0)));
        assert_eq!(parse_sched("1 (x) S 0 0"), None, "cut short: not read");
        // this process's threads, as /proc has them
        let mine = process_threads(std::process::id()).unwrap();
        assert!(mine.iter().all(|t| !t.policy.is_empty()), "{mine:?}");
    }

    #[test]
    fn the_exact_runtime_is_split_as_the_kernel_does() {
        assert_eq!(split_runtime(1000, 0, 0), (1000, 0));
        assert_eq!(split_runtime(1000, 3, 0), (1000, 0));
        assert_eq!(split_runtime(1000, 0, 2), (0, 1000));
        assert_eq!(split_runtime(1000, 3, 1), (750, 250));
    }

    #[test]
    fn this_thread_and_this_process_are_readable() {
        let u = thread_usage().expect("getrusage(RUSAGE_THREAD)");
        assert!(u.user_ns >= 0);
        let threads = process_threads(std::process::id()).expect("/proc/self/task");
        assert!(!threads.is_empty());
        assert!(max_rss_kib(std::process::id()).unwrap() > 0);
    }

    /// A thread that touches N fresh pages inside its window shows them as minor faults.
    #[test]
    fn fresh_pages_touched_in_the_window_are_page_faults() {
        const PAGES: usize = 2000;
        let h = std::thread::Builder::new()
            .name("rtlab-faults".into())
            .spawn(|| {
                // reserved but not touched: mmap'd by the allocator, no page present yet
                let mut v: Vec<u8> = Vec::with_capacity(PAGES * 4096);
                let m = begin("cost-test-faults");
                // SAFETY-free: writing through the Vec's spare capacity as initialized bytes
                for p in 0..PAGES {
                    v.spare_capacity_mut()[p * 4096].write(1);
                }
                m.end();
                std::hint::black_box(&v);
            })
            .unwrap();
        h.join().unwrap();
        let w = take_windows().into_iter().find(|w| w.name == "cost-test-faults").unwrap();
        let t = &w.measuring[0];
        assert_eq!(t.thread, "rtlab-faults");
        assert!(
            t.usage.minor_faults >= PAGES as u64 / 2,
            "{} minor faults for {PAGES} fresh pages",
            t.usage.minor_faults
        );
        assert!(!w.groups.is_empty());
    }
}
