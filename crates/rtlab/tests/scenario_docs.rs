//! docs/scenarios.md against the parser: every example is a scenario `rtlab run --dry-run`
//! reads, and every key its tables document is used by an example (so it is a key the parser
//! takes, with the meaning shown).

mod common;
use common::*;

fn page() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/scenarios.md");
    std::fs::read_to_string(path).unwrap()
}

/// Every ```toml block of the page.
fn examples(page: &str) -> Vec<String> {
    page.split("```toml\n").skip(1).map(|b| b.split("```").next().unwrap().to_string()).collect()
}

#[test]
fn every_example_of_the_scenario_docs_is_read_by_the_parser() {
    let page = page();
    let examples = examples(&page);
    assert!(examples.len() >= 7, "{} examples", examples.len());
    let d = tempfile::tempdir().unwrap();
    for (i, text) in examples.iter().enumerate() {
        let f = d.path().join(format!("example-{i}.toml"));
        std::fs::write(&f, text).unwrap();
        let o = run(&["run", f.to_str().unwrap(), "--dry-run"]);
        assert_eq!(o.status.code(), Some(0), "example {i}:\n{text}\n{}", stderr(&o));
        let out = stdout(&o);
        // the page's claims about the first examples' cases
        if i == 0 {
            for c in ["timer/idle/no-rt", "timer/idle/rt-normal", "timer/cpu/no-rt"] {
                assert!(out.contains(c), "{out}");
            }
            assert!(out.contains("4 cases"), "{out}");
        }
        if i == 1 {
            assert!(out.contains("12 cases"), "{out}");
            assert!(out.contains("pubsub/idle/no-rt/payload=4kb,transport=zenoh"), "{out}");
        }
    }
}

#[test]
fn every_key_the_scenario_docs_list_is_used_by_an_example() {
    let page = page();
    let all = examples(&page).join("\n");
    let used = |k: &str| {
        all.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("{k} ="))
                || l.contains(&format!("{{ {k} ="))
                || l.contains(&format!(", {k} ="))
        })
    };
    // the first column of each table whose header is `| key |` (the loads' table lists kinds:
    // its examples above are read by the parser)
    let mut keys = Vec::new();
    let mut in_keys = false;
    for row in page.lines() {
        if !row.starts_with('|') {
            in_keys = false;
            continue;
        }
        if row.starts_with("| key |") {
            in_keys = true;
        }
        if in_keys && row.starts_with("| `") {
            let first = row.split('|').nth(1).unwrap();
            keys.extend(first.split('`').skip(1).step_by(2).map(str::to_string));
        }
    }
    assert!(keys.len() >= 18, "{keys:?}");
    let missing: Vec<_> = keys.iter().filter(|k| !used(k)).collect();
    assert!(missing.is_empty(), "documented keys no example uses: {missing:?}");
}
