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
        finalizer::{Event, finalizer},
    },
};
use serde::{Serialize, de::DeserializeOwned};
use tracing::{info, instrument, warn};

use super::{
    build::{self, NONCE_ANNOTATION, RunnerObjects, Workload, names},
    plan::{Observed, Plan, ProbeFailure, RunnerState, SourceProbe, consumer_id_for, plan},
    status::{compute_status, differs, notices},
};
use crate::{
    Error, Result,
    checkpoint::CHECKPOINT_KEY,
    probe::{CREDENTIALS_MISSING, DorisCredentials, probe_source},
};

/// The finalizer the operator puts on every sync.
pub const FINALIZER: &str = "dcs.dev/cleanup";
/// The one field manager of every write.
pub const FIELD_MANAGER: &str = "dcs-operator";
/// How long table facts are trusted before the source is probed again.
pub const REPROBE_INTERVAL: Duration = Duration::from_secs(180);
/// Annotation on the workload with the hash of its whole built form.
const OBJECT_HASH_ANNOTATION: &str = "dcs.dev/object-hash";

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
}

/// A cached probe result.
#[derive(Clone, Debug)]
pub struct CachedProbe {
    at: Instant,
    generation: Option<i64>,
    result: Result<SourceProbe, ProbeFailure>,
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
        }
    }
}

