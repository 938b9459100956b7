//! "ROS 2 layer": what rcl, the RMW and the type support add on top of the DDS they run on,
//! measured — a `ros2` stream beside the stream of the same case through the DDS its RMW
//! runs on, driven directly (`fastdds` for rmw_fastrtps_cpp / rmw_fastrtps_dynamic_cpp,
//! `cyclonedds` for rmw_cyclonedds_cpp; none for other RMWs such as rmw_zenoh_cpp).
//!
//! The pairing rule (also in docs/reports.md):
//! - a `ros2` stream and a stream of the direct transport are the same case when their probe
//!   (`pubsub`), metric (`one_way_latency` or `rtt`: the message's path; the publisher's
//!   send lateness is left out), load and profile are equal, and every label is equal except
//!   those of [`NOT_MATCHED`]: the transport's own (`transport`, `rmw`, `ros_distro`,
//!   `fastdds_version`, `fastdds_shm`) and the measured `published` and
//!   `case_p50_spread_ns`; a label on one side only is a difference;
//! - the streams are taken in the order of the runs given, their cases and streams; each
//!   direct stream pairs with at most one `ros2` stream, the first matching candidate in
//!   this order of preference: equal case parameters (other than the transport's own), same
//!   run, same repetition;
//! - cases that failed or were skipped have no document and no streams; a stream without
//!   figures (every message lost) still pairs and shows `-` where a figure is missing.
//!
//! Every pair says what its difference contains besides ROS 2's layers: a change of the DDS
//! version (ROS 2's `config.ros2.middleware_version` against the direct transport's:
//! the `fastdds_version` label when present, else [`FASTDDS_DEFAULT_VERSION`]), Fast DDS's
//! shared memory set otherwise (`fastdds_shm`), and case parameters that differ.
//!
//! Contract: pure functions of the runs given; never prints.

use rtlab_core::run::{CaseRecord, Run};
use rtlab_core::schema::Stream;
use rtlab_core::stats::Summary;

/// The transport of ROS 2 itself.
pub const ROS2: &str = "ros2";

/// The metrics compared: a message's path through the middleware.
pub const METRICS: [&str; 2] = ["one_way_latency", "rtt"];

/// Labels left out when two streams are matched: the transport's own and measured figures.
pub const NOT_MATCHED: [&str; 7] = [
    "transport",
    "rmw",
    "ros_distro",
    "fastdds_version",
    "fastdds_shm",
    "published",
    "case_p50_spread_ns",
];

/// Case parameters that belong to one transport (not compared between the two cases).
const TRANSPORT_PARAMS: [&str; 5] =
    ["transport", "rmw", "ros2_prefix", "fastdds_shm", "fastdds_version"];

/// The Fast DDS of the `fastdds` transport when its streams do not say (no `fastdds_version`
/// label): Debian 12's libfastrtps 2.9.1, as the transport's notes say ("Fast DDS 2.9").
pub const FASTDDS_DEFAULT_VERSION: &str = "2.9";

/// The Cyclone DDS of the `cyclonedds` transport: the one cyclors 0.4.0 builds from its
/// bundled sources (their CMakeLists.txt: `project(CycloneDDS VERSION 11.0.1)`).
pub const CYCLONEDDS_VERSION: &str = "11.0.1";

/// The transport that drives the DDS an RMW runs on, directly; None for an RMW on no DDS
/// rtlab drives (rmw_zenoh_cpp, rmw_connextdds, ...).
pub fn direct_transport(rmw: &str) -> Option<&'static str> {
    match rmw {
        "rmw_fastrtps_cpp" | "rmw_fastrtps_dynamic_cpp" => Some("fastdds"),
        "rmw_cyclonedds_cpp" => Some("cyclonedds"),
        _ => None,
    }
}

/// The DDS's name as its versions are spoken of.
fn dds_name(transport: &str) -> &'static str {
    match transport {
        "fastdds" => "Fast DDS",
        _ => "Cyclone DDS",
    }
}

