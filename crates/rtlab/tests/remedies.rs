//! Every remedy names only commands and flags that exist: each `rtlab ...` command quoted in
//! backticks in the sources (messages, remedies, help) is read back through the command line
//! itself (`rtlab SUBCOMMAND --help`), and every bare `(--flag ...)` a message suggests must
//! be a flag of some rtlab command. Unit tests (after `#[cfg(test)]`) are left out: they
//! name bad flags on purpose.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Flags of the other programs rtlab runs: allowed in the file that runs the program, or on
/// a line that names it.
const OTHER_TOOLS: &[(&str, &[&str])] = &[
    // stress-ng's and iperf3's command lines
    (
        "rtlab-load/src/config.rs",
        &[
            "--cpu",
            "--vm",
            "--io",
            "--hdd",
            "--temp-path",
            "--timeout",
            "--one-off",
            "--idle-timeout",
        ],
    ),
    (
        "docker run",
        &["--cap-add", "--ulimit", "--privileged", "--cgroup-parent", "--cpu-rt-runtime"],
    ),
    ("rtla", &["--version"]),
    // the ROS 1 master rtlab starts for roscpp's timers
    ("rtlab-bindings/src/roscpp.rs", &["--core"]),
    // the setup script's cross build (docs/aarch64.md)
    ("scripts/setup.sh", &["--target"]),
];

/// Flags `--help` does not show (internal), each checked to exist by giving it to the parser:
/// (command, flag, a value).
const HIDDEN: &[(&[&str], &str, &str)] = &[
    (&["pubsub"], "--role-config", "{"),
    (&["pubsub"], "--engine-config", "{"),
    (&["tune", "check"], "--root", "/nonexistent"),
];

/// Commands `--help` does not list (not for a person to type: the far side's agent, the
/// roscpp node of `timer --mode roscpp`), whose own `--help` still answers.
const HIDDEN_COMMANDS: &[&str] = &["agent", "roscpp-node"];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The flags and subcommands `rtlab PATH --help` lists.
fn help(
    path: &[String],
    cache: &mut BTreeMap<Vec<String>, (BTreeSet<String>, BTreeSet<String>)>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    if let Some(h) = cache.get(path) {
        return h.clone();
    }
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "rtlab {}: {}", args.join(" "), stderr(&o));
    let text = stdout(&o);
    let mut flags = BTreeSet::new();
    let mut subs = BTreeSet::new();
    let mut in_commands = false;
    for l in text.lines() {
        if l.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if !l.starts_with(' ') {
            in_commands = false;
        }
        let t = l.trim_start();
        // a command's line is indented two spaces; its wrapped description more
        if in_commands && l.starts_with("  ") && !l.starts_with("   ") {
            if let Some(w) = t.split_whitespace().next() {
                subs.insert(w.to_string());
            }
        }
        for w in t.split([' ', ',', '=', '[', ']', '<', '>']) {
            if w.starts_with("--") && w.len() > 2 {
                flags.insert(w.to_string());
            }
        }
    }
    // the top level: its hidden commands exist too
    if path.is_empty() {
        for c in HIDDEN_COMMANDS {
            assert!(!subs.contains(*c), "{c} is listed: take it out of HIDDEN_COMMANDS");
            subs.insert(c.to_string());
        }
    }
    cache.insert(path.to_vec(), (flags.clone(), subs.clone()));
    (flags, subs)
}

#[test]
fn remedies_name_only_commands_and_flags_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&root).unwrap().flatten() {
        let src = c.path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    let mut cache = BTreeMap::new();
    let (_, top) = help(&[], &mut cache);
    // every flag of every command, for the bare `(--flag ...)` suggestions
    let mut all_flags = BTreeSet::new();
    let mut stack: Vec<Vec<String>> = top.iter().map(|s| vec![s.clone()]).collect();
    while let Some(p) = stack.pop() {
        if p.last().is_some_and(|s| s == "help") {
            continue;
        }
        let (flags, subs) = help(&p, &mut cache);
        all_flags.extend(flags);
        for s in subs.into_iter().filter(|s| s != "help") {
            let mut q = p.clone();
            q.push(s);
            stack.push(q);
        }
    }
    for (path, flag, value) in HIDDEN {
        let mut args = path.to_vec();
        args.extend([*flag, *value]);
        let e = stderr(&run(&args));
        assert!(!e.contains("unexpected argument"), "rtlab {}: {e}", args.join(" "));
        all_flags.insert(flag.to_string());
        cache.entry(path.iter().map(|s| s.to_string()).collect()).and_modify(|(f, _)| {
            f.insert(flag.to_string());
        });
    }
    let mut checked = 0;
    let mut wrong = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap();
        let at = |i: usize| format!("{}:{}", f.display(), text[..i].lines().count());
        // `rtlab SUB ... --flag ...`
        for (i, quoted) in text.match_indices('`') {
            let rest = &text[i + 1..];
            let Some(end) = rest.find('`') else { continue };
            let cmd = &rest[..end];
            let Some(args) = cmd.strip_prefix("rtlab ") else { continue };
            if cmd.contains('\n') {
                continue;
            }
            let _ = quoted;
            let words: Vec<&str> = args.split_whitespace().collect();
            let mut path: Vec<String> = Vec::new();
            for w in &words {
                let (_, subs) = help(&path, &mut cache);
                if subs.contains(*w) {
                    path.push(w.to_string());
                } else {
                    break;
                }
            }
            if path.is_empty() && !words.is_empty() && !words[0].starts_with(['-', '{', '(']) {
                wrong.push(format!("{}: `{cmd}`: no command '{}'", at(i), words[0]));
                continue;
            }
            let (flags, _) = help(&path, &mut cache);
            for w in &words {
                let flag = w.split('=').next().unwrap().trim_end_matches([',', ')', '.', ';']);
                if flag.starts_with("--") && flag.len() > 2 && !flag.contains('{') {
                    checked += 1;
                    if !flags.contains(flag) {
                        wrong.push(format!(
                            "{}: `{cmd}`: rtlab {} has no {flag}",
                            at(i),
                            path.join(" ")
                        ));
                    }
                }
            }
        }
        // any other --flag a string names: a flag of some rtlab command, or of the other
        // tool the same line runs
        for (n, line) in text.lines().enumerate() {
            let Some(q) = line.find('"') else { continue };
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (i, _) in line[q..].match_indices("--") {
                let flag: String = line[q + i..]
                    .chars()
                    .skip(2)
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if flag.is_empty() || !flag.starts_with(|c: char| c.is_ascii_lowercase()) {
                    continue;
                }
                let flag = format!("--{flag}");
                checked += 1;
                let theirs = OTHER_TOOLS.iter().any(|(tool, flags)| {
                    flags.contains(&flag.as_str())
                        && (line.contains(tool) || f.ends_with(Path::new(tool)))
                });
                if !all_flags.contains(&flag) && !theirs {
                    wrong.push(format!(
                        "{}:{}: {flag}: no rtlab command has it",
                        f.display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(checked > 300, "only {checked} flags found: the scan is broken");
    assert!(
        wrong.is_empty(),
        "{} remedies name what does not exist:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
