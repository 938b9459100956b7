//! `rtlab serve` through the binary, on a store made by real `rtlab run` runs (three runs of
//! a quick timer scenario) plus two runs written through the store's API from a real one: a
//! kernel and profile change on the same host, and a host and scenario named with HTML
//! (`<script>`), as another machine could send them. The server listens on a free loopback
//! port (`--listen 127.0.0.1:0`, the port read from its first line), pages are fetched with a
//! plain HTTP/1.1 client over `TcpStream`, and in headless Chromium (`--dump-dom`). Also: the
//! token (401 without it), 405 for anything but GET, 404 outside the pages, bad flags (exit 2,
//! one line) and Ctrl-C (SIGINT: exit 0).

mod common;
mod stored;

use common::{assert_error, rtlab, stderr};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

const SCENARIO: &str = "name = \"trend\"\ncount = 100\n[[probe]]\nkind = \"timer\"\ninterval = \"1ms\"\npolicy = \"other\"\n";
const CASE: &str = "timer/idle/no-rt";
const HOSTILE_HOST: &str = "<script>alert('host')</script>";
const HOSTILE_SCENARIO: &str = "<img src=x onerror=alert(1)>";

/// A store in `dir`: runs 1-3 real `rtlab run`s; run 4 a copy of run 3 with another kernel
/// and profile on the same host; run 5 a copy of run 1 from a host named with HTML.
fn store(dir: &std::path::Path) -> (String, String) {
    let f = dir.join("trend.toml");
    std::fs::write(&f, SCENARIO).unwrap();
    let db = dir.join("rtlab.db");
    for _ in 0..3 {
        // in `dir`: the run's report file lands there
        let o = rtlab()
            .current_dir(dir)
            .args(["run", f.to_str().unwrap(), "--db", db.to_str().unwrap(), "--wait", "-q"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let s = rtlab_store::Store::open_existing(&db).unwrap();
    let mut changed = s.load_run(3).unwrap();
    let mut hostile = s.load_run(1).unwrap();
    drop(s);
    let host = changed.info.environment.hostname.clone();
    changed.info.environment.kernel_release = "9.9.9-rt-test".into();
    for c in &mut changed.cases {
        c.profile = "rt-test".into();
    }
    assert_eq!(stored::store_run(&db, &changed), 4);
    hostile.info.environment.hostname = HOSTILE_HOST.into();
    hostile.info.scenario = HOSTILE_SCENARIO.into();
    assert_eq!(stored::store_run(&db, &hostile), 5);
    (db.display().to_string(), host)
}

/// A running `rtlab serve`; stopped with SIGINT (as Ctrl-C) when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(args: &[&str]) -> Serve {
        let mut child = rtlab()
            .arg("serve")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in: {line}"))
            .to_string();
        Serve { child, addr }
    }

    /// Ctrl-C: the exit code and stderr.
    fn stop(mut self) -> (Option<i32>, String) {
        interrupt(&self.child);
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status.code(), err)
    }

    fn get(&self, path: &str) -> (u16, String, String) {
        request(&self.addr, "GET", path, &[])
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            interrupt(&self.child);
            let _ = self.child.wait();
        }
    }
}

fn interrupt(c: &Child) {
    let _ = std::process::Command::new("kill").args(["-INT", &c.id().to_string()]).status();
}

