//! The runner's checkpoint as the operator reads it: the documented JSON, format version 1.
//!
//! The format is shared with the runner through `dcs_crds::checkpoint`; unknown fields are
//! ignored, newer formats are refused with a message.

pub use dcs_crds::checkpoint::{
    CHECKPOINT_KEY, Checkpoint, CheckpointFormatError, Counters, FORMAT_VERSION, LastError, Offset,
    PendingTxn, Position,
};

/// Parses the stored JSON; `Ok(None)` for an empty ConfigMap value.
///
/// # Errors
/// A message for unreadable JSON or a format newer than [`FORMAT_VERSION`].
pub fn parse(json: &str) -> Result<Option<Checkpoint>, String> {
    if json.trim().is_empty() {
        return Ok(None);
    }
    Checkpoint::from_json(json).map(Some).map_err(|e| match e {
        CheckpointFormatError::Unreadable(reason) => format!("the checkpoint is unreadable: {reason}"),
        CheckpointFormatError::NewerVersion { found } => format!(
            "the checkpoint has format version {found}, this operator reads up to {FORMAT_VERSION}; upgrade dcs-operator"
        ),
    })
}

/// Whether the runner reported that its minDelta offset expired from the changelog.
pub fn reports_offset_expired(checkpoint: &Checkpoint) -> bool {
    checkpoint
        .last_error
        .as_ref()
        .is_some_and(|e| e.reason == "OffsetExpired" || e.message.contains("offset has expired"))
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
        let cp = parse(json).unwrap().unwrap();
        assert_eq!(cp.checkpoint_id, 42);
        assert_eq!(cp.oldest_needed_ms(), Some(1_795_960_790_000));
        assert_eq!(cp.counters.rows_deleted, 10);
        assert!(!reports_offset_expired(&cp));
    }

    #[test]
    fn empty_is_none_and_newer_formats_are_refused() {
        assert_eq!(parse("  "), Ok(None));
        let err = parse(r#"{"formatVersion":2}"#).unwrap_err();
        assert!(err.contains("upgrade dcs-operator"), "{err}");
        assert!(parse("{x").is_err());
    }
}
