//! `rtlab monitor --config FILE`: the always-on service (rtlab-lab's `monitor`): a timer
//! canary, the chosen topics' verdicts, the kernel's evidence of each new worst case, and
//! OpenMetrics at `/metrics`.
//!
//! Contract:
//! - A bad file, a canary's priority refused, an address that cannot be bound: one line, exit
//!   2, nothing started. `--check` reads the file and says `ok` (exit 0) or why not.
//! - `/metrics` only (anything else 404, anything but GET 405), on `listen`; an address that is
//!   not loopback only with a token, and then each request carries it (`?token=`,
//!   `Authorization: Bearer`, `X-Rtlab-Token`), else 401.
//! - SIGHUP reads the file again: a good one is in force at once (listen and token at the next
//!   start), a broken one is one line on stderr and the running configuration stays. SIGTERM
//!   or SIGINT stops it (exit 0): it changed nothing on the machine to put back. What it says
//!   goes to stderr, one line an event (a verdict that changed, a worst case, a reload).

use clap::Args;
use rtlab_lab::monitor::{openmetrics, render, Monitor, View};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tiny_http::{Header, Method, Response, Server};

#[derive(Args, Debug)]
pub struct MonitorArgs {
    /// The configuration file (TOML: interval, listen, the canary, the topics; docs/monitor.md).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Read the file, say whether it is good, and exit.
    #[arg(long)]
    pub check: bool,
}

pub fn run(a: MonitorArgs) -> anyhow::Result<u8> {
    if a.check {
        let c = rtlab_lab::monitor::config::MonitorConfig::load(&a.config)
            .map_err(|e| anyhow::anyhow!("--config {e}"))?;
        println!(
            "ok: {} topics, canary {}, /metrics on {}",
            c.topics.len(),
            if c.canary.enabled { c.canary.rate.text.as_str() } else { "off" },
            c.listen
        );
        return Ok(0);
    }
    let stop = super::stop_flag()?;
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    let mut m = Monitor::start(&a.config).map_err(|e| anyhow::anyhow!("--config {e}"))?;
    let addr: SocketAddr = m.cfg.listen.parse()?;
    let server = match Server::http(addr) {
        Ok(s) => s,
        Err(e) => {
            drop(m.stop());
            anyhow::bail!("--config {}: listen {addr}: {e}", a.config.display());
        }
    };
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    println!(
        "rtlab monitor: {}; {} topics; every {}; /metrics on http://{bound}/metrics (SIGHUP reloads {}, SIGTERM stops)",
        if m.cfg.canary.enabled {
            format!(
                "canary {} at {} {}{}",
                m.cfg.canary.rate.text,
                m.cfg.canary.policy.name(),
                m.cfg.canary.priority,
                m.cfg.canary.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default()
            )
        } else {
            "no canary".into()
        },
        m.cfg.topics.len(),
        rtlab_core::units::format_duration_exact(rtlab_core::units::Nanos(m.cfg.interval.0)),
        a.config.display()
    );
    let view = m.view.clone();
    let token = m.cfg.token.clone();
    let s2 = stop.clone();
    let http = std::thread::spawn(move || serve(&server, &view, token.as_deref(), &s2));
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if hup.swap(false, Ordering::Relaxed) {
            match m.reload() {
                Ok(said) => {
                    eprintln!("rtlab monitor: reloaded {}", a.config.display());
                    for s in said {
                        eprintln!("rtlab monitor: {s}");
                    }
                }
                Err(e) => {
                    eprintln!("rtlab monitor: reload refused, the running configuration stays: {e}")
                }
            }
        }
        for line in m.tick() {
            eprintln!("rtlab monitor: {line}");
        }
    }
    for line in m.stop() {
        eprintln!("rtlab monitor: {line}");
    }
    let _ = http.join();
    eprintln!("rtlab monitor: stopped");
    Ok(0)
}

/// Answer requests until `stop` is raised.
fn serve(server: &Server, view: &Mutex<View>, token: Option<&str>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(200)) else { continue };
        let (path, query) = match req.url().split_once('?') {
            Some((p, q)) => (p.to_string(), super::serve::parse_query(q)),
            None => (req.url().to_string(), Vec::new()),
        };
        let given = query
            .iter()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.clone())
            .or_else(|| super::serve::header_token(&req));
        let authorized =
            token.is_none_or(|t| given.as_deref().is_some_and(|g| super::serve::same(g, t)));
        let (code, body, kind) = if *req.method() != Method::Get {
            (405, "only GET\n".to_string(), "text/plain; charset=utf-8")
        } else if !authorized {
            (401, "a token is needed\n".to_string(), "text/plain; charset=utf-8")
        } else if path == "/metrics" {
            let text = render(&view.lock().unwrap_or_else(|e| e.into_inner()));
            (200, text, openmetrics::CONTENT_TYPE)
        } else {
            (404, "only /metrics\n".to_string(), "text/plain; charset=utf-8")
        };
        let h = Header::from_bytes(&b"Content-Type"[..], kind.as_bytes()).expect("a valid header");
        let _ = req.respond(Response::from_string(body).with_status_code(code).with_header(h));
    }
}
