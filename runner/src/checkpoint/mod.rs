//! Checkpoints: what the runner has durably finished, in a documented, versioned JSON.
//!
//! The operator reads the same JSON from the checkpoint ConfigMap to compute status, so the format
//! is a contract: fields are only added (with defaults), and a breaking change bumps
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
//!   "lastError": null
//! }
//! ```

pub mod configmap;
mod file;
pub mod offset_table;

pub use configmap::ConfigMapStore;
pub use file::FileStore;

use serde::{Deserialize, Serialize};

use crate::Result;

/// The newest checkpoint format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

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
}

/// Where reading resumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum Position {
    /// Reading the snapshot; the listed tablets are fully written.
    #[serde(rename_all = "camelCase")]
    Snapshot {
        /// Tablets whose rows are all in the sink.
        tablets_done: Vec<i64>,
        /// Tablets in the snapshot.
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
    /// Deterministic label `<labelPrefix>-<consumerId>-<checkpointId>-<seq>`.
    pub label: String,
    /// Transaction id Doris returned.
    pub txn_id: i64,
}

/// Running totals since the consumer started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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

impl Checkpoint {
    /// Parse stored JSON, refusing formats newer than this build.
    pub fn from_json(location: &str, json: &str) -> Result<Self> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct VersionOnly {
            format_version: u32,
        }
        let corrupt = |e: serde_json::Error| crate::Error::CheckpointCorrupt {
            location: location.to_string(),
            reason: e.to_string(),
        };
        let v: VersionOnly = serde_json::from_str(json).map_err(corrupt)?;
        if v.format_version > FORMAT_VERSION {
            return Err(crate::Error::CheckpointVersion {
                location: location.to_string(),
                found: v.format_version,
                supported: FORMAT_VERSION,
            });
        }
        serde_json::from_str(json).map_err(corrupt)
    }

    /// The stored JSON (pretty, so a person can read the ConfigMap).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("checkpoint serialises")
    }
}

/// Where checkpoints are kept. A save is fenced: it succeeds only if the stored checkpoint is still
/// the one this store last loaded or saved, so two runners can never both advance one sync.
#[allow(async_fn_in_trait)]
pub trait CheckpointStore {
    /// The stored checkpoint, if any. Remembers it as the precondition for the next save.
    async fn load(&mut self) -> Result<Option<Checkpoint>>;
    /// Replace the stored checkpoint atomically; [`crate::Error::Fenced`] if someone else wrote.
    async fn save(&mut self, checkpoint: &Checkpoint) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(id: u64) -> Checkpoint {
        Checkpoint {
            format_version: FORMAT_VERSION,
            consumer_id: "student-sync".into(),
            checkpoint_id: id,
            saved_at: "2026-11-29T14:00:00Z".into(),
            position: Position::Changelog {
                offset: Offset {
                    timestamp: "2026-11-29 13:59:50".into(),
                    epoch_ms: 1_795_960_790_000,
                    tso: 1_795_960_790_000 << 18,
                },
            },
            start_point: None,
            pending_txns: vec![PendingTxn {
                db: "sink".into(),
                label: format!("dcs-student-sync-{id}-0"),
                txn_id: 7,
            }],
            counters: Counters {
                rows_read: 10,
                rows_written: 9,
                rows_deleted: 1,
                loads: 2,
                bytes: 100,
            },
            last_error: None,
        }
    }

    #[test]
    fn round_trips_and_uses_the_documented_field_names() {
        let cp = sample(3);
        let json = cp.to_json();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["formatVersion"], 1);
        assert_eq!(v["position"]["phase"], "changelog");
        assert_eq!(v["position"]["offset"]["epochMs"], 1_795_960_790_000_i64);
        assert_eq!(v["pendingTxns"][0]["txnId"], 7);
        assert_eq!(v["counters"]["rowsDeleted"], 1);
        assert_eq!(Checkpoint::from_json("test", &json).unwrap(), cp);
    }

    #[test]
    fn snapshot_position_serialises_with_its_phase() {
        let pos = Position::Snapshot {
            tablets_done: vec![1, 2],
            tablets_total: 3,
            rows_total: Some(9),
        };
        let v = serde_json::to_value(&pos).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"phase": "snapshot", "tabletsDone": [1, 2], "tabletsTotal": 3, "rowsTotal": 9})
        );
    }

    #[test]
    fn newer_formats_and_garbage_are_refused_with_a_fix() {
        let mut v = serde_json::to_value(sample(1)).unwrap();
        v["formatVersion"] = 2.into();
        let err = Checkpoint::from_json("cm/x", &v.to_string()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "checkpoint cm/x has format version 2, this runner reads up to 1; run a newer dcs-runner"
        );
        let err = Checkpoint::from_json("cm/x", "{not json").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("checkpoint cm/x is unreadable: "),
            "{err}"
        );
        assert!(
            err.to_string()
                .ends_with("fix or delete it to start from the startup mode"),
            "{err}"
        );
    }
}
