//! rtlab for aarch64 (built by `bash scripts/setup.sh --target aarch64`, or any profile of
//! `scripts/aarch64.sh cargo build --target aarch64-unknown-linux-gnu`) run on this x86-64
//! machine under qemu-user (binfmt_misc): the binary is aarch64 and asks for glibc 2.31 at
//! most; `timer`, `noise`, `udp --pair` and `pubsub` over shm, zenoh and cyclonedds run and
//! account for every sample; each result names the architecture it ran as and the kernel's,
//! and warns that it was emulated; the `ros2` transport refuses this machine's x86-64 ROS 2 in
//! one line; this machine's rtlab measures across two namespaces to the aarch64 one as its far
//! agent (`RTLAB_FAR_BIN`), and the result names both architectures. Counts, labels and exit
//! codes are asserted, never a time: emulation shows behaviour, not latency.
//!
//! Not here: `fastdds` and `rustdds` set IP_MULTICAST_IF on their sockets, which Debian 12's
//! qemu-user (7.2) does not implement (ENOPROTOOPT: Fast DDS then never discovers its peer,
//! RustDDS's event loop stops); they run on the arm64 kernel instead, in the RT-kernel suite's
//! arm64 guest (tests/rt_kernel.rs), with every privileged check.
//!
//! Which binary: `RTLAB_AARCH64_BIN`, else target/aarch64-unknown-linux-gnu/release/rtlab, else
//! its debug build. Skips with its reason without one, without root, or without qemu-user
//! (`scripts/aarch64.sh --check`); `RTLAB_REQUIRE_AARCH64=1` (set by `.ci/run`) turns a skip
//! into a failure.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const REQUIRE: &str = "RTLAB_REQUIRE_AARCH64";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The aarch64 rtlab, when it can run here (else the skip said why).
fn arm() -> Option<PathBuf> {
    let bin = std::env::var_os("RTLAB_AARCH64_BIN").map(PathBuf::from).or_else(|| {
        let t = workspace().join("target/aarch64-unknown-linux-gnu");
        [t.join("release/rtlab"), t.join("debug/rtlab")].into_iter().find(|p| p.is_file())
    });
    let Some(bin) = bin else {
        skip(
            REQUIRE,
            "the aarch64 tests",
            "no aarch64 rtlab (bash scripts/setup.sh --target aarch64 builds one)",
        );
        return None;
    };
    let script = workspace().join("scripts/aarch64.sh");
    script_ready(&script, REQUIRE, "the aarch64 tests", "namespaces and SCHED_FIFO").then_some(bin)
}

fn arm_run(bin: &Path, args: &[&str]) -> Output {
    rtlab_at(bin).args(args).output().expect("run the aarch64 rtlab")
}

/// Run with `--json FILE` added; exit 0 (else the output in the panic); the document.
fn arm_json(bin: &Path, args: &[&str]) -> Value {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("r.json");
    let o = rtlab_at(bin).args(args).arg("--json").arg(&f).output().unwrap();
    ran(&o, &args.join(" "));
    serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
}

/// The result names aarch64 as rtlab's architecture and this machine's kernel as x86_64, and
/// warns that the figures are an emulator's.
/// Every one of `periods` is a round trip answered, one lost, or a send skipped because the
/// sender woke a whole period late (an overrun: emulation stalls; CI found one in 200).
fn assert_every_period(stats: &Value, periods: u64) {
    let n = ["count", "lost", "overruns"].map(|k| stats[k].as_u64().unwrap_or(0));
    assert_eq!(n.iter().sum::<u64>(), periods, "{stats}");
}

fn assert_emulated(doc: &Value) {
    let env = &doc["environment"];
    assert_eq!(env["architecture"], "aarch64", "{env}");
    assert_eq!(env["kernel_architecture"], std::env::consts::ARCH, "{env}");
    let warned = doc["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "emulated");
    assert!(warned, "no 'emulated' warning: {}", doc["warnings"]);
}

#[test]
fn the_binary_is_aarch64_and_asks_for_glibc_2_31_at_most() {
    let Some(bin) = arm() else { return };
    let head = std::fs::read(&bin).unwrap();
    assert_eq!(&head[..4], b"\x7fELF");
    assert_eq!(
        u16::from_le_bytes([head[18], head[19]]),
        183,
        "not an aarch64 ELF: {}",
        bin.display()
    );
    let o = Command::new("readelf").args(["-V", "--wide"]).arg(&bin).output().expect("readelf");
    let text = stdout(&o);
    let newest = text
        .split(|c: char| c.is_whitespace())
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|w| {
            let mut it = w.split('.').map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(0)))
        })
        .max()
        .expect("no GLIBC_ version");
    assert!(newest <= (2, 31), "the aarch64 rtlab asks for glibc {newest:?}");
    let v = ran(&arm_run(&bin, &["--version"]), "--version");
    assert!(v.starts_with("rtlab "), "{v}");
}

