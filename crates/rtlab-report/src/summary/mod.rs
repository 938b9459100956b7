//! What a measuring command prints when it ends: its tables and counters, from its result
//! document or from the summary the lab builds of its run (plain values: no engine's types
//! reach the report).
//!
//! Contract: pure functions from a summary to text; colour is an argument, never detected
//! here; never prints (the binary writes the text).

pub mod cyclic;
/// The noise probe's tables live in its room, with its pivot across cases (`crate::noise`).
pub use crate::noise::summary as noise;
pub mod pubsub;
pub mod timer;
pub mod udp;
