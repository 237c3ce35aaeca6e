//! The changelog's retention edge, guarded by the runner itself (docs/doris-protocols.md §1.7).
//!
//! Doris drops a change once its commit time is at or before `now - ttl_seconds` (Doris's clock,
//! the TSO's physical time). An `@incr` read whose start is already past that edge fails under
//! MIN_DELTA, but under DETAIL and APPEND_ONLY Doris silently moves the start to the first change
//! it still has: the window comes back short and nothing says so. Reading on would leave a silent
//! gap in the sink, so the runner never lets Doris decide:
//!
//! - **before** every `@incr` read (every attempt, retries included), and so before the first
//!   window after a start from a checkpoint, an offset-table row or `fromTimestamp`, the window's
//!   start is compared with Doris's now (`/api/tso`, the clock window ends come from) minus the
//!   table's current TTL (read again from the table's properties every time, so a TTL lowered
//!   with `ALTER TABLE … SET ("changelog.ttl_seconds" = …)` counts from the next window on). A
//!   start that is past the edge, or within [`SAFETY_MARGIN`] of it, stops the run with
//!   [`Error::OffsetExpired`] (exit 3) before anything is read;
//! - **after** the read, before the window is handed on as complete (so before the offset can
//!   advance), the same comparison is made again with a fresh now and TTL, without the margin.
//!   Doris fixes a statement's edge when it starts, and the edge only moves forward, so a start
//!   still inside the retention after the read was inside it when the statement ran: the window
//!   was read whole. A clock that jumped, or a TTL lowered, while the window was read fails this
//!   check, and the window's rows are never committed;
//! - while an `initial` snapshot is read, T0 is checked at every snapshot checkpoint, so a
//!   snapshot that outlives the TTL stops as soon as it does instead of at its end.
//!
//! The same reads of the table's properties check that its deletes reach the changelog
//! (`dcs_crds::preconditions::light_delete_problem`): `enable_mow_light_delete` turned on with an
//! `ALTER TABLE` while the sync runs stops it with [`Error::SourcePrecondition`] at the next
//! check, and a window read while it was on is never committed (the check after the read fails).
//!
//! The margin covers what happens between the check and the moment Doris fixes the statement's
//! edge (the Flight round trip and planning, well under a second) plus clock skew between FEs; a
//! window closer than that to expiry is not worth a read that the second check would throw away.
//! Known limit: a TTL raised and lowered again between two checks of one window is not seen.

use std::time::Duration;

use tokio::sync::Mutex;

use super::fe_http::FeHttpClient;
use super::properties;
use super::tso::{self, format_timestamp};
use crate::checkpoint::Offset;
use crate::settings::SourceSettings;
use crate::{Error, Result};

/// How far inside the retention edge a window must start to be read.
pub const SAFETY_MARGIN: Duration = Duration::from_secs(30);

/// How long one read of the table's properties may take.
const PROPERTIES_DEADLINE: Duration = Duration::from_secs(15);

/// Where a start stands against the retention edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Inside the retention by more than the margin: `headroom_ms` before it is not.
    Readable {
        /// Milliseconds until the start comes within the margin of the edge.
        headroom_ms: i64,
    },
    /// Past the edge (`gone`) or within the margin of it.
    Expired {
        /// The changes at the start are gone already (not just close to going).
        gone: bool,
        /// The retention edge: changes committed at or before it are gone.
        edge_ms: i64,
    },
}

/// Judge a window start (epoch ms) against Doris's now and the TTL (pure).
pub fn judge(start_ms: i64, doris_now_ms: i64, ttl_seconds: u64, margin: Duration) -> Verdict {
    let edge_ms = dcs_crds::retention::edge_ms(doris_now_ms, ttl_seconds);
    let margin_ms = i64::try_from(margin.as_millis()).unwrap_or(i64::MAX);
    if start_ms <= edge_ms {
        return Verdict::Expired {
            gone: true,
            edge_ms,
        };
    }
    let headroom_ms = start_ms - edge_ms - margin_ms;
    if headroom_ms <= 0 {
        Verdict::Expired {
            gone: false,
            edge_ms,
        }
    } else {
        Verdict::Readable { headroom_ms }
    }
}

/// What one check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The table's TTL when checked.
    pub ttl_seconds: u64,
    /// Doris's now when checked.
    pub doris_now_ms: i64,
}

/// Checks window starts against the source table's retention, on Doris's clock.
#[derive(Debug)]
pub struct RetentionGuard {
    http: FeHttpClient,
    /// A MySQL connection kept between checks (the TTL is read at every window).
    conn: Mutex<Option<mysql_async::Conn>>,
}

