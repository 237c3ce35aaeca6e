//! Doris cleanup against doris-emu and the test bed's control plane: deletion aborts the pending pre-committed
//! transaction and the loads pre-committed after the checkpoint, and deletes the offset-table
//! row, after the runner's pods are gone (or forced off); re-initialisation cleans the old consumer
//! the same way and leaves the sink table to the new runner's rebuild; an unreachable sink is reported and let go after the bounded retries; a deleted
//! credentials Secret gives up at once.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use dcs_crds::checkpoint::{Counters, PendingTxn};
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder};
use dcs_crds::{DorisChangelogSync, Phase, StartupMode, conditions::get_condition};
use dcs_operator::{
    cleanup::RetryPolicy,
    reconcile::{Context, reconcile},
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod, Secret},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use mysql_async::prelude::Queryable;

use crate::common;

use common::{
    create_doris_secret, doris_with_tables, events_about, install_crd, mysql, reconcile_a_few,
};

const TABLES: [&str; 3] = [
    "CREATE TABLE db.src (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
     PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    "CREATE TABLE db.dst (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
    "CREATE TABLE db.offsets (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, \
     update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1",
];

/// `db.src` on the FE at `127.0.0.1:fe_http` (MySQL port `query`) into `db.dst` on the FE
/// `sink_fe`, `initial`, its offsets in `db.offsets` under the consumer `name`; the credentials
/// in Secret `doris`.
fn offsets_sync(name: &str, fe_http: u16, query: u16, sink_fe: &str) -> SyncBuilder {
    SyncBuilder::new()
        .name(name)
        .source_fe(&format!("127.0.0.1:{fe_http}"))
        .query_port(query)
        .source_table("db.src")
        .source_secret("doris")
        .mode(StartupMode::Initial)
        .offsets("db.offsets", Some(name))
        .sink_fe(sink_fe)
        .sink_table("db.dst")
        .sink_secret("doris")
}

/// Reconciles a deleting sync until it is gone; the number of passes. Fails when a pass recorded a
/// failed cleanup attempt and `no_retries` is set, or when it takes more than 20 s.
async fn reconcile_until_gone(
    api: &Api<DorisChangelogSync>,
    name: &str,
    ctx: &Arc<Context>,
    no_retries: bool,
) -> Result<u32> {
    let mut passes = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Some(sync) = api.get_opt(name).await? {
        let annotations = sync.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !(no_retries && annotations.contains_key("dcs.dev/cleanup-attempts")),
            "a failed cleanup attempt was recorded: {annotations:?}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} still there after {passes} passes"
        );
        passes += 1;
        reconcile(Arc::new(sync), ctx.clone()).await?;
        if api.get_opt(name).await?.is_some() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(passes)
}

fn http() -> reqwest::Client {
    dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap()
}

/// Pre-commits one Stream Load (2PC) into db.dst on the BE at `be_http`; its transaction id.
async fn precommit(be_http: u16, label: &str) -> Result<i64> {
    common::precommit(&http(), &format!("http://127.0.0.1:{be_http}"), label).await
}

async fn txn_state(fe_http: u16, txn_id: i64) -> Result<String> {
    common::txn_state(&http(), &format!("http://127.0.0.1:{fe_http}"), txn_id).await
}

async fn offset_consumers(doris: &dcs_doris_emu::RunningEmulator) -> Result<Vec<String>> {
    let mut conn = mysql(doris).await?;
    let rows: Vec<String> = conn
        .query("SELECT consumer_id FROM db.offsets ORDER BY consumer_id")
        .await?;
    conn.disconnect().await?;
    Ok(rows)
}

async fn insert_offset_rows(doris: &dcs_doris_emu::RunningEmulator, ids: &[&str]) -> Result<()> {
    let mut conn = mysql(doris).await?;
    for id in ids {
        conn.query_drop(format!(
            "INSERT INTO db.offsets (consumer_id, offset_timestamp, update_time) VALUES ('{id}', '2026-11-29 14:00:00', '2026-11-29 14:00:00.000')"
        ))
        .await?;
    }
    conn.disconnect().await?;
    Ok(())
}

