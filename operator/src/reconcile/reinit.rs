//! Re-initialisation: what a [`Plan::Reinitialize`](super::plan::Plan::Reinitialize) does. First
//! ([`reinitialize`]) the old consumer's runner is stopped and what it left in Doris removed (the
//! [`teardown`](super::teardown) a deletion does too); while its pods are still stopping the status
//! says what is waited for and nothing is changed, and a failed cleanup leaves everything as it
//! was, with a Warning event, for the next pass to try again. Then, once the status names the new
//! consumer ([`finish`]), the old checkpoint is removed, the stop mark forgotten and the
//! `reinitNonce` answered recorded on the config ConfigMap.

use std::time::Duration;

use dcs_crds::DorisChangelogSync;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt};
use tracing::info;

use super::{
    api::merge_unless_gone,
    build::NONCE_ANNOTATION,
    context::Context,
    events::publish,
    names,
    observe::World,
    plan::Reinit,
    shard_configmaps, shards,
    stop::Purpose,
    teardown::{Teardown, clear_checkpoint, forget_stop, stop_and_clean},
};
use crate::{Error, Result, cleanup::Work};

/// Where a re-initialisation stands after [`reinitialize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The old runner's pods are still stopping: the status says `message`; look again after
    /// `recheck`.
    Waiting {
        /// What is waited for.
        message: String,
        /// When to look again.
        recheck: Duration,
    },
    /// The old runner is stopped and nothing of its consumer is left in Doris.
    Cleaned,
}

/// Stops the runner of the consumer `r` abandons and removes what it left in Doris.
///
/// # Errors
/// An API failure, or [`Error::Cleanup`] when something could not be removed (after a
/// `ReinitCleanupFailed` Warning event).
pub(super) async fn reinitialize(
    ctx: &Context,
    sync: &DorisChangelogSync,
    ns: &str,
    r: &Reinit,
) -> Result<Step> {
    info!(previous = %r.previous_consumer_id, consumer = %r.consumer_id, reason = r.reason, "reinitializing");
    match stop_and_clean(ctx, sync, ns, purpose(r), &r.previous_consumer_id).await? {
        Teardown::Waiting { message, recheck } => Ok(Step::Waiting { message, recheck }),
        Teardown::NothingLeft => Ok(Step::Cleaned),
        Teardown::Cleaned { note } => {
            info!(sync = %sync.name_any(), done = %note, "cleaned the old consumer's state in Doris");
            Ok(Step::Cleaned)
        }
        Teardown::Failed { errors, left, .. } => {
            let note = cleanup_failed_note(&errors, &left);
            publish(ctx, sync, true, "ReinitCleanupFailed", note.clone()).await;
            Err(Error::Cleanup(note))
        }
    }
}

/// The stop a re-initialisation makes (pure).
pub(super) fn purpose(r: &Reinit) -> Purpose {
    Purpose::Reinit {
        consumer: r.previous_consumer_id.clone(),
        reason: r.reason.to_owned(),
        message: r.message.clone(),
    }
}

/// The Warning note (and error) when the old consumer's state could not be removed (pure).
pub(super) fn cleanup_failed_note(errors: &str, left: &Work) -> String {
    format!(
        "cannot re-initialise yet, the old consumer's state in Doris could not be removed: {errors}; left: {}; retrying",
        left.describe()
    )
}

