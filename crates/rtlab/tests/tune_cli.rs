//! `rtlab tune` through the binary: on a fake sysfs/procfs tree (no root needed), and for
//! real as root (`*_root_*` tests; CI runs as root): a held profile, kill -9, `tune restore`,
//! and a snapshot proving the machine is back as it was found.

mod common;
use common::{rtlab, ChildCgroup};
use rtlab_host::host::{FakeHost, Host, RealHost};
use rtlab_host::snapshot;
use rtlab_host::testing::{machine, put};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Root tests change the same machine: one at a time.
static MACHINE: Mutex<()> = Mutex::new(());

fn out(c: &mut Command) -> (i32, String, String) {
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Start `rtlab tune apply ... --hold` and wait until it holds; returns the child and its output so far.
fn start_held(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>, String) {
    let mut child =
        rtlab().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut text = String::new();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        text.push_str(&line);
        if line.starts_with("holding") {
            break;
        }
    }
    (child, r, text)
}

fn fake_snapshot(root: &Path) -> Vec<String> {
    let host = FakeHost::new(root);
    let s = snapshot::take(&host, None);
    let mut v: Vec<String> = s.files.iter().map(|(k, v)| format!("{k}={v}")).collect();
    v.extend(s.tasks.iter().map(|(k, t)| format!("{k:?}={t:?}")));
    v.push(format!("{:?}", s.cpusets));
    v.push(std::fs::read_to_string(root.join("sys/fs/cgroup/cpuset/tasks")).unwrap());
    v
}

#[test]
fn tune_check_on_a_fake_machine_reports_every_item() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "check", "--json", "-", "--root"]).arg(d.path()));
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    let ids: Vec<&str> = checks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    for id in [
        "preempt-rt",
        "preemption-model",
        "hz",
        "high-res-timers",
        "nohz-full",
        "isolcpus",
        "rcu-nocbs",
        "governor",
        "c-states",
        "smt",
        "rt-throttling",
        "irqbalance",
        "thp",
        "swap",
        "virtualization",
        "threaded-irqs",
        "ksoftirqd",
        "qdisc",
        "rt-privilege",
        "rt-group-sched",
        "rt-period",
        "timer-migration",
        "watchdogs",
        "vmstat",
        "workqueue",
    ] {
        assert!(ids.contains(&id), "{id} missing: {ids:?}");
    }
    let by = |id: &str| checks.iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(by("preempt-rt")["status"], "fail");
    assert_eq!(by("thp")["status"], "warn");
    assert_eq!(by("governor")["status"], "warn", "powersave in the fake tree");
    assert_eq!(by("rt-throttling")["status"], "warn");
    assert!(by("rt-throttling")["remedy"].as_str().unwrap().contains("-1"));
    assert_eq!(by("ksoftirqd")["status"], "warn");
    let (pass, warn, fail) = (
        v["summary"]["pass"].as_u64().unwrap(),
        v["summary"]["warn"].as_u64().unwrap(),
        v["summary"]["fail"].as_u64().unwrap(),
    );
    assert_eq!(
        (pass + warn + fail) as usize,
        checks.iter().filter(|c| c["status"] != "info").count()
    );
    assert!(!ids.contains(&"noise"), "a fake tree has no CPUs to measure: {ids:?}");
}

