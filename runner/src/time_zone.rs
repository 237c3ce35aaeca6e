//! Arrow timestamp zones as Doris writes them (`+08:00`, `-05:30`, `Z`, `UTC` or an IANA name),
//! read one way by the source's timestamp normalisation and the sink's encoders.

use jiff::tz::{Offset, TimeZone};

use crate::{Error, Result};

/// Resolve an Arrow timestamp zone: `+08:00`, `-05:30`, `Z`, `UTC` or an IANA name.
///
/// # Errors
/// When the zone is unknown.
pub fn parse_zone(tz: &str) -> Result<TimeZone> {
    let t = tz.trim();
    if t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("utc") {
        return Ok(TimeZone::UTC);
    }
    if let Some(sign) = t.chars().next().filter(|c| *c == '+' || *c == '-') {
        let digits = &t[1..];
        let (h, m) = digits.split_once(':').unwrap_or((digits, "0"));
        let (h, m) = (h.parse::<i32>(), m.parse::<i32>());
        if let (Ok(h), Ok(m)) = (h, m) {
            let secs = (h * 3600 + m * 60) * if sign == '-' { -1 } else { 1 };
            let offset = Offset::from_seconds(secs).map_err(|e| bad_zone(tz, &e))?;
            return Ok(TimeZone::fixed(offset));
        }
    }
    TimeZone::get(t).map_err(|e| bad_zone(tz, &e))
}

fn bad_zone(tz: &str, e: &dyn std::fmt::Display) -> Error {
    Error::UnexpectedResult {
        context: "DATETIME column".into(),
        reason: format!("timestamp column has an unknown time zone {tz:?}: {e}"),
    }
}
