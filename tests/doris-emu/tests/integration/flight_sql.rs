//! Arrow Flight SQL front ends, driven by arrow-rs's `FlightSqlServiceClient`
//! (docs/doris-protocols.md §3): auth, tickets and endpoints, types, faults, sessions.

use crate::common;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampSecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_flight::error::FlightError;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use arrow_flight::{FlightDescriptor, FlightInfo};
use arrow_schema::{DataType, TimeUnit};
use common::{STUDENT_DDL, emu, emu_with, setup_sql};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::IncrFault;
use dcs_doris_emu::flight::ticket::{handle_of_ticket, parse_be_handle, parse_fe_handle};
use futures::TryStreamExt;
use prost::Message;
use tonic::transport::{Channel, Endpoint};

async fn channel(port: u16) -> Channel {
    Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .expect("connect")
}

/// An FE client after `handshake(root, "")`.
async fn fe_client(emu: &RunningEmulator) -> FlightSqlServiceClient<Channel> {
    let mut c = FlightSqlServiceClient::new(channel(emu.ports().fe_flight_port).await);
    c.handshake("root", "").await.expect("handshake");
    c
}

fn grpc_to_http(uri: &str) -> String {
    uri.replace("grpc+tcp://", "http://")
}

/// Fetch every endpoint of `info` from its location, with no credentials on the BE and the
/// caller's token on the FE.
async fn fetch(
    fe: &FlightSqlServiceClient<Channel>,
    info: &FlightInfo,
) -> Result<Vec<RecordBatch>, FlightError> {
    let mut out = Vec::new();
    for ep in &info.endpoint {
        let uri = &ep.location[0].uri;
        let mut c = FlightSqlServiceClient::new(
            Endpoint::from_shared(grpc_to_http(uri))
                .unwrap()
                .connect()
                .await
                .expect("connect to location"),
        );
        if let Some(tok) = fe.token()
            && !is_be(info)
        {
            c.set_token(tok.clone());
        }
        let stream = c.do_get(ep.ticket.clone().unwrap()).await?;
        out.extend(stream.try_collect::<Vec<_>>().await?);
    }
    Ok(out)
}

fn handle(info: &FlightInfo) -> String {
    handle_of_ticket(&info.endpoint[0].ticket.as_ref().unwrap().ticket)
        .expect("TicketStatementQuery")
}

fn is_be(info: &FlightInfo) -> bool {
    handle_of_ticket(&info.endpoint[0].ticket.as_ref().unwrap().ticket)
        .is_some_and(|h| parse_be_handle(&h).is_ok())
}

async fn query(
    c: &mut FlightSqlServiceClient<Channel>,
    sql: &str,
) -> (FlightInfo, Vec<RecordBatch>) {
    let info = c
        .execute(sql.to_string(), None)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = fetch(c, &info)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    (info, batches)
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(|b| b.num_rows()).sum()
}

fn tonic_status(e: FlightError) -> tonic::Status {
    match e {
        FlightError::Tonic(s) => *s,
        other => panic!("not a gRPC status: {other:?}"),
    }
}

fn int_column(batches: &[RecordBatch], name: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for b in batches {
        let col = b
            .column_by_name(name)
            .unwrap_or_else(|| panic!("column {name}"));
        match col.data_type() {
            DataType::Int8 => out.extend(
                col.as_primitive::<Int8Type>()
                    .iter()
                    .map(|v| v.unwrap() as i64),
            ),
            DataType::Int32 => out.extend(
                col.as_primitive::<Int32Type>()
                    .iter()
                    .map(|v| v.unwrap() as i64),
            ),
            DataType::Int64 => {
                out.extend(col.as_primitive::<Int64Type>().iter().map(|v| v.unwrap()))
            }
            t => panic!("{name} is {t}"),
        }
    }
    out
}

