//! `dcs-runner check` against the emulator: a good table (exit 0, the DDL it would run) and bad
//! ones (exit 2, each problem with its fix).

use crate::source_support;

use std::path::Path;
use std::process::{Command, Output};

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{IncrementType, StartupMode};
use dcs_doris_emu::RunningEmulator;
use source_support::exec;

/// `table` into `sink.student` on the emulator, `initial`, a snapshot expected to take 10m.
fn sync(emu: &RunningEmulator, table: &str) -> SyncBuilder {
    let fe = emu.fe_http_addr();
    SyncBuilder::new()
        .name("check-sync")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table(table)
        .source_secret("src")
        .mode(StartupMode::Initial)
        .expected_snapshot_duration("10m")
        .sink_fe(&fe)
        .sink_table("sink.student")
        .sink_secret("dst")
}

async fn check(dir: &Path, yaml: String, password: &str) -> Output {
    let file = dir.join("sync.yaml");
    std::fs::write(&file, yaml).unwrap();
    let cp = dir.join("cp");
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .args(["check", "-f"])
            .arg(&file)
            .arg("--checkpoint-dir")
            .arg(&cp)
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", &password)
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", &password)
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn check_reports_the_plan_for_a_good_table_and_problems_for_bad_ones() {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            &source_support::unique_ddl("demo.student", 2),
            "CREATE TABLE demo.plain (id INT NOT NULL, v INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.ttl_seconds\" = \"600\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();

    let good = check(dir.path(), sync(&emu, "demo.student").yaml(), "").await;
    let text = String::from_utf8_lossy(&good.stdout);
    assert_eq!(good.status.code(), Some(0), "{text}\n{good:?}");
    for part in [
        "take T0 from Doris now, read the snapshot, then the changelog from T0",
        "startup.mode initial",
        "increment: detail",
        "changelog.ttl_seconds 86400s covers expectedSnapshotDuration 10m",
        "sink.student does not exist; run will create it with:",
        "UNIQUE KEY(`id`)",
        "problems:  none",
    ] {
        assert!(text.contains(part), "{part} missing in\n{text}");
    }

    let bad = check(
        dir.path(),
        sync(&emu, "demo.plain")
            .increment_type(IncrementType::MinDelta)
            .yaml(),
        "",
    )
    .await;
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(2), "{text}\n{bad:?}");
    for part in [
        "table demo.plain has no row changelog",
        "fix: recreate demo.plain with PROPERTIES (\"changelog.enable\" = \"true\")",
        "minDelta needs the before images",
        "ALTER TABLE demo.plain SET (\"changelog.ttl_seconds\" = \"920\")",
    ] {
        assert!(text.contains(part), "{part} missing in\n{text}");
    }

    let denied = check(dir.path(), sync(&emu, "demo.student").yaml(), "wrong").await;
    let text = String::from_utf8_lossy(&denied.stdout);
    assert_eq!(denied.status.code(), Some(2), "{text}");
    assert!(
        text.contains("Doris rejected the source credentials"),
        "{text}"
    );
    assert!(
        text.contains("Doris rejected the sink credentials"),
        "{text}"
    );
    assert!(!text.contains("wrong"), "no secret in the output: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn check_looks_at_the_dead_letter_table_as_run_would_prepare_it() {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            &source_support::unique_ddl("demo.student", 2),
            "CREATE TABLE sink.bad_rejects (id INT NOT NULL, note VARCHAR(10)) DUPLICATE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();

    let fresh = check(
        dir.path(),
        sync(&emu, "demo.student")
            .dead_letter("sink.student_rejected")
            .yaml(),
        "",
    )
    .await;
    let text = String::from_utf8_lossy(&fresh.stdout);
    assert_eq!(fresh.status.code(), Some(0), "{text}\n{fresh:?}");
    for part in [
        "rejected:  sink.student_rejected does not exist; run will create it with:",
        "CREATE TABLE IF NOT EXISTS `sink`.`student_rejected`",
        "problems:  none",
    ] {
        assert!(text.contains(part), "{part} missing in\n{text}");
    }
    // check changes nothing: the table is still missing.
    let tables = source_support::mysql_rows(&emu, "SHOW TABLES FROM sink").await;
    assert!(
        !tables.iter().flatten().any(|t| t == "student_rejected"),
        "{tables:?}"
    );

    let bad = check(
        dir.path(),
        sync(&emu, "demo.student")
            .dead_letter("sink.bad_rejects")
            .yaml(),
        "",
    )
    .await;
    let text = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(2), "{text}\n{bad:?}");
    for part in [
        "rejected:  sink.bad_rejects cannot be used",
        "the dead-letter table sink.bad_rejects has no column reason",
        "column id of the dead-letter table sink.bad_rejects is NOT NULL and not written by dcs",
    ] {
        assert!(text.contains(part), "{part} missing in\n{text}");
    }
}
