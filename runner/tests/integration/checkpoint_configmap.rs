//! The ConfigMap checkpoint store against the test bed's control plane (genuine Kubernetes):
//! round trips, fencing by resourceVersion, creation races, and `dcs-runner run` with
//! `DCS_CHECKPOINT_CONFIGMAP`.

use crate::source_support;

use std::collections::BTreeMap;

use dcs_crds::testing::{CheckpointBuilder, SyncBuilder};
use dcs_runner::Error;
use dcs_runner::checkpoint::configmap::CHECKPOINT_KEY;
use dcs_runner::checkpoint::{Checkpoint, CheckpointStore, ConfigMapStore, Position};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// A changelog checkpoint of consumer `student-sync`.
pub(crate) fn cp(id: u64) -> Checkpoint {
    CheckpointBuilder::new()
        .consumer("student-sync")
        .id(id)
        .label_scheme(1)
        .build()
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
    let sync = SyncBuilder::new()
        .name("s")
        .source_fe(&doris.fe_http_addr())
        .query_port(doris.ports().query_port)
        .source_table("src.t")
        .source_secret("x")
        .mode(dcs_crds::StartupMode::Snapshot)
        .stdout();
    std::fs::write(&manifest, sync.yaml()).unwrap();
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

// === saves whose answer is lost ===

use source_support::kube_faults::{Fault, client_with_faults};

const CM_PATH: &str = "/configmaps/student-sync-checkpoint";

async fn stored_checkpoint(client: &Client) -> Checkpoint {
    let cm = Api::<ConfigMap>::default_namespaced(client.clone())
        .get("student-sync-checkpoint")
        .await
        .unwrap();
    dcs_runner::checkpoint::parse("test", &cm.data.unwrap()[CHECKPOINT_KEY]).unwrap()
}

#[tokio::test]
async fn a_save_the_server_applied_but_whose_answer_was_lost_counts_as_saved() {
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let (faulty, plan) = client_with_faults(&ns.kubeconfig()).await;
    let mut s = store(&faulty);
    s.load().await.unwrap();
    s.save(&cp(1)).await.unwrap();
    plan.arm(http::Method::PUT, CM_PATH, Fault::LoseAnswer);
    s.save(&cp(2)).await.unwrap();
    assert_eq!(plan.pending(), 0);
    assert_eq!(stored_checkpoint(&client).await, cp(2));
    // The store knows the resourceVersion of its own write: the next save is not fenced.
    s.save(&cp(3)).await.unwrap();
    assert_eq!(stored_checkpoint(&client).await, cp(3));
    // A claim whose answer is lost, likewise.
    plan.arm(http::Method::PUT, CM_PATH, Fault::LoseAnswer);
    s.claim().await.unwrap();
    s.save(&cp(4)).await.unwrap();
}

#[tokio::test]
async fn a_save_lost_on_its_way_is_sent_again() {
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let (faulty, plan) = client_with_faults(&ns.kubeconfig()).await;
    let mut s = store(&faulty);
    s.load().await.unwrap();
    // The create of a missing ConfigMap, then a replace.
    plan.arm(http::Method::POST, "/configmaps", Fault::Drop);
    s.save(&cp(1)).await.unwrap();
    plan.arm(http::Method::PUT, CM_PATH, Fault::Drop);
    plan.arm(http::Method::PUT, CM_PATH, Fault::Drop);
    s.save(&cp(2)).await.unwrap();
    assert_eq!(plan.pending(), 0);
    assert_eq!(stored_checkpoint(&client).await, cp(2));
}

#[tokio::test]
async fn a_lost_save_that_someone_else_overwrote_is_fenced() {
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let (faulty, plan) = client_with_faults(&ns.kubeconfig()).await;
    let mut s = store(&faulty);
    s.load().await.unwrap();
    s.save(&cp(1)).await.unwrap();
    // Another runner takes over; this store's next save is lost on its way.
    let mut other = store(&client);
    other.load().await.unwrap();
    other.claim().await.unwrap();
    plan.arm(http::Method::PUT, CM_PATH, Fault::Drop);
    let err = s.save(&cp(2)).await.unwrap_err();
    // Whether the lost save was applied before the other runner's claim is unknown to this one,
    // so it neither commits nor aborts what it listed (exit 4 all the same).
    assert!(matches!(err, Error::FencedAfterUnclearSave { .. }), "{err}");
    assert_eq!(err.exit_code(), 4);
}

#[tokio::test]
async fn a_save_applied_then_fenced_before_its_lost_answer_is_a_lost_claim() {
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let proxy = dcs_kube_bed::FaultProxy::start(ns.cp.address)
        .await
        .unwrap();
    let proxied = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &ns.cp.kubeconfig_via(&ns.name, proxy.address),
    )
    .await
    .unwrap();
    let mut s = store(&proxied);
    s.load().await.unwrap();
    s.claim().await.unwrap();
    s.save(&cp(1)).await.unwrap();
    let mut held = proxy.hold_next_response();
    let save = tokio::spawn(async move {
        let result = s.save(&cp(2)).await;
        (s, result)
    });
    assert!(held.applied().await);
    assert_eq!(stored_checkpoint(&client).await, cp(2));
    let fenced = Api::<ConfigMap>::default_namespaced(client.clone())
        .patch(
            "student-sync-checkpoint",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"annotations": {"dcs.dev/fenced": "reinitialize at t"}}}),
            ),
        )
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    held.release();
    let (mut s, result) = save.await.unwrap();
    let err = result.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint was changed by another runner or the operator after a save whose answer was lost (found resourceVersion {fenced} (annotation dcs.dev/fenced)); this runner stops without committing or aborting that checkpoint's loads"
        )
    );
    // Fenced for good: no later save goes through either.
    assert!(matches!(
        s.save(&cp(3)).await.unwrap_err(),
        Error::Fenced { .. }
    ));
    assert_eq!(resource_version(&client).await, fenced);
    assert_eq!(stored_checkpoint(&client).await, cp(2));
}

