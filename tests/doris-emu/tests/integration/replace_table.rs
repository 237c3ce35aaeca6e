//! `CREATE TABLE … LIKE`, `ALTER TABLE … REPLACE WITH TABLE` and the `sql_stall` fault, over the
//! MySQL protocol (the way the runner and the operator send them).

use std::time::Duration;

use crate::common;

use common::{STUDENT_DDL, emu, setup_sql};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::SqlStall;
use mysql_async::prelude::Queryable;

async fn conn(emu: &RunningEmulator) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""))
        .db_name(Some("test"));
    mysql_async::Conn::new(opts).await.unwrap()
}

async fn ids(c: &mut mysql_async::Conn, table: &str) -> Vec<(i32, Option<String>)> {
    c.query(format!("SELECT id, name FROM {table} ORDER BY id"))
        .await
        .unwrap()
}

async fn show_create(c: &mut mysql_async::Conn, table: &str) -> String {
    let row: (String, String) = c
        .query_first(format!("SHOW CREATE TABLE {table}"))
        .await
        .unwrap()
        .unwrap();
    row.1
}

async fn failure(c: &mut mysql_async::Conn, sql: &str) -> String {
    match c.query_drop(sql).await {
        Ok(()) => panic!("{sql}: expected an error"),
        Err(e) => e.to_string(),
    }
}

async fn student() -> RunningEmulator {
    let e = emu().await;
    setup_sql(
        &e,
        &[
            "CREATE DATABASE test",
            STUDENT_DDL,
            "INSERT INTO test.student (id, name) VALUES (1, 'old-1'), (2, 'old-2'), (3, 'old-3')",
        ],
    )
    .await;
    e
}

#[tokio::test]
async fn create_table_like_copies_the_definition_without_rows_or_history() {
    let e = student().await;
    let mut c = conn(&e).await;
    c.query_drop("CREATE TABLE student_shadow LIKE student")
        .await
        .unwrap();
    let original = show_create(&mut c, "student").await;
    let copy = show_create(&mut c, "student_shadow").await;
    assert_eq!(
        copy,
        original.replacen("`student`", "`student_shadow`", 1),
        "the copy's DDL differs"
    );
    assert!(copy.contains("\"changelog.enable\" = \"true\""), "{copy}");
    assert!(ids(&mut c, "student_shadow").await.is_empty());
    let changes: Vec<i32> = c
        .query("SELECT id FROM student_shadow@incr('incrementType'='DETAIL')")
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");

    // IF NOT EXISTS, an existing name, a missing source.
    c.query_drop("CREATE TABLE IF NOT EXISTS student_shadow LIKE student")
        .await
        .unwrap();
    let exists = failure(&mut c, "CREATE TABLE student_shadow LIKE student").await;
    assert!(
        exists.contains("Table 'student_shadow' already exists"),
        "{exists}"
    );
    let missing = failure(&mut c, "CREATE TABLE x LIKE no_such").await;
    assert!(missing.contains("Unknown table 'no_such'"), "{missing}");
    // A qualified source in another database, and WITH ROLLUP accepted.
    c.query_drop("CREATE DATABASE other").await.unwrap();
    c.query_drop("CREATE TABLE other.copy LIKE test.student WITH ROLLUP")
        .await
        .unwrap();
    assert!(ids(&mut c, "other.copy").await.is_empty());
}

#[tokio::test]
async fn replace_without_swap_puts_the_other_table_in_place_and_drops_the_old_one() {
    let e = student().await;
    let mut c = conn(&e).await;
    // The replacement has another schema and other properties: Doris does not compare them, the
    // table keeps its own under the new name.
    c.query_drop(
        "CREATE TABLE fresh (id INT NOT NULL, name VARCHAR(64), extra INT) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")",
    )
    .await
    .unwrap();
    c.query_drop("INSERT INTO fresh VALUES (1, 'new-1', 10), (4, 'new-4', 40)")
        .await
        .unwrap();
    let fresh_ddl = show_create(&mut c, "fresh").await;
    c.query_drop("ALTER TABLE student REPLACE WITH TABLE fresh PROPERTIES (\"swap\" = \"false\")")
        .await
        .unwrap();
    assert_eq!(
        ids(&mut c, "student").await,
        vec![(1, Some("new-1".into())), (4, Some("new-4".into()))]
    );
    assert_eq!(
        show_create(&mut c, "student").await,
        fresh_ddl.replacen("`fresh`", "`student`", 1)
    );
    let gone = failure(&mut c, "SELECT * FROM fresh").await;
    assert!(gone.contains("does not exist"), "{gone}");
    let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["student".to_owned()]);
    // The old table's changelog went with it: the new one has none.
    let changes = failure(
        &mut c,
        "SELECT id FROM student@incr('incrementType'='DETAIL')",
    )
    .await;
    assert!(
        changes.contains(dcs_doris_emu::engine::INCR_REQUIRES_CHANGELOG),
        "{changes}"
    );
}

#[tokio::test]
async fn a_replaced_table_brings_its_own_changelog_and_the_old_one_is_gone() {
    let e = student().await;
    let mut c = conn(&e).await;
    c.query_drop("CREATE TABLE shadow LIKE student")
        .await
        .unwrap();
    c.query_drop("INSERT INTO shadow (id, name) VALUES (8, 'eight')")
        .await
        .unwrap();
    c.query_drop("ALTER TABLE student REPLACE WITH TABLE shadow PROPERTIES (\"swap\" = \"false\")")
        .await
        .unwrap();
    let changes: Vec<i32> = c
        .query("SELECT id FROM student@incr('incrementType'='DETAIL') ORDER BY id")
        .await
        .unwrap();
    assert_eq!(changes, vec![8], "only the replacement's own history");
}

