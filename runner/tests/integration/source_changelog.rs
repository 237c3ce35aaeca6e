//! The changelog reader against the emulator: `@incr` windows for each increment type, chained
//! windows under concurrent writes, visibility retries, expiry and the session time zone.

use crate::source_support;

use std::collections::BTreeMap;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Int8Array, RecordBatch};
use dcs_crds::spec::IncrementType;
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::IncrFault;
use dcs_runner::Error;
use dcs_runner::checkpoint::Offset;
use dcs_runner::settings::{ChangelogOptions, StreamRetry};
use dcs_runner::source::changelog::{ChangelogEvent, ChangelogReader, ChangelogWindow, OP_COLUMN};
use dcs_runner::source::flight::{FlightSession, resolve_flight_port};
use dcs_runner::source::row_kind::{RowKind, row_kinds};
use source_support::*;
use tokio::sync::mpsc;

fn options(increment_type: IncrementType) -> ChangelogOptions {
    ChangelogOptions {
        increment_type,
        poll_interval: Duration::from_millis(200),
        visible_wait_timeout: Duration::from_secs(10),
        retry_delay: Duration::from_millis(20),
        max_retry_delay: Duration::from_millis(50),
        seam_start_ms: None,
        stream_retry: StreamRetry {
            max_retries: 3,
            base: Duration::from_millis(20),
            max: Duration::from_millis(50),
        },
    }
}

async fn reader(emu: &RunningEmulator, table: &str, opts: ChangelogOptions) -> ChangelogReader {
    let fields = vec!["id".to_owned(), "name".to_owned(), "age".to_owned()];
    ChangelogReader::new(http(settings(emu, table)), fields, opts)
        .await
        .unwrap()
}

/// (id, kind) of every changelog row, in arrival order.
fn changes(batches: &[RecordBatch]) -> Vec<(i32, RowKind)> {
    let mut out = Vec::new();
    for b in batches {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int32Type>();
        let ops = b
            .column_by_name(OP_COLUMN)
            .unwrap()
            .as_any()
            .downcast_ref::<Int8Array>()
            .unwrap();
        for (i, kind) in row_kinds(ops).unwrap().into_iter().enumerate() {
            out.push((ids.value(i), kind));
        }
    }
    out
}

/// Everything sent so far: batches and finished windows.
fn drain(rx: &mut mpsc::Receiver<ChangelogEvent>) -> (Vec<RecordBatch>, Vec<ChangelogWindow>) {
    let (mut batches, mut windows) = (Vec::new(), Vec::new());
    while let Ok(ev) = rx.try_recv() {
        match ev {
            ChangelogEvent::Batch(b) => batches.push(b),
            ChangelogEvent::WindowDone { window, .. } => windows.push(window),
            ChangelogEvent::WindowStart { .. } => {}
        }
    }
    (batches, windows)
}

/// A table with rows 1, 2, 3, an offset after them, then: update 1, delete 2, insert 4.
async fn scripted(emu: &RunningEmulator) -> Offset {
    exec(emu, &["CREATE DATABASE src", &unique_ddl("src.t", 3)]).await;
    exec(
        emu,
        &["INSERT INTO src.t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)"],
    )
    .await;
    emu.doris.clock.advance_ms(1_000);
    let start = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms());
    emu.doris.clock.advance_ms(1_000);
    exec(
        emu,
        &[
            "UPDATE src.t SET age = 11 WHERE id = 1",
            "DELETE FROM src.t WHERE id = 2",
            "INSERT INTO src.t VALUES (4, 'd', 40)",
        ],
    )
    .await;
    emu.doris.clock.advance_ms(2_000);
    start
}

async fn one_window(
    emu: &RunningEmulator,
    t: IncrementType,
    start: &Offset,
) -> Vec<(i32, RowKind)> {
    let mut r = reader(emu, "src.t", options(t)).await;
    let (tx, mut rx) = mpsc::channel(64);
    let (window, stats) = r.poll_once(start, &tx).await.unwrap().expect("a window");
    r.close().await;
    assert_eq!(&window.start, start);
    assert!(stats.delivered);
    let (batches, windows) = drain(&mut rx);
    assert_eq!(windows, vec![window], "WindowDone comes after the batches");
    let got = changes(&batches);
    assert_eq!(stats.rows as usize, got.len());
    got
}

