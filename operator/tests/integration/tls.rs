//! TLS to Doris through the operator, against doris-emu serving only TLS and the test bed's
//! control plane: the probe (MySQL and `/api/tso`) and the sink probe go over TLS with the CA
//! bundle the spec names, the runner pod gets the bundle mounted and its file named, the status
//! says how each side is protected, and a deletion's cleanup (2PC aborts through the FE's
//! redirect, the label sweep, the offset row over MySQL) is done over TLS. A wrong CA, a name the
//! certificate does not hold, and a CA Secret that did not opt in block the sync, saying which
//! endpoint failed and why, or what to add.

use std::sync::Arc;

use anyhow::Result;
use dcs_crds::checkpoint::{Counters, PendingTxn};
use dcs_crds::testing::{CheckpointBuilder, SyncBuilder, tls_ca_config_map, tls_ca_secret};
use dcs_crds::{
    DorisChangelogSync, Phase, StartupMode, TlsMode, TlsSpec, conditions::get_condition,
};
use dcs_doris_client::tls::{Tls, TlsOptions};
use dcs_doris_emu::{EmuConfig, RunningEmulator, tls::cert::TestPki};
use dcs_operator::reconcile::{Context, reconcile};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Secret},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use mysql_async::prelude::Queryable;

use crate::common::{self, create_doris_secret, install_crd, reconcile_a_few};

const TABLES: [&str; 3] = [
    "CREATE TABLE db.src (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
     PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.ttl_seconds\" = \"86400\")",
    "CREATE TABLE db.dst (id INT, v STRING) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
    "CREATE TABLE db.offsets (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, \
     update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1",
];

/// doris-emu serving TLS only, with [`TABLES`], and a client TLS trusting its CA.
struct TlsDoris {
    emu: RunningEmulator,
    pki: TestPki,
    tls: Tls,
}

impl TlsDoris {
    async fn start() -> Result<Self> {
        let pki = TestPki::generate("operator test CA", &[])?;
        let mut config = EmuConfig::ephemeral();
        config.tls = Some(pki.emu_tls());
        let emu = dcs_doris_emu::start(config).await?;
        let tls = Tls::new(TlsOptions {
            ca_bundle: Some(("test CA".into(), pki.ca_pem.clone().into_bytes())),
            ..TlsOptions::default()
        })?;
        let doris = Self { emu, pki, tls };
        let mut conn = doris.mysql().await?;
        conn.query_drop("CREATE DATABASE db").await?;
        for ddl in TABLES {
            conn.query_drop(ddl).await?;
        }
        conn.disconnect().await?;
        Ok(doris)
    }

    async fn mysql(&self) -> Result<mysql_async::Conn> {
        Ok(dcs_doris_client::mysql::connect_to_tls(
            "127.0.0.1",
            self.emu.ports().query_port,
            "root",
            "",
            &self.tls,
        )
        .await?)
    }

    fn https(&self) -> Result<reqwest::Client> {
        self.tls
            .http_client(reqwest::Client::builder())
            .map_err(anyhow::Error::msg)
    }

    /// Pre-commits one Stream Load (2PC) into db.dst on the BE over HTTPS; its transaction id.
    async fn precommit(&self, label: &str) -> Result<i64> {
        let be = format!("https://127.0.0.1:{}", self.emu.ports().be_http_port);
        common::precommit(&self.https()?, &be, label).await
    }

    async fn txn_state(&self, txn_id: i64) -> Result<String> {
        let fe = format!("https://127.0.0.1:{}", self.emu.ports().fe_http_port);
        common::txn_state(&self.https()?, &fe, txn_id).await
    }
}

/// A sync of db.src into db.dst, with `source_tls` and `sink_tls` as the sides' tls.
fn tls_sync(
    name: &str,
    doris: &TlsDoris,
    source_tls: TlsSpec,
    sink_tls: TlsSpec,
) -> DorisChangelogSync {
    let ports = doris.emu.ports();
    let fe = format!("127.0.0.1:{}", ports.fe_http_port);
    SyncBuilder::new()
        .name(name)
        .source_fe(&fe)
        .query_port(ports.query_port)
        .source_table("db.src")
        .source_secret("doris")
        .source_tls(source_tls)
        .mode(StartupMode::Initial)
        .offsets("db.offsets", Some(name))
        .sink_fe(&fe)
        .sink_table("db.dst")
        .sink_secret("doris")
        .sink_tls(sink_tls)
        .build()
}

