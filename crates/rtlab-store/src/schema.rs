//! The schema: the migrations in order (`PRAGMA user_version` counts them), the query behind
//! [`crate::Store::runs`], and migration 5's data step in Rust.

use crate::db::{p, Db, DbErr};
use crate::new_uuid;

/// Migration `i` brings a store from schema version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 0 -> 1: the first schema.
    r#"
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scenario TEXT NOT NULL,
    source TEXT NOT NULL,
    scenario_text TEXT NOT NULL,
    scale REAL NOT NULL,
    command_line TEXT NOT NULL,          -- JSON array
    started_at TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    status TEXT NOT NULL,
    finished_at TEXT
);
CREATE TABLE cases (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    probe TEXT NOT NULL,
    load TEXT NOT NULL,
    profile TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    status TEXT NOT NULL,                -- ok | failed | skipped | interrupted
    error TEXT,                          -- failed: the error; skipped: the reason
    started_at TEXT NOT NULL,
    duration_ns INTEGER NOT NULL,
    load_report TEXT,                    -- JSON
    profile_report TEXT,                 -- JSON
    published TEXT,                      -- JSON (Published)
    has_document INTEGER NOT NULL,
    UNIQUE (run_id, name)
);
-- The machine: one row for the run (case_id NULL) and one per measured case.
CREATE TABLE environments (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    case_id INTEGER REFERENCES cases(id),
    hostname TEXT NOT NULL,
    kernel_release TEXT NOT NULL,
    preemption_model TEXT NOT NULL,
    preempt_rt INTEGER NOT NULL,
    hz INTEGER,
    virtualization TEXT,
    cpu_model TEXT NOT NULL,
    json TEXT NOT NULL                   -- the whole Environment
);
CREATE TABLE case_params (
    case_id INTEGER NOT NULL REFERENCES cases(id),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (case_id, key)
);
-- The result document of a case (one row per case that measured).
CREATE TABLE documents (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    schema_version INTEGER NOT NULL,
    tool_name TEXT NOT NULL,
    tool_version TEXT NOT NULL,
    command_line TEXT NOT NULL,          -- JSON array
    started_at TEXT NOT NULL,
    duration_ns INTEGER NOT NULL,
    interrupted INTEGER NOT NULL,
    probe TEXT NOT NULL
);
CREATE TABLE configurations (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    json TEXT NOT NULL
);
CREATE TABLE warnings (
    case_id INTEGER NOT NULL REFERENCES cases(id),
    pos INTEGER NOT NULL,
    code TEXT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (case_id, pos)
);
-- One row per stream: the statistics with the result-schema keys as columns.
CREATE TABLE statistics (
    id INTEGER PRIMARY KEY,
    case_id INTEGER NOT NULL REFERENCES cases(id),
    pos INTEGER NOT NULL,
    stream TEXT NOT NULL,
    metric TEXT NOT NULL,
    definition TEXT NOT NULL,
    labels TEXT NOT NULL,                -- JSON object
    deadline_ns INTEGER NOT NULL,
    count INTEGER NOT NULL,
    min_ns INTEGER, mean_ns INTEGER, stddev_ns INTEGER,
    p50_ns INTEGER, p90_ns INTEGER, p99_ns INTEGER, p99_9_ns INTEGER, p99_99_ns INTEGER,
    max_ns INTEGER, max_index INTEGER, max_at_ns INTEGER,
    missed INTEGER, overruns INTEGER, lost INTEGER, late INTEGER,
    duplicates INTEGER, out_of_order INTEGER, malformed INTEGER,
    raw_file TEXT,
    raw_dropped INTEGER,
    hist_scheme TEXT NOT NULL,
    hist_exact_below_ns INTEGER NOT NULL,
    hist_buckets_per_octave INTEGER NOT NULL,
    hist_limit_ns INTEGER NOT NULL,
    hist_overflow_high INTEGER NOT NULL,
    hist_overflow_low INTEGER NOT NULL,
    window_width_ns INTEGER NOT NULL,
    UNIQUE (case_id, pos)
);
CREATE TABLE histogram_buckets (
    stream_id INTEGER NOT NULL REFERENCES statistics(id),
    pos INTEGER NOT NULL,
    low_ns INTEGER NOT NULL,
    high_ns INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (stream_id, pos)
);
CREATE TABLE windows (
    stream_id INTEGER NOT NULL REFERENCES statistics(id),
    idx INTEGER NOT NULL,
    max_ns INTEGER,                      -- NULL: no sample in the window
    count INTEGER NOT NULL,
    PRIMARY KEY (stream_id, idx)
);
CREATE TABLE spike_evidence (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    json TEXT NOT NULL
);
-- Raw samples, when the probe wrote a raw file (stream,index,at_ns,value_ns) and it was readable.
CREATE TABLE raw_samples (
    stream_id INTEGER NOT NULL REFERENCES statistics(id),
    idx INTEGER NOT NULL,
    at_ns INTEGER NOT NULL,
    value_ns INTEGER NOT NULL
);
CREATE INDEX raw_samples_stream ON raw_samples(stream_id);
CREATE INDEX cases_run ON cases(run_id);
"#,
    // 1 -> 2: spike evidence of result documents (schema 2): the kernel counters per window,
    // aligned with the streams' windows (per-CPU values as JSON arrays, index = CPU), and
    // the rest (width, spike capture, notes) as JSON.
    r#"
