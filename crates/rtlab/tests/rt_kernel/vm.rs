//! On the host: the guest a suite boots (x86 PREEMPT_RT, its 8-CPU twin, arm64), and the suite
//! that runs the listed guest tests inside it, one at a time, each with its time.

use super::*;

/// Where a suite runs: the script that boots the guest, this file's test binary for the
/// guest's CPU, and the files the guest needs copied in (arm64-vm.sh's guest has its own
/// root: the aarch64 test binary and rtlab).
pub(super) struct Guest {
    pub(super) script: PathBuf,
    pub(super) exe: PathBuf,
    pub(super) files: Vec<PathBuf>,
    /// Binaries to copy into the guest's RAM first, each then mounted over its own path:
    /// rt-vm.sh's root is this machine's over 9p, where a TCG guest reads the 260 MB debug
    /// rtlab again on every start (3 s each; 0.9 s from RAM).
    pub(super) in_ram: Vec<PathBuf>,
}

/// Why the suites need root (a skip says it).
pub(super) const ROOT_FOR: &str = "QEMU, tracefs and the profiles need it";

impl Guest {
    /// rt-vm.sh's guest (this machine's files, this test binary), when it can run here (else
    /// the skip said why).
    pub(super) fn x86() -> Option<Guest> {
        if !script_ready(&script(), "RTLAB_REQUIRE_RT_VM", "the RT-kernel suite", ROOT_FOR) {
            return None;
        }
        let exe = std::env::current_exe().unwrap();
        let in_ram = vec![exe.clone(), PathBuf::from(env!("CARGO_BIN_EXE_rtlab"))];
        Some(Guest { script: script(), exe, files: vec![], in_ram })
    }

    /// The arm64 guest, when it can run here (else the skip said why).
    pub(super) fn arm64() -> Option<Guest> {
        const REQUIRE: &str = "RTLAB_REQUIRE_ARM64_VM";
        let what = "the arm64 RT-kernel suite";
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        if !script_ready(&scripts.join("arm64-vm.sh"), REQUIRE, what, ROOT_FOR)
            || !script_ready(&scripts.join("aarch64.sh"), REQUIRE, what, ROOT_FOR)
        {
            return None;
        }
        // this file and rtlab built for aarch64: the newest such test binary
        let target = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/aarch64-unknown-linux-gnu/debug")
            .canonicalize()
            .ok();
        let newest = target.as_ref().and_then(|t| {
            std::fs::read_dir(t.join("deps"))
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().into_owned();
                    n.starts_with("rt_kernel-") && !n.contains('.')
                })
                .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        });
        let (Some(t), Some(exe)) = (target, newest) else {
            skip(
                REQUIRE,
                what,
                "no aarch64 build of this test (bash scripts/aarch64.sh cargo test --no-run \
                 --target aarch64-unknown-linux-gnu -p rtlab --test rt_kernel)",
            );
            return None;
        };
        let rtlab = t.join("rtlab");
        let files = vec![exe.clone(), rtlab];
        Some(Guest { script: scripts.join("arm64-vm.sh"), files, exe, in_ram: vec![] })
    }
}

/// Boot `guest` with `cpus` CPUs and `append`, run each of `tests` (every test of this
/// binary named with one of `prefixes`) inside, one at a time, and require each to pass.
pub(super) fn suite(guest: &Guest, prefixes: &[&str], tests: &[&str], append: &str, cpus: u32) {
    let exe = &guest.exe;
    // `tests` is every guest test of this binary with those prefixes
    let listed = Command::new(exe).args(["--list", "--ignored"]).output().unwrap();
    let mut have: Vec<String> = stdout(&listed)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| prefixes.iter().any(|p| t.starts_with(p)))
        .map(String::from)
        .collect();
    have.sort();
    let mut want: Vec<String> = tests.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(have, want, "the list names every {prefixes:?} test of this file");
    let _one = VM.lock().unwrap_or_else(|e| e.into_inner());
    // one at a time, each with its time (a TCG guest is slow: the suite's time is said)
    let mut to_ram = String::new();
    if !guest.in_ram.is_empty() {
        to_ram.push_str("mkdir -p /run/rtlab-ram && mount -t tmpfs rtlab-ram /run/rtlab-ram && ");
        for (i, f) in guest.in_ram.iter().enumerate() {
            let f = f.display();
            to_ram.push_str(&format!(
                "cp {f} /run/rtlab-ram/{i} && mount --bind /run/rtlab-ram/{i} {f} && "
            ));
        }
    }
    let guest_cmd = format!(
        "{to_ram}rc=0; for t in {}; do s=$(date +%s); env RTLAB_RT_GUEST=1 {} --ignored --exact \
         --test-threads=1 --nocapture $t || rc=1; echo \"rt-guest: $t: $(($(date +%s) - s)) s\"; \
         done; exit $rc",
        tests.join(" "),
        exe.display()
    );
    // the command as a file the guest reads (rt-vm.sh's guest sees this machine's files,
    // arm64-vm.sh's gets a copy): virtme-ng hands a command to the guest on the kernel's
    // command line, which ends at 2 048 bytes (a longer one boots to nothing)
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("suite.sh");
    std::fs::write(&script, &guest_cmd).unwrap();
    let mut files = Vec::new();
    for f in guest.files.iter().chain(if guest.files.is_empty() { None } else { Some(&script) }) {
        files.push("--file".into());
        files.push(f.display().to_string());
    }
    let o = Command::new("bash")
        .arg(&guest.script)
        .args(["--append", append, "--cpus", &cpus.to_string(), "--timeout", "1500"])
        .args(&files)
        .arg("--")
        .args(["sh", &script.display().to_string()])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    let all = format!("--- stdout\n{out}\n--- stderr\n{err}");
    assert_eq!(o.status.code(), Some(0), "the suite failed in the guest:\n{all}");
    for t in tests {
        assert!(out.contains(&format!("test {t} ... ok")), "{t} did not pass in the guest:\n{all}");
    }
    assert_eq!(out.matches("test result: ok. 1 passed").count(), tests.len(), "{all}");
    let said = |l: &&str| {
        l.starts_with("rt-vm:") || l.starts_with("arm64-vm:") || l.starts_with("rt-guest:")
    };
    // straight to stderr, not through the test harness's capture: CI's log shows the times
    let times = out.lines().chain(err.lines()).filter(said).collect::<Vec<_>>().join("\n");
    let _ = writeln!(std::io::stderr(), "{times}");
}
