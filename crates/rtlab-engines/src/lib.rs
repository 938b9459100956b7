//! rtlab-engines: the measurement engines. Engines never print; they push samples into
//! sinks (rtlab-core) and return outcomes that the CLI renders and stores.

#![forbid(unsafe_code)]

pub mod clock;
pub mod cyclic;
pub mod hold;
pub mod netns;
pub mod noise;
#[cfg(test)]
mod test_sink;
pub mod timer;
pub mod udp;
