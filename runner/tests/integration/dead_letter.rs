//! The dead-letter table (`sink.doris.deadLetter`) through the real runner against doris-emu: a
//! row Doris refuses goes there with its reason and the row, the others into the sink, in the
//! same checkpoint; a stop between the save and the commit neither loses nor doubles it.

use crate::source_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use dcs_crds::StartupMode;
use dcs_crds::testing::SyncBuilder;
use dcs_runner::checkpoint::{CheckpointStore, FileStore};
use dcs_runner::error::Error;
use dcs_runner::pipeline::{self, Control};
use source_support::process::Files;
use source_support::{config, exec, mysql_rows, student_sync};

const DEAD_LETTER: &str = "sink.student_rejected";

/// The student sync with the dead-letter table [`DEAD_LETTER`].
fn with_dead_letter(emu: &dcs_doris_emu::RunningEmulator, mode: StartupMode) -> SyncBuilder {
    student_sync(emu, mode).dead_letter(DEAD_LETTER)
}

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
    let out = runner(
        dir.path(),
        with_dead_letter(&emu, StartupMode::Snapshot).yaml(),
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
    assert_eq!(dead_letters(&emu).await, the_refused_row());
    let cp = FileStore::open(dir.path().join("cp"))
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
    let yaml = with_dead_letter(&emu, StartupMode::Snapshot).yaml();
    let mut store = FileStore::open(dir.path().join("cp")).unwrap();
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
    let out = runner(
        dir.path(),
        with_dead_letter(&emu, StartupMode::Snapshot).yaml(),
    )
    .await;
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
        student_sync(&emu, StartupMode::Snapshot)
            .dead_letter("sink.student")
            .yaml(),
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

/// The 2PC commits of loads whose label contains `label_part` (all with "") the emulator refuses
/// from now on (503); `None` clears the fault.
fn refuse_commits_of(emu: &dcs_doris_emu::RunningEmulator, label_part: Option<&str>) {
    emu.doris.faults.update(|f| {
        f.commit_label_contains = label_part.filter(|p| !p.is_empty()).map(str::to_owned);
        f.commit = label_part.map(|_| dcs_doris_emu::faults::StreamLoadFault {
            count: u32::MAX,
            http_status: Some(503),
            status: None,
            message: Some("injected: the sink FE is down".into()),
        });
    });
}

/// SIGKILLs of the real binary at the two points where the sink's load and the dead-letter load
/// could part: after the checkpoint recording both is saved, before either is committed; and in
/// the restart's recovery, after the sink's load is committed, before the dead-letter load is.
/// The next start commits what is left: the sink rows once, the refused row once.
#[tokio::test]
async fn kills_between_save_commit_and_recovery_neither_lose_nor_double_a_refused_row() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    // Commits are retried long enough for the kills to find the runner still committing.
    let files = Files::new(
        &with_dead_letter(&emu, StartupMode::Snapshot)
            .max_retries(20)
            .yaml(),
    );

    // 1. Saved, not committed.
    refuse_commits_of(&emu, Some(""));
    let mut runner = files.start();
    files
        .wait_checkpoint(
            &mut runner,
            "a checkpoint holding a dead-letter load",
            |c| {
                c["pendingTxns"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["deadLetter"] == true))
            },
        )
        .await;
    runner.sigkill();
    let saved = files.checkpoint().unwrap();
    let txns = saved["pendingTxns"].as_array().unwrap();
    assert_eq!(
        txns.iter()
            .map(|t| t["deadLetter"].as_bool().unwrap_or(false))
            .collect::<Vec<_>>(),
        [false, true],
        "{saved}"
    );
    assert!(sink_rows(&emu).await.is_empty());
    assert!(dead_letters(&emu).await.is_empty());

    // 2. The restart commits the sink's load, then is killed before the dead-letter load's.
    let dead_label = txns[1]["label"].as_str().unwrap().to_owned();
    refuse_commits_of(&emu, Some(&dead_label));
    let mut runner = files.start();
    let start = Instant::now();
    while sink_rows(&emu).await.is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sink's load was not committed\n{}",
            files.logs()
        );
        assert!(runner.exited().is_none(), "{}", files.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    runner.sigkill();
    assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
    assert!(dead_letters(&emu).await.is_empty());

    // 3. The next start commits the dead-letter load; one more changes nothing.
    refuse_commits_of(&emu, None);
    for _ in 0..2 {
        let mut runner = files.start();
        assert_eq!(
            runner.wait_exit(Duration::from_secs(60)).await,
            Some(0),
            "{}",
            files.logs()
        );
        assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
        assert_eq!(dead_letters(&emu).await, the_refused_row());
    }
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["counters"]["rowsRejected"], 1, "{cp}");
    assert_eq!(cp["counters"]["rowsWritten"], 2, "{cp}");
}

