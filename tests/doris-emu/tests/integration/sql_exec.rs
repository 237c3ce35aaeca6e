//! The SQL layer end to end against an in-process emulator: SELECT, DML, @incr, time travel,
//! information_schema, SHOW and driver chatter.

use crate::common;

use common::{STUDENT_DDL, emu, setup_sql};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::error::DorisError;
use dcs_doris_emu::faults::IncrFault;
use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::types::{DorisType, QueryResult, ResultSet};

async fn q(emu: &RunningEmulator, s: &mut Session, stmt: &str) -> ResultSet {
    match sql::execute(&emu.doris, s, stmt).await {
        Ok(QueryResult::Rows(rs)) => rs,
        Ok(other) => panic!("{stmt}: expected rows, got {other:?}"),
        Err(e) => panic!("{stmt}: {e}"),
    }
}

async fn exec(emu: &RunningEmulator, s: &mut Session, stmt: &str) -> u64 {
    match sql::execute(&emu.doris, s, stmt).await {
        Ok(QueryResult::Ok { affected_rows, .. }) => affected_rows,
        Ok(other) => panic!("{stmt}: expected OK, got {other:?}"),
        Err(e) => panic!("{stmt}: {e}"),
    }
}

async fn err(emu: &RunningEmulator, s: &mut Session, stmt: &str) -> DorisError {
    match sql::execute(&emu.doris, s, stmt).await {
        Ok(r) => panic!("{stmt}: expected an error, got {r:?}"),
        Err(e) => e,
    }
}

/// A lone `COUNT(*)` (counted without holding the table as values) answers what the general
/// aggregate path answers, with and without a filter, by tablet, aliased, on an empty table, and
/// with the same errors.
#[tokio::test]
async fn a_lone_count_star_counts_what_the_general_path_counts() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    let tablets = emu
        .doris
        .engine
        .table_info("test", "student")
        .unwrap()
        .tablets;
    let mut cases = vec![
        String::new(),
        " WHERE age > 18".to_string(),
        " WHERE age IS NULL".to_string(),
    ];
    for t in &tablets {
        cases.push(format!(" TABLET({t})"));
        cases.push(format!(" TABLET({t}) WHERE age > 18"));
    }
    let mut by_tablet = 0;
    for tail in &cases {
        let lone = q(&emu, &mut s, &format!("SELECT COUNT(*) FROM student{tail}")).await;
        let general = q(
            &emu,
            &mut s,
            &format!("SELECT COUNT(*), 1 FROM student{tail}"),
        )
        .await;
        assert_eq!(lone.columns[0], general.columns[0], "{tail}");
        assert_eq!(text(&lone)[0][0], text(&general)[0][0], "{tail}");
        if tail.starts_with(" TABLET") && !tail.contains("WHERE") {
            by_tablet += text(&lone)[0][0].parse::<i64>().unwrap();
        }
    }
    assert_eq!(by_tablet, 3, "the tablets partition the rows");
    let rs = q(
        &emu,
        &mut s,
        "SELECT count(*) AS n FROM student st WHERE st.id <> 2",
    )
    .await;
    assert_eq!(names(&rs), ["n"]);
    assert_eq!(text(&rs), [["2"]]);
    exec(&emu, &mut s, "DELETE FROM student WHERE id > 0").await;
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT COUNT(*) FROM student").await),
        [["0"]]
    );
    for bad in [
        "SELECT COUNT(*) FROM nope",
        "SELECT COUNT(*) FROM nope.student",
    ] {
        let general = format!("{} , 1 {}", &bad[..15], &bad[15..]);
        assert_eq!(
            err(&emu, &mut s, bad).await.to_string(),
            err(&emu, &mut s, &general).await.to_string(),
            "{bad}"
        );
    }
}

/// Rows as text, NULL as "NULL".
fn text(rs: &ResultSet) -> Vec<Vec<String>> {
    rs.rows
        .iter()
        .map(|r| {
            r.iter()
                .zip(&rs.columns)
                .map(|(v, c)| v.to_text(&c.ty).unwrap_or_else(|| "NULL".into()))
                .collect()
        })
        .collect()
}

fn names(rs: &ResultSet) -> Vec<&str> {
    rs.columns.iter().map(|c| c.name.as_str()).collect()
}

async fn student(emu: &RunningEmulator) -> Session {
    setup_sql(emu, &["CREATE DATABASE test", STUDENT_DDL]).await;
    let mut s = Session::new("root");
    exec(emu, &mut s, "USE test").await;
    exec(
        emu,
        &mut s,
        "INSERT INTO student VALUES (1, 'alice', 20, 90.5, '2024-01-01 10:00:00.123'), \
         (2, 'bob', 22, NULL, NULL), (3, 'carol', NULL, 77.25, now())",
    )
    .await;
    s
}

