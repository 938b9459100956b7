//! Inside the guest: what the guest tests of `rt_kernel.rs` share (the guest check, shell
//! and /proc reads, scheduling of a task, the NIC lock, the application under a profile,
//! the hwlat and osnoise checks).

use super::*;

/// Whether this runs inside rt-vm.sh's guest (the host test sets RTLAB_RT_GUEST=1 there);
/// elsewhere the guest tests say so and do nothing (`cargo test -- --ignored` on a host).
pub(super) fn guest() -> bool {
    if std::env::var("RTLAB_RT_GUEST").as_deref() != Ok("1") {
        eprintln!("not inside scripts/rt-vm.sh's guest: skipped (the host test runs it there)");
        return false;
    }
    let rt = std::fs::read_to_string("/sys/kernel/realtime").unwrap_or_default();
    assert_eq!(rt.trim(), "1", "the guest's kernel is not PREEMPT_RT");
    true
}

pub(super) fn sh(args: &[&str]) -> String {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

pub(super) fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default().trim().to_string()
}

/// (policy, rt priority) of a task from /proc/PID/stat: "other", "fifo", "rr", ...
pub(super) fn sched(pid: u32) -> (&'static str, u32) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = s[s.rfind(')').unwrap() + 2..].split_whitespace().collect();
    // fields 40 (rt_priority) and 41 (policy) of proc(5); f[0] is field 3
    let prio: u32 = f[37].parse().unwrap();
    let policy = match f[38] {
        "0" => "other",
        "1" => "fifo",
        "2" => "rr",
        "3" => "batch",
        "5" => "idle",
        _ => "deadline",
    };
    (policy, prio)
}

pub(super) fn comm(pid: u32) -> String {
    read(&format!("/proc/{pid}/comm"))
}

/// Kernel and user tasks whose comm starts with one of `prefixes`.
pub(super) fn tasks(prefixes: &[String]) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| prefixes.iter().any(|x| comm(*p).starts_with(x.as_str())))
        .collect();
    v.sort();
    v
}

/// The guest's NICs are one for all its tests: a test holds this while it uses them.
pub(super) static NIC_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The two virtio NICs of rt-vm.sh's guest, by name, as every test wants them: both in this
/// namespace (a test before that failed may have left one in a namespace of its own, with a
/// process holding it there), under the names udev gave them (the boot renames eth0/eth1 to
/// enp0sN: 15-22 s into a TCG boot), up, with no address, VLAN or root qdisc left from
/// before. Waits for that at most 2 minutes and says what it waited for. The guard keeps
/// them this test's until it ends.
pub(super) fn nics() -> (Vec<String>, std::sync::MutexGuard<'static, ()>) {
    let lock = NIC_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // the suite's namespaces and whatever runs in them (a reflector a failed test left)
    for ns in read_cmd(&["ip", "netns", "list"]).lines() {
        let name = ns.split_whitespace().next().unwrap_or("");
        if name.starts_with("rtvm-") {
            Netns::remove(name);
        }
    }
    let _ = Command::new("udevadm").args(["settle", "--timeout=60"]).status();
    let virtio = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
            .unwrap()
            .filter_map(|e| {
                let n = e.ok()?.file_name().into_string().ok()?;
                let d = std::fs::read_link(format!("/sys/class/net/{n}/device/driver")).ok()?;
                d.ends_with("virtio_net").then_some(n)
            })
            .collect();
        v.sort();
        v
    };
    // two, and the same two names a second apart (no rename under way)
    let end = Instant::now() + Duration::from_secs(120);
    let mut last = virtio();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = virtio();
        if now.len() == 2 && now == last {
            break;
        }
        assert!(
            Instant::now() < end,
            "waited 2 min for rt-vm.sh's two virtio NICs in the guest's root namespace, under \
             settled names: found {now:?}; /sys/class/net: {:?}; namespaces: {:?}",
            std::fs::read_dir("/sys/class/net")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect::<Vec<_>>(),
            read_cmd(&["ip", "netns", "list"])
        );
        last = now;
    }
    for nic in &last {
        // VLANs on it (NAME@NIC), its root qdisc, addresses and neighbours
        for l in read_cmd(&["ip", "-o", "link", "show"]).lines() {
            let name = l.split(':').nth(1).unwrap_or("").trim();
            if let Some((vlan, _)) = name.split_once(&format!("@{nic}")) {
                sh(&["ip", "link", "del", vlan]);
            }
        }
        let _ = Command::new("tc")
            .args(["qdisc", "del", "dev", nic, "root"])
            .stderr(Stdio::null())
            .status();
        sh(&["ip", "addr", "flush", "dev", nic]);
        let _ = Command::new("ip").args(["neigh", "flush", "dev", nic]).output();
        sh(&["ip", "link", "set", nic, "up"]);
    }
    (last, lock)
}

