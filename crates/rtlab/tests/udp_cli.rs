//! `rtlab udp` through the binary: bad input is one line and exit 2; a reflector and a
//! pinger on loopback account for every datagram and write the shared result schema.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let p = ["udp", "ping", "--policy", "other", "--count", "3"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        p.iter().copied().chain(extra.iter().copied()).collect()
    };
    assert_error(&with(&["--to", "1.2.3:9"]), &["--to '1.2.3:9'", "IPv4:PORT"]);
    assert_error(&with(&["--to", "::1:9000"]), &["--to '::1:9000'", "[IPv6]:PORT"]);
    assert_error(&with(&["--to", "localhost"]), &["--to 'localhost'"]);
    assert_error(&with(&["--to", "127.0.0.1:0"]), &["port 0"]);
    assert_error(
        &with(&["--to", "127.0.0.1:9", "--payload", "15"]),
        &["--payload 15", "16..=65507"],
    );
    assert_error(&with(&["--to", "127.0.0.1:9", "--payload", "65508"]), &["--payload 65508"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--payload", "lots"]), &["--payload"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--period", "0ms"]), &["--period"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--loss-timeout", "5"]), &["--loss-timeout"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--tos", "300"]), &["--tos 300"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--so-priority", "x"]), &["--so-priority 'x'"]);
    assert_error(&with(&["--to", "127.0.0.1:9", "--bind", "[::1]:0"]), &["family"]);
    assert_error(
        &with(&["--to", "127.0.0.1:9", "--netns", "rtlab-no-such-ns"]),
        &["--netns rtlab-no-such-ns", "rtlab netns up"],
    );
    assert_error(&with(&["--to", "127.0.0.1:9", "--cpus", "999"]), &["--cpus", "999"]);
    assert_error(
        &["udp", "ping", "--to", "127.0.0.1:9", "--policy", "fifo", "--priority", "100"],
        &["--priority", "1..=99"],
    );
    assert_error(&["udp", "ping"], &["--to"]);
    assert_error(&["udp", "reflect", "--bind", "nowhere"], &["--bind 'nowhere'"]);
    assert_error(
        &["udp", "reflect", "--bind", "127.0.0.1:0", "--drop-every", "0", "--policy", "other"],
        &["--drop-every 0"],
    );
    assert_error(
        &["udp", "reflect", "--bind", "192.0.2.77:9000", "--policy", "other"],
        &["--bind 192.0.2.77:9000", "not an address of this host"],
    );
}

#[test]
fn a_port_in_use_and_a_missing_reflector_are_one_line() {
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    assert_error(
        &["udp", "reflect", "--bind", &addr, "--policy", "other", "--count", "1"],
        &["already in use"],
    );
    drop(held);
    // nothing listens there now: the pre-flight check says so instead of counting losses
    assert_error(
        &["udp", "ping", "--to", &addr, "--policy", "other", "--count", "5"],
        &["no reflector answered", &addr],
    );
}

#[test]
fn root_a_knob_without_privilege_is_exit_2() {
    if !is_root() || std::process::Command::new("setpriv").arg("--version").output().is_err() {
        rtlab_sys::test_skip::skipped(format_args!("needs root and setpriv (CI runs as root)"));
        return;
    }
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_rtlab"),
        ])
        .args([
            "udp",
            "reflect",
            "--bind",
            "127.0.0.1:0",
            "--policy",
            "other",
            "--so-priority",
            "7",
            "--count",
            "1",
        ])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("--so-priority") && err.contains("CAP_NET_ADMIN"), "{err}");
}

