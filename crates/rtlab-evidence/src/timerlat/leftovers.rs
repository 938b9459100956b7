//! What rtla leaves in tracefs when it is killed, put back through the journal.

use super::availability::{detect_with, tracefs_dir};
use super::names::{OSNOISE_SETTINGS, RTLA_INSTANCES};
use rtlab_host::host::Host;
use rtlab_host::session::Action;

/// The journal entry to apply (through a [`rtlab_host::session::Session`]) before [`super::start`]: its
/// `did` does nothing; its `undo` (run by the session's restore, or by `rtlab tune restore`
/// after a kill -9) sets `nop` on and removes rtla's instances that are still there and writes
/// back the osnoise settings read now (and the OSNOISE_WORKLOAD option where the kernel has
/// `osnoise/options`). When rtla ended normally it has done all this itself and the undo only
/// rewrites the same values. None when this kernel has no timerlat (rtla changes nothing then).
/// An undo while an rtla still runs (rtlab killed, rtla not yet at its duration) stops its
/// tracer; removing the instance then fails (EBUSY) and the journal keeps the entry for a
/// second `rtlab tune restore`.
pub fn leftover_cleanup_action(host: &dyn Host) -> Option<Action> {
    let dir = tracefs_dir(host)?;
    if !detect_with(host, None, None).tracer {
        return None;
    }
    let real = host.path(&dir).display().to_string();
    let mut script = vec!["set -e".to_string(), format!("T={}", sh_quote(&real))];
    script.push(format!(
        "for i in {}; do d=\"$T/instances/$i\"; if [ -d \"$d\" ]; then echo nop > \"$d/current_tracer\"; rmdir \"$d\"; fi; done",
        RTLA_INSTANCES.join(" ")
    ));
    for s in OSNOISE_SETTINGS {
        let Ok(v) = host.read(&format!("{dir}/osnoise/{s}")) else { continue };
        let v = v.trim();
        if !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || ",-_".contains(c)) {
            script.push(format!("echo {v} > \"$T/osnoise/{s}\""));
        }
    }
    if let Ok(opts) = host.read(&format!("{dir}/osnoise/options")) {
        let words: Vec<&str> = opts.split_whitespace().collect();
        if words.contains(&"NO_OSNOISE_WORKLOAD") {
            script.push("echo NO_OSNOISE_WORKLOAD > \"$T/osnoise/options\"".into());
        } else if words.contains(&"OSNOISE_WORKLOAD") {
            script.push("echo OSNOISE_WORKLOAD > \"$T/osnoise/options\"".into());
        }
    }
    Some(Action::Command {
        did: vec!["sh".into(), "-c".into(), ": rtla timerlat top starts: its tracefs instances and osnoise settings are put back on restore".into()],
        undo: vec!["sh".into(), "-c".into(), script.join("\n")],
    })
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::fake_tracefs;
    use std::process::Command;

    #[test]
    fn the_leftover_action_removes_the_instances_and_writes_the_settings_back() {
        let d = tempfile::tempdir().unwrap();
        let host = rtlab_host::host::FakeHost::new(d.path());
        rtlab_host::testing::put(
            d.path(),
            "sys/kernel/tracing/available_tracers",
            "blk function nop\n",
        );
        assert_eq!(leftover_cleanup_action(&host), None, "no timerlat: rtla changes nothing");
        fake_tracefs(d.path(), "timerlat nop\n");
        let Some(Action::Command { did, undo }) = leftover_cleanup_action(&host) else {
            panic!("an action")
        };
        assert_eq!(did[..2], ["sh", "-c"]);
        let script = &undo[2];
        for i in RTLA_INSTANCES {
            assert!(script.contains(i), "{script}");
        }
        assert!(script.contains("echo 0-1 > \"$T/osnoise/cpus\""), "{script}");
        assert!(script.contains("echo 1000 > \"$T/osnoise/timerlat_period_us\""), "{script}");
        assert!(script.contains("echo OSNOISE_WORKLOAD > \"$T/osnoise/options\""), "{script}");

        // journaled through a session: the restore runs the undo (the fake machine logs it)
        let journal = d.path().join("journal.trace");
        {
            let mut s = rtlab_host::session::Session::begin(&host, &journal, "test").unwrap();
            s.apply(&leftover_cleanup_action(&host).unwrap()).unwrap();
            // rtla (killed) left a changed setting behind
            rtlab_host::testing::put(
                d.path(),
                "sys/kernel/tracing/osnoise/timerlat_period_us",
                "250\n",
            );
        }
        assert!(
            host.commands().iter().any(|c| c.starts_with("sh -c set -e")),
            "{:?}",
            host.commands()
        );
        assert!(!journal.exists());

        // the script itself, run on the fake tree: the settings go back
        let out = Command::new("sh").args(["-c", script]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/kernel/tracing/osnoise/timerlat_period_us"))
                .unwrap()
                .trim(),
            "1000"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/kernel/tracing/osnoise/options"))
                .unwrap()
                .trim(),
            "OSNOISE_WORKLOAD"
        );
    }
}
