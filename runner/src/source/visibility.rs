//! Doris's "not visible yet" answer to an `@incr` window (5100/5101, docs/doris-protocols.md
//! §1.6): how long to wait before asking again. Pure; the changelog reader and the retention
//! guard both wait by it.

use std::time::Duration;

use crate::settings::ChangelogOptions;

/// `retryAfterMs=<n>` in a 5100/5101 message.
pub fn retry_after(message: &str) -> Option<Duration> {
    let rest = &message[message.find("retryAfterMs=")? + "retryAfterMs=".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u64>().ok().map(Duration::from_millis)
}

/// After a visibility error, how long to wait before asking for the same window again, or `None`
/// when `visible_wait_timeout` has passed since the first error (zero: never retry). The delay is
/// Doris's `retryAfterMs` (else `retry_delay`), capped by `max_retry_delay` and the time left.
pub fn retry_delay(
    options: &ChangelogOptions,
    waited: Duration,
    message: &str,
) -> Option<Duration> {
    let left = options
        .visible_wait_timeout
        .checked_sub(waited)
        .filter(|l| !l.is_zero())?;
    Some(
        retry_after(message)
            .unwrap_or(options.retry_delay)
            .min(options.max_retry_delay)
            .min(left),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_retries_stop_at_the_timeout() {
        let o = ChangelogOptions {
            visible_wait_timeout: Duration::from_secs(5),
            retry_delay: Duration::from_millis(700),
            max_retry_delay: Duration::from_secs(2),
            ..Default::default()
        };
        let s = Duration::from_secs;
        assert_eq!(retry_delay(&o, s(0), "retryAfterMs=1000"), Some(s(1)));
        assert_eq!(
            retry_delay(&o, s(0), "no hint"),
            Some(Duration::from_millis(700))
        );
        assert_eq!(retry_delay(&o, s(0), "retryAfterMs=60000"), Some(s(2)));
        assert_eq!(
            retry_delay(&o, Duration::from_millis(4_500), "retryAfterMs=1000"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(retry_delay(&o, s(5), "retryAfterMs=1000"), None);
        let never = ChangelogOptions {
            visible_wait_timeout: Duration::ZERO,
            ..o
        };
        assert_eq!(
            retry_delay(&never, Duration::ZERO, "retryAfterMs=1000"),
            None
        );
    }

    #[test]
    fn retry_after_is_read_from_the_message() {
        let m = "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT, requestedEndTimestampMs=1, retryAfterMs=1000, timeoutMs=100";
        assert_eq!(retry_after(m), Some(Duration::from_millis(1000)));
        assert_eq!(retry_after("nothing"), None);
    }
}