/// Start a reflector on a free loopback port; returns the child and its address.
fn start_reflector(extra: &[&str]) -> (Child, String) {
    let mut child = rtlab()
        .args(["udp", "reflect", "--bind", "127.0.0.1:0", "--policy", "other", "--no-mlockall"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("rtlab udp reflect: listening on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    (child, addr)
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn loopback_ping_with_drops_accounts_for_everything_and_writes_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let rjson = dir.path().join("reflect.json");
    // no --count: how many requests come depends on the slots the ping skips; the reflector
    // is stopped with Ctrl-C once the ping is done
    let (child, addr) = start_reflector(&["--drop-every", "10", "--json", rjson.to_str().unwrap()]);
    let pjson = dir.path().join("ping.json");
    let o = run(&[
        "udp",
        "ping",
        "--to",
        &addr,
        "--policy",
        "other",
        "--no-mlockall",
        "--count",
        "300",
        "--period",
        "500us",
        "--payload",
        "64",
        "--json",
        pjson.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Missed deadlines") && out.contains("Packet loss"), "{out}");
    let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let r = child.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", String::from_utf8_lossy(&r.stderr));

    let d = read_json(&pjson);
    assert_eq!(d["schema_version"], 2);
    assert_eq!(d["probe"], "udp");
    assert_eq!(d["config"]["role"], "ping");
    assert_eq!(d["config"]["ping"]["payload"], 64);
    let s = &d["streams"][0];
    assert_eq!(s["name"], "ping");
    assert_eq!(s["metric"], "rtt");
    let st = &s["stats"];
    // 300 slots, each sent or skipped (an overrun, when the sender was late past it);
    // every 10th request sent is dropped by the reflector
    let sent: u64 = s["labels"]["sent"].as_str().unwrap().parse().unwrap();
    let (count, lost) = (st["count"].as_u64().unwrap(), st["lost"].as_u64().unwrap());
    assert_eq!(sent + st["overruns"].as_u64().unwrap(), 300, "{st}");
    assert_eq!(lost, sent / 10, "{st}");
    assert_eq!(count + lost, sent, "{st}");
    assert!(out.contains(&format!("{lost} / {sent}")), "{out}");
    for k in ["late", "duplicates", "out_of_order", "malformed", "missed", "overruns"] {
        assert!(st[k].is_u64(), "{k} missing: {st}");
    }
    for k in ["min_ns", "mean_ns", "p50_ns", "p99_ns", "p99_9_ns", "max_ns"] {
        assert!(st[k].as_i64().unwrap() > 0, "{k}: {st}");
    }
    assert!(s["labels"]["so_priority"].is_string() && s["labels"]["rcvbuf"].is_string());
    assert_eq!(d["streams"][1]["name"], "ping.send_lateness");
    assert!(d["warnings"].as_array().unwrap().iter().any(|w| w["code"] == "udp-packet-loss"));
    // the kernel counters, on the ping stream's grid (0.15 s of 1 s windows: one window)
    let c = &d["evidence"]["counters"];
    assert_eq!(c["start_monotonic_ns"], s["start_monotonic_ns"]);
    assert!(s["start_monotonic_ns"].as_i64().unwrap() > 0);
    assert_eq!(c["width_ns"], 1_000_000_000);
    let w = c["windows"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{c}");
    assert!(c["last_partial"].as_bool().unwrap());
    // 300 requests and replies over loopback: the ping thread and the reflector switched
    assert!(w[0]["context_switches"].as_u64().unwrap() > 0, "{c}");
    assert!(d["evidence"]["spike"].is_null());

    let r = read_json(&rjson);
    assert_eq!(r["config"]["role"], "reflect");
    // the reflector keeps its own counters, on its turnaround stream's grid
    assert_eq!(
        r["evidence"]["counters"]["start_monotonic_ns"],
        r["streams"][0]["start_monotonic_ns"]
    );
    assert!(!r["evidence"]["counters"]["windows"].as_array().unwrap().is_empty());
    let rs = &r["streams"][0];
    assert_eq!(rs["name"], "reflector");
    assert_eq!(rs["metric"], "turnaround");
    assert_eq!(rs["labels"]["dropped_on_purpose"], (sent / 10).to_string());
    assert_eq!(rs["labels"]["received"], (sent + 1).to_string(), "the requests and one hello");
    assert_eq!(rs["stats"]["lost"], 0);
}

#[test]
fn pingpong_ipv6_and_short_payload() {
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        rtlab_sys::test_skip::skipped(format_args!("no IPv6 loopback"));
        return;
    }
    let mut child = rtlab()
        .args([
            "udp",
            "reflect",
            "--bind",
            "[::1]:0",
            "--policy",
            "other",
            "--no-mlockall",
            "--count",
            "1001",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(addr.starts_with("[::1]:"), "{line}");
    let o = run(&[
        "udp",
        "ping",
        "--to",
        &addr,
        "--mode",
        "pingpong",
        "--payload",
        "16",
        "--count",
        "1000",
        "--policy",
        "other",
        "--json",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: Value = serde_json::from_slice(&o.stdout).expect("--json - is pure JSON");
    assert_eq!(d["streams"][0]["stats"]["count"], 1000);
    assert_eq!(d["streams"][0]["stats"]["lost"], 0);
    assert!(d["streams"][0]["stats"].get("overruns").is_none(), "no schedule in pingpong");
    assert_eq!(d["streams"].as_array().unwrap().len(), 1);
    child.wait().unwrap();
}

#[test]
fn ctrl_c_on_the_reflector_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let rjson = dir.path().join("r.json");
    let (child, addr) = start_reflector(&["--json", rjson.to_str().unwrap()]);
    let o = run(&[
        "udp", "ping", "--to", &addr, "--policy", "other", "--count", "50", "-q", "--json", "-",
    ]);
    assert_eq!(o.status.code(), Some(0));
    // --count is slots: a skipped slot (overrun) sends one ping fewer
    let p: Value = serde_json::from_slice(&o.stdout).expect("--json - is pure JSON");
    let sent: u64 = p["streams"][0]["labels"]["sent"].as_str().unwrap().parse().unwrap();
    // SIGINT, as Ctrl-C sends it
    std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let r = child.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(0));
    let d = read_json(&rjson);
    // every ping sent, and the ping's hello
    assert_eq!(d["streams"][0]["labels"]["received"], (sent + 1).to_string().as_str());
}