impl RetentionGuard {
    /// A guard for the settings' table.
    pub fn new(http: FeHttpClient) -> Self {
        Self {
            http,
            conn: Mutex::new(None),
        }
    }

    fn settings(&self) -> &SourceSettings {
        self.http.settings()
    }

    /// Check that changes from `start` on are still in the changelog, `margin` inside its edge.
    ///
    /// # Errors
    /// [`Error::OffsetExpired`] when they are not; the errors of reading `/api/tso` and the table's
    /// properties.
    pub async fn check(&self, start: &Offset, margin: Duration) -> Result<Retention> {
        let info = self.table_info().await?;
        deletes_recorded(&self.settings().table.to_string(), &info)?;
        let ttl_seconds = info.ttl_seconds;
        let key = format!("{}ttl_seconds", info.spelling.prefix());
        let now = tso::current(&self.http).await?;
        match judge(start.epoch_ms, now.physical_ms, ttl_seconds, margin) {
            Verdict::Readable { .. } => Ok(Retention {
                ttl_seconds,
                doris_now_ms: now.physical_ms,
            }),
            Verdict::Expired { gone, edge_ms } => Err(Error::OffsetExpired {
                offset: start.timestamp.clone(),
                ttl_key: key,
                ttl_seconds,
                now: format_timestamp(now.physical_ms),
                edge: format_timestamp(edge_ms),
                gone,
                margin_seconds: margin.as_secs(),
            }),
        }
    }

