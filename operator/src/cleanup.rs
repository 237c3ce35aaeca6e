//! What a sync leaves in Doris, and removing it: when the sync is deleted (the finalizer) and when
//! it starts again under a new consumer (re-initialisation).
//!
//! - Pre-committed Stream Load transactions listed in the checkpoint (`pendingTxns`) are aborted
//!   through the sink FE's `/api/{db}/_stream_load_2pc` (`txn_operation: abort`) with the
//!   sink credentials, over the sink's TLS when it has it. Not found, already aborted, or already committed (nothing left to abort)
//!   count as done.
//! - With 2PC, loads the runner pre-committed after its last saved checkpoint are in no checkpoint:
//!   their labels are `<labelPrefix>-<consumerId>-<lastCheckpointId+1>-<seq>`, so they are aborted
//!   by label (the `label` form of the same request), seq 0, 1, … until Doris knows the label not.
//! - The consumer's offset-table row (`offsets.table`) is deleted over MySQL on the source FE with
//!   the source credentials (and TLS), where the runner writes it (runner `pipeline/offset_table.rs`).
//!   A missing table counts as done.
//! - The sink table itself is never touched: on re-initialisation the new consumer's runner
//!   rebuilds it (upsert: into a shadow table swapped in when complete; changelog mode: history
//!   kept, the new snapshot marked), so readers never see it empty.
//!
//! [`plan_cleanup`] and [`after_failure`] are pure; [`execute`] does the I/O. Stopping the runner
//! before any of this is `reconcile::stop`.

use std::time::Duration;

use dcs_crds::{
    DorisChangelogSyncSpec,
    label::{LabelOwner, LabelScheme, checkpoint_label_stem, load_label},
    spec::TableRef,
};
use dcs_doris_client::{
    TxnKey, TxnOperation, TxnOutcome, classify_txn,
    sql::string_literal,
    stream_load::{StreamLoadClient, Sweep},
};
use k8s_openapi::{api::core::v1::ConfigMap, jiff::Timestamp};
use mysql_async::prelude::Queryable;

use crate::{checkpoint::Checkpoint, probe::DorisAccess};

/// How long one Doris request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Loads pre-committed after the last saved checkpoint, which no checkpoint lists: the labels of
/// the consumer (`dcs_crds::label`) from `first_checkpoint_id` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSweep {
    /// Sink database.
    pub db: String,
    /// Sink table.
    pub table: String,
    /// The sync's namespace (part of its labels).
    pub namespace: String,
    /// `spec.sink.doris.labelPrefix`.
    pub label_prefix: String,
    /// The consumer whose loads they are.
    pub consumer_id: String,
    /// How they are labelled: the last checkpoint's scheme (the current one without a checkpoint).
    pub scheme: LabelScheme,
    /// The checkpoint id after the last saved one (1 when none was saved).
    pub first_checkpoint_id: u64,
}

impl LabelSweep {
    fn owner(&self) -> LabelOwner<'_> {
        LabelOwner {
            namespace: &self.namespace,
            prefix: &self.label_prefix,
            consumer_id: &self.consumer_id,
        }
    }

    /// The label of load `seq` of checkpoint `checkpoint_id`.
    pub fn label(&self, checkpoint_id: u64, seq: u32) -> String {
        load_label(&self.owner(), self.scheme, None, checkpoint_id, seq)
    }

    /// The first checkpoint's labels without the seq, for messages: `dcs-s-4`.
    fn label_stem(&self) -> String {
        checkpoint_label_stem(&self.owner(), self.scheme, self.first_checkpoint_id)
    }
}

/// What to remove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Transactions to abort.
    pub aborts: Vec<TxnAbort>,
    /// Loads after the last checkpoint to abort by label.
    pub stale_labels: Option<LabelSweep>,
    /// The offset-table row to delete.
    pub offset_row: Option<OffsetRow>,
}

impl Work {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.aborts.is_empty() && self.stale_labels.is_none() && self.offset_row.is_none()
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
        if let Some(sweep) = &self.stale_labels {
            parts.push(format!(
                "any loads pre-committed after the last checkpoint (labels {}-<seq> and later checkpoint ids, db {})",
                sweep.label_stem(),
                sweep.db
            ));
        }
        if let Some(row) = &self.offset_row {
            parts.push(format!(
                "offset-table row consumer_id='{}' in {}",
                row.consumer_id, row.table
            ));
        }
        parts.join("; ")
    }
}