/// A command's stdout, whatever its exit code.
pub(super) fn read_cmd(args: &[&str]) -> String {
    Command::new(args[0]).args(&args[1..]).output().map(|o| stdout(&o)).unwrap_or_default()
}

/// The IRQ threads of a virtio NIC's queues (`irq/N-virtioK-input.0`, `...-output.0`).
pub(super) fn nic_irq_threads(nic: &str) -> Vec<u32> {
    let dev = std::fs::read_link(format!("/sys/class/net/{nic}/device")).unwrap();
    let virtio = dev.file_name().unwrap().to_str().unwrap().to_string();
    let irqs: Vec<String> = read("/proc/interrupts")
        .lines()
        .filter(|l| {
            l.contains(&format!("{virtio}-input")) || l.contains(&format!("{virtio}-output"))
        })
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect();
    assert!(!irqs.is_empty(), "no queue IRQs of {nic} ({virtio}) in /proc/interrupts");
    tasks(&irqs.iter().map(|n| format!("irq/{n}-")).collect::<Vec<_>>())
}

pub(super) fn ksoftirqd() -> Vec<u32> {
    tasks(&["ksoftirqd/".to_string()])
}

/// A process standing for the application.
pub(super) fn app() -> Child {
    Command::new("sleep").arg("600").spawn().unwrap()
}

/// A `tune apply ... --hold` running in the background, its output collected.
pub(super) struct Held {
    pub(super) child: Child,
    pub(super) journal: PathBuf,
    pub(super) lines: mpsc::Receiver<String>,
    pub(super) out: String,
}

impl Held {
    pub(super) fn start(args: &[&str], journal: &Path) -> Held {
        let mut child = rtlab()
            .args(["tune", "apply"])
            .args(args)
            .args(["--hold", "20m", "--journal"])
            .arg(journal)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        for r in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(r).lines().map_while(Result::ok) {
                    let _ = tx.send(l);
                }
            });
        }
        let mut h = Held { child, journal: journal.to_path_buf(), lines, out: String::new() };
        h.wait_for("holding for");
        h
    }

    /// Collect output until a line contains `what` (at most 3 minutes: TCG is slow).
    pub(super) fn wait_for(&mut self, what: &str) {
        let end = Instant::now() + Duration::from_secs(180);
        while Instant::now() < end {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    let hit = l.contains(what);
                    self.out.push_str(&l);
                    self.out.push('\n');
                    if hit {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("'{what}' never came from tune apply:\n{}", self.out);
    }

    /// Ctrl-C: the profile is restored, then the process ends; returns its whole output.
    pub(super) fn interrupt(mut self) -> String {
        sh(&["kill", "-INT", &self.child.id().to_string()]);
        let st = self.child.wait().unwrap();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.out.push_str(&l);
            self.out.push('\n');
        }
        assert_eq!(st.code(), Some(0), "tune apply after Ctrl-C:\n{}", self.out);
        std::mem::take(&mut self.out)
    }
}

impl Drop for Held {
    /// A test that ends before its `interrupt` (a failed assert) still has the profile
    /// restored: Ctrl-C, then SIGKILL and `tune restore` if it has not ended in 2 minutes.
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let end = Instant::now() + Duration::from_secs(120);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = rtlab().args(["tune", "restore", "--journal"]).arg(&self.journal).output();
        }
    }
}

