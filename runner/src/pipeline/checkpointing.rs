//! Checkpoints: the open batch flushed, the position saved (fenced) together with the loads
//! pre-committed for it, and only then those loads committed; loads Doris lost before their commit
//! made again ([`super::repair`]). Also the notes a run leaves in its last checkpoint when it
//! fails or stops.

use dcs_crds::SinkMode;
use tokio::time::Instant;

use super::{Flow, Outcome, repair};
use crate::checkpoint::{
    Checkpoint, CheckpointStore, FORMAT_VERSION, LastError, LoadsSource, PendingTxn, Position,
    RowSpan, Stopped, tablet_ranges,
};
use crate::sink::label::LabelScheme;
use crate::sink::{LostLoad, Sink};
use crate::source::fe_http::FeHttpClient;
use crate::{Error, Result};

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Flush, save the checkpoint (fenced), then commit its pre-committed loads. Skipped when
    /// nothing changed, unless `force`.
    pub(super) async fn checkpoint(&mut self, force: bool) -> Result<()> {
        self.flush().await?;
        self.saving.next_at = Instant::now() + self.config.checkpoint_interval;
        if !self.saving.dirty && !force {
            return Ok(());
        }
        let loads_source = (!self.loads.pending.is_empty()).then(|| {
            let from = self
                .saving
                .last
                .as_ref()
                .map_or_else(|| self.reading.position.clone(), |c| c.position.clone());
            self.loads.ledger.source(from)
        });
        let cp = self.checkpoint_of(self.loads.pending.clone(), loads_source);
        self.save_and_commit(cp).await?;
        // The offset table follows the completed checkpoint (docs/ARCHITECTURE.md §3.10), in the
        // background.
        if let (Some(offsets), Position::Changelog { offset }) =
            (&self.publishing.offsets, &self.reading.position)
        {
            offsets.publish(offset.clone());
        }
        self.late_sweep(false).await;
        self.publish();
        Ok(())
    }

    /// The checkpoint of the current state, id `next_id`, holding `pending`.
    pub(super) fn checkpoint_of(
        &self,
        pending: Vec<PendingTxn>,
        loads_source: Option<LoadsSource>,
    ) -> Checkpoint {
        Checkpoint {
            format_version: FORMAT_VERSION,
            consumer_id: self.config.consumer_id.clone(),
            checkpoint_id: self.loads.next_id,
            saved_at: jiff::Timestamp::now().to_string(),
            position: compact(&self.reading.position, &self.tablets.sorted),
            start_point: self.reading.start_point.clone(),
            pending_txns: pending,
            counters: self.loads.counters.clone(),
            last_error: self.saving.last.as_ref().and_then(|c| c.last_error.clone()),
            stopped: None,
            in_window: self.reading.in_window.clone(),
            loads_source,
            label_scheme: LabelScheme::V2.number(),
            rebuild: self.rebuild.record.clone(),
            snapshot_tablets: match self.reading.position {
                Position::Snapshot { .. } | Position::Done => self.tablets.planned.clone(),
                Position::Changelog { .. } => None,
            },
            schema: self.schema.record(),
        }
    }

    /// Save `cp` (fenced), then commit its pre-committed loads; loads Doris lost before their
    /// commit are made again ([`repair`]).
    pub(super) async fn save_and_commit(&mut self, cp: Checkpoint) -> Result<()> {
        let mut cp = cp;
        for attempt in 0.. {
            if let Err(e) = self.store.save(&cp).await {
                if matches!(e, Error::Fenced { .. }) {
                    self.loads.abort_unsaved(&cp.pending_txns).await;
                }
                return Err(e);
            }
            tracing::info!(
                checkpoint_id = cp.checkpoint_id,
                pending_txns = cp.pending_txns.len(),
                rows_written = cp.counters.rows_written,
                "checkpoint saved"
            );
            // From here on the store holds this checkpoint: a failure below leaves its
            // transactions to be committed again by the next start.
            self.loads.saved(
                cp.checkpoint_id,
                self.reading.window.as_ref().map(|(w, done)| (w, *done)),
            );
            self.publishing.progress.checkpoint_id = cp.checkpoint_id;
            self.publishing.progress.last_checkpoint_ms =
                Some(jiff::Timestamp::now().as_millisecond());
            self.saving.dirty = false;
            let pending = cp.pending_txns.clone();
            let source = cp.loads_source.clone();
            self.saving.last = Some(cp);
            if self.hooks.stop_after_saving_pending && !pending.is_empty() {
                return Err(Error::Injected {
                    point: "after saving a checkpoint, before committing its loads",
                });
            }
            if pending.is_empty() {
                return Ok(());
            }
            let lost = self.loads.sink.commit(&pending).await?;
            if lost.is_empty() {
                return self.settle_done().await;
            }
            if attempt >= 3 {
                return Err(lost_error(
                    &lost,
                    "they were lost again each time they were loaded again",
                ));
            }
            match self.repair(source.as_ref(), &lost).await? {
                Some(again) => cp = again,
                None => return Ok(()),
            }
        }
        unreachable!("the loop returns")
    }

    /// A `Done` checkpoint whose loads are committed is saved again without them, so that `Done`
    /// with pending loads always means "not committed yet" (a shard's hand-over waits for it,
    /// `dcs_crds::shard::shard_state`): called once the saved checkpoint's loads are committed,
    /// at the snapshot's end and by a run that starts on such a checkpoint. A kill before this
    /// save leaves `Done` with the loads listed; the restart commits them again ("already
    /// committed" is success) and saves this.
    pub(super) async fn settle_done(&mut self) -> Result<()> {
        let Some(saved) = self.saving.last.as_ref() else {
            return Ok(());
        };
        if saved.position != Position::Done || saved.pending_txns.is_empty() {
            return Ok(());
        }
        // A stop recorded when the commit failed is settled too: the loads are in.
        let cp = Checkpoint {
            saved_at: jiff::Timestamp::now().to_string(),
            pending_txns: Vec::new(),
            loads_source: None,
            stopped: None,
            ..saved.clone()
        };
        self.store.save(&cp).await?;
        tracing::info!(
            checkpoint_id = cp.checkpoint_id,
            "the snapshot's last loads are committed: done"
        );
        self.saving.last = Some(cp);
        Ok(())
    }

    /// The sink's mode ([`Sink::mode`]).
    pub(super) fn sink_mode(&self) -> SinkMode {
        self.loads.sink.mode()
    }

    /// Loads of the last saved checkpoint were lost: make them again (see [`repair`]). `Some`
    /// with the checkpoint holding the reloaded loads (to save and commit), or
    /// [`Error::Rewound`] after rewinding the stored checkpoint.
    async fn repair(
        &mut self,
        source: Option<&LoadsSource>,
        lost: &[LostLoad],
    ) -> Result<Option<Checkpoint>> {
        let txns: Vec<PendingTxn> = lost.iter().map(|(t, _)| t.clone()).collect();
        let pending = self
            .saving
            .last
            .as_ref()
            .map(|c| c.pending_txns.as_slice())
            .unwrap_or_default();
        match repair::plan(pending, source, &txns, self.sink_mode()) {
            repair::Repair::Impossible(why) => Err(lost_error(lost, &why)),
            repair::Repair::Rewind(position) => {
                tracing::warn!(
                    ?position,
                    loads = lost.len(),
                    "loads of the checkpoint were lost; going back to the position before it (upsert sink)"
                );
                self.reading.rewind_to(position);
                let cp = self.checkpoint_of(Vec::new(), None);
                self.store.save(&cp).await?;
                self.saving.last = Some(cp);
                Err(Error::Rewound {
                    reason: format!(
                        "{} pre-committed load(s) were lost before their commit ({})",
                        lost.len(),
                        lost.first().map_or("", |(_, why)| why.as_str())
                    ),
                })
            }
            repair::Repair::Reload { source, spans } => {
                tracing::warn!(
                    loads = lost.len(),
                    "loads of the checkpoint were lost; loading their rows again (changelog sink)"
                );
                let reloaded = self.reload(&source, &spans).await?;
                Ok(Some(self.checkpoint_of(reloaded, Some(source))))
            }
        }
    }

    /// Read `source`'s windows again and load the rows of `spans` under this run's next
    /// checkpoint id ([`super::reload`]); returns the pre-committed loads.
    pub(super) async fn reload(
        &mut self,
        source: &LoadsSource,
        spans: &[RowSpan],
    ) -> Result<Vec<PendingTxn>> {
        let http = FeHttpClient::new(self.config.source.clone())?;
        let columns = self.columns_with(&http).await?;
        let reader = self.changelog_reader(http, columns).await?;
        let seam = self.reading.seam_tso();
        self.loads.reload(reader, seam, source, spans).await
    }

    /// Best effort after a failure: abort the open loads no checkpoint records and keep the error
    /// in a checkpoint with the same position and transactions as the last saved one (so the next
    /// start commits those again). Never after losing the fence or at a test hook, where the store
    /// is not ours to write.
    pub(super) async fn record_error(&mut self, error: &Error) {
        tracing::error!(reason = error.reason(), "{error}");
        // Not ours to write (fenced, a test hook), or unknown whether the last save went through
        // (its loads may be listed in the store: never abort them blindly).
        if matches!(
            error,
            Error::Fenced { .. }
                | Error::FencedAfterUnclearSave { .. }
                | Error::CheckpointLocked { .. }
                | Error::LabelInUse { .. }
                | Error::Injected { .. }
                | Error::CheckpointSaveUnknown { .. }
        ) {
            return;
        }
        let Some(saved) = self.saving.last.clone() else {
            return;
        };
        if self.loads.sink.two_phase()
            && let Err(e) = self
                .loads
                .sink
                .abort(LabelScheme::V2, self.loads.next_id)
                .await
        {
            tracing::warn!("could not abort this run's open loads: {e}");
            return;
        }
        let at = jiff::Timestamp::now().to_string();
        let cp = Checkpoint {
            checkpoint_id: self.loads.next_id,
            saved_at: at.clone(),
            last_error: Some(LastError {
                at: at.clone(),
                reason: error.reason().to_owned(),
                message: error.to_string(),
            }),
            stopped: Some(Stopped {
                at,
                reason: error.reason().to_owned(),
                exit_code: i32::from(error.exit_code()),
                message: error.to_string(),
            }),
            // A change the run stopped on is shown with it.
            schema: self.schema.record().or(saved.schema),
            ..saved
        };
        if let Err(e) = self.store.save(&cp).await {
            tracing::warn!("could not record the error in the checkpoint: {e}");
        }
    }

    /// After a graceful end: note in the last checkpoint how the runner stopped (best effort).
    pub(super) async fn record_stop(&mut self, outcome: Outcome) {
        let Some(saved) = self.saving.last.clone() else {
            return;
        };
        let (reason, message) = match outcome {
            Outcome::Done => (
                "Done",
                "the snapshot is complete; a snapshot-mode sync ends here",
            ),
            Outcome::Stopped => ("Stopped", "stopped on request after a last checkpoint"),
        };
        let cp = Checkpoint {
            stopped: Some(Stopped {
                at: jiff::Timestamp::now().to_string(),
                reason: reason.to_owned(),
                exit_code: i32::from(crate::error::exit_code::DONE),
                message: message.to_owned(),
            }),
            ..saved
        };
        match self.store.save(&cp).await {
            Ok(()) => self.saving.last = Some(cp),
            Err(e) => tracing::warn!("could not record the stop in the checkpoint: {e}"),
        }
    }
}