#[tokio::test]
async fn detail_returns_every_change_in_order() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    let got = one_window(&emu, IncrementType::Detail, &start).await;
    assert_eq!(
        got,
        vec![
            (1, RowKind::UpdateBefore),
            (1, RowKind::UpdateAfter),
            (2, RowKind::Delete),
            (4, RowKind::Insert),
        ]
    );
}

#[tokio::test]
async fn min_delta_returns_the_net_change_per_key() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    let mut got = one_window(&emu, IncrementType::MinDelta, &start).await;
    got.sort_by_key(|(id, k)| (*id, *k as u8));
    assert_eq!(
        got,
        vec![
            (1, RowKind::UpdateBefore),
            (1, RowKind::UpdateAfter),
            (2, RowKind::Delete),
            (4, RowKind::Insert),
        ]
    );
}

#[tokio::test]
async fn append_only_returns_new_keys_only() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    let got = one_window(&emu, IncrementType::AppendOnly, &start).await;
    assert_eq!(got, vec![(4, RowKind::Insert)]);
}

#[tokio::test]
async fn an_empty_window_is_done_and_an_unchanged_now_waits() {
    let emu = emu().await;
    exec(&emu, &["CREATE DATABASE src", &unique_ddl("src.t", 1)]).await;
    let mut r = reader(&emu, "src.t", options(IncrementType::Detail)).await;
    let now = r.now_offset().await.unwrap();
    let (tx, mut rx) = mpsc::channel(8);
    // Doris "now" is still in the start's second: nothing to read.
    let future = dcs_runner::source::tso::offset_at(now.epoch_ms + 5_000);
    let err = r.poll_once(&future, &tx).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Current Doris timestamp moved backwards"),
        "{err}"
    );
    if emu.doris.clock.now_ms() - now.epoch_ms < 900 {
        assert!(r.poll_once(&now, &tx).await.unwrap().is_none());
    }
    emu.doris.clock.advance_ms(1_500);
    let (w, stats) = r.poll_once(&now, &tx).await.unwrap().unwrap();
    assert_eq!(stats.rows, 0);
    let (batches, windows) = drain(&mut rx);
    assert!(batches.iter().all(|b| b.num_rows() == 0));
    assert_eq!(windows, vec![w]);
    r.close().await;
}

#[tokio::test]
async fn chained_windows_have_no_gaps_or_duplicates_under_concurrent_writes() {
    let emu = std::sync::Arc::new(emu().await);
    exec(&emu, &["CREATE DATABASE src", &unique_ddl("src.t", 3)]).await;
    let r = reader(&emu, "src.t", options(IncrementType::Detail)).await;
    let start = r.now_offset().await.unwrap();
    let (tx, mut rx) = mpsc::channel(4);
    let run = tokio::spawn(r.run(start.clone(), None, tx));

    let mut writer = {
        let emu = emu.clone();
        tokio::spawn(async move {
            for i in 1..=150 {
                exec(
                    &emu,
                    &[&format!("INSERT INTO src.t VALUES ({i}, 'n{i}', {i})")],
                )
                .await;
                if i % 3 == 0 {
                    exec(
                        &emu,
                        &[&format!(
                            "UPDATE src.t SET age = age + 1000 WHERE id = {}",
                            i - 1
                        )],
                    )
                    .await;
                }
                tokio::time::sleep(Duration::from_millis(15)).await;
            }
            emu.doris.clock.now_ms()
        })
    };

    let mut batches = Vec::new();
    let mut windows: Vec<ChangelogWindow> = Vec::new();
    let mut last_write = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if last_write.is_none() && writer.is_finished() {
            last_write = Some((&mut writer).await.unwrap());
            emu.doris.clock.advance_ms(1_500);
        }
        match tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("windows keep coming")
        {
            Some(ChangelogEvent::Batch(b)) => batches.push(b),
            Some(ChangelogEvent::WindowStart { .. }) => {}
            Some(ChangelogEvent::WindowDone { window, .. }) => {
                let past_writes = last_write.is_some_and(|t| window.end.epoch_ms > t);
                windows.push(window);
                if past_writes {
                    break;
                }
            }
            None => panic!("the reader stopped: {:?}", run.await),
        }
    }
    drop(rx);
    run.await.unwrap().unwrap();

    assert!(windows.len() >= 2, "{} windows", windows.len());
    assert_eq!(windows[0].start, start);
    for pair in windows.windows(2) {
        assert_eq!(pair[0].end, pair[1].start, "windows chain end → start");
    }
    let mut per_id: BTreeMap<i32, Vec<RowKind>> = BTreeMap::new();
    for (id, kind) in changes(&batches) {
        per_id.entry(id).or_default().push(kind);
    }
    assert_eq!(per_id.len(), 150);
    for (id, kinds) in per_id {
        let updated = id % 3 == 2;
        let expected = if updated {
            vec![RowKind::Insert, RowKind::UpdateBefore, RowKind::UpdateAfter]
        } else {
            vec![RowKind::Insert]
        };
        assert_eq!(kinds, expected, "changes of id {id}");
    }
}

