//! rtlab-bindings: the C and C++ middleware libraries rtlab calls, behind small safe
//! wrappers, and loading libraries at run time.
//!
//! - [`cyclonedds`]: Eclipse Cyclone DDS through `cyclors` (its C API): domains, participants,
//!   blob topics, writers and readers of serialized samples, the built-in topics;
//! - [`dl`]: `dlopen` of a file or of an object embedded in the binary (memfd), resolving
//!   symbols, and the one Fast DDS a process may hold;
//! - [`fastdds`]: the C++ shim over eProsima Fast DDS (`fastdds/shim.cpp`, built by this
//!   crate's `build.rs`, embedded and loaded at the first participant): participant, writer,
//!   reader, write, take, wait;
//! - [`rcl`]: ROS 2's C API (rcl, rcutils, rmw, rosidl) declared by hand and resolved from an
//!   installation's libraries: node, publisher, subscription, publish, take, wait.
//! - [`roscpp`]: the C++ shim over roscpp (ROS 1; `roscpp/shim.cpp`, built against Debian's
//!   libroscpp-dev, embedded and loaded on first use): a node's timer spun on its thread;
//! - [`trace`]: the tracepoint interposer `rtlab trace` preloads, and the reader of its rings.
//!
//! Contract: this crate and rtlab-sys are the only ones with `unsafe`; every other crate
//! forbids it. Every `unsafe` block here says why it holds (`// SAFETY:`), and every type
//! here is safe to use as its signature says: handles are freed once, on drop, children
//! before their parents. What the wrappers do is what the library does (no policy: the
//! transports in rtlab-pubsub decide names, QoS and networks). Nothing here prints.

pub mod cyclonedds;
pub mod dl;
pub mod fastdds;
pub mod rcl;
pub mod roscpp;
pub mod trace;

/// A library call that failed: what was being done, and the library's words for why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub what: &'static str,
    pub why: String,
}

impl Failed {
    pub(crate) fn new(what: &'static str, why: impl Into<String>) -> Failed {
        Failed { what, why: why.into() }
    }
}

/// The QoS of a writer or reader as the DDS libraries take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityQos {
    /// Reliable (max_blocking_time 1 s), else best-effort.
    pub reliable: bool,
    /// Keep-last `depth` (None: keep-all).
    pub keep_last: Option<u32>,
    /// Transient-local, else volatile.
    pub transient_local: bool,
}