/// `position` as stored: a snapshot's done tablets as ranges over its tablet list `tablets`
/// (sorted; known once the snapshot is planned), so the checkpoint stays small whatever the
/// table's size (pure).
pub(super) fn compact(position: &Position, tablets: &[i64]) -> Position {
    match position {
        Position::Snapshot {
            tablets_done,
            tablets_done_ranges,
            tablets_total,
            rows_total,
            ..
        } if !tablets.is_empty() && tablets_done_ranges.is_empty() => Position::Snapshot {
            tablets_done: Vec::new(),
            tablets_done_ranges: tablet_ranges(tablets_done, tablets),
            tablets_done_count: Some(tablets_done.len() as u64),
            tablets_total: *tablets_total,
            rows_total: *rows_total,
        },
        other => other.clone(),
    }
}

/// The error of loads lost for good.
pub(super) fn lost_error(lost: &[LostLoad], reason: &str) -> Error {
    Error::LoadsLost {
        labels: lost
            .iter()
            .map(|(t, _)| t.label.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        doris: lost.first().map(|(_, m)| m.clone()).unwrap_or_default(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use dcs_crds::testing::CheckpointBuilder;

    use super::*;
    use crate::checkpoint::in_ranges;
    use crate::pipeline::MAX_PENDING_LOADS;
    use crate::source::snapshot;

    /// A snapshot of 100,000 tablets (ids as Doris allocates them: a run per partition, gaps
    /// between), read over several runs (each re-planning the remaining tablets into splits, as
    /// a restart does), with a checkpoint holding the most loads it may: the checkpoint JSON stays
    /// far inside a ConfigMap's 1 MiB. Prints the sizes.
    #[test]
    fn a_checkpoint_of_a_100_000_tablet_snapshot_fits_a_configmap() {
        let mut tablets = Vec::with_capacity(100_000);
        let mut id = 1_700_000_i64;
        for partition in 0..1000 {
            for _ in 0..100 {
                tablets.push(id);
                id += 1;
            }
            id += 37 + partition % 13;
        }
        let mut done: Vec<i64> = Vec::new();
        for _run in 0..5 {
            let seen: std::collections::HashSet<i64> = done.iter().copied().collect();
            let remaining: Vec<i64> = tablets
                .iter()
                .copied()
                .filter(|t| !seen.contains(t))
                .collect();
            let splits = snapshot::plan_splits(&remaining, snapshot::MAX_SPLITS);
            // Each run finishes a split or two before it is stopped.
            for split in splits.iter().take(2) {
                done.extend(&split.tablets);
            }
        }
        let position = Position::Snapshot {
            tablets_done: done.clone(),
            tablets_done_ranges: vec![],
            tablets_done_count: None,
            tablets_total: tablets.len() as u64,
            rows_total: None,
        };
        let offset = crate::source::tso::offset_at(1_800_000_000_000);
        let pending: Vec<PendingTxn> = (0..MAX_PENDING_LOADS as u32)
            .map(|seq| PendingTxn {
                db: "sink_database".into(),
                label: format!("dcs-student-sync-5d5fac8a25ef-1800000000000-{seq}"),
                txn_id: 1_000_000_000 + i64::from(seq),
                rows: Some(RowSpan {
                    first: u64::from(seq) * 50_000,
                    count: 50_000,
                }),
                dead_letter: false,
            })
            .collect();
        let checkpoint = |position: Position| {
            CheckpointBuilder::new()
                .consumer("student-sync")
                .id(1_800_000_000_000)
                .saved_at("2026-12-01T00:00:00Z")
                .position(position.clone())
                .start_point(offset.clone())
                .pending_txns(pending.clone())
                .loads_source(LoadsSource {
                    from: position,
                    windows: vec![],
                })
                // Every tablet, as the snapshot records them (a range per partition).
                .snapshot_tablets(dcs_crds::tablets::tablet_set(&tablets))
                .build()
        };
        let stored = checkpoint(compact(&position, &tablets)).to_json();
        let listed = checkpoint(position).to_json();
        println!(
            "checkpoint of a 100,000-tablet snapshot ({} tablets done, {} loads pending): {} bytes with ranges, {} bytes listing the tablets",
            done.len(),
            pending.len(),
            stored.len(),
            listed.len()
        );
        assert!(stored.len() < 64 * 1024, "{} bytes", stored.len());
        // Read back, the done tablets are exactly the same.
        let back = crate::checkpoint::parse("test", &stored).unwrap();
        let Position::Snapshot {
            tablets_done_ranges,
            tablets_done_count,
            ..
        } = back.position
        else {
            panic!()
        };
        let again: Vec<i64> = tablets
            .iter()
            .copied()
            .filter(|t| in_ranges(&tablets_done_ranges, *t))
            .collect();
        let mut expected = done.clone();
        expected.sort_unstable();
        assert_eq!(again, expected);
        assert_eq!(tablets_done_count, Some(done.len() as u64));
    }
}
