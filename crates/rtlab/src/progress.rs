//! Progress on stderr, shown only when stderr is a terminal (model: hyperfine's progress bar).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(planned: u64, what: &str, quiet: bool) -> Progress {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(
            Some(planned.max(1)),
            ProgressDrawTarget::stderr_with_hz(10),
        );
        bar.set_style(
            ProgressStyle::with_template("{msg} [{wide_bar}] {pos}/{len} samples, ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress { bar: Some(bar) }
    }

    pub fn set(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done);
        }
    }

    /// Set the planned total the first time it is known.
    pub fn set_len_once(&self, planned: u64) {
        if let Some(b) = &self.bar {
            if b.length() != Some(planned) && planned > 0 {
                b.set_length(planned);
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
