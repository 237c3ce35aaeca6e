//! The observed state: `DorisChangelogSync.status`, written only by the operator.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator last observed and decided. Every field is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DorisChangelogSyncStatus {
    /// The metadata.generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Where the sync is in its life cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Ready, TtlSufficient, OffsetHealthy, SnapshotComplete and SinkHealthy, in the standard shape;
    /// Reconciling and Stalled (kstatus's) only while True.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The consumer id the progress is recorded under (changes on reinitialization).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_id: Option<String>,
    /// How many times the sync was reinitialized; part of the consumer id when above zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_generation: Option<i64>,
    /// What the operator found out about the source table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
    /// The last committed position in the changelog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<OffsetStatus>,
    /// Seconds between Doris's now and offset.timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<i64>,
    /// Seconds left before the oldest change still needed expires from the changelog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_headroom_seconds: Option<i64>,
    /// Progress of the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStatus>,
    /// What the sink has written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<SinkStatus>,
    /// How many times the runner pod's container has restarted (Kubernetes restarts a crashing
    /// runner with back-off: 10 s, doubling, at most 5 min). Absent while no runner pod exists; a
    /// new pod (after a spec change or re-initialisation) counts from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_restarts: Option<i32>,
    /// The last reinitialization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reinit: Option<ReinitStatus>,
    /// The last error, kept after it is resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<ErrorStatus>,
    /// How the connections to each Doris cluster are protected, from the spec's `tls` blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,
}

/// How the connections to each side are protected.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsStatus {
    /// The source cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<TlsMode>,
    /// The sink cluster (absent for a stdout sink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<TlsMode>,
}

/// What protects the connections to one cluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TlsMode {
    /// No TLS: credentials and rows travel in clear.
    Plaintext,
    /// TLS with the server's certificate checked (against the CA bundle or the public roots).
    Verified,
    /// TLS without any certificate check (`insecureSkipVerify`): anyone on the path can read
    /// the credentials.
    InsecureSkipVerify,
}

impl TlsMode {
    /// The mode a `tls` block asks for.
    pub fn of(tls: Option<&crate::TlsSpec>) -> Self {
        match tls.filter(|t| t.enabled) {
            None => Self::Plaintext,
            Some(t) if t.insecure_skip_verify => Self::InsecureSkipVerify,
            Some(_) => Self::Verified,
        }
    }
}

/// The life-cycle phase.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Accepted, nothing running yet.
    Pending,
    /// Not started because a precondition fails (TTL too short, changelog disabled, ...); see conditions.
    Blocked,
    /// Reading the snapshot.
    Snapshotting,
    /// Reading the changelog.
    Streaming,
    /// Starting again under a new consumer id after the offset expired.
    Reinitializing,
    /// Stopped by spec.suspend.
    Suspended,
    /// Stopped by an error that needs a person; see lastError.
    Failed,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pending => "Pending",
            Self::Blocked => "Blocked",
            Self::Snapshotting => "Snapshotting",
            Self::Streaming => "Streaming",
            Self::Reinitializing => "Reinitializing",
            Self::Suspended => "Suspended",
            Self::Failed => "Failed",
        })
    }
}

/// Facts about the source table.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// The table's changelog.ttl_seconds (or binlog.ttl_seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// Whether changelog.enable (or binlog.enable) is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changelog_enabled: Option<bool>,
    /// Whether the changelog keeps before-images (changelog.need_historical_value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub need_historical_value: Option<bool>,
    /// The table model, e.g. UNIQUE_KEYS or DUP_KEYS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_type: Option<String>,
    /// Whose clock lag and headroom were measured with: doris (the FE's TSO) or local.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
}

/// The clock behind lag and headroom.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Clock {
    /// The FE's current TSO physical time.
    Doris,
    /// The operator's own clock (Doris's time could not be read).
    Local,
}

/// The last committed position in the changelog.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OffsetStatus {
    /// The next window's start, "yyyy-MM-dd HH:mm:ss".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The TSO of the last change handed to the sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tso: Option<i64>,
    /// The id of the checkpoint holding this offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<i64>,
    /// When that checkpoint was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<Time>,
}

/// Progress of the snapshot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// T0: where the changelog is read from after the snapshot, "yyyy-MM-dd HH:mm:ss".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<String>,
    /// When the snapshot started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the snapshot finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Time>,
    /// Rows read so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_read: Option<i64>,
    /// Rows in the table when the snapshot started, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_total: Option<i64>,
    /// A snapshot read by shards (spec.snapshot.parallelism above 1): how many are done, e.g.
    /// "3/4" (the SHARDS column of kubectl get dcs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards_done: Option<String>,
    /// A snapshot read by shards: each shard's progress, by index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardStatus>>,
}

/// One shard of a snapshot read by shards.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    /// The shard's index (its Indexed Job pod's JOB_COMPLETION_INDEX).
    pub index: i64,
    /// Pending (no checkpoint yet), Snapshotting, Committing (every tablet read, the last
    /// checkpoint's loads not committed yet; see message), Done (committed), or Failed (its
    /// checkpoint is another consumer's or T0's, or it stopped with an error; see message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Its tablets whose rows are all in the sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablets_done: Option<i64>,
    /// Its tablets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tablets_total: Option<i64>,
    /// Rows it read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_read: Option<i64>,
    /// Why it is Failed, or its last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the sink has written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SinkStatus {
    /// Rows written (inserts and updates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_written: Option<i64>,
    /// Rows deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_deleted: Option<i64>,
    /// Rows the sink refused (a value that does not fit, a constraint), written into the
    /// dead-letter table (spec.sink.doris.deadLetter) instead, summed over the shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_rejected: Option<i64>,
    /// Stream Loads committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads: Option<i64>,
    /// The label of the last committed load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_label: Option<String>,
    /// When the last load was committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_load_at: Option<Time>,
    /// The last change of the source table's columns and what the sync did about it
    /// (`spec.sink.doris.schemaChange`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schema_change: Option<crate::checkpoint::SchemaChangeNote>,
    /// Source columns not written to the sink (`schemaChange: ignore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_columns: Option<Vec<String>>,
}

/// A reinitialization.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReinitStatus {
    /// When it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// Why, as a CamelCase reason (OffsetExpired, NonceChanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The consumer id that was abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_consumer_id: Option<String>,
}

/// An error.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorStatus {
    /// When it happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// A CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What went wrong and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The longest message status carries (a condition's, `lastError`'s): Doris's answers end up
/// there, and whoever runs the FE a sync names decides how long they are.
pub const MAX_STATUS_MESSAGE: usize = 2048;

/// `text` cut to at most `max` bytes (at a character boundary), saying so with ` [...]`.
pub fn cut_text(mut text: String, max: usize) -> String {
    const CUT: &str = " [...]";
    if text.len() > max {
        let mut end = max.saturating_sub(CUT.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(CUT);
    }
    text
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    #[test]
    fn long_texts_are_cut_at_a_character_boundary_and_say_so() {
        assert_eq!(cut_text("short".into(), 10), "short");
        let cut = cut_text("é".repeat(2000), MAX_STATUS_MESSAGE);
        assert!(
            cut.len() <= MAX_STATUS_MESSAGE && cut.ends_with(" [...]"),
            "{}",
            cut.len()
        );
        assert!(cut.starts_with("éé"));
    }
}
