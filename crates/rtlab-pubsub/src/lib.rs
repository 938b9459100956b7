//! rtlab-pubsub: message latency through real pub/sub transports.
//!
//! - [`transport`]: the `Transport` contract (stated there), the QoS mapping record, and one
//!   module per transport below it, named as `--transport` names it: `intra` (same process,
//!   zero copy), `udp` (plain sockets), `shm` (iceoryx2 shared memory), `zenoh` (peer or
//!   client mode), `cyclonedds`, `fastdds` (eProsima Fast DDS), `rustdds` (pure Rust: it
//!   cannot be limited to an interface, see its rule), `ros2` (rcl and the RMW); udp, zenoh,
//!   cyclonedds, fastdds and rustdds reach another host when the spec names the network
//!   (loopback otherwise); `dds_common` holds what cyclonedds and fastdds share;
//! - [`engine`]: the pubsub probe's engine (oneway / roundtrip, sweeps, fan-out, role
//!   processes, a case's near side in a process of its own);
//! - [`seqtrack`]: lost / duplicate / out-of-order counting;
//! - [`observe`]: `rtlab observe`'s passive reader, and the graph of a DDS domain from its
//!   built-in topics (`observe::dds_graph`) and of ROS 2 (`observe::ros_graph`);
//! - [`ros_msg`]: ROS 2 messages in CDR (the ros2 transport's and observe's).
//!
//! Nothing in this crate prints, and nothing in it is `unsafe`: the C and C++ libraries
//! (Cyclone DDS, the Fast DDS shim, rcl) and loading them at run time ([`dl`]) are
//! rtlab-bindings' safe wrappers; system calls go through rtlab-sys.
#![forbid(unsafe_code)]

pub mod arrivals;
pub mod engine;
pub mod observe;
pub mod ros2_facts;
pub mod ros_msg;
pub mod seqtrack;
pub mod trace;
pub mod transport;

pub use engine::{Mode, PubsubConfig, PubsubOutcome, RtSpec, TransportKind, TransportSpec};
/// Loading libraries at run time and the one Fast DDS a process holds (rtlab-bindings').
pub use rtlab_bindings::dl;
pub use transport::{
    Durability, EchoStyle, History, Qos, Reliability, Transport, TransportError, WaitStyle,
};

use std::sync::Arc;

/// Open the transport `spec` names in this process, on the network it names: zenoh takes
/// `listen`, `connect` and `zenoh_mode`; dds `domain`, `interface` and `peers`; rustdds
/// `domain` and `interface` (peers are refused); fastdds as dds, and `fastdds_shm`; ros2
/// `ros2_prefix`, `rmw`, `domain`, and `interface`/`peers` as its discovery; udp
/// `interface` (the address to bind) and `peers`; ros1 `ros1_master`, `interface` (this node's
/// address), `tcp_nodelay` and `udpros`. Fields a transport does not use are ignored.
pub fn open(spec: &engine::TransportSpec) -> Result<Arc<dyn Transport>, TransportError> {
    match spec.kind {
        TransportKind::Intra => Ok(Arc::new(transport::intra::IntraTransport::new())),
        TransportKind::Udp => Ok(Arc::new(transport::udp::UdpTransport::from_spec(
            spec.interface.as_deref(),
            &spec.peers,
        )?)),
        TransportKind::Shm => {
            let t = transport::shm::ShmTransport::new()?;
            let t = match spec.shm_subscribers {
                Some(n) => t.sized_for(n),
                None => t,
            };
            Ok(Arc::new(if spec.busy_poll { t.busy_poll() } else { t }))
        }
        TransportKind::Zenoh => Ok(Arc::new(transport::zenoh::ZenohTransport::with_mode(
            &spec.listen,
            &spec.connect,
            spec.zenoh_mode.as_deref(),
        )?)),
        TransportKind::Ros1 => Ok(Arc::new(transport::ros1::Ros1Transport::open(
            spec.ros1_master.as_deref(),
            spec.interface.as_deref(),
            spec.tcp_nodelay,
            spec.udpros,
        )?)),
        TransportKind::RustDds => Ok(Arc::new(transport::rustdds::RustDdsTransport::new(
            spec.domain.unwrap_or_else(default_dds_domain),
            spec.interface.as_deref(),
            &spec.peers,
        )?)),
        TransportKind::CycloneDds => {
            let net = transport::cyclonedds::DdsNetwork {
                interface: spec.interface.clone(),
                peers: spec.peers.clone(),
            };
            Ok(Arc::new(transport::cyclonedds::CycloneDdsTransport::with_network(
                spec.domain.unwrap_or_else(default_dds_domain),
                &net,
            )?))
        }
        TransportKind::Ros2 => {
            let inst = ros2_installation(spec).map_err(|e| TransportError::Library {
                transport: "ros2",
                what: "installation",
                why: e,
            })?;
            let net = transport::ros2::Ros2Network::of(spec.interface.as_deref(), &spec.peers);
            Ok(Arc::new(transport::ros2::Ros2Transport::open(
                &inst,
                spec.domain.unwrap_or_else(default_dds_domain),
                &net,
            )?))
        }
        TransportKind::FastDds => {
            let net = transport::cyclonedds::DdsNetwork {
                interface: spec.interface.clone(),
                peers: spec.peers.clone(),
            };
            let ros2 = match spec.fastdds_lib {
                transport::fastdds::FastDdsLib::Debian => None,
                transport::fastdds::FastDdsLib::Ros2 => {
                    Some(ros2_installation(spec).map_err(|e| TransportError::Library {
                        transport: "fastdds",
                        what: "installation",
                        why: e,
                    })?)
                }
            };
            Ok(Arc::new(transport::fastdds::FastDdsTransport::with_lib(
                spec.domain.unwrap_or_else(default_dds_domain),
                &net,
                spec.fastdds_shm,
                ros2.as_ref(),
            )?))
        }
    }
}

/// The ROS 2 installation `spec` names (`ros2_prefix`, `rmw`; found as
/// [`ros2::install::find`] says), recorded as it was first found (`ros2_found_by`).
pub fn ros2_installation(
    spec: &engine::TransportSpec,
) -> Result<transport::ros2::install::Installation, String> {
    let mut i = transport::ros2::install::find(
        spec.ros2_prefix.as_deref().map(std::path::Path::new),
        spec.rmw.as_deref(),
        &transport::ros2::install::Env::here(),
    )?;
    if let Some(by) = &spec.ros2_found_by {
        i.found_by.clone_from(by);
    }
    Ok(i)
}

/// The DDS domain a probe uses unless told: 100..199 from the process id, so that runs do
/// not meet each other (or a ddsperf on domain 0).
pub fn default_dds_domain() -> u32 {
    100 + std::process::id() % 100
}
