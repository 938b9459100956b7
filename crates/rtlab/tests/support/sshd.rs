//! A throw-away OpenSSH server inside a network namespace, for tests of `--far ssh:HOST`.
//!
//! CI has one machine, so a test makes two network namespaces joined by a veth pair
//! ([`NetnsPair`]), starts a real `/usr/sbin/sshd` in the far one ([`Sshd::start`]) and runs
//! `ssh` from the near one through [`Sshd::ssh_prefix`] (what rtlab reads from `RTLAB_SSH`).
//! Include it with `#[path = "support/sshd.rs"] mod sshd;`.
//!
//! Contract:
//! - Everything is made fresh per test and undone in `Drop`, also when the test panics:
//!   [`Sshd`] kills its sshd and removes its temp dir; [`NetnsPair`] deletes both
//!   namespaces. Declare the pair before the sshd, so the sshd is dropped first.
//! - The sshd reads only its own config (`-f`), host key, client key and authorized_keys,
//!   all in a temp dir named with the pid. It never touches `/etc/ssh`, `~/.ssh` or the
//!   system sshd service, and does not need the system sshd to run or to be installed as a
//!   service; it only shares the privilege separation directory `/run/sshd` (made if
//!   missing, never removed).
//! - Names, addresses and ports carry the pid (and a per-process counter), so parallel test
//!   binaries and several pairs in one binary do not collide.
//! - Needs root and `ip`, `/usr/sbin/sshd`, `ssh`, `ssh-keygen` (Debian: iproute2,
//!   openssh-server, openssh-client); [`available`] says what is missing so a test can skip.
//! - Killing the listening sshd does not end sessions still open; they end with their client.
//!
//! Errors are plain `String`s naming the command that failed and its stderr: this is test
//! support, the messages end up in a test failure.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The alias of the far host in the client config written by [`Sshd::start`].
pub const HOST_ALIAS: &str = "rtlab-far";

