//! Result sets to Arrow, as a Doris 5.0 BE and FE send them (docs/doris-protocols.md §3.5).
//!
//! - BE results (queries): typed columns per the master mapping — LARGEINT as decimal text,
//!   DECIMAL(p,s) as decimal128(p,s), DATE as date32, DATETIME(p) as a timestamp whose unit follows
//!   the scale (0 s, 1–3 ms, 4–6 us), with no time zone and the wall clock taken as UTC.
//! - FE-local results (SHOW, SET, DDL, ...): every column is nullable utf8 text, like Doris's
//!   `FlightSqlChannel.addResult`; OK statements give one `StatusResult` column holding `"0"`.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int8Builder,
    Int16Builder, Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampSecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::types::{ColumnMeta, DorisType, ResultSet, Value};

/// Rows per record batch (Doris sends one batch per block; 4096 is the default block size).
pub const BATCH_ROWS: usize = 4096;

/// Column name of the one-row result FE-local OK statements return.
pub const STATUS_RESULT_COLUMN: &str = "StatusResult";

/// The Arrow type a Doris column is sent as by the BE.
pub fn arrow_type(ty: DorisType) -> DataType {
    match ty {
        DorisType::Boolean => DataType::Boolean,
        DorisType::TinyInt => DataType::Int8,
        DorisType::SmallInt => DataType::Int16,
        DorisType::Int => DataType::Int32,
        DorisType::BigInt => DataType::Int64,
        DorisType::LargeInt => DataType::Utf8,
        DorisType::Float => DataType::Float32,
        DorisType::Double => DataType::Float64,
        DorisType::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
        DorisType::Char(_) | DorisType::Varchar(_) | DorisType::String | DorisType::Json => {
            DataType::Utf8
        }
        DorisType::Date => DataType::Date32,
        DorisType::DateTime(p) => DataType::Timestamp(datetime_unit(p), None),
    }
}

/// Timestamp unit for DATETIME(p).
pub fn datetime_unit(precision: u8) -> TimeUnit {
    match precision {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        _ => TimeUnit::Microsecond,
    }
}

/// The Arrow schema of a BE result.
pub fn schema_of(columns: &[ColumnMeta]) -> Schema {
    Schema::new(
        columns
            .iter()
            .map(|c| Field::new(&c.name, arrow_type(c.ty), c.nullable))
            .collect::<Vec<_>>(),
    )
}

/// Convert a result set to typed record batches of at most [`BATCH_ROWS`] rows (none when empty).
pub fn to_batches(rs: &ResultSet) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    to_batches_sized(rs, BATCH_ROWS)
}

/// [`to_batches`] with a custom batch size.
pub fn to_batches_sized(
    rs: &ResultSet,
    batch_rows: usize,
) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let schema = Arc::new(schema_of(&rs.columns));
    let mut out = Vec::new();
    for chunk in rs.rows.chunks(batch_rows.max(1)) {
        let mut arrays = Vec::with_capacity(rs.columns.len());
        for (i, col) in rs.columns.iter().enumerate() {
            arrays.push(column_array(col, chunk, i)?);
        }
        out.push(RecordBatch::try_new(schema.clone(), arrays)?);
    }
    Ok((schema, out))
}

fn cell<'a>(row: &'a [Value], i: usize, col: &ColumnMeta) -> Result<&'a Value, ArrowError> {
    row.get(i).ok_or_else(|| {
        ArrowError::InvalidArgumentError(format!("row has no value for column {}", col.name))
    })
}

fn mismatch(col: &ColumnMeta, v: &Value) -> ArrowError {
    ArrowError::InvalidArgumentError(format!(
        "column {} ({:?}) cannot hold value {v:?}",
        col.name, col.ty
    ))
}

fn null_check(col: &ColumnMeta) -> Result<(), ArrowError> {
    if col.nullable {
        Ok(())
    } else {
        Err(ArrowError::InvalidArgumentError(format!(
            "NULL in NOT NULL column {}",
            col.name
        )))
    }
}

