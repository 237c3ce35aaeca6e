//! The ConfigMap checkpoint store against the test bed's control plane (genuine Kubernetes):
//! round trips, fencing by resourceVersion, creation races, and `dcs-runner run` with
//! `DCS_CHECKPOINT_CONFIGMAP`.

use crate::source_support;

use std::collections::BTreeMap;

use dcs_runner::Error;
use dcs_runner::checkpoint::configmap::CHECKPOINT_KEY;
use dcs_runner::checkpoint::{
    Checkpoint, CheckpointStore, ConfigMapStore, Counters, FORMAT_VERSION, Offset, Position,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// A changelog checkpoint of consumer `student-sync`.
pub(crate) fn cp(id: u64) -> Checkpoint {
    Checkpoint {
        format_version: FORMAT_VERSION,
        consumer_id: "student-sync".into(),
        checkpoint_id: id,
        saved_at: "2026-11-29T14:00:00Z".into(),
        position: Position::Changelog {
            offset: Offset {
                timestamp: "2026-11-29 13:59:50".into(),
                epoch_ms: 1_795_960_790_000,
                tso: 1_795_960_790_000 << 18,
            },
        },
        start_point: None,
        pending_txns: vec![],
        counters: Counters::default(),
        last_error: None,
        stopped: None,
        label_scheme: 1,
    }
}

async fn resource_version(client: &Client) -> String {
    Api::<ConfigMap>::default_namespaced(client.clone())
        .get("student-sync-checkpoint")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

fn store(client: &Client) -> ConfigMapStore {
    ConfigMapStore::new(
        client.clone(),
        client.default_namespace(),
        "student-sync-checkpoint",
    )
}

#[tokio::test]
async fn saves_and_loads_through_a_configmap() {
    let client = source_support::kube_bed().await;
    let mut a = store(&client);
    assert_eq!(a.load().await.unwrap(), None);
    a.save(&cp(1)).await.unwrap();
    a.save(&cp(2)).await.unwrap();
    let mut b = store(&client);
    assert_eq!(b.load().await.unwrap(), Some(cp(2)));
    // The JSON is readable in the ConfigMap, as the operator reads it.
    let cm = Api::<ConfigMap>::default_namespaced(client.clone())
        .get("student-sync-checkpoint")
        .await
        .unwrap();
    let json = &cm.data.unwrap()[CHECKPOINT_KEY];
    assert_eq!(dcs_runner::checkpoint::parse("test", json).unwrap(), cp(2));
    // The one that loaded last may save.
    b.save(&cp(3)).await.unwrap();
}

#[tokio::test]
async fn a_stale_second_store_is_fenced() {
    let client = source_support::kube_bed().await;
    let mut first = store(&client);
    first.load().await.unwrap();
    first.save(&cp(1)).await.unwrap();
    let mut second = store(&client);
    assert_eq!(second.load().await.unwrap(), Some(cp(1)));
    let read = resource_version(&client).await;
    // The first runner moves on; the second's resourceVersion is stale now.
    first.save(&cp(2)).await.unwrap();
    let now = resource_version(&client).await;
    assert_ne!(read, now);
    let err = second.save(&cp(2)).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Fenced { expected, found }
                if *expected == format!("resourceVersion {read}")
                    && *found == format!("resourceVersion {now}")
        ),
        "{err}"
    );
    assert_eq!(err.exit_code(), 4);
    // Nothing was written by the fenced save.
    assert_eq!(store(&client).load().await.unwrap(), Some(cp(2)));
}

#[tokio::test]
async fn a_fresh_store_is_fenced_until_it_reloads() {
    let client = source_support::kube_bed().await;
    let mut other = store(&client);
    other.save(&cp(5)).await.unwrap();
    // Never loaded: a save would create, and the ConfigMap exists.
    let mut fresh = store(&client);
    let err = fresh.save(&cp(1)).await.unwrap_err();
    let now = resource_version(&client).await;
    assert!(
        matches!(
            &err,
            Error::Fenced { expected, found }
                if expected == "no ConfigMap (never loaded)"
                    && *found == format!("resourceVersion {now}")
        ),
        "{err}"
    );
    assert_eq!(fresh.load().await.unwrap(), Some(cp(5)));
    fresh.save(&cp(6)).await.unwrap();
    // And now the other one is the stale one.
    assert!(matches!(
        other.save(&cp(6)).await.unwrap_err(),
        Error::Fenced { .. }
    ));
}

