//! Parser tests: statement shapes, error texts, and a never-panics property.

use proptest::prelude::*;

use super::ast::*;
use super::parse;
use crate::error::{ER_PARSE, ER_UNKNOWN};
use crate::types::DorisType;

fn p(sql: &str) -> Statement {
    match parse(sql) {
        Ok(s) => s,
        Err(e) => panic!("parse failed for {sql:?}: {}", e.message),
    }
}

fn sel(sql: &str) -> Select {
    match p(sql) {
        Statement::Select(s) => *s,
        other => panic!("not a select: {other:?}"),
    }
}

#[test]
fn create_table_student() {
    let Statement::CreateTable(ct) = p(crate_ddl()) else {
        panic!()
    };
    assert_eq!(
        ct.name,
        ObjName {
            db: Some("test".into()),
            name: "student".into()
        }
    );
    assert_eq!(ct.columns.len(), 5);
    assert_eq!(ct.columns[0].ty, DorisType::Int);
    assert_eq!(ct.columns[0].nullable, Some(false));
    assert_eq!(ct.columns[1].ty, DorisType::Varchar(64));
    assert_eq!(
        ct.columns[3].ty,
        DorisType::Decimal {
            precision: 10,
            scale: 2
        }
    );
    assert_eq!(ct.columns[4].ty, DorisType::DateTime(3));
    assert_eq!(ct.keys, Some((KeysKind::Unique, vec!["id".into()])));
    assert_eq!(ct.distribution, Some((vec!["id".into()], Some(4))));
    assert_eq!(ct.properties.len(), 4);
    assert_eq!(ct.properties[1], ("changelog.enable".into(), "true".into()));
}

fn crate_ddl() -> &'static str {
    "CREATE TABLE test.student (
        id INT NOT NULL,
        name VARCHAR(64),
        age INT,
        score DECIMAL(10, 2),
        updated DATETIME(3)
    ) UNIQUE KEY(id)
    DISTRIBUTED BY HASH(id) BUCKETS 4
    PROPERTIES (
        \"replication_num\" = \"1\",
        \"changelog.enable\" = \"true\",
        \"changelog.need_historical_value\" = \"true\",
        \"changelog.ttl_seconds\" = \"86400\"
    );"
}

