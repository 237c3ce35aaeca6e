//! A snapshot read by four shards (`spec.snapshot.parallelism: 4`, docs/ARCHITECTURE.md §3.13):
//! each shard reads its own tablets at one T0 under its own consumer id, labels and checkpoint,
//! and stops done; the changelog run starts from T0 only once every shard's checkpoint says so.
//!
//! - Into a DUPLICATE KEY changelog-mode sink with 2PC (where a row loaded twice shows): shards
//!   stopped between a checkpoint's save and its commit, dropped between loads and the checkpoint
//!   that would hold them, restarted alone after the others finished, in any order; the sink then
//!   holds every source row exactly once, and the changelog run from T0 adds exactly the changes
//!   made after T0 (during the snapshot and the hand-over).
//! - The `dcs-runner run --shard i` processes, SIGKILLed at seeded random points and restarted
//!   alone while a writer changes the source, into a UNIQUE KEY upsert sink, one shard's last
//!   commit refused past its retries (doris-emu refusing that shard's commits once its last split
//!   is read: it is not done, and the changelog run refuses to start, until its restart commits);
//!   then `run` without `--shard` reads the changelog from T0: the sink equals the source row for
//!   row.
//! - "Done means committed", each ordering alone: a shard killed between saving its last loads and
//!   committing them, a slow sink, a commit refused past the retries.
//! - Tablets moved under the shards: `tablets_moved.rs`.

use crate::source_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dcs_crds::SinkMode;
use dcs_crds::shard::{SNAPSHOT_T0_ANNOTATION, ShardState, handover, shard_dir_name};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::checkpoint::{Checkpoint, CheckpointStore, Offset, Position};
use dcs_runner::pipeline::{Control, Outcome, Phase};
use dcs_runner::settings::PipelineConfig;
use source_support::process::Runner;
use source_support::{
    Rng, STUDENT_EVENTS_SINK_DDL, config, exec, expected_student_events, mysql_rows, read_json,
    row_diff, row_values, seed, sharded_sync, spawn_pipeline, spawn_pipeline_with,
    stored_checkpoint, take_t0, window_past, writer,
};

const SHARDS: u32 = 4;

/// `demo.student` with 8 tablets (two per shard), `rows` rows, and the sink table `sink_ddl`.
async fn setup(emu: &RunningEmulator, sink_ddl: &str, rows: u32) {
    source_support::student_tables(emu, 8, sink_ddl, rows).await;
}

/// The configuration of shard `index` (checkpoints every few ms, so they land inside shards).
fn shard_config(yaml: &str, index: u32) -> PipelineConfig {
    let mut c = config(yaml);
    c.checkpoint_interval = Duration::from_millis(5);
    c.assign_shard(index).unwrap();
    c
}

fn shard_dir(root: &Path, index: u32) -> PathBuf {
    root.join(shard_dir_name(index))
}

/// What every shard's store says, as the changelog run reads it.
async fn shards_done(root: &Path, t0: &Offset) -> Result<(), String> {
    let mut cps = Vec::new();
    for i in 0..SHARDS {
        let mut store = dcs_runner::checkpoint::ReadOnlyDir::new(&shard_dir(root, i));
        cps.push(store.load().await.unwrap());
    }
    handover(&cps, "student-sync", SHARDS, t0.tso)
}

