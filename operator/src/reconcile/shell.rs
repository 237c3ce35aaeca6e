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
    plan::{
        Observed, Plan, ProbeFailure, RunnerExit, RunnerState, SourceProbe, consumer_id_for, plan,
    },
    status::{WrittenStatus, compute_status, current_status, differs, notices, remember_write},
    stop::{self, FENCED_ANNOTATION, Purpose, STOPPING_ANNOTATION, StopMark, StopStep},
};
use crate::{
    Error, Result,
    checkpoint::{CHECKPOINT_KEY, Checkpoint},
    cleanup::{self, AfterFailure, RetryPolicy, Targets, Work},
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
                // The cleanup may have annotated the object (its stop mark): release the
                // finalizer on the version it left.
                let current = get_opt(&api, &sync.name_any()).await?;
                if let Some(current) = &current {
                    release_finalizer(&api, current).await?;
                }
                if let Some(uid) = sync.uid() {
                    ctx.written
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .remove(&uid);
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
    sync: &str,
    credentials: &Credentials,
    field: &str,
) -> Result<DorisCredentials, ProbeFailure> {
    read_credentials_or_gone(client, ns, sync, credentials, field)
        .await
        .map_err(|(failure, _)| failure)
}

/// The credentials in the Secret `credentials` names, when it allows the sync `sync` to use
/// them; the error says too whether the Secret is out of reach for good (it does not exist, or
/// does not allow the sync).
async fn read_credentials_or_gone(
    client: &Client,
    ns: &str,
    sync: &str,
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
    // The keys are read, and sent anywhere, only when the Secret opted in to this sync; a Secret
    // that did not is, for cleanup, as good as gone (nothing may be done with it).
    if !dcs_crds::access::secret_allows(secret.metadata.annotations.as_ref(), sync) {
        return Err((
            ProbeFailure {
                reason: reasons::CREDENTIALS_NOT_ALLOWED,
                message: dcs_crds::access::secret_not_allowed_message(ns, name, sync, field),
            },
            true,
        ));
    }
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
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
        .cloned()
        .filter(|c| c.generation == generation && c.at.elapsed() < REPROBE_INTERVAL);
    let credentials = match read_credentials(
        &ctx.client,
        ns,
        &sync.name_any(),
        &sync.spec.source.credentials,
        "spec.source.credentials",
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return (Err(e), Ok(())),
    };
    // Both Secrets are read on every reconcile, cached probe or not: a Secret whose annotation
    // stops allowing the sync (or that goes) is seen at once.
    let sink_credentials = match &sync.spec.sink.doris {
        None => None,
        Some(d) => Some(
            read_credentials(
                &ctx.client,
                ns,
                &sync.name_any(),
                &d.credentials,
                "spec.sink.doris.credentials",
            )
            .await,
        ),
    };
    match cached {
        Some(c) => {
            let sink = match sink_credentials {
                Some(Err(e)) => Err(e),
                _ => c.sink,
            };
            match c.result {
                // Doris's time is read on every reconcile; only the table facts are cached.
                Ok(facts) => (
                    Ok(SourceProbe {
                        doris_now_ms: match sync.spec.source.fe_nodes.first() {
                            Some(fe) => crate::probe::doris_now_ms(fe, &credentials).await,
                            None => None,
                        },
                        ..facts
                    }),
                    sink,
                ),
                Err(e) => (Err(e), sink),
            }
        }
        None => {
            let result = probe_source(&sync.spec.source, &credentials).await;
            let sink = match (&sync.spec.sink.doris, sink_credentials) {
                (Some(d), Some(Ok(creds))) => probe_sink(&d.fe_nodes, &creds).await,
                (_, Some(Err(e))) => Err(e),
                _ => Ok(()),
            };
            ctx.probes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(
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
    /// The latest termination of a runner container.
    exit: Option<RunnerExit>,
    deployment: Option<Deployment>,
    job: Option<Job>,
}

async fn runner_state(ctx: &Context, ns: &str, name: &str) -> Result<RunnerFound> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    let deployment = get_opt(&deployments, &names::runner(name)).await?;
    let job = get_opt(&jobs, &names::runner(name)).await?;
    let workload = |state, restarts, exit| RunnerFound {
        state,
        restarts,
        exit,
        deployment: deployment.clone(),
        job: job.clone(),
    };
    if let Some(job) = &job {
        let status = job.status.clone().unwrap_or_default();
        if status.succeeded.unwrap_or(0) > 0 {
            return Ok(workload(RunnerState::Succeeded, None, None));
        }
        let failed = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Failed" && c.status == "True");
        if let Some(c) = failed {
            let message = c.message.unwrap_or(c.reason.unwrap_or_default());
            return Ok(workload(RunnerState::Failed { message }, None, None));
        }
    }
    if deployment.is_none() && job.is_none() {
        return Ok(workload(RunnerState::Absent, None, None));
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    let mut restarts = None;
    let mut crash_loop = None;
    let mut exit: Option<(Option<Timestamp>, RunnerExit)> = None;
    for pod in list.items {
        let pod_name = pod.name_any();
        for cs in pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
        {
            *restarts.get_or_insert(0) += cs.restart_count;
            let terminations = [
                cs.state.as_ref().and_then(|s| s.terminated.as_ref()),
                cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()),
            ];
            for t in terminations.into_iter().flatten() {
                let finished = t.finished_at.as_ref().map(|f| f.0);
                if exit.as_ref().is_none_or(|(at, _)| finished > *at) {
                    let message = t.message.clone().or(t.reason.clone()).unwrap_or_default();
                    exit = Some((
                        finished,
                        RunnerExit {
                            pod: pod_name.clone(),
                            code: t.exit_code,
                            message,
                        },
                    ));
                }
            }
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
        exit.map(|(_, e)| e),
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
        exit: runner_exit,
        deployment,
        job,
    } = runner_state(ctx, &ns, &name).await?;

    let uid = sync.uid().unwrap_or_default();
    let last_written = ctx
        .written
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&uid)
        .cloned();
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
        runner_allowed: ctx.runner.allows(&sync.spec),
        probe,
        sink_probe,
        checkpoint: None,
        checkpoint_error: None,
        status,
        applied_nonce,
        runner,
        runner_restarts,
        runner_exit,
        stopping: stop_mark(sync),
    };
    let active = consumer_id_for(
        &super::plan::base_consumer_id(&observed),
        super::plan::consumer_generation(&observed),
    );
    let stored = checkpoint_cm
        .as_ref()
        .and_then(build::checkpoint_text)
        .map(crate::checkpoint::parse);
    let mut earlier_checkpoint = false;
    match stored {
        Some(Ok(Some(cp))) if cp.consumer_id == active => observed.checkpoint = Some(cp),
        Some(Ok(Some(cp))) => {
            earlier_checkpoint = super::plan::is_earlier_consumer(&observed, &cp.consumer_id);
        }
        Some(Err(e)) => observed.checkpoint_error = Some(e),
        _ => {}
    }

    let mut decision = plan(&observed);
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
            let purpose = Purpose::Reinit {
                consumer: r.previous_consumer_id.clone(),
                reason: r.reason.to_owned(),
                message: r.message.clone(),
            };
            // The stopping runner may still save a checkpoint or pre-commit a load: nothing is
            // read or changed until its pods are gone or forced off; the status says so.
            match stop_runner(ctx, sync, &ns, &name, purpose).await? {
                Stopping::Waiting { message, recheck } => {
                    if let Plan::Reinitialize(r) = &mut decision {
                        r.waiting = Some(message);
                    }
                    requeue = recheck;
                }
                Stopping::Stopped => {
                    reinit_cleanup(ctx, sync, &ns, &name, r).await?;
                    requeue = Duration::from_secs(1);
                }
            }
        }
        Plan::Run(run) => {
            if earlier_checkpoint {
                // The checkpoint of the consumer this one replaced, left by a reinit interrupted
                // between its status write and the checkpoint's removal: its Doris state is
                // already cleaned; the new runner must not find it.
                clear_checkpoint(&configmaps, &name).await?;
            }
            if observed.stopping.is_some() {
                forget_stop(ctx, sync, &ns).await?;
            }
            if let Some(w) = &run.probe_warning {
                warn!(warning = %w, "source probe failed; keeping the runner");
            }
            let objects = build::build(sync, run, &ctx.runner);
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(uid, remembered);
    }
    if let Plan::Reinitialize(r) = &decision
        && r.waiting.is_none()
    {
        // After the status holds the new consumer (so an interruption here never relaunches the
        // old one on an empty checkpoint): the old checkpoint goes, which also fences a runner
        // pod that outlived the stop; the stop is over; the nonce this reinit answered is kept,
        // so the same nonce does not reinitialize again.
        if checkpoint_cm.is_some() {
            clear_checkpoint(&configmaps, &name).await?;
        }
        forget_stop(ctx, sync, &ns).await?;
        if config_cm.is_some() {
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
    let note = event_note(note);
    let event = KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        action: event_action(&note),
        note: Some(note),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &sync.object_ref(&())).await {
        warn!(error = %e, "cannot publish an event");
    }
}

/// The API server rejects an `events.k8s.io/v1` Event whose note is longer than 1 KiB: longer
/// notes are cut (at a character boundary) and say so, rather than the event being lost.
/// The event's action: `Reconcile/` and a digest of its note. The recorder merges events with the
/// same reason and action into one series that keeps the first note, so without the digest a
/// second re-initialisation (another consumer id) or a new Blocked message would only raise the
/// count of the first, and its own words would be lost. The same note repeated still merges.
fn event_action(note: &str) -> String {
    let digest = build::content_hash(note);
    format!("Reconcile/{}", &digest[..digest.len().min(8)])
}

pub(crate) fn event_note(note: String) -> String {
    dcs_crds::status::cut_text(note, 1024)
}

/// Where the cleanup reaches Doris, with the credentials read from the Secrets.
async fn targets(sync: &DorisChangelogSync, ctx: &Context, ns: &str) -> Targets {
    let spec = &sync.spec;
    let mut secrets_gone = Vec::new();
    let name = sync.name_any();
    let mut read = async |credentials: &Credentials, field: &str| {
        read_credentials_or_gone(&ctx.client, ns, &name, credentials, field)
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
        sink_credentials,
        source_fe_nodes: spec.source.fe_nodes.clone(),
        source_query_port: u16::try_from(spec.source.query_port).unwrap_or(9030),
        source_credentials,
        secrets_gone,
    }
}

/// The stop in progress recorded on `sync`, if any.
fn stop_mark(sync: &DorisChangelogSync) -> Option<StopMark> {
    annotation(sync, STOPPING_ANNOTATION).and_then(StopMark::from_annotation)
}

/// Where a stop of the runner stands.
enum Stopping {
    /// Pods are still stopping: the message for the status, and when to look again.
    Waiting { message: String, recheck: Duration },
    /// No runner pod is waited for any more: the checkpoint can be read.
    Stopped,
}

/// Stops the runner of `sync` for `purpose`, the one I/O path of a re-initialisation and a
/// deletion ([`stop`]): records the stop on the sync (once; its start survives restarts), deletes
/// the workload, fences the checkpoint ConfigMap, then waits for the runner's pods until their
/// grace period and [`Context::pod_wait_margin`] are over, and forces those still there off
/// (`gracePeriodSeconds: 0`, with a Warning event).
async fn stop_runner(
    ctx: &Context,
    sync: &DorisChangelogSync,
    ns: &str,
    name: &str,
    purpose: Purpose,
) -> Result<Stopping> {
    let client = &ctx.client;
    let mut mark = stop_mark(sync).filter(|m| m.same_stop(&purpose));
    if mark.is_none() {
        // The watch cache may not show a mark written by the last pass yet: ask the API server
        // before starting the clock again.
        let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), ns);
        mark = get_opt(&api, name)
            .await?
            .and_then(|fresh| stop_mark(&fresh))
            .filter(|m| m.same_stop(&purpose));
    }
    let mark = match mark {
        Some(mark) => mark,
        None => {
            let mark = StopMark {
                since: Timestamp::now(),
                purpose,
            };
            let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), ns);
            let patch = serde_json::json!({"metadata": {"annotations": {
                STOPPING_ANNOTATION: mark.to_annotation(),
            }}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::Kube)?;
            mark
        }
    };

    // Stop the runner, then fence it off its checkpoint, so no new transactions appear.
    let runner_name = names::runner(name);
    delete_quietly(
        &Api::<Deployment>::namespaced(client.clone(), ns),
        &runner_name,
    )
    .await?;
    delete_quietly(&Api::<Job>::namespaced(client.clone(), ns), &runner_name).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    if let Some(cm) = get_opt(&configmaps, &names::checkpoint(name)).await?
        && cm.annotations().get(FENCED_ANNOTATION) != Some(&mark.fence())
    {
        let patch =
            serde_json::json!({"metadata": {"annotations": {FENCED_ANNOTATION: mark.fence()}}});
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

    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = runner_pods(&pods_api, name).await?;
    let margin = ctx.pod_wait_margin;
    match stop::decide(&pods, mark.since, Timestamp::now(), margin) {
        StopStep::Proceed { lingering } => {
            if !lingering.is_empty() {
                info!(pods = ?lingering, "runner pods forced off are still listed; the checkpoint fence covers them");
            }
            Ok(Stopping::Stopped)
        }
        StopStep::Wait {
            pods,
            deadline,
            recheck,
        } => {
            info!(?pods, %deadline, "waiting for the runner's pods to stop before reading its checkpoint");
            let (why, consumer) = match &mark.purpose {
                Purpose::Reinit {
                    message, consumer, ..
                } => (message.as_str(), consumer.as_str()),
                Purpose::Deletion => ("the sync is being deleted", name),
            };
            Ok(Stopping::Waiting {
                message: stop::waiting_message(why, consumer, &pods, deadline),
                recheck,
            })
        }
        StopStep::Force { pods, deadline } => {
            let force = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::background()
            };
            for pod in &pods {
                match pods_api.delete(pod, &force).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(Error::Kube(e)),
                }
            }
            let still_there: Vec<String> = runner_pods(&pods_api, name)
                .await?
                .into_iter()
                .map(|p| p.name)
                .filter(|p| pods.contains(p))
                .collect();
            let note = stop::forced_note(&pods, deadline, margin, &still_there);
            warn!(%note, "runner pods did not stop");
            publish(ctx, sync, true, "RunnerPodsForceDeleted", note).await;
            Ok(Stopping::Stopped)
        }
    }
}

