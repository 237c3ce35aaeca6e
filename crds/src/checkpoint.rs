//! The checkpoint format: what a runner has durably finished, in a documented, versioned JSON.
//!
//! The runner writes it (to a directory or to the checkpoint ConfigMap) and the operator reads it
//! to compute status, so both use these types. The format is a contract: fields are only added (with defaults), and a breaking change bumps
//! [`FORMAT_VERSION`]. An example, as stored:
//!
//! ```json
//! {
//!   "formatVersion": 1,
//!   "consumerId": "student-sync",
//!   "checkpointId": 42,
//!   "savedAt": "2026-11-29T14:00:00Z",
//!   "position": {"phase": "changelog",
//!                "offset": {"timestamp": "2026-11-29 13:59:50", "epochMs": 1795960790000, "tso": 470903...}},
//!   "startPoint": {"timestamp": "2026-11-29 13:00:00", "epochMs": 1795957200000, "tso": 470902...},
//!   "pendingTxns": [{"db": "sink_db", "label": "dcs-student-sync-42-0", "txnId": 1017}],
//!   "counters": {"rowsRead": 5000, "rowsWritten": 4990, "rowsDeleted": 10, "loads": 12, "bytes": 301234},
//!   "lastError": null,
//!   "labelScheme": 2,
//!   "stopped": {"at": "2026-11-29T14:05:00Z", "reason": "OffsetExpired", "exitCode": 3,
//!               "message": "…"},
//!   "rebuild": {"previousConsumerId": "student-sync-r1", "shadowTable": "sink_db.student__dcs_shadow",
//!               "swappedAt": "2026-11-29T14:20:00Z"}
//! }
//! ```

use serde::{Deserialize, Serialize};

/// The newest checkpoint format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The key of the checkpoint ConfigMap that holds the JSON.
pub const CHECKPOINT_KEY: &str = "checkpoint.json";

/// One durable checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// Format of this JSON ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The consumer the progress belongs to.
    pub consumer_id: String,
    /// Increases by one with every save; part of the 2PC labels.
    pub checkpoint_id: u64,
    /// When the runner saved it (RFC 3339, the runner's clock).
    pub saved_at: String,
    /// Where reading resumes.
    pub position: Position,
    /// The changelog start point T0 taken before the snapshot (`initial`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_point: Option<Offset>,
    /// Stream Load transactions pre-committed for this checkpoint, committed after the save.
    #[serde(default)]
    pub pending_txns: Vec<PendingTxn>,
    /// Running totals.
    #[serde(default)]
    pub counters: Counters,
    /// The last error the runner hit, kept after recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastError>,
    /// How the runner that saved this checkpoint stopped; absent while a runner works from it
    /// (a starting runner clears it with its claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// The changelog window starting at the position's offset is in the sink up to its first
    /// `rows` rows (a checkpoint taken inside a window, to bound what it holds open); absent at
    /// window boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window: Option<WindowProgress>,
    /// Where the rows of `pending_txns` were read, so that a load Doris aborted before its commit
    /// can be loaded again; absent without pending transactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads_source: Option<LoadsSource>,
    /// How the loads of this checkpoint and of the one after it are labelled
    /// ([`crate::label::LabelScheme`]); absent in checkpoints written before scheme 2: 1.
    #[serde(default = "label_scheme_v1")]
    pub label_scheme: u32,
    /// This consumer re-initialises an earlier one and rebuilds the sink (see [`Rebuild`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<Rebuild>,
    /// Every tablet of the table when the snapshot first planned (a shard's too, not only its
    /// own), kept while the snapshot is read and after it: a later plan that lacks one of them
    /// means the tablets moved under the snapshot (`crate::tablets`). Absent outside a snapshot
    /// and in checkpoints of older runners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_tablets: Option<crate::tablets::TabletSet>,
    /// The source columns the sink is in step with, and the last change of them (schema
    /// evolution, `spec.sink.doris.schemaChange`); absent when the columns read are fixed and in
    /// checkpoints of older runners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<SchemaRecord>,
}

fn label_scheme_v1() -> u32 {
    crate::label::LabelScheme::V1.number()
}

