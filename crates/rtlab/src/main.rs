//! rtlab: a lab in one command for the real-time behaviour of robot communications on Linux.
//!
//! The binary is thin: it parses flags into `<Probe>Config`s (in one place per command),
//! runs the engines, renders and writes results. Exit codes: 0 ok, 1 a threshold the user
//! set was exceeded, 2 an error (bad input, missing tool, no privilege), with one line on
//! stderr naming what and where. (Model: ripgrep's `crates/core/main.rs`.)

mod cli;
mod cmd;
mod document;
mod evidence;
mod executor;
mod progress;
mod runner;
mod store_sink;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // help and version are not errors
            if !e.use_stderr() {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let _ = writeln!(std::io::stderr(), "rtlab: {}", one_line(&e.render().to_string()));
            return ExitCode::from(2);
        }
    };
    match cmd::dispatch(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let mut msg = format!("{e}");
            for cause in e.chain().skip(1) {
                msg.push_str(&format!(": {cause}"));
            }
            let _ = writeln!(std::io::stderr(), "rtlab: error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// clap's multi-line error as one line: the message, then its hints in parentheses.
fn one_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let head = lines.next().unwrap_or("error").to_string();
    let hints: Vec<String> = lines
        .filter(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(|l| l.trim_start_matches('[').trim_end_matches(']').to_string())
        .collect();
    if hints.is_empty() {
        head
    } else {
        format!("{head} ({})", hints.join("; "))
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
