//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::Result;
use dcs_kube_emu::{Config, KubeEmu};
use kube::Client;

/// Upper bound of every wait in the tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// Starts an emulator and a kube-rs client for it.
pub async fn start(cfg: Config) -> Result<(KubeEmu, Client)> {
    let emu = KubeEmu::start(cfg).await?;
    let client = client_for(&emu).await?;
    Ok((emu, client))
}

/// A kube-rs client with the emulator's kubeconfig.
pub async fn client_for(emu: &KubeEmu) -> Result<Client> {
    let kc = kube::config::Kubeconfig::from_yaml(&emu.kubeconfig("default"))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(Client::try_from(config)?)
}

/// The code and reason of an API error.
pub fn api_code(e: &kube::Error) -> Option<(u16, String)> {
    match e {
        kube::Error::Api(s) => Some((s.code, s.reason.clone())),
        _ => None,
    }
}

/// Polls `f` until it returns true, for at most [`WAIT`].
pub async fn eventually<F, Fut>(what: &str, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("timed out waiting for {what}")
}
