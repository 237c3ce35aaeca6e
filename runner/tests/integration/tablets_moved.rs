//! Tablets that move under a snapshot (docs/ARCHITECTURE.md §3.2): a TRUNCATE gives the table
//! new tablets, and Doris reads a tablet id it no longer holds as no rows, without an error. A
//! snapshot that planned the old tablets stops with exit 5 (`SnapshotTabletsChanged`, which the
//! operator answers by reading the snapshot again under a new consumer) instead of calling a
//! partial or doubled read a snapshot:
//!
//! - the TRUNCATE lands while the first splits are being read: the later splits read the old
//!   tablet ids as empty, and the check at the snapshot's end finds them gone;
//! - a runner stopped mid-snapshot restarts after the TRUNCATE: its done tablets match nothing,
//!   and it stops before reading anything again (it used to read everything again, doubling rows
//!   in a changelog-mode sink);
//! - two shards plan at different moments around the TRUNCATE: each reads "its" tablets, and the
//!   hand-over refuses to start the changelog on sets that differ.

use crate::source_support;

use std::time::{Duration, Instant};

use dcs_crds::StartupMode;
use dcs_crds::shard::{handover, shard_dir_name};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::SqlStall;
use dcs_runner::checkpoint::{CheckpointStore, Position};
use dcs_runner::pipeline::{Control, Outcome};
use dcs_runner::source::tso::{self, NowOffsets as _};
use source_support::{
    STUDENT_UPSERT_SINK_DDL, config, exec, http, row_values, settings, sharded_sync,
    spawn_pipeline, spawn_pipeline_with, stored_checkpoint, student_sync,
};

/// `demo.student` with 8 tablets and `rows` rows, and an upsert sink.
async fn setup(emu: &RunningEmulator, rows: u32) {
    source_support::student_tables(emu, 8, STUDENT_UPSERT_SINK_DDL, rows).await;
}

/// TRUNCATE, then a few rows into the new tablets.
async fn truncate_and_refill(emu: &RunningEmulator) {
    exec(
        emu,
        &[
            "TRUNCATE TABLE demo.student",
            &format!(
                "INSERT INTO demo.student VALUES {}",
                (90_001..=90_010)
                    .map(row_values)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ],
    )
    .await;
}

fn assert_tablets_changed(err: &dcs_runner::Error) {
    assert_eq!(err.exit_code(), 5, "{err}");
    assert_eq!(err.reason(), "SnapshotTabletsChanged");
    let text = err.to_string();
    assert!(
        text.starts_with("the table's tablets changed during the snapshot (")
            && text.contains(" of the 8 tablets the snapshot planned are gone (")
            && text.ends_with("the snapshot is read again under a new consumer"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncate_while_the_snapshot_reads_stops_it_with_exit_5() {
    let emu = source_support::emu().await;
    setup(&emu, 4_000).await;
    // The first splits' statements run, and their answers are held until the TRUNCATE is done.
    let stall = SqlStall {
        contains: " TABLET(".into(),
        applied: true,
    };
    emu.doris.faults.update(|f| f.sql_stall = Some(stall));
    let dir = tempfile::tempdir().unwrap();
    let (task, _handle) = spawn_pipeline(
        config(&student_sync(&emu, StartupMode::Initial).yaml()),
        dir.path(),
    );
    let start = Instant::now();
    while emu.doris.counters.get("sql_stalled") == 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "no split read");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    truncate_and_refill(&emu).await;
    emu.doris.faults.update(|f| f.sql_stall = None);
    let err = tokio::time::timeout(Duration::from_secs(120), task)
        .await
        .expect("the run stops")
        .unwrap()
        .unwrap_err();
    assert_tablets_changed(&err);
    let cp = stored_checkpoint(dir.path()).await;
    assert!(
        matches!(cp.position, Position::Snapshot { .. }),
        "never taken for a finished snapshot: {:?}",
        cp.position
    );
    let stopped = cp.stopped.expect("the stop is recorded for the operator");
    assert_eq!(
        (stopped.reason.as_str(), stopped.exit_code),
        ("SnapshotTabletsChanged", 5)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_the_tablets_moved_reads_nothing_again() {
    let emu = source_support::emu().await;
    setup(&emu, 20_000).await;
    let mut cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    cfg.checkpoint_interval = Duration::from_millis(5);
    let dir = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn_pipeline(cfg.clone(), dir.path());
    tokio::time::timeout(Duration::from_secs(60), async {
        while handle.progress.borrow_and_update().tablets_done == 0 {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("a tablet done");
    handle.shutdown.send(true).unwrap();
    let outcome = task.await.unwrap().unwrap();
    assert_eq!(outcome, Outcome::Stopped);
    let before = stored_checkpoint(dir.path()).await;
    assert!(
        matches!(before.position, Position::Snapshot { .. }),
        "stopped mid-snapshot: {:?}",
        before.position
    );
    assert_eq!(
        before
            .snapshot_tablets
            .as_deref()
            .map(dcs_crds::tablets::count),
        Some(8)
    );
    truncate_and_refill(&emu).await;
    let (task, _handle) = spawn_pipeline(cfg, dir.path());
    let err = task.await.unwrap().unwrap_err();
    assert_tablets_changed(&err);
    let after = stored_checkpoint(dir.path()).await;
    assert_eq!(
        after.counters.rows_read, before.counters.rows_read,
        "nothing read again"
    );
    assert_eq!(
        after.counters.loads, before.counters.loads,
        "nothing loaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_that_planned_around_a_truncate_never_hand_over() {
    let emu = source_support::emu().await;
    setup(&emu, 2_000).await;
    let t0 = tso::current(&http(settings(&emu, "demo.student")))
        .await
        .unwrap()
        .start_point();
    let yaml = sharded_sync(&emu, &t0, 2).yaml();
    let root = tempfile::tempdir().unwrap();
    let run_shard = |index: u32| {
        let mut c = config(&yaml);
        c.assign_shard(index).unwrap();
        spawn_pipeline_with(
            c,
            &root.path().join(shard_dir_name(index)),
            Control::new().0,
        )
    };
    assert_eq!(run_shard(0).await.unwrap().unwrap(), Outcome::Done);
    truncate_and_refill(&emu).await;
    // Shard 1 plans the new tablets, reads "its" half of them and is done.
    assert_eq!(run_shard(1).await.unwrap().unwrap(), Outcome::Done);
    let mut cps = Vec::new();
    for i in 0..2 {
        let mut store =
            dcs_runner::checkpoint::ReadOnlyDir::new(&root.path().join(shard_dir_name(i)));
        cps.push(store.load().await.unwrap());
    }
    let why = handover(&cps, "student-sync", 2, t0.tso).unwrap_err();
    assert!(
        why.starts_with("the table's tablets changed during the snapshot (shards 0 and 1 of 2: they planned 8 and 8 tablets; tablet "),
        "{why}"
    );
    assert_eq!(dcs_crds::shard::tablets_moved(&cps, 2), Some(why.clone()));
    // The changelog run refuses to start from T0 on it.
    let (mut control, _handle) = Control::new();
    control.shards_done = Some(Err(why));
    let dir = tempfile::tempdir().unwrap();
    let refused = spawn_pipeline_with(config(&yaml), dir.path(), control)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.reason(), "SnapshotShardsNotDone");
}
