//! The thin I/O shell: observe, plan, act, write status.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use dcs_crds::{DorisChangelogSync, conditions::reasons, spec::Credentials};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        batch::v1::Job,
        core::v1::{ConfigMap, Pod, Secret, ServiceAccount},
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::{
        controller::Action,
        events::{Event as KubeEvent, EventType, Recorder, Reporter},
    },
};
use serde::{Serialize, de::DeserializeOwned};
use tracing::{info, instrument, warn};

use super::{
    build::{self, NONCE_ANNOTATION, RunnerObjects, Workload, names},
    plan::{Observed, Plan, ProbeFailure, RunnerState, SourceProbe, consumer_id_for, plan},
    status::{WrittenStatus, compute_status, current_status, differs, notices, remember_write},
};
use crate::{
    Error, Result,
    checkpoint::{CHECKPOINT_KEY, Checkpoint},
    cleanup::{self, AfterFailure, RetryPolicy, Targets, Why, Work},
    probe::{CREDENTIALS_MISSING, DorisCredentials, probe_sink, probe_source},
};

/// The finalizer the operator puts on every sync.
pub const FINALIZER: &str = "dcs.dev/cleanup";
/// The one field manager of every write.
pub const FIELD_MANAGER: &str = "dcs-operator";
/// How long table facts are trusted before the source is probed again.
pub const REPROBE_INTERVAL: Duration = Duration::from_secs(180);
/// Annotation on the workload with the hash of its whole built form.
const OBJECT_HASH_ANNOTATION: &str = "dcs.dev/object-hash";
/// Annotation on a deleting sync: failed cleanup attempts so far.
pub const CLEANUP_ATTEMPTS_ANNOTATION: &str = "dcs.dev/cleanup-attempts";
/// Annotation on a deleting sync: not before this time (RFC 3339) is cleanup tried again.
pub const CLEANUP_NEXT_ANNOTATION: &str = "dcs.dev/cleanup-next-attempt";
/// Annotation on a deleting sync: why the last cleanup attempt failed.
pub const CLEANUP_ERROR_ANNOTATION: &str = "dcs.dev/cleanup-last-error";
/// How long past a runner pod's grace period the cleanup waits for it by default.
pub const DEFAULT_POD_WAIT_MARGIN: Duration = Duration::from_secs(30);
/// Annotation set on the checkpoint ConfigMap of a deleted sync: changing the ConfigMap's
/// resourceVersion fences a still-running runner (its next save fails and it stops).
pub const FENCED_ANNOTATION: &str = "dcs.dev/fenced";

/// Shared state of the reconciler.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The operator's `--runner-image`, if given.
    pub runner_image: Option<String>,
    /// Publishes Kubernetes Events about the syncs.
    pub recorder: Recorder,
    /// Table facts per sync (namespace/name), with when and for which generation they were read.
    pub probes: Mutex<HashMap<String, CachedProbe>>,
    /// Retries of a deleted sync's Doris cleanup before the finalizer is released anyway.
    pub cleanup_policy: RetryPolicy,
    /// How long past a runner pod's grace period the cleanup waits for it before going on.
    pub pod_wait_margin: Duration,
    /// Since when the cleanup of a sync (namespace/name) waits for its runner pods to go.
    pub pod_waits: Mutex<HashMap<String, PodWaitState>>,
    /// The status last written to each sync (by uid), for while the watch cache lags behind it.
    pub written: Mutex<HashMap<String, WrittenStatus>>,
    /// How many syncs are reconciled at once (each probes Doris and talks to the API server).
    pub max_concurrent_reconciles: u16,
}

/// The default of [`Context::max_concurrent_reconciles`].
pub const DEFAULT_MAX_CONCURRENT_RECONCILES: u16 = 16;

/// A wait for a sync's runner pods to stop.
#[derive(Clone, Copy, Debug)]
pub struct PodWaitState {
    since: Timestamp,
    reported: bool,
}

