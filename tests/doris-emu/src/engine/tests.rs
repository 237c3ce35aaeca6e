//! Engine unit tests: catalog, properties, writes, TSO, 2PC, @incr folding, TTL, visibility wait.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::clock::{Clock, compose_tso, tso_logical};

const HOUR: i64 = 3_600_000;

fn engine() -> Engine {
    // A frozen clock: the tests reason about exact times, which real time would move under them.
    Engine::new(Arc::new(Clock::frozen_at(1_790_000_000_000)), true)
}

fn col(name: &str, ty: DorisType, key: bool, nullable: bool) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        ty,
        nullable,
        is_key: key,
        default: None,
        comment: String::new(),
    }
}

fn def(name: &str, keys: KeysType, props: &[(&str, &str)]) -> TableDef {
    TableDef {
        db: "d".into(),
        name: name.into(),
        columns: vec![
            col("id", DorisType::Int, true, false),
            col("v", DorisType::Varchar(20), false, true),
        ],
        keys_type: keys,
        key_columns: vec!["id".into()],
        distribution: Distribution {
            hash_columns: vec!["id".into()],
            buckets: Some(4),
        },
        auto_partition: None,
        properties: props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        if_not_exists: false,
    }
}

const CL_HIST: &[(&str, &str)] = &[
    ("changelog.enable", "true"),
    ("changelog.need_historical_value", "true"),
];

fn setup(keys: KeysType, props: &[(&str, &str)]) -> Engine {
    let e = engine();
    e.create_database("d", false).unwrap();
    e.create_table(def("t", keys, props)).unwrap();
    e
}

fn row(id: i64, v: &str) -> Vec<Value> {
    vec![Value::Int(id), Value::Str(v.into())]
}

fn up(id: i64, v: &str) -> RowWrite {
    RowWrite::Upsert(row(id, v))
}

fn del(id: i64) -> RowWrite {
    RowWrite::Delete(vec![Value::Int(id), Value::Null])
}

fn err_of(r: Result<()>) -> String {
    r.unwrap_err().message
}

fn create_err(keys: KeysType, props: &[(&str, &str)]) -> String {
    let e = engine();
    e.create_database("d", false).unwrap();
    err_of(e.create_table(def("t", keys, props)))
}

fn incr_req(start: Option<i64>, end: Option<i64>, ty: IncrementType) -> IncrRequest {
    IncrRequest {
        db: "d".into(),
        table: "t".into(),
        start_ms: start,
        end_ms: end,
        increment_type: ty,
        visible_timeout_ms: 0,
    }
}

fn run_incr(e: &Engine, req: IncrRequest) -> Result<Vec<ChangeRow>> {
    futures::executor::block_on(e.incr(req))
}

/// `(op, id, v)` of each change row.
fn ops(rows: &[ChangeRow]) -> Vec<(i8, i64, String)> {
    rows.iter()
        .map(|r| {
            let id = match r.values[0] {
                Value::Int(i) => i,
                _ => -1,
            };
            let v = match &r.values[1] {
                Value::Str(s) => s.clone(),
                _ => "NULL".into(),
            };
            (r.op, id, v)
        })
        .collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

// ---------------------------------------------------------------- catalog

#[test]
fn catalog_errors_use_doris_texts() {
    let e = engine();
    assert_eq!(e.databases(), vec!["information_schema", "mysql"]);
    e.create_database("d", false).unwrap();
    let err = e.create_database("d", false).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            1007,
            "errCode = 2, detailMessage = Can't create database 'd'; database exists"
        )
    );
    e.create_database("d", true).unwrap();
    let err = e.tables("nope").unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (1049, "errCode = 2, detailMessage = Unknown database 'nope'")
    );
    e.create_table(def("t", KeysType::Unique, &[])).unwrap();
    let err = e.create_table(def("t", KeysType::Unique, &[])).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            1050,
            "errCode = 2, detailMessage = Table 't' already exists"
        )
    );
    let mut d = def("t", KeysType::Unique, &[]);
    d.if_not_exists = true;
    e.create_table(d).unwrap();
    let err = e.table_info("d", "x").unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (1051, "errCode = 2, detailMessage = Unknown table 'x'")
    );
    let err = e.scan("d", "x", None, None).unwrap_err();
    assert_eq!(
        err.message,
        "errCode = 2, detailMessage = Table [x] does not exist in database [d]."
    );
    let err = e.scan("zz", "x", None, None).unwrap_err();
    assert_eq!(
        err.message,
        "errCode = 2, detailMessage = Database [zz] does not exist."
    );
    let mut d = def("u", KeysType::Unique, &[]);
    d.db = "information_schema".into();
    assert!(err_of(e.create_table(d)).contains("Access denied"));
    assert_eq!(e.tables("d").unwrap(), vec!["t"]);
    assert_eq!(e.databases(), vec!["d", "information_schema", "mysql"]);
    e.drop_table("d", "t", false).unwrap();
    assert_eq!(
        err_of(e.drop_table("d", "t", false)),
        "errCode = 2, detailMessage = Unknown table 't'"
    );
    e.drop_table("d", "t", true).unwrap();
    e.drop_database("d", false).unwrap();
    assert!(e.tables("d").is_err());
}

#[test]
fn table_ids_and_tablets_are_unique_and_routing_is_stable() {
    let e = setup(KeysType::Unique, &[]);
    let mut d2 = def("t2", KeysType::Duplicate, &[]);
    d2.distribution.buckets = None;
    e.create_table(d2).unwrap();
    let a = e.table_info("d", "t").unwrap();
    let b = e.table_info("d", "t2").unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(a.tablets.len(), 4);
    assert_eq!(b.tablets.len(), AUTO_BUCKETS as usize);
    let mut all: Vec<i64> = a.tablets.iter().chain(&b.tablets).copied().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4 + AUTO_BUCKETS as usize);
    e.write("d", "t", (0..100).map(|i| up(i, "x")).collect())
        .unwrap();
    let mut total = 0;
    for tab in &a.tablets {
        let part = e.scan("d", "t", None, Some(&[*tab])).unwrap();
        total += part.len();
        // stable: the same rows each time
        assert_eq!(part, e.scan("d", "t", None, Some(&[*tab])).unwrap());
    }
    assert_eq!(total, 100);
}

// ---------------------------------------------------------------- properties

#[test]
fn property_errors_are_exact() {
    let p = "errCode = 2, detailMessage = ";
    assert_eq!(
        create_err(
            KeysType::Unique,
            &[("binlog.enable", "true"), ("binlog.format", "row")]
        ),
        format!("{p}Invalid binlog format value: row")
    );
    assert_eq!(
        create_err(
            KeysType::Unique,
            &[
                ("binlog.enable", "true"),
                ("binlog.format", "ROW"),
                ("binlog.ttl_seconds", "0")
            ]
        ),
        format!("{p}ROW binlog.ttl_seconds must be greater than 0")
    );
    assert_eq!(
        create_err(
            KeysType::Unique,
            &[
                ("changelog.enable", "true"),
                ("changelog.ttl_seconds", "-5")
            ]
        ),
        format!("{p}changelog.ttl_seconds must be greater than 0")
    );
    assert_eq!(
        create_err(
            KeysType::Unique,
            &[
                ("enable_unique_key_merge_on_write", "false"),
                ("binlog.enable", "true"),
                ("binlog.format", "ROW")
            ]
        ),
        format!("{p}Only duplicate and mow table model support binlog<Row>")
    );
    assert_eq!(
        create_err(
            KeysType::Unique,
            &[
                ("enable_unique_key_merge_on_write", "false"),
                ("changelog.enable", "true")
            ]
        ),
        format!("{p}Only duplicate and mow table model support changelog")
    );
    assert_eq!(
        create_err(
            KeysType::Duplicate,
            &[
                ("changelog.enable", "true"),
                ("changelog.need_historical_value", "true")
            ]
        ),
        format!("{p}Duplicate table model don't support record historical value")
    );
    assert_eq!(
        create_err(
            KeysType::Duplicate,
            &[("enable_unique_key_merge_on_write", "true")]
        ),
        format!("{p}enable_unique_key_merge_on_write property only support unique key table")
    );
    // feature flag off
    let e = Engine::new(Arc::new(Clock::new()), false);
    e.create_database("d", false).unwrap();
    assert_eq!(
        err_of(e.create_table(def("t", KeysType::Unique, &[("changelog.enable", "true")]))),
        format!("{p}changelog is not enabled, set enable_feature_changelog=true in fe.conf")
    );
    assert_eq!(
        err_of(e.create_table(def(
            "t",
            KeysType::Unique,
            &[("binlog.enable", "true"), ("binlog.format", "ROW")]
        ))),
        format!("{p}binlog is not enabled, set enable_feature_binlog=true in fe.conf")
    );
    e.create_table(def("t", KeysType::Unique, &[])).unwrap();
}

