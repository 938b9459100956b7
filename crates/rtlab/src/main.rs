//! rtlab: a lab in one command for the real-time behaviour of robot communications on Linux.
//!
//! The binary is thin: it parses flags into the probes' configurations (rtlab-lab: the same
//! structs as scenarios), calls the lab, renders and writes results. Exit codes: 0 ok, 1 a threshold the user
//! set was exceeded, 2 an error (bad input, missing tool, no privilege), with one line on
//! stderr naming what and where. (Model: ripgrep's `crates/core/main.rs`.)

#![forbid(unsafe_code)]

// Every print of the binary goes through `out`: a closed stdout never panics (these shadow
// std's macros in every module below).
macro_rules! println {
    () => { $crate::out::write(false, format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::write(false, format_args!("{}\n", format_args!($($t)*))) };
}
macro_rules! print {
    ($($t:tt)*) => { $crate::out::write(false, format_args!($($t)*)) };
}
macro_rules! eprintln {
    () => { $crate::out::write(true, format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::write(true, format_args!("{}\n", format_args!($($t)*))) };
}
macro_rules! eprint {
    ($($t:tt)*) => { $crate::out::write(true, format_args!($($t)*)) };
}

mod args;
mod cli;
mod cmd;
mod document;
mod examples;
mod out;
mod progress;

use clap::{CommandFactory, Parser};
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
    match dispatch(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) || out::closed() {
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

/// One command, to its module.
fn dispatch(cli: cli::Cli) -> anyhow::Result<u8> {
    match cli.command {
        cli::Command::Timer(a) => cmd::timer::run(a),
        cli::Command::Udp(a) => cmd::udp::run(a),
        cli::Command::Netns(a) => cmd::netns::run(a),
        cli::Command::Pubsub(a) => cmd::pubsub::run(*a),
        cli::Command::Load(a) => cmd::load::run(a),
        cli::Command::Tune(a) => cmd::tune::run(a),
        cli::Command::Run(a) => cmd::run::run(a),
        cli::Command::Runs(a) => cmd::runs::run(a),
        cli::Command::Report(a) => cmd::report::run(a),
        cli::Command::Compare(a) => cmd::compare::run(a),
        cli::Command::Export(a) => cmd::export::run(a),
        cli::Command::Serve(a) => cmd::serve::run(a),
        cli::Command::Push(a) => cmd::push::run(a),
        cli::Command::Cyclic(a) => cmd::cyclic::run(a),
        cli::Command::Noise(a) => cmd::noise::run(a),
        cli::Command::Agent(a) => cmd::agent::run(a),
        cli::Command::RoscppNode(a) => cmd::roscpp_node::run(a),
        cli::Command::Observe(a) => cmd::observe::run(a),
        cli::Command::Trace(a) => cmd::trace::run(a),
        cli::Command::Monitor(a) => cmd::monitor::run(a),
        cli::Command::Completions(a) => cmd::gen::completions(a, cli::Cli::command()),
        cli::Command::Man(a) => cmd::gen::man(a, cli::Cli::command()),
    }
}
