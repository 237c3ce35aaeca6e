//! Doris "now": `GET /api/tso` on the FE, and the conversions between TSOs, epoch milliseconds
//! and the `yyyy-MM-dd HH:mm:ss` UTC timestamps `@incr` takes.

pub use dcs_doris_client::fe_api::{DorisNow, tso_to_ms};
use dcs_doris_client::fe_api::{ms_to_tso, parse_tso_data};
use jiff::tz::TimeZone;

use super::fe_http::{AttemptError, FeHttpClient, FeRequest};
use crate::checkpoint::Offset;
use crate::{Error, Result};

/// The `@incr` timestamp format (UTC here, the runner's Flight session is set to `+00:00`); the
/// same text `startup.timestamp` is written in.
pub use dcs_crds::spec::TIMESTAMP_FORMAT;

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

/// Parse a `yyyy-MM-dd HH:mm:ss` UTC timestamp into epoch milliseconds
/// ([`crate::settings::timestamp_ms`]).
///
/// # Errors
/// When the text is not in that format or names no date and time.
pub fn parse_timestamp(text: &str) -> Result<i64> {
    crate::settings::timestamp_ms(text).map_err(|reason| Error::SourceConfig { reason })
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

/// The offsets an instant of Doris's clock gives the runner.
pub trait NowOffsets {
    /// The window end this instant allows: now floored to the second.
    fn window_end(&self) -> Offset;

    /// The changelog start point T0 of an `initial` sync taken at this instant: the first window
    /// starts at now floored to the second (as `@incr` takes it), and `tso` is Doris's current
    /// TSO itself, so that the changes committed before T0 — already in the snapshot, though the
    /// first window, starting at T0's second, returns them again — can be told apart.
    fn start_point(&self) -> Offset;
}

impl NowOffsets for DorisNow {
    fn window_end(&self) -> Offset {
        offset_at(self.physical_ms)
    }

    fn start_point(&self) -> Offset {
        Offset {
            tso: self.tso,
            ..self.window_end()
        }
    }
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
        http.pause_before(attempt).await;
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

    /// An FE that refuses connections (nothing listens on a port just freed).
    fn refusing_fe() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        drop(listener);
        address.to_string()
    }

    #[tokio::test]
    async fn reading_doris_now_backs_off_between_rounds_of_the_fes() {
        let settings = crate::settings::SourceSettings {
            fe_nodes: vec![refusing_fe()],
            query_port: 9030,
            flight_sql_port: None,
            table: "d.t".parse().unwrap(),
            credentials: crate::settings::SourceCredentials {
                user: "u".into(),
                password: "p".into(),
            },
            request_retries: 3,
            request_timeout: std::time::Duration::from_secs(5),
            tls: Default::default(),
        };
        let http = FeHttpClient::new(settings).unwrap();
        let started = tokio::time::Instant::now();
        let err = current(&http).await.unwrap_err();
        // One FE, three attempts: 0.5 s before the second and 1 s before the third.
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(err, Error::CurrentTimestamp { attempts: 3, .. }),
            "{err}"
        );
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
}
