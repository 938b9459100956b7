//! Writing a run: its row, each case with its environment, evidence, streams (statistics,
//! histograms, windows) and raw samples, inside the transaction the caller opened.

use crate::db::{p, Db, DbErr};
use crate::schema::update_profiles;
use crate::{json, RawSource, RunHost};
use rtlab_core::evidence::Evidence;
use rtlab_core::run::{CaseRecord, CaseStatus, RunInfo, RunStatus};
use rtlab_core::schema::{Environment, Stream};
use std::path::Path;

/// The `runs` row and its environment; the new run's id.
pub(crate) fn insert_run(
    db: &mut Db,
    info: &RunInfo,
    host: &RunHost,
    status: RunStatus,
    finished_at: Option<&str>,
) -> std::result::Result<i64, DbErr> {
    let id = db.insert(
        "INSERT INTO runs (scenario, source, scenario_text, scale, command_line, started_at, tool_version, status, finished_at,
            uuid, hostname, machine_id, cpu_model, kernel_release, preemption_model, profiles)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        p![
            info.scenario,
            info.source,
            info.scenario_text,
            info.scale,
            json(&info.command_line),
            info.started_at,
            info.tool_version,
            status.name(),
            finished_at,
            host.uuid,
            host.hostname,
            host.machine_id,
            host.cpu_model,
            host.kernel_release,
            host.preemption_model,
            host.profiles,
        ],
    )?;
    insert_env(db, id, None, &info.environment)?;
    Ok(id)
}

/// One case with everything under it (call inside a transaction).
pub(crate) fn insert_case(
    db: &mut Db,
    run_id: i64,
    c: &CaseRecord,
    raw: &RawSource,
) -> std::result::Result<(), DbErr> {
    let (status, error) = match &c.status {
        CaseStatus::Ok => ("ok", None),
        CaseStatus::Failed { error } => ("failed", Some(error.as_str())),
        CaseStatus::Skipped { reason } => ("skipped", Some(reason.as_str())),
        CaseStatus::Interrupted => ("interrupted", None),
        CaseStatus::Hung { error } => ("hung", Some(error.as_str())),
    };
    let case_id = db.insert(
        "INSERT INTO cases (run_id, idx, name, probe, load, profile, repetition, status, error, started_at, duration_ns, load_report, profile_report, published, has_document)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        p![
            run_id,
            c.index,
            c.name,
            c.probe,
            c.load,
            c.profile,
            c.repetition,
            status,
            error,
            c.started_at,
            c.duration_ns,
            c.load_report.as_ref().map(json),
            c.profile_report.as_ref().map(json),
            c.published.as_ref().map(json),
            c.document.is_some(),
        ],
    )?;
    for (k, v) in &c.params {
        db.execute(
            "INSERT INTO case_params (case_id, key, value) VALUES (?1, ?2, ?3)",
            p![case_id, k, v],
        )?;
    }
    if let Some(ev) = &c.spike_evidence {
        db.execute(
            "INSERT INTO spike_evidence (case_id, json) VALUES (?1, ?2)",
            p![case_id, json(ev)],
        )?;
    }
    if let Some(d) = &c.document {
        db.execute(
            "INSERT INTO documents (case_id, schema_version, tool_name, tool_version, command_line, started_at, duration_ns, interrupted, probe) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            p![case_id, d.schema_version, d.tool.name, d.tool.version, json(&d.command_line), d.started_at, d.duration_ns, d.interrupted, d.probe],
        )?;
        insert_env(db, run_id, Some(case_id), &d.environment)?;
        db.execute(
            "INSERT INTO configurations (case_id, json) VALUES (?1, ?2)",
            p![case_id, json(&d.config)],
        )?;
        if let Some(far) = &d.far {
            db.execute(
                "INSERT INTO far_sides (case_id, json) VALUES (?1, ?2)",
                p![case_id, json(far)],
            )?;
        }
        if let Some(c) = &d.cost {
            let (user, system) = c.cpu_ns();
            let m = c.measuring_total();
            db.execute(
                "INSERT INTO case_costs (case_id, window_ns, cpu_user_ns, cpu_system_ns, measuring_user_ns, measuring_system_ns, minor_faults, major_faults, voluntary_switches, involuntary_switches, cpu_per_message_ns, max_rss_kib, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                p![case_id, c.window_ns(), user, system, m.user_ns, m.system_ns, m.minor_faults, m.major_faults, m.voluntary_switches, m.involuntary_switches, c.cpu_per_message_ns(), c.max_rss_kib, json(c)],
            )?;
        }
        for (i, w) in d.warnings.iter().enumerate() {
            db.execute(
                "INSERT INTO warnings (case_id, pos, code, message) VALUES (?1, ?2, ?3, ?4)",
                p![case_id, i, w.code, w.message],
            )?;
        }
        let mut sids = Vec::with_capacity(d.streams.len());
        for (pos, s) in d.streams.iter().enumerate() {
            sids.push(insert_stream(db, case_id, pos, s)?);
        }
        insert_stream_rows(db, &c.name, &d.streams, &sids, raw)?;
        if let Some(ev) = &d.evidence {
            insert_evidence(db, case_id, ev)?;
        }
    }
    update_profiles(db, run_id)
}

