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
    #[arg(long, env = "DCS_RUNNER_RESOURCES", value_parser = parse_runner_resources)]
    runner_resources: Option<ResourceRequirements>,
    /// Where runner containers serve /metrics, /healthz and /readyz (HOST:PORT; the host an IP or
    /// $(POD_IP)); the port is their `metrics` container port, which the probes use.
    #[arg(long, env = "DCS_RUNNER_METRICS_ADDR", default_value = "0.0.0.0:9464", value_parser = parse_runner_metrics_addr)]
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

/// Reads `--runner-metrics-addr`: `HOST:PORT`, the host an IP address (IPv6 in brackets) or
/// `$(POD_IP)` (where pods share one network, as on a test kubelet), the port 1 to 65535.
///
/// # Errors
/// The reason, naming the flag, when the text is not such an address.
fn parse_runner_metrics_addr(text: &str) -> Result<build::RunnerMetricsAddr, String> {
    use build::{POD_IP_HOST, RUNNER_METRICS_PORT};
    let bad = || {
        format!(
            "--runner-metrics-addr: {text:?} is not HOST:PORT with an IP address or {POD_IP_HOST} \
             as the host, e.g. \"0.0.0.0:{RUNNER_METRICS_PORT}\" or \"{POD_IP_HOST}:{RUNNER_METRICS_PORT}\""
        )
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(bad)?;
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .map_or_else(
            || host.parse::<std::net::Ipv4Addr>().is_ok(),
            |h| h.parse::<std::net::Ipv6Addr>().is_ok(),
        );
    if host != POD_IP_HOST && !ip {
        return Err(bad());
    }
    Ok(build::RunnerMetricsAddr {
        host: host.to_owned(),
        port,
    })
}

/// Reads `--runner-resources`: container resources in JSON (or YAML), as the chart passes them,
/// checked as the API server would check them.
///
/// # Errors
/// The reason, naming the flag and the field, when the text is not such resources.
fn parse_runner_resources(text: &str) -> Result<ResourceRequirements, String> {
    const FLAG: &str = "--runner-resources";
    const EXAMPLE: &str =
        r#"{"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"512Mi"}}"#;
    let value: serde_json::Value = serde_yaml::from_str(text)
        .map_err(|e| format!("{FLAG}: not JSON or YAML ({e}); write e.g. {EXAMPLE}"))?;
    let Some(object) = value.as_object() else {
        return Err(format!("{FLAG}: not an object; write e.g. {EXAMPLE}"));
    };
    if let Some(key) = object
        .keys()
        .find(|k| !["requests", "limits", "claims"].contains(&k.as_str()))
    {
        return Err(format!(
            "{FLAG}: unknown field {key:?}; the fields are requests, limits and claims"
        ));
    }
    let resources: ResourceRequirements =
        serde_json::from_value(value).map_err(|e| format!("{FLAG}: {e}; write e.g. {EXAMPLE}"))?;
    let errors = dcs_crds::validate::validate_resources(FLAG, &resources);
    if errors.is_empty() {
        Ok(resources)
    } else {
        Err(errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "))
    }
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

#[cfg(test)]
mod tests {
    use build::RunnerMetricsAddr;

    use super::*;

    fn rr(yaml: &str) -> ResourceRequirements {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn the_operator_flag_is_read_and_checked() {
        assert_eq!(
            parse_runner_resources(
                r#"{"requests":{"memory":"256Mi"},"limits":{"memory":"1Gi","cpu":2}}"#
            ),
            Ok(rr(
                "{requests: {memory: 256Mi}, limits: {memory: 1Gi, cpu: '2'}}"
            ))
        );
        assert_eq!(parse_runner_resources("{}"), Ok(rr("{}")));
        assert_eq!(
            parse_runner_resources(r#"{"requests":{"memory":"2Gi"},"limits":{"memory":"1Gi"}}"#),
            Err(
                "--runner-resources.requests.memory: is 2Gi, more than the limit 1Gi \
                 (--runner-resources.limits.memory); Kubernetes admits no pod whose request is \
                 above its limit"
                    .into()
            )
        );
        assert_eq!(
            parse_runner_resources(r#"{"limit":{"memory":"1Gi"}}"#),
            Err(r#"--runner-resources: unknown field "limit"; the fields are requests, limits and claims"#.into())
        );
        let err = parse_runner_resources(r#"{"limits":{"memory":"lots"}}"#).unwrap_err();
        assert!(
            err.starts_with(r#"--runner-resources.limits.memory: "lots" is not a quantity"#),
            "{err}"
        );
        let err = parse_runner_resources("[1]").unwrap_err();
        assert!(
            err.starts_with("--runner-resources: not an object"),
            "{err}"
        );
        let err = parse_runner_resources("{").unwrap_err();
        assert!(
            err.starts_with("--runner-resources: not JSON or YAML"),
            "{err}"
        );
    }

    #[test]
    fn the_metrics_address_flag_is_read_and_checked() {
        let addr = |host: &str, port| RunnerMetricsAddr {
            host: host.into(),
            port,
        };
        for (text, want) in [
            ("0.0.0.0:9464", addr("0.0.0.0", 9464)),
            ("$(POD_IP):19464", addr("$(POD_IP)", 19464)),
            ("[::]:9464", addr("[::]", 9464)),
            ("127.0.0.1:1", addr("127.0.0.1", 1)),
        ] {
            assert_eq!(parse_runner_metrics_addr(text), Ok(want), "{text}");
        }
        assert_eq!(RunnerMetricsAddr::default().to_string(), "0.0.0.0:9464");
        for text in [
            "9464",
            "0.0.0.0:0",
            "0.0.0.0:70000",
            "localhost:9464",
            "$(HOST_IP):9464",
            "::1:9464",
            ":9464",
        ] {
            assert_eq!(
                parse_runner_metrics_addr(text),
                Err(format!(
                    "--runner-metrics-addr: {text:?} is not HOST:PORT with an IP address or \
                     $(POD_IP) as the host, e.g. \"0.0.0.0:9464\" or \"$(POD_IP):9464\""
                )),
                "{text}"
            );
        }
    }
}
