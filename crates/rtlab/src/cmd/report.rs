//! `rtlab report [RUN...] [--html FILE]`: render stored runs from the store alone (nothing is
//! re-run): the terminal report, or one self-contained HTML file.

use super::runs::{load_runs, open_store};
use crate::document::{check_writable, write_text};
use anyhow::Context;
use clap::Args;
use rtlab_lab::store::DEFAULT_DB;
use std::io::{IsTerminal, Write};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Runs to render: ids (see `rtlab runs`) or `latest`. Default: the latest run.
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// The store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// Write one self-contained HTML file (opens offline) instead of the terminal report.
    #[arg(long, value_name = "FILE")]
    pub html: Option<String>,
}

pub fn run(a: ReportArgs) -> anyhow::Result<u8> {
    if let Some(h) = &a.html {
        check_writable(h, "--html")?;
    }
    let store = open_store(&a.db)?;
    let specs = if a.runs.is_empty() { vec!["latest".to_string()] } else { a.runs.clone() };
    let runs = load_runs(&store, &specs)?;
    match &a.html {
        Some(path) => {
            write_text(&rtlab_report::render_html(&runs), path)
                .with_context(|| format!("--html {path}"))?;
            if path != "-" {
                println!("report: {path}");
            }
        }
        None => {
            let color = std::io::stdout().is_terminal();
            let mut out = std::io::stdout().lock();
            write!(out, "{}", rtlab_report::render_terminal(&runs, color))?;
        }
    }
    Ok(0)
}
