//! rtlab-store: every run kept in one embedded SQLite file (default `results/rtlab.db`), or
//! in a team's PostgreSQL database (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`): one
//! [`Store`] API on both, the same schema and migrations (`db.rs` holds the differences).
//!
//! Contract:
//! - A run has a global identity (`runs.uuid`) beside its short id, and its host as columns
//!   ([`RunHost`]); [`Store::push_run`] copies a run into another store once, whole (push.rs).
//! - A PostgreSQL password is never shown: [`Store::label`] and every error carry the URL
//!   redacted (`url.rs`); every query is parameterized.
//! - The schema is versioned with `PRAGMA user_version` and brought forward by the
//!   [`MIGRATIONS`] in order; a file written by a NEWER rtlab is refused with
//!   [`StoreError::NewerSchema`] before anything is written to it.
//! - [`Store::begin_run`] stores the run (status `running`); [`Store::add_case`] commits each
//!   case in its own transaction, so a Ctrl-C or a crash keeps every finished case;
//!   [`Store::finish_run`] records how the run ended.
//! - [`Store::load_run`] gives back every [`CaseRecord`] exactly as it was added (tested).
//! - Statistics are one row per stream with the result-schema keys as columns
//!   (`count, min_ns, ..., p99_9_ns, ..., missed, lost, ...`), so the file can be queried
//!   with plain SQL; histograms, per-window maxima, warnings, spike evidence and raw samples
//!   have their own tables (see `docs/store.md`).
//! - An interrupted run is continued with [`Store::resume_point`] (what is stored),
//!   [`Store::reopen_run`] (status back to `running`, interrupted cases removed to be
//!   re-run, the resumption noted), then [`Store::add_case`] and [`Store::finish_run`] as
//!   for a new run (see `resume.rs`).
//! - [`Store::runs`] is one query over the runs table (no document is loaded).
//! - Never used in a hot loop: a case is stored after it has been measured.

#![forbid(unsafe_code)]

mod db;
pub mod export;
mod fleet;
mod gates;
mod push;
mod resume;
pub mod url;

pub use push::Pushed;
pub use resume::{ResumePoint, Resumption, StoredCase, StoredCaseStatus};

use db::{p, Db, DbErr, Row, V};
use rtlab_core::evidence::{Evidence, KernelCounters, WindowCounters};
use rtlab_core::histogram::{HistogramBucket, HistogramData};
use rtlab_core::run::{CaseRecord, CaseStatus, Published, Run, RunInfo, RunStatus, RunSummary};
use rtlab_core::schema::{Environment, ResultDocument, Stream, ToolInfo, Warning};
use rtlab_core::stats::Summary;
use rtlab_core::windows::WindowData;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use url::{Location, PgUrl};

/// The default store file, relative to the working directory.
pub const DEFAULT_DB: &str = "results/rtlab.db";

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

/// What can go wrong with the store; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: store schema version {found} is newer than this rtlab supports ({supported}); use a newer rtlab (nothing was changed)")]
    NewerSchema { path: String, found: u32, supported: u32 },
    #[error(
        "{path}: no store here (run a scenario first, e.g. `rtlab run quick`, or give --db FILE)"
    )]
    Missing { path: String },
    #[error("{path}: {what}")]
    Sql { path: String, what: String },
    #[error("{path}: no run with id {id} (see `rtlab runs`)")]
    UnknownRun { path: String, id: i64 },
    #[error("{path}: the store holds no run yet")]
    Empty { path: String },
    #[error("{path}: run {run}: a case named '{name}' is already stored")]
    DuplicateCase { path: String, run: i64, name: String },
    #[error("{path}: run {id} is complete: there is nothing to resume (start a new run instead)")]
    NotResumable { path: String, id: i64 },
    #[error("{url}: {what}")]
    BadUrl { url: String, what: String },
    #[error("{url}: cannot connect: {what}")]
    Connect { url: String, what: String },
    #[error("{path}: corrupt record: {what}")]
    Corrupt { path: String, what: String },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// An open store: a SQLite file or a PostgreSQL database, one API (see `db.rs` for where
