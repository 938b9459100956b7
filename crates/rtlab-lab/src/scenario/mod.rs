//! Scenario files: a matrix of probes x loads x profiles x parameters, validated with the
//! file, line and field of every error before anything runs, and expanded into cases.
//!
//! Contract: [`Scenario::parse`] either returns a scenario whose every case was read into
//! its probe's typed configuration (the same struct, defaults and validation as the
//! probe's flags: [`crate::registry::PROBES`]) or the first error as one line
//! `FILE:LINE: FIELD: what is wrong (what is accepted)`. The number of cases is computed
//! before anything is expanded and bounded ([`MAX_CASES`], `max_cases = N` raises it), so
//! no file can make parsing hang. The same file always gives the same cases in the same order.
//!
//! The format (TOML):
//! ```toml
//! name = "my-scenario"
//! duration = "10s"            # per case, unless a probe says otherwise (or `count`)
//! trace_on_spike = "2ms"      # arm ftrace per case; explain its first samples above this
//! counters = true             # kernel counters per window (default true)
//! repetitions = 1             # 1..=1000
//! loads = ["idle", "cpu"]      # built-in loads or [load.NAME] tables
//! profiles = ["no-rt", "rt-normal", "./my-profile.toml"]
//!
//! [[probe]]
//! kind = "timer"               # timer | udp | pubsub | cyclic
//! interval = ["1ms", "10ms"]   # a list is a matrix axis; every key is a field of the
//!                              # probe's configuration (the same names as its flags)
//!
//! [[gate]]                    # a limit for CI: `rtlab run` exits 1 when it is broken
//! case = "timer/*"             # a case name or a glob (default *); stream likewise
//! max = "1ms"                  # and/or p99_9 (durations), missed, lost (a count or "0.1%")
//!
//! [load.cpu]
//! kind = "cpu"                 # cpu | mem | io | hdd | stress | traffic | command | combined
//! workers = 2
//! method = "fft"
//! cpu_load = 80                # percent busy per worker (S4)
//! ```

mod file;
mod gates;
mod presets;
mod read;
mod spec;

pub use file::Scalar;
pub use presets::{preset, PRESETS};
pub use spec::*;

impl Scenario {
    /// Parse and validate. `origin` names the file (or preset) in errors. `scale`
    /// multiplies every duration and count (`--scale`; 1.0 = as written), keeping each case
    /// at [`MIN_SLOTS`] slots or more.
    pub fn parse(origin: &str, text: &str, scale: f64) -> Result<Scenario, ScenarioError> {
        Self::parse_with_far(origin, text, scale, None)
    }

