//! iperf3's side of traffic loads: is the server listening yet, and what did the client
//! measure (from its --json output).
//!
//! Contract: never opens a connection to the server (it takes one client only, `--one-off`):
//! listening is read from /proc/net/tcp. Unreadable output gives `None`, never an error.

use crate::{LoadError, TrafficConfig};
use std::process::Child;
use std::time::{Duration, Instant};

/// Wait (up to 3 s) until the server listens; Err if it ended meanwhile.
pub(crate) fn wait_listening(t: &TrafficConfig, server: &mut Child) -> Result<(), LoadError> {
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        if let Ok(Some(st)) = server.try_wait() {
            return Err(LoadError::Died {
                what: "iperf3 server".into(),
                status: st.to_string(),
                stderr: crate::error::last_stderr_line(server),
            });
        }
        if t.netns.is_none() {
            // a probe connection would count as iperf3's one client: read /proc/net/tcp
            if port_listening(t.port) {
                return Ok(());
            }
        } else {
            // another namespace's sockets are not in our /proc/net/tcp; give the server time
            std::thread::sleep(Duration::from_millis(300));
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A TCP socket of this namespace listens on `port` (/proc/net/tcp and tcp6, state 0A).
pub fn port_listening(port: u16) -> bool {
    let hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).unwrap_or_default().lines().skip(1).any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.get(1).is_some_and(|a| a.ends_with(&hex)) && w.get(3) == Some(&"0A")
        })
    })
}

/// (bits per second, lost percent) from iperf3's --json output: from the per-interval
/// figures measured on this side (an interrupted reverse run leaves `end.sum` empty), else
/// from `end`.
pub fn parse_iperf(json: &str, udp: bool) -> (Option<f64>, Option<f64>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else { return (None, None) };
    let (mut bytes, mut secs, mut lost, mut packets) = (0.0, 0.0, 0.0, 0.0);
    for i in v["intervals"].as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
        bytes += i["sum"]["bytes"].as_f64().unwrap_or(0.0);
        secs += i["sum"]["seconds"].as_f64().unwrap_or(0.0);
        lost += i["sum"]["lost_packets"].as_f64().unwrap_or(0.0);
        packets += i["sum"]["packets"].as_f64().unwrap_or(0.0);
    }
    if secs > 0.0 {
        let lost_pct =
            (udp && packets + lost > 0.0).then(|| lost * 100.0 / (packets + lost).max(packets));
        return (Some(bytes * 8.0 / secs), if udp { lost_pct.or(Some(0.0)) } else { None });
    }
    let end = &v["end"];
    let bps = if udp {
        end["sum"]["bits_per_second"].as_f64()
    } else {
        end["sum_received"]["bits_per_second"]
            .as_f64()
            .or(end["sum_sent"]["bits_per_second"].as_f64())
    };
    let lost = if udp { end["sum"]["lost_percent"].as_f64() } else { None };
    (bps, lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf_json_is_read() {
        let j = r#"{"end":{"sum":{"bits_per_second":1.0e7,"lost_percent":0.5},"sum_sent":{"bits_per_second":2.0e7},"sum_received":{"bits_per_second":1.9e7}}}"#;
        assert_eq!(parse_iperf(j, true), (Some(1.0e7), Some(0.5)));
        assert_eq!(parse_iperf(j, false), (Some(1.9e7), None));
        assert_eq!(parse_iperf("not json", true), (None, None));
        let j = r#"{"intervals":[{"sum":{"bytes":1000,"seconds":1.0,"packets":9,"lost_packets":1}},{"sum":{"bytes":3000,"seconds":1.0,"packets":10,"lost_packets":0}}],"end":{"sum":{"bytes":0,"bits_per_second":0}}}"#;
        assert_eq!(parse_iperf(j, true), (Some(16000.0), Some(5.0)));
    }
}
