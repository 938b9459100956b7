//! rtlab in a container, as ROS 2 robots run it (podman, an image debootstrap'ed from Debian
//! 12 by `scripts/container.sh`, this build's rtlab mounted in): with podman's default
//! capabilities, with only CAP_SYS_NICE, and privileged, each probe runs or says in one line
//! what it lacks and which option grants it; `run quick` completes what it can and names
//! each case it cannot; nothing is left applied.
//!
//! Skips with its reason when not root or when `container.sh --check` says what is missing;
//! `RTLAB_REQUIRE_CONTAINER=1` (set by `.ci/run`) turns that skip into a failure.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// One test at a time: the privileged test's rt-normal turns RT throttling off on the host
/// (kernel.sched_rt_runtime_us = -1) for its run, and while it is off the kernel grants FIFO
/// in any cgroup, so a test beside it that expects a refusal (a cgroup without real-time
/// runtime) would see its timer run.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/container.sh")
}

/// Whether the containers can run here (else the skip is said, or fails where required).
fn ready() -> bool {
    let root_for = "podman as root, the privileged container";
    script_ready(&script(), "RTLAB_REQUIRE_CONTAINER", "the container tests", root_for)
}

/// `sh -c CMD` in the image with podman run's `opts`, this build's rtlab as `rtlab`.
fn inside(opts: &[&str], cmd: &str) -> Output {
    Command::new("bash")
        .arg(script())
        .args(["--bin", env!("CARGO_BIN_EXE_rtlab")])
        .args(opts)
        .args(["--", "sh", "-c", cmd])
        .output()
        .unwrap()
}

/// Exit 2 and one error line that holds every needle.
fn refused(o: &Output, what: &str, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("rtlab: error:")).collect();
    assert_eq!(errors.len(), 1, "{what}: one error line: {err}");
    assert_eq!(err.trim_end().lines().last(), errors.first().copied(), "{what}: {err}");
    for n in needles {
        assert!(errors[0].contains(n), "{what}: '{n}' not in: {}", errors[0]);
    }
}

/// The host kernel gives a cgroup without its own real-time runtime none (RT group
/// scheduling, cgroup v1): a container's cgroup then refuses FIFO even with CAP_SYS_NICE.
fn rt_group_sched_v1() -> bool {
    Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists()
}

/// `tune show`'s line when nothing is applied.
const NOTHING: &str = "nothing applied by rtlab";

#[test]
fn root_with_podman_s_default_capabilities_each_probe_runs_or_names_what_grants_it() {
    if !ready() {
        return;
    }
    let _one = serial();
    // the real-time probes: refused in one line naming the container's options
    for cmd in ["rtlab timer --duration 1s", "rtlab noise --duration 1s", "rtlab cyclic --count 50"]
    {
        refused(
            &inside(&[], cmd),
            cmd,
            &["podman container without CAP_SYS_NICE", "--cap-add SYS_NICE", "--policy other"],
        );
    }
    // and at SCHED_OTHER they run; pub/sub's default runs as it is
    ran(&inside(&[], "rtlab timer --duration 1s --policy other -q"), "timer --policy other");
    ran(&inside(&[], "rtlab pubsub --transport intra --count 50 --rate 1khz -q"), "pubsub intra");
    // a pair of namespaces needs CAP_SYS_ADMIN: said in one line
    refused(
        &inside(&[], "rtlab udp ping --pair --count 50 --period 1ms --policy other"),
        "udp --pair",
        &["network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"],
    );
    // tune check prints every row: the privilege row failed with the container's remedy,
    // the measured noise row measured at SCHED_OTHER and says why
    let o = inside(&[], "rtlab tune check; echo \"exit $?\"");
    let out = stdout(&o);
    let row = |title: &str| {
        let mut l = out.lines().skip_while(|l| !l.contains(title));
        format!("{}\n{}", l.next().unwrap_or_else(|| panic!("{title}: {out}")), l.next().unwrap())
    };
    let p = row("real-time privilege");
    assert!(p.starts_with("FAIL") && p.contains("root in a podman container"), "{p}");
    assert!(p.contains("-> start the container with CAP_SYS_NICE"), "{p}");
    let n = row("noise (measured)");
    assert!(n.contains("other: the kernel refused fifo 80"), "{n}");
    // docs/tune.md: the exit code is 0 whatever the verdicts
    assert!(out.contains("exit 0\n"), "{out}");
}

#[test]
fn root_with_only_cap_sys_nice_measures_and_a_quick_run_names_what_it_cannot() {
    if !ready() {
        return;
    }
    let _one = serial();
    let nice = ["--cap-add", "SYS_NICE"];
    let mut opts = nice.to_vec();
    if rt_group_sched_v1() {
        // the container's own cgroup has no real-time runtime: said, with the options
        refused(
            &inside(&nice, "rtlab timer --duration 1s"),
            "timer with CAP_SYS_NICE",
            &["cpu.rt_runtime_us is 0", "--cgroup-parent=/ --cpu-rt-runtime=N"],
        );
        opts.extend(["--cgroup-parent=/", "--cpu-rt-runtime=100000"]);
    }
    ran(&inside(&opts, "rtlab timer --duration 1s -q"), "timer at FIFO 80");
    // `run quick`: every case runs or is skipped with its reason in one line; nothing stays
    let o = inside(&opts, "rtlab run quick; echo \"exit $?\"; rtlab tune show");
    let out = stdout(&o);
    assert!(out.contains("exit 0\n"), "{out}{}", stderr(&o));
    // no stress-ng in the image; no namespaces without CAP_SYS_ADMIN
    assert_quick_completed(
        &out,
        &[
            "stress-ng is not installed (apt-get install stress-ng)",
            "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)",
        ],
    );
    assert!(out.lines().any(|l| l.contains("pubsub/idle/rt-affinities") && l.contains("rtt p50")));
}

#[test]
fn root_privileged_runs_its_real_time_probes_under_a_profile_and_puts_it_back() {
    if !ready() {
        return;
    }
    let _one = serial();
    let p = ["--privileged"];
    if rt_group_sched_v1() {
        refused(
            &inside(&p, "rtlab timer --duration 1s"),
            "privileged timer",
            &["cpu.rt_runtime_us is 0", "--profile rt-normal"],
        );
    }
    // rt-normal moves rtlab to the host's root cgroup for the run, and back
    for cmd in [
        "rtlab timer --duration 1s --profile rt-normal -q",
        "rtlab udp ping --pair --count 50 --period 1ms --profile rt-normal -q",
    ] {
        let o = inside(&p, &format!("{cmd} && rtlab tune show"));
        ran(&o, cmd);
        assert!(stdout(&o).contains(NOTHING), "{cmd}: {}", stdout(&o));
    }
}