#[test]
fn root_tune_check_measures_the_noise_on_the_real_time_cpus() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!(
            "needs root (the noise row measures at FIFO 80)"
        ));
        return;
    }
    // alone: the other root tests hold this binary's machine lock while they apply profiles
    let _one = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "check", "--noise", "300ms", "--json", "-"]));
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let row = v["checks"].as_array().unwrap().iter().find(|c| c["id"] == "noise").cloned();
    let row = row.unwrap_or_else(|| panic!("no noise row: {v}"));
    let found = row["found"].as_str().unwrap();
    // every online CPU here (no isolcpus), each measured: its max, stolen share and gaps
    let online = rtlab_sys::cpus::online_cpus(std::path::Path::new("/")).0;
    for c in &online {
        assert!(found.contains(&format!("cpu{c}: max ")), "{found}");
    }
    assert!(found.contains("(every online CPU, 300ms each, fifo 80, gaps above 1 us)"), "{found}");
    assert!(["pass", "warn", "fail"].contains(&row["status"].as_str().unwrap()), "{row}");
    if row["status"] != "pass" {
        assert!(row["remedy"].as_str().unwrap().contains("rtlab noise --cpus N"), "{row}");
    }
    // the terminal's row, and none with --noise 0; a bad duration is one line, exit 2
    let (code, text, _) = out(rtlab().args(["tune", "check", "--noise", "100ms"]));
    assert_eq!(code, 0);
    assert!(text.lines().any(|l| l.contains("noise (measured)")), "{text}");
    // (this passed on a refusal, exit 2 and nothing printed, until its code was asserted)
    let (code, text, err) = out(rtlab().args(["tune", "check", "--noise", "0"]));
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("real-time privilege") && !text.contains("noise (measured)"), "{text}");
    let (code, _, err) = out(rtlab().args(["tune", "check", "--noise", "soon"]));
    assert_eq!((code, err.trim_end().lines().count()), (2, 1), "{err}");
    assert!(err.contains("--noise"), "{err}");
}

#[test]
fn root_tune_check_in_a_child_cgroup_prints_every_row() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let Some(cg) = ChildCgroup::new(&format!("rtlab-check-{}", std::process::id())) else {
        rtlab_sys::test_skip::skipped(format_args!(
            "no cpu cgroup controller to make a child cgroup in"
        ));
        return;
    };
    let _one = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    // issue 38: in a child cgroup without real-time runtime the noise row's FIFO 80 was
    // refused and `tune check` ended there (exit 2, no table)
    let o = cg.rtlab(&["tune", "check", "--noise", "100ms", "--json", "-"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let rows = v["checks"].as_array().unwrap();
    let row = rows.iter().find(|c| c["id"] == "noise").expect("the noise row");
    let found = row["found"].as_str().unwrap();
    if cg.refuses_realtime() {
        assert!(found.contains("other: the kernel refused fifo 80 (EPERM)"), "{row}");
        assert_ne!(row["status"], "pass", "{row}");
        let remedy = row["remedy"].as_str().unwrap();
        assert!(remedy.contains("root cgroup") && remedy.contains("--profile rt-normal"), "{row}");
        let rt = rows.iter().find(|c| c["id"] == "rt-group-sched").unwrap();
        assert_eq!(rt["status"], "fail", "{rt}");
    } else {
        assert!(found.contains("fifo 80"), "{row}");
    }
    // every row in the terminal too
    let o = cg.rtlab(&["tune", "check", "--noise", "100ms"]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.lines().any(|l| l.contains("noise (measured)")), "{text}");
    let row_lines = text
        .lines()
        .filter(|l| ["pass ", "warn ", "FAIL ", "info "].iter().any(|w| l.starts_with(w)))
        .count();
    assert_eq!(row_lines, rows.len(), "{text}");
}

#[test]
fn tune_dry_run_changes_nothing_and_skips_with_reasons() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let before = fake_snapshot(d.path());
    let j = d.path().join("journal");
    let (code, stdout, stderr) = out(rtlab()
        .args(["tune", "apply", "rt-kthreads", "--dry-run", "--root"])
        .arg(d.path())
        .arg("--journal")
        .arg(&j));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("will  ksoftirqd: FIFO 60 (2 threads)"), "{stdout}");
    assert!(stdout.contains("will  eth0 IRQ threads: FIFO 90 (irq/41-virtio3-rx)"), "{stdout}");
    assert!(stdout.contains("dry run: nothing changed"));
    assert!(!j.exists());
    assert_eq!(fake_snapshot(d.path()), before);
    // without the IRQ thread (IRQs not threaded, like this machine) the step is skipped with the reason
    std::fs::remove_dir_all(d.path().join("proc/50")).unwrap();
    let (_, stdout, _) = out(rtlab()
        .args(["tune", "apply", "rt-kthreads", "--dry-run", "--root"])
        .arg(d.path())
        .arg("--journal")
        .arg(&j));
    assert!(stdout.contains("skip  eth0 IRQ threads: FIFO 90 (IRQs are not threaded"), "{stdout}");
}

