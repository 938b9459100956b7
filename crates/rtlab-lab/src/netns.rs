//! Two network namespaces joined by a veth pair (`rtlab netns`, `udp ping --pair`, a
//! scenario's network case): the engines' pair, as the lab sets it up and takes it down.

pub use rtlab_engines::netns::{down, exists, NetnsConfig, NetnsPair, PriorityPath, Shaper};