#[tokio::test]
async fn a_save_whose_outcome_cannot_be_read_back_is_reported_as_unknown() {
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let (faulty, plan) = client_with_faults(&ns.kubeconfig()).await;
    let mut s = store(&faulty);
    s.load().await.unwrap();
    s.save(&cp(1)).await.unwrap();
    plan.arm(http::Method::PUT, CM_PATH, Fault::LoseAnswer);
    for _ in 0..5 {
        plan.arm(http::Method::GET, CM_PATH, Fault::Drop);
    }
    let err = s.save(&cp(2)).await.unwrap_err();
    assert!(matches!(err, Error::CheckpointSaveUnknown { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("this runner stops without committing or aborting that checkpoint's loads"),
        "{err}"
    );
    // It was in fact saved.
    assert_eq!(stored_checkpoint(&client).await, cp(2));
}

/// A 2PC checkpoint save the API server applied whose answer is lost, and which cannot be read
/// back: the runner stops without aborting the loads that checkpoint lists (they are committed by
/// the restart), so the sink equals the source, nothing lost and nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_checkpoint_save_never_aborts_the_loads_it_may_hold() {
    use dcs_runner::pipeline::{self, Control};
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let (faulty, plan) = client_with_faults(&ns.kubeconfig()).await;
    let doris = source_support::emu().await;
    source_support::exec(
        &doris,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            source_support::SOURCE_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=200).map(source_support::row_values).collect();
    source_support::exec(
        &doris,
        &[&format!(
            "INSERT INTO demo.student VALUES {}",
            values.join(", ")
        )],
    )
    .await;
    let mut cfg = source_support::config(
        &source_support::student_sync(&doris, dcs_crds::StartupMode::Initial).yaml(),
    );
    // Loads come from full batches (150 rows, maxRows 100), checkpoints seconds apart: the faults
    // can be armed between a load and the checkpoint that lists it.
    cfg.checkpoint_interval = std::time::Duration::from_secs(5);
    let (control, mut handle) = Control::new();
    let run_cfg = cfg.clone();
    let mut s = store(&faulty);
    let task = tokio::spawn(async move { pipeline::run(run_cfg, &mut s, control).await });
    let now = doris.doris.clock.now_ms();
    assert!(
        source_support::window_past(&mut handle, now, std::time::Duration::from_secs(60)).await
    );
    // Changes, loaded and pre-committed; the checkpoint that lists them is applied, its answer
    // lost, and the store cannot be read back. The faults are armed between a load and the
    // checkpoint after it (when a checkpoint slips in between, with another change).
    for attempt in 0.. {
        assert!(
            attempt < 10,
            "no load was followed by a checkpoint to fault"
        );
        let before = handle.progress.borrow().clone();
        let puts = plan.seen(&http::Method::PUT);
        source_support::exec(
            &doris,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                (0..150)
                    .map(|i| source_support::row_values(1000 + 150 * attempt as u32 + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        )
        .await;
        while handle.progress.borrow_and_update().counters.loads == before.counters.loads {
            handle.progress.changed().await.unwrap();
        }
        // Only if no checkpoint was written since the insert: the next one holds the load.
        let mut faults = vec![(http::Method::PUT, CM_PATH, Fault::LoseAnswer)];
        faults.extend((0..5).map(|_| (http::Method::GET, CM_PATH, Fault::Drop)));
        if plan.arm_if_seen(&http::Method::PUT, puts, &faults) {
            break;
        }
    }
    let err = tokio::time::timeout(std::time::Duration::from_secs(60), task)
        .await
        .expect("the run stops")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::CheckpointSaveUnknown { .. }), "{err}");
    // The stored checkpoint's loads are still pre-committed, not aborted.
    let saved = stored_checkpoint(&client).await;
    assert!(!saved.pending_txns.is_empty(), "{saved:?}");
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&doris).await;
    for pending in &saved.pending_txns {
        let t = txns
            .iter()
            .find(|t| t["txn_id"] == pending.txn_id)
            .expect("a known txn");
        assert_ne!(t["state"], "ABORTED", "{t}");
    }
    // The restart commits them and goes on.
    let (control, mut handle) = Control::new();
    let mut s = store(&client);
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut s, control).await });
    let now = doris.doris.clock.now_ms();
    assert!(
        source_support::window_past(&mut handle, now, std::time::Duration::from_secs(60)).await
    );
    handle.shutdown.send(true).unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(
        source_support::mysql_rows(&doris, "SELECT * FROM sink.student ORDER BY id").await,
        source_support::mysql_rows(&doris, "SELECT * FROM demo.student ORDER BY id").await
    );
}

