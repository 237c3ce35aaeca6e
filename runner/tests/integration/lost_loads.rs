//! Pre-committed loads Doris aborts before their commit (a runner down longer than Doris's
//! pre-commit timeout), and checkpoints that hold a bounded number of loads.

use crate::source_support;

use std::path::Path;
use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::engine::{TxnOperation, TxnRef};
use dcs_runner::Error;
use dcs_runner::checkpoint::{Checkpoint, FileStore};
use dcs_runner::pipeline::{self, Control, Outcome};
use dcs_runner::settings::PipelineConfig;
use source_support::{
    config, exec, mysql_rows, spawn_pipeline, spawn_pipeline_with, stored_checkpoint, student_sync,
    window_past,
};

const SOURCE: &str = "CREATE TABLE demo.t (id INT NOT NULL, v VARCHAR(32)) UNIQUE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \
     \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\")";
const UPSERT_SINK: &str = "CREATE TABLE sink.t (id INT NOT NULL, v VARCHAR(32)) UNIQUE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")";
const EVENTS_SINK: &str = "CREATE TABLE sink.t (id INT NOT NULL, v VARCHAR(32), \
     dcs_op VARCHAR(2), dcs_tso BIGINT, dcs_lsn BIGINT) DUPLICATE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")";

/// `demo.t` into `sink.t` on the emulator from `mode`, in `sink_mode`, batches of `max_rows`.
fn sync(
    emu: &RunningEmulator,
    mode: StartupMode,
    sink_mode: SinkMode,
    max_rows: i64,
) -> SyncBuilder {
    student_sync(emu, mode)
        .name("lost-sync")
        .source_table("demo.t")
        .sink_table("sink.t")
        .sink_mode(sink_mode)
        .max_rows(max_rows)
}

async fn setup(emu: &RunningEmulator, sink: &str) {
    exec(
        emu,
        &["CREATE DATABASE demo", "CREATE DATABASE sink", SOURCE, sink],
    )
    .await;
}

fn values(ids: std::ops::Range<u32>, v: &str) -> String {
    ids.map(|i| format!("({i}, '{v}{i}')"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `cfg` (latest mode) until a checkpoint holding pre-committed loads of `rows` changes is
/// saved, and stops it there, before the commit (as a crash would).
async fn crash_between_save_and_commit(
    emu: &RunningEmulator,
    cfg: PipelineConfig,
    dir: &Path,
    changes: &[&str],
) -> Checkpoint {
    let (mut control, mut handle) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let task = spawn_pipeline_with(cfg, dir, control);
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    exec(emu, changes).await;
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the hook stops the run")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Injected { .. }), "{err}");
    stored_checkpoint(dir).await
}

/// Commit some of `cp`'s loads (as the crashed run might have), then let Doris's pre-commit
/// timeout abort the others: returns how many were aborted.
fn commit_some_and_let_the_rest_expire(emu: &RunningEmulator, cp: &Checkpoint) -> usize {
    assert!(cp.pending_txns.len() >= 3, "{:?}", cp.pending_txns);
    for txn in cp.pending_txns.iter().step_by(2) {
        emu.doris
            .engine
            .two_phase("sink", &TxnRef::Id(txn.txn_id), TxnOperation::Commit)
            .unwrap();
    }
    emu.doris
        .engine
        .fe_config
        .set_named("stream_load_default_precommit_timeout_second", "60")
        .unwrap();
    emu.doris.clock.advance_ms(61_000);
    cp.pending_txns.len() / 2
}

async fn run_past_now(emu: &RunningEmulator, cfg: PipelineConfig, dir: &Path) -> Outcome {
    let (task, mut handle) = spawn_pipeline(cfg, dir);
    let now = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, now, Duration::from_secs(60)).await,
        "the restarted run reaches the changelog"
    );
    handle.shutdown.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

/// Into a changelog-mode sink, exactly the rows of the lost loads are loaded again: every event
/// once, though half of the checkpoint's loads had been committed before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_loads_of_a_changelog_sink_are_loaded_again_exactly() {
    let emu = source_support::emu().await;
    setup(&emu, EVENTS_SINK).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&sync(&emu, StartupMode::Latest, SinkMode::Changelog, 50).yaml());
    let insert = format!("INSERT INTO demo.t VALUES {}", values(1..301, "v"));
    let cp = crash_between_save_and_commit(&emu, cfg.clone(), dir.path(), &[&insert]).await;
    let aborted = commit_some_and_let_the_rest_expire(&emu, &cp);
    assert!(aborted > 0);
    exec(&emu, &["UPDATE demo.t SET v = 'later' WHERE id = 7"]).await;
    assert_eq!(run_past_now(&emu, cfg, dir.path()).await, Outcome::Stopped);
    // Each insert once, then the update's two events.
    let mut events = mysql_rows(
        &emu,
        "SELECT id, v, dcs_op FROM sink.t ORDER BY id, dcs_tso, dcs_op",
    )
    .await;
    events.sort();
    let mut expected: Vec<Vec<String>> = (1..301)
        .map(|i| vec![i.to_string(), format!("v{i}"), "+I".to_owned()])
        .collect();
    expected.push(vec!["7".into(), "v7".into(), "-U".into()]);
    expected.push(vec!["7".into(), "later".into(), "+U".into()]);
    expected.sort();
    assert_eq!(events.len(), expected.len());
    assert!(events == expected, "the sink's events differ");
}