/// Run shard `index` to its end and return the outcome.
async fn run_shard(yaml: &str, root: &Path, index: u32) -> dcs_runner::Result<Outcome> {
    let (task, _handle) = spawn_pipeline(shard_config(yaml, index), &shard_dir(root, index));
    tokio::time::timeout(Duration::from_secs(120), task)
        .await
        .expect("the shard ends")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_shards_killed_and_restarted_alone_load_every_row_once_and_the_changelog_follows_from_t0()
 {
    const ROWS: u32 = 20_000;
    let emu = source_support::emu().await;
    setup(&emu, STUDENT_EVENTS_SINK_DDL, ROWS).await;
    let snapshot = mysql_rows(&emu, "SELECT * FROM demo.student").await;
    let t0 = take_t0(&emu).await;
    let sync = sharded_sync(&emu, &t0, SHARDS).sink_mode(SinkMode::Changelog);
    let yaml = sync.yaml();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();

    // Shard 0 stops right after saving a checkpoint with pre-committed loads, before committing
    // them (a kill between save and commit).
    let (mut control, _handle) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let task = spawn_pipeline_with(shard_config(&yaml, 0), &shard_dir(root, 0), control);
    let stopped = task.await.unwrap().unwrap_err();
    assert!(
        matches!(stopped, dcs_runner::Error::Injected { .. }),
        "{stopped}"
    );
    let saved = stored_checkpoint(&shard_dir(root, 0)).await;
    assert_eq!(saved.consumer_id, "student-sync-s0-of-4");
    assert!(!saved.pending_txns.is_empty(), "{saved:?}");
    assert!(
        saved
            .pending_txns
            .iter()
            .all(|t| t.label.starts_with("dcs-student-sync-s0-of-4-")),
        "shard 0's labels are its own: {:?}",
        saved.pending_txns
    );

    // Shard 1 is dropped (as SIGKILL ends it) once loads are pre-committed that no checkpoint
    // holds yet, or only some of them.
    let (task, mut handle) = spawn_pipeline(shard_config(&yaml, 1), &shard_dir(root, 1));
    tokio::time::timeout(Duration::from_secs(60), async {
        while handle.progress.borrow_and_update().counters.loads < 5 {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("shard 1 loads");
    task.abort();
    let _ = task.await;

    // Shard 3 finishes while 0 and 1 are down and 2 has not started.
    assert_eq!(run_shard(&yaml, root, 3).await.unwrap(), Outcome::Done);

    // The changelog cannot start yet, and says which shards it waits for.
    let verdict = shards_done(root, &t0).await;
    let waiting = verdict.clone().unwrap_err();
    assert!(
        waiting.starts_with("shard 0 of 4: reading, ")
            && waiting.ends_with("shard 2 of 4: not started"),
        "{waiting}"
    );
    let (mut control, _handle) = Control::new();
    control.shards_done = Some(verdict);
    let early = tempfile::tempdir().unwrap();
    let refused = spawn_pipeline_with(config(&yaml), early.path(), control)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "the changelog starts from T0 once all 4 snapshot shards are done, and they are not: {waiting}"
        )
    );
    assert_eq!(refused.exit_code(), 1);

    // Shard 2 runs, then shards 1 and 0 restart alone, after the others finished; each settles
    // its own pre-committed loads (0 commits its saved ones, 1 aborts its unsaved ones).
    for index in [2, 1, 0] {
        assert_eq!(run_shard(&yaml, root, index).await.unwrap(), Outcome::Done);
    }
    for i in 0..SHARDS {
        let cp = stored_checkpoint(&shard_dir(root, i)).await;
        assert_eq!(cp.position, Position::Done, "shard {i}");
        assert_eq!(cp.start_point.as_ref().map(|o| o.tso), Some(t0.tso));
        assert!(cp.counters.loads > 0, "shard {i} loaded rows");
    }
    // A shard run again once done has nothing to do.
    assert_eq!(run_shard(&yaml, root, 2).await.unwrap(), Outcome::Done);

    // Every source row once, as an insert at T0.
    let mut expected_snapshot: Vec<Vec<String>> = snapshot
        .iter()
        .cloned()
        .map(|mut r| {
            r.extend(["+I".to_owned(), t0.tso.to_string(), "0".to_owned()]);
            r
        })
        .collect();
    expected_snapshot.sort();
    let mut sink = mysql_rows(&emu, "SELECT * FROM sink.student").await;
    sink.sort();
    assert!(
        sink == expected_snapshot,
        "{}",
        row_diff(&expected_snapshot, &sink)
    );

    // Changes after T0, before the changelog run starts; then it reads them from T0.
    exec(
        &emu,
        &[
            "UPDATE demo.student SET name = 'changed' WHERE id = 7",
            "DELETE FROM demo.student WHERE id = 8",
            &format!("INSERT INTO demo.student VALUES {}", row_values(ROWS + 1)),
        ],
    )
    .await;
    let last_write = emu.doris.clock.now_ms();
    let changelog_dir = tempfile::tempdir().unwrap();
    let (mut control, mut handle) = Control::new();
    control.shards_done = Some(shards_done(root, &t0).await);
    assert_eq!(control.shards_done, Some(Ok(())));
    let task = spawn_pipeline_with(config(&yaml), changelog_dir.path(), control);
    assert!(
        window_past(&mut handle, last_write, Duration::from_secs(60)).await,
        "the changelog run reads past the last write"
    );
    assert_eq!(handle.progress.borrow().phase, Phase::Changelog);
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    // Restarted, the changelog run goes on from its own checkpoint: the hand-over is not asked
    // again, nor T0 (the annotation is gone here).
    let no_t0 = sync
        .remove_annotation(SNAPSHOT_T0_ANNOTATION)
        .annotation("note", "restarted")
        .yaml();
    assert_ne!(no_t0, yaml);
    let (task, mut handle) = spawn_pipeline(config(&no_t0), changelog_dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, now, Duration::from_secs(60)).await,
        "the restarted changelog run reads on"
    );
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    let cp: Checkpoint = stored_checkpoint(changelog_dir.path()).await;
    assert_eq!(cp.consumer_id, "student-sync");
    assert_eq!(cp.start_point.as_ref(), Some(&t0));
    let expected = expected_student_events(&emu, snapshot, &cp).await;
    assert_eq!(expected.len(), ROWS as usize + 4, "+U/-U, -D, +I after T0");
    let mut sink = mysql_rows(&emu, "SELECT * FROM sink.student").await;
    sink.sort();
    assert!(sink == expected, "{}", row_diff(&expected, &sink));
    // Nothing is left pre-committed.
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    assert!(
        txns.iter()
            .all(|t| t["state"] == "VISIBLE" || t["state"] == "ABORTED"),
        "{txns:?}"
    );
}

/// The configuration of shard `index` checkpointing only when its split is done, with the sink's
/// retries as given.
fn one_checkpoint(yaml: &str, index: u32, max_retries: u32) -> PipelineConfig {
    let mut c = shard_config(yaml, index);
    c.checkpoint_interval = Duration::from_secs(3600);
    if let dcs_runner::settings::SinkConfig::Doris(d) = &mut c.sink {
        d.max_retries = max_retries;
    }
    c
}

/// The 2PC commits the emulator refuses from now on (503), until cleared.
fn refuse_commits(emu: &RunningEmulator, refuse: bool) {
    refuse_commits_of(emu, refuse.then_some(""));
}

/// The 2PC commits of loads whose label contains `label_part` the emulator refuses from now on
/// (503); `None` clears the fault.
fn refuse_commits_of(emu: &RunningEmulator, label_part: Option<&str>) {
    let refuse = label_part.is_some();
    emu.doris.faults.update(|f| {
        f.commit_label_contains = label_part.filter(|p| !p.is_empty()).map(str::to_owned);
        f.commit = refuse.then(|| dcs_doris_emu::faults::StreamLoadFault {
            count: u32::MAX,
            http_status: Some(503),
            status: None,
            message: Some("injected: the sink FE is down".into()),
        });
    });
}

/// Shard `index`'s saved checkpoint, read as the changelog run reads it.
async fn shard_checkpoint(root: &Path, index: u32) -> Option<Checkpoint> {
    dcs_runner::checkpoint::ReadOnlyDir::new(&shard_dir(root, index))
        .load()
        .await
        .unwrap()
}

/// "Done" means committed (docs/ARCHITECTURE.md §3.13): a shard's last loads are saved in its
/// checkpoint, then committed, and until they are the shard is not done and nothing hands over.
/// Three shards play the orderings that used to lose those rows (older than T0, so the changelog
/// never brings them back): killed between the save and the commit (also as a runner before
/// this rule left it: `Done` with the loads listed), the last commit slow (the sink refusing, then
/// recovering while the shard retries), and the commit refused past the retries. Each restarted
/// shard commits first; the sink then equals the source, and again after the changelog from T0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_is_done_only_when_its_last_loads_are_committed() {
    const ROWS: u32 = 4_000;
    let emu = source_support::emu().await;
    // 4 tablets: one per shard, so each shard reads one split and the checkpoint at its end
    // holds every load the shard made.
    source_support::student_tables(&emu, 4, source_support::STUDENT_UPSERT_SINK_DDL, ROWS).await;
    let t0 = take_t0(&emu).await;
    let yaml = sharded_sync(&emu, &t0, SHARDS).yaml();
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let not_committed = |index: u32| format!("shard {index} of 4: every tablet read, ");
    assert_eq!(run_shard(&yaml, root, 0).await.unwrap(), Outcome::Done);

    // Shard 1: killed between saving its last checkpoint and committing its loads.
    let (mut control, _handle) = Control::new();
    control.hooks.stop_after_saving_pending = true;
    let task = spawn_pipeline_with(one_checkpoint(&yaml, 1, 3), &shard_dir(root, 1), control);
    assert!(matches!(
        task.await.unwrap().unwrap_err(),
        dcs_runner::Error::Injected { .. }
    ));
    let mut saved = stored_checkpoint(&shard_dir(root, 1)).await;
    assert!(!saved.pending_txns.is_empty());
    let waiting = shards_done(root, &t0).await.unwrap_err();
    assert!(waiting.starts_with(&not_committed(1)), "{waiting}");
    // As a runner before "done means committed" left it: `Done`, the loads listed.
    saved.position = Position::Done;
    std::fs::write(shard_dir(root, 1).join("checkpoint.json"), saved.to_json()).unwrap();
    let waiting = shards_done(root, &t0).await.unwrap_err();
    assert!(
        waiting.starts_with(&format!(
            "shard 1 of 4: every tablet read, {} load(s) of its last checkpoint not committed yet",
            saved.pending_txns.len()
        )),
        "{waiting}"
    );

    // Shard 2: the sink refuses its last commit for a while; the shard retries, and while it
    // does, it is not done.
    refuse_commits(&emu, true);
    let (task, _handle) = spawn_pipeline(one_checkpoint(&yaml, 2, 10_000), &shard_dir(root, 2));
    tokio::time::timeout(Duration::from_secs(120), async {
        while shard_checkpoint(root, 2)
            .await
            .is_none_or(|c| c.pending_txns.is_empty())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("shard 2 saves its last checkpoint");
    let waiting = shards_done(root, &t0).await.unwrap_err();
    assert!(waiting.contains(&not_committed(2)), "{waiting}");
    assert!(!task.is_finished(), "shard 2 is still committing");
    refuse_commits(&emu, false);
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .expect("shard 2 ends")
            .unwrap()
            .unwrap(),
        Outcome::Done
    );
    let settled = stored_checkpoint(&shard_dir(root, 2)).await;
    assert_eq!(settled.position, Position::Done);
    assert!(settled.pending_txns.is_empty(), "{settled:?}");

    // Shard 3: its last commit refused past the retries: it stops with the error recorded.
    refuse_commits(&emu, true);
    let failed = spawn_pipeline(one_checkpoint(&yaml, 3, 1), &shard_dir(root, 3))
        .0
        .await
        .unwrap()
        .unwrap_err();
    refuse_commits(&emu, false);
    assert!(
        failed.to_string().contains("the sink FE is down"),
        "{failed}"
    );
    let waiting = shards_done(root, &t0).await.unwrap_err();
    assert!(
        waiting.contains(&not_committed(3)) && waiting.contains("(it stopped: StreamLoadFailed"),
        "{waiting}"
    );
    // The changelog run refuses to start from T0 meanwhile.
    let (mut control, _handle) = Control::new();
    control.shards_done = Some(Err(waiting.clone()));
    let early = tempfile::tempdir().unwrap();
    let refused = spawn_pipeline_with(config(&yaml), early.path(), control)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(refused.reason(), "SnapshotShardsNotDone");
    // The rows those loads hold are nowhere yet.
    let in_sink = mysql_rows(&emu, "SELECT * FROM sink.student").await.len();
    assert!(in_sink < ROWS as usize, "{in_sink}");

    // Restarted, shards 1 and 3 commit their last loads first, then are done.
    for index in [1, 3] {
        assert_eq!(run_shard(&yaml, root, index).await.unwrap(), Outcome::Done);
        let cp = stored_checkpoint(&shard_dir(root, index)).await;
        assert!(cp.pending_txns.is_empty(), "shard {index}: {cp:?}");
    }
    assert_eq!(shards_done(root, &t0).await, Ok(()));
    let source_rows = || mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id");
    let sink_rows = || mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id");
    let (source, sink) = (source_rows().await, sink_rows().await);
    assert!(source == sink, "{}", row_diff(&source, &sink));

    // The hand-over: the changelog from T0 follows.
    exec(
        &emu,
        &["UPDATE demo.student SET name = 'after' WHERE id = 9"],
    )
    .await;
    let last_write = emu.doris.clock.now_ms();
    let changelog_dir = tempfile::tempdir().unwrap();
    let (mut control, mut handle) = Control::new();
    control.shards_done = Some(shards_done(root, &t0).await);
    let task = spawn_pipeline_with(config(&yaml), changelog_dir.path(), control);
    assert!(window_past(&mut handle, last_write, Duration::from_secs(60)).await);
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    let (source, sink) = (source_rows().await, sink_rows().await);
    assert!(source == sink, "{}", row_diff(&source, &sink));
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    assert!(
        txns.iter()
            .all(|t| t["state"] == "VISIBLE" || t["state"] == "ABORTED"),
        "{txns:?}"
    );
}

/// Inserts, updates and deletes until `stop`; returns the emulator time of the last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_processes_sigkilled_mid_snapshot_restart_alone_and_the_sink_equals_the_source() {
    const ROWS: u32 = 20_000;
    const KILLS: usize = 8;
    let seed = seed("shards::sigkilled");
    let mut rng = Rng(seed);
    let emu = Arc::new(source_support::emu().await);
    setup(&emu, source_support::STUDENT_UPSERT_SINK_DDL, ROWS).await;
    let t0 = take_t0(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("sync.yaml");
    std::fs::write(&manifest_path, sharded_sync(&emu, &t0, SHARDS).yaml()).unwrap();
    let checkpoints = dir.path().join("cp");
    let log = dir.path().join("runner.log");
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let start = |shard: Option<u32>| {
        let args: Vec<String> = shard
            .map(|i| vec!["--shard".to_owned(), i.to_string()])
            .unwrap_or_default();
        Runner::start_with_args(&manifest_path, Some(&checkpoints), &log, &[], &args)
    };

    // The source changes all along: during the snapshot, the hand-over and the changelog.
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer_task = tokio::spawn(writer(emu.clone(), stop.clone(), seed, ROWS, written));

    let shard_checkpoint = |i: usize| {
        read_json(
            &checkpoints
                .join(shard_dir_name(i as u32))
                .join("checkpoint.json"),
        )
    };
    // Shard 0's last commit is refused (its sink FE down past the retries, below): its last split
    // is held in doris-emu while the other shards are killed and restarted.
    let info = emu.doris.engine.table_info("demo", "student").unwrap();
    let last = *info
        .tablets
        .iter()
        .filter(|t| dcs_crds::shard::shard_of_tablet(**t, SHARDS) == 0)
        .max()
        .unwrap();
    emu.doris.faults.update(|f| {
        f.sql_stall = Some(dcs_doris_emu::faults::SqlStall {
            contains: format!("TABLET({last})"),
            applied: true,
        });
    });
    let mut shards: Vec<Runner> = (0..SHARDS).map(|i| start(Some(i))).collect();
    let mut mid_snapshot = 0;
    for _ in 0..KILLS {
        // Shard 0 is held at its last split meanwhile (below).
        let index = rng.range(1, u64::from(SHARDS)) as usize;
        // Once the shard has checkpointed inside its snapshot (or has ended), at a random point.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while shards[index].exited().is_none()
            && !shard_checkpoint(index).is_some_and(|c| c["position"]["phase"] == "snapshot")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "shard {index} makes no progress:\n{}",
                logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.range(0, 150))).await;
        if shards[index].exited().is_none() {
            shards[index].sigkill();
            if shard_checkpoint(index).is_some_and(|c| c["position"]["phase"] == "snapshot") {
                mid_snapshot += 1;
            }
        }
        // The killed shard restarts alone; the others run on.
        shards[index] = start(Some(index as u32));
    }
    println!("seed {seed}: {mid_snapshot} of {KILLS} kills mid-snapshot");
    // Once shard 0's first split is committed, its commits are refused and its last split let
    // go: it reads every tablet, saves, cannot commit, and stops. Until its restart commits those
    // loads it is not done, and the changelog run refuses to start from T0.
    let state = |cp: Option<serde_json::Value>| {
        let cp = cp.and_then(|c| dcs_runner::checkpoint::parse("shard", &c.to_string()).ok());
        dcs_crds::shard::shard_state(cp.as_ref(), "student-sync", 0, SHARDS, Some(t0.tso))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !matches!(
        state(shard_checkpoint(0)),
        ShardState::Reading {
            tablets_done: 1,
            ..
        }
    ) {
        assert!(std::time::Instant::now() < deadline, "{}", logs());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Nothing else of shard 0 commits while its last split is held (no new rows, no checkpoint).
    tokio::time::sleep(Duration::from_millis(300)).await;
    refuse_commits_of(&emu, Some("-student-sync-s0-of-4-"));
    emu.doris.faults.update(|f| f.sql_stall = None);
    assert_eq!(
        shards[0].wait_exit(Duration::from_secs(120)).await,
        Some(1),
        "{}",
        logs()
    );
    assert!(
        matches!(state(shard_checkpoint(0)), ShardState::Committing { .. }),
        "{:?}",
        shard_checkpoint(0)
    );
    let waiting = shards_done(&checkpoints, &t0).await.unwrap_err();
    assert!(
        waiting.starts_with("shard 0 of 4: every tablet read, "),
        "{waiting}"
    );
    let mut early = start(None);
    assert_eq!(
        early.wait_exit(Duration::from_secs(60)).await,
        Some(1),
        "the changelog run starts only once every shard is done:\n{}",
        logs()
    );
    assert!(
        read_json(&checkpoints.join("checkpoint.json")).is_none(),
        "the refused changelog run saved nothing"
    );
    refuse_commits_of(&emu, None);
    shards[0] = start(Some(0));

    // SIGTERM: a shard stopped before it is done exits 1 (exit 0 would complete its Indexed Job
    // index with tablets unread); one done already exits 0. Restarted, it goes on.
    if let Some(index) = (0..shards.len()).find(|i| shards[*i].exited().is_none()) {
        // Once this process saved a checkpoint of its own (its signal handler is in place by then).
        let id = |c: Option<serde_json::Value>| c.and_then(|c| c["checkpointId"].as_u64());
        let before = id(shard_checkpoint(index));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while shards[index].exited().is_none() && id(shard_checkpoint(index)) <= before {
            assert!(std::time::Instant::now() < deadline, "{}", logs());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // (Unless it ended meanwhile: `exited` reaped it. Not reaped, an ended one takes the
        // signal as a zombie and its exit code stands.)
        if shards[index].exited().is_none() {
            shards[index].sigterm();
            let code = shards[index].wait_exit(Duration::from_secs(30)).await;
            let done = shard_checkpoint(index).is_some_and(|c| c["position"]["phase"] == "done");
            assert_eq!(
                code,
                Some(if done { 0 } else { 1 }),
                "shard {index}:\n{}",
                logs()
            );
            println!("seed {seed}: shard {index} stopped by SIGTERM, done {done}");
            shards[index] = start(Some(index as u32));
        }
    }
    for (i, shard) in shards.iter_mut().enumerate() {
        assert_eq!(
            shard.wait_exit(Duration::from_secs(120)).await,
            Some(0),
            "shard {i} (seed {seed}):\n{}",
            logs()
        );
    }
    for i in 0..SHARDS {
        let cp = read_json(&checkpoints.join(shard_dir_name(i)).join("checkpoint.json"))
            .expect("a shard checkpoint");
        assert_eq!(cp["position"]["phase"], "done", "shard {i}");
        assert_eq!(cp["consumerId"], format!("student-sync-s{i}-of-4"));
    }

    // The changelog run: no --shard, the same checkpoint directory.
    let mut changelog = start(None);
    tokio::time::sleep(Duration::from_millis(rng.range(200, 800))).await;
    stop.store(true, Ordering::SeqCst);
    let last_write = writer_task.await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let past = read_json(&checkpoints.join("checkpoint.json")).is_some_and(|c| {
            c["position"]["offset"]["epochMs"]
                .as_i64()
                .is_some_and(|ms| ms > last_write)
        });
        if past {
            break;
        }
        assert!(
            changelog.exited().is_none(),
            "the changelog run exited:\n{}",
            logs()
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the changelog run did not pass the last write (seed {seed}):\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    changelog.sigterm();
    assert_eq!(
        changelog.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        logs()
    );
    let cp = read_json(&checkpoints.join("checkpoint.json")).unwrap();
    assert_eq!(
        cp["startPoint"]["tso"], t0.tso,
        "the changelog started at T0"
    );
    let source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    let sink = mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await;
    assert!(source == sink, "seed {seed}: {}", row_diff(&source, &sink));
}

/// The operator's layout on the test bed's control plane: every shard (named by an Indexed Job's
/// `JOB_COMPLETION_INDEX`) keeps its checkpoint in the ConfigMap `<DCS_CHECKPOINT_CONFIGMAP>-shard-<i>`,
/// and the changelog run reads those before it starts: refused while shards are missing, from T0
/// once all are done. The sink equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_keep_their_checkpoints_in_configmaps_of_their_own() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    const ROWS: u32 = 4000;
    let client = source_support::kube_bed().await;
    let emu = source_support::emu().await;
    setup(&emu, source_support::STUDENT_UPSERT_SINK_DDL, ROWS).await;
    let t0 = take_t0(&emu).await;
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("sync.yaml");
    std::fs::write(&manifest_path, sharded_sync(&emu, &t0, SHARDS).yaml()).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let bed = dcs_kube_bed::shared().await.unwrap();
    std::fs::write(&kubeconfig, bed.kubeconfig("shards")).unwrap();
    let namespace = client.default_namespace().to_string();
    let log = dir.path().join("runner.log");
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let start = |index: Option<u32>| {
        let mut env = vec![
            (
                "DCS_CHECKPOINT_CONFIGMAP".to_owned(),
                "student-sync-checkpoint".to_owned(),
            ),
            ("POD_NAMESPACE".to_owned(), namespace.clone()),
            ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
        ];
        if let Some(i) = index {
            env.push(("JOB_COMPLETION_INDEX".to_owned(), i.to_string()));
        }
        Runner::start_with_args(&manifest_path, None, &log, &env, &[])
    };
    let configmaps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let stored = |cm: Option<ConfigMap>| {
        cm.and_then(|cm| cm.data)
            .and_then(|d| d.get("checkpoint.json").cloned())
            .map(|json| dcs_runner::checkpoint::parse("test", &json).unwrap())
    };

    // Before any shard: the changelog run stops at once, naming every shard, and saves nothing.
    let mut early = start(None);
    assert_eq!(
        early.wait_exit(Duration::from_secs(60)).await,
        Some(1),
        "{}",
        logs()
    );
    assert!(
        logs().contains("the changelog starts from T0 once all 4 snapshot shards are done, and they are not: shard 0 of 4: not started; shard 1 of 4: not started; shard 2 of 4: not started; shard 3 of 4: not started"),
        "{}",
        logs()
    );
    assert_eq!(
        stored(configmaps.get_opt("student-sync-checkpoint").await.unwrap()),
        None
    );

    let mut shards: Vec<Runner> = (0..SHARDS).map(|i| start(Some(i))).collect();
    for (i, shard) in shards.iter_mut().enumerate() {
        assert_eq!(
            shard.wait_exit(Duration::from_secs(120)).await,
            Some(0),
            "shard {i}:\n{}",
            logs()
        );
        let cp = stored(
            configmaps
                .get_opt(&format!("student-sync-checkpoint-shard-{i}"))
                .await
                .unwrap(),
        )
        .expect("the shard's own ConfigMap");
        assert_eq!(cp.consumer_id, format!("student-sync-s{i}-of-4"));
        assert_eq!(cp.position, Position::Done);
        assert_eq!(cp.start_point.as_ref(), Some(&t0));
    }

    // Now the changelog run starts from T0 and catches up with a change made since.
    exec(
        &emu,
        &["UPDATE demo.student SET name = 'after T0' WHERE id = 3"],
    )
    .await;
    let last_write = emu.doris.clock.now_ms();
    let mut changelog = start(None);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let cp = stored(configmaps.get_opt("student-sync-checkpoint").await.unwrap());
        if let Some(Position::Changelog { offset }) = cp.as_ref().map(|c| &c.position)
            && offset.epoch_ms > last_write
        {
            assert_eq!(cp.as_ref().unwrap().start_point.as_ref(), Some(&t0));
            break;
        }
        assert!(changelog.exited().is_none(), "{}", logs());
        assert!(std::time::Instant::now() < deadline, "{}", logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    changelog.sigterm();
    assert_eq!(
        changelog.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        logs()
    );
    let source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    let sink = mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await;
    assert!(source == sink, "{}", row_diff(&source, &sink));
}
