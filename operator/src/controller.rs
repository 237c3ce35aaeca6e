//! The watch loop: a kube-rs `Controller` over `DorisChangelogSync` owning the runner objects.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use dcs_crds::DorisChangelogSync;
use futures::StreamExt;
use k8s_openapi::api::{apps::v1::Deployment, batch::v1::Job, core::v1::ConfigMap};
use kube::{
    Api, Client, ResourceExt,
    runtime::{Controller, controller::Action, watcher},
};
use tracing::warn;

use crate::{
    Error,
    reconcile::{Context, reconcile},
};

/// Counters served on /metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Reconciles run.
    pub reconciles: AtomicU64,
    /// Reconciles that failed.
    pub errors: AtomicU64,
}

impl Metrics {
    /// The counters in the Prometheus text format.
    pub fn render(&self) -> String {
        format!(
            "# TYPE dcs_operator_reconciles_total counter\ndcs_operator_reconciles_total {}\n# TYPE dcs_operator_reconcile_errors_total counter\ndcs_operator_reconcile_errors_total {}\n",
            self.reconciles.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed)
        )
    }
}

/// Transient errors back off; the controller retries them.
fn error_policy(sync: Arc<DorisChangelogSync>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(sync = %sync.name_any(), kind = error.metric_label(), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Runs the controller for one namespace (or all when `None`) until a shutdown signal.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
) {
    let (syncs, deployments, jobs, configmaps) = match &namespace {
        Some(ns) => (
            Api::<DorisChangelogSync>::namespaced(client.clone(), ns),
            Api::<Deployment>::namespaced(client.clone(), ns),
            Api::<Job>::namespaced(client.clone(), ns),
            Api::<ConfigMap>::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let owned = || watcher::Config::default().labels("app.kubernetes.io/managed-by=dcs-operator");
    Controller::new(syncs, watcher::Config::default())
        .owns(deployments, owned())
        .owns(jobs, owned())
        .owns(configmaps, owned())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| {
            let metrics = metrics.clone();
            async move {
                metrics.reconciles.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = result {
                    metrics.errors.fetch_add(1, Ordering::Relaxed);
                    warn!(error = %e, "controller event failed");
                }
            }
        })
        .await;
}
