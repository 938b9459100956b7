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
mod insert;
mod load;
mod push;
mod resume;
mod retention;
mod schema;
pub mod url;

pub use push::Pushed;
pub use resume::{ResumePoint, Resumption, StoredCase, StoredCaseStatus};
pub use schema::{schema_version, MIGRATIONS, RUNS_QUERY};

use db::{p, Db, DbErr, Row, V};
use insert::{insert_case, insert_run};
use rtlab_core::run::{CaseRecord, RunInfo, RunStatus, RunSummary};
use schema::backfill;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use url::{Location, PgUrl};

/// The default store file, relative to the working directory.
pub const DEFAULT_DB: &str = "results/rtlab.db";

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
