//! The journal and the restore guard against a fake sysfs/procfs tree (no root needed).

use rtlab_host::host::{FakeHost, Host};
use rtlab_host::journal::{pending, read_journal, restore_journal, Change};
use rtlab_host::session::{Action, Session};
use rtlab_host::testing::{machine, put, tree_snapshot as snapshot};

fn all_actions() -> Vec<Action> {
    vec![
        Action::WriteFile {
            path: "/proc/sys/kernel/sched_rt_runtime_us".into(),
            value: "-1".into(),
        },
        Action::WriteFile {
            path: "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor".into(),
            value: "performance".into(),
        },
        Action::WriteFile { path: "/proc/irq/41/smp_affinity".into(), value: "2".into() },
        Action::SetSched { pid: 22, policy: 1, priority: 60 },
        Action::SetAffinity { pid: 812, cpus: vec![0] },
        Action::MakeDir {
            path: "/sys/fs/cgroup/cpuset/rtlab-system".into(),
            parent_tasks: "/sys/fs/cgroup/cpuset/tasks".into(),
        },
        Action::WriteFile {
            path: "/sys/fs/cgroup/cpuset/rtlab-system/cpuset.cpus".into(),
            value: "0".into(),
        },
        Action::MoveTasks {
            from: "/sys/fs/cgroup/cpuset/tasks".into(),
            to: "/sys/fs/cgroup/cpuset/rtlab-system/tasks".into(),
            pids: vec![1, 14, 812],
        },
        Action::Command {
            did: vec!["tc".into(), "qdisc".into(), "replace".into()],
            undo: vec!["tc".into(), "qdisc".into(), "del".into()],
        },
        Action::HoldPmQos { path: "/dev/cpu_dma_latency".into(), value_us: 0 },
    ]
}

#[test]
fn every_change_is_journaled_before_it_is_made_and_restored_on_drop() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "rtlab-fake-pinned", "14\n");
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let jpath = d.path().join("journal");
    {
        let mut s = Session::begin(&host, &jpath, "test").unwrap();
        for a in all_actions() {
            let r = s.apply(&a);
            assert!(r.is_ok(), "{a:?}: {r:?}");
        }
        // on disk before the session ends: all ten changes pending
        let st = read_journal(&jpath).unwrap();
        assert_eq!(st.pending.len(), 10, "{:?}", st.pending);
        assert_eq!(host.read("/proc/sys/kernel/sched_rt_runtime_us").unwrap(), "-1");
        assert_eq!(host.sched_get(22).unwrap(), (1, 60));
        assert_eq!(host.affinity_get(812).unwrap(), vec![0]);
        let moved = host.read("/sys/fs/cgroup/cpuset/rtlab-system/tasks").unwrap();
        assert_eq!(
            moved.lines().collect::<Vec<_>>(),
            vec!["1", "812"],
            "pid 14 is pinned and cannot move"
        );
        match &st.pending[0].1 {
            Change::File { old, new, .. } => {
                assert_eq!((old.as_str(), new.as_str()), ("950000", "-1"))
            }
            c => panic!("{c:?}"),
        }
    }
    assert!(!jpath.exists(), "a clean restore removes the journal");
    assert_eq!(snapshot(d.path()), before, "the fake machine is back as it was");
    let cmds = host.commands();
    assert_eq!(cmds, vec!["tc qdisc replace", "tc qdisc del"]);
}

#[test]
fn restore_after_a_crash_replays_the_journal_newest_first() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let jpath = d.path().join("journal");
    let mut s = Session::begin(&host, &jpath, "crash").unwrap();
    // the same file changed twice: the first old value must win
    s.apply(&Action::WriteFile { path: "/proc/irq/42/smp_affinity".into(), value: "1".into() })
        .unwrap();
    s.apply(&Action::WriteFile { path: "/proc/irq/42/smp_affinity".into(), value: "2".into() })
        .unwrap();
    s.apply(&Action::SetSched { pid: 50, policy: 1, priority: 90 }).unwrap();
    std::mem::forget(s); // like kill -9: no drop
                         // a torn last line (power cut while writing) is ignored
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&jpath)
        .unwrap()
        .write_all(b"{\"t\":\"chan")
        .unwrap();
    // a new session refuses to start over pending changes
    let again = Session::begin(&host, &jpath, "second");
    assert!(again.err().unwrap().to_string().contains("rtlab tune restore"));
    let r = restore_journal(&host, &jpath).unwrap();
    assert!(r.is_clean(), "{:?}", r.failed);
    assert_eq!(r.restored.len(), 3);
    assert!(r.restored[0].0.contains("pid 50"), "newest first: {:?}", r.restored);
    assert!(!jpath.exists());
    assert_eq!(snapshot(d.path()), before);
    // a second restore has nothing to do
    assert_eq!(restore_journal(&host, &jpath).unwrap().restored.len(), 0);
}