macro_rules! build_int {
    ($builder:ty, $t:ty, $col:expr, $rows:expr, $i:expr) => {{
        let mut b = <$builder>::with_capacity($rows.len());
        for row in $rows {
            match cell(row, $i, $col)? {
                Value::Null => {
                    null_check($col)?;
                    b.append_null()
                }
                Value::Int(v) => b.append_value(<$t>::try_from(*v).map_err(|_| {
                    ArrowError::InvalidArgumentError(format!("{v} out of range for {}", $col.name))
                })?),
                Value::Bool(v) => b.append_value(*v as $t),
                other => return Err(mismatch($col, other)),
            }
        }
        Arc::new(b.finish()) as ArrayRef
    }};
}

fn column_array(col: &ColumnMeta, rows: &[Vec<Value>], i: usize) -> Result<ArrayRef, ArrowError> {
    Ok(match col.ty {
        DorisType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(rows.len());
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Bool(v) => b.append_value(*v),
                    Value::Int(v) => b.append_value(*v != 0),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(b.finish())
        }
        DorisType::TinyInt => build_int!(Int8Builder, i8, col, rows, i),
        DorisType::SmallInt => build_int!(Int16Builder, i16, col, rows, i),
        DorisType::Int => build_int!(Int32Builder, i32, col, rows, i),
        DorisType::BigInt => build_int!(Int64Builder, i64, col, rows, i),
        DorisType::Float => {
            let mut b = Float32Builder::with_capacity(rows.len());
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Float(v) => b.append_value(*v as f32),
                    Value::Int(v) => b.append_value(*v as f32),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(b.finish())
        }
        DorisType::Double => {
            let mut b = Float64Builder::with_capacity(rows.len());
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Float(v) => b.append_value(*v),
                    Value::Int(v) => b.append_value(*v as f64),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(b.finish())
        }
        DorisType::Decimal { precision, scale } => {
            let mut b = Decimal128Builder::with_capacity(rows.len());
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Decimal(unscaled, s) => {
                        b.append_value(rescale(*unscaled, *s, scale, col)?)
                    }
                    Value::Int(v) => b.append_value(rescale(*v as i128, 0, scale, col)?),
                    Value::LargeInt(v) => b.append_value(rescale(*v, 0, scale, col)?),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(
                b.finish()
                    .with_precision_and_scale(precision, scale as i8)?,
            )
        }
        DorisType::LargeInt
        | DorisType::Char(_)
        | DorisType::Varchar(_)
        | DorisType::String
        | DorisType::Json => {
            let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 8);
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Str(s) | Value::Json(s) => b.append_value(s),
                    Value::LargeInt(v) => b.append_value(v.to_string()),
                    Value::Int(v) => b.append_value(v.to_string()),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(b.finish())
        }
        DorisType::Date => {
            let mut b = Date32Builder::with_capacity(rows.len());
            for row in rows {
                match cell(row, i, col)? {
                    Value::Null => {
                        null_check(col)?;
                        b.append_null()
                    }
                    Value::Date(d) => b.append_value(*d),
                    Value::DateTime(us) => b.append_value(us.div_euclid(86_400_000_000) as i32),
                    other => return Err(mismatch(col, other)),
                }
            }
            Arc::new(b.finish())
        }
        DorisType::DateTime(p) => {
            let micros = |v: &Value| -> Result<Option<i64>, ArrowError> {
                match v {
                    Value::Null => {
                        null_check(col)?;
                        Ok(None)
                    }
                    Value::DateTime(us) => Ok(Some(*us)),
                    Value::Date(d) => Ok(Some(*d as i64 * 86_400_000_000)),
                    other => Err(mismatch(col, other)),
                }
            };
            match datetime_unit(p) {
                TimeUnit::Second => {
                    let mut b = TimestampSecondBuilder::with_capacity(rows.len());
                    for row in rows {
                        b.append_option(
                            micros(cell(row, i, col)?)?.map(|us| us.div_euclid(1_000_000)),
                        );
                    }
                    Arc::new(b.finish())
                }
                TimeUnit::Millisecond => {
                    let mut b = TimestampMillisecondBuilder::with_capacity(rows.len());
                    for row in rows {
                        b.append_option(micros(cell(row, i, col)?)?.map(|us| us.div_euclid(1_000)));
                    }
                    Arc::new(b.finish())
                }
                _ => {
                    let mut b = TimestampMicrosecondBuilder::with_capacity(rows.len());
                    for row in rows {
                        b.append_option(micros(cell(row, i, col)?)?);
                    }
                    Arc::new(b.finish())
                }
            }
        }
    })
}

