//! Teardown: stopping a sync's runner and removing what it left in Doris, the one sequence a
//! re-initialisation ([`reinit`](super::reinit)) and a deletion ([`finalize`](super::finalize))
//! share ([`stop_and_clean`]): record the stop on the sync, delete the workload, fence the
//! checkpoint ConfigMap, wait for the runner's pods until their grace period and a margin are
//! over and force those still there off ([`stop::decide`] says which), then re-read the
//! checkpoint, plan the cleanup ([`cleanup::plan_cleanup`]) and run it ([`cleanup::execute`]).
//! What the outcome means for the sync is each caller's.
//!
//! Also the end of a stop: [`forget_stop`] and [`clear_checkpoint`].

use std::time::Duration;

use dcs_crds::DorisChangelogSync;
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        batch::v1::Job,
        core::v1::{ConfigMap, Pod},
    },
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
};
use tracing::{info, warn};

use super::{
    api::{delete_quietly, get_opt, merge_unless_gone},
    build,
    context::Context,
    events::publish,
    names,
    observe::{stop_mark, targets},
    shard_configmaps, shards,
    stop::{self, FENCED_ANNOTATION, Purpose, STOPPING_ANNOTATION, StopMark, StopStep},
};
use crate::{
    Error, Result,
    checkpoint::CHECKPOINT_KEY,
    cleanup::{self, Report, Work, work_left},
};

/// Where a teardown stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Teardown {
    /// The runner's pods are still stopping: nothing was read or changed in Doris. The message
    /// says what is waited for; look again after `recheck`.
    Waiting {
        /// What is waited for, until when.
        message: String,
        /// When to look again.
        recheck: Duration,
    },
    /// The stopped runner left nothing in Doris.
    NothingLeft,
    /// Everything it left was removed.
    Cleaned {
        /// What was removed, in words ([`cleanup::cleaned_note`]).
        note: String,
    },
    /// Some of it could not be removed.
    Failed {
        /// The failures, joined with `; `.
        errors: String,
        /// What is still there.
        left: Box<Work>,
        /// Credentials Secrets (`namespace/name`) gone or not allowing the sync: retrying cannot
        /// help.
        secrets_gone: Vec<String>,
    },
}

