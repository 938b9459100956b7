//! The `ros2` transport against the machine's ROS 2 (scripts/setup.sh installs the package
//! registry's: rcl 10.1 "kilted", rmw_fastrtps_cpp, Fast DDS 3.2, in /opt/rtlab/ros2): the
//! conformance suite through rcl, rtlab's declarations of rcl's structures checked against the
//! installed headers, and the rule that keeps two Fast DDS versions out of one process.
//!
//! A test binary of its own: every test here loads ROS 2 (and its Fast DDS) into this
//! process, which then cannot load rtlab's `fastdds` (Debian's Fast DDS 2.9) — the other
//! test binaries do.
//!
//! The conformance suite runs as one test per rule (support/conformance.rs): `ros2::fan_out`,
//! `fastdds_lib_ros2::clean_shutdown`, ...

#[path = "support/conformance.rs"]
mod conformance;
use conformance::{files_under, instantiate_conformance_tests, Rule, Subject};
use rtlab_pubsub::transport::fastdds::FastDdsTransport;
use rtlab_pubsub::transport::ros2::install::{self, Env, Installation};
use rtlab_pubsub::transport::ros2::{Ros2Network, Ros2Transport};
use rtlab_pubsub::transport::Transport;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

fn installation() -> Installation {
    install::find(None, None, &Env::here())
        .unwrap_or_else(|e| panic!("{e} (the tests need the ROS 2 scripts/setup.sh installs)"))
}

fn open(inst: &Installation, domain: u32) -> Ros2Transport {
    Ros2Transport::open(inst, domain, &Ros2Network::of(None, &[])).unwrap_or_else(|e| panic!("{e}"))
}

/// Fast DDS's shared-memory files (Fast DDS 3: /dev/shm/fastdds_*; 2.x: fastrtps_*).
fn fast_dds_files() -> BTreeSet<std::path::PathBuf> {
    files_under(&["/dev/shm".into()], &["fastdds", "fastrtps"])
}

/// The tests that list Fast DDS's files in /dev/shm, and those that make them meanwhile (every
/// test that opens a node), run one at a time: a clean-shutdown rule sees no other test's files.
static SHM: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SHM.lock().unwrap_or_else(|e| e.into_inner())
}

instantiate_conformance_tests!(ros2, with_ros2);

/// Two nodes (two rcl contexts: two participants) of one loopback-only domain.
fn with_ros2(rule: Rule) {
    let _one = one_at_a_time();
    let inst = installation();
    let domain = rtlab_pubsub::default_dds_domain();
    let make = || {
        let (a, b): (Arc<dyn Transport>, Arc<dyn Transport>) =
            (Arc::new(open(&inst, domain)), Arc::new(open(&inst, domain)));
        (a, b)
    };
    rule(&Subject { make: &make, leftovers: &fast_dds_files });
}

#[test]
fn the_installation_is_described_with_its_versions() {
    let _one = one_at_a_time();
    let inst = installation();
    let t = open(&inst, rtlab_pubsub::default_dds_domain());
    let f = t.facts();
    assert!(!f.rcl_version.is_empty() && f.distro != "unknown", "{f:?}");
    assert!(f.rmw.starts_with("rmw_"), "{f:?}");
    assert_eq!(f.discovery.range, "LOCALHOST");
    let notes = t.notes().join("\n");
    assert!(notes.contains(&format!("rcl {}", f.rcl_version)), "{notes}");
    assert!(notes.contains("the RMW says it is rmw_"), "{notes}");
    let labels = t.labels();
    assert!(labels.contains(&("rmw", f.rmw.clone())), "{labels:?}");
    if f.rmw == "rmw_fastrtps_cpp" {
        assert_eq!(f.middleware.as_deref(), Some("Fast DDS"), "{f:?}");
        let v = f.middleware_version.clone().expect("Fast DDS's version");
        assert!(v.split('.').count() == 3, "{v}");
    }
}

#[test]
fn a_publisher_counts_its_matched_subscriptions() {
    let _one = one_at_a_time();
    let inst = installation();
    let domain = rtlab_pubsub::default_dds_domain();
    let (a, b) = (open(&inst, domain), open(&inst, domain));
    let q = rtlab_pubsub::Qos::default();
    let topic = conformance::fresh_topic("matched");
    let p = a.publisher(&topic, &q, 64).unwrap();
    assert_eq!(p.matched(), Some(0));
    let _s = b.subscriber(&topic, &q, 64).unwrap();
    let end = rtlab_sys::clock::monotonic_ns() + 10_000_000_000;
    while p.matched() != Some(1) && rtlab_sys::clock::monotonic_ns() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(p.matched(), Some(1));
}

