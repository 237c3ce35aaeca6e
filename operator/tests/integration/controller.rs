//! The watch loop and the binary against the test bed's control plane.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use dcs_crds::checkpoint::Counters;
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, offset};
use dcs_crds::{DorisChangelogSync, Phase, StartupMode};
use dcs_operator::{
    controller::{self, Metrics},
    metrics,
    reconcile::Context,
};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};

use crate::common;

use common::{create_doris_secret, doris_with_tables, events_about, install_crd, poll};

/// The CRD with a schema-less spec, as a cluster may hold objects stored before validation.
async fn install_lenient_crd(client: &Client) -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/dcs-operator/crds/dorischangelogsyncs.yaml"
    );
    let mut crd: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(path)?)?;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    common::apply_crd(client, crd).await
}

/// `db.t` on the FE at `127.0.0.1:fe_http` (MySQL port `query`) from `latest`, to stdout; the
/// credentials in Secret `doris`.
fn latest_stdout_sync(name: &str, fe_http: u16, query: u16) -> DorisChangelogSync {
    SyncBuilder::new()
        .name(name)
        .source_fe(&format!("127.0.0.1:{fe_http}"))
        .query_port(query)
        .source_table("db.t")
        .source_secret("doris")
        .mode(StartupMode::Latest)
        .stdout()
        .build()
}

