//! Progress on stderr (model: hyperfine's progress bar): a bar with an ETA on a terminal; on
//! anything else (a log, CI, `2> file`) a plain line every 10 s with the share done and the
//! time left, so a long run is never silent.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often a plain progress line is written when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

pub struct Progress {
    bar: Option<ProgressBar>,
    /// Plain lines (stderr is not a terminal): what, when it began, the last line, the total.
    lines: Option<(String, Instant, Cell<Instant>, Cell<u64>)>,
}

impl Progress {
    pub fn new(planned: u64, what: &str, quiet: bool) -> Progress {
        if quiet {
            return Progress { bar: None, lines: None };
        }
        if !std::io::stderr().is_terminal() {
            let now = Instant::now();
            return Progress {
                bar: None,
                lines: Some((what.to_string(), now, Cell::new(now), Cell::new(planned))),
            };
        }
        let bar = ProgressBar::with_draw_target(
            Some(planned.max(1)),
            ProgressDrawTarget::stderr_with_hz(10),
        );
        bar.set_style(
            ProgressStyle::with_template("{msg} [{wide_bar}] {pos}/{len}, ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress { bar: Some(bar), lines: None }
    }

    pub fn set(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
        if let Some((what, began, last, total)) = &self.lines {
            let now = Instant::now();
            if now.duration_since(last.get()) >= LINE_EVERY && total.get() > 0 {
                last.set(now);
                let share = done.min(total.get()) as f64 / total.get() as f64;
                let spent = now.duration_since(*began).as_secs_f64();
                let left = if share > 0.0 { spent * (1.0 - share) / share } else { 0.0 };
                eprintln!(
                    "{what}: {done}/{} ({:.0} %), about {} left",
                    total.get(),
                    share * 100.0,
                    humantime::format_duration(Duration::from_secs(left.round() as u64))
                );
            }
        }
    }

    /// Set the planned total the first time it is known.
    pub fn set_len_once(&self, planned: u64) {
        if let Some(b) = &self.bar {
            if b.length() != Some(planned) && planned > 0 {
                b.set_length(planned);
            }
        }
        if let Some((_, _, _, total)) = &self.lines {
            if planned > 0 {
                total.set(planned);
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
