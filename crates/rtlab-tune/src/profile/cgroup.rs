//! Cgroups and cpusets of a plan: a cgroup that gives real-time runtime to rtlab's
//! processes, and the isolated CPUs (a cgroup-v2 partition, else a cgroup-v1 cpuset).

use super::step::{threads_of, Report, Step, Target};
use rtlab_host::host::{cgroup2_mount, mounts, Host};
use rtlab_host::session::Action;
use std::collections::BTreeMap;

/// The processes that run real-time threads under a profile: rtlab's own (when the host's
/// /proc has it: always on the real machine) and the target's `--pid`s, sorted, once each.
fn rt_processes(host: &dyn Host, t: &Target) -> Vec<i32> {
    let mut pids: Vec<i32> = t.pids.clone();
    pids.push(std::process::id() as i32);
    pids.sort_unstable();
    pids.dedup();
    pids.retain(|p| host.exists(&format!("/proc/{p}")));
    pids
}

/// With RT group scheduling (CONFIG_RT_GROUP_SCHED) a cgroup without real-time runtime refuses
/// FIFO/RR even to root: cgroup v2 gives none to any group but the root (there is no rt file
/// to give it some), v1 to a group whose `cpu.rt_runtime_us` is 0. So rtlab's process and the
/// `--pid`s in such a group move to the root cgroup of that hierarchy (`cgroup.procs`: whole
/// processes), journaled as a [`Change::CgroupMove`] that restore undoes by writing each pid
/// back to its own group's `cgroup.procs` (a group removed meanwhile is said, not recreated).
/// Skipped, with the reason, when nothing is in such a group (RT group scheduling off or
/// unknown, already in the root cgroup, a group with runtime).
/// (Documentation/scheduler/sched-rt-group.rst, Documentation/admin-guide/cgroup-v2.rst)
pub fn rt_cgroup_step(host: &dyn Host, t: &Target) -> Step {
    use rtlab_sys::rt_access::{RtAccess, RtGroupSched};
    let what = "RT group scheduling: real-time processes to a cgroup with real-time runtime";
    let pids = rt_processes(host, t);
    if pids.is_empty() {
        return Step::skip(what, "no process to move (rtlab's own is not under this root's /proc)");
    }
    let mut by_source: BTreeMap<(String, String), Vec<i32>> = BTreeMap::new();
    let mut fine = Vec::new();
    let mut gs = RtGroupSched::Unknown;
    for pid in pids {
        let a = RtAccess::detect(host.root(), Some(pid));
        gs = a.rt_group_sched.clone();
        let place = a.cgroup.clone();
        match (a.group_without_runtime(), place.as_ref().and_then(|p| p.procs_files())) {
            (Some(true), Some((from, to))) if host.exists(&from) && host.exists(&to) => {
                by_source.entry((from, to)).or_default().push(pid);
            }
            (Some(true), _) => fine.push(format!(
                "pid {pid} is in {} without real-time runtime, but its hierarchy's cgroup.procs are not found",
                place.map(|p| p.path).unwrap_or_default()
            )),
            (Some(false), _) => fine.push(format!(
                "pid {pid} in {}",
                place.map(|p| if p.is_root() { "the root cgroup".to_string() } else { format!("{} (it has real-time runtime)", p.path) }).unwrap_or_default()
            )),
            (None, _) => fine.push(format!(
                "pid {pid} in {}",
                place.map(|p| p.path).unwrap_or_else(|| "an unknown cgroup".into())
            )),
        }
    }
    if by_source.is_empty() {
        let why = match &gs {
            RtGroupSched::Off { source } => format!("RT group scheduling is off ({source})"),
            RtGroupSched::On { source } => format!("RT group scheduling is on ({source}); nothing to move: {}", fine.join("; ")),
            RtGroupSched::Unknown => format!("RT group scheduling is unknown here (no kernel config readable; cgroup v2 has no rt file): nothing moved ({}); if FIFO is refused as root, rtlab tune check row rt-group-sched says what to do", fine.join("; ")),
        };
        return Step::skip(what, why);
    }
    let mut acts = Vec::new();
    let mut notes = Vec::new();
    for ((from, to), pids) in by_source {
        notes.push(format!(
            "{} from {} (no real-time runtime) to {}",
            pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(","),
            from.trim_end_matches("/cgroup.procs"),
            to.trim_end_matches("/cgroup.procs")
        ));
        acts.push(Action::MoveTasks { from, to, pids });
    }
    let mut step = Step::act(what, acts).note(format!(
        "pid {}; restore moves each back to its group (a group removed meanwhile is said)",
        notes.join("; pid ")
    ));
    if !fine.is_empty() {
        step.note = Some(format!("{}; left: {}", step.note.unwrap_or_default(), fine.join("; ")));
    }
    step
}

