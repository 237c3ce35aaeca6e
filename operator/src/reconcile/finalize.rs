//! Finalize: the operator's finalizer ([`FINALIZER`]), added before anything is launched and
//! released once a deleted sync is cleaned up ([`finalize`]).
//!
//! A deleted sync's cleanup is the [`teardown`](super::teardown) a re-initialisation does too:
//! stop the runner, wait for its pods, then abort the checkpoint's pending transactions and the
//! loads pre-committed after it and delete its offset-table row. Owned objects go with the sync
//! through owner references. A failed attempt is counted in annotations on the sync
//! ([`CLEANUP_ATTEMPTS_ANNOTATION`], [`CLEANUP_NEXT_ANNOTATION`], [`CLEANUP_ERROR_ANNOTATION`]) and
//! retried after the [`RetryPolicy`]'s backoff; after its last attempt, or at once when a
//! credentials Secret is gone, the cleanup is given up with a Warning event naming what was left
//! and the finalizer goes ([`after_failed_attempt`] decides, pure).
//!
//! The finalizer is added and removed with merge patches guarded by resourceVersion rather than
//! kube's `finalizer()` helper, because a cleanup waiting between retries must return without an
//! error and without releasing the finalizer, which that helper cannot express.

use std::{collections::BTreeMap, time::Duration};

use dcs_crds::DorisChangelogSync;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::controller::Action,
};
use serde::de::DeserializeOwned;
use tracing::{info, warn};

use super::{
    api::{get_opt, merge_unless_gone},
    context::Context,
    events::publish,
    stop::Purpose,
    teardown::{Teardown, stop_and_clean},
};
use crate::{
    Error, Result,
    cleanup::{self, AfterFailure, RetryPolicy, Work},
};

/// The finalizer the operator puts on every sync.
pub const FINALIZER: &str = "dcs.dev/cleanup";
/// Annotation on a deleting sync: failed cleanup attempts so far.
pub const CLEANUP_ATTEMPTS_ANNOTATION: &str = "dcs.dev/cleanup-attempts";
/// Annotation on a deleting sync: not before this time (RFC 3339) is cleanup tried again.
pub const CLEANUP_NEXT_ANNOTATION: &str = "dcs.dev/cleanup-next-attempt";
/// Annotation on a deleting sync: why the last cleanup attempt failed.
pub const CLEANUP_ERROR_ANNOTATION: &str = "dcs.dev/cleanup-last-error";

/// Adds [`FINALIZER`] to `sync` and returns the patched object: the watch cache may not show the
/// finalizer yet, and a pass from it would try to add it again with a stale resourceVersion (409).
pub(super) async fn add_finalizer(
    api: &Api<DorisChangelogSync>,
    sync: &DorisChangelogSync,
) -> Result<DorisChangelogSync> {
    let mut finalizers = sync.finalizers().to_vec();
    finalizers.push(FINALIZER.to_owned());
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": sync.resource_version(),
    }});
    api.patch(
        &sync.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::Kube)
}

/// Removes this operator's finalizer from `object` (a merge patch guarded by its resourceVersion,
/// so a concurrent change makes it fail and retry); an object already gone counts as done.
pub(crate) async fn release_finalizer<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let kept: Vec<&String> = object
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .collect();
    let patch = serde_json::json!({"metadata": {
        "finalizers": kept,
        "resourceVersion": object.resource_version(),
    }});
    match api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// A deleted sync: cleaned up, then let go (its finalizer released on the version the cleanup
/// left, since it may have annotated the object, and its remembered status forgotten); or looked
/// at again later.
pub(super) async fn finalize(
    api: &Api<DorisChangelogSync>,
    sync: &DorisChangelogSync,
    ctx: &Context,
) -> Result<Action> {
    if let Some(wait) = cleanup(sync, ctx).await? {
        return Ok(Action::requeue(wait));
    }
    if let Some(current) = &get_opt(api, &sync.name_any()).await? {
        release_finalizer(api, current).await?;
    }
    if let Some(uid) = sync.uid() {
        ctx.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&uid);
    }
    Ok(Action::await_change())
}