/// One HTTP/1.1 request; (status, headers, body).
fn request(addr: &str, method: &str, path: &str, headers: &[&str]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if method != "GET" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn rows(body: &str, class: &str) -> usize {
    body.matches(&format!("<tr class=\"{class}\">")).count()
}

fn enc(s: &str) -> String {
    rtlab_report::dashboard::pct_encode(s)
}

#[test]
fn the_dashboard_serves_runs_filters_reports_trends_and_side_by_side() {
    let d = tempfile::tempdir().unwrap();
    let (db, host) = store(d.path());
    let srv = Serve::start(&["--db", &db, "--listen", "127.0.0.1:0"]);

    // the runs page: every run, host names from the store shown as text
    let (st, head, body) = srv.get("/");
    assert_eq!(st, 200, "{body}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/html; charset=utf-8"), "{head}");
    assert_eq!(rows(&body, "run"), 5, "{body}");
    assert!(body.contains("&lt;script&gt;alert(&#39;host&#39;)&lt;/script&gt;"), "{body}");
    assert!(body.contains("&lt;img src=x onerror=alert(1)&gt;"), "{body}");
    assert!(!body.contains("<script") && !body.contains("<img"), "unescaped store value: {body}");
    assert!(!body.contains(" src=\"") && !body.contains("<link"), "an external resource: {body}");
    assert!(body.contains("href=\"/run/1\"") && body.contains("href=\"/compare?a=1&amp;b=2\""));

    // filters
    assert_eq!(rows(&srv.get(&format!("/?host={}", enc(HOSTILE_HOST))).2, "run"), 1);
    assert_eq!(rows(&srv.get(&format!("/?host={}", enc(&host))).2, "run"), 4);
    assert_eq!(rows(&srv.get("/?scenario=trend").2, "run"), 4);
    assert_eq!(rows(&srv.get("/?kernel=9.9.9-rt-test").2, "run"), 1);
    assert_eq!(rows(&srv.get("/?scenario=trend&kernel=9.9.9-rt-test").2, "run"), 1);
    let year = srv.get("/").2.split("<td>").nth(3).unwrap()[..4].to_string();
    assert_eq!(rows(&srv.get(&format!("/?since={year}&until={year}")).2, "run"), 5);
    let (st, _, none) = srv.get("/?since=2999-01-01");
    assert_eq!(st, 200);
    assert_eq!(rows(&none, "run"), 0);
    assert!(none.contains("no run matches"), "{none}");
    assert_eq!(rows(&srv.get("/?until=2000").2, "run"), 0);

    // one run's report: today's HTML report of the run
    let (st, _, report) = srv.get("/run/2");
    assert_eq!(st, 200);
    assert!(report.contains(CASE) && report.contains("<svg"), "not the run's report");
    let (st, _, hostile) = srv.get("/run/5");
    assert_eq!(st, 200);
    assert!(!hostile.contains(HOSTILE_HOST) && !hostile.contains(HOSTILE_SCENARIO));
    assert_eq!(srv.get("/run/99").0, 404);

    // trends: the cases, then one point per run that measured the case, per host
    let (st, _, index) = srv.get("/trend");
    assert_eq!(st, 200);
    assert!(index.contains(&format!("href=\"/trend?case={}\"", enc(CASE))), "{index}");
    let (st, _, trend) = srv.get(&format!("/trend?case={}", enc(CASE)));
    assert_eq!(st, 200);
    assert_eq!(trend.matches("<section class=\"host\">").count(), 2, "two hosts");
    assert_eq!(trend.matches("class=\"pt pt-p50\"").count(), 5, "a p50 point per run");
    assert_eq!(rows(&trend, "point"), 5);
    assert!(!trend.contains("<script"), "unescaped host in the trend");
    let (_, _, mine) = srv.get(&format!("/trend?case={}&host={}", enc(CASE), enc(&host)));
    for s in ["p50", "p99_9", "max", "missed"] {
        assert_eq!(mine.matches(&format!("class=\"pt pt-{s}\"")).count(), 4, "{s} points");
    }
    assert_eq!(mine.matches("<line class=\"change\"").count(), 1, "one change marked");
    assert!(mine.contains("kernel 9.9.9-rt-test, profile rt-test"), "{mine}");
    let (_, _, kernel) = srv.get(&format!("/trend?case={}&kernel=9.9.9-rt-test", enc(CASE)));
    assert_eq!(kernel.matches("class=\"pt pt-p50\"").count(), 1);
    let (st, _, none) = srv.get("/trend?case=no/such/case");
    assert_eq!(st, 200);
    assert!(none.contains("no run measured this case"));

    // the newest runs of a long trend, and pages of runs
    let (_, _, last) = srv.get(&format!("/trend?case={}&last=2", enc(CASE)));
    assert_eq!(rows(&last, "point"), 2);
    assert!(last.contains("the newest 2 of the 5 runs that measured it"), "{last}");
    let (st, _, older) = srv.get("/?offset=3");
    assert_eq!((st, rows(&older, "run")), (200, 2));
    assert!(older.contains("newest first, 4 to 5") && older.contains("newer runs"), "{older}");
    for bad in ["/?offset=x", "/trend?case=a&last=-1", "/?offset=99999999"] {
        let (st, _, body) = srv.get(bad);
        assert_eq!(st, 400, "{bad}");
        assert!(body.contains("expected a whole number"), "{body}");
    }

    // two hosts side by side: each case's newest run on each
    let (st, _, hosts) = srv.get("/hosts");
    assert_eq!(st, 200);
    assert!(hosts.contains("choose two hosts (2 in the store)"), "{hosts}");
    assert!(!hosts.contains("<script"), "unescaped host in the choice");
    let (st, _, both) = srv.get(&format!("/hosts?a={}&b={}", enc(&host), enc(HOSTILE_HOST)));
    assert_eq!(st, 200);
    assert!(rows(&both, "case") >= 1, "{both}");
    assert!(both.contains(&format!("href=\"/trend?case={}\"", enc(CASE))), "{both}");
    // host A's newest run is run 4 (kernel 9.9.9-rt-test), host B's its only one, run 5
    assert!(both.contains("href=\"/run/4\">4</a>, 9.9.9-rt-test, rt-test"), "{both}");
    assert!(both.contains("href=\"/run/5\">5</a>"), "{both}");
    assert!(!both.contains("<script"), "unescaped host: {both}");

    // two runs side by side: compare's table
    let (st, _, cmp) = srv.get("/compare?a=1&b=4");
    assert_eq!(st, 200);
    assert!(cmp.contains("Run 1 (A) -&gt; run 4 (B)"), "{cmp}");
    assert!(cmp.contains(CASE) && cmp.contains("9.9.9-rt-test"));
    assert_eq!(srv.get("/compare?a=1&b=99").0, 404);
    assert_eq!(srv.get("/compare?a=1").0, 400);

    // Ctrl-C stops it cleanly
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("serve: stopped"), "{err}");
}

