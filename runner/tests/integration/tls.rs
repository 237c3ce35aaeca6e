//! TLS on every connection to Doris (`spec.source.tls`, `spec.sink.doris.tls`) against doris-emu
//! serving TLS on every port: a whole sync over TLS, and every way TLS must fail — a wrong CA, a
//! name mismatch, an expired certificate, a plaintext server, a redirect from https to http —
//! each failing with the endpoint and the reason, nothing falling back to plaintext.

use crate::source_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use bytes::Bytes;
use dcs_crds::testing::{tls_ca_config_map, tls_ca_secret};
use dcs_crds::{StartupMode, TlsSpec};
use dcs_doris_client::stream_load::{LoadOutcome, LoadRequest, StreamLoadClient};
use dcs_doris_client::tls::{Tls, TlsOptions};
use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::tls::cert::TestPki;
use dcs_doris_emu::types::QueryResult;
use dcs_doris_emu::{EmuConfig, EmuTls, RunningEmulator};
use dcs_runner::pipeline::Outcome;
use dcs_runner::settings::{Credentials, PipelineConfig, TlsFiles};
use dcs_runner::source::fe_http::{FeHttpClient, FeRequest};
use dcs_runner::source::flight::FlightSession;
use source_support::{SOURCE_DDL, exec, row_values, spawn_pipeline, student_sync, window_past};

/// An emulator serving TLS with `tls`.
async fn emu_serving(tls: EmuTls) -> RunningEmulator {
    let mut c = EmuConfig::ephemeral();
    c.tls = Some(tls);
    let emu = dcs_doris_emu::start(c).await.expect("emulator starts");
    assert!(emu.tls_on());
    emu
}

/// An emulator serving TLS with a fresh test CA, the CA's PEM written to `dir/ca.pem`.
async fn tls_emu(dir: &Path) -> (RunningEmulator, PathBuf) {
    let pki = TestPki::generate("runner test CA", &[]).expect("test PKI");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    (emu_serving(pki.emu_tls()).await, ca)
}

/// A CA the emulator's certificates do not chain to, written to `dir/wrong-ca.pem`.
fn wrong_ca(dir: &Path) -> PathBuf {
    let pki = TestPki::generate("some other CA", &[]).expect("test PKI");
    let path = dir.join("wrong-ca.pem");
    std::fs::write(&path, pki.ca_pem).unwrap();
    path
}

/// A CA and a serving certificate for 127.0.0.1 and localhost that expired yesterday.
fn expired_pki() -> (String, EmuTls) {
    let pki = TestPki::generate_expired("expired test CA", &[]).expect("test PKI");
    (pki.ca_pem.clone(), pki.emu_tls())
}

/// The student sync under the name `tls-sync` from `mode`, with the TLS settings `source_tls`
/// and `sink_tls` (none when `None`).
fn manifest(
    emu: &RunningEmulator,
    mode: StartupMode,
    source_tls: Option<TlsSpec>,
    sink_tls: Option<TlsSpec>,
) -> String {
    let mut sync = student_sync(emu, mode).name("tls-sync");
    if let Some(tls) = source_tls {
        sync = sync.source_tls(tls);
    }
    if let Some(tls) = sink_tls {
        sync = sync.sink_tls(tls);
    }
    sync.yaml()
}

/// TLS on, the CA bundle in key `ca.crt` of ConfigMap `doris-ca`.
fn ca_ref() -> Option<TlsSpec> {
    Some(tls_ca_config_map("doris-ca", "ca.crt"))
}

/// TLS on, the server's certificate not verified.
fn insecure() -> Option<TlsSpec> {
    Some(TlsSpec {
        enabled: true,
        insecure_skip_verify: true,
        ..TlsSpec::default()
    })
}

