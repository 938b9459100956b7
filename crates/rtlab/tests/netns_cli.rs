//! `rtlab netns` and `rtlab udp` between namespaces, through the binary, as root. Every
//! test uses its own names and removes them in a Drop guard, also when it fails.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Removes NAME-a and NAME-b whatever happens to the test.
struct Cleanup(String);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for s in ["a", "b"] {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &format!("{}-{s}", self.0)])
                .output();
        }
    }
}

fn exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

fn name(tag: &str) -> String {
    format!("rtc{tag}{}", std::process::id() % 10_000)
}

#[test]
fn netns_bad_input_is_one_line_and_exit_2() {
    assert_error(&["netns", "up", "--name", "has space"], &["--name 'has space'"]);
    assert_error(
        &["netns", "up", "--name", "rtcbad", "--addr-a", "198.18.0.1"],
        &["--addr-a '198.18.0.1'"],
    );
    assert_error(&["netns", "up", "--name", "rtcbad", "--rate", "fast"], &["--rate"]);
    assert_error(
        &["netns", "up", "--name", "rtcbad", "--priority-path", "class"],
        &["--priority-path class needs --rate"],
    );
    assert_error(&["netns", "up", "--name", "rtcbad", "--prio-tos", "0x1ff"], &["--prio-tos"]);
    assert!(!exists("rtcbad-a"));
}

