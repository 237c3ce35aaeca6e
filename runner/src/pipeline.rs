//! The pipeline: source → encoder/batcher → sink → ack → checkpoint (docs/ARCHITECTURE.md §3).
//!
//! The snapshot reader and the changelog poller run as their own tasks and hand record batches
//! through bounded channels; this loop encodes them into the [`Batcher`], loads full batches, and
//! checkpoints every `checkpoint.interval`. Memory is bounded by the channel capacities and the
//! batch limits, whatever the table size.
//!
//! A checkpoint flushes the open batch, then (2PC) saves the position together with the
//! pre-committed transactions and only then commits them; a save that loses the store's fence stops
//! the run with [`Error::Fenced`] and commits nothing: the loads pre-committed for that checkpoint
//! are aborted by transaction id (best effort; another owner may use the same labels). On start
//! the store is claimed first (a write that fences any runner still working from the same
//! checkpoint), then the transactions of the saved checkpoint are committed again ("already
//! committed" is success) and loads pre-committed under the next checkpoint id are aborted, since
//! no checkpoint records them. A label that is pre-committed when this run sends it for the first
//! time belongs to such a fenced runner: the run stops ([`Error::LabelInUse`]) without adopting or
//! aborting it, and its restart, claiming again, settles it.
//!
//! Changelog checkpoints are taken between windows, so a checkpoint never holds part of a window.
//! Snapshot checkpoints record the finished tablets: rows of an unfinished split are loaded again
//! after a restart (idempotent on UNIQUE KEY sinks). Into a changelog-mode (append-only) sink
//! with 2PC they are taken only at split boundaries ([`boundaries`]), so the loads of an
//! unfinished split are aborted on restart, never committed: exactly once.
//!
//! A Flight stream that breaks mid-way (a snapshot split or a changelog window) is read again in
//! place by the readers ([`crate::source::resume`]), continuing after the rows already handed
//! here (or, for upsert sinks' snapshot splits, from the split's start); this loop never sees it.

pub mod boundaries;
pub mod ledger;
pub mod offset_table;
mod rebuilding;
pub mod repair;
pub mod start;

use arrow_array::{Array, Int8Array, Int64Array, RecordBatch};
use dcs_crds::SinkMode;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::Instrument;

use boundaries::{BoundaryAction, SplitBoundaries};
use start::{StartPlan, plan_start_with_offset_row};

use crate::checkpoint::{
    Checkpoint, CheckpointStore, Counters, FORMAT_VERSION, LastError, LoadsSource, Offset,
    PendingTxn, Position, RowSpan, Stopped, WindowProgress, in_ranges, tablet_ranges,
};
pub use crate::progress::{Phase, Progress};
use crate::settings::{PipelineConfig, SinkConfig};
use crate::sink::batcher::Batcher;
use crate::sink::doris::rebuild::Rebuild;
use crate::sink::doris::{DorisSink, schema};
use crate::sink::encode::{ChangeColumns, EncodeError, op};
use crate::sink::label::LabelScheme;
use crate::sink::stdout::StdoutSink;
use crate::sink::{LostLoad, Sink};
use crate::source::changelog::{self, ChangelogEvent, ChangelogReader, ChangelogWindow};
use crate::source::fe_http::FeHttpClient;
use crate::source::retention::{RetentionGuard, SAFETY_MARGIN};
use crate::source::snapshot::{self, SnapshotEvent, SnapshotOptions};
use crate::source::tso::{self, NowOffsets as _};
use crate::{Error, Result};
use offset_table::OffsetPublisher;

/// Rows encoded at a time, so one Flight batch never makes a load much larger than its limits.
const SLICE_ROWS: usize = 1024;
/// Capacity of the channels between the readers and this loop (in record batches).
const CHANNEL_CAPACITY: usize = 4;
/// Most loads a checkpoint holds pre-committed: a checkpoint is taken (inside a changelog window,
/// or at the next split boundary of a whole-split snapshot) when its loads reach this many. Well
/// under Doris's `max_running_txn_num_per_db` (1000 by default), which every load into the sink's
/// database, of every sync and client, counts against.
pub const MAX_PENDING_LOADS: usize = 64;
/// How often one run goes back to its stored checkpoint after lost loads before giving up.
const MAX_REWINDS: u32 = 10;
/// How long a stopping run waits for the last offset-table row to be written.
const OFFSET_TABLE_FINISH: std::time::Duration = std::time::Duration::from_secs(5);

/// How a run ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A bounded (`snapshot` mode) sync finished: `Position::Done` is saved.
    Done,
    /// Stopped on request after a final checkpoint.
    Stopped,
}

/// Points where tests can stop the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Stop with [`Error::Injected`] right after the first saved checkpoint that holds pending
    /// transactions, before committing them (a crash between save and commit).
    pub stop_after_saving_pending: bool,
}

/// The outside's handle on a run: a shutdown request in, progress out.
#[derive(Debug)]
pub struct Control {
    /// Becomes true when the run should finish its checkpoint and stop.
    pub shutdown: watch::Receiver<bool>,
    /// Where progress is published.
    pub progress: watch::Sender<Progress>,
    /// Test hooks.
    pub hooks: Hooks,
}

/// The other ends of a [`Control`].
#[derive(Debug)]
pub struct ControlHandle {
    /// Send `true` to stop the run gracefully.
    pub shutdown: watch::Sender<bool>,
    /// Progress as published.
    pub progress: watch::Receiver<Progress>,
}

impl Control {
    /// A control and its handle.
    pub fn new() -> (Self, ControlHandle) {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (progress_tx, progress_rx) = watch::channel(Progress::default());
        (
            Self {
                shutdown: stop_rx,
                progress: progress_tx,
                hooks: Hooks::default(),
            },
            ControlHandle {
                shutdown: stop_tx,
                progress: progress_rx,
            },
        )
    }
}

