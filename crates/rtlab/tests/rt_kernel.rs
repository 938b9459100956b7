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
//!
//! Its parts: `rt_kernel/vm.rs` boots a guest and runs the suite in it (the host side);
//! `rt_kernel/guest.rs` and `rt_kernel/nic.rs` hold what the guest tests share; the tests
//! themselves are here, so that each keeps its name (the suite runs them by `--exact` name).

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

#[path = "rt_kernel/vm.rs"]
mod vm;
use vm::{suite, Guest};

// ---- inside the guest ----------------------------------------------------------------------

#[path = "rt_kernel/guest.rs"]
mod guest;
#[path = "rt_kernel/nic.rs"]
mod nic;
use guest::{
    app, comm, guest, guest8, hwlat_runs_on_cpu_1_and_tracefs_is_left_as_found, json_of, ksoftirqd,
    nic_irq_threads, nics, read, read_cmd, sched, sh, tasks, Held,
};
use nic::{
    mqprio_on_a_veth_with_queues, nic_link, ping_all_accounted, reflector, stop, stream,
    taprio_window_on_a_veth_with_two_queues, vlan_egress_map_on_the_vm_nic, Netns,
};

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
