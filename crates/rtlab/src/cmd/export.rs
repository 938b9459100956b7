//! `rtlab export RUN... --format json|csv [--what stats|histogram|windows|cost] [-o FILE|-]`:
//! stored runs as one JSON document or pandas-friendly long-format CSV.

use super::runs::{load_runs, open_store};
use crate::document::{check_writable, write_text};
use anyhow::Context;
use clap::{Args, ValueEnum};
use rtlab_lab::store::{to_csv, to_json, CsvWhat, DEFAULT_DB};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatArg {
    Json,
    Csv,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhatArg {
    /// One row per run / case / stream with the statistics columns.
    Stats,
    /// One row per histogram bucket.
    Histogram,
    /// One row per max-over-time window.
    Windows,
    /// What each case cost: a row per case, measured window, measuring thread, thread
    /// group and role process.
    Cost,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// Runs to export: ids (see `rtlab runs`) or `latest`.
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<String>,
    /// The store: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
    #[arg(long, env = "RTLAB_DB", hide_env_values = true, default_value = DEFAULT_DB, value_name = "FILE|URL")]
    pub db: String,
    /// json: each run as one document; csv: one row per stream and statistic (or bucket,
    /// window, cost: --what), long format for pandas.
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// What the CSV holds (JSON always holds everything).
    #[arg(long, value_enum, default_value = "stats")]
    pub what: WhatArg,
    /// Output file; - for stdout.
    #[arg(long, short = 'o', default_value = "-", value_name = "FILE")]
    pub output: String,
}

pub fn run(a: ExportArgs) -> anyhow::Result<u8> {
    if a.format == FormatArg::Json && a.what != WhatArg::Stats {
        anyhow::bail!("--what applies to --format csv only (the JSON export holds everything)");
    }
    check_writable(&a.output, "--output")?;
    let store = open_store(&a.db)?;
    let runs = load_runs(&store, &a.runs)?;
    let text = match a.format {
        FormatArg::Json => to_json(&runs),
        FormatArg::Csv => to_csv(
            &runs,
            match a.what {
                WhatArg::Stats => CsvWhat::Stats,
                WhatArg::Histogram => CsvWhat::Histogram,
                WhatArg::Windows => CsvWhat::Windows,
                WhatArg::Cost => CsvWhat::Cost,
            },
        ),
    };
    write_text(&text, &a.output).with_context(|| format!("--output {}", a.output))?;
    Ok(0)
}
