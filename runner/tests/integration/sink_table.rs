//! The sink table against the emulator: created when missing (upsert and changelog mode),
//! refused when incompatible, kept in step with the source's ADD/DROP COLUMN, and CSV bodies.

use crate::source_support;

use std::path::Path;
use std::time::Duration;

use dcs_crds::{PartitionUnit, SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::checkpoint::FileStore;
use dcs_runner::error::exit_code;
use dcs_runner::pipeline::{self, Control, ControlHandle, Outcome};
use dcs_runner::settings::PipelineConfig;
use source_support::{
    SOURCE_DDL, column_names, config, exec, mysql_rows, row_values, student_sync,
};

async fn setup(emu: &RunningEmulator, rows: u32) {
    exec(emu, &["CREATE DATABASE demo", SOURCE_DDL]).await;
    let values: Vec<String> = (1..=rows).map(row_values).collect();
    for chunk in values.chunks(200) {
        let sql = format!("INSERT INTO demo.student VALUES {}", chunk.join(", "));
        exec(emu, &[&sql]).await;
    }
}

async fn run(config: PipelineConfig, dir: &Path) -> dcs_runner::Result<Outcome> {
    let mut store = FileStore::open(dir).unwrap();
    let (control, _handle) = Control::new();
    pipeline::run(config, &mut store, control).await
}

async fn rows(emu: &RunningEmulator, table: &str) -> Vec<Vec<String>> {
    mysql_rows(emu, &format!("SELECT * FROM {table} ORDER BY id")).await
}

async fn show_create(emu: &RunningEmulator, table: &str) -> String {
    mysql_rows(emu, &format!("SHOW CREATE TABLE {table}")).await[0][1].clone()
}

/// Wait until the sink (committed at the next checkpoint under 2PC) equals the source.
async fn converged(emu: &RunningEmulator) {
    let mut last = (Vec::new(), Vec::new());
    for _ in 0..100 {
        last = (
            rows(emu, "sink.student").await,
            rows(emu, "demo.student").await,
        );
        if last.0 == last.1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the sink did not converge:\n{:?}\n{:?}", last.0, last.1);
}

/// Wait until a changelog window ends after emulator time `after_ms`.
async fn caught_up(handle: &mut ControlHandle, after_ms: i64) {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let done = handle
                .progress
                .borrow_and_update()
                .window_end
                .as_ref()
                .is_some_and(|w| w.epoch_ms > after_ms);
            if done {
                return;
            }
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the changelog caught up");
}

#[tokio::test]
async fn a_missing_sink_table_is_created_from_the_source() {
    let emu = source_support::emu().await;
    setup(&emu, 300).await;
    let dir = tempfile::tempdir().unwrap();
    let sync = student_sync(&emu, StartupMode::Snapshot)
        .create_table_property("replication_num", "1")
        .auto_partition("updated", PartitionUnit::Day);
    let outcome = run(config(&sync.yaml()), dir.path()).await.unwrap();
    assert_eq!(outcome, Outcome::Done);
    let ddl = show_create(&emu, "sink.student").await;
    for part in [
        "`id` int NOT NULL",
        "`name` varchar(192) NULL",
        "`score` decimal(10,2) NULL",
        "`updated` datetime(3) NULL",
        "UNIQUE KEY(`id`)",
        "BUCKETS AUTO",
        "date_trunc(`updated`, 'day')",
    ] {
        assert!(ddl.contains(part), "{part} missing in\n{ddl}");
    }
    assert_eq!(
        rows(&emu, "sink.student").await,
        rows(&emu, "demo.student").await
    );
}

#[tokio::test]
async fn a_changelog_mode_sink_is_a_duplicate_table_with_the_change_columns() {
    let emu = source_support::emu().await;
    setup(&emu, 50).await;
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        config(
            &student_sync(&emu, StartupMode::Snapshot)
                .sink_mode(SinkMode::Changelog)
                .yaml(),
        ),
        dir.path(),
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Done);
    let ddl = show_create(&emu, "sink.student").await;
    assert!(ddl.contains("DUPLICATE KEY(`id`)"), "{ddl}");
    assert!(!ddl.contains("replication_num"), "nothing added: {ddl}");
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        [
            "id", "name", "score", "updated", "dcs_op", "dcs_tso", "dcs_lsn"
        ]
    );
    let ops = mysql_rows(&emu, "SELECT dcs_op FROM sink.student").await;
    assert_eq!(ops.len(), 50);
    assert!(ops.iter().all(|r| r[0] == "+I"), "{ops:?}");
}

