//! The pub/sub probe: cases (payload x rate x subscribers), each run over one transport in
//! `oneway` or `roundtrip` mode, with subscribers in separate processes (default) or threads.
//!
//! - `oneway`: the publisher stamps CLOCK_MONOTONIC right before `publish`; each subscriber
//!   stamps CLOCK_MONOTONIC right after its take returns; sample = receive - send (one host
//!   clock, valid across processes of one host).
//! - `roundtrip`: the pinger publishes on `<topic>_ping`; subscriber i echoes each message
//!   unchanged on `<topic>_pong_<i>`; a receiver thread per subscriber in the pinger's
//!   process stamps the pong; sample = pong received - ping sent, one clock (never halved).
//!
//! Sends follow an absolute grid (t0 + k*period); a slot already passed is skipped and
//! counted as an overrun. A message received more than `loss_timeout` after it was sent is
//! `late` (not a sample); a message never received is `lost`; duplicates and out-of-order
//! arrivals are counted apart ([`crate::seqtrack`]).
//!
//! Contract: every recorder and buffer is allocated before the measured phase; the sender
//! and receiver loops only publish, take, stamp and record into a
//! [`Recorder`](rtlab_core::sink::Recorder). Middleware is opened after the calling thread's
//! policy is set (so its threads inherit it); app threads are created by `spawn_rt` with
//! policy/priority/CPU. Nothing here prints: a role process speaks to its parent through the
//! [`RoleEvent`] lines on its stdout.
//!
//! The rooms, one job each (every public item is reached from here, `engine::X`):
//! - `spec`: the transports ([`TransportKind`]) and how a process opens one
//!   ([`TransportSpec`]);
//! - `config`: the probe's configuration ([`PubsubConfig`], [`Mode`], [`Schedule`],
//!   [`StampClock`], [`ByHand`], [`ThreadPriority`], [`RtSpec`]);
//! - `outcome`: what it gives back ([`PubsubOutcome`], [`CaseResult`], [`ProbeError`]);
//! - `validate`: the configuration checked before anything runs ([`validate`],
//!   [`far_transport_rule`]);
//! - `run`: every case of a run ([`run`], [`run_with`]), this side's transport set up once;
//! - `case`: one case from set-up to its result, in named steps (budget, pong receivers,
//!   roles, settle, measured phase, stop and collect);
//! - `streams`: a case's streams, their names and labels ([`rate_label`]);
//! - `placement`: where roles run, starting them and running them (threads: [`run_role`];
//!   processes by a [`Launcher`]: [`role_main`]; a far host: [`FarPlacement`], [`FarRoles`]);
//! - `by_hand`: a pong or a subscriber run by hand here, the peer of one elsewhere;
//! - `loops`: the hot loops (send, receive, echo, closed loop) and what a receiver counts;
//! - `role`: the role-process protocol ([`RoleConfig`], [`RoleEvent`] and its lines,
//!   [`ReceiverReport`]);
//! - `threads`: this process's threads (policy, middleware priorities
//!   [`apply_thread_priorities`], joined before their ports go);
//! - [`apart`]: a case's near side in a process of its own.

pub mod apart;
mod by_hand;
mod case;
mod config;
mod loops;
mod outcome;
mod placement;
mod role;
mod run;
mod spec;
mod streams;
mod threads;
mod validate;

pub use case::SETUP_TIMEOUT_NS;
pub use config::{
    oneway_definition, ByHand, HandRole, Mode, PubsubConfig, RtSpec, Schedule, StampClock,
    ThreadPriority,
};
pub use loops::{receive_loop, PUBLISHER_SPIKE_SOURCE};
pub use outcome::{CaseResult, MatchedSubscribers, ProbeError, PubsubOutcome};
pub use placement::{role_main, run_role, FarPlacement, FarRole, FarRoles, Launcher};
pub use role::{event_line, parse_event, ReceiverReport, RoleConfig, RoleEvent, RoleKind};
pub use run::{run, run_with};
pub use spec::{dds_names, open_transport, TransportKind, TransportSpec};
pub use streams::{rate_label, SEND_LATENESS_DEFINITION};
pub use threads::apply_thread_priorities;
pub use validate::{callback_echo_rule, far_transport_rule, validate};
