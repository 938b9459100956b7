//! `rtlab completions SHELL` and `rtlab man`: generated from the command line's definition
//! (clap_complete, clap_mangen), so they never drift from the flags.

use clap::Args;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {}

/// `cmd`: the command line's definition (`Cli::command()`).
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<u8> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "rtlab", &mut buf);
    print!("{}", String::from_utf8_lossy(&buf));
    Ok(0)
}

/// `cmd`: the command line's definition (`Cli::command()`).
pub fn man(_: ManArgs, cmd: clap::Command) -> anyhow::Result<u8> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    print!("{}", String::from_utf8_lossy(&buf));
    Ok(0)
}
