//! The two backends of the store behind one small interface: SQLite (rusqlite, embedded)
//! and PostgreSQL (the `postgres` crate, synchronous, no TLS).
//!
//! Contract:
//! - SQL is written once, in SQLite's spelling with numbered parameters (`?1`, `?2`); this
//!   file is the one place the dialects differ: parameters become `$1` for PostgreSQL,
//!   [`Db::insert`] returns the new row's id (`last_insert_rowid` / `RETURNING id`), the
//!   schema version is `PRAGMA user_version` / the table `rtlab_schema`, and [`pg_ddl`]
//!   turns the migrations' DDL into PostgreSQL's (64-bit integers, `BIGSERIAL` ids).
//! - Values cross as [`V`] (NULL, 64-bit integer, double, text): booleans are stored as
//!   0/1 integers on both, so a column means the same on both stores.
//! - Every query is parameterized; values are never formatted into SQL.
//! - [`Db::transaction`] runs a closure between BEGIN and COMMIT, and rolls back when it
//!   fails: a run or a case is stored whole or not at all.

use std::collections::HashMap;

/// A value bound to or read from a statement.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V {
    Null,
    I(i64),
    F(f64),
    T(String),
}

/// An error of the database layer (the store adds where).
#[derive(Debug)]
pub(crate) struct DbErr {
    pub what: String,
    /// PostgreSQL's SQLSTATE (e.g. `23505`, a unique key taken), when the server said one.
    pub code: Option<String>,
}

impl DbErr {
    pub fn new(what: impl Into<String>) -> DbErr {
        DbErr { what: what.into(), code: None }
    }
    /// A row with the same unique key exists (another host stored it first).
    pub fn is_unique_violation(&self) -> bool {
        self.code.as_deref() == Some("23505") || self.what.contains("UNIQUE constraint failed")
    }
}

impl From<rusqlite::Error> for DbErr {
    fn from(e: rusqlite::Error) -> DbErr {
        DbErr::new(e.to_string())
    }
}

impl From<postgres::Error> for DbErr {
    fn from(e: postgres::Error) -> DbErr {
        DbErr { what: pg_message(&e), code: e.code().map(|c| c.code().to_string()) }
    }
}

/// The server's own message when it sent one, else the client's with its cause.
pub(crate) fn pg_message(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    if e.is_closed() && !s.contains("closed") {
        s.push_str(" (the connection to the server is closed)");
    }
    s
}

/// Something that can be bound as a parameter.
pub(crate) trait ToV {
    fn to_v(&self) -> V;
}

macro_rules! to_v_int {
    ($($t:ty),*) => {$(
        impl ToV for $t {
            fn to_v(&self) -> V {
                V::I(*self as i64)
            }
        }
    )*};
}
to_v_int!(i64, i32, u32, u64, usize, u8, u16);

impl ToV for bool {
    fn to_v(&self) -> V {
        V::I(*self as i64)
    }
}
impl ToV for f64 {
    fn to_v(&self) -> V {
        V::F(*self)
    }
}
impl ToV for str {
    fn to_v(&self) -> V {
        V::T(self.to_string())
    }
}
impl ToV for String {
    fn to_v(&self) -> V {
        V::T(self.clone())
    }
}
impl<T: ToV + ?Sized> ToV for &T {
    fn to_v(&self) -> V {
        (**self).to_v()
    }
}
impl<T: ToV> ToV for Option<T> {
    fn to_v(&self) -> V {
        self.as_ref().map_or(V::Null, |v| v.to_v())
    }
}

/// The parameters of a statement: `p![run_id, name]`.
macro_rules! p {
    ($($x:expr),* $(,)?) => { &[$($crate::db::ToV::to_v(&$x)),*][..] };
}
pub(crate) use p;

/// Something a column can be read as.
pub(crate) trait FromV: Sized {
    fn from_v(v: &V) -> Result<Self, DbErr>;
}

macro_rules! from_v_int {
    ($($t:ty),*) => {$(
        impl FromV for $t {
            fn from_v(v: &V) -> Result<Self, DbErr> {
                match v {
                    V::I(i) => <$t>::try_from(*i).map_err(|_| DbErr::new(format!("{i} out of range for {}", stringify!($t)))),
                    other => Err(DbErr::new(format!("expected an integer, found {other:?}"))),
                }
            }
        }
    )*};
}
from_v_int!(i64, i32, u32, u64, usize);

impl FromV for bool {
    fn from_v(v: &V) -> Result<Self, DbErr> {
        i64::from_v(v).map(|i| i != 0)
    }
}
impl FromV for f64 {
    fn from_v(v: &V) -> Result<Self, DbErr> {
        match v {
            V::F(f) => Ok(*f),
            V::I(i) => Ok(*i as f64),
            other => Err(DbErr::new(format!("expected a number, found {other:?}"))),
        }
    }
}
impl FromV for String {
    fn from_v(v: &V) -> Result<Self, DbErr> {
        match v {
            V::T(s) => Ok(s.clone()),
            other => Err(DbErr::new(format!("expected text, found {other:?}"))),
        }
    }
}
impl<T: FromV> FromV for Option<T> {
    fn from_v(v: &V) -> Result<Self, DbErr> {
        match v {
            V::Null => Ok(None),
            v => T::from_v(v).map(Some),
        }
    }
}

