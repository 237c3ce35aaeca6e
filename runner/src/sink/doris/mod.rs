//! The Doris sink: Stream Load into a Doris table with retries, and the two-phase commit steps
//! around checkpoints (docs/ARCHITECTURE.md §3.6).
//!
//! With 2PC, the loads between two checkpoints are labelled with the id of the checkpoint that will
//! record them and their sequence number (`dcs_crds::label`); each is pre-committed at once and
//! committed only after that checkpoint is saved. Without 2PC, loads are visible at once and the
//! labels carry a random run tag as well, so a restart (which re-reads from the last checkpoint)
//! never collides with a label of the previous run and loads again: at least once, idempotent on
//! UNIQUE KEY sinks.
//!
//! The files, by role: the settings are `crate::settings::DorisSinkConfig`; [`request`] builds what
//! a load sends besides its body (label, headers); this module is the service (load, commit,
//! abort, recover); [`retry`] the back-off (what an answer means is classified by
//! `dcs_doris_client::stream_load`, shared with the operator). The table itself: [`create_table`]
//! (DDL, pure), [`schema`] (creating, checking and evolving it over MySQL), [`rebuild`] (the
//! shadow table of a re-initialised consumer; the decision is `crate::sink::rebuild`).

pub mod create_table;
pub mod dead_letter;
pub mod rebuild;
mod request;
mod retry;
pub mod schema;
pub mod type_fit;

use std::borrow::Cow;
use std::time::Duration;

use arrow_schema::DataType;
use bytes::Bytes;
use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

pub use request::load_headers;

use super::label::LabelScheme;
use super::rebuild::{Planned, Rebuild};
use super::schema_change::{Follow, SchemaChange};
use super::{DeadLettered, Encoding, LoadBatch, LoadResult, LostLoad, Sink};
use crate::checkpoint::{Checkpoint, PendingTxn};
use crate::settings::{BatchLimits, DeadLetterSettings, DorisSinkConfig, SourceSettings};
use crate::{Error, Result};
use dcs_doris_client::stream_load::{
    LoadOutcome, LoadReport, LoadRequest, StreamLoadClient, Sweep, error_log_lines,
    rejection_message,
};
use dcs_doris_client::{TxnOperation, TxnOutcome};

/// How a 2PC commit or abort ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finished {
    /// Done (now or before).
    Done,
    /// A commit found the transaction gone: what Doris said.
    Lost(String),
}

/// Writes batches to the Doris sink table.
#[derive(Debug)]
pub struct DorisSink {
    client: StreamLoadClient,
    /// The settings; loads go to its `table` (a rebuild's shadow while one is in use).
    config: DorisSinkConfig,
    /// The sink table of the settings, which a rebuild's shadow replaces.
    home: TableRef,
    /// How the table's columns follow the source's (`schema::schema_follow`).
    follow: Follow,
    namespace: String,
    consumer_id: String,
    run_tag: String,
}