pub(crate) fn insert_env(
    db: &mut Db,
    run_id: i64,
    case_id: Option<i64>,
    e: &Environment,
) -> std::result::Result<(), DbErr> {
    db.execute(
        "INSERT INTO environments (run_id, case_id, hostname, kernel_release, preemption_model, preempt_rt, hz, virtualization, cpu_model, json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        p![run_id, case_id, e.hostname, e.kernel_release, e.preemption_model, e.preempt_rt, e.hz, e.virtualization, e.cpu_model, json(e)],
    )?;
    Ok(())
}

fn insert_evidence(db: &mut Db, case_id: i64, ev: &Evidence) -> std::result::Result<(), DbErr> {
    let c = ev.counters.as_ref();
    db.execute(
        "INSERT INTO evidence (case_id, counters_width_ns, counters_start_monotonic_ns, counters_resolution_ns, last_partial, spike, notes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        p![case_id, c.map(|c| c.width_ns), c.and_then(|c| c.start_monotonic_ns), c.map(|c| c.resolution_ns), c.is_some_and(|c| c.last_partial), ev.spike.as_ref().map(json), json(&ev.notes)],
    )?;
    let windows = c.map(|c| c.windows.as_slice()).unwrap_or_default();
    if windows.is_empty() {
        return Ok(());
    }
    db.bulk(
        "window_counters",
        &[
            "case_id",
            "idx",
            "context_switches",
            "net_rx",
            "timer",
            "interrupts",
            "ksoftirqd_ns",
            "steal_ticks",
        ],
        |put| {
            for (i, w) in windows.iter().enumerate() {
                put(p![
                    case_id,
                    i,
                    w.context_switches,
                    json(&w.net_rx),
                    json(&w.timer),
                    json(&w.interrupts),
                    json(&w.ksoftirqd_ns),
                    json(&w.steal_ticks)
                ])?;
            }
            Ok::<(), DbErr>(())
        },
    )
}

