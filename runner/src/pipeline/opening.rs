//! The opening of a run, before the first row is read: the stored checkpoint loaded and the store
//! claimed, the sink prepared and its pre-committed loads settled, the start point resolved
//! ([`super::start`]), and this run's own opening checkpoint saved ([`Flow::open_run`]).

use tokio::time::Instant;

use super::checkpointing::lost_error;
use super::late_sweep::LateSweep;
use super::offset_table::{self, OffsetPublisher};
use super::start::{self, StartPlan, plan_start_with_offset_row};
use super::{Flow, Phase, repair};
use crate::checkpoint::{CheckpointStore, Offset, PendingTxn, Position};
use crate::settings::Role;
use crate::sink::Sink;
use crate::source::fe_http::FeHttpClient;
use crate::source::properties::SourceTableInfo;
use crate::source::retention::RetentionGuard;
use crate::source::seam::{self, ReadAt, SeamSink};
use crate::source::tso::{self, NowOffsets as _};
use crate::{Error, Result};

/// A run opened and ready to read: the phase it reads first.
pub(super) struct Opened {
    /// The source FE's HTTP client.
    pub(super) http: FeHttpClient,
    /// The columns read (`source.columns`, else all).
    pub(super) columns: Vec<String>,
    pub(super) first: FirstPhase,
}