fn checkpoint_json(consumer: &str, txns: &[(i64, &str)]) -> String {
    let pending = txns
        .iter()
        .map(|(id, label)| PendingTxn {
            db: "db".into(),
            label: (*label).into(),
            txn_id: *id,
            rows: None,
            dead_letter: false,
        })
        .collect();
    CheckpointBuilder::new()
        .consumer(consumer)
        .id(3)
        .snapshot(&[], 1)
        .pending_txns(pending)
        .counters(Counters {
            rows_read: 1,
            rows_written: 1,
            loads: 1,
            bytes: 8,
            ..Counters::default()
        })
        .label_scheme(1)
        .build()
        .to_json()
}

/// A namespace of the test bed's control plane with the CRD and the `doris` Secret installed,
/// doris-emu with [`TABLES`].
struct Bed {
    ns: dcs_kube_bed::TestNamespace,
    client: kube::Client,
    doris: dcs_doris_emu::RunningEmulator,
    ports: dcs_doris_emu::Ports,
    api: Api<DorisChangelogSync>,
    configmaps: Api<ConfigMap>,
}

impl Bed {
    async fn start() -> Result<Self> {
        let ns = common::bed("cleanup").await?;
        let client = ns.client.clone();
        install_crd(&client).await?;
        let doris = doris_with_tables(&TABLES).await?;
        let ports = doris.ports();
        create_doris_secret(&client).await?;
        Ok(Self {
            api: Api::default_namespaced(client.clone()),
            configmaps: Api::default_namespaced(client.clone()),
            ns,
            client,
            doris,
            ports,
        })
    }

    /// `offsets_sync(name, ..)` with the sink on this bed's FE, passed through `edit`.
    async fn create_sync(
        &self,
        name: &str,
        edit: impl FnOnce(SyncBuilder) -> SyncBuilder,
    ) -> Result<()> {
        let fe = format!("127.0.0.1:{}", self.ports.fe_http_port);
        let sync = edit(offsets_sync(
            name,
            self.ports.fe_http_port,
            self.ports.query_port,
            &fe,
        ))
        .build();
        self.api.create(&PostParams::default(), &sync).await?;
        Ok(())
    }

    /// Writes the checkpoint a runner of `name` would have saved, listing `txns` as pending.
    async fn save_checkpoint(&self, name: &str, txns: &[(i64, &str)]) -> Result<()> {
        self.configmaps
            .patch(
                &format!("{name}-checkpoint"),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"data": {
                    "checkpoint.json": checkpoint_json(name, txns)
                }})),
            )
            .await?;
        Ok(())
    }

    async fn shutdown(self) {
        drop(self.doris);
        let _ = self.ns.delete().await;
    }
}