#[test]
fn changelog_spellings_and_defaults() {
    let e = setup(KeysType::Unique, &[("changelog.enable", "true")]);
    let i = e.table_info("d", "t").unwrap();
    assert_eq!(
        i.changelog,
        ChangelogConfig {
            enabled: true,
            spelling: ChangelogSpelling::Changelog,
            need_historical_value: false,
            ttl_seconds: 86_400
        }
    );
    assert_eq!(i.properties["changelog.enable"], "true");
    assert_eq!(i.properties["changelog.ttl_seconds"], "86400");
    assert_eq!(i.properties["changelog.need_historical_value"], "false");
    assert_eq!(i.properties["enable_unique_key_merge_on_write"], "true");
    assert_eq!(
        i.properties["replication_allocation"],
        "tag.location.default: 1"
    );

    e.create_table(def(
        "b",
        KeysType::Unique,
        &[
            ("binlog.enable", "true"),
            ("binlog.format", "ROW"),
            ("binlog.need_historical_value", "true"),
            ("binlog.ttl_seconds", "600"),
        ],
    ))
    .unwrap();
    let i = e.table_info("d", "b").unwrap();
    assert_eq!(i.changelog.spelling, ChangelogSpelling::Binlog);
    assert!(i.changelog.need_historical_value);
    assert_eq!(i.changelog.ttl_seconds, 600);
    for k in [
        "binlog.enable",
        "binlog.format",
        "binlog.need_historical_value",
        "binlog.ttl_seconds",
        "binlog.max_bytes",
        "binlog.max_history_nums",
    ] {
        assert!(i.properties.contains_key(k), "{k}");
    }
    assert_eq!(i.properties["binlog.max_bytes"], "9223372036854775807");

    // binlog.enable without the ROW format is the statement binlog: no changelog, no error
    e.create_table(def("s", KeysType::Unique, &[("binlog.enable", "true")]))
        .unwrap();
    assert!(!e.table_info("d", "s").unwrap().changelog.enabled);
    // MoR unique table without changelog is fine
    e.create_table(def(
        "m",
        KeysType::Unique,
        &[("enable_unique_key_merge_on_write", "false")],
    ))
    .unwrap();
    assert_eq!(
        e.table_info("d", "m").unwrap().properties["enable_unique_key_merge_on_write"],
        "false"
    );
    // duplicate tables have no merge-on-write property
    e.create_table(def(
        "dup",
        KeysType::Duplicate,
        &[("changelog.enable", "true")],
    ))
    .unwrap();
    assert!(
        !e.table_info("d", "dup")
            .unwrap()
            .properties
            .contains_key("enable_unique_key_merge_on_write")
    );
}

#[test]
fn alter_set_only_ttl_among_changelog_props() {
    let p = "errCode = 2, detailMessage = ";
    let e = setup(KeysType::Unique, CL_HIST);
    e.set_properties("d", "t", &[(s("changelog.ttl_seconds"), s("3600"))])
        .unwrap();
    assert_eq!(e.table_info("d", "t").unwrap().changelog.ttl_seconds, 3600);
    assert_eq!(
        e.table_info("d", "t").unwrap().properties["changelog.ttl_seconds"],
        "3600"
    );
    assert_eq!(
        err_of(e.set_properties("d", "t", &[(s("changelog.ttl_seconds"), s("0"))])),
        format!("{p}changelog.ttl_seconds must be greater than 0")
    );
    assert_eq!(
        err_of(e.set_properties(
            "d",
            "t",
            &[(s("changelog.need_historical_value"), s("false"))]
        )),
        format!("{p}not support change changelog.need_historical_value from true to false")
    );
    assert!(
        err_of(e.set_properties("d", "t", &[(s("changelog.enable"), s("false"))]))
            .contains("can't disable changelog")
    );
    // same value is a no-op
    e.set_properties("d", "t", &[(s("changelog.enable"), s("true"))])
        .unwrap();
    e.create_table(def(
        "b",
        KeysType::Unique,
        &[("binlog.enable", "true"), ("binlog.format", "ROW")],
    ))
    .unwrap();
    assert_eq!(
        err_of(e.set_properties("d", "b", &[(s("binlog.enable"), s("false"))])),
        format!("{p}can't disable binlog when format is [Row]")
    );
    e.set_properties("d", "b", &[(s("binlog.max_bytes"), s("100"))])
        .unwrap();
    assert_eq!(
        e.table_info("d", "b").unwrap().properties["binlog.max_bytes"],
        "100"
    );
    e.create_table(def("plain", KeysType::Unique, &[])).unwrap();
    assert_eq!(
        err_of(e.set_properties("d", "plain", &[(s("binlog.format"), s("ROW"))])),
        format!("{p}not support change binlog format from STATEMENT_AND_SNAPSHOT to ROW")
    );
}

#[test]
fn show_create_table_text() {
    let e = engine();
    e.create_database("d", false).unwrap();
    let mut d = def(
        "t",
        KeysType::Unique,
        &[
            ("changelog.enable", "true"),
            ("changelog.need_historical_value", "true"),
        ],
    );
    d.columns.push(ColumnDef {
        name: "d".into(),
        ty: DorisType::DateTime(3),
        nullable: true,
        is_key: false,
        default: None,
        comment: "when".into(),
    });
    d.columns.push(ColumnDef {
        name: "n".into(),
        ty: DorisType::Decimal {
            precision: 10,
            scale: 2,
        },
        nullable: false,
        is_key: false,
        default: Some(Value::Int(0)),
        comment: String::new(),
    });
    d.auto_partition = Some(AutoPartition {
        column: "d".into(),
        unit: "day".into(),
    });
    e.create_table(d).unwrap();
    let text = e.show_create_table("d", "t").unwrap();
    let expected = "CREATE TABLE `t` (\n  `id` int NOT NULL COMMENT \"\",\n  `v` varchar(20) NULL COMMENT \"\",\n  `d` datetime(3) NULL COMMENT \"when\",\n  `n` decimal(10,2) NOT NULL DEFAULT \"0.00\" COMMENT \"\"\n) ENGINE=OLAP\nUNIQUE KEY(`id`)\nCOMMENT 'OLAP'\nAUTO PARTITION BY RANGE (date_trunc(`d`, 'day'))\n()\nDISTRIBUTED BY HASH(`id`) BUCKETS 4\nPROPERTIES (\n\"replication_allocation\" = \"tag.location.default: 1\",\n\"enable_unique_key_merge_on_write\" = \"true\",\n\"min_load_replica_num\" = \"-1\",\n\"is_being_synced\" = \"false\",\n\"storage_medium\" = \"hdd\",\n\"storage_format\" = \"V2\",\n\"light_schema_change\" = \"true\",\n\"disable_auto_compaction\" = \"false\",\n\"enable_single_replica_compaction\" = \"false\",\n\"enable_mow_light_delete\" = \"false\",\n\"changelog.enable\" = \"true\",\n\"changelog.need_historical_value\" = \"true\",\n\"changelog.ttl_seconds\" = \"86400\"\n);";
    assert_eq!(text, expected);
    let mut d = def("r", KeysType::Duplicate, &[]);
    d.distribution = Distribution {
        hash_columns: vec![],
        buckets: None,
    };
    e.create_table(d).unwrap();
    let text = e.show_create_table("d", "r").unwrap();
    assert!(text.contains("DUPLICATE KEY(`id`)\nCOMMENT 'OLAP'\nDISTRIBUTED BY RANDOM BUCKETS AUTO\nPROPERTIES (\n"), "{text}");
}

#[test]
fn create_table_shape_errors() {
    let p = "errCode = 2, detailMessage = ";
    let e = engine();
    e.create_database("d", false).unwrap();
    let mut d = def("t", KeysType::Unique, &[]);
    d.columns[1].name = "ID".into();
    let err = e.create_table(d).unwrap_err();
    assert_eq!(
        (err.code, err.message),
        (1060, format!("{p}Duplicate column name 'ID'"))
    );
    let mut d = def("t", KeysType::Unique, &[]);
    d.key_columns = vec!["v".into()];
    assert_eq!(
        err_of(e.create_table(d)),
        format!("{p}Key columns should be a ordered prefix of the schema.")
    );
    let mut d = def("t", KeysType::Unique, &[]);
    d.columns[0].ty = DorisType::Double;
    assert_eq!(
        err_of(e.create_table(d)),
        format!("{p}Float or double can not used as a key, use decimal instead.")
    );
    let mut d = def("t", KeysType::Unique, &[]);
    d.distribution.hash_columns = vec!["v".into()];
    assert_eq!(
        err_of(e.create_table(d)),
        format!("{p}Distribution column[v] is not key column")
    );
    let mut d = def("t", KeysType::Unique, &[]);
    d.distribution.buckets = Some(0);
    assert_eq!(
        err_of(e.create_table(d)),
        format!("{p}Number of hash distribution should be greater than zero.")
    );
}

// ---------------------------------------------------------------- writes