impl DorisSink {
    /// A writer for `config` on behalf of `consumer_id` of a sync in `namespace`.
    pub fn new(config: DorisSinkConfig, namespace: String, consumer_id: String) -> Self {
        let client = StreamLoadClient::new(
            config.fe_nodes.clone(),
            config.be_nodes.clone(),
            config.user.clone(),
            config.password.clone(),
            config.request_timeout,
        )
        // As in `StreamLoadClient::new`: with a configuration `Tls::new` already built once,
        // only reqwest's own set-up could fail here.
        .with_tls(config.tls.clone())
        .expect("the sink HTTP client builds");
        Self {
            client,
            home: config.table.clone(),
            config,
            follow: Follow::Fixed,
            namespace,
            consumer_id,
            // Random, not the clock: a clock that steps back must not repeat an earlier run's tag.
            run_tag: format!("r{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        }
    }

    /// The table's columns follow the source's as `follow` says (`schema::schema_follow` of
    /// the run's settings).
    #[must_use]
    pub fn following(mut self, follow: Follow) -> Self {
        self.follow = follow;
        self
    }

    /// The settings with the sink table of the settings (not a rebuild's shadow).
    fn home_config(&self) -> Cow<'_, DorisSinkConfig> {
        if self.config.table == self.home {
            Cow::Borrowed(&self.config)
        } else {
            let mut config = self.config.clone();
            config.table = self.home.clone();
            Cow::Owned(config)
        }
    }

    /// The sink database.
    pub fn db(&self) -> &str {
        &self.config.table.database
    }

    /// The label of load `seq` recorded by checkpoint `checkpoint_id`.
    pub fn label(&self, checkpoint_id: u64, seq: u32) -> String {
        self.label_in(LabelScheme::V2, checkpoint_id, seq)
    }

    /// The label of load `seq` of checkpoint `checkpoint_id` under `scheme` (an earlier run's
    /// loads are labelled as its checkpoint says).
    fn label_in(&self, scheme: LabelScheme, checkpoint_id: u64, seq: u32) -> String {
        request::label(
            &self.config,
            &self.namespace,
            &self.consumer_id,
            &self.run_tag,
            (scheme, checkpoint_id, seq),
        )
    }

    /// The Stream Load headers of every load.
    pub fn headers(&self) -> Vec<(String, String)> {
        request::load_headers(&self.config)
    }

    /// Commits or aborts one transaction by id, retrying transient failures `retries` times with
    /// back-off; the last failure's message otherwise.
    async fn finish_txn(
        &self,
        txn: &PendingTxn,
        op: TxnOperation,
        retries: u32,
    ) -> std::result::Result<Finished, String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .client
                .finish_txn(&txn.db, txn.txn_id, op, attempt)
                .await
            {
                TxnOutcome::Done => return Ok(Finished::Done),
                TxnOutcome::Lost(m) => return Ok(Finished::Lost(m)),
                TxnOutcome::Retry(m) if attempt <= retries => {
                    tracing::warn!(label = %txn.label, txn_id = txn.txn_id, ?op, %m, "2PC {op:?} failed; retrying");
                    tokio::time::sleep(retry::delay(&self.config.backoff, attempt)).await;
                }
                TxnOutcome::Retry(m)
                | TxnOutcome::Permanent(m)
                | TxnOutcome::AlreadyCommitted(m) => return Err(m),
            }
        }
    }

    /// Abort every pre-committed load of checkpoint `checkpoint_id` labelled under `scheme`
    /// (labels `seq` 0, 1, … until Doris knows none); returns how many labels it found.
    ///
    /// # Errors
    /// [`Error::Sink`] when an abort fails for good.
    async fn abort_labels(&self, scheme: LabelScheme, checkpoint_id: u64) -> Result<u32> {
        let sweep = Sweep {
            db: self.db(),
            first_checkpoint_id: checkpoint_id,
            checkpoints: 1,
            retries: self.config.max_retries.max(3),
            label: |id, seq| self.label_in(scheme, id, seq),
        };
        let swept = self
            .client
            .sweep_labels(&sweep, |attempt| {
                retry::delay(&self.config.backoff, attempt)
            })
            .await;
        for label in &swept.aborted {
            tracing::info!(%label, "aborted a load pre-committed after the last checkpoint");
        }
        // No checkpoint records a load of this id, so none may have been committed.
        if let Some((label, m)) = swept.committed.first() {
            return Err(Error::Sink {
                message: format!("aborting stale load {label} failed: {m}"),
            });
        }
        match swept.stopped {
            Some(stop) => Err(Error::Sink {
                message: format!(
                    "aborting stale load {} failed: {}",
                    stop.label, stop.message
                ),
            }),
            None => Ok(swept.found),
        }
    }

    /// Load `body` into `table` under `label`, retrying transient failures with the same label;
    /// rows Doris refused are answered, not an error. The sink table (or a rebuild's shadow) gets
    /// the sink's headers, the dead-letter table its own ([`request::dead_letter_headers`]).
    ///
    /// # Errors
    /// [`Error::Sink`] with Doris's message on a permanent failure or when retries run out.
    async fn send(&self, table: &TableRef, label: &str, body: Bytes) -> Result<Sent> {
        let headers = if *table == self.config.table {
            self.headers()
        } else {
            request::dead_letter_headers(&self.config)
        };
        let req = LoadRequest {
            db: table.database.clone(),
            table: table.table.clone(),
            label: label.to_owned(),
            headers,
            body,
        };
        let mut attempt = 0;
        loop {
            let outcome = self.client.load_attempt(&req, attempt).await;
            attempt += 1;
            let pending = |txn_id: i64| {
                self.config.enable_2pc.then(|| PendingTxn {
                    db: req.db.clone(),
                    label: label.to_owned(),
                    txn_id,
                    rows: None,
                    dead_letter: false,
                })
            };
            match outcome {
                LoadOutcome::Loaded(report) => {
                    return Ok(Sent::Loaded {
                        pending: pending(report.txn_id),
                        attempts: attempt,
                    });
                }
                LoadOutcome::AlreadyLoaded {
                    existing_status,
                    txn_id,
                } => {
                    if !self.config.enable_2pc {
                        return Ok(Sent::Loaded {
                            pending: None,
                            attempts: attempt,
                        });
                    }
                    // Sent for the first time, yet pre-committed: not by this run (an earlier
                    // run's were aborted at this run's start), so by a runner still loading.
                    // Adopting it could commit that runner's rows for this label; aborting it
                    // could fail that runner's commit. Stop and leave it to the restart.
                    if let (Some(txn_id), "PRECOMMITTED", 1) =
                        (txn_id, existing_status.as_str(), attempt)
                    {
                        return Err(Error::LabelInUse {
                            label: label.to_owned(),
                            txn_id,
                        });
                    }
                    // Under 2PC a label of an unsaved checkpoint is never committed by this
                    // protocol: a committed one was written by an earlier, forgotten run.
                    let (Some(txn_id), "PRECOMMITTED") = (txn_id, existing_status.as_str()) else {
                        return Err(Error::Sink {
                            message: format!(
                                "Stream Load label {label} was already used by an earlier run of consumer {} (job {existing_status}); the sink may already hold rows this runner would load again. Change sink.doris.labelPrefix or the consumer id, or restore the checkpoint",
                                self.consumer_id
                            ),
                        });
                    };
                    return Ok(Sent::Loaded {
                        pending: pending(txn_id),
                        attempts: attempt,
                    });
                }
                LoadOutcome::Retry(message) if attempt <= self.config.max_retries => {
                    let delay = retry::delay(&self.config.backoff, attempt);
                    tracing::warn!(%label, attempt, ?delay, %message, "Stream Load failed; retrying with the same label");
                    tokio::time::sleep(delay).await;
                }
                LoadOutcome::Retry(message) => {
                    return Err(Error::Sink {
                        message: format!(
                            "Stream Load of label {label} still failing after {attempt} attempts: {message}"
                        ),
                    });
                }
                LoadOutcome::Permanent(message) => return Err(Error::Sink { message }),
                LoadOutcome::Rejected(report) => {
                    return Ok(Sent::Refused {
                        report,
                        attempts: attempt,
                    });
                }
            }
        }
    }

    /// The error for rows Doris refused that are not set aside: the column and the first refused
    /// row from the error log, and `why` they could not go to the dead-letter table.
    async fn refusal(&self, report: &LoadReport, why: Option<&str>) -> Error {
        let log = self.client.error_log(report).await;
        let mut message = rejection_message(
            report,
            log.as_ref().map(|r| r.as_deref().map_err(Clone::clone)),
        );
        if let Some(why) = why {
            message.push_str(&format!(
                "; the refused rows were not written into the dead-letter table: {why}"
            ));
        }
        Error::Sink { message }
    }

    /// Rows of load `seq` of checkpoint `checkpoint_id` were refused (`report`): tell them apart
    /// ([`dead_letter::identify`]), load the others again under the same label and the refused
    /// ones into the dead-letter table under the next label (the same label when no other row
    /// is left), both pre-committed for the same checkpoint. Rows that cannot be told apart
    /// for certain, or a second refusal, stop the load as without a dead-letter table.
    async fn set_aside(
        &self,
        dead_letter: &DeadLetterSettings,
        batch: &LoadBatch,
        report: &LoadReport,
        (checkpoint_id, seq): (u64, u32),
        attempts: u32,
    ) -> Result<LoadResult> {
        let label = self.label(checkpoint_id, seq);
        let log = match self.client.refused_rows_log(report).await {
            Some(Ok(log)) => log,
            Some(Err(why)) => {
                return Err(self
                    .refusal(
                        report,
                        Some(&format!("its error log could not be read: {why}")),
                    )
                    .await);
            }
            None => return Err(self.refusal(report, Some("Doris gave no error log")).await),
        };
        let dst = self.config.mysql_target();
        let columns = async {
            let mut conn = dst.connect().await?;
            let columns = dst.columns(&mut conn, &self.config.table).await;
            let _ = conn.disconnect().await;
            columns
        }
        .await?;
        let upsert = self.config.policy.mode == SinkMode::Upsert;
        let file_columns = dead_letter::file_columns(&columns, upsert);
        let lines = dead_letter::body_lines(&batch.body);
        let (entries, complete) = error_log_lines(&log);
        let refused = match dead_letter::identify(
            &lines,
            &file_columns,
            &entries,
            complete,
            report.number_filtered_rows,
        ) {
            Ok(refused) => refused,
            Err(why) => return Err(self.refusal(report, Some(&why)).await),
        };
        let rest = dead_letter::rest(&lines, &refused);
        let mut attempts = attempts;
        let mut pending = None;
        let mut labels = 1;
        if !rest.is_empty() {
            match self
                .send(&self.config.table, &label, Bytes::from(rest))
                .await?
            {
                Sent::Loaded {
                    pending: p,
                    attempts: a,
                } => {
                    pending = p;
                    attempts += a;
                    labels = 2;
                }
                Sent::Refused { report: again, .. } => {
                    return Err(self
                        .refusal(
                            &again,
                            Some("Doris refused rows again once the refused ones were taken out"),
                        )
                        .await);
                }
            }
        }
        let dead_label = self.label(checkpoint_id, seq + labels - 1);
        let at = jiff::Timestamp::now()
            .strftime("%Y-%m-%d %H:%M:%S%.6f")
            .to_string();
        let dead_body = dead_letter::body(
            &lines,
            &batch.origins,
            &refused,
            dead_letter::Origin {
                source: &dead_letter.source,
                sink: &self.home,
                label: &label,
                at: &at,
            },
        );
        let dead_pending = match self
            .send(&dead_letter.table, &dead_label, Bytes::from(dead_body))
            .await?
        {
            Sent::Loaded { pending, .. } => pending.map(|t| PendingTxn {
                dead_letter: true,
                ..t
            }),
            Sent::Refused { report: again, .. } => {
                return Err(self
                    .refusal(
                        report,
                        Some(&format!(
                            "the dead-letter table {} refused them too ({})",
                            dead_letter.table, again.message
                        )),
                    )
                    .await);
            }
        };
        let deletes = refused
            .iter()
            .filter(|r| dead_letter::is_delete(lines[r.line]))
            .count() as u64;
        for r in &refused {
            tracing::warn!(%label, dead_letter = %dead_letter.table, reason = %r.reason, "a row the sink refused goes into the dead-letter table");
        }
        Ok(LoadResult {
            label,
            pending,
            attempts,
            dead_letter: Some(DeadLettered {
                pending: dead_pending,
                rows: refused.len() as u64,
                deletes,
            }),
            labels,
        })
    }
}

