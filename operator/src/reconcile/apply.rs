//! Apply: one pass over a sync that is not being deleted. [`observe`] its world,
//! [`plan`], act on the plan ([`act`]: stop the workload, re-initialise through
//! [`reinit`], or launch the runner objects by server-side apply), then write the
//! status when it changed and publish the events its changes call for.
//!
//! Which workload calls a launch makes ([`workload_steps`]) is pure and tested here.

use std::time::Duration;

use dcs_crds::DorisChangelogSync;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        batch::v1::Job,
        core::v1::{ConfigMap, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::controller::Action,
};
use serde::Serialize;
use tracing::warn;

use super::{
    api::{delete_quietly, server_apply},
    build::{self, RunnerObjects, Workload},
    context::{Context, FIELD_MANAGER},
    events::publish,
    names,
    observe::{World, observe},
    plan::{Plan, plan},
    reinit, shard_configmaps, shards,
    status::{compute_status, differs, headroom_hint, notices, remember_write},
    teardown::{clear_checkpoint, forget_stop},
};
use crate::{Error, Result};

/// Annotation on the workload with the hash of its whole built form.
const OBJECT_HASH_ANNOTATION: &str = "dcs.dev/object-hash";
/// When a pass with nothing sooner to look at requeues.
const RESYNC: Duration = Duration::from_secs(60);
/// When a re-initialisation whose old runner is stopped and cleaned up looks again.
const REINIT_RECHECK: Duration = Duration::from_secs(1);

/// Observes, plans, acts and writes status.
pub(super) async fn apply(sync: &DorisChangelogSync, ctx: &Context) -> Result<Action> {
    let world = observe(sync, ctx).await?;
    let mut decision = plan(&world.observed);
    let requeue = act(ctx, sync, &world, &mut decision).await?;
    write_status(ctx, sync, &world, &decision).await?;
    if let Plan::Reinitialize(r) = &decision
        && r.waiting.is_none()
    {
        reinit::finish(ctx, sync, &world).await?;
    }
    Ok(Action::requeue(requeue))
}

/// Does what `decision` says (a re-initialisation waiting for the old runner's pods notes it in
/// the plan, for the status); returns when to look again.
async fn act(
    ctx: &Context,
    sync: &DorisChangelogSync,
    world: &World,
    decision: &mut Plan,
) -> Result<Duration> {
    match decision {
        Plan::Cleanup => Ok(RESYNC),
        Plan::Block(_) | Plan::Suspend | Plan::Fail { .. } => {
            let runner_name = names::runner(&world.name);
            if world.deployment.is_some() {
                let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &world.ns);
                delete_quietly(&deployments, &runner_name).await?;
            }
            if world.job.is_some() {
                let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &world.ns);
                delete_quietly(&jobs, &runner_name).await?;
            }
            Ok(RESYNC)
        }
        Plan::Reinitialize(r) => match reinit::reinitialize(ctx, sync, &world.ns, r).await? {
            // The stopping runner may still save a checkpoint or pre-commit a load: nothing is
            // read or changed until its pods are gone or forced off; the status says so.
            reinit::Step::Waiting { message, recheck } => {
                r.waiting = Some(message);
                Ok(recheck)
            }
            reinit::Step::Cleaned => Ok(REINIT_RECHECK),
        },
        Plan::Run(run) => {
            if world.earlier_checkpoint {
                // The checkpoint of the consumer this one replaced, left by a reinit interrupted
                // between its status write and the checkpoint's removal: its Doris state is
                // already cleaned; the new runner must not find it.
                let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &world.ns);
                clear_checkpoint(&configmaps, &world.name).await?;
            }
            if world.observed.stopping.is_some() {
                forget_stop(ctx, sync, &world.ns).await?;
            }
            if let Some(w) = &run.probe_warning {
                warn!(warning = %w, "source probe failed; keeping the runner");
            }
            if shards::rerun(&world.observed, run.shards.as_ref()) {
                // The shards' Job ended with a shard not done: gone now, made again next pass.
                let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &world.ns);
                delete_quietly(&jobs, &names::runner(&world.name)).await?;
                return Ok(REINIT_RECHECK);
            }
            let mut objects = build::build(sync, run, &ctx.runner);
            build::adapt(&mut objects, &world.name, run.shards.as_ref());
            let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &world.ns);
            shard_configmaps::create_configmaps(
                &configmaps,
                &world.observed,
                &objects,
                run.shards.as_ref(),
            )
            .await?;
            launch(ctx, world, &objects).await?;
            Ok(headroom_hint(&world.observed).unwrap_or(RESYNC))
        }
    }
}

