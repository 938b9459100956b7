//! Reading a run back: its cases exactly as they were added, their documents, evidence,
//! streams and raw samples.

use crate::db::{p, DbErr, Row, V};
use crate::{OptionalRow, Result, Store};
use rtlab_core::evidence::{Evidence, KernelCounters, WindowCounters};
use rtlab_core::histogram::{HistogramBucket, HistogramData};
use rtlab_core::run::{CaseRecord, CaseStatus, Published, Run, RunInfo};
use rtlab_core::schema::{Environment, ResultDocument, Stream, ToolInfo, Warning};
use rtlab_core::stats::Summary;
use rtlab_core::windows::WindowData;
use std::collections::BTreeMap;

impl Store {
    /// A run with all its cases, in case order.
    pub fn load_run(&self, id: i64) -> Result<Run> {
        type RunRow = (String, String, String, f64, String, String, String, String, Option<String>);
        let row: Option<RunRow> = self.query_row(
                "SELECT scenario, source, scenario_text, scale, command_line, started_at, tool_version, status, finished_at FROM runs WHERE id = ?1",
                p![id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((
            scenario,
            source,
            scenario_text,
            scale,
            cmd,
            started_at,
            tool_version,
            status,
            finished_at,
        )) = row
        else {
            return Err(self.unknown_run(id));
        };
        let environment = self.environment(id, None)?.unwrap_or_default();
        let info = RunInfo {
            scenario,
            source,
            scenario_text,
            scale,
            command_line: self.parse(&cmd)?,
            started_at,
            tool_version,
            environment,
        };
        let status = self.run_status(&status)?;
        let mut cases = Vec::new();
        let ids: Vec<i64> =
            self.rows("SELECT id FROM cases WHERE run_id = ?1 ORDER BY idx, id", p![id], |r| {
                r.get(0)
            })?;
        for cid in ids {
            cases.push(self.load_case(id, cid)?);
        }
        let gates = self.gate_verdicts(id)?;
        Ok(Run { id, info, status, finished_at, cases, gates })
    }

    /// Every row `sql` selects with `params`, each read by `row`: the one place rows are
    /// fetched and their errors said (statements are cached per connection).
    pub(crate) fn rows<T>(
        &self,
        sql: &str,
        params: &[V],
        mut row: impl FnMut(&Row) -> std::result::Result<T, DbErr>,
    ) -> Result<Vec<T>> {
        let rows = self.db.borrow_mut().query(sql, params).map_err(|e| self.err(e))?;
        rows.iter().map(|r| row(r).map_err(|e| self.err(e))).collect()
    }

    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self, s: &str) -> Result<T> {
        serde_json::from_str(s).map_err(|e| self.corrupt(e))
    }

    fn environment(&self, run_id: i64, case_id: Option<i64>) -> Result<Option<Environment>> {
        // `IS ?2` is SQLite's only: a run's row (NULL) and a case's are two queries
        let j: Option<String> = match case_id {
            None => self.query_row(
                "SELECT json FROM environments WHERE run_id = ?1 AND case_id IS NULL",
                p![run_id],
                |r| r.get(0),
            ),
            Some(cid) => self.query_row(
                "SELECT json FROM environments WHERE run_id = ?1 AND case_id = ?2",
                p![run_id, cid],
                |r| r.get(0),
            ),
        }
        .optional()
        .map_err(|e| self.err(e))?;
        j.map(|j| self.parse(&j)).transpose()
    }

    fn load_case(&self, run_id: i64, cid: i64) -> Result<CaseRecord> {
        type CaseRow = (
            u32,
            String,
            String,
            String,
            String,
            u32,
            String,
            Option<String>,
            String,
            i64,
            Option<String>,
            Option<String>,
            Option<String>,
            bool,
        );
        let row: CaseRow = self.query_row(
                "SELECT idx, name, probe, load, profile, repetition, status, error, started_at, duration_ns, load_report, profile_report, published, has_document FROM cases WHERE id = ?1",
                p![cid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?, r.get(12)?, r.get(13)?)),
            )
            .map_err(|e| self.err(e))?;
        let (
            index,
            name,
            probe,
            load,
            profile,
            repetition,
            status,
            error,
            started_at,
            duration_ns,
            load_report,
            profile_report,
            published,
            has_document,
        ) = row;
        let status = match status.as_str() {
            "ok" => CaseStatus::Ok,
            "failed" => CaseStatus::Failed { error: error.unwrap_or_default() },
            "skipped" => CaseStatus::Skipped { reason: error.unwrap_or_default() },
            "interrupted" => CaseStatus::Interrupted,
            "hung" => CaseStatus::Hung { error: error.unwrap_or_default() },
            other => return Err(self.corrupt(format!("case {name}: unknown status '{other}'"))),
        };
        let params_map: BTreeMap<String, String> = self
            .rows("SELECT key, value FROM case_params WHERE case_id = ?1", p![cid], |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?
            .into_iter()
            .collect();
        let spike: Option<String> = self
            .query_row("SELECT json FROM spike_evidence WHERE case_id = ?1", p![cid], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let document = if has_document { Some(self.load_document(run_id, cid)?) } else { None };
        Ok(CaseRecord {
            index,
            name,
            probe,
            load,
            profile,
            params: params_map,
            repetition,
            status,
            document,
            load_report: load_report.map(|j| self.parse(&j)).transpose()?,
            profile_report: profile_report.map(|j| self.parse(&j)).transpose()?,
            spike_evidence: spike.map(|j| self.parse(&j)).transpose()?,
            published: published.map(|j| self.parse::<Published>(&j)).transpose()?,
            started_at,
            duration_ns,
        })
    }

    fn load_document(&self, run_id: i64, cid: i64) -> Result<ResultDocument> {
        type DocRow = (u32, String, String, String, String, i64, bool, String);
        let (schema_version, tool_name, tool_version, cmd, started_at, duration_ns, interrupted, probe): DocRow = self.query_row(
                "SELECT schema_version, tool_name, tool_version, command_line, started_at, duration_ns, interrupted, probe FROM documents WHERE case_id = ?1",
                p![cid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
            )
            .map_err(|e| self.err(e))?;
        let environment = self
            .environment(run_id, Some(cid))?
            .ok_or_else(|| self.corrupt(format!("case {cid}: no environment")))?;
        let config: String = self
            .query_row("SELECT json FROM configurations WHERE case_id = ?1", p![cid], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let mut warnings = Vec::new();
        warnings.extend(self.rows(
            "SELECT code, message FROM warnings WHERE case_id = ?1 ORDER BY pos",
            p![cid],
            |r| Ok(Warning { code: r.get(0)?, message: r.get(1)? }),
        )?);
        let streams = self.load_streams(cid)?;
        let evidence = self.load_evidence(cid)?;
        let far: Option<String> = self
            .query_row("SELECT json FROM far_sides WHERE case_id = ?1", p![cid], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let far = match far {
            Some(j) => Some(self.parse(&j)?),
            None => None,
        };
        let cost: Option<String> = self
            .query_row("SELECT json FROM case_costs WHERE case_id = ?1", p![cid], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))?;
        let cost = match cost {
            Some(j) => Some(self.parse(&j)?),
            None => None,
        };
        Ok(ResultDocument {
            schema_version,
            tool: ToolInfo { name: tool_name, version: tool_version },
            command_line: self.parse(&cmd)?,
            started_at,
            duration_ns,
            interrupted,
            probe,
            environment,
            config: self.parse(&config)?,
            streams,
            warnings,
            evidence,
            far,
            cost,
        })
    }

    fn load_evidence(&self, cid: i64) -> Result<Option<Evidence>> {
        type EvRow = (Option<i64>, Option<i64>, Option<i64>, bool, Option<String>, String);
        let row: Option<EvRow> = self.query_row(
                "SELECT counters_width_ns, counters_start_monotonic_ns, counters_resolution_ns, last_partial, spike, notes FROM evidence WHERE case_id = ?1",
                p![cid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((width, start_monotonic_ns, resolution, last_partial, spike, notes)) = row else {
            return Ok(None);
        };
        let counters = match width {
            None => None,
            Some(width_ns) => {
                let rows = self.rows("SELECT context_switches, net_rx, timer, interrupts, ksoftirqd_ns, steal_ticks FROM window_counters WHERE case_id = ?1 ORDER BY idx",
 p![cid], |r| {
                    Ok((
                        r.get::<u64>(0)?,
                        r.get::<String>(1)?,
                        r.get::<String>(2)?,
                        r.get::<String>(3)?,
                        r.get::<String>(4)?,
                        r.get::<String>(5)?,
                    ))
                })?;
                let mut windows = Vec::new();
                for (context_switches, net_rx, timer, interrupts, ksoftirqd_ns, steal_ticks) in rows
                {
                    windows.push(KernelCounters {
                        net_rx: self.parse(&net_rx)?,
                        timer: self.parse(&timer)?,
                        interrupts: self.parse(&interrupts)?,
                        ksoftirqd_ns: self.parse(&ksoftirqd_ns)?,
                        context_switches,
                        steal_ticks: self.parse(&steal_ticks)?,
                    });
                }
                Some(WindowCounters {
                    width_ns,
                    start_monotonic_ns,
                    resolution_ns: resolution.unwrap_or(width_ns),
                    windows,
                    last_partial,
                })
            }
        };
        Ok(Some(Evidence {
            counters,
            spike: spike.map(|j| self.parse(&j)).transpose()?,
            notes: self.parse(&notes)?,
        }))
    }

    fn load_streams(&self, cid: i64) -> Result<Vec<Stream>> {
        let rows = self.rows(
                "SELECT id, stream, metric, definition, labels, deadline_ns, count, min_ns, mean_ns, stddev_ns, p50_ns, p90_ns, p99_ns, p99_9_ns, p99_99_ns,
                        max_ns, max_index, max_at_ns, missed, overruns, lost, late, duplicates, out_of_order, malformed, raw_file, raw_dropped,
                        hist_scheme, hist_exact_below_ns, hist_buckets_per_octave, hist_limit_ns, hist_overflow_high, hist_overflow_low, window_width_ns, start_monotonic_ns
                 FROM statistics WHERE case_id = ?1 ORDER BY pos",
            p![cid],
            |r| {
                let stats = Summary {
                    count: r.get(6)?,
                    min_ns: r.get(7)?,
                    mean_ns: r.get(8)?,
                    stddev_ns: r.get(9)?,
                    p50_ns: r.get(10)?,
                    p90_ns: r.get(11)?,
                    p99_ns: r.get(12)?,
                    p99_9_ns: r.get(13)?,
                    p99_99_ns: r.get(14)?,
                    max_ns: r.get(15)?,
                    max_index: r.get(16)?,
                    max_at_ns: r.get(17)?,
                    missed: r.get(18)?,
                    overruns: r.get(19)?,
                    lost: r.get(20)?,
                    late: r.get(21)?,
                    duplicates: r.get(22)?,
                    out_of_order: r.get(23)?,
                    malformed: r.get(24)?,
                };
                let hist = HistogramData {
                    scheme: r.get(27)?,
                    exact_below_ns: r.get(28)?,
                    buckets_per_octave: r.get(29)?,
                    limit_ns: r.get(30)?,
                    overflow_high: r.get(31)?,
                    overflow_low: r.get(32)?,
                    buckets: Vec::new(),
                };
                Ok((
                    r.get::<i64>(0)?,
                    r.get::<String>(1)?,
                    r.get::<String>(2)?,
                    r.get::<String>(3)?,
                    r.get::<String>(4)?,
                    r.get::<i64>(5)?,
                    stats,
                    r.get::<Option<String>>(25)?,
                    r.get::<Option<u64>>(26)?,
                    hist,
                    r.get::<i64>(33)?,
                    r.get::<Option<i64>>(34)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for (
            sid,
            name,
            metric,
            definition,
            labels,
            deadline_ns,
            stats,
            raw_file,
            raw_dropped,
            mut histogram,
            width_ns,
            start_monotonic_ns,
        ) in rows
        {
            histogram.buckets = self.rows(
                "SELECT low_ns, high_ns, count FROM histogram_buckets WHERE stream_id = ?1 ORDER BY pos",
                p![sid],
                |r| Ok(HistogramBucket { low_ns: r.get(0)?, high_ns: r.get(1)?, count: r.get(2)? }),
            )?;
            let (max_ns, count) = self
                .rows(
                    "SELECT max_ns, count FROM windows WHERE stream_id = ?1 ORDER BY idx",
                    p![sid],
                    |r| Ok((r.get::<Option<i64>>(0)?, r.get::<u64>(1)?)),
                )?
                .into_iter()
                .unzip();
            let windows = WindowData { width_ns, max_ns, count };
            out.push(Stream {
                name,
                metric,
                definition,
                labels: self.parse(&labels)?,
                deadline_ns,
                stats,
                histogram,
                windows,
                raw_file,
                raw_dropped,
                start_monotonic_ns,
            });
        }
        Ok(out)
    }

    /// The raw samples stored for stream `stream` of case `case` of run `run_id`, as (index, at_ns, value_ns).
    pub fn raw_samples(
        &self,
        run_id: i64,
        case: &str,
        stream: &str,
    ) -> Result<Vec<(u64, i64, i64)>> {
        self.rows(
            "SELECT r.idx, r.at_ns, r.value_ns FROM raw_samples r JOIN statistics s ON s.id = r.stream_id JOIN cases c ON c.id = s.case_id
             WHERE c.run_id = ?1 AND c.name = ?2 AND s.stream = ?3 ORDER BY r.idx",
            p![run_id, case, stream],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    }
}