fn config(yaml: &str, files: &TlsFiles) -> dcs_runner::Result<PipelineConfig> {
    let sync = dcs_crds::from_manifest(yaml).unwrap();
    let creds = Credentials {
        source_user: "root".into(),
        source_password: String::new(),
        sink_user: "root".into(),
        sink_password: String::new(),
    };
    let mut c = PipelineConfig::from_sync_tls(&sync, creds, files)?;
    c.changelog.poll_interval = Duration::from_millis(200);
    c.changelog.retry_delay = Duration::from_millis(50);
    Ok(c)
}

fn both(ca: &Path) -> TlsFiles {
    TlsFiles {
        source_ca: Some(ca.to_path_buf()),
        sink_ca: Some(ca.to_path_buf()),
    }
}

/// Source `demo.student` with `rows` rows and an empty sink `sink.student`.
async fn setup(emu: &RunningEmulator, rows: u32) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), score DECIMAL(10,2), \
             updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let values: Vec<String> = (1..=rows).map(row_values).collect();
    for chunk in values.chunks(200) {
        exec(
            emu,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
}

/// A table's rows straight from the emulator's engine (its MySQL port takes TLS clients only).
async fn rows(emu: &RunningEmulator, table: &str) -> Vec<String> {
    let mut s = Session::new("root");
    match sql::execute(
        &emu.doris,
        &mut s,
        &format!("SELECT * FROM {table} ORDER BY id"),
    )
    .await
    .unwrap()
    {
        QueryResult::Rows(rs) => rs.rows.iter().map(|r| format!("{r:?}")).collect(),
        other => panic!("{other:?}"),
    }
}

/// `dcs-runner check` on `yaml` with the environment `env`.
async fn check(dir: &Path, yaml: String, env: Vec<(&'static str, PathBuf)>) -> Output {
    let file = dir.join("sync.yaml");
    std::fs::write(&file, yaml).unwrap();
    let cp = dir.join("cp");
    tokio::task::spawn_blocking(move || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dcs-runner"));
        c.args(["check", "-f"])
            .arg(&file)
            .arg("--checkpoint-dir")
            .arg(&cp)
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", "")
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", "")
            .env_remove("DCS_SOURCE_TLS_CA_FILE")
            .env_remove("DCS_SINK_TLS_CA_FILE")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    })
    .await
    .unwrap()
}

fn stdout(o: &Output) -> String {
    format!(
        "{}\n--- stderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_whole_sync_over_tls_leaves_the_sink_equal_to_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let (emu, ca) = tls_emu(dir.path()).await;
    setup(&emu, 400).await;
    let yaml = manifest(&emu, StartupMode::Initial, ca_ref(), ca_ref());

    let out = check(
        dir.path(),
        yaml.clone(),
        vec![
            ("DCS_SOURCE_TLS_CA_FILE", ca.clone()),
            ("DCS_SINK_TLS_CA_FILE", ca.clone()),
        ],
    )
    .await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let ca_text = format!(
        "TLS, certificates verified against the CA bundle {}",
        ca.display()
    );
    assert!(
        text.contains(&format!("tls:       source {ca_text}")),
        "{text}"
    );
    assert!(text.contains(&format!("sink {ca_text}")), "{text}");
    assert!(!text.contains("WARNING"), "{text}");

    let cfg = config(&yaml, &both(&ca)).unwrap();
    let cp = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn_pipeline(cfg, cp.path());
    for i in 0..20u32 {
        exec(
            &emu,
            &[
                &format!("INSERT INTO demo.student VALUES {}", row_values(1000 + i)),
                &format!(
                    "UPDATE demo.student SET name = 'tls-{i}' WHERE id = {}",
                    1 + i * 7
                ),
                &format!("DELETE FROM demo.student WHERE id = {}", 2 + i * 11),
            ],
        )
        .await;
    }
    let last = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, last, Duration::from_secs(60)).await,
        "the changelog did not catch up: {:?}",
        task.is_finished()
    );
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    let source = rows(&emu, "demo.student").await;
    assert_eq!(source.len(), 400 + 20 - 20);
    assert_eq!(rows(&emu, "sink.student").await, source);
    assert_eq!(emu.doris.counters.get("mysql_plaintext_refused"), 0);
    assert_eq!(emu.doris.counters.get("tls_handshake_failed"), 0);
}

