//! Observe: reading a sync's world into what [`plan`](super::plan) decides on. The config and
//! checkpoint ConfigMaps, the runner workload and its pods, the status last written, the
//! access to each side (credentials and TLS, [`super::access`]) and the probe of the source and
//! sink, whose table facts are cached for [`REPROBE_INTERVAL`] per generation. Also where a
//! cleanup reaches Doris ([`targets`]).
//!
//! The I/O functions only fetch; what the fetched objects mean ([`job_outcome`], [`pods_state`], [`sort_checkpoint`], [`probe_skipped`],
//! [`CachedProbe::fresh`]) is pure and tested here.

use std::time::Instant;

use dcs_crds::{DorisChangelogSync, DorisChangelogSyncSpec, conditions::reasons};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        batch::v1::Job,
        core::v1::{ConfigMap, Pod},
    },
    jiff::Timestamp,
};
use kube::{Api, ResourceExt, api::ListParams};

use super::{
    access::{Side, read_access},
    api::get_opt,
    build::{self, NONCE_ANNOTATION},
    context::{CachedProbe, Context},
    names,
    observed::{
        Observed, RunnerExit, RunnerState, base_consumer_id, consumer_generation, consumer_id_for,
        is_earlier_consumer,
    },
    shard_configmaps,
    status::{WrittenStatus, current_status},
    stop::{STOPPING_ANNOTATION, StopMark},
};
use crate::{
    Error, Result,
    checkpoint::Checkpoint,
    cleanup::Targets,
    facts::{ProbeFailure, SourceProbe},
    probe::{probe_sink, probe_source},
};

/// What one pass observed: the plan's input, and what acting on the plan needs besides.
pub(super) struct World {
    /// The sync's namespace.
    pub ns: String,
    /// The sync's name.
    pub name: String,
    /// What the plan decides on (its `status` is the status as it was before this pass).
    pub observed: Observed,
    /// Whether the checkpoint ConfigMap exists.
    pub checkpoint_cm: bool,
    /// Whether the config ConfigMap exists.
    pub config_cm: bool,
    /// The runner Deployment, if there is one.
    pub deployment: Option<Deployment>,
    /// The runner Job, if there is one.
    pub job: Option<Job>,
    /// Whether the stored checkpoint is one of a consumer this sync re-initialised away from.
    pub earlier_checkpoint: bool,
    /// The status this operator last wrote, for while the watch cache lags behind it.
    pub last_written: Option<WrittenStatus>,
    /// The resourceVersion of the object this pass reconciles.
    pub cached_version: Option<String>,
    /// The sync's uid (the key of [`Context::written`]).
    pub uid: String,
}

/// Reads the world of `sync` (in this order: checkpoint and config ConfigMaps, workload and pods,
/// credentials Secrets and the probe).
pub(super) async fn observe(sync: &DorisChangelogSync, ctx: &Context) -> Result<World> {
    let ns = sync
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let name = sync.name_any();
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
    let config_cm = get_opt(&configmaps, &names::config(&name)).await?;
    let applied_nonce = config_cm
        .as_ref()
        .and_then(|cm| cm.annotations().get(NONCE_ANNOTATION).cloned());
    let runner = runner_state(ctx, &ns, &name).await?;

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
    let (probe, sink_probe) = match probe_skipped(&sync.spec) {
        Some(skipped) => (Err(skipped), Ok(())),
        None => probe(sync, ctx, &ns).await,
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
        runner: runner.state,
        runner_restarts: runner.restarts,
        runner_exit: runner.exit,
        stopping: stop_mark(sync),
        shards: None,
    };
    let stored = checkpoint_cm
        .as_ref()
        .and_then(crate::checkpoint::text_of)
        .map(crate::checkpoint::parse);
    let mut earlier_checkpoint = false;
    match sort_checkpoint(&observed, stored) {
        Stored::Active(cp) => observed.checkpoint = Some(*cp),
        Stored::Earlier => earlier_checkpoint = true,
        Stored::Unreadable(e) => observed.checkpoint_error = Some(e),
        Stored::Ignored => {}
    }
    shard_configmaps::observe(&mut observed, &configmaps, config_cm.as_ref()).await?;
    Ok(World {
        ns,
        name,
        observed,
        checkpoint_cm: checkpoint_cm.is_some(),
        config_cm: config_cm.is_some(),
        deployment: runner.deployment,
        job: runner.job,
        earlier_checkpoint,
        last_written,
        cached_version,
        uid,
    })
}