async fn seed_students(emu: &RunningEmulator) {
    setup_sql(emu, &["CREATE DATABASE IF NOT EXISTS test", STUDENT_DDL]).await;
    let values: Vec<String> = (1..=20)
        .map(|i| {
            format!(
                "({i}, 'name{i}', {}, {i}.50, '2024-05-01 10:00:00.{i:03}')",
                10 + i
            )
        })
        .collect();
    setup_sql(
        emu,
        &[&format!(
            "INSERT INTO test.student VALUES {}",
            values.join(", ")
        )],
    )
    .await;
}

#[tokio::test]
async fn handshake_returns_a_bearer_token() {
    let emu = emu().await;
    let mut c = FlightSqlServiceClient::new(channel(emu.ports().fe_flight_port).await);
    c.handshake("root", "").await.unwrap();
    let tok = c
        .token()
        .cloned()
        .expect("bearer token in the handshake response");
    assert!(!tok.is_empty() && tok.len() <= 26, "{tok}");
    assert_eq!(emu.doris.counters.get("flight_handshake"), 1);
    // A second handshake makes a different token.
    let mut c2 = FlightSqlServiceClient::new(channel(emu.ports().fe_flight_port).await);
    c2.handshake("root", "").await.unwrap();
    assert_ne!(c2.token(), Some(&tok));
}

#[tokio::test]
async fn wrong_password_is_unauthenticated() {
    let emu = emu_with(|c| c.password = "secret".into()).await;
    let mut raw = FlightServiceClient::new(channel(emu.ports().fe_flight_port).await);
    let mut req = tonic::Request::new(futures::stream::iter(vec![
        arrow_flight::HandshakeRequest::default(),
    ]));
    req.metadata_mut()
        .insert("authorization", "Basic cm9vdDp3cm9uZw==".parse().unwrap()); // root:wrong
    let status = raw.handshake(req).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert!(
        status.message().starts_with(
            "Unable to authenticate user root, exception: errCode = 2, detailMessage = Access denied for user 'root@"
        ),
        "{}",
        status.message()
    );
    let mut ok = FlightSqlServiceClient::new(channel(emu.ports().fe_flight_port).await);
    ok.handshake("root", "secret").await.unwrap();
    assert!(ok.token().is_some());
}

#[tokio::test]
async fn calls_without_or_with_a_bogus_token_are_rejected() {
    let emu = emu().await;
    let mut c = FlightSqlServiceClient::new(channel(emu.ports().fe_flight_port).await);
    let status = tonic_status(c.execute("SELECT 1".into(), None).await.unwrap_err());
    assert_eq!(status.code(), tonic::Code::Unauthenticated);

    c.set_token("bogus".into());
    let status = tonic_status(c.execute("SELECT 1".into(), None).await.unwrap_err());
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    assert_eq!(
        status.message(),
        "invalid bearer token: bogus, try reconnect, bearer token may not be created, or may have been evict, search \
         for this token in fe.log to see the evict reason. currently in fe.conf, `arrow_flight_token_cache_size`=512, \
         `arrow_flight_token_alive_time`=4320"
    );
}

#[tokio::test]
async fn basic_auth_on_a_non_handshake_call_creates_a_token() {
    let emu = emu().await;
    let mut raw = FlightServiceClient::new(channel(emu.ports().fe_flight_port).await);
    let cmd = CommandStatementQuery {
        query: "SET time_zone = '+08:00'".into(),
        transaction_id: None,
    };
    let mut req = tonic::Request::new(FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec()));
    req.metadata_mut()
        .insert("authorization", "Basic cm9vdDo".parse().unwrap()); // root: unpadded
    let resp = raw.get_flight_info(req).await.unwrap();
    let auth = resp
        .metadata()
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(auth.starts_with("Bearer "), "{auth}");
}