#[test]
fn only_get_and_only_its_pages() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = store(d.path());
    let srv = Serve::start(&["--db", &db, "--listen", "127.0.0.1:0"]);
    for m in ["POST", "PUT", "DELETE", "PATCH"] {
        let (st, head, _) = request(&srv.addr, m, "/", &[]);
        assert_eq!(st, 405, "{m}");
        assert!(head.contains("Allow: GET"), "{head}");
    }
    for p in [
        "/../../../../etc/passwd",
        "/run/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/etc/passwd",
        "/rtlab.db",
        "/trend.toml",
        "/run/",
        "/run/1/x",
        "/run/-1",
        "/favicon.ico",
    ] {
        let (st, _, body) = srv.get(p);
        assert_eq!(st, 404, "{p}");
        assert!(!body.contains("root:") && !body.contains("SQLite"), "{p}: {body}");
    }
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_token_is_asked_of_every_request() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = store(d.path());
    let srv = Serve::start(&["--db", &db, "--listen", "127.0.0.1:0", "--token", "s3cret&x"]);
    for p in ["/", "/run/1", "/trend", "/nothing", "/?token=wrong", "/?token=s3cret"] {
        let (st, _, body) = srv.get(p);
        assert_eq!(st, 401, "{p}");
        assert!(!body.contains(CASE), "{p}: a page behind the token");
    }
    assert_eq!(request(&srv.addr, "POST", "/", &[]).0, 401);
    assert_eq!(request(&srv.addr, "GET", "/", &["Authorization: Bearer wrong"]).0, 401);
    let (st, _, body) = srv.get("/?token=s3cret%26x");
    assert_eq!(st, 200);
    // links keep the token, so a browser stays in
    assert!(body.contains("href=\"/run/1?token=s3cret%26x\""), "{body}");
    assert!(body.contains("<input type=\"hidden\" name=\"token\" value=\"s3cret&amp;x\">"));
    assert_eq!(srv.get("/run/1?token=s3cret%26x").0, 200);
    assert_eq!(request(&srv.addr, "GET", "/trend", &["Authorization: Bearer s3cret&x"]).0, 200);
    assert_eq!(request(&srv.addr, "GET", "/trend", &["X-Rtlab-Token: s3cret&x"]).0, 200);
    assert_eq!(request(&srv.addr, "POST", "/", &["X-Rtlab-Token: s3cret&x"]).0, 405);
    assert_eq!(srv.get("/nothing?token=s3cret%26x").0, 404);
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn another_address_only_with_a_token() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = store(d.path());
    assert_error(
        &["serve", "--db", &db, "--listen", "0.0.0.0:0"],
        &["--listen 0.0.0.0:0", "not a loopback address", "--token"],
    );
    let srv = Serve::start(&["--db", &db, "--listen", "0.0.0.0:0", "--token", "t"]);
    let port = srv.addr.rsplit(':').next().unwrap().to_string();
    let local = format!("127.0.0.1:{port}");
    assert_eq!(request(&local, "GET", "/", &[]).0, 401);
    assert_eq!(request(&local, "GET", "/?token=t", &[]).0, 200);
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn bad_flags_are_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("none.db");
    let missing = missing.to_str().unwrap();
    assert_error(&["serve", "--db", missing, "--listen", "127.0.0.1:0"], &["--db", "none.db"]);
    assert!(!std::path::Path::new(missing).exists(), "serve created a store");
    let (db, _) = store(d.path());
    assert_error(
        &["serve", "--db", &db, "--listen", "localhost"],
        &["--listen localhost", "ADDR:PORT"],
    );
    assert_error(&["serve", "--db", &db, "--listen", "127.0.0.1:99999"], &["--listen"]);
    assert_error(&["serve", "--db", &db, "--listen", "127.0.0.1:0", "--token", ""], &["--token"]);
    // a port already taken
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_error(&["serve", "--db", &db, "--listen", &addr], &[&format!("--listen {addr}")]);
}