/// Cleans up after a deleted sync. `Ok(None)` when the finalizer can go (done, or given up, with
/// a Warning event naming what was left); `Ok(Some(wait))` to look again later.
async fn cleanup(sync: &DorisChangelogSync, ctx: &Context) -> Result<Option<Duration>> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let name = sync.name_any();
    ctx.probes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&format!("{ns}/{name}"));
    let now = Timestamp::now();
    let attempts = Attempts::of(sync.metadata.annotations.as_ref());
    if let Some(wait) = cleanup::wait_before_attempt(attempts.next, now) {
        return Ok(Some(wait));
    }
    let consumer = deleted_consumer(sync);
    let (errors, left, secrets_gone) =
        match stop_and_clean(ctx, sync, &ns, Purpose::Deletion, &consumer).await? {
            Teardown::Waiting { recheck, .. } => return Ok(Some(recheck)),
            Teardown::NothingLeft => {
                info!("sync deleted; nothing to clean in Doris; its runner objects go with it");
                return Ok(None);
            }
            Teardown::Cleaned { note } => {
                info!(%note, "sync deleted; cleaned its state in Doris");
                publish(ctx, sync, false, "CleanedUp", note).await;
                return Ok(None);
            }
            Teardown::Failed {
                errors,
                left,
                secrets_gone,
            } => (errors, left, secrets_gone),
        };
    match after_failed_attempt(
        attempts.failed,
        &errors,
        &left,
        &secrets_gone,
        ctx.cleanup_policy,
        now,
    ) {
        Failed::GiveUp { note } => {
            warn!(%note, "giving up the cleanup of a deleted sync");
            publish(ctx, sync, true, "CleanupAbandoned", note).await;
            Ok(None)
        }
        Failed::Retry {
            attempts,
            wait,
            next,
        } => {
            warn!(attempt = attempts, error = %errors, retry_in = ?wait, "cleanup of a deleted sync failed");
            let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), &ns);
            record_failed_attempt(&api, &name, &retry_annotations(attempts, next, &errors)).await?;
            Ok(Some(wait))
        }
    }
}

/// Writes the [`retry_annotations`] of a failed attempt on sync `name`. A sync already gone
/// (404) has nothing left to retry. Any other refusal fails the pass, so the controller logs it
/// with the sync's name and backs off: ignored, the attempt would go uncounted, and the cleanup
/// would be retried without its backoff and never reach its last attempt, with nothing said.
/// (No 409 to tolerate: a merge patch without a resourceVersion is not refused for a conflict.)
async fn record_failed_attempt(
    api: &Api<DorisChangelogSync>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<()> {
    merge_unless_gone(api, name, patch).await
}

/// The consumer whose state a deleted sync left: the status's, else the spec's (pure).
pub(super) fn deleted_consumer(sync: &DorisChangelogSync) -> String {
    sync.status
        .as_ref()
        .and_then(|s| s.consumer_id.clone())
        .unwrap_or_else(|| sync.consumer_id())
}

/// The cleanup attempts recorded on a deleting sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Attempts {
    /// Failed attempts so far (0 when not recorded or unreadable).
    pub failed: u32,
    /// Not before this time is cleanup tried again (`None` when not recorded or unreadable).
    pub next: Option<Timestamp>,
}

impl Attempts {
    /// Reads them from the sync's annotations (pure).
    pub(super) fn of(annotations: Option<&BTreeMap<String, String>>) -> Self {
        let get = |key: &str| annotations.and_then(|a| a.get(key));
        Self {
            failed: get(CLEANUP_ATTEMPTS_ANNOTATION)
                .and_then(|a| a.parse::<u32>().ok())
                .unwrap_or(0),
            next: get(CLEANUP_NEXT_ANNOTATION).and_then(|t| t.parse::<Timestamp>().ok()),
        }
    }
}

/// What to do after a failed cleanup attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Failed {
    /// Give up: a Warning event with `note`, and the finalizer goes.
    GiveUp {
        /// What was left and how to remove it by hand.
        note: String,
    },
    /// Record the attempt ([`retry_annotations`]) and try again after `wait`, at `next`.
    Retry {
        /// Failed attempts, this one included.
        attempts: u32,
        /// The backoff.
        wait: Duration,
        /// `now` + `wait`.
        next: Timestamp,
    },
}

/// After an attempt failed with `errors`, leaving `left`, following `failed_before` failed ones
/// (pure): a Secret gone gives up at once (typically the namespace is being deleted and took the
/// Secret with it: no retry can read the credentials again); else the policy says whether to
/// retry, and after how long from `now`.
pub(super) fn after_failed_attempt(
    failed_before: u32,
    errors: &str,
    left: &Work,
    secrets_gone: &[String],
    policy: RetryPolicy,
    now: Timestamp,
) -> Failed {
    // The count comes from an annotation anyone may write: saturate, never overflow.
    let attempts = failed_before.saturating_add(1);
    if !secrets_gone.is_empty() {
        return Failed::GiveUp {
            note: secret_gone_note(secrets_gone, errors, left),
        };
    }
    match cleanup::after_failure(attempts, policy) {
        AfterFailure::GiveUp => Failed::GiveUp {
            note: left_behind_note(attempts, errors, left),
        },
        AfterFailure::Retry(wait) => Failed::Retry {
            attempts,
            wait,
            next: now
                .checked_add(SignedDuration::try_from(wait).unwrap_or_default())
                .unwrap_or(now),
        },
    }
}

