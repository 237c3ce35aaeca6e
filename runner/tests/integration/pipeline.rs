//! The pipeline against the emulator, run in-process from a sync manifest: snapshot and initial
//! modes, 2PC crash recovery, fencing, retried and permanent Stream Load failures.

use crate::source_support;

use std::path::Path;
use std::time::Duration;

use dcs_crds::{IncrementType, SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::{FaultState, StreamLoadFault};
use dcs_runner::Error;
use dcs_runner::checkpoint::{Checkpoint, CheckpointStore, FileStore, Position};
use dcs_runner::pipeline::{self, Control, Outcome};
use dcs_runner::settings::PipelineConfig;
use source_support::{SOURCE_DDL, config, exec, mysql_rows, row_values, student_sync};

/// Source `demo.student` with `rows` rows (some NULLs) and an empty sink `sink.student`.
async fn setup(emu: &RunningEmulator, rows: u32, sink_name_len: u32) {
    let sink_ddl = format!(
        "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR({sink_name_len}), \
         score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
         BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")"
    );
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            &sink_ddl,
        ],
    )
    .await;
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

async fn table(emu: &RunningEmulator, table: &str) -> Vec<Vec<String>> {
    mysql_rows(emu, &format!("SELECT * FROM {table} ORDER BY id")).await
}

async fn stored(dir: &Path) -> Checkpoint {
    let mut store = FileStore::open(dir).unwrap();
    store.load().await.unwrap().expect("a checkpoint was saved")
}

#[derive(Debug, serde::Deserialize)]
struct Txn {
    label: String,
    state: String,
}

async fn txns(emu: &RunningEmulator) -> Vec<Txn> {
    source_support::emu_txns(emu).await
}

#[tokio::test]
async fn snapshot_mode_copies_the_table_and_ends_done() {
    let emu = source_support::emu().await;
    setup(&emu, 750, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Done);
    let source = table(&emu, "demo.student").await;
    assert_eq!(source.len(), 750);
    assert_eq!(table(&emu, "sink.student").await, source);
    let cp = stored(dir.path()).await;
    assert_eq!(cp.position, Position::Done);
    assert_eq!(cp.counters.rows_read, 750);
    assert_eq!(cp.counters.rows_written, 750);
    assert!(cp.counters.loads >= 8, "{:?}", cp.counters);
    // Every load was pre-committed, then committed after its checkpoint.
    let t = txns(&emu).await;
    assert!(t.iter().all(|x| x.state == "VISIBLE"), "{t:?}");
    assert!(t.iter().all(|x| x.label.starts_with("dcs-student-sync-")));
    // A second run finds Position::Done and does nothing.
    let again = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap();
    assert_eq!(again, Outcome::Done);
}

/// Insert, update and delete source rows until `stop` says so; returns the emulator time of the
/// last write.
async fn write_changes(emu: &RunningEmulator, first_id: u32, rounds: u32) -> i64 {
    for i in 0..rounds {
        let id = first_id + i;
        let stmts = [
            format!("INSERT INTO demo.student VALUES {}", row_values(id)),
            format!(
                "UPDATE demo.student SET name = 'renamed-{i}', score = 1.5 WHERE id = {}",
                1 + (i * 13) % first_id
            ),
            format!(
                "DELETE FROM demo.student WHERE id = {}",
                2 + (i * 31) % first_id
            ),
            format!(
                "UPDATE demo.student SET name = NULL WHERE id = {}",
                3 + (i * 17) % first_id
            ),
        ];
        let refs: Vec<&str> = stmts.iter().map(String::as_str).collect();
        exec(emu, &refs).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    emu.doris.clock.now_ms()
}

#[tokio::test]
async fn initial_mode_with_concurrent_writes_converges() {
    let emu = source_support::emu().await;
    setup(&emu, 1000, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    let last_write = write_changes(&emu, 1000, 60).await;
    // Wait for a window that ends after the last write, then stop gracefully.
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let done = handle
                .progress
                .borrow_and_update()
                .window_end
                .as_ref()
                .is_some_and(|w| w.epoch_ms > last_write);
            if done {
                break;
            }
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the changelog caught up");
    handle.shutdown.send(true).unwrap();
    let outcome = task.await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Stopped);
    let source = table(&emu, "demo.student").await;
    assert_eq!(table(&emu, "sink.student").await, source);
    let cp = stored(dir.path()).await;
    assert!(matches!(cp.position, Position::Changelog { .. }), "{cp:?}");
    assert!(cp.start_point.is_some());
    assert!(cp.counters.rows_deleted > 0, "{:?}", cp.counters);
}

#[tokio::test]
async fn two_phase_commit_recovers_between_save_and_commit() {
    let emu = source_support::emu().await;
    setup(&emu, 600, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = student_sync(&emu, StartupMode::Snapshot).yaml();
    // Crash right after a checkpoint with pre-committed loads is saved.
    let mut store = FileStore::open(dir.path()).unwrap();
    let (mut control, _h) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let err = pipeline::run(config(&yaml), &mut store, control)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Injected { .. }), "{err}");
    drop(store);
    let cp = stored(dir.path()).await;
    assert!(!cp.pending_txns.is_empty());
    let t = txns(&emu).await;
    assert!(t.iter().any(|x| x.state == "PRECOMMITTED"), "{t:?}");
    let committed_before = t.iter().filter(|x| x.state == "VISIBLE").count();
    assert_eq!(committed_before, 0);
    // Restart: the saved loads are committed, the rest of the snapshot is read.
    let outcome = run(config(&yaml), dir.path()).await.unwrap();
    assert_eq!(outcome, Outcome::Done);
    let t = txns(&emu).await;
    for p in &cp.pending_txns {
        let x = t.iter().find(|x| x.label == p.label).unwrap();
        assert_eq!(x.state, "VISIBLE", "{p:?}");
    }
    assert!(t.iter().all(|x| x.state != "PRECOMMITTED"), "{t:?}");
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
}

