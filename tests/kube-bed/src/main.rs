//! `dcs-kube-bed`: starts the test bed's control plane (and, with `--kubelet`, the process
//! kubelet) for scripts, prints one JSON line with its address and kubeconfig, and stops
//! everything on SIGTERM or Ctrl-C (pods get SIGTERM, then SIGKILL after 5 s). With
//! `--pod-api-proxy NAMESPACE` the pods of that namespace reach the API server through a fault
//! proxy that the script arms over HTTP (`pod_api_proxy.control` in the JSON line).

use std::path::PathBuf;

use clap::Parser;
use dcs_kube_bed::{ControlPlane, FaultProxy, Kubelet, KubeletConfig, ProxyControl};

#[derive(Parser, Debug)]
#[command(about = "A genuine Kubernetes control plane and a process kubelet, for tests")]
struct Args {
    /// Work directory (certificates, etcd data, component logs, pod volumes); a temporary one
    /// removed at exit when unset.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the admin kubeconfig here.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Run a kubelet: pods scheduled to its Node run as local processes.
    #[arg(long)]
    kubelet: bool,
    /// The kubelet's Node name.
    #[arg(long, default_value = dcs_kube_bed::NODE_NAME)]
    node_name: String,
    /// `NAME=PATH`, repeatable: an image (registry and tag ignored) runs this binary.
    #[arg(long = "image-map", value_parser = parse_map)]
    image_map: Vec<(String, PathBuf)>,
    /// Repeatable: pods of this namespace reach the API server through a fault proxy
    /// (`dcs_kube_bed::FaultProxy`), whose plain-HTTP control endpoint (`ProxyControl`: hold the
    /// next answer, release it) is printed as `pod_api_proxy.control`.
    #[arg(long = "pod-api-proxy", value_name = "NAMESPACE")]
    pod_api_proxy: Vec<String>,
}

fn parse_map(s: &str) -> Result<(String, PathBuf), String> {
    let (n, p) = s.split_once('=').ok_or("expected NAME=PATH")?;
    Ok((n.to_string(), PathBuf::from(p)))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dcs-kube-bed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), dcs_kube_bed::Error> {
    let dir = args.dir.clone();
    let cp = tokio::task::spawn_blocking(move || ControlPlane::start(dir.as_deref()))
        .await
        .map_err(|e| dcs_kube_bed::Error::Start(e.to_string()))??;
    if let Some(path) = &args.kubeconfig {
        std::fs::write(path, cp.kubeconfig("default"))?;
    }
    let mut pod_api_proxy = None;
    let mut api_via = None;
    if args.kubelet && !args.pod_api_proxy.is_empty() {
        let proxy = FaultProxy::start(cp.address).await?;
        let control = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        pod_api_proxy = Some(serde_json::json!({
            "address": proxy.address.to_string(),
            "control": format!("http://{}", control.local_addr()?),
            "namespaces": args.pod_api_proxy,
        }));
        api_via = Some((args.pod_api_proxy.clone(), proxy.address));
        tokio::spawn(ProxyControl::serve(proxy, control));
    }
    let kubelet = if args.kubelet {
        Some(
            Kubelet::start(
                &cp,
                KubeletConfig {
                    node_name: args.node_name.clone(),
                    image_map: args.image_map.clone(),
                    work_dir: cp.dir.join("kubelet"),
                    api_via,
                },
            )
            .await?,
        )
    } else {
        None
    };
    println!(
        "{}",
        serde_json::json!({
            "url": cp.url,
            "address": cp.address.to_string(),
            "kubeconfig": args.kubeconfig.as_ref().unwrap_or(&cp.kubeconfig_path()),
            "dir": cp.dir,
            "node": kubelet.as_ref().map(|k| k.node_name.clone()),
            "pids": cp.pids().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
            "pod_api_proxy": pod_api_proxy,
        })
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    if let Some(k) = kubelet {
        k.shutdown().await;
    }
    tokio::task::spawn_blocking(move || cp.stop())
        .await
        .map_err(|e| dcs_kube_bed::Error::Start(e.to_string()))?;
    Ok(())
}
