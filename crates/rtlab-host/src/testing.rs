//! Building fake sysfs/procfs trees for tests (no root needed). What the fake kernel does
//! with them is in [`crate::host::FakeHost`].

use std::path::Path;

/// Write `text` at `rel` under `root`, creating directories.
pub fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("a file path")).expect("create fake dirs");
    std::fs::write(p, text).expect("write fake file");
}

/// A fake task: /proc/PID/{stat,comm} with a start time (stat field 22).
pub fn task(root: &Path, pid: i32, comm: &str, start_time: u64) {
    let rest: Vec<String> =
        (4..=52).map(|i| if i == 22 { start_time.to_string() } else { "0".into() }).collect();
    put(root, &format!("proc/{pid}/stat"), &format!("{pid} ({comm}) S {}\n", rest.join(" ")));
    put(root, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
}

/// A small fake machine: 2 CPUs, a KVM guest like this one, with an eth0 on IRQs 41/42,
/// ksoftirqd/0-1, an irq thread, a cgroup-v1 cpuset root and a cpu_dma_latency file.
pub fn machine(root: &Path) {
    put(root, "sys/devices/system/cpu/online", "0-1\n");
    put(root, "sys/devices/system/cpu/possible", "0-1\n");
    for c in 0..2 {
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
            "powersave\n",
        );
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_available_governors"),
            "performance powersave\n",
        );
        put(
            root,
            &format!("sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"),
            &format!("{c}\n"),
        );
    }
    put(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
    put(root, "proc/sys/kernel/osrelease", "6.18.0\n");
    put(root, "proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
    put(root, "proc/cmdline", "preempt=none\n");
    put(root, "proc/irq/default_smp_affinity", "3\n");
    for irq in [36, 41, 42] {
        put(root, &format!("proc/irq/{irq}/smp_affinity"), "3\n");
    }
    put(
        root,
        "proc/interrupts",
        "           CPU0       CPU1       \n 36:          0      41999 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 41:       2265          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx\n 42:          0       3962 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx\nLOC:      26949      24292   Local timer interrupts\n",
    );
    put(root, "sys/class/net/eth0/device/msi_irqs/41", "msix\n");
    put(root, "sys/class/net/eth0/device/msi_irqs/42", "msix\n");
    put(root, "sys/class/net/eth0/operstate", "up\n");
    put(
        root,
        "proc/net/route",
        "Iface\tDestination\tGateway\nlo\t0000007F\t00000000\neth0\t00000000\t0100000A\n",
    );
    task(root, 1, "init", 5);
    task(root, 14, "ksoftirqd/0", 10);
    task(root, 22, "ksoftirqd/1", 11);
    task(root, 50, "irq/41-virtio3-rx", 12);
    task(root, 812, "rustc", 900);
    put(root, "sys/fs/cgroup/cpuset/cpuset.cpus", "0-1\n");
    put(root, "sys/fs/cgroup/cpuset/cpuset.mems", "0\n");
    put(root, "sys/fs/cgroup/cpuset/tasks", "1\n14\n22\n50\n812\n");
    put(root, "dev/cpu_dma_latency", "\0\0\0\0");
}

/// A cgroup-v2 tree mounted at `mount` (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` beside
/// cgroup-v1 hierarchies) offering `controllers`, with `enabled` in the root's
/// cgroup.subtree_control, CPUs 0-1 and memory node 0, the fake tasks `pids` in the root
/// cgroup (with a /proc/PID/cgroup line), and its line in /proc/mounts.
pub fn cgroup2(root: &Path, mount: &str, controllers: &str, enabled: &str, pids: &[i32]) {
    let m = mount.trim_start_matches('/');
    put(root, &format!("{m}/cgroup.controllers"), &format!("{controllers}\n"));
    put(root, &format!("{m}/cgroup.subtree_control"), &format!("{enabled}\n"));
    put(
        root,
        &format!("{m}/cgroup.procs"),
        &pids.iter().map(|p| format!("{p}\n")).collect::<String>(),
    );
    if controllers.split_whitespace().any(|c| c == "cpuset") {
        put(root, &format!("{m}/cpuset.cpus.effective"), "0-1\n");
        put(root, &format!("{m}/cpuset.mems.effective"), "0\n");
    }
    for p in pids {
        if root.join(format!("proc/{p}")).is_dir() {
            put(root, &format!("proc/{p}/cgroup"), "0::/\n");
        }
    }
    let mounts = std::fs::read_to_string(root.join("proc/mounts")).unwrap_or_default();
    put(
        root,
        "proc/mounts",
        &format!("{mounts}cgroup2 /{m} cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"),
    );
}

/// [`machine`] on a unified (cgroup-v2 only) hierarchy at /sys/fs/cgroup, cpuset offered but
/// not enabled, like a fresh systemd machine: pids 1, 14, 22 and 50 in the root cgroup,
/// `rustc` (812) in `user.slice`; no cgroup-v1 cpuset tree.
pub fn machine_v2(root: &Path) {
    machine(root);
    std::fs::remove_dir_all(root.join("sys/fs/cgroup/cpuset")).expect("remove the fake v1 cpuset");
    cgroup2(
        root,
        "/sys/fs/cgroup",
        "cpuset cpu io memory pids",
        "cpu io memory pids",
        &[1, 14, 22, 50],
    );
    put(root, "sys/fs/cgroup/user.slice/cgroup.controllers", "cpu io memory pids\n");
    put(root, "sys/fs/cgroup/user.slice/cgroup.subtree_control", "\n");
    put(root, "sys/fs/cgroup/user.slice/cgroup.procs", "812\n");
    put(root, "sys/fs/cgroup/user.slice/cgroup.type", "domain\n");
    put(root, "proc/812/cgroup", "0::/user.slice\n");
}

/// Every file and directory under a fake root with its text, to compare a fake machine before
/// and after (the journal and the fake command log left out; fake process state at its
/// default is the same as none).
pub fn tree_snapshot(root: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if rel == "journal" || rel.starts_with("rtlab-fake-commands") {
                continue;
            }
            let text = if p.is_file() {
                String::from_utf8_lossy(&std::fs::read(&p).unwrap()).trim_end().to_string()
            } else {
                String::new()
            };
            // fake process state at its default is the same as none
            if (rel.ends_with("rtlab-fake-sched") && text == "0 0")
                || (rel.ends_with("rtlab-fake-affinity") && text == "0-1")
            {
                continue;
            }
            if p.is_dir() {
                out.push((rel.clone(), "<dir>".into()));
                walk(&p, base, out);
            } else {
                out.push((rel, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}