/// A cached probe result.
#[derive(Clone, Debug)]
pub struct CachedProbe {
    at: Instant,
    generation: Option<i64>,
    result: Result<SourceProbe, ProbeFailure>,
    sink: Result<(), ProbeFailure>,
}

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
            runner_image,
            probes: Mutex::new(HashMap::new()),
            cleanup_policy: RetryPolicy::default(),
            pod_wait_margin: DEFAULT_POD_WAIT_MARGIN,
            pod_waits: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            max_concurrent_reconciles: DEFAULT_MAX_CONCURRENT_RECONCILES,
        }
    }
}

/// Reconciles one sync: the finalizer, then [`apply`]; a deleted sync is cleaned up and let go.
///
/// The finalizer is added and removed with merge patches guarded by resourceVersion rather than
/// kube's `finalizer()` helper, because a cleanup waiting between retries must return without an
/// error and without releasing the finalizer, which that helper cannot express.
///
/// # Errors
/// Any API failure; the controller backs off and retries.
#[instrument(skip(sync, ctx), fields(sync = %sync.name_any(), namespace = sync.namespace().unwrap_or_default()))]
pub async fn reconcile(sync: Arc<DorisChangelogSync>, ctx: Arc<Context>) -> Result<Action> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), &ns);
    let has_finalizer = sync.finalizers().iter().any(|f| f == FINALIZER);
    if sync.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return match cleanup(&sync, &ctx).await? {
            Some(wait) => Ok(Action::requeue(wait)),
            None => {
                release_finalizer(&api, &*sync).await?;
                if let Some(uid) = sync.uid() {
                    ctx.written.lock().expect("written lock").remove(&uid);
                }
                Ok(Action::await_change())
            }
        };
    }
    if !has_finalizer {
        let mut finalizers = sync.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": sync.resource_version(),
        }});
        // Go on with the patched object: the watch cache may not show the finalizer yet, and a
        // pass from it would try to add it again with a stale resourceVersion (409).
        let patched = api
            .patch(
                &sync.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::Kube)?;
        return apply(&patched, &ctx).await;
    }
    apply(&sync, &ctx).await
}

async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(Error::Kube)
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

async fn delete_quietly<K>(api: &Api<K>, name: &str) -> Result<bool>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(Error::Kube(e)),
    }
}

async fn server_apply<K>(api: &Api<K>, name: &str, object: &K) -> Result<()>
where
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}

async fn read_credentials(
    client: &Client,
    ns: &str,
    credentials: &Credentials,
    field: &str,
) -> Result<DorisCredentials, ProbeFailure> {
    read_credentials_or_gone(client, ns, credentials, field)
        .await
        .map_err(|(failure, _)| failure)
}

/// As [`read_credentials`]; the error says too whether the Secret does not exist.
async fn read_credentials_or_gone(
    client: &Client,
    ns: &str,
    credentials: &Credentials,
    field: &str,
) -> Result<DorisCredentials, (ProbeFailure, bool)> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = &credentials.secret_name;
    let secret = secrets.get_opt(name).await.map_err(|e| {
        (
            ProbeFailure {
                reason: CREDENTIALS_MISSING,
                message: format!("cannot read Secret {ns}/{name}: {e}"),
            },
            false,
        )
    })?;
    let Some(secret) = secret else {
        return Err((
            ProbeFailure {
                reason: CREDENTIALS_MISSING,
                message: format!(
                    "Secret {ns}/{name} named in {field} does not exist; create it with keys {} and {}",
                    credentials.username_key, credentials.password_key
                ),
            },
            true,
        ));
    };
    let data = secret.data.unwrap_or_default();
    let value = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .ok_or_else(|| {
                (
                    ProbeFailure {
                        reason: CREDENTIALS_MISSING,
                        message: format!(
                            "Secret {ns}/{name} has no key {key:?}; add it or set {field}"
                        ),
                    },
                    false,
                )
            })
    };
    Ok(DorisCredentials {
        username: value(&credentials.username_key)?,
        password: value(&credentials.password_key)?,
    })
}

