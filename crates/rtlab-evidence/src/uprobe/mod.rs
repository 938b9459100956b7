//! ROS 2's tracepoints in processes that run already: uprobes on the `ros_trace_*` functions
//! of the libtracetools each process maps (`rtlab trace --pid`), read from a tracefs instance
//! of rtlab's own.
//!
//! Contract: [`find_lib`] names the libtracetools a process maps, or says in one line why
//! none; [`attach`] journals every tracefs change before it makes it (tracefs mounted, each
//! probe added to `uprobe_events` and removed on restore, an instance made and removed, its
//! clock set to `mono`, its events enabled) and undoes them when the [`Uprobes`] is detached
//! or dropped, or by `rtlab tune restore` after a kill -9 (the journal is
//! `<profile journal>.uprobe`). Probed: `rcl_publish` (publisher, message),
//! `rmw_publish` and `rmw_take` (handle, message, source timestamp, taken; the topic read
//! from the RMW handle's `topic_name`), as [`PROBES`] says. Each hit costs the process a trap
//! into the kernel (a few microseconds); nothing is loaded into it.

pub mod elf;

use crate::error::TraceError;
use rtlab_core::error::Missing;
use rtlab_host::host::Host;
use rtlab_host::journal::RestoreReport;
use rtlab_host::session::{Action, Session};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The journal of the uprobes' tracefs changes.
pub const DEFAULT_UPROBE_JOURNAL: &str = "/var/lib/rtlab/journal.uprobe";

/// (the function probed, the event's name, its fetch arguments with ARG0..ARG3 standing for
/// the calling convention's first four integer registers).
pub const PROBES: [(&str, &str, &str); 3] = [
    ("ros_trace_rcl_publish", "rcl_publish", "pub=ARG0:x64 msg=ARG1:x64"),
    (
        "ros_trace_rmw_publish",
        "rmw_publish",
        "pub=ARG0:x64 msg=ARG1:x64 stamp=ARG2:s64 topic=+0(+16(ARG0)):string",
    ),
    (
        "ros_trace_rmw_take",
        "rmw_take",
        "sub=ARG0:x64 msg=ARG1:x64 stamp=ARG2:s64 taken=ARG3:u8 topic=+0(+16(ARG0)):string",
    ),
];

/// The registers of the first four integer arguments on this architecture.
fn registers() -> Result<[&'static str; 4], TraceError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(["%di", "%si", "%dx", "%cx"]),
        "aarch64" => Ok(["%x0", "%x1", "%x2", "%x3"]),
        a => Err(TraceError::Invalid(format!("uprobes' arguments on {a} are not known to rtlab"))),
    }
}

/// The libtracetools process `pid` maps.
pub fn find_lib(host: &dyn Host, pid: i32) -> Result<PathBuf, String> {
    let path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(host.path(&path)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{pid}: no such process"),
        _ => format!("{path}: {e}"),
    })?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next().is_some_and(|f| f.starts_with("libtracetools.so")))
        .map(PathBuf::from)
        .ok_or_else(|| format!("{pid} maps no libtracetools.so: it does not run ROS 2's rcl (or an rcl built without tracepoints)"))
}

/// Probes armed in a tracefs instance; dropping it removes them.
pub struct Uprobes<'h> {
    // dropped in this order: the pipe first (an instance with its trace_pipe open cannot be
    // removed), then the session, which restores
    pipe: std::fs::File,
    session: Session<'h>,
    partial: Vec<u8>,
    /// The probes' group (`rtlab_<pid of this rtlab>`).
    pub group: String,
}

