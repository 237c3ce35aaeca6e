//! Exactly once into a DUPLICATE KEY changelog-mode sink with 2PC when the run dies in the middle
//! of the snapshot: checkpoints there hold whole splits only (`pipeline::boundaries`), so after a
//! restart the half-read splits' loads are aborted and the splits read again, once.
//!
//! The run is dropped (as a SIGKILL would end it) while splits are half-loaded, with a checkpoint
//! interval far shorter than a split so that, without the rule, a checkpoint would record half a
//! split; a second run is stopped gracefully in the snapshot too; a third finishes the snapshot
//! and reads the changelog.

use crate::source_support;

use std::time::Duration;

use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::pipeline::{Outcome, Phase};
use dcs_runner::settings::PipelineConfig;
use source_support::{
    Rng, SOURCE_DDL, STUDENT_EVENTS_SINK_DDL, config, exec, expected_student_events, mysql_rows,
    row_values, seed, spawn_pipeline, stored_checkpoint, student_sync, window_past,
};

/// Three Flight batches per split (4 tablets), so the splits read at once interleave in the
/// pipeline and a split can end while another is half-loaded (without the rule, a checkpoint then
/// records half a split: 8192 duplicate rows).
const ROWS: u32 = 40_000;

async fn setup(emu: &RunningEmulator) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            STUDENT_EVENTS_SINK_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=ROWS).map(row_values).collect();
    for chunk in values.chunks(2000) {
        let sql = format!("INSERT INTO demo.student VALUES {}", chunk.join(", "));
        exec(emu, &[&sql]).await;
    }
}

fn sync_config(emu: &RunningEmulator) -> PipelineConfig {
    let mut cfg = config(
        &student_sync(emu, StartupMode::Initial)
            .sink_mode(SinkMode::Changelog)
            .yaml(),
    );
    cfg.checkpoint_interval = Duration::from_millis(5);
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_mid_snapshot_leaves_every_snapshot_row_once_in_a_changelog_sink() {
    let emu = source_support::emu().await;
    setup(&emu).await;
    let snapshot = mysql_rows(&emu, "SELECT * FROM demo.student").await;
    let dir = tempfile::tempdir().unwrap();
    let wait = Duration::from_secs(60);

    // First run: dropped once some rows of a split are loaded and a later split is under way.
    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    tokio::time::timeout(wait, async {
        loop {
            let p = handle.progress.borrow_and_update().clone();
            assert_ne!(
                p.phase,
                Phase::Changelog,
                "the snapshot ended before the drop"
            );
            if p.tablets_done >= 2 {
                break;
            }
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("snapshot progress");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let dropped_at = stored_checkpoint(dir.path()).await;
    assert!(
        matches!(
            dropped_at.position,
            dcs_runner::checkpoint::Position::Snapshot { .. }
        ),
        "{:?}",
        dropped_at.position
    );

    // Second run: stopped gracefully while the last splits are read; a half-loaded split is not
    // checkpointed (its loads are aborted), a finished one is.
    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    tokio::time::timeout(wait, async {
        while handle.progress.borrow_and_update().tablets_done < 3 {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("snapshot progress");
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(wait, task).await.unwrap().unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);

    // Third run: finishes the snapshot, reads the changelog past now, stops.
    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, now, wait).await,
        "the second run reaches the changelog"
    );
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(wait, task).await.unwrap().unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);

    assert_every_event_once(&emu, dir.path(), snapshot).await;
}

/// Drops the run again and again at seeded random points of the snapshot (after a random number
/// of progress updates: batches, loads, checkpoints), each time restarting from what it saved,
/// then finishes: every interleaving of a drop with the loads and checkpoints in flight must
/// leave every snapshot row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_dropped_at_random_points_of_the_snapshot_leave_every_row_once() {
    let seed = seed("whole_splits::random_drops");
    let mut rng = Rng(seed);
    let emu = source_support::emu().await;
    setup(&emu).await;
    let snapshot = mysql_rows(&emu, "SELECT * FROM demo.student").await;
    let dir = tempfile::tempdir().unwrap();
    let wait = Duration::from_secs(60);
    for _ in 0..12 {
        let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
        let updates = rng.range(1, 400);
        let reached_changelog = tokio::time::timeout(wait, async {
            for _ in 0..updates {
                if handle.progress.changed().await.is_err() {
                    break;
                }
                if handle.progress.borrow().phase == Phase::Changelog {
                    return true;
                }
            }
            false
        })
        .await
        .expect("progress");
        task.abort();
        let _ = task.await;
        if reached_changelog {
            break;
        }
    }
    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, wait).await, "seed {seed}");
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(wait, task).await.unwrap().unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);
    assert_every_event_once(&emu, dir.path(), snapshot).await;
}