#[test]
fn unique_upsert_semantics() {
    let e = setup(KeysType::Unique, CL_HIST);
    let w = e.write("d", "t", vec![up(2, "b"), up(1, "a")]).unwrap();
    assert_eq!(w.affected, 2);
    assert!(w.tso > 0);
    e.write("d", "t", vec![up(1, "a2")]).unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![row(1, "a2"), row(2, "b")]
    );
    let w = e.write("d", "t", vec![del(2)]).unwrap();
    assert_eq!(w.affected, 1);
    let w = e.write("d", "t", vec![del(42)]).unwrap();
    assert_eq!(
        w,
        WriteOutcome {
            tso: 0,
            affected: 0
        }
    );
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(1, "a2")]);
    // partial update: existing key keeps other columns, new key gets NULL
    e.write(
        "d",
        "t",
        vec![RowWrite::Partial {
            columns: vec![0],
            values: vec![Value::Int(7)],
        }],
    )
    .unwrap();
    e.write(
        "d",
        "t",
        vec![RowWrite::Partial {
            columns: vec![1, 0],
            values: vec![Value::Str("p".into()), Value::Int(1)],
        }],
    )
    .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![row(1, "p"), vec![Value::Int(7), Value::Null]]
    );
    // key-only delete rows are accepted
    e.write("d", "t", vec![RowWrite::Delete(vec![Value::Int(7)])])
        .unwrap();
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(1, "p")]);
}

#[test]
fn write_validation() {
    let p = "errCode = 2, detailMessage = ";
    let e = setup(KeysType::Unique, &[]);
    assert_eq!(
        e.write("d", "t", vec![RowWrite::Upsert(vec![Value::Int(1)])])
            .unwrap_err()
            .message,
        format!("{p}Column count doesn't match value count: expected 2, got 1")
    );
    assert_eq!(
        e.write(
            "d",
            "t",
            vec![RowWrite::Upsert(vec![Value::Null, Value::Null])]
        )
        .unwrap_err()
        .message,
        format!("{p}null value for not null column, column=id")
    );
    assert_eq!(
        e.write(
            "d",
            "t",
            vec![RowWrite::Upsert(vec![
                Value::Int(1),
                Value::Str("x".repeat(21))
            ])]
        )
        .unwrap_err()
        .message,
        format!(
            "{p}'{}' is too long for VARCHAR(20): 21 bytes, column=v",
            "x".repeat(21)
        )
    );
    assert!(
        e.write(
            "d",
            "t",
            vec![RowWrite::Partial {
                columns: vec![1],
                values: vec![Value::Str("x".into())]
            }]
        )
        .unwrap_err()
        .message
        .contains("missing: id")
    );
    // a failed write changes nothing
    assert!(
        e.write(
            "d",
            "t",
            vec![up(1, "a"), RowWrite::Upsert(vec![Value::Int(2)])]
        )
        .is_err()
    );
    assert!(e.scan("d", "t", None, None).unwrap().is_empty());
    // coercion: strings into INT columns
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Str("5".into()),
            Value::Int(3),
        ])],
    )
    .unwrap();
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(5, "3")]);
}

#[test]
fn partial_update_rolls_back_on_error() {
    let e = engine();
    e.create_database("d", false).unwrap();
    let mut d = def("t", KeysType::Unique, CL_HIST);
    d.columns.push(col("n", DorisType::Int, false, false));
    e.create_table(d).unwrap();
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Int(1),
            Value::Null,
            Value::Int(1),
        ])],
    )
    .unwrap();
    let err = e
        .write(
            "d",
            "t",
            vec![
                RowWrite::Partial {
                    columns: vec![0, 1],
                    values: vec![Value::Int(1), Value::Str("x".into())],
                },
                RowWrite::Partial {
                    columns: vec![0, 1],
                    values: vec![Value::Int(2), Value::Str("y".into())],
                },
            ],
        )
        .unwrap_err();
    assert!(
        err.message.contains("the unmentioned column `n`"),
        "{}",
        err.message
    );
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![vec![Value::Int(1), Value::Null, Value::Int(1)]]
    );
}

#[test]
fn duplicate_tables_keep_every_row_and_delete_silently() {
    let e = setup(KeysType::Duplicate, &[("changelog.enable", "true")]);
    e.write("d", "t", vec![up(1, "a"), up(1, "a"), up(2, "b")])
        .unwrap();
    assert_eq!(e.scan("d", "t", None, None).unwrap().len(), 3);
    let w = e
        .write("d", "t", vec![RowWrite::Delete(row(1, "a"))])
        .unwrap();
    assert_eq!(w.affected, 1);
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![row(1, "a"), row(2, "b")]
    );
    // no changelog records for the predicate delete; all types give the inserts
    for ty in [
        IncrementType::Detail,
        IncrementType::AppendOnly,
        IncrementType::MinDelta,
    ] {
        let rows = run_incr(&e, incr_req(None, None, ty)).unwrap();
        assert_eq!(
            ops(&rows),
            vec![(0, 1, s("a")), (0, 1, s("a")), (0, 2, s("b"))],
            "{ty:?}"
        );
    }
    assert!(
        e.write(
            "d",
            "t",
            vec![RowWrite::Partial {
                columns: vec![0],
                values: vec![Value::Int(1)]
            }]
        )
        .unwrap_err()
        .message
        .contains("Partial update is only allowed on unique table")
    );
}

#[test]
fn one_tso_per_commit_and_lsn_order() {
    let e = setup(KeysType::Unique, CL_HIST);
    let before = e.clock().now_ms();
    let a = e
        .write("d", "t", vec![up(1, "a"), up(2, "b"), up(3, "c")])
        .unwrap();
    let b = e.write("d", "t", vec![up(1, "a2")]).unwrap();
    assert!(b.tso > a.tso);
    assert!(tso_physical_ms(a.tso) >= before && tso_physical_ms(a.tso) <= e.clock().now_ms());
    assert!(tso_logical(a.tso) < 1 << 18);
    let rows = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    let got: Vec<(i8, i64, i64)> = rows.iter().map(|r| (r.op, r.tso, r.lsn)).collect();
    assert_eq!(
        got,
        vec![
            (0, a.tso, 0),
            (0, a.tso, 1),
            (0, a.tso, 2),
            (2, b.tso, 0),
            (3, b.tso, 0)
        ]
    );
    assert_eq!(e.committed_tso(), b.tso);
}

// ---------------------------------------------------------------- @incr

/// A scripted history one hour apart per step; returns the step times (ms).
fn scripted(e: &Engine) -> Vec<i64> {
    let mut times = Vec::new();
    let mut step = |w: Vec<RowWrite>| {
        e.clock().advance_ms(HOUR);
        times.push(e.clock().now_ms());
        e.write("d", "t", w).unwrap();
    };
    step(vec![up(1, "a"), up(2, "b"), up(3, "c")]); // t0
    step(vec![up(1, "a2"), del(2), up(4, "d")]); // t1
    step(vec![up(5, "e")]); // t2
    step(vec![del(5), up(1, "a3"), up(3, "c")]); // t3 (3 rewritten unchanged)
    e.clock().advance_ms(HOUR);
    times
}

#[test]
fn detail_append_only_min_delta() {
    let e = setup(KeysType::Unique, CL_HIST);
    let t = scripted(&e);
    let w = |ty| run_incr(&e, incr_req(Some(t[1]), Some(t[3] + 1), ty)).unwrap();
    assert_eq!(
        ops(&w(IncrementType::Detail)),
        vec![
            (2, 1, s("a")),
            (3, 1, s("a2")),
            (1, 2, s("b")),
            (0, 4, s("d")),
            (0, 5, s("e")),
            (1, 5, s("e")),
            (2, 1, s("a2")),
            (3, 1, s("a3")),
            (2, 3, s("c")),
            (3, 3, s("c")),
        ]
    );
    assert_eq!(
        ops(&w(IncrementType::AppendOnly)),
        vec![(0, 4, s("d")), (0, 5, s("e"))]
    );
    let md = w(IncrementType::MinDelta);
    assert_eq!(
        ops(&md),
        vec![
            (1, 2, s("b")),
            (0, 4, s("d")),
            (2, 1, s("a")),
            (3, 1, s("a3"))
        ]
    );
    // the tso/lsn of the key's last change
    let last = md.iter().find(|r| r.op == op::UPDATE_AFTER).unwrap();
    assert_eq!((tso_physical_ms(last.tso), last.lsn), (t[3], 1));
    // whole history: every surviving key is an APPEND
    let all = run_incr(&e, incr_req(None, None, IncrementType::MinDelta)).unwrap();
    assert_eq!(
        ops(&all),
        vec![(0, 4, s("d")), (0, 1, s("a3")), (0, 3, s("c"))]
    );
    // [start, end): end at t1 excludes t1
    let first = run_incr(&e, incr_req(Some(t[0]), Some(t[1]), IncrementType::Detail)).unwrap();
    assert_eq!(first.len(), 3);
    // chained windows add up to the whole history, no gaps or duplicates
    let a = run_incr(&e, incr_req(None, Some(t[2]), IncrementType::Detail)).unwrap();
    let b = run_incr(&e, incr_req(Some(t[2]), None, IncrementType::Detail)).unwrap();
    let whole = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    assert_eq!([a, b].concat(), whole);
    // a start after the end, or in the future, gives nothing
    assert!(
        run_incr(&e, incr_req(Some(t[2]), Some(t[1]), IncrementType::Detail))
            .unwrap()
            .is_empty()
    );
    assert!(
        run_incr(
            &e,
            incr_req(Some(e.clock().now_ms() + HOUR), None, IncrementType::Detail)
        )
        .unwrap()
        .is_empty()
    );
}

