//! The MySQL front end, through mysql_async 0.37 (the client the runner and operator use).

use crate::common;

use mysql_async::prelude::*;
use mysql_async::{Opts, OptsBuilder, Pool, Row};

fn opts(port: u16, password: &str, db: Option<&str>) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(password))
        .db_name(db)
        .prefer_socket(false)
        .into()
}

/// id, name, age, score, updated.
type StudentRow = (i32, String, Option<i32>, Option<String>, Option<String>);

async fn conn(port: u16) -> mysql_async::Conn {
    mysql_async::Conn::new(opts(port, "", None))
        .await
        .expect("connects")
}

#[tokio::test]
async fn ddl_dml_and_typed_select() {
    let emu = common::emu().await;
    let mut c = conn(emu.ports().query_port).await;
    c.query_drop("CREATE DATABASE test").await.unwrap();
    c.query_drop(common::STUDENT_DDL).await.unwrap();
    // Affected-row counts are checked with the mysql CLI and pymysql (conformance/): mysql_async
    // 0.37 reports 0 for text-protocol OK packets from opensrv-mysql.
    c.query_drop(
        "INSERT INTO test.student VALUES (1, 'ann', 20, 90.5, '2024-01-02 03:04:05.123'), \
         (2, 'bob', NULL, NULL, NULL), (1, 'ann', 21, 91.25, '2024-01-03 00:00:00')",
    )
    .await
    .unwrap();
    let rows: Vec<StudentRow> = c
        .query("SELECT id, name, age, score, updated FROM test.student ORDER BY id")
        .await
        .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                1,
                "ann".into(),
                Some(21),
                Some("91.25".into()),
                Some("2024-01-03 00:00:00.000".into())
            ),
            (2, "bob".into(), None, None, None),
        ]
    );
    c.query_drop("UPDATE test.student SET age = age + 1 WHERE id = 1")
        .await
        .unwrap();
    c.query_drop("DELETE FROM test.student WHERE id = 2")
        .await
        .unwrap();
    let rows: Vec<(i32, i32)> = c.query("SELECT id, age FROM test.student").await.unwrap();
    assert_eq!(rows, vec![(1, 22)]);
    let count: Option<i64> = c
        .query_first("SELECT COUNT(*) FROM test.student")
        .await
        .unwrap();
    assert_eq!(count, Some(1));
}

#[tokio::test]
async fn prepared_statements_bind_parameters() {
    let emu = common::emu().await;
    common::setup_sql(&emu, &["CREATE DATABASE test", common::STUDENT_DDL]).await;
    let mut c = mysql_async::Conn::new(opts(emu.ports().query_port, "", Some("test")))
        .await
        .unwrap();
    c.exec_drop(
        "INSERT INTO student (id, name, age) VALUES (?, ?, ?)",
        (7, "it's \"quoted\" ?", 30),
    )
    .await
    .unwrap();
    let name: Option<String> = c
        .exec_first("SELECT name FROM student WHERE id = ?", (7,))
        .await
        .unwrap();
    assert_eq!(name.as_deref(), Some("it's \"quoted\" ?"));
}

#[tokio::test]
async fn errors_carry_doris_messages() {
    let emu = common::emu().await;
    common::setup_sql(&emu, &["CREATE DATABASE test"]).await;
    let mut c = conn(emu.ports().query_port).await;
    let err = c.query_drop("SELECT * FROM test.nope").await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert!(e.message.contains("nope"), "{}", e.message),
        other => panic!("expected a server error, got {other:?}"),
    }
    // The connection survives errors, including garbage.
    let err = c.query_drop("\u{0}\u{1} garbage ((( '").await.unwrap_err();
    assert!(matches!(err, mysql_async::Error::Server(_)), "{err:?}");
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn wrong_password_is_refused_and_right_one_accepted() {
    let emu = common::emu_with(|c| c.password = "s3cret".into()).await;
    let port = emu.ports().query_port;
    let err = mysql_async::Conn::new(opts(port, "wrong", None))
        .await
        .unwrap_err();
    match err {
        // opensrv-mysql answers a failed handshake with 1698 and its own text (Doris: 1045).
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1698);
            assert!(
                e.message.starts_with("Authenticate failed, user: \"root\""),
                "{}",
                e.message
            );
        }
        other => panic!("expected access denied, got {other:?}"),
    }
    let mut c = mysql_async::Conn::new(opts(port, "s3cret", None))
        .await
        .unwrap();
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn show_frontends_reports_the_flight_port() {
    let emu = common::emu().await;
    let mut c = conn(emu.ports().query_port).await;
    let rows: Vec<Row> = c.query("SHOW FRONTENDS").await.unwrap();
    assert_eq!(rows.len(), 1);
    let port: String = rows[0]
        .get("ArrowFlightSqlPort")
        .expect("column ArrowFlightSqlPort");
    assert_eq!(port, emu.ports().fe_flight_port.to_string());
    let http: String = rows[0].get("HttpPort").expect("column HttpPort");
    assert_eq!(http, emu.ports().fe_http_port.to_string());
}

