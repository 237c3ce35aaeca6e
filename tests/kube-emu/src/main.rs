//! `dcs-kube-emu`: runs the API server (and optionally the process kubelet) until interrupted.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use dcs_kube_emu::{Config, KubeEmu};

/// A Kubernetes API server and process kubelet for tests.
#[derive(Debug, Parser)]
#[command(name = "dcs-kube-emu", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write a kubeconfig (CA data and admin token) to this file.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Run pods as local processes.
    #[arg(long)]
    kubelet: bool,
    /// Map an image name (registry and tag ignored) to a local binary: NAME=PATH. Repeatable.
    #[arg(long = "image-map", value_parser = parse_image_map)]
    image_map: Vec<(String, PathBuf)>,
    /// Persist state (objects, CA, token) in this directory across restarts.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Where pod volumes live.
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Watch events kept for resuming; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Enforce RBAC (Roles, ClusterRoles and bindings) for service-account tokens.
    #[arg(long)]
    authorize: bool,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 5)]
    bookmark_seconds: u64,
}

fn parse_image_map(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=PATH, got {s}"))?;
    Ok((name.to_string(), PathBuf::from(path)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let cfg = Config {
        host: args.host,
        port: args.port,
        kubelet: args.kubelet,
        image_map: args.image_map,
        data_dir: args.data_dir,
        watch_history: args.watch_history,
        bookmark_every: Duration::from_secs(args.bookmark_seconds.max(1)),
        work_dir: args.work_dir,
        authorize: args.authorize,
    };
    let emu = KubeEmu::start(cfg).await?;
    if let Some(path) = &args.kubeconfig {
        std::fs::write(path, emu.kubeconfig("default"))?;
    }
    println!(
        "{}",
        serde_json::json!({"address": emu.addr.to_string(), "url": emu.url, "kubeconfig": args.kubeconfig})
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    emu.shutdown().await;
    Ok(())
}