#[tokio::test]
async fn visibility_errors_retry_the_same_window() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    let mut r = reader(&emu, "src.t", options(IncrementType::Detail)).await;
    emu.doris.counters.reset();
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5101,
            count: 2,
        })
    });
    let (tx, mut rx) = mpsc::channel(64);
    let (w, stats) = r.poll_once(&start, &tx).await.unwrap().unwrap();
    r.close().await;
    assert_eq!(stats.attempts, 3);
    assert_eq!(
        emu.doris.counters.get("sql_incr"),
        3,
        "the window was asked for three times"
    );
    assert_eq!(
        emu.doris.counters.get("flight_get_flight_info"),
        1 + 3,
        "SET time_zone, then 3 × @incr"
    );
    assert_eq!(
        emu.doris.counters.get("flight_handshake"),
        1,
        "one session for all attempts"
    );
    let (batches, windows) = drain(&mut rx);
    assert_eq!(windows, vec![w]);
    assert_eq!(changes(&batches).len(), 4, "the rows once");
}

#[tokio::test]
async fn visibility_errors_fail_after_the_wait_timeout_with_the_doris_message() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    let mut opts = options(IncrementType::Detail);
    opts.visible_wait_timeout = Duration::from_millis(300);
    let mut r = reader(&emu, "src.t", opts).await;
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5101,
            count: 1_000,
        })
    });
    let (tx, mut rx) = mpsc::channel(64);
    let began = std::time::Instant::now();
    let err = r.poll_once(&start, &tx).await.unwrap_err();
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(
        !err.is_window_not_ready(),
        "the final error is not retryable: {err:?}"
    );
    assert!(
        err.to_string().contains(
            "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT, requestedEndTimestampMs="
        ),
        "{err}"
    );
    assert!(emu.doris.counters.get("sql_incr") > 2);
    assert!(drain(&mut rx).1.is_empty(), "no window is done");

    // 0s: no retries at all.
    let mut opts = options(IncrementType::Detail);
    opts.visible_wait_timeout = Duration::ZERO;
    let mut r = reader(&emu, "src.t", opts).await;
    emu.doris.counters.reset();
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5100,
            count: 1,
        })
    });
    let err = r.poll_once(&start, &tx).await.unwrap_err();
    assert!(
        err.to_string().contains("ERR_INCR_WINDOW_NOT_READY"),
        "{err}"
    );
    assert_eq!(emu.doris.counters.get("sql_incr"), 1);
}

