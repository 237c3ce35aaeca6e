//! The snapshot phase: the table read over Flight at T0, split by split, checkpointed as tablets
//! finish (at split boundaries only into a changelog-mode 2PC sink, [`super::boundaries`]).

use tokio::sync::watch;
use tokio::time::Instant;

use super::boundaries::{BoundaryAction, SplitBoundaries};
use super::loads::slice_rows;
use super::rows::slices;
use super::{CHANNEL_CAPACITY, Flow, MAX_PENDING_LOADS, Phase, sleep_until, wait_for_shutdown};
use crate::checkpoint::{CheckpointStore, Offset, Position, in_ranges};
use crate::sink::Sink;
use crate::source::fe_http::FeHttpClient;
use crate::source::retention::{RetentionGuard, SAFETY_MARGIN};
use crate::source::snapshot::{self, SnapshotEvent, SnapshotOptions};
use crate::{Error, Result};

/// How the snapshot phase ended.
pub(super) enum SnapshotEnd {
    /// Stopped on request.
    Stopped,
    /// A snapshot-mode sync is complete.
    Done,
    /// The snapshot is complete and checkpointed; the changelog is read on from T0.
    Changelog(Offset),
}

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    pub(super) async fn snapshot_phase(
        &mut self,
        http: &FeHttpClient,
        shutdown: &mut watch::Receiver<bool>,
        columns: &[String],
        (tablets_done, done_ranges): (Vec<i64>, Vec<[i64; 2]>),
        then: Option<Offset>,
        as_of: Option<i64>,
    ) -> Result<SnapshotEnd> {
        // Splits are checkpointed whole when a re-read split would duplicate rows (see
        // `SplitBoundaries`); the reader is held at split ends to reach such a point.
        let (hold_tx, hold_rx) = watch::channel(false);
        let mut bounds = SplitBoundaries::new(self.needs_whole_splits());
        let options = SnapshotOptions {
            columns: Some(columns.to_vec()),
            filter: self.config.filter.clone(),
            as_of,
            tablets_done: tablets_done.clone(),
            tablets_done_ranges: done_ranges.clone(),
            concurrency: self.config.snapshot_concurrency,
            channel_capacity: CHANNEL_CAPACITY,
            replay: self.snapshot_replay(),
            retry: self.config.stream_retry,
            hold: bounds.enabled().then_some(hold_rx),
            shard: self.config.sharding.shard(),
        };
        let guard = RetentionGuard::new(http.clone());
        // The tablets this snapshot planned first are recorded; a later plan (a restart) that
        // lacks one means they moved under it (docs/ARCHITECTURE.md §3.2).
        let recorded = self.tablets.planned.clone();
        let (plan, mut rx, handle) = snapshot::read_checked(http, &options, |plan| {
            tablets_still_there(recorded.as_deref(), &plan.table_tablets)
        })
        .await?;
        self.tablets
            .record_plan(&plan.table_tablets, plan.tablets_total.clone());
        let tablets_total = plan.tablets_total.len();
        // The done tablets as a list of the snapshot's tablets (compacted again at each save).
        let listed: std::collections::HashSet<i64> = tablets_done.iter().copied().collect();
        let done: Vec<i64> = plan
            .tablets_total
            .iter()
            .copied()
            .filter(|t| listed.contains(t) || in_ranges(&done_ranges, *t))
            .collect();
        self.publishing.progress.tablets_done = done.len();
        self.reading.position = Position::Snapshot {
            tablets_done: done,
            tablets_done_ranges: Vec::new(),
            tablets_done_count: None,
            tablets_total: tablets_total as u64,
            rows_total: None,
        };
        self.reading.start_point = then.clone();
        self.saving.changed();
        self.publishing.progress.phase = Phase::Snapshot;
        self.publishing.progress.tablets_total = tablets_total;
        self.publish();
        tracing::info!(
            tablets = tablets_total,
            shard = ?self.config.sharding.shard(),
            splits = plan.splits.len(),
            whole_splits = bounds.enabled(),
            as_of = ?as_of,
            "reading the snapshot"
        );
        loop {
            let flush_at = self.loads.deadline();
            tokio::select! {
                biased;
                () = wait_for_shutdown(shutdown) => {
                    handle.abort();
                    if bounds.can_checkpoint() {
                        tracing::info!("stopping: saving a last checkpoint");
                        self.checkpoint(false).await?;
                    } else {
                        tracing::info!("stopping mid-split: dropping the loads since the last checkpoint, the split is read again on restart");
                        self.loads.drop_unsaved().await?;
                    }
                    return Ok(SnapshotEnd::Stopped);
                }
                event = rx.recv() => match event {
                    Some(SnapshotEvent::Batch { split, batch }) => {
                        self.publishing.progress.ready = true;
                        self.publishing.progress.snapshot_rows_read += batch.num_rows() as u64;
                        bounds.batch(split);
                        for slice in slices(&batch, slice_rows(&self.loads.sink.limits())) {
                            self.rows(&slice, false).await?;
                            if self.loads.pending.len() >= MAX_PENDING_LOADS {
                                // Enough held open: checkpoint now, or at the next split boundary.
                                bounds.due();
                                self.checkpoint_at_boundary(&mut bounds, &hold_tx).await?;
                            }
                        }
                    }
                    Some(SnapshotEvent::SplitDone { split, tablets }) => {
                        self.publishing.progress.ready = true;
                        if let Position::Snapshot { tablets_done, .. } = &mut self.reading.position {
                            tablets_done.extend(tablets);
                            self.publishing.progress.tablets_done = tablets_done.len();
                        }
                        tracing::info!(split, "snapshot split finished");
                        self.saving.changed();
                        bounds.split_done(split);
                        self.checkpoint_at_boundary(&mut bounds, &hold_tx).await?;
                    }
                    None => break,
                },
                () = sleep_until(flush_at) => self.flush().await?,
                () = tokio::time::sleep_until(self.saving.next_at) => {
                    self.saving.next_at = Instant::now() + self.config.checkpoint_interval;
                    if let Some(t0) = &then {
                        // The changelog must still hold T0 when the snapshot is done: stop as
                        // soon as it does not rather than at the snapshot's end.
                        guard.check(t0, SAFETY_MARGIN).await?;
                    }
                    bounds.due();
                    self.checkpoint_at_boundary(&mut bounds, &hold_tx).await?;
                }
            }
        }
        handle.await.map_err(|e| Error::SourceUnavailable {
            context: "snapshot reader".into(),
            reason: e.to_string(),
        })??;
        // Every split is read; a tablet id the table no longer holds reads as no rows, without
        // an error (docs/doris-protocols.md §2.4), so the planned tablets must all still be
        // there now for what was read to be the table (tablet ids are never reused).
        let now = snapshot::fetch_tablets(http, &http.settings().table, &plan.columns).await?;
        tablets_still_there(self.tablets.planned.as_deref(), &now)?;
        tracing::info!(
            rows = self.publishing.progress.snapshot_rows_read,
            "snapshot finished"
        );
        // A shard's part ends here whatever follows: the changelog starts from T0 once every shard
        // is done, in a run of its own.
        let then = then.filter(|_| self.config.sharding.shard().is_none());
        match then {
            Some(t0) => {
                self.reading.position = Position::Changelog { offset: t0.clone() };
                self.saving.changed();
                self.checkpoint(true).await?;
                Ok(SnapshotEnd::Changelog(t0))
            }
            None => {
                self.reading.position = Position::Done;
                self.saving.changed();
                self.checkpoint(true).await?;
                // Its loads committed, the snapshot is swapped in (recorded by a second save).
                self.finish_rebuild().await?;
                self.publishing.progress.phase = Phase::Done;
                self.publish();
                Ok(SnapshotEnd::Done)
            }
        }
    }

    /// Whether a snapshot split read again would put its rows into the sink twice: a Doris
    /// changelog-mode (append-only) sink with 2PC. Its checkpoints then hold whole splits only,
    /// so the loads of a split a restart reads again are aborted, never committed.
    fn needs_whole_splits(&self) -> bool {
        self.loads.sink.two_phase() && !self.loads.sink.idempotent()
    }

    /// How a snapshot split whose Flight stream broke is read again: sent again from its start
    /// into an upsert sink (harmless, and right even if the table changed meanwhile), else
    /// continued after the rows already sent.
    fn snapshot_replay(&self) -> snapshot::Replay {
        if self.loads.sink.idempotent() {
            snapshot::Replay::Resend
        } else {
            snapshot::Replay::SkipDelivered
        }
    }

    /// Checkpoint if one is due and `bounds` allows it; otherwise hold the reader at split ends
    /// until it does.
    async fn checkpoint_at_boundary(
        &mut self,
        bounds: &mut SplitBoundaries,
        hold: &watch::Sender<bool>,
    ) -> Result<()> {
        match bounds.decide() {
            BoundaryAction::Checkpoint => {
                hold.send_replace(false);
                self.checkpoint(false).await
            }
            BoundaryAction::Hold => {
                hold.send_replace(true);
                Ok(())
            }
            BoundaryAction::Nothing => Ok(()),
        }
    }
}

/// Whether every tablet `recorded` (the snapshot's first plan) is among `planned` (the table's
/// tablets now); [`Error::SnapshotTabletsChanged`] naming the missing ones otherwise.
fn tablets_still_there(recorded: Option<&[[i64; 2]]>, planned: &[i64]) -> Result<()> {
    match recorded.and_then(|r| dcs_crds::tablets::gone(r, planned)) {
        Some(what) => Err(Error::SnapshotTabletsChanged {
            reason: dcs_crds::tablets::moved_message(&what),
        }),
        None => Ok(()),
    }
}
