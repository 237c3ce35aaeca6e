//! The reconcile shell: [`Context`], the state every pass shares, and [`reconcile`], which sends
//! each pass to its stage. A sync being deleted is finalized (`finalize.rs`: its cleanup and the
//! finalizer); any other gets the finalizer first and is then applied (`apply.rs`): observed
//! (`observe.rs`), planned by the pure [`plan`](super::plan), acted on (stopping the workload, a
//! re-initialisation in `reinit.rs`, launching) and its status written. A re-initialisation and a
//! deletion stop the runner and clean Doris through the one sequence in `teardown.rs`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use dcs_crds::DorisChangelogSync;
use kube::{
    Api, Client, ResourceExt,
    runtime::{
        controller::Action,
        events::{Recorder, Reporter},
    },
};
use tracing::instrument;

use super::{apply, build, finalize, status::WrittenStatus, stop};
use crate::{Error, Result, cleanup::RetryPolicy};

pub use super::finalize::{
    CLEANUP_ATTEMPTS_ANNOTATION, CLEANUP_ERROR_ANNOTATION, CLEANUP_NEXT_ANNOTATION, FINALIZER,
    left_behind_note, secret_gone_note,
};
pub use super::observe::{CachedProbe, REPROBE_INTERVAL};

/// The one field manager of every write.
pub const FIELD_MANAGER: &str = "dcs-operator";
/// How long past a runner pod's grace period a stop waits for it by default.
pub const DEFAULT_POD_WAIT_MARGIN: Duration = stop::DEFAULT_MARGIN;

/// Shared state of the reconciler.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The operator's `--runner-image`, `--runner-resources` and `--runner-metrics-addr`.
    pub runner: build::RunnerDefaults,
    /// Publishes Kubernetes Events about the syncs.
    pub recorder: Recorder,
    /// Table facts per sync (namespace/name), with when and for which generation they were read.
    pub probes: Mutex<HashMap<String, CachedProbe>>,
    /// Retries of a deleted sync's Doris cleanup before the finalizer is released anyway.
    pub cleanup_policy: RetryPolicy,
    /// How long past a runner pod's grace period a stop waits for it before forcing it off.
    pub pod_wait_margin: Duration,
    /// The status last written to each sync (by uid), for while the watch cache lags behind it.
    pub written: Mutex<HashMap<String, WrittenStatus>>,
    /// How many syncs are reconciled at once (each probes Doris and talks to the API server).
    pub max_concurrent_reconciles: u16,
    /// Reconciles that failed in a row, per sync (namespace/name), for the retry backoff.
    pub failures: Mutex<HashMap<String, u32>>,
}

/// The default of [`Context::max_concurrent_reconciles`].
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 16;

impl Context {
    /// A context with an empty probe cache.
    pub fn new(client: Client, runner_image: Option<String>) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            runner: build::RunnerDefaults {
                image: runner_image,
                ..build::RunnerDefaults::default()
            },
            probes: Mutex::new(HashMap::new()),
            cleanup_policy: RetryPolicy::default(),
            pod_wait_margin: DEFAULT_POD_WAIT_MARGIN,
            written: Mutex::new(HashMap::new()),
            max_concurrent_reconciles: DEFAULT_MAX_CONCURRENT_RECONCILES,
            failures: Mutex::new(HashMap::new()),
        }
    }
}

/// Reconciles one sync: the finalizer, then `apply`; a deleted sync is cleaned up and let go
/// (`finalize`).
///
/// # Errors
/// Any API failure; the controller backs off and retries.
#[instrument(skip(sync, ctx), fields(sync = %sync.name_any(), namespace = sync.namespace().unwrap_or_default()))]
pub async fn reconcile(sync: Arc<DorisChangelogSync>, ctx: Arc<Context>) -> Result<Action> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = sync.metadata.deletion_timestamp.is_some();
    let has_finalizer = sync.finalizers().iter().any(|f| f == FINALIZER);
    match stage(deleting, has_finalizer) {
        Stage::LetGo => Ok(Action::await_change()),
        Stage::Finalize => finalize::finalize(&api, &sync, &ctx).await,
        Stage::AddFinalizer => {
            // Go on with the patched object, not the watch cache's.
            let patched = finalize::add_finalizer(&api, &sync).await?;
            apply::apply(&patched, &ctx).await
        }
        Stage::Apply => apply::apply(&sync, &ctx).await,
    }
}

/// Which stage a pass over a sync is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Deleted without this operator's finalizer (released already, or never added): nothing
    /// to do.
    LetGo,
    /// Deleted: clean up, then release the finalizer.
    Finalize,
    /// New to the operator: add the finalizer, then apply.
    AddFinalizer,
    /// Observe, plan, act, write status.
    Apply,
}

/// The stage of a pass over a sync being deleted or not, with this operator's finalizer or not
/// (pure).
fn stage(deleting: bool, has_finalizer: bool) -> Stage {
    match (deleting, has_finalizer) {
        (true, false) => Stage::LetGo,
        (true, true) => Stage::Finalize,
        (false, false) => Stage::AddFinalizer,
        (false, true) => Stage::Apply,
    }
}

#[cfg(test)]
mod tests {
    use super::{Stage, stage};

    #[test]
    fn a_deleted_sync_is_finalized_only_while_it_holds_the_finalizer() {
        assert_eq!(stage(true, true), Stage::Finalize);
        assert_eq!(stage(true, false), Stage::LetGo);
    }

    #[test]
    fn a_live_sync_gets_the_finalizer_before_it_is_applied() {
        assert_eq!(stage(false, false), Stage::AddFinalizer);
        assert_eq!(stage(false, true), Stage::Apply);
    }
}