#[test]
fn mow_without_historical_value() {
    let e = setup(KeysType::Unique, &[("changelog.enable", "true")]);
    let t = scripted(&e);
    let err = run_incr(&e, incr_req(None, None, IncrementType::MinDelta)).unwrap_err();
    assert_eq!(
        err.message,
        "errCode = 2, detailMessage = MIN_DELTA INCR query requires base table to enable changelog.need_historical_value=true"
    );
    let rows = run_incr(&e, incr_req(Some(t[1]), Some(t[2]), IncrementType::Detail)).unwrap();
    assert_eq!(
        ops(&rows),
        vec![(0, 1, s("a2")), (1, 2, s("b")), (0, 4, s("d"))]
    );
    let rows = run_incr(
        &e,
        incr_req(Some(t[1]), Some(t[2]), IncrementType::AppendOnly),
    )
    .unwrap();
    assert_eq!(ops(&rows), vec![(0, 1, s("a2")), (0, 4, s("d"))]);
    let e = setup(
        KeysType::Unique,
        &[("binlog.enable", "true"), ("binlog.format", "ROW")],
    );
    assert_eq!(
        run_incr(&e, incr_req(None, None, IncrementType::MinDelta))
            .unwrap_err()
            .message,
        "errCode = 2, detailMessage = MIN_DELTA INCR query requires base table to enable binlog.need_historical_value=true"
    );
}

#[test]
fn incr_requires_changelog() {
    let e = setup(KeysType::Unique, &[]);
    let err = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            1105,
            "errCode = 2, detailMessage = INCR query requires ROW binlog enabled on base table."
        )
    );
    let err = run_incr(
        &e,
        IncrRequest {
            table: "nope".into(),
            ..incr_req(None, None, IncrementType::Detail)
        },
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "errCode = 2, detailMessage = Table [nope] does not exist in database [d]."
    );
}

#[test]
fn ttl_rules() {
    for (props, msg) in [
        (
            vec![
                ("changelog.enable", "true"),
                ("changelog.need_historical_value", "true"),
                ("changelog.ttl_seconds", "7200"),
            ],
            "errCode = 2, detailMessage = Changelog offset has expired according to changelog.ttl_seconds",
        ),
        (
            vec![
                ("binlog.enable", "true"),
                ("binlog.format", "ROW"),
                ("binlog.need_historical_value", "true"),
                ("binlog.ttl_seconds", "7200"),
            ],
            "errCode = 2, detailMessage = Row binlog offset has expired according to binlog.ttl_seconds",
        ),
    ] {
        let e = setup(KeysType::Unique, &props);
        let t = scripted(&e); // now = t3 + 1h; ttl 2h → t0, t1 expired (t1 = now - 3h), t2 at now-2h expired too
        let now = e.clock().now_ms();
        assert_eq!(now - t[2], 2 * HOUR);
        // MIN_DELTA with an expired explicit start fails
        let err = run_incr(&e, incr_req(Some(t[1]), None, IncrementType::MinDelta)).unwrap_err();
        assert_eq!(err.message, msg);
        // the boundary: start == now - ttl is expired, one ms later is not
        assert!(
            run_incr(
                &e,
                incr_req(Some(now - 2 * HOUR), None, IncrementType::MinDelta)
            )
            .is_err()
        );
        let ok = run_incr(
            &e,
            incr_req(Some(now - 2 * HOUR + 1), None, IncrementType::MinDelta),
        )
        .unwrap();
        // only t3 retained: MIN_DELTA sees 5 deleted, 1 updated, 3 unchanged
        assert_eq!(
            ops(&ok),
            vec![(1, 5, s("e")), (2, 1, s("a2")), (3, 1, s("a3"))]
        );
        // DETAIL and APPEND_ONLY silently start at the first retained change
        let d = run_incr(&e, incr_req(Some(t[0]), None, IncrementType::Detail)).unwrap();
        assert!(d.iter().all(|r| tso_physical_ms(r.tso) == t[3]));
        assert_eq!(d.len(), 5);
        assert!(
            run_incr(&e, incr_req(Some(t[0]), None, IncrementType::AppendOnly))
                .unwrap()
                .is_empty()
        );
        // without a start: the retained changes
        assert_eq!(
            run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap(),
            d
        );
        // the window moves with the clock even with no writes
        e.clock().advance_ms(2 * HOUR);
        assert!(
            run_incr(&e, incr_req(None, None, IncrementType::Detail))
                .unwrap()
                .is_empty()
        );
        // raising the TTL brings the history back (nothing is physically dropped)
        e.set_properties(
            "d",
            "t",
            &[(
                s(if msg.contains("Changelog") {
                    "changelog.ttl_seconds"
                } else {
                    "binlog.ttl_seconds"
                }),
                s("86400"),
            )],
        )
        .unwrap();
        assert_eq!(
            run_incr(&e, incr_req(None, None, IncrementType::Detail))
                .unwrap()
                .len(),
            3 + 4 + 1 + 5
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibility_wait_lets_a_commit_land_in_the_window() {
    let e = Arc::new(setup(KeysType::Unique, CL_HIST));
    e.write("d", "t", vec![up(1, "a")]).unwrap();
    let txn = e.begin_txn("d", "t", "l1").unwrap();
    assert_eq!(
        e.finish_txn(txn, vec![up(2, "b")], true).unwrap(),
        TxnState::PreCommitted
    );
    let end = e.clock().now_ms() + 60_000;
    let e2 = e.clone();
    let committer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        e2.two_phase("d", &TxnRef::Id(txn), TxnOperation::Commit)
            .unwrap()
    });
    let req = IncrRequest {
        visible_timeout_ms: 5_000,
        ..incr_req(None, Some(end), IncrementType::Detail)
    };
    let started = Instant::now();
    let rows = e.incr(req).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(
        committer.await.unwrap(),
        format!("transaction [{txn}] commit successfully.")
    );
    assert_eq!(ops(&rows), vec![(0, 1, s("a")), (0, 2, s("b"))]);
}

#[tokio::test]
async fn visibility_wait_times_out_with_5101() {
    let e = setup(KeysType::Unique, CL_HIST);
    e.write("d", "t", vec![up(1, "a")]).unwrap();
    let committed = e.committed_tso();
    let written = tso_physical_ms(committed);
    e.clock().advance_ms(2_000);
    let txn = e.begin_txn("d", "t", "l1").unwrap();
    e.finish_txn(txn, vec![up(2, "b")], true).unwrap();
    let end = e.clock().now_ms() + 1;
    let req = IncrRequest {
        visible_timeout_ms: 100,
        ..incr_req(None, Some(end), IncrementType::Detail)
    };
    let err = e.incr(req).await.unwrap_err();
    assert_eq!(err.code, 5101);
    assert!(err.is_window_not_ready());
    let prefix = format!(
        "ERR_INCR_VISIBLE_WAIT_TIMEOUT: reason=VISIBLE_WAIT_TIMEOUT, requestedEndTimestampMs={end}, currentTSO="
    );
    assert!(err.message.starts_with(&prefix), "{}", err.message);
    assert!(
        err.message.ends_with(&format!(
            ", committedTSO={committed}, committedTSOPhysicalTimeMs={}, retryAfterMs=1000, timeoutMs=100",
            tso_physical_ms(committed)
        )),
        "{}",
        err.message
    );
    // a window that ends before the pre-commit does not wait
    let req = IncrRequest {
        visible_timeout_ms: 100,
        ..incr_req(None, Some(written + 1_000), IncrementType::Detail)
    };
    assert_eq!(e.incr(req).await.unwrap().len(), 1);
    // once aborted, the wait is over and the row never appears
    e.two_phase("d", &TxnRef::Id(txn), TxnOperation::Abort)
        .unwrap();
    let req = IncrRequest {
        visible_timeout_ms: 100,
        ..incr_req(None, Some(end), IncrementType::Detail)
    };
    assert_eq!(e.incr(req).await.unwrap().len(), 1);
}

// ---------------------------------------------------------------- stream load transactions

#[test]
fn two_phase_messages() {
    let p = "errCode = 2, detailMessage = ";
    let e = setup(KeysType::Unique, CL_HIST);
    let a = e.begin_txn("d", "t", "la").unwrap();
    assert_eq!(a, 1000);
    // prepare → commit refused
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(a), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}transaction [{a}] is prepare, not pre-committed.")
    );
    assert_eq!(
        e.finish_txn(a, vec![up(1, "a")], true).unwrap(),
        TxnState::PreCommitted
    );
    assert!(
        e.scan("d", "t", None, None).unwrap().is_empty(),
        "pre-committed rows are invisible"
    );
    assert_eq!(e.txn_state(a), Some(TxnState::PreCommitted));
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(a), TxnOperation::Commit)
            .unwrap(),
        format!("transaction [{a}] commit successfully.")
    );
    assert_eq!(e.txn_state(a), Some(TxnState::Visible));
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(1, "a")]);
    // commit twice → already visible; abort visible → could not abort
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(a), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}transaction [{a}] is already visible, not pre-committed.")
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(a), TxnOperation::Abort)
            .unwrap_err(),
        format!("{p}transaction [{a}] is already VISIBLE, could not abort.")
    );
    // abort then commit / abort again
    let b = e.begin_txn("d", "t", "lb").unwrap();
    e.finish_txn(b, vec![up(2, "b")], true).unwrap();
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(b), TxnOperation::Abort)
            .unwrap(),
        format!("transaction [{b}] abort successfully.")
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(b), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}transaction [{b}] is already aborted. abort reason: User Abort")
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(b), TxnOperation::Abort)
            .unwrap_err(),
        format!("{p}transaction [{b}] is already aborted, abort reason: User Abort")
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(999_999), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}transaction [999999] not found")
    );
    assert_eq!(
        e.two_phase("nodb", &TxnRef::Id(a), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}unknown database, database=nodb")
    );
    // by label
    let c = e.begin_txn("d", "t", "lc").unwrap();
    e.finish_txn(c, vec![up(3, "c")], true).unwrap();
    assert_eq!(
        e.two_phase("d", &TxnRef::Label("lc".into()), TxnOperation::Commit)
            .unwrap(),
        "label [lc] commit successfully."
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Label("lc".into()), TxnOperation::Commit)
            .unwrap_err(),
        format!("{p}running transaction not found, label=lc")
    );
    assert_eq!(
        e.two_phase("d", &TxnRef::Label("zz".into()), TxnOperation::Abort)
            .unwrap_err(),
        format!("{p}transaction not found, label=zz")
    );
    let d = e.begin_txn("d", "t", "ld").unwrap();
    assert_eq!(
        e.two_phase("d", &TxnRef::Label("ld".into()), TxnOperation::Abort)
            .unwrap(),
        "label [ld] abort successfully."
    );
    assert_eq!(e.txn_state(d), Some(TxnState::Aborted));
    // a failing load aborts with its error as the reason
    let f = e.begin_txn("d", "t", "lf").unwrap();
    let err = e
        .finish_txn(f, vec![RowWrite::Upsert(vec![Value::Int(1)])], false)
        .unwrap_err();
    assert_eq!(e.txn_state(f), Some(TxnState::Aborted));
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(f), TxnOperation::Commit)
            .unwrap_err(),
        format!(
            "{p}transaction [{f}] is already aborted. abort reason: {}",
            err.message
        )
    );
    e.abort_txn(f, "again").unwrap();
}

