//! Reaching the source: Doris "now" from /api/tso with failover, credentials errors on every
//! port, and the table's changelog properties over MySQL.

use crate::source_support;

use dcs_doris_emu::faults::SqlStall;
use dcs_runner::Error;
use dcs_runner::source::flight::FlightSession;
use dcs_runner::source::properties::{
    KeysModel, PropertySpelling, SourceTableInfo, read_table_info,
};
use dcs_runner::source::tso::{self, NowOffsets as _};
use source_support::*;
use std::time::Duration;

#[tokio::test]
async fn doris_now_comes_from_the_tso_api() {
    let emu = emu().await;
    emu.doris.clock.advance_ms(10_000);
    let before = emu.doris.clock.now_ms();
    let now = tso::current(&http(settings(&emu, "src.t"))).await.unwrap();
    let after = emu.doris.clock.now_ms();
    assert!((before..=after).contains(&now.physical_ms));
    assert_eq!(tso::tso_to_ms(now.tso), now.physical_ms);
    assert_eq!(now.window_end().epoch_ms, now.physical_ms / 1000 * 1000);
    assert_eq!(emu.doris.counters.get("fe_tso"), 1);
}

#[tokio::test]
async fn tso_rotates_through_fe_nodes_and_reports_the_last_error() {
    let emu = emu().await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let mut s = settings(&emu, "src.t");
    s.fe_nodes = vec![dead_addr.clone(), emu.fe_http_addr()];
    assert!(
        tso::current(&http(s.clone())).await.is_ok(),
        "the second FE answers"
    );

    s.fe_nodes = vec![dead_addr.clone()];
    let err = tso::current(&http(s)).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("Failed to resolve current Doris timestamp after 3 attempts: "),
        "{msg}"
    );
    assert!(msg.contains(&dead_addr), "{msg}");
}

#[tokio::test]
async fn a_wrong_password_is_a_credentials_error_everywhere_without_the_password() {
    let emu = emu_with(|c| c.password = "right-one".into()).await;
    exec(&emu, &["CREATE DATABASE src", &unique_ddl("src.t", 1)]).await;
    let secret = "Wr0ng-Pa55word";
    let s = settings_with_password(&emu, "src.t", secret);

    let http_err = tso::current(&http(s.clone())).await.unwrap_err();
    let flight_err = FlightSession::connect(&s, emu.ports().fe_flight_port)
        .await
        .unwrap_err();
    let mysql_err = read_table_info(&s).await.unwrap_err();
    for err in [&http_err, &flight_err, &mysql_err] {
        assert!(matches!(err, Error::SourceCredentials { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("check the user and password in the source Secret"),
            "{msg}"
        );
        assert!(!msg.contains(secret), "{msg}");
        assert!(!format!("{err:?}").contains(secret));
    }
    assert!(
        http_err
            .to_string()
            .contains("Access denied for user 'root@"),
        "{http_err}"
    );
    assert_eq!(
        emu.doris.counters.get("fe_tso"),
        1,
        "credentials errors are not retried"
    );

    // The right password works on every port.
    let ok = settings_with_password(&emu, "src.t", "right-one");
    tso::current(&http(ok.clone())).await.unwrap();
    FlightSession::connect(&ok, emu.ports().fe_flight_port)
        .await
        .unwrap()
        .close()
        .await;
    read_table_info(&ok).await.unwrap();
}

#[tokio::test]
async fn changelog_properties_are_read() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            "CREATE TABLE src.t (id INT NOT NULL, v VARCHAR(8)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
             \"changelog.need_historical_value\" = \"true\", \"changelog.ttl_seconds\" = \"7200\")",
        ],
    )
    .await;
    // information_schema answers first (SHOW CREATE TABLE is the fallback).
    let props = mysql_rows(
        &emu,
        "SELECT PROPERTY_NAME, PROPERTY_VALUE FROM information_schema.table_properties \
         WHERE TABLE_SCHEMA = 'src' AND TABLE_NAME = 't'",
    )
    .await;
    assert!(
        props.contains(&vec!["changelog.ttl_seconds".to_owned(), "7200".to_owned()]),
        "{props:?}"
    );
    let info = read_table_info(&settings(&emu, "src.t")).await.unwrap();
    assert_eq!(
        info,
        SourceTableInfo {
            spelling: PropertySpelling::Changelog,
            enabled: true,
            need_historical_value: true,
            ttl_seconds: 7200,
            keys: KeysModel::Unique {
                merge_on_write: true
            },
            light_delete: false,
        }
    );
}

#[tokio::test]
async fn binlog_properties_are_detected() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            "CREATE TABLE src.b (id INT NOT NULL, v VARCHAR(8)) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\", \"binlog.enable\" = \"true\", \"binlog.format\" = \"ROW\")",
            "CREATE TABLE src.plain (id INT NOT NULL) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let info = read_table_info(&settings(&emu, "src.b")).await.unwrap();
    assert_eq!(info.spelling, PropertySpelling::Binlog);
    assert!(info.enabled);
    assert!(!info.need_historical_value);
    assert_eq!(info.ttl_seconds, 86_400);
    assert_eq!(info.keys, KeysModel::Duplicate);

    let plain = read_table_info(&settings(&emu, "src.plain")).await.unwrap();
    assert!(!plain.enabled);

    let err = read_table_info(&settings(&emu, "src.nosuch"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Doris { .. }), "{err:?}");
}

