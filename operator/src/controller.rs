//! The watch loop: a kube-rs `Controller` over `DorisChangelogSync` owning the runner objects.
//!
//! The syncs are watched as [`SyncObject`]s, which deserialize tolerantly: an object whose spec
//! or status does not match the types (e.g. a field of the wrong type stored before the schema
//! was installed) becomes a [`SyncObject`] holding its metadata and the serde error, gets a
//! Warning event (`InvalidObject`) and is otherwise left alone, while the rest keep working.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::Deployment,
    batch::v1::Job,
    core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    runtime::{
        Controller,
        controller::{self, Action},
        events::{Event as KubeEvent, EventType},
        reflector::ObjectRef,
        watcher,
    },
};
use tracing::warn;

pub use crate::metrics::Metrics;
pub use crate::sync_object::SyncObject;
use crate::{
    Error,
    reconcile::{Context, FINALIZER, reconcile, release_finalizer},
};

/// Event reason for an object that does not deserialize.
pub const INVALID_OBJECT: &str = "InvalidObject";

/// Reconciles a watched object: typed ones through [`reconcile`]; unreadable ones get a Warning
/// event, and when being deleted their finalizer is released (nothing can be cleaned up without
/// a readable spec).
///
/// # Errors
/// As [`reconcile`], or a failed finalizer removal.
pub async fn reconcile_object(object: Arc<SyncObject>, ctx: Arc<Context>) -> crate::Result<Action> {
    let error = match &object.parsed {
        Ok(sync) => {
            let result = reconcile(sync.clone(), ctx.clone()).await;
            if result.is_ok() {
                ctx.failures
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&failure_key(&object));
            }
            return result;
        }
        Err(e) => e.clone(),
    };
    let name = object.name_any();
    let ns = object.namespace().unwrap_or_default();
    warn!(sync = %name, namespace = %ns, %error, "cannot read a DorisChangelogSync");
    let deleting = object.metadata.deletion_timestamp.is_some();
    let note = if deleting {
        format!(
            "the object cannot be read ({error}); it is being deleted, so its finalizer is released without cleaning up Doris"
        )
    } else {
        format!(
            "the object cannot be read ({error}); fix the field (kubectl edit) so the operator can reconcile it"
        )
    };
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: INVALID_OBJECT.to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        warn!(error = %e, "cannot publish an event");
    }
    if deleting && object.finalizers().iter().any(|f| f == FINALIZER) {
        let api: Api<SyncObject> = Api::namespaced(ctx.client.clone(), &ns);
        release_finalizer(&api, object.as_ref()).await?;
    }
    Ok(Action::await_change())
}

/// The sync a runner pod belongs to (its `dcs.dev/sync` label).
fn sync_of_pod(pod: Pod) -> Option<ObjectRef<SyncObject>> {
    let name = pod.labels().get(crate::reconcile::build::SYNC_LABEL)?;
    let ns = pod.namespace()?;
    Some(ObjectRef::new(name).within(&ns))
}

/// Transient errors back off: a sync whose reconciles keep failing is retried less and less
/// often ([`retry_after`]), so a broken API server or Doris is not hammered; a success resets it.
fn error_policy(sync: Arc<SyncObject>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = {
        let mut map = ctx
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(failure_key(&sync)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    };
    let wait = retry_after(failures);
    warn!(sync = %sync.name_any(), kind = error.metric_label(), %error, failures, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

fn failure_key(sync: &SyncObject) -> String {
    format!(
        "{}/{}",
        sync.namespace().unwrap_or_default(),
        sync.name_any()
    )
}

/// The wait before retrying a sync whose last `failures` reconciles failed in a row: 5 s, then
/// doubling, at most 5 minutes (pure).
pub fn retry_after(failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_secs(5);
    const MAX: Duration = Duration::from_secs(300);
    FIRST
        .saturating_mul(1u32 << failures.saturating_sub(1).min(16))
        .min(MAX)
}

/// Runs the controller for one namespace (or all when `None`) until a shutdown signal.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
) {
    let (syncs, deployments, jobs, configmaps, pods) = match &namespace {
        Some(ns) => (
            Api::<SyncObject>::namespaced(client.clone(), ns),
            Api::<Deployment>::namespaced(client.clone(), ns),
            Api::<Job>::namespaced(client.clone(), ns),
            Api::<ConfigMap>::namespaced(client.clone(), ns),
            Api::<Pod>::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let owned = || watcher::Config::default().labels("app.kubernetes.io/managed-by=dcs-operator");
    let controller = Controller::new(syncs, watcher::Config::default()).with_config(
        controller::Config::default().concurrency(ctx.max_concurrent_reconciles.max(1)),
    );
    let registration = metrics.watch(controller.store());
    controller
        .owns(deployments, owned())
        .owns(jobs, owned())
        .owns(configmaps, owned())
        // Runner pods belong to the sync through a ReplicaSet or Job, so they are mapped by their
        // label: a container exiting (code 3: the offset expired) or a pod going away (the end of
        // a stop's wait) reconciles the sync at once.
        .watches(pods, owned(), sync_of_pod)
        .shutdown_on_signal()
        .run(reconcile_object, error_policy, ctx)
        .for_each(|result| {
            let metrics = metrics.clone();
            async move {
                match result {
                    Ok(_) => metrics.count_reconcile(None),
                    Err(controller::Error::ReconcilerFailed(e, _)) => {
                        metrics.count_reconcile(Some(e.metric_label()));
                    }
                    Err(e) => {
                        metrics.count_reconcile(Some("Controller"));
                        warn!(error = %e, "controller event failed");
                    }
                }
            }
        })
        .await;
    metrics.unwatch(registration);
}

#[cfg(test)]
mod backoff_tests {
    use super::retry_after;
    use std::time::Duration;

    #[test]
    fn failed_reconciles_back_off_up_to_five_minutes() {
        let secs: Vec<u64> = (1..=9).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(retry_after(0), Duration::from_secs(5));
        assert_eq!(retry_after(u32::MAX), Duration::from_secs(300));
    }
}