#[test]
fn labels_are_unique_until_aborted() {
    let e = setup(KeysType::Unique, &[]);
    let a = e.begin_txn("d", "t", "x").unwrap();
    assert_eq!(
        e.begin_txn("d", "t", "x"),
        Err(BeginError::LabelExists {
            txn_id: a,
            state: TxnState::Prepare
        })
    );
    e.abort_txn(a, "cancelled").unwrap();
    let b = e.begin_txn("d", "t", "x").unwrap();
    assert!(b > a);
    assert_eq!(
        e.finish_txn(b, vec![up(1, "a")], false).unwrap(),
        TxnState::Visible
    );
    assert_eq!(
        e.begin_txn("d", "t", "x"),
        Err(BeginError::LabelExists {
            txn_id: b,
            state: TxnState::Visible
        })
    );
    assert_eq!(
        e.abort_txn(b, "late").unwrap_err().message,
        format!(
            "errCode = 2, detailMessage = transaction [{b}] is already VISIBLE, could not abort."
        )
    );
    // labels are per database
    e.create_database("d2", false).unwrap();
    e.create_table(TableDef {
        db: "d2".into(),
        ..def("t", KeysType::Unique, &[])
    })
    .unwrap();
    e.begin_txn("d2", "t", "x").unwrap();
    assert!(
        matches!(e.begin_txn("d", "nope", "y"), Err(BeginError::Other(err)) if err.code == 1051)
    );
}

#[test]
fn precommitted_partial_update_merges_at_commit_time() {
    let e = setup(KeysType::Unique, CL_HIST);
    e.write("d", "t", vec![up(1, "a")]).unwrap();
    let x = e.begin_txn("d", "t", "p").unwrap();
    e.finish_txn(
        x,
        vec![RowWrite::Partial {
            columns: vec![0],
            values: vec![Value::Int(1)],
        }],
        true,
    )
    .unwrap();
    e.write("d", "t", vec![up(1, "later")]).unwrap();
    e.two_phase("d", &TxnRef::Id(x), TxnOperation::Commit)
        .unwrap();
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(1, "later")]);
}

#[test]
fn precommitted_load_survives_schema_change() {
    let e = setup(KeysType::Unique, CL_HIST);
    let x = e.begin_txn("d", "t", "p").unwrap();
    e.finish_txn(x, vec![up(1, "a")], true).unwrap();
    let mut c = col("n", DorisType::Int, false, true);
    c.default = Some(Value::Int(9));
    e.add_column("d", "t", c, ColumnPosition::After("id"))
        .unwrap();
    e.two_phase("d", &TxnRef::Id(x), TxnOperation::Commit)
        .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![vec![Value::Int(1), Value::Int(9), Value::Str("a".into())]]
    );
}

// ---------------------------------------------------------------- time travel, schema change, truncate

#[test]
fn for_version_as_of() {
    let e = setup(KeysType::Unique, CL_HIST);
    let a = e.write("d", "t", vec![up(1, "a"), up(2, "b")]).unwrap().tso;
    let b = e.write("d", "t", vec![up(1, "a2"), del(2)]).unwrap().tso;
    assert_eq!(
        e.scan("d", "t", Some(a), None).unwrap(),
        vec![row(1, "a"), row(2, "b")]
    );
    assert_eq!(
        e.scan("d", "t", Some(b - 1), None).unwrap(),
        vec![row(1, "a"), row(2, "b")]
    );
    assert_eq!(e.scan("d", "t", Some(b), None).unwrap(), vec![row(1, "a2")]);
    assert_eq!(
        e.scan("d", "t", Some(i64::MAX), None).unwrap(),
        e.scan("d", "t", None, None).unwrap()
    );
    // long ago: expired on merge-on-write
    assert_eq!(
        e.scan("d", "t", Some(a - compose_tso(86_400_000, 0)), None)
            .unwrap_err()
            .message,
        "errCode = 2, detailMessage = Changelog offset has expired according to changelog.ttl_seconds"
    );
    // without the changelog / without before images
    e.create_table(def("plain", KeysType::Unique, &[])).unwrap();
    assert_eq!(
        e.scan("d", "plain", Some(a), None).unwrap_err().message,
        "errCode = 2, detailMessage = FOR VERSION/TIME AS OF requires row binlog"
    );
    e.create_table(def(
        "nohist",
        KeysType::Unique,
        &[("binlog.enable", "true"), ("binlog.format", "ROW")],
    ))
    .unwrap();
    assert_eq!(
        e.scan("d", "nohist", Some(a), None).unwrap_err().message,
        "errCode = 2, detailMessage = FOR VERSION/TIME AS OF on merge-on-write table requires binlog.need_historical_value=true"
    );
    // duplicate tables replay predicate deletes too
    e.create_table(def(
        "dup",
        KeysType::Duplicate,
        &[("changelog.enable", "true")],
    ))
    .unwrap();
    let x = e
        .write("d", "dup", vec![up(1, "a"), up(1, "a")])
        .unwrap()
        .tso;
    e.write("d", "dup", vec![RowWrite::Delete(row(1, "a"))])
        .unwrap();
    assert_eq!(e.scan("d", "dup", Some(x), None).unwrap().len(), 2);
    assert_eq!(e.scan("d", "dup", Some(i64::MAX), None).unwrap().len(), 1);
}