/// Where a run starts reading.
pub(super) enum FirstPhase {
    /// The snapshot, without the tablets already done; then the changelog from `then` if set.
    Snapshot {
        tablets_done: Vec<i64>,
        done_ranges: Vec<[i64; 2]>,
        then: Option<Offset>,
        /// Where the snapshot is read: as of T0 for a sink that keeps every event.
        read_at: ReadAt,
    },
    /// The changelog, from `from`.
    Changelog { from: Offset },
}

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Open the run; `None` when the sync is done already (a finished snapshot-mode sync).
    pub(super) async fn open(&mut self) -> Result<Option<Opened>> {
        // A table whose deletes never reach its changelog is refused before anything is claimed
        // or read: reading it would lose every delete without a word.
        let info = if self.config.startup_mode.is_incremental() {
            let info = crate::source::properties::read_table_info(&self.config.source).await?;
            crate::source::retention::deletes_recorded(
                &self.config.source.table.to_string(),
                &info,
            )?;
            Some(info)
        } else {
            None
        };
        let loaded = self.store.load().await?;
        if let Some(cp) = &loaded
            && cp.consumer_id != self.config.consumer_id
        {
            return Err(Error::Config {
                reason: format!(
                    "the stored checkpoint belongs to consumer {}, the manifest says {}; delete the checkpoint to start over as {}",
                    cp.consumer_id, self.config.consumer_id, self.config.consumer_id
                ),
            });
        }
        if let Some(cp) = &loaded
            && let Some(t0) = &self.config.sharding.t0
            && self.config.sharding.shard().is_some()
            && cp.start_point.as_ref().map(|o| o.tso) != Some(t0.tso)
        {
            return Err(Error::Config {
                reason: format!(
                    "the stored checkpoint of this shard was read at T0 {}, the manifest says T0 {} (annotation {}); delete the shard's checkpoint to read it again at the new T0",
                    cp.start_point
                        .as_ref()
                        .map_or_else(|| "none".to_owned(), |o| o.tso.to_string()),
                    t0.tso,
                    dcs_crds::shard::SNAPSHOT_T0_ANNOTATION
                ),
            });
        }
        // From here on a runner still working from the same checkpoint can no longer save or
        // commit; only then are its pre-committed loads ours to settle.
        self.store.claim().await?;
        if !loaded
            .as_ref()
            .is_some_and(|c| matches!(c.position, Position::Done))
        {
            self.prepare_sink(loaded.as_ref().and_then(|c| c.schema.as_ref()))
                .await?;
        }
        let lost = self.loads.sink.recover(loaded.as_ref()).await?;
        // A change of the source's columns the sync does not follow stops it now, its saved
        // loads settled.
        if let Some(stop) = self.schema.take_stop() {
            return Err(stop);
        }
        let mut loaded = loaded;
        // Lost loads of the saved checkpoint: upsert sinks read again from the position before it
        // (the position is rewound here, and saved with this run's opening checkpoint); the rows
        // of a changelog sink's lost loads are loaded again once that checkpoint is saved.
        let mut reload = None;
        if let Some(cp) = loaded.as_mut()
            && !lost.is_empty()
        {
            let txns: Vec<PendingTxn> = lost.iter().map(|(t, _)| t.clone()).collect();
            let source = cp.loads_source.as_ref();
            match repair::plan(&cp.pending_txns, source, &txns, self.sink_mode()) {
                repair::Repair::Rewind(position) => {
                    tracing::warn!(
                        ?position,
                        loads = lost.len(),
                        "loads of the saved checkpoint were lost; reading again from the position before it (upsert sink)"
                    );
                    cp.position = position;
                    cp.in_window = None;
                }
                repair::Repair::Reload { source, spans } => reload = Some((source, spans)),
                repair::Repair::Impossible(why) => return Err(lost_error(&lost, &why)),
            }
        }
        if let Some(cp) = loaded {
            self.loads.next_id = cp.checkpoint_id + 1;
            self.loads.counters = cp.counters.clone();
            self.reading.position = cp.position.clone();
            self.reading.in_window = cp.in_window.clone();
            self.reading.start_point = cp.start_point.clone();
            self.tablets.planned = cp.snapshot_tablets.clone();
            self.publishing.progress.checkpoint_id = cp.checkpoint_id;
            self.publishing.progress.last_checkpoint_ms = cp
                .saved_at
                .parse::<jiff::Timestamp>()
                .ok()
                .map(|t| t.as_millisecond());
            self.saving.last = Some(cp);
        }
        // A configured offset table must be readable even when a checkpoint wins: its writes
        // would fail all along otherwise.
        let offset_row = match &self.config.offset_table {
            Some(table) => {
                let row =
                    offset_table::read_start(&self.config.source, table, &self.config.consumer_id)
                        .await?;
                self.publishing.offsets = Some(OffsetPublisher::spawn(
                    self.config.source.clone(),
                    table.clone(),
                    self.config.consumer_id.clone(),
                    self.config.offset_table_retry,
                ));
                row
            }
            None => None,
        };
        let (plan, source) = plan_start_with_offset_row(
            self.saving.last.as_ref(),
            offset_row.as_ref(),
            self.config.startup_mode,
            self.config.startup_timestamp_ms,
        );
        let (plan, t0_visible) = self.sharded_start(plan, source)?;
        tracing::info!(?plan, ?source, "resolved the start point");
        let snapshot_first = matches!(
            plan,
            StartPlan::Snapshot { .. } | StartPlan::SnapshotFromNow
        );
        self.begin_rebuild(snapshot_first).await?;
        if plan == StartPlan::Done {
            // Loads a kill left listed in the `Done` checkpoint were committed by `recover`
            // above; the checkpoint says so before anything else.
            self.settle_done().await?;
            // A rebuild whose swap a kill interrupted is finished first.
            self.finish_rebuild().await?;
            self.publishing.progress.phase = Phase::Done;
            self.publish();
            return Ok(None);
        }
        let http = FeHttpClient::new(self.config.source.clone())?;
        let first = match plan {
            // Finished above.
            StartPlan::Done => return Ok(None),
            StartPlan::SnapshotFromNow => {
                let t0 = tso::current(&http).await?.start_point();
                tracing::info!(t0 = %t0.timestamp, tso = t0.tso, "took the changelog start point before the snapshot");
                RetentionGuard::new(http.clone())
                    .await_visible_through(&t0, &self.config.changelog)
                    .await?;
                FirstPhase::Snapshot {
                    tablets_done: Vec::new(),
                    done_ranges: Vec::new(),
                    read_at: self.seam_read_at(Some(&t0), info.as_ref())?,
                    then: Some(t0),
                }
            }
            StartPlan::Snapshot {
                tablets_done,
                done_ranges,
                then,
            } => {
                if let Some(t0) = t0_visible.as_ref() {
                    // A shard's first start: what every shard reads must hold every change up to
                    // the T0 they share (another shard may have waited for it already).
                    RetentionGuard::new(http.clone())
                        .await_visible_through(t0, &self.config.changelog)
                        .await?;
                }
                FirstPhase::Snapshot {
                    tablets_done,
                    done_ranges,
                    read_at: self.seam_read_at(then.as_ref(), info.as_ref())?,
                    then,
                }
            }
            StartPlan::ChangelogFromNow => FirstPhase::Changelog {
                from: tso::current(&http).await?.window_end(),
            },
            StartPlan::Changelog { from } => FirstPhase::Changelog { from },
        };
        let first_id = match source {
            start::StartSource::Checkpoint => None,
            // The checkpoint ids of the run that wrote the row are unknown: take ids no earlier
            // run can have used (Doris's milliseconds grow faster than checkpoints, and Doris's
            // clock, unlike this machine's, never steps back), so this run's labels never collide
            // with that run's.
            start::StartSource::OffsetTable => Some(
                u64::try_from(tso::current(&http).await?.physical_ms)
                    .unwrap_or(1)
                    .max(1),
            ),
            start::StartSource::StartupMode => Some(1),
        };
        self.open_run(&first, first_id).await?;
        if let Some((source, spans)) = reload {
            let reloaded = self.reload(&source, &spans).await?;
            let cp = self.checkpoint_of(reloaded, Some(source));
            self.save_and_commit(cp).await?;
        }
        let columns = self.columns_with(&http).await?;
        Ok(Some(Opened {
            http,
            columns,
            first,
        }))
    }

    /// How the snapshot before the changelog from `t0` is read ([`seam::read_at`]): as of T0 for
    /// a sink that keeps every event.
    fn seam_read_at(&self, t0: Option<&Offset>, info: Option<&SourceTableInfo>) -> Result<ReadAt> {
        let sink = SeamSink {
            idempotent: self.loads.sink.idempotent(),
            audit: self.loads.sink.encoding().marks_snapshot_rows(),
        };
        let table = self.config.source.table.to_string();
        let read_at = seam::read_at(t0.map(|t| t.tso), sink, info, &table)
            .map_err(|reason| Error::SourceConfig { reason })?;
        if let ReadAt::NowAtLeastOnce(why) = &read_at {
            tracing::warn!("{why}");
        }
        Ok(read_at)
    }

    /// The start of a run that takes part in a sharded snapshot (`spec.snapshot.parallelism`
    /// above 1), from the start its checkpoint or startup mode gives; and the T0 to wait for
    /// before a shard's first read. A stored checkpoint wins as ever. Without one, a shard reads
    /// its tablets with T0 as the start point (it ends done, [`super::snapshot_phase`]), and the
    /// changelog run starts at T0 — with the seam of docs/ARCHITECTURE.md §3.4 — only when every
    /// shard is done.
    fn sharded_start(
        &mut self,
        plan: StartPlan,
        source: start::StartSource,
    ) -> Result<(StartPlan, Option<Offset>)> {
        // A stored checkpoint wins, whatever the parallelism says now (a streaming sync whose
        // spec.snapshot.parallelism changed streams on).
        if source == start::StartSource::Checkpoint {
            return Ok((plan, None));
        }
        match self.config.sharding.role(self.config.startup_mode)? {
            Role::Whole => Ok((plan, None)),
            Role::Shard { t0, .. } => Ok((
                StartPlan::Snapshot {
                    tablets_done: Vec::new(),
                    done_ranges: Vec::new(),
                    then: t0.cloned(),
                },
                t0.cloned(),
            )),
            Role::AfterShards { count, t0 } => match &self.hooks.shards_done {
                Some(Ok(())) => {
                    tracing::info!(shards = count, t0 = %t0.timestamp, tso = t0.tso, "every snapshot shard is done: reading the changelog from T0");
                    self.reading.start_point = Some(t0.clone());
                    Ok((StartPlan::Changelog { from: t0.clone() }, None))
                }
                Some(Err(why)) => Err(Error::ShardsNotDone {
                    count,
                    reason: why.clone(),
                }),
                None => Err(Error::ShardsNotDone {
                    count,
                    reason: "their checkpoints were not read".into(),
                }),
            },
        }
    }

    /// Save this run's own checkpoint before its first load, and label every load with a later
    /// checkpoint id.
    ///
    /// A load the previous run had in flight when it died may still land in Doris after this run's
    /// start swept that run's labels (a slow BE, a request the kernel had already sent). Were this
    /// run to load under the same checkpoint id, such a load would hold one of its labels: adopted,
    /// it would commit the dead run's rows under this run's checkpoint (rows twice, or lost). So a
    /// resumed run first saves the loaded checkpoint again under the next id (its transactions are
    /// committed by now) and loads above it; a fresh run saves its start point (`first_id`) the
    /// same way. The dead run's labels are never used again, and they are swept once more later
    /// ([`Flow::late_sweep`]).
    async fn open_run(&mut self, first: &FirstPhase, first_id: Option<u64>) -> Result<()> {
        let (position, start_point) = match first {
            FirstPhase::Snapshot { then, .. } => (
                match &self.reading.position {
                    // Resumed: the loaded position as it is.
                    p @ Position::Snapshot { .. } => p.clone(),
                    _ => Position::Snapshot {
                        tablets_done: Vec::new(),
                        tablets_done_ranges: Vec::new(),
                        tablets_done_count: None,
                        tablets_total: 0,
                        rows_total: None,
                    },
                },
                then.clone(),
            ),
            FirstPhase::Changelog { from } => (
                Position::Changelog {
                    offset: from.clone(),
                },
                self.reading.start_point.clone(),
            ),
        };
        let id = match (first_id, &self.saving.last) {
            (Some(id), _) => id.max(self.loads.next_id),
            (None, Some(saved)) => {
                // Loads under the id after the loaded checkpoint may be in flight still.
                self.late_sweep = Some(LateSweep {
                    checkpoint_id: saved.checkpoint_id + 1,
                    scheme: saved.labels(),
                    due: Instant::now() + self.late_sweep_delay(),
                });
                saved.checkpoint_id + 1
            }
            (None, None) => self.loads.next_id,
        };
        self.reading.position = position;
        self.reading.start_point = start_point;
        self.loads.next_id = id;
        self.saving.changed();
        self.checkpoint(true).await
    }
}