    /// Wait until every change committed at or before `t0` is visible, before an `initial` sync
    /// reads its snapshot: a transaction committed (its TSO taken) just before T0 but published a
    /// moment later would otherwise be in neither the snapshot nor — dropped at the seam
    /// ([`super::changelog::drop_before_seam`]) — the changelog.
    ///
    /// Doris waits for the committed-not-visible transactions with a commit TSO up to a time-based
    /// `@incr`'s end before it answers (docs/doris-protocols.md §1.6), so a count over the second
    /// after T0's is the barrier (over MySQL, on the kept connection); its end must not be after
    /// Doris's now, so that second is waited for first (at most one second). Visibility errors are
    /// retried until `visible_wait_timeout`, as for any window.
    ///
    /// # Errors
    /// Doris's message once the wait is over; the errors of `/api/tso` and of the query.
    pub async fn await_visible_through(
        &self,
        t0: &Offset,
        options: &crate::settings::ChangelogOptions,
    ) -> Result<()> {
        let start = tso::offset_at(t0.epoch_ms);
        let end = tso::offset_at(t0.epoch_ms + 1000);
        loop {
            let now = tso::current(&self.http).await?;
            if now.physical_ms >= end.epoch_ms {
                break;
            }
            let left = u64::try_from(end.epoch_ms - now.physical_ms).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(left.clamp(10, 1000))).await;
        }
        let sql = format!(
            "SELECT COUNT(*) FROM {}@incr('startTimestamp' = '{}', 'endTimestamp' = '{}', 'incrementType' = 'APPEND_ONLY')",
            self.settings().table.quoted(),
            start.timestamp,
            end.timestamp
        );
        let first = tokio::time::Instant::now();
        loop {
            match self.query_count(&sql).await {
                Ok(()) => return Ok(()),
                Err(Error::WindowNotReady { code, message }) => {
                    let Some(delay) =
                        super::visibility::retry_delay(options, first.elapsed(), &message)
                    else {
                        return Err(Error::Doris {
                            context: format!(
                                "waiting for the changes before T0 {} to become visible (visibleWaitTimeout {:?})",
                                t0.timestamp, options.visible_wait_timeout
                            ),
                            message,
                        });
                    };
                    tracing::info!(code, ?delay, "changes before T0 not visible yet; waiting");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Run a query whose rows are not needed on the kept connection; Doris's visibility errors
    /// become [`Error::WindowNotReady`].
    async fn query_count(&self, sql: &str) -> Result<()> {
        let mut slot = self.conn.lock().await;
        if slot.is_none() {
            *slot = Some(properties::connect(self.settings()).await?);
        }
        let conn = slot.as_mut().expect("connected above");
        let read = tokio::time::timeout(PROPERTIES_DEADLINE, async {
            use mysql_async::prelude::Queryable;
            conn.query_drop(sql).await
        })
        .await;
        match read {
            Ok(Ok(())) => Ok(()),
            Ok(Err(mysql_async::Error::Server(e)))
                if matches!(e.code, 5100 | 5101) || e.message.starts_with("ERR_INCR_") =>
            {
                Err(Error::WindowNotReady {
                    code: if e.message.starts_with("ERR_INCR_WINDOW_NOT_READY") {
                        5100
                    } else {
                        e.code
                    },
                    message: e.message,
                })
            }
            Ok(Err(e)) => {
                *slot = None;
                Err(properties::mysql_error(
                    "waiting for the changes before T0",
                    e,
                ))
            }
            Err(_) => {
                *slot = None;
                Err(Error::SourceUnavailable {
                    context: "waiting for the changes before T0".into(),
                    reason: format!("no answer within {PROPERTIES_DEADLINE:?}"),
                })
            }
        }
    }

    /// The table's changelog properties (TTL, light delete), on the kept connection (opened
    /// again after a failure).
    async fn table_info(&self) -> Result<properties::SourceTableInfo> {
        let mut slot = self.conn.lock().await;
        for attempt in 0..2 {
            if slot.is_none() {
                *slot = Some(properties::connect(self.settings()).await?);
            }
            let conn = slot.as_mut().expect("connected above");
            let read = tokio::time::timeout(
                PROPERTIES_DEADLINE,
                properties::read_with(conn, self.settings()),
            )
            .await;
            match read {
                Ok(Ok(info)) => return Ok(info),
                // The table's answer: not worth a new connection.
                Ok(Err(e @ (Error::Doris { .. } | Error::SourceCredentials { .. }))) => {
                    return Err(e);
                }
                Ok(Err(e)) if attempt == 1 => return Err(e),
                Err(_) if attempt == 1 => {
                    return Err(Error::SourceUnavailable {
                        context: format!("reading the changelog TTL of {}", self.settings().table),
                        reason: format!("no answer within {PROPERTIES_DEADLINE:?}"),
                    });
                }
                _ => {
                    // A broken connection is opened again once.
                    *slot = None;
                }
            }
        }
        unreachable!("the second attempt returns")
    }
}

/// `Err` when table `t`'s deletes do not reach its changelog (`enable_mow_light_delete`): the
/// run stops rather than lose them without a word.
///
/// # Errors
/// [`Error::SourcePrecondition`] with the problem and the fix.
pub fn deletes_recorded(t: &str, info: &properties::SourceTableInfo) -> Result<()> {
    match dcs_crds::preconditions::light_delete_problem(t, info) {
        None => Ok(()),
        Some(p) => Err(Error::SourcePrecondition {
            reason: p.unmet.reason(),
            message: p.message(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1000;

    #[test]
    fn a_start_inside_the_retention_by_more_than_the_margin_is_readable() {
        let now = 1_000_000 * S;
        // TTL 600 s: the edge is now - 600 s.
        assert_eq!(
            judge(now - 500 * S, now, 600, Duration::from_secs(30)),
            Verdict::Readable {
                headroom_ms: 70 * S
            }
        );
        assert_eq!(
            judge(now, now, 600, Duration::from_secs(30)),
            Verdict::Readable {
                headroom_ms: 570 * S
            }
        );
    }

    #[test]
    fn a_start_within_the_margin_or_past_the_edge_is_expired() {
        let now = 1_000_000 * S;
        let edge_ms = now - 600 * S;
        assert_eq!(
            judge(now - 570 * S, now, 600, Duration::from_secs(30)),
            Verdict::Expired {
                gone: false,
                edge_ms
            }
        );
        assert_eq!(
            judge(edge_ms + 1, now, 600, Duration::from_secs(30)),
            Verdict::Expired {
                gone: false,
                edge_ms
            }
        );
        // A change committed exactly at the edge is gone (Doris: commit time <= now - ttl).
        assert_eq!(
            judge(edge_ms, now, 600, Duration::from_secs(30)),
            Verdict::Expired {
                gone: true,
                edge_ms
            }
        );
        assert_eq!(
            judge(edge_ms - 700 * S, now, 600, Duration::ZERO),
            Verdict::Expired {
                gone: true,
                edge_ms
            }
        );
        // Without a margin, anything after the edge is readable.
        assert!(matches!(
            judge(edge_ms + 1, now, 600, Duration::ZERO),
            Verdict::Readable { headroom_ms: 1 }
        ));
    }

    #[test]
    fn huge_ttls_and_clocks_do_not_overflow() {
        assert!(matches!(
            judge(0, i64::MAX, u64::MAX, Duration::MAX),
            Verdict::Readable { .. } | Verdict::Expired { .. }
        ));
        assert!(matches!(
            judge(i64::MIN, 0, 1, Duration::ZERO),
            Verdict::Expired { gone: true, .. }
        ));
    }
}