    /// [`Scenario::parse`], with the far side of every probe that has one set to `far`
    /// (`rtlab run --far`), over the file's own top-level `far`. The scenario's kept text
    /// says so (a `far` line first, the file's own commented out), so that a resumed run
    /// has the same far side.
    pub fn parse_with_far(
        origin: &str,
        text: &str,
        scale: f64,
        far: Option<&crate::far::FarSpec>,
    ) -> Result<Scenario, ScenarioError> {
        let mut s = read::read(origin, text, scale, far)?;
        if let Some(f) = far {
            // top-level keys come before the first table header
            let mut top = true;
            let kept: Vec<String> = text
                .lines()
                .map(|l| {
                    let t = l.trim_start();
                    top &= !t.starts_with('[');
                    let key = t.split('=').next().unwrap_or("").trim();
                    if top && key == "far" && !t.starts_with('#') {
                        format!("# {l}  (overridden by rtlab run --far)")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            s.text = format!("far = \"{f}\"  # rtlab run --far\n{}\n", kept.join("\n"));
        }
        Ok(s)
    }

    pub fn cases(&self) -> &[CaseSpec] {
        &self.cases
    }

    /// Keep only the cases whose name matches `pattern` (a substring, or a glob with `*`).
    pub fn retain_matching(&mut self, pattern: &str) {
        self.cases.retain(|c| glob_match(pattern, &c.name));
    }

    /// Drop the cases whose index is in `done` (a resumed run).
    pub fn skip_indices(&mut self, done: &std::collections::BTreeSet<u32>) {
        self.cases.retain(|c| !done.contains(&c.index));
    }

    /// Planned measuring time of the whole scenario.
    pub fn planned_ns(&self) -> i64 {
        self.cases.iter().map(CaseSpec::planned_ns).sum()
    }
}

/// `*` matches any run of characters; a pattern without `*` matches as a substring.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    if !pattern.contains('*') {
        return name.contains(pattern);
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return p.is_empty() || rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(at) => rest = &rest[at + p.len()..],
                None => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
duration = "2s"
loads = ["idle", "cpu"]
profiles = ["no-rt", "rt-normal"]

[[probe]]
kind = "timer"
interval = ["1ms", "10ms"]
mode = "rel"

[[probe]]
kind = "udp"
payload = 500
period = "1ms"
loads = ["idle", "tx40"]
count = 1000

[load.tx40]
kind = "traffic"
rate = "40mbit"

[[published]]
match = { probe = "timer", load = "cpu", profile = "rt-normal", interval = "1ms" }
source = "S4"
label = "80 % / RT"
min_us = 7.0
avg_us = 56.0
max_us = 464.0
"#;

    #[test]
    fn a_matrix_expands_in_order_with_names() {
        let s = Scenario::parse("t.toml", GOOD, 1.0).unwrap();
        let names: Vec<_> = s.cases().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "timer/idle/no-rt/interval=1ms",
                "timer/idle/rt-normal/interval=1ms",
                "timer/cpu/no-rt/interval=1ms",
                "timer/cpu/rt-normal/interval=1ms",
                "timer/idle/no-rt/interval=10ms",
                "timer/idle/rt-normal/interval=10ms",
                "timer/cpu/no-rt/interval=10ms",
                "timer/cpu/rt-normal/interval=10ms",
                "udp/idle/no-rt",
                "udp/idle/rt-normal",
                "udp/tx40/no-rt",
                "udp/tx40/rt-normal",
            ]
        );
        let c = &s.cases()[3];
        assert_eq!(c.params["mode"], "rel");
        assert_eq!(c.config.plan().duration_ns, Some(2_000_000_000));
        assert_eq!(c.published.as_ref().unwrap().max_us, Some(464.0));
        assert!(s.cases()[7].published.is_none());
        let u = &s.cases()[10];
        assert_eq!(
            u.load_spec,
            LoadSpec::Traffic {
                bits_per_second: 40_000_000,
                direction: "tx".into(),
                protocol: "udp".into()
            }
        );
        assert_eq!(u.config.plan().count, Some(1000));
        // the engine ends at the first limit reached: 1000 slots of 1 ms before 2 s
        assert_eq!(u.planned_ns(), 1_000_000_000, "the first limit reached ends the case");
    }

    #[test]
    fn scale_shortens_durations_and_counts() {
        let s = Scenario::parse("t.toml", GOOD, 0.5).unwrap();
        assert_eq!(s.cases()[0].config.plan().duration_ns, Some(1_000_000_000));
        assert_eq!(s.cases()[8].config.plan().count, Some(500));
    }

    fn err(text: &str) -> String {
        Scenario::parse("s.toml", text, 1.0).unwrap_err().to_string()
    }