/// How long [`Sshd::start`] waits for the port to accept a connection.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Distinguishes several pairs or servers made by one test binary.
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn next_id() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// `Ok(())` when this process can run the harness, else why not (tests print it and skip):
/// root, and `ip`, `/usr/sbin/sshd`, `ssh`, `ssh-keygen` on the machine.
pub fn available() -> Result<(), String> {
    if !is_root() {
        return Err("needs root (network namespaces and sshd; CI runs as root)".into());
    }
    if !Path::new("/usr/sbin/sshd").exists() {
        return Err("/usr/sbin/sshd not found (Debian: apt-get install openssh-server)".into());
    }
    for (tool, package) in
        [("ssh", "openssh-client"), ("ssh-keygen", "openssh-client"), ("ip", "iproute2")]
    {
        if !on_path(tool) {
            return Err(format!("`{tool}` not found on PATH (Debian: apt-get install {package})"));
        }
    }
    Ok(())
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// Runs a command to completion; `Err` with the command line and its stderr unless exit 0.
fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Two network namespaces joined by a veth pair: `ns_a` has `ip_a` (198.18.X.1/24), `ns_b`
/// has `ip_b` (198.18.X.2/24), X = 100 + pid % 100; loopback is up in both. Both namespaces
/// are deleted on drop.
pub struct NetnsPair {
    /// The near namespace (run `ssh` here).
    pub ns_a: String,
    /// The far namespace (run `sshd` here).
    pub ns_b: String,
    /// The address of `ns_a` on the veth, without prefix length.
    pub ip_a: String,
    /// The address of `ns_b` on the veth, without prefix length.
    pub ip_b: String,
}

impl NetnsPair {
    /// Makes the pair. `tag` (letters, digits, `-`, `_`; at most 12) makes the names readable
    /// in `ip netns list`: `rtssh-TAG-PID-N-a` and `...-b`. Namespaces left with the same
    /// names by an earlier, killed process of the same pid are deleted first.
    pub fn up(tag: &str) -> Result<NetnsPair, String> {
        if tag.is_empty()
            || tag.len() > 12
            || !tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!("netns tag '{tag}': use 1 to 12 letters, digits, - or _"));
        }
        let pid = std::process::id();
        let n = next_id();
        let base = format!("rtssh-{tag}-{pid}-{n}");
        let subnet = 100 + pid % 100;
        let pair = NetnsPair {
            ns_a: format!("{base}-a"),
            ns_b: format!("{base}-b"),
            ip_a: format!("198.18.{subnet}.1"),
            ip_b: format!("198.18.{subnet}.2"),
        };
        pair.delete();
        // from here on an early return drops `pair`, which deletes what was made
        run(&["ip", "netns", "add", &pair.ns_a])?;
        run(&["ip", "netns", "add", &pair.ns_b])?;
        // made directly inside the namespaces: the root namespace never sees the names
        let (veth_a, veth_b) = (format!("rs{pid}x{n}a"), format!("rs{pid}x{n}b"));
        run(&[
            "ip", "link", "add", &veth_a, "netns", &pair.ns_a, "type", "veth", "peer", "name",
            &veth_b, "netns", &pair.ns_b,
        ])?;
        for (ns, dev, ip) in [(&pair.ns_a, &veth_a, &pair.ip_a), (&pair.ns_b, &veth_b, &pair.ip_b)]
        {
            run(&["ip", "-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }

    /// Both namespace names, near first.
    pub fn names(&self) -> [&str; 2] {
        [&self.ns_a, &self.ns_b]
    }

    fn delete(&self) {
        for ns in self.names() {
            if Path::new("/run/netns").join(ns).exists() {
                let _ =
                    Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
            }
        }
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        self.delete();
    }
}

/// A running `/usr/sbin/sshd -D -e` inside a network namespace, with throw-away keys in its
/// own temp dir. Root may log in with the client key only. Killed, and the temp dir
/// removed, on drop.
pub struct Sshd {
    child: Child,
    dir: PathBuf,
    config: PathBuf,
    ns: String,
    addr: String,
    port: u16,
}

impl Sshd {
    /// Starts sshd in namespace `ns` listening on `addr` (an address of that namespace) and
    /// port 2200 + pid % 1000 (+1 per further server of this process), and waits (at most
    /// 10 s) until the port accepts a TCP connection from inside `ns`.
    pub fn start(ns: &str, addr: &str) -> Result<Sshd, String> {
        Sshd::start_with_env(ns, addr, &[])
    }

    /// [`Sshd::start`], and every session gets the environment variables `env` (sshd's
    /// `SetEnv`, which overrides sshd's defaults: pass `PATH` to make the far side find a
    /// test build of `rtlab` as plain `rtlab`). Values must not contain `"` or newlines.
    ///
    /// The remote command still runs as `$SHELL -c CMD` of root, and bash sources root's
    /// `~/.bashrc` there, which may prepend to `PATH` (on the CI machine: pyenv and
    /// `~/.cargo/bin`): a test that must run one exact binary names it by absolute path.
    pub fn start_with_env(ns: &str, addr: &str, env: &[(&str, &str)]) -> Result<Sshd, String> {
        let pid = std::process::id();
        let n = next_id();
        let dir = std::env::temp_dir().join(format!("rtlab-sshd-{pid}-{n}"));
        if dir.to_string_lossy().contains(char::is_whitespace) {
            // RTLAB_SSH is split at spaces
            return Err(format!("temp dir {} contains whitespace", dir.display()));
        }
        for (k, v) in env {
            if k.is_empty() || k.contains(['=', ' ', '"']) || v.contains(['"', '\n']) {
                return Err(format!("SetEnv {k}={v}: not allowed in sshd_config"));
            }
        }
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // a guard until the Sshd exists: removes the dir on every early return
        let guard = DirGuard(Some(dir.clone()));
        let port = u16::try_from(2200 + (pid % 1000) + n).unwrap_or(2200);

        let path = |name: &str| dir.join(name);
        let p = |name: &str| path(name).to_string_lossy().into_owned();
        for key in ["host_key", "client_key"] {
            run(&[
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "rtlab-test",
                "-f",
                &p(key),
            ])?;
            set_mode(&path(key), 0o600)?;
        }
        let client_pub = fs::read_to_string(path("client_key.pub"))
            .map_err(|e| format!("{}: {e}", p("client_key.pub")))?;
        write_file(&path("authorized_keys"), &client_pub, 0o600)?;

        let listen =
            if addr.contains(':') { format!("[{addr}]:{port}") } else { format!("{addr}:{port}") };
        let mut server = format!(
            "# throw-away sshd for rtlab tests (tests/support/sshd.rs)\n\
             ListenAddress {listen}\n\
             HostKey {host_key}\n\
             AuthorizedKeysFile {authorized}\n\
             PidFile {pidfile}\n\
             PermitRootLogin prohibit-password\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             UsePAM no\n\
             StrictModes no\n\
             LogLevel ERROR\n",
            host_key = p("host_key"),
            authorized = p("authorized_keys"),
            pidfile = p("sshd.pid"),
        );
        // one line: sshd takes the first SetEnv directive only
        if !env.is_empty() {
            let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            server.push_str(&format!("SetEnv {}\n", pairs.join(" ")));
        }
        let server_config = path("sshd_config");
        write_file(&server_config, &server, 0o600)?;

        let client = format!(
            "Host {HOST_ALIAS}\n\
             \x20 HostName {addr}\n\
             \x20 Port {port}\n\
             \x20 User root\n\
             \x20 IdentityFile {identity}\n\
             \x20 IdentitiesOnly yes\n\
             \x20 UserKnownHostsFile /dev/null\n\
             \x20 GlobalKnownHostsFile /dev/null\n\
             \x20 StrictHostKeyChecking no\n\
             \x20 BatchMode yes\n\
             \x20 LogLevel ERROR\n",
            identity = p("client_key"),
        );
        let config = path("ssh_config");
        write_file(&config, &client, 0o600)?;

        // sshd refuses to start without its privilege separation directory
        fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        let log_path = path("sshd.log");
        let log =
            fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| format!("{}: {e}", log_path.display()))?;
        // `ip netns exec` execs sshd in place: the child's pid is sshd's
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
            .arg(&server_config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("ip netns exec {ns} /usr/sbin/sshd: {e}"))?;
        guard.disarm();
        let mut sshd =
            Sshd { child, dir, config, ns: ns.to_string(), addr: addr.to_string(), port };
        sshd.wait_listening()?; // on Err the Sshd drops: killed, dir removed
        Ok(sshd)
    }

    /// Polls a TCP connect from inside the namespace until it succeeds, sshd exits, or
    /// [`START_TIMEOUT`] passes.
    fn wait_listening(&mut self) -> Result<(), String> {
        let start = Instant::now();
        let target = format!(": <>/dev/tcp/{}/{}", self.addr, self.port);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("sshd in {} exited ({status}): {}", self.ns, self.log()));
            }
            let ok = Command::new("ip")
                .args(["netns", "exec", &self.ns, "timeout", "2", "bash", "-c", &target])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "sshd in {} not accepting on {}:{} after {:?}: {}",
                    self.ns,
                    self.addr,
                    self.port,
                    START_TIMEOUT,
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What sshd wrote to stderr so far (LogLevel ERROR: normally nothing).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default().trim().to_string()
    }

    /// The ssh client config: `Host rtlab-far` with address, port, user root, the client
    /// key, no known-hosts checks, `BatchMode yes`, `LogLevel ERROR`.
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The host alias in [`Sshd::config_path`]: `rtlab-far` (so `--far ssh:rtlab-far`).
    pub fn host_alias(&self) -> &str {
        HOST_ALIAS
    }

    /// The command that runs ssh from namespace `near_ns`, without host and remote command:
    /// `ip netns exec NEAR_NS ssh -F CONFIG`.
    pub fn ssh_prefix(&self, near_ns: &str) -> Vec<String> {
        ["ip", "netns", "exec", near_ns, "ssh", "-F"]
            .iter()
            .map(|s| s.to_string())
            .chain([self.config.to_string_lossy().into_owned()])
            .collect()
    }

    /// [`Sshd::ssh_prefix`] as one string, words separated by single spaces: the value of
    /// `RTLAB_SSH` for an rtlab that should reach this server from `near_ns`.
    pub fn rtlab_ssh_env(&self, near_ns: &str) -> String {
        self.ssh_prefix(near_ns).join(" ")
    }

    /// A ready `ssh` command from `near_ns` to this server: the prefix and the host alias;
    /// add the remote command with `.arg(...)`.
    pub fn ssh(&self, near_ns: &str) -> Command {
        let prefix = self.ssh_prefix(near_ns);
        let mut c = Command::new(&prefix[0]);
        c.args(&prefix[1..]).arg(HOST_ALIAS);
        c
    }

    /// The namespace sshd runs in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The address sshd listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The port sshd listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The pid of the listening sshd.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temp dir with config, keys and log (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Removes a directory on drop, until disarmed (when an [`Sshd`] owns the directory).
struct DirGuard(Option<PathBuf>);
impl DirGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}
impl Drop for DirGuard {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {mode:o} {}: {e}", path.display()))
}

fn write_file(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    let mut f = fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    set_mode(path, mode)
}
