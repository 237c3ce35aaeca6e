//! The reconciler against the test bed's control plane (in-process API server) and doris-emu (the source).

use std::sync::Arc;

use anyhow::Result;
use dcs_crds::checkpoint::Counters;
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, offset};
use dcs_crds::{DorisChangelogSync, Phase, StartupMode, conditions::get_condition};
use dcs_operator::reconcile::{Context, reconcile};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};

use crate::common;

use common::{create_doris_secret, doris_with_tables, install_crd, reconcile_a_few};

/// `table` on the FE at `host` (HTTP port `fe_http`, MySQL port `query`), `initial`, a snapshot
/// expected to take 30m, to stdout; the credentials in Secret `doris`.
fn stdout_sync(
    name: &str,
    host: &str,
    fe_http: u16,
    query: u16,
    table: &str,
) -> DorisChangelogSync {
    SyncBuilder::new()
        .name(name)
        .source_fe(&format!("{host}:{fe_http}"))
        .query_port(query)
        .source_table(table)
        .source_secret("doris")
        .mode(StartupMode::Initial)
        .expected_snapshot_duration("30m")
        .stdout()
        .build()
}

#[tokio::test]
async fn blocked_then_launched_then_suspended() -> Result<()> {
    let bed = common::bed("reconcile").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;

    let doris = doris_with_tables(&[
        "CREATE TABLE db.short (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"600\")",
        "CREATE TABLE db.good (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    ])
    .await?;
    let ports = doris.ports();

    create_doris_secret(&client).await?;

    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());

    // Too short a TTL: blocked with the numbers, no runner.
    let short: DorisChangelogSync = stdout_sync(
        "short",
        "127.0.0.1",
        ports.fe_http_port,
        ports.query_port,
        "db.short",
    );
    api.create(&PostParams::default(), &short).await?;
    let short = reconcile_a_few(&api, "short", &ctx).await?;
    let status = short.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Blocked));
    let ttl = get_condition(&status.conditions, "TtlSufficient").expect("TtlSufficient");
    assert_eq!(
        (ttl.status.as_str(), ttl.reason.as_str()),
        ("False", "TtlTooShort")
    );
    assert!(
        ttl.message
            .starts_with("changelog.ttl_seconds is 600s but the sync needs at least 2120s"),
        "{}",
        ttl.message
    );
    assert_eq!(
        status.source.and_then(|s| s.clock),
        Some(dcs_crds::Clock::Doris)
    );
    assert!(deployments.get_opt("short-runner").await?.is_none());
    let events = Api::<k8s_openapi::api::events::v1::Event>::default_namespaced(client.clone())
        .list(&Default::default())
        .await?;
    let warning = events
        .items
        .iter()
        .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("short"))
        .expect("an event about the blocked sync");
    assert_eq!(
        (warning.type_.as_deref(), warning.reason.as_deref()),
        (Some("Warning"), Some("TtlTooShort"))
    );

    // A good table: runner Deployment and both ConfigMaps.
    let good: DorisChangelogSync = stdout_sync(
        "good",
        "127.0.0.1",
        ports.fe_http_port,
        ports.query_port,
        "db.good",
    );
    api.create(&PostParams::default(), &good).await?;
    let good = reconcile_a_few(&api, "good", &ctx).await?;
    let status = good.status.clone().expect("a status");
    assert_eq!(status.phase, Some(Phase::Pending));
    assert_eq!(status.consumer_id.as_deref(), Some("good"));
    let d = deployments.get("good-runner").await?;
    let pod = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some("dcs-runner:test"));
    let config = configmaps.get("good-runner-config").await?;
    let manifest = &config.data.unwrap()["sync.yaml"];
    assert_eq!(dcs_crds::from_manifest(manifest)?.consumer_id(), "good");
    assert!(configmaps.get_opt("good-checkpoint").await?.is_some());

    // An idle reconcile writes no status.
    let rv = good.metadata.resource_version.clone();
    let again = reconcile_a_few(&api, "good", &ctx).await?;
    assert_eq!(again.metadata.resource_version, rv);

    // The runner's checkpoint becomes status.
    let checkpoint = CheckpointBuilder::new()
        .consumer("good")
        .id(3)
        .snapshot(&[], 1)
        .counters(Counters {
            rows_read: 5,
            rows_written: 5,
            loads: 1,
            bytes: 10,
            ..Counters::default()
        })
        .label_scheme(1)
        .build();
    configmaps
        .patch(
            "good-checkpoint",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"checkpoint.json": checkpoint.to_json()}})),
        )
        .await?;
    let good = reconcile_a_few(&api, "good", &ctx).await?;
    let status = good.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Snapshotting));
    assert_eq!(status.snapshot.and_then(|s| s.rows_read), Some(5));

    // Suspend: the Deployment goes, the checkpoint stays.
    api.patch(
        "good",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
    )
    .await?;
    let good = reconcile_a_few(&api, "good", &ctx).await?;
    assert_eq!(good.status.and_then(|s| s.phase), Some(Phase::Suspended));
    assert!(deployments.get_opt("good-runner").await?.is_none());
    assert!(configmaps.get("good-checkpoint").await?.data.is_some());

    drop(doris);
    Ok(())
}