#[test]
fn a_reused_pid_is_never_touched_and_a_failed_change_is_not_pending() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let host = FakeHost::new(d.path());
    let jpath = d.path().join("journal");
    let mut s = Session::begin(&host, &jpath, "reuse").unwrap();
    s.apply(&Action::SetSched { pid: 812, policy: 1, priority: 80 }).unwrap();
    // a write that fails (the file vanished) is journaled, then marked as not made
    let e = s
        .apply(&Action::WriteFile { path: "/proc/irq/99/smp_affinity".into(), value: "1".into() })
        .unwrap_err();
    assert!(e.to_string().contains("/proc/irq/99/smp_affinity"), "{e}");
    // ENOENT of a kernel interface file: this kernel lacks it, the case would be skipped
    let m = e.missing().expect("a missing kernel interface");
    assert!(matches!(m.need, rtlab_core::error::Need::Kernel { .. }), "{m:?}");
    std::mem::forget(s);
    assert_eq!(read_journal(&jpath).unwrap().pending.len(), 1);
    // pid 812 exits and the pid is reused by another program
    rtlab_host::testing::task(d.path(), 812, "other", 5000);
    host.sched_set(812, 0, 0).unwrap();
    let r = restore_journal(&host, &jpath).unwrap();
    assert_eq!(r.restored[0].1, "task gone");
    assert_eq!(host.sched_get(812).unwrap(), (0, 0));
}

#[test]
fn a_panic_restores_through_the_guard() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let before = snapshot(d.path());
    let root = d.path().to_path_buf();
    let res = std::panic::catch_unwind(move || {
        let host = FakeHost::new(&root);
        let mut s = Session::begin(&host, &root.join("journal"), "panic").unwrap();
        s.apply(&Action::WriteFile {
            path: "/proc/sys/kernel/sched_rt_runtime_us".into(),
            value: "-1".into(),
        })
        .unwrap();
        panic!("a probe failed");
    });
    assert!(res.is_err());
    assert_eq!(snapshot(d.path()), before);
    assert!(!d.path().join("journal").exists());
}

#[test]
fn an_undo_that_fails_keeps_the_journal() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    let host = FakeHost::new(d.path());
    let jpath = d.path().join("journal");
    let mut s = Session::begin(&host, &jpath, "fail").unwrap();
    s.apply(&Action::Command {
        did: vec!["tc".into(), "add".into()],
        undo: vec!["tc".into(), "del".into()],
    })
    .unwrap();
    put(d.path(), "rtlab-fake-fail", "tc del\n");
    let r = s.restore();
    assert_eq!(r.failed.len(), 1);
    assert_eq!(read_journal(&jpath).unwrap().pending.len(), 1, "kept for `rtlab tune restore`");
    std::fs::remove_file(d.path().join("rtlab-fake-fail")).unwrap();
    assert!(restore_journal(&host, &jpath).unwrap().is_clean());
    assert!(!jpath.exists());
}