#[tokio::test]
async fn a_bad_object_gets_an_event_and_the_rest_keep_working() -> Result<()> {
    // The lenient CRD replaces the chart's, cluster-wide: a control plane of this test's own.
    let (_cp, client) = common::private_control_plane().await?;
    install_lenient_crd(&client).await?;
    let doris = doris_with_tables(&[
        "CREATE TABLE db.t (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    ])
    .await?;
    let ports = doris.ports();
    create_doris_secret(&client).await?;

    let metrics = Arc::new(Metrics::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let metrics_url = format!("http://{}/metrics", listener.local_addr()?);
    let server = tokio::spawn(metrics::serve(listener, metrics.clone()));
    let ctx = Arc::new(Context::new(client.clone(), None));
    let loop_ = tokio::spawn(controller::run(
        client.clone(),
        Some(client.default_namespace().to_string()),
        ctx,
        metrics.clone(),
    ));

    // Stored with a wrong-typed field (the lenient schema let it through).
    let resource = ApiResource::erase::<DorisChangelogSync>(&());
    let raw: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource);
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": DorisChangelogSync::api_version(&()),
        "kind": "DorisChangelogSync",
        "metadata": {"name": "bad"},
        "spec": {
            "source": {"feNodes": ["127.0.0.1:1"], "table": "db.t", "credentials": {"secretName": "doris"}},
            "sink": {"stdout": {}},
            "suspend": "yes",
        },
    }))?;
    raw.create(&PostParams::default(), &bad).await?;
    let good = latest_stdout_sync("good", ports.fe_http_port, ports.query_port);
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &good).await?;

    // The good one runs as usual.
    poll(
        "the good sync to launch",
        Duration::from_secs(30),
        async || {
            let s = api.get("good").await?;
            Ok((s.status.as_ref().and_then(|s| s.phase) == Some(Phase::Pending)).then_some(()))
        },
    )
    .await?;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    assert!(deployments.get_opt("good-runner").await?.is_some());

    // The bad one gets a Warning naming the field and the serde error, and nothing else.
    let events = poll(
        "the InvalidObject event",
        Duration::from_secs(30),
        async || {
            let e = events_about(&client, "bad", "InvalidObject").await?;
            Ok((!e.is_empty()).then_some(e))
        },
    )
    .await?;
    assert_eq!(
        events[0],
        (
            "Warning".to_owned(),
            "the object cannot be read (spec.suspend: invalid type: string \"yes\", expected a boolean); fix the field (kubectl edit) so the operator can reconcile it".to_owned()
        )
    );
    let bad = raw.get("bad").await?;
    assert!(bad.finalizers().is_empty());
    assert!(deployments.get_opt("bad-runner").await?.is_none());

    // A checkpoint makes the good sync Streaming; /metrics shows it per phase and its gauges.
    let clock: serde_json::Value = dcs_doris_client::tls::plain_get(format!(
        "http://127.0.0.1:{}/_emu/clock",
        ports.fe_http_port
    ))
    .await?
    .json()
    .await?;
    let now_ms = clock["now_ms"].as_i64().expect("now_ms") - 30_000;
    let checkpoint = CheckpointBuilder::new()
        .consumer("good")
        .id(2)
        .changelog_at(offset("2026-11-29 14:00:00", now_ms))
        .counters(Counters {
            rows_read: 1,
            rows_written: 1,
            loads: 1,
            bytes: 1,
            ..Counters::default()
        })
        .label_scheme(1)
        .build();
    Api::<ConfigMap>::default_namespaced(client.clone())
        .patch(
            "good-checkpoint",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"checkpoint.json": checkpoint.to_json()}})),
        )
        .await?;
    let text = poll("the lag gauge", Duration::from_secs(30), async || {
        let text = dcs_doris_client::tls::plain_get(&metrics_url)
            .await?
            .text()
            .await?;
        Ok(text
            .lines()
            .any(|l| l.starts_with("dcs_sync_lag_seconds{namespace=\"default\",name=\"good\"} "))
            .then_some(text))
    })
    .await?;
    let value = |prefix: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("{prefix} missing in\n{text}"))
            .parse()
            .unwrap()
    };
    let lag = value("dcs_sync_lag_seconds{namespace=\"default\",name=\"good\"} ");
    assert!((30..40).contains(&lag), "lag {lag}");
    let headroom = value("dcs_sync_ttl_headroom_seconds{namespace=\"default\",name=\"good\"} ");
    assert_eq!(headroom, 86_400 - lag);
    assert_eq!(value("dcs_syncs{phase=\"Streaming\"} "), 1);
    assert_eq!(value("dcs_syncs{phase=\"Invalid\"} "), 1);
    assert_eq!(value("dcs_syncs{phase=\"Pending\"} "), 0);
    assert!(value("dcs_operator_reconciles_total ") > 0);
    assert_eq!(
        value("dcs_operator_reconcile_errors_total{kind=\"Kube\"} "),
        0
    );

    // Deleted syncs leave /metrics.
    api.delete("good", &Default::default()).await?;
    raw.delete("bad", &Default::default()).await?;
    poll("the gauges to go", Duration::from_secs(30), async || {
        let text = dcs_doris_client::tls::plain_get(&metrics_url)
            .await?
            .text()
            .await?;
        Ok(
            (!text.contains("name=\"good\"") && text.contains("dcs_syncs{phase=\"Invalid\"} 0"))
                .then_some(()),
        )
    })
    .await?;

    loop_.abort();
    server.abort();
    drop(doris);
    Ok(())
}

#[tokio::test]
async fn the_controller_blocks_a_short_ttl_sync() -> Result<()> {
    let bed = common::bed("controller").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    let doris = doris_with_tables(&[
        "CREATE TABLE db.t (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
         PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"60\")",
    ])
    .await?;
    let ports = doris.ports();
    create_doris_secret(&client).await?;

    let ctx = Arc::new(Context::new(client.clone(), None));
    let loop_ = tokio::spawn(controller::run(
        client.clone(),
        Some(client.default_namespace().to_string()),
        ctx,
        Arc::new(Metrics::default()),
    ));
    let sync = latest_stdout_sync("s", ports.fe_http_port, ports.query_port);
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &sync).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = api.get("s").await?;
        if s.status.as_ref().and_then(|s| s.phase) == Some(Phase::Blocked) {
            assert_eq!(s.finalizers(), ["dcs.dev/cleanup"]);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not blocked: {:?}",
            s.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Deletion lets go.
    api.delete("s", &Default::default()).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while api.get_opt("s").await?.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the finalizer was not released"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loop_.abort();
    drop(doris);
    Ok(())
}