/// The source probe (table facts cached, Doris's time read every time) and the sink probe.
async fn probe(
    sync: &DorisChangelogSync,
    ctx: &Context,
    ns: &str,
) -> (Result<SourceProbe, ProbeFailure>, Result<(), ProbeFailure>) {
    let key = format!("{ns}/{}", sync.name_any());
    let generation = sync.metadata.generation;
    let cached = ctx
        .probes
        .lock()
        .expect("probe cache lock")
        .get(&key)
        .cloned()
        .filter(|c| c.generation == generation && c.at.elapsed() < REPROBE_INTERVAL);
    let credentials = match read_credentials(
        &ctx.client,
        ns,
        &sync.spec.source.credentials,
        "spec.source.credentials",
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return (Err(e), Ok(())),
    };
    match cached {
        Some(c) => match c.result {
            // Doris's time is read on every reconcile; only the table facts are cached.
            Ok(facts) => (
                Ok(SourceProbe {
                    doris_now_ms: match sync.spec.source.fe_nodes.first() {
                        Some(fe) => crate::probe::doris_now_ms(fe, &credentials).await,
                        None => None,
                    },
                    ..facts
                }),
                c.sink,
            ),
            Err(e) => (Err(e), c.sink),
        },
        None => {
            let result = probe_source(&sync.spec.source, &credentials).await;
            let sink = match &sync.spec.sink.doris {
                None => Ok(()),
                Some(d) => match read_credentials(
                    &ctx.client,
                    ns,
                    &d.credentials,
                    "spec.sink.doris.credentials",
                )
                .await
                {
                    Ok(creds) => probe_sink(&d.fe_nodes, &creds).await,
                    Err(e) => Err(e),
                },
            };
            ctx.probes.lock().expect("probe cache lock").insert(
                key,
                CachedProbe {
                    at: Instant::now(),
                    generation,
                    result: result.clone(),
                    sink: sink.clone(),
                },
            );
            (result, sink)
        }
    }
}

/// The runner workload as found.
struct RunnerFound {
    state: RunnerState,
    /// Container restarts over the runner's pods; `None` without pods.
    restarts: Option<i32>,
    deployment: Option<Deployment>,
    job: Option<Job>,
}

async fn runner_state(ctx: &Context, ns: &str, name: &str) -> Result<RunnerFound> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    let deployment = get_opt(&deployments, &names::runner(name)).await?;
    let job = get_opt(&jobs, &names::runner(name)).await?;
    let workload = |state, restarts| RunnerFound {
        state,
        restarts,
        deployment: deployment.clone(),
        job: job.clone(),
    };
    if let Some(job) = &job {
        let status = job.status.clone().unwrap_or_default();
        if status.succeeded.unwrap_or(0) > 0 {
            return Ok(workload(RunnerState::Succeeded, None));
        }
        let failed = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Failed" && c.status == "True");
        if let Some(c) = failed {
            let message = c.message.unwrap_or(c.reason.unwrap_or_default());
            return Ok(workload(RunnerState::Failed { message }, None));
        }
    }
    if deployment.is_none() && job.is_none() {
        return Ok(workload(RunnerState::Absent, None));
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    let mut restarts = None;
    let mut crash_loop = None;
    for pod in list.items {
        for cs in pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
        {
            *restarts.get_or_insert(0) += cs.restart_count;
            let waiting = cs.state.as_ref().and_then(|s| s.waiting.as_ref());
            if crash_loop.is_none()
                && waiting.and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff")
            {
                let terminated = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
                let message = terminated
                    .and_then(|t| t.message.clone().or(t.reason.clone()))
                    .unwrap_or_else(|| "CrashLoopBackOff".to_owned());
                crash_loop = Some(RunnerState::CrashLooping {
                    restarts: cs.restart_count,
                    message,
                });
            }
        }
    }
    Ok(workload(
        crash_loop.unwrap_or(RunnerState::Running),
        restarts,
    ))
}

