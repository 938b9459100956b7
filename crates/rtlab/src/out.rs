//! Output that a closed pipe cannot turn into a panic (model: ripgrep's quiet broken-pipe
//! handling): `rtlab run --list | head -1` ends quietly with exit 0. The first write that
//! finds stdout closed raises the run's stop flag (a measurement in progress ends as on
//! Ctrl-C, keeping what it measured and restoring the machine) and later output is dropped.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// The process's stop flag: Ctrl-C, SIGTERM and a closed stdout raise it.
pub fn stop() -> Arc<AtomicBool> {
    static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    STOP.get_or_init(|| Arc::new(AtomicBool::new(false))).clone()
}

/// stdout was closed by the reader.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Write to stdout (or stderr); a closed pipe stops the run instead of panicking.
pub fn write(err: bool, args: std::fmt::Arguments<'_>) {
    if err {
        let _ = std::io::stderr().lock().write_fmt(args);
        return;
    }
    if closed() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::Relaxed);
            stop().store(true, Ordering::Relaxed);
        }
    }
}