#[tokio::test]
async fn an_operator_fence_names_both_resource_versions() {
    let client = source_support::kube_bed().await;
    let mut s = store(&client);
    s.load().await.unwrap();
    s.save(&cp(3)).await.unwrap();
    let saved = resource_version(&client).await;
    // The operator fences a deleted sync's runner with an annotation: the checkpoint id stays 3,
    // only the resourceVersion moves.
    Api::<ConfigMap>::default_namespaced(client.clone())
        .patch(
            "student-sync-checkpoint",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"dcs.dev/fenced": "deleted"}}}),
            ),
        )
        .await
        .unwrap();
    let fenced = resource_version(&client).await;
    let err = s.save(&cp(4)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint was changed by another runner or the operator (expected resourceVersion {saved}, found resourceVersion {fenced}); this runner stops without committing"
        )
    );
    assert_ne!(saved, fenced);
}

#[tokio::test]
async fn two_stores_creating_at_once_leave_one_owner() {
    let client = source_support::kube_bed().await;
    let mut a = store(&client);
    let mut b = store(&client);
    assert_eq!(a.load().await.unwrap(), None);
    assert_eq!(b.load().await.unwrap(), None);
    a.save(&cp(1)).await.unwrap();
    assert!(matches!(
        b.save(&cp(1)).await.unwrap_err(),
        Error::Fenced { .. }
    ));
}

#[tokio::test]
async fn an_operator_made_configmap_keeps_its_labels_and_keys() {
    let client = source_support::kube_bed().await;
    let api = Api::<ConfigMap>::default_namespaced(client.clone());
    api.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("student-sync-checkpoint".into()),
                labels: Some(BTreeMap::from([("app".into(), "dcs".into())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("note".into(), "kept".into())])),
            ..ConfigMap::default()
        },
    )
    .await
    .unwrap();
    let mut s = store(&client);
    assert_eq!(s.load().await.unwrap(), None, "no checkpoint key yet");
    s.save(&cp(1)).await.unwrap();
    let cm = api.get("student-sync-checkpoint").await.unwrap();
    assert_eq!(cm.metadata.labels.unwrap()["app"], "dcs");
    let data = cm.data.unwrap();
    assert_eq!(data["note"], "kept");
    assert!(data.contains_key(CHECKPOINT_KEY));
    // A deleted ConfigMap under a loaded store means someone else reset it: fenced.
    api.delete("student-sync-checkpoint", &Default::default())
        .await
        .unwrap();
    assert!(matches!(
        s.save(&cp(2)).await.unwrap_err(),
        Error::Fenced { .. }
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn run_keeps_its_checkpoint_in_the_configmap_named_by_the_environment() {
    let client = source_support::kube_bed().await;
    let doris = source_support::emu().await;
    source_support::exec(
        &doris,
        &[
            "CREATE DATABASE src",
            &source_support::unique_ddl("src.t", 2),
            "INSERT INTO src.t VALUES (1, 'a', 1), (2, 'b', 2), (3, NULL, 3)",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let cp = dcs_kube_bed::shared().await.unwrap();
    std::fs::write(&kubeconfig, cp.kubeconfig("team-a")).unwrap();
    let namespace = client.default_namespace().to_string();
    let manifest = dir.path().join("sync.yaml");
    std::fs::write(
        &manifest,
        format!(
            r#"apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata: {{name: s}}
spec:
  source: {{feNodes: ["{fe}"], queryPort: {qp}, table: src.t, credentials: {{secretName: x}}}}
  startup: {{mode: snapshot}}
  sink: {{stdout: {{}}}}
"#,
            fe = doris.fe_http_addr(),
            qp = doris.ports().query_port,
        ),
    )
    .unwrap();
    let run = |manifest: std::path::PathBuf, kubeconfig: std::path::PathBuf, namespace: String| {
        std::process::Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
            .arg(manifest)
            .env("DCS_CHECKPOINT_CONFIGMAP", "s-checkpoint")
            .env("POD_NAMESPACE", &namespace)
            .env("KUBECONFIG", kubeconfig)
            .env("DCS_SOURCE_USERNAME", "root")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap()
    };
    let (m, k, n) = (manifest.clone(), kubeconfig.clone(), namespace.clone());
    let out = tokio::task::spawn_blocking(move || run(m, k, n))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
    // POD_NAMESPACE wins over the kubeconfig's namespace.
    let cm = Api::<ConfigMap>::default_namespaced(client.clone())
        .get("s-checkpoint")
        .await
        .unwrap();
    let cp = dcs_runner::checkpoint::parse("test", &cm.data.unwrap()[CHECKPOINT_KEY]).unwrap();
    assert_eq!(cp.position, Position::Done);
    assert_eq!(cp.consumer_id, "s");
    // A second run finds the finished checkpoint and reads nothing.
    let out = tokio::task::spawn_blocking(move || run(manifest, kubeconfig, namespace))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 0);
}