/// Observes, plans, acts and writes status.
async fn apply(sync: &DorisChangelogSync, ctx: &Context) -> Result<Action> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let name = sync.name_any();
    let client = &ctx.client;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);

    let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
    let config_cm = get_opt(&configmaps, &names::config(&name)).await?;
    let applied_nonce = config_cm
        .as_ref()
        .and_then(|cm| cm.annotations().get(NONCE_ANNOTATION).cloned());
    let RunnerFound {
        state: runner,
        restarts: runner_restarts,
        deployment,
        job,
    } = runner_state(ctx, &ns, &name).await?;

    let uid = sync.uid().unwrap_or_default();
    let last_written = ctx.written.lock().expect("written lock").get(&uid).cloned();
    let cached_version = sync.resource_version();
    let status = current_status(
        cached_version.as_deref(),
        sync.status.as_ref(),
        last_written.as_ref(),
    );
    let old_status = status.clone();
    let skip_probe = sync.spec.suspend || dcs_crds::validate(&sync.spec).is_err();
    let (probe, sink_probe) = if skip_probe {
        (
            Err(ProbeFailure {
                reason: reasons::SUSPENDED,
                message:
                    "the source is not probed while the sync is suspended or its spec is invalid"
                        .into(),
            }),
            Ok(()),
        )
    } else {
        probe(sync, ctx, &ns).await
    };

    let mut observed = Observed {
        name: name.clone(),
        spec: sync.spec.clone(),
        generation: sync.metadata.generation,
        deleting: false,
        probe,
        sink_probe,
        checkpoint: None,
        checkpoint_error: None,
        status,
        applied_nonce,
        runner,
        runner_restarts,
    };
    let active = consumer_id_for(
        &super::plan::base_consumer_id(&observed),
        super::plan::consumer_generation(&observed),
    );
    let stored = checkpoint_cm
        .as_ref()
        .and_then(build::checkpoint_text)
        .map(crate::checkpoint::parse);
    match stored {
        Some(Ok(Some(cp))) if cp.consumer_id == active => observed.checkpoint = Some(cp),
        Some(Err(e)) => observed.checkpoint_error = Some(e),
        _ => {}
    }

    let decision = plan(&observed);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
    let runner_name = names::runner(&name);
    let mut requeue = Duration::from_secs(60);
    match &decision {
        Plan::Cleanup => {}
        Plan::Block(_) | Plan::Suspend | Plan::Fail { .. } => {
            if deployment.is_some() {
                delete_quietly(&deployments, &runner_name).await?;
            }
            if job.is_some() {
                delete_quietly(&jobs, &runner_name).await?;
            }
        }
        Plan::Reinitialize(r) => {
            info!(previous = %r.previous_consumer_id, consumer = %r.consumer_id, reason = r.reason, "reinitializing");
            delete_quietly(&deployments, &runner_name).await?;
            delete_quietly(&jobs, &runner_name).await?;
            // The stopping runner may still save a checkpoint or pre-commit a load: nothing is
            // read or changed until its pods are gone (status included, so the plan stays).
            if let Some(wait) = wait_for_runner_pods(ctx, sync, &ns, &name).await? {
                return Ok(Action::requeue(wait));
            }
            let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
            let stored_checkpoint = checkpoint_cm
                .as_ref()
                .and_then(build::checkpoint_text)
                .and_then(|t| crate::checkpoint::parse(t).ok().flatten());
            // Before the checkpoint (which lists the pending transactions) is cleared: a failure
            // here leaves everything as it was, and the next pass tries the reinit again.
            let mut work = cleanup::plan_cleanup(
                &ns,
                &sync.spec,
                stored_checkpoint.as_ref(),
                &r.previous_consumer_id,
                Why::Reinitialized,
            );
            if checkpoint_cm.is_none() {
                // No runner ever ran (the ConfigMap comes with the first): no load to look for.
                work.stale_labels = None;
            }
            if !work.is_empty() {
                let report = cleanup::execute(&work, &targets(sync, ctx, &ns).await).await;
                if report.errors.is_empty() {
                    info!(done = %cleanup::cleaned_note(&work, &report), "cleaned the old consumer's state in Doris");
                    forget_pod_wait(ctx, &ns, &name);
                } else {
                    let note = format!(
                        "cannot re-initialise yet, the old consumer's state in Doris could not be removed: {}; left: {}; retrying",
                        report.errors.join("; "),
                        report.left.describe()
                    );
                    publish(ctx, sync, true, "ReinitCleanupFailed", note.clone()).await;
                    return Err(Error::Cleanup(note));
                }
            }
            if checkpoint_cm.is_some() {
                // Also fences a runner pod that outlived the wait.
                let clear = serde_json::json!({"data": {CHECKPOINT_KEY: null}});
                configmaps
                    .patch(
                        &names::checkpoint(&name),
                        &PatchParams::default(),
                        &Patch::Merge(&clear),
                    )
                    .await
                    .map_err(Error::Kube)?;
            }
            requeue = Duration::from_secs(1);
        }
        Plan::Run(run) => {
            if let Some(w) = &run.probe_warning {
                warn!(warning = %w, "source probe failed; keeping the runner");
            }
            let objects = build::build(sync, run, ctx.runner_image.as_deref());
            launch(
                ctx,
                &ns,
                &objects,
                checkpoint_cm.is_none(),
                deployment.as_ref(),
                job.as_ref(),
            )
            .await?;
            if let Some(h) = crate::reconcile::status::headroom_hint(&observed) {
                requeue = h;
            }
        }
    }

    let new_status = compute_status(&observed, &decision, Timestamp::now());
    for notice in notices(&old_status, &new_status) {
        publish(ctx, sync, notice.warning, &notice.reason, notice.note).await;
    }
    if differs(&old_status, &new_status) {
        let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), &ns);
        let body = serde_json::json!({
            "apiVersion": DorisChangelogSync::api_version(&()),
            "kind": DorisChangelogSync::kind(&()),
            "status": new_status,
        });
        let updated = api
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(Error::Kube)?;
        let remembered = remember_write(
            cached_version.as_deref(),
            last_written.as_ref(),
            updated.resource_version(),
            new_status,
        );
        ctx.written
            .lock()
            .expect("written lock")
            .insert(uid, remembered);
    }
    if let Plan::Reinitialize(_) = decision
        && config_cm.is_some()
    {
        // After the status holds the new consumer: remember the nonce this reinit answered, so the
        // same nonce does not reinitialize again.
        let patch = serde_json::json!({"metadata": {"annotations": {
            NONCE_ANNOTATION: sync.spec.reinit_nonce,
        }}});
        configmaps
            .patch(
                &names::config(&name),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Error::Kube)?;
    }
    Ok(Action::requeue(requeue))
}