/// Reconciles until the status records `consumer` (a re-initialisation first waits for the
/// runner's pods, which the control plane's garbage collector deletes after the Deployment, with
/// phase Reinitializing and the old consumer meanwhile); the status of that pass.
async fn reconcile_until_consumer(
    api: &Api<DorisChangelogSync>,
    name: &str,
    ctx: &Arc<Context>,
    consumer: &str,
) -> Result<dcs_crds::DorisChangelogSyncStatus> {
    for _ in 0..100 {
        reconcile(Arc::new(api.get(name).await?), ctx.clone()).await?;
        let status = api.get(name).await?.status.unwrap_or_default();
        if status.consumer_id.as_deref() == Some(consumer) {
            return Ok(status);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!(
        "consumer {consumer} not reached; status {:?}",
        api.get(name).await?.status
    );
}

#[tokio::test]
async fn an_expired_offset_reinitializes_under_a_new_consumer() -> Result<()> {
    let bed = common::bed("reconcile").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    let doris = doris_with_tables(&[
        "CREATE TABLE db.t (id INT, v STRING) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"2200\")",
    ])
    .await?;
    let ports = doris.ports();
    create_doris_secret(&client).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), None));
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());

    let sync: DorisChangelogSync = stdout_sync(
        "s",
        "127.0.0.1",
        ports.fe_http_port,
        ports.query_port,
        "db.t",
    );
    api.create(&PostParams::default(), &sync).await?;
    reconcile_a_few(&api, "s", &ctx).await?;

    // The runner committed an offset at Doris's "now".
    let http = dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap();
    let fe = format!("http://127.0.0.1:{}", ports.fe_http_port);
    let clock: serde_json::Value = http
        .get(format!("{fe}/_emu/clock"))
        .send()
        .await?
        .json()
        .await?;
    let now_ms = clock["now_ms"].as_i64().expect("now_ms");
    let checkpoint = CheckpointBuilder::new()
        .consumer("s")
        .id(9)
        .changelog_at(offset("2026-11-29 14:00:00", now_ms))
        .counters(Counters {
            rows_read: 5,
            rows_written: 5,
            loads: 2,
            bytes: 10,
            ..Counters::default()
        })
        .label_scheme(1)
        .build();
    configmaps
        .patch(
            "s-checkpoint",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"checkpoint.json": checkpoint.to_json()}})),
        )
        .await?;
    let s = reconcile_a_few(&api, "s", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Streaming));

    // Doris's clock passes the TTL: the offset is gone.
    http.post(format!("{fe}/_emu/clock/advance"))
        .json(&serde_json::json!({"seconds": 2200}))
        .send()
        .await?
        .error_for_status()?;
    let status = reconcile_until_consumer(&api, "s", &ctx, "s-r1").await?;
    assert_eq!(status.phase, Some(Phase::Reinitializing));
    let reinit = status.last_reinit.expect("lastReinit");
    assert_eq!(
        (
            reinit.reason.as_deref(),
            reinit.previous_consumer_id.as_deref()
        ),
        (Some("OffsetExpired"), Some("s"))
    );
    assert!(deployments.get_opt("s-runner").await?.is_none());
    let cm = configmaps.get("s-checkpoint").await?;
    assert!(!cm.data.unwrap_or_default().contains_key("checkpoint.json"));

    // The next pass launches the runner under the new consumer, from a fresh snapshot.
    let s = reconcile_a_few(&api, "s", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));
    let config = configmaps.get("s-runner-config").await?;
    let effective = dcs_crds::from_manifest(&config.data.unwrap()["sync.yaml"])?;
    assert_eq!(effective.consumer_id(), "s-r1");
    assert_eq!(effective.spec.startup.mode, dcs_crds::StartupMode::Initial);
    assert!(deployments.get_opt("s-runner").await?.is_some());

    // A changed reinitNonce starts again once, under the next consumer.
    api.patch(
        "s",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"reinitNonce": "again"}})),
    )
    .await?;
    let status = reconcile_until_consumer(&api, "s", &ctx, "s-r2").await?;
    assert_eq!(status.phase, Some(Phase::Reinitializing));
    assert_eq!(
        status.last_reinit.and_then(|r| r.reason).as_deref(),
        Some("NonceChanged")
    );
    let s = reconcile_a_few(&api, "s", &ctx).await?;
    let status = s.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Pending));
    assert_eq!(status.consumer_id.as_deref(), Some("s-r2"));

    drop(doris);
    Ok(())
}

