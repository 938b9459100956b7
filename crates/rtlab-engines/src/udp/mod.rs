//! The UDP probe (S1): `udp ping` sends requests to `udp reflect` and measures round trips,
//! accounting for every datagram (on time, missed deadline, lost, late, duplicate, out of
//! order, malformed / foreign).
//!
//! - `wire`: the datagram format and its parser (never panics).
//! - `track`: the classification of every request and reply (pure, fake-clock tested).
//! - `ping`: the engine (periodic on an absolute grid, or pingpong) over a [`ping::Link`].
//! - `link`: the real link (UDP socket, poll, absolute timerfd).
//! - `reflect`: the reflector's decision per datagram and what it saw.
//! - `config`: the ping's and reflector's configurations and their checks.
//! - `open`: the link's opening (socket, namespace, pre-flight, the stamping device).
//! - `xdp`: the XDP path (frames, its link, its opening and pre-flight, its reflector loop).
//! - `run`: the measuring threads, outcomes and result streams.
//!
//! The definitions are in `docs/udp.md`.

mod config;
pub mod link;
mod open;
pub mod ping;
pub mod reflect;
pub mod run;
pub mod track;
pub mod wire;
pub mod xdp;