/// One stream's `statistics` row; its id.
fn insert_stream(
    db: &mut Db,
    case_id: i64,
    pos: usize,
    s: &Stream,
) -> std::result::Result<i64, DbErr> {
    let st = &s.stats;
    let h = &s.histogram;
    let sid = db.insert(
        "INSERT INTO statistics (case_id, pos, stream, metric, definition, labels, deadline_ns, count, min_ns, mean_ns, stddev_ns, p50_ns, p90_ns, p99_ns, p99_9_ns, p99_99_ns,
            max_ns, max_index, max_at_ns, missed, overruns, lost, late, duplicates, out_of_order, malformed, raw_file, raw_dropped,
            hist_scheme, hist_exact_below_ns, hist_buckets_per_octave, hist_limit_ns, hist_overflow_high, hist_overflow_low, window_width_ns, start_monotonic_ns)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36)",
        p![
            case_id,
            pos,
            s.name,
            s.metric,
            s.definition,
            json(&s.labels),
            s.deadline_ns,
            st.count,
            st.min_ns,
            st.mean_ns,
            st.stddev_ns,
            st.p50_ns,
            st.p90_ns,
            st.p99_ns,
            st.p99_9_ns,
            st.p99_99_ns,
            st.max_ns,
            st.max_index,
            st.max_at_ns,
            st.missed,
            st.overruns,
            st.lost,
            st.late,
            st.duplicates,
            st.out_of_order,
            st.malformed,
            s.raw_file,
            s.raw_dropped,
            h.scheme,
            h.exact_below_ns,
            h.buckets_per_octave,
            h.limit_ns,
            h.overflow_high,
            h.overflow_low,
            s.windows.width_ns,
            s.start_monotonic_ns,
        ],
    )?;
    Ok(sid)
}

/// What hangs off a case's streams (`sids`: their `statistics` ids, in order): every
/// histogram bucket and window in one bulk insert each, then each stream's raw samples.
fn insert_stream_rows(
    db: &mut Db,
    case: &str,
    streams: &[Stream],
    sids: &[i64],
    raw: &RawSource,
) -> std::result::Result<(), DbErr> {
    let both = || streams.iter().zip(sids.iter().copied());
    if both().any(|(s, _)| !s.histogram.buckets.is_empty()) {
        db.bulk("histogram_buckets", &["stream_id", "pos", "low_ns", "high_ns", "count"], |put| {
            for (s, sid) in both() {
                for (i, x) in s.histogram.buckets.iter().enumerate() {
                    put(p![sid, i, x.low_ns, x.high_ns, x.count])?;
                }
            }
            Ok::<(), DbErr>(())
        })?;
    }
    let windows = |s: &Stream| s.windows.max_ns.len().max(s.windows.count.len());
    if both().any(|(s, _)| windows(s) > 0) {
        db.bulk("windows", &["stream_id", "idx", "max_ns", "count"], |put| {
            for (s, sid) in both() {
                for i in 0..windows(s) {
                    put(p![
                        sid,
                        i,
                        s.windows.max_ns.get(i).copied().flatten(),
                        s.windows.count.get(i).copied().unwrap_or(0)
                    ])?;
                }
            }
            Ok::<(), DbErr>(())
        })?;
    }
    for (s, sid) in both() {
        match raw {
            RawSource::Files => {
                if let Some(file) = &s.raw_file {
                    import_raw(db, sid, &s.name, Path::new(file))?;
                }
            }
            RawSource::Store { from, run } => from.copy_raw(*run, case, &s.name, sid, db)?,
        }
    }
    Ok(())
}

pub(crate) const RAW_COLS: &[&str] = &["stream_id", "idx", "at_ns", "value_ns"];

/// Raw samples of `stream` from a raw file (`stream,index,at_ns,value_ns`); a file that is
/// gone or unreadable is skipped (its path stays in `statistics.raw_file`).
fn import_raw(db: &mut Db, sid: i64, stream: &str, file: &Path) -> std::result::Result<(), DbErr> {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(file) else { return Ok(()) };
    db.bulk("raw_samples", RAW_COLS, |put| {
        for line in std::io::BufReader::new(f).lines().map_while(|l| l.ok()) {
            let mut it = line.split(',');
            let (Some(name), Some(i), Some(at), Some(v)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                continue;
            };
            if name != stream {
                continue;
            }
            if let (Ok(i), Ok(at), Ok(v)) = (i.parse::<i64>(), at.parse::<i64>(), v.parse::<i64>())
            {
                put(p![sid, i, at, v])?;
            }
        }
        Ok::<(), DbErr>(())
    })
}
