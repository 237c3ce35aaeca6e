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
mod changelog_phase;
mod checkpointing;
mod late_sweep;
pub mod ledger;
mod loads;
pub mod offset_table;
mod opening;
mod reading;
mod rebuilding;
mod reload;
pub mod repair;
mod rows;
mod schema_follow;
mod snapshot_phase;
pub mod start;

use arrow_array::RecordBatch;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::checkpoint::{Checkpoint, CheckpointStore, Counters, Offset, Position, WindowProgress};
pub use crate::progress::{Phase, Progress};
use crate::settings::PipelineConfig;
use crate::sink::configured::ConfiguredSink;
use crate::sink::encode::op;
use crate::sink::rebuild::Rebuild;
use crate::sink::{RowOrigin, Sink};
use crate::source::changelog::ChangelogWindow;
use crate::{Error, Result};
use late_sweep::LateSweep;
use loads::Loads;
use offset_table::OffsetPublisher;
use opening::FirstPhase;
use snapshot_phase::SnapshotEnd;

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
    /// [`Control::shards_done`], carried into the run.
    pub(crate) shards_done: Option<std::result::Result<(), String>>,
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
    /// For the changelog run after a sharded snapshot (`spec.snapshot.parallelism` above 1):
    /// whether every shard's checkpoint says done at T0 (`dcs_crds::shard::handover` over the
    /// shards' stores, which the caller reads). Consulted only by a run without a checkpoint of
    /// its own; `None` there stops the run.
    pub shards_done: Option<std::result::Result<(), String>>,
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
                shards_done: None,
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
            mut hooks,
            shards_done,
        } = control;
        hooks.shards_done = shards_done;
        let mut rewinds = 0;
        loop {
            let may_rewind = rewinds < MAX_REWINDS;
            let sink = ConfiguredSink::new(&config);
            let outcome =
                run_once(&config, store, (&progress, &hooks), sink, &mut shutdown, may_rewind).await;
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
    if let Some(offsets) = flow.publishing.offsets.take() {
        offsets.finish(OFFSET_TABLE_FINISH).await;
    }
    result
}

/// The state of one run, in parts: where it reads ([`Reading`]), its checkpoints ([`Saving`]),
/// the snapshot's tablets ([`SnapshotTablets`]), what it publishes ([`Publishing`]), the write side ([`Loads`], which
/// the phases hand rows to) and the sink's rebuild. The steps live beside it: the opening
/// ([`opening`]), the two phases ([`snapshot_phase`], [`changelog_phase`]) and the checkpoint
/// ([`checkpointing`]).
struct Flow<'a, S, K> {
    config: &'a PipelineConfig,
    store: &'a mut S,
    hooks: Hooks,
    /// The sink, the open batch and the loads since the last checkpoint.
    loads: Loads<K>,
    /// The position to checkpoint, the start point, the changelog window being read.
    reading: Reading,
    /// The snapshot's tablets.
    tablets: SnapshotTablets,
    /// Progress and the offset-table row.
    publishing: Publishing<'a>,
    /// The last checkpoint, whether something changed since, when the next is due.
    saving: Saving,
    /// The source's columns as the sink follows them.
    schema: schema_follow::SchemaWatch,
    /// The previous run's labels, to abort again once its loads in flight must have landed.
    late_sweep: Option<LateSweep>,
    /// The sink rebuild of a re-initialised consumer ([`rebuilding`]), if it rebuilds.
    rebuild: Rebuild,
}

/// Where a run reads: what its next checkpoint records as the position, the start point (T0),
/// and the changelog window it is in.
struct Reading {
    /// Set by the phase before anything is checkpointed.
    position: Position,
    start_point: Option<Offset>,
    /// The changelog window being read, and its rows handed over so far (skipped ones included).
    window: Option<(ChangelogWindow, u64)>,
    /// The window starting at the position's offset is in the sink up to this many rows.
    in_window: Option<WindowProgress>,
}

impl Reading {
    /// Nothing read yet: the phase sets the position before anything is checkpointed.
    fn new() -> Self {
        Self {
            position: Position::Done,
            start_point: None,
            window: None,
            in_window: None,
        }
    }

    /// The window being read is all in the sink (or given up): the next checkpoint is between
    /// windows.
    fn window_closed(&mut self) {
        self.window = None;
        self.in_window = None;
    }

    /// Read on from `position` (its windows' progress forgotten).
    fn rewind_to(&mut self, position: Position) {
        self.position = position;
        self.window_closed();
    }

    /// The TSO of the seam: changelog rows at or before it are in the snapshot already.
    fn seam_tso(&self) -> Option<i64> {
        self.start_point.as_ref().map(|t0| t0.tso)
    }
}

/// The checkpoints of a run: the last one, whether something changed since, when the next is due.
struct Saving {
    /// The last checkpoint loaded or saved.
    last: Option<Checkpoint>,
    /// Something changed since the last checkpoint.
    dirty: bool,
    /// When the timer asks for the next checkpoint.
    next_at: Instant,
}