/// TLS on, the CA bundle in key `ca.crt` of ConfigMap `doris-ca`.
fn ca_configmap() -> TlsSpec {
    tls_ca_config_map("doris-ca", "ca.crt")
}

/// TLS on, the server's certificate not verified.
fn insecure() -> TlsSpec {
    TlsSpec {
        enabled: true,
        insecure_skip_verify: true,
        ..TlsSpec::default()
    }
}

async fn create_ca_configmap(client: &kube::Client, name: &str, pem: &str) -> Result<()> {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"ca.crt": pem},
    }))?;
    Api::<ConfigMap>::default_namespaced(client.clone())
        .create(&PostParams::default(), &cm)
        .await?;
    Ok(())
}

/// The Ready condition's (status, reason, message).
fn ready(sync: &DorisChangelogSync) -> (String, String, String) {
    let status = sync.status.as_ref().expect("a status");
    let c = get_condition(&status.conditions, "Ready").expect("Ready");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn a_sync_over_tls_is_probed_run_and_cleaned_up_over_tls() -> Result<()> {
    let bed = common::bed("tls").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    create_doris_secret(&client).await?;
    let doris = TlsDoris::start().await?;
    create_ca_configmap(&client, "doris-ca", &doris.pki.ca_pem).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));

    let sync = tls_sync("s", &doris, ca_configmap(), ca_configmap());
    api.create(&PostParams::default(), &sync).await?;
    let s = reconcile_a_few(&api, "s", &ctx).await?;
    let status = s.status.clone().expect("a status");
    assert_eq!(status.phase, Some(Phase::Pending), "{:?}", ready(&s));
    let source = status.source.expect("the source was probed");
    assert_eq!(source.ttl_seconds, Some(86_400));
    // Doris's clock was read over HTTPS.
    assert_eq!(source.clock, Some(dcs_crds::Clock::Doris));
    let tls = status.tls.expect("status.tls");
    assert_eq!(
        (tls.source, tls.sink),
        (Some(TlsMode::Verified), Some(TlsMode::Verified))
    );

    // The runner pod gets the bundle's key as a file, and its path.
    let deployment = Api::<Deployment>::default_namespaced(client.clone())
        .get("s-runner")
        .await?;
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    let env: Vec<(String, Option<String>)> = container
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    for (var, side) in [
        ("DCS_SOURCE_TLS_CA_FILE", "source"),
        ("DCS_SINK_TLS_CA_FILE", "sink"),
    ] {
        assert!(
            env.contains(&(var.to_owned(), Some(format!("/etc/dcs-tls/{side}/ca.crt")))),
            "{env:?}"
        );
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == format!("{side}-ca"))
            .expect("a CA volume");
        let cm = volume.config_map.as_ref().expect("a ConfigMap volume");
        assert_eq!(cm.name, "doris-ca");
        let items = cm.items.clone().unwrap_or_default();
        assert_eq!(
            items
                .iter()
                .map(|i| (i.key.as_str(), i.path.as_str()))
                .collect::<Vec<_>>(),
            vec![("ca.crt", "ca.crt")]
        );
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == volume.name)
            .expect("mounted");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            (format!("/etc/dcs-tls/{side}").as_str(), Some(true))
        );
    }

    // What a runner left: a load pre-committed under its checkpoint, one after it, its offset
    // row. The deletion removes them over TLS.
    let txn = doris.precommit("dcs-s-3-0").await?;
    let later = doris.precommit("dcs-s-4-0").await?;
    let checkpoint = CheckpointBuilder::new()
        .consumer("s")
        .id(3)
        .snapshot(&[], 1)
        .pending_txns(vec![PendingTxn {
            db: "db".into(),
            label: "dcs-s-3-0".into(),
            txn_id: txn,
            rows: None,
            dead_letter: false,
        }])
        .counters(Counters {
            rows_read: 1,
            rows_written: 1,
            loads: 1,
            bytes: 8,
            ..Counters::default()
        })
        .label_scheme(1)
        .build();
    Api::<ConfigMap>::default_namespaced(client.clone())
        .patch(
            "s-checkpoint",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"checkpoint.json": checkpoint.to_json()}})),
        )
        .await?;
    let mut conn = doris.mysql().await?;
    conn.query_drop(
        "INSERT INTO db.offsets (consumer_id, offset_timestamp, update_time) VALUES \
         ('s', '2026-11-29 14:00:00', '2026-11-29 14:00:00.000')",
    )
    .await?;
    // The runner's pods are gone at once (the bed runs no kubelet here).
    api.delete("s", &Default::default()).await?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while let Some(sync) = api.get_opt("s").await? {
        assert!(tokio::time::Instant::now() < deadline, "s still there");
        reconcile(Arc::new(sync), ctx.clone()).await?;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(doris.txn_state(txn).await?, "ABORTED");
    assert_eq!(doris.txn_state(later).await?, "ABORTED");
    let rows: Vec<String> = conn.query("SELECT consumer_id FROM db.offsets").await?;
    assert!(rows.is_empty(), "{rows:?}");
    let cleaned = common::events_about(&client, "s", "CleanedUp").await?;
    assert_eq!(cleaned.len(), 1, "{cleaned:?}");
    conn.disconnect().await?;

    // insecureSkipVerify: probed without a CA, and the status says so.
    let sync = tls_sync("skip", &doris, insecure(), insecure());
    api.create(&PostParams::default(), &sync).await?;
    let s = reconcile_a_few(&api, "skip", &ctx).await?;
    let status = s.status.clone().expect("a status");
    assert_eq!(status.phase, Some(Phase::Pending), "{:?}", ready(&s));
    let tls = status.tls.expect("status.tls");
    assert_eq!(
        (tls.source, tls.sink),
        (
            Some(TlsMode::InsecureSkipVerify),
            Some(TlsMode::InsecureSkipVerify)
        )
    );
    bed.delete().await?;
    Ok(())
}

