//! How `dcs-runner run` starts besides its settings: this run's shard (`--shard`, else the
//! Indexed Job's index), the checkpoint store it uses (a directory or a ConfigMap; a shard's
//! beside the sync's), and, for the changelog run after a sharded snapshot, whether every shard
//! is done at T0 (read from the shards' stores, which may still be running).
//!
//! [`choose_store`] is pure; [`prepare`] reads the environment and the shards' stores.

use std::path::PathBuf;

use dcs_crds::shard;

use crate::checkpoint::configmap::CONFIGMAP_ENV;
use crate::checkpoint::{CheckpointStore, ConfigMapStore, ReadOnlyDir};
use crate::settings::{PipelineConfig, Role};
use crate::{Error, Result};

/// Where a run keeps its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// The ConfigMap of this name (in a pod).
    ConfigMap(String),
    /// The directory (locked while the runner runs).
    Dir(PathBuf),
}

/// What a run starts with besides its settings.
#[derive(Debug)]
pub struct Launch {
    /// Its checkpoint store.
    pub store: StoreChoice,
    /// For the changelog run after a sharded snapshot: whether every shard is done at T0
    /// (`crate::pipeline::Control::shards_done`).
    pub shards_done: Option<std::result::Result<(), String>>,
}

/// The directory a run without `--checkpoint-dir` uses for `consumer_id`.
fn default_dir(consumer_id: &str) -> PathBuf {
    PathBuf::from("dcs-checkpoints").join(consumer_id)
}