#[tokio::test]
async fn an_expired_start_stops_before_anything_is_read_under_every_increment_type() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            "CREATE TABLE src.t (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\", \
             \"changelog.ttl_seconds\" = \"60\")",
            "INSERT INTO src.t VALUES (1, 'a', 1)",
        ],
    )
    .await;
    let start = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms() - 1_000);
    emu.doris.clock.advance_ms(120_000);
    for increment in [
        IncrementType::MinDelta,
        IncrementType::Detail,
        IncrementType::AppendOnly,
    ] {
        emu.doris.counters.reset();
        let mut r = reader(&emu, "src.t", options(increment)).await;
        let (tx, _rx) = mpsc::channel(64);
        let err = r.poll_once(&start, &tx).await.unwrap_err();
        assert!(
            matches!(err, Error::OffsetExpired { gone: true, .. }),
            "{err:?}"
        );
        assert_eq!(err.exit_code(), 3);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "Changelog offset {} has expired according to changelog.ttl_seconds (60 s): Doris's now is ",
                start.timestamp
            )),
            "{msg}"
        );
        // Detail and appendOnly would have skipped the expired part silently: nothing is read.
        assert_eq!(emu.doris.counters.get("sql_incr"), 0, "{increment:?}");
    }
}

#[tokio::test]
async fn a_start_within_the_safety_margin_of_expiry_is_not_read() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            "CREATE TABLE src.t (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\", \
             \"changelog.ttl_seconds\" = \"600\")",
        ],
    )
    .await;
    let start = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms());
    // 10 s of retention left: inside the 30 s margin, not gone yet.
    emu.doris.clock.advance_ms(590_000);
    let mut r = reader(&emu, "src.t", options(IncrementType::Detail)).await;
    let (tx, _rx) = mpsc::channel(64);
    let err = r.poll_once(&start, &tx).await.unwrap_err();
    assert!(
        matches!(err, Error::OffsetExpired { gone: false, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("are about to go (the offset is within the 30 s safety margin of that edge)"),
        "{err}"
    );
    // With the TTL raised, the same window is read.
    exec(
        &emu,
        &["ALTER TABLE src.t SET (\"changelog.ttl_seconds\" = \"3600\")"],
    )
    .await;
    assert!(r.poll_once(&start, &tx).await.unwrap().is_some());
}

#[tokio::test]
async fn the_flight_session_reads_in_utc() {
    let emu = emu().await;
    let s = settings(&emu, "src.t");
    let port = resolve_flight_port(&http(s.clone())).await.unwrap();
    let mut session = FlightSession::connect(&s, port).await.unwrap();
    let batches: Vec<RecordBatch> = futures::TryStreamExt::try_collect(
        session
            .query("SHOW VARIABLES LIKE 'time_zone'")
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    let rows = batch_rows(&batches, None);
    assert_eq!(
        rows,
        vec![vec!["time_zone".to_owned(), "+00:00".to_owned()]]
    );
    session.close().await;
    assert_eq!(emu.doris.counters.get("flight_close_session"), 1);
}

#[tokio::test]
async fn an_expired_token_reconnects_once_and_reads_the_window() {
    let emu = emu().await;
    let start = scripted(&emu).await;
    // The changelog keeps a week, more than the token lives.
    exec(
        &emu,
        &["ALTER TABLE src.t SET (\"changelog.ttl_seconds\" = \"604800\")"],
    )
    .await;
    let mut r = reader(&emu, "src.t", options(IncrementType::Detail)).await;
    let (tx, mut rx) = mpsc::channel(64);
    let (first, _) = r.poll_once(&start, &tx).await.unwrap().unwrap();
    drain(&mut rx);
    // Doris's arrow_flight_token_alive_time is 4320 minutes.
    emu.doris.clock.advance_ms(4_320 * 60_000 + 1_000);
    let before_insert = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms());
    exec(&emu, &["INSERT INTO src.t VALUES (5, 'e', 50)"]).await;
    emu.doris.clock.advance_ms(1_000);
    // The next window (three days behind: the first minute of the catch-up) reconnects.
    let (second, _) = r.poll_once(&first.end, &tx).await.unwrap().unwrap();
    assert_eq!(second.start, first.end);
    assert_eq!(
        emu.doris.counters.get("flight_handshake"),
        2,
        "one reconnect"
    );
    // The session goes on: the window holding the insert is read on it.
    let (third, _) = r.poll_once(&before_insert, &tx).await.unwrap().unwrap();
    r.close().await;
    assert_eq!(third.start, before_insert);
    assert_eq!(emu.doris.counters.get("flight_handshake"), 2);
    let (batches, _) = drain(&mut rx);
    assert_eq!(changes(&batches), vec![(5, RowKind::Insert)]);
}

#[tokio::test]
async fn binlog_spelled_tables_read_and_expire_with_their_own_message() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            "CREATE TABLE src.b (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \
             \"binlog.enable\" = \"true\", \"binlog.format\" = \"ROW\", \
             \"binlog.need_historical_value\" = \"true\", \"binlog.ttl_seconds\" = \"60\")",
        ],
    )
    .await;
    let start = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms() - 1_000);
    exec(&emu, &["INSERT INTO src.b VALUES (1, 'a', 1), (2, 'b', 2)"]).await;
    emu.doris.clock.advance_ms(2_000);
    let mut r = reader(&emu, "src.b", options(IncrementType::Detail)).await;
    let (tx, mut rx) = mpsc::channel(64);
    r.poll_once(&start, &tx).await.unwrap().unwrap();
    let (batches, _) = drain(&mut rx);
    assert_eq!(
        changes(&batches),
        vec![(1, RowKind::Insert), (2, RowKind::Insert)]
    );

    emu.doris.clock.advance_ms(120_000);
    let mut r = reader(&emu, "src.b", options(IncrementType::MinDelta)).await;
    let err = r.poll_once(&start, &tx).await.unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "Changelog offset {} has expired according to binlog.ttl_seconds (60 s)",
            start.timestamp
        )),
        "{err}"
    );
}