/// One side of a pair: a stream of a case of a run.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    pub run_id: i64,
    pub case: &'a CaseRecord,
    pub stream: &'a Stream,
}

impl<'a> Side<'a> {
    /// The stream's `transport` label.
    pub fn transport(&self) -> &'a str {
        self.stream.labels.get("transport").map(String::as_str).unwrap_or("")
    }

    /// `run R case I` (I: the case's index in its run).
    pub fn place(&self) -> String {
        format!("run {} case {}", self.run_id, self.case.index)
    }

    /// `ros2 rmw_fastrtps_cpp` or the direct transport's name.
    pub fn name(&self) -> String {
        match self.stream.labels.get("rmw") {
            Some(rmw) if self.transport() == ROS2 => format!("{ROS2} {rmw}"),
            _ => self.transport().to_string(),
        }
    }

    fn config_ros2(&self, key: &str) -> Option<&'a str> {
        self.case.document.as_ref()?.config.get("ros2")?.get(key)?.as_str()
    }
}

/// A `ros2` stream and the stream of the same case through the DDS underneath its RMW.
#[derive(Clone, Debug)]
pub struct Ros2Pair<'a> {
    /// The case both measured, in words (load/profile, mode, size, rate, QoS, subscriber).
    pub label: String,
    /// The RMW of the `ros2` side.
    pub rmw: String,
    pub ros2: Side<'a>,
    pub direct: Side<'a>,
    /// What the difference contains besides ROS 2's layers (versions, configuration).
    pub notes: Vec<String>,
}

impl Ros2Pair<'_> {
    /// ros2 - direct of one figure (None when either side lacks it).
    pub fn diff(&self, f: fn(&Summary) -> Option<i64>) -> Option<i64> {
        Some(f(&self.ros2.stream.stats)? - f(&self.direct.stream.stats)?)
    }
}

/// A `ros2` stream whose RMW runs on a DDS rtlab drives, with no stream of that transport
/// for the same case among the runs given.
#[derive(Clone, Debug)]
pub struct Unpaired<'a> {
    pub ros2: Side<'a>,
    pub label: String,
    pub rmw: String,
    /// The transport that would have been its counterpart.
    pub wanted: &'static str,
}

impl Unpaired<'_> {
    /// `not paired: ros2 RMW (run R case I), CASE: no TRANSPORT stream of the same case ...`
    pub fn line(&self) -> String {
        format!(
            "not paired: ros2 {} ({}), {}: no {} stream of the same case in the runs given",
            self.rmw,
            self.ros2.place(),
            self.label,
            self.wanted
        )
    }
}

/// The ROS 2 layer of the runs given.
#[derive(Clone, Debug, Default)]
pub struct Ros2Layer<'a> {
    pub pairs: Vec<Ros2Pair<'a>>,
    pub unpaired: Vec<Unpaired<'a>>,
}

impl<'a> Ros2Layer<'a> {
    /// The pairs and unpaired streams whose `ros2` side is in run `run_id`.
    pub fn of_run(&self, run_id: i64) -> Ros2Layer<'a> {
        Ros2Layer {
            pairs: self.pairs.iter().filter(|p| p.ros2.run_id == run_id).cloned().collect(),
            unpaired: self.unpaired.iter().filter(|u| u.ros2.run_id == run_id).cloned().collect(),
        }
    }

    /// When nothing paired but `ros2` streams wait for a counterpart: one line saying so.
    pub fn nothing_paired(&self) -> Option<String> {
        if !self.pairs.is_empty() {
            return None;
        }
        let first = self.unpaired.first()?;
        let mut rmws: Vec<&str> = Vec::new();
        let mut wanted: Vec<&str> = Vec::new();
        for u in &self.unpaired {
            if !rmws.contains(&u.rmw.as_str()) {
                rmws.push(&u.rmw);
            }
            if !wanted.contains(&u.wanted) {
                wanted.push(u.wanted);
            }
        }
        let wanted = wanted.join(" or ");
        Some(format!(
            "{} ros2 stream(s) over {} and no {wanted} stream of the same case in the runs given: nothing to compare (measure the same case through {wanted}, in this run or another, and give the runs to `rtlab report`; the first: {}, {})",
            self.unpaired.len(),
            rmws.join(", "),
            first.ros2.place(),
            first.label
        ))
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.unpaired.is_empty()
    }
}

