//! cgroup-v2 cpuset isolation (`rt-isolation` on a unified hierarchy) against fake
//! sysfs/procfs trees: the plan, what applying writes, that restoring (on drop, or by
//! `rtlab tune restore` after a kill -9) puts every file back and removes `rtlab-rt`, and the
//! skip reasons.
//!
//! There is no test against a real cgroup-v2 cpuset: the development machine is cgroup v1
//! (its cpuset controller is bound to the v1 hierarchy at /sys/fs/cgroup/cpuset, and the
//! cgroup2 mount at /sys/fs/cgroup/unified offers no controller), so a real v2 partition
//! cannot be made here. What the fake kernel does is described in `rtlab_host::host`.

use rtlab_host::host::{FakeHost, Host};
use rtlab_host::journal::{read_journal, restore_journal, Change};
use rtlab_host::session::{Action, Session};
use rtlab_host::testing::{cgroup2, machine, machine_v2, put, task, tree_snapshot as snapshot};
use rtlab_tune::profile::{
    apply_profile, apply_step, builtin, in_force, plan, Report, Step, Target,
};
use std::path::Path;

const ROOT_PROCS: &str = "/sys/fs/cgroup/cgroup.procs";
const RT: &str = "/sys/fs/cgroup/rtlab-rt";

/// /proc/PID/status as the kernel shows it once CPU 1 is an isolated partition: the tasks of
/// other cgroups are off it, the per-CPU ksoftirqd/1 and the threaded IRQ of an IRQ still
/// allowed on CPU 1 are not.
fn statuses(root: &Path) {
    for (pid, name, cpus) in [
        (1, "init", "0"),
        (14, "ksoftirqd/0", "0"),
        (22, "ksoftirqd/1", "1"),
        (50, "irq/41-virtio3-rx", "0-1"),
        (812, "rustc", "1"),
    ] {
        put(root, &format!("proc/{pid}/status"), &format!("Name:\t{name}\nState:\tS (sleeping)\nCpus_allowed:\t3\nCpus_allowed_list:\t{cpus}\n"));
    }
}

fn isolation_step(host: &dyn Host, pids: Vec<i32>) -> Step {
    let t = Target { rt_cpu: Some(1), pids, ..Default::default() };
    let steps = plan(&builtin("rt-isolation").unwrap(), &t, host);
    let actions = steps
        .iter()
        .flat_map(|s| s.alternatives.iter().flat_map(|a| a.1.iter()))
        .map(|a| a.describe())
        .collect::<Vec<_>>();
    assert!(
        !actions.iter().any(|a| a.contains("rtlab-system")),
        "no rtlab-system on cgroup v2: {actions:?}"
    );
    steps.into_iter().find(|s| s.what.starts_with("cpuset: CPUs 1")).expect("an isolation step")
}

fn skip_reason(root: &Path) -> String {
    let host = FakeHost::new(root);
    let t = Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() };
    let steps = plan(&builtin("rt-isolation").unwrap(), &t, &host);
    let s = steps
        .into_iter()
        .find(|s| s.what.starts_with("cpuset: CPUs 1"))
        .expect("an isolation step");
    assert!(s.alternatives.is_empty(), "{s:?}");
    s.skip.expect("a skip")
}

#[test]
fn v2_plan_enables_cpuset_makes_rtlab_rt_an_isolated_partition_and_moves_the_app() {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    let host = FakeHost::new(d.path());
    let step = isolation_step(&host, vec![812]);
    assert_eq!(step.skip, None);
    assert_eq!(step.alternatives.len(), 1);
    assert_eq!(
        step.alternatives[0].1,
        vec![
            Action::WriteWithUndo {
                path: "/sys/fs/cgroup/cgroup.subtree_control".into(),
                value: "+cpuset".into(),
                undo: "-cpuset".into()
            },
            Action::MakeDir { path: RT.into(), parent_tasks: ROOT_PROCS.into() },
            Action::WriteFile { path: format!("{RT}/cpuset.cpus"), value: "1".into() },
            Action::WriteFile { path: format!("{RT}/cpuset.mems"), value: "0".into() },
            // from the cgroup /proc/812/cgroup names, whole processes
            Action::MoveTasks {
                from: "/sys/fs/cgroup/user.slice/cgroup.procs".into(),
                to: format!("{RT}/cgroup.procs"),
                pids: vec![812]
            },
            Action::Partition {
                path: format!("{RT}/cpuset.cpus.partition"),
                modes: vec!["isolated".into(), "root".into()]
            },
        ]
    );
    assert_eq!(
        step.report,
        Some(Report::TasksStillOn { cpus: vec![1], cgroup_procs: format!("{RT}/cgroup.procs") })
    );
    assert!(
        step.note.as_deref().unwrap_or("").contains("no rtlab-system needed"),
        "{:?}",
        step.note
    );
}