/// Into an upsert sink the run goes back to the position before the checkpoint and reads on: the
/// sink equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_loads_of_an_upsert_sink_are_read_again_from_the_checkpoint_before() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&sync(&emu, StartupMode::Latest, SinkMode::Upsert, 50).yaml());
    let insert = format!("INSERT INTO demo.t VALUES {}", values(1..301, "v"));
    let cp = crash_between_save_and_commit(
        &emu,
        cfg.clone(),
        dir.path(),
        &[&insert, "UPDATE demo.t SET v = 'changed' WHERE id < 100"],
    )
    .await;
    commit_some_and_let_the_rest_expire(&emu, &cp);
    assert_eq!(run_past_now(&emu, cfg, dir.path()).await, Outcome::Stopped);
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.t ORDER BY id").await,
        mysql_rows(&emu, "SELECT * FROM demo.t ORDER BY id").await
    );
}

/// Lost snapshot loads of a changelog-mode sink cannot be read again as they were at T0: the run
/// stops as for an expired offset (exit 3), so the operator re-initialises the sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_snapshot_loads_of_a_changelog_sink_stop_with_exit_code_3() {
    let emu = source_support::emu().await;
    setup(&emu, EVENTS_SINK).await;
    exec(
        &emu,
        &[&format!(
            "INSERT INTO demo.t VALUES {}",
            values(1..301, "v")
        )],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&sync(&emu, StartupMode::Initial, SinkMode::Changelog, 50).yaml());
    let mut store = FileStore::open(dir.path()).unwrap();
    let (mut control, _handle) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let err = pipeline::run(cfg.clone(), &mut store, control)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Injected { .. }), "{err}");
    drop(store);
    let cp = stored_checkpoint(dir.path()).await;
    assert!(!cp.pending_txns.is_empty());
    emu.doris
        .engine
        .fe_config
        .set_named("stream_load_default_precommit_timeout_second", "60")
        .unwrap();
    emu.doris.clock.advance_ms(61_000);
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _handle) = Control::new();
    let err = pipeline::run(cfg, &mut store, control).await.unwrap_err();
    assert!(matches!(err, Error::LoadsLost { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
    assert!(
        err.to_string()
            .contains("cannot be read again as they were at T0"),
        "{err}"
    );
}

/// A catch-up window far bigger than a checkpoint may hold (one source transaction of 2,000 rows,
/// loads of 10 rows: 200 loads, all of one second, so no window split helps): checkpoints are
/// taken inside the window whenever 64 loads are open, with Doris refusing more than 70 running
/// transactions in the database; a run dropped after such a checkpoint resumes inside the window,
/// and every event reaches the changelog-mode sink once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_window_is_checkpointed_inside_and_resumed_there_every_event_once() {
    let emu = source_support::emu().await;
    setup(&emu, EVENTS_SINK).await;
    emu.doris
        .engine
        .fe_config
        .set_named("max_running_txn_num_per_db", "70")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&sync(&emu, StartupMode::Latest, SinkMode::Changelog, 10).yaml());
    cfg.checkpoint_interval = Duration::from_secs(600);
    let run_cfg = cfg.clone();
    let path = dir.path().to_path_buf();
    let (control, mut handle) = Control::new();
    let task = tokio::spawn(async move {
        let mut store = FileStore::open(&path).unwrap();
        pipeline::run(run_cfg, &mut store, control).await
    });
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    let first = handle.progress.borrow().checkpoint_id;
    exec(
        &emu,
        &[&format!(
            "INSERT INTO demo.t VALUES {}",
            values(1..2001, "v")
        )],
    )
    .await;
    // Dropped after the second checkpoint inside the window.
    let reached = tokio::time::timeout(Duration::from_secs(120), async {
        while handle.progress.borrow_and_update().checkpoint_id < first + 2 {
            if handle.progress.changed().await.is_err() {
                return false;
            }
        }
        true
    })
    .await
    .expect("checkpoints inside the window");
    if !reached {
        panic!("the run ended: {:?}", task.await);
    }
    task.abort();
    let _ = task.await;
    let cp = stored_checkpoint(dir.path()).await;
    let inside = cp
        .in_window
        .clone()
        .expect("a checkpoint inside the window");
    assert!(inside.rows > 0 && inside.rows < 2000, "{inside:?}");
    assert!(cp.pending_txns.len() <= pipeline::MAX_PENDING_LOADS);
    assert_eq!(run_past_now(&emu, cfg, dir.path()).await, Outcome::Stopped);
    let ids = mysql_rows(&emu, "SELECT id FROM sink.t").await;
    assert_eq!(ids.len(), 2000, "every event once");
    let distinct: std::collections::BTreeSet<&String> = ids.iter().map(|r| &r[0]).collect();
    assert_eq!(distinct.len(), 2000);
}