/// An upsert sink in the changelog phase: an update that sets the NOT NULL name to NULL is refused
/// and goes to the dead-letter table as the change it was (its op, TSO and LSN), while the sink
/// keeps the row as it was; the snapshot row refused before carries the snapshot's TSO.
#[tokio::test]
async fn a_refused_change_keeps_its_position_in_the_dead_letter_table() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    // An existing dead-letter table that fits: ours, with a nullable column of its own.
    exec(
        &emu,
        &[
            "CREATE TABLE sink.student_rejected (rejected_at DATETIME(6) NOT NULL, \
           source_table VARCHAR(256) NOT NULL, sink_table VARCHAR(256) NOT NULL, tso BIGINT, \
           lsn BIGINT, op VARCHAR(8), load_label VARCHAR(128) NOT NULL, reason STRING NOT NULL, \
           row_json STRING NOT NULL, triaged BOOLEAN) DUPLICATE KEY(rejected_at) \
           DISTRIBUTED BY HASH(rejected_at) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (task, handle) = source_support::spawn_pipeline(
        config(&with_dead_letter(&emu, StartupMode::Initial).yaml()),
        dir.path(),
    );
    let wait_for = |n: usize| {
        let emu = &emu;
        async move {
            let start = Instant::now();
            loop {
                let rows = mysql_rows(
                    emu,
                    "SELECT op, tso, lsn, row_json FROM sink.student_rejected ORDER BY tso",
                )
                .await;
                if rows.len() >= n {
                    return rows;
                }
                assert!(start.elapsed() < Duration::from_secs(60), "{rows:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let snapshot = wait_for(1).await;
    exec(&emu, &["UPDATE demo.student SET name = NULL WHERE id = 3"]).await;
    let rows = wait_for(2).await;
    handle.shutdown.send(true).unwrap();
    task.await.unwrap().unwrap();
    let cp = source_support::stored_checkpoint(dir.path()).await;
    let t0 = cp.start_point.as_ref().expect("T0").tso;
    assert_eq!(rows[0], snapshot[0]);
    assert_eq!(
        rows[0],
        [
            "+I".to_owned(),
            t0.to_string(),
            "0".into(),
            r#"{"id":2,"name":null,"__DORIS_DELETE_SIGN__":0}"#.into()
        ]
    );
    let changes = mysql_rows(
        &emu,
        &format!(
            "SELECT id, __DORIS_BINLOG_OP__, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__ \
             FROM demo.student@incr('startTimestamp' = '{}', 'incrementType' = 'DETAIL')",
            cp.start_point.as_ref().map_or("", |p| p.timestamp.as_str())
        ),
    )
    .await;
    // The update, as the changelog of a table without historical values shows it: an upsert.
    let update: Vec<&Vec<String>> = changes
        .iter()
        .filter(|r| r[0] == "3" && r[2].parse::<i64>().unwrap() > t0)
        .collect();
    assert_eq!(update.len(), 1, "{changes:?}");
    let op = ["+I", "-D", "-U", "+U"][update[0][1].parse::<usize>().unwrap()];
    assert_eq!(
        rows[1],
        [
            op.to_owned(),
            update[0][2].clone(),
            update[0][3].clone(),
            r#"{"id":3,"name":null,"__DORIS_DELETE_SIGN__":0}"#.into()
        ]
    );
    assert_eq!(sink_rows(&emu).await, [["1", "ann"], ["3", "cy"]]);
    assert_eq!(cp.counters.rows_rejected, 2);
}

/// More refused rows in one load than Doris's error log lists (50): they cannot be told apart for
/// certain, so the sync stops as without a dead-letter table, saying why, and nothing of the batch
/// is written anywhere. (A text too long for its column, which Doris logs without the row, is
/// refused before any load by the start's type check, and by `dead_letter::identify` otherwise.)
#[tokio::test]
async fn more_refused_rows_than_doris_lists_stop_the_sync() {
    let emu = source_support::emu().await;
    let values = (1..=60)
        .map(|i| format!("({i}, NULL)"))
        .collect::<Vec<_>>()
        .join(", ");
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(16)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\")",
            &format!("INSERT INTO demo.student VALUES {values}"),
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(48) NOT NULL) \
             UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _h) = Control::new();
    let cfg = config(&with_dead_letter(&emu, StartupMode::Snapshot).yaml());
    let msg = pipeline::run(cfg, &mut store, control)
        .await
        .unwrap_err()
        .to_string();
    assert!(msg.contains("rejected 60 of 60 rows"), "{msg}");
    assert!(
        msg.ends_with(
            "; the refused rows were not written into the dead-letter table: Doris's error log \
             lists 50 of the 60 refused rows"
        ),
        "{msg}"
    );
    assert!(sink_rows(&emu).await.is_empty());
    assert!(dead_letters(&emu).await.is_empty());
}