/// What the stored checkpoint is to this pass.
#[derive(Debug, PartialEq)]
pub(super) enum Stored {
    /// The active consumer's: the plan reads it.
    Active(Box<Checkpoint>),
    /// A consumer's this sync re-initialised away from (a reinit interrupted before it removed
    /// it): its Doris state is cleaned, the next runner must not find it.
    Earlier,
    /// The checkpoint text does not parse: why.
    Unreadable(String),
    /// None, or another consumer's: left alone.
    Ignored,
}

/// Sorts the checkpoint parsed from the checkpoint ConfigMap by whose it is (pure).
pub(super) fn sort_checkpoint(
    observed: &Observed,
    stored: Option<std::result::Result<Option<Checkpoint>, String>>,
) -> Stored {
    let active = consumer_id_for(&base_consumer_id(observed), consumer_generation(observed));
    match stored {
        Some(Ok(Some(cp))) if cp.consumer_id == active => Stored::Active(Box::new(cp)),
        Some(Ok(Some(cp))) if is_earlier_consumer(observed, &cp.consumer_id) => Stored::Earlier,
        Some(Err(e)) => Stored::Unreadable(e),
        _ => Stored::Ignored,
    }
}

/// Why the source is not probed, when it is not: a suspended sync and an invalid spec are not
/// probed (pure).
pub(super) fn probe_skipped(spec: &DorisChangelogSyncSpec) -> Option<ProbeFailure> {
    (spec.suspend || dcs_crds::validate(spec).is_err()).then(|| ProbeFailure {
        reason: reasons::SUSPENDED,
        message: "the source is not probed while the sync is suspended or its spec is invalid"
            .into(),
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
        .filter(|c| c.fresh(generation, Instant::now()));
    let name = sync.name_any();
    let access = match read_access(&ctx.client, ns, &name, Side::source(&sync.spec.source)).await {
        Ok(a) => a,
        Err(e) => return (Err(e.failure), Ok(())),
    };
    // Both sides' Secrets (credentials and CA bundles) are read on every reconcile, cached probe
    // or not: a Secret whose annotation stops allowing the sync (or that goes) is seen at once.
    let sink_access = match &sync.spec.sink.doris {
        None => None,
        Some(d) => Some(
            read_access(&ctx.client, ns, &name, Side::sink(d))
                .await
                .map_err(|e| e.failure),
        ),
    };
    match cached {
        Some(c) => {
            let sink = match sink_access {
                Some(Err(e)) => Err(e),
                _ => c.sink,
            };
            match c.result {
                // Doris's time is read on every reconcile; only the table facts are cached.
                Ok(facts) => (
                    Ok(SourceProbe {
                        doris_now_ms: match sync.spec.source.fe_nodes.first() {
                            Some(fe) => crate::probe::doris_now_ms(fe, &access).await,
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
            let result = probe_source(&sync.spec.source, &access).await;
            let sink = match (&sync.spec.sink.doris, sink_access) {
                (Some(d), Some(Ok(access))) => probe_sink(&d.fe_nodes, &access).await,
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

/// Reads the runner's Deployment and Job, and its pods when a workload runs.
async fn runner_state(ctx: &Context, ns: &str, name: &str) -> Result<RunnerFound> {
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
    let deployment = get_opt(&deployments, &names::runner(name)).await?;
    let job = get_opt(&jobs, &names::runner(name)).await?;
    let found = |(state, restarts, exit)| RunnerFound {
        state,
        restarts,
        exit,
        deployment: deployment.clone(),
        job: job.clone(),
    };
    if let Some(state) = job.as_ref().and_then(job_outcome) {
        return Ok(found((state, None, None)));
    }
    if deployment.is_none() && job.is_none() {
        return Ok(found((RunnerState::Absent, None, None)));
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    Ok(found(pods_state(&list.items)))
}

/// How a runner Job ended, if it did: `Succeeded` once as many pods succeeded as it has
/// completions (one unless set; the shards' Indexed Job has N, and one shard done is not the Job
/// done) or its `Complete` condition is `True`, `Failed` (with the condition's message, else its
/// reason) once its `Failed` condition is `True` (pure).
pub(super) fn job_outcome(job: &Job) -> Option<RunnerState> {
    let status = job.status.clone().unwrap_or_default();
    let completions = job
        .spec
        .as_ref()
        .and_then(|s| s.completions)
        .unwrap_or(1)
        .max(1);
    let complete = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Complete" && c.status == "True");
    if complete || status.succeeded.unwrap_or(0) >= completions {
        return Some(RunnerState::Succeeded);
    }
    let failed = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")?;
    let message = failed.message.unwrap_or(failed.reason.unwrap_or_default());
    Some(RunnerState::Failed { message })
}

/// What the runner's pods say (pure): `CrashLooping` for the first container waiting in
/// `CrashLoopBackOff` (with its last termination's message or reason), else `Running`; the
/// restarts summed over all containers (`None` without any container status); and the latest
/// termination of any container, current or last state (the first of equal times).
pub(super) fn pods_state(pods: &[Pod]) -> (RunnerState, Option<i32>, Option<RunnerExit>) {
    let mut restarts = None;
    let mut crash_loop = None;
    let mut exit: Option<(Option<Timestamp>, RunnerExit)> = None;
    for pod in pods {
        let pod_name = pod.name_any();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default();
        for cs in statuses {
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
    (
        crash_loop.unwrap_or(RunnerState::Running),
        restarts,
        exit.map(|(_, e)| e),
    )
}

/// Where the cleanup reaches Doris, with the credentials read from the Secrets (sink, then
/// source); a Secret gone or not allowing the sync is named in `secrets_gone`.
pub(super) async fn targets(sync: &DorisChangelogSync, ctx: &Context, ns: &str) -> Targets {
    let spec = &sync.spec;
    let mut secrets_gone = Vec::new();
    let name = sync.name_any();
    let mut read = async |side: Side<'_>| {
        read_access(&ctx.client, ns, &name, side)
            .await
            .map_err(|e| {
                if let Some(object) = e.gone
                    && !secrets_gone.contains(&object)
                {
                    secrets_gone.push(object);
                }
                e.failure.message
            })
    };
    let sink_access = match &spec.sink.doris {
        Some(d) => read(Side::sink(d)).await,
        None => Err("the sink is not Doris".to_owned()),
    };
    let source_access = read(Side::source(&spec.source)).await;
    Targets {
        sink_fe_nodes: spec
            .sink
            .doris
            .as_ref()
            .map(|d| d.fe_nodes.clone())
            .unwrap_or_default(),
        sink_access,
        source_fe_nodes: spec.source.fe_nodes.clone(),
        source_query_port: u16::try_from(spec.source.query_port).unwrap_or(9030),
        source_access,
        secrets_gone,
    }
}

/// The annotation `key` of `sync`, if set.
pub(super) fn annotation<'a>(sync: &'a DorisChangelogSync, key: &str) -> Option<&'a str> {
    sync.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The stop in progress recorded on `sync`, if any.
pub(super) fn stop_mark(sync: &DorisChangelogSync) -> Option<StopMark> {
    annotation(sync, STOPPING_ANNOTATION).and_then(StopMark::from_annotation)
}

#[cfg(test)]
mod tests {
    use dcs_crds::DorisChangelogSyncStatus;
    use k8s_openapi::{
        api::{
            batch::v1::{JobCondition, JobStatus},
            core::v1::{
                ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
                PodStatus,
            },
        },
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    use super::*;
    use std::time::Duration;

    use crate::reconcile::context::REPROBE_INTERVAL;
    use crate::reconcile::testing::{self, streaming_checkpoint};

    fn job(succeeded: Option<i32>, conditions: Vec<JobCondition>) -> Job {
        Job {
            status: Some(JobStatus {
                succeeded,
                conditions: Some(conditions),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    fn condition(
        type_: &str,
        status: &str,
        reason: Option<&str>,
        message: Option<&str>,
    ) -> JobCondition {
        JobCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.map(Into::into),
            message: message.map(Into::into),
            ..JobCondition::default()
        }
    }

    /// The shards' Indexed Job: shards done early do not end it while another still reads or
    /// commits (taken for ended, the Job was deleted and made again, over and over, and the
    /// last shard was stopped a second after each start).
    #[test]
    fn an_indexed_job_ends_when_every_index_succeeded() {
        let indexed = |succeeded: i32, conditions: Vec<JobCondition>| Job {
            spec: Some(k8s_openapi::api::batch::v1::JobSpec {
                completions: Some(4),
                completion_mode: Some("Indexed".into()),
                ..Default::default()
            }),
            ..job(Some(succeeded), conditions)
        };
        assert_eq!(job_outcome(&indexed(1, vec![])), None);
        assert_eq!(job_outcome(&indexed(3, vec![])), None);
        assert_eq!(
            job_outcome(&indexed(4, vec![])),
            Some(RunnerState::Succeeded)
        );
        assert_eq!(
            job_outcome(&indexed(3, vec![condition("Complete", "True", None, None)])),
            Some(RunnerState::Succeeded)
        );
        assert_eq!(
            job_outcome(&indexed(
                3,
                vec![condition("Failed", "True", Some("FailedIndexes"), None)]
            )),
            Some(RunnerState::Failed {
                message: "FailedIndexes".into()
            })
        );
    }

    #[test]
    fn a_job_ends_when_a_pod_succeeded_or_its_failed_condition_is_true() {
        assert_eq!(job_outcome(&Job::default()), None);
        assert_eq!(
            job_outcome(&job(Some(1), vec![])),
            Some(RunnerState::Succeeded)
        );
        assert_eq!(
            job_outcome(&job(
                Some(0),
                vec![condition(
                    "Failed",
                    "True",
                    Some("BackoffLimitExceeded"),
                    Some("Job has reached the specified backoff limit")
                )]
            )),
            Some(RunnerState::Failed {
                message: "Job has reached the specified backoff limit".into()
            })
        );
        assert_eq!(
            job_outcome(&job(
                None,
                vec![condition("Failed", "True", Some("DeadlineExceeded"), None)]
            )),
            Some(RunnerState::Failed {
                message: "DeadlineExceeded".into()
            })
        );
        assert_eq!(
            job_outcome(&job(
                None,
                vec![condition("Failed", "False", Some("x"), None)]
            )),
            None
        );
    }

    fn terminated(
        code: i32,
        at: Option<i64>,
        reason: &str,
        message: Option<&str>,
    ) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                finished_at: at.map(|s| Time(Timestamp::from_second(1_795_960_800 + s).unwrap())),
                reason: Some(reason.into()),
                message: message.map(Into::into),
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        }
    }

    fn pod(name: &str, statuses: Vec<ContainerStatus>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                container_statuses: Some(statuses),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn pods_without_container_statuses_are_running_with_no_restarts() {
        assert_eq!(pods_state(&[]), (RunnerState::Running, None, None));
        assert_eq!(
            pods_state(&[pod("p", vec![])]),
            (RunnerState::Running, None, None)
        );
    }

    #[test]
    fn a_crash_loop_takes_its_last_termination_and_the_latest_exit_wins() {
        let crashing = ContainerStatus {
            name: "runner".into(),
            restart_count: 4,
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("CrashLoopBackOff".into()),
                    ..ContainerStateWaiting::default()
                }),
                ..ContainerState::default()
            }),
            last_state: Some(terminated(3, Some(20), "Error", Some("offset expired"))),
            ..ContainerStatus::default()
        };
        let older = ContainerStatus {
            name: "runner".into(),
            restart_count: 1,
            last_state: Some(terminated(1, Some(10), "Error", None)),
            ..ContainerStatus::default()
        };
        let (state, restarts, exit) =
            pods_state(&[pod("old", vec![older]), pod("new", vec![crashing])]);
        assert_eq!(
            state,
            RunnerState::CrashLooping {
                restarts: 4,
                message: "offset expired".into()
            }
        );
        assert_eq!(restarts, Some(5));
        assert_eq!(
            exit,
            Some(RunnerExit {
                pod: "new".into(),
                code: 3,
                message: "offset expired".into()
            })
        );
    }

    #[test]
    fn a_crash_loop_without_a_termination_says_crash_loop_back_off() {
        let crashing = ContainerStatus {
            restart_count: 2,
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("CrashLoopBackOff".into()),
                    ..ContainerStateWaiting::default()
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        };
        let (state, restarts, exit) = pods_state(&[pod("p", vec![crashing])]);
        assert_eq!(
            state,
            RunnerState::CrashLooping {
                restarts: 2,
                message: "CrashLoopBackOff".into()
            }
        );
        assert_eq!((restarts, exit), (Some(2), None));
    }

    #[test]
    fn the_checkpoint_is_read_for_the_active_consumer_only() {
        let mut observed = testing::observed();
        observed.status = DorisChangelogSyncStatus {
            consumer_generation: Some(1),
            ..DorisChangelogSyncStatus::default()
        };
        let active = streaming_checkpoint("orders-r1", 10);
        assert_eq!(
            sort_checkpoint(&observed, Some(Ok(Some(active.clone())))),
            Stored::Active(Box::new(active))
        );
        assert_eq!(
            sort_checkpoint(
                &observed,
                Some(Ok(Some(streaming_checkpoint("orders", 10))))
            ),
            Stored::Earlier
        );
        assert_eq!(
            sort_checkpoint(
                &observed,
                Some(Ok(Some(streaming_checkpoint("orders-r2", 10))))
            ),
            Stored::Ignored
        );
        assert_eq!(
            sort_checkpoint(&observed, Some(Err("not JSON".into()))),
            Stored::Unreadable("not JSON".into())
        );
        assert_eq!(sort_checkpoint(&observed, Some(Ok(None))), Stored::Ignored);
        assert_eq!(sort_checkpoint(&observed, None), Stored::Ignored);
    }

    #[test]
    fn a_suspended_or_invalid_sync_is_not_probed() {
        assert_eq!(probe_skipped(&testing::spec()), None);
        let mut suspended = testing::spec();
        suspended.suspend = true;
        let skipped = probe_skipped(&suspended).expect("skipped");
        assert_eq!(skipped.reason, reasons::SUSPENDED);
        assert_eq!(
            skipped.message,
            "the source is not probed while the sync is suspended or its spec is invalid"
        );
        let mut invalid = testing::spec();
        invalid.source.table = "no-dot".into();
        assert!(dcs_crds::validate(&invalid).is_err());
        assert!(probe_skipped(&invalid).is_some());
    }

    #[test]
    fn cached_facts_hold_for_their_generation_until_the_reprobe_interval() {
        let at = Instant::now();
        let cached = CachedProbe {
            at,
            generation: Some(2),
            result: Ok(testing::probe()),
            sink: Ok(()),
        };
        assert!(cached.fresh(Some(2), at));
        assert!(cached.fresh(Some(2), at + REPROBE_INTERVAL - Duration::from_millis(1)));
        assert!(!cached.fresh(Some(2), at + REPROBE_INTERVAL));
        assert!(!cached.fresh(Some(3), at));
        assert!(!cached.fresh(None, at));
    }
}
