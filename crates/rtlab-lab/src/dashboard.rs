//! The dashboard's pages (`rtlab serve`): a request's path and query -> the page, read
//! from the store and rendered by rtlab-report's dashboard.
//!
//! Contract: only these pages, anything else 404 (no file is served): `/` runs (filters
//! `host`, `kernel`, `scenario`, `since`, `until`; `offset`), `/run/ID`, `/trend`
//! (`case`, `last`), `/compare?a=ID&b=ID`, `/hosts?a=HOST&b=HOST`; a bad parameter is a 400
//! page naming it; the runs, trend and hosts pages read only the rows they show.

use rtlab_core::fleet::RunFilter;
use rtlab_report::dashboard::{self, Ctx};
use rtlab_store::{Store, StoreError};

/// A page: status and HTML.
pub struct Page {
    pub status: u16,
    pub html: String,
}

fn param<'a>(q: &'a [(String, String)], k: &str) -> &'a str {
    q.iter().find(|(n, _)| n == k).map(|(_, v)| v.trim()).unwrap_or("")
}

pub fn error_page(status: u16, what: &str) -> Page {
    let ctx = Ctx::default();
    Page {
        status,
        html: dashboard::page(
            &ctx,
            &format!("{status}"),
            &format!("<p>{}</p>", rtlab_report::svg::esc(what)),
        ),
    }
}

fn ok(html: String) -> Page {
    Page { status: 200, html }
}

pub fn route(path: &str, q: &[(String, String)], store: &Store, ctx: &Ctx) -> Page {
    let filter = RunFilter {
        host: param(q, "host").into(),
        kernel: param(q, "kernel").into(),
        scenario: param(q, "scenario").into(),
        since: param(q, "since").into(),
        until: param(q, "until").into(),
    };
    let result = match path {
        "/" => match count(param(q, "offset"), 0, "offset") {
            Ok(offset) => store
                .runs_page(&filter, offset, dashboard::RUNS_PER_PAGE)
                .map(|pg| ok(dashboard::runs_page(ctx, &pg, &filter))),
            Err(p) => Ok(p),
        },
        "/trend" => match count(param(q, "last"), TREND_POINTS, "last") {
            Ok(last) => trend(store, ctx, param(q, "case"), &filter, last),
            Err(p) => Ok(p),
        },
        "/hosts" => hosts(store, ctx, param(q, "a"), param(q, "b")),
        "/compare" => match (run_id(param(q, "a")), run_id(param(q, "b"))) {
            (Some(a), Some(b)) => store.load_run(a).and_then(|ra| {
                store.load_run(b).map(|rb| ok(dashboard::side_by_side_page(ctx, &ra, &rb)))
            }),
            _ => Ok(error_page(400, "compare needs two run ids: /compare?a=ID&b=ID")),
        },
        p => match p.strip_prefix("/run/").and_then(run_id) {
            Some(id) => store.load_run(id).map(|r| ok(rtlab_report::render_html(&[r]))),
            None => Ok(error_page(404, "no such page")),
        },
    };
    match result {
        Ok(p) => p,
        Err(StoreError::UnknownRun { id, .. }) => error_page(404, &format!("no run with id {id}")),
        Err(e) => error_page(500, &e.to_string()),
    }
}

fn run_id(s: &str) -> Option<i64> {
    s.parse().ok().filter(|n| *n > 0)
}

/// How many runs a trend shows by default (its newest; `last=N` asks for more).
const TREND_POINTS: usize = 1000;

/// A count parameter (`offset`, `last`): empty is `default`; anything but a number up to a
/// million is a 400 page.
fn count(s: &str, default: usize, name: &str) -> Result<usize, Page> {
    if s.is_empty() {
        return Ok(default);
    }
    s.parse::<usize>().ok().filter(|n| *n <= 1_000_000).ok_or_else(|| {
        error_page(400, &format!("{name}={s}: expected a whole number up to 1000000"))
    })
}

/// `/trend`: the cases of the runs that pass the filter, or one case's points (its newest
/// `last` runs).
fn trend(
    store: &Store,
    ctx: &Ctx,
    case: &str,
    f: &RunFilter,
    last: usize,
) -> Result<Page, StoreError> {
    if case.is_empty() {
        return Ok(ok(dashboard::trend_index_page(ctx, &store.case_names(f)?)));
    }
    let (points, measured) = store.trend(case, f, last)?;
    Ok(ok(dashboard::trend_page(ctx, case, &points, measured)))
}

/// `/hosts?a=HOST&b=HOST`: two hosts' newest value of every case, side by side.
fn hosts(store: &Store, ctx: &Ctx, a: &str, b: &str) -> Result<Page, StoreError> {
    let hosts = store.hosts()?;
    let cases = |h: &str| if h.is_empty() { Ok(Vec::new()) } else { store.latest_cases(h) };
    let (ca, cb) = (cases(a)?, cases(b)?);
    Ok(ok(dashboard::hosts_page(ctx, &hosts, (a, &ca), (b, &cb))))
}