#[test]
fn tune_fake_kill9_then_restore_puts_back_the_fake_machine() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "rtlab-fake-pinned", "14\n22\n");
    let before = fake_snapshot(d.path());
    let j = d.path().join("journal");
    let root = d.path().display().to_string();
    let jj = j.display().to_string();
    let (mut child, _out, text) = start_held(&[
        "tune",
        "apply",
        "rt-isolation",
        "--hold",
        "60s",
        "--root",
        &root,
        "--journal",
        &jj,
        "--pid",
        "812",
    ]);
    assert!(text.contains("holding for 60s"), "{text}");
    assert!(
        text.contains("cannot move (per-CPU kernel threads): 14 (ksoftirqd/0): EINVAL"),
        "{text}"
    );
    let host = FakeHost::new(d.path());
    assert_eq!(host.read("/proc/irq/41/smp_affinity").unwrap(), "2");
    assert_eq!(host.read("/sys/fs/cgroup/cpuset/rtlab-rt/tasks").unwrap(), "812");
    assert_eq!(host.sched_get(812).unwrap(), (1, 80));
    assert_ne!(fake_snapshot(d.path()), before);
    child.kill().unwrap(); // SIGKILL: no restore from the process
    child.wait().unwrap();
    let (_, shown, _) = out(rtlab().args(["tune", "show", "--root", &root, "--journal", &jj]));
    assert!(shown.contains("no longer running"), "{shown}");
    assert!(shown.contains("/proc/irq/41/smp_affinity: 3 -> 2  [in force]"), "{shown}");
    let (code, restored, stderr) =
        out(rtlab().args(["tune", "restore", "--root", &root, "--journal", &jj]));
    assert_eq!(code, 0, "{stderr}");
    assert!(restored.contains("journal") && restored.contains("removed"), "{restored}");
    assert!(!j.exists());
    assert_eq!(fake_snapshot(d.path()), before);
}

#[test]
fn tune_restore_refuses_a_live_rtlab_s_journal_unless_forced() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let before = fake_snapshot(d.path());
    let j = d.path().join("journal");
    let root = d.path().display().to_string();
    let jj = j.display().to_string();
    let (mut child, _out, text) = start_held(&[
        "tune",
        "apply",
        "rt-normal",
        "--hold",
        "60s",
        "--root",
        &root,
        "--journal",
        &jj,
    ]);
    assert!(text.contains("holding for 60s"), "{text}");
    let pid = child.id();
    // the live rtlab still holds its profile: restore names it and changes nothing
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "restore", "--root", &root, "--journal", &jj]));
    let running = child.try_wait().unwrap().is_none();
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains(&format!("pid {pid} (rtlab tune apply rt-normal)")), "{stderr}");
    assert!(stderr.contains("still running") && stderr.contains("--force"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(j.exists() && running, "nothing undone, the holder untouched");
    assert_ne!(fake_snapshot(d.path()), before);
    // --force puts it back now
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "restore", "--force", "--root", &root, "--journal", &jj]));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("removed"), "{stdout}");
    assert!(!j.exists());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(fake_snapshot(d.path()), before);
}

#[test]
fn tune_bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("p.toml");
    std::fs::write(&f, "[profile.mine]\nbase = \"rt-normal\"\nksoftirqd_priority = 120\n").unwrap();
    let jj = d.path().join("j").display().to_string();
    for (args, want) in [
        (vec!["tune", "apply", "nope", "--dry-run"], "profile 'nope' does not exist"),
        (vec!["tune", "apply", "rt-normal", "--hold", "0s", "--journal", &jj], "--hold 0s"),
        (vec!["tune", "apply", "rt-normal", "--rt-cpu", "999", "--dry-run"], "--rt-cpu 999"),
        (
            vec!["tune", "apply", "mine", "--dry-run", "--file", f.to_str().unwrap()],
            "ksoftirqd_priority = 120",
        ),
        (
            vec!["tune", "apply", "rt-normal", "--dry-run", "--nic", "nosuchnic0"],
            "--nic nosuchnic0",
        ),
    ] {
        let (code, _, stderr) = out(rtlab().args(&args));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    std::fs::write(&f, "[profile.mine]\nbase = \"rt-normal\"\nunknown_field = 1\n").unwrap();
    let (code, _, stderr) =
        out(rtlab().args(["tune", "apply", "mine", "--dry-run", "--file", f.to_str().unwrap()]));
    assert_eq!(code, 2);
    assert!(stderr.contains("p.toml") && stderr.contains("unknown_field"), "{stderr}");
}

