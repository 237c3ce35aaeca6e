//! `dcs-operator`: watches `DorisChangelogSync`s and runs their runners.
#![forbid(unsafe_code)]

use std::{net::SocketAddr, sync::Arc};

use clap::Parser;
use dcs_crds::DorisChangelogSync;
use dcs_operator::{
    controller::{self, Metrics},
    reconcile::Context,
};
use kube::{Api, Client, api::ListParams};
use tracing::{error, info};

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
    /// Elect a leader with a Lease before reconciling (not implemented yet).
    #[arg(long, env = "DCS_LEADER_ELECTION")]
    leader_election: bool,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, env = "DCS_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Log format: text or json.
    #[arg(long, default_value = "text")]
    log_format: String,
}

async fn serve_metrics(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    use axum::{Router, routing::get};
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move { m.render() }
            }),
        );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await
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
    if args.leader_election {
        error!("--leader-election is not implemented yet; run one replica without it");
        std::process::exit(2);
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
    let addr = args.metrics_addr;
    let served = metrics.clone();
    tokio::spawn(async move {
        if let Err(e) = serve_metrics(addr, served).await {
            error!(error = %e, %addr, "cannot serve metrics");
        }
    });
    let ctx = Arc::new(Context::new(client.clone(), args.runner_image.clone()));
    info!(namespaces = ?args.namespaces, "dcs-operator started");
    if args.namespaces.is_empty() {
        controller::run(client, None, ctx, metrics).await;
    } else {
        let controllers = args.namespaces.iter().map(|ns| {
            controller::run(
                client.clone(),
                Some(ns.clone()),
                ctx.clone(),
                metrics.clone(),
            )
        });
        futures::future::join_all(controllers).await;
    }
    info!("dcs-operator stopped");
}
