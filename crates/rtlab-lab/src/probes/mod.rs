//! One module per probe: its typed configuration, its `measure`, its document.

pub mod cyclic;
pub mod noise;
pub mod observe;
pub mod pubsub;
pub mod roscpp_node;
pub mod timer;
pub mod trace;
pub mod udp;