#[tokio::test]
async fn select_goes_to_the_be_without_auth_and_is_read_once() {
    let emu = emu().await;
    seed_students(&emu).await;
    let mut c = fe_client(&emu).await;
    let sql = "SELECT id, name FROM test.student ORDER BY id";
    let info = c.execute(sql.into(), None).await.unwrap();
    assert_eq!(info.endpoint.len(), 1);
    assert_eq!(info.total_records, -1);
    assert_eq!(info.total_bytes, -1);
    let ep = &info.endpoint[0];
    assert_eq!(
        ep.location[0].uri,
        format!("grpc+tcp://127.0.0.1:{}", emu.ports().be_flight_port)
    );
    let h = handle(&info);
    let t = parse_be_handle(&h).unwrap();
    assert_eq!(
        (t.host.as_str(), t.brpc_port, t.sql.as_str()),
        ("127.0.0.1", 8060, sql)
    );
    let qid = h.split('&').next().unwrap();
    let (hi, lo) = qid.split_once('-').unwrap();
    assert!(
        hi.chars().chain(lo.chars()).all(|c| c.is_ascii_hexdigit()),
        "{qid}"
    );
    let schema = info.clone().try_decode_schema().unwrap();
    assert_eq!(schema.field(0).name(), "id");
    assert_eq!(schema.field(0).data_type(), &DataType::Int32);
    assert!(!schema.field(0).is_nullable());
    assert_eq!(schema.field(1).data_type(), &DataType::Utf8);

    // The BE needs no token.
    let mut be = FlightSqlServiceClient::new(channel(emu.ports().be_flight_port).await);
    let batches: Vec<RecordBatch> = be
        .do_get(ep.ticket.clone().unwrap())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(rows(&batches), 20);
    assert_eq!(int_column(&batches, "id"), (1..=20).collect::<Vec<_>>());
    assert_eq!(batches[0].schema(), std::sync::Arc::new(schema));
    assert_eq!(emu.doris.counters.get("flight_do_get_be"), 1);

    // A result is fetched once.
    let err = match be.do_get(ep.ticket.clone().unwrap()).await {
        Ok(s) => s.try_collect::<Vec<_>>().await.unwrap_err(),
        Err(e) => e,
    };
    let status = tonic_status(err);
    assert_eq!(status.code(), tonic::Code::Internal);
    assert!(
        status.message().contains("not found arrow flight schema"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn fe_local_statements_answer_from_the_fe() {
    let emu = emu().await;
    let mut c = fe_client(&emu).await;
    let (info, batches) = query(&mut c, "CREATE DATABASE flightdb").await;
    assert_eq!(
        info.endpoint[0].location[0].uri,
        format!("grpc+tcp://127.0.0.1:{}", emu.ports().fe_flight_port)
    );
    let h = handle(&info);
    let (peer, _) = parse_fe_handle(&h).unwrap();
    assert_eq!(Some(&peer.to_string()), c.token());
    assert_eq!(batches[0].schema().field(0).name(), "StatusResult");
    assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "0");
    assert_eq!(emu.doris.counters.get("flight_do_get_fe"), 1);

    // SHOW returns its rows from the FE, as text.
    let (info, batches) = query(&mut c, "SHOW DATABASES").await;
    assert!(!is_be(&info));
    let names: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .map(|v| v.unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(names.contains(&"flightdb".to_string()), "{names:?}");
}

#[tokio::test]
async fn every_type_maps_per_the_master_column() {
    let emu = emu().await;
    setup_sql(
        &emu,
        &[
            "CREATE DATABASE IF NOT EXISTS test",
            "CREATE TABLE test.all_types (
                id INT NOT NULL, b BOOLEAN, t TINYINT, s SMALLINT, i INT, l BIGINT, li LARGEINT,
                f FLOAT, d DOUBLE, dcm DECIMAL(10, 2), c CHAR(4), v VARCHAR(10), str STRING, dt DATE,
                dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), j JSON
            ) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
            "INSERT INTO test.all_types VALUES
                (1, true, -8, 300, 70000, 1099511627776, 170141183460469231731687303715884105727, 1.5, 2.25, 12.50,
                 'ab', 'héllo', 'long', '2024-01-02', '2024-01-02 03:04:05', '2024-01-02 03:04:05.123',
                 '2024-01-02 03:04:05.123456', '{\"k\": 1}'),
                (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        ],
    )
    .await;
    let mut c = fe_client(&emu).await;
    let (info, batches) = query(&mut c, "SELECT * FROM test.all_types ORDER BY id").await;
    assert!(is_be(&info));
    let schema = batches[0].schema();
    let types: Vec<DataType> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        vec![
            DataType::Int32,
            DataType::Boolean,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::Utf8,
            DataType::Float32,
            DataType::Float64,
            DataType::Decimal128(10, 2),
            DataType::Utf8,
            DataType::Utf8,
            DataType::Utf8,
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Second, None),
            DataType::Timestamp(TimeUnit::Millisecond, None),
            DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Utf8,
        ]
    );
    assert!(!schema.field(0).is_nullable());
    assert!(schema.fields().iter().skip(1).all(|f| f.is_nullable()));
    assert_eq!(info.try_decode_schema().unwrap(), *schema);

    let b = &batches[0];
    assert_eq!(b.num_rows(), 2);
    assert!(b.column(1).as_boolean().value(0));
    assert_eq!(b.column(2).as_primitive::<Int8Type>().value(0), -8);
    assert_eq!(b.column(3).as_primitive::<Int16Type>().value(0), 300);
    assert_eq!(b.column(4).as_primitive::<Int32Type>().value(0), 70_000);
    assert_eq!(
        b.column(5).as_primitive::<Int64Type>().value(0),
        1_099_511_627_776
    );
    assert_eq!(
        b.column(6).as_string::<i32>().value(0),
        "170141183460469231731687303715884105727"
    );
    assert_eq!(b.column(7).as_primitive::<Float32Type>().value(0), 1.5);
    assert_eq!(b.column(8).as_primitive::<Float64Type>().value(0), 2.25);
    assert_eq!(b.column(9).as_primitive::<Decimal128Type>().value(0), 1250);
    assert_eq!(b.column(10).as_string::<i32>().value(0), "ab");
    assert_eq!(b.column(11).as_string::<i32>().value(0), "héllo");
    assert_eq!(b.column(12).as_string::<i32>().value(0), "long");
    assert_eq!(b.column(13).as_primitive::<Date32Type>().value(0), 19_724);
    let secs = 19_724i64 * 86_400 + 3 * 3600 + 4 * 60 + 5; // wall clock taken as UTC
    assert_eq!(
        b.column(14).as_primitive::<TimestampSecondType>().value(0),
        secs
    );
    assert_eq!(
        b.column(15)
            .as_primitive::<TimestampMillisecondType>()
            .value(0),
        secs * 1000 + 123
    );
    assert_eq!(
        b.column(16)
            .as_primitive::<TimestampMicrosecondType>()
            .value(0),
        secs * 1_000_000 + 123_456
    );
    let json: serde_json::Value =
        serde_json::from_str(b.column(17).as_string::<i32>().value(0)).unwrap();
    assert_eq!(json, serde_json::json!({"k": 1}));
    for col in 1..18 {
        assert!(b.column(col).is_null(1), "column {col} is NULL in row 2");
    }
}