#[test]
fn a_profile_applied_for_a_probe_is_undone_with_its_guard() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    put(d.path(), "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let target =
        rtlab_tune::profile::Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() };
    let (mut s, outcomes) = rtlab_tune::profile::apply_profile(
        &host,
        "rt-kthreads",
        &Default::default(),
        &target,
        &d.path().join("journal"),
    )
    .unwrap();
    let by = |w: &str| {
        outcomes
            .iter()
            .find(|o| o.what.starts_with(w))
            .unwrap_or_else(|| panic!("{w}: {outcomes:?}"))
            .clone()
    };
    assert_eq!(by("application").status, "done");
    assert_eq!(by("ksoftirqd").status, "done");
    assert_eq!(by("governor").status, "done");
    assert_eq!(by("middleware").status, "skipped");
    assert_eq!(host.sched_get(812).unwrap(), (1, 80));
    assert_eq!(host.sched_get(50).unwrap(), (1, 90), "the NIC's IRQ thread");
    assert_eq!(
        host.read("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor").unwrap(),
        "performance"
    );
    // a choice file is journaled with the chosen word, so it can be written back
    s.apply(&Action::WriteFile {
        path: "/sys/kernel/mm/transparent_hugepage/enabled".into(),
        value: "never".into(),
    })
    .unwrap();
    match &read_journal(&d.path().join("journal")).unwrap().pending.last().unwrap().1 {
        Change::File { old, .. } => assert_eq!(old, "madvise"),
        c => panic!("{c:?}"),
    }
    let r = s.restore();
    assert!(r.is_clean(), "{:?}", r.failed);
    put(d.path(), "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
    assert_eq!(snapshot(d.path()), before);
}

/// A journal begun by `pid` holding one pending change.
fn journal_of(path: &std::path::Path, pid: u32) {
    let line = |v: serde_json::Value| format!("{v}\n");
    let text = line(
        serde_json::json!({"t": "begin", "pid": pid, "what": "profile rt-normal", "at_unix_s": 1700000000u64}),
    ) + &line(
        serde_json::json!({"t": "change", "seq": 1, "change": {"kind": "file", "path": "/proc/sys/kernel/sched_rt_runtime_us", "old": "950000", "new": "-1"}}),
    ) + &line(
        serde_json::json!({"t": "change", "seq": 2, "change": {"kind": "file", "path": "/proc/irq/41/smp_affinity", "old": "3", "new": "2"}}),
    ) + &line(serde_json::json!({"t": "restored", "seq": 2, "outcome": "restored"}));
    std::fs::write(path, text).unwrap();
}

#[test]
fn pending_names_a_dead_owner_and_what_it_began() {
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    assert_eq!(pending(&j), None, "no journal");
    // a process that has exited
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    journal_of(&j, dead);
    let p = pending(&j).unwrap();
    assert_eq!((p.pid, p.alive, p.changes), (dead as i32, false, 1));
    assert_eq!((p.what.as_str(), p.began_at_unix_s), ("profile rt-normal", 1700000000));
    assert!(p.describe().contains("no longer running"), "{}", p.describe());
    // Journal::begin refuses, saying restore
    let e = Session::begin(&FakeHost::new(d.path()), &j, "x").err().unwrap();
    assert!(e.to_string().contains("rtlab tune restore"), "{e}");
}

#[test]
fn pending_counts_only_a_live_rtlab_as_alive() {
    let d = tempfile::tempdir().unwrap();
    let j = d.path().join("journal");
    // a live process that is not rtlab (this test binary: a recycled pid looks like this)
    journal_of(&j, std::process::id());
    assert!(!pending(&j).unwrap().alive);
    // a live process named rtlab
    let exe = d.path().join("rtlab");
    std::fs::copy("/bin/sleep", &exe).unwrap();
    // ETXTBSY while another test thread's fork still holds the copy open for writing
    let mut spawned = std::process::Command::new(&exe).arg("30").spawn();
    for _ in 0..50 {
        match &spawned {
            Err(e) if e.raw_os_error() == Some(26) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                spawned = std::process::Command::new(&exe).arg("30").spawn();
            }
            _ => break,
        }
    }
    let mut child = spawned.unwrap();
    journal_of(&j, child.id());
    let alive = pending(&j).unwrap().alive;
    let e = Session::begin(&FakeHost::new(d.path()), &j, "x").err().map(|e| e.to_string());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive, "a running rtlab is alive");
    assert!(e.unwrap().contains("still running"));
    assert!(!pending(&j).unwrap().alive, "gone after it exits");
    // everything restored: nothing pending
    restore_journal(&FakeHost::new(d.path()), &j).unwrap();
    assert_eq!(pending(&j), None);
}