/// The process exit code of a runner whose changelog offset expired (`dcs-runner`'s code 3): a
/// pod that keeps exiting with it needs a re-initialisation, not a restart. The stop record's
/// reason is then [`crate::conditions::reasons::OFFSET_EXPIRED`].
pub const OFFSET_EXPIRED_EXIT_CODE: u8 = 3;

/// The process exit code of a runner whose snapshot's tablets changed under it (`dcs-runner`'s
/// code 5): the snapshot must be read again under a new consumer, whatever `onOffsetExpired`
/// says (nothing expired; what was read cannot be trusted). The stop record's reason is then
/// [`crate::conditions::reasons::SNAPSHOT_TABLETS_CHANGED`].
pub const TABLETS_CHANGED_EXIT_CODE: u8 = 5;

/// Doris's own words when a minDelta read starts before the changelog's TTL (`Changelog offset
/// has expired according to changelog.ttl_seconds`, `Row binlog offset has expired according to
/// binlog.ttl_seconds`): an error holding them is an expired offset.
pub const DORIS_OFFSET_EXPIRED: &str = "offset has expired according to";

/// The annotation on a runner's manifest that says its consumer re-initialises the named earlier
/// consumer: a runner that starts without a checkpoint then rebuilds the sink (an upsert sink
/// through a shadow table swapped in when the snapshot is complete, a changelog-mode sink keeps
/// its history and gets the snapshot rows marked `+R`). The operator sets it after every
/// re-initialisation; the runner records the rebuild in its checkpoint, so a restart goes on.
pub const REINITIALIZED_FROM_ANNOTATION: &str = "dcs.dev/reinitialized-from";

/// How a re-initialised consumer rebuilds its sink, as its checkpoints record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rebuild {
    /// The consumer this one re-initialises.
    pub previous_consumer_id: String,
    /// Upsert sinks: the table the snapshot is loaded into (`db.table`), swapped in for the sink
    /// table once complete. Absent for changelog-mode sinks, which keep their history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow_table: Option<String>,
    /// When the shadow table replaced the sink table (RFC 3339); absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapped_at: Option<String>,
}

/// Where reading resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum Position {
    /// Reading the snapshot; the listed tablets are fully written.
    #[serde(rename_all = "camelCase")]
    Snapshot {
        /// Tablets whose rows are all in the sink (checkpoints written by older runners; newer ones
        /// write [`Position::Snapshot::tablets_done_ranges`] instead).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tablets_done: Vec<i64>,
        /// The same, compact: ranges `[first, last]` of the table's tablet ids, each covering
        /// consecutive tablets of the snapshot's (sorted) tablet list that are all done. Splits are
        /// consecutive tablets of that list, so a snapshot of any size needs a handful of ranges
        /// (see [`tablet_ranges`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tablets_done_ranges: Vec<[i64; 2]>,
        /// How many tablets are done (with [`Position::Snapshot::tablets_done_ranges`], which
        /// span tablet ids, not tablets).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tablets_done_count: Option<u64>,
        /// Tablets in the snapshot.
        #[serde(default)]
        tablets_total: u64,
        /// Rows in the snapshot, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rows_total: Option<u64>,
    },
    /// Reading the changelog; the next window starts at `offset`.
    Changelog {
        /// Start of the next `@incr` window.
        offset: Offset,
    },
    /// A bounded (`snapshot` mode) sync that has finished.
    Done,
}

/// The ranges of `done` over `total` (the snapshot's tablets, sorted): each `[first, last]` holds
/// consecutive tablets of `total` that are all in `done` (pure).
pub fn tablet_ranges(done: &[i64], total: &[i64]) -> Vec<[i64; 2]> {
    let done: std::collections::BTreeSet<i64> = done.iter().copied().collect();
    let mut ranges: Vec<[i64; 2]> = Vec::new();
    let mut open: Option<[i64; 2]> = None;
    for t in total {
        if done.contains(t) {
            open = Some(open.map_or([*t, *t], |[first, _]| [first, *t]));
        } else if let Some(r) = open.take() {
            ranges.push(r);
        }
    }
    ranges.extend(open);
    // Tablets done but not in `total` (it changed): kept one by one.
    let total: std::collections::HashSet<i64> = total.iter().copied().collect();
    let stray: Vec<[i64; 2]> = done
        .iter()
        .filter(|t| !total.contains(t))
        .map(|t| [*t, *t])
        .collect();
    ranges.extend(stray);
    ranges
}

