//! Encoders: Arrow record batches into Stream Load bodies (JSON lines, or CSV when asked).
//!
//! Rows stay columnar until here; each column is downcast once per batch and written value by
//! value. Values follow docs/doris-protocols.md §3.5: DATETIME as `yyyy-MM-dd HH:mm:ss.ffffff`,
//! LARGEINT and DECIMAL as strings (exact), booleans as `true`/`false`, NULL as `null`.
//!
//! Which events become rows is decided here too (docs/ARCHITECTURE.md §3.5): in upsert mode inserts
//! and update-afters carry `__DORIS_DELETE_SIGN__` 0, deletes 1, update-befores are dropped (or
//! sent as deletes when `ignoreUpdateBefore` is false); in changelog mode every event is a row with
//! `dcs_op`, `dcs_tso` and `dcs_lsn`.

use std::io::Write;

use arrow::buffer::NullBuffer;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, Int8Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use dcs_crds::SinkMode;

use super::digits;
use crate::settings::{BodyFormat, EventPolicy};

/// The hidden column Doris reads the per-row delete flag from.
pub const DELETE_SIGN_COLUMN: &str = "__DORIS_DELETE_SIGN__";
/// Changelog-mode columns.
pub const OP_COLUMN: &str = "dcs_op";
/// Changelog-mode TSO column.
pub const TSO_COLUMN: &str = "dcs_tso";
/// Changelog-mode LSN column.
pub const LSN_COLUMN: &str = "dcs_lsn";

/// Doris changelog op codes (`__DORIS_BINLOG_OP__`).
pub mod op {
    /// Insert.
    pub const APPEND: i8 = 0;
    /// Delete.
    pub const DELETE: i8 = 1;
    /// Update, before image.
    pub const UPDATE_BEFORE: i8 = 2;
    /// Update, after image.
    pub const UPDATE_AFTER: i8 = 3;
    /// Not a Doris code: a snapshot row of a re-initialised consumer (`+R` in changelog mode, an
    /// upsert in upsert mode), see [`crate::sink::rebuild`].
    pub const RESNAPSHOT: i8 = -1;
}

/// What a sink row is, in upsert mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpsertAction {
    /// `__DORIS_DELETE_SIGN__` = 0.
    Upsert,
    /// `__DORIS_DELETE_SIGN__` = 1.
    Delete,
    /// Not sent.
    Skip,
}

impl EventPolicy {
    /// The upsert-mode action for an op code; `Err` for codes Doris does not define.
    pub fn upsert_action(&self, op: i8) -> Result<UpsertAction, EncodeError> {
        Ok(match op {
            op::APPEND | op::UPDATE_AFTER | op::RESNAPSHOT => UpsertAction::Upsert,
            op::DELETE if self.enable_delete => UpsertAction::Delete,
            op::UPDATE_BEFORE if !self.ignore_update_before && self.enable_delete => {
                UpsertAction::Delete
            }
            op::DELETE | op::UPDATE_BEFORE => UpsertAction::Skip,
            other => return Err(EncodeError::UnknownOp(other)),
        })
    }
}

/// The `dcs_op` of a re-initialised consumer's snapshot rows in a changelog-mode sink
/// (`crate::sink::rebuild`).
pub const RESNAPSHOT_OP: &str = "+R";

/// The `dcs_op` text of an op code (Flink RowKind short strings).
pub fn changelog_op_text(op: i8) -> Result<&'static str, EncodeError> {
    Ok(match op {
        op::APPEND => "+I",
        op::DELETE => "-D",
        op::UPDATE_BEFORE => "-U",
        op::UPDATE_AFTER => "+U",
        op::RESNAPSHOT => RESNAPSHOT_OP,
        other => return Err(EncodeError::UnknownOp(other)),
    })
}

/// Why a batch could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// An op code outside 0..=3.
    #[error("Unsupported Doris binlog operation {0}")]
    UnknownOp(i8),
    /// A column type the sink cannot write.
    #[error("column {column} has Arrow type {data_type}, which the Doris sink cannot write")]
    UnsupportedType {
        /// Column name.
        column: String,
        /// Its Arrow type.
        data_type: String,
    },
    /// A time zone name Arrow carried that is not known.
    #[error("column {column} has an unknown time zone {tz}")]
    UnknownTimeZone {
        /// Column name.
        column: String,
        /// The zone.
        tz: String,
    },
    /// Changelog mode needs the op, TSO and LSN of every row.
    #[error("changelog mode needs the change columns (op, TSO, LSN) of every row")]
    MissingChangeColumns,
    /// A CSV value holds the separator or delimiter, which Doris would split on.
    #[error(
        "a value of column {column} contains the CSV {separator}; choose another sink.doris.properties.{separator} (e.g. \"\\x01\") or use the JSON format"
    )]
    CsvSeparatorInValue {
        /// Column name.
        column: String,
        /// `column_separator` or `line_delimiter`.
        separator: &'static str,
    },
    /// A value Doris cannot hold, or that cannot be written exactly: a DECIMAL scale outside
    /// 0..=38, a DATE or DATETIME outside the years 0000..=9999.
    #[error(
        "column {column}: {detail}; Doris cannot store it, so nothing of this batch is written"
    )]
    OutOfRange {
        /// Column name.
        column: String,
        /// The value or type, and the range.
        detail: String,
    },
    /// An update's before-image and after-image not next to each other in one batch: the formats
    /// that write an update as one event (`debezium-json`, `canal-json`) need both.
    #[error(
        "an update's before-image and after-image (TSO {tso}) are not next to each other in one batch, so the update cannot be written as one event"
    )]
    UnpairedUpdate {
        /// The TSO of the image without its pair.
        tso: i64,
    },
    /// A key column the format writes is not among the batch's columns.
    #[error("the key column {column} is not among the columns read")]
    MissingKeyColumn {
        /// Column name.
        column: String,
    },
    /// The upsert format keys every record; a table without key columns cannot be written so.
    #[error("the upsert format needs key columns; the table has none")]
    UpsertWithoutKey,
    /// A CSV value is the text `\N`, which Doris would read as NULL.
    #[error(
        "a value of column {column} is the text \\N, which a CSV body cannot tell from NULL; use the JSON format"
    )]
    CsvNullLookalike {
        /// Column name.
        column: String,
    },
}

