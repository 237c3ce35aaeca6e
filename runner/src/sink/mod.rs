//! The sink side: where the pipeline's rows go (docs/ARCHITECTURE.md §3.6).
//!
//! A sink is one [`Sink`]: the pipeline encodes rows as [`Sink::encoding`] says into the
//! [`batcher`], hands each full batch to [`Sink::load`], and after saving the checkpoint that
//! records the loads it [`Sink::commit`]s them (with two-phase commit a load is pre-committed and
//! invisible until then). [`Sink::abort`] drops the loads no checkpoint records, and
//! [`Sink::recover`] settles what an earlier run left when a run starts. Around the loads, the
//! trait says what else the pipeline asks of a sink: its table prepared before the first load
//! ([`Sink::prepare`]), its columns following the source's ([`Sink::follow_columns`]), the
//! rebuild of a re-initialised consumer ([`Sink::plan_rebuild`], [`Sink::begin_rebuild`],
//! [`Sink::swap_rebuilt`]), its limits, encoding and mode. The pipeline names no implementation:
//! [`configured::ConfiguredSink`] builds the one the settings ask for. Two implementations:
//!
//! - [`doris`]: Stream Load into a Doris table, with its request building (labels, headers),
//!   retries, the table's DDL and schema evolution ([`doris::schema`]) and its rebuild after a
//!   re-initialisation ([`doris::rebuild`]);
//! - [`stdout`]: one JSON record per change on standard output (a debugging sink); it has no table,
//!   so preparing, following columns and rebuilding do nothing.
//!
//! Shared by both: the [`batcher`], the body encoders ([`encode`]), which columns changed
//! ([`schema_change`], pure) and what a rebuild does ([`rebuild`], pure). A sink reads its settings
//! from `crate::settings` and knows nothing of the pipeline.

pub mod batcher;
pub mod configured;
mod digits;
pub mod doris;
pub mod encode;
pub mod kafka;
pub use dcs_crds::label;
pub mod rebuild;
pub mod schema_change;
pub mod stdout;

use std::future::Future;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use bytes::Bytes;
use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

use crate::Result;
use crate::checkpoint::{Checkpoint, PendingTxn};
use crate::settings::{BatchLimits, BodyFormat, EventPolicy, SourceSettings};
use encode::{ChangeColumns, EncodeError, Encoded};
use label::LabelScheme;
use rebuild::{Planned, Rebuild};
use schema_change::SchemaChange;

/// Where a row of a load came from: the op, TSO and LSN of its change (a snapshot row: the op it
/// is written as, the TSO it was read at, LSN 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowOrigin {
    /// The op code (`encode::op`).
    pub op: i8,
    /// The TSO.
    pub tso: i64,
    /// The LSN.
    pub lsn: i64,
}

/// A batch to load: the body and, line by line, where its rows came from (`None` for a snapshot
/// row read without a TSO), for the rows a sink may refuse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadBatch {
    /// The body.
    pub body: Bytes,
    /// One per line of the body, in order (empty when not known).
    pub origins: Vec<Option<RowOrigin>>,
}

impl From<Bytes> for LoadBatch {
    /// A body whose rows' origins are not known.
    fn from(body: Bytes) -> Self {
        Self {
            body,
            origins: Vec::new(),
        }
    }
}

/// What one successful load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadResult {
    /// The label used (empty for a sink without labels).
    pub label: String,
    /// The pre-committed transaction to commit after the checkpoint (2PC only).
    pub pending: Option<PendingTxn>,
    /// Attempts made.
    pub attempts: u32,
    /// The rows of the batch the sink refused, written into its dead-letter table instead.
    pub dead_letter: Option<DeadLettered>,
    /// Labels the load used: 2 when the refused rows went into the dead-letter table under the
    /// next one, else 1.
    pub labels: u32,
}

/// Rows of a batch the sink refused and wrote into its dead-letter table, in the same checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLettered {
    /// The pre-committed dead-letter load (2PC only), committed with the batch's.
    pub pending: Option<PendingTxn>,
    /// Rows refused.
    pub rows: u64,
    /// Of which deletes.
    pub deletes: u64,
}

/// A pre-committed load Doris no longer has, with what it said.
pub type LostLoad = (PendingTxn, String);

/// How a sink wants rows written into a load body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encoding {
    /// Stream Load rows: the body format, and which events become which rows.
    Rows {
        /// JSON lines or CSV.
        format: BodyFormat,
        /// Upsert or changelog mode, deletes, update-befores.
        policy: EventPolicy,
    },
    /// One JSON record per change, every event included ([`stdout`]).
    Records,
}

impl Encoding {
    /// Append `data` (with its change columns, if any) to `out`.
    ///
    /// # Errors
    /// A value the format cannot write.
    pub fn encode(
        &self,
        data: &RecordBatch,
        changes: Option<ChangeColumns<'_>>,
        out: &mut Vec<u8>,
    ) -> std::result::Result<Encoded, EncodeError> {
        match self {
            Self::Rows { format, policy } => format.encode(data, changes, policy, out),
            Self::Records => stdout::encode_records(data, changes, out).map(|lines| Encoded {
                upserts: lines,
                ..Encoded::default()
            }),
        }
    }

