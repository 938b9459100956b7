//! rtlab as a systemd service on a cgroup-v2 machine (issue 38): `scripts/service-vm.sh`
//! boots Debian's own kernel in QEMU on a debootstrap'ed Debian 12 root with systemd as PID
//! 1, this build's rtlab at /usr/local/bin and the repository's
//! `contrib/systemd/rtlab-run@.service` installed. Inside, `systemctl start
//! rtlab-run@quick` runs the preset in the service's own cgroup, every case completes or is
//! skipped naming what it lacks, the results are in the service's store and nothing stays
//! applied; then a run stopped by `systemctl stop` while its profile is applied ends within
//! seconds, is stored as interrupted and puts the machine back. Behaviour only: under TCG
//! timings are not real.
//!
//! Skips with its reason when not root or when `service-vm.sh --check` says what is missing;
//! `RTLAB_REQUIRE_SERVICE_VM=1` (set by `.ci/run`) turns that skip into a failure.

mod common;
use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/service-vm.sh")
}

/// What runs in the guest once systemd has booted it (its output comes back).
const GUEST: &str = r#"
echo "cgroup-fs: $(stat -fc %T /sys/fs/cgroup)"
echo "pid 1: $(cat /proc/1/comm)"
d=/etc/systemd/system/rtlab-run@.service.d
mkdir -p $d
# where the service's process runs (its journal says it)
printf '[Service]\nExecStartPre=/bin/sh -c "echo service-cgroup: $(cat /proc/self/cgroup)"\n' > $d/where.conf
systemctl daemon-reload
# a preset's name with a dash reaches rtlab as it is (not unescaped to s4/timer)
systemctl show -p ExecStart rtlab-run@s4-timer.service
s=$(date +%s)
systemctl start rtlab-run@quick.service
echo "start: exit $? after $(($(date +%s) - s)) s"
systemctl show -p Result -p ExecMainStatus rtlab-run@quick.service
journalctl -u rtlab-run@quick.service -o cat --no-pager
echo "--- runs"
RTLAB_DB=/var/lib/rtlab/results/rtlab.db rtlab runs
echo "--- tune show"
rtlab tune show
# a run stopped while its profile is applied: the documented RTLAB_RUN_ARGS picks one case
printf '[Service]\nEnvironment="RTLAB_RUN_ARGS=--only timer/idle/rt-affinities"\n' > $d/only.conf
systemctl daemon-reload
systemctl start --no-block rtlab-run@quick.service
applied=no
for i in $(seq 1 120); do
  if ! rtlab tune show | grep -q 'nothing applied by rtlab'; then applied=yes; break; fi
  sleep 0.5
done
echo "applied while running: $applied"
s=$(date +%s)
systemctl stop rtlab-run@quick.service
echo "stop: exit $? after $(($(date +%s) - s)) s"
echo "--- runs after stop"
RTLAB_DB=/var/lib/rtlab/results/rtlab.db rtlab runs
echo "--- tune show after stop"
rtlab tune show
"#;

#[test]
fn root_rtlab_run_as_a_systemd_service_on_cgroup_v2_completes_stops_and_puts_back() {
    let root_for = "the disk image keeps the root's owners; QEMU";
    if !script_ready(&script(), "RTLAB_REQUIRE_SERVICE_VM", "the service VM", root_for) {
        return;
    }
    let o = Command::new("bash")
        .arg(script())
        .args(["--bin", env!("CARGO_BIN_EXE_rtlab"), "--timeout", "900", "--", GUEST])
        .output()
        .unwrap();
    let out = ran(&o, "service-vm.sh");
    let (first, stopped) = out.split_once("applied while running:").expect(&out);
    // systemd's machine: cgroup v2, the service in a cgroup of its own
    assert!(first.contains("cgroup-fs: cgroup2fs"), "{out}");
    assert!(first.contains("pid 1: systemd"), "{out}");
    let cg = r"service-cgroup: 0::/system.slice/system-rtlab\x2drun.slice/rtlab-run@quick.service";
    assert!(first.contains(cg), "{out}");
    assert!(first.contains("argv[]=/usr/local/bin/rtlab run s4-timer $RTLAB_RUN_ARGS "), "{out}");
    assert!(first.contains("start: exit 0"), "{out}");
    assert!(first.contains("Result=success") && first.contains("ExecMainStatus=0"), "{out}");
    // run quick completes every case it can, the rest named (the root has no stress-ng or
    // iperf3); its results in the service's store; nothing applied after
    let (journal, after) = first.split_once("--- runs").expect(&out);
    assert_quick_completed(first, &["stress-ng is not installed", "iperf3 is not installed"]);
    assert!(journal.contains("report: /var/lib/rtlab/results/run-1.html"), "{out}");
    let run1 = after.lines().find(|l| l.trim_start().starts_with("1 ")).expect(&out);
    assert!(run1.contains("quick") && run1.contains("complete"), "{run1}");
    assert!(after.contains("nothing applied by rtlab"), "{out}");
    // stopped while its profile was applied: ends within seconds, stored as interrupted,
    // the machine put back
    assert!(stopped.trim_start().starts_with("yes"), "the profile was never seen applied: {out}");
    let secs: u64 = stopped
        .split_once("stop: exit 0 after ")
        .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
        .expect(&out);
    // not a latency: systemd's TimeoutStopSec is 60 s, a run that ignored SIGTERM takes it
    assert!(secs < 45, "systemctl stop took {secs} s: {out}");
    let (_, after_stop) = stopped.split_once("--- runs after stop").expect(&out);
    let run2 = after_stop.lines().find(|l| l.trim_start().starts_with("2 ")).expect(&out);
    assert!(run2.contains("interrupted"), "{run2}");
    let shown = after_stop.split_once("--- tune show after stop").expect(&out).1;
    assert!(shown.contains("nothing applied by rtlab"), "{out}");
    // straight to stderr, past the harness's capture: CI's log shows the times
    let took =
        stderr(&o).lines().filter(|l| l.starts_with("service-vm:")).collect::<Vec<_>>().join("; ");
    let _ = writeln!(std::io::stderr(), "{took}; systemctl stop: {secs} s");
}