#[tokio::test]
async fn table_properties_and_columns_in_information_schema() {
    let emu = common::emu().await;
    common::setup_sql(&emu, &["CREATE DATABASE test", common::STUDENT_DDL]).await;
    let mut c = conn(emu.ports().query_port).await;
    let props: Vec<(String, String)> = c
        .query(
            "SELECT PROPERTY_NAME, PROPERTY_VALUE FROM information_schema.table_properties \
             WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'student'",
        )
        .await
        .unwrap();
    assert!(
        props.contains(&("changelog.enable".into(), "true".into())),
        "{props:?}"
    );
    assert!(
        props.contains(&("changelog.ttl_seconds".into(), "86400".into())),
        "{props:?}"
    );
    let cols: Vec<(String, String)> = c
        .query(
            "SELECT COLUMN_NAME, COLUMN_KEY FROM information_schema.columns \
             WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'student' ORDER BY ORDINAL_POSITION",
        )
        .await
        .unwrap();
    assert_eq!(cols[0], ("id".into(), "UNI".into()));
    assert_eq!(cols.len(), 5);
}

#[tokio::test]
async fn a_pool_of_connections_works_concurrently() {
    let emu = common::emu().await;
    common::setup_sql(&emu, &["CREATE DATABASE test", common::STUDENT_DDL]).await;
    let pool = Pool::new(opts(emu.ports().query_port, "", Some("test")));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = pool.get_conn().await.unwrap();
            c.query_drop(format!(
                "INSERT INTO student (id, name) VALUES ({i}, 'n{i}')"
            ))
            .await
            .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut c = pool.get_conn().await.unwrap();
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM student").await.unwrap();
    assert_eq!(n, Some(8));
    drop(c);
    pool.disconnect().await.unwrap();
}

#[tokio::test]
async fn refused_connections_fault_refuses() {
    let emu = common::emu().await;
    emu.doris.faults.update(|f| f.refuse_connections = true);
    assert!(
        mysql_async::Conn::new(opts(emu.ports().query_port, "", None))
            .await
            .is_err()
    );
    emu.doris.faults.clear();
    assert!(
        mysql_async::Conn::new(opts(emu.ports().query_port, "", None))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn an_fe_without_the_changelog_feature_refuses_changelog_tables() {
    let emu = common::emu_with(|c| c.feature_changelog = false).await;
    let mut c = conn(emu.ports().query_port).await;
    c.query_drop("CREATE DATABASE test").await.unwrap();
    let err = c.query_drop(common::STUDENT_DDL).await.unwrap_err();
    match err {
        mysql_async::Error::Server(e) => assert_eq!(
            e.message,
            "errCode = 2, detailMessage = changelog is not enabled, set enable_feature_changelog=true in fe.conf"
        ),
        other => panic!("expected a server error, got {other:?}"),
    }
    // Tables without the changelog are still fine.
    c.query_drop(
        "CREATE TABLE test.plain (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_timed_refusal_disarms_by_itself() {
    let emu = common::emu().await;
    emu.doris
        .faults
        .update(|f| f.refuse_connections_ms = Some(300));
    assert!(
        mysql_async::Conn::new(opts(emu.ports().query_port, "", None))
            .await
            .is_err()
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(
        mysql_async::Conn::new(opts(emu.ports().query_port, "", None))
            .await
            .is_ok()
    );
    assert_eq!(emu.doris.faults.get().refuse_connections_ms, None);
}

#[tokio::test]
async fn an_ok_packet_carries_its_info_length_encoded_as_doris_writes_it() {
    let emu = common::emu().await;
    let mut c = conn(emu.ports().query_port).await;
    c.query_drop("CREATE DATABASE test").await.unwrap();
    c.query_drop(common::STUDENT_DDL).await.unwrap();
    c.query_drop("INSERT INTO test.student VALUES (1, 'ann', 20, 90.5, NULL)")
        .await
        .unwrap();
    // Doris writes the info as a length-encoded string even without CLIENT_SESSION_TRACK, and
    // clients (mysql_async here, MySQL Connector/J) read it so: a bare string loses its first
    // byte to the length (mysql_async) or fails the statement (Connector/J).
    let info = c.info().into_owned();
    assert!(info.starts_with("{'label':'insert_"), "{info:?}");
    assert!(info.ends_with("'}"), "{info:?}");
    assert!(info.contains("'status':'VISIBLE', 'txnId':'"), "{info:?}");
}