/// Creates or updates the runner objects; a workload whose built form did not change is not written.
async fn launch(
    ctx: &Context,
    ns: &str,
    objects: &RunnerObjects,
    create_checkpoint: bool,
    deployment: Option<&Deployment>,
    job: Option<&Job>,
) -> Result<()> {
    let client = &ctx.client;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let config_name = objects.config.name_any();
    server_apply(&configmaps, &config_name, &objects.config).await?;
    if create_checkpoint {
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
    let hash_of = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(OBJECT_HASH_ANNOTATION).cloned())
    };
    match &objects.workload {
        Workload::Deployment(d) => {
            let mut d = (**d).clone();
            let hash = hash_of_object(&d, "Deployment")?;
            if job.is_some() {
                delete_quietly(&jobs, &d.name_any()).await?;
            }
            if deployment.and_then(|x| hash_of(&x.metadata)).as_deref() != Some(hash.as_str()) {
                d.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(OBJECT_HASH_ANNOTATION.to_owned(), hash);
                server_apply(&deployments, &d.name_any(), &d).await?;
            }
        }
        Workload::Job(j) => {
            let mut j = (**j).clone();
            let hash = hash_of_object(&j, "Job")?;
            if deployment.is_some() {
                delete_quietly(&deployments, &j.name_any()).await?;
            }
            let existing = job.and_then(|x| hash_of(&x.metadata));
            if existing.as_deref() != Some(hash.as_str()) {
                if job.is_some() {
                    // A Job's template cannot change: replace it.
                    delete_quietly(&jobs, &j.name_any()).await?;
                } else {
                    j.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert(OBJECT_HASH_ANNOTATION.to_owned(), hash);
                    server_apply(&jobs, &j.name_any(), &j).await?;
                }
            }
        }
    }
    Ok(())
}

