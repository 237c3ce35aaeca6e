//! The changelog encodings of Kafka records (docs/ARCHITECTURE.md §3.15), pure: a record batch of
//! the source's columns with its change columns in, [`frame`]d key/value messages out.
//!
//! | event | `upsert` | `debezium-json` `op` | `canal-json` `type` | `changelog-json` `op` |
//! |---|---|---|---|---|
//! | snapshot row | row | `r` | `INSERT` | `+I` (`+R` re-snapshot) |
//! | insert | row | `c` | `INSERT` | `+I` |
//! | update (before, after) | after only | `u`, both images | `UPDATE`, `old` = changed columns | `-U`, `+U` |
//! | delete | tombstone | `d` | `DELETE` | `-D` |
//!
//! Every record's key is the key columns as a JSON object (`{"id":1}`), so all changes of a key go
//! to one partition in order; a table without key columns gives records without a key (not for
//! `upsert`, which needs one). Values are JSON objects ([`JsonValues::Numbers`]): DECIMAL as an
//! exact JSON number; LARGEINT as Doris sends it (a string of digits, as it exceeds DECIMAL(38); a
//! number from the older 16-byte form); DATE as `yyyy-MM-dd`; DATETIME as
//! `yyyy-MM-dd HH:mm:ss.ffffff`; strings (JSON and VARIANT columns included) as JSON strings;
//! ARRAY as a JSON array, MAP as a JSON object (keys as strings), STRUCT as an object by field
//! name; NULL as `null`. That is what Flink's `json`, `debezium-json` and `canal-json` formats
//! read, checked by those formats themselves in `tests/flink-connector` on the vectors of
//! `runner/tests/vectors/kafka` (`kinds-debezium-json.txt` holds a column of each kind).
//!
//! An update is one event in `debezium-json` and `canal-json`: Doris reads it as the before-image
//! directly followed by the after-image (docs/doris-protocols.md §1.5), and both must be in the
//! same batch ([`EncodeError::UnpairedUpdate`] otherwise).

use arrow_array::RecordBatch;
use dcs_doris_client::fe_api::tso_to_ms;

use super::frame;
use crate::sink::RowOrigin;
use crate::sink::digits::write_i64;
use crate::sink::encode::{
    ChangeColumns, EncodeError, Encoded, JsonValues, RowObjects, changelog_op_text, json_string,
    op, write_change_record,
};

/// How records are encoded (`spec.sink.kafka.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaFormat {
    /// The table as a compacted topic: the row by key, a tombstone for a delete.
    Upsert,
    /// Debezium's change-event envelope.
    DebeziumJson,
    /// Canal's flat message.
    CanalJson,
    /// Every event as dcs's change record, as the stdout sink writes it.
    ChangelogJson,
}

/// The table the records are about.
#[derive(Debug, Clone, Copy)]
pub struct TableInfo<'a> {
    /// The source database.
    pub database: &'a str,
    /// The source table.
    pub table: &'a str,
    /// The key columns (the record key), in order.
    pub key: &'a [String],
}

/// One row's change, as the formats tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    Snapshot,
    Insert,
    /// An update, with the row of its before-image.
    Update {
        before: usize,
    },
    Delete,
}