CREATE TABLE evidence (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    counters_width_ns INTEGER,           -- NULL: no counters were sampled
    counters_start_monotonic_ns INTEGER, -- the grid's origin (NULL: the sampling's own start)
    counters_resolution_ns INTEGER,
    last_partial INTEGER NOT NULL,
    spike TEXT,                          -- JSON (SpikeEvidence)
    notes TEXT NOT NULL                  -- JSON array
);
ALTER TABLE statistics ADD COLUMN start_monotonic_ns INTEGER;
CREATE TABLE window_counters (
    case_id INTEGER NOT NULL REFERENCES cases(id),
    idx INTEGER NOT NULL,
    context_switches INTEGER NOT NULL,
    net_rx TEXT NOT NULL,
    timer TEXT NOT NULL,
    interrupts TEXT NOT NULL,
    ksoftirqd_ns TEXT NOT NULL,
    steal_ticks TEXT NOT NULL,
    PRIMARY KEY (case_id, idx)
);
"#,
    // 2 -> 3: resumable runs (`rtlab run PRESET --resume RUN`): one row per time a run was
    // reopened, and the indexes that keep `runs` a single pass over the runs however many
    // cases and environments the store holds.
    r#"
CREATE TABLE run_resumptions (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    pos INTEGER NOT NULL,                -- 0 for the first resumption
    resumed_at TEXT NOT NULL,
    previous_status TEXT NOT NULL,       -- the run's status before it was reopened
    command_line TEXT NOT NULL,          -- JSON array: the resuming command
    dropped_cases TEXT NOT NULL,         -- JSON array of the interrupted cases' names, removed to be re-run
    PRIMARY KEY (run_id, pos)
);
CREATE INDEX environments_run ON environments(run_id, case_id);
CREATE INDEX cases_run_status ON cases(run_id, status);
"#,
    // 3 -> 4: the far side of a case measured with `--far` (its host, link, clocks,
    // environment, kernel counters, profile and load), as the document's `far` JSON.
    r#"
CREATE TABLE far_sides (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    json TEXT NOT NULL                   -- JSON (FarSide)
);
"#,
    // 4 -> 5: a fleet of hosts in one store (PostgreSQL) or pushed into one: a run's global
    // identity (`uuid`, beside the short `id` a person types, which is only unique in one
    // store) and its host as columns a query can filter on (the run's environment; the
    // machine id from /etc/machine-id; the profiles of its cases, comma-separated). Runs of
    // older stores get a new uuid and their host from their environment (machine id
    // unknown: NULL) when migrated (`backfill_v5`).
    r#"
ALTER TABLE runs ADD COLUMN uuid TEXT;
ALTER TABLE runs ADD COLUMN hostname TEXT;
ALTER TABLE runs ADD COLUMN machine_id TEXT;
ALTER TABLE runs ADD COLUMN cpu_model TEXT;
ALTER TABLE runs ADD COLUMN kernel_release TEXT;
ALTER TABLE runs ADD COLUMN preemption_model TEXT;
ALTER TABLE runs ADD COLUMN profiles TEXT;
UPDATE runs SET
    hostname = (SELECT e.hostname FROM environments e WHERE e.run_id = runs.id AND e.case_id IS NULL),
    cpu_model = (SELECT e.cpu_model FROM environments e WHERE e.run_id = runs.id AND e.case_id IS NULL),
    kernel_release = (SELECT e.kernel_release FROM environments e WHERE e.run_id = runs.id AND e.case_id IS NULL),
    preemption_model = (SELECT e.preemption_model FROM environments e WHERE e.run_id = runs.id AND e.case_id IS NULL);
