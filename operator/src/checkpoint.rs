//! The runner's checkpoint as the operator reads it: the documented JSON, format version 1.
//!
//! The operator does not link the runner; it reads the contract (`runner/src/checkpoint/mod.rs`)
//! tolerantly: unknown fields are ignored, newer formats are refused with a message.

use serde::Deserialize;

/// The ConfigMap key the runner writes its checkpoint under.
pub const CHECKPOINT_KEY: &str = "checkpoint.json";

/// The newest checkpoint format the operator reads.
pub const FORMAT_VERSION: u32 = 1;

/// One checkpoint, the fields status needs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// Format of the JSON.
    pub format_version: u32,
    /// The consumer the progress belongs to.
    pub consumer_id: String,
    /// Increases by one with every save.
    pub checkpoint_id: u64,
    /// When the runner saved it (RFC 3339).
    pub saved_at: String,
    /// Where reading resumes.
    pub position: Position,
    /// T0, the changelog start taken before the snapshot.
    #[serde(default)]
    pub start_point: Option<Offset>,
    /// Running totals.
    #[serde(default)]
    pub counters: Counters,
    /// The last error the runner hit.
    #[serde(default)]
    pub last_error: Option<LastError>,
}

/// Where reading resumes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum Position {
    /// Reading the snapshot.
    #[serde(rename_all = "camelCase")]
    Snapshot {
        /// Tablets fully written.
        #[serde(default)]
        tablets_done: Vec<i64>,
        /// Tablets in the snapshot.
        #[serde(default)]
        tablets_total: u64,
        /// Rows in the snapshot, when known.
        #[serde(default)]
        rows_total: Option<u64>,
    },
    /// Reading the changelog from `offset`.
    Changelog {
        /// Start of the next window.
        offset: Offset,
    },
    /// A snapshot-mode sync that finished.
    Done,
}

/// A point in the changelog.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offset {
    /// `yyyy-MM-dd HH:mm:ss` (UTC).
    pub timestamp: String,
    /// Milliseconds since the Unix epoch.
    pub epoch_ms: i64,
    /// The same instant as a TSO.
    pub tso: i64,
}

/// Running totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counters {
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows written to the sink.
    pub rows_written: u64,
    /// Rows deleted in the sink.
    pub rows_deleted: u64,
    /// Stream Loads that succeeded.
    pub loads: u64,
}

/// The runner's last error.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LastError {
    /// When (RFC 3339).
    pub at: String,
    /// A CamelCase reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

impl Checkpoint {
    /// Parses the stored JSON; `Ok(None)` for an empty ConfigMap value.
    ///
    /// # Errors
    /// A message for unreadable JSON or a format newer than [`FORMAT_VERSION`].
    pub fn parse(json: &str) -> Result<Option<Self>, String> {
        if json.trim().is_empty() {
            return Ok(None);
        }
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("the checkpoint is unreadable: {e}"))?;
        let version = value
            .get("formatVersion")
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if version > u64::from(FORMAT_VERSION) {
            return Err(format!(
                "the checkpoint has format version {version}, this operator reads up to {FORMAT_VERSION}; upgrade dcs-operator"
            ));
        }
        serde_json::from_value(value)
            .map(Some)
            .map_err(|e| format!("the checkpoint is unreadable: {e}"))
    }

    /// The oldest change the sync still needs: the offset while streaming, T0 while snapshotting.
    pub fn oldest_needed_ms(&self) -> Option<i64> {
        match &self.position {
            Position::Changelog { offset } => Some(offset.epoch_ms),
            Position::Snapshot { .. } => self.start_point.as_ref().map(|o| o.epoch_ms),
            Position::Done => None,
        }
    }

    /// Whether the runner reported that its minDelta offset expired from the changelog.
    pub fn reports_offset_expired(&self) -> bool {
        self.last_error.as_ref().is_some_and(|e| {
            e.reason == "OffsetExpired" || e.message.contains("offset has expired")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_example() {
        let json = r#"{"formatVersion":1,"consumerId":"s","checkpointId":42,"savedAt":"2026-11-29T14:00:00Z",
          "position":{"phase":"changelog","offset":{"timestamp":"2026-11-29 13:59:50","epochMs":1795960790000,"tso":5}},
          "startPoint":{"timestamp":"2026-11-29 13:00:00","epochMs":1795957200000,"tso":4},
          "pendingTxns":[{"db":"d","label":"l","txnId":1}],
          "counters":{"rowsRead":5000,"rowsWritten":4990,"rowsDeleted":10,"loads":12,"bytes":301234},
          "lastError":null}"#;
        let cp = Checkpoint::parse(json).unwrap().unwrap();
        assert_eq!(cp.checkpoint_id, 42);
        assert_eq!(cp.oldest_needed_ms(), Some(1_795_960_790_000));
        assert_eq!(cp.counters.rows_deleted, 10);
        assert!(!cp.reports_offset_expired());
    }

    #[test]
    fn empty_is_none_and_newer_formats_are_refused() {
        assert_eq!(Checkpoint::parse("  "), Ok(None));
        let err = Checkpoint::parse(r#"{"formatVersion":2}"#).unwrap_err();
        assert!(err.contains("upgrade dcs-operator"), "{err}");
        assert!(Checkpoint::parse("{x").is_err());
    }
}
