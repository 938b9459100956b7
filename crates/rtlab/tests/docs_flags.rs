//! One word per option, everywhere: every `rtlab ...` command line in the README and the docs
//! (code blocks and inline code) names only flags its command has, every `bash scripts/X.sh`
//! line only flags that script takes, and a flag written on its own (`--policy fifo`) exists
//! somewhere in rtlab or its scripts, or is another tool's, named here with the tool.
//!
//! A command's flags are read from its `--help`; a hidden one (`--role-config`, `--root`) is
//! found by asking the command with `FLAG --help`, which parses the flag and never runs
//! anything: clap says "unexpected argument" for a flag the command does not have.

mod common;

use common::rtlab;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Flags the docs name that belong to other programs, with the program.
const FOREIGN: &[(&str, &str)] = &[
    ("--cap-add", "podman"),
    ("--ulimit", "podman"),
    ("--cpu-rt-runtime", "podman"),
    ("--privileged", "podman"),
    ("--prio", "cyclictest"),
    ("--priospread", "cyclictest"),
    ("--histfile", "cyclictest"),
    ("--latency", "cyclictest"),
    ("--default-system", "cyclictest"),
    ("--spike", "cyclictest"),
    ("--smi", "cyclictest"),
    ("--cpu-method", "stress-ng"),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn help(path: &[String]) -> String {
    let o = rtlab().args(path).arg("--help").output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The long flags a help text lists (`  -l, --count <COUNT>`, `      --json <FILE>`) and the
/// visible aliases (`[alias: --loops]`, `[aliases: --a, --b]`).
fn listed_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let t = line.trim_start();
        let t = match t.strip_prefix('-') {
            Some(r) if r.len() >= 3 && r.as_bytes()[1] == b',' => r[2..].trim_start(),
            _ => t,
        };
        if let Some(r) = t.strip_prefix("--") {
            let name: String =
                r.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            out.insert(format!("--{name}"));
        }
        for (i, _) in line.match_indices("alias") {
            let rest = &line[i..];
            let rest = &rest[..rest.find(']').unwrap_or(rest.len())];
            for w in rest.split([' ', ',']).filter(|w| w.starts_with("--")) {
                out.insert(w.to_string());
            }
        }
    }
    out
}

/// Every command path (`[]`, `["udp"]`, `["udp", "ping"]` ...) and the flags its help lists.
fn commands() -> BTreeMap<Vec<String>, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let text = help(&path);
        if let Some(sec) = text.split("Commands:").nth(1) {
            let sec = sec.split("Options:").next().unwrap_or_default();
            for l in sec.lines().filter(|l| l.starts_with("  ") && !l.starts_with("   ")) {
                let name = l.split_whitespace().next().unwrap_or_default();
                if !name.is_empty() && name != "help" {
                    let mut p = path.clone();
                    p.push(name.to_string());
                    todo.push(p);
                }
            }
        }
        out.insert(path, listed_flags(&text));
    }
    out
}

/// Whether command `path` takes `flag` (a hidden one included): parsed, never run.
fn takes(path: &[String], flag: &str) -> bool {
    let o = rtlab().args(path).arg(flag).arg("--help").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    !err.contains("unexpected argument")
}

/// The flags each script of scripts/ takes: the `--name)` patterns of its `case`.
fn script_flags() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(workspace().join("scripts")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "sh") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let mut flags = BTreeSet::new();
        for l in text.lines() {
            let t = l.trim_start();
            if !t.starts_with("--") {
                continue;
            }
            let Some(pat) = t.split(')').next() else { continue };
            for alt in pat.split('|') {
                let name: String = alt
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if name.len() > 2 {
                    flags.insert(name);
                }
            }
        }
        out.insert(format!("scripts/{}", p.file_name().unwrap().to_string_lossy()), flags);
    }
    out
}

