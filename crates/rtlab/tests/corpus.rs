//! Broken input never makes rtlab panic: every scenario file in tests/corpus/ and every
//! invocation below ends with exit 2 and one line on stderr naming what is wrong (a file's
//! error names its file, line and field, given on the file's first line as `# expect:`).
//! Also: a closed stdout ends a command quietly (exit 0, no panic).

mod common;
use common::{rtlab, stderr};
use std::io::Read;
use std::process::Stdio;

fn one_line_exit_2(args: &[&str], needle: &str) {
    let o = rtlab().args(args).output().expect("run rtlab");
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(o.status.code(), Some(2), "{args:?}: expected exit 2, stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: expected one line, got: {err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
}

#[test]
fn every_broken_scenario_file_is_one_line_naming_file_line_and_field() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 15, "the corpus is there");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let expect =
            text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).unwrap_or_else(|| {
                panic!("{}: first line must be '# expect: LINE: FIELD'", f.display())
            });
        let path = f.to_str().unwrap();
        // validated before anything runs: --dry-run and a real run say the same
        one_line_exit_2(&["run", path, "--dry-run"], &format!("{path}:{expect}"));
    }
}

#[test]
fn broken_flags_are_one_line_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["timer", "--interval", "0s", "--loops", "5"], "--interval"),
        (&["timer", "--loops", "0"], "--count"),
        (&["timer", "--threads", "0", "--loops", "5"], "--threads"),
        (&["timer", "--priority", "120", "--loops", "5"], "--priority"),
        (&["timer", "--cpus", "999", "--loops", "5"], "--cpus"),
        (&["timer", "--window", "fast", "--loops", "5"], "--window"),
        (&["cyclic", "--work=-3ms", "--count", "5"], "--work"),
        (&["cyclic", "--walk", "64gib", "--count", "5"], "--walk"),
        (&["cyclic", "--interval", "0s", "--count", "5"], "--interval"),
        (&["pubsub", "--rate", "1000000000000hz", "--count", "5"], "--rate"),
        (&["pubsub", "--history", "keep-last:0", "--count", "5"], "--history"),
        (&["pubsub", "--subscribers", "0", "--count", "5"], "--subscribers"),
        (&["pubsub", "--thread-priority", "recv=200", "--count", "5"], "--thread-priority"),
        (&["udp", "ping", "--to", "nowhere", "--count", "5"], "--to"),
        (&["udp", "ping", "--to", "127.0.0.1:9", "--payload", "3", "--count", "5"], "--payload"),
        (&["udp", "ping", "--far", "robot2", "--count", "5"], "--far"),
        (
            &["udp", "ping", "--far", "netns:no-such-ns-rtlab", "--count", "5"],
            "no such network namespace",
        ),
        (&["pubsub", "--transport", "shm", "--far", "ssh:robot2", "--count", "5"], "--transport"),
        (
            &["pubsub", "--transport", "dds", "--far", "ssh:robot2", "--count", "5"],
            "--synced-clocks",
        ),
        (&["pubsub", "--domain", "300", "--count", "5"], "--domain"),
        (&["pubsub", "--netns", "no-such-ns-rtlab", "--count", "5"], "--netns"),
        (&["agent", "--keepalive", "0s"], "--keepalive"),
        (&["run", "quick", "--scale=-1"], "--scale"),
        (&["run", "s1-udp-linux", "--far", "robot2", "--dry-run"], "--far"),
        (&["run", "--resume", "999999", "--db", "/nonexistent-dir/x.db"], "--db"),
        (&["report", "--db", "/nonexistent-dir/x.db"], "x.db"),
        (&["completions", "tcsh"], "tcsh"),
        (&["no-such-command"], "no-such-command"),
    ];
    for (args, needle) in cases {
        one_line_exit_2(args, needle);
    }
    assert!(!std::path::Path::new("/nonexistent-dir").exists(), "bad input leaves nothing behind");
}

#[test]
fn a_case_limit_names_the_count_and_the_axes() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big.toml");
    let intervals: Vec<String> = (1..=3000).map(|i| format!("\"{i}us\"")).collect();
    std::fs::write(
        &f,
        format!(
            "name = \"big\"\nduration = \"1s\"\nrepetitions = 1000\n[[probe]]\nkind = \"timer\"\ninterval = [{}]\n",
            intervals.join(",")
        ),
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    one_line_exit_2(&["run", f.to_str().unwrap(), "--dry-run"], "3000000 cases");
    let o = rtlab().args(["run", f.to_str().unwrap(), "--dry-run"]).output().unwrap();
    let err = stderr(&o);
    assert!(err.contains("repetitions 1000 x interval 3000") && err.contains("max_cases"), "{err}");
    // a count, not a time: the refusal is computed, the 3 million cases never expanded
    assert!(t0.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    // a dry run of 5000 cases prints far more than a pipe holds
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("many.toml");
    let intervals: Vec<String> = (1..=5000).map(|i| format!("\"{i}us\"")).collect();
    std::fs::write(
        &f,
        format!(
            "name = \"many\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = [{}]\n",
            intervals.join(",")
        ),
    )
    .unwrap();
    for args in [
        vec!["run", f.to_str().unwrap(), "--dry-run"],
        vec!["run", "--list"],
        vec!["man"],
        vec!["completions", "bash"],
    ] {
        let mut child =
            rtlab().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = [0u8; 16];
        let _ = child.stdout.as_mut().unwrap().read(&mut first);
        drop(child.stdout.take()); // `| head -c 16`
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
    }
}