/// The content hash of a workload as it is about to be applied (before the hash annotation is set).
fn hash_of_object(object: &impl Serialize, what: &'static str) -> Result<String> {
    let text = serde_json::to_string(object).map_err(|source| Error::Serialize { what, source })?;
    Ok(build::content_hash(&text))
}

/// Publishes an event about `sync`; a failure is only logged.
async fn publish(
    ctx: &Context,
    sync: &DorisChangelogSync,
    warning: bool,
    reason: &str,
    note: String,
) {
    let event = KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(event_note(note)),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &sync.object_ref(&())).await {
        warn!(error = %e, "cannot publish an event");
    }
}

/// The API server rejects an `events.k8s.io/v1` Event whose note is longer than 1 KiB: longer
/// notes are cut (at a character boundary) and say so, rather than the event being lost.
pub(crate) fn event_note(mut note: String) -> String {
    const MAX: usize = 1024;
    const CUT: &str = " [...]";
    if note.len() > MAX {
        let mut end = MAX - CUT.len();
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str(CUT);
    }
    note
}

/// Where the cleanup reaches Doris, with the credentials read from the Secrets.
async fn targets(sync: &DorisChangelogSync, ctx: &Context, ns: &str) -> Targets {
    let spec = &sync.spec;
    let mut secrets_gone = Vec::new();
    let mut read = async |credentials: &Credentials, field: &str| {
        read_credentials_or_gone(&ctx.client, ns, credentials, field)
            .await
            .map_err(|(failure, gone)| {
                let secret = format!("{ns}/{}", credentials.secret_name);
                if gone && !secrets_gone.contains(&secret) {
                    secrets_gone.push(secret);
                }
                failure.message
            })
    };
    let sink_credentials = match &spec.sink.doris {
        Some(d) => read(&d.credentials, "spec.sink.doris.credentials").await,
        None => Err("the sink is not Doris".to_owned()),
    };
    let source_credentials = read(&spec.source.credentials, "spec.source.credentials").await;
    Targets {
        sink_fe_nodes: spec
            .sink
            .doris
            .as_ref()
            .map(|d| d.fe_nodes.clone())
            .unwrap_or_default(),
        sink_query_port: cleanup::sink_query_port(spec),
        sink_credentials,
        source_fe_nodes: spec.source.fe_nodes.clone(),
        source_query_port: u16::try_from(spec.source.query_port).unwrap_or(9030),
        source_credentials,
        secrets_gone,
    }
}

