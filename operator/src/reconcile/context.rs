//! What every pass over a sync shares ([`Context`]: the client, the runner defaults, the caches
//! and the policies) and the name it writes under ([`FIELD_MANAGER`]). Below every I/O stage.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use kube::{
    Client,
    runtime::events::{Recorder, Reporter},
};

use super::{build, status::WrittenStatus, stop};
use crate::cleanup::RetryPolicy;
use crate::facts::{ProbeFailure, SourceProbe};

/// The one field manager of every write.
pub const FIELD_MANAGER: &str = "dcs-operator";
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

/// How long table facts are trusted before the source is probed again.
pub const REPROBE_INTERVAL: Duration = Duration::from_secs(180);

/// A cached probe result.
#[derive(Clone, Debug)]
pub struct CachedProbe {
    /// When the facts were read.
    pub at: Instant,
    /// The generation they were read for.
    pub generation: Option<i64>,
    /// The source probe.
    pub result: Result<SourceProbe, ProbeFailure>,
    /// The sink probe.
    pub sink: Result<(), ProbeFailure>,
}

impl CachedProbe {
    /// Whether these facts may still be used for `generation` at `now`: read for the same
    /// generation less than [`REPROBE_INTERVAL`] ago (pure).
    pub fn fresh(&self, generation: Option<i64>, now: Instant) -> bool {
        self.generation == generation && now.saturating_duration_since(self.at) < REPROBE_INTERVAL
    }
}