/// A source whose DELETE statements write delete predicates (`enable_mow_light_delete`) records
/// none of them in its changelog: the sync is Blocked naming the property and the ALTER that
/// fixes it, and no runner is built; once fixed, it runs.
#[tokio::test]
async fn a_light_delete_table_is_blocked_naming_the_property() -> Result<()> {
    let bed = common::bed("lightdel").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    let doris = doris_with_tables(&[
        "CREATE TABLE db.light (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"enable_mow_light_delete\" = \"true\")",
    ])
    .await?;
    let ports = doris.ports();
    create_doris_secret(&client).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let sync: DorisChangelogSync = stdout_sync(
        "light",
        "127.0.0.1",
        ports.fe_http_port,
        ports.query_port,
        "db.light",
    );
    api.create(&PostParams::default(), &sync).await?;
    let s = reconcile_a_few(&api, "light", &ctx).await?;
    let status = s.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Blocked));
    let ready = get_condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "LightDeleteEnabled")
    );
    assert!(
        ready
            .message
            .contains("ALTER TABLE db.light SET (\"enable_mow_light_delete\" = \"false\")"),
        "{}",
        ready.message
    );
    assert!(deployments.get_opt("light-runner").await?.is_none());

    let mut conn = common::mysql(&doris).await?;
    mysql_async::prelude::Queryable::query_drop(
        &mut conn,
        "ALTER TABLE db.light SET (\"enable_mow_light_delete\" = \"false\")",
    )
    .await?;
    // The table facts are cached until the generation changes: a new generation reads them again.
    api.patch(
        "light",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"changelog": {"pollInterval": "9s"}}})),
    )
    .await?;
    let s = reconcile_a_few(&api, "light", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));
    assert!(deployments.get_opt("light-runner").await?.is_some());
    drop(doris);
    Ok(())
}

/// A listener that counts the connections it accepts, on `host`.
async fn counting_listener(
    host: &str,
) -> Result<(u16, std::sync::Arc<std::sync::atomic::AtomicUsize>)> {
    let listener = tokio::net::TcpListener::bind((host, 0)).await?;
    let port = listener.local_addr()?.port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    Ok((port, accepted))
}

/// A credentials Secret that pins its hosts (`dcs.dev/allowed-hosts`): a sync whose `feNodes`
/// name another host is Blocked before anything is sent there — the host's HTTP and MySQL
/// listeners accept no connection — and a sync on an allowed host runs.
#[tokio::test]
async fn credentials_reach_only_the_hosts_their_secret_allows() -> Result<()> {
    let bed = common::bed("pinned").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    let doris = doris_with_tables(&[
        "CREATE TABLE db.good (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\")",
    ])
    .await?;
    let ports = doris.ports();
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "doris", "annotations": {
            "dcs.dev/allowed-syncs": "*",
            "dcs.dev/allowed-hosts": "localhost, 127.0.0.1"}},
        "stringData": {"username": "root", "password": ""},
    }))?;
    Api::<k8s_openapi::api::core::v1::Secret>::default_namespaced(client.clone())
        .create(&PostParams::default(), &secret)
        .await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());

    // Another loopback address stands for a host the sync's editor controls.
    let (http_port, http_accepted) = counting_listener("127.0.0.2").await?;
    let (query_port, query_accepted) = counting_listener("127.0.0.2").await?;
    let foreign = stdout_sync("foreign", "127.0.0.2", http_port, query_port, "db.good");
    api.create(&PostParams::default(), &foreign).await?;
    let s = reconcile_a_few(&api, "foreign", &ctx).await?;
    let status = s.status.expect("a status");
    assert_eq!(status.phase, Some(Phase::Blocked));
    let ready = get_condition(&status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "CredentialsHostNotAllowed")
    );
    assert!(
        ready.message.starts_with(&format!(
            "spec.source.feNodes[0] names host 127.0.0.2, which Secret {}/doris does not let its credentials reach (annotation dcs.dev/allowed-hosts: \"localhost, 127.0.0.1\"); nothing was sent to it",
            bed.name
        )),
        "{}",
        ready.message
    );
    assert!(deployments.get_opt("foreign-runner").await?.is_none());
    assert_eq!(http_accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(query_accepted.load(std::sync::atomic::Ordering::SeqCst), 0);

    // The cluster's own host: probed and run.
    let ok: DorisChangelogSync = stdout_sync(
        "allowed",
        "127.0.0.1",
        ports.fe_http_port,
        ports.query_port,
        "db.good",
    );
    api.create(&PostParams::default(), &ok).await?;
    let s = reconcile_a_few(&api, "allowed", &ctx).await?;
    assert_eq!(s.status.and_then(|s| s.phase), Some(Phase::Pending));
    assert!(deployments.get_opt("allowed-runner").await?.is_some());
    drop(doris);
    Ok(())
}