/// How one load request ended.
enum Sent {
    /// Loaded (pre-committed under 2PC).
    Loaded {
        /// The transaction to commit after the checkpoint (2PC only).
        pending: Option<PendingTxn>,
        /// Attempts made so far.
        attempts: u32,
    },
    /// Doris refused rows of the body and loaded none.
    Refused {
        /// Its report.
        report: LoadReport,
        /// Attempts made so far.
        attempts: u32,
    },
}

impl Sink for DorisSink {
    fn two_phase(&self) -> bool {
        self.config.enable_2pc
    }

    fn idempotent(&self) -> bool {
        self.config.policy.mode == SinkMode::Upsert
    }

    fn encoding(&self) -> Encoding {
        Encoding::Rows {
            format: self.config.format.clone(),
            policy: self.config.policy,
        }
    }

    fn limits(&self) -> BatchLimits {
        self.config.limits
    }

    fn mode(&self) -> SinkMode {
        self.config.policy.mode
    }

    /// The Stream Load request timeout.
    fn request_timeout(&self) -> Duration {
        self.config.request_timeout
    }

    fn schema_follow(&self) -> Follow {
        self.follow
    }

    /// The columns of the table loads go to, over MySQL (`schema::table_columns`).
    async fn table_columns(&self) -> Result<Vec<String>> {
        schema::table_columns(&self.config).await
    }