#[tokio::test]
async fn a_window_cut_mid_stream_is_read_again_without_losing_or_repeating_rows() {
    let emu = emu().await;
    exec(&emu, &["CREATE DATABASE src", &unique_ddl("src.t", 3)]).await;
    let start = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms());
    emu.doris.clock.advance_ms(1_000);
    // One commit of 9000 rows, then updates: the window streams three 4096-row batches.
    let values: Vec<String> = (1..=9_000).map(|i| format!("({i}, 'n{i}', {i})")).collect();
    exec(
        &emu,
        &[&format!("INSERT INTO src.t VALUES {}", values.join(", "))],
    )
    .await;
    exec(&emu, &["UPDATE src.t SET age = 0 WHERE id < 50"]).await;
    emu.doris.clock.advance_ms(1_000);
    let end = dcs_runner::source::tso::offset_at(emu.doris.clock.now_ms());
    let window = ChangelogWindow { start, end };

    let read = |cut: bool| {
        let emu = &emu;
        let window = window.clone();
        async move {
            if cut {
                emu.doris
                    .faults
                    .update(|f| f.flight_cut_after_batches = Some(1));
            }
            let mut r = reader(emu, "src.t", options(IncrementType::Detail)).await;
            let (tx, mut rx) = mpsc::channel(64);
            let stats = r.read_window(&window, 0, &tx).await.unwrap();
            r.close().await;
            let (batches, windows) = drain(&mut rx);
            assert_eq!(windows, vec![window.clone()]);
            (stats, batch_rows(&batches, None))
        }
    };
    let (_, whole) = read(false).await;
    assert_eq!(whole.len(), 9_000 + 2 * 49);
    let before = emu.doris.counters.get("flight_do_get_be");
    let (stats, resumed) = read(true).await;
    assert_eq!(
        emu.doris.faults.get().flight_cut_after_batches,
        None,
        "the cut happened"
    );
    assert_eq!(
        emu.doris.counters.get("flight_do_get_be") - before,
        2,
        "read twice"
    );
    assert_eq!(stats.rows, whole.len() as u64);
    assert_eq!(resumed, whole, "the same rows in the same order, each once");
}
