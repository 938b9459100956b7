//! `rtlab runs` through the binary: listing, a missing store, a store from a newer schema;
//! `rtlab run` when the store's disk fills (a tmpfs): the case waits in memory, or goes to a file.

mod common;
mod stored;
use stored::store_with_fixture;

use common::{assert_error, is_root, rtlab, run, stdout};

#[test]
fn runs_lists_the_stored_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_fixture(dir.path());
    let o = run(&["runs", "--db", &db]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no run 1 in: {out}"));
    assert!(line.contains("fixture-timer") && line.contains("complete"), "{line}");
    let o = run(&["runs", "--db", &db, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["cases"], 9);
    assert_eq!(v[0]["failed"], 1);
}

#[test]
fn runs_on_a_missing_store_is_one_line_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nothing.db").display().to_string();
    assert_error(&["runs", "--db", &db], &["--db", "nothing.db", "no store"]);
    assert!(!dir.path().join("nothing.db").exists(), "a read command created a store");
}

#[test]
fn a_store_from_a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    newer_store(&path);
    let before = std::fs::read(&path).unwrap();
    let db = path.display().to_string();
    for args in [
        vec!["runs", "--db", &db],
        vec!["report", "--db", &db],
        vec!["export", "1", "--format", "json", "--db", &db],
    ] {
        assert_error(&args, &["future.db", "newer"]);
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A store file whose schema version is above this rtlab's: a current store with its
/// `PRAGMA user_version` (a big-endian u32 at byte 60 of the SQLite header) raised.
fn newer_store(path: &std::path::Path) {
    {
        rtlab_store::Store::open(path).unwrap();
    }
    let mut bytes = std::fs::read(path).unwrap();
    let v = rtlab_store::schema_version() + 1;
    bytes[60..64].copy_from_slice(&v.to_be_bytes());
    std::fs::write(path, bytes).unwrap();
}

/// A tmpfs of `size` mounted on `dir` for the test's life (root), unmounted when dropped.
struct Tmpfs(std::path::PathBuf);
impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "rtlab-test"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs");
        Tmpfs(dir.to_path_buf())
    }
    /// Fill it: a file as large as what is left (the write that fails ends it).
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let p = self.0.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let block = vec![7u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        let _ = f.flush();
        p
    }
}
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

const TWO_CASES: &str = r#"
name = "full"
[[probe]]
kind = "timer"
interval = ["1ms", "2ms"]
duration = "2s"
"#;

fn run_in_background(dir: &std::path::Path, db: &std::path::Path) -> std::process::Child {
    let f = dir.join("full.toml");
    std::fs::write(&f, TWO_CASES).unwrap();
    rtlab()
        .current_dir(dir)
        .env("TMPDIR", dir)
        .args(["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `child`'s stderr, line by line, as it comes.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let r = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in r.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// Wait (bounded) for a line holding `needle`; the lines up to it.
fn wait_for(rx: &std::sync::mpsc::Receiver<String>, needle: &str) -> String {
    let mut all = String::new();
    while let Ok(l) = rx.recv_timeout(std::time::Duration::from_secs(60)) {
        all.push_str(&l);
        all.push('\n');
        if l.contains(needle) {
            return all;
        }
    }
    panic!("'{needle}' never came: {all}");
}

#[test]
fn root_the_stores_disk_full_a_moment_every_case_stored_for_good_kept_in_a_file_it_names() {
    if !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (mounts a tmpfs)"));
        return;
    }
    // one at a time: both runs share this test binary's machine lock
    let d = tempfile::tempdir().unwrap();
    let disk = d.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    let fs = Tmpfs::mount(&disk, "4m");
    let db = disk.join("rtlab.db");

    // full while the first case measures; room again once rtlab said it waits
    let mut child = run_in_background(d.path(), &db);
    let err = stderr_lines(&mut child);
    wait_for(&err, "[1/2] timer/idle/no-rt/interval=1ms");
    let filler = fs.fill();
    let said = wait_for(&err, "store: case 'timer/idle/no-rt/interval=1ms' not stored");
    assert!(said.contains("kept in memory, tried again"), "{said}");
    std::fs::remove_file(&filler).unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0), "{said}");
    let run = rtlab_store::Store::open_existing(&db).unwrap().load_run(1).unwrap();
    assert_eq!(run.cases.len(), 2, "both cases stored");
    assert!(run.cases.iter().all(|c| c.document.is_some()));

    // full for good: Ctrl-C while it waits for room, and the case goes to a file at once
    let mut child = run_in_background(d.path(), &db);
    let err = stderr_lines(&mut child);
    wait_for(&err, "[1/2] timer/idle/no-rt/interval=1ms");
    let _filler = fs.fill();
    wait_for(&err, "not stored");
    let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    let said = wait_for(&err, "rtlab: error");
    assert_eq!(child.wait().unwrap().code(), Some(2), "{said}");
    assert!(said.contains("it is kept in") && said.contains("rtlab-run2-case0.json"), "{said}");
    let file = d.path().join("rtlab-run2-case0.json");
    let kept: rtlab_core::run::CaseRecord =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept.name, "timer/idle/no-rt/interval=1ms");
    assert!(kept.document.is_some_and(|d| d.streams[0].stats.count > 0), "the measured case");
}