#[tokio::test]
async fn select_projection_filter_order_limit() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    let rs = q(&emu, &mut s, "SELECT * FROM student ORDER BY id").await;
    assert_eq!(names(&rs), ["id", "name", "age", "score", "updated"]);
    assert_eq!(
        rs.columns[3].ty,
        DorisType::Decimal {
            precision: 10,
            scale: 2
        }
    );
    assert!(!rs.columns[0].nullable);
    let t = text(&rs);
    assert_eq!(t[0][..4], ["1", "alice", "20", "90.50"]);
    assert_eq!(t[0][4], "2024-01-01 10:00:00.123");
    assert_eq!(t[1][3], "NULL");

    let rs = q(&emu, &mut s, "select name as n, age + 1 AS next, id from test.student where age is not null and id in (1, 2, 5) order by age desc").await;
    assert_eq!(names(&rs), ["n", "next", "id"]);
    assert_eq!(rs.columns[1].ty, DorisType::BigInt);
    assert_eq!(text(&rs), [["bob", "23", "2"], ["alice", "21", "1"]]);

    let rs = q(&emu, &mut s, "SELECT id FROM student WHERE name LIKE '%o%' OR score BETWEEN 77 AND 78 ORDER BY 1 LIMIT 1, 5").await;
    assert_eq!(text(&rs), [["3"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT age IS NULL, count(*) FROM student GROUP BY age IS NULL HAVING count(*) > 1",
    )
    .await;
    assert_eq!(text(&rs), [["0", "2"]]);
    let rs = q(&emu, &mut s, "SELECT age FROM student ORDER BY age DESC").await;
    assert_eq!(text(&rs), [["22"], ["20"], ["NULL"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT age FROM student ORDER BY age ASC NULLS LAST",
    )
    .await;
    assert_eq!(text(&rs), [["20"], ["22"], ["NULL"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT DISTINCT age IS NULL AS n FROM student ORDER BY n",
    )
    .await;
    assert_eq!(text(&rs), [["0"], ["1"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT CAST(id AS CHAR), CAST('7' AS INT) + 1 FROM student WHERE id = '1'",
    )
    .await;
    assert_eq!(text(&rs), [["1", "8"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT id FROM student ORDER BY id DESC LIMIT 2 OFFSET 1",
    )
    .await;
    assert_eq!(text(&rs), [["2"], ["1"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT COUNT(*), count(age), max(score), min(name), sum(age) FROM student",
    )
    .await;
    assert_eq!(names(&rs)[0], "COUNT(*)");
    assert_eq!(rs.columns[0].ty, DorisType::BigInt);
    assert_eq!(text(&rs), [["3", "2", "90.50", "alice", "42"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT age IS NULL AS missing, count(*) c FROM student GROUP BY age IS NULL ORDER BY c",
    )
    .await;
    assert_eq!(text(&rs), [["1", "1"], ["0", "2"]]);
    // hidden columns: only when named or with show_hidden_columns
    let rs = q(
        &emu,
        &mut s,
        "SELECT id, __DORIS_DELETE_SIGN__ FROM student WHERE id = 1",
    )
    .await;
    assert_eq!(text(&rs), [["1", "0"]]);
    exec(&emu, &mut s, "SET show_hidden_columns = true").await;
    let rs = q(&emu, &mut s, "SELECT * FROM student WHERE id = 1").await;
    assert!(names(&rs).contains(&"__DORIS_DELETE_SIGN__"));

    let e = err(&emu, &mut s, "SELECT nope FROM student").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unknown column 'nope' in 'table list' in PROJECT clause"
    );
    let e = err(&emu, &mut s, "SELECT * FROM missing").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Table [missing] does not exist in database [test]."
    );
    let e = err(&emu, &mut s, "SELECT id FROM student WHERE nope = 1").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unknown column 'nope' in 'table list' in FILTER clause"
    );
    let e = err(&emu, &mut s, "SELECT id FROM student ORDER BY nope").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unknown column 'nope' in 'table list' in SORT clause"
    );
    let e = err(&emu, &mut s, "SELECT normalize('x')").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Can not found function 'normalize'"
    );
    let e = err(&emu, &mut s, "INSERT INTO missing VALUES (1)").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Table [missing] does not exist in database [test]."
    );
    let e = err(&emu, &mut s, "DELETE FROM nodb.t WHERE a = 1").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Database [nodb] does not exist."
    );
    let e = err(&emu, &mut Session::new("root"), "SELECT * FROM student").await;
    assert_eq!(e.code, 1046);
    let e = err(&emu, &mut s, "SELEC 1").await;
    assert_eq!(e.code, 1064);
}

#[tokio::test]
async fn update_delete_and_counts() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    assert_eq!(
        exec(
            &emu,
            &mut s,
            "UPDATE student SET age = age + 1, name = concat(name, '!') WHERE id <= 2"
        )
        .await,
        2
    );
    let rs = q(
        &emu,
        &mut s,
        "SELECT id, name, age FROM student ORDER BY id",
    )
    .await;
    assert_eq!(
        text(&rs),
        [
            ["1", "alice!", "21"],
            ["2", "bob!", "23"],
            ["3", "carol", "NULL"]
        ]
    );
    assert_eq!(
        exec(&emu, &mut s, "DELETE FROM student WHERE id = 2").await,
        1
    );
    assert_eq!(
        exec(&emu, &mut s, "DELETE FROM student WHERE id = 42").await,
        0
    );
    let rs = q(&emu, &mut s, "SELECT count(*) FROM student").await;
    assert_eq!(text(&rs), [["2"]]);
    exec(&emu, &mut s, "CREATE TABLE copy (id INT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1").await;
    assert_eq!(
        exec(
            &emu,
            &mut s,
            "INSERT INTO copy SELECT id, name FROM student WHERE id > 1"
        )
        .await,
        1
    );
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT * FROM copy").await),
        [["3", "carol"]]
    );
    let e = err(&emu, &mut s, "UPDATE student SET id = 5 WHERE id = 1").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Only value columns of unique table could be updated"
    );
    // upsert by key and explicit column list; the delete sign deletes
    exec(
        &emu,
        &mut s,
        "INSERT INTO student (id, name) VALUES (1, 'a2')",
    )
    .await;
    exec(
        &emu,
        &mut s,
        "INSERT INTO student (id, __DORIS_DELETE_SIGN__) VALUES (3, 1)",
    )
    .await;
    let rs = q(&emu, &mut s, "SELECT id, name, age FROM student").await;
    assert_eq!(text(&rs), [["1", "a2", "NULL"]]);
    // duplicate-key tables take UPDATE errors and predicate deletes
    exec(&emu, &mut s, "CREATE TABLE d (k INT, v VARCHAR(10)) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")").await;
    exec(
        &emu,
        &mut s,
        "INSERT INTO d VALUES (1, 'x'), (1, 'x'), (2, 'y')",
    )
    .await;
    let e = err(&emu, &mut s, "UPDATE d SET v = 'z'").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Only unique table could be updated."
    );
    exec(&emu, &mut s, "DELETE FROM d WHERE k = 1").await;
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT * FROM d").await),
        [["2", "y"]]
    );
    let e = err(
        &emu,
        &mut s,
        "CREATE TABLE bad (a INT, b INT) UNIQUE KEY(b) DISTRIBUTED BY HASH(b) BUCKETS 1",
    )
    .await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Key columns should be a ordered prefix of the schema."
    );
}