#[test]
fn timer_and_noise_run_under_qemu_user_and_say_they_were_emulated() {
    let Some(bin) = arm() else { return };
    let t = arm_json(&bin, &["timer", "--duration", "1s", "--interval", "1ms", "-q"]);
    assert_accounted(&t, "timer");
    assert_emulated(&t);
    // the probe's terminal output warns
    let o = arm_run(&bin, &["timer", "--duration", "1s", "--interval", "1ms"]);
    let out = ran(&o, "timer") + &stderr(&o);
    assert!(out.contains("emulator (qemu-user)"), "{out}");
    // a run stored in SQLite from aarch64, its terminal and HTML reports: the machine line
    // names the architecture and the emulator's kernel, and the warning is listed
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("r.db");
    let db = db.to_str().unwrap();
    let o = rtlab_at(&bin)
        .current_dir(d.path())
        .args(["run", "quick", "--only", "timer/idle/no-rt", "--db", db, "--wait"])
        .output()
        .unwrap();
    let out = ran(&o, "run quick --only timer/idle/no-rt");
    assert!(out.contains("run 1 complete: 1 of 1 cases (0 failed"), "{out}");
    let report = ran(&arm_run(&bin, &["report", "--db", db]), "report");
    let machine = report.lines().find(|l| l.starts_with("Machine: ")).unwrap_or_default();
    assert!(machine.contains(" · aarch64 emulated on x86_64 · "), "{report}");
    // the run's warnings, each once with its cases
    assert!(report.contains("  - emulated (case 0): rtlab ran as aarch64"), "{report}");
    let html = d.path().join("r.html");
    ran(&arm_run(&bin, &["report", "--db", db, "--html", html.to_str().unwrap()]), "report --html");
    assert!(std::fs::read_to_string(&html).unwrap().contains("aarch64 emulated on x86_64"));
    let n = arm_json(&bin, &["noise", "--duration", "1s", "-q"]);
    assert!(!n["streams"].as_array().unwrap().is_empty(), "{n}");
    assert_emulated(&n);
}

#[test]
fn udp_pair_accounts_for_every_datagram_under_qemu_user() {
    let Some(bin) = arm() else { return };
    let u = arm_json(&bin, &["udp", "ping", "--pair", "--count", "200", "--period", "2ms", "-q"]);
    assert_accounted(&u, "udp --pair");
    assert_emulated(&u);
    assert_every_period(&u["streams"][0]["stats"], 200);
}

#[test]
fn pubsub_over_each_middleware_accounts_for_every_message_under_qemu_user() {
    let Some(bin) = arm() else { return };
    for t in ["shm", "zenoh", "cyclonedds"] {
        let p = arm_json(
            &bin,
            &["pubsub", "--transport", t, "--count", "200", "--rate", "500hz", "-q"],
        );
        assert_accounted(&p, t);
        assert_emulated(&p);
    }
}

#[test]
fn the_ros2_transport_refuses_an_installation_of_another_architecture_in_one_line() {
    let Some(bin) = arm() else { return };
    // this machine's ROS 2 (scripts/setup.sh: the package registry's x86-64 wheels)
    let prefix = "/opt/rtlab/ros2";
    if !Path::new(prefix).join("lib/librcl.so").is_file() {
        return skip(
            REQUIRE,
            "the aarch64 ros2 test",
            "no ROS 2 at /opt/rtlab/ros2 (scripts/setup.sh)",
        );
    }
    let o =
        arm_run(&bin, &["pubsub", "--transport", "ros2", "--ros2-prefix", prefix, "--count", "10"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("built for x86-64") && err.contains("this rtlab for aarch64"), "{err}");
}

/// Two namespaces of this machine (`rtlab netns up --name N`), removed on drop.
struct Pair(String);

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = rtlab().args(["netns", "down", "--name", &self.0]).output();
    }
}

#[test]
fn an_x86_64_near_side_measures_across_to_an_aarch64_far_agent() {
    let Some(bin) = arm() else { return };
    let pair = Pair(format!("aa{}", std::process::id() % 1_000_000));
    let _ = rtlab().args(["netns", "down", "--name", &pair.0]).output();
    ran(&run(&["netns", "up", "--name", &pair.0, "--no-ipv6"]), "netns up");
    let (a, b) = (format!("{}-a", pair.0), format!("{}-b", pair.0));
    let far = format!("netns:{b}");
    // this machine's rtlab near, the aarch64 one (under qemu-user) as the far agent
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("u.json");
    let o = rtlab()
        .env("RTLAB_FAR_BIN", &bin)
        .args(["udp", "ping", "--netns", &a, "--far", &far, "--count", "200", "--period", "2ms"])
        .arg("--json")
        .arg(&f)
        .output()
        .unwrap();
    let out = ran(&o, "udp ping --far with an aarch64 agent");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    // the result names both machines' architectures
    assert_eq!(doc["environment"]["architecture"], std::env::consts::ARCH);
    let fe = &doc["far"]["environment"];
    assert_eq!(
        (&fe["architecture"], &fe["kernel_architecture"]),
        (&"aarch64".into(), &"x86_64".into()),
        "{fe}"
    );
    assert!(out.contains("aarch64 emulated on x86_64"), "the far side's line: {out}");
    let ping = doc["streams"].as_array().unwrap().iter().find(|s| s["name"] == "ping").unwrap();
    assert_every_period(&ping["stats"], 200);
    // another binary named for the namespace that does not exist: one line
    let o = rtlab()
        .env("RTLAB_FAR_BIN", "/nonexistent/rtlab")
        .args(["udp", "ping", "--netns", &a, "--far", &far, "--count", "10"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("RTLAB_FAR_BIN=/nonexistent/rtlab") && err.contains(&far), "{err}");
}
