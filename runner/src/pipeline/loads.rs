//! The write side of a run: rows encoded into the open batch, each full batch loaded into the
//! sink under the next checkpoint's id, and the loads pre-committed since the last checkpoint.
//!
//! [`Loads`] knows nothing of positions or the store: the phases hand it rows, the checkpoint
//! ([`super::checkpointing`]) takes its pending loads into a checkpoint and tells it when that
//! checkpoint is saved.

use arrow_array::RecordBatch;
use tokio::time::Instant;

use super::ledger::LoadLedger;
use super::rows::{SLICE_ROWS, with_changes};
use crate::Result;
use crate::checkpoint::{Counters, PendingTxn};
use crate::settings::BatchLimits;
use crate::sink::batcher::Batcher;
use crate::sink::label::LabelScheme;
use crate::sink::{LoadBatch, RowOrigin, Sink};
use crate::source::changelog::ChangelogWindow;

/// The sink, its open batch, and the loads since the last checkpoint.
pub(super) struct Loads<K> {
    pub(super) sink: K,
    batcher: Batcher,
    /// Id of the next checkpoint; the 2PC labels of open loads carry it.
    pub(super) next_id: u64,
    /// Sequence number of the next load within `next_id`.
    pub(super) seq: u32,
    /// Loads pre-committed since the last checkpoint.
    pub(super) pending: Vec<PendingTxn>,
    /// The sync's counters (restored from the checkpoint, saved with each).
    pub(super) counters: Counters,
    /// What the open loads were read from.
    pub(super) ledger: LoadLedger,
    /// Load attempts beyond the first in this run.
    pub(super) retries: u64,
    /// Where the rows of the open batch came from, line by line.
    origins: Vec<Option<RowOrigin>>,
    /// Where the snapshot rows handed over now come from (their op, the TSO they are read at),
    /// when known.
    pub(super) snapshot_origin: Option<RowOrigin>,
}

impl<K: Sink> Loads<K> {
    pub(super) fn new(sink: K) -> Self {
        let limits = sink.limits();
        Self {
            sink,
            batcher: Batcher::new(limits),
            next_id: 1,
            seq: 0,
            pending: Vec::new(),
            counters: Counters::default(),
            ledger: LoadLedger::default(),
            retries: 0,
            origins: Vec::new(),
            snapshot_origin: None,
        }
    }

    /// When the open batch is due to be loaded, if it holds rows.
    pub(super) fn deadline(&self) -> Option<std::time::Instant> {
        self.batcher.deadline()
    }

