//! rtlab-evidence: spike evidence around a probe run. The kernel's counters per window
//! ([`counters`], kept while sampling in [`sampled`]); the spike tracer ([`tracer`]) with its watcher ([`watch`]), the trace read
//! back ([`trace`]) and each spike explained ([`explain`]); rtla timerlat alongside
//! ([`timerlat`]). rtlab-report renders it (`rtlab_report::evidence`).
//!
//! Contract: nothing here runs on a measuring thread (the probes only raise a
//! [`rtlab_core::sink::SpikeFlag`]; the sampler and the watcher are helper threads off the
//! probe's CPUs). Every tracefs change goes through rtlab-tune's journaled
//! [`rtlab_host::session::Session`] and is undone when the tracer is disarmed or dropped, or
//! by `rtlab tune restore` after a kill -9. What a result keeps (counters per window, the
//! spikes explained) is rtlab-core's data (`rtlab_core::evidence`); gluing it to a probe's
//! run is the lab's (`rtlab_lab::evidence`). Nothing here prints.

#![forbid(unsafe_code)]

pub mod busy;
pub mod counters;
pub mod error;
pub mod explain;
#[cfg(test)]
mod fixtures;
mod helper;
pub mod hwlat;
mod noise_tracer;
pub mod osnoise;
pub mod sampled;
pub mod timerlat;
pub mod trace;
pub mod tracer;
pub mod uprobe;
pub mod watch;
