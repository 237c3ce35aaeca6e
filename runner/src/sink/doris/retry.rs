//! How the Doris sink waits between attempts: the configured back-off with jitter. What an answer
//! means (retry, done, give up) is `dcs_doris_client::stream_load`'s classification, shared with
//! the operator.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dcs_doris_client::stream_load::Backoff;

/// The delay before retry `attempt` (1-based).
pub fn delay(backoff: &Backoff, attempt: u32) -> Duration {
    backoff.delay(attempt, jitter())
}

/// A uniform value in `[0, 1)` for backoff jitter, from the clock's nanoseconds.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .subsec_nanos();
    f64::from(nanos % 1_000_000) / 1_000_000.0
}