/// Every connection of the source (MySQL, FE HTTP, Flight SQL) and the sink (Stream Load) with
/// `files` and the TLS block `tls`: each must fail, naming its endpoint and `reason`.
async fn every_connection_fails(
    emu: &RunningEmulator,
    tls: Option<TlsSpec>,
    files: &TlsFiles,
    reason: &str,
) {
    let cfg = config(
        &manifest(emu, StartupMode::Snapshot, tls.clone(), tls),
        files,
    )
    .unwrap();
    let fe = emu.fe_http_addr();
    let qp = emu.ports().query_port;

    let e = dcs_runner::source::properties::read_table_info(&cfg.source)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("TLS to FE 127.0.0.1:{qp} (MySQL): ")) && e.contains(reason),
        "{e}"
    );

    let http = FeHttpClient::new(cfg.source.clone()).unwrap();
    let e = http
        .call("reading Doris's time", "/api/tso", FeRequest::Get)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("TLS to FE {fe} (HTTP): ")) && e.contains(reason),
        "{e}"
    );

    let flight = emu.ports().fe_flight_port;
    let e = FlightSession::connect(&cfg.source, flight)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "TLS to FE 127.0.0.1:{flight} (Arrow Flight SQL): "
        )) && e.contains(reason),
        "{e}"
    );

    let d = cfg.doris_sink().unwrap();
    let client = StreamLoadClient::new(
        d.fe_nodes.clone(),
        vec![],
        "root".into(),
        String::new(),
        Duration::from_secs(5),
    )
    .with_tls(d.tls.clone())
    .unwrap();
    let outcome = client.load_once(&load("tls-probe"), 0).await;
    let LoadOutcome::Retry(e) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        e.contains(&format!("TLS to FE {fe} (HTTP): ")) && e.contains(reason),
        "{e}"
    );
}

fn load(label: &str) -> LoadRequest {
    LoadRequest {
        db: "sink".into(),
        table: "student".into(),
        label: label.into(),
        headers: vec![("format".into(), "json".into())],
        body: Bytes::from_static(b"{\"id\":1}\n"),
    }
}