#[tokio::test]
async fn an_incompatible_sink_table_stops_the_run_with_what_to_fix() {
    let emu = source_support::emu().await;
    setup(&emu, 10).await;
    exec(
        &emu,
        &[
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64)) DUPLICATE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    // Without createTable the runner does not change the table: missing columns are a problem.
    let yaml = student_sync(&emu, StartupMode::Snapshot)
        .create_table(false)
        .yaml();
    let err = run(config(&yaml), dir.path()).await.unwrap_err();
    assert_eq!(err.exit_code(), exit_code::CONFIG, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("has no column score, updated"), "{msg}");
    assert!(msg.contains("not a UNIQUE KEY table"), "{msg}");
    // With it (the default) they would be added, but the model still does not fit.
    let err = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(!msg.contains("has no column"), "{msg}");
    assert!(msg.contains("not a UNIQUE KEY table"), "{msg}");
    // And a missing table with createTable off is refused, not created.
    let dir = tempfile::tempdir().unwrap();
    let yaml = student_sync(&emu, StartupMode::Snapshot)
        .create_table(false)
        .sink_table("sink.other")
        .yaml();
    let err = run(config(&yaml), dir.path()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("does not exist and sink.doris.createTable.enabled is false"),
        "{err}"
    );
}

#[tokio::test]
async fn columns_added_to_and_dropped_from_the_source_follow_in_the_sink() {
    let emu = source_support::emu().await;
    setup(&emu, 100).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    exec(
        &emu,
        &["INSERT INTO demo.student VALUES (101, 'before', 1.00, '2026-11-29 10:00:00.000')"],
    )
    .await;
    caught_up(&mut handle, emu.doris.clock.now_ms()).await;

    exec(
        &emu,
        &[
            "ALTER TABLE demo.student ADD COLUMN level VARCHAR(10)",
            "INSERT INTO demo.student VALUES (102, 'added', 2.00, '2026-11-29 11:00:00.000', 'gold')",
            "UPDATE demo.student SET level = 'silver' WHERE id = 5",
        ],
    )
    .await;
    caught_up(&mut handle, emu.doris.clock.now_ms()).await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated", "level"]
    );
    assert!(
        show_create(&emu, "sink.student")
            .await
            .contains("`level` varchar(30) NULL")
    );
    converged(&emu).await;
    let levels = mysql_rows(
        &emu,
        "SELECT id, level FROM sink.student WHERE level IS NOT NULL ORDER BY id",
    )
    .await;
    assert_eq!(levels, [["5", "silver"], ["102", "gold"]]);

    exec(
        &emu,
        &[
            "ALTER TABLE demo.student DROP COLUMN score",
            "INSERT INTO demo.student VALUES (103, 'dropped', '2026-11-29 12:00:00.000', 'bronze')",
        ],
    )
    .await;
    caught_up(&mut handle, emu.doris.clock.now_ms()).await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "updated", "level"]
    );
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    assert_eq!(
        rows(&emu, "sink.student").await,
        rows(&emu, "demo.student").await
    );
}

#[tokio::test]
async fn csv_bodies_sync_snapshot_and_changes() {
    let emu = source_support::emu().await;
    setup(&emu, 400).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let sync = student_sync(&emu, StartupMode::Initial)
        .sink_property("format", "csv")
        .sink_property("column_separator", "\\x01")
        .sink_property("line_delimiter", "\\n");
    let cfg = config(&sync.yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    for i in 0..20u32 {
        let stmts = [
            format!("INSERT INTO demo.student VALUES {}", row_values(1000 + i)),
            format!(
                "UPDATE demo.student SET name = 'tab\\there {i}', score = NULL WHERE id = {}",
                1 + i * 7
            ),
            format!("DELETE FROM demo.student WHERE id = {}", 2 + i * 11),
        ];
        let refs: Vec<&str> = stmts.iter().map(String::as_str).collect();
        exec(&emu, &refs).await;
    }
    caught_up(&mut handle, emu.doris.clock.now_ms()).await;
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    let source = rows(&emu, "demo.student").await;
    assert!(source.iter().any(|r| r[1].contains('\t')));
    assert_eq!(rows(&emu, "sink.student").await, source);
}

#[tokio::test]
async fn a_column_added_while_no_runner_ran_is_added_on_start() {
    let emu = source_support::emu().await;
    setup(&emu, 30).await;
    let first = tempfile::tempdir().unwrap();
    let yaml = student_sync(&emu, StartupMode::Snapshot).yaml();
    assert_eq!(
        run(config(&yaml), first.path()).await.unwrap(),
        Outcome::Done
    );
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student ADD COLUMN level INT",
            "UPDATE demo.student SET level = 7 WHERE id = 3",
        ],
    )
    .await;
    // A fresh start (new checkpoint directory) finds the sink without `level`: it is added, not
    // reported as missing.
    let second = tempfile::tempdir().unwrap();
    let yaml = student_sync(&emu, StartupMode::Snapshot)
        .label_prefix("second")
        .yaml();
    assert_eq!(
        run(config(&yaml), second.path()).await.unwrap(),
        Outcome::Done
    );
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated", "level"]
    );
    converged(&emu).await;
}
