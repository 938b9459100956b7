//! `rtlab observe` through the binary: the graph of a live domain with a ROS 2-named writer
//! (rtlab's own publisher by hand) and a raw DDS writer (ddsperf), by their names and QoS,
//! neither owned by a ROS 2 node (no `ros_discovery_info`: no node, no node list); an empty
//! domain said in one line; bad input in one line, exit 2. ROS 2's nodes against real ROS 2
//! nodes: observe_ros2_cli.rs.

mod common;
use common::*;
use serde_json::Value;
use std::process::{Child, Stdio};

/// Cyclone's configuration of rtlab's `dds` transport on loopback (for ddsperf to meet it).
const LOOPBACK: &str = "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface name=\"lo\"/></Interfaces><AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>100</MaxAutoParticipantIndex><Peers><Peer address=\"127.0.0.1\"/></Peers></Discovery></Domain></CycloneDDS>";

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// rtlab's own DDS publisher by hand on `topic` in `domain` (60 s at most), its QoS flags added.
fn rtlab_publisher(domain: u32, topic: &str, rate: &str, qos: &[&str]) -> Kill {
    Kill(
        rtlab()
            .args(["pubsub", "--transport", "dds", "--role", "pub", "--topic", topic])
            .args(["--domain", &domain.to_string(), "--rate", rate, "--duration", "60s"])
            .args(qos)
            .args(["-q", "--no-mlockall"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// ddsperf publishing best effort at `rate` in `domain` (60 s at most), on rtlab's loopback
/// configuration.
fn ddsperf_publisher(domain: u32, rate: &str) -> Kill {
    Kill(
        std::process::Command::new("ddsperf")
            .env("CYCLONEDDS_URI", LOOPBACK)
            .args(["-i", &domain.to_string(), "-D", "60", "-u", "pub", rate])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Observe `domain` until `found` holds for the graph (bounded: discovery on a busy machine).
fn observe_until(domain: u32, found: impl Fn(&Value) -> bool) -> Value {
    let mut g = Value::Null;
    for _ in 0..10 {
        let o = run(&["observe", "--domain", &domain.to_string(), "--wait", "1s", "--json", "-"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        g = serde_json::from_slice(&o.stdout).unwrap();
        if found(&g) {
            return g;
        }
    }
    panic!("not found within 10 tries: {g}");
}

fn writers_on<'a>(g: &'a Value, topic: &str) -> Vec<&'a Value> {
    g["writers"].as_array().unwrap().iter().filter(|w| w["topic"] == topic).collect()
}

#[test]
fn a_ros2_named_writer_and_a_raw_dds_writer_are_found() {
    let domain = 216 + std::process::id() % 14;
    let topic = format!("obs_{}", std::process::id());
    let _publisher = rtlab_publisher(
        domain,
        &topic,
        "10hz",
        &["--reliability", "reliable", "--history", "keep-last:3"],
    );
    let dds_topic = format!("rt/{topic}");
    let g = observe_until(domain, |g| !writers_on(g, &dds_topic).is_empty());
    let w = writers_on(&g, &dds_topic)[0];
    assert_eq!(w["type_name"], "sensor_msgs::msg::dds_::CompressedImage_");
    assert_eq!(w["qos"]["reliability"], "reliable");
    assert_eq!(w["qos"]["history"], "keep-last:3");
    assert_eq!(w["qos"]["durability"], "volatile");
    assert!(g["participants"].as_array().unwrap().contains(&w["participant"]));
    // rtlab's publisher speaks ROS 2's names but is no ROS 2 node: no node anywhere
    assert!(w.get("node").is_none(), "{w}");
    assert_eq!(g["nodes"], serde_json::json!([]), "{g}");
    assert_eq!(g["notes"], serde_json::json!([]), "{g}");
    // the terminal shows the ROS 2 name and type, and no node
    let o = run(&["observe", "--domain", &domain.to_string(), "--wait", "1s"]);
    let out = stdout(&o);
    assert!(
        out.contains(&format!("/{topic}")) && out.contains("sensor_msgs/msg/CompressedImage"),
        "{out}"
    );
    assert!(out.lines().next().unwrap_or_default().contains(" 0 nodes, "), "{out}");
    assert!(!out.contains("nodes (ROS 2)") && !out.contains(", node /"), "{out}");

    if which("ddsperf") {
        let raw = domain + 1;
        let _ddsperf = ddsperf_publisher(raw, "10Hz");
        let g = observe_until(raw, |g| !writers_on(g, "DDSPerfUDataKS").is_empty());
        let w = writers_on(&g, "DDSPerfUDataKS")[0];
        assert_eq!(w["type_name"], "KeyedSeq");
        assert_eq!(w["qos"]["reliability"], "best-effort");
        assert!(w.get("node").is_none(), "{w}");
        assert_eq!(g["nodes"], serde_json::json!([]), "{g}");
    } else {
        eprintln!("ddsperf part skipped: cyclonedds-tools is not installed");
    }
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

#[test]
fn an_empty_domain_and_bad_input_are_said_in_one_line() {
    let o = run(&["observe", "--domain", "231", "--wait", "300ms"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nobody there: check --domain"), "{}", stdout(&o));
    assert_error(&["observe", "--domain", "300"], &["--domain 300"]);
    assert_error(&["observe", "--wait", "0s"], &["--wait"]);
    assert_error(&["observe", "--interface", "no-such-if0"], &["no-such-if0"]);
}

#[test]
fn a_live_topic_is_measured_and_its_problems_said_in_one_line() {
    let domain = 216 + (std::process::id() + 7) % 14;
    let topic = format!("live_{}", std::process::id());
    let _publisher = rtlab_publisher(domain, &topic, "100hz", &[]);
    observe_until(domain, |g| !writers_on(g, &format!("rt/{topic}")).is_empty());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let ros_name = format!("/{topic}");
    let o = run(&[
        "observe",
        "--domain",
        &domain.to_string(),
        "--topic",
        &ros_name,
        "--rate",
        "100hz",
        "--duration",
        "2s",
        "--no-mlockall",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(d["probe"], "observe");
    let obs = &d["config"]["observed"];
    assert_eq!(obs["type_name"], "sensor_msgs::msg::dds_::CompressedImage_");
    assert_eq!(obs["reader_reliability"], "best-effort");
    assert_eq!(obs["nominal_ns"], 10_000_000);
    assert_eq!(obs["nominal_estimated"], false);
    let received = obs["received"].as_u64().unwrap();
    assert!(received > 0, "{obs}");
    let streams = d["streams"].as_array().unwrap();
    let names: Vec<&str> = streams.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, [format!("{ros_name}.period"), format!("{ros_name}.deviation")]);
    // one period per arrival after the first
    assert_eq!(streams[0]["stats"]["count"].as_u64().unwrap(), received - 1);
    assert_eq!(streams[1]["stats"]["count"].as_u64().unwrap(), received - 1);
    assert_eq!(streams[0]["labels"]["nominal"], "given");
    // its cost: the reader's window, its messages the arrivals, its thread, the Cyclone DDS
    // threads of this process beside it
    let w = &d["cost"]["windows"][0];
    assert_eq!(w["name"], "observe");
    assert_eq!(w["messages"].as_u64().unwrap(), received);
    assert_eq!(w["measuring"].as_array().unwrap().len(), 1, "{w}");
    assert!(w["measuring"][0]["usage"]["voluntary_switches"].as_u64().unwrap() > 0, "{w}");
    let groups: Vec<&str> =
        w["groups"].as_array().unwrap().iter().filter_map(|g| g["group"].as_str()).collect();
    assert!(groups.contains(&"recv"), "Cyclone DDS's receive thread: {groups:?}");
    assert!(obs["gaps"].is_u64() && obs["bursts"].is_u64() && obs["missed_periods"].is_u64());
    assert_eq!(obs["size_min"], obs["size_max"], "rtlab's messages have one size: {obs}");
    assert!(!d["evidence"]["counters"]["windows"].as_array().unwrap().is_empty());

    // the reader cannot be reliable for a best-effort writer: said before measuring
    assert_error(
        &[
            "observe",
            "--domain",
            &domain.to_string(),
            "--topic",
            &ros_name,
            "--reliability",
            "reliable",
            "--duration",
            "1s",
        ],
        &["QoS mismatch", "best-effort"],
    );
    // no publisher on a topic, and nobody in a domain
    assert_error(
        &[
            "observe",
            "--domain",
            &domain.to_string(),
            "--topic",
            "/nothing_here",
            "--duration",
            "1s",
            "--wait",
            "500ms",
        ],
        &["no publisher of rt/nothing_here", &format!("rt/{topic}")],
    );
    assert_error(
        &["observe", "--domain", "231", "--topic", "/x", "--duration", "1s", "--wait", "300ms"],
        &["no publisher of rt/x in domain 231", "nobody in the domain"],
    );
    assert_error(&["observe", "--topic", "chatter"], &["--topic 'chatter'", "starts with /"]);
}

#[test]
fn a_raw_dds_topic_is_measured_by_its_dds_name() {
    if !which("ddsperf") {
        rtlab_sys::test_skip::skipped(format_args!("cyclonedds-tools is not installed"));
        return;
    }
    let domain = 216 + (std::process::id() + 3) % 14;
    let _ddsperf = ddsperf_publisher(domain, "50Hz");
    observe_until(domain, |g| !writers_on(g, "DDSPerfUDataKS").is_empty());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("o.json");
    let o = run(&[
        "observe",
        "--domain",
        &domain.to_string(),
        "--dds-topic",
        "DDSPerfUDataKS",
        "--duration",
        "2s",
        "--no-mlockall",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let obs = &d["config"]["observed"];
    assert_eq!(obs["type_name"], "KeyedSeq");
    assert!(obs["received"].as_u64().unwrap() > 0, "{obs}");
    assert_eq!(obs["nominal_estimated"], true, "no --rate: estimated");
    assert!(d["config"]["notes"].to_string().contains("keyed"), "{}", d["config"]["notes"]);
}

/// A scenario observes a live topic (ddsperf's: an rtlab publisher by hand would hold the
/// machine lock the run waits for): the case is stored with its streams and reported.
#[test]
fn a_scenario_observes_a_live_topic_and_stores_it() {
    if !which("ddsperf") {
        rtlab_sys::test_skip::skipped(format_args!("cyclonedds-tools is not installed"));
        return;
    }
    let domain = 216 + (std::process::id() + 10) % 14;
    let _ddsperf = ddsperf_publisher(domain, "100Hz");
    observe_until(domain, |g| !writers_on(g, "DDSPerfUDataKS").is_empty());
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("o.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"obs\"\nduration = \"2s\"\n[[probe]]\nkind = \"observe\"\ndomain = {domain}\ndds_topic = \"DDSPerfUDataKS\"\nrate = \"100hz\"\nmlockall = false\n"
        ),
    )
    .unwrap();
    let db = d.path().join("r.db");
    let o = run(&["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait", "-q"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["export", "latest", "--format", "json", "--db", db.to_str().unwrap(), "-o", "-"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let case = &v["cases"][0];
    assert_eq!(case["status"]["status"], "ok", "{}", case["status"]);
    let doc = &case["document"];
    assert_eq!(doc["probe"], "observe");
    assert!(doc["config"]["observed"]["received"].as_u64().unwrap() > 0);
    assert_eq!(doc["streams"][0]["name"], "DDSPerfUDataKS.period");
    let o = run(&["report", "--db", db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("DDSPerfUDataKS.period"), "{}", stdout(&o));
}