    /// Where the rows [`Encoding::encode`] writes for `rows` rows with `changes` came from, one
    /// per written row (the events it skips have none); `snapshot` for rows without change
    /// columns. Pure.
    pub fn written_origins(
        &self,
        changes: Option<ChangeColumns<'_>>,
        rows: usize,
        snapshot: Option<RowOrigin>,
    ) -> Vec<Option<RowOrigin>> {
        let op = |r: usize| changes.map_or(encode::op::APPEND, |c| c.op.value(r));
        (0..rows)
            .filter(|&r| match self {
                Self::Rows { policy, .. } if policy.mode == SinkMode::Upsert => {
                    !matches!(policy.upsert_action(op(r)), Ok(encode::UpsertAction::Skip))
                }
                _ => true,
            })
            .map(|r| match changes {
                Some(c) => Some(RowOrigin {
                    op: c.op.value(r),
                    tso: c.tso.value(r),
                    lsn: c.lsn.value(r),
                }),
                None => snapshot,
            })
            .collect()
    }

    /// Whether snapshot rows are written as changes too (`+I` with the start point's TSO): a
    /// changelog-mode table, whose rows all carry an op, a TSO and an LSN.
    pub fn marks_snapshot_rows(&self) -> bool {
        matches!(self, Self::Rows { policy, .. } if policy.mode == SinkMode::Changelog)
    }
}

/// Where the pipeline's rows go. The futures are `Send`, so a run can be spawned.
pub trait Sink {
    /// Whether loads are pre-committed and made visible only by [`Sink::commit`] after the
    /// checkpoint recording them is saved (two-phase commit, exactly once).
    fn two_phase(&self) -> bool;

    /// Whether rows sent twice land once: an upsert sink keyed like the source. A snapshot split
    /// read again is then simply sent again from its start.
    fn idempotent(&self) -> bool;

    /// How rows are encoded for this sink.
    fn encoding(&self) -> Encoding;

    /// When a batch is full.
    fn limits(&self) -> BatchLimits;

    /// How rows land: upserts keyed like the source, or appended as a changelog. A sink without
    /// modes takes every row as an upsert.
    fn mode(&self) -> SinkMode {
        SinkMode::Upsert
    }

    /// How long a load request may go unanswered: a load an earlier run had in flight has landed
    /// or failed this long after that run stopped (zero for a sink without loads in flight).
    fn request_timeout(&self) -> Duration;

    /// How the sink meets a change of the source's columns ([`schema_change::Follow`]): unless
    /// `Fixed`, the pipeline reads every column and decides each change
    /// ([`schema_change::decide`]), handing the ones to follow to [`Sink::follow_columns`].
    /// A sink without a table follows nothing.
    fn schema_follow(&self) -> schema_change::Follow {
        schema_change::Follow::Fixed
    }

    /// The sink table's data columns (empty when it is missing, and for a sink without a table).
    ///
    /// # Errors
    /// A sink that cannot be reached or read.
    fn table_columns(&self) -> impl Future<Output = Result<Vec<String>>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Whether rows go into a table that [`Sink::prepare`] makes ready for the source's columns
    /// (which are read for it) before the first load. The methods of a sink's table
    /// (`prepare`, `follow_columns`, the rebuild) do nothing by default: a sink without a table
    /// implements none of them.
    fn has_table(&self) -> bool {
        false
    }

    /// Before any load or recovery: make the sink ready for rows of the source's `columns`
    /// (create its table when missing, check it otherwise); a sink without tables has nothing to
    /// do.
    ///
    /// # Errors
    /// A table that cannot take the rows (naming the problems), or a sink that refuses the DDL
    /// or cannot be reached.
    fn prepare(
        &self,
        source: &SourceSettings,
        columns: &[String],
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (source, columns);
        async { Ok(()) }
    }

    /// Schema evolution: the source's columns changed by `change` (`current` the new list,
    /// `arrow_types` their Arrow types); change the sink's to match before a row that needs
    /// them is loaded. Returns what was run, for the log.
    ///
    /// # Errors
    /// A source or sink that cannot be reached, a statement refused, a type the sink's column
    /// cannot hold.
    fn follow_columns(
        &self,
        source: &SourceSettings,
        change: &SchemaChange,
        current: &[String],
        arrow_types: &[(String, DataType)],
    ) -> impl Future<Output = Result<Vec<String>>> + Send {
        let _ = (source, change, current, arrow_types);
        async { Ok(Vec::new()) }
    }