/// The definition stated beside the rows (terminal and HTML).
pub const DEFINITION: &str = "ros2 - the DDS underneath, figure by figure: what rcl, the RMW and the type support add on top of the DDS they run on. ros2 measures S2's \"publish call -> the subscriber's callback\" (there and back for rtt) without a client library's executor (send stamp right before rcl_publish, receive stamp right after rcl_take returns, the subscriber woken by an rcl wait set); the DDS transport (fastdds under rmw_fastrtps_*, cyclonedds under rmw_cyclonedds_cpp) stamps the same points around the DDS's own write and take, with the same bytes on the same ROS 2 topic and type. A pair is one case (every label equal but the transport's own; same load and profile) measured twice, one after the other: a difference of two percentiles is not a percentile of per-message differences, and the machine's noise between the two measurements is in it.";

/// The streams the layer looks at: pubsub message-path streams of measured cases.
fn candidates(runs: &[Run]) -> Vec<Side<'_>> {
    let mut out = Vec::new();
    for run in runs {
        for case in &run.cases {
            let Some(d) = &case.document else { continue };
            if case.probe != "pubsub" {
                continue;
            }
            for stream in &d.streams {
                if METRICS.contains(&stream.metric.as_str()) {
                    out.push(Side { run_id: run.id, case, stream });
                }
            }
        }
    }
    out
}

/// The RMW of a `ros2` stream: its `rmw` label, else the document's `config.ros2.rmw`.
fn rmw_of(s: &Side<'_>) -> Option<String> {
    s.stream.labels.get("rmw").cloned().or_else(|| s.config_ros2("rmw").map(String::from))
}

/// Whether two streams measured the same case (the pairing rule in the module docs).
pub fn same_case(a: &Side<'_>, b: &Side<'_>) -> bool {
    fn keep<'a>(s: &Side<'a>) -> Vec<(&'a String, &'a String)> {
        s.stream.labels.iter().filter(|(k, _)| !NOT_MATCHED.contains(&k.as_str())).collect()
    }
    a.case.probe == b.case.probe
        && a.stream.metric == b.stream.metric
        && a.case.load == b.case.load
        && a.case.profile == b.case.profile
        && keep(a) == keep(b)
}

/// The case parameters other than the transport's own.
fn shared_params(c: &CaseRecord) -> Vec<(&String, &String)> {
    c.params.iter().filter(|(k, _)| !TRANSPORT_PARAMS.contains(&k.as_str())).collect()
}

