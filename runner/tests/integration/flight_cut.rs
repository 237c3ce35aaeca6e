//! A Flight result stream cut mid-way (doris-emu's `flight_cut_after_batches`) during the snapshot
//! and during a changelog window: the pipeline reads the split or window again and the sink ends
//! equal to the source — in a DUPLICATE KEY changelog-mode sink without a repeated event — and a
//! stream that keeps breaking fails with Doris's message. A stream that stalls (a batch, then
//! silence on a live connection) is given up after its idle deadline and read again.

use crate::source_support;

use std::time::Duration;

use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_runner::checkpoint::{CheckpointStore, FileStore};
use dcs_runner::pipeline::{self, Control, Outcome, Phase};
use dcs_runner::settings::StreamRetry;
use dcs_runner::source::tso::floor_to_second;
use source_support::{
    SOURCE_DDL, STUDENT_EVENTS_SINK_DDL, config, exec, expected_student_events, mysql_rows,
    row_values, student_sync, window_past,
};

/// More than one 4096-row Flight batch per snapshot split (4 tablets).
const ROWS: u32 = 20_000;

const UPSERT_SINK_DDL: &str = "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
     PROPERTIES (\"replication_num\" = \"1\")";

async fn setup(emu: &RunningEmulator, sink_ddl: &str) {
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
    let values: Vec<String> = (1..=ROWS).map(row_values).collect();
    for chunk in values.chunks(2000) {
        let sql = format!("INSERT INTO demo.student VALUES {}", chunk.join(", "));
        exec(emu, &[&sql]).await;
    }
}

/// The next BE DoGet stream breaks after its first batch.
fn cut_next_stream(emu: &RunningEmulator) {
    emu.doris
        .faults
        .update(|f| f.flight_cut_after_batches = Some(1));
}

fn cut_pending(emu: &RunningEmulator) -> bool {
    emu.doris.faults.get().flight_cut_after_batches.is_some()
}

fn quick_retry(max_retries: u32) -> StreamRetry {
    StreamRetry {
        max_retries,
        base: Duration::from_millis(20),
        max: Duration::from_millis(100),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_split_cut_mid_stream_is_read_again_into_an_upsert_sink() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK_DDL).await;
    let mut cfg = config(&student_sync(&emu, StartupMode::Snapshot).yaml());
    cfg.stream_retry = quick_retry(3);
    cut_next_stream(&emu);
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _handle) = Control::new();
    let outcome = pipeline::run(cfg, &mut store, control).await.unwrap();
    assert_eq!(outcome, Outcome::Done);
    assert!(!cut_pending(&emu), "a snapshot stream was cut");
    let source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    assert_eq!(source.len(), ROWS as usize);
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await,
        source
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_stream_that_stalls_is_given_up_and_read_again() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK_DDL).await;
    let mut cfg = config(&student_sync(&emu, StartupMode::Snapshot).yaml());
    cfg.stream_retry = quick_retry(3);
    // The stream's idle deadline is twice this.
    cfg.source.request_timeout = Duration::from_millis(500);
    // The next DoGet sends one batch, then nothing, on a connection that stays open.
    emu.doris
        .faults
        .update(|f| f.flight_stall_after_batches = Some(1));
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _handle) = Control::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        pipeline::run(cfg, &mut store, control),
    )
    .await
    .expect("a stalled stream does not hang the snapshot")
    .unwrap();
    assert_eq!(outcome, Outcome::Done);
    assert!(
        emu.doris.faults.get().flight_stall_after_batches.is_none(),
        "a snapshot stream was stalled"
    );
    let source = mysql_rows(&emu, "SELECT * FROM demo.student ORDER BY id").await;
    assert_eq!(
        mysql_rows(&emu, "SELECT * FROM sink.student ORDER BY id").await,
        source
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cuts_in_the_snapshot_and_a_window_leave_every_event_once_in_a_changelog_sink() {
    let emu = source_support::emu().await;
    setup(&emu, STUDENT_EVENTS_SINK_DDL).await;
    let initial = mysql_rows(&emu, "SELECT * FROM demo.student").await;
    let mut cfg = config(
        &student_sync(&emu, StartupMode::Initial)
            .sink_mode(SinkMode::Changelog)
            .yaml(),
    );
    cfg.stream_retry = quick_retry(3);
    cfg.checkpoint_interval = Duration::from_millis(300);
    cut_next_stream(&emu);
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let (control, mut handle) = Control::new();
    let task = tokio::spawn(async move {
        let mut store = FileStore::open(&dir_path).unwrap();
        pipeline::run(cfg, &mut store, control).await
    });
    let wait = Duration::from_secs(60);
    tokio::time::timeout(wait, async {
        while handle.progress.borrow_and_update().phase != Phase::Changelog {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the snapshot finishes");
    assert!(!cut_pending(&emu), "a snapshot stream was cut");

    // Wait until the reader has caught up with the current second, early in a second, so the
    // next DoGet is the window holding the writes below.
    tokio::time::timeout(wait, async {
        loop {
            let now = emu.doris.clock.now_ms();
            let caught_up = handle
                .progress
                .borrow()
                .window_end
                .as_ref()
                .is_some_and(|w| w.epoch_ms == floor_to_second(now));
            if caught_up && now % 1000 < 500 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the changelog reader catches up");
    // One commit of 9000 rows (three Flight batches), then updates and deletes.
    let values: Vec<String> = (ROWS + 1..=ROWS + 9000).map(row_values).collect();
    exec(
        &emu,
        &[&format!(
            "INSERT INTO demo.student VALUES {}",
            values.join(", ")
        )],
    )
    .await;
    cut_next_stream(&emu);
    exec(
        &emu,
        &[
            "UPDATE demo.student SET name = 'renamed' WHERE id < 40",
            "DELETE FROM demo.student WHERE id > 28990",
        ],
    )
    .await;
    let last = emu.doris.clock.now_ms();
    assert!(
        window_past(&mut handle, last, wait).await,
        "the changelog passes the writes"
    );
    assert!(!cut_pending(&emu), "a changelog stream was cut");
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(wait, task).await.unwrap().unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);

    let cp = FileStore::open(dir.path())
        .unwrap()
        .load()
        .await
        .unwrap()
        .unwrap();
    let expected = expected_student_events(&emu, initial, &cp).await;
    // [T0, end) also holds the set-up's writes of T0's second (the seam is at least once).
    assert!(
        expected.len() >= ROWS as usize + 9000 + 2 * 39 + 10,
        "{} events",
        expected.len()
    );
    let mut sink = mysql_rows(&emu, "SELECT * FROM sink.student").await;
    sink.sort();
    assert_eq!(sink.len(), expected.len(), "no event lost or repeated");
    assert!(
        sink == expected,
        "the sink's events differ from the source's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_keeps_breaking_fails_the_run_after_its_re_reads_with_the_doris_message() {
    let emu = std::sync::Arc::new(source_support::emu().await);
    setup(&emu, UPSERT_SINK_DDL).await;
    let mut cfg = config(&student_sync(&emu, StartupMode::Snapshot).yaml());
    cfg.snapshot_concurrency = 1;
    // Two re-reads, the first 200 ms after the cut: time enough to arm the next cut.
    cfg.stream_retry = StreamRetry {
        max_retries: 2,
        base: Duration::from_millis(200),
        max: Duration::from_millis(400),
    };
    cut_next_stream(&emu);
    // Every stream breaks: the cut is armed again as soon as one is used.
    let rearm = {
        let emu = emu.clone();
        tokio::spawn(async move {
            loop {
                if !cut_pending(&emu) {
                    cut_next_stream(&emu);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _handle) = Control::new();
    let err = pipeline::run(cfg, &mut store, control).await.unwrap_err();
    rearm.abort();
    assert_eq!(
        err.to_string(),
        "Flight DoGet: [INTERNAL_ERROR]arrow flight result stream interrupted after 1 batches \
         (injected fault)"
    );
    assert_eq!(
        emu.doris.counters.get("flight_do_get_be"),
        3,
        "the first split, read once and again twice"
    );
}