#[test]
fn schema_change_rewrites_rows_and_history() {
    let e = setup(KeysType::Unique, CL_HIST);
    let a = e.write("d", "t", vec![up(1, "a")]).unwrap().tso;
    let mut c = col("n", DorisType::Int, false, true);
    c.default = Some(Value::Int(7));
    e.add_column("d", "t", c.clone(), ColumnPosition::Unchanged)
        .unwrap();
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Int(2),
            Value::Str("b".into()),
            Value::Int(8),
        ])],
    )
    .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![
            vec![Value::Int(1), Value::Str("a".into()), Value::Int(7)],
            vec![Value::Int(2), Value::Str("b".into()), Value::Int(8)],
        ]
    );
    let rows = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    assert!(rows.iter().all(|r| r.values.len() == 3));
    assert_eq!(rows[0].values[2], Value::Int(7));
    assert_eq!(
        e.scan("d", "t", Some(a), None).unwrap(),
        vec![vec![Value::Int(1), Value::Str("a".into()), Value::Int(7)]]
    );
    let p = "errCode = 2, detailMessage = ";
    assert_eq!(
        err_of(e.add_column("d", "t", c, ColumnPosition::Unchanged)),
        format!("{p}Can not add column which already exists in base table: n")
    );
    assert_eq!(
        err_of(e.add_column(
            "d",
            "t",
            col("z", DorisType::Int, false, true),
            ColumnPosition::After("nope")
        )),
        format!("{p}Column[nope] does not exists")
    );
    e.drop_column("d", "t", "v").unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![
            vec![Value::Int(1), Value::Int(7)],
            vec![Value::Int(2), Value::Int(8)]
        ]
    );
    assert!(
        run_incr(&e, incr_req(None, None, IncrementType::Detail))
            .unwrap()
            .iter()
            .all(|r| r.values.len() == 2)
    );
    assert_eq!(
        err_of(e.drop_column("d", "t", "id")),
        format!("{p}Can not drop key column in Unique data model table")
    );
    assert_eq!(
        err_of(e.drop_column("d", "t", "q")),
        format!("{p}Column does not exists: q")
    );
    let info = e.table_info("d", "t").unwrap();
    assert_eq!(
        info.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        vec!["id", "n"]
    );
    // writes use the new shape; the key still works
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![Value::Int(1), Value::Int(70)])],
    )
    .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap()[0],
        vec![Value::Int(1), Value::Int(70)]
    );
}

#[test]
fn truncate_is_not_a_changelog_delete() {
    let e = setup(KeysType::Unique, CL_HIST);
    let a = e.write("d", "t", vec![up(1, "a")]).unwrap().tso;
    e.truncate("d", "t").unwrap();
    assert!(e.scan("d", "t", None, None).unwrap().is_empty());
    assert_eq!(e.scan("d", "t", Some(a), None).unwrap(), vec![row(1, "a")]);
    assert!(e.scan("d", "t", Some(i64::MAX), None).unwrap().is_empty());
    let rows = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    assert_eq!(ops(&rows), vec![(0, 1, s("a"))]);
    e.write("d", "t", vec![up(1, "b")]).unwrap();
    assert_eq!(e.scan("d", "t", None, None).unwrap(), vec![row(1, "b")]);
}

#[test]
fn truncate_gives_the_table_new_tablets_and_the_old_ids_read_as_nothing() {
    let e = setup(KeysType::Unique, CL_HIST);
    e.write("d", "t", vec![up(1, "a"), up(2, "b"), up(3, "c")])
        .unwrap();
    let old = e.table_info("d", "t").unwrap().tablets;
    e.truncate("d", "t").unwrap();
    let new = e.table_info("d", "t").unwrap().tablets;
    assert_eq!(new.len(), old.len());
    assert!(new.iter().all(|t| !old.contains(t)), "{old:?} {new:?}");
    e.write("d", "t", vec![up(4, "d")]).unwrap();
    // The old ids read as no rows, without an error; the new ones hold the table.
    assert!(e.scan("d", "t", None, Some(&old)).unwrap().is_empty());
    assert_eq!(
        e.scan("d", "t", None, Some(&new)).unwrap(),
        vec![row(4, "d")]
    );
}

fn many_rows(n: i64) {
    let e = setup(KeysType::Unique, CL_HIST);
    let chunk = n / 10;
    for c in 0..10 {
        let rows = (0..chunk).map(|i| up(c * chunk + i, "v")).collect();
        e.write("d", "t", rows).unwrap();
    }
    e.write("d", "t", (0..1000).map(|i| up(i * 7, "w")).collect())
        .unwrap();
    e.write("d", "t", (0..1000).map(|i| del(i * 11)).collect())
        .unwrap();
    let expected = (n - 1000) as usize;
    assert_eq!(e.scan("d", "t", None, None).unwrap().len(), expected);
    let rows = run_incr(&e, incr_req(None, None, IncrementType::MinDelta)).unwrap();
    assert_eq!(rows.len(), expected);
}

/// Large tables stay correct (speed is measured by benchmarks, not asserted here).
#[test]
fn many_rows_scan_and_fold_correctly() {
    many_rows(200_000);
}

// ---------------------------------------------------------------- property test

#[derive(Debug, Clone)]
enum Op {
    Upsert(i64, u8),
    Delete(i64),
    Partial(i64, u8),
    Advance,
    Precommit(Vec<(i64, u8)>, bool),
    Truncate,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..8, 0u8..4).prop_map(|(k, v)| Op::Upsert(k, v)),
        2 => (0i64..8).prop_map(Op::Delete),
        1 => (0i64..8, 0u8..4).prop_map(|(k, v)| Op::Partial(k, v)),
        1 => Just(Op::Advance),
        1 => (proptest::collection::vec((0i64..8, 0u8..4), 0..4), any::<bool>()).prop_map(|(r, c)| Op::Precommit(r, c)),
        0 => Just(Op::Truncate),
    ]
}