/// The case in words, from the `ros2` side's case and labels.
fn label_of(s: &Side<'_>) -> String {
    let l = &s.stream.labels;
    let get = |k: &str| l.get(k).map(String::as_str).unwrap_or("?");
    let mut parts = vec![format!("{}/{}/{}", s.case.probe, s.case.load, s.case.profile)];
    parts.push(format!("{} {} B {}", get("mode"), get("payload_bytes"), get("rate")));
    parts.push(format!("{} {} {}", get("reliability"), get("history"), get("durability")));
    parts.push(format!("{} {}", get("wait"), get("placement")));
    parts.push(format!("subscriber {} of {}", get("subscriber"), get("subscribers")));
    const SHOWN: [&str; 11] = [
        "mode",
        "payload_bytes",
        "rate",
        "reliability",
        "history",
        "durability",
        "wait",
        "placement",
        "subscriber",
        "subscribers",
        "period_ns",
    ];
    let other: Vec<String> = l
        .iter()
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()) && !NOT_MATCHED.contains(&k.as_str()))
        .filter(|(k, v)| !(k.as_str() == "schedule" && v.as_str() == "periodic"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !other.is_empty() {
        parts.push(other.join(" "));
    }
    parts.push(s.stream.metric.clone());
    parts.join(" · ")
}

/// Two versions are the same when the shorter one's components begin the longer one
/// (`2.9` and `2.9.1`).
pub fn same_version(a: &str, b: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    let n = a.len().min(b.len());
    n > 0 && a[..n] == b[..n]
}

/// What the difference of a pair contains besides ROS 2's layers.
fn notes_of(ros2: &Side<'_>, direct: &Side<'_>) -> Vec<String> {
    let mut notes = Vec::new();
    let transport = direct.transport();
    let dds = dds_name(transport);
    let (direct_version, said) = match (transport, direct.stream.labels.get("fastdds_version")) {
        ("fastdds", Some(v)) => (v.as_str(), "its fastdds_version label"),
        ("fastdds", None) => {
            (FASTDDS_DEFAULT_VERSION, "Debian's libfastrtps, the fastdds transport's default")
        }
        _ => (CYCLONEDDS_VERSION, "the one cyclors 0.4 builds"),
    };
    match ros2.config_ros2("middleware_version") {
        Some(v) if same_version(v, direct_version) => notes.push(format!(
            "{dds} {v} under ROS 2 and {direct_version} driven directly ({said}): the same version"
        )),
        Some(v) => notes.push(format!(
            "{dds} {v} under ROS 2, {direct_version} driven directly ({said}): the difference includes the change of {dds} version"
        )),
        None => notes.push(format!(
            "the {dds} version under ROS 2 is not recorded ({direct_version} driven directly, {said}): the difference may include a change of {dds} version"
        )),
    }
    if let Some(shm) = direct.stream.labels.get("fastdds_shm") {
        notes.push(format!(
            "fastdds ran with fastdds_shm={shm} (its shared memory off or with another segment), ROS 2's Fast DDS as its RMW configures it"
        ));
    }
    if shared_params(ros2.case) != shared_params(direct.case) {
        let text = |c: &CaseRecord| {
            let p = shared_params(c);
            if p.is_empty() {
                "none".to_string()
            } else {
                p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
            }
        };
        notes.push(format!(
            "the cases' parameters differ: ros2 {}, {transport} {}",
            text(ros2.case),
            text(direct.case)
        ));
    }
    if ros2.run_id != direct.run_id {
        notes.push(format!("measured in different runs ({} and {})", ros2.run_id, direct.run_id));
    }
    notes
}

/// The ROS 2 layer of `runs` (the runs given to a report, in their order).
pub fn ros2_layer(runs: &[Run]) -> Ros2Layer<'_> {
    let all = candidates(runs);
    let mut used = vec![false; all.len()];
    let mut layer = Ros2Layer::default();
    for r in all.iter().filter(|s| s.transport() == ROS2) {
        let Some(rmw) = rmw_of(r) else { continue };
        let Some(wanted) = direct_transport(&rmw) else { continue };
        // preference: equal parameters, same run, same repetition; then the first in order
        let score = |d: &Side<'_>| {
            (
                shared_params(d.case) == shared_params(r.case),
                d.run_id == r.run_id,
                d.case.repetition == r.case.repetition,
            )
        };
        let mut best: Option<(usize, (bool, bool, bool))> = None;
        for (i, d) in all.iter().enumerate() {
            if used[i] || d.transport() != wanted || !same_case(r, d) {
                continue;
            }
            let s = score(d);
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((i, s));
            }
        }
        match best {
            Some((i, _)) => {
                used[i] = true;
                let d = all[i];
                layer.pairs.push(Ros2Pair {
                    label: label_of(r),
                    rmw,
                    ros2: *r,
                    direct: d,
                    notes: notes_of(r, &d),
                });
            }
            None => layer.unpaired.push(Unpaired { ros2: *r, label: label_of(r), rmw, wanted }),
        }
    }
    layer
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod render_tests;