/// The sink holds every snapshot row once (as an insert at T0) and every changelog event since T0
/// once, and no load is left pre-committed.
async fn assert_every_event_once(
    emu: &RunningEmulator,
    dir: &std::path::Path,
    snapshot: Vec<Vec<String>>,
) {
    let cp = stored_checkpoint(dir).await;
    let expected = expected_student_events(emu, snapshot, &cp).await;
    let mut sink = mysql_rows(emu, "SELECT * FROM sink.student").await;
    sink.sort();
    let snapshot_rows = sink
        .iter()
        .filter(|r| r[4] == "+I" && r[5] == cp.start_point.as_ref().unwrap().tso.to_string())
        .count();
    assert_eq!(snapshot_rows, ROWS as usize, "every snapshot row once");
    assert_eq!(sink.len(), expected.len());
    assert!(
        sink == expected,
        "the sink's events differ from the source's"
    );
    // Nothing is left pre-committed.
    let txns: Vec<serde_json::Value> = source_support::emu_txns(emu).await;
    assert!(
        txns.iter()
            .all(|t| t["state"] == "VISIBLE" || t["state"] == "ABORTED"),
        "{txns:?}"
    );
}

/// The race behind a duplicated split (2,000 snapshot rows twice, now and then): a dropped run's
/// Stream Load is still on its way when the next run starts, and lands, pre-committed under the
/// dropped run's label, after the next run swept that run's labels. A next run that loaded under
/// the same labels again would find it "already pre-committed", take it for its own and commit
/// the dropped run's batch instead of its own: rows twice and rows lost. The interleaving is
/// forced here: once the second run has started, a load under the dropped run's next label
/// lands, holding rows the snapshot also writes. It must never be committed (the second run
/// loads under its own checkpoint id, and sweeps the dropped run's labels again when it stops).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_of_a_dropped_run_that_lands_after_the_next_run_started_is_never_committed() {
    use dcs_doris_client::stream_load::{LoadOutcome, LoadRequest, StreamLoadClient};

    let emu = source_support::emu().await;
    setup(&emu).await;
    let snapshot = mysql_rows(&emu, "SELECT * FROM demo.student").await;
    let dir = tempfile::tempdir().unwrap();
    let wait = Duration::from_secs(120);

    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    tokio::time::timeout(wait, async {
        while handle.progress.borrow_and_update().tablets_done < 1 {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("snapshot progress");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let saved = stored_checkpoint(dir.path()).await;
    let t0 = saved.start_point.clone().expect("T0").tso;
    // The dropped run's label for load 0 of the checkpoint after the saved one: one of its own
    // labels (`…-<checkpoint id>-<seq>`) with that id.
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    let own = txns[0]["label"].as_str().unwrap().to_owned();
    let mut parts: Vec<&str> = own.rsplitn(3, '-').collect();
    parts.reverse();
    let ghost_label = format!("{}-{}-0", parts[0], saved.checkpoint_id + 1);

    let (task, mut handle) = spawn_pipeline(sync_config(&emu), dir.path());
    // The second run is under way (it has swept, saved its own checkpoint and read rows) when
    // the late load lands.
    tokio::time::timeout(wait, async {
        loop {
            let p = handle.progress.borrow_and_update().clone();
            if p.checkpoint_id > saved.checkpoint_id && p.snapshot_rows_read > 0 {
                break;
            }
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the second run loads");
    let body: String = (1..=100)
        .map(|id| {
            format!(
                "{{\"id\":{id},\"name\":\"late\",\"score\":1.00,\"updated\":\"2026-11-01 10:00:00.000\",\"dcs_op\":\"+I\",\"dcs_tso\":{t0},\"dcs_lsn\":0}}\n"
            )
        })
        .collect();
    let client = StreamLoadClient::new(
        vec![emu.fe_http_addr()],
        vec![],
        "root".into(),
        String::new(),
        Duration::from_secs(10),
    );
    let ghost = LoadRequest {
        db: "sink".into(),
        table: "student".into(),
        label: ghost_label.clone(),
        headers: vec![
            ("format".into(), "json".into()),
            ("read_json_by_line".into(), "true".into()),
            ("two_phase_commit".into(), "true".into()),
        ],
        body: body.into(),
    };
    let ghost_txn = match client.load_once(&ghost, 0).await {
        LoadOutcome::Loaded(report) => report.txn_id,
        other => panic!("the late load is not pre-committed under {ghost_label}: {other:?}"),
    };

    let now = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, now, wait).await,
        "the second run reaches the changelog"
    );
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(wait, task).await.unwrap().unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    // The dropped run may have begun a load under the same label before it was dropped (its
    // next checkpoint's first load): the second run aborted that one too. Nothing under the
    // label is committed, the late load included.
    let late: Vec<&serde_json::Value> = txns.iter().filter(|t| t["label"] == ghost_label).collect();
    assert!(
        late.iter().any(|t| t["txn_id"] == ghost_txn),
        "the late load {ghost_txn} is not among {late:?}"
    );
    assert!(
        late.iter().all(|t| t["state"] == "ABORTED"),
        "a load under {ghost_label} was committed: {late:?}"
    );
    assert_every_event_once(&emu, dir.path(), snapshot).await;
}