/// The merge patch that records a failed attempt on the sync (pure).
pub(super) fn retry_annotations(attempts: u32, next: Timestamp, errors: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {
        CLEANUP_ATTEMPTS_ANNOTATION: attempts.to_string(),
        CLEANUP_NEXT_ANNOTATION: next.to_string(),
        CLEANUP_ERROR_ANNOTATION: errors,
    }}})
}

/// How to remove what a given-up cleanup left, by hand.
const BY_HAND: &str = "Remove them by hand (curl -X PUT -H 'txn_id: <id>' (or -H 'label: <label>') -H 'txn_operation: abort' http://<sink-fe>/api/<db>/<table>/_stream_load_2pc; DELETE FROM <offset table> WHERE consumer_id = '<id>') or let Doris time the transactions out";

/// The Warning note when cleanup is given up because a Secret (credentials or CA bundle) or a
/// CA bundle ConfigMap is gone (pure).
pub fn secret_gone_note(secrets: &[String], errors: &str, left: &Work) -> String {
    format!(
        "gave up cleaning Doris at once and released the finalizer: {} is gone (deleted with the namespace?) or does not allow this sync, so retrying cannot help; left behind: {}. Last error: {errors}. {BY_HAND}",
        secrets.join(" and "),
        left.describe()
    )
}

/// The Warning note when cleanup is given up (pure).
pub fn left_behind_note(attempts: u32, errors: &str, left: &Work) -> String {
    format!(
        "gave up cleaning Doris after {attempts} attempts and released the finalizer; left behind: {}. Last error: {errors}. {BY_HAND}",
        left.describe()
    )
}

#[cfg(test)]
mod tests {
    use dcs_crds::DorisChangelogSyncStatus;

    use super::*;
    use crate::{
        cleanup::TxnAbort,
        reconcile::testing::{
            Sent, api_error, at, fake_api, offset_row_work, spec, sync as fake_sync,
        },
    };

    fn left() -> Work {
        Work {
            aborts: vec![TxnAbort {
                db: "db".into(),
                table: "dst".into(),
                txn_id: 42,
                label: "l-7-0".into(),
            }],
            ..offset_row_work()
        }
    }

    const POLICY: RetryPolicy = RetryPolicy {
        max_attempts: 5,
        first_delay: Duration::from_secs(10),
    };

    #[test]
    fn attempts_are_read_from_the_annotations_and_unreadable_ones_start_afresh() {
        assert_eq!(
            Attempts::of(None),
            Attempts {
                failed: 0,
                next: None
            }
        );
        let recorded = BTreeMap::from([
            (CLEANUP_ATTEMPTS_ANNOTATION.to_owned(), "3".to_owned()),
            (
                CLEANUP_NEXT_ANNOTATION.to_owned(),
                "2026-11-29T14:00:40Z".to_owned(),
            ),
        ]);
        assert_eq!(
            Attempts::of(Some(&recorded)),
            Attempts {
                failed: 3,
                next: Some(at(40))
            }
        );
        let garbled = BTreeMap::from([
            (CLEANUP_ATTEMPTS_ANNOTATION.to_owned(), "-1".to_owned()),
            (CLEANUP_NEXT_ANNOTATION.to_owned(), "soon".to_owned()),
        ]);
        assert_eq!(
            Attempts::of(Some(&garbled)),
            Attempts {
                failed: 0,
                next: None
            }
        );
    }

    #[test]
    fn a_failure_is_retried_with_a_doubling_backoff_from_now() {
        assert_eq!(
            after_failed_attempt(0, "sink down", &left(), &[], POLICY, at(0)),
            Failed::Retry {
                attempts: 1,
                wait: Duration::from_secs(10),
                next: at(10)
            }
        );
        assert_eq!(
            after_failed_attempt(3, "sink down", &left(), &[], POLICY, at(100)),
            Failed::Retry {
                attempts: 4,
                wait: Duration::from_secs(80),
                next: at(180)
            }
        );
    }

    #[test]
    fn a_hand_written_huge_attempt_count_gives_up_instead_of_overflowing() {
        assert!(matches!(
            after_failed_attempt(u32::MAX, "sink down", &left(), &[], POLICY, at(0)),
            Failed::GiveUp { note } if note.starts_with(&format!("gave up cleaning Doris after {} attempts", u32::MAX))
        ));
    }

