//! Units: integer nanoseconds, rates and sizes, parsed from and printed with their units.
//!
//! Contract: every time inside rtlab is an integer number of nanoseconds ([`Nanos`]);
//! `f64` seconds never enter the data path. Parsing accepts a number (integer or
//! decimal) followed by a unit: `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h` for durations;
//! `hz`, `khz` for rates; `b`, `kb`/`kib`, `mb`/`mib`, `gb`/`gib` for sizes;
//! `bit`, `kbit`, `mbit`, `gbit` for bit rates. Errors say what was given and what is accepted.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A signed time or lateness in integer nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub i64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const fn from_us(us: i64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: i64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub const fn from_secs(s: i64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }
    pub const fn as_i64(self) -> i64 {
        self.0
    }
    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.max(0) as u64)
    }
}

/// An error from parsing a value with units.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {what} '{given}': {why} (accepted: {accepted})")]
pub struct UnitError {
    pub what: &'static str,
    pub given: String,
    pub why: String,
    pub accepted: &'static str,
}

const DURATION_UNITS: &str = "a number with ns, us, ms, s, m or h, e.g. 250us, 1ms, 10s";
const RATE_UNITS: &str = "a number with hz or khz, e.g. 100hz, 1khz";
const SIZE_UNITS: &str = "bytes, or a number with b, kb, kib, mb, mib, gb, gib, e.g. 64, 4kb, 16mb";
const BITRATE_UNITS: &str = "a number with bit, kbit, mbit or gbit, e.g. 100mbit";

/// Split "12.5ms" into ("12.5", "ms"), lower-cased unit.
fn split_number(s: &str) -> (&str, String) {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim().to_ascii_lowercase())
}

/// Multiply a decimal string by an integer scale exactly (no f64), rounding to nearest.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    if number.is_empty() || number == "." {
        return None;
    }
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac.contains('.') || frac.len() > 18 {
        return None;
    }
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac_v: u128 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    let denom = 10u128.pow(frac.len() as u32);
    let whole = int_v.checked_mul(scale)?;
    let part = (frac_v * scale + denom / 2) / denom;
    whole.checked_add(part)
}

fn unit_error(what: &'static str, given: &str, why: &str, accepted: &'static str) -> UnitError {
    UnitError { what, given: given.to_string(), why: why.to_string(), accepted }
}

/// Parse a duration such as `250us`, `1ms`, `1.5s`. A bare number is refused: units are required.
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    let (num, unit) = split_number(s);
    let scale: u128 = match unit.as_str() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err(unit_error("duration", s, "a unit is required", DURATION_UNITS)),
        _ => return Err(unit_error("duration", s, "unknown unit", DURATION_UNITS)),
    };
    let v = scaled(num, scale)
        .ok_or_else(|| unit_error("duration", s, "not a number", DURATION_UNITS))?;
    i64::try_from(v).map(Nanos).map_err(|_| unit_error("duration", s, "too large", DURATION_UNITS))
}

/// A rate such as `100hz` or `1khz` in millihertz (exact), above zero.
fn parse_milli_hz(s: &str) -> Result<u128, UnitError> {
    let (num, unit) = split_number(s);
    let scale: u128 = match unit.as_str() {
        "hz" => 1_000,
        "khz" => 1_000_000,
        _ => return Err(unit_error("rate", s, "unknown or missing unit", RATE_UNITS)),
    };
    let milli_hz =
        scaled(num, scale).ok_or_else(|| unit_error("rate", s, "not a number", RATE_UNITS))?;
    if milli_hz == 0 {
        return Err(unit_error("rate", s, "must be above zero", RATE_UNITS));
    }
    Ok(milli_hz)
}

/// Parse a rate such as `100hz` or `1khz` into hertz.
pub fn parse_rate_hz(s: &str) -> Result<f64, UnitError> {
    Ok(parse_milli_hz(s)? as f64 / 1000.0)
}

/// The period of a rate given in hertz, in integer nanoseconds (rounded).
pub fn period_of_rate(s: &str) -> Result<Nanos, UnitError> {
    let milli_hz = parse_milli_hz(s)?;
    Ok(Nanos(((1_000_000_000_000u128 + milli_hz / 2) / milli_hz) as i64))
}

/// Parse a size in bytes: `64`, `4kb` (1000), `4kib` (1024), `16mb`, `1mib`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(s);
    let scale: u128 = match unit.as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "kib" => 1_024,
        "mb" | "m" => 1_000_000,
        "mib" => 1_048_576,
        "gb" | "g" => 1_000_000_000,
        "gib" => 1_073_741_824,
        _ => return Err(unit_error("size", s, "unknown unit", SIZE_UNITS)),
    };
    let v = scaled(num, scale).ok_or_else(|| unit_error("size", s, "not a number", SIZE_UNITS))?;
    u64::try_from(v).map_err(|_| unit_error("size", s, "too large", SIZE_UNITS))
}