/// Holds every statement containing `text` (the FE took it and never answers) until dropped.
struct Stalled<'a>(&'a dcs_doris_emu::RunningEmulator);

impl<'a> Stalled<'a> {
    fn on(emu: &'a dcs_doris_emu::RunningEmulator, text: &str) -> Self {
        emu.doris.faults.update(|f| {
            f.sql_stall = Some(SqlStall {
                contains: text.into(),
                applied: false,
            })
        });
        Self(emu)
    }
}

impl Drop for Stalled<'_> {
    fn drop(&mut self) {
        self.0.doris.faults.update(|f| f.sql_stall = None);
    }
}

#[tokio::test]
async fn a_statement_the_fe_never_answers_fails_within_the_request_timeout() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            &unique_ddl("src.t", 1),
            "CREATE TABLE src.offsets (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, \
             update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1",
        ],
    )
    .await;
    let mut s = settings(&emu, "src.t");
    s.request_timeout = Duration::from_secs(1);
    // Far longer than the request timeout: a hang fails the test, not the machine's speed.
    let bound = Duration::from_secs(60);
    let unavailable = |e: &Error| {
        matches!(e, Error::SourceUnavailable { .. })
            && e.to_string().contains("no MySQL answer within 1s")
    };

    // The table's properties (runner start, `check`).
    let stall = Stalled::on(&emu, "SHOW CREATE TABLE");
    let err = tokio::time::timeout(bound, read_table_info(&s))
        .await
        .expect("reading the table properties hung")
        .unwrap_err();
    assert!(unavailable(&err), "{err:?}");
    drop(stall);

    // The sink-table statements (DDL, columns), here against the source's FE.
    let target = s.mysql_target();
    let mut conn = target.connect().await.unwrap();
    let stall = Stalled::on(&emu, "information_schema.columns");
    let err = tokio::time::timeout(bound, target.columns(&mut conn, &"src.t".parse().unwrap()))
        .await
        .expect("reading the columns hung")
        .unwrap_err();
    assert!(
        err.to_string().contains("no MySQL answer within 1s"),
        "{err:?}"
    );
    drop(stall);

    // The offset table's row, read on start.
    let stall = Stalled::on(&emu, "offset_timestamp");
    let err = tokio::time::timeout(
        bound,
        dcs_runner::pipeline::offset_table::read_start(&s, &"src.offsets".parse().unwrap(), "c1"),
    )
    .await
    .expect("reading the offset table hung")
    .unwrap_err();
    assert!(
        matches!(err, Error::OffsetTable { .. })
            && err.to_string().contains("no MySQL answer within 1s"),
        "{err:?}"
    );
    drop(stall);

    // Once the FE answers again, so does everything.
    read_table_info(&s).await.unwrap();
}

/// Every batch of `SELECT id FROM src.t` over `session`.
async fn read_ids(session: &mut FlightSession) -> Result<Vec<arrow_array::RecordBatch>, Error> {
    let stream = session.query("SELECT id FROM src.t").await?;
    futures::TryStreamExt::try_collect(stream).await
}

/// A rogue FE hands out an Arrow Flight endpoint location on a host of its choosing: the read
/// fails naming the location, and nothing — the bearer token that goes with every `DoGet` least
/// of all — reaches that host, on this attempt or the next.
#[tokio::test]
async fn the_flight_token_goes_only_to_hosts_of_the_cluster() {
    let emu = emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE src",
            &unique_ddl("src.t", 1),
            "INSERT INTO src.t VALUES (1, 'a', 20)",
        ],
    )
    .await;
    // Another loopback address: a host that is not the cluster's (127.0.0.1).
    let stranger = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let foreign = stranger.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = stranger.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    let s = settings(&emu, "src.t");
    let mut session = FlightSession::connect(&s, emu.ports().fe_flight_port)
        .await
        .unwrap();
    // The BE's location, on the FE's host, is read.
    let batches = read_ids(&mut session).await.unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);

    emu.doris
        .faults
        .update(|f| f.flight_location_to = Some(foreign.clone()));
    for attempt in 0..2 {
        let e = read_ids(&mut session).await.unwrap_err();
        let message = e.to_string();
        assert!(
            message.contains(&format!(
                "{foreign}, whose host 127.0.0.2 is not a node of the cluster (neither in feNodes \
                 nor a live BE the FE lists at /api/backends); nothing, the Flight bearer token \
                 included, was sent there"
            )),
            "attempt {attempt}: {message}"
        );
        assert!(matches!(e, Error::UnexpectedResult { .. }), "{e:?}");
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The FE was asked for its BEs once: a stream of foreign locations is not a stream of requests.
    assert_eq!(emu.doris.counters.get("fe_backends"), 1);
    session.close().await;
}