    #[test]
    fn the_last_attempt_gives_up_naming_what_was_left_and_how_to_remove_it() {
        assert_eq!(
            after_failed_attempt(4, "sink down", &left(), &[], POLICY, at(0)),
            Failed::GiveUp {
                note: "gave up cleaning Doris after 5 attempts and released the finalizer; left behind: pre-committed Stream Load transactions 42 (label l-7-0, db db); offset-table row consumer_id='orders' in meta.offsets. Last error: sink down. Remove them by hand (curl -X PUT -H 'txn_id: <id>' (or -H 'label: <label>') -H 'txn_operation: abort' http://<sink-fe>/api/<db>/<table>/_stream_load_2pc; DELETE FROM <offset table> WHERE consumer_id = '<id>') or let Doris time the transactions out".into()
            }
        );
    }

    #[test]
    fn a_secret_gone_gives_up_at_the_first_failure() {
        let gone = [
            "Secret ns/sink-creds".to_owned(),
            "ConfigMap ns/doris-ca".to_owned(),
        ];
        assert_eq!(
            after_failed_attempt(0, "no Secret", &left(), &gone, POLICY, at(0)),
            Failed::GiveUp {
                note: "gave up cleaning Doris at once and released the finalizer: Secret ns/sink-creds and ConfigMap ns/doris-ca is gone (deleted with the namespace?) or does not allow this sync, so retrying cannot help; left behind: pre-committed Stream Load transactions 42 (label l-7-0, db db); offset-table row consumer_id='orders' in meta.offsets. Last error: no Secret. Remove them by hand (curl -X PUT -H 'txn_id: <id>' (or -H 'label: <label>') -H 'txn_operation: abort' http://<sink-fe>/api/<db>/<table>/_stream_load_2pc; DELETE FROM <offset table> WHERE consumer_id = '<id>') or let Doris time the transactions out".into()
            }
        );
    }

    #[test]
    fn a_retry_is_recorded_in_three_annotations() {
        assert_eq!(
            retry_annotations(2, at(30), "sink down; source down"),
            serde_json::json!({"metadata": {"annotations": {
                "dcs.dev/cleanup-attempts": "2",
                "dcs.dev/cleanup-next-attempt": "2026-11-29T14:00:30Z",
                "dcs.dev/cleanup-last-error": "sink down; source down",
            }}})
        );
    }

    #[test]
    fn a_deleted_sync_cleans_the_consumer_its_status_names() {
        let mut sync = DorisChangelogSync::new("orders", spec());
        assert_eq!(deleted_consumer(&sync), "orders");
        sync.spec.offsets = Some(dcs_crds::OffsetsSpec {
            table: None,
            consumer_id: Some("o".into()),
        });
        assert_eq!(deleted_consumer(&sync), "o");
        sync.status = Some(DorisChangelogSyncStatus {
            consumer_id: Some("o-r2".into()),
            ..DorisChangelogSyncStatus::default()
        });
        assert_eq!(deleted_consumer(&sync), "o-r2");
    }

    /// Records one failed attempt through an API server that answers the patch with `code`.
    async fn record_answered(code: u16, reason: &str) -> (Result<()>, Vec<Sent>) {
        let reply = if code == 200 {
            serde_json::to_value(fake_sync()).unwrap()
        } else {
            api_error(code, reason)
        };
        let (client, sent) = fake_api(move |_, _| (code, reply.clone()));
        let api: Api<DorisChangelogSync> = Api::namespaced(client, "ns");
        let patch = retry_annotations(2, at(30), "sink down");
        let result = record_failed_attempt(&api, "orders", &patch).await;
        let sent = sent.lock().unwrap().clone();
        (result, sent)
    }

    #[tokio::test]
    async fn a_failed_attempt_is_recorded_on_the_sync() {
        let (result, sent) = record_answered(200, "").await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            sent,
            vec![Sent {
                method: "PATCH".into(),
                path: "/apis/dcs.dev/v1alpha1/namespaces/ns/dorischangelogsyncs/orders".into(),
                body: serde_json::json!({"metadata": {"annotations": {
                    "dcs.dev/cleanup-attempts": "2",
                    "dcs.dev/cleanup-next-attempt": "2026-11-29T14:00:30Z",
                    "dcs.dev/cleanup-last-error": "sink down",
                }}}),
            }]
        );
    }

    #[tokio::test]
    async fn a_sync_gone_before_its_attempt_is_recorded_needs_no_record() {
        let (result, _) = record_answered(404, "NotFound").await;
        assert!(result.is_ok(), "{result:?}");
    }

    #[tokio::test]
    async fn an_attempt_the_api_server_refuses_to_record_fails_the_pass() {
        for (code, reason) in [(403, "Forbidden"), (422, "Invalid"), (500, "InternalError")] {
            let (result, _) = record_answered(code, reason).await;
            match result {
                Err(Error::Kube(kube::Error::Api(s))) => {
                    assert_eq!((s.code, s.reason.as_str()), (code, reason));
                }
                other => panic!("{code}: {other:?}"),
            }
        }
    }
}