#[tokio::test]
async fn an_expired_certificate_blocks_the_sync_saying_so() -> Result<()> {
    let bed = common::bed("tls-expired").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    create_doris_secret(&client).await?;
    let pki = TestPki::generate_expired("expired operator test CA", &[])?;
    let mut config = EmuConfig::ephemeral();
    config.tls = Some(pki.emu_tls());
    let emu = dcs_doris_emu::start(config).await?;
    create_ca_configmap(&client, "doris-ca", &pki.ca_pem).await?;
    let ports = emu.ports();
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let expired = SyncBuilder::new()
        .name("expired")
        .source_fe(&format!("127.0.0.1:{}", ports.fe_http_port))
        .query_port(ports.query_port)
        .source_table("db.src")
        .source_secret("doris")
        .source_tls(ca_configmap())
        .mode(StartupMode::Initial)
        .stdout()
        .build();
    api.create(&PostParams::default(), &expired).await?;
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));
    let s = reconcile_a_few(&api, "expired", &ctx).await?;
    let (status, reason, message) = ready(&s);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SourceUnreachable")
    );
    assert!(
        message.starts_with(&format!(
            "cannot reach the source: TLS to FE 127.0.0.1:{} (MySQL): invalid peer certificate: certificate expired",
            ports.query_port
        )),
        "{message}"
    );
    assert!(
        Api::<Deployment>::default_namespaced(client.clone())
            .get_opt("expired-runner")
            .await?
            .is_none()
    );
    bed.delete().await?;
    Ok(())
}