CREATE UNIQUE INDEX runs_uuid ON runs(uuid);
CREATE INDEX runs_host ON runs(hostname, kernel_release);
"#,
    // 5 -> 6: the verdicts of a run's gates (`[[gate]]`, `rtlab run --gate`), one row per
    // gate, case and stream (case and stream NULL where the verdict has none), so that
    // `compare --baseline` finds the last good run with one query (see gates.rs).
    r#"
CREATE TABLE gate_verdicts (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    pos INTEGER NOT NULL,
    gate TEXT NOT NULL,                  -- CASE:STREAM:METRIC<=VALUE
    origin TEXT NOT NULL,                -- gate[N] (the scenario's) or --gate
    case_name TEXT,
    stream TEXT,
    metric TEXT NOT NULL,                -- p99_9 | max | missed | lost
    limit_text TEXT NOT NULL,
    value_text TEXT,                     -- the measured value, as shown
    verdict TEXT NOT NULL,               -- kept | broken | failed | skipped | unmatched | no_case
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, pos)
);
"#,
    // 6 -> 7: a case's trend across a fleet's runs (`rtlab serve`) reads its rows by name.
    r#"
CREATE INDEX cases_name ON cases(name, run_id);
"#,
    // 7 -> 8: what each case cost (the document's `cost`): its headline figures as columns a
    // query can filter on (the near side's CPU over its windows, the measuring threads'
    // CPU, page faults and context switches, CPU per message, max RSS), and the whole cost
    // (every window, measuring thread and thread group) as JSON, which is what is read back.
    r#"
CREATE TABLE case_costs (
    case_id INTEGER PRIMARY KEY REFERENCES cases(id),
    window_ns INTEGER NOT NULL,          -- the windows' length, summed
    cpu_user_ns INTEGER NOT NULL,        -- every thread of the process (by group), user
    cpu_system_ns INTEGER NOT NULL,
    measuring_user_ns INTEGER NOT NULL,  -- rtlab's measuring threads (getrusage)
    measuring_system_ns INTEGER NOT NULL,
    minor_faults INTEGER NOT NULL,       -- of the measuring threads
    major_faults INTEGER NOT NULL,
    voluntary_switches INTEGER NOT NULL,
    involuntary_switches INTEGER NOT NULL,
    cpu_per_message_ns INTEGER,          -- NULL: no messages
    max_rss_kib INTEGER,
    json TEXT NOT NULL                   -- JSON (Cost)
);
"#,
];

/// The query behind [`Store::runs`]: one pass over `runs`; the case counts and the machine
/// are indexed look-ups (`cases_run_status`, `environments_run`), no document is read, so
/// listing stays fast with thousands of runs.
pub const RUNS_QUERY: &str = "SELECT r.id, r.scenario, r.started_at, r.status,
        (SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id),
        (SELECT COUNT(*) FROM cases c WHERE c.run_id = r.id AND c.status = 'failed'),
        e.hostname, e.kernel_release
 FROM runs r LEFT JOIN environments e ON e.run_id = r.id AND e.case_id IS NULL
 ORDER BY r.id";

/// The schema version this rtlab writes.
pub fn schema_version() -> u32 {
    MIGRATIONS.len() as u32
}

/// Migration `version`'s data step in Rust, in the migration's transaction: schema 5 gives
/// every run without one a uuid and the profiles of its cases.
pub(crate) fn backfill(db: &mut Db, version: u32) -> std::result::Result<(), DbErr> {
    if version != 5 {
        return Ok(());
    }
    let ids: Vec<i64> = db
        .query("SELECT id FROM runs WHERE uuid IS NULL", p![])?
        .iter()
        .map(|r| r.get(0))
        .collect::<std::result::Result<_, _>>()?;
    for id in ids {
        db.execute("UPDATE runs SET uuid = ?1 WHERE id = ?2", p![new_uuid(), id])?;
        update_profiles(db, id)?;
    }
    Ok(())
}

/// `runs.profiles`: the distinct profiles of the run's cases, sorted, comma-separated.
pub(crate) fn update_profiles(db: &mut Db, run_id: i64) -> std::result::Result<(), DbErr> {
    let profiles: Vec<String> = db
        .query("SELECT DISTINCT profile FROM cases WHERE run_id = ?1 ORDER BY profile", p![run_id])?
        .iter()
        .map(|r| r.get(0))
        .collect::<std::result::Result<_, _>>()?;
    let joined = (!profiles.is_empty()).then(|| profiles.join(","));
    db.execute("UPDATE runs SET profiles = ?1 WHERE id = ?2", p![joined, run_id])?;
    Ok(())
}