/// Makes `config` the run of its shard, then decides its store and reads the shards' stores
/// when it follows them. `env` reads the environment (`DCS_CHECKPOINT_CONFIGMAP`,
/// `JOB_COMPLETION_INDEX`).
///
/// # Errors
/// [`Error::Config`] for a shard index that is not one, or both a ConfigMap and a directory;
/// the errors of [`PipelineConfig::assign_shard`].
pub async fn prepare(
    config: &mut PipelineConfig,
    shard_flag: Option<u32>,
    checkpoint_dir: Option<PathBuf>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Launch> {
    // The base consumer id: shards' stores are named after it.
    let base_consumer = config.consumer_id.clone();
    let index = shard_index(shard_flag, config.sharding.count, &env)?;
    if let Some(i) = index {
        config.assign_shard(i)?;
    }
    let configmap = env(CONFIGMAP_ENV).filter(|v| !v.is_empty());
    let shards_done = match config.sharding.role(config.startup_mode) {
        Ok(Role::AfterShards { count, t0 }) => Some(
            read_shards(
                configmap.as_deref(),
                checkpoint_dir
                    .clone()
                    .unwrap_or_else(|| default_dir(&base_consumer)),
                &base_consumer,
                count,
                t0.tso,
            )
            .await,
        ),
        // A run with a checkpoint of its own needs neither; one without stops on the error.
        Ok(_) | Err(_) => None,
    };
    let store = choose_store(
        index,
        configmap,
        checkpoint_dir,
        &base_consumer,
        &config.consumer_id,
    )?;
    Ok(Launch { store, shards_done })
}

/// The store of a run (pure): the ConfigMap or the directory given, the default directory
/// otherwise; a shard keeps its checkpoint beside the sync's (`<dir>/shard-<i>`,
/// `<configmap>-shard-<i>`). `base_consumer` is the sync's consumer id, `consumer_id` the run's.
///
/// # Errors
/// [`Error::Config`] when both a ConfigMap and a directory are given.
pub fn choose_store(
    index: Option<u32>,
    configmap: Option<String>,
    checkpoint_dir: Option<PathBuf>,
    base_consumer: &str,
    consumer_id: &str,
) -> Result<StoreChoice> {
    let (configmap, checkpoint_dir) = match (index, configmap, checkpoint_dir) {
        (Some(i), Some(c), None) => (Some(shard::shard_configmap(&c, i)), None),
        (Some(i), None, dir) => (
            None,
            Some(
                dir.unwrap_or_else(|| default_dir(base_consumer))
                    .join(shard::shard_dir_name(i)),
            ),
        ),
        (_, configmap, dir) => (configmap, dir),
    };
    match (configmap, checkpoint_dir) {
        (Some(_), Some(_)) => Err(Error::Config {
            reason: format!(
                "both {CONFIGMAP_ENV} and --checkpoint-dir are set; choose one checkpoint store"
            ),
        }),
        (Some(name), None) => Ok(StoreChoice::ConfigMap(name)),
        (None, dir) => Ok(StoreChoice::Dir(
            dir.unwrap_or_else(|| default_dir(consumer_id)),
        )),
    }
}

/// This run's shard: `--shard`, else (for a sharded sync only) the Indexed Job's
/// `JOB_COMPLETION_INDEX`.
fn shard_index(
    flag: Option<u32>,
    count: u32,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<u32>> {
    if flag.is_some() || count <= 1 {
        return Ok(flag);
    }
    match env(shard::JOB_COMPLETION_INDEX_ENV) {
        Some(v) if !v.is_empty() => v.parse().map(Some).map_err(|_| Error::Config {
            reason: format!(
                "{} is {v:?}, not a shard index",
                shard::JOB_COMPLETION_INDEX_ENV
            ),
        }),
        _ => Ok(None),
    }
}

/// Whether every shard of a sharded snapshot is done at T0, from their stores (read only: the
/// shards may still run). A store that cannot be read counts as not done, with its error.
async fn read_shards(
    configmap: Option<&str>,
    dir: PathBuf,
    consumer_id: &str,
    count: u32,
    t0_tso: i64,
) -> std::result::Result<(), String> {
    let mut checkpoints = Vec::new();
    for i in 0..count {
        let loaded = match configmap {
            Some(name) => match ConfigMapStore::from_env(&shard::shard_configmap(name, i)).await {
                Ok(mut store) => store.load().await,
                Err(e) => Err(e),
            },
            None => {
                ReadOnlyDir::new(&dir.join(shard::shard_dir_name(i)))
                    .load()
                    .await
            }
        };
        checkpoints.push(loaded.map_err(|e| format!("shard {i} of {count}: {e}"))?);
    }
    shard::handover(&checkpoints, consumer_id, count, t0_tso)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(p: &str) -> PathBuf {
        PathBuf::from(p)
    }

    #[test]
    fn a_shard_keeps_its_checkpoint_beside_the_syncs() {
        assert_eq!(
            choose_store(Some(2), Some("s-ckpt".into()), None, "s", "s-shard-2").unwrap(),
            StoreChoice::ConfigMap(shard::shard_configmap("s-ckpt", 2))
        );
        assert_eq!(
            choose_store(Some(2), None, Some(dir("/data")), "s", "s-shard-2").unwrap(),
            StoreChoice::Dir(dir("/data").join(shard::shard_dir_name(2)))
        );
        assert_eq!(
            choose_store(Some(2), None, None, "s", "s-shard-2").unwrap(),
            StoreChoice::Dir(dir("dcs-checkpoints/s").join(shard::shard_dir_name(2)))
        );
    }

    #[test]
    fn a_run_uses_the_store_it_is_given_or_its_own_directory() {
        assert_eq!(
            choose_store(None, Some("s-ckpt".into()), None, "s", "s").unwrap(),
            StoreChoice::ConfigMap("s-ckpt".into())
        );
        assert_eq!(
            choose_store(None, None, None, "s", "s").unwrap(),
            StoreChoice::Dir(dir("dcs-checkpoints/s"))
        );
        for index in [None, Some(1)] {
            let err =
                choose_store(index, Some("s-ckpt".into()), Some(dir("/d")), "s", "s").unwrap_err();
            assert_eq!(
                err.to_string(),
                Error::Config {
                    reason: format!(
                        "both {CONFIGMAP_ENV} and --checkpoint-dir are set; choose one checkpoint store"
                    ),
                }
                .to_string()
            );
        }
    }

    #[test]
    fn the_shard_index_comes_from_the_flag_or_the_indexed_job() {
        let env = |v: Option<&'static str>| {
            move |k: &str| {
                (k == shard::JOB_COMPLETION_INDEX_ENV)
                    .then_some(v)
                    .flatten()
                    .map(str::to_owned)
            }
        };
        assert_eq!(shard_index(Some(1), 3, &env(Some("2"))).unwrap(), Some(1));
        assert_eq!(shard_index(None, 3, &env(Some("2"))).unwrap(), Some(2));
        assert_eq!(shard_index(None, 1, &env(Some("2"))).unwrap(), None);
        assert_eq!(shard_index(None, 3, &env(None)).unwrap(), None);
        assert_eq!(
            shard_index(None, 3, &env(Some("x")))
                .unwrap_err()
                .to_string(),
            Error::Config {
                reason: format!(
                    "{} is \"x\", not a shard index",
                    shard::JOB_COMPLETION_INDEX_ENV
                ),
            }
            .to_string()
        );
    }
}