#[test]
fn v2_plan_leaves_cpuset_alone_when_enabled_and_moves_nothing_without_pids() {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    put(d.path(), "sys/fs/cgroup/cgroup.subtree_control", "cpuset cpu io memory pids\n");
    let host = FakeHost::new(d.path());
    let acts = isolation_step(&host, vec![]).alternatives.remove(0).1;
    assert!(matches!(&acts[0], Action::MakeDir { .. }), "{acts:?}");
    assert!(
        !acts.iter().any(|a| matches!(a, Action::WriteWithUndo { .. } | Action::MoveTasks { .. })),
        "{acts:?}"
    );
    assert!(matches!(acts.last(), Some(Action::Partition { .. })), "{acts:?}");
}

#[test]
fn v2_on_a_hybrid_mount_uses_the_cgroup2_line_of_proc_mounts() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    std::fs::remove_dir_all(d.path().join("sys/fs/cgroup/cpuset")).unwrap();
    put(
        d.path(),
        "proc/mounts",
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n",
    );
    cgroup2(d.path(), "/sys/fs/cgroup/unified", "cpuset", "", &[1, 14, 22, 50, 812]);
    let host = FakeHost::new(d.path());
    let acts = isolation_step(&host, vec![812]).alternatives.remove(0).1;
    let u = "/sys/fs/cgroup/unified";
    assert_eq!(
        acts[0],
        Action::WriteWithUndo {
            path: format!("{u}/cgroup.subtree_control"),
            value: "+cpuset".into(),
            undo: "-cpuset".into()
        }
    );
    assert_eq!(
        acts[1],
        Action::MakeDir {
            path: format!("{u}/rtlab-rt"),
            parent_tasks: format!("{u}/cgroup.procs")
        }
    );
    assert_eq!(
        acts[4],
        Action::MoveTasks {
            from: format!("{u}/cgroup.procs"),
            to: format!("{u}/rtlab-rt/cgroup.procs"),
            pids: vec![812]
        }
    );
}

#[test]
fn v2_apply_writes_the_files_and_dropping_the_guard_puts_every_file_back() {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    statuses(d.path());
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let step = isolation_step(&host, vec![812]);
    let jpath = d.path().join("journal");
    {
        let mut s = Session::begin(&host, &jpath, "v2").unwrap();
        let o = apply_step(&mut s, &step);
        assert_eq!(o.status, "done", "{o:?}");
        assert!(o.detail.iter().any(|l| l == "6 of 6 changed, 0 already so"), "{o:?}");
        assert!(o.detail.iter().any(|l| l == "moved 1"), "{o:?}");
        // what cannot move: the per-CPU ksoftirqd/1 and the IRQ thread, not the app inside
        let report = o.detail.last().unwrap();
        assert!(
            report.starts_with(&format!("2 tasks outside {RT} can still run on CPUs 1")),
            "{report}"
        );
        assert!(report.ends_with("ksoftirqd/1 (22), irq/41-virtio3-rx (50)"), "{report}");
        assert_eq!(
            host.read("/sys/fs/cgroup/cgroup.subtree_control").unwrap(),
            "cpuset cpu io memory pids"
        );
        assert_eq!(host.read(&format!("{RT}/cpuset.cpus")).unwrap(), "1");
        assert_eq!(host.read(&format!("{RT}/cpuset.mems")).unwrap(), "0");
        assert_eq!(host.read(&format!("{RT}/cpuset.cpus.partition")).unwrap(), "isolated");
        assert_eq!(host.read(&format!("{RT}/cgroup.procs")).unwrap(), "812");
        assert_eq!(host.read("/sys/fs/cgroup/user.slice/cgroup.procs").unwrap(), "");
        assert_eq!(host.read("/proc/812/cgroup").unwrap(), "0::/rtlab-rt");
        // journaled before, each with how it goes back, and all in force
        let st = read_journal(&jpath).unwrap();
        assert_eq!(st.pending.len(), 6, "{:?}", st.pending);
        assert_eq!(
            st.pending[0].1,
            Change::WriteWithUndo {
                path: "/sys/fs/cgroup/cgroup.subtree_control".into(),
                new: "+cpuset".into(),
                undo: "-cpuset".into()
            }
        );
        assert_eq!(
            st.pending[5].1,
            Change::File {
                path: format!("{RT}/cpuset.cpus.partition"),
                old: "member".into(),
                new: "isolated".into()
            }
        );
        for (_, c) in &st.pending {
            let f = in_force(&host, c);
            assert!(["in force", "exists", "recorded"].contains(&f.as_str()), "{c:?}: {f}");
        }
    }
    assert!(!jpath.exists(), "a clean restore removes the journal");
    assert!(!d.path().join("sys/fs/cgroup/rtlab-rt").exists());
    assert_eq!(snapshot(d.path()), before, "the fake machine is back as it was");
}