    /// Decide the rebuild of a re-initialised consumer ([`rebuild::plan`], pure): `stored` is the
    /// checkpoint the run starts from, `directive` the manifest's annotation, `snapshot_first`
    /// whether the run starts with a snapshot.
    ///
    /// # Errors
    /// A checkpoint whose rebuild cannot be read.
    /// A sink without a table has nothing to rebuild: a directive is ignored, with the reason.
    fn plan_rebuild(
        &self,
        stored: Option<&Checkpoint>,
        directive: Option<&str>,
        snapshot_first: bool,
    ) -> std::result::Result<Planned, String> {
        rebuild::plan(stored, directive, None, snapshot_first)
    }

    /// Before the first load of a run whose `rebuild` uses a shadow: create it (or check that it
    /// is still there and takes the source's `columns`), then load into it until
    /// [`Sink::swap_rebuilt`].
    ///
    /// # Errors
    /// The shadow cannot be made, or it is gone while its snapshot is not complete.
    fn begin_rebuild(
        &mut self,
        rebuild: &Rebuild,
        source: &SourceSettings,
        columns: &[String],
    ) -> impl Future<Output = Result<()>> + Send {
        let _ = (rebuild, source, columns);
        async { Ok(()) }
    }

    /// Once the rebuilt snapshot is committed: swap `shadow` in for the sink's table, and load
    /// into the sink's table again.
    ///
    /// # Errors
    /// The sink refused the swap and the shadow is still there.
    fn swap_rebuilt(&mut self, shadow: &TableRef) -> impl Future<Output = Result<()>> + Send {
        let _ = shadow;
        async { Ok(()) }
    }

    /// Load `batch` as load `seq` of checkpoint `checkpoint_id`; under two-phase commit the load
    /// is pre-committed and its transaction is in the result. A sink with a dead-letter table
    /// writes the rows it refuses there (under the next label), also pre-committed.
    ///
    /// # Errors
    /// The sink refused the rows, or it could not be reached within its retries.
    fn load(
        &self,
        batch: LoadBatch,
        checkpoint_id: u64,
        seq: u32,
    ) -> impl Future<Output = Result<LoadResult>> + Send;

    /// Commit pre-committed loads (one already committed counts as done); returns the ones the
    /// sink no longer has (to be made again), after committing all the others.
    ///
    /// # Errors
    /// A commit refused otherwise, or retries ran out.
    fn commit(&self, txns: &[PendingTxn]) -> impl Future<Output = Result<Vec<LostLoad>>> + Send;

    /// Abort every pre-committed load of checkpoint `checkpoint_id` labelled under `scheme`
    /// (none without two-phase commit); returns how many it found.
    ///
    /// # Errors
    /// An abort failed for good, or found a load of that id committed.
    fn abort(
        &self,
        scheme: LabelScheme,
        checkpoint_id: u64,
    ) -> impl Future<Output = Result<u32>> + Send;

    /// Best effort: abort the pre-committed transactions `txns` by id (never by label: another
    /// runner may be loading under the same labels). Returns how many were aborted or gone.
    fn abort_txns(&self, txns: &[PendingTxn]) -> impl Future<Output = usize> + Send;

    /// At a run's start: commit what the stored checkpoint `loaded` pre-committed and abort the
    /// loads of the checkpoint id after it, which nothing records. Returns the loads of `loaded`
    /// the sink no longer has (to be made again).
    ///
    /// # Errors
    /// As [`Sink::commit`] and [`Sink::abort`].
    fn recover(
        &self,
        loaded: Option<&Checkpoint>,
    ) -> impl Future<Output = Result<Vec<LostLoad>>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int8Array, Int64Array};

    #[test]
    fn the_origins_of_written_rows_skip_what_the_encoding_skips() {
        let op = Int8Array::from(vec![
            encode::op::APPEND,
            encode::op::UPDATE_BEFORE,
            encode::op::UPDATE_AFTER,
        ]);
        let tso = Int64Array::from(vec![10, 20, 20]);
        let lsn = Int64Array::from(vec![0, 1, 2]);
        let changes = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let origin = |op, tso, lsn| Some(RowOrigin { op, tso, lsn });
        let rows = |mode| Encoding::Rows {
            format: BodyFormat::JsonLines,
            policy: EventPolicy {
                mode,
                enable_delete: true,
                ignore_update_before: true,
            },
        };
        // Upsert mode drops the update-before, as the encoder does.
        assert_eq!(
            rows(SinkMode::Upsert).written_origins(Some(changes), 3, None),
            [origin(0, 10, 0), origin(3, 20, 2)]
        );
        assert_eq!(
            rows(SinkMode::Changelog).written_origins(Some(changes), 3, None),
            [origin(0, 10, 0), origin(2, 20, 1), origin(3, 20, 2)]
        );
        // Snapshot rows take the snapshot's origin, when there is one.
        let snapshot = origin(0, 5, 0);
        assert_eq!(
            rows(SinkMode::Upsert).written_origins(None, 2, snapshot),
            [snapshot, snapshot]
        );
        assert_eq!(Encoding::Records.written_origins(None, 1, None), [None]);
    }
}
