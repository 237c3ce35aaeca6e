//! An audit (changelog-mode) sink's history is exact across the seam between the snapshot and the
//! changelog (docs/ARCHITECTURE.md §3.4, §7): a writer inserts, updates and deletes rows all
//! through the snapshot, in tablets not read yet (one held in doris-emu meanwhile), read already,
//! and being read, while `dcs-runner` processes are SIGKILLed mid-snapshot and restarted. The sink
//! then holds the table as of T0 once (`+I` rows at T0's TSO) and every change after T0 once, in
//! order of TSO and LSN: the source's history from T0, row for row. One runner, and four shards.

use crate::source_support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dcs_crds::shard::shard_dir_name;
use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::checkpoint::Checkpoint;
use source_support::process::Runner;
use source_support::{
    Rng, STUDENT_EVENTS_SINK_DDL, expected_student_events, mysql_rows, read_json, row_diff, seed,
    sharded_sync, student_sync, take_t0, writer,
};

const ROWS: u32 = 20_000;
const SHARDS: u32 = 4;
/// The sink keeps every event (the audit the test reads).
const AUDIT: SinkMode = SinkMode::Changelog;
/// Writes made after T0 while one split is still held (so during the snapshot), at least.
const WRITES_DURING: u64 = 30;

/// `demo.student` (8 tablets, [`ROWS`] rows) and a changelog-mode sink table; one tablet's split
/// is held in doris-emu until [`release`].
async fn setup() -> Arc<RunningEmulator> {
    let emu = Arc::new(source_support::emu().await);
    source_support::student_tables(&emu, 8, STUDENT_EVENTS_SINK_DDL, ROWS).await;
    let info = emu.doris.engine.table_info("demo", "student").unwrap();
    let held = *info.tablets.iter().max().unwrap();
    emu.doris.faults.update(|f| {
        f.sql_stall = Some(dcs_doris_emu::faults::SqlStall {
            contains: format!("TABLET({held})"),
            applied: true,
        });
    });
    emu
}

fn release(emu: &RunningEmulator) {
    emu.doris.faults.update(|f| f.sql_stall = None);
}

/// The writer, started now.
struct Writes {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<i64>,
}

impl Writes {
    fn start(emu: &Arc<RunningEmulator>, seed: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(writer(
            emu.clone(),
            stop.clone(),
            seed,
            ROWS,
            written.clone(),
        ));
        Self {
            stop,
            written,
            task,
        }
    }

