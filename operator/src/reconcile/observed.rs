//! What one pass observed of a sync: the input of the pure decisions ([`super::plan`],
//! [`super::status`], [`super::shards`]), and the consumer ids it implies. Pure data, filled in
//! by `observe.rs`.

use dcs_crds::{DorisChangelogSyncSpec, DorisChangelogSyncStatus};

use super::stop::StopMark;
use crate::checkpoint::Checkpoint;
use crate::facts::{ProbeFailure, SourceProbe};

/// Everything the decision depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The sync's name.
    pub name: String,
    /// The desired state.
    pub spec: DorisChangelogSyncSpec,
    /// metadata.generation.
    pub generation: Option<i64>,
    /// Whether metadata.deletionTimestamp is set.
    pub deleting: bool,
    /// Whether the operator lets `spec.runner` have its image and service account (the message
    /// naming the field and the setting when not).
    pub runner_allowed: Result<(), String>,
    /// What the source probe found, or why it failed.
    pub probe: Result<SourceProbe, ProbeFailure>,
    /// Whether the sink answered (always `Ok` for the stdout sink), or why not.
    pub sink_probe: Result<(), ProbeFailure>,
    /// The runner's checkpoint, if one was saved (already filtered to the active consumer).
    pub checkpoint: Option<Checkpoint>,
    /// Why the stored checkpoint could not be read, if it could not.
    pub checkpoint_error: Option<String>,
    /// The status as it is now.
    pub status: DorisChangelogSyncStatus,
    /// The reinitNonce the running configuration was built with (`None` before the first launch).
    pub applied_nonce: Option<String>,
    /// The runner workload.
    pub runner: RunnerState,
    /// Container restarts over the runner's pods (`None` while there is no pod).
    pub runner_restarts: Option<i32>,
    /// The last time a runner container exited, if one did (its pod's current or last state).
    pub runner_exit: Option<RunnerExit>,
    /// A stop of the runner in progress (the sync's `dcs.dev/stopping` annotation).
    pub stopping: Option<StopMark>,
    /// A snapshot read by shards: T0 and the shards' checkpoints (`None` for one runner).
    pub shards: Option<ShardsObserved>,
}

/// How a runner container last terminated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnerExit {
    /// The pod.
    pub pod: String,
    /// The exit code.
    pub code: i32,
    /// The termination message or reason.
    pub message: String,
}

/// The runner workload as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunnerState {
    /// No Deployment or Job.
    Absent,
    /// Exists and is not known to be failing.
    Running,
    /// Its pod keeps restarting.
    CrashLooping {
        /// The pod's restart count.
        restarts: i32,
        /// The last termination message or reason.
        message: String,
    },
    /// A snapshot Job that completed.
    Succeeded,
    /// A Job that gave up.
    Failed {
        /// Why.
        message: String,
    },
}

/// What the operator read of a sharded snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShardsObserved {
    /// The shards: the parallelism the active consumer's snapshot started with (the config
    /// ConfigMap's manifest records it; a spec changed since takes effect with the next
    /// consumer), else `spec.snapshot.parallelism`.
    pub count: u32,
    /// T0 (a TSO) as the config ConfigMap's manifest records it for the active consumer.
    pub recorded_t0: Option<i64>,
    /// Each shard's checkpoint, by index (`None`: none saved).
    pub checkpoints: Vec<Option<Checkpoint>>,
    /// Which shards' ConfigMaps exist, by index.
    pub configmaps: Vec<bool>,
    /// Whether the active consumer has a checkpoint of its own (the changelog runner saved one).
    pub own_checkpoint: bool,
}

/// The consumer id of a generation: the base for 0, `<base>-r<generation>` after that.
pub fn consumer_id_for(base: &str, generation: i64) -> String {
    if generation == 0 {
        base.to_owned()
    } else {
        format!("{base}-r{generation}")
    }
}

/// The base consumer id: offsets.consumerId, else the sync's name.
pub fn base_consumer_id(observed: &Observed) -> String {
    observed
        .spec
        .offsets
        .as_ref()
        .and_then(|o| o.consumer_id.clone())
        .unwrap_or_else(|| observed.name.clone())
}

/// Whether `consumer` is one this sync re-initialised away from (an earlier generation).
pub fn is_earlier_consumer(observed: &Observed, consumer: &str) -> bool {
    let base = base_consumer_id(observed);
    (0..consumer_generation(observed)).any(|g| consumer_id_for(&base, g) == consumer)
}

/// The active consumer generation (0 before any reinitialization).
pub fn consumer_generation(observed: &Observed) -> i64 {
    observed.status.consumer_generation.unwrap_or(0)
}