#[tokio::test]
async fn incr_reads_and_errors() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    exec(&emu, &mut s, "UPDATE student SET age = 30 WHERE id = 1").await;
    exec(&emu, &mut s, "DELETE FROM student WHERE id = 2").await;
    emu.doris.clock.advance_ms(5_000);
    let rs = q(
        &emu,
        &mut s,
        "SELECT * FROM student@incr('incrementType'='DETAIL') ORDER BY id",
    )
    .await;
    assert_eq!(names(&rs), ["id", "name", "age", "score", "updated"]);
    let sql = "/* ApplicationName=Flink ArrowFlightSQL Query */ SELECT `id`, `age`, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `test`.`student`@incr('incrementType' = 'DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__";
    let rs = q(&emu, &mut s, sql).await;
    assert_eq!(
        names(&rs),
        [
            "id",
            "age",
            "__DORIS_BINLOG_TSO__",
            "__DORIS_BINLOG_LSN__",
            "__DORIS_BINLOG_OP__"
        ]
    );
    assert_eq!(rs.columns[4].ty, DorisType::TinyInt);
    assert_eq!(rs.columns[2].ty, DorisType::BigInt);
    let ops: Vec<(String, String)> = text(&rs)
        .into_iter()
        .map(|r| (r[0].clone(), r[4].clone()))
        .collect();
    assert_eq!(
        ops,
        [
            ("1", "0"),
            ("2", "0"),
            ("3", "0"),
            ("1", "2"),
            ("1", "3"),
            ("2", "1")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // default MIN_DELTA over everything: net inserts of 1 and 3
    let rs = q(
        &emu,
        &mut s,
        "SELECT id, age, __DORIS_BINLOG_OP__ FROM student@incr() ORDER BY id",
    )
    .await;
    assert_eq!(text(&rs), [["1", "30", "0"], ["3", "NULL", "0"]]);
    // windows in the session zone: nothing before the first write
    let rs = q(
        &emu,
        &mut s,
        "SELECT * FROM student@incr(\"endTimestamp\" = \"2000-01-01 00:00:00\")",
    )
    .await;
    assert!(rs.rows.is_empty());
    // a window by time: [first write's second, +1 day)
    let tso: i64 = text(
        &q(
            &emu,
            &mut s,
            "SELECT min(__DORIS_BINLOG_TSO__) FROM student@incr('incrementType'='DETAIL')",
        )
        .await,
    )[0][0]
        .parse()
        .unwrap();
    let start = (tso >> 18) / 1000;
    let start_s =
        text(&q(&emu, &mut s, &format!("SELECT FROM_UNIXTIME({start})")).await)[0][0].clone();
    let rs = q(&emu, &mut s, &format!("SELECT id FROM student@incr('startTimestamp'='{start_s}', 'incrementType'='APPEND_ONLY') x WHERE x.id > 1 ORDER BY id")).await;
    assert_eq!(text(&rs), [["2"], ["3"]]);

    let e = err(&emu, &mut s, "SELECT * FROM student@incr('foo'='bar')").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unsupported parameter in incr query"
    );
    let e = err(
        &emu,
        &mut s,
        "SELECT * FROM student@incr('incrementType'='ALL')",
    )
    .await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unsupported parameter in incr query"
    );
    let e = err(
        &emu,
        &mut s,
        "SELECT * FROM student@incr('startTimestamp'='2024-01-01')",
    )
    .await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Invalid TIMESTAMP format in incr clause"
    );

    let before = emu.doris.counters.get("sql_incr");
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5100,
            count: 1,
        })
    });
    let e = err(
        &emu,
        &mut s,
        "SELECT * FROM student@incr('endTimestamp'='2030-01-01 00:00:00')",
    )
    .await;
    assert_eq!(e.code, 5100);
    assert!(e.message.starts_with("ERR_INCR_WINDOW_NOT_READY: reason=END_AFTER_CURRENT_TSO, requestedEndTimestampMs=1893456000000, currentTSO="), "{}", e.message);
    assert!(
        e.message.ends_with("retryAfterMs=1000, timeoutMs=5000"),
        "{}",
        e.message
    );
    exec(&emu, &mut s, "SET change_visible_timeout_ms = 100").await;
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5101,
            count: 1,
        })
    });
    let e = err(&emu, &mut s, "SELECT * FROM student@incr()").await;
    assert_eq!(e.code, 5101);
    assert!(
        e.message
            .starts_with("ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT,"),
        "{}",
        e.message
    );
    assert!(e.message.ends_with("timeoutMs=100"), "{}", e.message);
    // the fault is spent
    q(&emu, &mut s, "SELECT * FROM student@incr()").await;
    assert_eq!(emu.doris.counters.get("sql_incr"), before + 3);
}