#[test]
fn root_netns_up_down_and_a_run_between_the_namespaces() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let n = name("u");
    let _guard = Cleanup(n.clone());
    let o = run(&["netns", "up", "--name", &n, "--rate", "50mbit", "--priority-path", "band"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("--so-priority 6"), "{}", stdout(&o));
    assert!(exists(&format!("{n}-a")) && exists(&format!("{n}-b")));
    // issue 38: `up` returned before the link worked (a program started at once, a Fast DDS
    // node, never communicated). Now, the moment it returns: both ends RUNNING, no address
    // tentative (IPv6 link-local included)
    for side in ["a", "b"] {
        let ns = format!("{n}-{side}");
        let ip = |what: &str| {
            let o = std::process::Command::new("ip")
                .args(["-n", &ns, "-o", what, "show", "dev", &ns])
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let link = ip("link");
        assert!(link.contains("LOWER_UP") && link.contains("state UP"), "{link}");
        let addr = ip("addr");
        assert!(addr.contains("inet ") && !addr.contains("tentative"), "{addr}");
    }
    // a second up is refused and changes nothing
    assert_error(&["netns", "up", "--name", &n], &["already exists", "rtlab netns down"]);

    let dir = tempfile::tempdir().unwrap();
    let rjson = dir.path().join("r.json");
    let mut refl = rtlab()
        .args([
            "udp",
            "reflect",
            "--netns",
            &format!("{n}-b"),
            "--bind",
            "198.18.0.2:9200",
            "--drop-every",
            "25",
        ])
        .args(["--policy", "other", "--json", rjson.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(refl.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on 198.18.0.2:9200 in netns"), "{line}");
    let pjson = dir.path().join("p.json");
    let o = run(&[
        "udp",
        "ping",
        "--netns",
        &format!("{n}-a"),
        "--to",
        "198.18.0.2:9200",
        "--count",
        "500",
        "--so-priority",
        "6",
        "--policy",
        "other",
        "--json",
        pjson.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // the reflector runs until Ctrl-C: how many requests come depends on the slots the
    // ping skipped (500 slots = sent + overruns)
    let _ = std::process::Command::new("kill").args(["-INT", &refl.id().to_string()]).status();
    assert_eq!(refl.wait().unwrap().code(), Some(0));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&pjson).unwrap()).unwrap();
    let st = &d["streams"][0]["stats"];
    let sent: u64 = d["streams"][0]["labels"]["sent"].as_str().unwrap().parse().unwrap();
    assert_eq!(sent + st["overruns"].as_u64().unwrap(), 500, "{st}");
    assert_eq!(st["lost"], sent / 25, "exactly the requests the reflector dropped: {st}");
    assert_eq!(st["count"], sent - sent / 25);
    assert_eq!(d["streams"][0]["labels"]["so_priority"], "6");
    assert!(d["streams"][0]["labels"]["from"].as_str().unwrap().starts_with("198.18.0.1:"));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rjson).unwrap()).unwrap();
    assert_eq!(r["streams"][0]["stats"]["lost"], 0, "nothing lost on the forward path");

    let o = run(&["netns", "down", "--name", &n]);
    assert_eq!(o.status.code(), Some(0));
    assert!(!exists(&format!("{n}-a")) && !exists(&format!("{n}-b")));
    let o = run(&["netns", "down", "--name", &n]);
    assert_eq!(o.status.code(), Some(0), "down twice is fine");
    assert!(stdout(&o).contains("nothing to remove"));
}

#[test]
fn root_udp_ping_pair_runs_and_leaves_nothing_behind() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let o = run(&[
        "udp",
        "ping",
        "--pair",
        "--rate",
        "100mbit",
        "--priority-path",
        "class",
        "--tos",
        "0xb8",
        "--count",
        "300",
        "--policy",
        "other",
        "--json",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<_> = d["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["ping", "ping.send_lateness", "reflector"]);
    assert_eq!(d["streams"][0]["stats"]["lost"], 0);
    assert_eq!(d["config"]["pair"]["priority_path"], "class");
    let ns = d["config"]["ping"]["netns"].as_str().unwrap().to_string();
    assert!(!exists(&ns), "{ns} removed after the run");
    // a run that fails after the pair is made removes it too: the reflector in side b
    // refuses an SO_PRIORITY that does not fit the kernel's int
    let child = rtlab()
        .args([
            "udp",
            "ping",
            "--pair",
            "--count",
            "10",
            "--policy",
            "other",
            "--so-priority",
            "0xffffffff",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ns = format!("rtlab{}-a", child.id() % 100_000); // the pair is named after the pid
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--pair reflector") && err.contains("--so-priority"), "{err}");
    assert!(!exists(&ns) && !exists(&ns.replace("-a", "-b")), "{ns} removed after the failure");
}

#[test]
fn root_an_interrupted_pair_run_keeps_its_figures_and_removes_the_pair() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let child = rtlab()
        .args([
            "udp",
            "ping",
            "--pair",
            "--duration",
            "20s",
            "--policy",
            "other",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(d["interrupted"], true);
    let st = &d["streams"][0]["stats"];
    assert!(st["count"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["lost"], 0, "the requests in flight at the stop were still answered");
    let ns = d["config"]["ping"]["netns"].as_str().unwrap().to_string();
    assert!(!exists(&ns) && !exists(&ns.replace("-a", "-b")), "{ns} removed");
}

#[test]
fn udp_xdp_bad_input_is_one_line_and_exit_2() {
    let ping = ["udp", "ping", "--xdp", "--count", "5", "--policy", "other"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        ping.iter().copied().chain(extra.iter().copied()).collect()
    };
    assert_error(&with(&["--to", "[::1]:9000"]), &["[::1]:9000", "IPv4 frames only"]);
    assert_error(&with(&["--to", "127.0.0.1:9000", "--rcvbuf", "1mib"]), &["--rcvbuf with --xdp"]);
    assert_error(&with(&["--to", "127.0.0.1:9000", "--no-preflight"]), &["--no-preflight"]);
    assert_error(
        &with(&["--to", "127.0.0.1:9000", "--timestamps", "software"]),
        &["--timestamps with --xdp"],
    );
    let socket = ["udp", "ping", "--to", "127.0.0.1:9000", "--count", "5", "--policy", "other"];
    let txtime = |extra: &[&'static str]| -> Vec<&'static str> {
        socket.iter().copied().chain(extra.iter().copied()).collect()
    };
    assert_error(&txtime(&["--txtime", "200us", "--mode", "pingpong"]), &["--txtime", "periodic"]);
    assert_error(&txtime(&["--txtime", "2ms"]), &["--txtime 2000000 ns", "below the period"]);
    assert_error(
        &["udp", "reflect", "--xdp", "--bind", "0.0.0.0:9000", "--policy", "other"],
        &["--bind 0.0.0.0:9000", "not the unspecified one"],
    );
    assert_error(&["udp", "ping", "--to", "127.0.0.1:9000", "--xdp-attach", "generic"], &["--xdp"]);
}

fn xdp_on(ns: &str) -> bool {
    let o = std::process::Command::new("ip")
        .args(["-n", ns, "-d", "link", "show", "dev", ns])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("rtlab_steer")
}

fn xdp_journal(pid: u32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/var/lib/rtlab/journal.xdp-{pid}-0"))
}

fn xdp_reflector(ns: &str, json: Option<&std::path::Path>) -> std::process::Child {
    let mut c = rtlab();
    c.args(["udp", "reflect", "--xdp", "--netns", ns, "--bind", "198.18.0.2:9200"])
        .args(["--policy", "other"]);
    if let Some(j) = json {
        c.args(["--json", j.to_str().unwrap()]);
    }
    let mut refl = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(refl.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("listening on 198.18.0.2:9200"), "{line}");
    refl
}

/// Launch times and hardware timestamps, which this machine lacks, are refused in one line
/// naming the flag (pings from `a` to the XDP reflector, which answers their hellos).
fn what_this_machine_lacks_is_said(a: &str) {
    let ping = |flag: &str, value: &str| -> Vec<String> {
        let to = ["--netns", a, "--to", "198.18.0.2:9200", "--count", "5", "--policy", "other"];
        ["udp", "ping", flag, value].into_iter().chain(to).map(String::from).collect()
    };
    let refused = |args: Vec<String>, needles: &[&str]| {
        assert_error(&args.iter().map(String::as_str).collect::<Vec<_>>(), needles);
    };
    // launch times need an etf qdisc: this kernel has none (the RT VM's has: tests/rt_kernel.rs)
    let etf = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| format!("/lib/modules/{}/modules.dep", r.trim()))
        .and_then(std::fs::read_to_string)
        .map(|d| d.contains("sch_etf"))
        .unwrap_or(false);
    let why = if etf { "has no etf qdisc (root:" } else { "this kernel has no etf qdisc" };
    refused(ping("--txtime", "200us"), &["--txtime", why]);
    // no NIC here has hardware timestamps: said, exit 2 (the XDP reflector answers the hellos)
    refused(
        ping("--timestamps", "hardware"),
        &["--timestamps hardware", "offers no hardware timestamps", "software tx, software rx"],
    );
}

#[test]
fn root_udp_xdp_runs_and_its_program_goes_on_exit_and_after_kill_9() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (CI runs as root)"));
        return;
    }
    let n = name("x");
    let _guard = Cleanup(n.clone());
    let o = run(&["netns", "up", "--name", &n]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (a, b) = (format!("{n}-a"), format!("{n}-b"));

    // kill -9: the kernel detaches the program with its link; the journal stays behind
    let mut refl = xdp_reflector(&b, None);
    let pid = refl.id();
    assert!(xdp_on(&b), "attached while the reflector runs");
    assert!(xdp_journal(pid).exists(), "journaled before it was attached");
    refl.kill().unwrap();
    refl.wait().unwrap();
    assert!(!xdp_on(&b), "gone with the killed process");
    assert!(xdp_journal(pid).exists());
    // `tune restore` finds it: a check, the kernel detached the program with its link
    let o = run(&["tune", "restore"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("XDP program rtlab_steer attached to {b} (netns {b})"))
            && stdout(&o).contains("the kernel detached it with its link"),
        "{}",
        stdout(&o)
    );
    assert!(!xdp_journal(pid).exists());
    let mut refl = xdp_reflector(&b, None);
    let pid = refl.id();
    refl.kill().unwrap();
    refl.wait().unwrap();
    assert!(xdp_journal(pid).exists());

    // the next XDP run restores the dead one's journal (a check: nothing left to detach)
    let dir = tempfile::tempdir().unwrap();
    let rjson = dir.path().join("r.json");
    let refl = xdp_reflector(&b, Some(&rjson));
    let live = refl.id();
    assert!(!xdp_journal(pid).exists(), "the stale journal is restored and removed");
    what_this_machine_lacks_is_said(&a);
    let pjson = dir.path().join("p.json");
    let o = run(&[
        "udp",
        "ping",
        "--xdp",
        "--netns",
        &a,
        "--to",
        "198.18.0.2:9200",
        "--count",
        "300",
        "--policy",
        "other",
        "--json",
        pjson.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("xdp on {a}: program attached")), "{}", stdout(&o));
    assert!(!xdp_on(&a), "the ping's program is gone with it");
    // the socket path against the XDP reflector, with its round trips split into stages
    let o = run(&[
        "udp",
        "ping",
        "--timestamps",
        "software",
        "--netns",
        &a,
        "--to",
        "198.18.0.2:9200",
        "--count",
        "200",
        "--policy",
        "other",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for row in ["ping.tx_stack ", "ping.wire ", "ping.rx_wakeup "] {
        assert!(text.contains(row), "{row}: {text}");
    }
    assert!(
        text.contains(&format!("stages from the kernel's software timestamps on {a} (it offers: software tx, software rx); samples without a tx stamp 0, without an rx stamp ")),
        "{text}"
    );
    let _ = std::process::Command::new("kill").args(["-INT", &refl.id().to_string()]).status();
    let out = refl.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("xdp on {b}")));
    assert!(!xdp_on(&b));
    assert!(!xdp_journal(live).exists(), "restored on a normal exit");
    // a spinning XDP reflector at SCHED_FIFO meets RT throttling where it is on: said
    let o = run(&[
        "udp",
        "reflect",
        "--xdp",
        "--netns",
        &b,
        "--bind",
        "198.18.0.2:9201",
        "--busy-poll",
        "20",
        "--duration",
        "300ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let runtime: i64 = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .map(|s| s.trim().parse().unwrap_or(-1))
        .unwrap_or(-1);
    assert_eq!(stderr(&o).contains("RT throttling is on"), runtime >= 0, "{}", stderr(&o));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&pjson).unwrap()).unwrap();
    let l = &d["streams"][0]["labels"];
    assert_eq!((l["path"].as_str(), l["xdp_copy"].as_str()), (Some("xdp"), Some("copy")));
    let sent: u64 = l["sent"].as_str().unwrap().parse().unwrap();
    assert_eq!(d["streams"][0]["stats"]["lost"], 0);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&rjson).unwrap()).unwrap();
    assert_eq!(r["streams"][0]["labels"]["path"], "xdp");
    let rl = &r["streams"][0]["labels"];
    let n = |k: &str| rl[k].as_str().unwrap().parse::<u64>().unwrap();
    // both pings (the XDP one and the socket one with stages) and their hellos, all answered
    assert_eq!((n("runs"), n("answered")), (2, n("received")), "every datagram answered: {rl}");
    assert!(n("received") > sent, "{rl}");
}
