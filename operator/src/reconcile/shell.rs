//! The reconcile shell: [`reconcile`] sends each pass over a sync to its stage. A sync being
//! deleted is finalized (`finalize.rs`: its cleanup and the finalizer); any other gets the
//! finalizer first and is then applied (`apply.rs`: observed, planned by the pure
//! [`plan`](super::plan), acted on, its status written).

use std::sync::Arc;

use dcs_crds::DorisChangelogSync;
use kube::{Api, ResourceExt, runtime::controller::Action};
use tracing::instrument;

use super::{
    apply,
    context::Context,
    finalize::{self, FINALIZER},
};
use crate::{Error, Result};

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