#[tokio::test]
async fn time_travel() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    let rs = q(
        &emu,
        &mut s,
        "SELECT max(__DORIS_BINLOG_TSO__) FROM student@incr('incrementType'='DETAIL')",
    )
    .await;
    let tso: i64 = text(&rs)[0][0].parse().unwrap();
    emu.doris.clock.advance_ms(2_000);
    exec(&emu, &mut s, "UPDATE student SET age = 99 WHERE id = 1").await;
    let rs = q(
        &emu,
        &mut s,
        &format!("SELECT age FROM student FOR VERSION AS OF {tso} WHERE id = 1"),
    )
    .await;
    assert_eq!(text(&rs), [["20"]]);
    let rs = q(&emu, &mut s, "SELECT age FROM student WHERE id = 1").await;
    assert_eq!(text(&rs), [["99"]]);
    exec(
        &emu,
        &mut s,
        "CREATE TABLE plain (k INT) DUPLICATE KEY(k) DISTRIBUTED BY HASH(k) BUCKETS 1",
    )
    .await;
    let e = err(
        &emu,
        &mut s,
        &format!("SELECT * FROM plain FOR VERSION AS OF {tso}"),
    )
    .await;
    assert_eq!(e.code, 1105);
}

#[tokio::test]
async fn information_schema_and_show() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    let rs = q(&emu, &mut s, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COLUMN_KEY, IS_NULLABLE, ORDINAL_POSITION FROM information_schema.columns WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'student' ORDER BY ORDINAL_POSITION").await;
    assert_eq!(
        text(&rs)[..2],
        [
            ["id", "int", "int", "UNI", "NO", "1"],
            ["name", "varchar", "varchar(64)", "", "YES", "2"]
        ]
    );
    assert_eq!(text(&rs)[3][2], "decimal(10,2)");
    let rs = q(&emu, &mut s, "select PROPERTY_VALUE from information_schema.table_properties where table_schema = 'test' and table_name = 'student' and property_name = 'changelog.ttl_seconds'").await;
    assert_eq!(text(&rs), [["86400"]]);
    let rs = q(&emu, &mut s, "SELECT TABLE_NAME, TABLE_TYPE, TABLE_ROWS FROM information_schema.tables WHERE TABLE_SCHEMA = 'test'").await;
    assert_eq!(text(&rs), [["student", "BASE TABLE", "3"]]);
    let rs = q(&emu, &mut s, "SELECT * FROM information_schema.tso_status").await;
    assert_eq!(
        names(&rs)[..4],
        [
            "WINDOW_END_PHYSICAL_TIME",
            "CURRENT_TSO",
            "CURRENT_TSO_PHYSICAL_TIME",
            "CURRENT_TSO_LOGICAL_COUNTER"
        ]
    );
    let rs = q(&emu, &mut s, "SHOW TSO STATUS").await;
    let cur: i64 = text(&rs)[0][1].parse().unwrap();
    assert_eq!(cur >> 18, text(&rs)[0][2].parse::<i64>().unwrap());

    let rs = q(&emu, &mut s, "show frontends").await;
    assert_eq!(
        names(&rs)[..7],
        [
            "Name",
            "Host",
            "EditLogPort",
            "HttpPort",
            "QueryPort",
            "RpcPort",
            "ArrowFlightSqlPort"
        ]
    );
    let t = text(&rs);
    assert_eq!(t[0][6], emu.ports().fe_flight_port.to_string());
    assert_eq!(t[0][3], emu.ports().fe_http_port.to_string());
    assert_eq!(t[0][4], emu.ports().query_port.to_string());
    let rs = q(&emu, &mut s, "SHOW BACKENDS").await;
    let i = names(&rs)
        .iter()
        .position(|n| *n == "ArrowFlightSqlPort")
        .unwrap();
    assert_eq!(text(&rs)[0][i], emu.ports().be_flight_port.to_string());

    let rs = q(&emu, &mut s, "SHOW CREATE TABLE student").await;
    assert_eq!(names(&rs), ["Table", "Create Table"]);
    assert!(text(&rs)[0][1].contains("UNIQUE KEY"));
    let rs = q(&emu, &mut s, "SHOW DATABASES").await;
    assert!(text(&rs).contains(&vec!["test".to_string()]));
    let rs = q(&emu, &mut s, "SHOW TABLES").await;
    assert_eq!(names(&rs), ["Tables_in_test"]);
    assert_eq!(text(&rs), [["student"]]);
    let rs = q(
        &emu,
        &mut s,
        "SHOW TABLES FROM information_schema LIKE 'tso%'",
    )
    .await;
    assert_eq!(text(&rs), [["tso_status"]]);
    let rs = q(&emu, &mut s, "SELECT 1 + 1 AS two FROM dual").await;
    assert_eq!(text(&rs), [["2"]]);
    let rs = q(&emu, &mut s, "DESC student").await;
    assert_eq!(
        text(&rs)[3][..4],
        ["score", "DECIMAL(10,2)", "Yes", "false"]
    );
    let rs = q(&emu, &mut s, "SHOW WARNINGS").await;
    assert!(rs.rows.is_empty());
    let e = err(&emu, &mut s, "SELECT * FROM information_schema.nope").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Table [nope] does not exist in database [information_schema]."
    );
}