#[test]
fn create_table_variants() {
    let Statement::CreateTable(ct) = p("create table if not exists `d`.`t` (
            `k` bigint not null comment 'key', v string null default 'x', dt datetimev2(6), d datev2,
            j jsonb, b boolean, c char, dec decimalv3, li largeint, f float, dd double,
            vc varchar, ts DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
        ) ENGINE=OLAP DUPLICATE KEY(`k`) COMMENT 'tbl'
        AUTO PARTITION BY RANGE (date_trunc(`dt`, 'day')) ()
        DISTRIBUTED BY RANDOM BUCKETS AUTO
        PROPERTIES ('a' = 'b')")
    else {
        panic!()
    };
    assert!(ct.if_not_exists);
    assert_eq!(ct.columns[1].ty, DorisType::String);
    assert_eq!(
        ct.columns[1].default,
        Some(Expr::Lit(Literal::Str("x".into())))
    );
    assert_eq!(ct.columns[2].ty, DorisType::DateTime(6));
    assert_eq!(ct.columns[3].ty, DorisType::Date);
    assert_eq!(ct.columns[4].ty, DorisType::Json);
    assert_eq!(ct.columns[5].ty, DorisType::Boolean);
    assert_eq!(ct.columns[6].ty, DorisType::Char(1));
    assert_eq!(
        ct.columns[7].ty,
        DorisType::Decimal {
            precision: 9,
            scale: 0
        }
    );
    assert_eq!(ct.columns[8].ty, DorisType::LargeInt);
    assert_eq!(ct.columns[11].ty, DorisType::Varchar(65533));
    assert_eq!(ct.comment.as_deref(), Some("tbl"));
    assert_eq!(ct.auto_partition, Some(("dt".into(), "day".into())));
    assert_eq!(ct.distribution, Some((vec![], None)));
    assert_eq!(ct.keys, Some((KeysKind::Duplicate, vec!["k".into()])));

    // a PARTITION BY with explicit partitions is skipped
    let Statement::CreateTable(ct) = p("CREATE TABLE t (a INT, b DATE) DUPLICATE KEY(a)
        PARTITION BY RANGE(b) (PARTITION p1 VALUES LESS THAN ('2024-01-01'), PARTITION p2 VALUES LESS THAN (MAXVALUE))
        DISTRIBUTED BY HASH(a) BUCKETS 1")
    else {
        panic!()
    };
    assert_eq!(ct.distribution, Some((vec!["a".into()], Some(1))));
}

#[test]
fn type_errors() {
    let e = parse("CREATE TABLE t (a DECIMAL(40, 2)) DUPLICATE KEY(a)").unwrap_err();
    assert_eq!(e.code, ER_UNKNOWN);
    assert_eq!(
        e.message,
        "errCode = 2, detailMessage = Precision of decimal must between 1 and 38. Precision was set to: 40."
    );
    assert!(parse("CREATE TABLE t (a DECIMAL(5, 6)) DUPLICATE KEY(a)").is_err());
    assert!(parse("CREATE TABLE t (a DATETIME(7)) DUPLICATE KEY(a)").is_err());
    assert!(parse("CREATE TABLE t (a ARRAY<INT>) DUPLICATE KEY(a)").is_err());
}

#[test]
fn ddl_shapes() {
    assert_eq!(
        p("create database if not exists db1"),
        Statement::CreateDatabase {
            name: "db1".into(),
            if_not_exists: true
        }
    );
    assert_eq!(
        p("DROP DATABASE IF EXISTS `db1`;"),
        Statement::DropDatabase {
            name: "db1".into(),
            if_exists: true
        }
    );
    assert_eq!(p("use db1"), Statement::Use("db1".into()));
    assert_eq!(
        p("drop table if exists d.t"),
        Statement::DropTable {
            name: ObjName {
                db: Some("d".into()),
                name: "t".into()
            },
            if_exists: true
        }
    );
    assert_eq!(
        p("truncate table t"),
        Statement::Truncate(ObjName {
            db: None,
            name: "t".into()
        })
    );
    let Statement::Alter { ops, .. } =
        p("ALTER TABLE d.t ADD COLUMN c INT NULL DEFAULT \"0\" AFTER b")
    else {
        panic!()
    };
    assert!(
        matches!(&ops[0], AlterOp::AddColumn { column, position: Some(ColumnPos::After(a)) } if column.name == "c" && a == "b")
    );
    let Statement::Alter { ops, .. } = p("ALTER TABLE t ADD COLUMN c INT KEY FIRST") else {
        panic!()
    };
    assert!(
        matches!(&ops[0], AlterOp::AddColumn { column, position: Some(ColumnPos::First) } if column.key)
    );
    let Statement::Alter { ops, .. } =
        p("ALTER TABLE t MODIFY COLUMN v BIGINT NULL COMMENT '' AFTER k, RENAME COLUMN a b")
    else {
        panic!()
    };
    assert!(
        matches!(&ops[0], AlterOp::ModifyColumn { column, has_comment: true, position: Some(ColumnPos::After(k)) }
            if column.name == "v" && column.ty == DorisType::BigInt && column.nullable == Some(true) && k == "k")
    );
    assert_eq!(
        ops[1],
        AlterOp::RenameColumn {
            from: "a".into(),
            to: "b".into()
        }
    );
    let Statement::Alter { ops, .. } = p("ALTER TABLE t MODIFY COLUMN v COMMENT 'why'") else {
        panic!()
    };
    assert_eq!(
        ops[0],
        AlterOp::ModifyColumnComment {
            column: "v".into(),
            comment: "why".into()
        }
    );
    let Statement::Alter { ops, .. } = p("ALTER TABLE t ORDER BY (k, v)") else {
        panic!()
    };
    assert_eq!(ops[0], AlterOp::OrderBy(vec!["k".into(), "v".into()]));
    let Statement::Alter { ops, .. } = p("ALTER TABLE t DROP COLUMN c") else {
        panic!()
    };
    assert_eq!(ops[0], AlterOp::DropColumn("c".into()));
    let Statement::Alter { ops, .. } = p("ALTER TABLE t SET (\"changelog.ttl_seconds\" = \"100\")")
    else {
        panic!()
    };
    assert_eq!(
        ops[0],
        AlterOp::SetProperties(vec![("changelog.ttl_seconds".into(), "100".into())])
    );
}

#[test]
fn show_shapes() {
    assert_eq!(p("SHOW DATABASES"), Statement::Show(Show::Databases));
    assert_eq!(
        p("show tables from test"),
        Statement::Show(Show::Tables {
            db: Some("test".into()),
            like: None,
            full: false
        })
    );
    assert_eq!(
        p("show full tables"),
        Statement::Show(Show::Tables {
            db: None,
            like: None,
            full: true
        })
    );
    assert_eq!(
        p("show create table test.t"),
        Statement::Show(Show::CreateTable(ObjName {
            db: Some("test".into()),
            name: "t".into()
        }))
    );
    assert_eq!(p("show frontends"), Statement::Show(Show::Frontends));
    assert_eq!(p("SHOW BACKENDS;"), Statement::Show(Show::Backends));
    assert_eq!(p("SHOW TSO STATUS"), Statement::Show(Show::TsoStatus));
    assert_eq!(
        p("SHOW VARIABLES LIKE 'time%'"),
        Statement::Show(Show::Variables(Some("time%".into())))
    );
    assert_eq!(
        p("show session variables"),
        Statement::Show(Show::Variables(None))
    );
    assert_eq!(p("SHOW WARNINGS"), Statement::Show(Show::Warnings));
    assert_eq!(p("SHOW COLLATION"), Statement::Show(Show::Collation));
    assert_eq!(p("SHOW CHARACTER SET"), Statement::Show(Show::Charset));
    assert_eq!(
        p("desc t"),
        Statement::Show(Show::Columns(ObjName {
            db: None,
            name: "t".into()
        }))
    );
}

#[test]
fn set_shapes() {
    let Statement::Set(items) = p(
        "SET time_zone = '+08:00', SESSION show_hidden_columns=true, @@session.autocommit = 1, GLOBAL x = y",
    ) else {
        panic!()
    };
    assert_eq!(items.len(), 4);
    assert_eq!(items[0].name, "time_zone");
    assert_eq!(items[0].value, Expr::Lit(Literal::Str("+08:00".into())));
    assert_eq!(items[1].name, "show_hidden_columns");
    assert_eq!(items[2].name, "autocommit");
    assert!(items[3].global);
    assert_eq!(
        items[3].value,
        Expr::Column {
            qualifier: None,
            name: "y".into()
        }
    );
    assert_eq!(
        p("SET NAMES utf8mb4"),
        Statement::SetNames("utf8mb4".into())
    );
    assert_eq!(
        p("set names 'utf8mb4' collate 'utf8mb4_general_ci'"),
        Statement::SetNames("utf8mb4".into())
    );
    assert!(matches!(p("SET AUTOCOMMIT = 0"), Statement::Set(_)));
    assert_eq!(p("COMMIT"), Statement::Noop);
    assert_eq!(p("rollback"), Statement::Noop);
    assert_eq!(p("BEGIN"), Statement::Noop);
    assert_eq!(p("start transaction"), Statement::Noop);
    assert_eq!(
        p("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        Statement::Noop
    );
    assert!(matches!(p("SET @a = 1"), Statement::Set(items) if items[0].name == "@a"));
}

#[test]
fn dml_shapes() {
    let Statement::Insert {
        table,
        columns,
        rows,
    } = p(
        "INSERT INTO `db`.`t` (`consumer_id`, `offset_timestamp`, `update_time`) VALUES ('c', '2024-01-01 00:00:00', CURRENT_TIMESTAMP(3)), ('d', NULL, now())",
    )
    else {
        panic!()
    };
    assert_eq!(table.db.as_deref(), Some("db"));
    assert_eq!(columns.unwrap().len(), 3);
    assert_eq!(rows.len(), 2);
    assert!(
        matches!(&rows[0][2], Expr::Func { name, args, .. } if name == "current_timestamp" && args.len() == 1)
    );
    let Statement::Insert { rows, .. } = p("insert into t values (1, -2.5, 'x', null, true)")
    else {
        panic!()
    };
    assert_eq!(rows[0][1], Expr::Lit(Literal::Number("-2.5".into())));
    let Statement::Update { sets, where_, .. } =
        p("UPDATE t SET age = age + 1, name = 'x' WHERE id = 1")
    else {
        panic!()
    };
    assert_eq!(sets.len(), 2);
    assert!(where_.is_some());
    let Statement::Delete { where_, .. } =
        p("DELETE FROM test.t WHERE id IN (1, 2) AND name IS NOT NULL")
    else {
        panic!()
    };
    assert!(matches!(where_, Some(Expr::Binary(BinOp::And, _, _))));
}

#[test]
fn select_shapes() {
    let s = sel(
        "/* ApplicationName=Flink ArrowFlightSQL Query */ SELECT `id`, `name`, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `db`.`tbl`@incr('startTimestamp' = '2024-01-01 00:00:00', 'endTimestamp' = '2024-01-01 00:00:10', 'incrementType' = 'DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__",
    );
    assert_eq!(s.items.len(), 5);
    let from = s.from.unwrap();
    assert_eq!(
        from.table,
        ObjName {
            db: Some("db".into()),
            name: "tbl".into()
        }
    );
    let incr = from.incr.unwrap();
    assert_eq!(
        incr[0],
        ("startTimestamp".into(), "2024-01-01 00:00:00".into())
    );
    assert_eq!(incr[2], ("incrementType".into(), "DETAIL".into()));
    assert_eq!(s.order_by.len(), 3);

    let s = sel("select * from t@incr(\"incrementType\"=\"MIN_DELTA\") x where x.id > 1");
    let from = s.from.unwrap();
    assert_eq!(from.alias.as_deref(), Some("x"));
    assert_eq!(from.incr.unwrap().len(), 1);

    let s = sel("SELECT a FROM `db`.`t` TABLET(10001, 10002)");
    assert_eq!(s.from.unwrap().tablets, Some(vec![10001, 10002]));
    let s = sel("SELECT * FROM t FOR VERSION AS OF 461373440032243713");
    assert_eq!(
        s.from.unwrap().as_of,
        Some(AsOf::Version(461373440032243713))
    );
    let s = sel("SELECT * FROM t FOR TIME AS OF '2024-01-01 00:00:00'");
    assert_eq!(
        s.from.unwrap().as_of,
        Some(AsOf::Time("2024-01-01 00:00:00".into()))
    );

    let s = sel(
        "select a as x, b y, count(*) from t where a between 1 and 3 or b like 'x%' order by 1 desc, b limit 5, 10",
    );
    assert_eq!(s.limit, Some(10));
    assert_eq!(s.offset, Some(5));
    assert!(s.order_by[0].desc);
    assert!(matches!(&s.items[0], SelectItem::Expr { alias: Some(a), .. } if a == "x"));
    assert!(matches!(&s.items[1], SelectItem::Expr { alias: Some(a), .. } if a == "y"));
    assert!(
        matches!(&s.items[2], SelectItem::Expr { text, alias: None, .. } if text == "count(*)")
    );
    let s = sel("select 1 limit 3 offset 2");
    assert_eq!((s.limit, s.offset), (Some(3), Some(2)));

    let s = sel("SELECT @@max_allowed_packet,@@wait_timeout,@@socket");
    assert!(
        matches!(&s.items[0], SelectItem::Expr { expr: Expr::SysVar { name }, text, .. } if name == "max_allowed_packet" && text == "@@max_allowed_packet")
    );
    let s = sel("select @@session.auto_increment_increment");
    assert!(
        matches!(&s.items[0], SelectItem::Expr { expr: Expr::SysVar { name }, .. } if name == "auto_increment_increment")
    );
    let s = sel("SELECT FROM_UNIXTIME(1700000000123 / 1000, '%Y-%m-%d %H:%i:%s')");
    assert!(
        matches!(&s.items[0], SelectItem::Expr { expr: Expr::Func { name, args, .. }, .. } if name == "from_unixtime" && args.len() == 2)
    );
    let s = sel("select * from information_schema.tso_status");
    assert_eq!(
        s.from.unwrap().table.db.as_deref(),
        Some("information_schema")
    );
    let s = sel("select 1 -- trailing\n# other\n;");
    assert_eq!(s.items.len(), 1);
}

#[test]
fn syntax_error_text() {
    let e = parse("SELEC 1").unwrap_err();
    assert_eq!(e.code, ER_PARSE);
    assert!(
        e.message.starts_with(
            "errCode = 2, detailMessage = Syntax error in line 1:\nSELEC 1\n^\nEncountered: SELEC"
        ),
        "{}",
        e.message
    );
    let e = parse("select a from t where").unwrap_err();
    assert_eq!(e.code, ER_PARSE);
    assert!(e.message.contains("Encountered: <EOF>"), "{}", e.message);
    let e = parse("select 1;\nselect 2").unwrap_err();
    assert!(
        e.message.contains("Syntax error in line 2:\nselect 2\n^"),
        "{}",
        e.message
    );
    assert!(parse("").is_err());
    assert!(parse(";").is_err());
    assert!(parse("select 'unterminated").is_err());
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("select {}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(parse(&deep).is_err());
    let deep = format!("select {}1", "-".repeat(5000));
    assert!(parse(&deep).is_err());
    let deep = format!("select {} 1", "not ".repeat(5000));
    assert!(parse(&deep).is_err());
}

const WORDS: &[&str] = &[
    "select",
    "from",
    "where",
    "insert",
    "into",
    "values",
    "update",
    "set",
    "delete",
    "create",
    "table",
    "database",
    "drop",
    "show",
    "alter",
    "add",
    "column",
    "unique",
    "duplicate",
    "key",
    "distributed",
    "by",
    "hash",
    "buckets",
    "properties",
    "order",
    "limit",
    "offset",
    "for",
    "version",
    "time",
    "as",
    "of",
    "tablet",
    "incr",
    "and",
    "or",
    "not",
    "null",
    "is",
    "in",
    "between",
    "like",
    "count",
    "now",
    "t",
    "db",
    "a",
    "b",
    "@",
    "@@",
    "(",
    ")",
    ",",
    ".",
    ";",
    "*",
    "+",
    "-",
    "/",
    "=",
    "<>",
    "<",
    ">=",
    "'x'",
    "\"y\"",
    "`z`",
    "1",
    "2.5",
    "1e3",
    "auto",
    "partition",
    "case",
    "when",
    "then",
    "else",
    "end",
    "cast",
    "int",
    "varchar",
    "decimal",
    "datetime",
    "/*",
    "*/",
    "--",
    "#",
    "\n",
    "'",
    "\"",
    "`",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_panics_on_random_text(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }

    #[test]
    fn never_panics_on_token_soup(idx in proptest::collection::vec(0usize..WORDS.len(), 0..60)) {
        let sql: Vec<&str> = idx.iter().map(|i| WORDS[*i]).collect();
        let _ = parse(&sql.join(" "));
        let _ = parse(&sql.join(""));
    }
}

#[test]
fn nesting_limit_fits_in_a_quarter_of_the_default_stack() {
    // Tokio workers and test threads have 2 MiB; parsing at the nesting limit must fit in 512 KiB.
    let h = std::thread::Builder::new()
        .stack_size(1 << 19)
        .spawn(|| {
            for n in [18, 19, 20, 21, 200] {
                let sql = format!("select {}1{}", "(".repeat(n), ")".repeat(n));
                let _ = parse(&sql);
                let sql = format!(
                    "select * from t where {}a = 1{}",
                    "(not ".repeat(n),
                    ")".repeat(n)
                );
                let _ = parse(&sql);
            }
        })
        .unwrap();
    h.join().unwrap();
}
