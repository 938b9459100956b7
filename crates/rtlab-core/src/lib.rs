//! rtlab-core: the pure logic every part of rtlab shares — units, samples, the sink, the
//! histogram, statistics, the result schema and warnings (their terminal rendering is
//! rtlab-report's).
//!
//! Contract: no `unsafe`, no syscalls beyond what `std` does for files, no printing; every
//! function is testable without root and fast.
#![forbid(unsafe_code)]

pub mod cost;
pub mod cyclictest;
pub mod error;
pub mod evidence;
pub mod fleet;
pub mod gate;
pub mod graph;
pub mod histogram;
pub mod judging;
pub mod lines;
pub mod raw;
pub mod rt;
pub mod run;
pub mod schema;
pub mod sink;
pub mod stats;
pub mod testing;
pub mod units;
pub mod warnings;
pub mod windows;

pub use histogram::Histogram;
pub use sink::{Flow, Recorder, RecorderConfig, Sink};
pub use stats::{Running, Summary};
pub use units::Nanos;
