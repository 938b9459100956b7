//! The command line of `rtla timerlat top` for a [`TimerlatConfig`], and the values rtla and
//! the tracer refuse.

use crate::error::TraceError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// What the companion `rtla timerlat top` measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerlatConfig {
    /// CPUs timerlat runs on (its threads and timers); empty: all.
    pub cpus: Vec<usize>,
    /// Stop (and, from rtla 6.3, analyse) when a latency reaches this many us; 0: never stop.
    pub threshold_us: u64,
    /// FIFO priority of timerlat's threads (1-99); None: the tracer's default, FIFO 95.
    pub priority: Option<i32>,
    /// Period of timerlat's timer in us (100 us to 1 s); 0: the tracer's default, 1000.
    pub period_us: u64,
    /// How long rtla runs at most (whole seconds, rounded up); it also ends on SIGINT.
    pub duration: Duration,
    /// Where rtla saves the trace it stopped (only written when the threshold is hit).
    pub trace_file: Option<PathBuf>,
}

impl Default for TimerlatConfig {
    fn default() -> Self {
        TimerlatConfig {
            cpus: Vec::new(),
            threshold_us: 0,
            priority: None,
            period_us: 0,
            duration: Duration::from_secs(30),
            trace_file: None,
        }
    }
}

/// Check the values rtla and the tracer would refuse. Err names the field and what is accepted.
pub fn validate(cfg: &TimerlatConfig) -> Result<(), TraceError> {
    if let Some(p) = cfg.priority {
        if !(1..=99).contains(&p) {
            return Err(TraceError::Invalid(format!(
                "timerlat priority {p}: timerlat's threads take a FIFO priority of 1 to 99"
            )));
        }
    }
    if cfg.period_us != 0 && !(100..=1_000_000).contains(&cfg.period_us) {
        return Err(TraceError::Invalid(format!(
            "timerlat period {} us: the tracer accepts 100 us to 1 s (1000000 us)",
            cfg.period_us
        )));
    }
    if cfg.duration.is_zero() {
        return Err(TraceError::Invalid(
            "timerlat duration 0: give rtla a duration (it must end on its own if rtlab is killed)"
                .into(),
        ));
    }
    Ok(())
}

/// The argv of `rtla timerlat top` for `cfg` (pure). Options, all accepted by rtla 6.1:
/// `-q` (print the table once, at the end), `-n` (nanoseconds), `-d SECONDS`, `-p US`,
/// `-c LIST`, `-P f:PRIO`, `-a US` (stop at the threshold: thread and, from 6.3, IRQ latency;
/// save the stack at the IRQ; save the trace; from 6.3 print the auto-analysis) and
/// `-t=FILE` after `-a` (6.1's `-a` resets the file to timerlat_trace.txt, and 6.1 strips
/// the first character of a `--trace=` or `-t` argument, which must therefore be `=FILE`).
pub fn command(cfg: &TimerlatConfig) -> Vec<String> {
    let mut v: Vec<String> =
        ["rtla", "timerlat", "top", "-q", "-n"].iter().map(|s| s.to_string()).collect();
    let secs = (cfg.duration.as_secs() + u64::from(cfg.duration.subsec_nanos() > 0)).max(1);
    v.extend(["-d".to_string(), secs.to_string()]);
    if cfg.period_us > 0 {
        v.extend(["-p".to_string(), cfg.period_us.to_string()]);
    }
    if !cfg.cpus.is_empty() {
        v.extend(["-c".to_string(), rtlab_host::cpu_list(&cfg.cpus)]);
    }
    if let Some(p) = cfg.priority {
        v.extend(["-P".to_string(), format!("f:{p}")]);
    }
    if cfg.threshold_us > 0 {
        v.extend(["-a".to_string(), cfg.threshold_us.to_string()]);
        if let Some(f) = &cfg.trace_file {
            v.push(format!("-t={}", f.display()));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::timerlat_config as cfg;

    #[test]
    fn the_command_for_several_configs() {
        assert_eq!(command(&cfg()).join(" "), "rtla timerlat top -q -n -d 30");
        let c = TimerlatConfig {
            cpus: vec![3, 1, 2],
            threshold_us: 40,
            priority: Some(95),
            period_us: 500,
            duration: Duration::from_millis(2500),
            trace_file: Some("/tmp/rtlab-tl.txt".into()),
        };
        assert_eq!(
            command(&c).join(" "),
            "rtla timerlat top -q -n -d 3 -p 500 -c 1-3 -P f:95 -a 40 -t=/tmp/rtlab-tl.txt"
        );
        // a trace file is only written when the threshold stops the trace: no threshold, no -t
        let c = TimerlatConfig {
            cpus: vec![0, 2],
            trace_file: Some("/tmp/x".into()),
            duration: Duration::from_millis(10),
            ..cfg()
        };
        assert_eq!(command(&c).join(" "), "rtla timerlat top -q -n -d 1 -c 0,2");
        // without a file, -a alone (rtla writes timerlat_trace.txt in its temporary directory)
        let c = TimerlatConfig { threshold_us: 100, ..cfg() };
        assert_eq!(command(&c).join(" "), "rtla timerlat top -q -n -d 30 -a 100");
    }

    #[test]
    fn bad_values_are_refused_with_the_field() {
        assert!(validate(&cfg()).is_ok());
        let e = validate(&TimerlatConfig { priority: Some(0), ..cfg() }).unwrap_err().to_string();
        assert!(e.contains("priority 0") && e.contains("1 to 99"), "{e}");
        let e = validate(&TimerlatConfig { period_us: 50, ..cfg() }).unwrap_err().to_string();
        assert!(e.contains("period 50 us"), "{e}");
        assert!(validate(&TimerlatConfig { period_us: 1_000_001, ..cfg() }).is_err());
        assert!(validate(&TimerlatConfig { duration: Duration::ZERO, ..cfg() }).is_err());
    }
}