#[cfg(test)]
mod range_tests {
    use super::*;

    #[test]
    fn done_tablets_become_ranges_of_the_sorted_list_and_back() {
        let total = [10, 11, 12, 20, 21, 30, 31, 32];
        let ranges = tablet_ranges(&[12, 11, 10, 30, 31], &total);
        assert_eq!(ranges, vec![[10, 12], [30, 31]]);
        let back: Vec<i64> = total
            .iter()
            .copied()
            .filter(|t| in_ranges(&ranges, *t))
            .collect();
        assert_eq!(back, vec![10, 11, 12, 30, 31]);
        // A gap in the ids inside a run of the list is covered (no tablet of the table there).
        assert_eq!(tablet_ranges(&[12, 20], &total), vec![[12, 20]]);
        // A tablet no longer in the list is kept on its own.
        assert_eq!(tablet_ranges(&[99], &total), vec![[99, 99]]);
        assert!(tablet_ranges(&[], &total).is_empty());
    }
}

/// Whether tablet `t` is in one of `ranges`.
pub fn in_ranges(ranges: &[[i64; 2]], t: i64) -> bool {
    ranges.iter().any(|[first, last]| *first <= t && t <= *last)
}

/// A point in the changelog: the `@incr` timestamp and the same instant as epoch ms and a TSO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offset {
    /// `yyyy-MM-dd HH:mm:ss`, as written into `@incr('startTimestamp'=…)`, in UTC.
    pub timestamp: String,
    /// The same instant in milliseconds since the Unix epoch.
    pub epoch_ms: i64,
    /// The same instant as a Doris TSO (`epoch_ms << 18`).
    pub tso: i64,
}

/// A pre-committed Stream Load transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingTxn {
    /// Sink database (2PC is addressed per database).
    pub db: String,
    /// Deterministic label (`crate::label`).
    pub label: String,
    /// Transaction id Doris returned.
    pub txn_id: i64,
    /// Which of the rows read since [`LoadsSource::from`] the load holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<RowSpan>,
    /// Whether the load holds rows the sink refused, written into the dead-letter table
    /// (`spec.sink.doris.deadLetter`) instead of the sink table.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_letter: bool,
}

/// Consecutive rows of what a checkpoint's loads were made of: the `first`th to the
/// `first + count - 1`th row handed to the sink since the checkpoint before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RowSpan {
    /// Index of the first row.
    pub first: u64,
    /// Rows.
    pub count: u64,
}

/// A changelog window partly in the sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowProgress {
    /// The window's end (its start is the position's offset).
    pub end: Offset,
    /// Its first rows (in TSO, LSN, OP order) that are in the sink.
    pub rows: u64,
}

/// What a checkpoint's loads were read from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadsSource {
    /// The position before them (the previous checkpoint's).
    pub from: Position,
    /// The changelog windows their rows came from, in order: of each, the rows from `skip` on
    /// (changelog phase; empty in the snapshot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowRead>,
}

/// One changelog window as read into a checkpoint's loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowRead {
    /// Inclusive start.
    pub start: Offset,
    /// Exclusive end.
    pub end: Offset,
    /// Rows of the window read into an earlier checkpoint.
    #[serde(default)]
    pub skip: u64,
}

/// Running totals since the consumer started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counters {
    /// Rows read from the source (snapshot and changelog).
    pub rows_read: u64,
    /// Rows written (upserted) to the sink.
    pub rows_written: u64,
    /// Rows deleted in the sink.
    pub rows_deleted: u64,
    /// Stream Loads that succeeded.
    pub loads: u64,
    /// Bytes of load bodies sent.
    pub bytes: u64,
    /// Rows the sink refused, written into the dead-letter table instead
    /// (`spec.sink.doris.deadLetter`); 0 in checkpoints written before it existed.
    pub rows_rejected: u64,
}

