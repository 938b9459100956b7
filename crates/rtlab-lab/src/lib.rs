//! rtlab-lab: the lab. One probe interface (a typed configuration per probe, read from a
//! scenario's `[[probe]]` table and from the probe's flags alike, and one `measure`), the
//! scenario format, the executor that sets up each case (load, profile, namespaces), the
//! runner that stores every case as it ends, result documents with their warnings, and the
//! spike evidence around every measurement.
//!
//! Contract: nothing here prints; the binary (`rtlab`) parses flags, renders and exits.
//! Dependencies point one way: rtlab -> rtlab-lab -> probes, pubsub, tune, store, report.

#![forbid(unsafe_code)]

pub mod command;
pub mod command_profile;
pub mod config;
pub mod cost;
pub mod dashboard;
pub mod document;
pub mod error;
pub mod evidence;
pub mod executor;
pub mod far;
pub mod guard;
pub mod host;
pub mod load;
pub mod monitor;
pub mod netns;
pub mod probe;
pub mod probes;
pub mod registry;
pub mod runner;
pub mod scenario;
pub mod session;
pub mod store;
pub mod store_sink;
pub mod tune;