    fn count(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` writes are made (the held split keeps the snapshot unfinished
    /// meanwhile, so they are all made during it).
    async fn at_least(&self, n: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.count() < n {
            assert!(
                Instant::now() < deadline,
                "only {} writes in 120 s",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.count()
    }

    /// Stop, and Doris's clock after the last write.
    async fn stop(self) -> i64 {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

/// Waits until the checkpoint at `path` satisfies `ok`, `runner` running all along.
async fn wait_for(
    path: &Path,
    runner: &mut Runner,
    what: &str,
    logs: &dyn Fn() -> String,
    ok: impl Fn(&serde_json::Value) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !read_json(path).is_some_and(|c| ok(&c)) {
        if let Some(status) = runner.exited() {
            panic!(
                "the runner exited ({status}) waiting for {what}:\n{}",
                logs()
            );
        }
        assert!(Instant::now() < deadline, "no {what}:\n{}", logs());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_snapshot(c: &serde_json::Value) -> bool {
    c["position"]["phase"] == "snapshot"
}

/// Runs the changelog process at `checkpoint` until it has read past the writer's last change,
/// then stops it with SIGTERM.
async fn changelog_past_the_writes(
    checkpoint: &Path,
    mut runner: Runner,
    writes: Writes,
    logs: &dyn Fn() -> String,
) {
    wait_for(checkpoint, &mut runner, "the changelog phase", logs, |c| {
        c["position"]["phase"] == "changelog"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last_write = writes.stop().await;
    wait_for(
        checkpoint,
        &mut runner,
        "a window past the last write",
        logs,
        |c| {
            c["position"]["offset"]["epochMs"]
                .as_i64()
                .is_some_and(|ms| ms > last_write)
        },
    )
    .await;
    runner.sigterm();
    assert_eq!(
        runner.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        logs()
    );
}

/// The sink equals the source's history from the checkpoint's T0 to its offset: the table as of
/// T0 (`FOR VERSION AS OF`, Doris's own image) as `+I` rows, then `@incr` DETAIL's changes after
/// T0, each once. Returns how many changes after T0 it holds.
async fn assert_exact_history(emu: &RunningEmulator, checkpoint: &Path, seed: u64) -> usize {
    let text = std::fs::read_to_string(checkpoint).unwrap();
    let cp: Checkpoint = dcs_runner::checkpoint::parse("changelog", &text).unwrap();
    let t0 = cp.start_point.clone().expect("T0");
    let image = mysql_rows(
        emu,
        &format!(
            "SELECT id, name, score, updated FROM demo.student FOR VERSION AS OF {}",
            t0.tso
        ),
    )
    .await;
    let expected = expected_student_events(emu, image, &cp).await;
    let mut sink = mysql_rows(
        emu,
        "SELECT id, name, score, updated, dcs_op, dcs_tso, dcs_lsn FROM sink.student",
    )
    .await;
    sink.sort();
    assert!(
        expected == sink,
        "seed {seed}: the audit sink is not the history from T0: {}",
        row_diff(&expected, &sink)
    );
    expected
        .iter()
        .filter(|r| r[5] != t0.tso.to_string())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_the_snapshot_reach_an_audit_sink_once_across_sigkills() {
    const KILLS: usize = 3;
    let seed = seed("audit_seam::one_runner");
    let mut rng = Rng(seed);
    let emu = setup().await;
    let files = source_support::process::Files::new(
        &student_sync(&emu, StartupMode::Initial)
            .sink_mode(AUDIT)
            .yaml(),
    );
    let checkpoint = files.checkpoints.join("checkpoint.json");
    let logs = || files.logs();
    let writes = Writes::start(&emu, seed);
    let mut runner = files.start();
    // T0 is taken before the snapshot's first checkpoint: the writes counted from then on are
    // after it.
    let mut after_t0 = None;
    for _ in 0..KILLS {
        // Once a checkpoint inside the snapshot is saved, at a random point.
        wait_for(
            &checkpoint,
            &mut runner,
            "a snapshot checkpoint",
            &logs,
            in_snapshot,
        )
        .await;
        after_t0.get_or_insert(writes.count());
        tokio::time::sleep(Duration::from_millis(rng.range(0, 300))).await;
        runner.sigkill();
        runner = files.start();
    }
    let after_t0 = after_t0.unwrap_or_default();
    let during = writes.at_least(after_t0 + WRITES_DURING).await - after_t0;
    release(&emu);
    changelog_past_the_writes(&checkpoint, runner, writes, &logs).await;
    let changes = assert_exact_history(&emu, &checkpoint, seed).await;
    println!("seed {seed}: {during} writes during the snapshot, {changes} changes after T0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_a_sharded_snapshot_reach_an_audit_sink_once_across_sigkills() {
    const KILLS: usize = 4;
    let seed = seed("audit_seam::shards");
    let mut rng = Rng(seed);
    let emu = setup().await;
    let t0 = take_t0(&emu).await;
    let files = source_support::process::Files::new(
        &sharded_sync(&emu, &t0, SHARDS).sink_mode(AUDIT).yaml(),
    );
    let checkpoint = files.checkpoints.join("checkpoint.json");
    let shard_checkpoint = |i: u32| {
        files
            .checkpoints
            .join(shard_dir_name(i))
            .join("checkpoint.json")
    };
    let logs = || files.logs();
    let start = |shard: Option<u32>| {
        let args: Vec<String> = shard
            .map(|i| vec!["--shard".to_owned(), i.to_string()])
            .unwrap_or_default();
        Runner::start_with_args(
            &files.manifest,
            Some(&files.checkpoints),
            &files.log,
            &[],
            &args,
        )
    };
    let writes = Writes::start(&emu, seed);
    let mut shards: Vec<Runner> = (0..SHARDS).map(|i| start(Some(i))).collect();
    for _ in 0..KILLS {
        let i = rng.range(0, u64::from(SHARDS)) as u32;
        let shard = &mut shards[i as usize];
        if shard.exited().is_some() {
            continue;
        }
        // Once the shard has checkpointed inside its snapshot, at a random point.
        let deadline = Instant::now() + Duration::from_secs(60);
        while shard.exited().is_none()
            && !read_json(&shard_checkpoint(i)).is_some_and(|c| in_snapshot(&c))
        {
            assert!(
                Instant::now() < deadline,
                "shard {i} makes no progress:\n{}",
                logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.range(0, 300))).await;
        if shard.exited().is_none() {
            shard.sigkill();
            *shard = start(Some(i));
        }
    }
    let during = writes.at_least(WRITES_DURING).await;
    release(&emu);
    for (i, shard) in shards.iter_mut().enumerate() {
        assert_eq!(
            shard.wait_exit(Duration::from_secs(120)).await,
            Some(0),
            "shard {i} (seed {seed}):\n{}",
            logs()
        );
    }
    changelog_past_the_writes(&checkpoint, start(None), writes, &logs).await;
    let changes = assert_exact_history(&emu, &checkpoint, seed).await;
    println!("seed {seed}: {during} writes during the snapshot, {changes} changes after T0");
}

/// A merge-on-write source without before-images cannot be read as of T0: an audit sink of it is
/// refused before any row is read or loaded, naming the property, instead of doubling the changes
/// made during the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_sink_of_a_table_doris_cannot_read_as_of_t0_is_refused_naming_the_property() {
    let emu = source_support::emu().await;
    source_support::exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64), score DECIMAL(10,2), \
             updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
             PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\")",
            STUDENT_EVENTS_SINK_DDL,
            "INSERT INTO demo.student VALUES (1, 'a', 1.5, '2026-11-01 10:00:00.000')",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = source_support::config(
        &student_sync(&emu, StartupMode::Initial)
            .sink_mode(AUDIT)
            .yaml(),
    );
    let (task, _handle) = source_support::spawn_pipeline(config, dir.path());
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the run ends")
        .unwrap()
        .expect_err("refused");
    assert_eq!(err.exit_code(), 2, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(
            "demo.student cannot be read as of T0 (FOR VERSION AS OF "
        ) && text.contains(
            "it is a merge-on-write table without changelog.need_historical_value, whose older \
             versions Doris cannot rebuild"
        ) && text.ends_with(
            "create the source table with \"changelog.need_historical_value\" = \"true\", or use \
             an upsert sink"
        ),
        "{text}"
    );
    assert_eq!(
        emu.doris.counters.get("flight_get_flight_info"),
        0,
        "nothing read"
    );
    let sink = source_support::mysql_rows(&emu, "SELECT COUNT(*) FROM sink.student").await;
    assert_eq!(sink, vec![vec!["0".to_owned()]]);
}
