//! Loads into the Doris sink with retries and the 2PC steps around checkpoints
//! (docs/ARCHITECTURE.md §3.6).
//!
//! With 2PC, the loads between two checkpoints are labelled with the id of the checkpoint that will
//! record them and their sequence number (`dcs_crds::label`); each is pre-committed at once and
//! committed only after that checkpoint is saved. Without 2PC, loads are visible at once and the
//! labels carry a random run tag as well, so a restart (which re-reads from the last checkpoint)
//! never collides with a label of the previous run and loads again: at least once, idempotent on
//! UNIQUE KEY sinks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

use super::config::DorisSinkConfig;
use crate::checkpoint::PendingTxn;
use crate::sink::encode::{BodyFormat, DELETE_SIGN_COLUMN};
use crate::sink::label::{LabelOwner, LabelScheme, load_label};
use crate::{Error, Result};
use dcs_doris_client::stream_load::{LoadOutcome, LoadRequest, StreamLoadClient, Sweep};
use dcs_doris_client::{TxnOperation, TxnOutcome};

/// How a 2PC commit or abort ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finished {
    /// Done (now or before).
    Done,
    /// A commit found the transaction gone: what Doris said.
    Lost(String),
}

/// What one successful load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadResult {
    /// The label used.
    pub label: String,
    /// The pre-committed transaction to commit after the checkpoint (2PC only).
    pub pending: Option<PendingTxn>,
    /// Attempts made.
    pub attempts: u32,
}

/// Writes batches to the Doris sink table.
#[derive(Debug)]
pub struct DorisWriter {
    client: StreamLoadClient,
    config: DorisSinkConfig,
    namespace: String,
    consumer_id: String,
    run_tag: String,
}