/// Stops the runner of `sync` for `purpose` and, once it is stopped, removes what consumer
/// `consumer` left in Doris: the one sequence of a re-initialisation and a deletion.
pub(super) async fn stop_and_clean(
    ctx: &Context,
    sync: &DorisChangelogSync,
    ns: &str,
    purpose: Purpose,
    consumer: &str,
) -> Result<Teardown> {
    let name = sync.name_any();
    // A stopping runner may still save a checkpoint or pre-commit a load (and, fenced, abort it
    // again): the checkpoint and the labels after it are read once its pods are gone or forced off.
    if let Stopping::Waiting { message, recheck } =
        stop_runner(ctx, sync, ns, &name, purpose).await?
    {
        return Ok(Teardown::Waiting { message, recheck });
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
    let checkpoint_cm = get_opt(&configmaps, &names::checkpoint(&name)).await?;
    let work = work_left(ns, &sync.spec, checkpoint_cm.as_ref(), consumer);
    // A sharded snapshot's shards, each under its own consumer's labels, first.
    let mut works = if shards::may_have_shards(sync) {
        shard_configmaps::work_left(&configmaps, ns, &sync.spec, &name).await?
    } else {
        Vec::new()
    };
    if !work.is_empty() {
        works.push(work);
    }
    if works.is_empty() {
        return Ok(Teardown::NothingLeft);
    }
    let targets = targets(sync, ctx, ns).await;
    let mut notes = Vec::new();
    for work in &works {
        let report = cleanup::execute(work, &targets).await;
        match judge(work, report, targets.secrets_gone.clone()) {
            Teardown::Cleaned { note } => notes.push(note),
            failed => return Ok(failed),
        }
    }
    Ok(Teardown::Cleaned {
        note: notes.join("; "),
    })
}

/// What an attempt at `work` came to, from its report (pure).
pub(super) fn judge(work: &Work, report: Report, secrets_gone: Vec<String>) -> Teardown {
    if report.errors.is_empty() {
        return Teardown::Cleaned {
            note: cleanup::cleaned_note(work, &report),
        };
    }
    Teardown::Failed {
        errors: report.errors.join("; "),
        left: Box::new(report.left),
        secrets_gone,
    }
}

/// Where a stop of the runner stands.
enum Stopping {
    /// Pods are still stopping: the message for the status, and when to look again.
    Waiting { message: String, recheck: Duration },
    /// No runner pod is waited for any more: the checkpoint can be read.
    Stopped,
}

/// Stops the runner of `sync` for `purpose` ([`stop`]): records the stop on the sync (once; its
/// start survives restarts), deletes the workload, fences the checkpoint ConfigMap, then waits for
/// the runner's pods until their grace period and [`Context::pod_wait_margin`] are over, and
/// forces those still there off (`gracePeriodSeconds: 0`, with a Warning event).
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
            // A sync already gone has nothing left to stop but what the owner references
            // collect; going on deletes it sooner.
            merge_unless_gone(&api, name, &patch).await?;
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
        merge_unless_gone(&configmaps, &cm.name_any(), &patch).await?;
    }
    if shards::may_have_shards(sync) {
        shard_configmaps::fence(&configmaps, name, &mark.fence()).await?;
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
            Ok(Stopping::Waiting {
                message: waiting_message(&mark.purpose, name, &pods, deadline),
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

/// The Ready message while a stop for `purpose` of sync `name`'s runner waits for `pods` until
/// `deadline` (pure): why (the re-initialisation's message, or the deletion) and whose consumer
/// (the abandoned one, or for a deletion the sync's name).
pub(super) fn waiting_message(
    purpose: &Purpose,
    name: &str,
    pods: &[String],
    deadline: Timestamp,
) -> String {
    let (why, consumer) = match purpose {
        Purpose::Reinit {
            message, consumer, ..
        } => (message.as_str(), consumer.as_str()),
        Purpose::Deletion => ("the sync is being deleted", name),
    };
    stop::waiting_message(why, consumer, pods, deadline)
}

/// The runner pods of sync `name` that may still run.
async fn runner_pods(pods: &Api<Pod>, name: &str) -> Result<Vec<stop::RunnerPod>> {
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    Ok(list.items.iter().filter_map(runner_pod).collect())
}

/// What a stop needs to know of `pod`, unless it finished (a `Succeeded` or `Failed` Job pod
/// runs nothing any more) (pure).
pub(super) fn runner_pod(pod: &Pod) -> Option<stop::RunnerPod> {
    if matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    Some(stop::RunnerPod {
        name: pod.name_any(),
        deleting_until: pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
        deletion_grace_seconds: pod.metadata.deletion_grace_period_seconds,
        grace: pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|g| u64::try_from(g).ok())
            .map_or(stop::DEFAULT_GRACE, Duration::from_secs),
    })
}

/// Removes the stop mark from the sync once the stop's work is done (a stale one is removed too).
pub(super) async fn forget_stop(ctx: &Context, sync: &DorisChangelogSync, ns: &str) -> Result<()> {
    let api: Api<DorisChangelogSync> = Api::namespaced(ctx.client.clone(), ns);
    let patch = serde_json::json!({"metadata": {"annotations": {STOPPING_ANNOTATION: null}}});
    merge_unless_gone(&api, &sync.name_any(), &patch).await
}

/// Removes the checkpoint from the checkpoint ConfigMap of sync `name`: the resourceVersion
/// moves, so a runner that still holds the old one can no longer save.
pub(super) async fn clear_checkpoint(configmaps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let clear = serde_json::json!({"data": {CHECKPOINT_KEY: null}});
    merge_unless_gone(configmaps, &names::checkpoint(name), &clear).await
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use dcs_crds::checkpoint::PendingTxn;
    use dcs_crds::testing::SyncBuilder;
    use k8s_openapi::{
        api::core::v1::{PodSpec, PodStatus},
        apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    };

    use super::*;
    use crate::{
        checkpoint::Checkpoint,
        cleanup::{OffsetRow, TxnAbort},
        reconcile::testing::{at, offset_row_work, spec, streaming_checkpoint},
    };

    fn checkpoint_cm(checkpoint: Option<&Checkpoint>) -> ConfigMap {
        ConfigMap {
            data: checkpoint.map(|cp| {
                BTreeMap::from([(
                    CHECKPOINT_KEY.to_owned(),
                    serde_json::to_string(cp).unwrap(),
                )])
            }),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn without_a_checkpoint_configmap_no_runner_ran_so_no_labels_are_swept() {
        let work = work_left("ns", &spec(), None, "orders");
        assert_eq!(work, Work::default());
        assert!(work.is_empty());
    }

    #[test]
    fn with_the_configmap_but_no_checkpoint_the_first_checkpoints_labels_are_swept() {
        let work = work_left("ns", &spec(), Some(&checkpoint_cm(None)), "orders");
        let sweep = work.stale_labels.expect("a sweep");
        assert_eq!(
            (
                sweep.consumer_id.as_str(),
                sweep.first_checkpoint_id,
                sweep.db.as_str()
            ),
            ("orders", 1, "db")
        );
        assert!(work.aborts.is_empty() && work.offset_row.is_none());
    }

    #[test]
    fn the_checkpoint_names_the_transactions_to_abort_and_the_labels_after_it() {
        let mut cp = streaming_checkpoint("orders-r1", 10);
        cp.pending_txns = vec![PendingTxn {
            db: String::new(),
            label: "l-7-0".into(),
            txn_id: 42,
            rows: None,
            dead_letter: false,
        }];
        let spec = SyncBuilder::new().offsets("meta.offsets", None).spec();
        let work = work_left("ns", &spec, Some(&checkpoint_cm(Some(&cp))), "orders-r1");
        assert_eq!(
            work.aborts,
            vec![TxnAbort {
                db: "db".into(),
                table: "dst".into(),
                txn_id: 42,
                label: "l-7-0".into()
            }]
        );
        let sweep = work.stale_labels.as_ref().expect("a sweep");
        assert_eq!(
            (sweep.consumer_id.as_str(), sweep.first_checkpoint_id),
            ("orders-r1", 8)
        );
        assert_eq!(
            work.offset_row,
            Some(OffsetRow {
                table: "meta.offsets".parse().unwrap(),
                consumer_id: "orders-r1".into()
            })
        );
    }

    #[test]
    fn an_attempt_without_errors_is_cleaned_and_says_what_it_removed() {
        let work = offset_row_work();
        let report = Report {
            swept: vec!["dcs-orders-1-0".into()],
            ..Report::default()
        };
        assert_eq!(
            judge(&work, report, vec!["ns/gone".into()]),
            Teardown::Cleaned {
                note: "removed from Doris: offset-table row consumer_id='orders' in meta.offsets; loads pre-committed after the last checkpoint (labels dcs-orders-1-0)".into()
            }
        );
    }

    #[test]
    fn an_attempt_with_errors_failed_and_keeps_what_is_left_and_which_secrets_are_gone() {
        let left = offset_row_work();
        let report = Report {
            left: left.clone(),
            errors: vec!["sink down".into(), "source down".into()],
            swept: vec![],
        };
        assert_eq!(
            judge(&Work::default(), report, vec!["Secret ns/src-creds".into()]),
            Teardown::Failed {
                errors: "sink down; source down".into(),
                left: Box::new(left),
                secrets_gone: vec!["Secret ns/src-creds".into()]
            }
        );
    }

    #[test]
    fn the_wait_names_the_abandoned_consumer_or_for_a_deletion_the_sync() {
        let reinit = Purpose::Reinit {
            consumer: "orders".into(),
            reason: "OffsetExpired".into(),
            message: "the runner reports the offset expired".into(),
        };
        assert_eq!(
            waiting_message(&reinit, "orders-sync", &["p-1".into()], at(60)),
            "the runner reports the offset expired; re-initialising: waiting for the runner pod(s) p-1 of consumer orders to stop before reading its checkpoint, until 2026-11-29T14:01:00Z (their grace period and a margin); then they are deleted with gracePeriodSeconds 0"
        );
        assert_eq!(
            waiting_message(
                &Purpose::Deletion,
                "orders-sync",
                &["p-1".into(), "p-2".into()],
                at(60)
            ),
            "the sync is being deleted; re-initialising: waiting for the runner pod(s) p-1, p-2 of consumer orders-sync to stop before reading its checkpoint, until 2026-11-29T14:01:00Z (their grace period and a margin); then they are deleted with gracePeriodSeconds 0"
        );
    }

    fn pod(phase: Option<&str>, grace: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("orders-runner-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                termination_grace_period_seconds: grace,
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: phase.map(Into::into),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn finished_pods_are_not_waited_for() {
        assert_eq!(runner_pod(&pod(Some("Succeeded"), None)), None);
        assert_eq!(runner_pod(&pod(Some("Failed"), None)), None);
        assert!(runner_pod(&pod(Some("Running"), None)).is_some());
        assert!(runner_pod(&pod(Some("Pending"), None)).is_some());
        assert!(runner_pod(&pod(None, None)).is_some());
    }

    #[test]
    fn a_pod_brings_its_grace_period_and_deletion() {
        assert_eq!(
            runner_pod(&pod(Some("Running"), None)),
            Some(stop::RunnerPod {
                name: "orders-runner-1".into(),
                deleting_until: None,
                deletion_grace_seconds: None,
                grace: stop::DEFAULT_GRACE,
            })
        );
        let mut deleting = pod(Some("Running"), Some(5));
        deleting.metadata.deletion_timestamp = Some(Time(at(5)));
        deleting.metadata.deletion_grace_period_seconds = Some(0);
        assert_eq!(
            runner_pod(&deleting),
            Some(stop::RunnerPod {
                name: "orders-runner-1".into(),
                deleting_until: Some(at(5)),
                deletion_grace_seconds: Some(0),
                grace: Duration::from_secs(5),
            })
        );
        // A negative grace period (rejected by the API server) falls back to the default.
        assert_eq!(
            runner_pod(&pod(None, Some(-1))).map(|p| p.grace),
            Some(stop::DEFAULT_GRACE)
        );
    }
}