pub(super) fn isolation(host: &dyn Host, t: &Target, iso: Vec<usize>, online: &[usize]) -> Step {
    let what = format!(
        "cpuset: CPUs {} for the application alone, every movable task off them",
        rtlab_host::cpu_list(&iso)
    );
    let root = "/sys/fs/cgroup/cpuset";
    // a cgroup-v1 cpuset hierarchy; a cgroup-v2 child named "cpuset" would have cgroup.controllers
    if !host.exists(&format!("{root}/cpuset.cpus"))
        || host.exists(&format!("{root}/cgroup.controllers"))
    {
        return isolation_v2(host, t, iso, online, what);
    }
    let rest: Vec<usize> = online.iter().copied().filter(|c| !iso.contains(c)).collect();
    if rest.is_empty() || iso.is_empty() {
        return Step::skip(what, "needs at least one CPU left for everything else");
    }
    let mems = host.read(&format!("{root}/cpuset.mems")).unwrap_or_else(|_| "0".into());
    let sys = format!("{root}/rtlab-system");
    let rtd = format!("{root}/rtlab-rt");
    let root_tasks = format!("{root}/tasks");
    let app: Vec<i32> = t
        .pids
        .iter()
        .flat_map(|&p| threads_of(host, p))
        .filter(|tid| !t.keep.contains(tid))
        .collect();
    let everyone: Vec<i32> = host
        .read(&root_tasks)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|p| !app.contains(p))
        .collect();
    let mut acts = vec![
        Action::MakeDir { path: sys.clone(), parent_tasks: root_tasks.clone() },
        Action::WriteFile {
            path: format!("{sys}/cpuset.cpus"),
            value: rtlab_host::cpu_list(&rest),
        },
        Action::WriteFile { path: format!("{sys}/cpuset.mems"), value: mems.clone() },
        Action::MakeDir { path: rtd.clone(), parent_tasks: root_tasks.clone() },
        Action::WriteFile { path: format!("{rtd}/cpuset.cpus"), value: rtlab_host::cpu_list(&iso) },
        Action::WriteFile { path: format!("{rtd}/cpuset.mems"), value: mems },
        Action::WriteFile { path: format!("{rtd}/cpuset.cpu_exclusive"), value: "1".into() },
    ];
    if !app.is_empty() {
        acts.push(Action::MoveTasks {
            from: root_tasks.clone(),
            to: format!("{rtd}/tasks"),
            pids: app,
        });
    }
    acts.push(Action::MoveTasks { from: root_tasks, to: format!("{sys}/tasks"), pids: everyone });
    if host.exists(&format!("{root}/cpuset.sched_load_balance")) {
        acts.push(Action::WriteFile {
            path: format!("{root}/cpuset.sched_load_balance"),
            value: "0".into(),
        });
    }
    Step::act(what, acts)
}

/// Where a cgroup-v1 hierarchy with the cpuset controller is mounted, if anywhere.
fn cgroup1_cpuset_mount(host: &dyn Host) -> Option<String> {
    mounts(host)
        .into_iter()
        .find(|m| m.1 == "cgroup" && m.2.split(',').any(|o| o == "cpuset"))
        .map(|m| m.0)
}

/// The cgroup (a cgroup.procs file under `mnt`) a process is in, from its /proc/PID/cgroup
/// `0::PATH` line (relative to the mount in a cgroup namespace too); the root when unknown.
fn cgroup2_procs_of(host: &dyn Host, mnt: &str, pid: i32) -> String {
    let path = host
        .read(&format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()));
    match path.as_deref().map(|p| p.trim_end_matches('/')) {
        Some(p) if !p.is_empty() && !p.contains(" (deleted)") => format!("{mnt}{p}/cgroup.procs"),
        _ => format!("{mnt}/cgroup.procs"),
    }
}