#[tokio::test]
async fn deletion_aborts_pending_txns_and_deletes_the_offset_row() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, doris, ports) = (&bed.api, &bed.client, &bed.doris, bed.ports);
    let ctx = Arc::new(Context::new(client.clone(), None));

    bed.create_sync("s", |s| s).await?;
    let s = reconcile_a_few(api, "s", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));

    // The runner pre-committed a load and saved a checkpoint listing it; its offset row exists.
    let txn = precommit(ports.be_http_port, "dcs-s-3-0").await?;
    assert_eq!(txn_state(ports.fe_http_port, txn).await?, "PRECOMMITTED");
    bed.save_checkpoint("s", &[(txn, "dcs-s-3-0")]).await?;
    insert_offset_rows(doris, &["other", "s"]).await?;
    // It went on and pre-committed two loads for checkpoint 4, which it never saved.
    let later = [
        precommit(ports.be_http_port, "dcs-s-4-0").await?,
        precommit(ports.be_http_port, "dcs-s-4-1").await?,
    ];
    // Another consumer's load with a similar label is not touched.
    let other = precommit(ports.be_http_port, "dcs-other-4-0").await?;

    api.delete("s", &Default::default()).await?;
    reconcile_until_gone(api, "s", &ctx, true).await?;

    assert_eq!(txn_state(ports.fe_http_port, txn).await?, "ABORTED");
    for t in later {
        assert_eq!(txn_state(ports.fe_http_port, t).await?, "ABORTED");
    }
    assert_eq!(txn_state(ports.fe_http_port, other).await?, "PRECOMMITTED");
    assert_eq!(offset_consumers(doris).await?, vec!["other".to_owned()]);
    let cleaned = events_about(client, "s", "CleanedUp").await?;
    assert_eq!(
        cleaned,
        vec![(
            "Normal".to_owned(),
            format!(
                "removed from Doris: pre-committed Stream Load transactions {txn} (label dcs-s-3-0, db db); offset-table row consumer_id='s' in db.offsets; loads pre-committed after the last checkpoint (labels dcs-s-4-0, dcs-s-4-1)"
            )
        )]
    );
    assert!(
        events_about(client, "s", "RunnerPodsForceDeleted")
            .await?
            .is_empty()
    );

    // Already gone counts as done: an unknown transaction and a missing offset table.
    bed.create_sync("t", |s| s.offsets("db.no_such_table", Some("t")))
        .await?;
    reconcile_a_few(api, "t", &ctx).await?;
    bed.save_checkpoint("t", &[(999_999, "dcs-t-3-0")]).await?;
    api.delete("t", &Default::default()).await?;
    reconcile_until_gone(api, "t", &ctx, true).await?;
    assert_eq!(events_about(client, "t", "CleanedUp").await?.len(), 1);
    bed.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn deletion_cleans_through_the_second_sink_fe_when_the_first_is_down() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, ports) = (&bed.api, &bed.client, bed.ports);
    let ctx = Arc::new(Context::new(client.clone(), None));
    // The sink's first FE refuses connections; the second is the bed's.
    let down = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let fe = format!("127.0.0.1:{}", ports.fe_http_port);
    bed.create_sync("s", |s| s.sink_fe_nodes(&[&down.to_string(), &fe]))
        .await?;
    let s = reconcile_a_few(api, "s", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));
    let txn = precommit(ports.be_http_port, "dcs-s-3-0").await?;
    bed.save_checkpoint("s", &[(txn, "dcs-s-3-0")]).await?;
    let later = precommit(ports.be_http_port, "dcs-s-4-0").await?;

    api.delete("s", &Default::default()).await?;
    reconcile_until_gone(api, "s", &ctx, true).await?;

    // The recorded transaction and the label swept after the checkpoint are both aborted.
    assert_eq!(txn_state(ports.fe_http_port, txn).await?, "ABORTED");
    assert_eq!(txn_state(ports.fe_http_port, later).await?, "ABORTED");
    let cleaned = events_about(client, "s", "CleanedUp").await?;
    assert_eq!(cleaned.len(), 1, "{cleaned:?}");
    assert!(
        cleaned[0]
            .1
            .contains("loads pre-committed after the last checkpoint (labels dcs-s-4-0)"),
        "{cleaned:?}"
    );
    bed.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn reinit_in_upsert_mode_keeps_the_sink_and_drops_the_old_offset_row() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, doris) = (&bed.api, &bed.client, &bed.doris);
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), None));

    bed.create_sync("s", |s| s).await?;
    reconcile_a_few(api, "s", &ctx).await?;
    assert!(deployments.get_opt("s-runner").await?.is_some());
    let mut conn = mysql(doris).await?;
    conn.query_drop("INSERT INTO db.dst (id, v) VALUES (1, 'a'), (2, 'b')")
        .await?;
    insert_offset_rows(doris, &["s"]).await?;

    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"reinitNonce": "again"}})),
    )
    .await?;
    // The runner's pods go first (the control plane's garbage collector deletes them after the
    // Deployment): meanwhile the phase is Reinitializing under the old consumer.
    let mut passes = 0;
    let status = loop {
        passes += 1;
        reconcile(Arc::new(api.get("s").await?), ctx.clone()).await?;
        let status = api.get("s").await?.status.expect("a status");
        if status.consumer_id.as_deref() == Some("s-r1") || passes == 100 {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(status.consumer_id.as_deref(), Some("s-r1"));
    assert_eq!(status.phase, Some(Phase::Reinitializing));
    // Readers keep the old rows: the new consumer's runner rebuilds the table and swaps it in.
    let count: Option<i64> = conn.query_first("SELECT COUNT(*) FROM db.dst").await?;
    assert_eq!(count, Some(2), "the sink was touched");
    assert!(offset_consumers(doris).await?.is_empty());
    conn.disconnect().await?;

    // The next pass relaunches under the new consumer.
    let s = reconcile_a_few(api, "s", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));
    bed.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_unreachable_sink_blocks_and_deletion_gives_up_after_the_retries() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, ports) = (&bed.api, &bed.client, bed.ports);
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let mut ctx = Context::new(client.clone(), None);
    ctx.cleanup_policy = RetryPolicy {
        max_attempts: 3,
        first_delay: Duration::ZERO,
    };
    let ctx = Arc::new(ctx);
    // Nothing listens on port 1.
    let sync = offsets_sync("s", ports.fe_http_port, ports.query_port, "127.0.0.1:1")
        .with_spec(|spec| spec.offsets = None)
        .build();
    api.create(&PostParams::default(), &sync).await?;

    // Validation: blocked, SinkHealthy False naming the address and the fix, no runner.
    let s = reconcile_a_few(api, "s", &ctx).await?;
    let status = s.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Blocked));
    let expected = "cannot reach the sink FE over HTTP at 127.0.0.1:1 (connection refused or host unreachable): check spec.sink.doris.feNodes (the FE HTTP address, host:8030) and that the sink cluster is up and reachable from the operator";
    let sink = get_condition(&status.conditions, "SinkHealthy").expect("SinkHealthy");
    assert_eq!(
        (
            sink.status.as_str(),
            sink.reason.as_str(),
            sink.message.as_str()
        ),
        ("False", "SinkUnreachable", expected)
    );
    let ready = get_condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "SinkUnreachable")
    );
    assert!(deployments.get_opt("s-runner").await?.is_none());
    assert_eq!(
        events_about(client, "s", "SinkUnreachable").await?,
        vec![("Warning".to_owned(), expected.to_owned())]
    );

    // A checkpoint from an earlier run lists a pre-committed transaction.
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "s-checkpoint"},
        "data": {"checkpoint.json": checkpoint_json("s", &[(42, "dcs-s-3-0")])},
    }))?;
    bed.configmaps.create(&PostParams::default(), &cm).await?;

    api.delete("s", &Default::default()).await?;
    let mut attempts = 0;
    while let Some(s) = api.get_opt("s").await? {
        attempts += 1;
        assert!(attempts <= 3, "still there after {attempts} attempts");
        reconcile(Arc::new(s), ctx.clone()).await?;
    }
    assert_eq!(attempts, 3);
    let abandoned = events_about(client, "s", "CleanupAbandoned").await?;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    let (kind, note) = &abandoned[0];
    assert_eq!(kind, "Warning");
    assert!(
        note.starts_with(
            "gave up cleaning Doris after 3 attempts and released the finalizer; left behind: pre-committed Stream Load transactions 42 (label dcs-s-3-0, db db); any loads pre-committed after the last checkpoint (labels dcs-s-4-<seq> and later checkpoint ids, db db). Last error: cannot reach sink FE 127.0.0.1:1 to abort transaction 42"
        ),
        "{note}"
    );
    bed.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn deletion_waits_for_the_runner_pods_and_forces_overdue_ones_off() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, ports) = (&bed.api, &bed.client, bed.ports);
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut ctx = Context::new(client.clone(), None);
    ctx.pod_wait_margin = Duration::from_secs(2);
    let ctx = Arc::new(ctx);
    bed.create_sync("s", |s| s).await?;
    reconcile_a_few(api, "s", &ctx).await?;
    let txn = precommit(ports.be_http_port, "dcs-s-3-0").await?;
    bed.save_checkpoint("s", &[(txn, "dcs-s-3-0")]).await?;
    // A runner pod that does not go away (a finalizer holds it), with a 1 s grace period.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "s-runner-held",
                     "labels": {"dcs.dev/sync": "s"}, "finalizers": ["test.dcs.dev/hold"]},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "runner", "image": "dcs-runner"}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;

    api.delete("s", &Default::default()).await?;
    reconcile(Arc::new(api.get("s").await?), ctx.clone()).await?;
    // Waiting: nothing read or cleaned yet, the finalizer kept, the checkpoint fenced.
    assert!(api.get_opt("s").await?.is_some());
    assert_eq!(txn_state(ports.fe_http_port, txn).await?, "PRECOMMITTED");
    let cm = bed.configmaps.get("s-checkpoint").await?;
    let fence = cm
        .metadata
        .annotations
        .unwrap_or_default()
        .get("dcs.dev/fenced")
        .cloned()
        .unwrap_or_default();
    assert!(fence.starts_with("deleted since "), "{fence}");
    // Meanwhile the stopping runner pre-commits a load of checkpoint 4.
    let late = precommit(ports.be_http_port, "dcs-s-4-0").await?;

    // After its grace period and the margin the operator goes on without it.
    let passes = reconcile_until_gone(api, "s", &ctx, true).await?;
    assert!(passes > 1, "the operator did not wait ({passes} passes)");
    assert_eq!(txn_state(ports.fe_http_port, txn).await?, "ABORTED");
    assert_eq!(txn_state(ports.fe_http_port, late).await?, "ABORTED");
    let forced = events_about(client, "s", "RunnerPodsForceDeleted").await?;
    assert_eq!(forced.len(), 1, "{forced:?}");
    assert!(
        forced[0].1.starts_with(
            "runner pod(s) s-runner-held did not stop within their grace period and a 2s margin (until "
        ) && forced[0].1.ends_with(
            "): deleted them with gracePeriodSeconds 0 and went on; s-runner-held still listed (a finalizer or an unreachable node): the checkpoint ConfigMap fence keeps it from saving or committing, and a load it pre-commits is left to Doris's transaction timeout"
        ),
        "{}",
        forced[0].1
    );
    assert_eq!(
        pods.get("s-runner-held")
            .await?
            .metadata
            .deletion_grace_period_seconds,
        Some(0)
    );
    assert_eq!(events_about(client, "s", "CleanedUp").await?.len(), 1);
    bed.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_deleted_secret_gives_up_the_cleanup_at_once() -> Result<()> {
    let bed = Bed::start().await?;
    let (api, client, doris) = (&bed.api, &bed.client, &bed.doris);
    // The default policy: five attempts over about 2.5 minutes, none of which may be used.
    let ctx = Arc::new(Context::new(client.clone(), None));
    bed.create_sync("s", |s| s).await?;
    reconcile_a_few(api, "s", &ctx).await?;
    bed.save_checkpoint("s", &[(42, "dcs-s-3-0")]).await?;
    insert_offset_rows(doris, &["s"]).await?;

    // As in a namespace deletion: the Secret goes at the same moment as the sync.
    Api::<Secret>::default_namespaced(client.clone())
        .delete("doris", &Default::default())
        .await?;
    api.delete("s", &Default::default()).await?;
    reconcile_until_gone(api, "s", &ctx, true).await?;

    let abandoned = events_about(client, "s", "CleanupAbandoned").await?;
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    let (kind, note) = &abandoned[0];
    assert_eq!(kind, "Warning");
    let ns = client.default_namespace();
    assert!(
        note.starts_with(&format!(
            "gave up cleaning Doris at once and released the finalizer: Secret {ns}/doris is gone (deleted with the namespace?) or does not allow this sync, so retrying cannot help; left behind: pre-committed Stream Load transactions 42 (label dcs-s-3-0, db db); any loads pre-committed after the last checkpoint (labels dcs-s-4-<seq> and later checkpoint ids, db db); offset-table row consumer_id='s' in db.offsets. Last error: Secret {ns}/doris named in spec.sink.doris.credentials does not exist"
        )),
        "{note}"
    );
    assert!(note.contains("Remove them by hand"), "{note}");
    // Nothing was removed: the row is still there.
    assert_eq!(offset_consumers(doris).await?, vec!["s".to_owned()]);
    bed.shutdown().await;
    Ok(())
}