#[test]
fn tune_user_profile_from_a_file_merges_its_base() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let f = d.path().join("p.toml");
    std::fs::write(&f, "[profile.robot]\ndescription = \"my robot\"\nbase = \"rt-kthreads\"\nksoftirqd_priority = 55\nrt_runtime_us = 900000\n").unwrap();
    let (code, stdout, stderr) = out(rtlab()
        .args(["tune", "apply", "robot", "--dry-run", "--file"])
        .arg(&f)
        .arg("--root")
        .arg(d.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("profile robot: my robot"), "{stdout}");
    assert!(stdout.contains("ksoftirqd: FIFO 55"), "{stdout}");
    assert!(stdout.contains("sched_rt_runtime_us = 900000"), "{stdout}");
}

// ---------------------------------------------------------------- as root, on this machine

fn is_root() -> bool {
    rtlab_sys::tasks::is_root()
}

/// Removes the test's namespace, kills its helper and restores a journal left behind, also
/// when an assertion fails, so the machine is left as found.
struct Cleanup {
    netns: Option<String>,
    journal: std::path::PathBuf,
    children: Vec<Child>,
    /// An `rtlab tune apply` still holding when the test failed: killed first.
    holder: Option<i32>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(pid) = self.holder {
            let _ = rtlab_sys::tasks::kill_pid(pid, 9);
            std::thread::sleep(Duration::from_millis(100));
        }
        for c in self.children.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.journal.exists() {
            let _ = rtlab()
                .args(["tune", "restore", "--force", "--journal"])
                .arg(&self.journal)
                .output();
        }
        if let Some(ns) = &self.netns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn netns_with_veth(ns: &str) -> bool {
    let ok = |a: &[&str]| {
        Command::new("ip").args(a).output().map(|o| o.status.success()).unwrap_or(false)
    };
    ok(&["netns", "add", ns])
        && ok(&["-n", ns, "link", "add", "rtv0", "type", "veth", "peer", "name", "rtv1"])
        && ok(&["-n", ns, "link", "set", "rtv0", "up"])
}

#[test]
fn tune_root_kill9_mid_hold_then_restore_leaves_the_machine_as_found() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let _lock = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let ns = format!("rtlab-t5-{}", std::process::id());
    let sleeper = Command::new("sleep").arg("120").spawn().unwrap();
    let app = sleeper.id().to_string();
    let mut clean = Cleanup {
        netns: Some(ns.clone()),
        journal: d.path().join("journal"),
        children: vec![sleeper],
        holder: None,
    };
    assert!(netns_with_veth(&ns), "cannot create a netns with a veth");
    let host = RealHost::new();
    let before = snapshot::take(&host, Some(&ns));
    let f = d.path().join("p.toml");
    std::fs::write(&f, "[profile.all]\nbase = \"rt-isolation\"\nksoftirqd_priority = 60\nirq_thread_priority = 90\nqdisc = [\"mqprio\", \"htb\"]\n").unwrap();
    let jj = clean.journal.display().to_string();
    let (mut child, _out, text) = start_held(&[
        "tune",
        "apply",
        "all",
        "--file",
        f.to_str().unwrap(),
        "--hold",
        "120s",
        "--journal",
        &jj,
        "--nic",
        "rtv0",
        "--netns",
        &ns,
        "--pid",
        &app,
        "--rt-cpu",
        "1",
    ]);
    clean.holder = Some(child.id() as i32);
    assert!(text.contains("holding for 120s"), "{text}");
    // applied now: the cpuset, the app, ksoftirqd, the qdisc in the namespace, cpu_dma_latency
    assert!(Path::new("/sys/fs/cgroup/cpuset/rtlab-rt").is_dir(), "{text}");
    assert_eq!(
        std::fs::read_to_string("/sys/fs/cgroup/cpuset/rtlab-rt/tasks").unwrap().trim(),
        app
    );
    let (pol, prio) = rtlab_sys::tasks::sched_get(app.parse().unwrap()).unwrap();
    assert_eq!((pol, prio), (1, 80));
    assert!(text.contains("not available: mqprio"), "this kernel has no mqprio: {text}");
    let q = Command::new("tc").args(["-n", &ns, "qdisc", "show", "dev", "rtv0"]).output().unwrap();
    assert!(String::from_utf8_lossy(&q.stdout).contains("htb 1: root"));
    assert_eq!(
        rtlab_sys::pmqos::CpuDmaLatency::current(Path::new("/dev/cpu_dma_latency")).unwrap(),
        0
    );
    let k = rtlab_host::host::tasks(&host).into_iter().find(|(_, c)| c == "ksoftirqd/0").unwrap();
    assert_eq!(rtlab_sys::tasks::sched_get(k.0).unwrap(), (1, 60));
    // kill -9 in the middle of the hold
    child.kill().unwrap();
    child.wait().unwrap();
    clean.holder = None;
    assert!(clean.journal.exists(), "the journal survives a kill -9");
    let (code, restored, stderr) = out(rtlab().args(["tune", "restore", "--journal", &jj]));
    assert_eq!(code, 0, "{restored}{stderr}");
    let after = snapshot::take(&host, Some(&ns));
    let diff = before.diff(&after);
    assert!(diff.is_empty(), "not restored:\n{}", diff.join("\n"));
    assert!(!clean.journal.exists());
}

