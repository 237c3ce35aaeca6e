//! Standard Kubernetes conditions: the names dcs uses and pure helpers to keep them.
//!
//! Conditions follow the kstatus conventions so GitOps tools can judge health: `Ready` summarises,
//! the others explain, and the two abnormal-true conditions kstatus reads before anything else are
//! present only while they are True: `Reconciling` (the sync works towards streaming: kstatus
//! InProgress) and `Stalled` (it needs a person: kstatus Failed). `lastTransitionTime` moves only
//! when a condition's status flips, so writing the same observation twice changes nothing.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types.
pub mod types {
    /// The sync is doing its job: snapshotting or streaming with a healthy offset and sink.
    pub const READY: &str = "Ready";
    /// The source's changelog TTL covers the expected snapshot duration plus margins.
    pub const TTL_SUFFICIENT: &str = "TtlSufficient";
    /// The committed offset is well inside the changelog's TTL.
    pub const OFFSET_HEALTHY: &str = "OffsetHealthy";
    /// The snapshot has been read completely.
    pub const SNAPSHOT_COMPLETE: &str = "SnapshotComplete";
    /// The sink accepts loads.
    pub const SINK_HEALTHY: &str = "SinkHealthy";
    /// kstatus's abnormal-true condition, present only while True: the sync is on its way to
    /// streaming (the runner starting, the snapshot being read, a re-initialisation).
    pub const RECONCILING: &str = "Reconciling";
    /// kstatus's abnormal-true condition, present only while True: the sync cannot go on without
    /// a person (Blocked, Failed, a failing runner); reason and message are Ready's.
    pub const STALLED: &str = "Stalled";
}

/// Condition reasons (CamelCase, as Kubernetes wants them).
pub mod reasons {
    /// The spec breaks a rule; the message lists every field error.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The source could not be probed.
    pub const SOURCE_UNREACHABLE: &str = "SourceUnreachable";
    /// The source refused the credentials.
    pub const SOURCE_AUTH_FAILED: &str = "SourceAuthFailed";
    /// The credentials Secret or one of its keys is missing.
    pub const CREDENTIALS_MISSING: &str = "CredentialsMissing";
    /// The source table does not exist.
    pub const SOURCE_TABLE_MISSING: &str = "SourceTableMissing";
    /// No sink FE answers over HTTP.
    pub const SINK_UNREACHABLE: &str = "SinkUnreachable";
    /// A credentials Secret does not allow the sync to use it (crate::access).
    pub const CREDENTIALS_NOT_ALLOWED: &str = "CredentialsNotAllowed";
    /// A CA bundle Secret does not allow the sync to use it (crate::access).
    pub const CA_BUNDLE_NOT_ALLOWED: &str = "CaBundleNotAllowed";
    /// A sync names a host its credentials Secret does not let them reach (crate::access).
    pub const CREDENTIALS_HOST_NOT_ALLOWED: &str = "CredentialsHostNotAllowed";
    /// The CA bundle a `tls.caBundle` names is missing or holds no certificate.
    pub const CA_BUNDLE_UNAVAILABLE: &str = "CaBundleUnavailable";
    /// spec.runner asks for an image or service account the operator does not allow.
    pub const RUNNER_NOT_ALLOWED: &str = "RunnerNotAllowed";
    /// The source table has no changelog enabled.
    pub const CHANGELOG_DISABLED: &str = "ChangelogDisabled";
    /// The source table deletes with predicates (`enable_mow_light_delete`), which its
    /// changelog does not record.
    pub const LIGHT_DELETE_ENABLED: &str = "LightDeleteEnabled";
    /// The sink needs before-images but the table does not keep them.
    pub const HISTORICAL_VALUE_MISSING: &str = "HistoricalValueMissing";
    /// The source table's model cannot be synced.
    pub const UNSUPPORTED_TABLE_MODEL: &str = "UnsupportedTableModel";
    /// The TTL is shorter than the expected snapshot duration plus margins.
    pub const TTL_TOO_SHORT: &str = "TtlTooShort";
    /// The TTL covers what is needed.
    pub const TTL_COVERS_SNAPSHOT: &str = "TtlCoversSnapshot";
    /// Less than 20 % of the TTL is left before the offset expires.
    pub const NEAR_EXPIRY: &str = "NearExpiry";
    /// The offset has expired from the changelog.
    pub const OFFSET_EXPIRED: &str = "OffsetExpired";
    /// The offset is well inside the TTL.
    pub const WITHIN_TTL: &str = "WithinTtl";
    /// The runner has not reported yet.
    pub const RUNNER_STARTING: &str = "RunnerStarting";
    /// The runner is reading the snapshot.
    pub const SNAPSHOTTING: &str = "Snapshotting";
    /// The snapshot has been read.
    pub const SNAPSHOT_DONE: &str = "SnapshotDone";
    /// The runner is reading the changelog.
    pub const STREAMING: &str = "Streaming";
    /// The sync starts again under a new consumer id.
    pub const REINITIALIZING: &str = "Reinitializing";
    /// The reinit nonce changed.
    pub const NONCE_CHANGED: &str = "NonceChanged";
    /// The table's tablets changed under the snapshot (TRUNCATE, INSERT OVERWRITE, a partition
    /// replaced): it is read again under a new consumer (`crate::tablets`).
    pub const SNAPSHOT_TABLETS_CHANGED: &str = "SnapshotTabletsChanged";
    /// The source table's columns changed in a way the sync does not follow
    /// (`spec.sink.doris.schemaChange` fail, or a change the sink cannot take): it stops until
    /// a person acts.
    pub const SCHEMA_CHANGED: &str = "SchemaChanged";
    /// spec.suspend is true.
    pub const SUSPENDED: &str = "Suspended";
    /// A Stream Load failed.
    pub const LOAD_FAILED: &str = "LoadFailed";
    /// Loads are committed.
    pub const LOADS_COMMITTED: &str = "LoadsCommitted";
    /// The runner stopped with an error.
    pub const RUNNER_FAILED: &str = "RunnerFailed";
}