/// Bring an unscaled decimal from scale `from` to scale `to` (rounding half away from zero).
fn rescale(unscaled: i128, from: u8, to: u8, col: &ColumnMeta) -> Result<i128, ArrowError> {
    let overflow =
        || ArrowError::InvalidArgumentError(format!("decimal overflow in column {}", col.name));
    if from == to {
        return Ok(unscaled);
    }
    if to > from {
        let f = 10i128
            .checked_pow((to - from) as u32)
            .ok_or_else(overflow)?;
        unscaled.checked_mul(f).ok_or_else(overflow)
    } else {
        let f = 10i128
            .checked_pow((from - to) as u32)
            .ok_or_else(overflow)?;
        let q = unscaled / f;
        let r = unscaled % f;
        Ok(if r.abs() * 2 >= f {
            q + unscaled.signum()
        } else {
            q
        })
    }
}

/// FE-local result: every column nullable utf8 text.
pub fn to_text_batches(rs: &ResultSet) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let schema = Arc::new(Schema::new(
        rs.columns
            .iter()
            .map(|c| Field::new(&c.name, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(rs.columns.len());
    for (i, col) in rs.columns.iter().enumerate() {
        let mut b = StringBuilder::new();
        for row in &rs.rows {
            match row.get(i) {
                None | Some(Value::Null) => b.append_null(),
                Some(v) => b.append_value(format_value(v, col.ty)),
            }
        }
        arrays.push(Arc::new(b.finish()));
    }
    let batch = RecordBatch::try_new(schema.clone(), arrays)?;
    Ok((schema, vec![batch]))
}

/// The one-row `StatusResult` = `"0"` result of an OK statement.
pub fn ok_result() -> (SchemaRef, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![Field::new(
        STATUS_RESULT_COLUMN,
        DataType::Utf8,
        true,
    )]));
    let mut b = StringBuilder::new();
    b.append_value("0");
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(b.finish()) as ArrayRef])
        .expect("valid batch");
    (schema, vec![batch])
}

/// A value as Doris prints it in text results.
pub fn format_value(v: &Value, ty: DorisType) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Bool(b) => if *b { "1" } else { "0" }.into(),
        Value::Int(i) => i.to_string(),
        Value::LargeInt(i) => i.to_string(),
        Value::Float(f) => format_float(*f),
        Value::Decimal(unscaled, scale) => format_decimal(*unscaled, *scale),
        Value::Str(s) | Value::Json(s) => s.clone(),
        Value::Date(d) => format_date(*d),
        Value::DateTime(us) => {
            let p = match ty {
                DorisType::DateTime(p) => p,
                _ => 0,
            };
            format_datetime(*us, p)
        }
    }
}