/// After the runner's workload was deleted: `Some(wait)` while its pods are still stopping (a
/// stopping runner may still pre-commit a load or save a checkpoint, so the checkpoint is read
/// only after they are gone). A pod past its grace period and [`Context::pod_wait_margin`] is
/// given up on, with a Warning event, and `None` is returned as when they are gone.
async fn wait_for_runner_pods(
    ctx: &Context,
    sync: &DorisChangelogSync,
    ns: &str,
    name: &str,
) -> Result<Option<Duration>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    let running: Vec<cleanup::RunnerPod> = list
        .items
        .into_iter()
        .filter(|p| {
            // A finished pod (a Job's) runs nothing any more.
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .map(|p| cleanup::RunnerPod {
            name: p.name_any(),
            deleting_until: p.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            grace: Duration::from_secs(
                p.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
                    .and_then(|g| u64::try_from(g).ok())
                    .unwrap_or(30),
            ),
        })
        .collect();
    let key = format!("{ns}/{name}");
    if running.is_empty() {
        ctx.pod_waits.lock().expect("pod wait lock").remove(&key);
        return Ok(None);
    }
    let now = Timestamp::now();
    let state = *ctx
        .pod_waits
        .lock()
        .expect("pod wait lock")
        .entry(key.clone())
        .or_insert(PodWaitState {
            since: now,
            reported: false,
        });
    match cleanup::runner_pods_wait(&running, state.since, now, ctx.pod_wait_margin) {
        cleanup::PodWait::Gone => Ok(None),
        cleanup::PodWait::Wait(wait) => {
            info!(
                pods = running.len(),
                "waiting for the runner's pods to stop before reading its checkpoint"
            );
            Ok(Some(wait))
        }
        cleanup::PodWait::Overdue(names) => {
            if !state.reported {
                let note = format!(
                    "runner pod(s) {} still there {}s past their grace period; cleaning up without waiting any longer: a load such a pod pre-commits from now on is left to Doris's transaction timeout",
                    names.join(", "),
                    ctx.pod_wait_margin.as_secs()
                );
                warn!(%note, "runner pods did not stop");
                publish(ctx, sync, true, "RunnerPodsLingering", note).await;
                if let Some(s) = ctx.pod_waits.lock().expect("pod wait lock").get_mut(&key) {
                    s.reported = true;
                }
            }
            Ok(None)
        }
    }
}

/// Forgets the pod wait of a sync once its cleanup is over.
fn forget_pod_wait(ctx: &Context, ns: &str, name: &str) {
    ctx.pod_waits
        .lock()
        .expect("pod wait lock")
        .remove(&format!("{ns}/{name}"));
}

fn annotation<'a>(sync: &'a DorisChangelogSync, key: &str) -> Option<&'a str> {
    sync.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Cleans up after a deleted sync: stops the runner, fences its checkpoint, waits for its pods to