/// Writes the status the pass computed when it differs from the one observed (server-side
/// apply of the status subresource, remembered for while the watch cache lags behind), after
/// publishing the events its changes call for.
async fn write_status(
    ctx: &Context,
    sync: &DorisChangelogSync,
    world: &World,
    decision: &Plan,
) -> Result<()> {
    let old_status = &world.observed.status;
    let new_status = compute_status(&world.observed, decision, Timestamp::now());
    for notice in notices(old_status, &new_status) {
        publish(ctx, sync, notice.warning, &notice.reason, notice.note).await;
    }
    if !differs(old_status, &new_status) {
        return Ok(());
    }
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), &world.ns);
    let body = serde_json::json!({
        "apiVersion": DorisChangelogSync::api_version(&()),
        "kind": DorisChangelogSync::kind(&()),
        "status": new_status,
    });
    let updated = api
        .patch_status(
            &world.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(Error::Kube)?;
    let remembered = remember_write(
        world.cached_version.as_deref(),
        world.last_written.as_ref(),
        updated.resource_version(),
        new_status,
    );
    ctx.written
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(world.uid.clone(), remembered);
    Ok(())
}

/// Creates or updates the runner objects: the config ConfigMap, the checkpoint ConfigMap when
/// there is none, the RBAC objects, and the workload as [`workload_steps`] says.
async fn launch(ctx: &Context, world: &World, objects: &RunnerObjects) -> Result<()> {
    let client = &ctx.client;
    let ns = world.ns.as_str();
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config_name = objects.config.name_any();
    server_apply(&configmaps, &config_name, &objects.config).await?;
    if !world.checkpoint_cm {
        match configmaps
            .create(&PostParams::default(), &objects.checkpoint)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    if let Some((sa, role, binding)) = &objects.rbac {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        server_apply(&sas, &sa.name_any(), sa).await?;
        let roles: Api<Role> = Api::namespaced(client.clone(), ns);
        server_apply(&roles, &role.name_any(), role).await?;
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
        server_apply(&bindings, &binding.name_any(), binding).await?;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    let (workload_name, hash, bounded) = match &objects.workload {
        Workload::Deployment(d) => (d.name_any(), hash_of_object(&**d, "Deployment")?, false),
        Workload::Job(j) => (j.name_any(), hash_of_object(&**j, "Job")?, true),
    };
    let steps = workload_steps(
        bounded,
        &hash,
        world.deployment.as_ref().map(|d| &d.metadata),
        world.job.as_ref().map(|j| &j.metadata),
    );
    for step in steps {
        match step {
            WorkloadStep::DeleteDeployment => {
                delete_quietly(&deployments, &workload_name).await?;
            }
            WorkloadStep::DeleteJob => {
                delete_quietly(&jobs, &workload_name).await?;
            }
            WorkloadStep::Apply => match &objects.workload {
                Workload::Deployment(d) => {
                    let d = with_hash((**d).clone(), &hash);
                    server_apply(&deployments, &workload_name, &d).await?;
                }
                Workload::Job(j) => {
                    let j = with_hash((**j).clone(), &hash);
                    server_apply(&jobs, &workload_name, &j).await?;
                }
            },
        }
    }
    Ok(())
}

/// `object` with [`OBJECT_HASH_ANNOTATION`] set to `hash`.
fn with_hash<K: Resource>(mut object: K, hash: &str) -> K {
    object
        .meta_mut()
        .annotations
        .get_or_insert_default()
        .insert(OBJECT_HASH_ANNOTATION.to_owned(), hash.to_owned());
    object
}

/// A call a launch makes about the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WorkloadStep {
    /// Delete the runner Deployment.
    DeleteDeployment,
    /// Delete the runner Job.
    DeleteJob,
    /// Server-side apply the built workload with its hash.
    Apply,
}

/// The workload calls, in order, that bring the existing runner Deployment and Job (their
/// metadata, when they exist) to the built workload, a Job when `bounded`, whose content hash
/// is `hash` (pure). The other kind goes; a workload whose hash annotation already matches is not
/// written; a Job whose template changed is deleted, and created again by a later pass, since a
/// Job's template cannot change.
pub(super) fn workload_steps(
    bounded: bool,
    hash: &str,
    deployment: Option<&ObjectMeta>,
    job: Option<&ObjectMeta>,
) -> Vec<WorkloadStep> {
    fn hash_of(meta: &ObjectMeta) -> Option<&str> {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(OBJECT_HASH_ANNOTATION))
            .map(String::as_str)
    }
    let mut steps = Vec::new();
    if bounded {
        if deployment.is_some() {
            steps.push(WorkloadStep::DeleteDeployment);
        }
        match job {
            Some(j) if hash_of(j) == Some(hash) => {}
            Some(_) => steps.push(WorkloadStep::DeleteJob),
            None => steps.push(WorkloadStep::Apply),
        }
    } else {
        if job.is_some() {
            steps.push(WorkloadStep::DeleteJob);
        }
        if deployment.and_then(hash_of) != Some(hash) {
            steps.push(WorkloadStep::Apply);
        }
    }
    steps
}

