//! The offset table against the Doris emulator: the row follows the checkpoints, a restart without
//! a checkpoint resumes from it, a bad table fails the start, and failed writes never stop the sync.

use crate::source_support;

use std::path::Path;
use std::time::Duration;

use dcs_crds::StartupMode;
use dcs_doris_emu::RunningEmulator;
use dcs_runner::Error;
use dcs_runner::checkpoint::{CheckpointStore, FileStore, Position};
use dcs_runner::pipeline::{self, Control, ControlHandle, Outcome};
use dcs_runner::settings::{Credentials, PipelineConfig};
use source_support::{exec, mysql_rows, student_sync, window_past};

const OFFSETS_DDL: &str = "CREATE TABLE ops.offsets (consumer_id VARCHAR(256) NOT NULL, \
     offset_timestamp DATETIME NOT NULL, update_time DATETIMEV2(3) NOT NULL) \
     UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1 \
     PROPERTIES (\"replication_num\" = \"1\")";

async fn setup(emu: &RunningEmulator, rows: u32) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            "CREATE DATABASE ops",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\")",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")",
            OFFSETS_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=rows).map(|i| format!("({i}, 'n{i}')")).collect();
    exec(
        emu,
        &[&format!(
            "INSERT INTO demo.student VALUES {}",
            values.join(", ")
        )],
    )
    .await;
}

fn config(emu: &RunningEmulator, mode: StartupMode, offsets_table: &str) -> PipelineConfig {
    let yaml = student_sync(emu, mode)
        .offsets(offsets_table, Some("c1"))
        .yaml();
    let sync = dcs_crds::from_manifest(&yaml).unwrap();
    let creds = Credentials {
        source_user: "root".into(),
        sink_user: "root".into(),
        ..Credentials::default()
    };
    let mut c = PipelineConfig::from_sync(&sync, creds).unwrap();
    c.changelog.poll_interval = Duration::from_millis(200);
    c.changelog.retry_delay = Duration::from_millis(50);
    c.checkpoint_interval = Duration::from_millis(300);
    c.offset_table_retry.base_delay = Duration::from_millis(20);
    c
}

type Task = tokio::task::JoinHandle<dcs_runner::Result<Outcome>>;

fn spawn(cfg: PipelineConfig, dir: &Path) -> (Task, ControlHandle) {
    let mut store = FileStore::open(dir).unwrap();
    let (control, handle) = Control::new();
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    (task, handle)
}

async fn offset_rows(emu: &RunningEmulator, table: &str) -> Vec<Vec<String>> {
    mysql_rows(
        emu,
        &format!("SELECT consumer_id, offset_timestamp FROM {table}"),
    )
    .await
}

async fn table(emu: &RunningEmulator, t: &str) -> Vec<Vec<String>> {
    mysql_rows(emu, &format!("SELECT * FROM {t} ORDER BY id")).await
}

#[tokio::test]
async fn the_row_follows_checkpoints_and_a_restart_without_checkpoint_resumes_from_it() {
    let emu = source_support::emu().await;
    setup(&emu, 30).await;
    let dir = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn(
        config(&emu, StartupMode::Initial, "ops.offsets"),
        dir.path(),
    );
    exec(&emu, &["INSERT INTO demo.student VALUES (100, 'a')"]).await;
    assert!(
        window_past(
            &mut handle,
            emu.doris.clock.now_ms(),
            Duration::from_secs(20)
        )
        .await,
        "the changelog caught up"
    );
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    // The run waits for the last row: it holds the saved checkpoint's offset (a window end).
    let cp = FileStore::open(dir.path())
        .unwrap()
        .load()
        .await
        .unwrap()
        .unwrap();
    let Position::Changelog { offset } = cp.position else {
        panic!("{cp:?}")
    };
    assert_eq!(
        offset_rows(&emu, "ops.offsets").await,
        vec![vec!["c1".to_owned(), offset.timestamp.clone()]]
    );
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );

    // Changes while no runner runs; then a runner without the checkpoint (a new directory).
    exec(
        &emu,
        &[
            "INSERT INTO demo.student VALUES (101, 'b')",
            "UPDATE demo.student SET name = 'changed' WHERE id = 1",
            "DELETE FROM demo.student WHERE id = 2",
        ],
    )
    .await;
    let last = emu.doris.clock.now_ms();
    let dir2 = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn(
        config(&emu, StartupMode::Initial, "ops.offsets"),
        dir2.path(),
    );
    assert!(
        window_past(&mut handle, last, Duration::from_secs(20)).await,
        "the changelog caught up"
    );
    let p = handle.progress.borrow().clone();
    assert_eq!(
        p.snapshot_rows_read, 0,
        "resumed from the row, not a snapshot"
    );
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
    let cp2 = FileStore::open(dir2.path())
        .unwrap()
        .load()
        .await
        .unwrap()
        .unwrap();
    assert!(cp2.start_point.is_none(), "no snapshot, no T0: {cp2:?}");
}