#[tokio::test]
async fn driver_chatter_and_time_zone() {
    let emu = emu().await;
    let mut s = Session::new("root");
    let rs = q(
        &emu,
        &mut s,
        "SELECT @@max_allowed_packet,@@wait_timeout,@@socket",
    )
    .await;
    assert_eq!(
        names(&rs),
        ["@@max_allowed_packet", "@@wait_timeout", "@@socket"]
    );
    assert_eq!(text(&rs), [["16777216", "28800", "NULL"]]);
    let rs = q(&emu, &mut s, "select @@version_comment limit 1").await;
    assert!(text(&rs)[0][0].starts_with("Doris version"));
    let rs = q(&emu, &mut s, "SELECT @@session.auto_increment_increment, @@version, VERSION(), DATABASE(), CONNECTION_ID() > 0").await;
    assert_eq!(text(&rs)[0][..4], ["1", "5.7.99", "5.7.99", "NULL"]);
    for stmt in [
        "SET NAMES utf8mb4",
        "SET autocommit=1",
        "SET AUTOCOMMIT = 0",
        "COMMIT",
        "ROLLBACK",
        "BEGIN",
        "SET @@session.sql_select_limit = 10",
        "SET GLOBAL foo = 'bar'",
    ] {
        exec(&emu, &mut s, stmt).await;
    }
    let rs = q(&emu, &mut s, "SHOW VARIABLES LIKE 'time_zone'").await;
    assert_eq!(names(&rs), ["Variable_name", "Value"]);
    assert_eq!(text(&rs), [["time_zone", "UTC"]]);
    let rs = q(
        &emu,
        &mut s,
        "SELECT FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s')",
    )
    .await;
    assert_eq!(text(&rs), [["2023-11-14 22:13:20"]]);
    exec(&emu, &mut s, "SET time_zone = '+08:00'").await;
    let rs = q(
        &emu,
        &mut s,
        "SELECT FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s')",
    )
    .await;
    assert_eq!(text(&rs), [["2023-11-15 06:13:20"]]);
    assert_eq!(
        names(&rs),
        ["FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s')"]
    );
    exec(&emu, &mut s, "SET time_zone = 'Asia/Shanghai'").await;
    let e = err(&emu, &mut s, "SET time_zone = 'Mars/Base'").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Unknown or incorrect time zone: 'Mars/Base'"
    );
    let rs = q(
        &emu,
        &mut s,
        "SELECT NOW(), CURRENT_TIMESTAMP(3), 1 + 2 * 3, -4, 'x', NULL",
    )
    .await;
    assert_eq!(rs.columns[0].ty, DorisType::DateTime(0));
    assert_eq!(rs.columns[1].ty, DorisType::DateTime(3));
    assert_eq!(text(&rs)[0][2..], ["7", "-4", "x", "NULL"]);
}