/// The content hash of a workload as it is about to be applied (before the hash annotation is set).
fn hash_of_object(object: &impl Serialize, what: &'static str) -> Result<String> {
    let text = serde_json::to_string(object).map_err(|source| Error::Serialize { what, source })?;
    Ok(build::content_hash(&text))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn meta(hash: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("orders-runner".into()),
            annotations: hash
                .map(|h| BTreeMap::from([(OBJECT_HASH_ANNOTATION.to_owned(), h.to_owned())])),
            ..ObjectMeta::default()
        }
    }

    use WorkloadStep::{Apply, DeleteDeployment, DeleteJob};

    #[test]
    fn a_deployment_is_applied_only_when_its_hash_changed() {
        assert_eq!(workload_steps(false, "h1", None, None), vec![Apply]);
        assert_eq!(
            workload_steps(false, "h1", Some(&meta(Some("h1"))), None),
            vec![]
        );
        assert_eq!(
            workload_steps(false, "h2", Some(&meta(Some("h1"))), None),
            vec![Apply]
        );
        assert_eq!(
            workload_steps(false, "h1", Some(&meta(None)), None),
            vec![Apply]
        );
    }

    #[test]
    fn a_deployment_replaces_a_job_first() {
        assert_eq!(
            workload_steps(false, "h1", None, Some(&meta(Some("h1")))),
            vec![DeleteJob, Apply]
        );
        assert_eq!(
            workload_steps(false, "h1", Some(&meta(Some("h1"))), Some(&meta(None))),
            vec![DeleteJob]
        );
    }

    #[test]
    fn a_changed_job_is_deleted_and_created_by_a_later_pass() {
        assert_eq!(workload_steps(true, "h1", None, None), vec![Apply]);
        assert_eq!(
            workload_steps(true, "h1", None, Some(&meta(Some("h1")))),
            vec![]
        );
        assert_eq!(
            workload_steps(true, "h2", None, Some(&meta(Some("h1")))),
            vec![DeleteJob]
        );
        assert_eq!(
            workload_steps(true, "h1", Some(&meta(Some("h1"))), None),
            vec![DeleteDeployment, Apply]
        );
        assert_eq!(
            workload_steps(true, "h2", Some(&meta(None)), Some(&meta(Some("h1")))),
            vec![DeleteDeployment, DeleteJob]
        );
    }
}
