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

/// `cmd`: the command line's definition (`Cli::command()`). One page: clap_mangen's title,
/// name, synopsis, description and options, then every command with its options (no page per
/// command: none is installed), EXAMPLES, EXIT STATUS and ENVIRONMENT.
pub fn man(_: ManArgs, mut cmd: clap::Command) -> anyhow::Result<u8> {
    let mut buf = Vec::new();
    cmd.build();
    let page = clap_mangen::Man::new(cmd.clone());
    page.render_title(&mut buf)?;
    page.render_name_section(&mut buf)?;
    page.render_synopsis_section(&mut buf)?;
    page.render_description_section(&mut buf)?;
    page.render_options_section(&mut buf)?;
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    text.push_str(".SH COMMANDS\n");
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
        command_section(&mut text, "rtlab", sub);
    }
    text.push_str(MAN_TAIL);
    print!("{text}");
    Ok(0)
}

/// The end of the page: what a person types first, what the exit code means, what the
/// environment changes.
const MAN_TAIL: &str = r#".SH EXAMPLES
.TP
\fBrtlab run quick\fR
The main job: timer, UDP and pub/sub, each without and with a real-time profile; the report's path is printed.
.TP
\fBrtlab run \-\-list\fR
The presets (the studies S1\-S4), their cases and time.
.TP
\fBrtlab timer \-\-interval 1ms \-\-duration 60s\fR
A 1 kHz timer's wake\-up latency (cyclictest's command lines run too: \fBrtlab timer \-m \-Sp90 \-i200\fR).
.TP
\fBrtlab udp ping \-\-pair \-\-period 1ms \-\-count 10000\fR
UDP round trips to a reflector in a network namespace.
.TP
\fBrtlab pubsub \-\-transport cyclonedds \-\-rate 1khz \-\-count 10000\fR
Message latency through Cyclone DDS.
.TP
\fBrtlab tune check\fR
What on this machine weakens real\-time behaviour, and the fix for each.
.TP
\fBrtlab report \-\-html report.html\fR
The newest stored run as one HTML file.
.TP
\fBrtlab compare 3 4 \-\-threshold 20\fR
Exit 1 when a case of run 4 regressed beyond 20 % against run 3.
.SH "EXIT STATUS"
.TP
\fB0\fR
Done. A probe exits 0 whatever it measured, missed deadlines included.
.TP
\fB1\fR
A limit you set was broken: \fBrun \-\-gate\fR, a scenario's \fB[[gate]]\fR, \fBcompare \-\-threshold\fR. Everything measured is stored first.
.TP
\fB2\fR
An error (a bad flag, file or packet, a missing tool or privilege), said in one line on stderr; the machine is left as found. A bare \fBrtlab run\fR lists the presets and exits 2.
.SH ENVIRONMENT
.TP
\fBRTLAB_DB\fR
The results store of \fBrun\fR, \fBruns\fR, \fBreport\fR, \fBcompare\fR, \fBexport\fR and \fBserve\fR when \fB\-\-db\fR is not given: a SQLite file or postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
.TP
\fBRTLAB_LOCK\fR
The lock file that lets one rtlab measure at a time on a machine.
.TP
\fBRTLAB_SSH\fR
The ssh command of \fB\-\-far ssh:\fR (words split on spaces), instead of \fBssh\fR.
.TP
\fBRTLAB_FAR_BIN\fR
The rtlab binary the far side runs (\fB\-\-far netns:\fR, \fBpair\fR, \fBssh:\fR), instead of this one.
.TP
\fBRTLAB_ROS2_ABI_UNCHECKED\fR
1: load an rcl whose ABI rtlab has not checked (said in the result's notes).
.TP
\fBRMW_IMPLEMENTATION\fR, \fBAMENT_PREFIX_PATH\fR
The ros2 transport's RMW and where it looks for a ROS 2 installation.
"#;

/// `.SS "rtlab timer"`: what the command does, its usage and every visible argument; then
/// its own commands the same way.
fn command_section(out: &mut String, parent: &str, cmd: &clap::Command) {
    use std::fmt::Write;
    let name = format!("{parent} {}", cmd.get_name());
    let _ = writeln!(out, ".SS \"{name}\"");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}", roff_text(&about.to_string()));
    }
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let id = a.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let value = a
            .get_value_names()
            .map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "));
        let mut head = Vec::new();
        if let Some(s) = a.get_short() {
            head.push(format!("\\fB\\-{s}\\fR"));
        }
        if let Some(l) = a.get_long() {
            head.push(format!("\\fB\\-\\-{}\\fR", roff_text(l)));
        }
        let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
        let head = match (head.is_empty(), &value) {
            (true, _) => format!("\\fI{}\\fR", value.unwrap_or_else(|| format!("<{id}>"))),
            (false, Some(v)) if takes_value => format!("{} \\fI{v}\\fR", head.join(", ")),
            (false, _) => head.join(", "),
        };
        let mut help =
            a.get_long_help().or(a.get_help()).map(|h| h.to_string()).unwrap_or_default();
        let defaults: Vec<_> =
            a.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
        if !defaults.is_empty() && takes_value {
            help.push_str(&format!(" [default: {}]", defaults.join(",")));
        }
        let possible: Vec<_> =
            a.get_possible_values().iter().map(|p| p.get_name().to_string()).collect();
        if !possible.is_empty() && takes_value {
            help.push_str(&format!(" [one of: {}]", possible.join(", ")));
        }
        if let Some(env) = a.get_env() {
            help.push_str(&format!(" [env: {}]", env.to_string_lossy()));
        }
        let _ = writeln!(out, ".TP\n{head}\n{}", roff_text(help.trim()));
    }
    // the command's examples, as its --help ends with them
    if let Some(ex) = cmd.get_after_help().map(|t| t.to_string()) {
        let body = ex.strip_prefix("Examples:\n").unwrap_or(&ex);
        let _ = writeln!(out, ".PP\nExamples:\n.nf\n{}\n.fi", roff_text(body));
    }
    for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help") {
        command_section(out, &name, sub);
    }
}

/// Text as roff reads it: backslashes and hyphens escaped, no line starting with a control
/// character.
fn roff_text(t: &str) -> String {
    let escaped = t.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