#[tokio::test]
async fn a_wrong_ca_a_wrong_name_or_a_ca_secret_without_consent_blocks_the_sync() -> Result<()> {
    let bed = common::bed("tls-blocked").await?;
    let client = bed.client.clone();
    install_crd(&client).await?;
    create_doris_secret(&client).await?;
    let doris = TlsDoris::start().await?;
    let ports = doris.emu.ports();
    create_ca_configmap(&client, "doris-ca", &doris.pki.ca_pem).await?;
    let other = TestPki::generate("some other CA", &[])?;
    create_ca_configmap(&client, "other-ca", &other.ca_pem).await?;
    let api: Api<DorisChangelogSync> = Api::default_namespaced(client.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Context::new(client.clone(), Some("dcs-runner:test".into())));
    let wrong_ca = tls_ca_config_map("other-ca", "ca.crt");

    let cases = [
        // The source's certificate does not chain to the CA given.
        (
            "wrong-ca",
            wrong_ca.clone(),
            ca_configmap(),
            "SourceUnreachable",
            format!(
                "cannot reach the source: TLS to FE 127.0.0.1:{} (MySQL): invalid peer certificate: UnknownIssuer; check spec.source.tls",
                ports.query_port
            ),
        ),
        // The certificate does not hold the name asked for.
        (
            "wrong-name",
            TlsSpec {
                server_name: Some("doris.example".into()),
                ..ca_configmap()
            },
            ca_configmap(),
            "SourceUnreachable",
            format!(
                "cannot reach the source: TLS to FE 127.0.0.1:{} (MySQL): invalid peer certificate: ",
                ports.query_port
            ),
        ),
        // The sink's.
        (
            "wrong-sink-ca",
            ca_configmap(),
            wrong_ca,
            "SinkUnreachable",
            format!(
                "cannot reach the sink: TLS to FE 127.0.0.1:{} (HTTP): invalid peer certificate: UnknownIssuer; check spec.sink.doris.tls",
                ports.fe_http_port
            ),
        ),
    ];
    for (name, source_tls, sink_tls, reason, message) in cases {
        let sync = tls_sync(name, &doris, source_tls, sink_tls);
        api.create(&PostParams::default(), &sync).await?;
        let s = reconcile_a_few(&api, name, &ctx).await?;
        let (status, got_reason, got_message) = ready(&s);
        assert_eq!(
            (status.as_str(), got_reason.as_str()),
            ("False", reason),
            "{name}: {got_message}"
        );
        assert!(
            got_message.starts_with(&message),
            "{name}: {got_message}\nwanted: {message}"
        );
        assert_eq!(s.status.unwrap().phase, Some(Phase::Blocked));
        assert!(
            deployments
                .get_opt(&format!("{name}-runner"))
                .await?
                .is_none()
        );
    }

    // A CA bundle in a Secret that did not opt in: not read, not mounted, and the message says
    // what to add.
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "doris-ca-secret"},
        "stringData": {"ca.crt": doris.pki.ca_pem},
    }))?;
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    secrets.create(&PostParams::default(), &secret).await?;
    let in_secret = tls_ca_secret("doris-ca-secret", "ca.crt");
    let sync = tls_sync("ca-secret", &doris, in_secret, ca_configmap());
    api.create(&PostParams::default(), &sync).await?;
    let s = reconcile_a_few(&api, "ca-secret", &ctx).await?;
    let (_, reason, message) = ready(&s);
    assert_eq!(reason, "CaBundleNotAllowed");
    assert_eq!(
        message,
        dcs_crds::access::secret_not_allowed_message(
            &bed.name,
            "doris-ca-secret",
            "ca-secret",
            "spec.source.tls.caBundle.secretKeyRef"
        )
    );
    assert!(deployments.get_opt("ca-secret-runner").await?.is_none());
    // Once it opts in, the sync runs with it mounted.
    secrets
        .patch(
            "doris-ca-secret",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "dcs.dev/allowed-syncs": "ca-secret"}}})),
        )
        .await?;
    let s = reconcile_a_few(&api, "ca-secret", &ctx).await?;
    assert_eq!(s.status.unwrap().phase, Some(Phase::Pending));
    let pod = deployments
        .get("ca-secret-runner")
        .await?
        .spec
        .unwrap()
        .template
        .spec
        .unwrap();
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "source-ca")
        .expect("the source CA volume");
    assert_eq!(
        volume
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref()),
        Some("doris-ca-secret")
    );
    bed.delete().await?;
    Ok(())
}