#[test]
fn v2_kill9_then_tune_restore_puts_the_whole_profile_back_and_later_tasks_go_to_the_parent() {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    statuses(d.path());
    task(d.path(), 900, "worker", 950);
    put(d.path(), "sys/fs/cgroup/cgroup.procs", "1\n14\n22\n50\n900\n");
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let jpath = d.path().join("journal");
    let t = Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() };
    let (s, outcomes) =
        apply_profile(&host, "rt-isolation", &Default::default(), &t, &jpath).unwrap();
    let iso = outcomes.iter().find(|o| o.what.starts_with("cpuset:")).unwrap();
    assert_eq!(iso.status, "done", "{outcomes:?}");
    assert_eq!(host.read(&format!("{RT}/cpuset.cpus.partition")).unwrap(), "isolated");
    // a task that went into rtlab-rt after rtlab made it (not journaled)
    host.write(&format!("{RT}/cgroup.procs"), "900").unwrap();
    std::mem::forget(s); // like kill -9: no drop
    let r = restore_journal(&host, &jpath).unwrap();
    assert!(r.is_clean(), "{:?}", r.failed);
    let mkdir = r.restored.iter().find(|(w, _)| w == &format!("created {RT}")).unwrap();
    assert_eq!(mkdir.1, "removed (1 later tasks moved to the parent)");
    assert!(!jpath.exists());
    assert_eq!(snapshot(d.path()), before);
}

/// Apply the isolation step on a fake v2 machine whose kernel answers partition writes as
/// `fake_partition` says (see `rtlab-fake-partition` in rtlab_host::host), hand the outcome
/// to `check`, then restore and compare the whole tree with the one before.
fn with_partition(
    fake_partition: &str,
    check: impl FnOnce(&FakeHost, &Path, &rtlab_tune::profile::StepOutcome),
) {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    put(d.path(), "rtlab-fake-partition", fake_partition);
    let before = snapshot(d.path());
    let host = FakeHost::new(d.path());
    let step = isolation_step(&host, vec![812]);
    let jpath = d.path().join("journal");
    let mut s = Session::begin(&host, &jpath, "v2").unwrap();
    let o = apply_step(&mut s, &step);
    check(&host, &jpath, &o);
    assert!(s.restore().is_clean());
    assert_eq!(snapshot(d.path()), before);
}

#[test]
fn v2_partition_falls_back_to_root_when_the_kernel_refuses_isolated() {
    with_partition("isolated EINVAL\n", |host, jpath, o| {
        assert_eq!(o.status, "done", "{o:?}");
        assert!(
            o.detail.iter().any(|l| l == "a root partition ('isolated' EINVAL refused)"),
            "{o:?}"
        );
        assert_eq!(host.read(&format!("{RT}/cpuset.cpus.partition")).unwrap(), "root");
        // the refused write is journaled as not made: one pending partition change
        let st = read_journal(jpath).unwrap();
        assert!(
            st.restored.iter().any(|(_, why)| why == "not made: 'isolated' EINVAL"),
            "{:?}",
            st.restored
        );
        let partition: Vec<_> = st
            .pending
            .iter()
            .filter(|(_, c)| matches!(c, Change::File { path, .. } if path.ends_with("partition")))
            .collect();
        assert_eq!(partition.len(), 1);
    });
}

#[test]
fn v2_an_invalid_partition_is_a_failure_with_the_kernels_reason_and_is_undone() {
    with_partition(
        "isolated isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
        |host, jpath, o| {
            assert_eq!(o.status, "partial", "{o:?}");
            let why = format!("1 refused: {RT}/cpuset.cpus.partition: wrote 'isolated', the kernel says 'isolated invalid (Cpu list in cpuset.cpus not exclusive)'");
            assert!(o.detail.contains(&why), "{o:?}");
            // made (the file says so): journaled, shown as not in force, and written back
            let st = read_journal(jpath).unwrap();
            let (_, c) = st.pending.last().unwrap();
            assert_eq!(
                in_force(host, c),
                "changed since: now 'isolated invalid (Cpu list in cpuset.cpus not exclusive)'"
            );
        },
    );
}

#[test]
fn v2_a_kernel_without_partitions_leaves_the_step_partial() {
    with_partition("absent\n", |_, _, o| {
        assert_eq!(o.status, "partial", "{o:?}");
        assert!(
            o.detail.iter().any(|l| l.contains(
                "cpuset.cpus.partition: no such file: this kernel has no cpuset partitions"
            )),
            "{o:?}"
        );
    });
}

