//! The snapshot seam of an `initial` sync: a change made after T0 and already read by the snapshot
//! must not be lost by a MIN_DELTA window that nets it away.

use crate::source_support;

use std::time::Duration;

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{IncrementType, SinkMode, StartupMode};
use dcs_runner::pipeline::Phase;
use dcs_runner::settings::{Credentials, PipelineConfig};
use source_support::{exec, mysql_rows, spawn_pipeline, stored_checkpoint, window_past};

/// `r.src` into `r.dst` on the emulator, `initial`, polled every second.
fn seam_sync(emu: &dcs_doris_emu::RunningEmulator) -> SyncBuilder {
    let fe = emu.fe_http_addr();
    SyncBuilder::new()
        .name("seam")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("r.src")
        .source_secret("s")
        .mode(StartupMode::Initial)
        .poll_interval("1s")
        .sink_fe(&fe)
        .sink_table("r.dst")
        .sink_secret("d")
}

/// Runs an `initial` sync where key 2 is inserted after T0 (so the snapshot reads it) and deleted
/// in the first changelog window; returns (source, sink) rows.
async fn insert_after_t0_then_delete(
    increment_type: IncrementType,
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE r",
            "CREATE TABLE r.src (id INT NOT NULL, v INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
             \"changelog.need_historical_value\" = \"true\")",
            "CREATE TABLE r.dst (id INT NOT NULL, v INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
            "INSERT INTO r.src VALUES (1, 1)",
        ],
    )
    .await;
    // Line the clock up just after a second boundary: T0 is floored to the second, so key 2's
    // insert lands after T0 and is also read by the snapshot.
    emu.doris.clock.advance_ms(2000);
    let now = emu.doris.clock.now_ms();
    emu.doris.clock.advance_ms(1000 - now % 1000 + 5);
    exec(&emu, &["INSERT INTO r.src VALUES (2, 2)"]).await;
    let yaml = seam_sync(&emu).increment_type(increment_type).yaml();
    let sync = dcs_crds::from_manifest(&yaml).unwrap();
    let credentials = Credentials {
        source_user: "root".into(),
        sink_user: "root".into(),
        ..Default::default()
    };
    let mut config = PipelineConfig::from_sync(&sync, credentials).unwrap();
    config.changelog.poll_interval = Duration::from_millis(100);
    config.checkpoint_interval = Duration::from_millis(200);
    let dir = tempfile::tempdir().unwrap();
    let (task, mut handle) = spawn_pipeline(config, dir.path());
    let wait = Duration::from_secs(30);
    tokio::time::timeout(wait, async {
        while handle.progress.borrow_and_update().phase != Phase::Changelog {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the sync reaches the changelog");
    exec(&emu, &["DELETE FROM r.src WHERE id = 2"]).await;
    let last_write = emu.doris.clock.now_ms();
    emu.doris.clock.advance_ms(1000);
    assert!(
        window_past(&mut handle, last_write, wait).await,
        "a window passes the delete"
    );
    handle.shutdown.send(true).unwrap();
    task.await.unwrap().unwrap();
    (
        mysql_rows(&emu, "SELECT * FROM r.src ORDER BY id").await,
        mysql_rows(&emu, "SELECT * FROM r.dst ORDER BY id").await,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_at_the_seam_reaches_the_sink_under_min_delta() {
    let (source, sink) = insert_after_t0_then_delete(IncrementType::MinDelta).await;
    assert_eq!(source, vec![vec!["1".to_string(), "1".to_string()]]);
    assert_eq!(sink, source);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_at_the_seam_reaches_the_sink_under_detail() {
    let (source, sink) = insert_after_t0_then_delete(IncrementType::Detail).await;
    assert_eq!(sink, source);
}

/// A table filled just before an `initial` sync starts: the first changelog window starts at T0's
/// second and returns those inserts again, though the snapshot holds them. Every row reaches the
/// sink once and is counted once, into an upsert sink and into a changelog-mode sink alike.
/// Doris's clock stands still while the table is filled and the sync starts (so T0 falls in the
/// same second as the inserts), then moves ten times faster than real time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_committed_in_t0s_second_before_t0_reach_the_sink_once() {
    for mode in [SinkMode::Upsert, SinkMode::Changelog] {
        let emu = std::sync::Arc::new(source_support::emu().await);
        let sink_ddl = if mode == SinkMode::Upsert {
            "CREATE TABLE r.dst (id INT NOT NULL, v INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
             BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")"
        } else {
            "CREATE TABLE r.dst (id INT NOT NULL, v INT, dcs_op VARCHAR(2), dcs_tso BIGINT, \
             dcs_lsn BIGINT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")"
        };
        exec(
            &emu,
            &[
                "CREATE DATABASE r",
                "CREATE TABLE r.src (id INT NOT NULL, v INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
                 BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
                 \"changelog.need_historical_value\" = \"true\")",
                sink_ddl,
            ],
        )
        .await;
        emu.doris.clock.freeze();
        let now = emu.doris.clock.now_ms();
        emu.doris.clock.advance_ms(1000 - now % 1000 + 100);
        for chunk in 0..4 {
            let values: Vec<String> = (1..=500)
                .map(|i| format!("({}, {i})", chunk * 500 + i))
                .collect();
            exec(
                &emu,
                &[&format!("INSERT INTO r.src VALUES {}", values.join(", "))],
            )
            .await;
        }
        let yaml = seam_sync(&emu).sink_mode(mode).yaml();
        let sync = dcs_crds::from_manifest(&yaml).unwrap();
        let credentials = Credentials {
            source_user: "root".into(),
            sink_user: "root".into(),
            ..Default::default()
        };
        let mut config = PipelineConfig::from_sync(&sync, credentials).unwrap();
        config.changelog.poll_interval = Duration::from_millis(100);
        config.checkpoint_interval = Duration::from_millis(200);
        let dir = tempfile::tempdir().unwrap();
        let (task, mut handle) = spawn_pipeline(config, dir.path());
        // T0 (the runner's first /api/tso) is taken while the clock stands still; then time
        // moves again.
        let wait = Duration::from_secs(60);
        tokio::time::timeout(wait, async {
            while emu.doris.counters.get("fe_tso") == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the sync takes T0");
        let ticking = emu.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                ticking.doris.clock.advance_ms(200);
            }
        });
        let after = emu.doris.clock.now_ms() + 2_000;
        assert!(window_past(&mut handle, after, wait).await, "{mode:?}");
        handle.shutdown.send(true).unwrap();
        task.await.unwrap().unwrap();
        ticker.abort();
        let cp = stored_checkpoint(dir.path()).await;
        assert_eq!(cp.counters.rows_written, 2000, "{mode:?}: rowsWritten");
        let sink = mysql_rows(&emu, "SELECT id FROM r.dst").await;
        assert_eq!(sink.len(), 2000, "{mode:?}: every row once");
    }
}
