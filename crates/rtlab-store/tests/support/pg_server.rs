//! A real, throw-away PostgreSQL server for tests: Debian's postgresql 15 (`initdb`,
//! `pg_ctl`) in a temporary directory, on a free port of 127.0.0.1, password auth
//! (scram-sha-256) for TCP. As root it runs as `nobody` (the directory is given to it);
//! otherwise as the current user. [`PgServer::start`] returns `None` (and the test says
//! "skipped: why") when the binaries are not installed. Dropping it stops the server and
//! removes its directory, also when the test panics.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const BIN: &str = "/usr/lib/postgresql/15/bin";
pub const USER: &str = "rtlab";
pub const PASSWORD: &str = "s3cret-Pw_42";

pub struct PgServer {
    dir: tempfile::TempDir,
    pub port: u16,
    as_nobody: bool,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PgServer {
    /// Start a new server, or `None` with the reason printed ("skipped: ...").
    pub fn start() -> Option<PgServer> {
        if !Path::new(BIN).join("initdb").exists() {
            eprintln!("skipped: PostgreSQL 15 is not installed ({BIN}/initdb; scripts/setup.sh installs it)");
            return None;
        }
        let as_nobody = nix_is_root();
        let dir = tempfile::Builder::new().prefix("rtlab-pg-").tempdir().unwrap();
        if as_nobody {
            chown_nobody(dir.path());
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if as_nobody {
            chown_nobody(&pwfile);
        }
        let s = PgServer { dir, port: free_port(), as_nobody };
        let out = s
            .cmd("initdb")
            .args(["-D"])
            .arg(s.data())
            .args(["-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        s.start_again();
        Some(s)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, tool: &str) -> Command {
        let mut c = Command::new(Path::new(BIN).join(tool));
        c.stdin(Stdio::null()).env("LC_ALL", "C.UTF-8").env_remove("PGPASSWORD");
        if self.as_nobody {
            c.uid(65534).gid(65534).current_dir(self.dir.path());
        }
        c
    }

    /// Start the (stopped) server again on the same port and data.
    pub fn start_again(&self) {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let out = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-o", &opts, "-w", "-l"])
            .arg(self.dir.path().join("log"))
            .arg("start")
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
        );
    }

    /// Stop the server at once (`immediate`: connections are cut, as in a crash).
    pub fn stop(&self) {
        let _ = self
            .cmd("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// A new database; its URL with the password.
    pub fn database(&self, name: &str) -> String {
        let out = self
            .cmd("createdb")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER, name])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap();
        assert!(out.status.success(), "createdb: {}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// One value of a SQL query, through psql (`-At`).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        self.try_psql(db, sql).unwrap_or_else(|e| panic!("psql {sql}: {e}"))
    }

    /// The same, its error as text (a table not created yet, the server stopped).
    pub fn try_psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = self
            .cmd("psql")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER, "-At", "-d", db])
            .args(["-c", sql])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        // the TempDir removes the directory (root may remove nobody's files)
    }
}

fn nix_is_root() -> bool {
    // the owner of /proc/self is the process's effective user
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

fn chown_nobody(p: &Path) {
    std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
}