    fn has_table(&self) -> bool {
        true
    }

    /// Creates the sink table when missing, checks it otherwise (`schema::prepare_sink_table`).
    async fn prepare(&self, source: &SourceSettings, columns: &[String]) -> Result<()> {
        schema::prepare_sink_table(&self.home_config(), source, columns, self.follow).await?;
        match &self.config.dead_letter {
            Some(dead_letter) => {
                schema::prepare_dead_letter_table(&self.config, &dead_letter.table).await
            }
            None => Ok(()),
        }
    }

    /// ADD/DROP COLUMN on the table loads go to (`schema::apply_schema_change`): a rebuild's
    /// shadow while one is in use, which replaces the sink table at its swap.
    async fn follow_columns(
        &self,
        source: &SourceSettings,
        change: &SchemaChange,
        current: &[String],
        arrow_types: &[(String, DataType)],
    ) -> Result<Vec<String>> {
        schema::apply_schema_change(&self.config, source, change, current, arrow_types).await
    }

    fn plan_rebuild(
        &self,
        stored: Option<&Checkpoint>,
        directive: Option<&str>,
        snapshot_first: bool,
    ) -> std::result::Result<Planned, String> {
        crate::sink::rebuild::plan(
            stored,
            directive,
            Some((&self.home, self.config.policy.mode)),
            snapshot_first,
        )
    }