/// cgroup v2: `rtlab-rt` under the unified root holds the isolated CPUs as a cpuset
/// *partition* and the application's processes.
///
/// No `rtlab-system` (the v1 path's cpuset for everything else) is needed here: a partition
/// root (`cpuset.cpus.partition` = `root` or `isolated`) takes its CPUs exclusively, and the
/// kernel removes them from the effective CPUs of its parent and of every other cgroup under
/// it (and from the affinity of their tasks), so every movable task is moved off by the
/// kernel itself. An `isolated` partition also has no scheduler load balancing (v1's
/// `sched_load_balance = 0`): with more than one CPU in it, the application's threads should
/// be pinned (`app_cpus`), as rt-isolation does. Only per-CPU kernel threads keep those CPUs;
/// they are counted after applying ([`Report::TasksStillOn`]). See
/// Documentation/admin-guide/cgroup-v2.rst, "cpuset.cpus.partition". `isolated` came in
/// Linux 6.1 (commit f28e22441f35; the "root invalid (reason)" read-back with 7476a636d310);
/// older kernels refuse it (EINVAL) and get `root`.
fn isolation_v2(
    host: &dyn Host,
    t: &Target,
    iso: Vec<usize>,
    online: &[usize],
    what: String,
) -> Step {
    let Some(mnt) = cgroup2_mount(host) else {
        let v1 =
            mounts(host).into_iter().filter(|m| m.1 == "cgroup").map(|m| m.0).collect::<Vec<_>>();
        return Step::skip(
            what,
            match cgroup1_cpuset_mount(host) {
                Some(m) => format!("the cgroup-v1 cpuset hierarchy is mounted at {m}, not at /sys/fs/cgroup/cpuset where rtlab uses it, and there is no cgroup2 mount"),
                None if !v1.is_empty() => format!("no cpuset hierarchy: cgroup v1 only ({}), none with the cpuset controller, and no cgroup2 mount", v1.join(", ")),
                None => "no cpuset hierarchy: no cgroup-v1 cpuset at /sys/fs/cgroup/cpuset and no cgroup2 mount (/sys/fs/cgroup/cgroup.controllers, /proc/mounts)".into(),
            },
        );
    };
    let controllers = host.read(&format!("{mnt}/cgroup.controllers")).unwrap_or_default();
    if !controllers.split_whitespace().any(|c| c == "cpuset") {
        let why = match cgroup1_cpuset_mount(host) {
            Some(m) => format!("it is bound to the cgroup-v1 hierarchy at {m}"),
            None => "the kernel has no cpuset controller (CONFIG_CPUSETS) or a cgroup-v1 hierarchy holds it".into(),
        };
        return Step::skip(
            what,
            format!(
                "cgroup2 at {mnt} offers no cpuset controller (cgroup.controllers: '{}'): {why}",
                controllers.trim()
            ),
        );
    }
    let rest: Vec<usize> = online.iter().copied().filter(|c| !iso.contains(c)).collect();
    if rest.is_empty() || iso.is_empty() {
        return Step::skip(what, "needs at least one CPU left for everything else");
    }
    let subtree = format!("{mnt}/cgroup.subtree_control");
    let Ok(enabled) = host.read(&subtree) else {
        return Step::skip(what, format!("{subtree} cannot be read: not a cgroup2 root"));
    };
    let rtd = format!("{mnt}/rtlab-rt");
    if host.exists(&rtd) {
        return Step::skip(what, format!("{rtd} exists already (left by another tool, or by rtlab without a journal): remove it first"));
    }
    let mems = host
        .read(&format!("{mnt}/cpuset.mems.effective"))
        .ok()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| "0".into());
    let mut acts = Vec::new();
    if !enabled.split_whitespace().any(|c| c == "cpuset") {
        acts.push(Action::WriteWithUndo {
            path: subtree,
            value: "+cpuset".into(),
            undo: "-cpuset".into(),
        });
    }
    acts.push(Action::MakeDir { path: rtd.clone(), parent_tasks: format!("{mnt}/cgroup.procs") });
    acts.push(Action::WriteFile {
        path: format!("{rtd}/cpuset.cpus"),
        value: rtlab_host::cpu_list(&iso),
    });
    acts.push(Action::WriteFile {
        path: format!("{rtd}/cpuset.mems"),
        value: mems.trim().to_string(),
    });
    // the application before the partition is made: left outside until then, the kernel
    // would take the RT CPUs (where the application step pinned it) from it for a moment.
    // Domain cgroups take whole processes, each from the cgroup it is in now (restore puts
    // it back there). +cpuset comes first: refused (EBUSY in a cgroup namespace whose root
    // holds processes), nothing else is done.
    let mut by_source: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    let mut pids = t.pids.clone();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids.into_iter().filter(|p| host.exists(&format!("/proc/{p}"))) {
        by_source.entry(cgroup2_procs_of(host, &mnt, pid)).or_default().push(pid);
    }
    for (from, pids) in by_source {
        acts.push(Action::MoveTasks { from, to: format!("{rtd}/cgroup.procs"), pids });
    }
    acts.push(Action::Partition {
        path: format!("{rtd}/cpuset.cpus.partition"),
        modes: vec!["isolated".into(), "root".into()],
    });
    let mut step = Step::act(what, acts).note(format!(
        "cgroup v2 at {mnt}: {rtd} becomes an isolated partition (else root), which takes CPUs {} from every other cgroup; no rtlab-system needed",
        rtlab_host::cpu_list(&iso)
    ));
    if rtlab_sys::rt_access::rt_group_sched(host.root()).is_on() {
        // a new cgroup-v2 group gets no real-time runtime under RT group scheduling
        let n = step.note.take().unwrap_or_default();
        step.note = Some(format!("{n}; RT group scheduling is on: if the cpu controller reaches {rtd}, FIFO/RR are refused inside it (EPERM) and the application runs better without rt-isolation's cpuset"));
    }
    step.report =
        Some(Report::TasksStillOn { cpus: iso, cgroup_procs: format!("{rtd}/cgroup.procs") });
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{apply_step, builtin, plan};
    use rtlab_host::host::FakeHost;
    use rtlab_host::journal::Change;
    use rtlab_host::testing::put;
    use std::path::Path;

    #[test]
    fn cgroup2_is_found_at_the_unified_root_or_in_proc_mounts() {
        let d = tempfile::tempdir().unwrap();
        let host = FakeHost::new(d.path());
        assert_eq!(cgroup2_mount(&host), None);
        // a mount point with a space is escaped in /proc/mounts
        put(d.path(), "proc/mounts", "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\ncgroup2 /mnt/cg\\0402 cgroup2 rw 0 0\n");
        assert_eq!(cgroup2_mount(&host), None, "listed but not there");
        put(d.path(), "mnt/cg 2/cgroup.controllers", "cpu\n");
        assert_eq!(cgroup2_mount(&host).as_deref(), Some("/mnt/cg 2"));
        assert_eq!(cgroup1_cpuset_mount(&host).as_deref(), Some("/sys/fs/cgroup/cpuset"));
        put(d.path(), "sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n");
        assert_eq!(cgroup2_mount(&host).as_deref(), Some("/sys/fs/cgroup"));
    }

    /// An Ubuntu-like fake: CONFIG_RT_GROUP_SCHED=y, cgroup v2 with cpu enabled at the root,
    /// rtlab's own process (this test's pid) and `rustc` (812) in user.slice.
    fn rt_group_machine(r: &Path) -> i32 {
        rtlab_host::testing::machine_v2(r);
        put(r, "boot/config-6.18.0", "CONFIG_HZ=1000\nCONFIG_RT_GROUP_SCHED=y\n");
        let me = std::process::id() as i32;
        rtlab_host::testing::task(r, me, "rtlab", 999);
        put(r, &format!("proc/{me}/cgroup"), "0::/user.slice\n");
        let mut procs = [812, me];
        procs.sort_unstable();
        let text: String = procs.iter().map(|p| format!("{p}\n")).collect();
        put(r, "sys/fs/cgroup/user.slice/cgroup.procs", &text);
        me
    }

    #[test]
    fn rt_profiles_move_processes_out_of_a_group_without_rt_runtime_and_back() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let me = rt_group_machine(r);
        let host = FakeHost::new(r);
        let before = rtlab_host::testing::tree_snapshot(r);
        let t = Target { rt_cpu: Some(1), pids: vec![812], ..Default::default() };
        let steps = plan(&builtin("rt-normal").unwrap(), &t, &host);
        let st = &steps[0];
        assert!(st.what.starts_with("RT group scheduling"), "first, before any policy: {st:?}");
        let mut pids = vec![812, me];
        pids.sort_unstable();
        assert_eq!(
            st.alternatives[0].1,
            vec![Action::MoveTasks {
                from: "/sys/fs/cgroup/user.slice/cgroup.procs".into(),
                to: "/sys/fs/cgroup/cgroup.procs".into(),
                pids: pids.clone(),
            }]
        );
        assert!(st.note.as_deref().unwrap().contains("restore moves each back"), "{st:?}");
        let j = r.join("journal");
        let mut s = rtlab_host::session::Session::begin(&host, &j, "profile rt-normal").unwrap();
        let o = apply_step(&mut s, st);
        assert_eq!(o.status, "done", "{o:?}");
        let root_procs = host.read("/sys/fs/cgroup/cgroup.procs").unwrap();
        for p in &pids {
            assert!(root_procs.lines().any(|l| l == p.to_string()), "{p} in {root_procs}");
            assert_eq!(host.read(&format!("/proc/{p}/cgroup")).unwrap(), "0::/");
        }
        // journaled before it was made
        let pending = rtlab_host::journal::read_journal(&j).unwrap().pending;
        assert!(matches!(&pending[0].1, Change::CgroupMove { tasks, .. } if tasks.len() == 2));
        let rep = s.restore();
        assert!(rep.is_clean(), "{rep:?}");
        assert_eq!(rep.restored[0].1, "2 moved back, 0 gone");
        assert_eq!(rtlab_host::testing::tree_snapshot(r), before);
    }

    #[test]
    fn a_group_gone_before_restore_is_said_and_nothing_moves_when_not_needed() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        rt_group_machine(r);
        let host = FakeHost::new(r);
        let t = Target { rt_cpu: Some(1), ..Default::default() };
        let st = rt_cgroup_step(&host, &t);
        let j = r.join("journal");
        let mut s = rtlab_host::session::Session::begin(&host, &j, "profile rt-normal").unwrap();
        assert_eq!(apply_step(&mut s, &st).status, "done");
        std::fs::remove_dir_all(r.join("sys/fs/cgroup/user.slice")).unwrap();
        let rep = s.restore();
        assert!(rep.is_clean(), "{rep:?}");
        assert_eq!(
            rep.restored[0].1,
            "/sys/fs/cgroup/user.slice/cgroup.procs is gone: 1 tasks not moved back"
        );
        // in the root cgroup now: nothing to do, said
        let st = rt_cgroup_step(&host, &t);
        assert!(st.skip.as_deref().unwrap().contains("the root cgroup"), "{st:?}");
        // RT group scheduling off: skipped with the reason
        put(r, "boot/config-6.18.0", "CONFIG_HZ=1000\n");
        put(r, &format!("proc/{}/cgroup", std::process::id()), "0::/user.slice\n");
        let st = rt_cgroup_step(&host, &t);
        assert!(st.skip.as_deref().unwrap().starts_with("RT group scheduling is off"), "{st:?}");
        // no-rt asks for no real-time policy: no such step
        let steps = plan(&builtin("no-rt").unwrap(), &t, &host);
        assert!(!steps.iter().any(|s| s.what.starts_with("RT group scheduling")));
    }

    #[test]
    fn a_process_cgroup_comes_from_its_0_line() {
        let d = tempfile::tempdir().unwrap();
        let host = FakeHost::new(d.path());
        let m = "/sys/fs/cgroup";
        assert_eq!(
            cgroup2_procs_of(&host, m, 7),
            "/sys/fs/cgroup/cgroup.procs",
            "unknown: the root"
        );
        put(
            d.path(),
            "proc/7/cgroup",
            "12:cpuset:/\n0::/user.slice/user-1000.slice/session-2.scope\n",
        );
        assert_eq!(
            cgroup2_procs_of(&host, m, 7),
            "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/cgroup.procs"
        );
        put(d.path(), "proc/7/cgroup", "0::/\n");
        assert_eq!(cgroup2_procs_of(&host, m, 7), "/sys/fs/cgroup/cgroup.procs");
    }
}
