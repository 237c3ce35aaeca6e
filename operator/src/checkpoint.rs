//! The runner's checkpoint as the operator reads it: the documented JSON, format version 1.
//!
//! The format is shared with the runner through `dcs_crds::checkpoint`; unknown fields are
//! ignored, newer formats are refused with a message.

pub use dcs_crds::checkpoint::{
    CHECKPOINT_KEY, Checkpoint, CheckpointFormatError, Counters, FORMAT_VERSION, LastError, Offset,
    PendingTxn, Position, Stopped,
};
use dcs_crds::{checkpoint::DORIS_OFFSET_EXPIRED, conditions::reasons::OFFSET_EXPIRED};
use k8s_openapi::api::core::v1::ConfigMap;

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

/// The text the runner saved under [`CHECKPOINT_KEY`] in a checkpoint ConfigMap, if any.
pub fn text_of(cm: &ConfigMap) -> Option<&str> {
    cm.data.as_ref()?.get(CHECKPOINT_KEY).map(String::as_str)
}

/// What the runner said when it found its offset expired, if it did: its stop record (reason
/// OffsetExpired), else its last error (that reason, or Doris's minDelta error).
pub fn offset_expired_message(checkpoint: &Checkpoint) -> Option<&str> {
    if let Some(stopped) = &checkpoint.stopped
        && stopped.reason == OFFSET_EXPIRED
    {
        return Some(&stopped.message);
    }
    // Runners from before the runner's own retention guard recorded Doris's error under another
    // reason.
    checkpoint
        .last_error
        .as_ref()
        .filter(|e| e.reason == OFFSET_EXPIRED || e.message.contains(DORIS_OFFSET_EXPIRED))
        .map(|e| e.message.as_str())
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
        assert_eq!(offset_expired_message(&cp), None);
    }

    #[test]
    fn expiry_is_read_from_the_stop_record_or_the_last_error() {
        let mut cp = crate::reconcile::testing::streaming_checkpoint("s", 5);
        cp.stopped = Some(Stopped {
            at: "2026-11-29T14:05:00Z".into(),
            reason: "OffsetExpired".into(),
            exit_code: 3,
            message: "window start 13:00:00 is past the TTL".into(),
        });
        assert_eq!(
            offset_expired_message(&cp),
            Some("window start 13:00:00 is past the TTL")
        );
        cp.stopped.as_mut().unwrap().reason = "Stopped".into();
        assert_eq!(offset_expired_message(&cp), None);
        cp.last_error = Some(LastError {
            at: "2026-11-29T14:05:00Z".into(),
            reason: "SourceQueryFailed".into(),
            message: "Row binlog offset has expired according to binlog.ttl_seconds".into(),
        });
        assert_eq!(
            offset_expired_message(&cp),
            Some("Row binlog offset has expired according to binlog.ttl_seconds")
        );
        cp.last_error.as_mut().unwrap().message = "connection reset".into();
        assert_eq!(offset_expired_message(&cp), None);
        cp.last_error.as_mut().unwrap().reason = "OffsetExpired".into();
        assert_eq!(offset_expired_message(&cp), Some("connection reset"));
    }

    #[test]
    fn empty_is_none_and_newer_formats_are_refused() {
        assert_eq!(parse("  "), Ok(None));
        let err = parse(r#"{"formatVersion":2}"#).unwrap_err();
        assert!(err.contains("upgrade dcs-operator"), "{err}");
        assert!(parse("{x").is_err());
    }
}
