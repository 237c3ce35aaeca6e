//! `dcs-operator`: watches `DorisChangelogSync`s and runs their runners.
#![forbid(unsafe_code)]

use std::{net::SocketAddr, sync::Arc, sync::atomic::Ordering};

use clap::Parser;
use dcs_crds::DorisChangelogSync;
use dcs_operator::shutdown::{DRAIN_GRACE, Shutdown, drained};
use dcs_operator::{
    controller::{self, Metrics},
    leader::{self, LeaderElector, LeaseConfig, Outcome},
    metrics,
    reconcile::{Context, build},
};
use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::{Api, Client, api::ListParams};
use tracing::{error, info};

/// Exit code when the leader Lease is lost: the pod restarts and campaigns again.
const EXIT_LEASE_LOST: i32 = 3;

/// The dcs controller.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Namespaces to watch, comma separated; all namespaces when omitted.
    #[arg(long, env = "DCS_NAMESPACES", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// The runner image used when a sync does not set spec.runner.image.
    #[arg(long, env = "DCS_RUNNER_IMAGE")]
    runner_image: Option<String>,
    /// Requests and limits (JSON) of runner containers whose sync does not set
    /// spec.runner.resources; a built-in default when omitted.
    #[arg(long, env = "DCS_RUNNER_RESOURCES", value_parser = build::parse_runner_resources)]
    runner_resources: Option<ResourceRequirements>,
    /// Where runner containers serve /metrics, /healthz and /readyz (HOST:PORT; the host an IP or
    /// $(POD_IP)); the port is their `metrics` container port, which the probes use.
    #[arg(long, env = "DCS_RUNNER_METRICS_ADDR", default_value = "0.0.0.0:9464", value_parser = build::parse_runner_metrics_addr)]
    runner_metrics_addr: build::RunnerMetricsAddr,
    /// Images a sync may name in spec.runner.image besides --runner-image, comma separated; an
    /// entry ending in `*` allows every image starting with what is before it. None by default.
    #[arg(long, env = "DCS_ALLOWED_RUNNER_IMAGES", default_value = "")]
    allowed_runner_images: String,
    /// Service accounts a sync may name in spec.runner.serviceAccountName, comma separated. None
    /// by default: the operator makes each runner's service account.
    #[arg(long, env = "DCS_ALLOWED_RUNNER_SERVICE_ACCOUNTS", default_value = "")]
    allowed_runner_service_accounts: String,
    /// Reconcile only while holding a coordination.k8s.io/v1 Lease (run several replicas).
    #[arg(long, env = "DCS_LEADER_ELECTION")]
    leader_election: bool,
    /// The Lease's name; its namespace is $POD_NAMESPACE (else the service account's namespace,
    /// else default) and the candidate identity $POD_NAME (else <hostname>-<pid>).
    #[arg(long, env = "DCS_LEADER_ELECTION_LEASE", default_value = leader::DEFAULT_LEASE_NAME)]
    leader_election_lease: String,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "DCS_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// How many syncs are reconciled at once; each reconcile probes Doris (cached) and talks to
    /// the API server, so this bounds the load on both after a restart with many syncs.
    #[arg(long, env = "DCS_MAX_CONCURRENT_RECONCILES", default_value_t = dcs_operator::reconcile::context::DEFAULT_MAX_CONCURRENT_RECONCILES)]
    max_concurrent_reconciles: u16,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    log_format: String,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    if args.log_format == "json" {
        tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let client = match Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            error!(error = %e, "cannot build a Kubernetes client from KUBECONFIG or the in-cluster config");
            std::process::exit(1);
        }
    };
    let probe: Api<DorisChangelogSync> = match args.namespaces.first() {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    if let Err(e) = probe.list(&ListParams::default().limit(1)).await {
        if matches!(&e, kube::Error::Api(s) if s.code == 404) {
            error!(
                "the DorisChangelogSync CRD is not installed: apply charts/dcs-operator/crds/dorischangelogsyncs.yaml (or install the Helm chart) and start again"
            );
        } else {
            error!(error = %e, "cannot list DorisChangelogSyncs");
        }
        std::process::exit(1);
    }
    let metrics = Arc::new(Metrics::default());
    metrics
        .election
        .store(args.leader_election, Ordering::Relaxed);
    let addr = args.metrics_addr;
    let served = metrics.clone();
    tokio::spawn(async move {
        if let Err(e) = metrics::bind_and_serve(addr, served).await {
            error!(error = %e, %addr, "cannot serve metrics");
        }
    });
    let mut ctx = Context::new(client.clone(), args.runner_image.clone());
    ctx.max_concurrent_reconciles = args.max_concurrent_reconciles;
    ctx.runner.resources = args.runner_resources.clone();
    ctx.runner.metrics_addr = args.runner_metrics_addr.clone();
    ctx.runner.policy = dcs_crds::access::RunnerPolicy {
        allowed_images: dcs_crds::access::RunnerPolicy::list(&args.allowed_runner_images),
        allowed_service_accounts: dcs_crds::access::RunnerPolicy::list(
            &args.allowed_runner_service_accounts,
        ),
    };
    let ctx = Arc::new(ctx);
    let shutdown = Shutdown::on_signals();
    let controllers = {
        let client = client.clone();
        let metrics = metrics.clone();
        let namespaces = args.namespaces.clone();
        async move {
            if namespaces.is_empty() {
                controller::run(client, None, ctx, metrics).await;
            } else {
                let controllers = namespaces.iter().map(|ns| {
                    controller::run(
                        client.clone(),
                        Some(ns.clone()),
                        ctx.clone(),
                        metrics.clone(),
                    )
                });
                futures::future::join_all(controllers).await;
            }
        }
    };
    if !args.leader_election {
        metrics.leading.store(true, Ordering::Relaxed);
        info!(namespaces = ?args.namespaces, "dcs-operator started");
        drained(controllers, &shutdown, DRAIN_GRACE).await;
        info!("dcs-operator stopped");
        return;
    }
    let config = LeaseConfig::new(
        &args.leader_election_lease,
        &leader::default_namespace(),
        &leader::default_identity(),
    );
    info!(lease = %config.name, namespace = %config.namespace, identity = %config.identity,
          namespaces = ?args.namespaces, "dcs-operator started; campaigning for the leader Lease");
    let elector = LeaderElector::new(client, config);
    let leading = metrics.clone();
    let outcome = elector
        .lead(
            shutdown.requested(),
            move || {
                leading.leading.store(true, Ordering::Relaxed);
                info!("leading: starting the controllers");
            },
            drained(controllers, &shutdown, DRAIN_GRACE),
        )
        .await;
    metrics.leading.store(false, Ordering::Relaxed);
    match outcome {
        Outcome::Finished(_) => info!("dcs-operator stopped; the leader Lease was released"),
        Outcome::NeverLed => info!("dcs-operator stopped while standing by"),
        Outcome::Lost(why) => {
            error!(%why, "lost the leader Lease: stopped reconciling; exiting so the pod restarts as a candidate");
            std::process::exit(EXIT_LEASE_LOST);
        }
    }
}