fn replay_detail(keys: KeysType, rows: &[ChangeRow]) -> Vec<Vec<Value>> {
    match keys {
        KeysType::Unique => {
            let mut m: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
            for r in rows {
                let k = match r.values[0] {
                    Value::Int(i) => i,
                    _ => unreachable!(),
                };
                match r.op {
                    op::APPEND | op::UPDATE_AFTER => {
                        m.insert(k, r.values.clone());
                    }
                    op::DELETE => {
                        m.remove(&k);
                    }
                    _ => {}
                }
            }
            m.into_values().collect()
        }
        KeysType::Duplicate => rows.iter().map(|r| r.values.clone()).collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn detail_replay_reproduces_scan(
        ops in proptest::collection::vec(op_strategy(), 0..40),
        unique in any::<bool>(),
        hist in any::<bool>(),
    ) {
        let keys = if unique { KeysType::Unique } else { KeysType::Duplicate };
        let mut props = vec![("changelog.enable", "true")];
        if unique && hist {
            props.push(("changelog.need_historical_value", "true"));
        }
        let e = setup(keys, &props);
        let mut label = 0;
        let mut tsos = Vec::new();
        for o in &ops {
            let r = match o {
                Op::Upsert(k, v) => e.write("d", "t", vec![up(*k, &v.to_string())]).map(|w| tsos.push(w.tso)),
                Op::Delete(k) => {
                    let rows = e.scan("d", "t", None, None).unwrap();
                    let hit: Vec<RowWrite> = rows.into_iter().filter(|r| r[0] == Value::Int(*k)).map(RowWrite::Delete).take(1).collect();
                    e.write("d", "t", if unique { vec![del(*k)] } else { hit }).map(|w| tsos.push(w.tso))
                }
                Op::Partial(k, v) => e
                    .write("d", "t", vec![RowWrite::Partial { columns: vec![0, 1], values: vec![Value::Int(*k), Value::Str(v.to_string())] }])
                    .map(|w| tsos.push(w.tso)),
                Op::Advance => {
                    e.clock().advance_ms(1500);
                    Ok(())
                }
                Op::Precommit(rows, commit) => {
                    label += 1;
                    let id = e.begin_txn("d", "t", &format!("l{label}")).unwrap();
                    e.finish_txn(id, rows.iter().map(|(k, v)| up(*k, &v.to_string())).collect(), true).unwrap();
                    let op = if *commit { TxnOperation::Commit } else { TxnOperation::Abort };
                    e.two_phase("d", &TxnRef::Id(id), op).unwrap();
                    Ok(())
                }
                Op::Truncate => e.truncate("d", "t"),
            };
            // partial updates on DUP tables are refused; nothing else fails
            prop_assert!(r.is_ok() || (!unique && matches!(o, Op::Partial(..))), "{:?} {:?}", o, r);
        }
        let detail = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
        let want = e.scan("d", "t", None, None).unwrap();
        let mut got = replay_detail(keys, &detail);
        if unique {
            prop_assert_eq!(got, want);
        } else {
            // DUP predicate deletes are not in the changelog: the rows left are a sub-multiset of
            // the inserted ones
            for w in want {
                let pos = got.iter().position(|g| *g == w);
                prop_assert!(pos.is_some(), "{:?} was never inserted", w);
                got.remove(pos.unwrap());
            }
        }
        // ordered by TSO, LSN, OP
        let keys_seq: Vec<(i64, i64, i8)> = detail.iter().map(|r| (r.tso, r.lsn, r.op)).collect();
        let mut sorted = keys_seq.clone();
        sorted.sort();
        prop_assert_eq!(keys_seq, sorted);
        // MIN_DELTA over the whole history = the current rows as APPENDs (unique with before images)
        if unique && hist {
            let md = run_incr(&e, incr_req(None, None, IncrementType::MinDelta)).unwrap();
            prop_assert!(md.iter().all(|r| r.op == op::APPEND));
            let mut md_rows: Vec<Vec<Value>> = md.into_iter().map(|r| r.values).collect();
            md_rows.sort_by(|a, b| a[0].sql_cmp(&b[0]).unwrap());
            prop_assert_eq!(md_rows, e.scan("d", "t", None, None).unwrap());
        }
        // FOR VERSION AS OF each commit equals DETAIL replayed up to it
        if unique && hist {
            for &tso in tsos.iter().filter(|t| **t > 0) {
                let upto: Vec<ChangeRow> = detail.iter().filter(|r| r.tso <= tso).cloned().collect();
                prop_assert_eq!(replay_detail(keys, &upto), e.scan("d", "t", Some(tso), None).unwrap());
            }
        }
    }
}

#[test]
fn a_pre_committed_load_is_aborted_by_the_precommit_timeout_on_dorises_clock() {
    let e = setup(KeysType::Unique, CL_HIST);
    e.fe_config
        .set_named("stream_load_default_precommit_timeout_second", "60")
        .unwrap();
    let txn = e.begin_txn("d", "t", "l1").unwrap();
    e.finish_txn(txn, vec![up(1, "a")], true).unwrap();
    e.clock().advance_ms(59_000);
    assert_eq!(e.txn_state(txn), Some(TxnState::PreCommitted));
    e.clock().advance_ms(1_001);
    assert_eq!(e.txn_state(txn), Some(TxnState::Aborted));
    assert_eq!(
        e.two_phase("d", &TxnRef::Id(txn), TxnOperation::Commit)
            .unwrap_err(),
        format!(
            "errCode = 2, detailMessage = transaction [{txn}] is already aborted. abort reason: timeout by txn manager"
        )
    );
    // The label is free again, and nothing was written.
    let again = e.begin_txn("d", "t", "l1").unwrap();
    assert_ne!(again, txn);
}

#[test]
fn a_load_timeout_bounds_the_prepare_state_only() {
    let e = setup(KeysType::Unique, CL_HIST);
    let slow = e
        .begin_txn_with_timeout("d", "t", "slow", Some(10))
        .unwrap();
    e.clock().advance_ms(10_001);
    assert_eq!(e.txn_state(slow), Some(TxnState::Aborted));
    assert!(e.finish_txn(slow, vec![up(1, "a")], true).is_err());
    // Pre-committed in time, the load outlives its own timeout (the pre-commit timeout applies).
    let quick = e
        .begin_txn_with_timeout("d", "t", "quick", Some(10))
        .unwrap();
    e.finish_txn(quick, vec![up(1, "a")], true).unwrap();
    e.clock().advance_ms(20_000);
    assert_eq!(e.txn_state(quick), Some(TxnState::PreCommitted));
}

#[test]
fn running_transactions_per_database_are_limited() {
    let e = setup(KeysType::Unique, CL_HIST);
    e.fe_config
        .set_named("max_running_txn_num_per_db", "2")
        .unwrap();
    let a = e.begin_txn("d", "t", "a").unwrap();
    e.finish_txn(a, vec![up(1, "a")], true).unwrap();
    let _b = e.begin_txn("d", "t", "b").unwrap();
    let Err(BeginError::Other(err)) = e.begin_txn("d", "t", "c") else {
        panic!("the third running transaction must be refused");
    };
    assert!(
        err.message
            .starts_with("errCode = 2, detailMessage = current running txns on db "),
        "{}",
        err.message
    );
    assert!(
        err.message.ends_with(" is 2, larger than limit 2"),
        "{}",
        err.message
    );
    // A commit frees a place.
    e.two_phase("d", &TxnRef::Id(a), TxnOperation::Commit)
        .unwrap();
    e.begin_txn("d", "t", "c").unwrap();
}

/// Tables past the size where the row map is rebuilt packed keep every row, by key and by
/// tablet, through growth, updates, deletes and a schema change; the changelog still folds.
#[test]
fn a_table_rebuilt_packed_keeps_its_rows_and_their_order() {
    for keys in [KeysType::Unique, KeysType::Duplicate] {
        let props = if keys == KeysType::Unique {
            CL_HIST
        } else {
            &[("changelog.enable", "true")]
        };
        let e = setup(keys, props);
        let n: i64 = 150_000;
        // In reverse and in several commits: every rebuild is between two of them.
        for chunk in (0..n).rev().collect::<Vec<_>>().chunks(10_000) {
            e.write(
                "d",
                "t",
                chunk.iter().map(|&i| up(i, &format!("v{i}"))).collect(),
            )
            .unwrap();
        }
        let rows = e.scan("d", "t", None, None).unwrap();
        assert_eq!(rows.len(), n as usize, "{keys:?}");
        if keys == KeysType::Unique {
            // Ordered by key, whatever the load order.
            assert_eq!(rows[0], row(0, "v0"));
            assert_eq!(rows[n as usize - 1], row(n - 1, &format!("v{}", n - 1)));
            e.write("d", "t", vec![up(7, "seven"), del(8)]).unwrap();
            let rows = e.scan("d", "t", None, None).unwrap();
            assert_eq!(rows.len(), n as usize - 1);
            assert_eq!(rows[7], row(7, "seven"));
            assert_eq!(rows[8], row(9, "v9"));
            // Shrinking by more than half rebuilds again; the rest is intact.
            e.write("d", "t", (0..100_000).map(del).collect()).unwrap();
            let rows = e.scan("d", "t", None, None).unwrap();
            assert_eq!(rows.len(), 50_000);
            assert_eq!(rows[0], row(100_000, "v100000"));
        }
        let tablets = e.table_info("d", "t").unwrap().tablets;
        let by_tablet: usize = tablets
            .iter()
            .map(|t| e.count_rows("d", "t", Some(&[*t])).unwrap())
            .sum();
        assert_eq!(by_tablet, e.count_rows("d", "t", None).unwrap());
        e.add_column(
            "d",
            "t",
            col("extra", DorisType::Int, false, true),
            ColumnPosition::Unchanged,
        )
        .unwrap();
        let after = e.scan("d", "t", None, None).unwrap();
        assert_eq!(after.len(), by_tablet);
        assert!(after.iter().all(|r| r.len() == 3 && r[2] == Value::Null));
        let changes = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
        assert!(changes.len() >= n as usize, "{keys:?}: {}", changes.len());
    }
}

// ---------------------------------------------------------------- column changes (docs/doris-protocols.md §1.9)

fn names(e: &Engine) -> Vec<String> {
    e.table_info("d", "t")
        .unwrap()
        .columns
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn modified(name: &str, ty: DorisType) -> ModifiedColumn {
    ModifiedColumn {
        name: name.into(),
        ty,
        nullable: None,
        default: None,
        comment: None,
    }
}

#[test]
fn column_changes_doris_refuses_on_a_changelog_table_leave_it_as_it_was() {
    let p = "errCode = 2, detailMessage = ";
    let refused = format!("{p}Not allowed to perform current operation on Table With binlog<row>");
    for props in [
        CL_HIST,
        &[("changelog.enable", "true")][..],
        &[("binlog.enable", "true"), ("binlog.format", "ROW")][..],
    ] {
        let e = setup(KeysType::Unique, props);
        e.write("d", "t", vec![up(1, "a")]).unwrap();
        assert_eq!(err_of(e.rename_column("d", "t", "v", "w")), refused);
        assert_eq!(
            err_of(e.modify_column(
                "d",
                "t",
                modified("v", DorisType::Varchar(40)),
                ColumnPosition::Unchanged
            )),
            refused
        );
        // refused before the column is even looked up, as Doris's analysis does
        assert_eq!(
            err_of(e.modify_column(
                "d",
                "t",
                modified("nope", DorisType::Int),
                ColumnPosition::Unchanged
            )),
            refused
        );
        assert_eq!(err_of(e.reorder_columns("d", "t")), refused);
        assert_eq!(
            err_of(e.set_properties("d", "t", &[("bloom_filter_columns".into(), "v".into())])),
            refused
        );
        assert_eq!(names(&e), ["id", "v"]);
        assert_eq!(
            e.table_info("d", "t").unwrap().columns[1].ty,
            DorisType::Varchar(20)
        );
        // allowed: a column's comment, ADD and DROP COLUMN
        e.modify_column_comment("d", "t", "v", "why").unwrap();
        assert_eq!(e.table_info("d", "t").unwrap().columns[1].comment, "why");
        e.add_column(
            "d",
            "t",
            col("n", DorisType::Int, false, true),
            ColumnPosition::Unchanged,
        )
        .unwrap();
        e.drop_column("d", "t", "n").unwrap();
    }
}

#[test]
fn a_window_across_add_drop_and_add_again_reads_every_row_with_the_current_columns() {
    // As Doris's regression test `row_binlog_p0/test_row_binlog_schema_change` reads it: an added
    // column is NULL (or its default) in the changes before it, a dropped column is gone from every
    // change, and a column added again under a dropped one's name does not bring its old values
    // back.
    let e = setup(KeysType::Unique, CL_HIST);
    e.write("d", "t", vec![up(1, "a"), up(2, "b")]).unwrap();
    let mut n = col("n", DorisType::Int, false, true);
    n.default = Some(Value::Int(5));
    e.add_column("d", "t", n, ColumnPosition::Unchanged)
        .unwrap();
    e.add_column(
        "d",
        "t",
        col("m", DorisType::Int, false, true),
        ColumnPosition::After("id"),
    )
    .unwrap();
    assert_eq!(names(&e), ["id", "m", "v", "n"]);
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Int(1),
            Value::Int(10),
            Value::Str("a2".into()),
            Value::Int(11),
        ])],
    )
    .unwrap();
    let rows = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    let got: Vec<(i8, Vec<Value>)> = rows.iter().map(|r| (r.op, r.values.clone())).collect();
    let r = |id, m: Value, v: &str, n| vec![Value::Int(id), m, Value::Str(v.into()), Value::Int(n)];
    assert_eq!(
        got,
        vec![
            (op::APPEND, r(1, Value::Null, "a", 5)),
            (op::APPEND, r(2, Value::Null, "b", 5)),
            (op::UPDATE_BEFORE, r(1, Value::Null, "a", 5)),
            (op::UPDATE_AFTER, r(1, Value::Int(10), "a2", 11)),
        ]
    );
    e.drop_column("d", "t", "v").unwrap();
    e.add_column(
        "d",
        "t",
        col("v", DorisType::String, false, true),
        ColumnPosition::Unchanged,
    )
    .unwrap();
    let rows = run_incr(&e, incr_req(None, None, IncrementType::Detail)).unwrap();
    assert!(
        rows.iter()
            .all(|r| r.values.len() == 4 && r.values[3] == Value::Null)
    );
    assert_eq!(names(&e), ["id", "m", "n", "v"]);
}