fn format_float(f: f64) -> String {
    if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// `12.50` for `(1250, 2)`.
pub fn format_decimal(unscaled: i128, scale: u8) -> String {
    if scale == 0 {
        return unscaled.to_string();
    }
    let neg = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{}", "0".repeat(scale + 1 - digits.len()), digits)
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{}{int}.{frac}", if neg { "-" } else { "" })
}

/// Civil date (y, m, d) from days since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `yyyy-MM-dd`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `yyyy-MM-dd HH:mm:ss[.f…]` with `precision` fraction digits.
pub fn format_datetime(micros: i64, precision: u8) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let rem = micros.rem_euclid(86_400_000_000);
    let (y, mo, d) = civil_from_days(days);
    let secs = rem / 1_000_000;
    let frac = rem % 1_000_000;
    let mut s = format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if precision > 0 {
        let p = precision.min(6) as usize;
        let f = format!("{frac:06}");
        s.push('.');
        s.push_str(&f[..p]);
    }
    s
}

#[cfg(test)]
mod tests {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{
        Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
        Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampSecondType,
    };

    use super::*;

    fn col(name: &str, ty: DorisType, nullable: bool) -> ColumnMeta {
        ColumnMeta {
            name: name.into(),
            ty,
            nullable,
        }
    }

    fn all_types() -> ResultSet {
        // 2024-01-02 03:04:05.123456 wall clock
        let dt = (19_724i64 * 86_400 + 3 * 3600 + 4 * 60 + 5) * 1_000_000 + 123_456;
        ResultSet {
            columns: vec![
                col("b", DorisType::Boolean, true),
                col("t", DorisType::TinyInt, true),
                col("s", DorisType::SmallInt, true),
                col("i", DorisType::Int, false),
                col("l", DorisType::BigInt, true),
                col("li", DorisType::LargeInt, true),
                col("f", DorisType::Float, true),
                col("d", DorisType::Double, true),
                col(
                    "dec",
                    DorisType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                    true,
                ),
                col("c", DorisType::Char(4), true),
                col("v", DorisType::Varchar(10), true),
                col("str", DorisType::String, true),
                col("date", DorisType::Date, true),
                col("dt0", DorisType::DateTime(0), true),
                col("dt3", DorisType::DateTime(3), true),
                col("dt6", DorisType::DateTime(6), true),
                col("j", DorisType::Json, true),
            ],
            rows: vec![
                vec![
                    Value::Bool(true),
                    Value::Int(-8),
                    Value::Int(300),
                    Value::Int(70_000),
                    Value::Int(1 << 40),
                    Value::LargeInt(170_141_183_460_469_231_731_687_303_715_884_105_727),
                    Value::Float(1.5),
                    Value::Float(2.25),
                    Value::Decimal(1250, 2),
                    Value::Str("ab".into()),
                    Value::Str("héllo".into()),
                    Value::Str("long".into()),
                    Value::Date(19_724),
                    Value::DateTime(dt),
                    Value::DateTime(dt),
                    Value::DateTime(dt),
                    Value::Json("{\"k\":1}".into()),
                ],
                {
                    let mut r = vec![Value::Null; 17];
                    r[3] = Value::Int(1);
                    r
                },
            ],
        }
    }

