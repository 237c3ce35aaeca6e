//! The runner guards the changelog's retention itself (`source::retention`): a window whose start
//! Doris no longer holds is never read, whoever moved Doris's clock or the TTL, and when.

use crate::source_support;

use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{IncrementType, SinkMode, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::engine::TxnRef;
use dcs_runner::Error;
use dcs_runner::checkpoint::Position;
use dcs_runner::pipeline::Outcome;
use source_support::process::Files;
use source_support::{
    config, exec, mysql_rows, spawn_pipeline, stored_checkpoint, student_sync, window_past,
};

const SOURCE: &str = "CREATE TABLE demo.t (id INT NOT NULL, v VARCHAR(32)) UNIQUE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \
     \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\", \
     \"changelog.ttl_seconds\" = \"600\")";
const UPSERT_SINK: &str = "CREATE TABLE sink.t (id INT NOT NULL, v VARCHAR(32)) UNIQUE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")";
const EVENTS_SINK: &str = "CREATE TABLE sink.t (id INT NOT NULL, v VARCHAR(32), \
     dcs_op VARCHAR(2), dcs_tso BIGINT, dcs_lsn BIGINT) DUPLICATE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")";

/// `demo.t` into `sink.t` on the emulator, `initial`, reading `increment` every `poll`, a
/// snapshot expected to take 1m.
fn sync(emu: &RunningEmulator, increment: IncrementType, poll: &str) -> SyncBuilder {
    student_sync(emu, StartupMode::Initial)
        .name("ttl-sync")
        .source_table("demo.t")
        .poll_interval(poll)
        .increment_type(increment)
        .expected_snapshot_duration("1m")
        .sink_table("sink.t")
}

async fn setup(emu: &RunningEmulator, sink: &str) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            SOURCE,
            sink,
            "INSERT INTO demo.t VALUES (1, 'a'), (2, 'b')",
        ],
    )
    .await;
}

async fn sink_rows(emu: &RunningEmulator) -> Vec<Vec<String>> {
    mysql_rows(emu, "SELECT id, v FROM sink.t ORDER BY id").await
}

/// The reported case: synced, killed; while it is down changes are made and Doris's clock moves
/// past the TTL; restarted on the same checkpoint, the runner must say so (exit 3) instead of
/// reading on from whatever Doris still has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_restarted_after_the_ttl_passed_exits_3_and_loads_nothing() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK).await;
    let files = Files::new(&sync(&emu, IncrementType::Detail, "1s").yaml());
    let mut runner = files.start();
    let synced = emu.doris.clock.now_ms();
    files
        .wait_checkpoint(&mut runner, "a changelog window past the first rows", |c| {
            c["position"]["phase"] == "changelog"
                && c["position"]["offset"]["epochMs"]
                    .as_i64()
                    .is_some_and(|ms| ms > synced)
        })
        .await;
    assert_eq!(
        sink_rows(&emu).await,
        [["1", "a"], ["2", "b"]].map(|r| r.map(str::to_owned).to_vec())
    );
    runner.sigkill();

    exec(
        &emu,
        &[
            "INSERT INTO demo.t VALUES (3, 'lost')",
            "UPDATE demo.t SET v = 'changed' WHERE id = 1",
        ],
    )
    .await;
    emu.doris.clock.advance_ms(700_000);
    exec(&emu, &["INSERT INTO demo.t VALUES (4, 'after')"]).await;

    let loads = emu.doris.counters.get("be_stream_load");
    let mut runner = files.start();
    let code = runner.wait_exit(Duration::from_secs(60)).await;
    assert_eq!(code, Some(3), "{}", files.logs());
    assert!(
        files
            .logs()
            .contains("has expired according to changelog.ttl_seconds (600 s)"),
        "{}",
        files.logs()
    );
    // Nothing of after the gap reached the sink, and the checkpoint says why the runner stopped.
    assert_eq!(emu.doris.counters.get("be_stream_load"), loads);
    assert_eq!(
        sink_rows(&emu).await,
        [["1", "a"], ["2", "b"]].map(|r| r.map(str::to_owned).to_vec())
    );
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["stopped"]["reason"], "OffsetExpired", "{cp}");
    assert_eq!(cp["stopped"]["exitCode"], 3, "{cp}");
    // It stays so on every restart (a pod's restarts end the same way until the sync is
    // re-initialised).
    let mut runner = files.start();
    assert_eq!(runner.wait_exit(Duration::from_secs(60)).await, Some(3));
}

/// Doris's clock passes the TTL while the runner is live, between two windows: the next window's
/// check stops it before it reads, for every increment type, and the offset does not advance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_past_the_ttl_while_running_stops_the_runner_before_the_next_window() {
    for increment in [
        IncrementType::Detail,
        IncrementType::AppendOnly,
        IncrementType::MinDelta,
    ] {
        let emu = source_support::emu().await;
        setup(&emu, UPSERT_SINK).await;
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&sync(&emu, increment, "1s").yaml());
        let (task, mut handle) = spawn_pipeline(cfg, dir.path());
        let now = emu.doris.clock.now_ms();
        assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
        let reached = handle.progress.borrow().window_end.clone().unwrap();
        exec(&emu, &["INSERT INTO demo.t VALUES (3, 'lost')"]).await;
        emu.doris.clock.advance_ms(700_000);
        let err = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the runner stops")
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(err, Error::OffsetExpired { .. }),
            "{increment:?}: {err}"
        );
        assert_eq!(err.exit_code(), 3);
        let cp = stored_checkpoint(dir.path()).await;
        let Position::Changelog { offset } = &cp.position else {
            panic!("{:?}", cp.position);
        };
        assert!(
            offset.epoch_ms <= reached.epoch_ms + 2_000,
            "{increment:?}: the offset moved past the gap: {offset:?}, last window end {reached:?}"
        );
        assert_eq!(cp.stopped.unwrap().reason, "OffsetExpired");
        assert!(
            !sink_rows(&emu).await.iter().any(|r| r[0] == "3"),
            "{increment:?}: a row of the expired stretch reached the sink"
        );
    }
}

