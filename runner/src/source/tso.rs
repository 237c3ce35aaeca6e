//! Doris "now": `GET /api/tso` on the FE, and the conversions between TSOs, epoch milliseconds
//! and the `yyyy-MM-dd HH:mm:ss` UTC timestamps `@incr` takes.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use serde_json::Value;

use super::fe_http::{AttemptError, FeHttpClient, FeRequest};
use crate::checkpoint::Offset;
use crate::{Error, Result};

/// Bits of a TSO holding the logical counter: `tso = physical_ms << 18 | logical`.
pub const TSO_LOGICAL_BITS: u32 = 18;

/// The `@incr` timestamp format (UTC here, the runner's Flight session is set to `+00:00`).
pub const TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// The physical milliseconds of a TSO.
pub fn tso_to_ms(tso: i64) -> i64 {
    tso >> TSO_LOGICAL_BITS
}

/// The first TSO of a millisecond (logical counter 0).
pub fn ms_to_tso(ms: i64) -> i64 {
    ms << TSO_LOGICAL_BITS
}

/// Floor epoch milliseconds to whole seconds (a window end).
pub fn floor_to_second(ms: i64) -> i64 {
    ms.div_euclid(1000) * 1000
}

/// Epoch milliseconds as `yyyy-MM-dd HH:mm:ss` in UTC, floored to the second.
pub fn format_timestamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    match jiff::Timestamp::from_second(secs) {
        Ok(ts) => ts
            .to_zoned(TimeZone::UTC)
            .strftime(TIMESTAMP_FORMAT)
            .to_string(),
        Err(_) => format!("<out of range: {ms} ms>"),
    }
}

/// Parse a `yyyy-MM-dd HH:mm:ss` UTC timestamp into epoch milliseconds.
///
/// # Errors
/// When the text is not in that format.
pub fn parse_timestamp(text: &str) -> Result<i64> {
    let bad = |e: jiff::Error| Error::SourceConfig {
        reason: format!("{text:?} is not a timestamp of the form yyyy-MM-dd HH:mm:ss: {e}"),
    };
    let dt = DateTime::strptime(TIMESTAMP_FORMAT, text).map_err(bad)?;
    let zoned = dt.to_zoned(TimeZone::UTC).map_err(bad)?;
    Ok(zoned.timestamp().as_millisecond())
}

/// The offset at an instant, floored to the second (timestamp, epoch ms and TSO agree).
pub fn offset_at(ms: i64) -> Offset {
    let epoch_ms = floor_to_second(ms);
    Offset {
        timestamp: format_timestamp(epoch_ms),
        epoch_ms,
        tso: ms_to_tso(epoch_ms),
    }
}

/// Doris's current TSO as `/api/tso` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DorisNow {
    /// `current_tso`.
    pub tso: i64,
    /// `current_tso_physical_time`, epoch milliseconds.
    pub physical_ms: i64,
}

impl DorisNow {
    /// The window end this instant allows: now floored to the second.
    pub fn window_end(&self) -> Offset {
        offset_at(self.physical_ms)
    }

    /// The changelog start point T0 of an `initial` sync taken at this instant: the first window
    /// starts at now floored to the second (as `@incr` takes it), and `tso` is Doris's current
    /// TSO itself, so that the changes committed before T0 — already in the snapshot, though the
    /// first window, starting at T0's second, returns them again — can be told apart.
    pub fn start_point(&self) -> Offset {
        Offset {
            tso: self.tso,
            ..self.window_end()
        }
    }
}

/// Read `/api/tso`'s `data`: requires `current_tso_physical_time > 0`.
///
/// # Errors
/// A description of what is missing.
pub fn parse_tso_data(data: &Value) -> std::result::Result<DorisNow, String> {
    let physical_ms = data
        .get("current_tso_physical_time")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("no current_tso_physical_time in {data}"))?;
    if physical_ms <= 0 {
        return Err(format!(
            "current_tso_physical_time is {physical_ms}, not a time"
        ));
    }
    let tso = data
        .get("current_tso")
        .and_then(Value::as_i64)
        .unwrap_or_else(|| ms_to_tso(physical_ms));
    Ok(DorisNow { tso, physical_ms })
}

/// Resolve Doris "now" from `/api/tso`, rotating through the FE nodes for up to
/// `request_retries` attempts (the connector's `resolveCurrentTimestamp`).
///
/// # Errors
/// [`Error::SourceCredentials`] on a 401 (not retried), else [`Error::CurrentTimestamp`] with the
/// last failure.
pub async fn current(http: &FeHttpClient) -> Result<DorisNow> {
    let attempts = http.settings().request_retries.max(1);
    let mut last = String::new();
    for attempt in 0..attempts {
        match http
            .call_once(attempt as usize, "/api/tso", &FeRequest::Get)
            .await
        {
            Ok(data) => match parse_tso_data(&data) {
                Ok(now) => return Ok(now),
                Err(m) => last = m,
            },
            Err(AttemptError::Unauthorized(detail)) => {
                return Err(Error::SourceCredentials { detail });
            }
            Err(e) => last = e.to_string(),
        }
        tracing::warn!(attempt, error = %last, "reading /api/tso failed");
    }
    Err(Error::CurrentTimestamp { attempts, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tso_and_ms_convert() {
        assert_eq!(tso_to_ms(461373440032243713), 1760000000123);
        assert_eq!(tso_to_ms(ms_to_tso(1760000000123)), 1760000000123);
    }

    #[test]
    fn timestamps_are_utc_and_floored() {
        assert_eq!(format_timestamp(1760000000123), "2025-10-09 08:53:20");
        assert_eq!(
            parse_timestamp("2025-10-09 08:53:20").unwrap(),
            1760000000000
        );
        let o = offset_at(1760000000999);
        assert_eq!(o.epoch_ms, 1760000000000);
        assert_eq!(o.timestamp, "2025-10-09 08:53:20");
        assert_eq!(o.tso, 1760000000000 << 18);
        assert!(parse_timestamp("2025-10-09T08:53:20").is_err());
    }

    #[test]
    fn tso_data_needs_a_positive_physical_time() {
        let ok = serde_json::json!({"current_tso": 461373440032243713i64, "current_tso_physical_time": 1760000000123i64});
        assert_eq!(
            parse_tso_data(&ok).unwrap(),
            DorisNow {
                tso: 461373440032243713,
                physical_ms: 1760000000123
            }
        );
        assert!(parse_tso_data(&serde_json::json!({"current_tso_physical_time": 0})).is_err());
        assert!(parse_tso_data(&serde_json::json!({})).is_err());
    }
}