/// The change columns of an `@incr` batch.
#[derive(Debug, Clone, Copy)]
pub struct ChangeColumns<'a> {
    /// `__DORIS_BINLOG_OP__`.
    pub op: &'a Int8Array,
    /// `__DORIS_BINLOG_TSO__`.
    pub tso: &'a Int64Array,
    /// `__DORIS_BINLOG_LSN__`.
    pub lsn: &'a Int64Array,
}

/// Counts of one encoded batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Encoded {
    /// Rows written with delete sign 0 (or, in changelog mode, every row).
    pub upserts: u64,
    /// Rows written with delete sign 1.
    pub deletes: u64,
    /// Events not sent (update-befores, deletes with enableDelete off).
    pub skipped: u64,
}

impl BodyFormat {
    /// Encode `data` in this format; see [`encode_json_lines`] and [`encode_csv`].
    ///
    /// # Errors
    /// As those.
    pub fn encode(
        &self,
        data: &RecordBatch,
        changes: Option<ChangeColumns<'_>>,
        policy: &EventPolicy,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, EncodeError> {
        match self {
            Self::JsonLines => encode_json_lines(data, changes, policy, out),
            Self::Csv {
                column_separator,
                line_delimiter,
            } => encode_csv(data, changes, policy, column_separator, line_delimiter, out),
        }
    }
}

/// What one row becomes: skipped, or written with its trailing fields.
enum RowTail {
    Skip,
    /// Upsert mode: the delete sign, `0` or `1`.
    Sign(&'static [u8]),
    /// Changelog mode: op text, TSO, LSN.
    Change(&'static str, i64, i64),
}

/// Decide what row `row` becomes under `policy`, counting it.
fn row_tail(
    row: usize,
    changes: Option<ChangeColumns<'_>>,
    policy: &EventPolicy,
    counts: &mut Encoded,
) -> Result<RowTail, EncodeError> {
    let op = match changes {
        Some(c) => c.op.value(row),
        None => op::APPEND,
    };
    Ok(match policy.mode {
        SinkMode::Upsert => match policy.upsert_action(op)? {
            UpsertAction::Skip => {
                counts.skipped += 1;
                RowTail::Skip
            }
            UpsertAction::Upsert => {
                counts.upserts += 1;
                RowTail::Sign(b"0")
            }
            UpsertAction::Delete => {
                counts.deletes += 1;
                RowTail::Sign(b"1")
            }
        },
        SinkMode::Changelog => {
            let text = changelog_op_text(op)?;
            let c = changes.ok_or(EncodeError::MissingChangeColumns)?;
            counts.upserts += 1;
            RowTail::Change(text, c.tso.value(row), c.lsn.value(row))
        }
    })
}

/// How a row object writes its exact numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonValues {
    /// As Stream Load reads them: LARGEINT and DECIMAL as strings (docs/doris-protocols.md §3.5).
    StreamLoad,
    /// As the JSON readers of changelog formats read them (Flink's `json`, `debezium-json` and
    /// `canal-json` formats, which write DECIMAL as a plain number themselves): LARGEINT and
    /// DECIMAL as JSON numbers, digit for digit, so still exact.
    Numbers,
}

/// The rows of a batch as JSON objects (`{"col":value,...}`), each column downcast once.
pub struct RowObjects<'a> {
    names: Vec<&'a str>,
    columns: Vec<ColumnWriter<'a>>,
    /// `"name":` per column.
    keys: Vec<Vec<u8>>,
    style: JsonValues,
}

impl<'a> RowObjects<'a> {
    /// The writers of `data`'s columns.
    ///
    /// # Errors
    /// A column type or value that cannot be written ([`EncodeError::UnsupportedType`],
    /// [`EncodeError::OutOfRange`], [`EncodeError::UnknownTimeZone`]).
    pub fn new(data: &'a RecordBatch, style: JsonValues) -> Result<Self, EncodeError> {
        let schema = data.schema_ref();
        let names: Vec<&'a str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        let keys = names
            .iter()
            .map(|name| {
                let mut k = Vec::with_capacity(name.len() + 3);
                write_json_str(&mut k, name);
                k.push(b':');
                k
            })
            .collect();
        Ok(Self {
            names,
            columns: column_writers(data, style)?,
            keys,
            style,
        })
    }

    /// The index of the column `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| *n == name)
    }

    /// Write row `row` as an object of every column.
    pub fn write(&self, row: usize, out: &mut Vec<u8>) {
        out.push(b'{');
        self.write_fields(row, out);
        out.push(b'}');
    }

    /// Write the fields of row `row`, `"name":value` comma-separated, without the braces.
    fn write_fields(&self, row: usize, out: &mut Vec<u8>) {
        for col in 0..self.columns.len() {
            self.write_field(row, col, col > 0, out);
        }
    }

    /// Write row `row` as an object of the columns `cols`, in that order.
    pub fn write_columns(&self, row: usize, cols: &[usize], out: &mut Vec<u8>) {
        out.push(b'{');
        for (i, &col) in cols.iter().enumerate() {
            self.write_field(row, col, i > 0, out);
        }
        out.push(b'}');
    }

    /// Write the value of column `col` at row `row` (a JSON value).
    pub fn write_value(&self, row: usize, col: usize, out: &mut Vec<u8>) {
        self.columns[col].write_as(row, self.style, out);
    }

    /// The columns whose values differ between rows `a` and `b`.
    pub fn changed_columns(&self, a: usize, b: usize) -> Vec<usize> {
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        (0..self.columns.len())
            .filter(|&col| {
                va.clear();
                vb.clear();
                self.write_value(a, col, &mut va);
                self.write_value(b, col, &mut vb);
                va != vb
            })
            .collect()
    }

    fn write_field(&self, row: usize, col: usize, comma: bool, out: &mut Vec<u8>) {
        if comma {
            out.push(b',');
        }
        out.extend_from_slice(&self.keys[col]);
        self.write_value(row, col, out);
    }
}

