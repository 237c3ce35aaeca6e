//! Shared set-up of the operator tests: a namespace of the test bed's control plane (one per
//! test binary, genuine Kubernetes) with the CRD installed, a doris-emu with tables, and the
//! credentials Secret the syncs reference. Each test works in its own namespace: the clients
//! here default to it, so `Api::default_namespaced` is the test's namespace.
#![allow(dead_code)]

use anyhow::Result;
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use dcs_kube_bed::TestNamespace;
use k8s_openapi::{
    api::core::v1::Secret,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client, api::PostParams};
use mysql_async::prelude::Queryable;

/// A fresh namespace `<prefix>-<random>` of the shared control plane, for one test.
pub async fn bed(prefix: &str) -> Result<TestNamespace> {
    Ok(dcs_kube_bed::namespace(prefix).await?)
}

/// A control plane of the test's own, for tests that change what is cluster-wide (the CRD) and
/// so cannot share one; stopped when dropped.
pub async fn private_control_plane() -> Result<(dcs_kube_bed::ControlPlane, Client)> {
    let cp = tokio::task::spawn_blocking(|| dcs_kube_bed::ControlPlane::start(None)).await??;
    let client = cp.client("default").await?;
    Ok((cp, client))
}

/// The chart's generated CRD.
pub fn chart_crd() -> Result<serde_json::Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/dcs-operator/crds/dorischangelogsyncs.yaml"
    );
    Ok(serde_yaml::from_str(&std::fs::read_to_string(path)?)?)
}

/// Apply `crd` (created, or left as it is when it exists) and wait until it is Established.
pub async fn apply_crd(client: &Client, crd: serde_json::Value) -> Result<()> {
    let crd: CustomResourceDefinition = serde_json::from_value(crd)?;
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let name = crd.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let established = api
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "CRD {name} not Established after 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Apply the chart's generated CRD (shared by every test of the control plane).
pub async fn install_crd(client: &Client) -> Result<()> {
    apply_crd(client, chart_crd()?).await
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

/// The Secret `doris` (root, empty password) that test syncs name, in the client's namespace,
/// open to every sync there.
pub async fn create_doris_secret(client: &Client) -> Result<()> {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "doris", "annotations": {"dcs.dev/allowed-syncs": "*"}},
        "stringData": {"username": "root", "password": ""},
    }))?;
    Api::<Secret>::default_namespaced(client.clone())
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

/// The events about object `name` with `reason` in the client's namespace, as (type, note).
/// Waits up to 10 s for the first: the API server may show a just-recorded event a moment later.
pub async fn events_about(
    client: &Client,
    name: &str,
    reason: &str,
) -> Result<Vec<(String, String)>> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let events = Api::<k8s_openapi::api::events::v1::Event>::default_namespaced(client.clone())
            .list(&Default::default())
            .await?;
        let found: Vec<(String, String)> = events
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        if !found.is_empty() || tokio::time::Instant::now() > deadline {
            return Ok(found);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Polls `check` every 100 ms until it gives a value; panics naming `what` after `timeout`.
pub async fn poll<T>(
    what: &str,
    timeout: std::time::Duration,
    mut check: impl AsyncFnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Runs the reconciler on the stored object three times, so the status settles (the first run
/// adds the finalizer only); the object after.
pub async fn reconcile_a_few(
    api: &Api<dcs_crds::DorisChangelogSync>,
    name: &str,
    ctx: &std::sync::Arc<dcs_operator::reconcile::Context>,
) -> Result<dcs_crds::DorisChangelogSync> {
    for _ in 0..3 {
        let sync = api.get(name).await?;
        dcs_operator::reconcile::reconcile(std::sync::Arc::new(sync), ctx.clone()).await?;
    }
    Ok(api.get(name).await?)
}

/// Pre-commits one Stream Load (2PC) of one row into db.dst at `be` (`http(s)://host:port`) with
/// `http`; its transaction id.
pub async fn precommit(http: &reqwest::Client, be: &str, label: &str) -> Result<i64> {
    let resp: serde_json::Value = http
        .put(format!("{be}/api/db/dst/_stream_load"))
        .basic_auth("root", Some(""))
        .header("label", label)
        .header("two_phase_commit", "true")
        .header("column_separator", ",")
        .body("7,seven\n")
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(resp["Status"], "Success", "{resp}");
    Ok(resp["TxnId"].as_i64().expect("TxnId"))
}

/// The state doris-emu at `fe` (`http(s)://host:port`) gives transaction `txn_id`
/// (`PRECOMMITTED`, `ABORTED`, …; `missing` when it does not know it).
pub async fn txn_state(http: &reqwest::Client, fe: &str, txn_id: i64) -> Result<String> {
    let txns: serde_json::Value = http
        .get(format!("{fe}/_emu/txns"))
        .send()
        .await?
        .json()
        .await?;
    let list = txns
        .as_array()
        .cloned()
        .or_else(|| txns["txns"].as_array().cloned())
        .unwrap_or_default();
    Ok(list
        .iter()
        .find(|t| t["txn_id"].as_i64() == Some(txn_id))
        .and_then(|t| t["state"].as_str())
        .unwrap_or("missing")
        .to_owned())
}