#[tokio::test]
async fn offset_table_insert_like_the_connector() {
    let emu = emu().await;
    setup_sql(&emu, &["CREATE DATABASE ops"]).await;
    let mut s = Session::new("root");
    exec(&emu, &mut s, "CREATE TABLE IF NOT EXISTS `ops`.`offsets` (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL, update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")").await;
    for ts in ["2024-01-01 00:00:00", "2024-01-01 00:00:10"] {
        let n = exec(&emu, &mut s, &format!("INSERT INTO `ops`.`offsets` (`consumer_id`, `offset_timestamp`, `update_time`) VALUES ('c1', '{ts}', CURRENT_TIMESTAMP(3))")).await;
        assert_eq!(n, 1);
    }
    let rs = q(
        &emu,
        &mut s,
        "SELECT consumer_id, offset_timestamp FROM ops.offsets",
    )
    .await;
    assert_eq!(text(&rs), [["c1", "2024-01-01 00:00:10"]]);
    let e = err(
        &emu,
        &mut s,
        "INSERT INTO ops.offsets (consumer_id) VALUES ('c2')",
    )
    .await;
    assert_eq!(e.code, 1105);
    let e = err(&emu, &mut s, "INSERT INTO ops.offsets VALUES ('c2')").await;
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Column count doesn't match value count"
    );
}

/// Mutated statements and token soups run through `execute` (parser and executor): errors are
/// fine, panics and hangs are not.
#[tokio::test]
async fn execute_never_panics_on_mutated_sql() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let emu = emu().await;
    let mut s = student(&emu).await;
    let seeds = [
        "SELECT id, name, age + 1 AS a FROM student WHERE id IN (1, 2) AND name LIKE 'a%' ORDER BY a DESC LIMIT 1, 2",
        "SELECT count(*), max(score), sum(age) FROM student GROUP BY age ORDER BY 1",
        "SELECT *, __DORIS_BINLOG_TSO__ FROM test.student@incr('startTimestamp'='2024-01-01 00:00:00', 'incrementType'='DETAIL') x WHERE x.id > 0",
        "SELECT FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s'), NOW(), CURRENT_TIMESTAMP(3), @@version",
        "UPDATE student SET age = age * 2 - 1, name = concat(name, 'x') WHERE id BETWEEN 1 AND 3",
        "INSERT INTO student (id, name, score, updated) VALUES (7, 'z', 1.25, '2024-02-03 04:05:06.7'), (8, NULL, -3, now())",
        "DELETE FROM student WHERE age IS NULL OR score < 80",
        "SELECT * FROM information_schema.columns WHERE TABLE_NAME = 'student' ORDER BY ORDINAL_POSITION",
        "SELECT CASE WHEN age > 20 THEN 'old' ELSE 'young' END, CAST(score AS INT), coalesce(age, 0) FROM student",
        "SELECT * FROM student FOR TIME AS OF '2024-01-01 00:00:00'",
        "SET time_zone = '+08:00'",
        "SHOW VARIABLES LIKE '%time%'",
    ];
    let extra = [
        "(",
        ")",
        ",",
        "'x'",
        "1",
        "-1",
        "NULL",
        "*",
        "/",
        "0",
        "id",
        "age",
        "name",
        "score",
        "updated",
        "AND",
        "OR",
        "NOT",
        "=",
        "<",
        "@",
        "@@",
        "`student`",
        "9223372036854775807",
        "99999999999999999999999999999999999999999",
        "1e308",
        "0.000000000000000000000000000000000000001",
        "'2024-13-45 99:99:99'",
        "FROM",
        "WHERE",
        "DESC",
        "COUNT(*)",
        "__DORIS_BINLOG_OP__",
        "TABLET(1)",
        "FOR VERSION AS OF 1",
        "LIMIT",
        "%",
        "DIV",
    ];
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..3000 {
        let seed = seeds[rng.random_range(0..seeds.len())];
        let mut toks: Vec<String> = seed.split(' ').map(str::to_string).collect();
        for _ in 0..rng.random_range(1..4) {
            match rng.random_range(0..3) {
                0 if !toks.is_empty() => {
                    let k = rng.random_range(0..toks.len());
                    toks.remove(k);
                }
                1 => {
                    let k = rng.random_range(0..=toks.len());
                    toks.insert(k, extra[rng.random_range(0..extra.len())].to_string());
                }
                _ if !toks.is_empty() => {
                    let k = rng.random_range(0..toks.len());
                    toks[k] = extra[rng.random_range(0..extra.len())].to_string();
                }
                _ => {}
            }
        }
        let sql = toks.join(if i % 2 == 0 { " " } else { "" });
        let r = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            sql::execute(&emu.doris, &mut s, &sql),
        )
        .await;
        assert!(r.is_ok(), "hung on {sql}");
    }
}

/// The rows of a SELECT run a part at a time (the MySQL and Flight SQL path), or its error.
async fn q_streamed(
    emu: &RunningEmulator,
    s: &mut Session,
    stmt: &str,
) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut sink = |rs: ResultSet| {
        rows.extend(text(&rs));
        Ok(())
    };
    match sql::execute_streamed(&emu.doris, s, stmt, Some(&mut sink)).await {
        Ok(QueryResult::Rows(_)) => Ok(rows),
        Ok(other) => panic!("{stmt}: expected rows, got {other:?}"),
        Err(e) => Err(e.to_string()),
    }
}

