//! Building fake sysfs/procfs trees for tests (no root needed).

use std::path::Path;

/// Write `text` at `rel` under `root`, creating directories.
pub fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("a file path")).expect("create fake dirs");
    std::fs::write(p, text).expect("write fake file");
}

/// A fake task: /proc/PID/{stat,comm} with a start time (stat field 22).
pub fn task(root: &Path, pid: i32, comm: &str, start_time: u64) {
    let rest: Vec<String> = (4..=52).map(|i| if i == 22 { start_time.to_string() } else { "0".into() }).collect();
    put(root, &format!("proc/{pid}/stat"), &format!("{pid} ({comm}) S {}\n", rest.join(" ")));
    put(root, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
}

/// A small fake machine: 2 CPUs, a KVM guest like this one, with an eth0 on IRQs 41/42,
/// ksoftirqd/0-1, an irq thread, a cgroup-v1 cpuset root and a cpu_dma_latency file.
pub fn machine(root: &Path) {
    put(root, "sys/devices/system/cpu/online", "0-1\n");
    put(root, "sys/devices/system/cpu/possible", "0-1\n");
    for c in 0..2 {
        put(root, &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"), "powersave\n");
        put(root, &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_available_governors"), "performance powersave\n");
        put(root, &format!("sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"), &format!("{c}\n"));
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
    put(root, "proc/net/route", "Iface\tDestination\tGateway\nlo\t0000007F\t00000000\neth0\t00000000\t0100000A\n");
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