/// go, then aborts the checkpoint's pending transactions and the loads pre-committed after it and
/// deletes its offset-table row. `Ok(None)` when the finalizer can go (done, or given up after the
/// retry policy's attempts or at once when a credentials Secret is gone, with a Warning event
/// naming what was left); `Ok(Some(wait))` to look again later. Owned objects go with the sync
/// through owner references.
async fn cleanup(sync: &DorisChangelogSync, ctx: &Context) -> Result<Option<Duration>> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let name = sync.name_any();
    ctx.probes
        .lock()
        .expect("probe cache lock")
        .remove(&format!("{ns}/{name}"));
    let now = Timestamp::now();
    let next = annotation(sync, CLEANUP_NEXT_ANNOTATION).and_then(|t| t.parse::<Timestamp>().ok());
    if let Some(wait) = cleanup::wait_before_attempt(next, now) {
        return Ok(Some(wait));
    }

    // Stop the runner first, then fence it off its checkpoint, so no new transactions appear.
    let client = &ctx.client;
    let runner_name = names::runner(&name);
    delete_quietly(
        &Api::<Deployment>::namespaced(client.clone(), &ns),
        &runner_name,
    )
    .await?;
    delete_quietly(&Api::<Job>::namespaced(client.clone(), &ns), &runner_name).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
    if let Some(cm) = &checkpoint_cm
        && !cm.annotations().contains_key(FENCED_ANNOTATION)
    {
        let patch =
            serde_json::json!({"metadata": {"annotations": {FENCED_ANNOTATION: "deleted"}}});
        match configmaps
            .patch(
                &cm.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    // A stopping runner may still pre-commit a load (and, fenced, abort it again): the checkpoint
    // and the labels after it are read once its pods are gone.
    if let Some(wait) = wait_for_runner_pods(ctx, sync, &ns, &name).await? {
        return Ok(Some(wait));
    }
    let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
    let checkpoint: Option<Checkpoint> = checkpoint_cm
        .as_ref()
        .and_then(build::checkpoint_text)
        .and_then(|t| crate::checkpoint::parse(t).ok().flatten());

    let consumer = sync
        .status
        .as_ref()
        .and_then(|s| s.consumer_id.clone())
        .unwrap_or_else(|| sync.consumer_id());
    let mut work = cleanup::plan_cleanup(
        &ns,
        &sync.spec,
        checkpoint.as_ref(),
        &consumer,
        Why::Deleted,
    );
    if checkpoint_cm.is_none() {
        // The checkpoint ConfigMap is created with the first runner: without it none ever ran
        // (e.g. a sync blocked from the start), so no load can be pre-committed.
        work.stale_labels = None;
    }
    if work.is_empty() {
        info!("sync deleted; nothing to clean in Doris; its runner objects go with it");
        forget_pod_wait(ctx, &ns, &name);
        return Ok(None);
    }
    let targets = targets(sync, ctx, &ns).await;
    let report = cleanup::execute(&work, &targets).await;
    if report.errors.is_empty() {
        let note = cleanup::cleaned_note(&work, &report);
        info!(%note, "sync deleted; cleaned its state in Doris");
        publish(ctx, sync, false, "CleanedUp", note).await;
        forget_pod_wait(ctx, &ns, &name);
        return Ok(None);
    }
    let attempts = annotation(sync, CLEANUP_ATTEMPTS_ANNOTATION)
        .and_then(|a| a.parse::<u32>().ok())
        .unwrap_or(0)
        + 1;
    let errors = report.errors.join("; ");
    if !targets.secrets_gone.is_empty() {
        // Typically the namespace is being deleted and took the Secret with it: no retry can
        // read the credentials again.
        let note = secret_gone_note(&targets.secrets_gone, &errors, &report.left);
        warn!(%note, "giving up the cleanup of a deleted sync");
        publish(ctx, sync, true, "CleanupAbandoned", note).await;
        forget_pod_wait(ctx, &ns, &name);
        return Ok(None);
    }
    match cleanup::after_failure(attempts, ctx.cleanup_policy) {
        AfterFailure::GiveUp => {
            let note = left_behind_note(attempts, &errors, &report.left);
            warn!(%note, "giving up the cleanup of a deleted sync");
            publish(ctx, sync, true, "CleanupAbandoned", note).await;
            forget_pod_wait(ctx, &ns, &name);
            Ok(None)
        }
        AfterFailure::Retry(wait) => {
            warn!(attempt = attempts, error = %errors, retry_in = ?wait, "cleanup of a deleted sync failed");
            let next = now
                .checked_add(k8s_openapi::jiff::SignedDuration::try_from(wait).unwrap_or_default())
                .unwrap_or(now);
            let patch = serde_json::json!({"metadata": {"annotations": {
                CLEANUP_ATTEMPTS_ANNOTATION: attempts.to_string(),
                CLEANUP_NEXT_ANNOTATION: next.to_string(),
                CLEANUP_ERROR_ANNOTATION: errors,
            }}});
            let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), &ns);
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(Error::Kube(e)),
            }
            Ok(Some(wait))
        }
    }
}

/// How to remove what a given-up cleanup left, by hand.
const BY_HAND: &str = "Remove them by hand (curl -X PUT -H 'txn_id: <id>' (or -H 'label: <label>') -H 'txn_operation: abort' http://<sink-fe>/api/<db>/<table>/_stream_load_2pc; DELETE FROM <offset table> WHERE consumer_id = '<id>') or let Doris time the transactions out";

/// The Warning note when cleanup is given up because a credentials Secret is gone (pure).
pub fn secret_gone_note(secrets: &[String], errors: &str, left: &Work) -> String {
    format!(
        "gave up cleaning Doris at once and released the finalizer: the credentials Secret {} is gone (deleted with the namespace?), so retrying cannot help; left behind: {}. Last error: {errors}. {BY_HAND}",
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
    use super::event_note;

    #[test]
    fn event_notes_fit_the_api_servers_limit() {
        assert_eq!(event_note("short".into()), "short");
        let long = "é".repeat(700);
        let cut = event_note(long.clone());
        assert!(
            cut.len() <= 1024 && cut.ends_with(" [...]"),
            "{}",
            cut.len()
        );
        assert!(long.starts_with(cut.trim_end_matches(" [...]")));
    }
}