/// The rows of a SELECT run whole, or its error.
async fn q_whole(
    emu: &RunningEmulator,
    s: &mut Session,
    stmt: &str,
) -> Result<Vec<Vec<String>>, String> {
    match sql::execute(&emu.doris, s, stmt).await {
        Ok(QueryResult::Rows(rs)) => Ok(text(&rs)),
        Ok(other) => panic!("{stmt}: expected rows, got {other:?}"),
        Err(e) => Err(e.to_string()),
    }
}

/// A WHERE that pins every key column to literals is answered by looking the keys up, not by a
/// scan: the answers (rows and their order, counts, errors) are the scan's, on every path a
/// statement takes (streamed, whole, COUNT(*), UPDATE, DELETE). Each pinned predicate is run
/// beside one the lookup cannot serve (`+ 0` on the key), which always scans.
#[tokio::test]
async fn a_where_that_pins_the_key_answers_what_a_scan_answers() {
    let emu = emu().await;
    let mut s = student(&emu).await;
    exec(
        &emu,
        &mut s,
        "CREATE TABLE two (k INT NOT NULL, s VARCHAR(8) NOT NULL, v INT) UNIQUE KEY(k, s) \
         DISTRIBUTED BY HASH(k) BUCKETS 3",
    )
    .await;
    exec(
        &emu,
        &mut s,
        "INSERT INTO two VALUES (1, 'a', 10), (1, 'b', 11), (2, 'a', 20), (2, 'c', 21), (3, 'a', 30)",
    )
    .await;
    exec(&emu, &mut s, "CREATE TABLE empty LIKE two").await;
    let cases = [
        ("student", "id = 2", "id + 0 = 2"),
        ("student", "3 = id", "3 = id + 0"),
        ("student", "id IN (3, 1, 42, 1)", "id + 0 IN (3, 1, 42, 1)"),
        (
            "student",
            "id IN (1, 2) AND age > 21",
            "id + 0 IN (1, 2) AND age > 21",
        ),
        ("student", "id = 42", "id + 0 = 42"),
        ("student st", "st.id = 1", "st.id + 0 = 1"),
        ("student", "id = '2'", "id + 0 = '2'"),
        ("student", "id = -1", "id + 0 = -1"),
        (
            "student",
            "id = 99999999999999999999",
            "id + 0 = 99999999999999999999",
        ),
        (
            "two",
            "s IN ('a', 'c') AND k IN (2, 3)",
            "s IN ('a', 'c') AND k + 0 IN (2, 3)",
        ),
        (
            "two",
            "k = 1 AND s = 'b' AND v = 11",
            "k + 0 = 1 AND s = 'b' AND v = 11",
        ),
        (
            "two",
            "k = 1 AND s = 'b' AND v = 12",
            "k + 0 = 1 AND s = 'b' AND v = 12",
        ),
        // an error a scan meets is met when the keys match nothing, and not on an empty table
        (
            "student",
            "id = 42 AND nope = 1",
            "id + 0 = 42 AND nope = 1",
        ),
        ("student", "id = 1 AND nope = 1", "id + 0 = 1 AND nope = 1"),
        (
            "empty",
            "k = 1 AND s = 'a' AND nope = 1",
            "k + 0 = 1 AND s = 'a' AND nope = 1",
        ),
    ];
    let lookups = || emu.doris.counters.get("sql_key_lookup");
    for (from, pinned, scanned) in cases {
        for select in ["*", "COUNT(*)"] {
            let stmt = |w: &str| format!("SELECT {select} FROM {from} WHERE {w}");
            let before = lookups();
            let want = q_whole(&emu, &mut s, &stmt(scanned)).await;
            assert_eq!(lookups(), before, "{scanned} scans");
            assert_eq!(q_whole(&emu, &mut s, &stmt(pinned)).await, want, "{pinned}");
            assert_eq!(
                q_streamed(&emu, &mut s, &stmt(pinned)).await,
                want,
                "{pinned}"
            );
            let expected = if pinned == "id = '2'" { 0 } else { 2 };
            assert_eq!(lookups() - before, expected, "{pinned}: keys looked up");
        }
    }
    assert_eq!(
        q_streamed(&emu, &mut s, "SELECT * FROM student WHERE id IN (3, 1)").await,
        q_streamed(&emu, &mut s, "SELECT * FROM student WHERE id IN (1, 3)").await,
        "rows come in key order, as a scan gives them"
    );
    assert_eq!(
        q_streamed(
            &emu,
            &mut s,
            "SELECT id FROM student WHERE id = 1 AND nope = 1"
        )
        .await,
        Err(
            "errCode = 2, detailMessage = Unknown column 'nope' in 'table list' in FILTER clause"
                .to_string()
        ),
    );

    // UPDATE and DELETE through the lookup change exactly the rows the scan would
    let before = lookups();
    assert_eq!(
        exec(
            &emu,
            &mut s,
            "UPDATE student SET age = 50 WHERE id IN (1, 3, 7)"
        )
        .await,
        2
    );
    assert_eq!(
        exec(
            &emu,
            &mut s,
            "UPDATE two SET v = v + 1 WHERE k = 2 AND s IN ('a', 'x')"
        )
        .await,
        1
    );
    assert_eq!(
        exec(
            &emu,
            &mut s,
            "DELETE FROM two WHERE k IN (1, 2) AND s = 'a' AND v < 21"
        )
        .await,
        1
    );
    assert_eq!(
        exec(&emu, &mut s, "DELETE FROM student WHERE id IN (2, 9)").await,
        1
    );
    assert_eq!(
        lookups() - before,
        4,
        "each of the four statements looked its keys up"
    );
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT id, age FROM student ORDER BY id").await),
        [["1", "50"], ["3", "50"]]
    );
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT * FROM two ORDER BY k, s").await),
        [
            ["1", "b", "11"],
            ["2", "a", "21"],
            ["2", "c", "21"],
            ["3", "a", "30"]
        ]
    );
    let scanned = err(
        &emu,
        &mut s,
        "DELETE FROM two WHERE nope = 1 AND k + 0 = 7 AND s = 'a'",
    )
    .await;
    let pinned = err(
        &emu,
        &mut s,
        "DELETE FROM two WHERE nope = 1 AND k = 7 AND s = 'a'",
    )
    .await;
    assert_eq!(pinned.to_string(), scanned.to_string());
    assert!(pinned.message.contains("Unknown column 'nope'"), "{pinned}");
}

