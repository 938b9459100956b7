//! rtlab on a real PREEMPT_RT kernel: the host test boots Debian's `linux-image-rt-amd64`
//! in QEMU through `scripts/rt-vm.sh` (virtme-ng, this machine's filesystem as the guest's
//! root) and runs this same test binary inside with `--ignored guest_`; the `guest_` tests
//! are the suite. They assert behaviour only: under TCG, timings are not real.
//!
//! The guest: 2 CPUs, command line `isolcpus=1 nohz_full=1 rcu_nocbs=1`, cgroup v2, two
//! virtio NICs joined by a QEMU hub (what one sends, the other receives). A second guest has
//! 8 CPUs, the last two isolated (`guest8_` tests: noise, `tune check` and rt-isolation on a
//! robot computer's core count).
//!
//! The same guest tests run on Debian's arm64 PREEMPT_RT kernel (`linux-image-rt-arm64`) in
//! qemu-system-aarch64 through `scripts/arm64-vm.sh` (a Debian 12 arm64 root as the guest's
//! initramfs): this file built for aarch64 (`scripts/aarch64.sh cargo test --no-run
//! --target aarch64-unknown-linux-gnu -p rtlab --test rt_kernel`, which builds the aarch64
//! rtlab beside it) is copied in with its rtlab and run there the same way.
//!
//! The host test skips with its reason when not root or when rt-vm.sh says what is missing;
//! `RTLAB_REQUIRE_RT_VM=1` (set by `.ci/run`) turns that skip into a failure; the arm64 one
//! the same with arm64-vm.sh, `scripts/aarch64.sh` and `RTLAB_REQUIRE_ARM64_VM=1`.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The kernel command line of the suite's guest.
const APPEND: &str = "isolcpus=1 nohz_full=1 rcu_nocbs=1";

/// Every test of the suite: each must report `ok` from inside the guest.
const GUEST_TESTS: [&str; 9] = [
    "guest_a_failed_test_leaves_the_nics_as_found_for_the_next",
    "guest_tune_check_passes_what_the_command_line_enabled",
    "guest_launch_times_through_etf_taprio_and_the_xdp_path_over_the_nic",
    "guest_rt_kthreads_sets_irq_threads_ksoftirqd_and_the_application_and_restores",
    "guest_trace_on_spike_runs_rtla_timerlat_alongside",
    "guest_rt_isolation_makes_an_isolated_partition_and_restores",
    "guest_udp_ping_over_the_nic_under_rt_kthreads_accounts_for_every_datagram",
    "guest_mqprio_and_vlan_egress_map_are_applied_seen_and_restored",
    "guest_noise_measures_the_isolated_cpu_busy_and_through_osnoise_and_hwlat",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rt-vm.sh")
}

/// The many-CPU guest (a robot computer's 8 cores): its kernel command line isolates the
/// last two.
const APPEND8: &str = "isolcpus=6-7 nohz_full=6-7 rcu_nocbs=6-7";

/// Every test of the many-CPU guest.
const GUEST8_TESTS: [&str; 2] = [
    "guest8_noise_and_tune_check_cover_every_cpu",
    "guest8_rt_isolation_takes_the_rt_cpu_among_eight",
];

/// The arm64 guest's own tests, beside every `guest_` test: what qemu-user cannot run.
const GUESTARM_TESTS: [&str; 1] = ["guestarm_pubsub_over_every_middleware_on_the_arm64_kernel"];

/// One guest at a time: two TCG guests would each take the other's CPU time.
static VM: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn rt_kernel_suite_passes_inside_a_preempt_rt_vm() {
    let Some(g) = Guest::x86() else { return };
    suite(&g, &["guest_"], &GUEST_TESTS, APPEND, 2);
}

#[test]
fn rt_kernel_suite_passes_inside_an_8_cpu_preempt_rt_vm() {
    let Some(g) = Guest::x86() else { return };
    suite(&g, &["guest8_"], &GUEST8_TESTS, APPEND8, 8);
}

#[test]
fn rt_kernel_suite_passes_inside_an_arm64_preempt_rt_vm() {
    let Some(g) = Guest::arm64() else { return };
    let tests = [&GUEST_TESTS[..], &GUESTARM_TESTS[..]].concat();
    suite(&g, &["guest_", "guestarm_"], &tests, APPEND, 2);
}

/// Where a suite runs: the script that boots the guest, this file's test binary for the
/// guest's CPU, and the files the guest needs copied in (arm64-vm.sh's guest has its own
/// root: the aarch64 test binary and rtlab).
struct Guest {
    script: PathBuf,
    exe: PathBuf,
    files: Vec<PathBuf>,
    /// Binaries to copy into the guest's RAM first, each then mounted over its own path:
    /// rt-vm.sh's root is this machine's over 9p, where a TCG guest reads the 260 MB debug
    /// rtlab again on every start (3 s each; 0.9 s from RAM).
    in_ram: Vec<PathBuf>,
}

/// Why the suites need root (a skip says it).
const ROOT_FOR: &str = "QEMU, tracefs and the profiles need it";

impl Guest {
    /// rt-vm.sh's guest (this machine's files, this test binary), when it can run here (else
    /// the skip said why).
    fn x86() -> Option<Guest> {
        if !script_ready(&script(), "RTLAB_REQUIRE_RT_VM", "the RT-kernel suite", ROOT_FOR) {
            return None;
        }
        let exe = std::env::current_exe().unwrap();
        let in_ram = vec![exe.clone(), PathBuf::from(env!("CARGO_BIN_EXE_rtlab"))];
        Some(Guest { script: script(), exe, files: vec![], in_ram })
    }

    /// The arm64 guest, when it can run here (else the skip said why).
    fn arm64() -> Option<Guest> {
        const REQUIRE: &str = "RTLAB_REQUIRE_ARM64_VM";
        let what = "the arm64 RT-kernel suite";
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        if !script_ready(&scripts.join("arm64-vm.sh"), REQUIRE, what, ROOT_FOR)
            || !script_ready(&scripts.join("aarch64.sh"), REQUIRE, what, ROOT_FOR)
        {
            return None;
        }
        // this file and rtlab built for aarch64: the newest such test binary
        let target = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/aarch64-unknown-linux-gnu/debug")
            .canonicalize()
            .ok();
        let newest = target.as_ref().and_then(|t| {
            std::fs::read_dir(t.join("deps"))
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().into_owned();
                    n.starts_with("rt_kernel-") && !n.contains('.')
                })
                .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        });
        let (Some(t), Some(exe)) = (target, newest) else {
            skip(
                REQUIRE,
                what,
                "no aarch64 build of this test (bash scripts/aarch64.sh cargo test --no-run \
                 --target aarch64-unknown-linux-gnu -p rtlab --test rt_kernel)",
            );
            return None;
        };
        let rtlab = t.join("rtlab");
        let files = vec![exe.clone(), rtlab];
        Some(Guest { script: scripts.join("arm64-vm.sh"), files, exe, in_ram: vec![] })
    }
}