#[tokio::test]
async fn a_large_result_arrives_in_several_batches() {
    let emu = emu().await;
    setup_sql(
        &emu,
        &[
            "CREATE DATABASE IF NOT EXISTS test",
            "CREATE TABLE test.big (id BIGINT NOT NULL, v VARCHAR(32)) DUPLICATE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 3 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let values: Vec<String> = (0..10_000).map(|i| format!("({i}, 'value-{i}')")).collect();
    setup_sql(
        &emu,
        &[&format!("INSERT INTO test.big VALUES {}", values.join(","))],
    )
    .await;
    let mut c = fe_client(&emu).await;
    let (_, batches) = query(&mut c, "SELECT id, v FROM test.big ORDER BY id").await;
    assert!(batches.len() >= 3, "{} batches", batches.len());
    assert_eq!(rows(&batches), 10_000);
    assert_eq!(int_column(&batches, "id"), (0..10_000).collect::<Vec<_>>());
}

/// A plain `SELECT cols FROM t TABLET(..) WHERE ..` (the snapshot's query) is made and sent a
/// part at a time; its rows are the ones the whole-result path (ORDER BY forces it) gives, and an
/// error in the filter is the same error.
#[tokio::test]
async fn a_streamed_tablet_scan_returns_what_the_whole_result_returns() {
    let emu = emu().await;
    setup_sql(
        &emu,
        &[
            "CREATE DATABASE IF NOT EXISTS test",
            "CREATE TABLE test.big (id BIGINT NOT NULL, v VARCHAR(32)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let values: Vec<String> = (0..20_000).map(|i| format!("({i}, 'value-{i}')")).collect();
    setup_sql(
        &emu,
        &[&format!("INSERT INTO test.big VALUES {}", values.join(","))],
    )
    .await;
    let tablets = emu.doris.engine.table_info("test", "big").unwrap().tablets;
    let mut c = fe_client(&emu).await;
    let mut seen = Vec::new();
    for t in &tablets {
        let streamed = format!("SELECT `id`, `v` FROM `test`.`big` TABLET({t}) WHERE id % 3 = 0");
        let (_, parts) = query(&mut c, &streamed).await;
        assert!(parts.len() >= 2, "{} batches", parts.len());
        let (_, whole) = query(&mut c, &format!("{streamed} ORDER BY id")).await;
        let mut ids = int_column(&parts, "id");
        ids.sort();
        assert_eq!(ids, int_column(&whole, "id"), "tablet {t}");
        let texts = |bs: &[RecordBatch]| -> Vec<(i64, String)> {
            let mut out: Vec<(i64, String)> = int_column(bs, "id")
                .into_iter()
                .zip(bs.iter().flat_map(|b| {
                    b.column_by_name("v")
                        .unwrap()
                        .as_string::<i32>()
                        .iter()
                        .map(|v| v.unwrap().to_string())
                        .collect::<Vec<_>>()
                }))
                .collect();
            out.sort();
            out
        };
        assert_eq!(texts(&parts), texts(&whole));
        seen.extend(ids);
    }
    seen.sort();
    assert_eq!(seen, (0..20_000).filter(|i| i % 3 == 0).collect::<Vec<_>>());

    let bad = "SELECT `id` FROM `test`.`big` WHERE nope = 1";
    let streamed = tonic_status(c.execute(bad.into(), None).await.unwrap_err());
    let whole = tonic_status(
        c.execute(format!("{bad} ORDER BY id"), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(streamed.code(), whole.code());
    assert_eq!(streamed.message(), whole.message());
    assert!(
        streamed.message().contains("nope"),
        "{}",
        streamed.message()
    );
}

#[tokio::test]
async fn tablet_queries_partition_the_table() {
    let emu = emu().await;
    seed_students(&emu).await;
    let tablets = emu
        .doris
        .engine
        .table_info("test", "student")
        .unwrap()
        .tablets;
    assert_eq!(tablets.len(), 4);
    let mut c = fe_client(&emu).await;
    let mut seen = Vec::new();
    for t in &tablets {
        let (_, batches) = query(
            &mut c,
            &format!("SELECT id FROM `test`.`student` TABLET({t})"),
        )
        .await;
        let ids = int_column(&batches, "id");
        assert!(ids.len() < 20, "tablet {t} holds a subset");
        seen.extend(ids);
    }
    seen.sort();
    assert_eq!(seen, (1..=20).collect::<Vec<_>>());
}

#[tokio::test]
async fn incr_detail_names_the_hidden_columns_and_select_star_omits_them() {
    let emu = emu().await;
    seed_students(&emu).await;
    setup_sql(
        &emu,
        &[
            "UPDATE test.student SET age = 99 WHERE id = 1",
            "DELETE FROM test.student WHERE id = 2",
        ],
    )
    .await;
    let mut c = fe_client(&emu).await;
    let (info, batches) = query(
        &mut c,
        "/* ApplicationName=Flink ArrowFlightSQL Query */ SELECT `id`, `age`, __DORIS_BINLOG_TSO__, \
         __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `test`.`student`@incr('incrementType' = 'DETAIL') \
         ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__",
    )
    .await;
    assert!(is_be(&info));
    let schema = batches[0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "id",
            "age",
            "__DORIS_BINLOG_TSO__",
            "__DORIS_BINLOG_LSN__",
            "__DORIS_BINLOG_OP__"
        ]
    );
    assert_eq!(schema.field(2).data_type(), &DataType::Int64);
    assert_eq!(schema.field(3).data_type(), &DataType::Int64);
    assert_eq!(schema.field(4).data_type(), &DataType::Int8);
    let ops = int_column(&batches, "__DORIS_BINLOG_OP__");
    assert_eq!(ops.len(), 20 + 2 + 1);
    assert_eq!(&ops[..20], &[0; 20]);
    assert_eq!(&ops[20..], &[2, 3, 1]);
    let tsos = int_column(&batches, "__DORIS_BINLOG_TSO__");
    assert!(tsos.windows(2).all(|w| w[0] <= w[1]));

    let (_, batches) = query(
        &mut c,
        "SELECT * FROM test.student@incr('incrementType'='DETAIL')",
    )
    .await;
    let schema = batches[0].schema();
    assert!(
        schema
            .fields()
            .iter()
            .all(|f| !f.name().starts_with("__DORIS_")),
        "{schema:?}"
    );
    assert_eq!(rows(&batches), 23);
}

#[tokio::test]
async fn visibility_wait_error_is_unavailable_with_doris_metadata() {
    let emu = emu().await;
    seed_students(&emu).await;
    emu.doris.faults.update(|f| {
        f.incr_error = Some(IncrFault {
            code: 5101,
            count: 1,
        })
    });
    let mut c = fe_client(&emu).await;
    let sql = "SELECT * FROM test.student@incr('incrementType'='DETAIL')";
    let status = tonic_status(c.execute(sql.into(), None).await.unwrap_err());
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status
            .message()
            .starts_with("ERR_INCR_VISIBLE_WAIT_TIMEOUT"),
        "{}",
        status.message()
    );
    assert_eq!(status.metadata().get("doris-error-code").unwrap(), "5101");
    assert_eq!(
        status.metadata().get("doris-error-name").unwrap(),
        "ERR_INCR_VISIBLE_WAIT_TIMEOUT"
    );
    // The fault is spent: the same window now succeeds.
    let (_, batches) = query(&mut c, sql).await;
    assert_eq!(rows(&batches), 20);
}

#[tokio::test]
async fn other_errors_are_internal_with_the_doris_prefix() {
    let emu = emu().await;
    let mut c = fe_client(&emu).await;
    let status = tonic_status(
        c.execute("SELECT * FROM nodb.nosuch".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code(), tonic::Code::Internal);
    assert!(
        status.message().starts_with("get flight info statement failed, after executeQueryStatement handleQuery, error code: "),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn a_cut_fault_breaks_the_stream_after_k_batches() {
    let emu = emu().await;
    setup_sql(
        &emu,
        &[
            "CREATE DATABASE IF NOT EXISTS test",
            "CREATE TABLE test.big (id BIGINT NOT NULL) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let values: Vec<String> = (0..10_000).map(|i| format!("({i})")).collect();
    setup_sql(
        &emu,
        &[&format!("INSERT INTO test.big VALUES {}", values.join(","))],
    )
    .await;
    emu.doris
        .faults
        .update(|f| f.flight_cut_after_batches = Some(1));
    let mut c = fe_client(&emu).await;
    let info = c
        .execute("SELECT id FROM test.big".into(), None)
        .await
        .unwrap();
    let mut be = FlightSqlServiceClient::new(channel(emu.ports().be_flight_port).await);
    let mut stream = be
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let mut got = 0;
    let err = loop {
        match stream.try_next().await {
            Ok(Some(b)) => got += b.num_rows(),
            Ok(None) => panic!("stream ended without an error after {got} rows"),
            Err(e) => break e,
        }
    };
    assert_eq!(got, 4096, "one batch before the cut");
    assert_eq!(tonic_status(err).code(), tonic::Code::Internal);
    // The fault disarmed itself.
    let (_, batches) = query(&mut c, "SELECT id FROM test.big").await;
    assert_eq!(rows(&batches), 10_000);
}

#[tokio::test]
async fn session_state_persists_on_a_token() {
    let emu = emu().await;
    seed_students(&emu).await;
    let mut c = fe_client(&emu).await;
    query(&mut c, "USE test").await;
    let (_, batches) = query(&mut c, "SELECT id FROM student WHERE id <= 3 ORDER BY id").await;
    assert_eq!(int_column(&batches, "id"), vec![1, 2, 3]);

    // time_zone: an @incr window given in +08:00 finds the rows only on the token that set it.
    query(&mut c, "SET time_zone = '+08:00'").await;
    emu.doris.clock.advance_ms(2_000);
    let now_ms = emu.doris.clock.now_ms();
    let fmt = |ms: i64| {
        let secs = ms.div_euclid(1000) + 8 * 3600;
        dcs_doris_emu::flight::arrow_convert::format_datetime(secs * 1_000_000, 0)
    };
    let sql = format!(
        "SELECT id FROM test.student@incr('startTimestamp'='{}', 'endTimestamp'='{}', 'incrementType'='DETAIL')",
        fmt(now_ms - 3_600_000),
        fmt(now_ms)
    );
    let (_, batches) = query(&mut c, &sql).await;
    assert_eq!(rows(&batches), 20);

    let mut other = fe_client(&emu).await;
    match other.execute(sql.clone(), None).await {
        Err(_) => {}
        Ok(info) => assert_eq!(
            rows(&fetch(&other, &info).await.unwrap()),
            0,
            "UTC session reads another window"
        ),
    }
}

#[tokio::test]
async fn close_session_resets_the_session_but_keeps_the_token() {
    let emu = emu().await;
    seed_students(&emu).await;
    let mut c = fe_client(&emu).await;
    query(&mut c, "USE test").await;
    let mut results = c
        .do_action(arrow_flight::Action::new("CloseSession", Vec::<u8>::new()))
        .await
        .unwrap();
    let r = results.message().await.unwrap().unwrap();
    assert_eq!(r.body.as_ref(), &[8, 1]); // CloseSessionResult{status: CLOSED}
    assert_eq!(emu.doris.counters.get("flight_close_session"), 1);
    // No current database any more.
    assert!(
        c.execute("SELECT id FROM student".into(), None)
            .await
            .is_err()
    );
    let (_, batches) = query(&mut c, "SELECT id FROM test.student").await;
    assert_eq!(rows(&batches), 20);
}

#[tokio::test]
async fn prepared_statements_run_like_statements() {
    let emu = emu().await;
    seed_students(&emu).await;
    let mut c = fe_client(&emu).await;
    let mut stmt = c
        .prepare("SELECT id FROM test.student ORDER BY id".into(), None)
        .await
        .unwrap();
    assert_eq!(stmt.dataset_schema().unwrap().field(0).name(), "ResultMeta");
    let info = stmt.execute().await.unwrap();
    assert!(is_be(&info));
    let batches = fetch(&c, &info).await.unwrap();
    assert_eq!(int_column(&batches, "id"), (1..=20).collect::<Vec<_>>());
    stmt.close().await.unwrap();
}

#[tokio::test]
async fn statement_update_is_unimplemented_like_doris() {
    let emu = emu().await;
    let mut c = fe_client(&emu).await;
    let status = tonic_status(
        c.execute_update("CREATE DATABASE x".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code(), tonic::Code::Unimplemented);
    assert_eq!(status.message(), "acceptPutStatement unimplemented");
}

#[tokio::test]
async fn refused_connections_fail_then_recover() {
    let emu = emu().await;
    emu.doris.faults.update(|f| f.refuse_connections = true);
    let mut c = FlightSqlServiceClient::new(
        Endpoint::from_shared(format!("http://127.0.0.1:{}", emu.ports().fe_flight_port))
            .unwrap()
            .connect_lazy(),
    );
    assert!(c.handshake("root", "").await.is_err());
    emu.doris.faults.update(|f| f.refuse_connections = false);
    let c = fe_client(&emu).await;
    assert!(c.token().is_some());
}

#[tokio::test]
async fn tokens_expire_after_the_alive_time() {
    let emu = emu().await;
    let mut c = fe_client(&emu).await;
    query(&mut c, "SET time_zone = 'UTC'").await;
    emu.doris.clock.advance_ms(4320 * 60_000);
    let status = tonic_status(c.execute("SELECT 1".into(), None).await.unwrap_err());
    assert_eq!(status.code(), tonic::Code::Unauthenticated);
    let tok = c.token().unwrap().clone();
    assert_eq!(
        status.message(),
        format!(
            "bearer token expired: {tok}, try reconnect, currently in fe.conf, \
             `arrow_flight_token_alive_time`=4320"
        )
    );
    // Then it is gone altogether; a new handshake works.
    let status = tonic_status(c.execute("SELECT 1".into(), None).await.unwrap_err());
    assert!(
        status.message().starts_with("invalid bearer token"),
        "{}",
        status.message()
    );
    let mut c = fe_client(&emu).await;
    query(&mut c, "SELECT 1").await;
}

#[tokio::test]
async fn tokens_beyond_half_the_user_connections_are_evicted_lru() {
    let emu = emu().await;
    let mut oldest = fe_client(&emu).await;
    let mut recent_user = fe_client(&emu).await;
    let mut others = Vec::new();
    for _ in 0..48 {
        others.push(fe_client(&emu).await);
    }
    // 50 tokens: all live. Touch the second one so the first is the least recently used.
    query(&mut recent_user, "SELECT 1").await;
    let _newest = fe_client(&emu).await;
    assert_eq!(dcs_doris_emu::flight::live_tokens(&emu.doris), 50);
    let status = tonic_status(oldest.execute("SELECT 1".into(), None).await.unwrap_err());
    assert!(
        status.message().starts_with("invalid bearer token"),
        "{}",
        status.message()
    );
    query(&mut recent_user, "SELECT 1").await;
}

#[tokio::test]
async fn catalog_commands_list_databases_and_tables() {
    use arrow_flight::sql::{CommandGetDbSchemas, CommandGetTables};
    let emu = emu().await;
    seed_students(&emu).await;
    let mut c = fe_client(&emu).await;

    let info = c.get_catalogs().await.unwrap();
    let batches = fetch(&c, &info).await.unwrap();
    assert_eq!(batches[0].column(0).as_string::<i32>().value(0), "internal");

    let info = c
        .get_db_schemas(CommandGetDbSchemas {
            catalog: None,
            db_schema_filter_pattern: Some("te%".into()),
        })
        .await
        .unwrap();
    let batches = fetch(&c, &info).await.unwrap();
    let dbs: Vec<&str> = batches[0]
        .column(1)
        .as_string::<i32>()
        .iter()
        .map(|v| v.unwrap())
        .collect();
    assert_eq!(dbs, ["test"]);

    let info = c
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: Some("test".into()),
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: true,
        })
        .await
        .unwrap();
    let batches = fetch(&c, &info).await.unwrap();
    let b = &batches[0];
    assert_eq!(b.num_rows(), 1);
    assert_eq!(b.column(2).as_string::<i32>().value(0), "student");
    assert_eq!(b.column(3).as_string::<i32>().value(0), "BASE TABLE");
    let schema_bytes = b.column(4).as_binary::<i32>().value(0);
    let schema = arrow_ipc::convert::try_schema_from_ipc_buffer(schema_bytes).unwrap();
    let types: Vec<DataType> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        vec![
            DataType::Int32,
            DataType::Utf8,
            DataType::Int32,
            DataType::Decimal128(10, 2),
            DataType::Timestamp(TimeUnit::Millisecond, None)
        ]
    );
}