/// Run a sync until it is done (snapshot mode), stopped, or fails.
///
/// # Errors
/// [`Error::Fenced`] when another runner saved the checkpoint, [`Error::Sink`] when the sink
/// refuses rows, the source's errors (an expired offset among them), [`Error::Config`] when the
/// stored checkpoint belongs to another consumer.
pub async fn run<S: CheckpointStore>(
    config: PipelineConfig,
    store: &mut S,
    control: Control,
) -> Result<Outcome> {
    let span =
        tracing::info_span!("sync", sync = %config.sync_name, consumer = %config.consumer_id);
    async move {
        let Control {
            mut shutdown,
            progress,
            hooks,
        } = control;
        let mut rewinds = 0;
        loop {
            let may_rewind = rewinds < MAX_REWINDS;
            let outcome = match &config.sink {
                SinkConfig::Doris(d) => {
                    let sink = DorisSink::new(
                        (**d).clone(),
                        config.namespace.clone(),
                        config.consumer_id.clone(),
                    );
                    run_once(&config, store, (&progress, &hooks), sink, &mut shutdown, may_rewind).await
                }
                SinkConfig::Stdout => {
                    let sink = StdoutSink;
                    run_once(&config, store, (&progress, &hooks), sink, &mut shutdown, may_rewind).await
                }
            };
            match outcome {
                // The store holds the position to read on from: start over from it.
                Err(Error::Rewound { reason }) if may_rewind => {
                    rewinds += 1;
                    tracing::warn!(%reason, rewinds, "rewound: reading on from the stored checkpoint");
                }
                other => return other,
            }
        }
    }
    .instrument(span)
    .await
}

/// One run with `sink`, from the stored checkpoint to its end. [`Error::Rewound`] asks for the
/// next run when `may_rewind`; otherwise it is recorded as the error it is.
async fn run_once<S: CheckpointStore, K: Sink>(
    config: &PipelineConfig,
    store: &mut S,
    (progress, hooks): (&watch::Sender<Progress>, &Hooks),
    sink: K,
    shutdown: &mut watch::Receiver<bool>,
    may_rewind: bool,
) -> Result<Outcome> {
    let mut flow = Flow::new(config, store, progress, hooks.clone(), sink);
    let result = flow.run(shutdown).await;
    match &result {
        Ok(outcome) => {
            flow.late_sweep(true).await;
            flow.record_stop(*outcome).await;
        }
        Err(Error::Rewound { .. }) if may_rewind => {}
        Err(e) => flow.record_error(e).await,
    }
    if let Some(offsets) = flow.offsets.take() {
        offsets.finish(OFFSET_TABLE_FINISH).await;
    }
    result
}

/// The state of one run.
struct Flow<'a, S, K> {
    config: &'a PipelineConfig,
    store: &'a mut S,
    progress_tx: &'a watch::Sender<Progress>,
    hooks: Hooks,
    sink: K,
    batcher: Batcher,
    /// The last checkpoint loaded or saved.
    saved: Option<Checkpoint>,
    /// Id of the next checkpoint; the 2PC labels of open loads carry it.
    next_id: u64,
    /// Sequence number of the next load within `next_id`.
    seq: u32,
    /// Loads pre-committed since the last checkpoint.
    pending: Vec<PendingTxn>,
    position: Position,
    start_point: Option<Offset>,
    counters: Counters,
    /// Something changed since the last checkpoint.
    dirty: bool,
    next_checkpoint: Instant,
    progress: Progress,
    /// The source columns the sink was last prepared for; `None` without schema evolution.
    known_columns: Option<Vec<String>>,
    /// Writes the offset-table row after changelog checkpoints, when `offsets.table` is set.
    offsets: Option<OffsetPublisher>,
    /// The previous run's labels, to abort again once its loads in flight must have landed.
    late_sweep: Option<LateSweep>,
    /// What the open loads were read from.
    ledger: ledger::LoadLedger,
    /// The changelog window being read, and its rows handed over so far (skipped ones included).
    window: Option<(ChangelogWindow, u64)>,
    /// The window starting at the position's offset is in the sink up to this many rows.
    in_window: Option<WindowProgress>,
    /// The snapshot's tablets, sorted (empty outside the snapshot phase).
    snapshot_tablets: Vec<i64>,
    /// The sink rebuild of a re-initialised consumer ([`rebuild`]), if it rebuilds.
    rebuild: Rebuild,
}

/// A sweep of the labels of one checkpoint id, due at a time.
#[derive(Debug, Clone, Copy)]
struct LateSweep {
    checkpoint_id: u64,
    scheme: LabelScheme,
    due: Instant,
}

impl<'a, S: CheckpointStore, K: Sink> Flow<'a, S, K> {
    fn new(
        config: &'a PipelineConfig,
        store: &'a mut S,
        progress_tx: &'a watch::Sender<Progress>,
        hooks: Hooks,
        sink: K,
    ) -> Self {
        let limits = sink.limits();
        Self {
            config,
            store,
            progress_tx,
            hooks,
            sink,
            batcher: Batcher::new(limits),
            saved: None,
            next_id: 1,
            seq: 0,
            pending: Vec::new(),
            // Set by the phase before anything is checkpointed.
            position: Position::Done,
            start_point: None,
            counters: Counters::default(),
            dirty: false,
            next_checkpoint: Instant::now() + config.checkpoint_interval,
            progress: Progress::default(),
            known_columns: None,
            offsets: None,
            late_sweep: None,
            ledger: ledger::LoadLedger::default(),
            window: None,
            in_window: None,
            snapshot_tablets: Vec::new(),
            rebuild: Rebuild::default(),
        }
    }