#[tokio::test]
async fn a_missing_or_bad_offset_table_fails_the_start() {
    let emu = source_support::emu().await;
    setup(&emu, 5).await;
    let run = |table: &'static str| {
        let cfg = config(&emu, StartupMode::Latest, table);
        async move {
            let dir = tempfile::tempdir().unwrap();
            let mut store = FileStore::open(dir.path()).unwrap();
            let (control, _h) = Control::new();
            tokio::time::timeout(
                Duration::from_secs(20),
                pipeline::run(cfg, &mut store, control),
            )
            .await
            .expect("the start fails quickly")
            .unwrap_err()
        }
    };
    let missing = run("ops.nope").await;
    assert!(matches!(missing, Error::OffsetTable { .. }), "{missing}");
    let msg = missing.to_string();
    assert!(
        msg.starts_with("offset table ops.nope: cannot be read"),
        "{msg}"
    );
    assert!(msg.contains("CREATE TABLE ops.nope (consumer_id"), "{msg}");
    assert!(msg.contains("or remove offsets.table"), "{msg}");

    exec(
        &emu,
        &[
            "CREATE TABLE ops.dup (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, \
             update_time DATETIME(3) NOT NULL) DUPLICATE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) \
             BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
            "INSERT INTO ops.dup VALUES ('c1', '2026-11-29 10:00:00', '2026-11-29 10:00:00.000'), \
             ('c1', '2026-11-29 11:00:00', '2026-11-29 11:00:00.000')",
            "CREATE TABLE ops.bad (consumer_id VARCHAR(256) NOT NULL, offset_timestamp VARCHAR(64) NOT NULL, \
             update_time DATETIME(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) \
             BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
            "INSERT INTO ops.bad VALUES ('c1', 'last tuesday', '2026-11-29 10:00:00.000')",
        ],
    )
    .await;
    let dup = run("ops.dup").await.to_string();
    assert!(dup.contains("2 rows for consumer c1"), "{dup}");
    let bad = run("ops.bad").await.to_string();
    assert!(bad.contains("\"last tuesday\""), "{bad}");
    // No fallback to the startup mode: nothing was loaded.
    assert!(table(&emu, "sink.student").await.is_empty());
}

#[tokio::test]
async fn failed_offset_table_writes_do_not_stop_the_sync() {
    let emu = source_support::emu().await;
    setup(&emu, 10).await;
    let dir = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn(
        config(&emu, StartupMode::Initial, "ops.offsets"),
        dir.path(),
    );
    assert!(
        window_past(
            &mut handle,
            emu.doris.clock.now_ms(),
            Duration::from_secs(20)
        )
        .await,
        "the changelog caught up"
    );
    tokio::time::timeout(Duration::from_secs(20), async {
        while offset_rows(&emu, "ops.offsets").await.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("a row was written");
    exec(&emu, &["DROP TABLE ops.offsets"]).await;
    for i in 0..5 {
        exec(
            &emu,
            &[&format!(
                "INSERT INTO demo.student VALUES ({}, 'late')",
                200 + i
            )],
        )
        .await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let last = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, last, Duration::from_secs(20)).await,
        "the changelog caught up"
    );
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle
            .progress
            .borrow_and_update()
            .offset_table_write_failures
            == 0
        {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("failures are counted");
    assert!(!task.is_finished(), "the sync keeps running");
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
}