pub(super) fn json_of(args: &[&str]) -> Value {
    let o = rtlab().args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Wait (3 min at most: TCG) until rtlab's hwlat instance runs the tracer; its path.
pub(super) fn hwlat_instance_running(tracing: &str) -> String {
    let end = Instant::now() + Duration::from_secs(180);
    while Instant::now() < end {
        let found = std::fs::read_dir(format!("{tracing}/instances"))
            .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .find(|i| i.starts_with("rtlab-hwlat"))
            .map(|i| format!("{tracing}/instances/{i}"));
        if let Some(p) = found.filter(|p| read(&format!("{p}/current_tracer")) == "hwlat") {
            // past tracing_on 1: a moment more
            std::thread::sleep(Duration::from_millis(500));
            return p;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("rtlab's hwlat instance never ran the tracer");
}

/// `rtlab noise --tracer hwlat` on CPU 1: refused in one line while hwlat runs at the top
/// level; then run for 4 s, its samples (TCG stalls the detector for milliseconds) in the
/// streams, and tracefs as found afterwards (the top-level tracer, the threshold, the
/// detector's width, window and mode, the cpumask; rtlab's instance gone, no journal); the
/// same after a Ctrl-C, and after a kill -9 once `rtlab tune restore` ran.
pub(super) fn hwlat_runs_on_cpu_1_and_tracefs_is_left_as_found() {
    let tracing = "/sys/kernel/tracing";
    let mounted = Path::new(&format!("{tracing}/available_tracers")).exists();
    if !mounted {
        sh(&["mount", "-t", "tracefs", "nodev", tracing]);
    }
    let files = [
        "current_tracer",
        "tracing_thresh",
        "tracing_cpumask",
        "tracing_on",
        "hwlat_detector/width",
        "hwlat_detector/window",
        "hwlat_detector/mode",
    ];
    let state = || files.map(|f| read(&format!("{tracing}/{f}")));
    let before = state();
    eprintln!("tracefs before hwlat: {before:?}");
    // someone else's hwlat: one line, exit 2, nothing changed
    std::fs::write(format!("{tracing}/current_tracer"), "hwlat").unwrap();
    let o =
        rtlab().args(["noise", "--tracer", "hwlat", "--cpus", "1", "--duration", "2s"]).output();
    std::fs::write(format!("{tracing}/current_tracer"), "nop").unwrap();
    let o = o.unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    // the guest sees the host's /var: a journal another rtlab left there is warned of first
    let said: Vec<&str> = err.lines().filter(|l| !l.starts_with("warning: journal ")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("hwlat runs already"), "{err}");
    assert!(stdout(&o).is_empty(), "said before anything else: {}", stdout(&o));
    assert_eq!(state(), before);
    // rtlab's own run
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("hwlat.json");
    let o = rtlab()
        .args(["noise", "--tracer", "hwlat", "--cpus", "1", "--duration", "4s", "-q", "--json"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    assert_eq!(v["config"]["tracer"], "hwlat");
    let streams = v["streams"].as_array().unwrap();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu1", "cpu1.stolen"]);
    let l = &streams[0]["labels"];
    eprintln!("hwlat on CPU 1: {l}");
    assert_eq!((l["tracer"].as_str(), l["mode"].as_str()), (Some("hwlat"), Some("round-robin")));
    assert_eq!(
        (l["width_us"].as_str(), l["window_us"].as_str()),
        (Some("500000"), Some("1000000"))
    );
    let samples: u64 = l["samples"].as_str().unwrap().parse().unwrap();
    assert!(samples >= 1, "TCG's stalls are samples of the detector: {l}");
    assert_eq!(streams[0]["stats"]["count"].as_u64(), Some(samples));
    assert_eq!(streams[1]["stats"]["count"].as_u64(), Some(samples));
    // one sample a window at most: the windows are the CPU's spinning time over the width
    let measured: u64 = l["measured_ns"].as_str().unwrap().parse().unwrap();
    assert!(measured > 0 && measured.is_multiple_of(500_000_000), "{l}");
    assert!(samples <= measured / 500_000_000 + 1, "{l}");
    let count: u64 = l["count"].as_str().unwrap().parse().unwrap();
    assert!(count >= samples, "each sample counts at least its own gap: {l}");
    assert!(streams[0]["stats"]["min_ns"].as_i64().unwrap() > 1_000, "above the threshold: {l}");
    assert!(
        streams[1]["stats"]["max_ns"].as_i64() >= streams[0]["stats"]["max_ns"].as_i64(),
        "stolen (inner + outer) is at least the largest gap"
    );
    assert_eq!(state(), before, "tracefs as found");
    let inst = std::fs::read_dir(format!("{tracing}/instances"))
        .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
        .unwrap_or_default();
    assert!(!inst.iter().any(|i| i.starts_with("rtlab-hwlat")), "{inst:?}");
    assert!(!Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists());
    // Ctrl-C while it runs: the run ends, its result says so, tracefs as found
    let f = d.path().join("hwlat-int.json");
    let mut child = rtlab()
        .args(["noise", "--tracer", "hwlat", "--cpus", "1", "--duration", "10m", "-q", "--json"])
        .arg(&f)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    hwlat_instance_running(tracing);
    sh(&["kill", "-INT", &child.id().to_string()]);
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "after Ctrl-C");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(state(), before, "tracefs as found after Ctrl-C");
    assert!(!Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists());
    // kill -9 while it runs: the journal stays, `rtlab tune restore` puts tracefs back
    let mut child = rtlab()
        .args(["noise", "--tracer", "hwlat", "--cpus", "1", "--duration", "10m", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let inst = hwlat_instance_running(tracing);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists());
    assert_eq!(read(&format!("{inst}/current_tracer")), "hwlat", "left running by kill -9");
    // the trace journal only (a profile journal on the host's /var is not this test's)
    let journal = rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL;
    let o = rtlab().args(["tune", "restore", "--journal", journal]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(state(), before, "tracefs as found after kill -9 and tune restore");
    assert!(!Path::new(&inst).exists(), "{inst} removed by tune restore");
    assert!(!Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists());
    if !mounted {
        sh(&["umount", tracing]);
    }
}

/// `guest()`, in the 8-CPU guest (isolcpus=6-7 nohz_full=6-7 rcu_nocbs=6-7).
pub(super) fn guest8() -> bool {
    if !guest() {
        return false;
    }
    assert_eq!(read("/sys/devices/system/cpu/online"), "0-7", "the many-CPU guest has 8 CPUs");
    true
}