/// The clock passes the TTL while a window is being read: the read started in time (Doris fixed
/// its retention edge then, so it is whole), yet the check after it sees the jump; the window is
/// not handed on as complete, its rows are never committed, and the run stops. The read is held
/// open by a transaction pre-committed on the source table, which Doris waits for (visibility).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_during_a_window_read_stops_the_run_without_committing_the_window() {
    let emu = source_support::emu().await;
    setup(&emu, EVENTS_SINK).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &sync(&emu, IncrementType::Detail, "1s")
            .sink_mode(SinkMode::Changelog)
            .yaml(),
    );
    let (task, mut handle) = spawn_pipeline(cfg, dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    let before = sink_rows(&emu).await;
    // A two-phase load on the source, pre-committed and not committed: every window ending after
    // it waits, the one holding row 3 (inserted after it) included.
    let engine = &emu.doris.engine;
    let txn = engine.begin_txn("demo", "t", "held-open").unwrap();
    engine
        .finish_txn(
            txn,
            vec![dcs_doris_emu::engine::RowWrite::Upsert(vec![
                dcs_doris_emu::types::Value::Int(9),
                dcs_doris_emu::types::Value::Str("held".into()),
            ])],
            true,
        )
        .unwrap();
    exec(&emu, &["INSERT INTO demo.t VALUES (3, 'in the window')"]).await;
    // Let a window start waiting for it, then move the clock past the TTL and let it finish.
    tokio::time::sleep(Duration::from_secs(3)).await;
    emu.doris.clock.advance_ms(700_000);
    engine
        .two_phase(
            "demo",
            &TxnRef::Id(txn),
            dcs_doris_emu::engine::TxnOperation::Commit,
        )
        .unwrap();
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the runner stops")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::OffsetExpired { .. }), "{err}");
    assert_eq!(
        sink_rows(&emu).await,
        before,
        "the window's rows were not committed"
    );
    let txns: Vec<serde_json::Value> = source_support::emu_txns(&emu).await;
    assert!(
        txns.iter()
            .filter(|t| t["db"] == "sink")
            .all(|t| t["state"] == "VISIBLE" || t["state"] == "ABORTED"),
        "{txns:?}"
    );
}

/// A TTL lowered while the sync runs counts from the next window on: a runner lagging more than
/// the new TTL stops, instead of reading a window Doris has cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_lowered_below_the_lag_stops_the_runner_at_the_next_window() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&sync(&emu, IncrementType::Detail, "5s").yaml());
    cfg.changelog.poll_interval = Duration::from_secs(5);
    let (task, mut handle) = spawn_pipeline(cfg, dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    // 100 s of lag (within the 600 s TTL), then a TTL of 60 s.
    emu.doris.clock.advance_ms(100_000);
    exec(
        &emu,
        &["ALTER TABLE demo.t SET (\"changelog.ttl_seconds\" = \"60\")"],
    )
    .await;
    let err = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("the runner notices within a poll interval")
        .unwrap()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("has expired according to changelog.ttl_seconds (60 s)"),
        "{err}"
    );
}

/// A clock jump short of the TTL (and its margin) is only lag: the runner reads on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_short_of_the_ttl_is_read_through() {
    let emu = source_support::emu().await;
    setup(&emu, UPSERT_SINK).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&sync(&emu, IncrementType::Detail, "1s").yaml());
    let (task, mut handle) = spawn_pipeline(cfg, dir.path());
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    exec(&emu, &["INSERT INTO demo.t VALUES (3, 'kept')"]).await;
    emu.doris.clock.advance_ms(500_000);
    let now = emu.doris.clock.now_ms();
    assert!(window_past(&mut handle, now, Duration::from_secs(60)).await);
    handle.shutdown.send(true).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.unwrap(), Outcome::Stopped);
    assert_eq!(
        sink_rows(&emu).await,
        mysql_rows(&emu, "SELECT id, v FROM demo.t ORDER BY id").await
    );
}

/// The kept MySQL connection (TTL reads, the visibility barrier before a snapshot) speaks UTC
/// whatever the FE host's zone: the barrier's `@incr` carries UTC times, so on an FE in another
/// zone its window would be off by the zone's offset and protect nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kept_connection_reads_times_in_utc_on_an_fe_in_another_zone() {
    use mysql_async::prelude::Queryable;
    let emu = source_support::emu_with(|c| c.time_zone = "-08:00".into()).await;
    exec(&emu, &["CREATE DATABASE demo", SOURCE]).await;
    let settings = source_support::settings(&emu, "demo.t");
    // What a client that does not set the zone gets from this FE.
    let mut plain = mysql_async::Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(emu.ports().query_port)
            .user(Some("root"))
            .pass(Some(""))
            .prefer_socket(false),
    )
    .await
    .unwrap();
    let zone: Option<String> = plain.query_first("SELECT @@time_zone").await.unwrap();
    assert_eq!(zone.as_deref(), Some("-08:00"));
    let mut kept = dcs_runner::source::properties::connect(&settings)
        .await
        .unwrap();
    let zone: Option<String> = kept.query_first("SELECT @@time_zone").await.unwrap();
    assert_eq!(zone.as_deref(), Some("+00:00"));
}