/// The three condition statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl ConditionStatus {
    /// The status as written in a condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Sets a condition, adding it when missing. Keeps `lastTransitionTime` unless the status flips.
///
/// Returns whether anything changed, so a caller can skip a status write that would change nothing.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: Time,
) -> bool {
    let status = status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let changed = existing.status != status
                || existing.reason != reason
                || existing.message != message
                || existing.observed_generation != observed_generation;
            if existing.status != status {
                existing.last_transition_time = now;
            }
            existing.status = status.to_owned();
            existing.reason = reason.to_owned();
            existing.message = message.to_owned();
            existing.observed_generation = observed_generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
                observed_generation,
                last_transition_time: now,
            });
            true
        }
    }
}

/// The condition of the given type, if present.
pub fn get_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of the given type is present with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// Removes the condition of the given type; returns whether it was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn adds_a_missing_condition() {
        let mut conditions = Vec::new();
        let changed = set_condition(
            &mut conditions,
            types::READY,
            ConditionStatus::False,
            reasons::RUNNER_STARTING,
            "waiting for the runner",
            Some(3),
            at(100),
        );
        assert!(changed);
        assert_eq!(
            conditions,
            vec![Condition {
                type_: "Ready".into(),
                status: "False".into(),
                reason: "RunnerStarting".into(),
                message: "waiting for the runner".into(),
                observed_generation: Some(3),
                last_transition_time: at(100),
            }]
        );
    }

    #[test]
    fn same_observation_changes_nothing_and_keeps_the_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            types::READY,
            ConditionStatus::True,
            "Streaming",
            "ok",
            Some(1),
            at(100),
        );
        let changed = set_condition(
            &mut conditions,
            types::READY,
            ConditionStatus::True,
            "Streaming",
            "ok",
            Some(1),
            at(200),
        );
        assert!(!changed);
        assert_eq!(conditions[0].last_transition_time, at(100));
    }

    #[test]
    fn new_message_keeps_the_time_when_status_stays() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            types::OFFSET_HEALTHY,
            ConditionStatus::True,
            "WithinTtl",
            "a",
            Some(1),
            at(100),
        );
        let changed = set_condition(
            &mut conditions,
            types::OFFSET_HEALTHY,
            ConditionStatus::True,
            "WithinTtl",
            "b",
            Some(2),
            at(200),
        );
        assert!(changed);
        let c = get_condition(&conditions, types::OFFSET_HEALTHY).unwrap();
        assert_eq!(
            (
                c.message.as_str(),
                c.observed_generation,
                &c.last_transition_time
            ),
            ("b", Some(2), &at(100))
        );
    }

    #[test]
    fn flipping_status_moves_the_time() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            types::OFFSET_HEALTHY,
            ConditionStatus::True,
            "WithinTtl",
            "",
            None,
            at(100),
        );
        set_condition(
            &mut conditions,
            types::READY,
            ConditionStatus::True,
            "Streaming",
            "",
            None,
            at(100),
        );
        let changed = set_condition(
            &mut conditions,
            types::OFFSET_HEALTHY,
            ConditionStatus::False,
            reasons::NEAR_EXPIRY,
            "10% of the TTL left",
            None,
            at(300),
        );
        assert!(changed);
        let c = get_condition(&conditions, types::OFFSET_HEALTHY).unwrap();
        assert_eq!(
            (
                c.status.as_str(),
                c.reason.as_str(),
                &c.last_transition_time
            ),
            ("False", "NearExpiry", &at(300))
        );
        // The other condition is untouched and the order is kept.
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1].type_, "Ready");
        assert_eq!(conditions[1].last_transition_time, at(100));
    }

    #[test]
    fn is_true_reads_the_status() {
        let mut conditions = Vec::new();
        assert!(!is_true(&conditions, types::READY));
        set_condition(
            &mut conditions,
            types::READY,
            ConditionStatus::Unknown,
            "RunnerStarting",
            "",
            None,
            at(1),
        );
        assert!(!is_true(&conditions, types::READY));
        set_condition(
            &mut conditions,
            types::READY,
            true.into(),
            "Streaming",
            "",
            None,
            at(2),
        );
        assert!(is_true(&conditions, types::READY));
        assert!(!is_true(&conditions, types::SINK_HEALTHY));
        assert!(remove_condition(&mut conditions, types::READY));
        assert!(!remove_condition(&mut conditions, types::READY));
        assert!(conditions.is_empty());
    }
}