    async fn run(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<Outcome> {
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
        // From here on a runner still working from the same checkpoint can no longer save or
        // commit; only then are its pre-committed loads ours to settle.
        self.store.claim().await?;
        if !loaded
            .as_ref()
            .is_some_and(|c| matches!(c.position, Position::Done))
        {
            self.prepare_sink().await?;
        }
        let lost = self.sink.recover(loaded.as_ref()).await?;
        let mut loaded = loaded;
        // Lost loads of the saved checkpoint: upsert sinks read again from the position before it
        // (the position is rewound here, and saved with this run's opening checkpoint); the rows
        // of a changelog sink's lost loads are loaded again once that checkpoint is saved.
        let mut reload = None;
        if let Some(cp) = loaded.as_mut()
            && !lost.is_empty()
        {
            let txns: Vec<PendingTxn> = lost.iter().map(|(t, _)| t.clone()).collect();
            let mode = self
                .config
                .doris_sink()
                .map_or(SinkMode::Upsert, |d| d.policy.mode);
            match repair::plan_repair(cp.loads_source.as_ref(), &txns, mode) {
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
            self.next_id = cp.checkpoint_id + 1;
            self.counters = cp.counters.clone();
            self.position = cp.position.clone();
            self.in_window = cp.in_window.clone();
            self.start_point = cp.start_point.clone();
            self.progress.checkpoint_id = cp.checkpoint_id;
            self.progress.last_checkpoint_ms = cp
                .saved_at
                .parse::<jiff::Timestamp>()
                .ok()
                .map(|t| t.as_millisecond());
            self.saved = Some(cp);
        }
        // A configured offset table must be readable even when a checkpoint wins: its writes
        // would fail all along otherwise.
        let offset_row = match &self.config.offset_table {
            Some(table) => {
                let row =
                    offset_table::read_start(&self.config.source, table, &self.config.consumer_id)
                        .await?;
                self.offsets = Some(OffsetPublisher::spawn(
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
            self.saved.as_ref(),
            offset_row.as_ref(),
            self.config.startup_mode,
            self.config.startup_timestamp_ms,
        );
        tracing::info!(?plan, ?source, "resolved the start point");
        let snapshot_first = matches!(
            plan,
            StartPlan::Snapshot { .. } | StartPlan::SnapshotFromNow
        );
        self.begin_rebuild(snapshot_first).await?;
        if plan == StartPlan::Done {
            // A rebuild whose swap a kill interrupted is finished first.
            self.finish_rebuild().await?;
            self.progress.phase = Phase::Done;
            self.publish();
            return Ok(Outcome::Done);
        }
        let http = FeHttpClient::new(self.config.source.clone())?;
        let plan = match plan {
            StartPlan::SnapshotFromNow => {
                let t0 = tso::current(&http).await?.start_point();
                tracing::info!(t0 = %t0.timestamp, tso = t0.tso, "took the changelog start point before the snapshot");
                RetentionGuard::new(http.clone())
                    .await_visible_through(&t0, &self.config.changelog)
                    .await?;
                StartPlan::Snapshot {
                    tablets_done: Vec::new(),
                    done_ranges: Vec::new(),
                    then: Some(t0),
                }
            }
            StartPlan::ChangelogFromNow => StartPlan::Changelog {
                from: tso::current(&http).await?.window_end(),
            },
            other => other,
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
        self.open_run(&plan, first_id).await?;
        if let Some((source, spans)) = reload {
            let reloaded = self.reload(&source, &spans).await?;
            let cp = self.checkpoint_of(reloaded, Some(source));
            self.save_and_commit(cp).await?;
        }
        let schema = snapshot::fetch_schema(&http, &self.config.source.table).await?;
        let columns = snapshot::projection(&schema, self.config.columns.as_deref())?;
        match plan {
            StartPlan::Snapshot {
                tablets_done,
                done_ranges,
                then,
            } => {
                self.snapshot_phase(&http, shutdown, &columns, (tablets_done, done_ranges), then)
                    .await
            }
            StartPlan::Changelog { from } => {
                self.changelog_phase(http, shutdown, columns, from).await
            }
            StartPlan::Done | StartPlan::SnapshotFromNow | StartPlan::ChangelogFromNow => {
                unreachable!("resolved above")
            }
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
    async fn open_run(&mut self, plan: &StartPlan, first_id: Option<u64>) -> Result<()> {
        let (position, start_point) = match plan {
            StartPlan::Snapshot { then, .. } => (
                match &self.position {
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
            StartPlan::Changelog { from } => (
                Position::Changelog {
                    offset: from.clone(),
                },
                self.start_point.clone(),
            ),
            StartPlan::Done | StartPlan::SnapshotFromNow | StartPlan::ChangelogFromNow => {
                return Ok(());
            }
        };
        let id = match (first_id, &self.saved) {
            (Some(id), _) => id.max(self.next_id),
            (None, Some(saved)) => {
                // Loads under the id after the loaded checkpoint may be in flight still.
                self.late_sweep = Some(LateSweep {
                    checkpoint_id: saved.checkpoint_id + 1,
                    scheme: saved.labels(),
                    due: Instant::now() + self.late_sweep_delay(),
                });
                saved.checkpoint_id + 1
            }
            (None, None) => self.next_id,
        };
        self.position = position;
        self.start_point = start_point;
        self.next_id = id;
        self.dirty = true;
        self.checkpoint(true).await
    }

    /// How long after its start a run sweeps the previous run's labels again: a load that run had
    /// in flight is answered (or given up) within the Stream Load request timeout.
    fn late_sweep_delay(&self) -> std::time::Duration {
        self.config
            .doris_sink()
            .map_or(std::time::Duration::ZERO, |d| d.request_timeout)
    }

    /// Abort, once more, the loads the previous run may have had in flight under the checkpoint id
    /// this run skipped ([`Flow::open_run`]), once they must have landed (`due`) or when the run
    /// stops (`now`). Best effort: what is left is never committed and Doris times it out.
    async fn late_sweep(&mut self, now: bool) {
        let Some(sweep) = self.late_sweep else {
            return;
        };
        if !now && Instant::now() < sweep.due {
            return;
        }
        self.late_sweep = None;
        match self.sink.abort(sweep.scheme, sweep.checkpoint_id).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                checkpoint_id = sweep.checkpoint_id,
                loads = n,
                "aborted loads of the previous run that landed after this run started"
            ),
            Err(e) => tracing::warn!(
                checkpoint_id = sweep.checkpoint_id,
                "could not sweep the previous run's labels again: {e}"
            ),
        }
    }

    async fn snapshot_phase(
        &mut self,
        http: &FeHttpClient,
        shutdown: &mut watch::Receiver<bool>,
        columns: &[String],
        (tablets_done, done_ranges): (Vec<i64>, Vec<[i64; 2]>),
        then: Option<Offset>,
    ) -> Result<Outcome> {
        // Splits are checkpointed whole when a re-read split would duplicate rows (see
        // `SplitBoundaries`); the reader is held at split ends to reach such a point.
        let (hold_tx, hold_rx) = watch::channel(false);
        let mut bounds = SplitBoundaries::new(self.needs_whole_splits());
        let options = SnapshotOptions {
            columns: Some(columns.to_vec()),
            filter: self.config.filter.clone(),
            tablets_done: tablets_done.clone(),
            tablets_done_ranges: done_ranges.clone(),
            concurrency: self.config.snapshot_concurrency,
            channel_capacity: CHANNEL_CAPACITY,
            replay: self.snapshot_replay(),
            retry: self.config.stream_retry,
            hold: bounds.enabled().then_some(hold_rx),
        };
        let guard = RetentionGuard::new(http.clone());
        let (plan, mut rx, handle) = snapshot::read(http, &options).await?;
        let tablets_total = plan.tablets_total.len();
        // The done tablets as a list of the snapshot's tablets (compacted again at each save).
        let listed: std::collections::HashSet<i64> = tablets_done.iter().copied().collect();
        let done: Vec<i64> = plan
            .tablets_total
            .iter()
            .copied()
            .filter(|t| listed.contains(t) || in_ranges(&done_ranges, *t))
            .collect();
        self.progress.tablets_done = done.len();
        self.snapshot_tablets = plan.tablets_total.clone();
        self.position = Position::Snapshot {
            tablets_done: done,
            tablets_done_ranges: Vec::new(),
            tablets_done_count: None,
            tablets_total: tablets_total as u64,
            rows_total: None,
        };
        self.start_point = then.clone();
        self.dirty = true;
        self.progress.phase = Phase::Snapshot;
        self.progress.tablets_total = tablets_total;
        self.publish();
        tracing::info!(
            tablets = tablets_total,
            splits = plan.splits.len(),
            whole_splits = bounds.enabled(),
            "reading the snapshot"
        );
        loop {
            let flush_at = self.batcher.deadline();
            tokio::select! {
                biased;
                () = wait_for_shutdown(shutdown) => {
                    handle.abort();
                    if bounds.can_checkpoint() {
                        tracing::info!("stopping: saving a last checkpoint");
                        self.checkpoint(false).await?;
                    } else {
                        tracing::info!("stopping mid-split: dropping the loads since the last checkpoint, the split is read again on restart");
                        self.drop_unsaved_loads().await?;
                    }
                    return Ok(Outcome::Stopped);
                }
                event = rx.recv() => match event {
                    Some(SnapshotEvent::Batch { split, batch }) => {
                        self.progress.ready = true;
                        self.progress.snapshot_rows_read += batch.num_rows() as u64;
                        bounds.batch(split);
                        for slice in slices(&batch, self.slice_rows()) {
                            self.rows(&slice, false).await?;
                            if self.pending.len() >= MAX_PENDING_LOADS {
                                // Enough held open: checkpoint now, or at the next split boundary.
                                bounds.due();
                                self.checkpoint_at_boundary(&mut bounds, &hold_tx).await?;
                            }
                        }
                    }
                    Some(SnapshotEvent::SplitDone { split, tablets }) => {
                        self.progress.ready = true;
                        if let Position::Snapshot { tablets_done, .. } = &mut self.position {
                            tablets_done.extend(tablets);
                            self.progress.tablets_done = tablets_done.len();
                        }
                        tracing::info!(split, "snapshot split finished");
                        self.dirty = true;
                        bounds.split_done(split);
                        self.checkpoint_at_boundary(&mut bounds, &hold_tx).await?;
                    }
                    None => break,
                },
                () = sleep_until(flush_at) => self.flush().await?,
                () = tokio::time::sleep_until(self.next_checkpoint) => {
                    self.next_checkpoint = Instant::now() + self.config.checkpoint_interval;
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
        tracing::info!(rows = self.progress.snapshot_rows_read, "snapshot finished");
        match then {
            Some(t0) => {
                self.position = Position::Changelog { offset: t0.clone() };
                self.dirty = true;
                self.checkpoint(true).await?;
                self.changelog_phase(http.clone(), shutdown, columns.to_vec(), t0)
                    .await
            }
            None => {
                self.position = Position::Done;
                self.dirty = true;
                self.checkpoint(true).await?;
                // Its loads committed, the snapshot is swapped in (recorded by a second save).
                self.finish_rebuild().await?;
                self.progress.phase = Phase::Done;
                self.publish();
                Ok(Outcome::Done)
            }
        }
    }

    /// Whether a snapshot split read again would put its rows into the sink twice: a Doris
    /// changelog-mode (append-only) sink with 2PC. Its checkpoints then hold whole splits only,
    /// so the loads of a split a restart reads again are aborted, never committed.
    fn needs_whole_splits(&self) -> bool {
        self.sink.two_phase() && !self.sink.idempotent()
    }

    /// How a snapshot split whose Flight stream broke is read again: sent again from its start
    /// into an upsert sink (harmless, and right even if the table changed meanwhile), else
    /// continued after the rows already sent.
    fn snapshot_replay(&self) -> snapshot::Replay {
        if self.sink.idempotent() {
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

    /// Stopping where a checkpoint would record half a split: abort the loads since the last
    /// checkpoint (none of them is recorded) and keep the stored checkpoint as it is.
    async fn drop_unsaved_loads(&mut self) -> Result<()> {
        let _ = self.batcher.take();
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

    async fn changelog_phase(
        &mut self,
        http: FeHttpClient,
        shutdown: &mut watch::Receiver<bool>,
        columns: Vec<String>,
        from: Offset,
    ) -> Result<Outcome> {
        // Nothing is read from the changelog before a rebuilt sink table is in place.
        self.finish_rebuild().await?;
        tracing::info!(from = %from.timestamp, increment_type = ?self.config.changelog.increment_type, "reading the changelog");
        let guard = RetentionGuard::new(http.clone());
        let reader = self.changelog_reader(http, columns).await?;
        let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
        let mut handle = tokio::spawn(reader.run(from.clone(), self.in_window.clone(), tx));
        self.position = Position::Changelog { offset: from };
        self.progress.phase = Phase::Changelog;
        self.publish();
        let mut due = false;
        let mut stopping = false;
        let outcome = loop {
            let flush_at = self.batcher.deadline();
            let mid_window = self.window.is_some();
            tokio::select! {
                biased;
                () = wait_for_shutdown(shutdown), if !stopping => {
                    tracing::info!(mid_window, "stopping: saving a last checkpoint");
                    if !mid_window {
                        self.checkpoint(false).await?;
                        break Ok(Outcome::Stopped);
                    }
                    stopping = true;
                }
                event = rx.recv() => match event {
                    Some(ChangelogEvent::WindowStart { window, skip }) => {
                        self.ledger.window_started(&window, skip);
                        self.window = Some((window, skip));
                    }
                    Some(ChangelogEvent::Batch(batch)) => {
                        self.progress.ready = true;
                        // In slices of at most a load, so the bound is checked after every load.
                        for slice in slices(&batch, self.slice_rows()) {
                            if let Some((_, done)) = &mut self.window {
                                *done += slice.num_rows() as u64;
                            }
                            if let Some(slice) = self.seam(slice)? {
                                self.rows(&slice, true).await?;
                            }
                            if self.pending.len() >= MAX_PENDING_LOADS {
                                self.checkpoint_inside_window(&guard).await?;
                            }
                        }
                    }
                    Some(ChangelogEvent::WindowDone { window, rows }) => {
                        self.window = None;
                        self.in_window = None;
                        tracing::debug!(window = %window.split_id(), rows, "changelog window handed to the sink");
                        self.progress.ready = true;
                        self.progress.last_window_seconds =
                            Some((window.end.epoch_ms - window.start.epoch_ms) as f64 / 1000.0);
                        self.progress.window_end = Some(window.end.clone());
                        self.position = Position::Changelog { offset: window.end };
                        self.dirty = true;
                        self.publish();
                        if due || stopping || self.pending.len() >= MAX_PENDING_LOADS / 2 {
                            due = false;
                            self.checkpoint(false).await?;
                        }
                        if stopping {
                            break Ok(Outcome::Stopped);
                        }
                    }
                    None => {
                        break Err(match (&mut handle).await {
                            Ok(Err(e)) => e,
                            Ok(Ok(())) => Error::SourceUnavailable {
                                context: "changelog reader".into(),
                                reason: "stopped without an error".into(),
                            },
                            Err(e) => Error::SourceUnavailable {
                                context: "changelog reader".into(),
                                reason: e.to_string(),
                            },
                        });
                    }
                },
                () = sleep_until(flush_at) => self.flush().await?,
                () = tokio::time::sleep_until(self.next_checkpoint) => {
                    if mid_window {
                        due = true;
                        self.next_checkpoint = Instant::now() + self.config.checkpoint_interval;
                    } else {
                        self.checkpoint(false).await?;
                    }
                }
            }
        };
        handle.abort();
        outcome
    }

    /// The changelog reader of this sync: its columns (`*` with schema evolution, so added and
    /// dropped columns show), increment type, and the seam of an `initial` sync (the window at
    /// T0 is read with DETAIL under minDelta).
    async fn changelog_reader(
        &self,
        http: FeHttpClient,
        columns: Vec<String>,
    ) -> Result<ChangelogReader> {
        let columns = if self.evolves_schema() {
            Vec::new()
        } else {
            columns
        };
        let mut options = self.config.changelog.clone();
        options.stream_retry = self.config.stream_retry;
        options.seam_start_ms = self.start_point.as_ref().map(|t0| t0.epoch_ms);
        ChangelogReader::new(http, columns, options).await
    }

    /// Rows handed to the sink at a time: at most a load's worth, so the loads a checkpoint holds
    /// are counted after each.
    fn slice_rows(&self) -> usize {
        let max_rows = self
            .config
            .doris_sink()
            .map_or(SLICE_ROWS as u64, |d| d.limits.max_rows);
        usize::try_from(max_rows)
            .unwrap_or(SLICE_ROWS)
            .clamp(1, SLICE_ROWS)
    }

    /// The rows of a changelog batch that are not in the snapshot already (see
    /// [`changelog::drop_before_seam`]).
    fn seam(&self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        match &self.start_point {
            Some(t0) => changelog::drop_before_seam(batch, t0.tso),
            None => Ok(Some(batch)),
        }
    }

    /// A checkpoint inside the window being read, because its loads reached
    /// [`MAX_PENDING_LOADS`]: it records how many of the window's rows are in the sink, and a
    /// restart reads the window on from there. Taken only while the window's start is still in
    /// the changelog (so the rows read so far are all the window has up to there).
    async fn checkpoint_inside_window(&mut self, guard: &RetentionGuard) -> Result<()> {
        let Some((window, done)) = self.window.clone() else {
            return Ok(());
        };
        // Everything read so far goes into loads first, so `done` rows are all in them.
        self.flush().await?;
        guard
            .check(&window.start, std::time::Duration::ZERO)
            .await?;
        tracing::info!(window = %window.split_id(), rows = done, loads = self.pending.len(), "checkpoint inside a changelog window (its loads reached the bound)");
        self.in_window = Some(WindowProgress {
            end: window.end.clone(),
            rows: done,
        });
        self.dirty = true;
        self.checkpoint(false).await
    }

    /// Hand one record batch to the sink: encoded into the batcher (flushing full batches), or
    /// written to stdout.
    async fn rows(&mut self, batch: &RecordBatch, changelog: bool) -> Result<()> {
        self.follow_schema(batch).await?;
        let n = batch.num_rows();
        self.counters.rows_read += n as u64;
        self.dirty = true;
        let synthetic_tso = self.start_point.as_ref().map_or(0, |o| o.tso);
        let snapshot_op = if self.rebuild.marks_snapshot() {
            op::RESNAPSHOT
        } else {
            op::APPEND
        };
        let encoding = self.sink.encoding();
        // Changelog-mode sinks need op/TSO/LSN for snapshot rows too: inserts at T0.
        let snapshot_changes =
            (encoding.marks_snapshot_rows() && !changelog).then_some((snapshot_op, synthetic_tso));
        let mut offset = 0;
        while offset < n {
            let room = usize::try_from(self.batcher.room()).unwrap_or(usize::MAX);
            let len = room.min(n - offset).min(SLICE_ROWS);
            let slice = batch.slice(offset, len);
            offset += len;
            self.batcher.append(Instant::now().into_std(), |out| {
                with_changes(&slice, changelog, snapshot_changes, |data, changes| {
                    encoding.encode(data, changes, out)
                })
            })?;
            self.ledger.appended(len as u64);
            if self
                .batcher
                .flush_reason(Instant::now().into_std())
                .is_some()
            {
                self.flush().await?;
            }
        }
        self.publish();
        Ok(())
    }

    /// Before any load or 2PC recovery: create the Doris sink table when missing, check it
    /// otherwise, and remember the columns schema evolution starts from.
    async fn prepare_sink(&mut self) -> Result<()> {
        let Some(sink) = self.config.doris_sink() else {
            return Ok(());
        };
        let columns = self.source_columns().await?;
        schema::prepare_sink_table(sink, &self.config.source, &columns, self.evolves_schema())
            .await?;
        if self.evolves_schema() {
            self.known_columns = Some(columns);
        }
        Ok(())
    }

    /// The source columns the sink is written with (`source.columns`, else all).
    async fn source_columns(&self) -> Result<Vec<String>> {
        let http = FeHttpClient::new(self.config.source.clone())?;
        let schema = snapshot::fetch_schema(&http, &self.config.source.table).await?;
        snapshot::projection(&schema, self.config.columns.as_deref())
    }

    /// Whether the runner keeps the sink's columns in step with the source: a Doris sink with
    /// `createTable.enabled` and no `source.columns` list.
    fn evolves_schema(&self) -> bool {
        schema::evolves_schema(self.config)
    }

    /// Schema evolution: when `batch` has other source columns than the last one, load the open
    /// batch, then ADD/DROP the columns on the sink before any row that needs them is encoded.
    async fn follow_schema(&mut self, batch: &RecordBatch) -> Result<()> {
        let Some(known) = &self.known_columns else {
            return Ok(());
        };
        let arrow_schema = batch.schema();
        let current: Vec<(String, arrow_schema::DataType)> = arrow_schema
            .fields()
            .iter()
            .filter(|f| {
                !changelog::HIDDEN_COLUMNS
                    .iter()
                    .any(|h| f.name().eq_ignore_ascii_case(h))
            })
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        let names: Vec<String> = current.iter().map(|(n, _)| n.clone()).collect();
        let Some(change) = schema::diff_columns(known, &names) else {
            return Ok(());
        };
        let Some(sink) = self.config.doris_sink() else {
            return Ok(());
        };
        tracing::info!(added = ?change.added, dropped = ?change.dropped, "the source's columns changed; updating the sink table");
        self.flush().await?;
        let statements =
            schema::apply_schema_change(sink, &self.config.source, &change, &names, &current)
                .await?;
        for s in &statements {
            tracing::info!(statement = %s, "applied to the sink table");
        }
        self.known_columns = Some(names);
        Ok(())
    }

    /// Load the open batch, if any.
    async fn flush(&mut self) -> Result<()> {
        let Some(batch) = self.batcher.take() else {
            return Ok(());
        };
        let bytes = batch.body.len() as u64;
        let result = self.sink.load(batch.body, self.next_id, self.seq).await?;
        tracing::debug!(label = %result.label, rows = batch.rows, bytes, attempts = result.attempts, "loaded a batch");
        self.seq += 1;
        self.progress.load_retries += u64::from(result.attempts.saturating_sub(1));
        let rows = self.ledger.flushed();
        self.pending
            .extend(result.pending.map(|txn| PendingTxn { rows, ..txn }));
        self.counters.loads += 1;
        self.counters.bytes += bytes;
        self.counters.rows_written += batch.upserts;
        self.counters.rows_deleted += batch.deletes;
        self.dirty = true;
        self.publish();
        Ok(())
    }

    /// Flush, save the checkpoint (fenced), then commit its pre-committed loads. Skipped when
    /// nothing changed, unless `force`.
    async fn checkpoint(&mut self, force: bool) -> Result<()> {
        self.flush().await?;
        self.next_checkpoint = Instant::now() + self.config.checkpoint_interval;
        if !self.dirty && !force {
            return Ok(());
        }
        let loads_source = (!self.pending.is_empty()).then(|| {
            let from = self
                .saved
                .as_ref()
                .map_or_else(|| self.position.clone(), |c| c.position.clone());
            self.ledger.source(from)
        });
        let cp = self.checkpoint_of(self.pending.clone(), loads_source);
        self.save_and_commit(cp).await?;
        // The offset table follows the completed checkpoint (docs/ARCHITECTURE.md §3.10), in the
        // background.
        if let (Some(offsets), Position::Changelog { offset }) = (&self.offsets, &self.position) {
            offsets.publish(offset.clone());
        }
        self.late_sweep(false).await;
        self.publish();
        Ok(())
    }

    /// The checkpoint of the current state, id `next_id`, holding `pending`.
    fn checkpoint_of(
        &self,
        pending: Vec<PendingTxn>,
        loads_source: Option<LoadsSource>,
    ) -> Checkpoint {
        Checkpoint {
            format_version: FORMAT_VERSION,
            consumer_id: self.config.consumer_id.clone(),
            checkpoint_id: self.next_id,
            saved_at: jiff::Timestamp::now().to_string(),
            position: compact(&self.position, &self.snapshot_tablets),
            start_point: self.start_point.clone(),
            pending_txns: pending,
            counters: self.counters.clone(),
            last_error: self.saved.as_ref().and_then(|c| c.last_error.clone()),
            stopped: None,
            in_window: self.in_window.clone(),
            loads_source,
            label_scheme: LabelScheme::V2.number(),
            rebuild: self.rebuild.record.clone(),
        }
    }

    /// Save `cp` (fenced), then commit its pre-committed loads; loads Doris lost before their
    /// commit are made again ([`repair`]).
    async fn save_and_commit(&mut self, cp: Checkpoint) -> Result<()> {
        let mut cp = cp;
        for attempt in 0.. {
            if let Err(e) = self.store.save(&cp).await {
                if matches!(e, Error::Fenced { .. }) {
                    self.abort_unsaved(&cp.pending_txns).await;
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
            self.pending.clear();
            self.progress.checkpoint_id = cp.checkpoint_id;
            self.progress.last_checkpoint_ms = Some(jiff::Timestamp::now().as_millisecond());
            self.next_id = cp.checkpoint_id + 1;
            self.seq = 0;
            self.dirty = false;
            self.ledger
                .restart(self.window.as_ref().map(|(w, done)| (w, *done)));
            let pending = cp.pending_txns.clone();
            let source = cp.loads_source.clone();
            self.saved = Some(cp);
            if self.hooks.stop_after_saving_pending && !pending.is_empty() {
                return Err(Error::Injected {
                    point: "after saving a checkpoint, before committing its loads",
                });
            }
            if pending.is_empty() {
                return Ok(());
            }
            let lost = self.sink.commit(&pending).await?;
            if lost.is_empty() {
                return Ok(());
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

    /// Loads of the last saved checkpoint were lost: make them again (see [`repair`]). `Some`
    /// with the checkpoint holding the reloaded loads (to save and commit), or
    /// [`Error::Rewound`] after rewinding the stored checkpoint.
    async fn repair(
        &mut self,
        source: Option<&LoadsSource>,
        lost: &[LostLoad],
    ) -> Result<Option<Checkpoint>> {
        let txns: Vec<PendingTxn> = lost.iter().map(|(t, _)| t.clone()).collect();
        let mode = self
            .config
            .doris_sink()
            .map_or(SinkMode::Upsert, |d| d.policy.mode);
        match repair::plan_repair(source, &txns, mode) {
            repair::Repair::Impossible(why) => Err(lost_error(lost, &why)),
            repair::Repair::Rewind(position) => {
                tracing::warn!(
                    ?position,
                    loads = lost.len(),
                    "loads of the checkpoint were lost; going back to the position before it (upsert sink)"
                );
                self.position = position;
                self.in_window = None;
                self.window = None;
                let cp = self.checkpoint_of(Vec::new(), None);
                self.store.save(&cp).await?;
                self.saved = Some(cp);
                Err(Error::Rewound {
                    reason: format!(
                        "{} pre-committed load(s) were lost before their commit ({})",
                        lost.len(),
                        lost[0].1
                    ),
                })
            }
            repair::Repair::Reload { source, spans } => {
                tracing::warn!(
                    loads = lost.len(),
                    "loads of the checkpoint were lost; loading their rows again (changelog sink)"
                );
                let reloaded = self.reload(&source, &spans).await.map_err(|e| match e {
                    Error::OffsetExpired { .. } | Error::LoadsLost { .. } => e,
                    other => other,
                })?;
                Ok(Some(self.checkpoint_of(reloaded, Some(source))))
            }
        }
    }

    /// Read `source`'s windows again and load the rows of `spans` under this run's next
    /// checkpoint id, one load per span (split when a span outgrows a batch); returns the
    /// pre-committed loads. The rows are found by their index among the rows handed to the sink
    /// since `source.from`, the way [`ledger`] counted them: after the seam, in the windows' order.
    async fn reload(&mut self, source: &LoadsSource, spans: &[RowSpan]) -> Result<Vec<PendingTxn>> {
        let http = FeHttpClient::new(self.config.source.clone())?;
        let schema = snapshot::fetch_schema(&http, &self.config.source.table).await?;
        let columns = snapshot::projection(&schema, self.config.columns.as_deref())?;
        let mut reader = self.changelog_reader(http, columns).await?;
        let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
        let windows = source.windows.clone();
        let replay = tokio::spawn(async move {
            let result = reader.replay(&windows, &tx).await;
            reader.close().await;
            result
        });
        let until = repair::needed_until(spans);
        let encoding = self.sink.encoding();
        let limits = self.sink.limits();
        let mut reloaded = Vec::new();
        let mut index = 0;
        let mut seq = self.seq;
        let id = self.next_id;
        while index < until {
            let Some(event) = rx.recv().await else {
                break;
            };
            let ChangelogEvent::Batch(batch) = event else {
                continue;
            };
            let Some(batch) = self.seam(batch)? else {
                continue;
            };
            let n = batch.num_rows() as u64;
            for (offset, len) in repair::select(spans, index, n) {
                // One span, one load (or several if it outgrows a batch).
                let mut done = 0;
                while done < len {
                    let mut batcher = Batcher::new(limits);
                    let mut taken = 0;
                    while done + taken < len {
                        let room = usize::try_from(batcher.room()).unwrap_or(usize::MAX);
                        let take = room.min(len - done - taken).min(SLICE_ROWS);
                        if take == 0 {
                            break;
                        }
                        let slice = batch.slice(offset + done + taken, take);
                        batcher.append(Instant::now().into_std(), |out| {
                            with_changes(&slice, true, None, |data, changes| {
                                encoding.encode(data, changes, out)
                            })
                        })?;
                        taken += take;
                        if batcher.flush_reason(Instant::now().into_std()).is_some() {
                            break;
                        }
                    }
                    let Some(body) = batcher.take() else {
                        break;
                    };
                    let result = self.sink.load(body.body, id, seq).await?;
                    seq += 1;
                    let rows = Some(RowSpan {
                        first: index + (offset + done) as u64,
                        count: taken as u64,
                    });
                    reloaded.extend(result.pending.map(|txn| PendingTxn { rows, ..txn }));
                    done += taken;
                }
            }
            index += n;
        }
        drop(rx);
        match replay.await {
            Ok(Ok(())) | Err(_) => {}
            Ok(Err(e)) if index < until => return Err(e),
            Ok(Err(_)) => {}
        }
        if index < until {
            return Err(Error::LoadsLost {
                labels: format!("{} load(s)", spans.len()),
                doris: "aborted before the commit".into(),
                reason: format!(
                    "reading their changelog windows again returned {index} rows where they held rows up to {until}"
                ),
            });
        }
        self.seq = seq;
        Ok(reloaded)
    }

    /// Best effort after losing the fence: abort the loads this runner pre-committed for the
    /// checkpoint it could not save. Nobody would ever commit them, and the new owner (or the
    /// operator cleaning up a deleted sync) may not know them.
    async fn abort_unsaved(&mut self, txns: &[PendingTxn]) {
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

    /// Best effort after a failure: abort the open loads no checkpoint records and keep the error
    /// in a checkpoint with the same position and transactions as the last saved one (so the next
    /// start commits those again). Never after losing the fence or at a test hook, where the store
    /// is not ours to write.
    async fn record_error(&mut self, error: &Error) {
        tracing::error!(reason = error.reason(), "{error}");
        // Not ours to write (fenced, a test hook), or unknown whether the last save went through
        // (its loads may be listed in the store: never abort them blindly).
        if matches!(
            error,
            Error::Fenced { .. }
                | Error::CheckpointLocked { .. }
                | Error::LabelInUse { .. }
                | Error::Injected { .. }
                | Error::CheckpointSaveUnknown { .. }
        ) {
            return;
        }
        let Some(saved) = self.saved.clone() else {
            return;
        };
        if self.sink.two_phase()
            && let Err(e) = self.sink.abort(LabelScheme::V2, self.next_id).await
        {
            tracing::warn!("could not abort this run's open loads: {e}");
            return;
        }
        let at = jiff::Timestamp::now().to_string();
        let cp = Checkpoint {
            checkpoint_id: self.next_id,
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
            ..saved
        };
        if let Err(e) = self.store.save(&cp).await {
            tracing::warn!("could not record the error in the checkpoint: {e}");
        }
    }

    /// After a graceful end: note in the last checkpoint how the runner stopped (best effort).
    async fn record_stop(&mut self, outcome: Outcome) {
        let Some(saved) = self.saved.clone() else {
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
            Ok(()) => self.saved = Some(cp),
            Err(e) => tracing::warn!("could not record the stop in the checkpoint: {e}"),
        }
    }

    fn publish(&mut self) {
        self.progress.counters = self.counters.clone();
        if let Some(offsets) = &self.offsets {
            self.progress.offset_table_write_failures = offsets.failures();
        }
        self.progress_tx.send_replace(self.progress.clone());
    }
}

/// Call `f` with the table columns of `batch` and, for changelog batches, its change columns
/// (the hidden `@incr` columns are taken out of the data). `snapshot` gives snapshot rows
/// synthetic change columns (that op, that TSO, LSN 0) for changelog-mode sinks.
fn with_changes<T>(
    batch: &RecordBatch,
    changelog: bool,
    snapshot: Option<(i8, i64)>,
    f: impl FnOnce(&RecordBatch, Option<ChangeColumns<'_>>) -> std::result::Result<T, EncodeError>,
) -> Result<T> {
    let encode_err = |e: EncodeError| Error::UnexpectedResult {
        context: "encoding rows for the sink".into(),
        reason: e.to_string(),
    };
    if !changelog {
        return match snapshot {
            None => f(batch, None).map_err(encode_err),
            Some((op, tso)) => {
                let n = batch.num_rows();
                let op = Int8Array::from(vec![op; n]);
                let tso = Int64Array::from(vec![tso; n]);
                let lsn = Int64Array::from(vec![0; n]);
                let changes = ChangeColumns {
                    op: &op,
                    tso: &tso,
                    lsn: &lsn,
                };
                f(batch, Some(changes)).map_err(encode_err)
            }
        };
    }
    let schema = batch.schema();
    let index = |name: &str| {
        schema
            .fields()
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnexpectedResult {
                context: "changelog batch".into(),
                reason: format!("no column {name}"),
            })
    };
    let (op_i, tso_i, lsn_i) = (
        index(changelog::OP_COLUMN)?,
        index(changelog::TSO_COLUMN)?,
        index(changelog::LSN_COLUMN)?,
    );
    let data_cols: Vec<usize> = (0..schema.fields().len())
        .filter(|i| ![op_i, tso_i, lsn_i].contains(i))
        .collect();
    let data = batch
        .project(&data_cols)
        .map_err(|e| Error::UnexpectedResult {
            context: "changelog batch".into(),
            reason: e.to_string(),
        })?;
    let downcast_err = |name: &str| Error::UnexpectedResult {
        context: "changelog batch".into(),
        reason: format!("{name} has an unexpected type"),
    };
    let op = batch
        .column(op_i)
        .as_any()
        .downcast_ref::<Int8Array>()
        .ok_or_else(|| downcast_err(changelog::OP_COLUMN))?;
    let tso = batch
        .column(tso_i)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| downcast_err(changelog::TSO_COLUMN))?;
    let lsn = batch
        .column(lsn_i)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| downcast_err(changelog::LSN_COLUMN))?;
    f(&data, Some(ChangeColumns { op, tso, lsn })).map_err(encode_err)
}

/// `position` as stored: a snapshot's done tablets as ranges over its tablet list `tablets`
/// (sorted; known once the snapshot is planned), so the checkpoint stays small whatever the
/// table's size (pure).
fn compact(position: &Position, tablets: &[i64]) -> Position {
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

/// `batch` in consecutive slices of at most `rows` rows (no copy).
fn slices(batch: &RecordBatch, rows: usize) -> impl Iterator<Item = RecordBatch> + '_ {
    let n = batch.num_rows();
    let rows = rows.max(1);
    (0..n.div_ceil(rows)).map(move |i| {
        let offset = i * rows;
        batch.slice(offset, rows.min(n - offset))
    })
}

/// The error of loads lost for good.
fn lost_error(lost: &[LostLoad], reason: &str) -> Error {
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

/// Resolves once shutdown is requested; never if the sender is gone without asking.
async fn wait_for_shutdown(rx: &mut watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(Instant::from_std(d)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{Int32Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    fn changelog_batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new(changelog::TSO_COLUMN, DataType::Int64, false),
            Field::new(changelog::LSN_COLUMN, DataType::Int64, false),
            Field::new(changelog::OP_COLUMN, DataType::Int8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 1])),
                Arc::new(StringArray::from(vec![Some("a"), Some("b")])),
                Arc::new(Int64Array::from(vec![9, 9])),
                Arc::new(Int64Array::from(vec![0, 1])),
                Arc::new(Int8Array::from(vec![2, 3])),
            ],
        )
        .unwrap()
    }

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
            })
            .collect();
        let checkpoint = |position: Position| Checkpoint {
            format_version: FORMAT_VERSION,
            consumer_id: "student-sync".into(),
            checkpoint_id: 1_800_000_000_000,
            saved_at: "2026-12-01T00:00:00Z".into(),
            position: position.clone(),
            start_point: Some(offset.clone()),
            pending_txns: pending.clone(),
            counters: Counters::default(),
            last_error: None,
            stopped: None,
            in_window: None,
            loads_source: Some(LoadsSource {
                from: position,
                windows: vec![],
            }),
            label_scheme: 2,
            rebuild: None,
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

    #[test]
    fn change_columns_are_split_from_the_data() {
        let (cols, ops) = with_changes(&changelog_batch(), true, None, |data, changes| {
            let c = changes.unwrap();
            Ok((
                data.schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect::<Vec<_>>(),
                (0..2).map(|i| c.op.value(i)).collect::<Vec<_>>(),
            ))
        })
        .unwrap();
        assert_eq!(cols, ["id", "name"]);
        assert_eq!(ops, [2, 3]);
    }

    #[test]
    fn snapshot_rows_get_insert_changes_for_changelog_sinks() {
        let data = changelog_batch().project(&[0, 1]).unwrap();
        let tsos = with_changes(&data, false, Some((op::APPEND, 42)), |_, changes| {
            let c = changes.unwrap();
            Ok((c.op.value(0), c.tso.value(1), c.lsn.value(0)))
        })
        .unwrap();
        assert_eq!(tsos, (0, 42, 0));
        assert!(with_changes(&data, false, None, |_, c| Ok(c.is_none())).unwrap());
    }
}