#[tokio::test]
async fn loads_precommitted_after_the_last_checkpoint_are_aborted_on_restart() {
    let emu = source_support::emu().await;
    // 500 rows per tablet: a split takes several loads before its checkpoint.
    setup(&emu, 2000, 64).await;
    let dir = tempfile::tempdir().unwrap();
    // No checkpoint for an hour: loads are pre-committed under checkpoint 1, never saved.
    let yaml = student_sync(&emu, StartupMode::Snapshot)
        .checkpoint_interval("1h")
        .batch_interval("1h")
        .yaml();
    let mut cfg = config(&yaml);
    cfg.snapshot_concurrency = 1;
    let dir_path = dir.path().to_path_buf();
    let task = tokio::spawn(async move {
        let mut store = FileStore::open(&dir_path).unwrap();
        let (control, _h) = Control::new();
        pipeline::run(cfg, &mut store, control).await
    });
    tokio::time::timeout(Duration::from_secs(20), async {
        while !txns(&emu).await.iter().any(|x| x.state == "PRECOMMITTED") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a load was pre-committed");
    task.abort();
    let _ = task.await;
    let before: Vec<String> = txns(&emu)
        .await
        .into_iter()
        .filter(|x| x.state == "PRECOMMITTED")
        .map(|x| x.label)
        .collect();
    assert!(!before.is_empty());
    // Restart with regular checkpoints: the stale loads are aborted, the copy is exact.
    let outcome = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Done);
    let after = txns(&emu).await;
    assert!(after.iter().all(|x| x.state != "PRECOMMITTED"), "{after:?}");
    for label in &before {
        assert!(
            after
                .iter()
                .any(|x| &x.label == label && x.state == "ABORTED"),
            "{label} was not aborted: {after:?}"
        );
    }
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
}

#[tokio::test]
async fn a_second_runner_is_fenced() {
    let emu = source_support::emu().await;
    setup(&emu, 200, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    // The directory lock keeps a second runner out.
    let locked = FileStore::open(dir.path()).unwrap_err();
    assert_eq!(locked.exit_code(), 4, "{locked}");
    let (control, mut handle) = Control::new();
    let mut cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    // Long enough that a load and the fencing write below fit between two checkpoints.
    cfg.checkpoint_interval = Duration::from_secs(5);
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle.progress.borrow_and_update().window_end.is_none() {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    // A row is loaded (pre-committed, its checkpoint not yet saved) ... (when a checkpoint comes
    // in between, another row)
    let mut late = 5000;
    loop {
        assert!(
            late < 5010,
            "no load was followed by the fence before a checkpoint"
        );
        let before = handle.progress.borrow().clone();
        exec(
            &emu,
            &[&format!(
                "INSERT INTO demo.student VALUES ({late}, 'late', 1.00, NULL)"
            )],
        )
        .await;
        tokio::time::timeout(Duration::from_secs(20), async {
            while handle.progress.borrow_and_update().counters.loads == before.counters.loads {
                handle.progress.changed().await.unwrap();
            }
        })
        .await
        .unwrap();
        if handle.progress.borrow().checkpoint_id == before.checkpoint_id {
            break;
        }
        late += 1;
    }
    // ... when another runner (bypassing the lock, as one in another pod would) writes the
    // checkpoint.
    let path = dir.path().join("checkpoint.json");
    let mut theirs =
        dcs_runner::checkpoint::parse("test", &std::fs::read_to_string(&path).unwrap()).unwrap();
    theirs.checkpoint_id += 100;
    std::fs::write(&path, theirs.to_json()).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the fenced runner stops")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Fenced { .. }), "{err}");
    assert_eq!(err.exit_code(), 4);
    // What the fenced runner pre-committed is never committed: it aborted it before stopping.
    let sink = table(&emu, "sink.student").await;
    assert!(
        !sink.iter().any(|r| r[0] == late.to_string()),
        "fenced loads were committed"
    );
    let t = txns(&emu).await;
    assert!(t.iter().all(|x| x.state != "PRECOMMITTED"), "{t:?}");
    assert!(t.iter().any(|x| x.state == "ABORTED"), "{t:?}");
}

#[tokio::test]
async fn stream_load_503s_are_retried_with_the_same_label() {
    let emu = source_support::emu().await;
    setup(&emu, 150, 64).await;
    emu.doris.faults.set(FaultState {
        stream_load: Some(StreamLoadFault {
            count: 2,
            http_status: Some(503),
            status: None,
            message: Some("busy".into()),
        }),
        ..FaultState::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap();
    assert_eq!(outcome, Outcome::Done);
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
    let cp = stored(dir.path()).await;
    // Two more BE loads than successful ones, and the labels in order without gaps.
    assert_eq!(
        emu.doris.counters.get("be_stream_load"),
        cp.counters.loads + 2
    );
    let labels: Vec<String> = txns(&emu).await.into_iter().map(|x| x.label).collect();
    // The run saves its start point as checkpoint 1 first, so its loads are labelled 2.
    let owner = dcs_crds::label::LabelOwner {
        namespace: "default",
        prefix: "dcs",
        consumer_id: "student-sync",
    };
    assert_eq!(
        labels.first(),
        Some(&dcs_crds::label::load_label(
            &owner,
            dcs_crds::label::LabelScheme::V2,
            None,
            2,
            0
        ))
    );
    let unique: std::collections::BTreeSet<&String> = labels.iter().collect();
    assert_eq!(unique.len(), labels.len(), "{labels:?}");
}

#[tokio::test]
async fn a_sink_too_narrow_for_the_names_is_refused_before_any_load() {
    let emu = source_support::emu().await;
    // Names of up to 64 bytes do not fit the sink's VARCHAR(4): refused at the start, where
    // Doris would filter the rows of the first load (tests/integration/sink_types.rs has a row
    // that passes this check and is filtered by Doris).
    setup(&emu, 50, 4).await;
    let dir = tempfile::tempdir().unwrap();
    let err = run(
        config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
        dir.path(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: sink column sink.student.name is VARCHAR(4) but the source column \
         is VARCHAR(64): values longer than 4 bytes would not fit; ALTER TABLE `sink`.`student` \
         MODIFY COLUMN `name` VARCHAR(192) NULL"
    );
    assert_eq!(err.exit_code(), 2);
    assert_eq!(emu.doris.counters.get("be_stream_load"), 0);
}

#[tokio::test]
async fn an_expired_from_timestamp_start_stops_with_exit_code_3_for_every_increment_type() {
    let emu = source_support::emu().await;
    setup(&emu, 10, 64).await;
    exec(
        &emu,
        &["ALTER TABLE demo.student SET (\"changelog.ttl_seconds\" = \"60\")"],
    )
    .await;
    let an_hour_ago =
        dcs_runner::source::tso::format_timestamp(emu.doris.clock.now_ms() - 3_600_000);
    for increment in [
        IncrementType::MinDelta,
        IncrementType::Detail,
        IncrementType::AppendOnly,
    ] {
        let yaml = student_sync(&emu, StartupMode::FromTimestamp)
            .from_timestamp(&an_hour_ago)
            .increment_type(increment)
            .yaml();
        let dir = tempfile::tempdir().unwrap();
        let before = emu.doris.counters.get("sql_incr");
        let err = tokio::time::timeout(Duration::from_secs(20), run(config(&yaml), dir.path()))
            .await
            .expect("the runner stops")
            .unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "Changelog offset {an_hour_ago} has expired according to changelog.ttl_seconds (60 s)"
            )),
            "{increment:?}: {err}"
        );
        assert_eq!(err.exit_code(), 3);
        assert_eq!(
            emu.doris.counters.get("sql_incr"),
            before,
            "nothing was read"
        );
        // The checkpoint says why the runner stopped, and its offset did not move.
        let cp = stored(dir.path()).await;
        let stopped = cp.stopped.expect("a stop record");
        assert_eq!(
            (stopped.reason.as_str(), stopped.exit_code),
            ("OffsetExpired", 3)
        );
        assert_eq!(cp.last_error.unwrap().reason, "OffsetExpired");
        let Position::Changelog { offset } = cp.position else {
            panic!("{:?}", cp.position);
        };
        assert_eq!(offset.timestamp, an_hour_ago);
    }
}

#[tokio::test]
async fn without_2pc_loads_are_visible_at_once_under_per_run_labels() {
    let emu = source_support::emu().await;
    setup(&emu, 300, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = student_sync(&emu, StartupMode::Snapshot)
        .two_phase(false)
        .yaml();
    assert_eq!(run(config(&yaml), dir.path()).await.unwrap(), Outcome::Done);
    assert_eq!(
        table(&emu, "sink.student").await,
        table(&emu, "demo.student").await
    );
    let t = txns(&emu).await;
    assert!(!t.is_empty());
    for x in &t {
        assert_eq!(x.state, "VISIBLE", "{x:?}");
        let stem = source_support::label("student-sync", 0, 0);
        let stem = stem.strip_suffix("-0-0").unwrap();
        assert!(
            x.label.starts_with(&format!("{stem}-r")),
            "a run tag after the owner: {x:?}"
        );
    }
    assert!(stored(dir.path()).await.pending_txns.is_empty());
}

#[tokio::test]
async fn changelog_mode_sink_gets_every_event_with_op_tso_and_lsn() {
    let emu = source_support::emu().await;
    setup(&emu, 5, 64).await;
    exec(
        &emu,
        &[
            "CREATE TABLE sink.events (id INT NOT NULL, name VARCHAR(64), score DECIMAL(10,2), \
           updated DATETIME(3), dcs_op VARCHAR(2), dcs_tso BIGINT, dcs_lsn BIGINT) \
           DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
           PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let yaml = student_sync(&emu, StartupMode::Initial)
        .sink_mode(SinkMode::Changelog)
        .ignore_update_before(false)
        .sink_table("sink.events")
        .yaml();
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&yaml);
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    // Let the snapshot finish first, so the changes below come from the changelog.
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle.progress.borrow_and_update().phase != pipeline::Phase::Changelog {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    exec(
        &emu,
        &[
            "UPDATE demo.student SET name = 'changed' WHERE id = 1",
            "DELETE FROM demo.student WHERE id = 2",
        ],
    )
    .await;
    let last = emu.doris.clock.now_ms();
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle
            .progress
            .borrow_and_update()
            .window_end
            .as_ref()
            .is_none_or(|w| w.epoch_ms <= last)
        {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    let events = mysql_rows(
        &emu,
        "SELECT id, name, dcs_op FROM sink.events WHERE dcs_op != '+I' ORDER BY dcs_tso, dcs_lsn",
    )
    .await;
    assert_eq!(
        events,
        vec![
            vec!["1".to_owned(), "student-1".into(), "-U".into()],
            vec!["1".to_owned(), "changed".into(), "+U".into()],
            vec!["2".to_owned(), "student-2".into(), "-D".into()],
        ]
    );
    // Every snapshot row arrived as an insert (the changelog from T0 may repeat some).
    let inserts = mysql_rows(&emu, "SELECT id FROM sink.events WHERE dcs_op = '+I'").await;
    let ids: std::collections::BTreeSet<String> =
        inserts.into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids.len(), 5);
}

#[tokio::test]
async fn a_failure_after_a_checkpoint_is_kept_as_last_error() {
    let emu = source_support::emu().await;
    setup(&emu, 20, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle.progress.borrow_and_update().phase != pipeline::Phase::Changelog {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    emu.doris.faults.set(FaultState {
        stream_load: Some(StreamLoadFault {
            count: 100,
            http_status: None,
            status: Some("Fail".into()),
            message: Some("[DATA_QUALITY_ERROR]injected".into()),
        }),
        ..FaultState::default()
    });
    exec(
        &emu,
        &["INSERT INTO demo.student VALUES (900, 'x', 1.00, NULL)"],
    )
    .await;
    let err = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the runner stops")
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string().contains("[DATA_QUALITY_ERROR]injected"),
        "{err}"
    );
    let cp = stored(dir.path()).await;
    let last = cp.last_error.expect("the error is in the checkpoint");
    assert_eq!(last.reason, "StreamLoadFailed");
    assert!(last.message.contains("injected"), "{}", last.message);
    assert!(matches!(cp.position, Position::Changelog { .. }));
}

/// A source whose DELETE statements write delete predicates (`enable_mow_light_delete`) records
/// none of them in its changelog: an incremental run refuses it before it claims the checkpoint
/// store or reads a row, with the ALTER that fixes it. A snapshot loses nothing and runs.
#[tokio::test]
async fn a_table_whose_deletes_never_reach_the_changelog_is_refused_before_anything_is_read() {
    let emu = source_support::emu().await;
    setup(&emu, 20, 64).await;
    exec(
        &emu,
        &["ALTER TABLE demo.student SET (\"enable_mow_light_delete\" = \"true\")"],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    for mode in [StartupMode::Initial, StartupMode::Latest] {
        let e = run(config(&student_sync(&emu, mode).yaml()), dir.path())
            .await
            .unwrap_err();
        let Error::SourcePrecondition { reason, message } = &e else {
            panic!("{mode}: {e:?}");
        };
        assert_eq!(*reason, "LightDeleteEnabled");
        assert_eq!(e.reason(), "LightDeleteEnabled");
        assert!(
            message.starts_with("table demo.student has \"enable_mow_light_delete\" = \"true\""),
            "{message}"
        );
        assert!(
            message
                .contains("ALTER TABLE demo.student SET (\"enable_mow_light_delete\" = \"false\")"),
            "{message}"
        );
    }
    let mut store = FileStore::open(dir.path()).unwrap();
    assert!(store.load().await.unwrap().is_none(), "no checkpoint saved");
    assert!(table(&emu, "sink.student").await.is_empty());
    assert!(txns(&emu).await.is_empty());
    let snapshot = tempfile::tempdir().unwrap();
    assert_eq!(
        run(
            config(&student_sync(&emu, StartupMode::Snapshot).yaml()),
            snapshot.path()
        )
        .await
        .unwrap(),
        Outcome::Done
    );
    assert_eq!(table(&emu, "sink.student").await.len(), 20);
}

/// The property turned on while a sync streams: deletes from then on are in no changelog. The
/// run stops at the next check of the table (before and after every window), and no window read
/// after the change is committed: a row inserted after it never reaches the sink, and the
/// stored offset stays at or before the change.
#[tokio::test]
async fn light_deletes_turned_on_mid_run_stop_the_run_before_its_window_commits() {
    let emu = source_support::emu().await;
    setup(&emu, 20, 64).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    // Streaming: a changelog window has been read.
    tokio::time::timeout(Duration::from_secs(30), async {
        while handle.progress.borrow_and_update().window_end.is_none() {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the changelog is read");
    let changed_at = emu.doris.clock.now_ms();
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student SET (\"enable_mow_light_delete\" = \"true\")",
            "DELETE FROM demo.student WHERE id = 1",
            &format!("INSERT INTO demo.student VALUES {}", row_values(999)),
        ],
    )
    .await;
    let e = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the run stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(e.reason(), "LightDeleteEnabled", "{e:?}");
    let sink = table(&emu, "sink.student").await;
    assert!(!sink.iter().any(|r| r[0] == "999"), "{sink:?}");
    let cp = stored(dir.path()).await;
    match &cp.position {
        Position::Changelog { offset } => {
            assert!(offset.epoch_ms <= changed_at, "{cp:?} vs {changed_at}");
        }
        other => panic!("{other:?}"),
    }
}
