//! `rtlab monitor` through the binary: a real Prometheus (Debian's, started by the test on
//! 127.0.0.1) scrapes its /metrics and answers queries over its HTTP API: the canary's
//! histogram, and a miss counter that rises after a stall the test injects (a SCHED_FIFO hog
//! on the canary's CPU), the stored worst case naming the hog; an rclpy publisher's verdicts
//! (100 Hz ok, 50 Hz late, stopped stale, restarted ok); SIGHUP with a broken file (the old one
//! kept, one line) and a good one; SIGTERM (exit 0, nothing left to restore); the token; bad
//! input as one line.
//!
//! Contract: counts, states and names only, never a latency bound (the injected stall is
//! 300 ms against a 5 ms deadline). Root tests say why they skip otherwise.

mod common;
#[path = "support/ros2_node.rs"]
mod ros2_node;

use common::*;
use ros2_node::Node;
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` from 127.0.0.1:`port`: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((code, body))
}

/// Wait (bounded) for `f` to give a value.
fn wait_for<T>(what: &str, within: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < end, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A running monitor, stopped (SIGTERM) on drop when the test did not stop it.
struct Mon {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Mon {
    fn start(config_body: &str) -> Mon {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cfg = dir.path().join("monitor.toml");
        let state = dir.path().join("state");
        std::fs::write(
            &cfg,
            format!(
                "listen = '127.0.0.1:{port}'\nstate = '{}'\ndb = '{}'\n{config_body}",
                state.display(),
                dir.path().join("r.db").display()
            ),
        )
        .unwrap();
        let mut child = rtlab()
            .args(["monitor", "--config", cfg.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(first.starts_with("rtlab monitor: "), "{first}");
        Mon { child: Some(child), port, dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("monitor.toml")
    }

    fn metrics(&self) -> String {
        let (code, body) = get(self.port, "/metrics").expect("/metrics answers");
        assert_eq!(code, 200, "{body}");
        body
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        assert!(Command::new("kill").args([sig, &pid]).status().unwrap().success());
    }

    /// SIGTERM; (exit code, stderr). Its directory stays until it is dropped.
    fn stop(&mut self) -> (Option<i32>, String) {
        self.signal("-TERM");
        let mut child = self.child.take().unwrap();
        let end = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < end, "the monitor did not stop within 20 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (child.wait().unwrap().code(), err)
    }
}

impl Drop for Mon {
    /// A test that failed: SIGTERM (the monitor puts tracefs back), SIGKILL 10 s later.
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &c.id().to_string()]).status();
            let end = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A metric's sample line value (the first line starting with `prefix`).
fn value(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find(|l| l.starts_with(prefix))?.rsplit(' ').next()?.parse().ok()
}

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: rtlab\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian: apt-get install prometheus; scripts/setup.sh does)");
        Prometheus { child, port, _dir: dir }
    }

    /// An instant query's first value.
    fn query(&self, q: &str) -> Option<f64> {
        let (code, body) = get(self.port, &format!("/api/v1/query?query={q}"))?;
        if code != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A SCHED_FIFO 90 thread named `rtlab-hog` on `cpu`: busy for `busy`, then asleep for
/// `linger` (alive, so the interval's evidence still sees it), then gone.
fn hog(cpu: usize, busy: Duration, linger: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: plain system calls on the calling thread, with valid arguments
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set), 0);
            let p = libc::sched_param { sched_priority: 90 };
            assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &p), 0);
            libc::prctl(libc::PR_SET_NAME, c"rtlab-hog".as_ptr());
        }
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed() < busy {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        std::thread::sleep(linger);
    })
}

fn skip_unless(root: bool, tool: &str) -> bool {
    if root && !is_root() {
        rtlab_sys::test_skip::skipped(format_args!("needs root (SCHED_FIFO canary)"));
        return true;
    }
    if !tool.is_empty() && Command::new(tool).arg("--version").output().is_err() {
        rtlab_sys::test_skip::skipped(format_args!(
            "{tool} not installed (scripts/setup.sh installs it)"
        ));
        return true;
    }
    false
}

#[test]
fn prometheus_scrapes_the_canary_and_its_misses_and_the_worst_case_names_the_hog() {
    if skip_unless(true, "prometheus") {
        return;
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let cpu = cpus - 1;
    let mut mon = Mon::start(&format!(
        "interval = '1s'\ntrace_on_spike = '20ms'\n[canary]\nrate = '200hz'\ncpu = {cpu}\n"
    ));
    let prom = Prometheus::start(mon.port);
    let count =
        wait_for("the canary's histogram through Prometheus", Duration::from_secs(60), || {
            prom.query("rtlab_canary_latency_seconds_count").filter(|&c| c > 0.0)
        });
    assert!(count > 0.0);
    let buckets = wait_for("the histogram's buckets", Duration::from_secs(10), || {
        prom.query("count(rtlab_canary_latency_seconds_bucket)")
    });
    assert_eq!(buckets, 15.0, "14 bounds and +Inf");
    let taken = wait_for("the canary CPU's taken time", Duration::from_secs(10), || {
        prom.query("count(rtlab_cpu_taken_seconds_total)")
    });
    assert_eq!(taken, 3.0, "irq, softirq and steal of the canary's CPU");
    let before = wait_for("the miss counter", Duration::from_secs(10), || {
        prom.query("rtlab_canary_misses_total")
    });
    // a 300 ms stall of the canary's CPU against its 5 ms deadline
    hog(cpu, Duration::from_millis(300), Duration::from_secs(4)).join().unwrap();
    let after = wait_for("the miss counter rising", Duration::from_secs(30), || {
        prom.query("rtlab_canary_misses_total").filter(|&m| m > before)
    });
    assert!(after > before);
    // the stall's interval is the day's highest: kept, with the hog named on that CPU
    let worst = mon.dir.path().join("state/worst.jsonl");
    let hit = wait_for("the worst case naming the hog", Duration::from_secs(15), || {
        let text = std::fs::read_to_string(&worst).ok()?;
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            // the interval the canary woke late in (the hog may have begun in the one before)
            .find(|r| r["threads"][0]["comm"] == "rtlab-hog" && r["misses"].as_u64() > Some(0))
    });
    assert_eq!(hit["threads"][0]["policy"], "SCHED_FIFO", "{hit}");
    assert_eq!(hit["threads"][0]["could_preempt"], true, "FIFO 90 over the canary's 80: {hit}");
    assert_eq!(hit["threads"][0]["cpu"], cpu, "{hit}");
    assert_eq!(hit["why"], "the day's highest", "{hit}");
    // the kernel tracer armed at 20 ms: the spike traced and explained, naming the hog
    let traced = wait_for("the traced spike", Duration::from_secs(15), || {
        let text = std::fs::read_to_string(&worst).ok()?;
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|r| r["why"] == "a traced spike")
    });
    let spike = &traced["spike"];
    assert!(spike["value_ns"].as_i64().unwrap() > 20_000_000, "{spike}");
    // explained from the kernel's trace, saved beside (what it names depends on the events
    // the buffer kept: the hog is named above, from the threads' run times)
    assert!(!spike["attribution"].as_array().unwrap().is_empty(), "{spike}");
    let file = spike["trace_file"].as_str().unwrap();
    assert!(std::path::Path::new(file).exists(), "{spike}");
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("worst case (the day's highest)") && err.contains("rtlab-hog"), "{err}");
    assert!(err.trim_end().ends_with("rtlab monitor: stopped"), "{err}");
    let o = run(&["tune", "show"]);
    assert!(stdout(&o).contains("holds no pending change"), "{}", stdout(&o));
}

#[test]
fn sighup_keeps_the_running_file_when_the_new_one_is_broken() {
    let mut mon = Mon::start(
        "interval = '200ms'\n[canary]\nrate = '100hz'\npolicy = 'other'\npriority = 0\n",
    );
    wait_for("an interval", Duration::from_secs(10), || {
        value(&mon.metrics(), "rtlab_monitor_intervals_total").filter(|&n| n > 0.0)
    });
    let good = std::fs::read_to_string(mon.config()).unwrap();
    std::fs::write(mon.config(), good.replace("rate = '100hz'", "rate = 'fast'")).unwrap();
    mon.signal("-HUP");
    wait_for("the refused reload", Duration::from_secs(10), || {
        value(&mon.metrics(), "rtlab_monitor_reloads_total{result=\"refused\"}")
            .filter(|&n| n == 1.0)
    });
    assert!(mon.metrics().contains("rtlab_canary_latency_seconds_count"), "the canary goes on");
    std::fs::write(mon.config(), good.replace("rate = '100hz'", "rate = '50hz'")).unwrap();
    mon.signal("-HUP");
    wait_for("the reload", Duration::from_secs(10), || {
        value(&mon.metrics(), "rtlab_monitor_reloads_total{result=\"ok\"}").filter(|&n| n == 1.0)
    });
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    let refused: Vec<&str> = err.lines().filter(|l| l.contains("reload refused")).collect();
    assert_eq!(refused.len(), 1, "{err}");
    assert!(refused[0].contains("monitor.toml:"), "the file and its line: {err}");
    assert!(err.contains("rtlab monitor: reloaded"), "{err}");
}

#[test]
fn a_token_guards_metrics_and_paths_and_methods_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = dir.path().join("m.toml");
    std::fs::write(
        &cfg,
        format!("listen = '0.0.0.0:{port}'\ntoken = 's3cret'\nstate = '{0}'\ndb = '{0}/r.db'\ninterval = '1s'\n[canary]\npolicy = 'other'\npriority = 0\n", dir.path().display()),
    )
    .unwrap();
    let mut child = rtlab()
        .args(["monitor", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let (code, _) = get(port, "/metrics").unwrap();
    assert_eq!(code, 401, "no token");
    let (code, body) = get(port, "/metrics?token=s3cret").unwrap();
    assert_eq!(code, 200);
    assert!(body.ends_with("# EOF\n"), "{body}");
    let (code, _) = get(port, "/other?token=s3cret").unwrap();
    assert_eq!(code, 404);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str, body: &str| {
        let f = dir.path().join(name);
        std::fs::write(&f, body).unwrap();
        f.to_string_lossy().into_owned()
    };
    assert_error(
        &["monitor", "--config", "/nonexistent/m.toml"],
        &["--config", "/nonexistent/m.toml"],
    );
    let f = p("a.toml", "listen = '0.0.0.0:9464'\ndb = '/nonexistent/r.db'");
    assert_error(&["monitor", "--config", &f], &["listen", "not a loopback address"]);
    let f = p("b.toml", "[[topic]]\nname = '/scan'\ntolerance = 'much'\n");
    assert_error(&["monitor", "--config", &f, "--check"], &["b.toml:3", "invalid type"]);
    let f = p("c.toml", "[[topic]]\nname = '/scan'\nrate = '10hz'\n");
    let o = run(&["monitor", "--config", &f, "--check"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), "ok: 1 topics, canary 100hz, /metrics on 127.0.0.1:9464\n");
    // a port taken: one line, nothing left running
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let f = p(
        "d.toml",
        &format!(
            "listen = '127.0.0.1:{port}'\nstate = '{0}'\ndb = '{0}/r.db'\n[canary]\npolicy = 'other'\npriority = 0\n",
            dir.path().display()
        ),
    );
    assert_error(&["monitor", "--config", &f], &["listen 127.0.0.1:", "in use"]);
}

/// The pipeline's source publishing /scan at `rate` Hz `count` times (it starts once a reader
/// is matched: the monitor's); stopped as Ctrl-C would when dropped.
fn source(domain: &str, rate: u32, count: u32) -> Node {
    source_with(domain, rate, count, &[])
}

fn source_with(domain: &str, rate: u32, count: u32, more: &[&str]) -> Node {
    let (rate, count) = (rate.to_string(), count.to_string());
    let mut args = vec!["source", "--rate", &rate, "--count", &count];
    args.extend_from_slice(more);
    Node::pipeline(None, domain, &args)
}

fn state_of(metrics: &str) -> Option<String> {
    metrics
        .lines()
        .find(|l| l.starts_with("rtlab_topic_state{topic=\"/scan\"") && l.ends_with(" 1"))
        .and_then(|l| l.split("rtlab_topic_state=\"").nth(1))
        .map(|s| s.split('"').next().unwrap_or_default().to_string())
}

#[test]
fn an_rclpy_topic_is_ok_late_stale_and_ok_again() {
    if ros2_node::skip() {
        return;
    }
    let domain = (60 + std::process::id() % 40).to_string();
    let mut mon = Mon::start(&format!(
        "interval = '1s'\ndomain = {domain}\n[canary]\nenabled = false\n[[topic]]\nname = '/scan'\nrate = '100hz'\ntolerance = 0.2\nstale = '500ms'\n"
    ));
    let wait_state = |want: &str, within: u64| {
        wait_for(&format!("/scan {want}"), Duration::from_secs(within), || {
            state_of(&mon.metrics()).filter(|s| s == want)
        })
    };
    wait_state("lost", 10);
    let s = source(&domain, 100, 1500);
    wait_state("ok", 40);
    drop(s);
    wait_state("stale", 10);
    let s = source(&domain, 50, 1000);
    wait_state("late", 40);
    drop(s);
    let s = source(&domain, 100, 1500);
    wait_state("ok", 40);
    drop(s);
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    for v in ["topic /scan: lost", "topic /scan: ok", "topic /scan: stale", "topic /scan: late"] {
        assert!(err.contains(v), "'{v}' not in {err}");
    }
}

#[test]
fn the_intervals_are_stored_as_a_run_the_store_reports() {
    let mut mon = Mon::start(
        "interval = '200ms'\nstore_every = '1s'\nkeep = '1s'\n[canary]\nrate = '100hz'\npolicy = 'other'\npriority = 0\n",
    );
    // 3.2 s: periods stored each second and at the stop; those started over a second before
    // a store are removed by it
    wait_for("sixteen intervals", Duration::from_secs(20), || {
        value(&mon.metrics(), "rtlab_monitor_intervals_total").filter(|&n| n >= 16.0)
    });
    let db = mon.dir.path().join("r.db");
    let db = db.to_str().unwrap().to_string();
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    let stored: Vec<&str> =
        err.lines().filter(|l| l.contains("as monitor/intervals of run")).collect();
    assert!(stored.len() >= 2, "a period at 1 s and the last at the stop: {err}");
    let o = run(&["runs", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("monitor"), "{}", stdout(&o));
    let o = run(&["export", "latest", "--db", &db, "--format", "json", "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let text = v.to_string();
    assert!(text.contains("monitor/intervals") && text.contains("interval_max_latency"), "{text}");
    assert!(text.contains("\"worst_cases\""), "the period's worst cases: {text}");
    let o = run(&["report", "--db", &db]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("monitor/intervals"), "{}", stdout(&o));
}

#[test]
fn a_topics_deadline_qos_stands_in_for_its_rate() {
    if ros2_node::skip() {
        return;
    }
    let domain = (20 + std::process::id() % 40).to_string();
    let mut mon = Mon::start(&format!(
        "interval = '1s'\ndomain = {domain}\n[canary]\nenabled = false\n[[topic]]\nname = '/scan'\ntolerance = 0.2\n"
    ));
    // a writer offering a 10 ms deadline, publishing at 50 Hz: late against its own QoS
    let s = source_with(&domain, 50, 1000, &["--deadline-ms", "10"]);
    let expected = wait_for("the writers' deadline", Duration::from_secs(40), || {
        value(&mon.metrics(), "rtlab_topic_expected_rate_hertz{topic=\"/scan\"}")
    });
    assert_eq!(expected, 100.0, "one message a 10 ms deadline");
    wait_for("/scan late", Duration::from_secs(20), || {
        state_of(&mon.metrics()).filter(|s| s == "late")
    });
    drop(s);
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("(its Deadline QoS)"), "{err}");
}

#[test]
fn a_chain_of_a_running_pipeline_is_followed_through_uprobes() {
    if ros2_node::skip() {
        return;
    }
    let domain = (100 + std::process::id() % 40).to_string();
    let node = |args: &[&str]| Node::pipeline(None, &domain, args).ready(args[0]);
    let _nodes = [
        node(&["sink", "--input", "/filtered", "--count", "100000", "--seconds", "60"]),
        node(&["relay", "--input", "/scan", "--output", "/filtered", "--seconds", "60"]),
        node(&["source", "--rate", "100", "--count", "99991"]),
    ];
    let mut mon = Mon::start(
        "interval = '1s'\n[canary]\nenabled = false\n[[chain]]\ntopics = ['/scan', '/filtered']\nprocesses = ['relay --input /scan', 'sink --input /filtered', '--count 99991']\ndeadline = '1s'\n",
    );
    let chain = "{chain=\"/scan,/filtered\"}";
    let n = wait_for("the chain's messages", Duration::from_secs(40), || {
        value(&mon.metrics(), &format!("rtlab_chain_messages_total{chain}")).filter(|&n| n >= 100.0)
    });
    let m = mon.metrics();
    assert!(value(&m, &format!("rtlab_chain_latency_seconds_count{chain}")) >= Some(n), "{m}");
    assert!(value(&m, &format!("rtlab_chain_misses_total{chain}")).is_some(), "{m}");
    // each interval's maximum, one interval behind
    for _ in 0..3 {
        let m = mon.metrics();
        assert!(value(&m, &format!("rtlab_chain_interval_max_seconds{chain}")) > Some(0.0), "{m}");
        std::thread::sleep(Duration::from_millis(700));
    }
    let (code, err) = mon.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("chains: probing 3 processes through uprobes"), "{err}");
    assert_eq!(uprobes_left(), Vec::<String>::new(), "uprobes left behind");
    // the period stored at the stop holds the chain's interval maxima as a stream
    let db = mon.dir.path().join("r.db");
    let o = run(&["export", "latest", "--db", db.to_str().unwrap(), "--format", "json", "-o", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("chain /scan -> /filtered") && text.contains("interval_max_chain_latency"),
        "{text}"
    );
}