#[test]
fn tune_root_ctrl_c_restores_before_exit() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let _lock = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let mut clean =
        Cleanup { netns: None, journal: d.path().join("journal"), children: vec![], holder: None };
    let host = RealHost::new();
    let before = snapshot::take(&host, None);
    let jj = clean.journal.display().to_string();
    let (mut child, mut rest, text) =
        start_held(&["tune", "apply", "rt-kthreads", "--journal", &jj]);
    clean.holder = Some(child.id() as i32);
    assert!(text.contains("holding until Ctrl-C"), "{text}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap().trim(),
        "-1"
    );
    rtlab_sys::tasks::kill_pid(child.id() as i32, 2).unwrap();
    let mut tail = String::new();
    std::io::Read::read_to_string(&mut rest, &mut tail).unwrap();
    let status = child.wait().unwrap();
    clean.holder = None;
    assert_eq!(status.code(), Some(0), "{tail}");
    assert!(tail.contains("interrupted: restored"), "{tail}");
    let diff = before.diff(&snapshot::take(&host, None));
    assert!(diff.is_empty(), "not restored:\n{}", diff.join("\n"));
    assert!(!clean.journal.exists());
}

#[test]
fn tune_restore_also_puts_back_a_spike_tracer_killed_mid_trace() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "sys/kernel/tracing/trace", "");
    put(d.path(), "sys/kernel/tracing/tracing_on", "0\n");
    put(d.path(), "sys/kernel/tracing/available_tracers", "function nop\n");
    for e in rtlab_evidence::tracer::EVENTS {
        put(d.path(), &format!("sys/kernel/tracing/events/{e}/enable"), "0\n");
    }
    let before = fake_snapshot(d.path());
    let host = FakeHost::new(d.path());
    let tracer =
        rtlab_evidence::tracer::SpikeTracer::arm(&host, &d.path().join("journal.trace")).unwrap();
    assert!(tracer.notes.iter().any(|n| n.contains("no timerlat tracer")), "{:?}", tracer.notes);
    assert_eq!(host.read("/sys/kernel/tracing/tracing_on").unwrap(), "1");
    assert_eq!(host.read("/sys/kernel/tracing/events/sched/sched_switch/enable").unwrap(), "1");
    std::mem::forget(tracer); // kill -9 while tracing
    let (_, shown, _) = out(rtlab()
        .args(["tune", "show", "--root"])
        .arg(d.path())
        .arg("--journal")
        .arg(d.path().join("journal")));
    assert!(shown.contains("rtlab spike tracer"), "{shown}");
    let (code, restored, stderr) = out(rtlab()
        .args(["tune", "restore", "--root"])
        .arg(d.path())
        .arg("--journal")
        .arg(d.path().join("journal")));
    assert_eq!(code, 0, "{stderr}");
    assert!(restored.contains("journal.trace removed"), "{restored}");
    assert_eq!(fake_snapshot(d.path()), before);
    assert_eq!(host.read("/sys/kernel/tracing/tracing_on").unwrap(), "0");
}

