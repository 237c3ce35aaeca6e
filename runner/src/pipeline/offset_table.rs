//! The Flink-connector-compatible offset table (`offsets.table` + `offsets.consumerId`,
//! docs/doris-protocols.md §2.5).
//!
//! The table has the connector's schema:
//!
//! ```sql
//! CREATE TABLE ops.offsets (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL,
//!   update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1
//! ```
//!
//! After each completed checkpoint in the changelog phase the runner upserts the row of its consumer
//! id with the start of the next window (the end of the last finished one, UTC, as `@incr` takes
//! it), over MySQL on the source FE's query port with the source credentials. The write runs in a
//! background task ([`OffsetPublisher`]) holding only the latest value: a slow or failing write
//! never blocks the pipeline; failures are logged, counted and retried.
//!
//! Unlike the connector, the runner reads the row back on start when it has no checkpoint
//! (docs/ARCHITECTURE.md §3.1): checkpoint → offset-table row → `startup.mode`. A configured table
//! that is missing, unreadable, holds several rows for the consumer or a bad timestamp fails the
//! start ([`Error::OffsetTable`]); there is no fallback to the startup mode.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dcs_crds::spec::TableRef;
use dcs_doris_client::mysql::within;
use mysql_async::prelude::Queryable;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::checkpoint::Offset;
use crate::settings::RetryPolicy;
use crate::settings::SourceSettings;
use crate::source::properties::{connect, mysql_error};
use crate::source::tso::{offset_at, parse_timestamp};
use crate::{Error, Result};

/// The table's DDL (without the name), as in the connector's docs.
pub const COLUMNS_DDL: &str = "(consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id)";

/// The connector's upsert of one consumer's row.
pub fn insert_sql(table: &TableRef) -> String {
    format!(
        "INSERT INTO {} (`consumer_id`, `offset_timestamp`, `update_time`) VALUES (?, ?, CURRENT_TIMESTAMP(3))",
        table.quoted()
    )
}

/// The read of one consumer's rows.
pub fn select_sql(table: &TableRef) -> String {
    format!(
        "SELECT `offset_timestamp` FROM {} WHERE `consumer_id` = ?",
        table.quoted()
    )
}

/// A DATETIME as MySQL returns it (text, or the binary protocol's date value), as
/// `yyyy-MM-dd HH:mm:ss[.ffffff]`; `None` for NULL and other types.
pub fn datetime_text(value: &mysql_async::Value) -> Option<String> {
    match value {
        mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        mysql_async::Value::Date(y, mo, d, h, mi, s, us) => Some(if *us == 0 {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
        } else {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}")
        }),
        _ => None,
    }
}

/// Decide the start point from the consumer's rows (each `offset_timestamp`, `None` for NULL):
/// none → no row, one → that instant (UTC, floored to the second), more → an error. Pure.
///
/// # Errors
/// [`Error::OffsetTable`] for duplicated rows or a NULL or malformed timestamp.
pub fn start_from_rows(
    table: &TableRef,
    consumer_id: &str,
    rows: &[Option<String>],
) -> Result<Option<Offset>> {
    let fail = |reason: String| Error::OffsetTable {
        table: table.to_string(),
        reason,
    };
    match rows {
        [] => Ok(None),
        [one] => {
            let text = one.as_deref().ok_or_else(|| {
                fail(format!(
                    "the row of consumer {consumer_id} has a NULL offset_timestamp; fix or delete the row"
                ))
            })?;
            // DATETIME may come back with a zero fraction; whole seconds are what @incr takes.
            let whole = match text.split_once('.') {
                Some((s, frac)) if frac.bytes().all(|b| b.is_ascii_digit()) => s,
                _ => text,
            };
            let ms = parse_timestamp(whole.trim()).map_err(|_| {
                fail(format!(
                    "the row of consumer {consumer_id} has offset_timestamp {text:?}, not a yyyy-MM-dd HH:mm:ss timestamp; fix or delete the row"
                ))
            })?;
            Ok(Some(offset_at(ms)))
        }
        many => Err(fail(format!(
            "{} rows for consumer {consumer_id}, expected at most one; the table must be UNIQUE KEY(consumer_id): {COLUMNS_DDL}",
            many.len()
        ))),
    }
}

/// Read the consumer's row: the start point it records, if there is one.
///
/// # Errors
/// [`Error::OffsetTable`] when the table cannot be read (missing, wrong columns, FE unreachable),
/// or see [`start_from_rows`]; [`Error::SourceCredentials`] when the login fails.
pub async fn read_start(
    settings: &SourceSettings,
    table: &TableRef,
    consumer_id: &str,
) -> Result<Option<Offset>> {
    let unreadable = |e: Error| match e {
        Error::SourceCredentials { .. } => e,
        e => Error::OffsetTable {
            table: table.to_string(),
            reason: format!(
                "cannot be read ({e}); create it as CREATE TABLE {table} {COLUMNS_DDL} DISTRIBUTED BY HASH(consumer_id) BUCKETS 1, or remove offsets.table"
            ),
        },
    };
    let mut conn = connect(settings).await.map_err(unreadable)?;
    let deadline = settings.request_timeout;
    let rows: std::result::Result<Vec<mysql_async::Row>, _> =
        within(deadline, conn.exec(select_sql(table), (consumer_id,))).await;
    let _ = within(deadline, conn.disconnect()).await;
    let rows = rows.map_err(|e| unreadable(mysql_error("reading the offset table", e)))?;
    let values: Vec<Option<String>> = rows
        .iter()
        .map(|r| r.as_ref(0).and_then(datetime_text))
        .collect();
    start_from_rows(table, consumer_id, &values)
}