#[test]
fn v2_without_the_cpuset_controller_is_skipped_with_the_reason() {
    // like the development machine, but with its v1 cpuset mounted elsewhere: the cgroup2
    // mount at /sys/fs/cgroup/unified offers no controller
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    std::fs::remove_dir_all(d.path().join("sys/fs/cgroup/cpuset")).unwrap();
    put(d.path(), "proc/mounts", "cgroup /dev/cpuset cgroup rw,relatime,cpuset 0 0\n");
    cgroup2(d.path(), "/sys/fs/cgroup/unified", "", "", &[]);
    assert_eq!(
        skip_reason(d.path()),
        "cgroup2 at /sys/fs/cgroup/unified offers no cpuset controller (cgroup.controllers: ''): it is bound to the cgroup-v1 hierarchy at /dev/cpuset"
    );
    // a unified hierarchy without cpuset at all
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    put(d.path(), "sys/fs/cgroup/cgroup.controllers", "cpu io memory pids\n");
    assert_eq!(
        skip_reason(d.path()),
        "cgroup2 at /sys/fs/cgroup offers no cpuset controller (cgroup.controllers: 'cpu io memory pids'): the kernel has no cpuset controller (CONFIG_CPUSETS) or a cgroup-v1 hierarchy holds it"
    );
}

#[test]
fn v2_a_left_over_rtlab_rt_or_a_single_cpu_is_skipped() {
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    put(d.path(), "sys/fs/cgroup/rtlab-rt/cgroup.procs", "");
    assert_eq!(skip_reason(d.path()), "/sys/fs/cgroup/rtlab-rt exists already (left by another tool, or by rtlab without a journal): remove it first");
    let d = tempfile::tempdir().unwrap();
    machine_v2(d.path());
    let host = FakeHost::new(d.path());
    let p = rtlab_tune::profile::Profile { isolate_cpus: Some("0-1".into()), ..Default::default() };
    let steps = plan(&p, &Target { rt_cpu: Some(1), ..Default::default() }, &host);
    assert_eq!(steps[0].skip.as_deref(), Some("needs at least one CPU left for everything else"));
}

#[test]
fn v1_only_machines_keep_the_v1_path_or_say_why_not() {
    // a v1 cpuset at /sys/fs/cgroup/cpuset: the v1 plan (rtlab-system), also beside a cgroup2
    // mount without controllers (the development machine)
    for hybrid in [false, true] {
        let d = tempfile::tempdir().unwrap();
        machine(d.path());
        if hybrid {
            cgroup2(d.path(), "/sys/fs/cgroup/unified", "", "", &[]);
        }
        let host = FakeHost::new(d.path());
        let steps = plan(
            &builtin("rt-isolation").unwrap(),
            &Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() },
            &host,
        );
        let s = steps.iter().find(|s| s.what.starts_with("cpuset: CPUs 1")).unwrap();
        let acts = &s.alternatives[0].1;
        assert_eq!(
            acts[0],
            Action::MakeDir {
                path: "/sys/fs/cgroup/cpuset/rtlab-system".into(),
                parent_tasks: "/sys/fs/cgroup/cpuset/tasks".into()
            }
        );
        assert!(s.report.is_none());
    }
    // v1 only, the cpuset hierarchy mounted somewhere else
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    std::fs::remove_dir_all(d.path().join("sys/fs/cgroup/cpuset")).unwrap();
    put(d.path(), "proc/mounts", "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /dev/cpuset cgroup rw,relatime,cpuset 0 0\n");
    assert_eq!(
        skip_reason(d.path()),
        "the cgroup-v1 cpuset hierarchy is mounted at /dev/cpuset, not at /sys/fs/cgroup/cpuset where rtlab uses it, and there is no cgroup2 mount"
    );
    // v1 only, no cpuset hierarchy
    put(d.path(), "proc/mounts", "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n");
    assert_eq!(
        skip_reason(d.path()),
        "no cpuset hierarchy: cgroup v1 only (/sys/fs/cgroup/memory, /sys/fs/cgroup/cpu), none with the cpuset controller, and no cgroup2 mount"
    );
}

#[test]
fn no_cgroups_at_all_is_skipped_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    machine(d.path());
    std::fs::remove_dir_all(d.path().join("sys/fs/cgroup")).unwrap();
    assert_eq!(
        skip_reason(d.path()),
        "no cpuset hierarchy: no cgroup-v1 cpuset at /sys/fs/cgroup/cpuset and no cgroup2 mount (/sys/fs/cgroup/cgroup.controllers, /proc/mounts)"
    );
}
