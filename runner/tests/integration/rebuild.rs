//! The sink rebuild of a re-initialised consumer (`src/sink/rebuild.rs`), with the real binary
//! killed (SIGKILL) between every two of its steps while a writer changes the source:
//!
//! - upsert sink: a reader polling the sink table all along never sees it empty or partial (it is
//!   the old table until the swap, the complete rebuild after), a leftover shadow from an earlier
//!   attempt is dropped, not swapped in, and the sink ends equal to the source;
//! - changelog-mode sink: the history stays, the new snapshot is there exactly once as `+R` rows
//!   at T0 (also after a kill mid-snapshot), then every change after T0 exactly once.
//!
//! The kills land at exact points through doris-emu's `sql_stall` fault (a statement held before
//! it runs, or after it ran with its answer held), or once a checkpoint shows the step was passed.

use crate::source_support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION;
use dcs_crds::testing::SyncBuilder;
use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::SqlStall;
use source_support::{SOURCE_DDL, exec, mysql_rows, row_values, student_sync};

const ROWS: u32 = 3000;
/// The old consumer's sink: stale values for part of the keys and keys the source no longer has.
const STALE_ROWS: u32 = 2000;
const STALE_EXTRA: u32 = 100;

/// The student sync's consumer `student-sync-r1`, re-initialising `student-sync`.
fn sync(emu: &RunningEmulator) -> SyncBuilder {
    student_sync(emu, StartupMode::Initial)
        .name("student-sync-r1")
        .annotation(REINITIALIZED_FROM_ANNOTATION, "student-sync")
}

/// One `dcs-runner run` process; killed (SIGKILL) when dropped.
struct Runner(Child);

impl Runner {
    fn start(files: &Files) -> Self {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&files.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .args(["run", "-f"])
            .arg(&files.manifest)
            .arg("--checkpoint-dir")
            .arg(&files.checkpoints)
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", "")
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", "")
            .env("RUST_LOG", "info")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Self(child)
    }

    fn sigkill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }

    async fn sigterm_and_wait(mut self) -> Option<i32> {
        let pid = self.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let start = Instant::now();
        loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                return s.code();
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the runner did not stop"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Files {
    _dir: tempfile::TempDir,
    manifest: PathBuf,
    checkpoints: PathBuf,
    log: PathBuf,
}

impl Files {
    fn new(manifest: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.yaml");
        std::fs::write(&path, manifest).unwrap();
        Self {
            manifest: path,
            checkpoints: dir.path().join("cp"),
            log: dir.path().join("runner.log"),
            _dir: dir,
        }
    }

