//! Crash recovery of the real binary: `dcs-runner run` killed with SIGKILL at random points while a
//! writer keeps changing the source, restarted each time, then caught up and stopped with SIGTERM.
//!
//! - 2PC, UNIQUE KEY upsert sink: the sink equals the source exactly.
//! - 2PC, DUPLICATE KEY changelog-mode sink: the sink holds every event exactly once — the snapshot
//!   rows as inserts at T0 and the source's `@incr` DETAIL output over `[T0, final offset)`.
//! - Without 2PC: nothing is lost (every source row is in the sink).
//!
//! The kill points are random (seeded): set `DCS_TEST_SEED` to replay a run; every test prints its
//! seed. Each runner process is killed when its guard drops, so a failing test leaves none behind.

use crate::source_support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use source_support::process::Files;
use source_support::{Rng, exec, mysql_rows, seed, student_sync};

const ROWS: u32 = 6000;
/// The changelog-mode scenario's table: several Flight batches and many loads per snapshot split,
/// so kills land inside the snapshot.
const MANY_ROWS: u32 = 40_000;

const SOURCE_DDL: &str = "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4 \
     PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
     \"changelog.need_historical_value\" = \"true\")";

fn row_values(id: u64, version: u64) -> String {
    let name = if (id + version).is_multiple_of(7) {
        "NULL".to_owned()
    } else {
        format!("'student-{id}-v{version}'")
    };
    format!(
        "({id}, {name}, {}.{:02}, '2026-11-{:02} 10:{:02}:{:02}.{:03}')",
        (id + version) % 1000,
        version % 100,
        1 + id % 28,
        id % 60,
        version % 60,
        (id * 7 + version) % 1000
    )
}

async fn setup(emu: &RunningEmulator, sink_ddl: &str, rows: u32) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            sink_ddl,
        ],
    )
    .await;
    let values: Vec<String> = (1..=u64::from(rows)).map(|i| row_values(i, 0)).collect();
    for chunk in values.chunks(500) {
        let sql = format!("INSERT INTO demo.student VALUES {}", chunk.join(", "));
        exec(emu, &[&sql]).await;
    }
}

/// Inserts (new keys and re-used deleted ones), updates and deletes until `stop`; returns the
/// emulator time of the last write.
async fn writer(emu: Arc<RunningEmulator>, stop: Arc<AtomicBool>, seed: u64, rows: u32) -> i64 {
    let mut rng = Rng(seed ^ 0x5EED);
    let mut next_id = u64::from(rows) + 1;
    let mut version = 1;
    let mut deleted: Vec<u64> = Vec::new();
    let mut writes = 0;
    while !stop.load(Ordering::SeqCst) {
        version += 1;
        let stmt = match rng.range(0, 10) {
            0..=2 => {
                next_id += 1;
                format!(
                    "INSERT INTO demo.student VALUES {}",
                    row_values(next_id - 1, version)
                )
            }
            3 if !deleted.is_empty() => {
                let id = deleted.swap_remove(rng.range(0, deleted.len() as u64) as usize);
                format!(
                    "INSERT INTO demo.student VALUES {}",
                    row_values(id, version)
                )
            }
            3..=6 => {
                let id = rng.range(1, next_id);
                let name = if version.is_multiple_of(5) {
                    "NULL".to_owned()
                } else {
                    format!("'upd-{version}'")
                };
                format!(
                    "UPDATE demo.student SET name = {name}, score = {}.5 WHERE id = {id}",
                    version % 1000
                )
            }
            _ => {
                let id = rng.range(1, next_id);
                deleted.push(id);
                format!("DELETE FROM demo.student WHERE id = {id}")
            }
        };
        exec(&emu, &[&stmt]).await;
        writes += 1;
        tokio::time::sleep(Duration::from_millis(rng.range(5, 25))).await;
    }
    println!("writer: {writes} statements");
    emu.doris.clock.now_ms()
}

/// The student sync under the name `crash-sync`.
fn sync(emu: &RunningEmulator) -> SyncBuilder {
    student_sync(emu, StartupMode::Initial).name("crash-sync")
}

/// How many tablets a snapshot checkpoint records as done (its compact count, else its list).
fn tablets_done(c: &serde_json::Value) -> Option<u64> {
    let p = &c["position"];
    p["tabletsDoneCount"]
        .as_u64()
        .or_else(|| p["tabletsDone"].as_array().map(|t| t.len() as u64))
}

/// What one crash test does.
struct Scenario {
    name: &'static str,
    sink_ddl: &'static str,
    /// The sink table's mode.
    sink_mode: SinkMode,
    /// Whether loads are committed in two phases.
    two_phase: bool,
    /// The dead-letter table, if any.
    dead_letter: Option<&'static str>,
    /// Start the writer only once the changelog phase has begun (so the snapshot is the table
    /// as it was at T0).
    writer_after_snapshot: bool,
    /// Rows in the source table before the first run.
    rows: u32,
}