    /// Creates or checks the shadow ([`rebuild::begin`]); loads go into it from now on.
    async fn begin_rebuild(
        &mut self,
        plan: &Rebuild,
        source: &SourceSettings,
        columns: &[String],
    ) -> Result<()> {
        let Some(shadow) = plan.shadow() else {
            return Ok(());
        };
        rebuild::begin(plan, &self.home_config(), source, columns, self.follow).await?;
        self.config.table = shadow.clone();
        Ok(())
    }

    /// Swaps the shadow in ([`rebuild::swap`]); loads go to the sink table again.
    async fn swap_rebuilt(&mut self, shadow: &TableRef) -> Result<()> {
        rebuild::swap(&self.home_config(), shadow).await?;
        self.config.table = self.home.clone();
        Ok(())
    }

    /// Load `body` as load `seq` of checkpoint `checkpoint_id`, retrying transient failures with
    /// the same label up to `maxRetries` times. Rows Doris refuses go into the dead-letter table
    /// when there is one ([`DorisSink::set_aside`]); they stop the load otherwise.
    ///
    /// # Errors
    /// [`Error::Sink`] with Doris's message on a permanent failure or when retries run out.
    async fn load(&self, batch: LoadBatch, checkpoint_id: u64, seq: u32) -> Result<LoadResult> {
        let label = self.label(checkpoint_id, seq);
        let table = self.config.table.clone();
        match self.send(&table, &label, batch.body.clone()).await? {
            Sent::Loaded { pending, attempts } => Ok(LoadResult {
                label,
                pending,
                attempts,
                dead_letter: None,
                labels: 1,
            }),
            Sent::Refused { report, attempts } => match &self.config.dead_letter {
                Some(dead_letter) if report.status == "Fail" => {
                    self.set_aside(dead_letter, &batch, &report, (checkpoint_id, seq), attempts)
                        .await
                }
                _ => Err(self.refusal(&report, None).await),
            },
        }
    }