/// Boot `guest` with `cpus` CPUs and `append`, run each of `tests` (every test of this
/// binary named with one of `prefixes`) inside, one at a time, and require each to pass.
fn suite(guest: &Guest, prefixes: &[&str], tests: &[&str], append: &str, cpus: u32) {
    let exe = &guest.exe;
    // `tests` is every guest test of this binary with those prefixes
    let listed = Command::new(exe).args(["--list", "--ignored"]).output().unwrap();
    let mut have: Vec<String> = stdout(&listed)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| prefixes.iter().any(|p| t.starts_with(p)))
        .map(String::from)
        .collect();
    have.sort();
    let mut want: Vec<String> = tests.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(have, want, "the list names every {prefixes:?} test of this file");
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    // one at a time, each with its time (a TCG guest is slow: the suite's time is said)
    let mut to_ram = String::new();
    if !guest.in_ram.is_empty() {
        to_ram.push_str("mkdir -p /run/rtlab-ram && mount -t tmpfs rtlab-ram /run/rtlab-ram && ");
        for (i, f) in guest.in_ram.iter().enumerate() {
            let f = f.display();
            to_ram.push_str(&format!(
                "cp {f} /run/rtlab-ram/{i} && mount --bind /run/rtlab-ram/{i} {f} && "
            ));
        }
    }
    let guest_cmd = format!(
        "{to_ram}rc=0; for t in {}; do s=$(date +%s); env RTLAB_RT_GUEST=1 {} --ignored --exact \
         --test-threads=1 --nocapture $t || rc=1; echo \"rt-guest: $t: $(($(date +%s) - s)) s\"; \
         done; exit $rc",
        tests.join(" "),
        exe.display()
    );
    // the command as a file the guest reads (rt-vm.sh's guest sees this machine's files,
    // arm64-vm.sh's gets a copy): virtme-ng hands a command to the guest on the kernel's
    // command line, which ends at 2 048 bytes (a longer one boots to nothing)
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("suite.sh");
    std::fs::write(&script, &guest_cmd).unwrap();
    let mut files = Vec::new();
    for f in guest.files.iter().chain(if guest.files.is_empty() { None } else { Some(&script) }) {
        files.push("--file".into());
        files.push(f.display().to_string());
    }
    let o = Command::new("bash")
        .arg(&guest.script)
        .args(["--append", append, "--cpus", &cpus.to_string(), "--timeout", "1500"])
        .args(&files)
        .arg("--")
        .args(["sh", &script.display().to_string()])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    let all = format!("--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(o.status.code(), Some(0), "the suite failed in the guest:\n{all}");
    for t in tests {
        assert!(out.contains(&format!("test {t} ... ok")), "{t} did not pass in the guest:\n{all}");
    }
    assert_eq!(out.matches("test result: ok. 1 passed").count(), tests.len(), "{all}");
    let said = |l: &&str| {
        l.starts_with("rt-vm:") || l.starts_with("arm64-vm:") || l.starts_with("rt-guest:")
    };
    // straight to stderr, not through the test harness's capture: CI's log shows the times
    let times = out.lines().chain(err.lines()).filter(said).collect::<Vec<_>>().join("\n");
    let _ = writeln!(std::io::stderr(), "{times}");
}

// ---- inside the guest ----------------------------------------------------------------------

/// Whether this runs inside rt-vm.sh's guest (the host test sets RTLAB_RT_GUEST=1 there);
/// elsewhere the guest tests say so and do nothing (`cargo test -- --ignored` on a host).
fn guest() -> bool {
    if std::env::var("RTLAB_RT_GUEST").as_deref() != Ok("1") {
        eprintln!("not inside scripts/rt-vm.sh's guest: skipped (the host test runs it there)");
        return false;
    }
    let rt = std::fs::read_to_string("/sys/kernel/realtime").unwrap_or_default();
    assert_eq!(rt.trim(), "1", "the guest's kernel is not PREEMPT_RT");
    true
}

fn sh(args: &[&str]) -> String {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default().trim().to_string()
}

/// (policy, rt priority) of a task from /proc/PID/stat: "other", "fifo", "rr", ...
fn sched(pid: u32) -> (&'static str, u32) {
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

fn comm(pid: u32) -> String {
    read(&format!("/proc/{pid}/comm"))
}

/// Kernel and user tasks whose comm starts with one of `prefixes`.
fn tasks(prefixes: &[String]) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| prefixes.iter().any(|x| comm(*p).starts_with(x.as_str())))
        .collect();
    v.sort();
    v
}