/// Parse a bit rate into bits per second: `100mbit`, `1gbit`.
pub fn parse_bitrate(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(s);
    let scale: u128 = match unit.as_str() {
        "bit" | "bps" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        _ => return Err(unit_error("bit rate", s, "unknown or missing unit", BITRATE_UNITS)),
    };
    let v = scaled(num, scale)
        .ok_or_else(|| unit_error("bit rate", s, "not a number", BITRATE_UNITS))?;
    u64::try_from(v).map_err(|_| unit_error("bit rate", s, "too large", BITRATE_UNITS))
}

impl FromStr for Nanos {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s)
    }
}

impl fmt::Display for Nanos {
    /// Short human form with a unit: `850ns`, `12.3us`, `1.50ms`, `2.000s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let a = v.unsigned_abs();
        let sign = if v < 0 { "-" } else { "" };
        if a < 1_000 {
            write!(f, "{sign}{a}ns")
        } else if a < 1_000_000 {
            write!(f, "{sign}{}.{:01}us", a / 1_000, (a % 1_000) / 100)
        } else if a < 1_000_000_000 {
            write!(f, "{sign}{}.{:02}ms", a / 1_000_000, (a % 1_000_000) / 10_000)
        } else {
            write!(f, "{sign}{}.{:03}s", a / 1_000_000_000, (a % 1_000_000_000) / 1_000_000)
        }
    }
}

/// Format a duration the way it is written on the command line (`1ms`, `250us`, `1500ns`).
pub fn format_duration_exact(n: Nanos) -> String {
    let v = n.0;
    for (unit, scale) in [
        ("h", 3_600_000_000_000i64),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if v != 0 && v % scale == 0 {
            return format!("{}{unit}", v / scale);
        }
    }
    format!("{v}ns")
}

/// A rounded human length: `45s`, `12m30s`, `3h05m`, `51h52m`.
pub fn format_duration_human(n: Nanos) -> String {
    let s = (n.0.max(0) + 500_000_000) / 1_000_000_000;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Microseconds as a decimal string with one digit (for tables in the studies' unit).
pub fn us_1(ns: i64) -> String {
    let neg = ns < 0;
    let a = ns.unsigned_abs();
    let tenths = (a + 50) / 100;
    format!("{}{}.{}", if neg { "-" } else { "" }, tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_exactly() {
        assert_eq!(parse_duration("250us").unwrap(), Nanos(250_000));
        assert_eq!(parse_duration("1ms").unwrap(), Nanos(1_000_000));
        assert_eq!(parse_duration("1.5ms").unwrap(), Nanos(1_500_000));
        assert_eq!(parse_duration("10s").unwrap(), Nanos(10_000_000_000));
        assert_eq!(parse_duration("2m").unwrap(), Nanos(120_000_000_000));
        assert_eq!(parse_duration("0.1us").unwrap(), Nanos(100));
        assert_eq!(parse_duration(" 7 ns ").unwrap(), Nanos(7));
    }

    #[test]
    fn durations_refuse_what_they_cannot_read() {
        assert!(parse_duration("1000").unwrap_err().why.contains("unit"));
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("1..2ms").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("1 fortnight").is_err());
        let e = parse_duration("abc").unwrap_err().to_string();
        assert!(e.contains("'abc'") && e.contains("accepted"), "{e}");
    }

    #[test]
    fn rates_sizes_and_bitrates() {
        assert_eq!(period_of_rate("1khz").unwrap(), Nanos(1_000_000));
        assert_eq!(period_of_rate("100hz").unwrap(), Nanos(10_000_000));
        assert_eq!(period_of_rate("3hz").unwrap(), Nanos(333_333_333));
        assert!(period_of_rate("0hz").is_err());
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("4kib").unwrap(), 4096);
        assert_eq!(parse_size("16mb").unwrap(), 16_000_000);
        assert_eq!(parse_bitrate("100mbit").unwrap(), 100_000_000);
        assert!(parse_bitrate("100").is_err());
    }

    #[test]
    fn display_and_exact_format() {
        assert_eq!(Nanos(850).to_string(), "850ns");
        assert_eq!(Nanos(12_345).to_string(), "12.3us");
        assert_eq!(Nanos(-1_500_000).to_string(), "-1.50ms");
        assert_eq!(format_duration_exact(Nanos(1_000_000)), "1ms");
        assert_eq!(format_duration_exact(Nanos(1_500_000)), "1500us");
        assert_eq!(us_1(12_345), "12.3");
        assert_eq!(format_duration_human(Nanos::from_secs(110)), "1m50s");
        assert_eq!(format_duration_human(Nanos::from_secs(186_750)), "51h52m");
        assert_eq!(format_duration_human(Nanos::from_ms(4_400)), "4s");
        assert_eq!(us_1(-50), "-0.1");
    }
}
