//! Tests of the throw-away sshd harness (tests/support/sshd.rs) that `--far ssh:` tests
//! stand on: sshd runs in the far namespace, ssh from the near one reaches it, stdin and
//! stdout pass through, exit codes come back, and drop leaves nothing behind. Root tests
//! print why they skip when the harness is not available.

#[path = "support/sshd.rs"]
mod sshd;

use sshd::{NetnsPair, Sshd};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn skip() -> bool {
    match sshd::available() {
        Ok(()) => false,
        Err(why) => {
            rtlab_sys::test_skip::skipped(format_args!("{why}"));
            true
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(o: &Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {} stderr: {}", o.status, text(&o.stderr));
    text(&o.stdout)
}

/// The inode of a network namespace file (`/run/netns/NS` or `/proc/PID/ns/net`).
fn netns_inode(path: &str) -> String {
    let o = Command::new("stat").args(["-L", "-c", "%i", path]).output().unwrap();
    ok(&o, "stat").trim().to_string()
}

/// Interface names in a /proc/net/dev text.
fn interfaces(net_dev: &str) -> Vec<String> {
    let mut v: Vec<String> = net_dev
        .lines()
        .filter_map(|l| l.split_once(':').map(|(name, _)| name.trim().to_string()))
        .filter(|n| !n.contains('|'))
        .collect();
    v.sort();
    v
}

#[test]
fn netns_pair_refuses_a_bad_tag_before_making_anything() {
    for tag in ["", "has space", "a/b", "thirteen-long"] {
        let e = NetnsPair::up(tag).err().expect(tag);
        assert!(e.contains("tag"), "{e}");
    }
}

#[test]
fn root_sshd_runs_in_the_far_namespace_and_ssh_reaches_it_from_the_near_one() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("far").unwrap();
    let server = Sshd::start(&pair.ns_b, &pair.ip_b).unwrap();
    assert_eq!(server.host_alias(), "rtlab-far");
    assert!(server.config_path().is_file());

    let o = server
        .ssh(&pair.ns_a)
        .arg("cat /proc/self/net/dev; readlink /proc/self/ns/net")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = ok(&o, "ssh net/dev + readlink");
    assert!(o.stderr.is_empty(), "LogLevel ERROR: no chatter on stderr: {}", text(&o.stderr));
    // the remote shell's network namespace is ns_b ...
    let far_ns = out.lines().last().unwrap_or_default().to_string();
    let b_inode = netns_inode(&format!("/run/netns/{}", pair.ns_b));
    assert_eq!(far_ns, format!("net:[{b_inode}]"), "{out}");
    // ... not the near one, not the test's own
    assert_ne!(b_inode, netns_inode(&format!("/run/netns/{}", pair.ns_a)));
    assert_ne!(b_inode, netns_inode("/proc/self/ns/net"));
    // and it sees ns_b's interfaces: lo and the veth end
    let far_dev = Command::new("ip")
        .args(["netns", "exec", &pair.ns_b, "cat", "/proc/net/dev"])
        .output()
        .unwrap();
    let far_ifaces = interfaces(&ok(&far_dev, "cat ns_b /proc/net/dev"));
    let (far_net_dev, _) = out.rsplit_once("net:[").unwrap();
    assert_eq!(interfaces(far_net_dev), far_ifaces);
    assert_eq!(far_ifaces.len(), 2, "{far_ifaces:?}");
}

#[test]
fn root_stdin_and_stdout_pass_through_and_exit_codes_come_back() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("pipe").unwrap();
    let server = Sshd::start(&pair.ns_b, &pair.ip_b).unwrap();

    // echo hello | ssh ... cat
    let mut child = server
        .ssh(&pair.ns_a)
        .arg("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(ok(&o, "echo hello | ssh cat"), "hello\n");

    // many lines, as a line protocol would send them, in order and complete
    let lines: String = (0..5000).map(|i| format!("line {i} {}\n", "x".repeat(i % 97))).collect();
    let mut child = server
        .ssh(&pair.ns_a)
        .arg("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = lines.clone();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(ok(&o, "5000 lines through ssh cat") == lines, "lines differ");

    // the remote exit code is ssh's
    let o = server.ssh(&pair.ns_a).arg("exit 7").output().unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", text(&o.stderr));
}

#[test]
fn root_rtlab_ssh_env_is_the_prefix_and_runs_ssh() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("env").unwrap();
    let server = Sshd::start(&pair.ns_b, &pair.ip_b).unwrap();
    let env = server.rtlab_ssh_env(&pair.ns_a);
    let words: Vec<String> = env.split(' ').map(str::to_string).collect();
    assert_eq!(words, server.ssh_prefix(&pair.ns_a));
    assert_eq!(words[..5], ["ip", "netns", "exec", pair.ns_a.as_str(), "ssh"]);
    // what rtlab will do: RTLAB_SSH words, then the host, then the remote command
    let o = Command::new(&words[0])
        .args(&words[1..])
        .args([server.host_alias(), "echo far-$((6*7))"])
        .output()
        .unwrap();
    assert_eq!(ok(&o, "RTLAB_SSH words"), "far-42\n");
}

#[test]
fn root_sessions_get_the_environment_asked_for() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("setenv").unwrap();
    // a stand-in for a test build of rtlab, found on the far side as plain `rtlab`
    let bin_dir = std::env::temp_dir().join(format!("rtlab-sshd-test-bin-{}", std::process::id()));
    std::fs::create_dir_all(&bin_dir).unwrap();
    let fake = bin_dir.join("rtlab");
    std::fs::write(&fake, "#!/bin/sh\necho \"stand-in $*\"\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin_dir.display());
    let server =
        Sshd::start_with_env(&pair.ns_b, &pair.ip_b, &[("PATH", &path), ("RTLAB_X", "a b")]);
    let o = server
        .as_ref()
        .map(|s| s.ssh(&pair.ns_a).arg("echo \"$PATH|$RTLAB_X\"; rtlab agent").output());
    let _ = std::fs::remove_dir_all(&bin_dir);
    let out = ok(&o.unwrap().unwrap(), "echo env");
    let (far_path, rest) = out.split_once('|').unwrap();
    // root's ~/.bashrc may prepend to PATH (bash sources it for ssh commands)
    assert!(far_path.ends_with(&path), "far PATH {far_path} does not end with {path}");
    assert_eq!(
        rest, "a b\nstand-in agent\n",
        "far side: another `rtlab` comes first on PATH {far_path}?"
    );
}

#[test]
fn root_drop_kills_sshd_and_removes_dir_and_namespaces() {
    if skip() {
        return;
    }
    let pair = NetnsPair::up("drop").unwrap();
    let (ns_a, ns_b) = (pair.ns_a.clone(), pair.ns_b.clone());
    let server = Sshd::start(&pair.ns_b, &pair.ip_b).unwrap();
    let pid = server.pid();
    let dir = server.dir().to_path_buf();
    let proc_dir = format!("/proc/{pid}");
    assert!(Path::new(&proc_dir).exists());
    let comm = std::fs::read_to_string(format!("{proc_dir}/comm")).unwrap();
    assert_eq!(comm.trim(), "sshd", "the child is sshd itself (ip netns exec execs it)");
    // the pid file sshd wrote names the same process
    let pid_file = std::fs::read_to_string(dir.join("sshd.pid")).unwrap_or_default();
    if !pid_file.is_empty() {
        assert_eq!(pid_file.trim(), pid.to_string());
    }
    let o = server.ssh(&pair.ns_a).arg("true").output().unwrap();
    ok(&o, "ssh true");

    drop(server);
    assert!(!Path::new(&proc_dir).exists(), "sshd {pid} still there after drop");
    assert!(!dir.exists(), "{} still there after drop", dir.display());
    drop(pair);
    for ns in [ns_a, ns_b] {
        assert!(!Path::new("/run/netns").join(&ns).exists(), "{ns} still there after drop");
    }
}

#[test]
fn root_a_failed_start_says_why() {
    if skip() {
        return;
    }
    let e = Sshd::start("rtssh-no-such-ns", "198.18.1.2").err().expect("no such namespace");
    assert!(e.contains("rtssh-no-such-ns"), "{e}");
    let pair = NetnsPair::up("fail").unwrap();
    // an address the namespace does not have: sshd cannot bind and exits
    let e = Sshd::start(&pair.ns_b, "198.51.100.9").err().expect("address not in the namespace");
    assert!(e.contains("exited") || e.contains("not accepting"), "{e}");
    assert!(e.contains("198.51.100.9"), "sshd's own reason is in the message: {e}");
}