/// The guest's NICs are one for all its tests: a test holds this while it uses them.
static NIC_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The two virtio NICs of rt-vm.sh's guest, by name, as every test wants them: both in this
/// namespace (a test before that failed may have left one in a namespace of its own, with a
/// process holding it there), under the names udev gave them (the boot renames eth0/eth1 to
/// enp0sN: 15-22 s into a TCG boot), up, with no address, VLAN or root qdisc left from
/// before. Waits for that at most 2 minutes and says what it waited for. The guard keeps
/// them this test's until it ends.
fn nics() -> (Vec<String>, std::sync::MutexGuard<'static, ()>) {
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
fn read_cmd(args: &[&str]) -> String {
    Command::new(args[0]).args(&args[1..]).output().map(|o| stdout(&o)).unwrap_or_default()
}

/// The IRQ threads of a virtio NIC's queues (`irq/N-virtioK-input.0`, `...-output.0`).
fn nic_irq_threads(nic: &str) -> Vec<u32> {
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

fn ksoftirqd() -> Vec<u32> {
    tasks(&["ksoftirqd/".to_string()])
}

/// A process standing for the application.
fn app() -> Child {
    Command::new("sleep").arg("600").spawn().unwrap()
}

/// A `tune apply ... --hold` running in the background, its output collected.
struct Held {
    child: Child,
    journal: PathBuf,
    lines: mpsc::Receiver<String>,
    out: String,
}

impl Held {
    fn start(args: &[&str], journal: &Path) -> Held {
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
    fn wait_for(&mut self, what: &str) {
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
    fn interrupt(mut self) -> String {
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

fn json_of(args: &[&str]) -> Value {
    let o = rtlab().args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_tune_check_passes_what_the_command_line_enabled() {
    if !guest() {
        return;
    }
    let v = json_of(&["tune", "check", "--json", "-"]);
    let checks = v["checks"].as_array().unwrap();
    let by =
        |id: &str| checks.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("{id}: {v}"));
    // what the kernel and its command line (isolcpus=1 nohz_full=1 rcu_nocbs=1) enabled
    for id in [
        "preempt-rt",
        "preemption-model",
        "isolcpus",
        "nohz-full",
        "rcu-nocbs",
        "threaded-irqs",
        "tracing",
    ] {
        assert_eq!(by(id)["status"], "pass", "{}", by(id));
        assert_eq!(by(id)["remedy"], "", "{}", by(id));
    }
    assert!(by("isolcpus")["found"].as_str().unwrap().contains('1'), "{}", by("isolcpus"));
    // what it did not: each said with its remedy (timer migration, RT throttling and
    // ksoftirqd are left as Debian boots them)
    for id in ["timer-migration", "rt-throttling", "ksoftirqd"] {
        assert_eq!(by(id)["status"], "warn", "{}", by(id));
        assert!(!by(id)["remedy"].as_str().unwrap().is_empty(), "{}", by(id));
    }
    assert_eq!(by("virtualization")["status"], "warn", "a QEMU guest: {}", by("virtualization"));
    // Debian's RT kernel has no RT group scheduling: root gets FIFO anywhere
    assert_eq!(by("rt-privilege")["status"], "pass", "{}", by("rt-privilege"));
    assert_eq!(by("rt-group-sched")["status"], "pass", "{}", by("rt-group-sched"));
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_rt_kthreads_sets_irq_threads_ksoftirqd_and_the_application_and_restores() {
    if !guest() {
        return;
    }
    let (n, _nics) = nics();
    let nic = n[0].clone();
    let irq = nic_irq_threads(&nic);
    let soft = ksoftirqd();
    assert!(!soft.is_empty());
    let mut a = app();
    let pid = a.id();
    let all: Vec<u32> = irq.iter().chain(&soft).copied().chain([pid]).collect();
    let before: Vec<_> = all.iter().map(|p| sched(*p)).collect();
    let runtime = read("/proc/sys/kernel/sched_rt_runtime_us");
    let in_force = || {
        for p in &irq {
            assert_eq!(sched(*p), ("fifo", 90), "{} ({p})", comm(*p));
        }
        for p in &soft {
            assert_eq!(sched(*p), ("fifo", 60), "{} ({p})", comm(*p));
        }
        assert_eq!(sched(pid), ("fifo", 80), "the application");
        assert_eq!(read("/proc/sys/kernel/sched_rt_runtime_us"), "-1");
    };
    let put_back = |how: &str| {
        let now: Vec<_> = all.iter().map(|p| sched(*p)).collect();
        assert_eq!(now, before, "after {how}: {all:?}");
        assert_eq!(read("/proc/sys/kernel/sched_rt_runtime_us"), runtime, "after {how}");
    };
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    let args = ["rt-kthreads", "--nic", &nic, "--pid", &pid.to_string()];

    // applied, then Ctrl-C: restored by the process itself
    let h = Held::start(&args, &j);
    in_force();
    let out = h.interrupt();
    assert!(out.contains("IRQ threads: FIFO 90") && out.contains("ksoftirqd: FIFO 60"), "{out}");
    put_back("Ctrl-C");
    assert!(!j.exists(), "the journal is removed once restored");

    // applied, then kill -9: still in force, `tune restore` puts every one back
    let mut h = Held::start(&args, &j);
    in_force();
    h.child.kill().unwrap();
    h.child.wait().unwrap();
    in_force();
    let o = rtlab().args(["tune", "restore", "--journal"]).arg(&j).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "tune restore: {}", stderr(&o));
    assert!(stdout(&o).contains("put back"), "{}", stdout(&o));
    put_back("kill -9 and tune restore");
    a.kill().unwrap();
    a.wait().unwrap();
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_trace_on_spike_runs_rtla_timerlat_alongside() {
    if !guest() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("timer.json");
    // under TCG every wake-up takes far more than 1 us: the first one is the spike
    let o = rtlab()
        .args(["timer", "--duration", "3s", "--trace-on-spike", "1us", "-q", "--json"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    let spike = &v["evidence"]["spike"];
    assert!(!spike["attribution"].as_array().unwrap().is_empty(), "{spike}");
    let t = &spike["timerlat"];
    assert!(t.is_object(), "no timerlat beside the spike tracer: {spike}");
    assert!(t["error"].is_null(), "{t}");
    // rtla stops at its first latency above the threshold (here the first one): a CPU's row
    // may then hold one thread latency and no IRQ sample yet (`#0`, IRQ columns `-`)
    assert!(t["stopped_by_threshold"].is_boolean(), "{t}");
    let cpus = t["per_cpu"].as_array().unwrap();
    assert!(!cpus.is_empty(), "{t}");
    let some = |c: &Value, k: &str| c[k].as_u64().is_some_and(|v| v > 0);
    assert!(cpus.iter().any(|c| some(c, "thread_max_ns") || some(c, "irq_max_ns")), "{t}");
    for c in cpus {
        for side in ["irq", "thread"] {
            let (min, max) = (&c[format!("{side}_min_ns")], &c[format!("{side}_max_ns")]);
            if let (Some(min), Some(max)) = (min.as_u64(), max.as_u64()) {
                assert!(max >= min, "{c}");
            }
        }
    }
    // rtla's instances are gone afterwards
    let inst = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
        .unwrap_or_default();
    assert!(!inst.iter().any(|i| i.starts_with("timerlat")), "{inst:?}");
}

/// Wait (3 min at most: TCG) until rtlab's hwlat instance runs the tracer; its path.
fn hwlat_instance_running(tracing: &str) -> String {
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
fn hwlat_runs_on_cpu_1_and_tracefs_is_left_as_found() {
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

/// `pubsub` over every middleware on the arm64 kernel (qemu-user lacks a socket option Fast
/// DDS and RustDDS set: aarch64_cli.rs runs the others there): each accounts for every
/// message, and the result names aarch64 as rtlab's architecture and the kernel's, without
/// the `emulated` warning (the guest's CPU is emulated by QEMU as a whole: the kernel is
/// arm64's own, and `virtualized` says the rest).
#[test]
#[ignore = "runs inside scripts/arm64-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_an_arm64_preempt_rt_vm)"]
fn guestarm_pubsub_over_every_middleware_on_the_arm64_kernel() {
    if !guest() {
        return;
    }
    assert_eq!(std::env::consts::ARCH, "aarch64");
    for t in ["shm", "zenoh", "cyclonedds", "fastdds", "rustdds"] {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.json");
        // 20 Hz, 40 messages, a 5 s loss timeout: the test is of behaviour, not rate. Under TCG
        // with the x86 guest beside it, RustDDS's event loop fell more than its 1 s write
        // timeout behind at 100 Hz (stop 52's CI), and zenoh's 80 received at 100 Hz all came
        // more than the default 500 ms after they were sent (stop 52's CI): late, not samples
        let o = rtlab()
            .args(["pubsub", "--transport", t, "--count", "40", "--rate", "20hz"])
            .args(["--loss-timeout", "5s", "-q"])
            .arg("--json")
            .arg(&f)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{t}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let env = &v["environment"];
        assert_eq!(
            (&env["architecture"], &env["kernel_architecture"]),
            (&"aarch64".into(), &"aarch64".into()),
            "{env}"
        );
        assert!(!v["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "emulated"), "{t}");
        // every stream says how many were published, and accounts for each
        for s in v["streams"].as_array().unwrap().iter().filter(|s| s["metric"] != "send_lateness")
        {
            assert!(s["labels"]["published"].is_string(), "{t}: {s}");
        }
        assert_accounted(&v, t);
    }
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_noise_measures_the_isolated_cpu_busy_and_through_osnoise_and_hwlat() {
    if !guest() {
        return;
    }
    hwlat_runs_on_cpu_1_and_tracefs_is_left_as_found();
    // osnoise: the kernel's workload thread on CPU 1, its periods and attribution parsed,
    // tracefs as found afterwards (rtlab's instance gone, the osnoise settings back)
    let tracing = "/sys/kernel/tracing";
    let mounted = Path::new(&format!("{tracing}/available_tracers")).exists();
    let cpus_before = read(&format!("{tracing}/osnoise/cpus"));
    let thresh_before = read(&format!("{tracing}/tracing_thresh"));
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("osnoise.json");
    let o = rtlab()
        .args(["noise", "--tracer", "osnoise", "--cpus", "1", "--duration", "3s", "-q", "--json"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    let streams = v["streams"].as_array().unwrap();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu1", "cpu1.stolen"]);
    let l = &streams[0]["labels"];
    assert_eq!(l["tracer"], "osnoise");
    let periods: u64 = l["periods"].as_str().unwrap().parse().unwrap();
    assert!(periods >= 1, "the tracer's period summaries were read: {l}");
    assert_eq!(streams[1]["stats"]["count"].as_u64(), Some(periods));
    eprintln!("osnoise on CPU 1: {l}");
    assert_eq!(Path::new(&format!("{tracing}/available_tracers")).exists(), mounted);
    if mounted {
        assert_eq!(read(&format!("{tracing}/osnoise/cpus")), cpus_before);
        assert_eq!(read(&format!("{tracing}/tracing_thresh")), thresh_before);
        let inst = std::fs::read_dir(format!("{tracing}/instances"))
            .map(|r| r.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect::<Vec<_>>())
            .unwrap_or_default();
        assert!(!inst.iter().any(|i| i.starts_with("rtlab-noise")), "{inst:?}");
    }
    assert!(!Path::new(rtlab_evidence::tracer::DEFAULT_TRACE_JOURNAL).exists());
    // the busy loop on the isolated CPU (isolcpus=1 nohz_full=1): both streams, the thread
    // where it was put; under TCG a clock read can take longer than the threshold, and the
    // result says so
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("noise.json");
    let o = rtlab()
        .args(["noise", "--cpus", "1", "--duration", "2s", "-q", "--json"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    let streams = v["streams"].as_array().unwrap();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cpu1", "cpu1.stolen"]);
    let l = &streams[0]["labels"];
    assert_eq!((l["policy_seen"].as_str(), l["cpus_seen"].as_str()), (Some("fifo"), Some("[1]")));
    let per_read = l["measured_ns"].as_str().unwrap().parse::<i64>().unwrap()
        / l["reads"].as_str().unwrap().parse::<i64>().unwrap();
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["code"] == "noise-threshold-near-read-time");
    assert_eq!(warned, per_read * 2 > 1_000, "{per_read} ns a read: {}", v["warnings"]);
    eprintln!("noise on the isolated CPU 1: {per_read} ns a read, labels {l}");
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_rt_isolation_makes_an_isolated_partition_and_restores() {
    if !guest() {
        return;
    }
    let (n, _nics) = nics();
    let nic = n[0].clone();
    let subtree = read("/sys/fs/cgroup/cgroup.subtree_control");
    let qdisc = sh(&["tc", "qdisc", "show", "dev", &nic]);
    let mut a = app();
    let pid = a.id();
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    // the RT CPU is the last one: CPU 1, the one isolcpus= took
    let h = Held::start(&["rt-isolation", "--nic", &nic, "--pid", &pid.to_string()], &j);
    assert_eq!(read("/sys/fs/cgroup/rtlab-rt/cpuset.cpus.partition"), "isolated", "{}", h.out);
    assert_eq!(read("/sys/fs/cgroup/rtlab-rt/cpuset.cpus"), "1");
    assert_eq!(read(&format!("/proc/{pid}/cgroup")), "0::/rtlab-rt", "{}", h.out);
    let status = read(&format!("/proc/{pid}/status"));
    assert!(status.contains("Cpus_allowed_list:\t1\n"), "{status}");
    assert_eq!(sched(pid), ("fifo", 80));
    // what cannot move is said: the per-CPU kernel threads of CPU 1
    assert!(h.out.contains("cannot move") && h.out.contains("ksoftirqd/1"), "{}", h.out);
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert!(!Path::new("/sys/fs/cgroup/rtlab-rt").exists(), "{out}");
    assert_eq!(read(&format!("/proc/{pid}/cgroup")), "0::/");
    assert_eq!(read("/sys/fs/cgroup/cgroup.subtree_control"), subtree);
    assert_eq!(sh(&["tc", "qdisc", "show", "dev", &nic]), qdisc);
    assert_eq!(sched(pid), ("other", 0));
    a.kill().unwrap();
    a.wait().unwrap();
}

// ---- inside the many-CPU guest ---------------------------------------------------------------

/// `guest()`, in the 8-CPU guest (isolcpus=6-7 nohz_full=6-7 rcu_nocbs=6-7).
fn guest8() -> bool {
    if !guest() {
        return false;
    }
    assert_eq!(read("/sys/devices/system/cpu/online"), "0-7", "the many-CPU guest has 8 CPUs");
    true
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's 8-CPU PREEMPT_RT guest (rt_kernel_suite_passes_inside_an_8_cpu_preempt_rt_vm)"]
fn guest8_noise_and_tune_check_cover_every_cpu() {
    if !guest8() {
        return;
    }
    // noise without --cpus: a busy thread pinned on each of the 8 CPUs, two streams each
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("noise.json");
    let o = rtlab().args(["noise", "--duration", "2s", "-q", "--json"]).arg(&f).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    let names: Vec<&str> =
        v["streams"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    let want: Vec<String> =
        (0..8).flat_map(|c| [format!("cpu{c}"), format!("cpu{c}.stolen")]).collect();
    assert_eq!(names, want);
    for c in 0..8 {
        let l = &stream(&v, &format!("cpu{c}"))["labels"];
        assert_eq!(l["cpus_seen"].as_str(), Some(format!("[{c}]").as_str()), "cpu{c}: {l}");
        assert_eq!(l["policy_seen"], "fifo", "cpu{c}: {l}");
        assert!(l["reads"].as_str().unwrap().parse::<u64>().unwrap() > 0, "cpu{c}: {l}");
    }
    // tune check: the isolated pair found, the housekeeping rows about them, the noise row
    // measuring the isolated CPUs (where the real-time work goes), the ksoftirqd row naming
    // every CPU
    let v = json_of(&["tune", "check", "--json", "-"]);
    let checks = v["checks"].as_array().unwrap();
    let by = |id: &str| {
        let c = checks.iter().find(|c| c["id"] == id).unwrap_or_else(|| panic!("{id}: {v}"));
        c["found"].as_str().unwrap().to_string()
    };
    for id in ["isolcpus", "nohz-full", "rcu-nocbs"] {
        assert!(by(id).contains("6-7"), "{id}: {}", by(id));
    }
    for id in ["watchdogs", "vmstat", "workqueue"] {
        assert!(by(id).contains("6-7") && !by(id).contains("no isolated CPUs"), "{id}: {}", by(id));
    }
    let noise = by("noise");
    let ksoftirqd = by("ksoftirqd");
    for c in 0..8 {
        let measured = noise.contains(&format!("cpu{c}: max"));
        assert_eq!(measured, c >= 6, "noise row, cpu{c}: {noise}");
        assert!(ksoftirqd.contains(&format!("ksoftirqd/{c} ")), "cpu{c}: {ksoftirqd}");
    }
    assert!(noise.contains("the isolated CPUs"), "{noise}");
    eprintln!("tune check on 8 CPUs: noise {noise}");
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's 8-CPU PREEMPT_RT guest (rt_kernel_suite_passes_inside_an_8_cpu_preempt_rt_vm)"]
fn guest8_rt_isolation_takes_the_rt_cpu_among_eight() {
    if !guest8() {
        return;
    }
    let (n, _nics) = nics();
    let nic = n[0].clone();
    let subtree = read("/sys/fs/cgroup/cgroup.subtree_control");
    let mut a = app();
    let pid = a.id();
    let d = tempfile::tempdir().unwrap();
    // the RT CPU: the last one by default, else --rt-cpu (one of the two isolcpus= took)
    for (rt_cpu, cpu) in [(None, "7"), (Some("6"), "6")] {
        let j = d.path().join(format!("journal-{cpu}"));
        let mut args = vec!["rt-isolation", "--nic", &nic];
        let p = pid.to_string();
        args.extend(["--pid", &p]);
        if let Some(c) = rt_cpu {
            args.extend(["--rt-cpu", c]);
        }
        let h = Held::start(&args, &j);
        let part = read("/sys/fs/cgroup/rtlab-rt/cpuset.cpus.partition");
        assert_eq!(part, "isolated", "CPU {cpu}: {}", h.out);
        assert_eq!(read("/sys/fs/cgroup/rtlab-rt/cpuset.cpus"), cpu, "{}", h.out);
        assert_eq!(read(&format!("/proc/{pid}/cgroup")), "0::/rtlab-rt", "{}", h.out);
        let status = read(&format!("/proc/{pid}/status"));
        assert!(status.contains(&format!("Cpus_allowed_list:\t{cpu}\n")), "{status}");
        assert_eq!(sched(pid), ("fifo", 80));
        // the per-CPU kernel threads of that CPU alone cannot move
        assert!(h.out.contains(&format!("ksoftirqd/{cpu}")), "{}", h.out);
        let out = h.interrupt();
        assert!(out.contains("restored"), "{out}");
        assert!(!Path::new("/sys/fs/cgroup/rtlab-rt").exists(), "{out}");
        assert_eq!(read(&format!("/proc/{pid}/cgroup")), "0::/");
        assert_eq!(read("/sys/fs/cgroup/cgroup.subtree_control"), subtree);
        assert_eq!(sched(pid), ("other", 0));
    }
    a.kill().unwrap();
    a.wait().unwrap();
}

/// A network namespace holding `nic` with `addr`; deleting it gives the NIC back.
struct Netns(&'static str, String);

impl Netns {
    fn with(name: &'static str, nic: &str, addr: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
        sh(&["ip", "netns", "add", name]);
        sh(&["ip", "link", "set", nic, "netns", name]);
        sh(&["ip", "-n", name, "link", "set", "lo", "up"]);
        sh(&["ip", "-n", name, "addr", "add", addr, "dev", nic]);
        sh(&["ip", "-n", name, "link", "set", nic, "up"]);
        Netns(name, nic.to_string())
    }
}

impl Netns {
    /// Ends what runs in namespace `name` (SIGTERM, then SIGKILL after 10 s), then deletes it.
    fn remove(name: &str) {
        let pids = || read_cmd(&["ip", "netns", "pids", name]);
        for sig in ["-TERM", "-KILL"] {
            for pid in pids().split_whitespace() {
                let _ = Command::new("kill").args([sig, pid]).stderr(Stdio::null()).status();
            }
            let end = Instant::now() + Duration::from_secs(10);
            while !pids().trim().is_empty() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        Netns::remove(self.0);
        // the physical NIC comes back to the root namespace once the namespace is gone
        let end = Instant::now() + Duration::from_secs(30);
        while !Path::new(&format!("/sys/class/net/{}", self.1)).exists() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The link between the guest's two NICs: the far one in namespace `rtvm-far` at 10.77.0.2,
/// the near one here at 10.77.0.1, both up.
struct NicLink {
    near: String,
    far: String,
    ns: Netns,
    _nics: std::sync::MutexGuard<'static, ()>,
}

fn nic_link() -> NicLink {
    let (n, _nics) = nics();
    let (near, far) = (n[0].clone(), n[1].clone());
    let ns = Netns::with("rtvm-far", &far, "10.77.0.2/24");
    sh(&["ip", "addr", "replace", "10.77.0.1/24", "dev", &near]);
    sh(&["ip", "link", "set", &near, "up"]);
    std::thread::sleep(Duration::from_secs(2));
    NicLink { near, far, ns, _nics }
}

/// A process a test started and stops itself; killed if the test ends first (a failed
/// assert), so that nothing it holds (a namespace, a NIC) outlives the test.
struct Proc(Option<Child>);

impl Proc {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A reflector (`udp reflect`) that says it listens, stopped with `stop`.
fn reflector(extra: &[&str], netns: &str, bind: &str, json: &Path) -> Proc {
    let mut c = Proc(Some(
        rtlab()
            .args(["udp", "reflect"])
            .args(extra)
            .args(["--netns", netns, "--bind", bind, "-q", "--json"])
            .arg(json)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut l = String::new();
    BufReader::new(c.child().stdout.as_mut().unwrap()).read_line(&mut l).unwrap();
    assert!(l.contains("listening on"), "{l}");
    c
}

/// Ctrl-C to a reflector: it writes its result document and ends with 0.
fn stop(mut p: Proc) {
    let c = p.0.take().unwrap();
    sh(&["kill", "-INT", &c.id().to_string()]);
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// `udp ping` COUNT datagrams (every 5 ms unless `extra` gives a --period); asserts every one
/// is accounted for; returns its document.
fn ping_all_accounted(extra: &[&str], to: &str, count: u64, dir: &Path) -> Value {
    let pjson = dir.join("ping.json");
    let period: &[&str] = if extra.contains(&"--period") { &[] } else { &["--period", "5ms"] };
    let o = rtlab()
        .args(["udp", "ping", "--to", to, "--count", &count.to_string()])
        .args(period)
        .args(extra)
        .args(["-q", "--json"])
        .arg(&pjson)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "udp ping: {}", stderr(&o));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&pjson).unwrap()).unwrap();
    let s = &d["streams"][0];
    let st = &s["stats"];
    let sent: u64 = s["labels"]["sent"].as_str().unwrap().parse().unwrap();
    let (got, lost) = (st["count"].as_u64().unwrap(), st["lost"].as_u64().unwrap());
    assert_eq!(sent + st["overruns"].as_u64().unwrap(), count, "{st}");
    assert_eq!(got + lost, sent, "every datagram sent is answered or lost: {st}");
    for k in ["duplicates", "malformed"] {
        assert_eq!(st[k], 0, "{k}: {st}");
    }
    d
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_udp_ping_over_the_nic_under_rt_kthreads_accounts_for_every_datagram() {
    if !guest() {
        return;
    }
    let link = nic_link();
    let near = link.near.clone();
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    let irq = nic_irq_threads(&near);
    let h = Held::start(&["rt-kthreads", "--nic", &near], &j);
    for p in &irq {
        assert_eq!(sched(*p), ("fifo", 90), "{}", comm(*p));
    }
    let rjson = d.path().join("reflect.json");
    let r = reflector(&[], link.ns.0, "10.77.0.2:7777", &rjson);
    let before: u64 =
        read(&format!("/sys/class/net/{near}/statistics/rx_packets")).parse().unwrap();
    let p = ping_all_accounted(&[], "10.77.0.2:7777", 300, d.path());
    stop(r);
    let s = &p["streams"][0];
    let sent: u64 = s["labels"]["sent"].as_str().unwrap().parse().unwrap();
    // the answers came in through the NIC (its driver, its IRQ threads at FIFO 90)
    let after: u64 = read(&format!("/sys/class/net/{near}/statistics/rx_packets")).parse().unwrap();
    let got = s["stats"]["count"].as_u64().unwrap();
    assert!(after - before >= got, "rx_packets {before} -> {after}, {got} answers");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rjson).unwrap()).unwrap();
    let rs = &r["streams"][0];
    assert_eq!(
        rs["labels"]["received"],
        (sent + 1).to_string(),
        "the requests and one hello: {rs}"
    );
    assert_eq!(p["config"]["ping"]["rt"]["policy"], "fifo", "{}", p["config"]);
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    for q in &irq {
        assert_eq!(sched(*q), ("fifo", 50), "{}", comm(*q));
    }
    sh(&["ip", "addr", "flush", "dev", &near]);
    drop(link);
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_a_failed_test_leaves_the_nics_as_found_for_the_next() {
    if !guest() {
        return;
    }
    // Issue 45: a test that failed with the far NIC in its namespace left its reflector
    // running there (the namespace, and the NIC, held by it) and its profile applied, and
    // every test after it saw one NIC. A failure on purpose, here, with all three:
    let d = tempfile::tempdir().unwrap();
    let (j, rjson, f) =
        (d.path().join("journal"), d.path().join("reflect.json"), d.path().join("p.toml"));
    std::fs::write(&f, "[profile.q]\nqdisc = [\"htb\"]\n").unwrap();
    let near = std::sync::Mutex::new(String::new());
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let link = nic_link();
        *near.lock().unwrap() = link.near.clone();
        let h = Held::start(&["q", "--file", f.to_str().unwrap(), "--nic", &link.near], &j);
        assert!(sh(&["tc", "qdisc", "show", "dev", &link.near]).contains("qdisc htb"), "{}", h.out);
        let _r = reflector(&[], link.ns.0, "10.77.0.2:7777", &rjson);
        panic!("(on purpose) a test failing with a reflector in rtvm-far and a profile held");
    }));
    assert!(failed.is_err());
    // its guards put back what it held: the profile restored, nothing of rtlab running, the
    // far NIC back in this namespace
    let near = near.into_inner().unwrap();
    assert!(!j.exists(), "the profile's journal is restored and removed");
    assert!(!sh(&["tc", "qdisc", "show", "dev", &near]).contains("qdisc htb"));
    assert_eq!(tasks(&["rtlab".to_string()]), Vec::<u32>::new(), "an rtlab left running");
    assert!(!read_cmd(&["ip", "netns", "list"]).contains("rtvm-"));
    let (n, _nics) = nics();
    assert_eq!(n.len(), 2);
    assert!(n.contains(&near), "{n:?}");
}

/// Packets of a `tc -s class show` class line's next "Sent N bytes M pkt".
fn class_packets(show: &str, class: &str) -> u64 {
    let mut l = show.lines();
    while let Some(x) = l.next() {
        if x.starts_with(class) {
            let sent = l.next().unwrap_or("");
            let w: Vec<&str> = sent.split_whitespace().collect();
            return w.get(3).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{sent}"));
        }
    }
    panic!("no '{class}' in:\n{show}");
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_mqprio_and_vlan_egress_map_are_applied_seen_and_restored() {
    if !guest() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    let rjson = d.path().join("reflect.json");
    // this host's kernel has neither; Debian's loads them
    sh(&["modprobe", "sch_mqprio"]);
    sh(&["modprobe", "8021q"]);

    vlan_egress_map_on_the_vm_nic(d.path(), &j, &rjson);
    mqprio_on_a_veth_with_queues(d.path(), &j, &rjson);
}

/// 1. (of the test above) The VM's NIC: mqprio refused, htb kept, its VLAN's egress map.
fn vlan_egress_map_on_the_vm_nic(
    d: &std::path::Path,
    j: &std::path::Path,
    rjson: &std::path::Path,
) {
    // 1. the VM's NIC has one queue: mqprio is refused and htb kept; its VLAN gets the egress
    //    map (SKB priority n -> PCP n), seen on the wire at the far NIC
    let (n, _nics) = nics();
    let (near, far) = (n[0].clone(), n[1].clone());
    let vlan = format!("{near}.100");
    sh(&["ip", "link", "set", &near, "up"]);
    sh(&["ip", "link", "add", "link", &near, "name", &vlan, "type", "vlan", "id", "100"]);
    sh(&["ip", "addr", "add", "10.78.0.1/24", "dev", &vlan]);
    sh(&["ip", "link", "set", &vlan, "up"]);
    let ns = Netns::with("rtvm-vlan", &far, "10.77.1.2/24");
    let fvlan = format!("{far}.100");
    sh(&[
        "ip", "-n", ns.0, "link", "add", "link", &far, "name", &fvlan, "type", "vlan", "id", "100",
    ]);
    sh(&["ip", "-n", ns.0, "addr", "add", "10.78.0.2/24", "dev", &fvlan]);
    sh(&["ip", "-n", ns.0, "link", "set", &fvlan, "up"]);
    std::thread::sleep(Duration::from_secs(2));
    // the egress map in force, SKB priority -> PCP; an unmapped priority gets PCP 0, and the
    // kernel never forgets a mapping once made (restored, it reads "4:0")
    let map_of = |v: &str| -> std::collections::BTreeMap<u32, u32> {
        read(&format!("/proc/net/vlan/{v}"))
            .lines()
            .find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:").map(str::to_string))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|m| m.split_once(':'))
            .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()))
            .filter(|(_, pcp)| *pcp != 0)
            .collect()
    };
    let map_before = map_of(&vlan);
    let qdisc_before = sh(&["tc", "qdisc", "show", "dev", &near]);
    let h = Held::start(&["rt-affinities", "--nic", &near], j);
    assert!(h.out.contains("not available: mqprio") && h.out.contains("htb"), "{}", h.out);
    assert!(h.out.contains("done    VLAN egress map"), "{}", h.out);
    assert_eq!(map_of(&vlan), (1..8).map(|i| (i, i)).collect(), "egress map in force");
    assert!(sh(&["tc", "qdisc", "show", "dev", &near]).contains("qdisc htb 1: root"));
    // on the wire: the far NIC sees PCP 4 on the datagrams sent with SO_PRIORITY 4
    let mut cap = Command::new("timeout")
        .args([
            "60", "ip", "netns", "exec", ns.0, "tcpdump", "-i", &far, "-e", "-n", "-c", "5", "-l",
        ])
        .args(["vlan", "100", "and", "udp", "and", "dst", "port", "7778"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump (apt-get install tcpdump)");
    // the datagrams go out once tcpdump listens (it says so on stderr)
    let mut said = String::new();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    while !said.contains("listening on") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            panic!("tcpdump ended before listening: {said}");
        }
        said.push_str(&l);
    }
    let r = reflector(&[], ns.0, "10.78.0.2:7778", rjson);
    ping_all_accounted(&["--so-priority", "4"], "10.78.0.2:7778", 50, d);
    stop(r);
    let seen = cap.wait_with_output().unwrap();
    let seen = stdout(&seen);
    assert_eq!(seen.lines().filter(|l| l.contains("vlan 100, p 4")).count(), 5, "{seen}");
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(map_of(&vlan), map_before, "egress map after restore");
    assert_eq!(sh(&["tc", "qdisc", "show", "dev", &near]), qdisc_before);
    sh(&["ip", "link", "del", &vlan]);
    drop(ns);
}

/// 2. (of the test above) mqprio for real on a veth with four queues.
fn mqprio_on_a_veth_with_queues(d: &std::path::Path, j: &std::path::Path, rjson: &std::path::Path) {
    // 2. mqprio for real on a NIC with queues (a veth with 4 TX queues: QEMU's hub gives the
    //    virtio NIC one): SO_PRIORITY 4 -> traffic class 0, seen in the class counters
    sh(&["ip", "netns", "add", "rtvm-mq"]);
    sh(&["ip", "netns", "add", "rtvm-mq-far"]);
    let ip = |ns: &str, rest: &[&str]| {
        let mut a = vec!["ip", "-n", ns];
        a.extend_from_slice(rest);
        sh(&a);
    };
    ip(
        "rtvm-mq",
        &[
            "link",
            "add",
            "v0",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "v1",
            "netns",
            "rtvm-mq-far",
        ],
    );
    ip("rtvm-mq", &["addr", "add", "10.79.0.1/24", "dev", "v0"]);
    ip("rtvm-mq", &["link", "set", "v0", "up"]);
    ip("rtvm-mq-far", &["addr", "add", "10.79.0.2/24", "dev", "v1"]);
    ip("rtvm-mq-far", &["link", "set", "v1", "up"]);
    let tcs = |rest: &[&str]| {
        let mut a = vec!["ip", "netns", "exec", "rtvm-mq", "tc"];
        a.extend_from_slice(rest);
        sh(&a)
    };
    // and a VLAN on it: the egress map is set inside the namespace
    ip("rtvm-mq", &["link", "add", "link", "v0", "name", "v0.100", "type", "vlan", "id", "100"]);
    let ns_map = || {
        let info = sh(&["ip", "netns", "exec", "rtvm-mq", "cat", "/proc/net/vlan/v0.100"]);
        let m = info.lines().find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:"));
        m.unwrap_or("").split_whitespace().filter(|m| !m.ends_with(":0")).count()
    };
    assert_eq!(ns_map(), 0);
    let qdisc_before = tcs(&["qdisc", "show", "dev", "v0"]);
    let h = Held::start(&["rt-affinities", "--netns", "rtvm-mq", "--nic", "v0"], j);
    assert!(h.out.contains("mqprio (S1"), "{}", h.out);
    assert!(h.out.contains("done    VLAN egress map on v0's VLANs"), "{}", h.out);
    assert_eq!(ns_map(), 7, "1:1 ... 7:7 in force in the namespace");
    assert!(!h.out.contains("not available: mqprio"), "{}", h.out);
    let q = tcs(&["qdisc", "show", "dev", "v0"]);
    assert!(q.contains("qdisc mqprio") && q.contains("tc 3 map 2 2 1 1 0"), "{q}");
    let root = q
        .lines()
        .find(|l| l.starts_with("qdisc mqprio"))
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let tc0 = format!("class mqprio {root}1 parent {root}ffe0");
    let r = reflector(&[], "rtvm-mq-far", "10.79.0.2:7779", rjson);
    let before = class_packets(&tcs(&["-s", "class", "show", "dev", "v0"]), &tc0);
    let p =
        ping_all_accounted(&["--netns", "rtvm-mq", "--so-priority", "4"], "10.79.0.2:7779", 100, d);
    stop(r);
    let sent: u64 = p["streams"][0]["labels"]["sent"].as_str().unwrap().parse().unwrap();
    let after = class_packets(&tcs(&["-s", "class", "show", "dev", "v0"]), &tc0);
    assert!(
        after - before >= sent,
        "traffic class 0 sent {before} -> {after} packets, the ping {sent}"
    );
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(tcs(&["qdisc", "show", "dev", "v0"]), qdisc_before);
    assert_eq!(ns_map(), 0, "egress map after restore");
    let _ = Command::new("ip").args(["netns", "del", "rtvm-mq"]).status();
    let _ = Command::new("ip").args(["netns", "del", "rtvm-mq-far"]).status();
}

/// The stream named `name` of a result document.
fn stream<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["streams"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| {
        panic!(
            "no stream {name} in {:?}",
            d["streams"].as_array().unwrap().iter().map(|s| &s["name"]).collect::<Vec<_>>()
        )
    })
}

#[test]
#[ignore = "runs inside scripts/rt-vm.sh's PREEMPT_RT guest (rt_kernel_suite_passes_inside_a_preempt_rt_vm)"]
fn guest_launch_times_through_etf_taprio_and_the_xdp_path_over_the_nic() {
    if !guest() {
        return;
    }
    let link = nic_link();
    let (near, far, ns) = (link.near.clone(), link.far.clone(), link.ns.0);
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("p.toml");
    std::fs::write(
        &f,
        "[profile.launch]\nqdisc = [\"etf\"]\netf_delta_us = 5000\n\
         [profile.late]\nqdisc = [\"etf\"]\netf_delta_us = 1\n\
         [profile.window]\nqdisc = [\"taprio\"]\n",
    )
    .unwrap();
    let fs = f.to_str().unwrap();
    let j = d.path().join("journal");
    let qdisc = sh(&["tc", "qdisc", "show", "dev", &near]);

    // 1. etf on the NIC (a profile step, journaled), and launch times through it. As the
    // root qdisc of a one-queue NIC etf drops whatever has no launch time, ARP included:
    // the two ends know each other's MAC statically, as a TSN link's ends are configured
    let mac = |dev: &str, netns: Option<&str>| {
        let p = format!("/sys/class/net/{dev}/address");
        match netns {
            None => read(&p),
            Some(n) => sh(&["ip", "netns", "exec", n, "cat", &p]).trim().to_string(),
        }
    };
    let (near_mac, far_mac) = (mac(&near, None), mac(&far, Some(ns)));
    sh(&[
        "ip",
        "neigh",
        "replace",
        "10.77.0.2",
        "lladdr",
        &far_mac,
        "dev",
        &near,
        "nud",
        "permanent",
    ]);
    sh(&[
        "ip",
        "-n",
        ns,
        "neigh",
        "replace",
        "10.77.0.1",
        "lladdr",
        &near_mac,
        "dev",
        &far,
        "nud",
        "permanent",
    ]);
    let rjson = d.path().join("reflect.json");
    let r = reflector(&[], ns, "10.77.0.2:7777", &rjson);
    // etf releases each datagram etf_delta_us before its time and drops one it releases
    // after: a delta shorter than the machine's wake-up latency (1 us: any machine's, the
    // more so under QEMU's emulation, where timers fire ms late) drops every hello, and the
    // ping says that, not "no reflector" (with the default 200 us this happened to every
    // hello in this VM on a busy host: the suite's failure of issue 45)
    let h = Held::start(&["late", "--file", fs, "--nic", &near], &j);
    assert!(sh(&["tc", "qdisc", "show", "dev", &near]).contains("delta 1000 "), "{}", h.out);
    let o = rtlab()
        .args(["udp", "ping", "--to", "10.77.0.2:7777", "--period", "20ms", "--count", "10"])
        .args(["--txtime", "10ms", "-q"])
        .output()
        .unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("no reflector answered within 2000 ms: the qdisc dropped")
            && e.contains("hellos as released after their launch time")
            && e.contains("etf_delta"),
        "{e}"
    );
    assert!(h.interrupt().contains("restored"));
    // under QEMU's emulation the guest's timers fire ms late: etf gets 5 ms
    let h = Held::start(&["launch", "--file", fs, "--nic", &near], &j);
    let on = sh(&["tc", "qdisc", "show", "dev", &near]);
    assert!(on.contains("qdisc etf") && on.contains("delta 5000000 "), "{on}\n{}", h.out);
    let p = ping_all_accounted(
        &["--txtime", "10ms", "--period", "20ms"],
        "10.77.0.2:7777",
        100,
        d.path(),
    );
    stop(r);
    let sent: u64 = p["streams"][0]["labels"]["sent"].as_str().unwrap().parse().unwrap();
    assert_eq!(p["streams"][0]["labels"]["txtime_lead_ns"], "10000000");
    // a request handed over after its launch time (a late wake-up: TCG is slow) is dropped
    // by etf and reported on the error queue: it is a loss, and counted as a launch error
    let launch = stream(&p, "ping.send_lateness");
    let errors: u64 = launch["labels"]["launch_errors"].as_str().unwrap().parse().unwrap();
    let lost = p["streams"][0]["stats"]["lost"].as_u64().unwrap();
    assert!(lost >= errors, "every launch etf refused is a loss: {launch}");
    assert_eq!(
        launch["stats"]["count"].as_u64().unwrap() + errors,
        sent,
        "every launch stamped or refused: {launch}"
    );
    assert!(errors < sent, "launches went out: {launch}");
    assert_eq!(stream(&p, "ping.handoff_lateness")["stats"]["count"], sent);
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(sh(&["tc", "qdisc", "show", "dev", &near]), qdisc, "etf removed");

    taprio_window_on_a_veth_with_two_queues(fs, &j);

    // 3. the XDP path over the NIC's driver, both ends
    let rjson = d.path().join("reflect-xdp.json");
    let r = reflector(&["--xdp"], ns, "10.77.0.2:7778", &rjson);
    let p = ping_all_accounted(&["--xdp"], "10.77.0.2:7778", 200, d.path());
    stop(r);
    let labels = &p["streams"][0]["labels"];
    assert_eq!(
        (labels["path"].as_str(), labels["xdp_dev"].as_str()),
        (Some("xdp"), Some(near.as_str()))
    );
    assert!(["native", "generic"].contains(&labels["xdp_attach"].as_str().unwrap()), "{labels}");
    assert_eq!(p["streams"][0]["stats"]["lost"], 0, "{labels}");
    let rd: Value = serde_json::from_str(&std::fs::read_to_string(&rjson).unwrap()).unwrap();
    assert_eq!(rd["streams"][0]["labels"]["path"], "xdp");
    for (dev, netns) in [(near.as_str(), None), (far.as_str(), Some(ns))] {
        let mut c = vec!["ip"];
        if let Some(n) = netns {
            c.extend(["-n", n]);
        }
        c.extend(["-d", "link", "show", "dev", dev]);
        assert!(!sh(&c).contains("rtlab_steer"), "the program left on {dev}");
    }
    sh(&["ip", "addr", "flush", "dev", &near]);
    drop(link);
}

/// 2. (of the test above) taprio needs a device with 2 tx queues: the window on a veth pair.
fn taprio_window_on_a_veth_with_two_queues(fs: &str, j: &std::path::Path) {
    // 2. taprio needs a device with 2 tx queues: this VM's virtio NICs have one (QEMU's hub
    // gives no multiqueue), so the 802.1Qbv window is applied to a 2-queue veth pair
    let tap = "rtvm-tap";
    let _ = Command::new("ip").args(["netns", "del", tap]).stderr(Stdio::null()).status();
    sh(&["ip", "netns", "add", tap]);
    sh(&[
        "ip",
        "-n",
        tap,
        "link",
        "add",
        "tq0",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "tq1",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);
    sh(&["ip", "-n", tap, "link", "set", "tq0", "up"]);
    sh(&["ip", "-n", tap, "link", "set", "tq1", "up"]);
    let before = sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]);
    let h = Held::start(&["window", "--file", fs, "--nic", "tq0", "--netns", tap], j);
    let on = sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]);
    assert!(on.contains("qdisc taprio 100: root") && on.contains("250000"), "{on}\n{}", h.out);
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]), before, "taprio removed");
    sh(&["ip", "netns", "del", tap]);
}
