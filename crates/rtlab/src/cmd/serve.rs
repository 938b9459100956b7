//! `rtlab serve [--db FILE] [--listen ADDR:PORT] [--token TOKEN]`: a read-only web dashboard
//! over a store (pages rendered by rtlab-report's dashboard.rs).
//!
//! Contract:
//! - Binds 127.0.0.1:8080 by default; an address that is not loopback only with `--token`,
//!   and then every request carries it (`?token=`, `Authorization: Bearer TOKEN` or
//!   `X-Rtlab-Token`), else 401.
//! - GET only (anything else 405); only these pages, anything else 404 (no file is served, so
//!   no path can reach outside them): `/` runs (filters `host`, `kernel`, `scenario`,
//!   `since`, `until`; 100 runs a page, `offset`), `/run/ID` one run's HTML report, `/trend`
//!   the cases, `/trend?case=NAME` a case's trend (the same filters; its newest 1000 runs,
//!   `last=N`), `/compare?a=ID&b=ID` two runs side by side, `/hosts?a=HOST&b=HOST` two hosts
//!   side by side (each case's newest run on each).
//! - Reads the store through the lab's pages (`rtlab_lab::dashboard`) (one connection per worker); the
//!   runs, trend and hosts pages are queries that read only the rows they show.
//! - Bad flags (address, non-loopback without a token, missing store): one line, exit 2.
//!   Ctrl-C stops it cleanly (exit 0); a second Ctrl-C exits at once.

use clap::Args;
use rtlab_lab::dashboard;
use rtlab_lab::store::{Store, DEFAULT_DB};
use rtlab_report::dashboard::Ctx;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiny_http::{Header, Method, Request, Response, Server};

/// Worker threads, each with its own store connection.
const WORKERS: usize = 2;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// Where to listen; an address that is not loopback needs --token. Port 0: any free port
    /// (the line on stdout says which).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Every request must carry this token (`?token=`, `Authorization: Bearer`, or
    /// `X-Rtlab-Token`).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

pub fn run(a: ServeArgs) -> anyhow::Result<u8> {
    let addr: SocketAddr = a.listen.parse().map_err(|_| {
        anyhow::anyhow!("--listen {}: expected ADDR:PORT, such as 127.0.0.1:8080", a.listen)
    })?;
    if let Some(t) = &a.token {
        if t.is_empty() {
            anyhow::bail!("--token: must not be empty");
        }
    }
    if !addr.ip().is_loopback() && a.token.is_none() {
        anyhow::bail!(
            "--listen {}: not a loopback address; another address only with --token TOKEN",
            a.listen
        );
    }
    // one store per worker, opened before binding: a missing store fails here
    let stores: Vec<Store> =
        (0..WORKERS).map(|_| super::runs::open_store(&a.db)).collect::<Result<_, _>>()?;
    let stop = super::stop_flag()?;
    let server =
        Arc::new(Server::http(addr).map_err(|e| anyhow::anyhow!("--listen {}: {e}", a.listen))?);
    let bound = server.server_addr().to_ip().unwrap_or(addr);
    println!(
        "serving {} on http://{bound}/ (read-only; Ctrl-C stops)",
        rtlab_lab::store::redact(&a.db)
    );
    let token = Arc::new(a.token);
    let mut workers = Vec::new();
    for store in stores {
        let (server, stop, token) = (server.clone(), stop.clone(), token.clone());
        workers.push(std::thread::spawn(move || serve(&server, &store, &stop, token.as_deref())));
    }
    for w in workers {
        let _ = w.join();
    }
    eprintln!("serve: stopped");
    Ok(0)
}

/// Answer requests until `stop` is raised.
fn serve(server: &Server, store: &Store, stop: &AtomicBool, token: Option<&str>) {
    while !stop.load(Ordering::Relaxed) {
        match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(req)) => answer(req, store, token),
            Ok(None) => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn answer(req: Request, store: &Store, token: Option<&str>) {
    let (path, query) = match req.url().split_once('?') {
        Some((p, q)) => (p.to_string(), parse_query(q)),
        None => (req.url().to_string(), Vec::new()),
    };
    let given = query
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.clone())
        .or_else(|| header_token(&req));
    let ctx = Ctx {
        token_query: given
            .as_deref()
            .filter(|_| token.is_some())
            .map(|t| format!("token={}", rtlab_report::dashboard::pct_encode(t)))
            .unwrap_or_default(),
    };
    let mut extra = None;
    let authorized = match token {
        None => true,
        Some(t) => given.as_deref().is_some_and(|g| same(g, t)),
    };
    let page = if !authorized {
        dashboard::error_page(
            401,
            "a token is needed: add ?token=TOKEN or an Authorization: Bearer header",
        )
    } else if *req.method() != Method::Get {
        extra = Some(header("Allow", "GET"));
        dashboard::error_page(405, "read-only: GET only")
    } else {
        dashboard::route(&path, &query, store, &ctx)
    };
    let mut resp = Response::from_string(page.html)
        .with_status_code(page.status)
        .with_header(header("Content-Type", "text/html; charset=utf-8"))
        .with_header(header("X-Content-Type-Options", "nosniff"))
        .with_header(header(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
        ))
        .with_header(header("Cache-Control", "no-store"));
    if let Some(h) = extra {
        resp = resp.with_header(h);
    }
    let _ = req.respond(resp);
}

fn header(k: &str, v: &str) -> Header {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("a valid header")
}

/// The token of `Authorization: Bearer T` or `X-Rtlab-Token: T`.
pub(crate) fn header_token(req: &Request) -> Option<String> {
    req.headers().iter().find_map(|h| {
        let v = h.value.as_str().trim();
        if h.field.equiv("Authorization") {
            v.strip_prefix("Bearer ").map(|t| t.trim().to_string())
        } else if h.field.equiv("X-Rtlab-Token") {
            Some(v.to_string())
        } else {
            None
        }
    })
}

/// Compare tokens in time independent of where they differ.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (rtlab_report::dashboard::pct_decode(k), rtlab_report::dashboard::pct_decode(v))
        })
        .collect()
}
