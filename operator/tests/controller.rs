//! The watch loop and the binary against kube-emu.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use dcs_crds::{DorisChangelogSync, Phase};
use dcs_kube_emu::{Config, KubeEmu};
use dcs_operator::{
    controller::{self, Metrics},
    reconcile::Context,
};
use kube::{Api, ResourceExt, api::PostParams};

mod common;

use common::{client_for, create_doris_secret, doris_with_tables, install_crd};

#[tokio::test]
async fn the_controller_blocks_a_short_ttl_sync() -> Result<()> {
    let emu = KubeEmu::start(Config::default()).await?;
    let client = client_for(&emu).await?;
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
        Some("default".into()),
        ctx,
        Arc::new(Metrics::default()),
    ));
    let sync: DorisChangelogSync = serde_yaml::from_str(&format!(
        r#"
apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata: {{name: s, namespace: default}}
spec:
  source:
    feNodes: ["127.0.0.1:{}"]
    queryPort: {}
    table: db.t
    credentials: {{secretName: doris}}
  startup: {{mode: latest}}
  sink: {{stdout: {{}}}}
"#,
        ports.fe_http_port, ports.query_port
    ))?;
    let api: Api<DorisChangelogSync> = Api::namespaced(client.clone(), "default");
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
    emu.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn the_binary_says_when_the_crd_is_missing() -> Result<()> {
    let emu = KubeEmu::start(Config::default()).await?;
    let dir = std::env::temp_dir().join(format!("dcs-operator-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, emu.kubeconfig("default"))?;
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
    emu.shutdown().await;
    Ok(())
}