    #[test]
    fn spike_tracing_and_counters_are_set_at_the_top_or_per_probe() {
        let t = "name = \"x\"\nduration = \"1s\"\ntrace_on_spike = \"2ms\"\n[[probe]]\nkind = \"timer\"\n[[probe]]\nkind = \"udp\"\ntrace_on_spike = \"500us\"\ncounters = false\n";
        let s = Scenario::parse("s.toml", t, 1.0).unwrap();
        let (timer, udp) = (&s.cases()[0], &s.cases()[1]);
        assert_eq!((timer.trace_on_spike_ns, timer.counters), (Some(2_000_000), true));
        assert_eq!((udp.trace_on_spike_ns, udp.counters), (Some(500_000), false));
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ntrace_on_spike = \"0s\"\n");
        assert!(e.starts_with("s.toml:5: probe[0].trace_on_spike: '0s' must be above zero"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = \"fast\"\n",
        );
        assert!(e.starts_with("s.toml:5: probe[0].interval: invalid duration 'fast'"), "{e}");
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\nbogus = 1\n");
        assert!(
            e.starts_with(
                "s.toml:5: probe[0].bogus: not a parameter of the timer probe (accepted: "
            ),
            "{e}"
        );
        let e = err("name = \"x\"\nduration = 5\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.starts_with("s.toml:2: "), "{e}");
        let e =
            err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"udp\"\npayload = 70000\n");
        assert!(e.starts_with("s.toml:5: probe[0].payload: 70000 bytes is outside"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ntransport = \"dds\"\n",
        );
        assert!(
            e.starts_with("s.toml:5: probe[0].transport: not a parameter of the timer probe"),
            "{e}"
        );
        let e = err("name = \"x\"\nduration = \"1s\"\nprofiles = [\"turbo\"]\n[[probe]]\nkind = \"timer\"\n");
        // the profile registry's own words, the same as `rtlab tune apply turbo`
        assert!(e.starts_with("s.toml:3: profiles: profile 'turbo' does not exist"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\nloads = [\"heavy\"]\n[[probe]]\nkind = \"timer\"\n",
        );
        assert!(e.starts_with("s.toml:3: loads: unknown load 'heavy'"), "{e}");
        let e = err("name = \"x\"\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.contains("probe[0].duration: no duration or count"), "{e}");
        let e = err(
            "name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"pubsub\"\ntransport = \"ros3\"\n",
        );
        assert!(
            e.starts_with("s.toml:5: probe[0].transport: 'ros3' is not one of the accepted values"),
            "{e}"
        );
        let e = err("name = \"x\"\ncount = 0\n[[probe]]\nkind = \"timer\"\n");
        assert!(e.starts_with("s.toml:2: count: 0 must be at least 1"), "{e}");
        let e = err("name = \"x\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\n[load.l]\nkind = \"traffic\"\nrate = \"fast\"\n");
        assert!(e.starts_with("s.toml:7: load.l.rate:"), "{e}");
        let e = err("name = = \"x\"\n");
        assert!(e.starts_with("s.toml:1: "), "{e}");
        assert_eq!(e.lines().count(), 1, "one line: {e}");
    }

    #[test]
    fn gates_are_read_per_limit_and_their_errors_name_table_and_key() {
        let base = "name = \"g\"\nduration = \"1s\"\n[[probe]]\nkind = \"timer\"\ninterval = [\"1ms\", \"2ms\"]\n";
        let s = Scenario::parse(
            "g.toml",
            &format!("{base}[[gate]]\ncase = \"timer/*\"\nstream = \"thread0\"\nmax = \"1ms\"\nmissed = 0\n[[gate]]\nlost = \"1%\"\n"),
            1.0,
        )
        .unwrap();
        let gates: Vec<String> = s.gates.iter().map(|g| format!("{} {g}", g.origin)).collect();
        assert_eq!(
            gates,
            [
                "gate[0] timer/*:thread0:max<=1ms",
                "gate[0] timer/*:thread0:missed<=0",
                "gate[1] *:*:lost<=1%"
            ]
        );
        for (gate, says) in [
            ("[[gate]]\ncase = \"timer/*\"\nmax = \"fast\"\n", "s.toml:8: gate[0].max: invalid duration 'fast'"),
            ("[[gate]]\np99 = \"1ms\"\n", "s.toml:7: gate[0].p99: not a key of a gate (accepted: case, stream, chain, p99_9, max, missed, lost)"),
            ("[[gate]]\nchain = \"/scan\"\nmax = \"1ms\"\n", "s.toml:7: gate[0].chain: a trace's chain by its topics"),
            ("[[gate]]\nchain = \"/a,/b\"\nstream = \"x\"\nmax = \"1ms\"\n", "s.toml:7: gate[0].chain: a trace's chain by its topics"),
            ("[[gate]]\nmissed = \"many\"\n", "s.toml:7: gate[0].missed: 'many' is not a count or a percentage"),
            ("[[gate]]\nlost = -1\n", "s.toml:7: gate[0].lost: '-1' is not a count"),
            ("[[gate]]\ncase = \"timer/*\"\n", "s.toml:6: gate[0]: no limit: give at least one of p99_9, max, missed, lost"),
            ("[[gate]]\ncase = 3\nmax = \"1ms\"\n", "s.toml:7: gate[0].case: expected a case name or a glob"),
            ("[[gate]]\ncase = \"timer/idle/no-rt\"\nmax = \"1ms\"\n", "s.toml:7: gate[0].case: 'timer/idle/no-rt' matches no case of the scenario (a whole name, or a glob with *; cases: timer/idle/no-rt/interval=1ms, timer/idle/no-rt/interval=2ms)"),
        ] {
            let e = err(&format!("{base}{gate}"));
            assert!(e.starts_with(says), "{gate}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
    }
}