/// the two differ).
pub struct Store {
    db: RefCell<Db>,
    /// How the store is named in every message: the file, or the URL with its password
    /// redacted.
    label: String,
    path: PathBuf,
    /// The password of a PostgreSQL URL, scrubbed from every error text as a last guard.
    secret: Option<String>,
    /// The URL a PostgreSQL store was opened with (for [`Store::reconnect`]).
    pg: Option<PgUrl>,
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A query's row was not there, or the database failed.
#[derive(Debug)]
enum QErr {
    NoRow,
    Db(DbErr),
}

impl std::fmt::Display for QErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QErr::NoRow => f.write_str("the query returned no row"),
            QErr::Db(e) => f.write_str(&e.what),
        }
    }
}

impl std::fmt::Display for DbErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}

trait OptionalRow<T> {
    fn optional(self) -> std::result::Result<Option<T>, QErr>;
}

impl<T> OptionalRow<T> for std::result::Result<T, QErr> {
    fn optional(self) -> std::result::Result<Option<T>, QErr> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(QErr::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// This machine's id (`/etc/machine-id`, systemd's), when it has one.
fn machine_id() -> Option<String> {
    std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A new global run identity.
fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Who measured a run: its global identity and its host, as stored in the `runs` row.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunHost {
    /// The run's global identity (the `id` is only unique within one store).
    pub uuid: String,
    pub hostname: Option<String>,
    /// `/etc/machine-id` of the host that measured (NULL for runs stored before schema 5).
    pub machine_id: Option<String>,
    pub cpu_model: Option<String>,
    pub kernel_release: Option<String>,
    pub preemption_model: Option<String>,
    /// The profiles of the run's cases, comma-separated, sorted.
    pub profiles: Option<String>,
}

impl Store {
    /// Open the store at `path` (a file, or a `postgres://` URL), creating it (and the file's
    /// directory) when missing, and migrate it to the current schema. Refuses a store from a
    /// newer schema untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        if let Some(url) = Self::pg_url(path)? {
            return Self::open_pg(url, true);
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Sql {
                path: path.display().to_string(),
                what: format!("cannot create the directory: {e}"),
            })?;
        }
        Self::open_inner(path)
    }