/// The ordering of docs/ARCHITECTURE.md §7 "One writer per checkpoint" that a read-back alone
/// would get wrong: a 2PC checkpoint save is applied by the API server, the operator fences the
/// store (`dcs.dev/fenced`, as it does for a deletion or a re-initialisation) before the runner
/// hears anything, and then the save's answer is lost. Reading the store back finds the runner's
/// checkpoint and claim there; the fence is there too, so the claim is lost: the run stops with
/// exit 4 and writes, commits and aborts nothing more. The loads that checkpoint lists stay
/// pre-committed for the next owner, which commits them: the sink equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_written_while_a_save_is_unanswered_stops_the_run_without_committing() {
    use dcs_runner::pipeline::{self, Control};
    let ns = dcs_kube_bed::namespace("runner").await.unwrap();
    let client = ns.client.clone();
    let proxy = dcs_kube_bed::FaultProxy::start(ns.cp.address)
        .await
        .unwrap();
    let proxied = dcs_kube_bed::control_plane::client_from_kubeconfig(
        &ns.cp.kubeconfig_via(&ns.name, proxy.address),
    )
    .await
    .unwrap();
    let api = Api::<ConfigMap>::default_namespaced(client.clone());
    let doris = source_support::emu().await;
    source_support::exec(
        &doris,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            source_support::SOURCE_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=200).map(source_support::row_values).collect();
    source_support::exec(
        &doris,
        &[&format!(
            "INSERT INTO demo.student VALUES {}",
            values.join(", ")
        )],
    )
    .await;
    let mut cfg = source_support::config(
        &source_support::student_sync(&doris, dcs_crds::StartupMode::Initial).yaml(),
    );
    cfg.checkpoint_interval = std::time::Duration::from_secs(2);
    let (control, mut handle) = Control::new();
    let run_cfg = cfg.clone();
    let mut s = store(&proxied);
    let task = tokio::spawn(async move { pipeline::run(run_cfg, &mut s, control).await });
    let now = doris.doris.clock.now_ms();
    assert!(
        source_support::window_past(&mut handle, now, std::time::Duration::from_secs(60)).await
    );
    // The runner's only requests now are checkpoint saves. Hold the next one once applied; fence
    // only a save that lists pre-committed loads (an empty one is let through and the next
    // change tried).
    let mut fence_rv = None;
    for attempt in 0..10u32 {
        source_support::exec(
            &doris,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                (0..150)
                    .map(|i| source_support::row_values(1000 + 150 * attempt + i))
                    .collect::<Vec<_>>()
                    .join(", ")
            )],
        )
        .await;
        let before = handle.progress.borrow_and_update().counters.loads;
        while handle.progress.borrow_and_update().counters.loads == before {
            handle.progress.changed().await.unwrap();
        }
        let mut held = proxy.hold_next_response();
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(30), held.applied())
                .await
                .expect("a checkpoint save within 30 s"),
        );
        if stored_checkpoint(&client).await.pending_txns.is_empty() {
            held.release();
            continue;
        }
        let fenced = api
            .patch(
                "student-sync-checkpoint",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    serde_json::json!({"metadata": {"annotations": {"dcs.dev/fenced": "deleted at t"}}}),
                ),
            )
            .await
            .unwrap();
        fence_rv = fenced.metadata.resource_version;
        held.release();
        break;
    }
    assert!(
        fence_rv.is_some(),
        "no save with pre-committed loads to fence"
    );
    let err = tokio::time::timeout(std::time::Duration::from_secs(60), task)
        .await
        .expect("the fenced run stops")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::FencedAfterUnclearSave { .. }), "{err}");
    assert_eq!(err.exit_code(), 4);
    assert!(
        err.to_string()
            .contains("after a save whose answer was lost (found resourceVersion")
            && err.to_string().contains("(annotation dcs.dev/fenced)"),
        "{err}"
    );
    // Nothing written past the fence; the loads the fenced save lists are neither committed nor
    // aborted.
    assert_eq!(resource_version(&client).await, fence_rv.unwrap());
    let saved = stored_checkpoint(&client).await;
    assert!(!saved.pending_txns.is_empty(), "{saved:?}");
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&doris).await;
    for pending in &saved.pending_txns {
        let t = txns
            .iter()
            .find(|t| t["txn_id"] == pending.txn_id)
            .expect("a known txn");
        assert_eq!(t["state"], "PRECOMMITTED", "{t}");
    }
    // The next owner claims the store, commits them and goes on.
    let (control, mut handle) = Control::new();
    let mut s = store(&client);
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut s, control).await });
    let now = doris.doris.clock.now_ms();
    assert!(
        source_support::window_past(&mut handle, now, std::time::Duration::from_secs(60)).await
    );
    handle.shutdown.send(true).unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(
        source_support::mysql_rows(&doris, "SELECT * FROM sink.student ORDER BY id").await,
        source_support::mysql_rows(&doris, "SELECT * FROM demo.student ORDER BY id").await
    );
}