/// Write row `row` as a change record: `{"op":"+U","tso":…,"lsn":…,"row":{…}}`, the op as Flink's
/// RowKind short string; a row without change columns (a snapshot row) is `{"op":"+I","row":{…}}`.
///
/// # Errors
/// An op code Doris does not define.
pub fn write_change_record(
    rows: &RowObjects<'_>,
    row: usize,
    changes: Option<ChangeColumns<'_>>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    out.extend_from_slice(b"{\"op\":\"");
    match changes {
        Some(c) => {
            out.extend_from_slice(changelog_op_text(c.op.value(row))?.as_bytes());
            out.extend_from_slice(b"\",\"tso\":");
            digits::write_i64(out, c.tso.value(row));
            out.extend_from_slice(b",\"lsn\":");
            digits::write_i64(out, c.lsn.value(row));
        }
        None => out.extend_from_slice(b"+I\""),
    }
    out.extend_from_slice(b",\"row\":");
    rows.write(row, out);
    out.push(b'}');
    Ok(())
}

/// Write `s` as a JSON string (escaped).
pub fn json_string(out: &mut Vec<u8>, s: &str) {
    write_json_str(out, s);
}

/// The writers of `data`'s columns; ARRAY, MAP and STRUCT columns only under
/// [`JsonValues::Numbers`] (Stream Load bodies and stdout records refuse them).
fn column_writers(
    data: &RecordBatch,
    style: JsonValues,
) -> Result<Vec<ColumnWriter<'_>>, EncodeError> {
    data.schema()
        .fields()
        .iter()
        .zip(data.columns())
        .map(|(f, a)| ColumnWriter::new(f.name(), a, style == JsonValues::Numbers))
        .collect()
}

/// Encode `data` (the table's columns only) as JSON lines appended to `out`. `changes` is `None`
/// for snapshot rows (all inserts).
pub fn encode_json_lines(
    data: &RecordBatch,
    changes: Option<ChangeColumns<'_>>,
    policy: &EventPolicy,
    out: &mut Vec<u8>,
) -> Result<Encoded, EncodeError> {
    let rows = RowObjects::new(data, JsonValues::StreamLoad)?;
    let (op_key, tso_key, lsn_key) = (
        format!("\"{OP_COLUMN}\":\""),
        format!("\",\"{TSO_COLUMN}\":"),
        format!(",\"{LSN_COLUMN}\":"),
    );
    let mut counts = Encoded::default();
    for row in 0..data.num_rows() {
        let tail = row_tail(row, changes, policy, &mut counts)?;
        if matches!(tail, RowTail::Skip) {
            continue;
        }
        out.push(b'{');
        rows.write_fields(row, out);
        if !rows.columns.is_empty() {
            out.push(b',');
        }
        match tail {
            RowTail::Skip => {}
            RowTail::Sign(sign) => {
                write_json_str(out, DELETE_SIGN_COLUMN);
                out.push(b':');
                out.extend_from_slice(sign);
            }
            RowTail::Change(op_text, tso, lsn) => {
                out.extend_from_slice(op_key.as_bytes());
                out.extend_from_slice(op_text.as_bytes());
                out.extend_from_slice(tso_key.as_bytes());
                digits::write_i64(out, tso);
                out.extend_from_slice(lsn_key.as_bytes());
                digits::write_i64(out, lsn);
            }
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(counts)
}

/// Encode `data` as CSV appended to `out`: the columns in order, then the delete sign (upsert
/// mode, read through `hidden_columns: __DORIS_DELETE_SIGN__`) or `dcs_op`, `dcs_tso`, `dcs_lsn`
/// (changelog mode). NULL is `\N`. Values are written as in JSON bodies, without quotes; a value
/// holding the column separator or the line delimiter is refused, since Doris's CSV reader has no
/// escaping without `enclose`, and so is the text `\N` itself (it would read as NULL).
///
/// # Errors
/// As [`encode_json_lines`], and [`EncodeError::CsvSeparatorInValue`].
pub fn encode_csv(
    data: &RecordBatch,
    changes: Option<ChangeColumns<'_>>,
    policy: &EventPolicy,
    column_separator: &[u8],
    line_delimiter: &[u8],
    out: &mut Vec<u8>,
) -> Result<Encoded, EncodeError> {
    let schema = data.schema();
    let columns = column_writers(data, JsonValues::StreamLoad)?;
    let mut counts = Encoded::default();
    let start = out.len();
    for row in 0..data.num_rows() {
        let tail = row_tail(row, changes, policy, &mut counts)?;
        if matches!(tail, RowTail::Skip) {
            continue;
        }
        for (i, col) in columns.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(column_separator);
            }
            let at = out.len();
            if !col.write_text(row, out) {
                out.extend_from_slice(b"\\N");
                continue;
            }
            let value = &out[at..];
            if value == b"\\N" {
                let column = schema.field(i).name().clone();
                out.truncate(start);
                return Err(EncodeError::CsvNullLookalike { column });
            }
            for (sep, what) in [
                (column_separator, "column_separator"),
                (line_delimiter, "line_delimiter"),
            ] {
                if contains(value, sep) {
                    let column = schema.field(i).name().clone();
                    out.truncate(start);
                    return Err(EncodeError::CsvSeparatorInValue {
                        column,
                        separator: what,
                    });
                }
            }
        }
        if !columns.is_empty() {
            out.extend_from_slice(column_separator);
        }
        match tail {
            RowTail::Skip => {}
            RowTail::Sign(sign) => out.extend_from_slice(sign),
            RowTail::Change(op_text, tso, lsn) => {
                out.extend_from_slice(op_text.as_bytes());
                out.extend_from_slice(column_separator);
                digits::write_i64(out, tso);
                out.extend_from_slice(column_separator);
                digits::write_i64(out, lsn);
            }
        }
        out.extend_from_slice(line_delimiter);
    }
    Ok(counts)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// One column, downcast once, ready to write any of its values.
struct ColumnWriter<'a> {
    /// The validity of the values (`None`: no NULLs).
    nulls: Option<&'a NullBuffer>,
    values: Values<'a>,
}

