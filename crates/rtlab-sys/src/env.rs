//! Reading what the machine is (kernel, preemption model, HZ, timers, virtualization, idle,
//! frequency, isolation) from procfs and sysfs under a root directory.
//!
//! Contract: read-only; every function takes `root` (`/` on a real machine, a fake tree in
//! tests) and never fails: what cannot be read is None / "unknown". Sources:
//! Documentation/admin-guide/kernel-parameters.txt (`preempt=`, `isolcpus=`, `nohz_full=`,
//! `threadirqs`), /sys/kernel/debug/sched/preempt (dynamic preemption), /proc/timer_list.

use rtlab_core::schema::Environment;
use std::io::Read;
use std::path::Path;

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok().map(|s| s.trim().to_string())
}

/// The kernel's build configuration: /proc/config.gz, else /boot/config-<release>.
pub fn kernel_config(root: &Path, release: &str) -> Option<String> {
    if let Ok(bytes) = std::fs::read(root.join("proc/config.gz")) {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s).is_ok() {
            return Some(s);
        }
    }
    std::fs::read_to_string(root.join(format!("boot/config-{release}"))).ok()
}

fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

fn cmdline_value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// (model, source, dynamic, rt) of the preemption model.
pub fn preemption(
    root: &Path,
    version: &str,
    cmdline: &str,
    config: Option<&str>,
) -> (String, String, bool, bool) {
    let rt = version.contains("PREEMPT_RT")
        || read(root, "sys/kernel/realtime").as_deref() == Some("1")
        || config.and_then(|c| config_value(c, "CONFIG_PREEMPT_RT")) == Some("y");
    let dynamic = version.contains("PREEMPT_DYNAMIC")
        || config.and_then(|c| config_value(c, "CONFIG_PREEMPT_DYNAMIC")) == Some("y");
    if rt {
        return ("rt".into(), "PREEMPT_RT".into(), dynamic, true);
    }
    // debugfs shows the dynamic model in force, e.g. "none voluntary (full) lazy"
    if let Some(s) = read(root, "sys/kernel/debug/sched/preempt") {
        if let Some(m) = s.split_whitespace().find(|w| w.starts_with('(')) {
            return (
                m.trim_matches(|c| c == '(' || c == ')').to_string(),
                "/sys/kernel/debug/sched/preempt".into(),
                dynamic,
                false,
            );
        }
    }
    if dynamic {
        if let Some(m) = cmdline_value(cmdline, "preempt") {
            return (m.to_string(), "cmdline preempt=".into(), true, false);
        }
    }
    if let Some(c) = config {
        for (key, model) in [
            ("CONFIG_PREEMPT_NONE", "none"),
            ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
            ("CONFIG_PREEMPT_LAZY", "lazy"),
            ("CONFIG_PREEMPT", "full"),
        ] {
            if config_value(c, key) == Some("y") {
                return (model.into(), "kernel config".into(), dynamic, false);
            }
        }
    }
    if version.contains("PREEMPT") {
        return ("full".into(), "uname -v".into(), dynamic, false);
    }
    ("unknown".into(), "none readable".into(), dynamic, false)
}

/// A device-tree property (ARM boards: /proc/device-tree, else its sysfs original), its
/// NUL-separated strings joined by spaces; None where the machine has no device tree.
fn device_tree(root: &Path, prop: &str) -> Option<String> {
    ["proc/device-tree", "sys/firmware/devicetree/base"]
        .iter()
        .find_map(|d| std::fs::read(root.join(d).join(prop)).ok())
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
}

/// The kind of virtual machine, or None on bare metal.
pub fn virtualization(root: &Path) -> Option<String> {
    let vendor = read(root, "sys/class/dmi/id/sys_vendor").unwrap_or_default().to_ascii_lowercase();
    let product =
        read(root, "sys/class/dmi/id/product_name").unwrap_or_default().to_ascii_lowercase();
    let clocksource = read(root, "sys/devices/system/clocksource/clocksource0/current_clocksource")
        .unwrap_or_default();
    let available = read(root, "sys/devices/system/clocksource/clocksource0/available_clocksource")
        .unwrap_or_default();
    let idle = read(root, "sys/devices/system/cpu/cpuidle/current_driver").unwrap_or_default();
    let hv = read(root, "sys/hypervisor/type").unwrap_or_default();
    let cpuinfo = read(root, "proc/cpuinfo").unwrap_or_default();
    let hypervisor_flag = cpuinfo
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == "hypervisor"));
    // ARM has neither DMI (without UEFI) nor that flag: the device tree says it. QEMU's
    // `virt` board (KVM or emulation) is "linux,dummy-virt"; a hypervisor node names Xen or
    // another hypervisor
    let dt_board = device_tree(root, "compatible").unwrap_or_default();
    let dt_hypervisor = device_tree(root, "hypervisor/compatible");
    // kvm-clock offered as a clocksource, or the haltpoll idle driver, exist only in KVM guests
    if vendor.contains("qemu")
        || product.contains("kvm")
        || clocksource == "kvm-clock"
        || available.split_whitespace().any(|c| c == "kvm-clock")
        || idle == "haltpoll"
    {
        Some("kvm".into())
    } else if dt_board.split_whitespace().any(|c| c == "linux,dummy-virt") {
        Some("qemu".into())
    } else if hv == "xen"
        || clocksource == "xen"
        || dt_hypervisor.as_deref().is_some_and(|c| c.contains("xen"))
    {
        Some("xen".into())
    } else if vendor.contains("vmware") {
        Some("vmware".into())
    } else if vendor.contains("microsoft") || clocksource.starts_with("hyperv") {
        Some("hyperv".into())
    } else if hypervisor_flag || dt_hypervisor.is_some() {
        Some("hypervisor".into())
    } else {
        None
    }
}