/// Arm [`PROBES`] on each library (its events are named `NAME_K`, K its index in `libs`).
pub fn attach<'h>(
    host: &'h dyn Host,
    journal: &Path,
    libs: &[PathBuf],
) -> Result<Uprobes<'h>, TraceError> {
    let regs = registers()?;
    let dir = crate::timerlat::TRACEFS_DIRS[0];
    let mut session = Session::begin(host, journal, "rtlab trace --pid (uprobes)")
        .map_err(|e| TraceError::Failed(e.to_string()))?;
    if !host.exists(&format!("{dir}/trace")) {
        if !host.exists(dir) {
            return Err(Missing::kernel(
                &format!("tracefs ({dir})"),
                "a kernel built with CONFIG_FTRACE",
            )
            .into());
        }
        session.apply(&Action::Mount { fstype: "tracefs".into(), target: dir.into() })?;
    }
    let events = format!("{dir}/uprobe_events");
    if !host.exists(&events) {
        return Err(Missing::kernel(
            "uprobe events (tracefs uprobe_events)",
            "a kernel built with CONFIG_UPROBE_EVENTS",
        )
        .into());
    }
    let group = format!("rtlab_{}", std::process::id());
    for (k, lib) in libs.iter().enumerate() {
        let bytes = std::fs::read(host.path(&lib.to_string_lossy()))
            .map_err(|e| TraceError::Io { what: lib.display().to_string(), source: e })?;
        let names: Vec<&str> = PROBES.iter().map(|p| p.0).collect();
        let offsets = elf::symbol_offsets(&bytes, &names)
            .map_err(|e| TraceError::Failed(format!("{}: {e}", lib.display())))?;
        for ((func, name, args), off) in PROBES.iter().zip(offsets) {
            let off =
                off.ok_or_else(|| TraceError::Failed(format!("{}: no {func}", lib.display())))?;
            let mut args = args.to_string();
            for (i, r) in regs.iter().enumerate() {
                args = args.replace(&format!("ARG{i}"), r);
            }
            let def = format!("p:{group}/{name}_{k} {}:{off:#x} {args}", lib.display());
            // uprobe_events takes a probe's definition and lists it in another form: written
            // (never truncated: that would remove every probe), undone by its removal
            session.apply(&Action::WriteWithUndo {
                path: events.clone(),
                value: def,
                undo: format!("-:{group}/{name}_{k}"),
            })?;
        }
    }
    let inst = format!("{dir}/instances/{group}");
    let real = host.path(&inst).display().to_string();
    session.apply(&Action::Command {
        did: vec!["mkdir".into(), real.clone()],
        undo: vec!["rmdir".into(), real],
    })?;
    let w = |s: &mut Session, p: String, v: &str| {
        s.apply(&Action::WriteFile { path: p, value: v.into() })
    };
    w(&mut session, format!("{inst}/trace_clock"), "mono")?;
    w(&mut session, format!("{inst}/events/{group}/enable"), "1")?;
    w(&mut session, format!("{inst}/tracing_on"), "1")?;
    let pipe = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(host.path(&format!("{inst}/trace_pipe")))
            .map_err(|e| TraceError::Io { what: format!("{inst}/trace_pipe"), source: e })?
    };
    Ok(Uprobes { session, pipe, partial: Vec::new(), group })
}

impl Uprobes<'_> {
    /// Events the instance's buffer lost (its per-CPU `overrun` counts): lines never read.
    pub fn overruns(&self, host: &dyn Host) -> u64 {
        let inst = format!("{}/instances/{}", crate::timerlat::TRACEFS_DIRS[0], self.group);
        let mut n = 0;
        let (cpus, _) = rtlab_sys::cpus::online_cpus(&host.path("/"));
        for cpu in cpus {
            let stats =
                std::fs::read_to_string(host.path(&format!("{inst}/per_cpu/cpu{cpu}/stats")));
            n += stats
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("overrun:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
        n
    }

    /// The whole lines the instance holds now (never waits).
    pub fn read(&mut self, out: &mut Vec<String>) {
        let mut buf = [0u8; 65536];
        loop {
            match self.pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
            }
        }
        while let Some(i) = self.partial.iter().position(|&c| c == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            out.push(String::from_utf8_lossy(&line[..i]).into_owned());
        }
    }

    /// Remove the probes and put tracefs back (also done on drop).
    pub fn detach(self) -> RestoreReport {
        // the instance cannot be removed while its trace_pipe is open
        let Uprobes { mut session, pipe, .. } = self;
        drop(pipe);
        session.restore()
    }
}