/// A column's values, by how they are written.
enum Values<'a> {
    Null,
    Bool(&'a arrow_array::BooleanArray),
    Int(Ints<'a>),
    Float(&'a dyn Array, fn(&dyn Array, usize) -> f64),
    Utf8(&'a arrow_array::StringArray),
    LargeUtf8(&'a arrow_array::LargeStringArray),
    Decimal128(&'a [i128], i8),
    Decimal256(&'a arrow_array::Decimal256Array),
    Date32(&'a [i32]),
    /// Microseconds of the wall clock, after any time-zone conversion.
    Timestamp(&'a dyn Array, TimeUnit, Option<jiff::tz::TimeZone>),
    /// Old Doris builds send LARGEINT as 16 little-endian bytes.
    LargeIntBytes(&'a arrow_array::FixedSizeBinaryArray),
    /// ARRAY: each row's items are `items` from one offset to the next.
    List(&'a [i32], Box<ColumnWriter<'a>>),
    /// ARRAY with 64-bit offsets.
    LargeList(&'a [i64], Box<ColumnWriter<'a>>),
    /// MAP: each row's entries, keys and values, from one offset to the next.
    Map(&'a [i32], Box<ColumnWriter<'a>>, Box<ColumnWriter<'a>>),
    /// STRUCT: `"name":` and the writer of each field.
    Struct(Vec<(Vec<u8>, ColumnWriter<'a>)>),
}

/// The values of an integer column.
enum Ints<'a> {
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
}

impl Ints<'_> {
    fn write(&self, row: usize, out: &mut Vec<u8>) {
        match self {
            Self::I8(v) => digits::write_i64(out, i64::from(v[row])),
            Self::I16(v) => digits::write_i64(out, i64::from(v[row])),
            Self::I32(v) => digits::write_i64(out, i64::from(v[row])),
            Self::I64(v) => digits::write_i64(out, v[row]),
            Self::U8(v) => digits::write_u64(out, u64::from(v[row])),
            Self::U16(v) => digits::write_u64(out, u64::from(v[row])),
            Self::U32(v) => digits::write_u64(out, u64::from(v[row])),
            Self::U64(v) => digits::write_u64(out, v[row]),
        }
    }
}

impl<'a> ColumnWriter<'a> {
    /// The writer of column `name`; `nested`: whether ARRAY, MAP and STRUCT may be written (as
    /// JSON arrays and objects).
    fn new(name: &str, array: &'a ArrayRef, nested: bool) -> Result<Self, EncodeError> {
        let a: &dyn Array = array.as_ref();
        let child = |array: &'a ArrayRef| ColumnWriter::new(name, array, nested).map(Box::new);
        let values = match array.data_type() {
            DataType::List(_) if nested => {
                let list = array.as_list::<i32>();
                Values::List(list.value_offsets(), child(list.values())?)
            }
            DataType::LargeList(_) if nested => {
                let list = array.as_list::<i64>();
                Values::LargeList(list.value_offsets(), child(list.values())?)
            }
            DataType::Map(..) if nested => {
                let map = array.as_map();
                Values::Map(
                    map.value_offsets(),
                    child(map.keys())?,
                    child(map.values())?,
                )
            }
            DataType::Struct(_) if nested => {
                let st = array.as_struct();
                let fields = st
                    .fields()
                    .iter()
                    .zip(st.columns())
                    .map(|(f, c)| {
                        let mut key = Vec::with_capacity(f.name().len() + 3);
                        write_json_str(&mut key, f.name());
                        key.push(b':');
                        Ok((key, ColumnWriter::new(name, c, nested)?))
                    })
                    .collect::<Result<_, EncodeError>>()?;
                Values::Struct(fields)
            }
            DataType::Null => Values::Null,
            DataType::Boolean => Values::Bool(array.as_boolean()),
            DataType::Int8 => Values::Int(Ints::I8(array.as_primitive::<Int8Type>().values())),
            DataType::Int16 => Values::Int(Ints::I16(array.as_primitive::<Int16Type>().values())),
            DataType::Int32 => Values::Int(Ints::I32(array.as_primitive::<Int32Type>().values())),
            DataType::Int64 => Values::Int(Ints::I64(array.as_primitive::<Int64Type>().values())),
            DataType::UInt8 => Values::Int(Ints::U8(array.as_primitive::<UInt8Type>().values())),
            DataType::UInt16 => Values::Int(Ints::U16(array.as_primitive::<UInt16Type>().values())),
            DataType::UInt32 => Values::Int(Ints::U32(array.as_primitive::<UInt32Type>().values())),
            DataType::UInt64 => Values::Int(Ints::U64(array.as_primitive::<UInt64Type>().values())),
            DataType::Float32 => Values::Float(a, |a, i| {
                f64::from(a.as_primitive::<Float32Type>().value(i))
            }),
            DataType::Float64 => Values::Float(a, |a, i| a.as_primitive::<Float64Type>().value(i)),
            DataType::Utf8 => Values::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Values::LargeUtf8(array.as_string::<i64>()),
            DataType::Decimal128(_, s) | DataType::Decimal256(_, s)
                if !(0..=MAX_SCALE).contains(s) =>
            {
                return Err(EncodeError::OutOfRange {
                    column: name.to_string(),
                    detail: format!("DECIMAL scale {s} is outside 0..={MAX_SCALE}"),
                });
            }
            DataType::Decimal128(_, s) => {
                Values::Decimal128(array.as_primitive::<Decimal128Type>().values(), *s)
            }
            DataType::Decimal256(_, _) => {
                Values::Decimal256(array.as_primitive::<Decimal256Type>())
            }
            DataType::Date32 => {
                let days = array.as_primitive::<Date32Type>();
                let bad = days
                    .iter()
                    .flatten()
                    .find(|d| !(MIN_DAY..=MAX_DAY).contains(&i64::from(*d)));
                if let Some(d) = bad {
                    return Err(EncodeError::OutOfRange {
                        column: name.to_string(),
                        detail: format!(
                            "DATE {d} days from 1970-01-01 is outside 0000-01-01..=9999-12-31"
                        ),
                    });
                }
                Values::Date32(days.values())
            }
            DataType::Timestamp(unit, tz) => {
                let zone = match tz {
                    None => None,
                    Some(tz) => Some(crate::time_zone::parse_zone(tz).map_err(|_| {
                        EncodeError::UnknownTimeZone {
                            column: name.to_string(),
                            tz: tz.to_string(),
                        }
                    })?),
                };
                if let Some(row) = (0..a.len())
                    .filter(|&i| a.is_valid(i))
                    .find(|&i| wall_micros(timestamp_micros(a, *unit, i), zone.as_ref()).is_none())
                {
                    return Err(EncodeError::OutOfRange {
                        column: name.to_string(),
                        detail: format!(
                            "DATETIME {} {unit:?}s from 1970-01-01 00:00:00 UTC is outside 0000-01-01..=9999-12-31 (in the column's zone)",
                            raw_timestamp(a, *unit, row)
                        ),
                    });
                }
                Values::Timestamp(a, *unit, zone)
            }
            DataType::FixedSizeBinary(16) => Values::LargeIntBytes(array.as_fixed_size_binary()),
            other => {
                return Err(EncodeError::UnsupportedType {
                    column: name.to_string(),
                    data_type: other.to_string(),
                });
            }
        };
        Ok(Self {
            nulls: array.nulls(),
            values,
        })
    }

    /// Whether the value at `row` is NULL.
    fn is_null(&self, row: usize) -> bool {
        matches!(self.values, Values::Null) || self.nulls.is_some_and(|n| n.is_null(row))
    }

    /// Write the value at `row` as a JSON value: numbers and booleans bare, strings escaped,
    /// LARGEINT and DECIMAL as `style` says, everything else as a string of its
    /// [`Self::write_text`] form, NULL as `null`.
    fn write_as(&self, row: usize, style: JsonValues, out: &mut Vec<u8>) {
        if self.is_null(row) {
            out.extend_from_slice(b"null");
            return;
        }
        match &self.values {
            Values::Utf8(a) => write_json_str(out, a.value(row)),
            Values::LargeUtf8(a) => write_json_str(out, a.value(row)),
            Values::Int(ints) => ints.write(row, out),
            Values::Bool(_) => {
                self.write_text(row, out);
            }
            Values::Decimal128(..) | Values::Decimal256(_) | Values::LargeIntBytes(_)
                if style == JsonValues::Numbers =>
            {
                self.write_text(row, out);
            }
            Values::List(..) | Values::LargeList(..) | Values::Map(..) | Values::Struct(_) => {
                self.write_nested(row, style, out);
            }
            // JSON has no NaN/Infinity; Doris's float parser reads these as strings.
            Values::Float(a, f) if f(*a, row).is_finite() => {
                self.write_text(row, out);
            }
            // The rest never needs escaping: digits, signs, dots, dashes, colons, spaces, letters.
            _ => {
                out.push(b'"');
                self.write_text(row, out);
                out.push(b'"');
            }
        }
    }

    /// Write the value at `row` as text, unquoted and unescaped (the form Doris's text parsers
    /// read, shared by the JSON and CSV bodies); returns false, writing nothing, for NULL.
    fn write_text(&self, row: usize, out: &mut Vec<u8>) -> bool {
        if self.is_null(row) {
            return false;
        }
        match &self.values {
            Values::Null => return false,
            Values::Bool(a) => {
                out.extend_from_slice(if a.value(row) { b"true" } else { b"false" });
            }
            Values::Int(ints) => ints.write(row, out),
            Values::Float(a, f) => {
                let _ = write!(out, "{}", f(*a, row));
            }
            Values::Utf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Values::LargeUtf8(a) => out.extend_from_slice(a.value(row).as_bytes()),
            Values::Decimal128(v, scale) => write_decimal(out, v[row], *scale),
            Values::Decimal256(a) => {
                let _ = write!(out, "{}", a.value_as_string(row));
            }
            // In range: checked when the writer was made.
            Values::Date32(v) => {
                digits::write_date(out, i64::from(v[row]));
            }
            Values::Timestamp(a, unit, zone) => {
                let micros = timestamp_micros(*a, *unit, row);
                if let Some(wall) = wall_micros(micros, zone.as_ref()) {
                    digits::write_datetime_micros(out, wall);
                }
            }
            Values::LargeIntBytes(a) => {
                let bytes: [u8; 16] = a.value(row).try_into().unwrap_or([0; 16]);
                digits::write_i128(out, i128::from_le_bytes(bytes));
            }
            Values::List(..) | Values::LargeList(..) | Values::Map(..) | Values::Struct(_) => {
                self.write_nested(row, JsonValues::Numbers, out);
            }
        }
        true
    }

    /// An ARRAY as a JSON array, a MAP as a JSON object (keys as strings), a STRUCT as an object
    /// by field name; their items as [`Self::write_as`] writes them.
    fn write_nested(&self, row: usize, style: JsonValues, out: &mut Vec<u8>) {
        let items =
            |from: usize, to: usize, out: &mut Vec<u8>, each: &dyn Fn(usize, &mut Vec<u8>)| {
                for i in from..to {
                    if i > from {
                        out.push(b',');
                    }
                    each(i, out);
                }
            };
        match &self.values {
            Values::List(offsets, item) => {
                out.push(b'[');
                let (from, to) = (offsets[row] as usize, offsets[row + 1] as usize);
                items(from, to, out, &|i, out| item.write_as(i, style, out));
                out.push(b']');
            }
            Values::LargeList(offsets, item) => {
                out.push(b'[');
                let (from, to) = (offsets[row] as usize, offsets[row + 1] as usize);
                items(from, to, out, &|i, out| item.write_as(i, style, out));
                out.push(b']');
            }
            Values::Map(offsets, keys, values) => {
                out.push(b'{');
                let (from, to) = (offsets[row] as usize, offsets[row + 1] as usize);
                items(from, to, out, &|i, out| {
                    // A JSON object's keys are strings: a text key as itself, any other as its text.
                    if matches!(keys.values, Values::Utf8(_) | Values::LargeUtf8(_)) {
                        keys.write_as(i, style, out);
                    } else {
                        let mut text = Vec::new();
                        keys.write_text(i, &mut text);
                        write_json_str(out, &String::from_utf8_lossy(&text));
                    }
                    out.push(b':');
                    values.write_as(i, style, out);
                });
                out.push(b'}');
            }
            Values::Struct(fields) => {
                out.push(b'{');
                for (i, (key, field)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(key);
                    field.write_as(row, style, out);
                }
                out.push(b'}');
            }
            _ => {}
        }
    }
}

fn timestamp_micros(a: &dyn Array, unit: TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Second => a
            .as_primitive::<TimestampSecondType>()
            .value(row)
            .saturating_mul(1_000_000),
        TimeUnit::Millisecond => a
            .as_primitive::<TimestampMillisecondType>()
            .value(row)
            .saturating_mul(1_000),
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(row) / 1_000,
    }
}

/// The largest DECIMAL scale Doris has (DECIMAL(38, 38); DECIMAL256 keeps the same bound).
const MAX_SCALE: i8 = 38;
/// 0000-01-01 and 9999-12-31 as days since 1970-01-01: the DATE range.
const MIN_DAY: i64 = -719_528;
const MAX_DAY: i64 = 2_932_896;
const DAY_MICROS: i64 = 86_400_000_000;

/// The reader rule of docs/doris-protocols.md §3.5: with a time zone the value is an instant shown
/// as wall time in that zone; without one, its digits are the wall time. `None` when the wall
/// time falls outside 0000-01-01..=9999-12-31 (or the instant outside what a zone can map).
fn wall_micros(micros: i64, zone: Option<&jiff::tz::TimeZone>) -> Option<i64> {
    let wall = match zone {
        None => micros,
        Some(zone) => {
            let ts = jiff::Timestamp::from_microsecond(micros).ok()?;
            let offset = i64::from(zone.to_offset(ts).seconds());
            micros.checked_add(offset.checked_mul(1_000_000)?)?
        }
    };
    (MIN_DAY * DAY_MICROS..(MAX_DAY + 1) * DAY_MICROS)
        .contains(&wall)
        .then_some(wall)
}

/// The stored number of a timestamp, in its own unit (for an error message).
fn raw_timestamp(a: &dyn Array, unit: TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(row),
        TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(row),
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(row),
    }
}

fn write_decimal(out: &mut Vec<u8>, unscaled: i128, scale: i8) {
    // 0..=38: checked when the writer was made.
    if scale <= 0 {
        digits::write_i128(out, unscaled);
        return;
    }
    let scale = scale as u32;
    let div = 10u128.pow(scale);
    if unscaled < 0 {
        out.push(b'-');
    }
    let abs = unscaled.unsigned_abs();
    digits::write_u128(out, abs / div);
    out.push(b'.');
    digits::write_padded_u128(out, abs % div, scale as usize);
}

/// Write `s` as a JSON string.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..=0x1f => None,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod nested_tests {
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, ListBuilder, MapBuilder, StringBuilder};
    use arrow_array::{Int32Array, StringArray, StructArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    /// tags ARRAY<INT>, attrs MAP<STRING,INT>, dims STRUCT<w INT, unit STRING, sizes ARRAY<INT>>:
    /// a row with values (a NULL item, a NULL field), a row of empty ones, a row of NULLs.
    fn nested() -> RecordBatch {
        let mut tags = ListBuilder::new(Int32Builder::new());
        tags.values().append_value(1);
        tags.values().append_null();
        tags.values().append_value(3);
        tags.append(true);
        tags.append(true);
        tags.append(false);
        let mut attrs = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        attrs.keys().append_value("a \"b\"");
        attrs.values().append_value(7);
        attrs.append(true).unwrap();
        attrs.append(true).unwrap();
        attrs.append(false).unwrap();
        let mut sizes = ListBuilder::new(Int32Builder::new());
        sizes.values().append_value(5);
        sizes.append(true);
        sizes.append(true);
        sizes.append(true);
        let sizes = sizes.finish();
        let dims = StructArray::try_new(
            vec![
                Field::new("w", DataType::Int32, true),
                Field::new("unit", DataType::Utf8, true),
                Field::new("sizes", sizes.data_type().clone(), true),
            ]
            .into(),
            vec![
                Arc::new(Int32Array::from(vec![Some(2), None, None])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("cm"), Some(""), None])),
                Arc::new(sizes),
            ],
            Some(vec![true, true, false].into()),
        )
        .unwrap();
        let (tags, attrs) = (tags.finish(), attrs.finish());
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("tags", tags.data_type().clone(), true),
                Field::new("attrs", attrs.data_type().clone(), true),
                Field::new("dims", dims.data_type().clone(), true),
            ])),
            vec![Arc::new(tags), Arc::new(attrs), Arc::new(dims)],
        )
        .unwrap()
    }

    #[test]
    fn arrays_maps_and_structs_are_json_arrays_and_objects_in_kafka_records() {
        let data = nested();
        let rows = RowObjects::new(&data, JsonValues::Numbers).unwrap();
        let text = |row| {
            let mut out = Vec::new();
            rows.write(row, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            text(0),
            r#"{"tags":[1,null,3],"attrs":{"a \"b\"":7},"dims":{"w":2,"unit":"cm","sizes":[5]}}"#
        );
        assert_eq!(
            text(1),
            r#"{"tags":[],"attrs":{},"dims":{"w":null,"unit":"","sizes":[]}}"#
        );
        assert_eq!(text(2), r#"{"tags":null,"attrs":null,"dims":null}"#);
    }

    #[test]
    fn stream_load_bodies_still_refuse_nested_columns_naming_them() {
        let data = nested();
        let err = RowObjects::new(&data, JsonValues::StreamLoad)
            .err()
            .unwrap();
        assert!(
            matches!(&err, EncodeError::UnsupportedType { column, .. } if column == "tags"),
            "{err:?}"
        );
    }

    #[test]
    fn map_keys_that_are_not_text_are_written_as_json_strings() {
        let mut map = MapBuilder::new(None, Int32Builder::new(), StringBuilder::new());
        map.keys().append_value(-4);
        map.values().append_value("x");
        map.append(true).unwrap();
        let map = map.finish();
        let data = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "m",
                map.data_type().clone(),
                true,
            )])),
            vec![Arc::new(map)],
        )
        .unwrap();
        let rows = RowObjects::new(&data, JsonValues::Numbers).unwrap();
        let mut out = Vec::new();
        rows.write(0, &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"m":{"-4":"x"}}"#);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        BooleanArray, Date32Array, Decimal128Array, Float64Array, Int32Array, StringArray,
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampSecondArray,
    };
    use arrow_schema::{Field, Schema};

    use super::*;

    const UPSERT: EventPolicy = EventPolicy {
        mode: SinkMode::Upsert,
        enable_delete: true,
        ignore_update_before: true,
    };

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            cols.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    fn lines(out: &[u8]) -> Vec<serde_json::Value> {
        std::str::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn every_type_is_written_as_doris_reads_it() {
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![Some(1), None]))),
            ("ok", Arc::new(BooleanArray::from(vec![Some(true), None]))),
            (
                "x",
                Arc::new(Float64Array::from(vec![Some(0.1), Some(f64::NAN)])),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("a\"b\\c\n\u{1}é"), None])),
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(-1250), Some(5)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            ("day", Arc::new(Date32Array::from(vec![Some(19_000), None]))),
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(1_700_000_000_123_456),
                    None,
                ])),
            ),
        ]);
        let mut out = Vec::new();
        let n = encode_json_lines(&b, None, &UPSERT, &mut out).unwrap();
        assert_eq!(
            n,
            Encoded {
                upserts: 2,
                deletes: 0,
                skipped: 0
            }
        );
        let text = String::from_utf8(out.clone()).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            r#"{"id":1,"ok":true,"x":0.1,"s":"a\"b\\c\n\u0001é","d":"-12.50","day":"2022-01-08","ts":"2023-11-14 22:13:20.123456","__DORIS_DELETE_SIGN__":0}"#
        );
        let rows = lines(&out);
        assert_eq!(rows[1]["id"], serde_json::Value::Null);
        assert_eq!(rows[1]["x"], "NaN");
        assert_eq!(rows[1]["d"], "0.05");
    }

    #[test]
    fn time_zoned_timestamps_become_wall_time_in_their_zone() {
        let ts =
            TimestampMillisecondArray::from(vec![Some(1_740_993_808_000)]).with_timezone("+08:00");
        let b = batch(vec![("t", Arc::new(ts))]);
        let mut out = Vec::new();
        encode_json_lines(&b, None, &UPSERT, &mut out).unwrap();
        // docs/doris-protocols.md §3.5: 17:23:28 in a +08:00 session arrives as 09:23:28Z.
        assert_eq!(lines(&out)[0]["t"], "2025-03-03 17:23:28.000000");
    }

    #[test]
    fn the_last_datetime_and_extreme_numbers_are_written_exactly() {
        let b = batch(vec![
            (
                "end",
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(253_402_300_799_999_999),
                    Some(-62_167_219_200_000_000),
                ])),
            ),
            (
                "day",
                Arc::new(Date32Array::from(vec![Some(2_932_896), Some(-719_528)])),
            ),
            (
                "big",
                Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX)])),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from(vec![
                        Some(-99_999_999_999_999_999_999_999_999_999_999_999_999),
                        Some(1),
                    ])
                    .with_precision_and_scale(38, 20)
                    .unwrap(),
                ),
            ),
        ]);
        let mut out = Vec::new();
        encode_json_lines(&b, None, &UPSERT, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            r#"{"end":"9999-12-31 23:59:59.999999","day":"9999-12-31","big":-9223372036854775808,"dec":"-999999999999999999.99999999999999999999","__DORIS_DELETE_SIGN__":0}"#
        );
        assert_eq!(
            lines.next().unwrap(),
            r#"{"end":"0000-01-01 00:00:00.000000","day":"0000-01-01","big":9223372036854775807,"dec":"0.00000000000000000001","__DORIS_DELETE_SIGN__":0}"#
        );
    }

    #[test]
    fn a_value_doris_cannot_hold_fails_the_batch_naming_the_column() {
        let encode = |name: &str, array: ArrayRef| {
            let b = batch(vec![
                ("id", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
                (name, array),
            ]);
            let mut out = Vec::new();
            let e = encode_json_lines(&b, None, &UPSERT, &mut out).unwrap_err();
            (e.to_string(), out.is_empty())
        };
        // 10000-01-01: once written as 1970-01-01.
        let (e, empty) = encode(
            "day",
            Arc::new(Date32Array::from(vec![Some(0), Some(2_932_897)])),
        );
        assert_eq!(
            e,
            "column day: DATE 2932897 days from 1970-01-01 is outside 0000-01-01..=9999-12-31; Doris cannot store it, so nothing of this batch is written"
        );
        assert!(empty, "nothing of the batch is written");
        let (e, _) = encode(
            "day",
            Arc::new(Date32Array::from(vec![None, Some(-719_529)])),
        );
        assert!(e.starts_with("column day: DATE -719529 days"), "{e}");
        // A DATETIME past 9999-12-31 23:59:59.999999 without a zone, and one that a zone moves past.
        let (e, _) = encode(
            "at",
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(0),
                Some(253_402_300_800_000_000),
            ])),
        );
        assert!(
            e.starts_with("column at: DATETIME 253402300800000000 Microseconds"),
            "{e}"
        );
        let zoned = TimestampMicrosecondArray::from(vec![Some(0), Some(253_402_300_000_000_000)])
            .with_timezone("+08:00");
        let (e, _) = encode("at", Arc::new(zoned));
        assert!(e.starts_with("column at: DATETIME"), "{e}");
        let (e, _) = encode(
            "at",
            Arc::new(TimestampSecondArray::from(vec![Some(i64::MAX), Some(0)])),
        );
        assert!(
            e.starts_with("column at: DATETIME 9223372036854775807 Seconds"),
            "{e}"
        );
        // A scale Doris has no DECIMAL for.
        let (e, _) = encode(
            "dec",
            Arc::new(
                Decimal128Array::from(vec![Some(1), Some(2)])
                    .with_precision_and_scale(38, -2)
                    .unwrap(),
            ),
        );
        assert_eq!(
            e,
            "column dec: DECIMAL scale -2 is outside 0..=38; Doris cannot store it, so nothing of this batch is written"
        );
    }

    fn changes() -> (RecordBatch, Int8Array, Int64Array, Int64Array) {
        let b = batch(vec![("id", Arc::new(Int32Array::from(vec![1, 1, 1, 2])))]);
        (
            b,
            Int8Array::from(vec![0, 2, 3, 1]),
            Int64Array::from(vec![10, 20, 20, 30]),
            Int64Array::from(vec![0, 0, 0, 0]),
        )
    }

    #[test]
    fn upsert_mode_signs_deletes_and_drops_update_befores() {
        let (b, op, tso, lsn) = changes();
        let c = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let mut out = Vec::new();
        let n = encode_json_lines(&b, Some(c), &UPSERT, &mut out).unwrap();
        assert_eq!(
            n,
            Encoded {
                upserts: 2,
                deletes: 1,
                skipped: 1
            }
        );
        let signs: Vec<_> = lines(&out)
            .iter()
            .map(|r| r[DELETE_SIGN_COLUMN].as_i64().unwrap())
            .collect();
        assert_eq!(signs, vec![0, 0, 1]);

        let keep_before = EventPolicy {
            ignore_update_before: false,
            ..UPSERT
        };
        let mut out = Vec::new();
        let n = encode_json_lines(&b, Some(c), &keep_before, &mut out).unwrap();
        assert_eq!(
            n,
            Encoded {
                upserts: 2,
                deletes: 2,
                skipped: 0
            }
        );

        let no_delete = EventPolicy {
            enable_delete: false,
            ..UPSERT
        };
        let mut out = Vec::new();
        let n = encode_json_lines(&b, Some(c), &no_delete, &mut out).unwrap();
        assert_eq!(
            n,
            Encoded {
                upserts: 2,
                deletes: 0,
                skipped: 2
            }
        );
    }

    #[test]
    fn changelog_mode_writes_every_event_with_its_position() {
        let (b, op, tso, lsn) = changes();
        let c = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let policy = EventPolicy {
            mode: SinkMode::Changelog,
            ..UPSERT
        };
        let mut out = Vec::new();
        encode_json_lines(&b, Some(c), &policy, &mut out).unwrap();
        let ops: Vec<_> = lines(&out)
            .iter()
            .map(|r| {
                (
                    r["dcs_op"].as_str().unwrap().to_string(),
                    r["dcs_tso"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                ("+I".into(), 10),
                ("-U".into(), 20),
                ("+U".into(), 20),
                ("-D".into(), 30)
            ]
        );
        assert!(!String::from_utf8(out).unwrap().contains(DELETE_SIGN_COLUMN));
        let err = encode_json_lines(&b, None, &policy, &mut Vec::new()).unwrap_err();
        assert_eq!(err, EncodeError::MissingChangeColumns);
    }

    #[test]
    fn unknown_ops_fail_with_the_connectors_message() {
        let (b, _, tso, lsn) = changes();
        let op = Int8Array::from(vec![0, 7, 0, 0]);
        let c = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let err = encode_json_lines(&b, Some(c), &UPSERT, &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "Unsupported Doris binlog operation 7");
    }

    #[test]
    fn unsupported_types_name_the_column() {
        let b = batch(vec![(
            "blob",
            Arc::new(arrow_array::BinaryArray::from(vec![b"x".as_ref()])) as ArrayRef,
        )]);
        let err = encode_json_lines(&b, None, &UPSERT, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "column blob has Arrow type Binary, which the Doris sink cannot write"
        );
    }
    fn csv(sep: &[u8], delim: &[u8]) -> BodyFormat {
        BodyFormat::Csv {
            column_separator: sep.to_vec(),
            line_delimiter: delim.to_vec(),
        }
    }

    #[test]
    fn csv_shares_the_value_text_with_json_and_marks_nulls_and_signs() {
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![Some(1), None]))),
            ("ok", Arc::new(BooleanArray::from(vec![Some(true), None]))),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("a\"b,c é"), None])),
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from(vec![Some(-1250), None])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            ("day", Arc::new(Date32Array::from(vec![Some(19_000), None]))),
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from(vec![
                    Some(1_700_000_000_123_456),
                    None,
                ])),
            ),
        ]);
        let mut out = Vec::new();
        csv(b"\t", b"\n")
            .encode(&b, None, &UPSERT, &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1\ttrue\ta\"b,c é\t-12.50\t2022-01-08\t2023-11-14 22:13:20.123456\t0\n\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t0\n"
        );
    }

    #[test]
    fn csv_changelog_rows_end_with_op_tso_lsn() {
        let (b, op, tso, lsn) = changes();
        let c = ChangeColumns {
            op: &op,
            tso: &tso,
            lsn: &lsn,
        };
        let policy = EventPolicy {
            mode: SinkMode::Changelog,
            ..UPSERT
        };
        let mut out = Vec::new();
        csv(b"|", b"\r\n")
            .encode(&b, Some(c), &policy, &mut out)
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "1|+I|10|0\r\n1|-U|20|0\r\n1|+U|20|0\r\n2|-D|30|0\r\n"
        );
    }

    #[test]
    fn csv_refuses_values_holding_the_separator() {
        let b = batch(vec![(
            "s",
            Arc::new(StringArray::from(vec!["ok", "tab\there"])) as ArrayRef,
        )]);
        let mut out = b"earlier".to_vec();
        let err = csv(b"\t", b"\n")
            .encode(&b, None, &UPSERT, &mut out)
            .unwrap_err();
        assert_eq!(
            err,
            EncodeError::CsvSeparatorInValue {
                column: "s".into(),
                separator: "column_separator"
            }
        );
        assert!(err.to_string().contains("choose another"), "{err}");
        assert_eq!(out, b"earlier", "nothing of the batch is left behind");
        let b = batch(vec![(
            "s",
            Arc::new(StringArray::from(vec!["\\N"])) as ArrayRef,
        )]);
        let err = csv(b"\t", b"\n")
            .encode(&b, None, &UPSERT, &mut Vec::new())
            .unwrap_err();
        assert_eq!(err, EncodeError::CsvNullLookalike { column: "s".into() });
    }

    #[test]
    fn formats_come_from_the_stream_load_properties() {
        let props = |kv: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect()
        };
        assert_eq!(
            BodyFormat::from_properties(&props(&[])).unwrap(),
            BodyFormat::JsonLines
        );
        assert_eq!(
            BodyFormat::from_properties(&props(&[("format", "CSV")])).unwrap(),
            csv(b"\t", b"\n")
        );
        assert_eq!(
            BodyFormat::from_properties(&props(&[
                ("format", "csv"),
                ("column_separator", "\\x01\\x02"),
                ("line_delimiter", "\\n")
            ]))
            .unwrap(),
            csv(&[1, 2], b"\n")
        );
        assert!(
            BodyFormat::from_properties(&props(&[("format", "parquet")]))
                .unwrap_err()
                .contains("json (the default) or csv")
        );
        assert!(
            BodyFormat::from_properties(&props(&[("format", "csv"), ("column_separator", "\\x1")]))
                .is_err()
        );
    }
}
