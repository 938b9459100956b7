//! Inside the guest: its two NICs, the far one in a namespace, and the qdiscs, VLAN egress
//! maps and launch times the NIC tests of `rt_kernel.rs` set and read back.

use super::*;

/// A network namespace holding `nic` with `addr`; deleting it gives the NIC back.
pub(super) struct Netns(pub(super) &'static str, pub(super) String);

impl Netns {
    pub(super) fn with(name: &'static str, nic: &str, addr: &str) -> Netns {
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
        sh(&["ip", "netns", "add", name]);
        sh(&["ip", "link", "set", nic, "netns", name]);
        sh(&["ip", "-n", name, "link", "set", "lo", "up"]);
        sh(&["ip", "-n", name, "addr", "add", addr, "dev", nic]);
        sh(&["ip", "-n", name, "link", "set", nic, "up"]);
        Netns(name, nic.to_string())
    }
}

impl Netns {
    /// Ends what runs in namespace `name` (SIGTERM, then SIGKILL after 10 s), then deletes it.
    pub(super) fn remove(name: &str) {
        let pids = || read_cmd(&["ip", "netns", "pids", name]);
        for sig in ["-TERM", "-KILL"] {
            for pid in pids().split_whitespace() {
                let _ = Command::new("kill").args([sig, pid]).stderr(Stdio::null()).status();
            }
            let end = Instant::now() + Duration::from_secs(10);
            while !pids().trim().is_empty() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = Command::new("ip").args(["netns", "del", name]).stderr(Stdio::null()).status();
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        Netns::remove(self.0);
        // the physical NIC comes back to the root namespace once the namespace is gone
        let end = Instant::now() + Duration::from_secs(30);
        while !Path::new(&format!("/sys/class/net/{}", self.1)).exists() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The link between the guest's two NICs: the far one in namespace `rtvm-far` at 10.77.0.2,
/// the near one here at 10.77.0.1, both up.
pub(super) struct NicLink {
    pub(super) near: String,
    pub(super) far: String,
    pub(super) ns: Netns,
    pub(super) _nics: std::sync::MutexGuard<'static, ()>,
}

pub(super) fn nic_link() -> NicLink {
    let (n, _nics) = nics();
    let (near, far) = (n[0].clone(), n[1].clone());
    let ns = Netns::with("rtvm-far", &far, "10.77.0.2/24");
    sh(&["ip", "addr", "replace", "10.77.0.1/24", "dev", &near]);
    sh(&["ip", "link", "set", &near, "up"]);
    std::thread::sleep(Duration::from_secs(2));
    NicLink { near, far, ns, _nics }
}

/// A process a test started and stops itself; killed if the test ends first (a failed
/// assert), so that nothing it holds (a namespace, a NIC) outlives the test.
pub(super) struct Proc(pub(super) Option<Child>);

impl Proc {
    pub(super) fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A reflector (`udp reflect`) that says it listens, stopped with `stop`.
pub(super) fn reflector(extra: &[&str], netns: &str, bind: &str, json: &Path) -> Proc {
    let mut c = Proc(Some(
        rtlab()
            .args(["udp", "reflect"])
            .args(extra)
            .args(["--netns", netns, "--bind", bind, "-q", "--json"])
            .arg(json)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let mut l = String::new();
    BufReader::new(c.child().stdout.as_mut().unwrap()).read_line(&mut l).unwrap();
    assert!(l.contains("listening on"), "{l}");
    c
}

/// Ctrl-C to a reflector: it writes its result document and ends with 0.
pub(super) fn stop(mut p: Proc) {
    let c = p.0.take().unwrap();
    sh(&["kill", "-INT", &c.id().to_string()]);
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// `udp ping` COUNT datagrams (every 5 ms unless `extra` gives a --period); asserts every one
/// is accounted for; returns its document.
pub(super) fn ping_all_accounted(extra: &[&str], to: &str, count: u64, dir: &Path) -> Value {
    let pjson = dir.join("ping.json");
    let period: &[&str] = if extra.contains(&"--period") { &[] } else { &["--period", "5ms"] };
    let o = rtlab()
        .args(["udp", "ping", "--to", to, "--count", &count.to_string()])
        .args(period)
        .args(extra)
        .args(["-q", "--json"])
        .arg(&pjson)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "udp ping: {}", stderr(&o));
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&pjson).unwrap()).unwrap();
    let s = &d["streams"][0];
    let st = &s["stats"];
    let sent: u64 = s["labels"]["sent"].as_str().unwrap().parse().unwrap();
    let (got, lost) = (st["count"].as_u64().unwrap(), st["lost"].as_u64().unwrap());
    assert_eq!(sent + st["overruns"].as_u64().unwrap(), count, "{st}");
    assert_eq!(got + lost, sent, "every datagram sent is answered or lost: {st}");
    for k in ["duplicates", "malformed"] {
        assert_eq!(st[k], 0, "{k}: {st}");
    }
    d
}

/// Packets of a `tc -s class show` class line's next "Sent N bytes M pkt".
pub(super) fn class_packets(show: &str, class: &str) -> u64 {
    let mut l = show.lines();
    while let Some(x) = l.next() {
        if x.starts_with(class) {
            let sent = l.next().unwrap_or("");
            let w: Vec<&str> = sent.split_whitespace().collect();
            return w.get(3).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{sent}"));
        }
    }
    panic!("no '{class}' in:\n{show}");
}

/// 1. (of the test above) The VM's NIC: mqprio refused, htb kept, its VLAN's egress map.
pub(super) fn vlan_egress_map_on_the_vm_nic(
    d: &std::path::Path,
    j: &std::path::Path,
    rjson: &std::path::Path,
) {
    // 1. the VM's NIC has one queue: mqprio is refused and htb kept; its VLAN gets the egress
    //    map (SKB priority n -> PCP n), seen on the wire at the far NIC
    let (n, _nics) = nics();
    let (near, far) = (n[0].clone(), n[1].clone());
    let vlan = format!("{near}.100");
    sh(&["ip", "link", "set", &near, "up"]);
    sh(&["ip", "link", "add", "link", &near, "name", &vlan, "type", "vlan", "id", "100"]);
    sh(&["ip", "addr", "add", "10.78.0.1/24", "dev", &vlan]);
    sh(&["ip", "link", "set", &vlan, "up"]);
    let ns = Netns::with("rtvm-vlan", &far, "10.77.1.2/24");
    let fvlan = format!("{far}.100");
    sh(&[
        "ip", "-n", ns.0, "link", "add", "link", &far, "name", &fvlan, "type", "vlan", "id", "100",
    ]);
    sh(&["ip", "-n", ns.0, "addr", "add", "10.78.0.2/24", "dev", &fvlan]);
    sh(&["ip", "-n", ns.0, "link", "set", &fvlan, "up"]);
    std::thread::sleep(Duration::from_secs(2));
    // the egress map in force, SKB priority -> PCP; an unmapped priority gets PCP 0, and the
    // kernel never forgets a mapping once made (restored, it reads "4:0")
    let map_of = |v: &str| -> std::collections::BTreeMap<u32, u32> {
        read(&format!("/proc/net/vlan/{v}"))
            .lines()
            .find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:").map(str::to_string))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|m| m.split_once(':'))
            .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()))
            .filter(|(_, pcp)| *pcp != 0)
            .collect()
    };
    let map_before = map_of(&vlan);
    let qdisc_before = sh(&["tc", "qdisc", "show", "dev", &near]);
    let h = Held::start(&["rt-affinities", "--nic", &near], j);
    assert!(h.out.contains("not available: mqprio") && h.out.contains("htb"), "{}", h.out);
    assert!(h.out.contains("done    VLAN egress map"), "{}", h.out);
    assert_eq!(map_of(&vlan), (1..8).map(|i| (i, i)).collect(), "egress map in force");
    assert!(sh(&["tc", "qdisc", "show", "dev", &near]).contains("qdisc htb 1: root"));
    // on the wire: the far NIC sees PCP 4 on the datagrams sent with SO_PRIORITY 4
    let mut cap = Command::new("timeout")
        .args([
            "60", "ip", "netns", "exec", ns.0, "tcpdump", "-i", &far, "-e", "-n", "-c", "5", "-l",
        ])
        .args(["vlan", "100", "and", "udp", "and", "dst", "port", "7778"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump (apt-get install tcpdump)");
    // the datagrams go out once tcpdump listens (it says so on stderr)
    let mut said = String::new();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    while !said.contains("listening on") {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            panic!("tcpdump ended before listening: {said}");
        }
        said.push_str(&l);
    }
    let r = reflector(&[], ns.0, "10.78.0.2:7778", rjson);
    ping_all_accounted(&["--so-priority", "4"], "10.78.0.2:7778", 50, d);
    stop(r);
    let seen = cap.wait_with_output().unwrap();
    let seen = stdout(&seen);
    assert_eq!(seen.lines().filter(|l| l.contains("vlan 100, p 4")).count(), 5, "{seen}");
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(map_of(&vlan), map_before, "egress map after restore");
    assert_eq!(sh(&["tc", "qdisc", "show", "dev", &near]), qdisc_before);
    sh(&["ip", "link", "del", &vlan]);
    drop(ns);
}

/// 2. (of the test above) mqprio for real on a veth with four queues.
pub(super) fn mqprio_on_a_veth_with_queues(
    d: &std::path::Path,
    j: &std::path::Path,
    rjson: &std::path::Path,
) {
    // 2. mqprio for real on a NIC with queues (a veth with 4 TX queues: QEMU's hub gives the
    //    virtio NIC one): SO_PRIORITY 4 -> traffic class 0, seen in the class counters
    sh(&["ip", "netns", "add", "rtvm-mq"]);
    sh(&["ip", "netns", "add", "rtvm-mq-far"]);
    let ip = |ns: &str, rest: &[&str]| {
        let mut a = vec!["ip", "-n", ns];
        a.extend_from_slice(rest);
        sh(&a);
    };
    ip(
        "rtvm-mq",
        &[
            "link",
            "add",
            "v0",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "v1",
            "netns",
            "rtvm-mq-far",
        ],
    );
    ip("rtvm-mq", &["addr", "add", "10.79.0.1/24", "dev", "v0"]);
    ip("rtvm-mq", &["link", "set", "v0", "up"]);
    ip("rtvm-mq-far", &["addr", "add", "10.79.0.2/24", "dev", "v1"]);
    ip("rtvm-mq-far", &["link", "set", "v1", "up"]);
    let tcs = |rest: &[&str]| {
        let mut a = vec!["ip", "netns", "exec", "rtvm-mq", "tc"];
        a.extend_from_slice(rest);
        sh(&a)
    };
    // and a VLAN on it: the egress map is set inside the namespace
    ip("rtvm-mq", &["link", "add", "link", "v0", "name", "v0.100", "type", "vlan", "id", "100"]);
    let ns_map = || {
        let info = sh(&["ip", "netns", "exec", "rtvm-mq", "cat", "/proc/net/vlan/v0.100"]);
        let m = info.lines().find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:"));
        m.unwrap_or("").split_whitespace().filter(|m| !m.ends_with(":0")).count()
    };
    assert_eq!(ns_map(), 0);
    let qdisc_before = tcs(&["qdisc", "show", "dev", "v0"]);
    let h = Held::start(&["rt-affinities", "--netns", "rtvm-mq", "--nic", "v0"], j);
    assert!(h.out.contains("mqprio (S1"), "{}", h.out);
    assert!(h.out.contains("done    VLAN egress map on v0's VLANs"), "{}", h.out);
    assert_eq!(ns_map(), 7, "1:1 ... 7:7 in force in the namespace");
    assert!(!h.out.contains("not available: mqprio"), "{}", h.out);
    let q = tcs(&["qdisc", "show", "dev", "v0"]);
    assert!(q.contains("qdisc mqprio") && q.contains("tc 3 map 2 2 1 1 0"), "{q}");
    let root = q
        .lines()
        .find(|l| l.starts_with("qdisc mqprio"))
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let tc0 = format!("class mqprio {root}1 parent {root}ffe0");
    let r = reflector(&[], "rtvm-mq-far", "10.79.0.2:7779", rjson);
    let before = class_packets(&tcs(&["-s", "class", "show", "dev", "v0"]), &tc0);
    let p =
        ping_all_accounted(&["--netns", "rtvm-mq", "--so-priority", "4"], "10.79.0.2:7779", 100, d);
    stop(r);
    let sent: u64 = p["streams"][0]["labels"]["sent"].as_str().unwrap().parse().unwrap();
    let after = class_packets(&tcs(&["-s", "class", "show", "dev", "v0"]), &tc0);
    assert!(
        after - before >= sent,
        "traffic class 0 sent {before} -> {after} packets, the ping {sent}"
    );
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(tcs(&["qdisc", "show", "dev", "v0"]), qdisc_before);
    assert_eq!(ns_map(), 0, "egress map after restore");
    let _ = Command::new("ip").args(["netns", "del", "rtvm-mq"]).status();
    let _ = Command::new("ip").args(["netns", "del", "rtvm-mq-far"]).status();
}

/// The stream named `name` of a result document.
pub(super) fn stream<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["streams"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| {
        panic!(
            "no stream {name} in {:?}",
            d["streams"].as_array().unwrap().iter().map(|s| &s["name"]).collect::<Vec<_>>()
        )
    })
}

/// 2. (of the test above) taprio needs a device with 2 tx queues: the window on a veth pair.
pub(super) fn taprio_window_on_a_veth_with_two_queues(fs: &str, j: &std::path::Path) {
    // 2. taprio needs a device with 2 tx queues: this VM's virtio NICs have one (QEMU's hub
    // gives no multiqueue), so the 802.1Qbv window is applied to a 2-queue veth pair
    let tap = "rtvm-tap";
    let _ = Command::new("ip").args(["netns", "del", tap]).stderr(Stdio::null()).status();
    sh(&["ip", "netns", "add", tap]);
    sh(&[
        "ip",
        "-n",
        tap,
        "link",
        "add",
        "tq0",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        "tq1",
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);
    sh(&["ip", "-n", tap, "link", "set", "tq0", "up"]);
    sh(&["ip", "-n", tap, "link", "set", "tq1", "up"]);
    let before = sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]);
    let h = Held::start(&["window", "--file", fs, "--nic", "tq0", "--netns", tap], j);
    let on = sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]);
    assert!(on.contains("qdisc taprio 100: root") && on.contains("250000"), "{on}\n{}", h.out);
    let out = h.interrupt();
    assert!(out.contains("restored"), "{out}");
    assert_eq!(sh(&["tc", "-n", tap, "qdisc", "show", "dev", "tq0"]), before, "taprio removed");
    sh(&["ip", "netns", "del", tap]);
}