#[test]
fn add_column_positions_follow_dorises_key_then_value_order() {
    let p = "errCode = 2, detailMessage = ";
    let e = setup(KeysType::Duplicate, &[]);
    e.write("d", "t", vec![up(1, "a")]).unwrap();
    assert_eq!(
        err_of(e.add_column(
            "d",
            "t",
            col("f", DorisType::Int, false, true),
            ColumnPosition::First
        )),
        format!("{p}Invalid column order. value should be after key. index[t]")
    );
    e.add_column(
        "d",
        "t",
        col("k0", DorisType::Int, true, true),
        ColumnPosition::First,
    )
    .unwrap();
    assert_eq!(names(&e), ["k0", "id", "v"]);
    assert_eq!(e.table_info("d", "t").unwrap().key_columns, ["k0", "id"]);
    assert_eq!(
        err_of(e.add_column(
            "d",
            "t",
            col("x", DorisType::Int, false, true),
            ColumnPosition::After("k0")
        )),
        format!("{p}Invalid column order. value should be after key. index[t]")
    );
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![vec![Value::Null, Value::Int(1), Value::Str("a".into())]]
    );
}

#[test]
fn rename_column_keeps_the_values_under_the_new_name() {
    let p = "errCode = 2, detailMessage = ";
    let e = setup(KeysType::Unique, &[]);
    e.write("d", "t", vec![up(1, "a"), up(2, "b")]).unwrap();
    e.rename_column("d", "t", "v", "w").unwrap();
    e.rename_column("d", "t", "id", "key_id").unwrap();
    assert_eq!(names(&e), ["key_id", "w"]);
    let info = e.table_info("d", "t").unwrap();
    assert_eq!(info.key_columns, ["key_id"]);
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![row(1, "a"), row(2, "b")]
    );
    // the renamed key still keys: an upsert replaces
    e.write("d", "t", vec![up(1, "a2")]).unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![row(1, "a2"), row(2, "b")]
    );
    assert_eq!(
        err_of(e.rename_column("d", "t", "nope", "x")),
        format!("{p}Column[nope] does not exists")
    );
    assert_eq!(
        err_of(e.rename_column("d", "t", "w", "key_id")),
        format!("{p}Column name[key_id] is already used")
    );
}

#[test]
fn modify_column_widens_in_place_and_refuses_narrowing() {
    let p = "errCode = 2, detailMessage = ";
    let e = engine();
    e.create_database("d", false).unwrap();
    let mut t = def("t", KeysType::Unique, &[]);
    t.columns.push(col("n", DorisType::Int, false, true));
    t.columns.push(col(
        "amount",
        DorisType::Decimal {
            precision: 10,
            scale: 2,
        },
        false,
        true,
    ));
    e.create_table(t).unwrap();
    let big = i32::MAX as i64;
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Int(1),
            Value::Str("abcd".into()),
            Value::Int(big),
            Value::Decimal(12345, 2),
        ])],
    )
    .unwrap();
    e.modify_column(
        "d",
        "t",
        modified("n", DorisType::BigInt),
        ColumnPosition::Unchanged,
    )
    .unwrap();
    e.modify_column(
        "d",
        "t",
        modified("v", DorisType::Varchar(64)),
        ColumnPosition::Unchanged,
    )
    .unwrap();
    e.modify_column(
        "d",
        "t",
        modified(
            "amount",
            DorisType::Decimal {
                precision: 20,
                scale: 2,
            },
        ),
        ColumnPosition::Unchanged,
    )
    .unwrap();
    // a value the old type could not hold now fits
    e.write(
        "d",
        "t",
        vec![RowWrite::Upsert(vec![
            Value::Int(2),
            Value::Str("x".repeat(64)),
            Value::Int(big * 4),
            Value::Decimal(123_456_789_012_345, 2),
        ])],
    )
    .unwrap();
    let info = e.table_info("d", "t").unwrap();
    let types: Vec<_> = info.columns.iter().map(|c| c.ty).collect();
    assert_eq!(
        types,
        [
            DorisType::Int,
            DorisType::Varchar(64),
            DorisType::BigInt,
            DorisType::Decimal {
                precision: 20,
                scale: 2
            }
        ]
    );
    assert_eq!(
        e.scan("d", "t", None, None).unwrap()[0],
        vec![
            Value::Int(1),
            Value::Str("abcd".into()),
            Value::Int(big),
            Value::Decimal(12345, 2)
        ]
    );
    // a move: the values go with the column
    e.modify_column(
        "d",
        "t",
        modified("n", DorisType::LargeInt),
        ColumnPosition::After("id"),
    )
    .unwrap();
    assert_eq!(names(&e), ["id", "n", "v", "amount"]);
    assert_eq!(
        e.scan("d", "t", None, None).unwrap()[0][..3],
        [
            Value::Int(1),
            Value::LargeInt(big as i128),
            Value::Str("abcd".into())
        ]
    );
    for (c, ty, want) in [
        ("n", DorisType::Int, "Can not change LARGEINT to INT"),
        ("v", DorisType::Varchar(8), "Cannot shorten string length"),
        ("v", DorisType::Boolean, "Can not change VARCHAR to BOOLEAN"),
    ] {
        assert_eq!(
            err_of(e.modify_column("d", "t", modified(c, ty), ColumnPosition::Unchanged)),
            format!("{p}{want}")
        );
    }
    assert_eq!(
        err_of(e.modify_column(
            "d",
            "t",
            modified("id", DorisType::BigInt),
            ColumnPosition::Unchanged
        )),
        format!("{p}Can not modify distribution column[id]")
    );
    assert_eq!(
        err_of(e.modify_column(
            "d",
            "t",
            modified("nope", DorisType::BigInt),
            ColumnPosition::Unchanged
        )),
        format!("{p}Column[nope] does not exists")
    );
    // nothing was changed by the refusals
    assert_eq!(names(&e), ["id", "n", "v", "amount"]);
    assert_eq!(
        e.table_info("d", "t").unwrap().columns[2].ty,
        DorisType::Varchar(64)
    );
}

#[test]
fn a_load_precommitted_before_a_rename_and_a_widening_commits_into_the_same_columns() {
    // A sink table (no changelog) widened while a two-phase load waits for its commit: the load's
    // values land in the renamed and widened columns, converted, not as NULLs.
    let e = engine();
    e.create_database("d", false).unwrap();
    let mut t = def("t", KeysType::Unique, &[]);
    t.columns.push(col("n", DorisType::Int, false, true));
    e.create_table(t).unwrap();
    let full = |id, v: &str, n| {
        RowWrite::Upsert(vec![Value::Int(id), Value::Str(v.into()), Value::Int(n)])
    };
    let x = e.begin_txn("d", "t", "p").unwrap();
    e.finish_txn(x, vec![full(1, "a", 7)], true).unwrap();
    let y = e.begin_txn("d", "t", "q").unwrap();
    e.finish_txn(
        y,
        vec![RowWrite::Partial {
            columns: vec![0, 2],
            values: vec![Value::Int(1), Value::Int(8)],
        }],
        true,
    )
    .unwrap();
    e.rename_column("d", "t", "v", "w").unwrap();
    e.modify_column(
        "d",
        "t",
        modified("n", DorisType::LargeInt),
        ColumnPosition::After("id"),
    )
    .unwrap();
    e.two_phase("d", &TxnRef::Id(x), TxnOperation::Commit)
        .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![vec![
            Value::Int(1),
            Value::LargeInt(7),
            Value::Str("a".into())
        ]]
    );
    e.two_phase("d", &TxnRef::Id(y), TxnOperation::Commit)
        .unwrap();
    assert_eq!(
        e.scan("d", "t", None, None).unwrap(),
        vec![vec![
            Value::Int(1),
            Value::LargeInt(8),
            Value::Str("a".into())
        ]]
    );
}