/// The README and docs/*.md: (file, line number, text) of every command-like piece: each
/// line of a code block (continuation lines joined), each inline code span elsewhere.
fn pieces() -> Vec<(String, usize, String)> {
    let mut files = vec![workspace().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut out = Vec::new();
    for f in files {
        let name = f.strip_prefix(workspace()).unwrap_or(&f).display().to_string();
        let text = std::fs::read_to_string(&f).unwrap();
        let mut block = false;
        let mut carry: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                block = !block;
                continue;
            }
            if block {
                let (n, mut joined) = carry.take().unwrap_or((i + 1, String::new()));
                joined.push_str(line.trim_end_matches('\\'));
                if line.ends_with('\\') {
                    joined.push(' ');
                    carry = Some((n, joined));
                } else {
                    out.push((name.clone(), n, joined));
                }
                continue;
            }
            for (k, span) in line.split('`').enumerate() {
                if k % 2 == 1 {
                    out.push((name.clone(), i + 1, span.to_string()));
                }
            }
        }
    }
    out
}

/// Every command's EXAMPLES (the end of its `--help`): (`rtlab CMD --help`, line, text).
fn help_examples(cmds: &BTreeMap<Vec<String>, BTreeSet<String>>) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    for path in cmds.keys() {
        let text = help(path);
        let Some(ex) = text.split("\nExamples:\n").nth(1) else { continue };
        let at = format!("rtlab {} --help", path.join(" "));
        for (i, l) in ex.lines().enumerate().filter(|(_, l)| l.starts_with("  rtlab ")) {
            out.push((at.clone(), i + 1, l.to_string()));
        }
    }
    out
}

/// `piece` cut into the commands it holds: at `&&`, `||`, `;`, `|`, a comment, and two or
/// more spaces (a table of commands side by side).
fn commands_in(piece: &str) -> Vec<String> {
    let piece = piece.split(" #").next().unwrap_or_default();
    let mut out = Vec::new();
    for a in piece.split("&&").flat_map(|s| s.split("||")).flat_map(|s| s.split([';', '|'])) {
        for b in a.split("  ") {
            let b = b.trim();
            if !b.is_empty() {
                out.push(b.to_string());
            }
        }
    }
    out
}

/// The `--flags` of a command line, up to a `--` that hands the rest to another program.
fn flags_in(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .take_while(|w| **w != "--")
        .filter_map(|w| {
            let w = w.trim_matches(|c: char| "[]()\"',".contains(c));
            let name: String = w
                .strip_prefix("--")?
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            (!name.is_empty() && name.as_bytes()[0].is_ascii_alphanumeric())
                .then(|| format!("--{name}"))
        })
        .collect()
}