#[test]
fn tune_isolation_on_cgroup_v2_plans_a_partition() {
    let d = tempfile::tempdir().unwrap();
    rtlab_host::testing::machine_v2(d.path());
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "apply", "rt-isolation", "--dry-run", "--root"]).arg(d.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("will  cpuset: CPUs 1 "), "{stdout}");
    assert!(
        stdout.contains("cgroup v2 at /sys/fs/cgroup") && stdout.contains("no rtlab-system needed"),
        "{stdout}"
    );
    assert!(stdout.contains("will  every other IRQ on CPUs 0"), "{stdout}");
}

#[test]
fn tune_isolation_without_a_cpuset_controller_is_skipped_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    std::fs::remove_dir_all(d.path().join("sys/fs/cgroup/cpuset")).unwrap();
    put(d.path(), "sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
    put(d.path(), "sys/fs/cgroup/cgroup.subtree_control", "cpu\n");
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "apply", "rt-isolation", "--dry-run", "--root"]).arg(d.path()));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("skip  cpuset: CPUs 1 for the application alone"), "{stdout}");
}

#[test]
fn tune_check_passes_a_tuned_fake_rt_machine() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    machine(r);
    put(r, "proc/sys/kernel/osrelease", "6.6.0-rt15\n");
    put(r, "proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n");
    put(r, "boot/config-6.6.0-rt15", "CONFIG_HZ=1000\nCONFIG_PREEMPT_RT=y\n");
    put(r, "proc/cmdline", "isolcpus=1 nohz_full=1 rcu_nocbs=1 threadirqs\n");
    put(r, "proc/timer_list", "cpu: 0\n  .hres_active    : 1\n");
    put(r, "sys/devices/system/cpu/isolated", "1\n");
    put(r, "sys/devices/system/cpu/nohz_full", "1\n");
    put(r, "sys/devices/system/cpu/smt/control", "off\n");
    put(r, "sys/devices/system/cpu/smt/active", "0\n");
    put(r, "proc/sys/kernel/sched_rt_runtime_us", "-1\n");
    put(r, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]\n");
    put(r, "proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
    put(r, "proc/cpuinfo", "processor\t: 0\nmodel name\t: Cortex\n");
    for c in 0..2 {
        put(r, &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"), "performance\n");
    }
    for pid in [14, 22] {
        put(r, &format!("proc/{pid}/rtlab-fake-sched"), "1 60");
    }
    let (code, stdout, stderr) =
        out(rtlab().args(["tune", "check", "--json", "-", "--root"]).arg(r));
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for id in [
        "preempt-rt",
        "preemption-model",
        "hz",
        "high-res-timers",
        "nohz-full",
        "isolcpus",
        "rcu-nocbs",
        "governor",
        "smt",
        "rt-throttling",
        "irqbalance",
        "thp",
        "swap",
        "virtualization",
        "threaded-irqs",
        "ksoftirqd",
    ] {
        let c = v["checks"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
        assert_eq!(c["status"], "pass", "{c}");
        assert_eq!(c["remedy"], "", "a pass has no remedy: {c}");
    }
}

#[test]
fn tune_vlan_egress_map_is_set_and_undone_where_a_vlan_exists() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "proc/net/vlan/config", "VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\neth0.2         | 2  | eth0\n");
    put(d.path(), "proc/net/vlan/eth0.2", "eth0.2  VID: 2\t REORDER_HDR: 1\n INGRESS priority mappings: 0:0  1:0\n EGRESS priority mappings: 5:3 \n");
    let j = d.path().join("journal");
    let (code, stdout, stderr) = out(rtlab()
        .args(["tune", "apply", "rt-affinities", "--hold", "1ms", "--root"])
        .arg(d.path())
        .arg("--journal")
        .arg(&j));
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("done    VLAN egress map on eth0's VLANs"), "{stdout}");
    let cmds = FakeHost::new(d.path()).commands();
    let set = cmds
        .iter()
        .position(|c| {
            c == "ip link set eth0.2 type vlan egress-qos-map 0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7"
        })
        .expect("set");
    let undo = cmds
        .iter()
        .position(|c| {
            c == "ip link set eth0.2 type vlan egress-qos-map 0:0 1:0 2:0 3:0 4:0 5:3 6:0 7:0"
        })
        .expect("undone to the map in force");
    assert!(set < undo, "{cmds:?}");
    assert!(!j.exists());
}