    /// Encode `batch` into the open batch, loading every batch that fills. `changelog` batches
    /// carry their change columns; `snapshot_changes` gives snapshot rows an op and a TSO (for
    /// changelog-mode sinks).
    pub(super) async fn write(
        &mut self,
        batch: &RecordBatch,
        changelog: bool,
        snapshot_changes: Option<(i8, i64)>,
    ) -> Result<()> {
        let n = batch.num_rows();
        self.counters.rows_read += n as u64;
        let encoding = self.sink.encoding();
        let mut offset = 0;
        while offset < n {
            let room = usize::try_from(self.batcher.room()).unwrap_or(usize::MAX);
            let len = room.min(n - offset).min(SLICE_ROWS);
            let slice = batch.slice(offset, len);
            offset += len;
            let snapshot = self.snapshot_origin;
            let mut origins = Vec::new();
            self.batcher.append(Instant::now().into_std(), |out| {
                with_changes(&slice, changelog, snapshot_changes, |data, changes| {
                    let encoded = encoding.encode(data, changes, out)?;
                    origins = encoding.written_origins(changes, data.num_rows(), snapshot);
                    Ok(encoded)
                })
            })?;
            self.origins.extend(origins);
            self.ledger.appended(len as u64);
            if self
                .batcher
                .flush_reason(Instant::now().into_std())
                .is_some()
            {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Load the open batch, if any; returns whether there was one.
    pub(super) async fn flush(&mut self) -> Result<bool> {
        let Some(batch) = self.batcher.take() else {
            return Ok(false);
        };
        let bytes = batch.body.len() as u64;
        let load = LoadBatch {
            body: batch.body,
            origins: std::mem::take(&mut self.origins),
        };
        let result = self.sink.load(load, self.next_id, self.seq).await?;
        tracing::debug!(label = %result.label, rows = batch.rows, bytes, attempts = result.attempts, "loaded a batch");
        self.seq += result.labels.max(1);
        self.retries += u64::from(result.attempts.saturating_sub(1));
        let rows = self.ledger.flushed();
        self.pending
            .extend(result.pending.map(|txn| PendingTxn { rows, ..txn }));
        let (mut upserts, mut deletes) = (batch.upserts, batch.deletes);
        if let Some(refused) = result.dead_letter {
            self.pending
                .extend(refused.pending.map(|txn| PendingTxn { rows, ..txn }));
            deletes = deletes.saturating_sub(refused.deletes);
            upserts = upserts.saturating_sub(refused.rows.saturating_sub(refused.deletes));
            self.counters.rows_rejected += refused.rows;
        }
        self.counters.loads += 1;
        self.counters.bytes += bytes;
        self.counters.rows_written += upserts;
        self.counters.rows_deleted += deletes;
        Ok(true)
    }

    /// The checkpoint `checkpoint_id` holding the pending loads is saved: the next loads belong
    /// to the one after it, whose rows start in `window` (the changelog window being read, and
    /// its rows handed over so far) if there is one.
    pub(super) fn saved(&mut self, checkpoint_id: u64, window: Option<(&ChangelogWindow, u64)>) {
        self.pending.clear();
        self.next_id = checkpoint_id + 1;
        self.seq = 0;
        self.ledger.restart(window);
    }

    /// Stopping where a checkpoint would record half a split: abort the loads since the last
    /// checkpoint (none of them is recorded), the open batch dropped unloaded.
    pub(super) async fn drop_unsaved(&mut self) -> Result<()> {
        let _ = self.batcher.take();
        self.origins.clear();
        self.pending.clear();
        self.ledger.dropped();
        if self.sink.two_phase() {
            let aborted = self.sink.abort(LabelScheme::V2, self.next_id).await?;
            tracing::info!(
                checkpoint_id = self.next_id,
                loads = aborted,
                "aborted the loads no checkpoint records"
            );
        }
        Ok(())
    }

    /// Best effort after losing the fence: abort the loads this runner pre-committed for the
    /// checkpoint it could not save. Nobody would ever commit them, and the new owner (or the
    /// operator cleaning up a deleted sync) may not know them.
    pub(super) async fn abort_unsaved(&mut self, txns: &[PendingTxn]) {
        if txns.is_empty() {
            return;
        }
        let aborted = self.sink.abort_txns(txns).await;
        self.pending.clear();
        tracing::warn!(
            checkpoint_id = self.next_id,
            loads = txns.len(),
            aborted,
            "fenced: aborted the loads pre-committed for the checkpoint that could not be saved"
        );
    }
}

/// Rows handed to the sink at a time: at most a load's worth (`limits.max_rows`), so the loads a
/// checkpoint holds are counted after each.
pub(super) fn slice_rows(limits: &BatchLimits) -> usize {
    usize::try_from(limits.max_rows)
        .unwrap_or(SLICE_ROWS)
        .clamp(1, SLICE_ROWS)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use arrow_array::Int32Array;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::checkpoint::{Checkpoint, RowSpan};
    use crate::sink::{Encoding, LoadResult, LostLoad};

    /// A two-phase sink of three rows a load that records what it was sent; its first load
    /// takes two attempts.
    #[derive(Default)]
    struct Recording {
        /// (checkpoint id, seq, lines) of each load, in order.
        loads: Mutex<Vec<(u64, u32, usize)>>,
        /// Checkpoint ids aborted by label.
        aborted: Mutex<Vec<u64>>,
    }

    impl Sink for Arc<Recording> {
        fn two_phase(&self) -> bool {
            true
        }
        fn idempotent(&self) -> bool {
            false
        }
        fn encoding(&self) -> Encoding {
            Encoding::Records
        }
        fn limits(&self) -> BatchLimits {
            BatchLimits {
                max_rows: 3,
                max_bytes: u64::MAX,
                interval: Duration::from_secs(3600),
            }
        }
        fn request_timeout(&self) -> Duration {
            Duration::ZERO
        }
        async fn load(&self, batch: LoadBatch, checkpoint_id: u64, seq: u32) -> Result<LoadResult> {
            let lines = batch
                .body
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            let mut loads = self.loads.lock().unwrap();
            loads.push((checkpoint_id, seq, lines));
            Ok(LoadResult {
                label: format!("l-{checkpoint_id}-{seq}"),
                pending: Some(PendingTxn {
                    db: "d".into(),
                    label: format!("l-{checkpoint_id}-{seq}"),
                    txn_id: i64::try_from(loads.len()).unwrap(),
                    rows: None,
                    dead_letter: false,
                }),
                attempts: if loads.len() == 1 { 2 } else { 1 },
                dead_letter: None,
                labels: 1,
            })
        }
        async fn commit(&self, _txns: &[PendingTxn]) -> Result<Vec<LostLoad>> {
            Ok(Vec::new())
        }
        async fn abort(&self, _scheme: LabelScheme, checkpoint_id: u64) -> Result<u32> {
            self.aborted.lock().unwrap().push(checkpoint_id);
            Ok(0)
        }
        async fn abort_txns(&self, _txns: &[PendingTxn]) -> usize {
            0
        }
        async fn recover(&self, _loaded: Option<&Checkpoint>) -> Result<Vec<LostLoad>> {
            Ok(Vec::new())
        }
    }

    fn ids(n: i32) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int32Array::from_iter_values(0..n))]).unwrap()
    }

    fn spans(loads: &Loads<Arc<Recording>>) -> Vec<(String, Option<RowSpan>)> {
        loads
            .pending
            .iter()
            .map(|t| (t.label.clone(), t.rows))
            .collect()
    }

    #[tokio::test]
    async fn full_batches_are_loaded_under_the_next_checkpoint_with_the_rows_they_hold() {
        let sink = Arc::new(Recording::default());
        let mut loads = Loads::new(Arc::clone(&sink));
        loads.next_id = 7;
        loads.write(&ids(7), false, None).await.unwrap();
        // Two full loads; the seventh row waits in the open batch.
        assert_eq!(*sink.loads.lock().unwrap(), [(7, 0, 3), (7, 1, 3)]);
        assert!(loads.deadline().is_some());
        assert!(loads.flush().await.unwrap());
        assert!(!loads.flush().await.unwrap(), "nothing is left to load");
        assert_eq!(
            spans(&loads),
            [
                ("l-7-0".into(), Some(RowSpan { first: 0, count: 3 })),
                ("l-7-1".into(), Some(RowSpan { first: 3, count: 3 })),
                ("l-7-2".into(), Some(RowSpan { first: 6, count: 1 })),
            ]
        );
        assert_eq!(loads.counters.rows_read, 7);
        assert_eq!(loads.counters.loads, 3);
        assert_eq!(loads.counters.rows_written, 7);
        assert_eq!(loads.retries, 1, "the first load took a second attempt");

        // Saved as checkpoint 7: the next loads are checkpoint 8's, counted from its first row.
        loads.saved(7, None);
        assert!(loads.pending.is_empty());
        loads.write(&ids(2), false, None).await.unwrap();
        loads.flush().await.unwrap();
        assert_eq!(
            spans(&loads),
            [("l-8-0".into(), Some(RowSpan { first: 0, count: 2 }))]
        );
    }

    #[tokio::test]
    async fn dropping_the_unsaved_loads_aborts_them_and_never_loads_the_open_batch() {
        let sink = Arc::new(Recording::default());
        let mut loads = Loads::new(Arc::clone(&sink));
        loads.next_id = 3;
        loads.write(&ids(4), false, None).await.unwrap();
        loads.drop_unsaved().await.unwrap();
        assert!(loads.pending.is_empty());
        assert_eq!(*sink.aborted.lock().unwrap(), [3]);
        assert!(!loads.flush().await.unwrap(), "the open row was dropped");
        assert_eq!(sink.loads.lock().unwrap().len(), 1);
        // The rows after it are counted from the checkpoint again.
        loads.write(&ids(1), false, None).await.unwrap();
        loads.flush().await.unwrap();
        assert_eq!(
            spans(&loads),
            [("l-3-1".into(), Some(RowSpan { first: 0, count: 1 }))]
        );
    }
}