/// The runner pods of sync `name` that may still run (a finished Job pod runs nothing any more).
async fn runner_pods(pods: &Api<Pod>, name: &str) -> Result<Vec<stop::RunnerPod>> {
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .map(|p| stop::RunnerPod {
            name: p.name_any(),
            deleting_until: p.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            deletion_grace_seconds: p.metadata.deletion_grace_period_seconds,
            grace: p
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .and_then(|g| u64::try_from(g).ok())
                .map_or(stop::DEFAULT_GRACE, Duration::from_secs),
        })
        .collect())
}

/// Removes the stop mark from the sync once the stop's work is done (a stale one is removed too).
async fn forget_stop(ctx: &Context, sync: &DorisChangelogSync, ns: &str) -> Result<()> {
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), ns);
    let patch = serde_json::json!({"metadata": {"annotations": {STOPPING_ANNOTATION: null}}});
    match api
        .patch(
            &sync.name_any(),
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

/// Removes the checkpoint from the checkpoint ConfigMap: the resourceVersion moves, so a runner
/// that still holds the old one can no longer save.
async fn clear_checkpoint(configmaps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let clear = serde_json::json!({"data": {CHECKPOINT_KEY: null}});
    match configmaps
        .patch(
            &names::checkpoint(name),
            &PatchParams::default(),
            &Patch::Merge(&clear),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// What a stopped runner of `consumer` left in Doris, read from its checkpoint ConfigMap now that
/// no runner can change it.
async fn left_in_doris(
    configmaps: &Api<ConfigMap>,
    sync: &DorisChangelogSync,
    ns: &str,
    consumer: &str,
) -> Result<cleanup::Work> {
    let checkpoint_cm = get_opt(configmaps, &names::checkpoint(&sync.name_any())).await?;
    let checkpoint: Option<Checkpoint> = checkpoint_cm
        .as_ref()
        .and_then(build::checkpoint_text)
        .and_then(|t| crate::checkpoint::parse(t).ok().flatten());
    let mut work = cleanup::plan_cleanup(ns, &sync.spec, checkpoint.as_ref(), consumer);
    if checkpoint_cm.is_none() {
        // The checkpoint ConfigMap is created with the first runner: without it none ever ran
        // (e.g. a sync blocked from the start), so no load can be pre-committed.
        work.stale_labels = None;
    }
    Ok(work)
}

/// A re-initialisation's Doris cleanup, once the old runner is stopped: its pending transactions
/// and the loads pre-committed after its last checkpoint aborted, its offset-table row deleted.
/// Done before the checkpoint (which lists the transactions) is cleared: a failure leaves
/// everything as it was, with a Warning event, and the next pass tries again.
async fn reinit_cleanup(
    ctx: &Context,
    sync: &DorisChangelogSync,
    ns: &str,
    name: &str,
    r: &super::plan::Reinit,
) -> Result<()> {
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let work = left_in_doris(&configmaps, sync, ns, &r.previous_consumer_id).await?;
    if work.is_empty() {
        return Ok(());
    }
    let report = cleanup::execute(&work, &targets(sync, ctx, ns).await).await;
    if report.errors.is_empty() {
        info!(sync = name, done = %cleanup::cleaned_note(&work, &report), "cleaned the old consumer's state in Doris");
        return Ok(());
    }
    let note = format!(
        "cannot re-initialise yet, the old consumer's state in Doris could not be removed: {}; left: {}; retrying",
        report.errors.join("; "),
        report.left.describe()
    );
    publish(ctx, sync, true, "ReinitCleanupFailed", note.clone()).await;
    Err(Error::Cleanup(note))
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
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&format!("{ns}/{name}"));
    let now = Timestamp::now();
    let next = annotation(sync, CLEANUP_NEXT_ANNOTATION).and_then(|t| t.parse::<Timestamp>().ok());
    if let Some(wait) = cleanup::wait_before_attempt(next, now) {
        return Ok(Some(wait));
    }

    // A stopping runner may still pre-commit a load (and, fenced, abort it again): the checkpoint
    // and the labels after it are read once its pods are gone or forced off.
    let client = &ctx.client;
    if let Stopping::Waiting { recheck, .. } =
        stop_runner(ctx, sync, &ns, &name, Purpose::Deletion).await?
    {
        return Ok(Some(recheck));
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let consumer = sync
        .status
        .as_ref()
        .and_then(|s| s.consumer_id.clone())
        .unwrap_or_else(|| sync.consumer_id());
    let work = left_in_doris(&configmaps, sync, &ns, &consumer).await?;
    if work.is_empty() {
        info!("sync deleted; nothing to clean in Doris; its runner objects go with it");
        return Ok(None);
    }
    let targets = targets(sync, ctx, &ns).await;
    let report = cleanup::execute(&work, &targets).await;
    if report.errors.is_empty() {
        let note = cleanup::cleaned_note(&work, &report);
        info!(%note, "sync deleted; cleaned its state in Doris");
        publish(ctx, sync, false, "CleanedUp", note).await;
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
        return Ok(None);
    }
    match cleanup::after_failure(attempts, ctx.cleanup_policy) {
        AfterFailure::GiveUp => {
            let note = left_behind_note(attempts, &errors, &report.left);
            warn!(%note, "giving up the cleanup of a deleted sync");
            publish(ctx, sync, true, "CleanupAbandoned", note).await;
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
        "gave up cleaning Doris at once and released the finalizer: the credentials Secret {} is gone (deleted with the namespace?) or does not allow this sync, so retrying cannot help; left behind: {}. Last error: {errors}. {BY_HAND}",
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
    fn events_with_other_words_are_other_events_and_the_same_words_the_same() {
        use super::event_action;
        let a = event_action("starting again as consumer s-r1");
        assert!(a.starts_with("Reconcile/") && a.len() <= 128, "{a}");
        assert_eq!(a, event_action("starting again as consumer s-r1"));
        assert_ne!(a, event_action("starting again as consumer s-r2"));
    }

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
