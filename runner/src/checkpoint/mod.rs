//! Checkpoints: what the runner has durably finished. The format (`dcs_crds::checkpoint`) is shared
//! with the operator, which reads the same JSON from the checkpoint ConfigMap to compute status; it
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
mod read_only;

pub use configmap::ConfigMapStore;
pub use file::FileStore;
pub use read_only::ReadOnlyDir;

pub use dcs_crds::checkpoint::{
    CHECKPOINT_KEY, Checkpoint, CheckpointFormatError, Counters, FORMAT_VERSION, LastError,
    LoadsSource, Offset, PendingTxn, Position, RowSpan, Stopped, WindowProgress, WindowRead,
    in_ranges, tablet_ranges,
};

use crate::Result;

/// Parse stored checkpoint JSON from `location` (a file or ConfigMap, named in errors).
pub fn parse(location: &str, json: &str) -> Result<Checkpoint> {
    Checkpoint::from_json(json).map_err(|e| match e {
        CheckpointFormatError::Unreadable(reason) => crate::Error::CheckpointCorrupt {
            location: location.to_string(),
            reason,
        },
        CheckpointFormatError::NewerVersion { found } => crate::Error::CheckpointVersion {
            location: location.to_string(),
            found,
            supported: FORMAT_VERSION,
        },
    })
}

/// Where checkpoints are kept. A save is fenced: it succeeds only if the stored checkpoint is still
/// the one this store last loaded or saved, so two runners can never both advance one sync.
#[allow(async_fn_in_trait)]
pub trait CheckpointStore {
    /// The stored checkpoint, if any. Remembers it as the precondition for the next save.
    async fn load(&mut self) -> Result<Option<Checkpoint>>;
    /// Replace the stored checkpoint atomically; [`crate::Error::Fenced`] if someone else wrote.
    async fn save(&mut self, checkpoint: &Checkpoint) -> Result<()>;
    /// Take the store over after [`CheckpointStore::load`], before touching the sink: a write that
    /// fences any other runner still working from the loaded checkpoint, so only this one can
    /// save (and so commit) from here on; [`crate::Error::Fenced`] if someone wrote since the load.
    /// A store that keeps other runners out by itself (the file store's lock) does nothing.
    async fn claim(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use dcs_crds::testing::CheckpointBuilder;

    use super::*;

    pub(crate) fn sample(id: u64) -> Checkpoint {
        CheckpointBuilder::new()
            .consumer("student-sync")
            .id(id)
            .pending_txns(vec![PendingTxn {
                db: "sink".into(),
                label: format!("dcs-student-sync-{id}-0"),
                txn_id: 7,
                rows: None,
                dead_letter: false,
            }])
            .counters(Counters {
                rows_read: 10,
                rows_written: 9,
                rows_deleted: 1,
                loads: 2,
                bytes: 100,
                rows_rejected: 0,
            })
            .label_scheme(1)
            .build()
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
        assert_eq!(crate::checkpoint::parse("test", &json).unwrap(), cp);
    }

    #[test]
    fn snapshot_position_serialises_with_its_phase() {
        let pos = Position::Snapshot {
            tablets_done: vec![1, 2],
            tablets_done_ranges: vec![],
            tablets_done_count: None,
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
        let err = crate::checkpoint::parse("cm/x", &v.to_string()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "checkpoint cm/x has format version 2, this runner reads up to 1; run a newer dcs-runner"
        );
        let err = crate::checkpoint::parse("cm/x", "{not json").unwrap_err();
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