#[derive(Debug, Default)]
struct Slot {
    latest: Option<Offset>,
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    slot: Mutex<Slot>,
    notify: Notify,
    failures: AtomicU64,
    written: AtomicU64,
}

impl Shared {
    fn take(&self) -> (Option<Offset>, bool) {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        (slot.latest.take(), slot.closed)
    }

    fn has_newer(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .latest
            .is_some()
    }
}

/// Writes the offset-table row in the background, latest value first.
#[derive(Debug)]
pub struct OffsetPublisher {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl OffsetPublisher {
    /// Start the writer for `consumer_id`'s row in `table`.
    pub fn spawn(
        settings: SourceSettings,
        table: TableRef,
        consumer_id: String,
        retry: RetryPolicy,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let task = tokio::spawn(write_loop(
            Arc::clone(&shared),
            settings,
            table,
            consumer_id,
            retry,
        ));
        Self { shared, task }
    }

    /// Ask for `offset` to be written; replaces a value not written yet. Never waits.
    pub fn publish(&self, offset: Offset) {
        self.shared
            .slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .latest = Some(offset);
        self.shared.notify.notify_one();
    }

    /// Failed write attempts so far.
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::Relaxed)
    }

    /// Rows written so far.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Ordering::Relaxed)
    }

    /// Write the last published value (with its retries) for at most `timeout`, then stop.
    pub async fn finish(mut self, timeout: Duration) {
        self.shared
            .slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .closed = true;
        self.shared.notify.notify_one();
        if tokio::time::timeout(timeout, &mut self.task).await.is_err() {
            tracing::warn!(
                ?timeout,
                "the offset table row was not written before the runner stopped"
            );
        }
        // Drop aborts the task if it is still running.
    }
}

impl Drop for OffsetPublisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn write_loop(
    shared: Arc<Shared>,
    settings: SourceSettings,
    table: TableRef,
    consumer_id: String,
    retry: RetryPolicy,
) {
    let sql = insert_sql(&table);
    let mut conn: Option<mysql_async::Conn> = None;
    loop {
        let (next, closed) = shared.take();
        let Some(offset) = next else {
            if closed {
                break;
            }
            shared.notify.notified().await;
            continue;
        };
        for attempt in 1..=retry.attempts.max(1) {
            match write_once(&mut conn, &settings, &sql, &consumer_id, &offset).await {
                Ok(()) => {
                    shared.written.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(offset = %offset.timestamp, "offset table row written");
                    break;
                }
                Err(e) => {
                    conn = None;
                    shared.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%table, offset = %offset.timestamp, attempt, "could not write the offset table row: {e}");
                }
            }
            if attempt == retry.attempts.max(1) || shared.has_newer() {
                break;
            }
            let delay = retry.base_delay.saturating_mul(1 << (attempt - 1).min(16));
            tokio::time::sleep(delay).await;
            if shared.has_newer() {
                break;
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.disconnect().await;
    }
}

async fn write_once(
    conn: &mut Option<mysql_async::Conn>,
    settings: &SourceSettings,
    sql: &str,
    consumer_id: &str,
    offset: &Offset,
) -> Result<()> {
    if conn.is_none() {
        *conn = Some(connect(settings).await?);
    }
    let c = conn.as_mut().expect("connected above");
    within(
        settings.request_timeout,
        c.exec_drop(sql, (consumer_id, offset.timestamp.as_str())),
    )
    .await
    .map_err(|e| mysql_error("writing the offset table", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> TableRef {
        "ops.offsets".parse().unwrap()
    }

    #[test]
    fn sql_is_the_connectors() {
        assert_eq!(
            insert_sql(&t()),
            "INSERT INTO `ops`.`offsets` (`consumer_id`, `offset_timestamp`, `update_time`) VALUES (?, ?, CURRENT_TIMESTAMP(3))"
        );
        assert_eq!(
            select_sql(&t()),
            "SELECT `offset_timestamp` FROM `ops`.`offsets` WHERE `consumer_id` = ?"
        );
    }

    #[test]
    fn rows_decide_the_start() {
        assert_eq!(start_from_rows(&t(), "c", &[]).unwrap(), None);
        let one = start_from_rows(&t(), "c", &[Some("2026-11-29 13:00:00".into())]).unwrap();
        assert_eq!(one, Some(offset_at(1_795_957_200_000)));
        let frac = start_from_rows(&t(), "c", &[Some("2026-11-29 13:00:00.000".into())]).unwrap();
        assert_eq!(frac, one);
        let dup = [
            Some("2026-11-29 13:00:00".into()),
            Some("2026-11-29 13:00:01".into()),
        ];
        let err = start_from_rows(&t(), "c", &dup).unwrap_err();
        assert!(err.to_string().contains("2 rows for consumer c"), "{err}");
        let err = start_from_rows(&t(), "c", &[Some("yesterday".into())]).unwrap_err();
        assert!(err.to_string().contains("\"yesterday\""), "{err}");
        assert!(start_from_rows(&t(), "c", &[None]).is_err());
    }

    #[test]
    fn binary_datetimes_are_formatted() {
        let v = mysql_async::Value::Date(2026, 11, 29, 13, 0, 5, 0);
        assert_eq!(datetime_text(&v).as_deref(), Some("2026-11-29 13:00:05"));
        let v = mysql_async::Value::Bytes(b"2026-11-29 13:00:05".to_vec());
        assert_eq!(datetime_text(&v).as_deref(), Some("2026-11-29 13:00:05"));
        assert_eq!(datetime_text(&mysql_async::Value::NULL), None);
    }
}