#[test]
fn every_flag_in_the_readme_and_docs_exists_where_it_is_written() {
    let cmds = commands();
    assert!(cmds.len() > 20, "the command tree was not read: {:?}", cmds.keys());
    let scripts = script_flags();
    assert!(scripts.get("scripts/setup.sh").is_some_and(|f| f.contains("--target")));
    // the check itself finds what it must: a flag of another command, one of no command,
    // a script's unknown flag; and passes an alias, a hidden flag and another tool's
    let probe = |t: &str| vec![("probe.md".to_string(), 1, t.to_string())];
    for (piece, found) in [
        ("rtlab netns up && rtlab timer --nope 3", Some("rtlab timer has no --nope")),
        ("rtlab udp ping --transport shm", Some("rtlab udp ping has no --transport")),
        ("--nope 3", Some("--nope is no flag of rtlab")),
        ("bash scripts/setup.sh --nope", Some("scripts/setup.sh takes no --nope")),
        ("rtlab timer --loops 5  stress-ng --cpu 4", None),
        ("sudo rtlab pubsub --role-config JSON", None),
        ("--cap-add SYS_NICE", None),
    ] {
        let bad = check(&cmds, &scripts, probe(piece)).0;
        match found {
            Some(f) => assert!(bad.len() == 1 && bad[0].contains(f), "{piece}: {bad:?}"),
            None => assert!(bad.is_empty(), "{piece}: {bad:?}"),
        }
    }
    // every command the help lists has examples, and they hold true as the docs must
    let examples = help_examples(&cmds);
    for path in cmds.keys().filter(|p| p.len() == 1) {
        let at = format!("rtlab {} --help", path.join(" "));
        assert!(examples.iter().any(|e| e.0 == at), "{at}: no Examples");
    }
    let (bad, _, _) = check(&cmds, &scripts, examples);
    assert!(
        bad.is_empty(),
        "{} flags of the examples do not exist:\n{}",
        bad.len(),
        bad.join("\n")
    );
    let (bad, lines, checked) = check(&cmds, &scripts, pieces());
    eprintln!("{lines} command lines, {checked} flags checked");
    assert!(lines > 100 && checked > 200, "too few command lines read ({lines}, {checked} flags)");
    assert!(
        bad.is_empty(),
        "{} flags the docs name do not exist there:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Every flag of `pieces` checked: (what is wrong, command lines read, flags checked).
fn check(
    cmds: &BTreeMap<Vec<String>, BTreeSet<String>>,
    scripts: &BTreeMap<String, BTreeSet<String>>,
    pieces: Vec<(String, usize, String)>,
) -> (Vec<String>, usize, usize) {
    let every: BTreeSet<&String> = cmds.values().flatten().collect();
    let cmds = cmds.clone();
    // commands that take any word as their own (`load cmd ARGV`): no hidden flag to find there
    let open: BTreeSet<Vec<String>> =
        cmds.keys().filter(|p| takes(p, "--no-such-flag-anywhere")).cloned().collect();
    let mut cache: BTreeMap<(Vec<String>, String), bool> = BTreeMap::new();
    let mut has = |path: &Vec<String>, flag: &str| -> bool {
        if cmds[path].contains(flag) || flag == "--help" {
            return true;
        }
        *cache.entry((path.clone(), flag.to_string())).or_insert_with(|| takes(path, flag))
    };
    let mut bad = Vec::new();
    let (mut lines, mut checked) = (0, 0);
    for (file, n, piece) in pieces {
        // a flag on its own: rtlab's somewhere, a script's, or a named tool's
        let t = piece.trim();
        if t.starts_with("--") && !t.contains(" rtlab ") {
            let flag = &flags_in(&[t.split([' ', '=']).next().unwrap_or_default()]);
            if let Some(f) = flag.first() {
                checked += 1;
                let known = every.contains(f)
                    || scripts.values().any(|s| s.contains(f))
                    || FOREIGN.iter().any(|(x, _)| x == f)
                    || cmds.keys().filter(|p| !open.contains(*p)).any(|p| has(p, f));
                if !known {
                    bad.push(format!("{file}:{n}: {f} is no flag of rtlab, its scripts or a tool named in this test: `{t}`"));
                }
            }
            continue;
        }
        for c in commands_in(&piece) {
            let words: Vec<&str> = c.split_whitespace().collect();
            let start = words
                .iter()
                .position(|w| *w == "rtlab" || w.ends_with("/rtlab") || w.starts_with("scripts/"));
            let Some(start) = start else { continue };
            // only where the command starts: after a prompt, sudo, bash, exec or VAR=value
            let env = |w: &str| {
                w.split_once('=').is_some_and(|(k, _)| {
                    !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                })
            };
            if !words[..start].iter().all(|w| ["sudo", "$", "bash", "exec"].contains(w) || env(w)) {
                continue;
            }
            let words = &words[start..];
            if words[0].starts_with("scripts/") {
                let Some(own) = scripts.get(words[0].trim_end_matches([',', ')'])) else {
                    continue;
                };
                lines += 1;
                // a script that runs a command after its options (aarch64.sh cargo ...)
                let own_words: Vec<&str> =
                    words[1..].iter().take_while(|w| **w != "cargo").copied().collect();
                for f in flags_in(&own_words) {
                    checked += 1;
                    if !own.contains(&f) {
                        bad.push(format!("{file}:{n}: {} takes no {f}: `{c}`", words[0]));
                    }
                }
                continue;
            }
            // the command path: as many words as name a command
            let mut path: Vec<String> = Vec::new();
            for w in &words[1..] {
                let mut p = path.clone();
                p.push(w.to_string());
                if cmds.contains_key(&p) {
                    path = p;
                } else {
                    break;
                }
            }
            lines += 1;
            for f in flags_in(&words[1..]) {
                checked += 1;
                if !has(&path, &f) {
                    let at = if path.is_empty() {
                        "rtlab".into()
                    } else {
                        format!("rtlab {}", path.join(" "))
                    };
                    bad.push(format!("{file}:{n}: {at} has no {f}: `{c}`"));
                }
            }
        }
    }
    (bad, lines, checked)
}