impl Saving {
    /// Something the next checkpoint records changed.
    fn changed(&mut self) {
        self.dirty = true;
    }
}

/// The snapshot's tablets: those this run reads, and every tablet of the table at the first
/// plan.
#[derive(Default)]
struct SnapshotTablets {
    /// The snapshot's tablets, sorted (empty outside the snapshot phase).
    sorted: Vec<i64>,
    /// Every tablet of the table at the snapshot's first plan (from the stored checkpoint, or
    /// this run's plan), kept in the checkpoints of the snapshot and of its end.
    planned: Option<dcs_crds::tablets::TabletSet>,
}

impl SnapshotTablets {
    /// A snapshot planned `table_tablets` and reads `sorted`: the first plan's tablets are
    /// recorded once, and kept whatever later plans say.
    fn record_plan(&mut self, table_tablets: &[i64], sorted: Vec<i64>) {
        if self.planned.is_none() {
            self.planned = Some(dcs_crds::tablets::tablet_set(table_tablets));
        }
        self.sorted = sorted;
    }
}

/// What a run shows the outside: its progress, and the offset-table row after changelog
/// checkpoints.
struct Publishing<'a> {
    tx: &'a watch::Sender<Progress>,
    progress: Progress,
    /// Writes the offset-table row after changelog checkpoints, when `offsets.table` is set.
    offsets: Option<OffsetPublisher>,
}

impl Publishing<'_> {
    /// Publish the progress with the write side's counters and retries.
    fn publish(&mut self, counters: &Counters, load_retries: u64) {
        self.progress.counters = counters.clone();
        self.progress.load_retries = load_retries;
        if let Some(offsets) = &self.offsets {
            self.progress.offset_table_write_failures = offsets.failures();
        }
        self.tx.send_replace(self.progress.clone());
    }
}

impl<'a, S: CheckpointStore, K: Sink> Flow<'a, S, K> {
    fn new(
        config: &'a PipelineConfig,
        store: &'a mut S,
        progress_tx: &'a watch::Sender<Progress>,
        hooks: Hooks,
        sink: K,
    ) -> Self {
        Self {
            config,
            store,
            hooks,
            loads: Loads::new(sink),
            reading: Reading::new(),
            tablets: SnapshotTablets::default(),
            publishing: Publishing {
                tx: progress_tx,
                progress: Progress::default(),
                offsets: None,
            },
            saving: Saving {
                last: None,
                dirty: false,
                next_at: Instant::now() + config.checkpoint_interval,
            },
            schema: schema_follow::SchemaWatch::default(),
            late_sweep: None,
            rebuild: Rebuild::default(),
        }
    }

    /// Open the run, then read: the snapshot (and the changelog after it) or the changelog.
    async fn run(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<Outcome> {
        let Some(opened) = self.open().await? else {
            return Ok(Outcome::Done);
        };
        let (http, columns) = (opened.http, opened.columns);
        let from = match opened.first {
            FirstPhase::Snapshot {
                tablets_done,
                done_ranges,
                then,
                read_at,
            } => {
                let done = (tablets_done, done_ranges);
                let end = self
                    .snapshot_phase(&http, shutdown, &columns, done, then, read_at.tso())
                    .await?;
                match end {
                    SnapshotEnd::Stopped => return Ok(Outcome::Stopped),
                    SnapshotEnd::Done => return Ok(Outcome::Done),
                    SnapshotEnd::Changelog(t0) => t0,
                }
            }
            FirstPhase::Changelog { from } => from,
        };
        self.changelog_phase(http, shutdown, columns, from).await
    }

    /// Hand one record batch to the sink ([`Loads::write`]), after following a change of the
    /// source's columns.
    async fn rows(&mut self, batch: &RecordBatch, changelog: bool) -> Result<()> {
        let projected = self.follow_schema(batch).await?;
        let batch = projected.as_ref().unwrap_or(batch);
        self.saving.changed();
        let synthetic_tso = self.reading.seam_tso().unwrap_or(0);
        let snapshot_op = if self.rebuild.marks_snapshot() {
            op::RESNAPSHOT
        } else {
            op::APPEND
        };
        // Changelog-mode sinks need op/TSO/LSN for snapshot rows too: inserts at T0.
        let snapshot_changes = (self.loads.sink.encoding().marks_snapshot_rows() && !changelog)
            .then_some((snapshot_op, synthetic_tso));
        self.loads.snapshot_origin =
            self.reading
                .seam_tso()
                .filter(|_| !changelog)
                .map(|tso| RowOrigin {
                    op: snapshot_op,
                    tso,
                    lsn: 0,
                });
        self.loads.write(batch, changelog, snapshot_changes).await?;
        self.publish();
        Ok(())
    }

    /// Load the open batch, if any.
    async fn flush(&mut self) -> Result<()> {
        if self.loads.flush().await? {
            self.saving.changed();
            self.publish();
        }
        Ok(())
    }

    fn publish(&mut self) {
        self.publishing
            .publish(&self.loads.counters, self.loads.retries);
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