/// The source columns a sink is in step with, as a checkpoint records them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaRecord {
    /// The source's columns when the rows of this checkpoint were written, in order.
    pub columns: Vec<String>,
    /// Source columns not written to the sink (`schemaChange: ignore`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// The last change of the source's columns the runner met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change: Option<SchemaChangeNote>,
}

/// What a sync did about a change of the source's columns ([`SchemaChangeNote::action`]).
pub mod schema_action {
    /// The sink table changed with it (or had the new columns already).
    pub const FOLLOWED: &str = "Followed";
    /// The sink kept its columns (`schemaChange: ignore`).
    pub const IGNORED: &str = "Ignored";
    /// The sync stopped.
    pub const REFUSED: &str = "Refused";
}

/// A change of the source table's columns and what the sync did about it (checkpoint and status).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaChangeNote {
    /// When the runner met it (RFC 3339, the runner's clock).
    pub at: String,
    /// Columns added to the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    /// Columns dropped from the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// `Followed` (the sink table changed with it), `Ignored` (the sink kept its columns) or
    /// `Refused` (the sync stopped).
    pub action: String,
    /// What was done or what to do, in words.
    pub message: String,
}

/// The last error, for status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    /// When (RFC 3339).
    pub at: String,
    /// A CamelCase reason, e.g. `StreamLoadFailed`, `OffsetExpired`.
    pub reason: String,
    /// The message, secrets never included.
    pub message: String,
}

/// Why and how a runner stopped, so the operator acts on the reason, not on a restart count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stopped {
    /// When (RFC 3339, the runner's clock).
    pub at: String,
    /// A CamelCase reason: `OffsetExpired`, `Stopped` (a signal), `Done`, or the error's reason.
    pub reason: String,
    /// The process exit code that goes with it (`dcs-runner`'s documented codes).
    pub exit_code: i32,
    /// What happened, secrets never included.
    pub message: String,
}

/// Why stored checkpoint JSON could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointFormatError {
    /// Not JSON, or not a checkpoint.
    #[error("unreadable checkpoint: {0}")]
    Unreadable(String),
    /// Written by a newer build.
    #[error("checkpoint format version {found}, newer than {FORMAT_VERSION}")]
    NewerVersion {
        /// The version found.
        found: u32,
    },
}

impl Checkpoint {
    /// Parse stored JSON, refusing formats newer than this build. Unknown fields are ignored, so a
    /// newer runner's additions do not stop an older reader.
    pub fn from_json(json: &str) -> Result<Self, CheckpointFormatError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct VersionOnly {
            format_version: u32,
        }
        let unreadable = |e: serde_json::Error| CheckpointFormatError::Unreadable(e.to_string());
        let v: VersionOnly = serde_json::from_str(json).map_err(unreadable)?;
        if v.format_version > FORMAT_VERSION {
            return Err(CheckpointFormatError::NewerVersion {
                found: v.format_version,
            });
        }
        serde_json::from_str(json).map_err(unreadable)
    }

    /// The stored JSON (pretty, so a person can read the ConfigMap).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("checkpoint serialises")
    }

    /// The label scheme of this checkpoint's loads.
    pub fn labels(&self) -> crate::label::LabelScheme {
        crate::label::LabelScheme::from_number(self.label_scheme)
    }

    /// How many tablets of the snapshot are done (for progress).
    pub fn tablets_done_count(&self) -> u64 {
        match &self.position {
            Position::Snapshot {
                tablets_done,
                tablets_done_count,
                ..
            } => tablets_done_count.unwrap_or(tablets_done.len() as u64),
            _ => 0,
        }
    }

    /// The oldest change the sync still needs: the offset while streaming, T0 while snapshotting.
    pub fn oldest_needed_ms(&self) -> Option<i64> {
        match &self.position {
            Position::Changelog { offset } => Some(offset.epoch_ms),
            Position::Snapshot { .. } => self.start_point.as_ref().map(|o| o.epoch_ms),
            Position::Done => None,
        }
    }
}
