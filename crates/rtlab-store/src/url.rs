//! Where a store is: a SQLite file path or a PostgreSQL URL
//! (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`), and how it is shown.
//!
//! Contract:
//! - [`Location::parse`] tells the two apart by the scheme (`postgres://` or
//!   `postgresql://`, in any case); another `SCHEME://` is an error (a typo such as
//!   `postgress://` is not taken for a file path: the file would be created, named with
//!   the password); anything else is a file path.
//! - [`redact`] is the ONLY way a location is shown (errors, output, stored command lines):
//!   the password becomes `***`. It works on malformed URLs and other schemes too (best
//!   effort: everything between the user's `:` and the last `@` is hidden).
//! - User and password may be percent-encoded (`%40` for `@`); the password is kept only in
//!   [`PgUrl`] and never formatted by it (`Debug` hides it).

use std::fmt;

/// A parsed PostgreSQL URL.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    pub user: String,
    pub password: Option<String>,
    pub host: String,
    pub port: u16,
    pub dbname: String,
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl PgUrl {
    /// `postgres://user:***@host:port/db` (no password: `postgres://user@host:port/db`).
    pub fn redacted(&self) -> String {
        let pw = if self.password.is_some() { ":***" } else { "" };
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("postgres://{}{pw}@{host}:{}/{}", self.user, self.port, self.dbname)
    }
}

/// Where a store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Sqlite(std::path::PathBuf),
    Postgres(PgUrl),
}

/// True when `s` names a PostgreSQL server rather than a file.
pub fn is_postgres(s: &str) -> bool {
    matches!(scheme(s), Some(x) if x.eq_ignore_ascii_case("postgres") || x.eq_ignore_ascii_case("postgresql"))
}

/// The `SCHEME` of `SCHEME://...` (letters, digits, `+ - .`, a letter first), if `s` has one.
fn scheme(s: &str) -> Option<&str> {
    let (x, _) = s.split_once("://")?;
    let mut c = x.chars();
    (c.next()?.is_ascii_alphabetic()
        && c.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(x)
}

/// `s` with the password of a URL (`SCHEME://USER:PASSWORD@...`) replaced by `***` (a file
/// path is unchanged).
pub fn redact(s: &str) -> String {
    let Some(scheme_end) = s.find("://") else { return s.to_string() };
    let rest = &s[scheme_end + 3..];
    let Some(at) = rest.rfind('@') else { return s.to_string() };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!("{}{}:***{}", &s[..scheme_end + 3], &userinfo[..colon], &rest[at..]),
        None => s.to_string(),
    }
}

/// Every argument of a command line with its PostgreSQL URLs redacted (`--db URL`,
/// `--db=URL`, `--to URL`): what a run stores as its command line.
pub fn redact_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|a| match a.split_once('=') {
            Some((flag, v)) if flag.starts_with("--") && is_postgres(v) => {
                format!("{flag}={}", redact(v))
            }
            _ => redact(&a),
        })
        .collect()
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or("a '%' not followed by two hex digits")?;
            out.push(
                u8::from_str_radix(hex, 16).map_err(|_| "a '%' not followed by two hex digits")?,
            );
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "not UTF-8 once decoded".to_string())
}

impl Location {
    /// A file path, or a PostgreSQL URL checked field by field; the error says what is wrong
    /// and what would be accepted (never the password).
    pub fn parse(s: &str) -> Result<Location, String> {
        const FORM: &str = "expected postgres://USER[:PASSWORD]@HOST[:PORT]/DB";
        if !is_postgres(s) {
            if let Some(x) = scheme(s) {
                return Err(format!(
                    "'{x}://' is not a store: a SQLite file path, or a PostgreSQL URL ({FORM})"
                ));
            }
            return Ok(Location::Sqlite(s.into()));
        }
        let rest = &s[s.find("://").expect("checked") + 3..];
        let Some(at) = rest.rfind('@') else {
            return Err(format!("no USER@ ({FORM})"));
        };
        let (userinfo, hostpart) = (&rest[..at], &rest[at + 1..]);
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if user.is_empty() {
            return Err(format!("no user name ({FORM})"));
        }
        let Some((hostport, dbname)) = hostpart.split_once('/') else {
            return Err(format!("no /DB after the host ({FORM})"));
        };
        if dbname.is_empty() || dbname.contains(['/', '?', '#']) {
            return Err(format!(
                "database name '{dbname}' is not a plain name ({FORM}; no query parameters)"
            ));
        }
        let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
            let (h, after) =
                h.split_once(']').ok_or(format!("unclosed '[' in the host ({FORM})"))?;
            (h, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(format!("no host ({FORM})"));
        }
        let port = match port {
            None => 5432,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or(format!("port '{p}' is not a number from 1 to 65535"))?,
        };
        Ok(Location::Postgres(PgUrl {
            user: percent_decode(user).map_err(|e| format!("user name: {e}"))?,
            password: password
                .map(percent_decode)
                .transpose()
                .map_err(|e| format!("password: {e}"))?,
            host: host.to_string(),
            port,
            dbname: percent_decode(dbname).map_err(|e| format!("database name: {e}"))?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts() {
        let Location::Postgres(u) =
            Location::parse("postgres://ann:s%40cret@db.lab:6543/fleet").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (u.user.as_str(), u.password.as_deref(), u.host.as_str(), u.port, u.dbname.as_str()),
            ("ann", Some("s@cret"), "db.lab", 6543, "fleet")
        );
        assert_eq!(u.redacted(), "postgres://ann:***@db.lab:6543/fleet");
        assert!(!format!("{u:?}").contains("cret"));
        let Location::Postgres(u) = Location::parse("postgresql://ann@[::1]/fleet").unwrap() else {
            panic!()
        };
        assert_eq!((u.host.as_str(), u.port, u.password), ("::1", 5432, None));
        assert_eq!(
            Location::parse("results/rtlab.db").unwrap(),
            Location::Sqlite("results/rtlab.db".into())
        );
    }

    #[test]
    fn malformed_urls_are_named_without_the_password() {
        for bad in [
            "postgres://host/db",
            "postgres://:pw@host/db",
            "postgres://ann:pw@host",
            "postgres://ann:pw@host:99999/db",
            "postgres://ann:pw@host/db?sslmode=require",
            "postgres://ann:pw@:5432/db",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert!(!e.contains("pw"), "{bad}: {e}");
        }
        assert_eq!(redact("postgres://ann:pw@host:99999/db"), "postgres://ann:***@host:99999/db");
        assert_eq!(redact("postgres://a:b:c@d@host/db"), "postgres://a:***@host/db");
        // found by the fuzz target store_url: a typo in the scheme was a file path, shown (and
        // created) with the password in it
        for typo in ["postgress://ann:pw@host/db", "postgre://ann:pw@h/d", "psql://ann:pw@h/d"] {
            let e = Location::parse(typo).unwrap_err();
            assert!(e.contains("is not a store") && !e.contains("pw"), "{typo}: {e}");
            assert!(!redact(typo).contains("pw"), "{}", redact(typo));
        }
        assert!(matches!(Location::parse("POSTGRES://ann@h/d"), Ok(Location::Postgres(_))));
        // a path with a colon but no scheme is a path
        assert!(matches!(Location::parse("results/a:b.db"), Ok(Location::Sqlite(_))));
        assert_eq!(
            redact_args([
                "rtlab".into(),
                "--db=postgres://a:pw@h/d".into(),
                "postgres://a:pw@h/d".into()
            ]),
            ["rtlab", "--db=postgres://a:***@h/d", "postgres://a:***@h/d"]
        );
    }
}