/// Nothing reached the sink and no load was begun.
async fn nothing_written(emu: &RunningEmulator) {
    assert!(rows(emu, "sink.student").await.is_empty());
    let txns = dcs_doris_emu::http::state_of(&emu.doris).txns();
    assert!(txns.is_empty(), "{txns:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_ca_fails_check_and_run_naming_the_endpoint_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (emu, _ca) = tls_emu(dir.path()).await;
    setup(&emu, 10).await;
    let wrong = wrong_ca(dir.path());
    every_connection_fails(&emu, ca_ref(), &both(&wrong), "UnknownIssuer").await;

    let yaml = manifest(&emu, StartupMode::Snapshot, ca_ref(), ca_ref());
    let out = check(
        dir.path(),
        yaml.clone(),
        vec![
            ("DCS_SOURCE_TLS_CA_FILE", wrong.clone()),
            ("DCS_SINK_TLS_CA_FILE", wrong.clone()),
        ],
    )
    .await;
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("TLS to FE 127.0.0.1:"), "{text}");
    assert!(
        text.contains("invalid peer certificate: UnknownIssuer"),
        "{text}"
    );

    let cp = tempfile::tempdir().unwrap();
    let (task, _handle) = spawn_pipeline(config(&yaml, &both(&wrong)).unwrap(), cp.path());
    let e = task.await.unwrap().unwrap_err().to_string();
    assert!(
        e.contains("TLS to FE 127.0.0.1:") && e.contains("UnknownIssuer"),
        "{e}"
    );
    nothing_written(&emu).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_the_certificate_does_not_hold_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (emu, ca) = tls_emu(dir.path()).await;
    setup(&emu, 10).await;
    let tls = TlsSpec {
        server_name: Some("doris.other.example".into()),
        ..tls_ca_secret("ca", "ca.crt")
    };
    every_connection_fails(&emu, Some(tls), &both(&ca), "not valid for name").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_certificate_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, served) = expired_pki();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let emu = emu_serving(served).await;
    setup(&emu, 10).await;
    every_connection_fails(&emu, ca_ref(), &both(&ca), "expired").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tls_spec_against_a_plaintext_cluster_fails_instead_of_falling_back() {
    let dir = tempfile::tempdir().unwrap();
    let emu = source_support::emu().await;
    setup(&emu, 10).await;
    let ca = wrong_ca(dir.path());
    every_connection_fails(&emu, ca_ref(), &both(&ca), "").await;
    nothing_written(&emu).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn insecure_skip_verify_accepts_a_certificate_of_another_ca_and_check_warns() {
    let dir = tempfile::tempdir().unwrap();
    let (emu, _ca) = tls_emu(dir.path()).await;
    setup(&emu, 120).await;
    let yaml = manifest(&emu, StartupMode::Snapshot, insecure(), ca_ref());
    // The sink trusts only a wrong CA: check must name that; the source goes unverified.
    let wrong = wrong_ca(dir.path());
    let out = check(
        dir.path(),
        yaml.clone(),
        vec![("DCS_SINK_TLS_CA_FILE", wrong.clone())],
    )
    .await;
    let text = stdout(&out);
    assert!(
        text.contains("tls:       source TLS WITHOUT CERTIFICATE VERIFICATION"),
        "{text}"
    );
    assert!(
        text.contains("WARNING: source.tls.insecureSkipVerify is on"),
        "{text}"
    );
    assert!(!text.contains("WARNING: sink.doris.tls"), "{text}");

    // Both sides unverified: the snapshot goes through.
    let yaml = manifest(&emu, StartupMode::Snapshot, insecure(), insecure());
    let cp = tempfile::tempdir().unwrap();
    let (task, _handle) = spawn_pipeline(config(&yaml, &TlsFiles::default()).unwrap(), cp.path());
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Done);
    let source = rows(&emu, "demo.student").await;
    assert_eq!(source.len(), 120);
    assert_eq!(rows(&emu, "sink.student").await, source);
}

#[tokio::test]
async fn a_referenced_ca_bundle_without_its_file_is_a_configuration_error() {
    let emu = source_support::emu().await;
    let e = config(
        &manifest(&emu, StartupMode::Snapshot, ca_ref(), None),
        &TlsFiles::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("source.tls.caBundle is set, but DCS_SOURCE_TLS_CA_FILE is not"),
        "{e}"
    );
}

/// A TLS server on 127.0.0.1 answering every request with a 307 to `http://`.
async fn downgrading_server(pki: &TestPki) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = pki.emu_tls().server_config(&[b"http/1.1"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://root:@127.0.0.1:9/api/sink/student/_stream_load\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_redirect_from_https_to_http_is_refused() {
    let pki = TestPki::generate("redirect CA", &[]).unwrap();
    let fe = downgrading_server(&pki).await;
    let tls = Tls::new(TlsOptions {
        ca_bundle: Some(("test CA".into(), pki.ca_pem.clone().into_bytes())),
        ..TlsOptions::default()
    })
    .unwrap();
    let client = StreamLoadClient::new(
        vec![fe.clone()],
        vec![],
        "root".into(),
        "s3cret".into(),
        Duration::from_secs(5),
    )
    .with_tls(tls)
    .unwrap();
    let outcome = client.load_once(&load("l-1"), 0).await;
    let LoadOutcome::Permanent(e) = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        e.contains(&format!("FE {fe} redirected the load from https to http")),
        "{e}"
    );
    let e = client
        .send_2pc(
            "sink",
            dcs_doris_client::TxnKey::Id(7),
            dcs_doris_client::TxnOperation::Commit,
            0,
        )
        .await
        .unwrap_err();
    assert!(
        e.contains(&format!("{fe} redirected from https to http")),
        "{e}"
    );
}