#[tokio::test]
async fn replace_swaps_by_default_and_anything_but_true_does_not_swap() {
    let e = student().await;
    let mut c = conn(&e).await;
    c.query_drop("CREATE TABLE b LIKE student").await.unwrap();
    c.query_drop("INSERT INTO b (id, name) VALUES (9, 'b-9')")
        .await
        .unwrap();
    c.query_drop("ALTER TABLE student REPLACE WITH TABLE b")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, "student").await, vec![(9, Some("b-9".into()))]);
    assert_eq!(
        ids(&mut c, "b").await.len(),
        3,
        "swap: the old rows are in b"
    );
    // The older spelling without TABLE, and Java's parseBoolean: "yes" is false.
    c.query_drop("ALTER TABLE test.student REPLACE WITH b PROPERTIES (\"swap\" = \"yes\")")
        .await
        .unwrap();
    assert_eq!(ids(&mut c, "student").await.len(), 3);
    let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["student".to_owned()]);
}

#[tokio::test]
async fn replace_errors() {
    let e = student().await;
    let mut c = conn(&e).await;
    c.query_drop("CREATE TABLE b LIKE student").await.unwrap();
    let cases = [
        (
            "ALTER TABLE student REPLACE WITH TABLE b PROPERTIES (\"swap\" = \"false\", \"force\" = \"true\")",
            "Unknown properties: [force]",
        ),
        (
            "ALTER TABLE student REPLACE WITH TABLE nope",
            "Unknown table 'nope'",
        ),
        (
            "ALTER TABLE nope REPLACE WITH TABLE b",
            "Unknown table 'nope'",
        ),
        (
            "ALTER TABLE student REPLACE WITH TABLE student",
            "Cannot replace table student with itself",
        ),
        (
            "ALTER TABLE student ADD COLUMN z INT, REPLACE WITH TABLE b",
            "REPLACE WITH TABLE cannot be combined with other alter operations",
        ),
    ];
    for (sql, expected) in cases {
        let message = failure(&mut c, sql).await;
        assert!(message.contains(expected), "{sql}: {message}");
    }
    // Nothing changed.
    assert_eq!(ids(&mut c, "student").await.len(), 3);
    let columns: Vec<String> = c
        .query("SELECT column_name FROM information_schema.columns WHERE table_name = 'student'")
        .await
        .unwrap();
    assert!(!columns.iter().any(|c| c == "z"), "{columns:?}");
}

/// A load pre-committed into the replacement commits into it under its new name.
#[tokio::test]
async fn a_load_precommitted_into_the_replacement_commits_after_the_replace() {
    let e = student().await;
    let mut c = conn(&e).await;
    c.query_drop("CREATE TABLE shadow LIKE student")
        .await
        .unwrap();
    let be = format!("http://127.0.0.1:{}", e.ports().be_http_port);
    let http = crate::common::plain_reqwest();
    let answer: serde_json::Value = http
        .put(format!("{be}/api/test/shadow/_stream_load"))
        .basic_auth("root", Some(""))
        .header("label", "l-1")
        .header("two_phase_commit", "true")
        .header("column_separator", ",")
        .body("7,seven,\\N,\\N,\\N\n")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["Status"], "Success", "{answer}");
    let txn = answer["TxnId"].as_i64().unwrap();
    c.query_drop("ALTER TABLE student REPLACE WITH TABLE shadow PROPERTIES (\"swap\" = \"false\")")
        .await
        .unwrap();
    assert!(ids(&mut c, "student").await.is_empty());
    let commit: serde_json::Value = http
        .put(format!("{be}/api/test/_stream_load_2pc"))
        .basic_auth("root", Some(""))
        .header("txn_id", txn.to_string())
        .header("txn_operation", "commit")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(commit["status"], "Success", "{commit}");
    assert_eq!(
        ids(&mut c, "student").await,
        vec![(7, Some("seven".into()))]
    );
}

#[tokio::test]
async fn sql_stall_holds_a_statement_before_or_after_it_runs() {
    let e = student().await;
    e.doris.faults.update(|f| {
        f.sql_stall = Some(SqlStall {
            contains: "like student".into(),
            applied: false,
        })
    });
    let mut c = conn(&e).await;
    let held = tokio::spawn(async move {
        let r = c.query_drop("CREATE TABLE held LIKE student").await;
        (r.map_err(|e| e.to_string()), c)
    });
    while e.doris.counters.get("sql_stalled") == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut other = conn(&e).await;
    let tables: Vec<String> = other.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["student".to_owned()], "held before it ran");
    e.doris.faults.clear();
    let (result, _) = held.await.unwrap();
    let message = result.expect_err("a held statement fails once released");
    assert!(
        message.contains("statement held by the sql_stall fault and not run"),
        "{message}"
    );
    let tables: Vec<String> = other.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["student".to_owned()], "never applied");

    // applied: the statement takes effect while its answer is held.
    e.doris.faults.update(|f| {
        f.sql_stall = Some(SqlStall {
            contains: "like student".into(),
            applied: true,
        })
    });
    let mut c = conn(&e).await;
    let held = tokio::spawn(async move { c.query_drop("CREATE TABLE held LIKE student").await });
    while e.doris.counters.get("sql_stalled") < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let tables: Vec<String> = other.query("SHOW TABLES").await.unwrap();
    assert_eq!(tables, vec!["held".to_owned(), "student".to_owned()]);
    assert!(!held.is_finished());
    e.doris.faults.clear();
    held.await.unwrap().unwrap();
}