/// Ends a re-initialisation once the status holds the new consumer (so an interruption here never
/// relaunches the old one on an empty checkpoint): the old checkpoint goes, which also fences a
/// runner pod that outlived the stop; the stop is over; the nonce this reinit answered is kept,
/// so the same nonce does not reinitialize again.
pub(super) async fn finish(ctx: &Context, sync: &DorisChangelogSync, world: &World) -> Result<()> {
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &world.ns);
    if world.checkpoint_cm {
        clear_checkpoint(&configmaps, &world.name).await?;
    }
    // A sharded snapshot's shards: cleaned with the rest; the next consumer starts without them.
    if shards::may_have_shards(sync) {
        shard_configmaps::clear(&configmaps, &world.name).await?;
    }
    forget_stop(ctx, sync, &world.ns).await?;
    if world.config_cm {
        let patch = serde_json::json!({"metadata": {"annotations": {
            NONCE_ANNOTATION: sync.spec.reinit_nonce,
        }}});
        // Gone since it was observed (the sync's deletion took it, or a hand): there is no
        // runner config left to mark, and the next pass observes what is there; anything else
        // fails the pass.
        merge_unless_gone(&configmaps, &names::config(&world.name), &patch).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::testing::{
        Sent, api_error, fake_api, observed, offset_row_work, sync as fake_sync,
    };

    #[test]
    fn the_stop_is_for_the_abandoned_consumer_with_the_plans_reason_and_words() {
        let r = Reinit {
            reason: "NonceChanged",
            previous_consumer_id: "orders-r1".into(),
            consumer_id: "orders-r2".into(),
            consumer_generation: 2,
            message: "spec.reinitNonce changed".into(),
            waiting: None,
        };
        assert_eq!(
            purpose(&r),
            Purpose::Reinit {
                consumer: "orders-r1".into(),
                reason: "NonceChanged".into(),
                message: "spec.reinitNonce changed".into(),
            }
        );
    }

    #[test]
    fn a_failed_cleanup_says_what_failed_and_what_is_left() {
        let left = offset_row_work();
        assert_eq!(
            cleanup_failed_note("source down; sink down", &left),
            "cannot re-initialise yet, the old consumer's state in Doris could not be removed: source down; sink down; left: offset-table row consumer_id='orders' in meta.offsets; retrying"
        );
    }

    /// The world of sync `orders` with both its ConfigMaps observed.
    fn world() -> World {
        World {
            ns: "ns".into(),
            name: "orders".into(),
            observed: observed(),
            checkpoint_cm: true,
            config_cm: true,
            deployment: None,
            job: None,
            earlier_checkpoint: false,
            last_written: None,
            cached_version: None,
            uid: "uid-1".into(),
        }
    }

    /// Runs [`finish`] for a reinit that answered nonce `n2` against an API server that keeps the
    /// sync and answers the ConfigMap patches with `configmaps` (a code and its reason).
    async fn finish_answered(configmaps: (u16, &'static str)) -> (Result<()>, Vec<Sent>) {
        let mut sync = fake_sync();
        sync.spec.reinit_nonce = "n2".into();
        let stored = serde_json::to_value(&sync).unwrap();
        let (client, sent) = fake_api(move |_, path| {
            if path.contains("/configmaps/") {
                (configmaps.0, api_error(configmaps.0, configmaps.1))
            } else {
                (200, stored.clone())
            }
        });
        let ctx = Context::new(client, None);
        let result = finish(&ctx, &sync, &world()).await;
        let sent = sent.lock().unwrap().clone();
        (result, sent)
    }

    #[tokio::test]
    async fn configmaps_deleted_meanwhile_end_the_reinit_quietly() {
        let (result, sent) = finish_answered((404, "NotFound")).await;
        assert!(result.is_ok(), "{result:?}");
        let calls: Vec<(&str, &str)> = sent
            .iter()
            .map(|s| (s.method.as_str(), s.path.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "PATCH",
                    "/api/v1/namespaces/ns/configmaps/orders-checkpoint"
                ),
                (
                    "PATCH",
                    "/apis/dcs.dev/v1alpha1/namespaces/ns/dorischangelogsyncs/orders"
                ),
                (
                    "PATCH",
                    "/api/v1/namespaces/ns/configmaps/orders-runner-config"
                ),
            ]
        );
        assert_eq!(
            sent[2].body,
            serde_json::json!({"metadata": {"annotations": {"dcs.dev/reinit-nonce": "n2"}}})
        );
    }

    #[tokio::test]
    async fn a_nonce_record_refused_otherwise_fails_the_pass() {
        for (code, reason) in [
            (403, "Forbidden"),
            (409, "Conflict"),
            (500, "InternalError"),
        ] {
            match finish_answered((code, reason)).await.0 {
                Err(Error::Kube(kube::Error::Api(s))) => assert_eq!(s.code, code),
                other => panic!("{code}: {other:?}"),
            }
        }
    }
}
