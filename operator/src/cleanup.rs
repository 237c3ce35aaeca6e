//! What a sync leaves in Doris, and removing it: when the sync is deleted (the finalizer) and when
//! it starts again under a new consumer (re-initialisation).
//!
//! - Pre-committed Stream Load transactions listed in the checkpoint (`pendingTxns`) are aborted
//!   through the sink FE's `/api/{db}/{table}/_stream_load_2pc` (`txn_operation: abort`) with the
//!   sink credentials. Not found, already aborted, or already committed (nothing left to abort)
//!   count as done.
//! - The consumer's offset-table row (`offsets.table`) is deleted over MySQL on the source FE with
//!   the source credentials, where the runner writes it (runner `checkpoint/offset_table.rs`).
//!   A missing table counts as done.
//! - On re-initialisation in upsert mode the sink table is truncated over MySQL on the sink FE
//!   (port: the source's `queryPort` when a sink FE is also a source FE, else 9030, as the runner
//!   does). A missing table counts as done.
//!
//! [`plan_cleanup`] and [`after_failure`] are pure; [`execute`] does the I/O.

use std::time::Duration;

use dcs_crds::{DorisChangelogSyncSpec, SinkMode, spec::TableRef};
use k8s_openapi::jiff::Timestamp;
use mysql_async::prelude::Queryable;

use crate::{checkpoint::Checkpoint, probe::DorisCredentials};

/// How long one Doris request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the cleanup runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The sync is being deleted.
    Deleted,
    /// The sync starts again under a new consumer id.
    Reinitialized,
}

/// A pre-committed transaction to abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnAbort {
    /// Sink database.
    pub db: String,
    /// Sink table.
    pub table: String,
    /// Doris's transaction id.
    pub txn_id: i64,
    /// Its label.
    pub label: String,
}

/// An offset-table row to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetRow {
    /// The offset table.
    pub table: TableRef,
    /// The consumer_id of the row.
    pub consumer_id: String,
}

/// What to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Transactions to abort.
    pub aborts: Vec<TxnAbort>,
    /// The offset-table row to delete.
    pub offset_row: Option<OffsetRow>,
    /// The sink table to truncate.
    pub truncate: Option<TableRef>,
}

impl Work {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.aborts.is_empty() && self.offset_row.is_none() && self.truncate.is_none()
    }

    /// The items in words, e.g. for an event naming what was left behind.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.aborts.is_empty() {
            let txns: Vec<String> = self
                .aborts
                .iter()
                .map(|t| format!("{} (label {}, db {})", t.txn_id, t.label, t.db))
                .collect();
            parts.push(format!(
                "pre-committed Stream Load transactions {}",
                txns.join(", ")
            ));
        }
        if let Some(row) = &self.offset_row {
            parts.push(format!(
                "offset-table row consumer_id='{}' in {}",
                row.consumer_id, row.table
            ));
        }
        if let Some(table) = &self.truncate {
            parts.push(format!("the rows of sink table {table} (not truncated)"));
        }
        parts.join("; ")
    }
}