/// The CPU's name: x86's `model name`; on ARM (no such line) the board's device-tree model
/// (`Raspberry Pi 4 Model B Rev 1.4`, `NVIDIA Jetson AGX Orin`), else the core named by its
/// implementer and part numbers.
fn cpu_model(root: &Path, cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    if let Some(m) = field("model name") {
        return m;
    }
    if let Some(m) = device_tree(root, "model").filter(|m| !m.is_empty()) {
        return m;
    }
    let (Some(imp), Some(part)) = (field("CPU implementer"), field("CPU part")) else {
        return String::new();
    };
    let core = match (imp.as_str(), part.as_str()) {
        ("0x41", "0xd03") => "Cortex-A53",
        ("0x41", "0xd04") => "Cortex-A35",
        ("0x41", "0xd05") => "Cortex-A55",
        ("0x41", "0xd07") => "Cortex-A57",
        ("0x41", "0xd08") => "Cortex-A72",
        ("0x41", "0xd09") => "Cortex-A73",
        ("0x41", "0xd0a") => "Cortex-A75",
        ("0x41", "0xd0b") => "Cortex-A76",
        ("0x41", "0xd0c") => "Neoverse-N1",
        ("0x41", "0xd0d") => "Cortex-A77",
        ("0x41", "0xd40") => "Neoverse-V1",
        ("0x41", "0xd41") => "Cortex-A78",
        ("0x41", "0xd42") => "Cortex-A78AE",
        ("0x41", "0xd49") => "Neoverse-N2",
        ("0x41", "0xd4f") => "Neoverse-V2",
        ("0x4e", "0x004") => "NVIDIA Carmel",
        _ => "",
    };
    if core.is_empty() {
        format!("CPU implementer {imp} part {part}")
    } else {
        core.to_string()
    }
}