/// Reconciles one sync: the finalizer, then [`apply`].
///
/// # Errors
/// Any API failure; the controller backs off and retries.
#[instrument(skip(sync, ctx), fields(sync = %sync.name_any(), namespace = sync.namespace().unwrap_or_default()))]
pub async fn reconcile(sync: Arc<DorisChangelogSync>, ctx: Arc<Context>) -> Result<Action> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), &ns);
    if sync.metadata.deletion_timestamp.is_none() && sync.finalizers().is_empty() {
        // kube's finalizer() adds the first finalizer with a JSON patch whose `test` of a missing
        // path kube-emu rejects; a merge patch guarded by resourceVersion is equivalent.
        let patch = serde_json::json!({"metadata": {
            "finalizers": [FINALIZER],
            "resourceVersion": sync.resource_version(),
        }});
        api.patch(
            &sync.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(Error::Kube)?;
        return Ok(Action::requeue(Duration::ZERO));
    }
    finalizer(&api, FINALIZER, sync, |event| async {
        match event {
            Event::Apply(sync) => apply(&sync, &ctx).await,
            Event::Cleanup(sync) => cleanup(&sync, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.map_err(Error::Kube)
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
) -> Result<DorisCredentials, ProbeFailure> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let name = &credentials.secret_name;
    let secret = secrets.get_opt(name).await.map_err(|e| ProbeFailure {
        reason: CREDENTIALS_MISSING,
        message: format!("cannot read Secret {ns}/{name}: {e}"),
    })?;
    let Some(secret) = secret else {
        return Err(ProbeFailure {
            reason: CREDENTIALS_MISSING,
            message: format!(
                "Secret {ns}/{name} named in spec.source.credentials does not exist; create it with keys {} and {}",
                credentials.username_key, credentials.password_key
            ),
        });
    };
    let data = secret.data.unwrap_or_default();
    let value = |key: &str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .ok_or_else(|| ProbeFailure {
                reason: CREDENTIALS_MISSING,
                message: format!(
                    "Secret {ns}/{name} has no key {key:?}; add it or set spec.source.credentials"
                ),
            })
    };
    Ok(DorisCredentials {
        username: value(&credentials.username_key)?,
        password: value(&credentials.password_key)?,
    })
}

async fn probe(
    sync: &DorisChangelogSync,
    ctx: &Context,
    ns: &str,
) -> Result<SourceProbe, ProbeFailure> {
    let key = format!("{ns}/{}", sync.name_any());
    let generation = sync.metadata.generation;
    let cached = ctx
        .probes
        .lock()
        .expect("probe cache lock")
        .get(&key)
        .cloned()
        .filter(|c| c.generation == generation && c.at.elapsed() < REPROBE_INTERVAL);
    let credentials = read_credentials(&ctx.client, ns, &sync.spec.source.credentials).await?;
    match cached {
        Some(c) => match c.result {
            // Doris's time is read on every reconcile; only the table facts are cached.
            Ok(facts) => Ok(SourceProbe {
                doris_now_ms: match sync.spec.source.fe_nodes.first() {
                    Some(fe) => crate::probe::doris_now_ms(fe, &credentials).await,
                    None => None,
                },
                ..facts
            }),
            Err(e) => Err(e),
        },
        None => {
            let result = probe_source(&sync.spec.source, &credentials).await;
            ctx.probes.lock().expect("probe cache lock").insert(
                key,
                CachedProbe {
                    at: Instant::now(),
                    generation,
                    result: result.clone(),
                },
            );
            result
        }
    }
}

async fn runner_state(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<(RunnerState, Option<Deployment>, Option<Job>)> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    let deployment = get_opt(&deployments, &names::runner(name)).await?;
    let job = get_opt(&jobs, &names::runner(name)).await?;
    if let Some(job) = &job {
        let status = job.status.clone().unwrap_or_default();
        if status.succeeded.unwrap_or(0) > 0 {
            return Ok((RunnerState::Succeeded, deployment, Some(job.clone())));
        }
        let failed = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Failed" && c.status == "True");
        if let Some(c) = failed {
            let message = c.message.unwrap_or(c.reason.unwrap_or_default());
            return Ok((
                RunnerState::Failed { message },
                deployment,
                Some(job.clone()),
            ));
        }
    }
    if deployment.is_none() && job.is_none() {
        return Ok((RunnerState::Absent, None, None));
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    for pod in list.items {
        for cs in pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default()
        {
            let waiting = cs.state.as_ref().and_then(|s| s.waiting.as_ref());
            if waiting.and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff") {
                let terminated = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
                let message = terminated
                    .and_then(|t| t.message.clone().or(t.reason.clone()))
                    .unwrap_or_else(|| "CrashLoopBackOff".to_owned());
                return Ok((
                    RunnerState::CrashLooping {
                        restarts: cs.restart_count,
                        message,
                    },
                    deployment,
                    job,
                ));
            }
        }
    }
    Ok((RunnerState::Running, deployment, job))
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
    let (runner, deployment, job) = runner_state(ctx, &ns, &name).await?;

    let status = sync.status.clone().unwrap_or_default();
    let skip_probe = sync.spec.suspend || dcs_crds::validate(&sync.spec).is_err();
    let probe = if skip_probe {
        Err(ProbeFailure {
            reason: reasons::SUSPENDED,
            message: "the source is not probed while the sync is suspended or its spec is invalid"
                .into(),
        })
    } else {
        probe(sync, ctx, &ns).await
    };

    let mut observed = Observed {
        name: name.clone(),
        spec: sync.spec.clone(),
        generation: sync.metadata.generation,
        deleting: false,
        probe,
        checkpoint: None,
        checkpoint_error: None,
        status,
        applied_nonce,
        runner,
    };
    let active = consumer_id_for(
        &super::plan::base_consumer_id(&observed),
        super::plan::consumer_generation(&observed),
    );
    match checkpoint_cm
        .as_ref()
        .and_then(build::checkpoint_text)
        .map(crate::checkpoint::parse)
    {
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
            if checkpoint_cm.is_some() {
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
    let old_status = sync.status.clone().unwrap_or_default();
    for notice in notices(&old_status, &new_status) {
        let event = KubeEvent {
            type_: if notice.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: notice.reason,
            note: Some(notice.note),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &sync.object_ref(&())).await {
            warn!(error = %e, "cannot publish an event");
        }
    }
    if differs(&old_status, &new_status) {
        let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), &ns);
        let body = serde_json::json!({
            "apiVersion": DorisChangelogSync::api_version(&()),
            "kind": DorisChangelogSync::kind(&()),
            "status": new_status,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(Error::Kube)?;
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
            let hash = build::content_hash(&serde_json::to_string(&d).map_err(|source| {
                Error::Serialize {
                    what: "Deployment",
                    source,
                }
            })?);
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
            let hash = build::content_hash(&serde_json::to_string(&j).map_err(|source| {
                Error::Serialize {
                    what: "Job",
                    source,
                }
            })?);
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

/// Lets go of a deleted sync. Owned objects go with it through owner references.
///
/// TODO(operator issue): abort the sync's pre-committed Stream Load transactions and delete its
/// offset-table row before letting go.
async fn cleanup(sync: &DorisChangelogSync, ctx: &Context) -> Result<Action> {
    let key = format!(
        "{}/{}",
        sync.namespace().unwrap_or_default(),
        sync.name_any()
    );
    ctx.probes.lock().expect("probe cache lock").remove(&key);
    info!("sync deleted; its runner objects go with it");
    Ok(Action::await_change())
}
