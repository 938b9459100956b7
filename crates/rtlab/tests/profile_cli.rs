//! `--profile NAME` on every probe command (the timer's, with a child cgroup, is in
//! cli_timer.rs): each runs under the profile, says its steps, keeps them in
//! `config.profile`, and puts everything back.

mod common;
use common::*;
use serde_json::Value;

/// `rtlab ARGS --profile rt-normal --json FILE` (exit 0): its document and stdout.
fn under_rt_normal(args: &[&str], d: &std::path::Path) -> (Value, String) {
    let f = d.join("p.json");
    let o = rtlab().args(args).args(["--profile", "rt-normal", "--json"]).arg(&f).output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {out}\n{}", stderr(&o));
    (serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap(), out)
}

#[test]
fn root_every_probe_command_runs_under_a_profile_and_puts_it_back() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (profiles change the machine)"));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    for args in [
        &["cyclic", "--count", "50", "--work", "10us"][..],
        &["noise", "--duration", "200ms"],
        &["pubsub", "--transport", "intra", "--count", "50", "--rate", "1khz"],
        &["udp", "ping", "--pair", "--count", "50", "--period", "1ms"],
    ] {
        let (v, out) = under_rt_normal(args, d.path());
        let p = &v["config"]["profile"];
        assert_eq!(p["profile"], "rt-normal", "{args:?}: {p}");
        assert_eq!(p["restored"], true, "{args:?}: {p}");
        // rt-normal: no RT throttling while it ran, put back after
        let steps = p["steps"].to_string();
        assert!(steps.contains("sched_rt_runtime_us"), "{args:?}: {steps}");
        assert!(
            out.contains("profile rt-normal (journaled, put back when the run ends):"),
            "{out}"
        );
        assert!(out.contains("profile rt-normal: put back"), "{out}");
        let now = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
        assert_eq!(now, runtime, "{args:?}");
        assert!(!std::path::Path::new(rtlab_host::journal::DEFAULT_JOURNAL).exists(), "{args:?}");
    }
    // the reflector too (it answers a ping that holds the machine lock): Ctrl-C ends it and
    // its profile is put back
    let f = d.path().join("r.json");
    let mut r = rtlab()
        .args(["udp", "reflect", "--bind", "127.0.0.1:47311", "--profile", "rt-normal", "--json"])
        .arg(&f)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    let mut out = std::io::BufReader::new(r.stdout.take().unwrap());
    while !said.contains("listening on") {
        let mut l = String::new();
        assert!(std::io::BufRead::read_line(&mut out, &mut l).unwrap() > 0, "{said}");
        said.push_str(&l);
    }
    assert!(said.contains("profile rt-normal (journaled"), "{said}");
    std::process::Command::new("kill").args(["-INT", &r.id().to_string()]).status().unwrap();
    assert!(r.wait().unwrap().success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
    assert_eq!(v["config"]["profile"]["restored"], true, "{}", v["config"]);
    assert!(!std::path::Path::new(rtlab_host::journal::DEFAULT_JOURNAL).exists());
}
