//! Running every case of a [`PubsubConfig`] ([`run`], [`run_with`]): this side's transport
//! set up once (its network, a zenoh endpoint, the DDS domain, the ROS 2 installation, the
//! private network namespace RustDDS needs on one host), the far side's transport checked,
//! then the sweep, case by case ([`super::case`]), and the run's notes.
//!
//! A case that cannot run here is recorded as failed and the sweep goes on; bad input and
//! real-time settings stop everything. Nothing here prints: progress goes to a callback.

use super::by_hand::run_peer_by_hand;
use super::case::CaseSetup;
use super::config::{HandRole, Mode, PubsubConfig};
use super::outcome::{CaseResult, ProbeError, PubsubOutcome};
use super::placement::{FarPlacement, Launcher};
use super::spec::{open_transport, TransportKind, TransportSpec};
use super::threads::RtUse;
use super::validate::{check_far_placement, check_far_transport, validate};
use crate::transport::{EchoStyle, Transport, WaitStyle};
use rtlab_sys::clock::monotonic_ns;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn ip_in_endpoint(ip: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

/// Run every case. `progress(done, total)` is called between cases.
pub fn run(
    cfg: &PubsubConfig,
    launcher: Launcher,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    run_with(cfg, launcher, None, stop, progress)
}

/// Run every case, the roles on `far` when given (else processes of this host started by
/// `launcher`, or threads).
pub fn run_with(
    cfg: &PubsubConfig,
    launcher: Launcher,
    far: Option<&FarPlacement>,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PubsubOutcome, ProbeError> {
    let started = monotonic_ns();
    if let Some(f) = far {
        check_far_placement(cfg, f)?;
    }
    // middleware threads are created after this, so they inherit the policy; the calling
    // thread gets its own back when the run ends
    let _policy_back = rtlab_sys::tasks::PolicyBack::now();
    cfg.rt.apply_policy_here().map_err(ProbeError::Rt)?;
    let mut spec = near_spec(cfg, far)?;
    let private_netns = enter_private_netns(cfg, far, &mut spec)?;
    let transport = open_transport(&spec)?;
    let qos_mapping = validate(cfg, transport.as_ref())?;
    if let Some(h) =
        cfg.by_hand.as_ref().filter(|h| matches!(h.role, HandRole::Pong | HandRole::Sub))
    {
        return run_peer_by_hand(cfg, h, transport, qos_mapping, &stop, started);
    }
    let (far_kind, far_ros2) = check_far_transport(cfg, &spec, far.is_some())?;
    // the transport's own labels (fastdds_version, rmw, ...); streams through ROS 2 on the
    // far side say which too (rmw, ros_distro)
    let mut ros2_labels = transport.labels();
    if let Some(f) = far_ros2.as_ref().filter(|_| transport.ros2_facts().is_none()) {
        ros2_labels.extend(f.labels());
    }
    let mut role_spec = role_spec_of(&spec, far_kind, far, multicast(cfg));
    if far.is_some() {
        // a far host finds its own ROS 2 (the user's flags, not this host's paths)
        role_spec.ros2_prefix = cfg.transport.ros2_prefix.clone();
        role_spec.rmw = cfg.transport.rmw.clone();
        role_spec.ros2_found_by = None;
    }
    let in_process = far.is_none() && (cfg.in_process || spec.kind == TransportKind::Intra);
    // ros1: a master that stops answering ends the run, saying so
    let master_watch = (spec.kind == TransportKind::Ros1).then(|| {
        crate::transport::ros1::MasterWatch::start(
            spec.ros1_master.clone().unwrap_or_default(),
            stop.clone(),
        )
    });
    let cases = cfg.cases();
    let mut out = Vec::new();
    for (ci, &(len, period, n)) in cases.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        progress(ci, cases.len());
        let topic = match &cfg.by_hand {
            Some(h) => h.topic.clone(),
            None => {
                format!("rtlab_{}_{}_{}", std::process::id(), started.rem_euclid(1_000_000), ci)
            }
        };
        let case = CaseSetup {
            cfg,
            transport: transport.clone(),
            role_spec: if in_process { spec.clone() } else { role_spec.clone() },
            in_process,
            topic,
            len,
            period,
            n,
            far,
            labels: &ros2_labels,
        };
        match case.run(launcher, &stop) {
            Ok(c) => out.push(c),
            // bad input stops everything; a case that cannot run here is recorded, the sweep goes on
            Err(e) if e.is_bad_input() || matches!(e, ProbeError::Rt(_)) => return Err(e),
            Err(e) => out.push(CaseResult::failed(len, period, n, e.to_string())),
        }
    }
    progress(out.len(), cases.len());
    let mut notes =
        run_notes(cfg, &spec, transport.as_ref(), &out, in_process, private_netns.is_some());
    notes.extend(master_watch.and_then(|w| w.lost()));
    let ros2 = transport.ros2_facts().or(far_ros2);
    drop(transport);
    drop(private_netns);
    Ok(PubsubOutcome {
        interrupted: stop.load(Ordering::Relaxed),
        cases: out,
        qos_mapping,
        notes,
        duration_ns: monotonic_ns() - started,
        ros2,
        cost_windows: Vec::new(),
    })
}

/// This side or the far side uses `kind`.
fn either_side(cfg: &PubsubConfig, kind: TransportKind) -> bool {
    cfg.transport.kind == kind || cfg.far_transport == Some(kind)
}

/// RustDDS has no unicast peers: where it is one of the two sides, both meet by multicast;
/// so do ROS 2 nodes across a link (ROS 2's default discovery, no static peers: Humble has
/// none).
fn multicast(cfg: &PubsubConfig) -> bool {
    either_side(cfg, TransportKind::RustDds) || either_side(cfg, TransportKind::Ros2)
}

/// This side's transport: `cfg.transport` with its wait style, a zenoh endpoint to listen
/// on (a free port of the link's address, or of loopback), the DDS domain, the ROS 2
/// installation found once, and on a far link this host's address (the far host's as its
/// peer, unless the two discover by multicast).
fn near_spec(cfg: &PubsubConfig, far: Option<&FarPlacement>) -> Result<TransportSpec, ProbeError> {
    let mut spec = cfg.transport.clone();
    spec.busy_poll = cfg.wait == WaitStyle::BusyPoll;
    if cfg.by_hand.is_none() {
        // shm's services made for the run's largest fan-out, not for any: iceoryx2 walks
        // every slot per send and take (examples/shm_ladder.rs)
        spec.shm_subscribers = cfg.subscribers.iter().copied().max();
    }
    if spec.kind == TransportKind::Zenoh && spec.listen.is_empty() {
        let ip = far.map(|f| f.near.as_str()).unwrap_or("127.0.0.1");
        spec.listen = vec![format!(
            "tcp/{}:{}",
            ip_in_endpoint(ip),
            free_tcp_port(ip).map_err(ProbeError::Setup)?
        )];
    }
    if spec.kind.is_dds() && spec.domain.is_none() {
        spec.domain = Some(crate::default_dds_domain());
    }
    // ros2 here (the near side, or a far side on this host): the installation is found once,
    // so that every process of the run loads the same one (a far host finds its own)
    let fastdds_on_ros2 = spec.fastdds_lib == crate::transport::fastdds::FastDdsLib::Ros2
        && either_side(cfg, TransportKind::FastDds);
    if spec.kind == TransportKind::Ros2
        || (far.is_none() && cfg.far_transport == Some(TransportKind::Ros2))
        || fastdds_on_ros2
    {
        let inst = crate::ros2_installation(&spec).map_err(ProbeError::Invalid)?;
        spec.ros2_prefix = Some(inst.prefix.display().to_string());
        spec.rmw = Some(inst.rmw);
        spec.ros2_found_by = Some(inst.found_by);
    }
    if spec.kind == TransportKind::Ros1 {
        ros1_network(&mut spec, far)?;
    }
    if let Some(f) = far {
        if spec.kind.is_dds() || spec.kind == TransportKind::Udp {
            spec.interface.get_or_insert_with(|| f.near.clone());
            if spec.peers.is_empty() && !multicast(cfg) {
                spec.peers = vec![f.far.clone()];
            }
        }
    }
    Ok(spec)
}

/// ros1: every process of the run on one master, the user's (`ROS_MASTER_URI`) or this
/// process's. On a far link the far node reaches this process's master at this host's address
/// on the link (the master rtlab starts listens on every address of its namespace), and this
/// side's node is at that address too (unless `--interface` names another); a user's master
/// on loopback cannot be reached from there: one line.
fn ros1_network(spec: &mut TransportSpec, far: Option<&FarPlacement>) -> Result<(), ProbeError> {
    if spec.ros1_master.is_none() {
        let (uri, ip) = rtlab_bindings::roscpp::shared_master().map_err(ProbeError::Setup)?;
        spec.ros1_master = Some(match (far, &ip) {
            (Some(f), Some(_)) => uri_with_host(&uri, &f.near),
            _ => uri,
        });
        if far.is_none() && spec.interface.is_none() {
            spec.interface = ip;
        }
    }
    let Some(f) = far else { return Ok(()) };
    let master = spec.ros1_master.as_deref().unwrap_or_default();
    if loopback_uri(master) {
        return Err(ProbeError::Invalid(format!(
            "--far with ros1: the master {master} (ROS_MASTER_URI) is on this host's loopback, which the far node cannot reach; give its address on the link ({}), or leave ROS_MASTER_URI unset and rtlab starts one",
            f.near
        )));
    }
    spec.interface.get_or_insert_with(|| f.near.clone());
    Ok(())
}

/// `uri` (`http://HOST:PORT/`) with `host` for its host.
fn uri_with_host(uri: &str, host: &str) -> String {
    let rest = uri.strip_prefix("http://").unwrap_or(uri);
    let port = rest.split_once(':').map_or("", |(_, p)| p);
    format!("http://{}:{port}", ip_in_endpoint(host))
}

/// Whether a master's URI names this host's loopback (`localhost`, 127/8, ::1).
fn loopback_uri(uri: &str) -> bool {
    let rest = uri.strip_prefix("http://").unwrap_or(uri);
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split([':', '/']).next().unwrap_or(""),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// rustdds on one host (either side), no interface: RustDDS cannot be limited to an
/// interface and ignores lo, so this thread moves into a private network namespace (lo +
/// a veth end, rustdds::enter_private_netns) before the transport is opened (a DDS
/// other side uses that veth end too, with multicast discovery); the role processes are
/// spawned from this thread and are born there too. The namespace has no name: it
/// disappears with its last thread or process, nothing to remove. The guard moves this
/// thread back when dropped (after the transport is).
fn enter_private_netns(
    cfg: &PubsubConfig,
    far: Option<&FarPlacement>,
    spec: &mut TransportSpec,
) -> Result<Option<crate::transport::rustdds::PrivateNetns>, ProbeError> {
    if !(either_side(cfg, TransportKind::RustDds)
        && far.is_none()
        && spec.interface.is_none()
        && cfg.by_hand.is_none())
    {
        return Ok(None);
    }
    let g = crate::transport::rustdds::enter_private_netns().map_err(|e| {
        ProbeError::Setup(format!(
            "rustdds: on one host RustDDS runs in a private network namespace (it cannot be limited to an interface and ignores lo): {e}; or run it across a link (--far netns:NAME), or accept every interface (--interface all)"
        ))
    })?;
    spec.interface = Some(crate::transport::rustdds::PRIVATE_IF.into());
    Ok(Some(g))
}

/// The run's notes: the transport's own, what a publisher by hand matched, what
/// `--thread-priority` did, where the subscribers ran, Fast DDS's shared-memory segment,
/// RustDDS's private network namespace.
fn run_notes(
    cfg: &PubsubConfig,
    spec: &TransportSpec,
    transport: &dyn Transport,
    cases: &[CaseResult],
    in_process: bool,
    private_netns: bool,
) -> Vec<String> {
    let mut notes = transport.notes();
    if let Some(m) = cases.iter().find_map(|c| c.matched_subscribers.as_ref()) {
        notes.insert(0, m.note(transport.name()));
    }
    if let Some(c) = cases.iter().find(|c| !c.thread_priorities_set.is_empty()) {
        notes.extend(c.thread_priorities_set.iter().map(|d| format!("publisher process: {d}")));
    }
    if !cfg.thread_priorities.is_empty() && !in_process {
        notes.push("subscriber processes: the same --thread-priority rules applied to their middleware threads".into());
    }
    if let Some(s) = cfg.middleware_priority {
        let names = transport.thread_names();
        notes.push(if names.is_empty() {
            format!("--middleware-priority {s}: rtlab knows no thread names of {}'s middleware: its threads keep the policy they inherited", transport.name())
        } else {
            format!("--middleware-priority {s}: every thread of {}'s middleware ({}) {} under the measuring threads' priority where those are real-time, in every process of the case", transport.name(), names.join(" "), -s)
        });
    }
    if cfg.mode == Mode::Roundtrip && cfg.echo == EchoStyle::Callback {
        if let Some(how) = cfg.far_kind().callback_echo() {
            notes.push(format!("echo callback: {how}"));
        }
    }
    if spec.kind == TransportKind::Intra && !cfg.in_process {
        notes.push("intra: subscribers are threads of the publisher's process (same process by definition)".into());
    }
    let fastdds_both_sides = spec.kind == TransportKind::FastDds
        && cfg.far_transport.is_none_or(|k| k == TransportKind::FastDds);
    let largest = cfg.payloads.iter().copied().max().unwrap_or(0);
    notes.extend(crate::transport::fastdds::shm_segment_note(
        largest,
        fastdds_both_sides,
        spec.fastdds_shm,
    ));
    if private_netns {
        notes.push(format!(
            "rustdds: ran in a private network namespace (lo, and a veth pair, {} {}/24 and its other end without an address: every packet stayed inside) because RustDDS 0.11 cannot be limited to one interface and ignores lo",
            crate::transport::rustdds::PRIVATE_IF,
            crate::transport::rustdds::PRIVATE_ADDR
        ));
    }
    notes
}

/// The transport of the role processes (pongs, subscribers; `far_kind` on the far side
/// or on this host), from the near side's `spec`: its domain, wait and Fast DDS shared
/// memory, its ROS 2 installation; on a far link, that host's address (and this one's as its
/// DDS/udp peer, not when either side discovers by `multicast`: rustdds, ros2); on one host,
/// a DDS keeps the near side's network.
fn role_spec_of(
    spec: &TransportSpec,
    far_kind: TransportKind,
    far: Option<&FarPlacement>,
    multicast: bool,
) -> TransportSpec {
    let mut role_spec = TransportSpec::new(far_kind);
    role_spec.connect = spec.listen.clone();
    role_spec.domain = spec.domain;
    role_spec.busy_poll = spec.busy_poll;
    role_spec.fastdds_shm = spec.fastdds_shm;
    role_spec.shm_subscribers = spec.shm_subscribers;
    role_spec.fastdds_lib = spec.fastdds_lib;
    role_spec.ros2_prefix = spec.ros2_prefix.clone();
    role_spec.rmw = spec.rmw.clone();
    role_spec.ros2_found_by = spec.ros2_found_by.clone();
    role_spec.ros1_master = spec.ros1_master.clone();
    role_spec.tcp_nodelay = spec.tcp_nodelay;
    role_spec.udpros = spec.udpros;
    if far.is_none() && far_kind == TransportKind::Ros1 {
        role_spec.interface = spec.interface.clone();
    }
    if let Some(f) = far {
        if far_kind == TransportKind::Ros1 {
            // the far node's own address on the link (the master's is in ros1_master)
            role_spec.interface = Some(f.far.clone());
        } else if far_kind.is_dds() || far_kind == TransportKind::Udp {
            role_spec.interface = Some(f.far.clone());
            if !multicast {
                role_spec.peers = vec![f.near.clone()];
            }
        }
    } else if far_kind.is_dds() {
        // one host: the same namespace (private or the caller's), the same network
        role_spec.interface = spec.interface.clone();
        role_spec.peers = spec.peers.clone();
    }
    role_spec
}

fn free_tcp_port(ip: &str) -> Result<u16, String> {
    let l = std::net::TcpListener::bind((ip, 0))
        .map_err(|e| format!("finding a free port on {ip}: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_processes_get_the_shm_services_size_and_results_never_show_it_unset() {
        let mut spec = TransportSpec::new(TransportKind::Shm);
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json.get("shm_subscribers").is_none(), "{json}");
        spec.shm_subscribers = Some(3);
        let r = role_spec_of(&spec, TransportKind::Shm, None, false);
        let back: TransportSpec =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.shm_subscribers, Some(3));
    }

    #[test]
    fn role_processes_get_the_near_sides_domain_network_and_fast_dds_shared_memory() {
        let mut spec = TransportSpec::new(TransportKind::FastDds);
        spec.domain = Some(42);
        spec.interface = Some("10.1.2.3".into());
        spec.fastdds_shm = crate::transport::fastdds::Shm::Segment(4 << 20);
        let r = role_spec_of(&spec, TransportKind::FastDds, None, false);
        assert_eq!(r.fastdds_shm, crate::transport::fastdds::Shm::Segment(4 << 20));
        assert_eq!((r.domain, r.interface.as_deref()), (Some(42), Some("10.1.2.3")));
        // a cross-implementation far side keeps the setting (it is for its fastdds)
        let mut c = spec.clone();
        c.kind = TransportKind::CycloneDds;
        assert_eq!(
            role_spec_of(&c, TransportKind::FastDds, None, false).fastdds_shm,
            spec.fastdds_shm
        );
    }

    #[test]
    fn a_ros1_far_node_gets_its_own_address_and_the_master_on_this_hosts_address() {
        assert_eq!(uri_with_host("http://127.0.0.1:40123/", "10.9.0.1"), "http://10.9.0.1:40123/");
        assert_eq!(uri_with_host("http://127.0.0.1:40123/", "fd00::1"), "http://[fd00::1]:40123/");
        for (uri, lo) in [
            ("http://127.0.0.1:11311/", true),
            ("http://localhost:11311", true),
            ("http://[::1]:11311/", true),
            ("http://10.9.0.1:11311/", false),
            ("http://robot:11311/", false),
        ] {
            assert_eq!(loopback_uri(uri), lo, "{uri}");
        }
        struct NoRoles;
        impl crate::engine::FarRoles for NoRoles {
            fn start(
                &self,
                _: &crate::engine::RoleConfig,
                _: std::sync::mpsc::Sender<(usize, crate::engine::RoleEvent)>,
            ) -> Result<Box<dyn crate::engine::FarRole>, String> {
                Err("none".into())
            }
        }
        let f = FarPlacement { near: "10.9.0.1".into(), far: "10.9.0.2".into(), roles: &NoRoles };
        let mut spec = TransportSpec::new(TransportKind::Ros1);
        spec.ros1_master = Some("http://10.9.0.1:11311/".into());
        ros1_network(&mut spec, Some(&f)).unwrap();
        assert_eq!(spec.interface.as_deref(), Some("10.9.0.1"));
        let r = role_spec_of(&spec, TransportKind::Ros1, Some(&f), false);
        assert_eq!(r.interface.as_deref(), Some("10.9.0.2"));
        assert_eq!(r.ros1_master.as_deref(), Some("http://10.9.0.1:11311/"));
        assert!(r.peers.is_empty());
        spec.ros1_master = Some("http://localhost:11311/".into());
        let e = ros1_network(&mut spec, Some(&f)).unwrap_err().to_string();
        assert!(e.contains("loopback") && e.contains("10.9.0.1"), "{e}");
    }
}
