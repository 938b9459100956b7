//! A real, throw-away PostgreSQL server for tests: Debian's postgresql 15 (`initdb`,
//! `pg_ctl`) in a temporary directory, on a free port of 127.0.0.1 (or of an address in a
//! network namespace: [`PgServer::start_in`]), password auth (scram-sha-256) for TCP; the
//! test's own `createdb`/`psql` go through the Unix socket in that directory. As root it runs as `nobody` (the directory is given to it);
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
    /// The address it listens on (127.0.0.1, or one in `netns`).
    pub host: String,
    netns: Option<String>,
    as_nobody: bool,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PgServer {
    /// Start a new server, or `None` with the reason printed ("skipped: ...").
    pub fn start() -> Option<PgServer> {
        Self::start_in(None, "127.0.0.1")
    }

    /// Start a new server listening on `host`, inside network namespace `netns` when given
    /// (`ip netns exec`, then `setpriv` to `nobody`).
    pub fn start_in(netns: Option<&str>, host: &str) -> Option<PgServer> {
        if !Path::new(BIN).join("initdb").exists() {
            rtlab_sys::test_skip::skipped(format_args!(
                "PostgreSQL 15 is not installed ({BIN}/initdb; scripts/setup.sh installs it)"
            ));
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
        let s = PgServer {
            dir,
            port: free_port(),
            host: host.to_string(),
            netns: netns.map(str::to_string),
            as_nobody,
        };
        let out = s
            .cmd("initdb")
            .args(["-D"])
            .arg(s.data())
            .args(["-U", USER, "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {}", String::from_utf8_lossy(&out.stderr));
        // password auth from any address (initdb allows only loopback): the far namespace's
        use std::io::Write;
        let mut hba =
            std::fs::OpenOptions::new().append(true).open(s.data().join("pg_hba.conf")).unwrap();
        writeln!(hba, "host all all 0.0.0.0/0 scram-sha-256").unwrap();
        s.start_again();
        Some(s)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, tool: &str) -> Command {
        let bin = Path::new(BIN).join(tool);
        let mut c = match (&self.netns, tool) {
            (Some(ns), "pg_ctl") => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]);
                if self.as_nobody {
                    c.args(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]);
                }
                c.arg(bin);
                c
            }
            _ => {
                let mut c = Command::new(bin);
                if self.as_nobody {
                    c.uid(65534).gid(65534);
                }
                c
            }
        };
        c.stdin(Stdio::null()).env("LC_ALL", "C.UTF-8").env_remove("PGPASSWORD");
        c.current_dir(self.dir.path());
        c
    }

    fn socket_dir(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// Start the (stopped) server again on the same port and data.
    pub fn start_again(&self) {
        let opts = format!(
            "-p {} -c listen_addresses={} -k {} -c fsync=off -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3 -c tcp_user_timeout=10000",
            self.port,
            self.host,
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
            .args(["-h", &self.socket_dir(), "-p", &self.port.to_string(), "-U", USER, name])
            .output()
            .unwrap();
        assert!(out.status.success(), "createdb: {}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}:{PASSWORD}@{}:{}/{db}", self.host, self.port)
    }

    /// One value of a SQL query, through psql (`-At`).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        self.try_psql(db, sql).unwrap_or_else(|e| panic!("psql {sql}: {e}"))
    }

    /// The same, its error as text (a table not created yet, the server stopped).
    pub fn try_psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = self
            .cmd("psql")
            .args(["-h", &self.socket_dir(), "-p", &self.port.to_string(), "-U", USER, "-At"])
            .args(["-d", db, "-c", sql])
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