/// `enable_mow_light_delete` (docs/doris-protocols.md §1.1): settable at CREATE TABLE and by
/// ALTER TABLE on merge-on-write tables only, shown for every merge-on-write table; while it is
/// on, a DELETE statement removes rows but records nothing in the changelog, and a delete-sign
/// write still does.
#[tokio::test]
async fn a_light_delete_removes_rows_the_changelog_never_hears_of() {
    let emu = emu().await;
    setup_sql(&emu, &["CREATE DATABASE test"]).await;
    let mut s = Session::new("root");
    exec(&emu, &mut s, "USE test").await;
    exec(
        &emu,
        &mut s,
        "CREATE TABLE t (id INT NOT NULL, v VARCHAR(8)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
         BUCKETS 1 PROPERTIES (\"changelog.enable\" = \"true\", \"enable_mow_light_delete\" = \"TRUE\")",
    )
    .await;
    let props = |rs: ResultSet| text(&rs)[0][1].clone();
    let ddl = props(q(&emu, &mut s, "SHOW CREATE TABLE t").await);
    assert!(
        ddl.contains("\"enable_mow_light_delete\" = \"true\""),
        "{ddl}"
    );
    exec(&emu, &mut s, "INSERT INTO t VALUES (1, 'a'), (2, 'b')").await;
    assert_eq!(exec(&emu, &mut s, "DELETE FROM t WHERE id = 1").await, 1);
    exec(
        &emu,
        &mut s,
        "ALTER TABLE t SET (\"enable_mow_light_delete\" = \"false\")",
    )
    .await;
    let ddl = props(q(&emu, &mut s, "SHOW CREATE TABLE t").await);
    assert!(
        ddl.contains("\"enable_mow_light_delete\" = \"false\""),
        "{ddl}"
    );
    assert_eq!(exec(&emu, &mut s, "DELETE FROM t WHERE id = 2").await, 1);
    assert_eq!(
        text(&q(&emu, &mut s, "SELECT COUNT(*) FROM t").await),
        [["0"]]
    );
    // Two inserts, and only the delete made after the ALTER.
    let changes = q(
        &emu,
        &mut s,
        "SELECT id, __DORIS_BINLOG_OP__ FROM t@incr('incrementType'='DETAIL') \
         ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__",
    )
    .await;
    assert_eq!(text(&changes), [["1", "0"], ["2", "0"], ["2", "1"]]);
    let rows = q(
        &emu,
        &mut s,
        "SELECT PROPERTY_VALUE FROM information_schema.table_properties \
         WHERE TABLE_NAME = 't' AND PROPERTY_NAME = 'enable_mow_light_delete'",
    )
    .await;
    assert_eq!(text(&rows), [["false"]]);

    for (stmt, message) in [
        (
            "ALTER TABLE t SET (\"enable_mow_light_delete\" = \"yes\")",
            "Property enable_mow_light_delete should be set to true or false",
        ),
        (
            "CREATE TABLE d (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"enable_mow_light_delete\" = \"true\")",
            "enable_mow_light_delete property is only supported for unique merge-on-write table",
        ),
        (
            "CREATE TABLE r (id INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"enable_unique_key_merge_on_write\" = \"false\", \"enable_mow_light_delete\" = \"false\")",
            "enable_mow_light_delete property is only supported for unique merge-on-write table",
        ),
    ] {
        let e = err(&emu, &mut s, stmt).await;
        assert!(e.message.ends_with(message), "{stmt}: {}", e.message);
    }
}
