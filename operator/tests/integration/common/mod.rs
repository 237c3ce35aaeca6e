//! Shared set-up of the operator tests: a kube-emu client with the CRD installed, a doris-emu
//! with tables, and the credentials Secret the syncs reference.
#![allow(dead_code)]

use anyhow::Result;
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use dcs_kube_emu::KubeEmu;
use k8s_openapi::{
    api::core::v1::Secret,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client, api::PostParams};
use mysql_async::prelude::Queryable;

/// A client for `emu` from its kubeconfig.
pub async fn client_for(emu: &KubeEmu) -> Result<Client> {
    let kc = kube::config::Kubeconfig::from_yaml(&emu.kubeconfig("default"))?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(Client::try_from(config)?)
}

/// Apply the chart's generated CRD.
pub async fn install_crd(client: &Client) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/dcs-operator/crds/dorischangelogsyncs.yaml"
    );
    let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(path)?)?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await?;
    Ok(())
}

/// A Doris emulator on free ports with database `db` and the given CREATE TABLE statements run.
pub async fn doris_with_tables(ddls: &[&str]) -> Result<RunningEmulator> {
    let doris = dcs_doris_emu::start(EmuConfig::ephemeral()).await?;
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(doris.ports().query_port)
        .user(Some("root"))
        .pass(Some(""));
    let mut conn = mysql_async::Conn::new(opts).await?;
    conn.query_drop("CREATE DATABASE db").await?;
    for ddl in ddls {
        conn.query_drop(*ddl).await?;
    }
    conn.disconnect().await?;
    Ok(doris)
}

/// The Secret `default/doris` (root, empty password) that test syncs name.
pub async fn create_doris_secret(client: &Client) -> Result<()> {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "doris", "namespace": "default"},
        "stringData": {"username": "root", "password": ""},
    }))?;
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// A MySQL connection to the emulator as root.
pub async fn mysql(doris: &RunningEmulator) -> Result<mysql_async::Conn> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(doris.ports().query_port)
        .user(Some("root"))
        .pass(Some(""));
    Ok(mysql_async::Conn::new(opts).await?)
}

/// The events about object `name` with `reason`, as (type, note).
pub async fn events_about(
    client: &Client,
    name: &str,
    reason: &str,
) -> Result<Vec<(String, String)>> {
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), "default")
        .list(&Default::default())
        .await?;
    Ok(events
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect())
}