#[test]
fn a_store_that_breaks_while_served_gives_500_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let (db, _) = store(d.path());
    let srv = Serve::start(&["--db", &db, "--listen", "127.0.0.1:0"]);
    assert_eq!(srv.get("/").0, 200);
    // the file overwritten under the server (same inode): no longer a database
    std::fs::write(&db, vec![b'x'; 64 * 1024]).unwrap();
    let (st, _, body) = srv.get("/");
    assert_eq!(st, 500, "{body}");
    assert!(body.contains("rtlab.db"), "the error names the store: {body}");
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
}

fn chromium() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("RTLAB_CHROMIUM") {
        return p.into();
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("chromium not found in PATH (install the Debian package `chromium`: scripts/setup.sh --deps-only, or set RTLAB_CHROMIUM)");
}

/// The DOM headless Chromium built from `url` (bounded: 120 s).
fn dom(dir: &std::path::Path, url: &str) -> String {
    let out = dir.join("dom.html");
    let err = dir.join("chromium.stderr");
    let mut child = std::process::Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(url)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(status.success(), "chromium failed: {}", std::fs::read_to_string(&err).unwrap());
    std::fs::read_to_string(&out).unwrap()
}

#[test]
fn the_dashboard_in_headless_chromium() {
    let d = tempfile::tempdir().unwrap();
    let (db, host) = store(d.path());
    let srv = Serve::start(&["--db", &db, "--listen", "127.0.0.1:0"]);
    let runs = dom(d.path(), &format!("http://{}/", srv.addr));
    // the browser built the table: five runs, the hostile host as text, no script element
    assert_eq!(rows(&runs, "run"), 5, "{runs}");
    assert!(runs.contains("&lt;script&gt;alert('host')&lt;/script&gt;"), "{runs}");
    assert!(!runs.contains("<script"), "a script element in the DOM: {runs}");
    assert!(!runs.contains("<img"), "an img element in the DOM: {runs}");
    let trend =
        dom(d.path(), &format!("http://{}/trend?case={}&host={}", srv.addr, enc(CASE), enc(&host)));
    assert_eq!(trend.matches("<svg class=\"trend\"").count(), 1, "{trend}");
    assert_eq!(trend.matches("class=\"pt pt-p50\"").count(), 4, "{trend}");
    assert_eq!(trend.matches("class=\"pt pt-max\"").count(), 4);
    assert!(trend.contains("kernel 9.9.9-rt-test"));
    let hosts = dom(
        d.path(),
        &format!("http://{}/hosts?a={}&b={}", srv.addr, enc(&host), enc(HOSTILE_HOST)),
    );
    assert!(rows(&hosts, "case") >= 1, "{hosts}");
    assert!(hosts.contains("&lt;script&gt;alert('host')&lt;/script&gt;"), "{hosts}");
    assert!(!hosts.contains("<script"), "a script element in the DOM: {hosts}");
    let (code, err) = srv.stop();
    assert_eq!(code, Some(0), "{err}");
}