#[test]
fn rtlabs_fastdds_cannot_join_a_process_that_holds_the_rmws_fast_dds() {
    let _one = one_at_a_time();
    let inst = installation();
    let _t = open(&inst, rtlab_pubsub::default_dds_domain());
    let Some(held) = rtlab_pubsub::dl::fast_dds_held() else {
        rtlab_sys::test_skip::skipped(format_args!("the RMW ({}) brings no Fast DDS", inst.rmw));
        return;
    };
    assert!(held.contains(&inst.rmw), "{held}");
    let e = FastDdsTransport::new(rtlab_pubsub::default_dds_domain())
        .err()
        .expect("Fast DDS 2.9 loaded beside the RMW's");
    let e = e.to_string();
    assert!(e.contains("already holds") && e.contains("Fast DDS 2.9"), "{e}");
}

/// `--fastdds-lib ros2`: rtlab's fastdds shim built against the installation's Fast DDS 3,
/// loaded beside the RMW (one library, one claim): the same process holds both. Runs `f`
/// with the installation and a maker of such participants (one loopback-only domain) while
/// a ROS 2 node is open, one at a time; skipped (said why) without that Fast DDS.
fn beside_ros2(f: impl FnOnce(&Installation, &dyn Fn() -> FastDdsTransport)) {
    let _one = one_at_a_time();
    let inst = installation();
    if inst.fast_dds().is_none() || rtlab_pubsub::transport::fastdds::ROS2_BUILT_VERSION.is_empty()
    {
        rtlab_sys::test_skip::skipped(format_args!(
            "no Fast DDS 3 under {} or none at build time",
            inst.rmw
        ));
        return;
    }
    let domain = rtlab_pubsub::default_dds_domain();
    let _ros2 = open(&inst, domain);
    let net = rtlab_pubsub::transport::cyclonedds::DdsNetwork::default();
    let fastdds = || {
        FastDdsTransport::with_lib(
            domain,
            &net,
            rtlab_pubsub::transport::fastdds::Shm::Default,
            Some(&inst),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    f(&inst, &fastdds);
}

#[test]
fn fastdds_on_the_rmws_own_fast_dds_names_its_version() {
    beside_ros2(|inst, fastdds| {
        let t = fastdds();
        let labels = t.labels();
        let version = inst.middleware.as_ref().and_then(|m| m.version.clone()).unwrap();
        assert!(labels.contains(&("fastdds_version", version.clone())), "{labels:?}");
        assert!(t.notes()[0].contains(&format!("Fast DDS {version}")), "{:?}", t.notes());
    });
}

instantiate_conformance_tests!(fastdds_lib_ros2, with_fastdds_lib_ros2);

/// fastdds on the RMW's own Fast DDS, beside a ROS 2 node: two participants.
fn with_fastdds_lib_ros2(rule: Rule) {
    beside_ros2(|_, fastdds| {
        let make = || {
            let (a, b): (Arc<dyn Transport>, Arc<dyn Transport>) =
                (Arc::new(fastdds()), Arc::new(fastdds()));
            (a, b)
        };
        rule(&Subject { make: &make, leftovers: &fast_dds_files });
    });
}

#[test]
fn a_domain_above_rcls_is_one_line() {
    let _one = one_at_a_time();
    let inst = installation();
    let e = Ros2Transport::open(&inst, 233, &Ros2Network::of(None, &[])).err().unwrap().to_string();
    assert!(e.contains("233") && !e.contains('\n'), "{e}");
}

/// The include directories of an ament prefix (`include/<pkg>`, each package's headers in
/// `include/<pkg>/<pkg>/`).
fn include_dirs(prefix: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(prefix.join("include"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| format!("-I{}", e.path().display()))
        .collect();
    v.sort();
    v
}

#[test]
fn rtlabs_declarations_match_the_installed_headers() {
    use rtlab_pubsub::transport::ros2::ffi;
    use std::mem::{offset_of, size_of};
    let inst = installation();
    if !inst.prefix.join("include/rcl/rcl/rcl.h").is_file() {
        rtlab_sys::test_skip::skipped(format_args!("{} has no headers", inst.prefix.display()));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    std::fs::write(
        &src,
        r#"
#include <stddef.h>
#include <stdio.h>
#include <rcl/rcl.h>
#include <rcutils/error_handling.h>
#include <sensor_msgs/msg/compressed_image.h>
#define P(n, v) printf("%s %zu\n", n, (size_t)(v))
int main(void) {
  P("allocator", sizeof(rcutils_allocator_t));
  P("init_options", sizeof(rcl_init_options_t));
  P("context", sizeof(rcl_context_t));
  P("node", sizeof(rcl_node_t));
  P("publisher", sizeof(rcl_publisher_t));
  P("subscription", sizeof(rcl_subscription_t));
  P("wait_set", sizeof(rcl_wait_set_t));
  P("node_options", sizeof(rcl_node_options_t));
  P("publisher_options", sizeof(rcl_publisher_options_t));
  P("subscription_options", sizeof(rcl_subscription_options_t));
  P("publisher_options.qos", offsetof(rcl_publisher_options_t, qos));
  P("subscription_options.qos", offsetof(rcl_subscription_options_t, qos));
  P("qos", sizeof(rmw_qos_profile_t));
  P("qos.depth", offsetof(rmw_qos_profile_t, depth));
  P("qos.reliability", offsetof(rmw_qos_profile_t, reliability));
  P("qos.durability", offsetof(rmw_qos_profile_t, durability));
  P("qos.deadline", offsetof(rmw_qos_profile_t, deadline));
  P("qos.liveliness", offsetof(rmw_qos_profile_t, liveliness));
  P("qos.avoid", offsetof(rmw_qos_profile_t, avoid_ros_namespace_conventions));
  P("error_string", sizeof(rcutils_error_string_t));
  P("message", sizeof(sensor_msgs__msg__CompressedImage));
  P("message.format", offsetof(sensor_msgs__msg__CompressedImage, format));
  P("message.data", offsetof(sensor_msgs__msg__CompressedImage, data));
  P("message.frame_id", offsetof(sensor_msgs__msg__CompressedImage, header.frame_id));
  P("keep_last", RMW_QOS_POLICY_HISTORY_KEEP_LAST);
  P("keep_all", RMW_QOS_POLICY_HISTORY_KEEP_ALL);
  P("reliable", RMW_QOS_POLICY_RELIABILITY_RELIABLE);
  P("best_effort", RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT);
  P("transient_local", RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL);
  P("volatile", RMW_QOS_POLICY_DURABILITY_VOLATILE);
  P("ret_timeout", RCL_RET_TIMEOUT);
  P("ret_take_failed", RCL_RET_SUBSCRIPTION_TAKE_FAILED);
  return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("layout");
    let o = Command::new("cc")
        .args(include_dirs(&inst.prefix))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc (build-essential)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let c: std::collections::BTreeMap<&str, usize> = out
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    // exact where rtlab writes or returns by value
    assert_eq!(c["allocator"], size_of::<ffi::Allocator>());
    assert_eq!(c["qos"], size_of::<ffi::QosProfile>());
    assert_eq!(c["qos.depth"], offset_of!(ffi::QosProfile, depth));
    assert_eq!(c["qos.reliability"], offset_of!(ffi::QosProfile, reliability));
    assert_eq!(c["qos.durability"], offset_of!(ffi::QosProfile, durability));
    assert_eq!(c["qos.deadline"], offset_of!(ffi::QosProfile, deadline));
    assert_eq!(c["qos.liveliness"], offset_of!(ffi::QosProfile, liveliness));
    assert_eq!(c["qos.avoid"], offset_of!(ffi::QosProfile, avoid_ros_namespace_conventions));
    assert_eq!(c["publisher_options.qos"], 0);
    assert_eq!(c["subscription_options.qos"], 0);
    assert_eq!(c["error_string"], size_of::<ffi::ErrorString>());
    assert_eq!(c["message"], size_of::<ffi::CompressedImage>());
    assert_eq!(c["message.format"], offset_of!(ffi::CompressedImage, format));
    assert_eq!(c["message.data"], offset_of!(ffi::CompressedImage, data));
    assert_eq!(c["message.frame_id"], offset_of!(ffi::Header, frame_id));
    for (k, v) in [
        ("keep_last", ffi::HISTORY_KEEP_LAST),
        ("keep_all", ffi::HISTORY_KEEP_ALL),
        ("reliable", ffi::RELIABILITY_RELIABLE),
        ("best_effort", ffi::RELIABILITY_BEST_EFFORT),
        ("transient_local", ffi::DURABILITY_TRANSIENT_LOCAL),
        ("volatile", ffi::DURABILITY_VOLATILE),
    ] {
        assert_eq!(c[k], v as usize, "{k}");
    }
    assert_eq!(c["ret_timeout"], ffi::RET_TIMEOUT as usize);
    assert_eq!(c["ret_take_failed"], ffi::RET_TAKE_FAILED as usize);
    // at least as large where rtlab only holds the bytes (zeroed) or receives them by value
    for (k, ours) in [
        ("init_options", size_of::<ffi::InitOptions>()),
        ("context", size_of::<ffi::Context>()),
        ("node", size_of::<ffi::Node>()),
        ("publisher", size_of::<ffi::Port>()),
        ("subscription", size_of::<ffi::Port>()),
        ("wait_set", size_of::<ffi::WaitSet>()),
        ("node_options", size_of::<ffi::NodeOptions>()),
        ("publisher_options", size_of::<ffi::PortOptions>()),
        ("subscription_options", size_of::<ffi::PortOptions>()),
    ] {
        assert!(c[k] <= ours, "{k}: C {} bytes, rtlab {ours}", c[k]);
    }
    // handles passed by pointer but returned small by rcl's zero-initializers are zeroed by
    // rtlab instead: their exact size matters only as a lower bound; the options returned by
    // value must be larger than 16 bytes in C (returned through memory, see ffi.rs)
    for k in ["node_options", "publisher_options", "subscription_options"] {
        assert!(c[k] > 16, "{k}");
    }
}