    /// Commit pre-committed transactions (already committed counts as done); returns those Doris
    /// no longer has (aborted before their commit, e.g. by its pre-commit timeout, or unknown),
    /// with what it said, after committing all the others.
    ///
    /// # Errors
    /// [`Error::Sink`] when Doris refuses a commit otherwise, or retries run out.
    async fn commit(&self, txns: &[PendingTxn]) -> Result<Vec<LostLoad>> {
        let mut lost = Vec::new();
        for txn in txns {
            let retries = self.config.max_retries.max(3);
            match self.finish_txn(txn, TxnOperation::Commit, retries).await {
                Ok(Finished::Done) => {}
                Ok(Finished::Lost(m)) => {
                    tracing::warn!(label = %txn.label, txn_id = txn.txn_id, %m, "a pre-committed load is gone: its rows are loaded again");
                    lost.push((txn.clone(), m));
                }
                Err(m) => {
                    return Err(Error::Sink {
                        message: format!(
                            "committing load {} (txn {}) failed: {m}",
                            txn.label, txn.txn_id
                        ),
                    });
                }
            }
        }
        Ok(lost)
    }

    async fn abort(&self, scheme: LabelScheme, checkpoint_id: u64) -> Result<u32> {
        if !self.config.enable_2pc {
            return Ok(0);
        }
        self.abort_labels(scheme, checkpoint_id).await
    }

    /// Best effort: abort the pre-committed transactions `txns` by id (never by label: after
    /// losing the fence, another runner may be loading under the same labels). Failures are
    /// logged; returns how many were aborted or already gone.
    async fn abort_txns(&self, txns: &[PendingTxn]) -> usize {
        let mut done = 0;
        for txn in txns {
            match self.finish_txn(txn, TxnOperation::Abort, 2).await {
                Ok(_) => done += 1,
                Err(m) => {
                    tracing::warn!(label = %txn.label, txn_id = txn.txn_id, %m, "could not abort a pre-committed load; Doris aborts it when it times out");
                }
            }
        }
        done
    }

    /// Commits what the stored checkpoint pre-committed, then aborts the loads of the next
    /// checkpoint id (a crash between a load and the save leaves them pre-committed).
    async fn recover(&self, loaded: Option<&Checkpoint>) -> Result<Vec<LostLoad>> {
        if !self.config.enable_2pc {
            return Ok(Vec::new());
        }
        let mut lost = Vec::new();
        if let Some(cp) = loaded
            && !cp.pending_txns.is_empty()
        {
            lost = self.commit(&cp.pending_txns).await?;
            tracing::info!(
                checkpoint_id = cp.checkpoint_id,
                txns = cp.pending_txns.len(),
                lost = lost.len(),
                "committed the loads of the saved checkpoint"
            );
        }
        let stale = loaded.map_or(1, |c| c.checkpoint_id + 1);
        let scheme = loaded.map_or(LabelScheme::V2, Checkpoint::labels);
        let aborted = self.abort_labels(scheme, stale).await?;
        if aborted > 0 {
            tracing::info!(
                checkpoint_id = stale,
                loads = aborted,
                "aborted loads no checkpoint records"
            );
        }
        Ok(lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_without_2pc_has_its_own_labels() {
        let config = || request::tests::config(false, SinkMode::Upsert);
        let w = DorisSink::new(config(), "ns".into(), "c1".into());
        let again = DorisSink::new(config(), "ns".into(), "c1".into());
        assert_ne!(again.label(3, 0), w.label(3, 0));
        let w = DorisSink::new(
            request::tests::config(true, SinkMode::Upsert),
            "ns".into(),
            "c1".into(),
        );
        assert_eq!(w.label(3, 0), w.label(3, 0));
        assert_eq!(w.label_in(LabelScheme::V1, 3, 0), "dcs-c1-3-0");
    }
}
