//! `scripts/house-limits.py` (the house's limits on its shape, a step of `.ci/run`): on a
//! made-up repository it names a file over 800 lines, a public unsafe function and an import
//! circle, and passes one within the limits; bad input is one line and exit 2.

use std::path::Path;
use std::process::{Command, Output};

fn limits(args: &[&Path]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/house-limits.py");
    Command::new("python3").arg(script).args(args).output().expect("python3")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

#[test]
fn a_long_file_and_an_import_circle_are_named_and_fail() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    write(root, "crates/a/src/lib.rs", "mod b;\nmod c;\n");
    write(root, "crates/a/src/b.rs", "use crate::c::C;\npub struct B;\npub unsafe fn f() {}\n");
    write(root, "crates/a/src/c.rs", "use crate::b::B;\npub struct C;\n");
    write(root, "crates/a/src/long.rs", &"// a line\n".repeat(801));
    write(root, "fuzz/fuzz_targets/ok.rs", &"// a line\n".repeat(800));
    write(
        root,
        "crates/rtlab/Cargo.toml",
        "[dependencies]\nrtlab-lab.workspace = true\nrtlab-store = { path = \"../s\" }\n\n[dev-dependencies]\nrtlab-sys.workspace = true\n",
    );
    let o = limits(&[root]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}{}", text(&o.stderr));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[..4],
        [
            "crates/a/src/long.rs: 801 lines (the limit is 800)",
            "crates/a/src/b.rs:3: a public unsafe function",
            "crates/rtlab/Cargo.toml:3: the binary depends on rtlab-store (only rtlab-core, rtlab-report, rtlab-lab)",
            "import circle: a: b.rs c.rs"
        ],
        "{out}"
    );
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(
        lines[4],
        "house-limits: 4 breaches (files up to 800 lines, no import circle, no public unsafe function, a thin binary)"
    );
}

#[test]
fn the_limits_hold_on_a_repository_within_them() {
    let d = tempfile::tempdir().unwrap();
    write(d.path(), "crates/a/src/lib.rs", "mod b;\nmod x;\nmod y;\npub use b::B;\n");
    write(d.path(), "crates/a/src/b.rs", "pub struct B;\npub(crate) unsafe fn g() {}\n");
    // a child naming its sibling through its parent's path is not an import of the parent
    write(d.path(), "crates/a/src/x/mod.rs", "mod p;\nmod q;\npub use p::P;\n");
    write(d.path(), "crates/a/src/x/p.rs", "use super::{q};\npub struct P(q::Q);\n");
    write(d.path(), "crates/a/src/x/q.rs", "pub struct Q;\n");
    // a parent's child named inside a string or a comment is no import of it
    write(
        d.path(),
        "crates/a/src/y/mod.rs",
        "mod r;\npub const S: &str = \"see r::R\"; // r::R\npub struct Y;\n",
    );
    write(d.path(), "crates/a/src/y/r.rs", "use crate::y::Y;\npub struct R(Y);\n");
    // the binary's tests may use any crate
    write(
        d.path(),
        "crates/rtlab/Cargo.toml",
        "[dependencies]\nrtlab-lab.workspace = true\n\n[dev-dependencies]\nrtlab-store.workspace = true\n",
    );
    let o = limits(&[d.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    assert_eq!(
        text(&o.stdout),
        "house-limits: 0 breaches (files up to 800 lines, no import circle, no public unsafe function, a thin binary)\n"
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let o = limits(&[d.path()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no crates/ folder") && err.contains(&d.path().display().to_string()));
    let o = limits(&[d.path(), d.path()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1);
    assert!(text(&o.stderr).contains("usage: scripts/house-limits.py [ROOT]"));
}
