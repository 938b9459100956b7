//! A scenario's `[[gate]]` tables: limits its cases must keep (`rtlab run` exits 1 when one
//! is broken). Each table names cases and streams and one or more limits; each limit is one
//! [`Gate`]:
//! ```toml
//! [[gate]]
//! case = "timer/*"        # a case name, or a glob with * (default *)
//! stream = "thread*"      # a stream name, or a glob with * (default *)
//! p99_9 = "200us"         # durations as the file's other durations
//! max = "1ms"
//! missed = 0              # a count, or a percentage of the samples: "0.1%"
//! lost = "1%"             # of the samples sent (count + lost)
//! ```
//! A trace's chain is named by its topics instead of a stream: `chain = "/scan,/cmd_vel"`
//! (the stream `chain /scan -> /cmd_vel`).
//!
//! Contract: every error is one [`ScenarioError`] naming the file, line, `gate[N].KEY`; a
//! gate whose case matches no case of the scenario is an error (a typo must not pass).

use super::file::{Ctx, GateTable};
use super::spec::{CaseSpec, ScenarioError};
use rtlab_core::gate::{pattern_match, Gate, GateLimit, GateMetric, METRIC_NAMES};

/// The gates of every `[[gate]]` table, in order (limits in the order p99_9, max, missed,
/// lost), each checked against the scenario's cases.
pub(super) fn read_gates(
    ctx: &Ctx,
    tables: &[GateTable],
    cases: &[CaseSpec],
) -> Result<Vec<Gate>, ScenarioError> {
    let mut gates = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let field = |k: &str| format!("gate[{i}].{k}");
        let map = t.get_ref();
        for (k, v) in map {
            if !["case", "stream", "chain"].contains(&k.as_str()) && GateMetric::parse(k).is_none()
            {
                return Err(ctx.err(
                    v.span(),
                    field(k),
                    format!("not a key of a gate (accepted: case, stream, chain, {METRIC_NAMES})"),
                ));
            }
        }
        let pattern = |k: &str| -> Result<String, ScenarioError> {
            match map.get(k) {
                None => Ok("*".into()),
                Some(v) => match v.get_ref() {
                    toml::Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                    _ => Err(ctx.err(
                        v.span(),
                        field(k),
                        format!("expected a {k} name or a glob such as \"timer/*\""),
                    )),
                },
            }
        };
        let (case, mut stream) = (pattern("case")?, pattern("stream")?);
        if let Some(v) = map.get("chain") {
            let topics: Vec<&str> = match v.get_ref() {
                toml::Value::String(s) => s.split(',').map(str::trim).collect(),
                _ => Vec::new(),
            };
            if map.contains_key("stream")
                || topics.len() < 2
                || topics.iter().any(|t| !t.starts_with('/'))
            {
                return Err(ctx.err(
                    v.span(),
                    field("chain"),
                    "a trace's chain by its topics (\"/scan,/cmd_vel\"), instead of a stream",
                ));
            }
            stream = crate::probes::trace::chain_stream_name(&topics);
        }
        let mut limits = 0;
        for metric in [GateMetric::P99_9, GateMetric::Max, GateMetric::Missed, GateMetric::Lost] {
            let Some(v) = map.get(metric.name()) else { continue };
            let text = match v.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                other => other.to_string(),
            };
            let limit = GateLimit::parse(metric, &text)
                .map_err(|m| ctx.err(v.span(), field(metric.name()), m))?;
            limits += 1;
            gates.push(Gate {
                case: case.clone(),
                stream: stream.clone(),
                metric,
                limit,
                origin: format!("gate[{i}]"),
            });
        }
        if limits == 0 {
            return Err(ctx.err(
                t.span(),
                format!("gate[{i}]"),
                format!("no limit: give at least one of {METRIC_NAMES}"),
            ));
        }
        if !cases.iter().any(|c| pattern_match(&case, &c.name)) {
            let span = map.get("case").map(|v| v.span()).unwrap_or(t.span());
            let names: Vec<&str> = cases.iter().take(3).map(|c| c.name.as_str()).collect();
            let more = if cases.len() > 3 { ", ..." } else { "" };
            return Err(ctx.err(
                span,
                field("case"),
                format!(
                    "'{case}' matches no case of the scenario (a whole name, or a glob with *; cases: {}{more})",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(gates)
}
