//! The dead-letter table (`sink.doris.deadLetter`) through the real runner against doris-emu: a
//! row Doris refuses goes there with its reason and the row, the others into the sink, in the
//! same checkpoint; a stop between the save and the commit neither loses nor doubles it.

use crate::source_support;

use std::path::Path;
use std::process::{Command, Output};

use dcs_runner::checkpoint::{CheckpointStore, FileStore};
use dcs_runner::error::Error;
use dcs_runner::pipeline::{self, Control};
use source_support::{config, exec, manifest, mysql_rows};

const DEAD_LETTER: &str = "      deadLetter: {table: sink.student_rejected}";

async fn runner(dir: &Path, yaml: String) -> Output {
    let file = dir.join("sync.yaml");
    std::fs::write(&file, yaml).unwrap();
    let cp = dir.join("cp");
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .arg("run")
            .arg("-f")
            .arg(&file)
            .arg("--checkpoint-dir")
            .arg(&cp)
            .args(["--metrics-addr", "127.0.0.1:0"])
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", "")
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", "")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Source rows 1..=3, row 2 with a NULL name; the sink's `name` is NOT NULL, so Doris refuses
/// row 2.
async fn setup(emu: &dcs_doris_emu::RunningEmulator) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(16)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\")",
            "INSERT INTO demo.student VALUES (1, 'ann'), (2, NULL), (3, 'cy')",
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(48) NOT NULL) \
             UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
}

async fn sink_rows(emu: &dcs_doris_emu::RunningEmulator) -> Vec<Vec<String>> {
    mysql_rows(emu, "SELECT id, name FROM sink.student ORDER BY id").await
}

async fn dead_letters(emu: &dcs_doris_emu::RunningEmulator) -> Vec<Vec<String>> {
    mysql_rows(
        emu,
        "SELECT source_table, sink_table, reason, row_json FROM sink.student_rejected",
    )
    .await
}

fn the_refused_row() -> Vec<Vec<String>> {
    vec![vec![
        "demo.student".into(),
        "sink.student".into(),
        "column(name) values is null while columns is not nullable".into(),
        r#"{"id":2,"name":null,"__DORIS_DELETE_SIGN__":0}"#.into(),
    ]]
}

#[tokio::test]
async fn a_refused_row_goes_to_the_dead_letter_table_and_the_sync_goes_on() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    let out = runner(dir.path(), manifest(&emu, "snapshot", DEAD_LETTER)).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
    assert_eq!(dead_letters(&emu).await, the_refused_row());
    let cp = FileStore::open(&dir.path().join("cp"))
        .unwrap()
        .load()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            cp.counters.rows_written,
            cp.counters.rows_rejected,
            cp.counters.rows_read
        ),
        (2, 1, 3)
    );
}

/// Stopped right after the checkpoint holding both loads is saved, before their commit: neither
/// the sink rows nor the dead-letter row are visible; the restart commits both, once.
#[tokio::test]
async fn a_stop_between_save_and_commit_neither_loses_nor_doubles_a_refused_row() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = manifest(&emu, "snapshot", DEAD_LETTER);
    let mut store = FileStore::open(&dir.path().join("cp")).unwrap();
    let (mut control, _h) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let err = pipeline::run(config(&yaml), &mut store, control)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Injected { .. }), "{err}");
    let saved = store.load().await.unwrap().unwrap();
    drop(store);
    let kinds: Vec<bool> = saved.pending_txns.iter().map(|t| t.dead_letter).collect();
    assert_eq!(kinds, [false, true], "{saved:?}");
    assert_eq!(saved.counters.rows_rejected, 1);
    assert!(sink_rows(&emu).await.is_empty());
    assert!(dead_letters(&emu).await.is_empty());

    for _ in 0..2 {
        let out = runner(dir.path(), yaml.clone()).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
        assert_eq!(dead_letters(&emu).await, the_refused_row());
    }
}

#[tokio::test]
async fn a_dead_letter_table_that_does_not_fit_stops_the_run_naming_what_is_wrong() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    exec(
        &emu,
        &[
            "CREATE TABLE sink.student_rejected (id INT NOT NULL) DUPLICATE KEY(id) \
           DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = runner(dir.path(), manifest(&emu, "snapshot", DEAD_LETTER)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "sink.doris.deadLetter.table: the dead-letter table sink.student_rejected has no \
             column rejected_at; add it (rejected_at DATETIME(6) NOT NULL) or drop the table so \
             that it is created"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("column id of the dead-letter table sink.student_rejected is NOT NULL"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_runner_refuses_a_dead_letter_table_that_is_the_sink_table() {
    let emu = source_support::emu().await;
    let dir = tempfile::tempdir().unwrap();
    let out = runner(
        dir.path(),
        manifest(&emu, "snapshot", "      deadLetter: {table: sink.student}"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "spec.sink.doris.deadLetter.table: sink.student is the sink table itself; name another \
             table, e.g. sink.t_rejected"
        ),
        "{stderr}"
    );
}