    /// Open an existing store (for reading commands): a missing file (or a PostgreSQL
    /// database without rtlab's tables) is an error, not a new store.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref();
        if let Some(url) = Self::pg_url(path)? {
            return Self::open_pg(url, false);
        }
        if !path.exists() {
            return Err(StoreError::Missing { path: path.display().to_string() });
        }
        Self::open_inner(path)
    }

    fn pg_url(path: &Path) -> Result<Option<PgUrl>> {
        let s = path.to_string_lossy();
        match Location::parse(&s) {
            Ok(Location::Postgres(u)) => Ok(Some(u)),
            Ok(Location::Sqlite(_)) => Ok(None),
            Err(what) => Err(StoreError::BadUrl { url: url::redact(&s), what }),
        }
    }

    fn open_pg(url: PgUrl, create: bool) -> Result<Store> {
        let label = url.redacted();
        let mut cfg = postgres::Config::new();
        cfg.user(&url.user)
            .host(&url.host)
            .port(url.port)
            .dbname(&url.dbname)
            .application_name("rtlab")
            .connect_timeout(std::time::Duration::from_secs(10))
            // a link cut mid-push is an error within half a minute, not a hang: data unacked
            // for 30 s, or an idle link silent for 10 + 3 x 5 s, closes the connection
            .tcp_user_timeout(std::time::Duration::from_secs(30))
            .keepalives(true)
            .keepalives_idle(std::time::Duration::from_secs(10))
            .keepalives_interval(std::time::Duration::from_secs(5))
            .keepalives_retries(3);
        if let Some(p) = &url.password {
            cfg.password(p);
        }
        let scrub = |s: String| match &url.password {
            Some(p) if !p.is_empty() => s.replace(p.as_str(), "***"),
            _ => s,
        };
        let client = cfg.connect(postgres::NoTls).map_err(|e| StoreError::Connect {
            url: label.clone(),
            what: scrub(db::pg_message(&e)),
        })?;
        let mut s = Store {
            db: RefCell::new(Db::Postgres { client: Box::new(client), stmts: Default::default() }),
            path: PathBuf::from(&label),
            label,
            secret: url.password.clone(),
            pg: Some(url.clone()),
        };
        if !create {
            let n: i64 = s
                .query_row(
                    "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'rtlab_schema' AND table_schema = current_schema()",
                    p![],
                    |r| r.get(0),
                )
                .map_err(|e| s.err(e))?;
            if n == 0 {
                return Err(StoreError::Missing { path: s.label });
            }
        }
        s.migrate()?;
        Ok(s)
    }

    fn open_inner(path: &Path) -> Result<Store> {
        let p = path.display().to_string();
        let conn = rusqlite::Connection::open(path)
            .map_err(|e| StoreError::Sql { path: p.clone(), what: e.to_string() })?;
        // a report read while `rtlab run` writes a case waits for it instead of failing
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| StoreError::Sql { path: p.clone(), what: e.to_string() })?;
        let mut s = Store {
            db: RefCell::new(Db::Sqlite(conn)),
            label: p,
            path: path.to_path_buf(),
            secret: None,
            pg: None,
        };
        s.migrate()?;
        Ok(s)
    }

    /// A new connection to the same store (after a PostgreSQL server went away, or a file's
    /// disk filled): what a caller does before trying a write again.
    pub fn reconnect(&mut self) -> Result<()> {
        let fresh = match &self.pg {
            Some(url) => Self::open_pg(url.clone(), false)?,
            None => Self::open_inner(&self.path.clone())?,
        };
        *self = fresh;
        Ok(())
    }

    /// The file of this store (for PostgreSQL: its URL, password redacted).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How this store is named in messages: the file, or the URL with its password redacted.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// True for a PostgreSQL store.
    pub fn is_postgres(&self) -> bool {
        self.db.borrow().is_postgres()
    }

    fn scrub(&self, s: String) -> String {
        match &self.secret {
            Some(p) if !p.is_empty() => s.replace(p.as_str(), "***"),
            _ => s,
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Sql { path: self.label.clone(), what: self.scrub(e.to_string()) }
    }

    fn corrupt(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt { path: self.label.clone(), what: what.to_string() }
    }

    fn unknown_run(&self, id: i64) -> StoreError {
        StoreError::UnknownRun { path: self.label.clone(), id }
    }

    /// The first row of a query, read by `f` (`QErr::NoRow` when there is none).
    fn query_row<T>(
        &self,
        sql: &str,
        params: &[V],
        f: impl FnOnce(&Row) -> std::result::Result<T, DbErr>,
    ) -> std::result::Result<T, QErr> {
        let row = self.db.borrow_mut().query_opt(sql, params).map_err(QErr::Db)?;
        f(&row.ok_or(QErr::NoRow)?).map_err(QErr::Db)
    }

    /// `f` in one transaction on this store's connection (rolled back when it fails).
    fn transaction<T>(
        &self,
        f: impl FnOnce(&mut Db) -> std::result::Result<T, DbErr>,
    ) -> std::result::Result<T, DbErr> {
        self.db.borrow_mut().transaction(f)
    }

    fn migrate(&mut self) -> Result<()> {
        let supported = schema_version();
        let label = self.label.clone();
        let sql_err = |what: String| StoreError::Sql { path: label.clone(), what };
        let db = self.db.get_mut();
        if db.is_postgres() {
            // one transaction under an advisory lock: hosts opening a new database at once
            // migrate it once, one after the other
            let mut newer = None;
            let r = db.transaction(|db| {
                db.execute("SELECT pg_advisory_xact_lock(726284)", p![])?;
                db.batch("CREATE TABLE IF NOT EXISTS rtlab_schema (version BIGINT NOT NULL)")?;
                let found: Option<u32> =
                    match db.query_opt("SELECT version FROM rtlab_schema", p![])? {
                        Some(r) => Some(r.get(0)?),
                        None => None,
                    };
                let from = found.unwrap_or(0);
                if from > supported {
                    newer = Some(from);
                    return Err(DbErr::new("newer schema")); // rolled back: nothing changed
                }
                for v in from..supported {
                    db.batch(&db::pg_ddl(MIGRATIONS[v as usize]))
                        .and_then(|_| backfill(db, v + 1))
                        .map_err(|e| DbErr::new(format!("migration to schema {}: {e}", v + 1)))?;
                }
                if found.is_none() {
                    db.execute("INSERT INTO rtlab_schema (version) VALUES (?1)", p![supported])?;
                } else if from < supported {
                    db.execute("UPDATE rtlab_schema SET version = ?1", p![supported])?;
                }
                Ok(())
            });
            if let Some(found) = newer {
                return Err(StoreError::NewerSchema { path: label, found, supported });
            }
            return r.map_err(|e| sql_err(e.what));
        }
        // reading the version is the first access: a non-database file fails here, untouched
        let found: u32 = db
            .query_one("PRAGMA user_version", p![])
            .and_then(|r| r.get(0))
            .map_err(|e| sql_err(e.what))?;
        if found > supported {
            return Err(StoreError::NewerSchema { path: label, found, supported });
        }
        db.batch("PRAGMA foreign_keys = ON;").map_err(|e| sql_err(e.what))?;
        for v in found..supported {
            db.transaction(|db| {
                db.batch(MIGRATIONS[v as usize])?;
                backfill(db, v + 1)?;
                db.batch(&format!("PRAGMA user_version = {}", v + 1))
            })
            .map_err(|e| sql_err(format!("migration to schema {}: {e}", v + 1)))?;
        }
        Ok(())
    }

    /// The schema version of the open store.
    pub fn file_schema_version(&self) -> Result<u32> {
        let sql = if self.is_postgres() {
            "SELECT version FROM rtlab_schema"
        } else {
            "PRAGMA user_version"
        };
        self.query_row(sql, p![], |r| r.get(0)).map_err(|e| self.err(e))
    }

    /// Store a new run (status `running`) and return its id. The run gets a new uuid and
    /// this machine as its host.
    pub fn begin_run(&mut self, info: &RunInfo) -> Result<i64> {
        let host = RunHost {
            uuid: new_uuid(),
            hostname: Some(info.environment.hostname.clone()),
            machine_id: machine_id(),
            cpu_model: Some(info.environment.cpu_model.clone()),
            kernel_release: Some(info.environment.kernel_release.clone()),
            preemption_model: Some(info.environment.preemption_model.clone()),
            profiles: None,
        };
        self.transaction(|db| insert_run(db, info, &host, RunStatus::Running, None))
            .map_err(|e| self.err(e))
    }

    /// Store one case of run `run_id`, in its own transaction.
    pub fn add_case(&mut self, run_id: i64, c: &CaseRecord) -> Result<()> {
        self.check_run(run_id)?;
        let exists: Option<i64> = self
            .query_row(
                "SELECT id FROM cases WHERE run_id = ?1 AND name = ?2",
                p![run_id, c.name],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        if exists.is_some() {
            return Err(StoreError::DuplicateCase {
                path: self.label.clone(),
                run: run_id,
                name: c.name.clone(),
            });
        }
        self.transaction(|db| insert_case(db, run_id, c, &RawSource::Files))
            .map_err(|e| self.err(e))
    }

    /// Record how run `run_id` ended (and when).
    pub fn finish_run(&mut self, run_id: i64, status: RunStatus) -> Result<()> {
        self.check_run(run_id)?;
        self.db
            .borrow_mut()
            .execute(
                "UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3",
                p![status.name(), now_rfc3339(), run_id],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn check_run(&self, id: i64) -> Result<()> {
        let n: i64 = self
            .query_row("SELECT COUNT(*) FROM runs WHERE id = ?1", p![id], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if n == 0 {
            return Err(self.unknown_run(id));
        }
        Ok(())
    }

    /// The global identity and host of run `id`.
    pub fn run_host(&self, id: i64) -> Result<RunHost> {
        self.query_row(
            "SELECT uuid, hostname, machine_id, cpu_model, kernel_release, preemption_model, profiles FROM runs WHERE id = ?1",
            p![id],
            |r| {
                Ok(RunHost {
                    uuid: r.get::<Option<String>>(0)?.unwrap_or_default(),
                    hostname: r.get(1)?,
                    machine_id: r.get(2)?,
                    cpu_model: r.get(3)?,
                    kernel_release: r.get(4)?,
                    preemption_model: r.get(5)?,
                    profiles: r.get(6)?,
                })
            },
        )
        .optional()
        .map_err(|e| self.err(e))?
        .ok_or_else(|| self.unknown_run(id))
    }

    /// The id of the run with global identity `uuid`, when this store holds it.
    pub fn run_by_uuid(&self, uuid: &str) -> Result<Option<i64>> {
        self.query_row("SELECT id FROM runs WHERE uuid = ?1", p![uuid], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every run, oldest first.
    pub fn runs(&self) -> Result<Vec<RunSummary>> {
        self.summaries(RUNS_QUERY, p![])
    }

    /// The runs a query selects, its columns in [`RUNS_QUERY`]'s order (id, scenario,
    /// started_at, status, cases, failed, hostname, kernel_release).
    pub(crate) fn summaries(&self, sql: &str, params: &[V]) -> Result<Vec<RunSummary>> {
        let rows = self.rows(sql, params, |r| {
            Ok((
                r.get::<i64>(0)?,
                r.get::<String>(1)?,
                r.get::<String>(2)?,
                r.get::<String>(3)?,
                r.get::<u32>(4)?,
                r.get::<u32>(5)?,
                r.get::<Option<String>>(6)?,
                r.get::<Option<String>>(7)?,
            ))
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, scenario, started_at, status, cases, failed, host, kernel) in rows {
            out.push(RunSummary {
                id,
                scenario,
                started_at,
                status: self.run_status(&status)?,
                cases,
                failed,
                hostname: host.unwrap_or_default(),
                kernel_release: kernel.unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Run `id`'s status and finish time.
    pub(crate) fn status_of(&self, id: i64) -> Result<(RunStatus, Option<String>)> {
        let (status, finished): (String, Option<String>) = self
            .query_row("SELECT status, finished_at FROM runs WHERE id = ?1", p![id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(|e| self.err(e))?;
        Ok((self.run_status(&status)?, finished))
    }

    fn run_status(&self, s: &str) -> Result<RunStatus> {
        Ok(match s {
            "running" => RunStatus::Running,
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            other => return Err(self.corrupt(format!("unknown run status '{other}'"))),
        })
    }

    /// The id of the newest run.
    pub fn latest_run(&self) -> Result<i64> {
        let id: Option<i64> = self
            .query_row("SELECT MAX(id) FROM runs", p![], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        id.ok_or_else(|| StoreError::Empty { path: self.label.clone() })
    }

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
    fn rows<T>(
        &self,
        sql: &str,
        params: &[V],
        mut row: impl FnMut(&Row) -> std::result::Result<T, DbErr>,
    ) -> Result<Vec<T>> {
        let rows = self.db.borrow_mut().query(sql, params).map_err(|e| self.err(e))?;
        rows.iter().map(|r| row(r).map_err(|e| self.err(e))).collect()
    }

    fn parse<T: serde::de::DeserializeOwned>(&self, s: &str) -> Result<T> {
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

pub(crate) fn json<T: serde::Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("plain serde data serializes")
}

/// Where the raw samples of a stored case come from: the raw files the probes wrote (a run
/// measured here), or the rows another store holds for the same case (a pushed run: read
/// stream by stream as the target takes them, never all in memory).
pub(crate) enum RawSource<'a> {
    Files,
    Store { from: &'a Store, run: i64 },
}

/// Migration `version`'s data step in Rust, in the migration's transaction: schema 5 gives
/// every run without one a uuid and the profiles of its cases.
fn backfill(db: &mut Db, version: u32) -> std::result::Result<(), DbErr> {
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
fn update_profiles(db: &mut Db, run_id: i64) -> std::result::Result<(), DbErr> {
    let profiles: Vec<String> = db
        .query("SELECT DISTINCT profile FROM cases WHERE run_id = ?1 ORDER BY profile", p![run_id])?
        .iter()
        .map(|r| r.get(0))
        .collect::<std::result::Result<_, _>>()?;
    let joined = (!profiles.is_empty()).then(|| profiles.join(","));
    db.execute("UPDATE runs SET profiles = ?1 WHERE id = ?2", p![joined, run_id])?;
    Ok(())
}

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