/// Read the whole environment under `root`. `cpu_dma_latency_us` and `memory_locked`
/// are what the caller did, filled in by it.
pub fn detect(root: &Path) -> Environment {
    let release = read(root, "proc/sys/kernel/osrelease").unwrap_or_default();
    let version = read(root, "proc/sys/kernel/version").unwrap_or_default();
    let cmdline = read(root, "proc/cmdline").unwrap_or_default();
    let config = kernel_config(root, &release);
    let (model, source, dynamic, rt) = preemption(root, &version, &cmdline, config.as_deref());
    let hz =
        config.as_deref().and_then(|c| config_value(c, "CONFIG_HZ")).and_then(|v| v.parse().ok());
    let high_res = read(root, "proc/timer_list").and_then(|t| {
        t.lines().find_map(|l| {
            l.trim()
                .strip_prefix(".hres_active")
                .map(|v| v.trim_start_matches([' ', ':']).trim() == "1")
        })
    });
    let cpuinfo = read(root, "proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpu_model(root, &cpuinfo);
    Environment {
        hostname: read(root, "proc/sys/kernel/hostname").unwrap_or_default(),
        kernel_release: release,
        kernel_version: version,
        preemption_model: model,
        preemption_source: source,
        preempt_dynamic: dynamic,
        preempt_rt: rt,
        hz,
        high_res_timers: high_res,
        virtualization: virtualization(root),
        cpuidle_driver: read(root, "sys/devices/system/cpu/cpuidle/current_driver"),
        cpuidle_governor: read(root, "sys/devices/system/cpu/cpuidle/current_governor")
            .or_else(|| read(root, "sys/devices/system/cpu/cpuidle/current_governor_ro")),
        cpufreq_governor: read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        isolcpus: read(root, "sys/devices/system/cpu/isolated").unwrap_or_default(),
        nohz_full: read(root, "sys/devices/system/cpu/nohz_full"),
        threaded_irqs: rt || cmdline.split_whitespace().any(|w| w == "threadirqs"),
        cpus_online: read(root, "sys/devices/system/cpu/online").unwrap_or_default(),
        cpu_model,
        architecture: std::env::consts::ARCH.to_string(),
        kernel_architecture: read(root, "proc/sys/kernel/arch").unwrap_or_default(),
        cmdline,
        sched_rt_runtime_us: read(root, "proc/sys/kernel/sched_rt_runtime_us")
            .and_then(|v| v.parse().ok()),
        cpu_dma_latency_us: None,
        memory_locked: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::put;

    #[test]
    fn a_fake_rt_machine() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/sys/kernel/osrelease", "6.6.0-rt15\n");
        put(r, "proc/sys/kernel/version", "#1 SMP PREEMPT_RT Tue\n");
        put(r, "proc/cmdline", "quiet isolcpus=1 nohz_full=1\n");
        put(r, "boot/config-6.6.0-rt15", "CONFIG_HZ=1000\nCONFIG_PREEMPT_RT=y\n");
        put(r, "proc/timer_list", "cpu: 0\n  .hres_active    : 1\n");
        put(r, "sys/devices/system/cpu/isolated", "1\n");
        put(r, "proc/cpuinfo", "processor\t: 0\nmodel name\t: Cortex\nflags\t\t: fpu sse\n");
        put(r, "proc/sys/kernel/sched_rt_runtime_us", "-1\n");
        let e = detect(r);
        assert_eq!(e.preemption_model, "rt");
        assert!(e.preempt_rt && e.threaded_irqs);
        assert_eq!(e.hz, Some(1000));
        assert_eq!(e.high_res_timers, Some(true));
        assert_eq!(e.isolcpus, "1");
        assert_eq!(e.virtualization, None);
        assert_eq!(e.cpu_model, "Cortex");
        assert_eq!(e.sched_rt_runtime_us, Some(-1));
        // the architecture rtlab ran as is its own build's; the kernel's is read
        assert_eq!(e.architecture, std::env::consts::ARCH);
        assert_eq!(e.kernel_architecture, "");
        put(r, "proc/sys/kernel/arch", "aarch64\n");
        assert_eq!(detect(r).kernel_architecture, "aarch64");
    }

    #[test]
    fn an_arm_cpu_is_named_by_its_board_else_its_core() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let arm =
            "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n";
        put(r, "proc/cpuinfo", arm);
        assert_eq!(detect(r).cpu_model, "Cortex-A72");
        put(r, "proc/device-tree/model", "Raspberry Pi 4 Model B Rev 1.4\0");
        assert_eq!(detect(r).cpu_model, "Raspberry Pi 4 Model B Rev 1.4");
        let other = "CPU implementer\t: 0x61\nCPU part\t: 0x022\n";
        put(r, "proc/cpuinfo", other);
        std::fs::remove_file(r.join("proc/device-tree/model")).unwrap();
        assert_eq!(detect(r).cpu_model, "CPU implementer 0x61 part 0x022");
        put(r, "proc/cpuinfo", "processor\t: 0\n");
        assert_eq!(detect(r).cpu_model, "");
    }

    #[test]
    fn an_arm_virtual_machine_is_found_in_the_device_tree() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/cpuinfo", "CPU implementer\t: 0x41\nCPU part\t: 0xd08\n");
        assert_eq!(virtualization(r), None);
        // a Raspberry Pi: bare metal
        put(r, "proc/device-tree/compatible", "raspberrypi,4-model-b\0brcm,bcm2711\0");
        assert_eq!(virtualization(r), None);
        // QEMU's virt board
        put(r, "proc/device-tree/compatible", "linux,dummy-virt\0");
        assert_eq!(virtualization(r).as_deref(), Some("qemu"));
        // a Xen guest, and another hypervisor's node
        put(r, "proc/device-tree/compatible", "xenvm-4.2\0");
        put(r, "proc/device-tree/hypervisor/compatible", "xen,xen-4.17\0xen,xen\0");
        assert_eq!(virtualization(r).as_deref(), Some("xen"));
        put(r, "proc/device-tree/hypervisor/compatible", "vendor,hyp\0");
        assert_eq!(virtualization(r).as_deref(), Some("hypervisor"));
    }

    #[test]
    fn a_fake_dynamic_vm() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        put(r, "proc/sys/kernel/osrelease", "6.18.0\n");
        put(r, "proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n");
        put(r, "proc/cmdline", "preempt=none\n");
        put(r, "sys/devices/system/clocksource/clocksource0/current_clocksource", "kvm-clock\n");
        put(r, "proc/cpuinfo", "flags\t\t: fpu hypervisor\n");
        let e = detect(r);
        assert_eq!(
            (e.preemption_model.as_str(), e.preemption_source.as_str()),
            ("none", "cmdline preempt=")
        );
        assert!(e.preempt_dynamic && !e.preempt_rt && !e.threaded_irqs);
        assert_eq!(e.virtualization.as_deref(), Some("kvm"));
        assert_eq!(e.hz, None);
        // debugfs wins over the command line
        put(r, "sys/kernel/debug/sched/preempt", "none voluntary (full) lazy\n");
        assert_eq!(detect(r).preemption_model, "full");
    }

    #[test]
    fn this_machine_is_readable() {
        let e = detect(Path::new("/"));
        assert!(!e.kernel_release.is_empty());
        assert_ne!(e.preemption_model, "");
    }
}