#[tokio::test]
async fn the_binary_says_when_the_crd_is_missing() -> Result<()> {
    // No CRD: a control plane of this test's own (the shared one has it).
    let (cp, _client) = common::private_control_plane().await?;
    let dir = std::env::temp_dir().join(format!("dcs-operator-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cp.kubeconfig("default"))?;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_dcs-operator"))
        .env("KUBECONFIG", &kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .await?;
    assert_eq!(out.status.code(), Some(1));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("the DorisChangelogSync CRD is not installed"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The genuine API server evaluates the CRD's CEL rules of `spec.sink.doris.deadLetter`: a
/// dead-letter table that is the sink table, or in another database, is refused naming the field;
/// one next to the sink table is stored.
#[tokio::test]
async fn the_api_server_refuses_a_dead_letter_table_it_cannot_take() -> Result<()> {
    let ns = common::bed("dead-letter").await?;
    install_crd(&ns.client).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(ns.client.clone());
    let sync = |name: &str, dead_letter: &str| -> DorisChangelogSync {
        serde_yaml::from_str(&format!(
            r#"
apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata: {{name: {name}}}
spec:
  source: {{feNodes: ["doris-fe:8030"], table: demo.student, credentials: {{secretName: doris}}}}
  sink:
    doris:
      feNodes: ["doris-fe:8030"]
      table: sink.student
      credentials: {{secretName: doris}}
      deadLetter: {{table: {dead_letter}}}
"#
        ))
        .unwrap()
    };
    for (dead_letter, message) in [
        (
            "sink.student",
            "deadLetter.table is the sink table itself; name another table, e.g. db.t_rejected",
        ),
        (
            "other.t_rejected",
            "deadLetter.table must be in the sink table's database (its loads share the sink's \
             labels and two-phase commit); write it as <sink database>.<table>",
        ),
    ] {
        let err = api
            .create(&PostParams::default(), &sync("bad", dead_letter))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("spec.sink.doris.deadLetter.table"), "{err}");
        assert!(err.contains(message), "{err}");
    }
    api.create(
        &PostParams::default(),
        &sync("good", "sink.student_rejected"),
    )
    .await?;
    Ok(())
}

/// The genuine API server keeps `spec.sink.doris.schemaChange` to its three values and refuses
/// `fail` or `ignore` with a fixed `source.columns` list (CEL), naming the field; `evolve` is the
/// default it stores.
#[tokio::test]
async fn the_api_server_keeps_schema_change_to_what_a_run_does() -> Result<()> {
    let ns = common::bed("schema-change").await?;
    install_crd(&ns.client).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(ns.client.clone());
    let base = || {
        SyncBuilder::new()
            .namespace(&ns.name)
            .source_table("demo.student")
            .sink_table("sink.student")
    };
    let err = api
        .create(
            &PostParams::default(),
            &base()
                .name("fixed-columns")
                .columns(&["id", "name"])
                .schema_change(dcs_crds::SchemaChangePolicy::Fail)
                .build(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.sink.doris.schemaChange: Invalid value")
            && err.contains("sink.doris.schemaChange fail and ignore apply only when every source column is read; remove source.columns, or schemaChange"),
        "{err}"
    );
    // A value the enum does not hold, sent as the raw object a kubectl apply would send.
    let resource = ApiResource::erase::<DorisChangelogSync>(&());
    let raw: Api<DynamicObject> = Api::default_namespaced_with(ns.client.clone(), &resource);
    let mut object: DynamicObject =
        serde_json::from_value(serde_json::to_value(base().name("sometimes").build())?)?;
    object.data["spec"]["sink"]["doris"]["schemaChange"] = serde_json::json!("sometimes");
    let err = raw
        .create(&PostParams::default(), &object)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.sink.doris.schemaChange: Unsupported value: \"sometimes\"")
            && err.contains("\"evolve\", \"fail\", \"ignore\""),
        "{err}"
    );
    let stored = api
        .create(
            &PostParams::default(),
            &base()
                .name("ignore")
                .schema_change(dcs_crds::SchemaChangePolicy::Ignore)
                .build(),
        )
        .await?;
    assert_eq!(
        stored.spec.sink.doris.unwrap().schema_change,
        dcs_crds::SchemaChangePolicy::Ignore
    );
    Ok(())
}
