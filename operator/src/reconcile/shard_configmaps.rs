//! The shards' checkpoint ConfigMaps (docs/ARCHITECTURE.md §4.8), read and written: created
//! empty beside the checkpoint ConfigMap ([`create_configmaps`]), read into what the pure
//! [`super::shards`] decide on ([`observe`]), and put through the stop and the cleanup of
//! docs/ARCHITECTURE.md §4.5 ([`fence`], [`work_left`], [`clear`]).

use dcs_crds::DorisChangelogSyncSpec;
use dcs_crds::shard::{SHARD_DIR_PREFIX, shard_configmap};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};

use super::api::{get_opt, merge_unless_gone};
use super::build::{self, RunnerObjects, shard_configmaps};
use super::names;
use super::observed::{Observed, ShardsObserved, consumer_generation};
use super::shards::{ShardRun, active_consumer, aggregate, recorded_t0, shard_count};
use super::stop::FENCED_ANNOTATION;
use crate::cleanup::{self, Work};
use crate::{Error, Result, checkpoint};

/// Creates the shards' ConfigMaps that `observed` did not find (one already there is kept).
///
/// # Errors
/// The API server's, but a conflict (created meanwhile).
pub async fn create_configmaps(
    configmaps: &Api<ConfigMap>,
    observed: &Observed,
    objects: &RunnerObjects,
    run: Option<&ShardRun>,
) -> Result<()> {
    let Some(run) = run else {
        return Ok(());
    };
    let present = observed
        .shards
        .as_ref()
        .map(|s| s.configmaps.clone())
        .unwrap_or_default();
    for (i, cm) in shard_configmaps(objects, run.count).iter().enumerate() {
        if present.get(i).copied().unwrap_or(false) {
            continue;
        }
        match configmaps.create(&PostParams::default(), cm).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    Ok(())
}

/// Reads what a sharded snapshot needs into `observed` (nothing for parallelism 1 or a
/// re-initialised consumer): the recorded T0, the shards' checkpoints, and while the active
/// consumer has no checkpoint of its own, their [`aggregate`] in its place.
///
/// # Errors
/// The API server's.
pub async fn observe(
    observed: &mut Observed,
    configmaps: &Api<ConfigMap>,
    config: Option<&ConfigMap>,
) -> Result<()> {
    let consumer = active_consumer(observed);
    let count = shard_count(observed, config);
    if count <= 1 || consumer_generation(observed) > 0 {
        return Ok(());
    }
    let checkpoint_cm = names::checkpoint(&observed.name);
    let mut shards = ShardsObserved {
        count,
        recorded_t0: recorded_t0(config, &consumer),
        own_checkpoint: observed.checkpoint.is_some(),
        ..ShardsObserved::default()
    };
    for i in 0..count {
        let cm = get_opt(configmaps, &shard_configmap(&checkpoint_cm, i)).await?;
        shards.configmaps.push(cm.is_some());
        let cp = cm
            .as_ref()
            .and_then(checkpoint::text_of)
            .and_then(|t| checkpoint::parse(t).ok().flatten());
        shards.checkpoints.push(cp);
    }
    if observed.checkpoint.is_none() {
        observed.checkpoint = aggregate(&observed.spec, &consumer, &shards);
    }
    observed.shards = Some(shards);
    Ok(())
}

/// The shards' checkpoint ConfigMaps of sync `name` that exist, whatever the parallelism now.
async fn shard_configmaps_of(configmaps: &Api<ConfigMap>, name: &str) -> Result<Vec<ConfigMap>> {
    let prefix = format!("{}-{SHARD_DIR_PREFIX}", names::checkpoint(name));
    let selector = format!("{}={name}", build::SYNC_LABEL);
    let list = configmaps
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::Kube)?;
    Ok(list
        .items
        .into_iter()
        .filter(|cm| {
            cm.name_any()
                .strip_prefix(&prefix)
                .is_some_and(|i| i.parse::<u32>().is_ok())
        })
        .collect())
}

/// Fences every shard's checkpoint ConfigMap as the checkpoint ConfigMap is fenced on a stop:
/// a shard still running can no longer save, so never commits.
///
/// # Errors
/// The API server's.
pub async fn fence(configmaps: &Api<ConfigMap>, name: &str, fence: &str) -> Result<()> {
    for cm in shard_configmaps_of(configmaps, name).await? {
        if cm.annotations().get(FENCED_ANNOTATION).map(String::as_str) != Some(fence) {
            let patch = serde_json::json!({"metadata": {"annotations": {
                FENCED_ANNOTATION: fence,
            }}});
            merge_unless_gone(configmaps, &cm.name_any(), &patch).await?;
        }
    }
    Ok(())
}

/// What the stopped shards left in Doris, each under its own consumer's labels: their saved
/// checkpoints' pre-committed loads and the loads after them (a shard that never saved never
/// loaded).
///
/// # Errors
/// The API server's.
pub async fn work_left(
    configmaps: &Api<ConfigMap>,
    ns: &str,
    spec: &DorisChangelogSyncSpec,
    name: &str,
) -> Result<Vec<Work>> {
    let mut works = Vec::new();
    for cm in shard_configmaps_of(configmaps, name).await? {
        let Some(cp) = checkpoint::text_of(&cm).and_then(|t| checkpoint::parse(t).ok().flatten())
        else {
            continue;
        };
        let work = cleanup::work_left(ns, spec, Some(&cm), &cp.consumer_id);
        if !work.is_empty() {
            works.push(work);
        }
    }
    Ok(works)
}

/// Clears the shards' checkpoints (after a re-initialisation cleaned what they left), as the
/// checkpoint ConfigMap's is cleared: the next consumer starts without them, and a shard that
/// outlived the stop can no longer save (the resourceVersion moved). The ConfigMaps stay (the
/// operator deletes no ConfigMap; owner references collect them with the sync).
///
/// # Errors
/// The API server's.
pub async fn clear(configmaps: &Api<ConfigMap>, name: &str) -> Result<()> {
    let clear = serde_json::json!({"data": {checkpoint::CHECKPOINT_KEY: null}});
    for cm in shard_configmaps_of(configmaps, name).await? {
        if checkpoint::text_of(&cm).is_some() {
            merge_unless_gone(configmaps, &cm.name_any(), &clear).await?;
        }
    }
    Ok(())
}
