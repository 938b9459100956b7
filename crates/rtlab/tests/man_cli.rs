//! `rtlab man`: one page that holds every command a person types, with what the exit code and
//! the environment mean, readable by groff without a warning; and help that says each
//! command's own defaults.

mod common;
use common::*;
use std::process::Command;

#[test]
fn the_man_page_holds_every_command_examples_exit_status_and_environment() {
    let o = run(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = stdout(&o);
    for section in [".SH COMMANDS", ".SH EXAMPLES", ".SH \"EXIT STATUS\"", ".SH ENVIRONMENT"] {
        assert!(page.contains(section), "{section}");
    }
    // every listed command has its section; none refers to a page of its own (none exists)
    let help = stdout(&run(&["--help"]));
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   ")) // a wrapped description
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(listed.len() >= 15, "{help}");
    for c in &listed {
        assert!(page.contains(&format!(".SS \"rtlab {c}\"")), "no section for {c}");
    }
    assert!(!page.contains("rtlab\\-timer(1)") && !page.contains("rtlab-timer(1)"));
    // the far side's agent is not for a person: neither listed nor in the page
    assert!(!listed.contains(&"agent") && !page.contains(".SS \"rtlab agent\""), "{help}");
    // a command's own commands and flags are there, with their defaults and environment
    assert!(page.contains(".SS \"rtlab udp ping\"") && page.contains(".SS \"rtlab tune check\""));
    assert!(page.contains("\\fB\\-\\-interval\\fR") && page.contains("[env: RTLAB_DB]"));
    // every argument says what it is, not only its default or choices
    let lines: Vec<&str> = page.lines().collect();
    for (i, _) in lines.iter().enumerate().filter(|(_, l)| **l == ".TP") {
        let text = lines.get(i + 2).copied().unwrap_or_default();
        assert!(
            !text.is_empty() && !text.starts_with('[') && !text.starts_with('.'),
            "no text for {} (line {})",
            lines[i + 1],
            i + 3
        );
    }
    let Ok(g) = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        rtlab_sys::test_skip::skipped(format_args!(
            "the groff check: no groff here (Debian: groff-base)"
        ));
        return;
    };
    use std::io::Write;
    let mut g = g;
    g.stdin.take().unwrap().write_all(page.as_bytes()).unwrap();
    let out = g.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A flag shared by several commands says each command's own default, never another's.
#[test]
fn each_commands_policy_help_says_its_own_default() {
    for (cmd, default) in [
        (&["timer"][..], "fifo"),
        (&["cyclic"], "fifo"),
        (&["udp", "ping"], "fifo"),
        (&["udp", "reflect"], "fifo"),
        (&["noise"], "fifo"),
        (&["pubsub"], "other"),
        (&["observe"], "other"),
    ] {
        let help = stdout(&run(&[cmd, &["--help"]].concat()));
        let at = help.find("--policy <POLICY>").unwrap_or_else(|| panic!("{cmd:?}: {help}"));
        // the flag's text: up to the next flag
        let rest = &help[at + "--policy".len()..];
        let end = rest.find("\n  -").or_else(|| rest.find("\n      --")).unwrap_or(rest.len());
        let text = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(&format!("[{default}]")), "{cmd:?}: {text}");
        for other in ["timer", "udp", "cyclic", "pubsub", "observe"] {
            assert!(!text.contains(other), "{cmd:?} names {other}: {text}");
        }
    }
}