    fn checkpoint(&self) -> Option<serde_json::Value> {
        let text =
            std::fs::read_to_string(Path::new(&self.checkpoints).join("checkpoint.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Waits (bounded) until `ok` holds for the saved checkpoint; the runner must keep running.
    async fn wait_checkpoint(
        &self,
        runner: &mut Runner,
        what: &str,
        ok: impl Fn(&serde_json::Value) -> bool,
    ) {
        let start = Instant::now();
        while !self.checkpoint().is_some_and(|c| ok(&c)) {
            assert!(
                runner.alive(),
                "the runner exited waiting for {what}:\n{}",
                self.logs()
            );
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "timed out waiting for {what}; checkpoint {:?}\n{}",
                self.checkpoint(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Holds the statements containing `contains`, starts a runner, waits until it is held there and
/// kills it; then releases the fault (a statement held before running never runs).
async fn kill_at_statement(emu: &RunningEmulator, files: &Files, contains: &str, applied: bool) {
    let before = emu.doris.counters.get("sql_stalled");
    emu.doris.faults.update(|f| {
        f.sql_stall = Some(SqlStall {
            contains: contains.to_owned(),
            applied,
        })
    });
    let mut runner = Runner::start(files);
    let start = Instant::now();
    while emu.doris.counters.get("sql_stalled") == before {
        assert!(
            runner.alive(),
            "the runner exited before {contains:?}:\n{}",
            files.logs()
        );
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the runner never sent {contains:?}:\n{}",
            files.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    runner.sigkill();
    emu.doris.faults.update(|f| f.sql_stall = None);
    println!("killed at {contains:?} (applied: {applied})");
}

/// Inserts new keys and updates existing ones until `stop` (no deletes, so a complete rebuild
/// always holds at least the table's first rows); the emulator time of the last write.
async fn writer(emu: Arc<RunningEmulator>, stop: Arc<AtomicBool>) -> i64 {
    let mut next = ROWS + 1;
    let mut n = 0u32;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let sql = if n.is_multiple_of(2) {
            next += 1;
            format!("INSERT INTO demo.student VALUES {}", row_values(next - 1))
        } else {
            format!(
                "UPDATE demo.student SET name = 'upd-{n}' WHERE id = {}",
                1 + (n * 37) % ROWS
            )
        };
        exec(&emu, &[&sql]).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    emu.doris.clock.now_ms()
}

/// What a reader of the sink table saw, checked on every look.
#[derive(Default)]
struct Reads {
    looks: u64,
    swapped_seen: bool,
    violations: Vec<String>,
}

/// Polls the sink table every few ms until `stop`: each look must be the old table exactly
/// (`STALE_ROWS + STALE_EXTRA` rows, stale names) before the swap, or a complete rebuild after
/// (no stale row, at least the source's `ROWS` first rows), and never the old table again after.
async fn reader(emu: Arc<RunningEmulator>, stop: Arc<AtomicBool>) -> Reads {
    let mut reads = Reads::default();
    while !stop.load(Ordering::SeqCst) {
        let rows = mysql_rows(
            &emu,
            "SELECT COUNT(*), SUM(CASE WHEN name LIKE 'stale%' THEN 1 ELSE 0 END) FROM sink.student",
        )
        .await;
        let total: u64 = rows[0][0].parse().unwrap_or(0);
        let stale: u64 = rows[0][1].parse().unwrap_or(0);
        reads.looks += 1;
        let old = u64::from(STALE_ROWS + STALE_EXTRA);
        if stale == old && total == old {
            if reads.swapped_seen {
                reads
                    .violations
                    .push("the old table again after the swap".into());
            }
        } else if stale == 0 && total >= u64::from(ROWS) {
            reads.swapped_seen = true;
        } else {
            reads
                .violations
                .push(format!("{total} rows, {stale} of them stale"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reads
}

async fn shadow_rows(emu: &RunningEmulator) -> Option<Vec<Vec<String>>> {
    let tables = mysql_rows(emu, "SHOW TABLES FROM sink").await;
    tables
        .iter()
        .any(|t| t[0] == "student__dcs_shadow")
        .then_some(())?;
    Some(mysql_rows(emu, "SELECT * FROM sink.student__dcs_shadow ORDER BY id").await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upsert_rebuild_killed_at_every_step_ends_equal_to_the_source_and_is_never_seen_partial()
{
    let emu = Arc::new(source_support::emu().await);
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            source_support::STUDENT_UPSERT_SINK_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=ROWS).map(row_values).collect();
    for chunk in values.chunks(500) {
        exec(
            &emu,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
    // The old consumer's sink: stale values and keys the source lost during the expired window.
    let stale: Vec<String> = (1..=STALE_ROWS)
        .chain(90_001..=90_000 + STALE_EXTRA)
        .map(|id| format!("({id}, 'stale-{id}', 1.00, '2026-01-01 00:00:00.000')"))
        .collect();
    for chunk in stale.chunks(500) {
        exec(
            &emu,
            &[&format!(
                "INSERT INTO sink.student VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
    // A leftover shadow of an earlier attempt, with junk in it: it must never be swapped in.
    exec(
        &emu,
        &[
            "CREATE TABLE sink.student__dcs_shadow LIKE sink.student",
            "INSERT INTO sink.student__dcs_shadow VALUES (1, 'junk', 0.00, '2026-01-01 00:00:00.000')",
        ],
    )
    .await;
    let old_sink = mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await;
    let files = Files::new(&sync(&emu).yaml());
    let stop_reader = Arc::new(AtomicBool::new(false));
    let reader_task = tokio::spawn(reader(emu.clone(), stop_reader.clone()));
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer_task = tokio::spawn(writer(emu.clone(), stop_writer.clone()));

    // 1. Killed before the leftover shadow is dropped: nothing happened.
    kill_at_statement(
        &emu,
        &files,
        "DROP TABLE IF EXISTS `sink`.`student__dcs_shadow`",
        false,
    )
    .await;
    assert_eq!(
        shadow_rows(&emu).await.map(|r| r.len()),
        Some(1),
        "the leftover is untouched"
    );
    assert!(files.checkpoint().is_none());

    // 2. Killed once the shadow was created (the answer lost): no checkpoint records it yet.
    kill_at_statement(&emu, &files, "LIKE `sink`.`student`", true).await;
    assert_eq!(
        shadow_rows(&emu).await,
        Some(vec![]),
        "created afresh, empty"
    );
    assert!(files.checkpoint().is_none());

    // 3. Killed mid-snapshot, after a checkpoint recorded finished tablets into the shadow (loads
    //    slowed down so the snapshot takes a few seconds).
    emu.doris.faults.update(|f| f.http_delay_ms = 60);
    let mut runner = Runner::start(&files);
    files
        .wait_checkpoint(&mut runner, "snapshot progress in the shadow", |c| {
            c["rebuild"]["shadowTable"] == "sink.student__dcs_shadow"
                && c["position"]["tabletsDoneCount"]
                    .as_u64()
                    .is_some_and(|n| n > 0)
        })
        .await;
    runner.sigkill();
    emu.doris.faults.update(|f| f.http_delay_ms = 0);
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["position"]["phase"], "snapshot", "{cp}");
    assert_eq!(cp["rebuild"]["previousConsumerId"], "student-sync");
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await,
        old_sink
    );

    // 4. Killed with the snapshot complete and committed, before the swap ran.
    kill_at_statement(&emu, &files, "REPLACE WITH TABLE", false).await;
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["position"]["phase"], "changelog", "{cp}");
    assert!(cp["rebuild"]["swappedAt"].is_null(), "{cp}");
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await,
        old_sink
    );
    // The shadow holds the complete snapshot: every key of the source (the writer deletes none),
    // nothing of the old table or of the leftover.
    let rebuilt = shadow_rows(&emu).await.expect("the shadow");
    let ids: std::collections::BTreeSet<u32> =
        rebuilt.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(
        (1..=ROWS).all(|id| ids.contains(&id)),
        "the shadow misses keys"
    );
    assert!(
        rebuilt
            .iter()
            .all(|r| !r[1].starts_with("stale") && r[1] != "junk"),
        "the shadow holds old rows"
    );

    // 5. Killed after the swap took effect, before the runner heard so or recorded it.
    kill_at_statement(&emu, &files, "REPLACE WITH TABLE", true).await;
    assert!(files.checkpoint().unwrap()["rebuild"]["swappedAt"].is_null());
    assert_eq!(shadow_rows(&emu).await, None, "the shadow was swapped in");
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await,
        rebuilt
    );

    // 6. Killed after the swap was recorded (the restart finds the shadow gone and takes the swap
    //    as done).
    let mut runner = Runner::start(&files);
    files
        .wait_checkpoint(&mut runner, "the swap recorded", |c| {
            c["rebuild"]["swappedAt"].is_string()
        })
        .await;
    runner.sigkill();

    // The last run catches up past the writer's last write, then stops gracefully.
    let mut runner = Runner::start(&files);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_writer.store(true, Ordering::SeqCst);
    let last_write = writer_task.await.unwrap();
    stop_reader.store(true, Ordering::SeqCst);
    let reads = reader_task.await.unwrap();
    // Deletes reach the rebuilt table too.
    exec(&emu, &["DELETE FROM demo.student WHERE id <= 10"]).await;
    let last_write = last_write.max(emu.doris.clock.now_ms());
    files
        .wait_checkpoint(&mut runner, "an offset past the last write", |c| {
            c["position"]["offset"]["epochMs"]
                .as_i64()
                .is_some_and(|o| o > last_write)
        })
        .await;
    assert_eq!(runner.sigterm_and_wait().await, Some(0), "{}", files.logs());

    let source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    let sink = mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await;
    assert_eq!(source.len(), sink.len(), "{}", files.logs());
    assert!(
        source == sink,
        "the sink differs from the source\n{}",
        files.logs()
    );
    println!("reader: {} looks", reads.looks);
    assert!(reads.swapped_seen, "the reader never saw the rebuilt table");
    assert!(
        reads.violations.is_empty(),
        "readers saw: {:?}",
        reads.violations
    );
}

/// A changelog-mode (audit) sink keeps its history through a re-initialisation; the new snapshot
/// is there exactly once as `+R` at T0 (with 2PC, also across a kill mid-snapshot), then every
/// change after T0 exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changelog_sink_keeps_its_history_and_gets_the_new_snapshot_marked() {
    let emu = Arc::new(source_support::emu().await);
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE_DDL,
            source_support::STUDENT_EVENTS_SINK_DDL,
        ],
    )
    .await;
    let values: Vec<String> = (1..=ROWS).map(row_values).collect();
    for chunk in values.chunks(500) {
        exec(
            &emu,
            &[&format!(
                "INSERT INTO demo.student VALUES {}",
                chunk.join(", ")
            )],
        )
        .await;
    }
    // The old consumer's history.
    exec(
        &emu,
        &["INSERT INTO sink.student VALUES \
           (1, 'old', 1.00, '2026-01-01 00:00:00.000', '+I', 100, 0), \
           (1, 'old', 1.00, '2026-01-01 00:00:00.000', '-U', 200, 0), \
           (1, 'older', 2.00, '2026-01-01 00:00:00.000', '+U', 200, 1)"],
    )
    .await;
    let history = mysql_rows(
        &emu,
        "SELECT * FROM sink.student ORDER BY dcs_tso, dcs_lsn, dcs_op",
    )
    .await;
    let snapshot = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    let files = Files::new(&sync(&emu).sink_mode(SinkMode::Changelog).yaml());

    // Killed mid-snapshot: the restart goes on marking its rows, and a split cut by the kill is
    // read again without duplicates (2PC, whole splits).
    emu.doris.faults.update(|f| f.http_delay_ms = 60);
    let mut runner = Runner::start(&files);
    files
        .wait_checkpoint(&mut runner, "snapshot progress", |c| {
            c["position"]["tabletsDoneCount"]
                .as_u64()
                .is_some_and(|n| n > 0)
        })
        .await;
    runner.sigkill();
    emu.doris.faults.update(|f| f.http_delay_ms = 0);
    assert_eq!(
        files.checkpoint().unwrap()["rebuild"]["previousConsumerId"],
        "student-sync"
    );

    let mut runner = Runner::start(&files);
    files
        .wait_checkpoint(&mut runner, "the changelog phase", |c| {
            c["position"]["phase"] == "changelog"
        })
        .await;
    exec(
        &emu,
        &[
            "UPDATE demo.student SET name = 'after' WHERE id = 2",
            "DELETE FROM demo.student WHERE id = 3",
            &format!("INSERT INTO demo.student VALUES {}", row_values(ROWS + 1)),
        ],
    )
    .await;
    let last_write = emu.doris.clock.now_ms();
    files
        .wait_checkpoint(&mut runner, "an offset past the last write", |c| {
            c["position"]["offset"]["epochMs"]
                .as_i64()
                .is_some_and(|o| o > last_write)
        })
        .await;
    assert_eq!(runner.sigterm_and_wait().await, Some(0), "{}", files.logs());
    let cp: dcs_runner::checkpoint::Checkpoint =
        serde_json::from_value(files.checkpoint().unwrap()).unwrap();

    // The history is untouched; the rest is the marked snapshot and the changes after T0.
    let t0 = cp.start_point.clone().unwrap();
    let all = mysql_rows(
        &emu,
        "SELECT * FROM sink.student ORDER BY dcs_tso, dcs_lsn, dcs_op",
    )
    .await;
    // The old history's TSOs are tiny; every row the new consumer wrote has a real one.
    let is_old = |r: &Vec<String>| r[5].parse::<i64>().unwrap() < 1_000_000;
    let old: Vec<Vec<String>> = all.iter().filter(|r| is_old(r)).cloned().collect();
    assert_eq!(old, history);
    let mut new: Vec<Vec<String>> = all.into_iter().filter(|r| !is_old(r)).collect();
    new.sort();
    let mut expected = source_support::expected_student_events(&emu, snapshot, &cp).await;
    for r in &mut expected {
        if r[4] == "+I" && r[5] == t0.tso.to_string() && r[6] == "0" {
            r[4] = "+R".into();
        }
    }
    expected.sort();
    let marked = new.iter().filter(|r| r[4] == "+R").count();
    assert_eq!(marked, ROWS as usize, "every snapshot row once, marked");
    assert!(new == expected, "events differ\n{}", files.logs());
}
