//! `rtlab trace`'s engine: a ROS 2 application's own messages, read from the rings rtlab's
//! interposer fills in each of its processes (rtlab-bindings `trace`), joined into its graph,
//! its edges' latencies and losses, and its chains.
//!
//! - [`event`]: a ring's records as events;
//! - [`analysis`]: the graph, the joins, the chains (pure);
//! - [`run`]: starting the application with the interposer preloaded, reading the rings while
//!   it runs, stopping it;
//! - [`uprobe`]: a running process's tracepoints, from rtlab's uprobes (rtlab-evidence), as
//!   events.

/// The rings' reader and format (rtlab-bindings).
pub use rtlab_bindings::trace as ring;

pub mod analysis;
pub mod event;
pub mod run;
pub mod uprobe;