impl DorisWriter {
    /// A writer for `config` on behalf of `consumer_id` of a sync in `namespace`.
    pub fn new(config: DorisSinkConfig, namespace: String, consumer_id: String) -> Self {
        let client = StreamLoadClient::new(
            config.fe_nodes.clone(),
            config.be_nodes.clone(),
            config.user.clone(),
            config.password.clone(),
            config.request_timeout,
        );
        Self {
            client,
            config,
            namespace,
            consumer_id,
            // Random, not the clock: a clock that steps back must not repeat an earlier run's tag.
            run_tag: format!("r{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        }
    }

    /// Whether loads are two-phase.
    pub fn two_phase(&self) -> bool {
        self.config.enable_2pc
    }

    /// Which events become which rows.
    pub fn policy(&self) -> crate::sink::encode::EventPolicy {
        self.config.policy
    }

    /// The body format of every load.
    pub fn format(&self) -> &BodyFormat {
        &self.config.format
    }

    /// Loads from now on go into `table` (a rebuild's shadow table, then the sink table again).
    pub fn set_table(&mut self, table: TableRef) {
        self.config.table = table;
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
        let owner = LabelOwner {
            namespace: &self.namespace,
            prefix: &self.config.label_prefix,
            consumer_id: &self.consumer_id,
        };
        let run = (!self.config.enable_2pc).then_some(self.run_tag.as_str());
        load_label(&owner, scheme, run, checkpoint_id, seq)
    }

    /// The Stream Load headers of every load.
    pub fn headers(&self) -> Vec<(String, String)> {
        load_headers(&self.config)
    }

    /// Load `body` as load `seq` of checkpoint `checkpoint_id`, retrying transient failures with
    /// the same label up to `maxRetries` times.
    ///
    /// # Errors
    /// [`Error::Sink`] with Doris's message on a permanent failure or when retries run out.
    pub async fn load(&self, body: Bytes, checkpoint_id: u64, seq: u32) -> Result<LoadResult> {
        let label = self.label(checkpoint_id, seq);
        let req = LoadRequest {
            db: self.config.table.database.clone(),
            table: self.config.table.table.clone(),
            label: label.clone(),
            headers: self.headers(),
            body,
        };
        let mut attempt = 0;
        loop {
            let outcome = self.client.load_once(&req, attempt).await;
            attempt += 1;
            let pending = |txn_id: i64| {
                self.config.enable_2pc.then(|| PendingTxn {
                    db: req.db.clone(),
                    label: label.clone(),
                    txn_id,
                    rows: None,
                })
            };
            match outcome {
                LoadOutcome::Loaded(report) => {
                    return Ok(LoadResult {
                        pending: pending(report.txn_id),
                        label,
                        attempts: attempt,
                    });
                }
                LoadOutcome::AlreadyLoaded {
                    existing_status,
                    txn_id,
                } => {
                    if !self.config.enable_2pc {
                        return Ok(LoadResult {
                            label,
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
                        return Err(Error::LabelInUse { label, txn_id });
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
                    return Ok(LoadResult {
                        pending: pending(txn_id),
                        label,
                        attempts: attempt,
                    });
                }
                LoadOutcome::Retry(message) if attempt <= self.config.max_retries => {
                    let delay = self.config.backoff.delay(attempt, jitter());
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
            }
        }
    }

    /// Commit pre-committed transactions (already committed counts as done); returns those Doris
    /// no longer has (aborted before their commit, e.g. by its pre-commit timeout, or unknown),
    /// with what it said, after committing all the others.
    ///
    /// # Errors
    /// [`Error::Sink`] when Doris refuses a commit otherwise, or retries run out.
    pub async fn commit(&self, txns: &[PendingTxn]) -> Result<Vec<(PendingTxn, String)>> {
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

    /// Best effort: abort the pre-committed transactions `txns` by id (never by label: after
    /// losing the fence, another runner may be loading under the same labels). Failures are
    /// logged; returns how many were aborted or already gone.
    pub async fn abort_txns(&self, txns: &[PendingTxn]) -> usize {
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
                    tokio::time::sleep(self.config.backoff.delay(attempt, jitter())).await;
                }
                TxnOutcome::Retry(m)
                | TxnOutcome::Permanent(m)
                | TxnOutcome::AlreadyCommitted(m) => return Err(m),
            }
        }
    }

    /// Abort every pre-committed load of checkpoint `checkpoint_id` (labels `seq` 0, 1, … until
    /// Doris knows none); returns how many labels it found.
    ///
    /// # Errors
    /// [`Error::Sink`] when an abort fails for good.
    pub async fn abort_checkpoint(&self, checkpoint_id: u64) -> Result<u32> {
        self.abort_checkpoint_in(LabelScheme::V2, checkpoint_id)
            .await
    }

    /// [`DorisWriter::abort_checkpoint`] for loads labelled under `scheme`.
    ///
    /// # Errors
    /// As [`DorisWriter::abort_checkpoint`].
    pub async fn abort_checkpoint_in(
        &self,
        scheme: LabelScheme,
        checkpoint_id: u64,
    ) -> Result<u32> {
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
                self.config.backoff.delay(attempt, jitter())
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
}

/// The Stream Load headers for a sink: JSON lines (or CSV when `properties` ask for it), the
/// delete sign in upsert mode, 2PC and the load `timeout`, then the user's `properties` (which win
/// where validation lets them: the headers dcs owns are refused there).
pub fn load_headers(config: &DorisSinkConfig) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = match config.format {
        BodyFormat::JsonLines => vec![
            ("format".into(), "json".into()),
            ("read_json_by_line".into(), "true".into()),
        ],
        BodyFormat::Csv { .. } => vec![("format".into(), "csv".into())],
    };
    if config.policy.mode == SinkMode::Upsert {
        h.push(("hidden_columns".into(), DELETE_SIGN_COLUMN.into()));
    }
    if config.enable_2pc {
        h.push(("two_phase_commit".into(), "true".into()));
    }
    h.push(("timeout".into(), config.load_timeout.as_secs().to_string()));
    for (k, v) in &config.properties {
        h.retain(|(key, _)| !key.eq_ignore_ascii_case(k));
        h.push((k.clone(), v.clone()));
    }
    h
}

/// A uniform value in `[0, 1)` for backoff jitter, from the clock's nanoseconds.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .subsec_nanos();
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::batcher::BatchLimits;
    use crate::sink::encode::EventPolicy;
    use dcs_doris_client::stream_load::Backoff;

    fn config(two_pc: bool, mode: SinkMode) -> DorisSinkConfig {
        DorisSinkConfig {
            fe_nodes: vec!["fe:8030".into()],
            be_nodes: vec![],
            table: "sink.t".parse().unwrap(),
            user: "u".into(),
            password: "p".into(),
            label_prefix: "dcs".into(),
            enable_2pc: two_pc,
            policy: EventPolicy {
                mode,
                enable_delete: true,
                ignore_update_before: true,
            },
            limits: BatchLimits::default(),
            max_retries: 3,
            backoff: Backoff::default(),
            properties: [
                ("format".to_string(), "json".to_string()),
                ("strict_mode".into(), "true".into()),
            ]
            .into_iter()
            .collect(),
            request_timeout: Duration::from_secs(5),
            load_timeout: Duration::from_secs(3600),
            query_port: 9030,
            format: Default::default(),
            create_table: Default::default(),
        }
    }

    #[test]
    fn headers_follow_mode_and_2pc_and_properties_win() {
        let h = load_headers(&config(true, SinkMode::Upsert));
        let get = |h: &[(String, String)], k: &str| {
            h.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
        };
        assert_eq!(get(&h, "two_phase_commit").as_deref(), Some("true"));
        assert_eq!(
            get(&h, "hidden_columns").as_deref(),
            Some(DELETE_SIGN_COLUMN)
        );
        assert_eq!(get(&h, "strict_mode").as_deref(), Some("true"));
        assert_eq!(get(&h, "timeout").as_deref(), Some("3600"));
        assert_eq!(h.iter().filter(|(k, _)| k == "format").count(), 1);
        let h = load_headers(&config(false, SinkMode::Changelog));
        assert_eq!(get(&h, "two_phase_commit"), None);
        assert_eq!(get(&h, "hidden_columns"), None);
    }

    #[test]
    fn labels_are_deterministic_with_2pc_and_per_run_without() {
        let w = DorisWriter::new(config(true, SinkMode::Upsert), "ns".into(), "c1".into());
        let l = w.label(3, 0);
        assert!(l.starts_with("dcs-c1-") && l.ends_with("-3-0"), "{l}");
        assert_eq!(l, w.label(3, 0));
        assert_eq!(w.label_in(LabelScheme::V1, 3, 0), "dcs-c1-3-0");
        let other = DorisWriter::new(config(true, SinkMode::Upsert), "ns2".into(), "c1".into());
        assert_ne!(other.label(3, 0), l, "another namespace, other labels");
        let w = DorisWriter::new(config(false, SinkMode::Upsert), "ns".into(), "c1".into());
        let r = w.label(3, 0);
        assert!(r.contains("-r") && r.ends_with("-3-0"), "{r}");
        let again = DorisWriter::new(config(false, SinkMode::Upsert), "ns".into(), "c1".into());
        assert_ne!(
            again.label(3, 0),
            r,
            "every run without 2PC has its own labels"
        );
    }
}