/// What a stopped runner of `consumer` left in Doris, from its checkpoint ConfigMap as read now
/// that no runner can change it (pure). Without the ConfigMap no runner ever ran (it is created
/// with the first; e.g. a sync blocked from the start), so no load can be pre-committed.
pub fn work_left(
    ns: &str,
    spec: &DorisChangelogSyncSpec,
    checkpoint_cm: Option<&ConfigMap>,
    consumer: &str,
) -> Work {
    let checkpoint: Option<Checkpoint> = checkpoint_cm
        .and_then(crate::checkpoint::text_of)
        .and_then(|t| crate::checkpoint::parse(t).ok().flatten());
    let mut work = plan_cleanup(ns, spec, checkpoint.as_ref(), consumer);
    if checkpoint_cm.is_none() {
        work.stale_labels = None;
    }
    work
}

/// What `why` leaves to remove for this spec, checkpoint and consumer (pure). A deletion and a
/// re-initialisation leave the same things behind; the sink table stays in both.
pub fn plan_cleanup(
    namespace: &str,
    spec: &DorisChangelogSyncSpec,
    checkpoint: Option<&Checkpoint>,
    consumer_id: &str,
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
    let stale_labels = match (sink, &sink_table) {
        (Some(d), Some(table)) if d.enable2pc => {
            let (consumer, first, scheme) = checkpoint
                .map_or((consumer_id, 1, LabelScheme::V2), |cp| {
                    (cp.consumer_id.as_str(), cp.checkpoint_id + 1, cp.labels())
                });
            Some(LabelSweep {
                db: table.database.clone(),
                table: table.table.clone(),
                namespace: namespace.to_owned(),
                label_prefix: d.label_prefix.clone(),
                consumer_id: consumer.to_owned(),
                scheme,
                first_checkpoint_id: first,
            })
        }
        _ => None,
    };
    Work {
        aborts,
        stale_labels,
        offset_row,
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
    /// Access to the sink (when the sink is Doris and its Secrets could be read).
    pub sink_access: Result<DorisAccess, String>,
    /// Source FE HTTP nodes (host:port); their hosts serve MySQL on `source_query_port`.
    pub source_fe_nodes: Vec<String>,
    /// Source FE MySQL port.
    pub source_query_port: u16,
    /// Access to the source.
    pub source_access: Result<DorisAccess, String>,
    /// Secrets and ConfigMaps (`Secret ns/name`) that do not exist or do not allow the sync:
    /// retrying cannot help.
    pub secrets_gone: Vec<String>,
}

/// What an attempt did not manage, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The items still left.
    pub left: Work,
    /// One message per failure.
    pub errors: Vec<String>,
    /// Labels of loads after the last checkpoint that were found and aborted.
    pub swept: Vec<String>,
}

/// What a successful cleanup of `work` removed, in words (pure).
pub fn cleaned_note(work: &Work, report: &Report) -> String {
    let done = Work {
        stale_labels: None,
        ..work.clone()
    };
    let mut parts = Vec::new();
    let listed = done.describe();
    if !listed.is_empty() {
        parts.push(listed);
    }
    if !report.swept.is_empty() {
        parts.push(format!(
            "loads pre-committed after the last checkpoint (labels {})",
            report.swept.join(", ")
        ));
    }
    if parts.is_empty() {
        "nothing of the sync was left in Doris (no load pre-committed after its last checkpoint)"
            .to_owned()
    } else {
        format!("removed from Doris: {}", parts.join("; "))
    }
}