/// Append the messages of `data` to `out` in `format`. `changes` is `None` for snapshot rows,
/// which were read at `snapshot`'s TSO when it is known; `now_ms` is the time written as the
/// moment of encoding (Debezium's `ts_ms`, Canal's `ts`).
///
/// # Errors
/// A value that cannot be written, an op code Doris does not define, a key column not read, an
/// update whose two images are not next to each other, `upsert` without key columns.
pub fn encode(
    format: KafkaFormat,
    table: TableInfo<'_>,
    data: &RecordBatch,
    changes: Option<ChangeColumns<'_>>,
    snapshot: Option<RowOrigin>,
    now_ms: i64,
    out: &mut Vec<u8>,
) -> Result<Encoded, EncodeError> {
    let rows = RowObjects::new(data, JsonValues::Numbers)?;
    let key = table
        .key
        .iter()
        .map(|name| {
            rows.index_of(name)
                .ok_or_else(|| EncodeError::MissingKeyColumn {
                    column: name.clone(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if format == KafkaFormat::Upsert && key.is_empty() {
        return Err(EncodeError::UpsertWithoutKey);
    }
    let write_key = |row: usize, out: &mut Vec<u8>| {
        if key.is_empty() {
            return false;
        }
        rows.write_columns(row, &key, out);
        true
    };
    let position = |row: usize| match changes {
        Some(c) => Some((c.tso.value(row), c.lsn.value(row))),
        None => snapshot.map(|s| (s.tso, s.lsn)),
    };
    let mut counts = Encoded::default();
    if format == KafkaFormat::ChangelogJson {
        for row in 0..data.num_rows() {
            let op = changes.map_or(op::APPEND, |c| c.op.value(row));
            changelog_op_text(op)?;
            if op == op::DELETE {
                counts.deletes += 1;
            } else {
                counts.upserts += 1;
            }
        }
        for row in 0..data.num_rows() {
            frame::push_with(
                out,
                |o| write_key(row, o),
                // Every op was checked above.
                |o| write_change_record(&rows, row, changes, o).is_ok(),
            );
        }
        return Ok(counts);
    }
    let events = events(changes, data.num_rows(), format == KafkaFormat::Upsert)?;
    for (row, event) in events {
        let Some(event) = event else {
            counts.skipped += 1;
            continue;
        };
        if event == Event::Delete {
            counts.deletes += 1;
        } else {
            counts.upserts += 1;
        }
        let at = position(row);
        frame::push_with(
            out,
            |o| write_key(row, o),
            |o| match format {
                KafkaFormat::DebeziumJson => {
                    debezium(&rows, table, row, event, at, now_ms, o);
                    true
                }
                KafkaFormat::CanalJson => {
                    canal(&rows, table, row, event, at, now_ms, o);
                    true
                }
                // A tombstone.
                KafkaFormat::Upsert if event == Event::Delete => false,
                // upsert (changelog-json was written above, a record per row).
                KafkaFormat::Upsert | KafkaFormat::ChangelogJson => {
                    rows.write(row, o);
                    true
                }
            },
        );
    }
    Ok(counts)
}

/// Each row's event (`None`: not written on its own: a before-image, written with its
/// after-image, or dropped by `upsert`). Pure.
fn events(
    changes: Option<ChangeColumns<'_>>,
    rows: usize,
    upsert: bool,
) -> Result<Vec<(usize, Option<Event>)>, EncodeError> {
    let Some(c) = changes else {
        return Ok((0..rows).map(|r| (r, Some(Event::Snapshot))).collect());
    };
    let mut out = Vec::with_capacity(rows);
    let mut row = 0;
    while row < rows {
        let event = match c.op.value(row) {
            op::APPEND => Event::Insert,
            op::RESNAPSHOT => Event::Snapshot,
            op::DELETE => Event::Delete,
            op::UPDATE_BEFORE if upsert => {
                out.push((row, None));
                row += 1;
                continue;
            }
            op::UPDATE_BEFORE => {
                let tso = c.tso.value(row);
                let paired = row + 1 < rows
                    && c.op.value(row + 1) == op::UPDATE_AFTER
                    && c.tso.value(row + 1) == tso;
                if !paired {
                    return Err(EncodeError::UnpairedUpdate { tso });
                }
                out.push((row, None));
                out.push((row + 1, Some(Event::Update { before: row })));
                row += 2;
                continue;
            }
            op::UPDATE_AFTER if upsert => Event::Insert,
            op::UPDATE_AFTER => {
                return Err(EncodeError::UnpairedUpdate {
                    tso: c.tso.value(row),
                });
            }
            other => return Err(EncodeError::UnknownOp(other)),
        };
        out.push((row, Some(event)));
        row += 1;
    }
    Ok(out)
}

/// Debezium's envelope: `{"before":…,"after":…,"source":{…},"op":"c","ts_ms":…}`.
fn debezium(
    rows: &RowObjects<'_>,
    table: TableInfo<'_>,
    row: usize,
    event: Event,
    at: Option<(i64, i64)>,
    now_ms: i64,
    out: &mut Vec<u8>,
) {
    let (before, after, op) = match event {
        Event::Snapshot => (None, Some(row), "r"),
        Event::Insert => (None, Some(row), "c"),
        Event::Update { before } => (Some(before), Some(row), "u"),
        Event::Delete => (Some(row), None, "d"),
    };
    let image = |image: Option<usize>, out: &mut Vec<u8>| match image {
        Some(r) => rows.write(r, out),
        None => out.extend_from_slice(b"null"),
    };
    out.extend_from_slice(b"{\"before\":");
    image(before, out);
    out.extend_from_slice(b",\"after\":");
    image(after, out);
    out.extend_from_slice(b",\"source\":{\"version\":\"");
    out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
    out.extend_from_slice(b"\",\"connector\":\"doris\",\"name\":\"dcs\",\"ts_ms\":");
    write_i64(out, event_ms(at, now_ms));
    out.extend_from_slice(b",\"snapshot\":\"");
    out.extend_from_slice(if event == Event::Snapshot {
        b"true"
    } else {
        b"false"
    });
    out.extend_from_slice(b"\",\"db\":");
    json_string(out, table.database);
    out.extend_from_slice(b",\"table\":");
    json_string(out, table.table);
    write_position(at, out);
    out.extend_from_slice(b"},\"op\":\"");
    out.extend_from_slice(op.as_bytes());
    out.extend_from_slice(b"\",\"ts_ms\":");
    write_i64(out, now_ms);
    out.push(b'}');
}

/// Canal's flat message: `{"data":[…],"old":…,"type":"UPDATE","database":…,"table":…,…}`.
fn canal(
    rows: &RowObjects<'_>,
    table: TableInfo<'_>,
    row: usize,
    event: Event,
    at: Option<(i64, i64)>,
    now_ms: i64,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b"{\"data\":[");
    rows.write(row, out);
    out.extend_from_slice(b"],\"old\":");
    match event {
        Event::Update { before } => {
            out.push(b'[');
            rows.write_columns(before, &rows.changed_columns(before, row), out);
            out.push(b']');
        }
        _ => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"type\":\"");
    out.extend_from_slice(match event {
        Event::Snapshot | Event::Insert => b"INSERT".as_slice(),
        Event::Update { .. } => b"UPDATE",
        Event::Delete => b"DELETE",
    });
    out.extend_from_slice(b"\",\"database\":");
    json_string(out, table.database);
    out.extend_from_slice(b",\"table\":");
    json_string(out, table.table);
    out.extend_from_slice(b",\"pkNames\":");
    if table.key.is_empty() {
        out.extend_from_slice(b"null");
    } else {
        out.push(b'[');
        for (i, name) in table.key.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_string(out, name);
        }
        out.push(b']');
    }
    out.extend_from_slice(b",\"isDdl\":false,\"es\":");
    write_i64(out, event_ms(at, now_ms));
    out.extend_from_slice(b",\"ts\":");
    write_i64(out, now_ms);
    write_position(at, out);
    out.push(b'}');
}

/// When the change happened: its TSO's time, or `now_ms` for a snapshot row read without a TSO
/// (Debezium's `source.ts_ms`, Canal's `es`).
fn event_ms(at: Option<(i64, i64)>, now_ms: i64) -> i64 {
    at.map_or(now_ms, |(tso, _)| tso_to_ms(tso))
}

/// `,"tso":…,"lsn":…` (`null` for a snapshot row read without a TSO).
fn write_position(at: Option<(i64, i64)>, out: &mut Vec<u8>) {
    match at {
        Some((tso, lsn)) => {
            out.extend_from_slice(b",\"tso\":");
            write_i64(out, tso);
            out.extend_from_slice(b",\"lsn\":");
            write_i64(out, lsn);
        }
        None => out.extend_from_slice(b",\"tso\":null,\"lsn\":null"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, Date32Array, Decimal128Array, Int8Array, Int32Array, Int64Array, StringArray,
        TimestampMicrosecondArray,
    };
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::sink::kafka::frame::messages;

    /// The moment of encoding written by every vector.
    const NOW_MS: i64 = 1_765_000_100_000;
    /// The TSO of a change at `ms`.
    fn tso(ms: i64) -> i64 {
        ms << 18
    }

    const KEY: &[&str] = &["id"];

    fn key() -> Vec<String> {
        KEY.iter().map(|k| k.to_string()).collect()
    }

    /// `shop.orders(id INT, name STRING, amount DECIMAL(10,2), created DATETIME(6), day DATE,
    /// note STRING)` rows.
    #[allow(clippy::type_complexity)]
    fn orders(rows: &[(i32, &str, i128, i64, i32, Option<&str>)]) -> RecordBatch {
        let col = |a: ArrayRef| a;
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", arrow_schema::DataType::Int32, false),
                Field::new("name", arrow_schema::DataType::Utf8, false),
                Field::new("amount", arrow_schema::DataType::Decimal128(10, 2), false),
                Field::new(
                    "created",
                    arrow_schema::DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
                    false,
                ),
                Field::new("day", arrow_schema::DataType::Date32, false),
                Field::new("note", arrow_schema::DataType::Utf8, true),
            ])),
            vec![
                col(Arc::new(Int32Array::from_iter_values(
                    rows.iter().map(|r| r.0),
                ))),
                col(Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.1),
                ))),
                col(Arc::new(
                    Decimal128Array::from_iter_values(rows.iter().map(|r| r.2))
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                )),
                col(Arc::new(TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|r| r.3),
                ))),
                col(Arc::new(Date32Array::from_iter_values(
                    rows.iter().map(|r| r.4),
                ))),
                col(Arc::new(StringArray::from_iter(rows.iter().map(|r| r.5)))),
            ],
        )
        .unwrap()
    }

    /// 2025-12-06 05:46:40.123456 and 2025-12-06.
    const CREATED: i64 = 1_765_000_000_123_456;
    const DAY: i32 = 20_428;

    /// The snapshot: orders 1 and 2, read at `tso(1_765_000_000_000)`.
    fn snapshot() -> RecordBatch {
        orders(&[
            (1, "ann", 1250, CREATED, DAY, Some("first")),
            (2, "bob", 99, CREATED, DAY, None),
        ])
    }

    /// The changelog after it, as Doris reads a DETAIL window: order 3 inserted, order 1
    /// updated (name and amount), order 2 deleted, order 3 updated (amount), order 4 inserted.
    fn changes() -> (RecordBatch, Int8Array, Int64Array, Int64Array) {
        let data = orders(&[
            (3, "cy", 500, CREATED + 1, DAY + 1, None),
            (1, "ann", 1250, CREATED, DAY, Some("first")),
            (1, "ann b", 1300, CREATED, DAY, Some("first")),
            (2, "bob", 99, CREATED, DAY, None),
            (3, "cy", 500, CREATED + 1, DAY + 1, None),
            (3, "cy", 501, CREATED + 1, DAY + 1, None),
            (4, "d \"q\" \u{e9}\n", -1, CREATED + 2, DAY + 2, Some("")),
        ]);
        let ops = Int8Array::from(vec![
            op::APPEND,
            op::UPDATE_BEFORE,
            op::UPDATE_AFTER,
            op::DELETE,
            op::UPDATE_BEFORE,
            op::UPDATE_AFTER,
            op::APPEND,
        ]);
        let ms = 1_765_000_001_000;
        let tsos = Int64Array::from(vec![
            tso(ms),
            tso(ms + 1),
            tso(ms + 1),
            tso(ms + 2),
            tso(ms + 3),
            tso(ms + 3),
            tso(ms + 4),
        ]);
        let lsns = Int64Array::from(vec![0, 0, 0, 0, 0, 0, 0]);
        (data, ops, tsos, lsns)
    }

    const SNAPSHOT_AT: RowOrigin = RowOrigin {
        op: op::APPEND,
        tso: 1_765_000_000_000 << 18,
        lsn: 0,
    };

    const TABLE_NAME: (&str, &str) = ("shop", "orders");

    /// The snapshot then the changelog in `format`, one `key<TAB>value` line per message
    /// (`null` for none), and the counts of each part.
    fn vector(format: KafkaFormat) -> (String, Encoded, Encoded) {
        let key = key();
        let table = TableInfo {
            database: TABLE_NAME.0,
            table: TABLE_NAME.1,
            key: &key,
        };
        let mut body = Vec::new();
        let first = encode(
            format,
            table,
            &snapshot(),
            None,
            Some(SNAPSHOT_AT),
            NOW_MS,
            &mut body,
        )
        .unwrap();
        let (data, ops, tsos, lsns) = changes();
        let c = ChangeColumns {
            op: &ops,
            tso: &tsos,
            lsn: &lsns,
        };
        let second = encode(format, table, &data, Some(c), None, NOW_MS, &mut body).unwrap();
        (vector_lines(&body), first, second)
    }

    /// A body's messages as the vectors hold them: one `key<TAB>value` line each (`null` for
    /// none). The vectors outlive a release: Debezium's `source.version` is written as `VERSION`.
    fn vector_lines(body: &[u8]) -> String {
        let text = |b: Option<&[u8]>| {
            b.map_or("null".to_string(), |b| {
                String::from_utf8(b.to_vec()).unwrap()
            })
        };
        let version = format!("\"version\":\"{}\"", env!("CARGO_PKG_VERSION"));
        messages(body)
            .unwrap()
            .iter()
            .map(|m| format!("{}\t{}\n", text(m.key), text(m.value)))
            .collect::<String>()
            .replace(&version, "\"version\":\"VERSION\"")
    }

    fn counts(upserts: u64, deletes: u64, skipped: u64) -> Encoded {
        Encoded {
            upserts,
            deletes,
            skipped,
        }
    }

    /// The vectors Flink's own formats read back in tests/flink-connector (`KafkaFormatsTest`):
    /// the encoder must keep writing exactly them. `DCS_WRITE_VECTORS=1` rewrites them after a
    /// deliberate change (then run that test too).
    #[test]
    fn the_vectors_flink_reads_back_are_what_the_encoder_writes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/kafka");
        for (format, name) in [
            (KafkaFormat::Upsert, "upsert"),
            (KafkaFormat::DebeziumJson, "debezium-json"),
            (KafkaFormat::CanalJson, "canal-json"),
            (KafkaFormat::ChangelogJson, "changelog-json"),
        ] {
            let (lines, _, _) = vector(format);
            let path = dir.join(format!("{name}.txt"));
            if std::env::var_os("DCS_WRITE_VECTORS").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &lines).unwrap();
            }
            let committed = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                lines, committed,
                "{name}: the encoder no longer writes {path:?}"
            );
        }
    }

    /// `shop.kinds`: a column of each kind a JSON reader must map: LARGEINT as Doris sends it (a
    /// string of digits), DECIMAL(38,10), DATETIME(3), JSON (text), ARRAY<INT>,
    /// MAP<STRING,INT>, STRUCT<w INT, unit STRING>; two snapshot rows, the second of NULLs and
    /// empty ones.
    fn kinds() -> RecordBatch {
        use arrow_array::builder::{Int32Builder, ListBuilder, MapBuilder, StringBuilder};
        use arrow_array::{Array, StructArray, TimestampMillisecondArray};
        use arrow_schema::DataType;
        let mut tags = ListBuilder::new(Int32Builder::new());
        tags.values().append_value(1);
        tags.values().append_null();
        tags.append(true);
        tags.append(true);
        let tags = tags.finish();
        let mut attrs = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        attrs.keys().append_value("k");
        attrs.values().append_value(2);
        attrs.append(true).unwrap();
        attrs.append(false).unwrap();
        let attrs = attrs.finish();
        let dims = StructArray::try_new(
            vec![
                Field::new("w", DataType::Int32, true),
                Field::new("unit", DataType::Utf8, true),
            ]
            .into(),
            vec![
                Arc::new(Int32Array::from(vec![Some(3), None])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("cm"), None])),
            ],
            None,
        )
        .unwrap();
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int32, false),
                Field::new("big", DataType::Utf8, true),
                Field::new("price", DataType::Decimal128(38, 10), true),
                Field::new(
                    "at",
                    DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, None),
                    true,
                ),
                Field::new("doc", DataType::Utf8, true),
                Field::new("tags", tags.data_type().clone(), true),
                Field::new("attrs", attrs.data_type().clone(), true),
                Field::new("dims", dims.data_type().clone(), true),
            ])),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![
                    Some("170141183460469231731687303715884105727"),
                    None,
                ])),
                Arc::new(
                    Decimal128Array::from(vec![Some(-12_345_678_901_234_567_890_i128), None])
                        .with_precision_and_scale(38, 10)
                        .unwrap(),
                ),
                Arc::new(TimestampMillisecondArray::from(vec![
                    Some(1_765_000_000_123),
                    None,
                ])),
                Arc::new(StringArray::from(vec![Some(r#"{"a":[1,2]}"#), None])),
                Arc::new(tags),
                Arc::new(attrs),
                Arc::new(dims),
            ],
        )
        .unwrap()
    }

    /// The `kinds` vectors: the snapshot in debezium-json, read back by Flink's format with each
    /// column's Flink type (`KafkaFormatsTest`).
    #[test]
    fn the_type_vectors_flink_reads_back_are_what_the_encoder_writes() {
        let key = key();
        let table = TableInfo {
            database: "shop",
            table: "kinds",
            key: &key,
        };
        let mut body = Vec::new();
        encode(
            KafkaFormat::DebeziumJson,
            table,
            &kinds(),
            None,
            Some(SNAPSHOT_AT),
            NOW_MS,
            &mut body,
        )
        .unwrap();
        let lines = vector_lines(&body);
        assert!(
            lines.contains(
                r#""after":{"id":1,"big":"170141183460469231731687303715884105727","price":-1234567890.1234567890,"at":"2025-12-06 05:46:40.123000","doc":"{\"a\":[1,2]}","tags":[1,null],"attrs":{"k":2},"dims":{"w":3,"unit":"cm"}}"#
            ),
            "{lines}"
        );
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/vectors/kafka/kinds-debezium-json.txt");
        if std::env::var_os("DCS_WRITE_VECTORS").is_some() {
            std::fs::write(&path, &lines).unwrap();
        }
        assert_eq!(
            lines,
            std::fs::read_to_string(&path).unwrap(),
            "the encoder no longer writes {path:?}"
        );
    }

    #[test]
    fn upsert_writes_the_table_by_key_with_tombstones() {
        let (lines, first, second) = vector(KafkaFormat::Upsert);
        let expected = [
            r#"{"id":1}	{"id":1,"name":"ann","amount":12.50,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":"first"}"#,
            r#"{"id":2}	{"id":2,"name":"bob","amount":0.99,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":null}"#,
            r#"{"id":3}	{"id":3,"name":"cy","amount":5.00,"created":"2025-12-06 05:46:40.123457","day":"2025-12-07","note":null}"#,
            r#"{"id":1}	{"id":1,"name":"ann b","amount":13.00,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":"first"}"#,
            r#"{"id":2}	null"#,
            r#"{"id":3}	{"id":3,"name":"cy","amount":5.01,"created":"2025-12-06 05:46:40.123457","day":"2025-12-07","note":null}"#,
            r#"{"id":4}	{"id":4,"name":"d \"q\" é\n","amount":-0.01,"created":"2025-12-06 05:46:40.123458","day":"2025-12-08","note":""}"#,
        ];
        assert_eq!(lines.lines().collect::<Vec<_>>(), expected);
        assert_eq!((first, second), (counts(2, 0, 0), counts(4, 1, 2)));
    }

    #[test]
    fn debezium_json_writes_one_event_per_update_with_both_images() {
        let (lines, _, second) = vector(KafkaFormat::DebeziumJson);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines.len(), 7);
        let ann = r#"{"id":1,"name":"ann","amount":12.50,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":"first"}"#;
        let ann_b = r#"{"id":1,"name":"ann b","amount":13.00,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":"first"}"#;
        let bob = r#"{"id":2,"name":"bob","amount":0.99,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":null}"#;
        let source = |ms: i64, snapshot: bool, tso: i64| {
            format!(
                r#""source":{{"version":"VERSION","connector":"doris","name":"dcs","ts_ms":{ms},"snapshot":"{snapshot}","db":"shop","table":"orders","tso":{tso},"lsn":0}}"#
            )
        };
        assert_eq!(
            lines[0],
            format!(
                r#"{{"id":1}}	{{"before":null,"after":{ann},{},"op":"r","ts_ms":{NOW_MS}}}"#,
                source(1_765_000_000_000, true, SNAPSHOT_AT.tso)
            )
        );
        assert_eq!(
            lines[3],
            format!(
                r#"{{"id":1}}	{{"before":{ann},"after":{ann_b},{},"op":"u","ts_ms":{NOW_MS}}}"#,
                source(1_765_000_001_001, false, tso(1_765_000_001_001))
            )
        );
        assert_eq!(
            lines[4],
            format!(
                r#"{{"id":2}}	{{"before":{bob},"after":null,{},"op":"d","ts_ms":{NOW_MS}}}"#,
                source(1_765_000_001_002, false, tso(1_765_000_001_002))
            )
        );
        assert!(lines[2].contains(r#","op":"c","#), "{}", lines[2]);
        assert_eq!(second, counts(4, 1, 2));
    }

    #[test]
    fn canal_json_keeps_only_the_changed_columns_in_old() {
        let (lines, _, _) = vector(KafkaFormat::CanalJson);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(
            lines[3],
            format!(
                r#"{{"id":1}}	{{"data":[{{"id":1,"name":"ann b","amount":13.00,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":"first"}}],"old":[{{"name":"ann","amount":12.50}}],"type":"UPDATE","database":"shop","table":"orders","pkNames":["id"],"isDdl":false,"es":1765000001001,"ts":{NOW_MS},"tso":{},"lsn":0}}"#,
                tso(1_765_000_001_001)
            )
        );
        assert!(
            lines[0].contains(r#""old":null,"type":"INSERT""#),
            "{}",
            lines[0]
        );
        assert!(
            lines[4].contains(r#""old":null,"type":"DELETE""#),
            "{}",
            lines[4]
        );
        assert!(
            lines[5].contains(r#""old":[{"amount":5.00}]"#),
            "{}",
            lines[5]
        );
    }

    #[test]
    fn changelog_json_keeps_every_row_kind_as_the_stdout_sink_writes_it() {
        let (lines, _, second) = vector(KafkaFormat::ChangelogJson);
        let ops: Vec<&str> = lines
            .lines()
            .map(|l| {
                l.split("\"op\":\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(ops, ["+I", "+I", "+I", "-U", "+U", "-D", "-U", "+U", "+I"]);
        assert_eq!(
            lines.lines().nth(1).unwrap(),
            r#"{"id":2}	{"op":"+I","row":{"id":2,"name":"bob","amount":0.99,"created":"2025-12-06 05:46:40.123456","day":"2025-12-06","note":null}}"#
        );
        assert_eq!(second, counts(6, 1, 0));
    }

    fn one_change(ops: Vec<i8>) -> Result<Encoded, EncodeError> {
        one_change_in(KafkaFormat::DebeziumJson, ops, &key())
    }

    fn one_change_in(
        format: KafkaFormat,
        ops: Vec<i8>,
        key: &[String],
    ) -> Result<Encoded, EncodeError> {
        let n = ops.len();
        let data = orders(&vec![(1, "a", 1, CREATED, DAY, None); n]);
        let ops = Int8Array::from(ops);
        let tsos = Int64Array::from(vec![tso(7); n]);
        let lsns = Int64Array::from(vec![0; n]);
        let table = TableInfo {
            database: "d",
            table: "t",
            key,
        };
        let changes = ChangeColumns {
            op: &ops,
            tso: &tsos,
            lsn: &lsns,
        };
        encode(
            format,
            table,
            &data,
            Some(changes),
            None,
            0,
            &mut Vec::new(),
        )
    }

    #[test]
    fn an_update_split_from_its_other_image_is_refused_where_it_would_be_one_event() {
        let unpaired = Err(EncodeError::UnpairedUpdate { tso: tso(7) });
        assert_eq!(one_change(vec![op::APPEND, op::UPDATE_BEFORE]), unpaired);
        assert_eq!(one_change(vec![op::UPDATE_AFTER]), unpaired);
        assert_eq!(
            one_change(vec![op::UPDATE_BEFORE, op::APPEND, op::UPDATE_AFTER]),
            unpaired
        );
        assert_eq!(
            one_change_in(
                KafkaFormat::CanalJson,
                vec![op::UPDATE_BEFORE, op::DELETE],
                &key()
            ),
            unpaired
        );
        // Where each image is a record of its own, or the before-image is not written, a split
        // pair is fine.
        for format in [KafkaFormat::Upsert, KafkaFormat::ChangelogJson] {
            assert!(one_change_in(format, vec![op::UPDATE_BEFORE], &key()).is_ok());
            assert!(one_change_in(format, vec![op::UPDATE_AFTER], &key()).is_ok());
        }
    }

    #[test]
    fn keys_that_cannot_be_written_are_refused_naming_them() {
        assert_eq!(
            one_change_in(KafkaFormat::Upsert, vec![op::APPEND], &[]),
            Err(EncodeError::UpsertWithoutKey)
        );
        assert_eq!(
            one_change_in(
                KafkaFormat::CanalJson,
                vec![op::APPEND],
                &["order_id".into()]
            ),
            Err(EncodeError::MissingKeyColumn {
                column: "order_id".into()
            })
        );
        assert_eq!(
            one_change_in(KafkaFormat::Upsert, vec![9], &key()),
            Err(EncodeError::UnknownOp(9))
        );
        assert_eq!(
            one_change_in(KafkaFormat::ChangelogJson, vec![op::APPEND, 9], &key()),
            Err(EncodeError::UnknownOp(9))
        );
    }

    #[test]
    fn a_table_without_key_columns_writes_records_without_a_key() {
        let data = snapshot();
        let mut body = Vec::new();
        let table = TableInfo {
            database: "d",
            table: "t",
            key: &[],
        };
        encode(
            KafkaFormat::CanalJson,
            table,
            &data,
            None,
            None,
            0,
            &mut body,
        )
        .unwrap();
        let all = messages(&body).unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|m| m.key.is_none()));
        assert!(String::from_utf8_lossy(all[0].value.unwrap()).contains(r#""pkNames":null"#));
        assert!(String::from_utf8_lossy(all[0].value.unwrap()).contains(r#""tso":null"#));
    }
}