/// What `why` leaves to remove for this spec, checkpoint and consumer (pure).
pub fn plan_cleanup(
    spec: &DorisChangelogSyncSpec,
    checkpoint: Option<&Checkpoint>,
    consumer_id: &str,
    why: Why,
) -> Work {
    let sink = spec.sink.doris.as_ref();
    let sink_table = sink.and_then(|d| d.table_ref().ok());
    let aborts = match (&sink_table, checkpoint) {
        (Some(table), Some(cp)) => cp
            .pending_txns
            .iter()
            .map(|t| TxnAbort {
                db: if t.db.is_empty() {
                    table.database.clone()
                } else {
                    t.db.clone()
                },
                table: table.table.clone(),
                txn_id: t.txn_id,
                label: t.label.clone(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let offset_row = spec
        .offsets
        .as_ref()
        .and_then(|o| o.table.as_deref())
        .and_then(|t| t.parse::<TableRef>().ok())
        .map(|table| OffsetRow {
            table,
            consumer_id: consumer_id.to_owned(),
        });
    let truncate = match (why, sink) {
        (Why::Reinitialized, Some(d)) if d.mode == SinkMode::Upsert => sink_table,
        _ => None,
    };
    Work {
        aborts,
        offset_row,
        truncate,
    }
}

/// Bounded retries of a cleanup that fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts before giving up.
    pub max_attempts: u32,
    /// Delay after the first failure; doubled after each further one.
    pub first_delay: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts, 10 s then 20, 40, 80 s apart (about 2.5 minutes).
    fn default() -> Self {
        Self {
            max_attempts: 5,
            first_delay: Duration::from_secs(10),
        }
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Try again after this delay.
    Retry(Duration),
    /// Report what was left and let go.
    GiveUp,
}

/// After `attempts` failed attempts (counting the one that just failed) (pure).
pub fn after_failure(attempts: u32, policy: RetryPolicy) -> AfterFailure {
    if attempts >= policy.max_attempts {
        return AfterFailure::GiveUp;
    }
    let factor = 1u32 << attempts.saturating_sub(1).min(16);
    AfterFailure::Retry(policy.first_delay.saturating_mul(factor))
}

/// How long to wait before the next attempt, if its time has not come (pure).
pub fn wait_before_attempt(next_attempt: Option<Timestamp>, now: Timestamp) -> Option<Duration> {
    let next = next_attempt?;
    let ms = next.as_millisecond() - now.as_millisecond();
    (ms > 0).then(|| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// Where and as whom to reach Doris.
#[derive(Clone, Debug)]
pub struct Targets {
    /// Sink FE HTTP nodes (host:port).
    pub sink_fe_nodes: Vec<String>,
    /// Sink FE MySQL port.
    pub sink_query_port: u16,
    /// Sink credentials (when the sink is Doris and the Secret could be read).
    pub sink_credentials: Result<DorisCredentials, String>,
    /// Source FE HTTP nodes (host:port); their hosts serve MySQL on `source_query_port`.
    pub source_fe_nodes: Vec<String>,
    /// Source FE MySQL port.
    pub source_query_port: u16,
    /// Source credentials.
    pub source_credentials: Result<DorisCredentials, String>,
}

/// The sink's MySQL port: the source's when a sink FE is also a source FE, else 9030 (the runner's rule).
pub fn sink_query_port(spec: &DorisChangelogSyncSpec) -> u16 {
    let source = &spec.source;
    let same = spec.sink.doris.as_ref().is_some_and(|d| {
        d.fe_nodes.iter().any(|n| {
            source
                .fe_nodes
                .iter()
                .any(|s| s.trim_end_matches('/') == n.trim_end_matches('/'))
        })
    });
    if same {
        u16::try_from(source.query_port).unwrap_or(9030)
    } else {
        9030
    }
}

/// What an attempt did not manage, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The items still left.
    pub left: Work,
    /// One message per failure.
    pub errors: Vec<String>,
}

/// Removes `work`; every item is tried, the failures are reported.
pub async fn execute(work: &Work, targets: &Targets) -> Report {
    let mut report = Report::default();
    if !work.aborts.is_empty() {
        match &targets.sink_credentials {
            Err(e) => {
                report.left.aborts = work.aborts.clone();
                report.errors.push(e.clone());
            }
            Ok(creds) => {
                for txn in &work.aborts {
                    if let Err(e) = abort_txn(&targets.sink_fe_nodes, creds, txn).await {
                        report.left.aborts.push(txn.clone());
                        report.errors.push(e);
                    }
                }
            }
        }
    }
    if let Some(row) = &work.offset_row {
        let result = match &targets.source_credentials {
            Err(e) => Err(e.clone()),
            Ok(creds) => {
                let sql = format!(
                    "DELETE FROM {} WHERE `consumer_id` = '{}'",
                    row.table.quoted(),
                    row.consumer_id.replace('\\', "\\\\").replace('\'', "''")
                );
                run_sql(
                    &targets.source_fe_nodes,
                    targets.source_query_port,
                    creds,
                    &sql,
                    "the source",
                )
                .await
            }
        };
        if let Err(e) = result {
            report.left.offset_row = Some(row.clone());
            report.errors.push(format!(
                "cannot delete the offset-table row of consumer {} in {}: {e}",
                row.consumer_id, row.table
            ));
        }
    }
    if let Some(table) = &work.truncate {
        let result = match &targets.sink_credentials {
            Err(e) => Err(e.clone()),
            Ok(creds) => {
                run_sql(
                    &targets.sink_fe_nodes,
                    targets.sink_query_port,
                    creds,
                    &format!("TRUNCATE TABLE {}", table.quoted()),
                    "the sink",
                )
                .await
            }
        };
        if let Err(e) = result {
            report.left.truncate = Some(table.clone());
            report
                .errors
                .push(format!("cannot truncate sink table {table}: {e}"));
        }
    }
    report
}

fn host_of(node: &str) -> &str {
    node.rsplit_once(':').map_or(node, |(host, _)| host)
}

fn missing_table(text: &str) -> bool {
    text.contains("Unknown table")
        || text.contains("does not exist")
        || text.contains("Unknown database")
        || text.contains("doesn't exist")
}

/// Runs one statement on the first FE host that accepts a MySQL connection; a missing table is done.
async fn run_sql(
    fe_nodes: &[String],
    port: u16,
    creds: &DorisCredentials,
    sql: &str,
    side: &str,
) -> Result<(), String> {
    let mut last = format!("{side} has no FE nodes");
    for node in fe_nodes {
        let host = host_of(node);
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname(host)
            .tcp_port(port)
            .user(Some(creds.username.clone()))
            .pass(Some(creds.password.clone()))
            .prefer_socket(false);
        let attempt = async {
            let mut conn = mysql_async::Conn::new(opts)
                .await
                .map_err(|e| format!("cannot reach {side} FE {host}:{port} over MySQL: {e}"))?;
            let result = conn.query_drop(sql).await;
            let _ = conn.disconnect().await;
            match result {
                Ok(()) => Ok(()),
                Err(e) if missing_table(&e.to_string()) => Ok(()),
                Err(e) => Err(format!("{side} FE {host}:{port} refused {sql:?}: {e}")),
            }
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, attempt).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => last = e,
            Err(_) => {
                last = format!(
                    "{side} FE {host}:{port} did not answer within {}s",
                    REQUEST_TIMEOUT.as_secs()
                );
            }
        }
    }
    Err(last)
}

/// Whether a `_stream_load_2pc` abort answer means the transaction needs nothing more (pure).
pub fn abort_done(status: u16, body: &str) -> Result<(), String> {
    if status == 401 || status == 403 {
        return Err(format!(
            "Doris refused the sink credentials (HTTP {status}); check the sink credentials Secret"
        ));
    }
    let answer: serde_json::Value = serde_json::from_str(body).map_err(|_| {
        format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        )
    })?;
    let field = |k: &str| {
        answer
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let state = field("status");
    let msg = field("msg");
    if state.eq_ignore_ascii_case("success") {
        return Ok(());
    }
    let lower = msg.to_ascii_lowercase();
    if lower.contains("not found")
        || lower.contains("already aborted")
        || lower.contains("could not abort")
    {
        return Ok(());
    }
    Err(if msg.is_empty() {
        format!(
            "HTTP {status}: {}",
            body.chars().take(200).collect::<String>()
        )
    } else {
        msg
    })
}

/// Aborts one transaction through the first sink FE that answers, following its 307 to a BE by
/// hand (credentials re-sent, never taken from the Location).
async fn abort_txn(
    fe_nodes: &[String],
    creds: &DorisCredentials,
    txn: &TxnAbort,
) -> Result<(), String> {
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let mut last = "the sink has no FE nodes".to_owned();
    for node in fe_nodes {
        let mut url = format!(
            "http://{node}/api/{}/{}/_stream_load_2pc",
            txn.db, txn.table
        );
        let mut answered = None;
        for _ in 0..3 {
            let resp = http
                .put(&url)
                .basic_auth(&creds.username, Some(&creds.password))
                .header("txn_id", txn.txn_id.to_string())
                .header("txn_operation", "abort")
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .send()
                .await;
            let resp = match resp {
                Ok(r) => r,
                Err(e) => {
                    last = format!(
                        "cannot reach sink FE {node} to abort transaction {}: {}",
                        txn.txn_id,
                        without_url(&e)
                    );
                    break;
                }
            };
            if resp.status() == reqwest::StatusCode::TEMPORARY_REDIRECT {
                let Some(next) = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| reqwest::Url::parse(v).ok())
                else {
                    last = "the sink FE redirected without a usable Location".to_owned();
                    break;
                };
                let mut next = next;
                let _ = next.set_username("");
                let _ = next.set_password(None);
                url = next.to_string();
                continue;
            }
            let status = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            answered = Some(abort_done(status, &body));
            break;
        }
        match answered {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) => {
                return Err(format!(
                    "cannot abort transaction {} (label {}) in sink db {}: {e}",
                    txn.txn_id, txn.label, txn.db
                ));
            }
            None => {}
        }
    }
    Err(last)
}

/// reqwest errors print the URL; keep messages short and free of credentials.
fn without_url(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    if let Some(url) = e.url() {
        msg = msg.replace(url.as_str(), "<url>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use dcs_crds::OffsetsSpec;

    use super::*;
    use crate::{checkpoint::PendingTxn, reconcile::testing};

    fn checkpoint_with_txns() -> Checkpoint {
        let mut cp = testing::streaming_checkpoint("orders", 5);
        cp.pending_txns = vec![
            PendingTxn {
                db: "db".into(),
                label: "dcs-orders-7-0".into(),
                txn_id: 17,
            },
            PendingTxn {
                db: "db".into(),
                label: "dcs-orders-7-1".into(),
                txn_id: 18,
            },
        ];
        cp
    }

    #[test]
    fn deletion_aborts_the_pending_txns_and_deletes_the_offset_row() {
        let mut spec = testing::spec();
        spec.offsets = Some(OffsetsSpec {
            table: Some("ops.offsets".into()),
            consumer_id: Some("student-sync".into()),
        });
        let work = plan_cleanup(
            &spec,
            Some(&checkpoint_with_txns()),
            "student-sync-r1",
            Why::Deleted,
        );
        assert_eq!(
            work.aborts
                .iter()
                .map(|t| (t.txn_id, t.table.as_str()))
                .collect::<Vec<_>>(),
            vec![(17, "dst"), (18, "dst")]
        );
        assert_eq!(
            work.offset_row,
            Some(OffsetRow {
                table: "ops.offsets".parse().unwrap(),
                consumer_id: "student-sync-r1".into()
            })
        );
        assert_eq!(work.truncate, None);
        assert_eq!(
            work.describe(),
            "pre-committed Stream Load transactions 17 (label dcs-orders-7-0, db db), 18 (label dcs-orders-7-1, db db); offset-table row consumer_id='student-sync-r1' in ops.offsets"
        );
    }

    #[test]
    fn reinit_truncates_only_in_upsert_mode() {
        let mut spec = testing::spec();
        let work = plan_cleanup(&spec, None, "orders", Why::Reinitialized);
        assert_eq!(work.truncate, Some("db.dst".parse().unwrap()));
        assert!(work.aborts.is_empty() && work.offset_row.is_none());
        spec.sink.doris.as_mut().unwrap().mode = SinkMode::Changelog;
        assert!(plan_cleanup(&spec, None, "orders", Why::Reinitialized).is_empty());
    }

    #[test]
    fn a_stdout_sink_leaves_nothing_in_the_sink() {
        let mut spec = testing::spec();
        spec.sink = serde_yaml::from_str("stdout: {}").unwrap();
        let work = plan_cleanup(
            &spec,
            Some(&checkpoint_with_txns()),
            "orders",
            Why::Reinitialized,
        );
        assert!(work.is_empty(), "{work:?}");
    }

    #[test]
    fn retries_double_and_stop_after_the_last_attempt() {
        let p = RetryPolicy::default();
        assert_eq!(
            after_failure(1, p),
            AfterFailure::Retry(Duration::from_secs(10))
        );
        assert_eq!(
            after_failure(2, p),
            AfterFailure::Retry(Duration::from_secs(20))
        );
        assert_eq!(
            after_failure(4, p),
            AfterFailure::Retry(Duration::from_secs(80))
        );
        assert_eq!(after_failure(5, p), AfterFailure::GiveUp);
        assert_eq!(after_failure(6, p), AfterFailure::GiveUp);
    }

    #[test]
    fn waiting_edges() {
        let now: Timestamp = "2026-11-29T14:00:00Z".parse().unwrap();
        assert_eq!(wait_before_attempt(None, now), None);
        assert_eq!(wait_before_attempt(Some(now), now), None);
        let later: Timestamp = "2026-11-29T14:00:00.5Z".parse().unwrap();
        assert_eq!(
            wait_before_attempt(Some(later), now),
            Some(Duration::from_millis(500))
        );
    }

    #[test]
    fn abort_answers() {
        assert_eq!(
            abort_done(
                200,
                r#"{"status":"Success","msg":"transaction [17] abort successfully."}"#
            ),
            Ok(())
        );
        for msg in [
            "errCode = 2, detailMessage = transaction [17] not found",
            "errCode = 2, detailMessage = transaction [17] is already aborted. abort reason: x",
            "errCode = 2, detailMessage = transaction [17] is already VISIBLE, could not abort.",
        ] {
            let body = serde_json::json!({"status": "Fail", "msg": msg}).to_string();
            assert_eq!(abort_done(200, &body), Ok(()), "{msg}");
        }
        let body = serde_json::json!({"status": "Fail", "msg": "disk full"}).to_string();
        assert_eq!(abort_done(200, &body), Err("disk full".into()));
        assert!(abort_done(401, "").unwrap_err().contains("credentials"));
        assert!(
            abort_done(502, "<html>")
                .unwrap_err()
                .starts_with("HTTP 502")
        );
    }

    #[test]
    fn the_sink_port_follows_the_runner_rule() {
        let mut spec = testing::spec();
        assert_eq!(sink_query_port(&spec), 9030);
        spec.source.query_port = 19030;
        spec.sink.doris.as_mut().unwrap().fe_nodes = vec!["fe:8030".into()];
        assert_eq!(sink_query_port(&spec), 19030);
    }
}