/// Removes `work`; every item is tried, the failures are reported.
pub async fn execute(work: &Work, targets: &Targets) -> Report {
    let mut report = Report::default();
    if !work.aborts.is_empty() {
        match &targets.sink_access {
            Err(e) => {
                report.left.aborts = work.aborts.clone();
                report.errors.push(e.clone());
            }
            Ok(access) => {
                for txn in &work.aborts {
                    if let Err(e) = abort_txn(&targets.sink_fe_nodes, access, txn).await {
                        report.left.aborts.push(txn.clone());
                        report.errors.push(e);
                    }
                }
            }
        }
    }
    if let Some(sweep) = &work.stale_labels {
        match &targets.sink_access {
            Err(e) => {
                report.left.stale_labels = Some(sweep.clone());
                report.errors.push(e.clone());
            }
            Ok(access) => {
                let (swept, failure) = sweep_labels(&targets.sink_fe_nodes, access, sweep).await;
                report.swept = swept;
                if let Some((checkpoint_id, e)) = failure {
                    report.left.stale_labels = Some(LabelSweep {
                        first_checkpoint_id: checkpoint_id,
                        ..sweep.clone()
                    });
                    report.errors.push(e);
                }
            }
        }
    }
    if let Some(row) = &work.offset_row {
        let result = match &targets.source_access {
            Err(e) => Err(e.clone()),
            Ok(access) => {
                let sql = format!(
                    "DELETE FROM {} WHERE `consumer_id` = {}",
                    row.table.quoted(),
                    string_literal(&row.consumer_id)
                );
                run_sql(
                    &targets.source_fe_nodes,
                    targets.source_query_port,
                    access,
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
    report
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
    access: &DorisAccess,
    sql: &str,
    side: &str,
) -> Result<(), String> {
    let mut last = format!("{side} has no FE nodes");
    let creds = &access.credentials;
    for node in fe_nodes {
        let host = dcs_doris_client::host_of(node);
        let attempt = async {
            let mut conn = dcs_doris_client::mysql::connect_to_tls(
                host,
                port,
                &creds.username,
                &creds.password,
                &access.tls,
            )
            .await
            .map_err(|e| {
                let what =
                    dcs_doris_client::mysql::describe_connect_error(host, port, &access.tls, &e);
                format!("cannot reach {side}: {what}")
            })?;
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

/// The most checkpoint ids after the last saved one whose labels are swept (a runner gets at most
/// one ahead of its store; the rest guards against a loop).
const MAX_SWEPT_CHECKPOINTS: u64 = 8;

/// The sink's 2PC client: the FEs, tried in turn (each redirects to a BE of the cluster), over
/// the sink's TLS.
fn sink_client(fe_nodes: &[String], access: &DorisAccess) -> Result<StreamLoadClient, String> {
    StreamLoadClient::new(
        fe_nodes.to_vec(),
        Vec::new(),
        access.credentials.username.clone(),
        access.credentials.password.clone(),
        REQUEST_TIMEOUT,
    )
    .with_tls(access.tls.clone())
}

/// Aborts the labels of `sweep` ([`StreamLoadClient::sweep_labels`]; a label Doris already
/// committed has nothing left to abort). Returns the labels aborted and, on failure, the
/// checkpoint id it stopped at with the message.
async fn sweep_labels(
    fe_nodes: &[String],
    access: &DorisAccess,
    sweep: &LabelSweep,
) -> (Vec<String>, Option<(u64, String)>) {
    let client = match sink_client(fe_nodes, access) {
        Ok(c) => c,
        Err(e) => return (Vec::new(), Some((sweep.first_checkpoint_id, e))),
    };
    let plan = Sweep {
        db: &sweep.db,
        first_checkpoint_id: sweep.first_checkpoint_id,
        checkpoints: MAX_SWEPT_CHECKPOINTS,
        // Every FE once before the attempt fails (the whole cleanup is retried later).
        retries: u32::try_from(fe_nodes.len().saturating_sub(1)).unwrap_or(u32::MAX),
        label: |id, seq| sweep.label(id, seq),
    };
    let swept = client.sweep_labels(&plan, |_| Duration::ZERO).await;
    let failure = swept.stopped.map(|stop| {
        (
            stop.checkpoint_id,
            format!(
                "cannot abort load {} in sink db {}: {}",
                stop.label, sweep.db, stop.message
            ),
        )
    });
    (swept.aborted, failure)
}

/// Aborts one transaction by id, through each sink FE in turn until one answers.
async fn abort_txn(
    fe_nodes: &[String],
    access: &DorisAccess,
    txn: &TxnAbort,
) -> Result<(), String> {
    let client = sink_client(fe_nodes, access)?;
    let mut last = "the sink has no FE nodes".to_owned();
    for pick in 0..fe_nodes.len() {
        let answer = match client
            .send_2pc(&txn.db, TxnKey::Id(txn.txn_id), TxnOperation::Abort, pick)
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                last = e;
                continue;
            }
        };
        return match classify_txn(TxnOperation::Abort, answer.status, &answer.body) {
            // Committed: its rows are visible and nothing is left to abort.
            TxnOutcome::Done | TxnOutcome::AlreadyCommitted(_) => Ok(()),
            TxnOutcome::Retry(e) | TxnOutcome::Permanent(e) | TxnOutcome::Lost(e) => Err(format!(
                "cannot abort transaction {} (label {}) in sink db {}: {e}",
                txn.txn_id, txn.label, txn.db
            )),
        };
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use dcs_crds::OffsetsSpec;

    use super::*;
    use dcs_crds::testing::SyncBuilder;

    use crate::{checkpoint::PendingTxn, reconcile::testing};

    fn checkpoint_with_txns() -> Checkpoint {
        let mut cp = testing::streaming_checkpoint("orders", 5);
        cp.pending_txns = vec![
            PendingTxn {
                db: "db".into(),
                label: "dcs-orders-7-0".into(),
                txn_id: 17,
                rows: None,
                dead_letter: false,
            },
            PendingTxn {
                db: "db".into(),
                label: "dcs-orders-7-1".into(),
                txn_id: 18,
                rows: None,
                dead_letter: false,
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
            "ns",
            &spec,
            Some(&checkpoint_with_txns()),
            "student-sync-r1",
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
        // Loads after checkpoint 5 carry the checkpoint's consumer and id 6.
        assert_eq!(
            work.stale_labels,
            Some(LabelSweep {
                db: "db".into(),
                table: "dst".into(),
                namespace: "ns".into(),
                label_prefix: "dcs".into(),
                consumer_id: "orders".into(),
                scheme: LabelScheme::V1,
                first_checkpoint_id: 8,
            })
        );
        assert_eq!(
            work.describe(),
            "pre-committed Stream Load transactions 17 (label dcs-orders-7-0, db db), 18 (label dcs-orders-7-1, db db); any loads pre-committed after the last checkpoint (labels dcs-orders-8-<seq> and later checkpoint ids, db db); offset-table row consumer_id='student-sync-r1' in ops.offsets"
        );
    }

    #[test]
    fn without_a_checkpoint_the_sweep_starts_at_checkpoint_one_and_needs_2pc() {
        let mut spec = testing::spec();
        let work = plan_cleanup("ns", &spec, None, "orders-r1");
        let sweep = work.stale_labels.expect("a sweep");
        assert_eq!(
            (sweep.consumer_id.as_str(), sweep.first_checkpoint_id),
            ("orders-r1", 1)
        );
        // Without a checkpoint the labels are the current scheme's.
        let tag = LabelOwner {
            namespace: "ns",
            prefix: "dcs",
            consumer_id: "orders-r1",
        }
        .tag();
        assert_eq!(sweep.label(1, 2), format!("dcs-orders-r1-{tag}-1-2"));
        spec.sink.doris.as_mut().unwrap().enable2pc = false;
        assert!(plan_cleanup("ns", &spec, None, "orders").is_empty());
    }

    #[test]
    fn the_cleaned_note_names_what_was_found() {
        let mut spec = testing::spec();
        spec.offsets = Some(OffsetsSpec {
            table: Some("ops.offsets".into()),
            consumer_id: None,
        });
        let work = plan_cleanup("ns", &spec, None, "orders");
        let mut report = Report::default();
        assert_eq!(
            cleaned_note(&work, &report),
            "removed from Doris: offset-table row consumer_id='orders' in ops.offsets"
        );
        report.swept = vec!["dcs-orders-1-0".into()];
        assert_eq!(
            cleaned_note(&work, &report),
            "removed from Doris: offset-table row consumer_id='orders' in ops.offsets; loads pre-committed after the last checkpoint (labels dcs-orders-1-0)"
        );
        spec.offsets = None;
        let work = plan_cleanup("ns", &spec, None, "orders");
        assert_eq!(
            cleaned_note(&work, &Report::default()),
            "nothing of the sync was left in Doris (no load pre-committed after its last checkpoint)"
        );
    }

    #[test]
    fn a_stdout_sink_leaves_nothing_in_the_sink() {
        let spec = SyncBuilder::new().stdout().spec();
        let work = plan_cleanup("ns", &spec, Some(&checkpoint_with_txns()), "orders");
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
}