    #[test]
    fn schema_follows_the_master_mapping() {
        let s = schema_of(&all_types().columns);
        let types: Vec<_> = s.fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(
            types,
            vec![
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
        assert!(!s.field(3).is_nullable());
        assert!(s.field(0).is_nullable());
        assert_eq!(datetime_unit(2), TimeUnit::Millisecond);
        assert_eq!(datetime_unit(4), TimeUnit::Microsecond);
    }

    #[test]
    fn values_convert() {
        let (_, batches) = to_batches(&all_types()).unwrap();
        assert_eq!(batches.len(), 1);
        let b = &batches[0];
        assert_eq!(b.num_rows(), 2);
        assert!(b.column(0).as_boolean().value(0));
        assert_eq!(b.column(1).as_primitive::<Int8Type>().value(0), -8);
        assert_eq!(b.column(2).as_primitive::<Int16Type>().value(0), 300);
        assert_eq!(b.column(3).as_primitive::<Int32Type>().value(0), 70_000);
        assert_eq!(b.column(4).as_primitive::<Int64Type>().value(0), 1 << 40);
        assert_eq!(
            b.column(5).as_string::<i32>().value(0),
            "170141183460469231731687303715884105727"
        );
        assert_eq!(b.column(6).as_primitive::<Float32Type>().value(0), 1.5);
        assert_eq!(b.column(7).as_primitive::<Float64Type>().value(0), 2.25);
        assert_eq!(b.column(8).as_primitive::<Decimal128Type>().value(0), 1250);
        assert_eq!(b.column(10).as_string::<i32>().value(0), "héllo");
        assert_eq!(b.column(12).as_primitive::<Date32Type>().value(0), 19_724);
        let secs = 19_724i64 * 86_400 + 3 * 3600 + 4 * 60 + 5;
        assert_eq!(
            b.column(13).as_primitive::<TimestampSecondType>().value(0),
            secs
        );
        assert_eq!(
            b.column(14)
                .as_primitive::<TimestampMillisecondType>()
                .value(0),
            secs * 1000 + 123
        );
        assert_eq!(
            b.column(15)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            secs * 1_000_000 + 123_456
        );
        assert_eq!(b.column(16).as_string::<i32>().value(0), "{\"k\":1}");
        for c in 0..17 {
            if c != 3 {
                assert!(b.column(c).is_null(1), "column {c} row 1 is NULL");
            }
        }
    }

    #[test]
    fn decimal_rescales_and_null_in_not_null_fails() {
        let rs = ResultSet {
            columns: vec![col(
                "d",
                DorisType::Decimal {
                    precision: 10,
                    scale: 3,
                },
                false,
            )],
            rows: vec![vec![Value::Decimal(125, 1)], vec![Value::Int(7)]],
        };
        let (_, b) = to_batches(&rs).unwrap();
        let a = b[0].column(0).as_primitive::<Decimal128Type>();
        assert_eq!((a.value(0), a.value(1)), (12_500, 7_000));
        let bad = ResultSet {
            columns: rs.columns.clone(),
            rows: vec![vec![Value::Null]],
        };
        assert!(to_batches(&bad).is_err());
        assert_eq!(rescale(12_345, 3, 1, &rs.columns[0]).unwrap(), 123);
        assert_eq!(rescale(-12_355, 3, 1, &rs.columns[0]).unwrap(), -124);
    }

    #[test]
    fn large_results_split_into_batches() {
        let rs = ResultSet {
            columns: vec![col("i", DorisType::BigInt, false)],
            rows: (0..10_000).map(|i| vec![Value::Int(i)]).collect(),
        };
        let (_, b) = to_batches(&rs).unwrap();
        assert_eq!(
            b.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            vec![4096, 4096, 1808]
        );
        let empty = ResultSet {
            columns: rs.columns.clone(),
            rows: vec![],
        };
        assert!(to_batches(&empty).unwrap().1.is_empty());
    }

    #[test]
    fn text_results() {
        let (schema, b) = to_text_batches(&all_types()).unwrap();
        assert!(
            schema
                .fields()
                .iter()
                .all(|f| f.data_type() == &DataType::Utf8 && f.is_nullable())
        );
        let text = |c: usize| b[0].column(c).as_string::<i32>().value(0).to_string();
        assert_eq!(text(0), "1");
        assert_eq!(text(8), "12.50");
        assert_eq!(text(12), "2024-01-02");
        assert_eq!(text(13), "2024-01-02 03:04:05");
        assert_eq!(text(14), "2024-01-02 03:04:05.123");
        assert_eq!(text(15), "2024-01-02 03:04:05.123456");
        assert!(b[0].column(0).is_null(1));
        let (s, ok) = ok_result();
        assert_eq!(s.field(0).name(), "StatusResult");
        assert_eq!(ok[0].column(0).as_string::<i32>().value(0), "0");
    }

    #[test]
    fn formatting_helpers() {
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(100, 0), "100");
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(format_date(11_016), "2000-02-29");
        assert_eq!(format_datetime(-1, 6), "1969-12-31 23:59:59.999999");
    }
}