/// One row read, its columns in order.
pub(crate) struct Row(Vec<V>);

impl Row {
    pub fn get<T: FromV>(&self, i: usize) -> Result<T, DbErr> {
        let v = self.0.get(i).ok_or_else(|| DbErr::new(format!("no column {i}")))?;
        T::from_v(v).map_err(|e| DbErr::new(format!("column {i}: {}", e.what)))
    }
}

impl rusqlite::ToSql for V {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            V::Null => ValueRef::Null,
            V::I(i) => ValueRef::Integer(*i),
            V::F(f) => ValueRef::Real(*f),
            V::T(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

impl postgres::types::ToSql for V {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::Type;
        match (self, ty) {
            (V::Null, _) => Ok(postgres::types::IsNull::Yes),
            (V::I(i), &Type::INT8) => i.to_sql(ty, out),
            (V::I(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (V::I(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (V::I(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (V::I(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (V::F(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (V::F(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (V::T(s), _) => s.as_str().to_sql(ty, out),
            (v, ty) => Err(format!("cannot bind {v:?} to a column of type {ty}").into()),
        }
    }
    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

fn pg_row(r: &postgres::Row) -> Result<Row, DbErr> {
    use postgres::types::Type;
    let mut out = Vec::with_capacity(r.len());
    for (i, c) in r.columns().iter().enumerate() {
        let v = match *c.type_() {
            Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(V::I),
            Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map(|x| V::I(x.into())),
            Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map(|x| V::I(x.into())),
            Type::BOOL => r.try_get::<_, Option<bool>>(i)?.map(|x| V::I(x.into())),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(V::F),
            Type::FLOAT4 => r.try_get::<_, Option<f32>>(i)?.map(|x| V::F(x.into())),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                r.try_get::<_, Option<String>>(i)?.map(V::T)
            }
            ref t => return Err(DbErr::new(format!("column {}: unsupported type {t}", c.name()))),
        };
        out.push(v.unwrap_or(V::Null));
    }
    Ok(Row(out))
}

fn sqlite_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    use rusqlite::types::ValueRef;
    let n = r.as_ref().column_count();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(match r.get_ref(i)? {
            ValueRef::Null => V::Null,
            ValueRef::Integer(i) => V::I(i),
            ValueRef::Real(f) => V::F(f),
            ValueRef::Text(t) | ValueRef::Blob(t) => V::T(String::from_utf8_lossy(t).into_owned()),
        });
    }
    Ok(Row(out))
}

/// `?N` parameters as PostgreSQL's `$N` (no `?` appears in rtlab's SQL otherwise).
pub(crate) fn pg_sql(sql: &str) -> String {
    sql.replace('?', "$")
}

/// A migration's DDL (written for SQLite) as PostgreSQL's: 64-bit integers everywhere
/// (SQLite's INTEGER is 64-bit), `BIGSERIAL` for the row ids SQLite assigns itself.
pub(crate) fn pg_ddl(sql: &str) -> String {
    sql.lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("id INTEGER PRIMARY KEY") {
                l.replace(" AUTOINCREMENT", "")
                    .replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
            } else {
                l.replace("INTEGER", "BIGINT").replace(" REAL", " DOUBLE PRECISION")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An open connection to either store.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    Postgres { client: Box<postgres::Client>, stmts: HashMap<String, postgres::Statement> },
}

impl Db {
    fn pg_stmt(
        client: &mut postgres::Client,
        stmts: &mut HashMap<String, postgres::Statement>,
        sql: &str,
    ) -> Result<postgres::Statement, DbErr> {
        if let Some(s) = stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = client.prepare(&pg_sql(sql))?;
        stmts.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    fn pg_params(params: &[V]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
        params.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)).collect()
    }

    /// Run one statement; the number of rows it changed.
    pub fn execute(&mut self, sql: &str, params: &[V]) -> Result<u64, DbErr> {
        match self {
            Db::Sqlite(c) => {
                Ok(c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(params.iter()))?
                    as u64)
            }
            Db::Postgres { client, stmts } => {
                let st = Self::pg_stmt(client, stmts, sql)?;
                Ok(client.execute(&st, &Self::pg_params(params))?)
            }
        }
    }

    /// Insert one row into a table with an `id` the store assigns; that id.
    pub fn insert(&mut self, sql: &str, params: &[V]) -> Result<i64, DbErr> {
        match self {
            Db::Sqlite(c) => {
                c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(params.iter()))?;
                Ok(c.last_insert_rowid())
            }
            Db::Postgres { client, stmts } => {
                let st = Self::pg_stmt(client, stmts, &format!("{sql} RETURNING id"))?;
                Ok(client.query_one(&st, &Self::pg_params(params))?.try_get(0)?)
            }
        }
    }

    /// Every row a query selects.
    pub fn query(&mut self, sql: &str, params: &[V]) -> Result<Vec<Row>, DbErr> {
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(sql)?;
                let rows = st.query_map(rusqlite::params_from_iter(params.iter()), sqlite_row)?;
                Ok(rows.collect::<rusqlite::Result<Vec<Row>>>()?)
            }
            Db::Postgres { client, stmts } => {
                let st = Self::pg_stmt(client, stmts, sql)?;
                client.query(&st, &Self::pg_params(params))?.iter().map(pg_row).collect()
            }
        }
    }

    /// Every row a query selects, handed to `f` one at a time as the database returns them
    /// (nothing collected: a stream of millions of raw samples stays in constant memory).
    pub fn for_each<E: From<DbErr>>(
        &mut self,
        sql: &str,
        params: &[V],
        mut f: impl FnMut(Row) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Db::Sqlite(c) => {
                let mut st = c.prepare_cached(sql).map_err(DbErr::from)?;
                let mut rows =
                    st.query(rusqlite::params_from_iter(params.iter())).map_err(DbErr::from)?;
                while let Some(r) = rows.next().map_err(DbErr::from)? {
                    f(sqlite_row(r).map_err(DbErr::from)?)?;
                }
                Ok(())
            }
            Db::Postgres { client, stmts } => {
                use postgres::fallible_iterator::FallibleIterator;
                let st = Self::pg_stmt(client, stmts, sql)?;
                let mut rows = client.query_raw(&st, params.iter()).map_err(DbErr::from)?;
                while let Some(r) = rows.next().map_err(DbErr::from)? {
                    f(pg_row(&r)?)?;
                }
                Ok(())
            }
        }
    }

    /// Insert many rows into `table`'s columns `cols`: `fill` is handed a function that takes
    /// one row (its values in `cols`' order). SQLite: one prepared INSERT per row (fast inside
    /// a transaction); PostgreSQL: one `COPY ... FROM STDIN BINARY` for all of them (a round
    /// trip per COPY, not per row). A failure anywhere aborts the COPY; the caller's
    /// transaction then rolls everything back.
    pub fn bulk<E: From<DbErr>>(
        &mut self,
        table: &str,
        cols: &[&str],
        fill: impl FnOnce(&mut dyn FnMut(&[V]) -> Result<(), DbErr>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Db::Sqlite(c) => {
                let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
                let sql = format!(
                    "INSERT INTO {table} ({}) VALUES ({})",
                    cols.join(", "),
                    marks.join(", ")
                );
                let mut st = c.prepare_cached(&sql).map_err(DbErr::from)?;
                fill(&mut |row: &[V]| {
                    st.execute(rusqlite::params_from_iter(row.iter()))?;
                    Ok(())
                })
            }
            Db::Postgres { client, stmts } => {
                let list = cols.join(", ");
                // the columns' types, as the server has them (what binary COPY must send)
                let probe =
                    Self::pg_stmt(client, stmts, &format!("SELECT {list} FROM {table} LIMIT 0"))?;
                let types: Vec<postgres::types::Type> =
                    probe.columns().iter().map(|c| c.type_().clone()).collect();
                let copy = Self::pg_stmt(
                    client,
                    stmts,
                    &format!("COPY {table} ({list}) FROM STDIN BINARY"),
                )?;
                let w = client.copy_in(&copy).map_err(DbErr::from)?;
                let mut w = postgres::binary_copy::BinaryCopyInWriter::new(w, &types);
                fill(&mut |row: &[V]| {
                    if row.len() != types.len() {
                        return Err(DbErr::new(format!(
                            "{table}: a row of {} values for {} columns",
                            row.len(),
                            types.len()
                        )));
                    }
                    w.write_raw(row.iter())?;
                    Ok(())
                })?;
                w.finish().map_err(DbErr::from)?;
                Ok(())
            }
        }
    }

    /// The first row a query selects, if any.
    pub fn query_opt(&mut self, sql: &str, params: &[V]) -> Result<Option<Row>, DbErr> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first row a query selects; none is an error.
    pub fn query_one(&mut self, sql: &str, params: &[V]) -> Result<Row, DbErr> {
        self.query_opt(sql, params)?.ok_or_else(|| DbErr::new("the query returned no row"))
    }

    /// Statements without parameters (DDL), as they are written for this backend.
    pub fn batch(&mut self, sql: &str) -> Result<(), DbErr> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Postgres { client, .. } => Ok(client.batch_execute(sql)?),
        }
    }

    /// `f` inside one transaction: committed when it returns Ok, rolled back otherwise
    /// (and by the server when the connection drops).
    pub fn transaction<T, E: From<DbErr>>(
        &mut self,
        f: impl FnOnce(&mut Db) -> Result<T, E>,
    ) -> Result<T, E> {
        self.batch("BEGIN")?;
        match f(self) {
            Ok(v) => {
                self.batch("COMMIT")?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres { .. })
    }
}
