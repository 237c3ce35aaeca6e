//! Two runners of one sync alive at once (a pod that outlived its replacement): the one that starts
//! claims the checkpoint store, fencing the other, and neither adopts nor aborts a load the other
//! pre-committed.

use crate::source_support;

use bytes::Bytes;
use dcs_crds::StartupMode;
use dcs_runner::Error;
use dcs_runner::checkpoint::configmap::CLAIM_ANNOTATION;
use dcs_runner::checkpoint::{CheckpointStore, ConfigMapStore};
use dcs_runner::settings::SinkConfig;
use dcs_runner::sink::Sink;
use dcs_runner::sink::doris::DorisSink;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use source_support::{config, exec, mysql_rows, student_sync};

use crate::checkpoint_configmap::cp;

fn store(client: &Client) -> ConfigMapStore {
    ConfigMapStore::new(client.clone(), client.default_namespace(), "s-checkpoint")
}

#[tokio::test]
async fn a_starting_runner_claims_the_store_and_the_old_one_can_no_longer_save() {
    let client = source_support::kube_bed().await;
    let mut old = store(&client);
    assert_eq!(old.load().await.unwrap(), None);
    old.save(&cp(1)).await.unwrap();

    // The replacement loads the same checkpoint and claims the store before anything else.
    let mut new = store(&client);
    assert_eq!(new.load().await.unwrap(), Some(cp(1)));
    new.claim().await.unwrap();
    let cm = Api::<ConfigMap>::default_namespaced(client.clone())
        .get("s-checkpoint")
        .await
        .unwrap();
    let claim = &cm.metadata.annotations.unwrap()[CLAIM_ANNOTATION];
    assert!(claim.contains(" at 20"), "{claim}");

    // The old runner's next checkpoint is refused: it can never commit what it pre-committed.
    let err = old.save(&cp(2)).await.unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    new.save(&cp(2)).await.unwrap();
    assert_eq!(store(&client).load().await.unwrap(), Some(cp(2)));

    // Claiming a store that another runner claimed since the load is fenced too.
    let mut late = store(&client);
    late.load().await.unwrap();
    new.save(&cp(3)).await.unwrap();
    assert!(matches!(late.claim().await, Err(Error::Fenced { .. })));
}

#[tokio::test]
async fn claiming_a_missing_configmap_creates_it_once() {
    let client = source_support::kube_bed().await;
    let mut first = store(&client);
    let mut second = store(&client);
    assert_eq!(first.load().await.unwrap(), None);
    assert_eq!(second.load().await.unwrap(), None);
    first.claim().await.unwrap();
    assert!(matches!(second.claim().await, Err(Error::Fenced { .. })));
    // The claim holds no checkpoint: a fresh load finds none, and the claimer saves over it.
    assert_eq!(store(&client).load().await.unwrap(), None);
    first.save(&cp(1)).await.unwrap();
}

fn rows(names: &[&str]) -> Bytes {
    Bytes::from(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "{{\"id\":{},\"name\":\"{n}\",\"age\":20,\"__DORIS_DELETE_SIGN__\":0}}\n",
                    i + 1
                )
            })
            .collect::<String>(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_pre_committed_by_another_runner_is_neither_adopted_nor_aborted() {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let SinkConfig::Doris(sink) = config(&student_sync(&emu, StartupMode::Snapshot).yaml()).sink
    else {
        panic!("a Doris sink")
    };
    assert!(sink.enable_2pc);
    let old = DorisSink::new((*sink).clone(), "default".into(), "student-sync".into());
    let new = DorisSink::new(*sink, "default".into(), "student-sync".into());

    // The old runner pre-commits load 0 of checkpoint 7; the new one reaches the same label.
    let loaded = old
        .load(rows(&["old-a", "old-b"]).into(), 7, 0)
        .await
        .unwrap();
    let pending = loaded.pending.expect("a pre-committed transaction");
    let err = new.load(rows(&["new-a"]).into(), 7, 0).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Stream Load label {} is already pre-committed (transaction {}) by \
             another runner of this sync that is still loading; this runner stops without adopting \
             or aborting it, and its restart takes the checkpoint over again",
            source_support::label("student-sync", 7, 0),
            pending.txn_id
        )
    );
    assert_eq!(err.exit_code(), 4);
    assert_eq!(err.reason(), "Fenced");

    // Untouched: the old runner's transaction still commits, with its own rows.
    old.commit(std::slice::from_ref(&pending)).await.unwrap();
    assert_eq!(
        mysql_rows(&emu, "SELECT id, name FROM sink.student ORDER BY id").await,
        vec![
            vec!["1".to_owned(), "old-a".to_owned()],
            vec!["2".to_owned(), "old-b".to_owned()]
        ]
    );
}
