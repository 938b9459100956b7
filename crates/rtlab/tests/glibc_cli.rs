//! rtlab on glibc 2.31 (Debian 11, Ubuntu 20.04: the ROS 1 Noetic and ROS 2 Foxy robots):
//! built through `scripts/glibc.sh` (gcc against a debootstrap'ed Debian 11 root), the binary
//! asks for no glibc symbol newer than 2.31, and inside that Debian 11 root (its own glibc,
//! its own `ip`) each probe runs, `run quick` completes every case it can and names each
//! it cannot, and nothing stays applied.
//!
//! Skips with its reason when this build was not made through `scripts/glibc.sh`, when not
//! root, or when the root is missing; `RTLAB_REQUIRE_GLIBC231=1` (set by `.ci/run`) turns a
//! skip into a failure.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Debian 11 root this build was linked against (set by scripts/glibc.sh).
const SYSROOT: Option<&str> = option_env!("RTLAB_SYSROOT");

fn skip(why: &str) {
    common::skip("RTLAB_REQUIRE_GLIBC231", "the glibc 2.31 tests", why);
}

/// The glibc symbol versions a binary asks for, highest last.
fn glibc_versions(bin: &Path) -> Vec<(u32, u32)> {
    let o = Command::new("objdump").arg("-T").arg(bin).output().expect("objdump (binutils)");
    assert!(o.status.success(), "objdump -T {}: {}", bin.display(), stderr(&o));
    let mut v: Vec<(u32, u32)> = stdout(&o)
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|w| {
            let mut it = w.split('.').map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(0)))
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn a_build_through_glibc_sh_asks_for_nothing_newer_than_glibc_2_31() {
    if SYSROOT.is_none() {
        return skip("built against this machine's glibc (scripts/glibc.sh builds for 2.31)");
    }
    let v = glibc_versions(Path::new(env!("CARGO_BIN_EXE_rtlab")));
    assert!(!v.is_empty(), "no GLIBC_ version found");
    assert!(v.last().unwrap() <= &(2, 31), "rtlab asks for glibc {v:?}");
}

/// The root, with this build's rtlab copied in as /usr/local/bin/rtlab-test-PID (removed on
/// drop).
struct Root {
    dir: PathBuf,
    bin: String,
}

impl Root {
    fn new() -> Option<Root> {
        let Some(dir) = SYSROOT else {
            skip("built against this machine's glibc (scripts/glibc.sh builds for 2.31)");
            return None;
        };
        if !is_root() {
            skip("not root (chroot, mounts, namespaces)");
            return None;
        }
        let dir = PathBuf::from(dir);
        let libc = dir.join("usr/lib/x86_64-linux-gnu/libc-2.31.so");
        if !libc.exists() {
            skip(&format!(
                "no Debian 11 root at {} (bash scripts/glibc.sh --install)",
                dir.display()
            ));
            return None;
        }
        let bin = format!("/usr/local/bin/rtlab-test-{}", std::process::id());
        std::fs::copy(env!("CARGO_BIN_EXE_rtlab"), dir.join(&bin[1..])).unwrap();
        Some(Root { dir, bin })
    }

    /// `sh -c CMD` inside the root (`rtlab` is this build), chrooted in a mount namespace of
    /// its own with /proc, /sys and /dev of the machine and /run and /tmp empty: nothing it
    /// mounts outlives it.
    fn sh(&self, cmd: &str) -> Output {
        // the root bound onto itself first: `ip -n` remounts "/", which must be a mount
        let setup = "r=$1; shift; mount --bind $r $r && mount -t proc proc $r/proc && \
                     mount --rbind /sys $r/sys && \
                     mount --rbind /dev $r/dev && mount -t tmpfs tmpfs $r/run && \
                     mount -t tmpfs tmpfs $r/tmp && exec chroot $r /bin/sh -c \"$@\"";
        let cmd = format!("rtlab() {{ {} \"$@\"; }}; {cmd}", self.bin);
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", setup, "sh"])
            .arg(&self.dir)
            .arg(cmd)
            .env_remove("RTLAB_LOCK")
            .output()
            .unwrap()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(&self.bin[1..]));
    }
}

#[test]
fn root_in_the_debian_11_root_each_probe_runs_and_a_quick_run_completes() {
    let Some(r) = Root::new() else { return };
    let glibc = ran(&r.sh("ldd --version | head -n 1"), "ldd");
    assert!(glibc.contains("2.31"), "{glibc}");
    ran(&r.sh("rtlab timer --duration 1s -q"), "timer");
    ran(&r.sh("rtlab udp ping --pair --count 50 --period 1ms -q"), "udp --pair");
    for t in ["shm", "zenoh", "cyclonedds"] {
        ran(&r.sh(&format!("rtlab pubsub --transport {t} --count 50 --rate 1khz -q")), t);
    }
    // no ROS 1 in this root: roscpp's modes say what to install, in one line, exit 2 (the
    // user's master named, so that the node itself is what fails)
    let o = r.sh("ROS_MASTER_URI=http://127.0.0.1:9/ rtlab timer --mode roscpp --count 5 -q");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("loading roscpp") && err.contains("install Debian's libroscpp-dev"),
        "{err}"
    );
    let check = ran(&r.sh("rtlab tune check"), "tune check");
    assert!(check.contains("real-time privilege") && check.contains("noise (measured)"), "{check}");
    // run quick: what the root lacks (stress-ng, iperf3) is a skip naming the package
    let out = ran(&r.sh("cd /tmp && rtlab run quick && rtlab tune show"), "run quick");
    assert_quick_completed(
        &out,
        &[
            "stress-ng is not installed (apt-get install stress-ng)",
            "iperf3 is not installed (apt-get install iperf3)",
        ],
    );
}
