//! rtla timerlat as a companion of a run: the kernel's own split of a wake-up latency into
//! its IRQ part and its thread part, per CPU, and (rtla >= 6.3) its auto-analysis of the
//! sample that crossed a threshold ("IRQ handler delay", "Blocking thread", ...).
//!
//! Contract: [`detect`] says whether `rtla timerlat top` can run here and
//! [`Availability::missing`] names, in one sentence, what is missing and how to get it;
//! [`start`] refuses with that sentence instead of letting rtla fail half-way. [`command`] is
//! pure and only uses options that rtla 6.1 (Debian 12, package `rtla`) accepts and later
//! versions still accept. rtla changes tracefs itself (a tracefs instance `timerlat_top`,
//! plus `osnoise_trace` with a trace file and `timerlat_aa` for the auto-analysis of rtla >=
//! 6.3, and the global `osnoise/` settings) and undoes all of it when it ends (duration over,
//! threshold hit, or SIGINT); killed with SIGKILL it leaves them, and the instance keeps the
//! timerlat threads (FIFO 95) firing. [`leftover_cleanup_action`] is the journal entry that
//! puts tracefs back in that case (`rtlab tune restore`). This module never prints, and the
//! rtla it starts always has a duration, so it ends on its own even if rtlab is killed.
//!
//! Sources: Documentation/trace/timerlat-tracer.rst, Documentation/trace/osnoise-tracer.rst,
//! Documentation/tools/rtla/rtla-timerlat-top.rst, tools/tracing/rtla/src/{timerlat_top.c,
//! osnoise.c,trace.c,utils.c} (torvalds/linux).

mod availability;
mod command;
mod leftovers;
mod names;
mod report;
mod run;

pub use availability::{detect, detect_with, tracefs_dir, Availability};
pub use command::{command, validate, TimerlatConfig};
pub use leftovers::leftover_cleanup_action;
pub use names::{OSNOISE_SETTINGS, RTLA_INSTANCES, STOP_GRACE, TRACEFS_DIRS};
pub use report::{parse_top, TimerlatCpu, TimerlatReport};
pub use run::{start, TimerlatRun};
