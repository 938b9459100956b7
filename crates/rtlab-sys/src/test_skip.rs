//! A test that cannot run on this machine (not root, a tool or kernel feature missing) says
//! why and passes, except where `.ci/run` set `RTLAB_NO_SKIP=1`: CI runs as root with
//! everything `scripts/setup.sh` installs, so there a skip is a failure naming what was
//! missing, not a green test that measured nothing.

/// The variable `.ci/run` sets to `1`.
pub const NO_SKIP: &str = "RTLAB_NO_SKIP";

/// Say that (part of) a test is skipped and why (`skipped: WHY` on stderr), or fail with that
/// reason where [`NO_SKIP`] is `1`.
pub fn skipped(why: std::fmt::Arguments<'_>) {
    assert!(
        std::env::var(NO_SKIP).as_deref() != Ok("1"),
        "{NO_SKIP}=1 (CI) and this test would be skipped: {why}"
    );
    eprintln!("skipped: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Output};

    const CHILD: &str = "RTLAB_TEST_SKIP_CHILD";
    const NAME: &str = "test_skip::tests::a_skip_fails_where_ci_forbids_it_and_passes_elsewhere";

    /// This test again in a process of its own, as the child that skips.
    fn child(no_skip: Option<&str>) -> Output {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", NAME, "--nocapture", "--test-threads=1"]).env(CHILD, "1");
        match no_skip {
            Some(v) => c.env(NO_SKIP, v),
            None => c.env_remove(NO_SKIP),
        };
        c.output().unwrap()
    }

    #[test]
    fn a_skip_fails_where_ci_forbids_it_and_passes_elsewhere() {
        if std::env::var(CHILD).is_ok() {
            skipped(format_args!("a made-up lack ({})", 42));
            return;
        }
        let text = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
        let o = child(Some("1"));
        assert!(!o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains(
                "RTLAB_NO_SKIP=1 (CI) and this test would be skipped: a made-up lack (42)"
            ),
            "{}",
            text(&o)
        );
        for v in [None, Some("0")] {
            let o = child(v);
            assert!(o.status.success(), "{v:?}: {}", text(&o));
            assert!(text(&o).contains("skipped: a made-up lack (42)\n"), "{}", text(&o));
        }
    }
}
