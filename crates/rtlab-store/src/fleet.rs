//! The queries behind `rtlab serve`'s pages, answered by the database rather than by
//! loading runs: a page of runs with filters, the case names, a case's trend, the newest
//! value of every case on one host. With a fleet's 10 000 runs each page reads only the
//! rows it shows (see BENCHMARKS.md).
//!
//! Contract: the filters mean what [`RunFilter::matches`] says (exact host, kernel and
//! scenario; dates as prefixes of the RFC 3339 start), on the host columns of `runs`
//! (schema 5); every value is a parameter; a case's value is its headline stream's (`all`,
//! else the first), as in the report.

use crate::db::{p, Row, V};
use crate::{Result, Store};
use rtlab_core::fleet::{RunFilter, RunsPage, TrendPoint};

/// The filter's conditions on `runs r`, its values `?1`..`?5` (see [`filter_params`]).
const FILTER: &str = "(CAST(?1 AS TEXT) = '' OR r.hostname = ?1)
    AND (CAST(?2 AS TEXT) = '' OR r.kernel_release = ?2)
    AND (CAST(?3 AS TEXT) = '' OR r.scenario = ?3)
    AND (CAST(?4 AS TEXT) = '' OR substr(r.started_at, 1, length(CAST(?4 AS TEXT))) >= ?4)
    AND (CAST(?5 AS TEXT) = '' OR substr(r.started_at, 1, length(CAST(?5 AS TEXT))) <= ?5)";

fn filter_params(f: &RunFilter) -> Vec<V> {
    p![f.host, f.kernel, f.scenario, f.since, f.until].to_vec()
}

/// A case's headline statistics, joined as `s`: the stream named `all`, else the first.
const HEADLINE: &str = "(s.pos = 0 OR s.stream = 'all')";

impl Store {
    /// The runs that pass `f`, newest first: `limit` of them after skipping `offset`.
    pub fn runs_page(&self, f: &RunFilter, offset: usize, limit: usize) -> Result<RunsPage> {
        let mut params = filter_params(f);
        params.extend_from_slice(p![limit + 1, offset]);
        let mut runs = self.summaries(
            &format!(
                "SELECT r.id, r.scenario, r.started_at, r.status,
                    (SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id),
                    (SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'failed'),
                    r.hostname, r.kernel_release
                 FROM runs r WHERE {FILTER} ORDER BY r.id DESC LIMIT ?6 OFFSET ?7"
            ),
            &params,
        )?;
        let older = if runs.len() > limit { runs.pop() } else { None };
        let count = |sql: &str, params: &[V]| -> Result<usize> {
            self.query_row(sql, params, |r| r.get(0)).map_err(|e| self.err(e))
        };
        let matching =
            count(&format!("SELECT COUNT(*) FROM runs r WHERE {FILTER}"), &filter_params(f))?;
        let total = count("SELECT COUNT(*) FROM runs", p![])?;
        Ok(RunsPage { runs, older, matching, total, offset })
    }

    /// The host names of the store's runs, sorted.
    pub fn hosts(&self) -> Result<Vec<String>> {
        self.rows(
            "SELECT DISTINCT hostname FROM runs WHERE hostname IS NOT NULL ORDER BY hostname",
            p![],
            |r| r.get(0),
        )
    }

    /// The names of the cases of the runs that pass `f`, sorted.
    pub fn case_names(&self, f: &RunFilter) -> Result<Vec<String>> {
        if *f == RunFilter::default() {
            // every run passes: the names alone, from the index `cases_name`
            return self.rows("SELECT DISTINCT name FROM cases ORDER BY name", p![], |r| r.get(0));
        }
        self.rows(
            &format!(
                "SELECT DISTINCT c.name FROM cases c JOIN runs r ON r.id = c.run_id WHERE {FILTER} ORDER BY c.name"
            ),
            &filter_params(f),
            |r| r.get(0),
        )
    }

    /// Case `case`'s points in the runs that pass `f`: the newest `last` of them, oldest
    /// first, and how many runs measured it in all.
    pub fn trend(
        &self,
        case: &str,
        f: &RunFilter,
        last: usize,
    ) -> Result<(Vec<TrendPoint>, usize)> {
        let mut params = filter_params(f);
        params.extend_from_slice(p![case, last]);
        let rows = self.rows(
            &format!(
                "SELECT k.rid, k.started_at, k.hostname, k.kernel_release, k.profile,
                        s.stream, s.p50_ns, s.p99_9_ns, s.max_ns, s.missed
                 FROM (SELECT c.id AS cid, r.id AS rid, r.started_at, r.hostname, r.kernel_release, c.profile
                       FROM cases c JOIN runs r ON r.id = c.run_id
                       WHERE c.name = ?6 AND c.has_document = 1 AND {FILTER}
                       ORDER BY r.id DESC LIMIT ?7) k
                 JOIN statistics s ON s.case_id = k.cid AND {HEADLINE}
                 ORDER BY k.rid, s.pos"
            ),
            &params,
            point,
        )?;
        let measured: usize = self
            .query_row(
                &format!(
                    "SELECT COUNT(*) FROM cases c JOIN runs r ON r.id = c.run_id
                     WHERE c.name = ?6 AND c.has_document = 1 AND {FILTER}"
                ),
                &params[..6],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok((headlines(rows), measured))
    }

    /// Every case host `host` measured, with its value in the newest run that measured it,
    /// by case name.
    pub fn latest_cases(&self, host: &str) -> Result<Vec<(String, TrendPoint)>> {
        let newest: Vec<(String, i64)> = self.rows(
            "SELECT c.name, MAX(c.run_id) FROM cases c JOIN runs r ON r.id = c.run_id
             WHERE r.hostname = ?1 AND c.has_document = 1 GROUP BY c.name ORDER BY c.name",
            p![host],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut out = Vec::with_capacity(newest.len());
        for (name, run) in newest {
            let rows = self.rows(
                &format!(
                    "SELECT r.id, r.started_at, r.hostname, r.kernel_release, c.profile,
                            s.stream, s.p50_ns, s.p99_9_ns, s.max_ns, s.missed
                     FROM cases c JOIN runs r ON r.id = c.run_id JOIN statistics s ON s.case_id = c.id
                     WHERE c.run_id = ?1 AND c.name = ?2 AND {HEADLINE} ORDER BY s.pos"
                ),
                p![run, name],
                point,
            )?;
            if let Some(pt) = headlines(rows).pop() {
                out.push((name, pt));
            }
        }
        Ok(out)
    }
}

fn point(r: &Row) -> std::result::Result<TrendPoint, crate::db::DbErr> {
    Ok(TrendPoint {
        run: r.get(0)?,
        started_at: r.get(1)?,
        host: r.get::<Option<String>>(2)?.unwrap_or_default(),
        kernel: r.get::<Option<String>>(3)?.unwrap_or_default(),
        profile: r.get(4)?,
        stream: r.get(5)?,
        p50_ns: r.get(6)?,
        p99_9_ns: r.get(7)?,
        max_ns: r.get(8)?,
        missed: r.get(9)?,
    })
}

/// One point per run from rows ordered by run then stream position (a run's first stream,
/// then its `all` when it has one): the `all` row wins.
fn headlines(rows: Vec<TrendPoint>) -> Vec<TrendPoint> {
    let mut out: Vec<TrendPoint> = Vec::with_capacity(rows.len());
    for pt in rows {
        match out.last_mut() {
            Some(prev) if prev.run == pt.run => {
                if pt.stream == "all" {
                    *prev = pt;
                }
            }
            _ => out.push(pt),
        }
    }
    out
}