/// The state after the crash loop: the emulator, the files, and the final checkpoint.
struct Crashed {
    emu: Arc<RunningEmulator>,
    files: Files,
    /// The source before the writer started (the snapshot, when the writer waits for it).
    initial_source: Vec<Vec<String>>,
    checkpoint: serde_json::Value,
}

const KILLS: usize = 6;

async fn crash_loop(s: &Scenario) -> Crashed {
    let seed = seed(s.name);
    let mut rng = Rng(seed);
    let emu = Arc::new(source_support::emu().await);
    setup(&emu, s.sink_ddl, s.rows).await;
    let initial_source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    let mut sync = sync(&emu).sink_mode(s.sink_mode).two_phase(s.two_phase);
    if let Some(table) = s.dead_letter {
        sync = sync.dead_letter(table);
    }
    let files = Files::new(&sync.yaml());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writer_task = None;
    let spawn_writer = || tokio::spawn(writer(emu.clone(), stop.clone(), seed, s.rows));
    if !s.writer_after_snapshot {
        writer_task = Some(spawn_writer());
    }
    for kill in 0..KILLS {
        let mut runner = files.start();
        // The second half of the kills lands in the changelog phase.
        if kill >= KILLS / 2 {
            files
                .wait_checkpoint(&mut runner, "the changelog phase", |c| {
                    c["position"]["phase"] == "changelog"
                })
                .await;
        }
        let in_snapshot = files.phase() != "changelog";
        if writer_task.is_none() && files.phase() == "changelog" {
            writer_task = Some(spawn_writer());
        }
        // The snapshot takes about half a second: aim early to hit it, half of the time right
        // after a checkpoint recorded finished splits (so some splits are done, others half
        // loaded).
        let delay = if in_snapshot {
            if rng.range(0, 2) == 0 {
                files
                    .wait_checkpoint(&mut runner, "snapshot progress", |c| {
                        c["position"]["phase"] == "changelog"
                            || tablets_done(c).is_some_and(|n| n > 0)
                    })
                    .await;
                rng.range(0, 150)
            } else {
                rng.range(30, 500)
            }
        } else {
            rng.range(200, 2000)
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if let Some(status) = runner.exited() {
            panic!(
                "{}: run {kill} exited by itself ({status}):\n{}",
                s.name,
                files.logs()
            );
        }
        runner.sigkill();
        let done = files.checkpoint().as_ref().and_then(tablets_done);
        println!(
            "{}: kill {} after {delay} ms, checkpoint phase {}{}",
            s.name,
            kill + 1,
            files.phase(),
            done.map(|d| format!(" ({d} of 4 tablets done)"))
                .unwrap_or_default()
        );
    }
    // The last run: stop the writer, catch up past its last write, stop gracefully.
    let mut runner = files.start();
    let writer_task = match writer_task {
        Some(t) => t,
        None => {
            files
                .wait_checkpoint(&mut runner, "the changelog phase", |c| {
                    c["position"]["phase"] == "changelog"
                })
                .await;
            spawn_writer()
        }
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let last_write = writer_task.await.unwrap();
    files
        .wait_checkpoint(&mut runner, "an offset past the last write", |c| {
            c["position"]["offset"]["epochMs"]
                .as_i64()
                .is_some_and(|o| o > last_write)
        })
        .await;
    runner.sigterm();
    let code = runner.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(code, Some(0), "{}", files.logs());
    let checkpoint = files.checkpoint().unwrap();
    // No transaction is left pre-committed: each was committed or aborted.
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    let open: Vec<&serde_json::Value> = txns
        .iter()
        .filter(|t| t["state"] == "PRECOMMITTED" || t["state"] == "PREPARE")
        .collect();
    assert!(open.is_empty(), "{open:?}");
    Crashed {
        emu,
        files,
        initial_source,
        checkpoint,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_commit_upsert_sink_equals_the_source_after_sigkills() {
    let c = crash_loop(&Scenario {
        name: "2pc-upsert",
        sink_ddl: source_support::STUDENT_UPSERT_SINK_DDL,
        sink_mode: SinkMode::Upsert,
        two_phase: true,
        dead_letter: None,
        writer_after_snapshot: false,
        rows: ROWS,
    })
    .await;
    let source = mysql_rows(&c.emu, "SELECT * FROM demo.student ORDER BY id").await;
    let sink = mysql_rows(&c.emu, "SELECT * FROM sink.student ORDER BY id").await;
    assert!(source.len() > ROWS as usize / 2);
    assert!(
        source == sink,
        "{}\n{}",
        source_support::row_diff(&source, &sink),
        c.files.logs()
    );
}

/// Changelog mode into a DUPLICATE KEY table: every event exactly once, with kills in the
/// snapshot too. Such a sync checkpoints the snapshot only at split boundaries
/// (`pipeline::boundaries`), so the loads of a split cut by a kill are aborted on restart before
/// the split is read again. The writer starts with the changelog phase, so the snapshot is the
/// table at T0 and the expected events are exactly known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_phase_commit_changelog_sink_holds_every_event_once_after_sigkills() {
    let c = crash_loop(&Scenario {
        name: "2pc-changelog",
        sink_ddl: source_support::STUDENT_EVENTS_SINK_DDL,
        sink_mode: SinkMode::Changelog,
        two_phase: true,
        dead_letter: None,
        writer_after_snapshot: true,
        rows: MANY_ROWS,
    })
    .await;
    let cp = dcs_runner::checkpoint::parse("checkpoint.json", &c.checkpoint.to_string()).unwrap();
    let mut expected =
        source_support::expected_student_events(&c.emu, c.initial_source.clone(), &cp).await;
    assert!(
        expected.len() > c.initial_source.len() + 30,
        "only {} changes",
        expected.len() - c.initial_source.len()
    );
    let mut sink = mysql_rows(&c.emu, "SELECT * FROM sink.student").await;
    expected.sort();
    sink.sort();
    assert!(
        expected == sink,
        "the sink's events differ from the source's changelog: {}\n{}",
        source_support::row_diff(&expected, &sink),
        c.files.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_two_phase_commit_nothing_is_lost_after_sigkills() {
    let c = crash_loop(&Scenario {
        name: "no-2pc-upsert",
        sink_ddl: source_support::STUDENT_UPSERT_SINK_DDL,
        sink_mode: SinkMode::Upsert,
        two_phase: false,
        dead_letter: None,
        writer_after_snapshot: false,
        rows: ROWS,
    })
    .await;
    let source = mysql_rows(&c.emu, "SELECT * FROM demo.student ORDER BY id").await;
    let sink: BTreeSet<Vec<String>> = mysql_rows(&c.emu, "SELECT * FROM sink.student")
        .await
        .into_iter()
        .collect();
    let missing: Vec<&Vec<String>> = source.iter().filter(|r| !sink.contains(*r)).collect();
    assert!(
        missing.is_empty(),
        "{} source rows are not in the sink, e.g. {:?}\n{}",
        missing.len(),
        &missing[..missing.len().min(5)],
        c.files.logs()
    );
}

/// A changelog-mode sink whose `name` is NOT NULL, with a dead-letter table: Doris refuses every
/// event with a NULL name (a seventh of the snapshot, some of the writer's updates). With kills
/// anywhere (between a refused load and its reload, between the sink's and the dead-letter
/// table's pre-commits, before and after the checkpoint's save, during a restart's commits), the
/// sink holds every other event exactly once and the dead-letter table every refused one exactly
/// once, and the checkpoint counts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_rows_reach_the_dead_letter_table_exactly_once_after_sigkills() {
    let c = crash_loop(&Scenario {
        name: "2pc-dead-letter",
        sink_ddl: "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64) NOT NULL, \
             score DECIMAL(10,2), updated DATETIME(3), dcs_op VARCHAR(2), dcs_tso BIGINT, \
             dcs_lsn BIGINT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
             PROPERTIES (\"replication_num\" = \"1\")",
        sink_mode: SinkMode::Changelog,
        two_phase: true,
        dead_letter: Some("sink.student_rejected"),
        writer_after_snapshot: true,
        rows: ROWS,
    })
    .await;
    let cp = dcs_runner::checkpoint::parse("checkpoint.json", &c.checkpoint.to_string()).unwrap();
    let expected =
        source_support::expected_student_events(&c.emu, c.initial_source.clone(), &cp).await;
    let (mut refused, mut written): (Vec<Vec<String>>, Vec<Vec<String>>) =
        expected.into_iter().partition(|r| r[1] == "NULL");
    assert!(
        refused.len() > ROWS as usize / 10,
        "only {} refused",
        refused.len()
    );
    let mut sink = mysql_rows(&c.emu, "SELECT * FROM sink.student").await;
    written.sort();
    sink.sort();
    assert!(
        written == sink,
        "the sink's events differ from the source's accepted ones: {}\n{}",
        source_support::row_diff(&written, &sink),
        c.files.logs()
    );
    // The dead-letter table: each refused event once, with its position and its row.
    let mut dead = mysql_rows(
        &c.emu,
        "SELECT op, tso, lsn, source_table, sink_table, reason FROM sink.student_rejected",
    )
    .await;
    let mut expected_dead: Vec<Vec<String>> = refused
        .iter_mut()
        .map(|r| {
            vec![
                r[4].clone(),
                r[5].clone(),
                r[6].clone(),
                "demo.student".into(),
                "sink.student".into(),
                "column(name) values is null while columns is not nullable".into(),
            ]
        })
        .collect();
    expected_dead.sort();
    dead.sort();
    assert!(
        expected_dead == dead,
        "the dead-letter table differs from the refused events: {}\n{}",
        source_support::row_diff(&expected_dead, &dead),
        c.files.logs()
    );
    assert_eq!(cp.counters.rows_rejected, expected_dead.len() as u64);
}
