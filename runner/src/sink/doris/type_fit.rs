//! Whether a sink column's type holds every value of the source column's type: the one rule
//! behind the check of an existing sink table when the sync starts, when schema evolution meets
//! a column, and in `dcs-runner check`. Pure.
//!
//! Why it matters: Stream Load converts each value to the sink column's type; a value that does
//! not fit (5000000000 into an `INT`, a 40-byte text into `VARCHAR(10)`) is filtered under
//! `strict_mode` (which dcs sets, so the load fails) and silently becomes NULL without it
//! (docs/doris-protocols.md §4.2). Refusing a narrower sink before the first load turns a
//! failure in the middle of a sync into a message at its start.
//!
//! Types are read as `information_schema.columns.COLUMN_TYPE` spells them (`int(11)`,
//! `varchar(64)`, `decimalv3(10,2)`, `datetimev2(3)`, `text`, `array<int(11)>`); integer display
//! widths are ignored, `tinyint(1)` is BOOLEAN.

use std::fmt;

use dcs_crds::spec::TableRef;

use super::create_table::{SinkColumn, TableColumn, column_definition, sink_type};

/// Largest VARCHAR length Doris allows (also the length a `STRING` key column gets).
const MAX_VARCHAR: u32 = 65_533;

/// A Doris column type, as far as the rule needs to tell types apart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ColumnType {
    Boolean,
    /// TINYINT (1) … LARGEINT (5).
    Int(IntWidth),
    Float,
    Double,
    Decimal {
        precision: u32,
        scale: u32,
    },
    Char(u32),
    Varchar(u32),
    String,
    Date,
    DateTime(u32),
    Json,
    Array(Box<ColumnType>),
    Map(Box<ColumnType>, Box<ColumnType>),
    Struct(Vec<(String, ColumnType)>),
    /// Any other type (IPV4, VARIANT, HLL, …), by its lower-cased name.
    Other(String),
}

/// The integer types, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum IntWidth {
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    LargeInt,
}

impl IntWidth {
    fn name(self) -> &'static str {
        match self {
            Self::TinyInt => "TINYINT",
            Self::SmallInt => "SMALLINT",
            Self::Int => "INT",
            Self::BigInt => "BIGINT",
            Self::LargeInt => "LARGEINT",
        }
    }

    fn largest(self) -> &'static str {
        match self {
            Self::TinyInt => "127",
            Self::SmallInt => "32767",
            Self::Int => "2147483647",
            Self::BigInt => "9223372036854775807",
            Self::LargeInt => "170141183460469231731687303715884105727",
        }
    }

    /// Decimal digits of the largest magnitude.
    fn digits(self) -> u32 {
        self.largest().len() as u32
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Boolean => write!(f, "BOOLEAN"),
            Self::Int(w) => write!(f, "{}", w.name()),
            Self::Float => write!(f, "FLOAT"),
            Self::Double => write!(f, "DOUBLE"),
            Self::Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            Self::Char(n) => write!(f, "CHAR({n})"),
            Self::Varchar(n) => write!(f, "VARCHAR({n})"),
            Self::String => write!(f, "STRING"),
            Self::Date => write!(f, "DATE"),
            Self::DateTime(p) => write!(f, "DATETIME({p})"),
            Self::Json => write!(f, "JSON"),
            Self::Array(t) => write!(f, "ARRAY<{t}>"),
            Self::Map(k, v) => write!(f, "MAP<{k},{v}>"),
            Self::Struct(fields) => {
                write!(f, "STRUCT<")?;
                for (i, (n, t)) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ",")?;
                    }
                    write!(f, "{n}:{t}")?;
                }
                write!(f, ">")
            }
            Self::Other(name) => write!(f, "{}", name.to_ascii_uppercase()),
        }
    }
}

/// Splits `s` at top-level commas (not inside `<>` or `()`).
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// Reads a `COLUMN_TYPE` text.
fn parse(text: &str) -> ColumnType {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if let Some(inner) = lower
        .strip_suffix('>')
        .and_then(|s| s.split_once('<'))
        .map(|(base, inner)| (base.trim().to_owned(), inner.to_owned()))
    {
        let (base, inner) = inner;
        let parts = split_top(&inner);
        return match (base.as_str(), parts.as_slice()) {
            ("array", [e]) => ColumnType::Array(Box::new(parse(e))),
            ("map", [k, v]) => ColumnType::Map(Box::new(parse(k)), Box::new(parse(v))),
            ("struct", fields) => ColumnType::Struct(
                fields
                    .iter()
                    .map(|f| match f.split_once(':') {
                        Some((n, t)) => (n.trim().trim_matches('`').to_owned(), parse(t)),
                        None => (f.to_string(), ColumnType::Other(f.to_string())),
                    })
                    .collect(),
            ),
            _ => ColumnType::Other(lower),
        };
    }
    let (base, args): (&str, Vec<u32>) = match lower.split_once('(') {
        Some((base, rest)) => (
            base.trim(),
            rest.trim_end_matches(')')
                .split(',')
                .filter_map(|a| a.trim().parse().ok())
                .collect(),
        ),
        None => (lower.as_str(), Vec::new()),
    };
    let first = args.first().copied();
    match base {
        "boolean" | "bool" => ColumnType::Boolean,
        "tinyint" if first == Some(1) => ColumnType::Boolean,
        "tinyint" => ColumnType::Int(IntWidth::TinyInt),
        "smallint" => ColumnType::Int(IntWidth::SmallInt),
        "int" | "integer" => ColumnType::Int(IntWidth::Int),
        "bigint" => ColumnType::Int(IntWidth::BigInt),
        "largeint" => ColumnType::Int(IntWidth::LargeInt),
        "float" => ColumnType::Float,
        "double" => ColumnType::Double,
        "decimal" | "decimalv2" | "decimalv3" | "numeric" => ColumnType::Decimal {
            precision: first.unwrap_or(9),
            scale: args.get(1).copied().unwrap_or(0),
        },
        "char" | "character" => ColumnType::Char(first.unwrap_or(1)),
        "varchar" => ColumnType::Varchar(first.unwrap_or(MAX_VARCHAR)),
        "string" | "text" | "tinytext" | "mediumtext" | "longtext" => ColumnType::String,
        "date" | "datev2" | "datev1" => ColumnType::Date,
        "datetime" | "datetimev2" | "datetimev1" | "timestamp" => {
            ColumnType::DateTime(first.unwrap_or(0))
        }
        "json" | "jsonb" => ColumnType::Json,
        other => ColumnType::Other(other.to_owned()),
    }
}

/// The longest text a value of `t` is written as in a Stream Load body, when bounded.
fn text_length(t: &ColumnType) -> Option<u32> {
    match t {
        ColumnType::Boolean => Some(5),
        // The sign and the digits.
        ColumnType::Int(w) => Some(w.digits() + 1),
        // Sign, digits, point, a leading zero.
        ColumnType::Decimal { precision, .. } => Some(precision + 3),
        ColumnType::Date => Some(10),
        // dcs writes six fractional digits whatever the precision.
        ColumnType::DateTime(_) => Some(26),
        // `-1.7976931348623157e+308`
        ColumnType::Float | ColumnType::Double => Some(24),
        ColumnType::Char(n) | ColumnType::Varchar(n) => Some(*n),
        _ => None,
    }
}

/// Why a sink type cannot hold a source type: the first values that would not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Why(pub String);

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn why(s: impl Into<String>) -> Result<(), Why> {
    Err(Why(s.into()))
}

/// Whether a column of type `sink` holds every value of a column of type `source` (both as
/// `information_schema.columns.COLUMN_TYPE` spells them): equal or wider is fine; narrower or
/// of another kind is refused with the values that would not fit.
///
/// # Errors
/// [`Why`] the values of `source` that `sink` would lose.
pub fn can_hold(sink: &str, source: &str) -> Result<(), Why> {
    holds(&parse(sink), &parse(source))
}

fn holds(sink: &ColumnType, source: &ColumnType) -> Result<(), Why> {
    use ColumnType as T;
    if sink == source {
        return Ok(());
    }
    match (sink, source) {
        (T::Int(s), T::Int(w)) if s >= w => Ok(()),
        (T::Int(s), T::Int(_)) => why(format!("values above {} would not fit", s.largest())),
        (T::Int(_), T::Boolean) => Ok(()),
        (T::Int(s), T::Decimal { precision, scale }) => {
            if *scale > 0 {
                why("the fractional digits would be lost")
            } else if *precision >= s.digits() {
                why(format!("values above {} would not fit", s.largest()))
            } else {
                Ok(())
            }
        }
        (T::Decimal { precision, scale }, T::Int(w)) => {
            let integer_digits = precision.saturating_sub(*scale);
            if integer_digits >= w.digits() {
                Ok(())
            } else {
                why(format!(
                    "values with more than {integer_digits} integer digits would not fit"
                ))
            }
        }
        (
            T::Decimal { precision, scale },
            T::Decimal {
                precision: p,
                scale: s,
            },
        ) => {
            if scale < s {
                why(format!(
                    "digits beyond {scale} after the point would be lost"
                ))
            } else if precision.saturating_sub(*scale) < p.saturating_sub(*s) {
                why(format!(
                    "values with more than {} integer digits would not fit",
                    precision.saturating_sub(*scale)
                ))
            } else {
                Ok(())
            }
        }
        (T::Double, T::Float) => Ok(()),
        (T::Float, T::Int(w)) if *w <= IntWidth::SmallInt => Ok(()),
        (T::Double, T::Int(w)) if *w <= IntWidth::Int => Ok(()),
        (T::Float | T::Double, T::Int(_)) => {
            why("values with more digits than the floating-point type keeps would be rounded")
        }
        (T::Float, T::Double) => why("values outside FLOAT's range would not fit"),
        (T::Float | T::Double, T::Decimal { .. }) => {
            why("values with more digits than the floating-point type keeps would be rounded")
        }
        (T::String, T::Char(_) | T::Varchar(_) | T::String | T::Json) => Ok(()),
        (T::String, s) if text_length(s).is_some() => Ok(()),
        (T::Varchar(n) | T::Char(n), s) => match text_length(s) {
            Some(m) if m <= *n => Ok(()),
            Some(_) if matches!(s, T::Char(_) | T::Varchar(_)) => {
                why(format!("values longer than {n} bytes would not fit"))
            }
            Some(m) => why(format!(
                "values written with more than {n} characters (up to {m}) would not fit"
            )),
            None => why(format!("values longer than {n} bytes would not fit")),
        },
        (T::DateTime(_), T::Date) => Ok(()),
        (T::DateTime(p), T::DateTime(q)) if p >= q => Ok(()),
        (T::DateTime(p), T::DateTime(_)) => why(format!(
            "fractional seconds beyond {p} digits would be lost"
        )),
        (T::Date, T::DateTime(_)) => why("the time of day would be lost"),
        (T::Array(s), T::Array(e)) => holds(s, e).map_err(|w| Why(format!("elements: {w}"))),
        (T::Map(sk, sv), T::Map(k, v)) => {
            holds(sk, k).map_err(|w| Why(format!("keys: {w}")))?;
            holds(sv, v).map_err(|w| Why(format!("values: {w}")))
        }
        (T::Struct(sf), T::Struct(f)) if sf.len() == f.len() => {
            for ((sn, st), (n, t)) in sf.iter().zip(f) {
                if !sn.eq_ignore_ascii_case(n) {
                    return why(format!("field {n} would meet field {sn}"));
                }
                holds(st, t).map_err(|w| Why(format!("field {n}: {w}")))?;
            }
            Ok(())
        }
        _ => why("the types differ, so values would not convert"),
    }
}

/// A `COLUMN_TYPE` as Doris writes the type in DDL (`int(11)` → `INT`), for messages.
pub fn display(column_type: &str) -> String {
    parse(column_type).to_string()
}

/// The written columns of an existing sink table whose type cannot hold the source column's,
/// each naming the column, both types, the values that would not fit and the `ALTER TABLE`
/// that fixes it. Columns missing on either side are left to [`super::create_table::check_existing`].
pub fn type_problems(
    table: &TableRef,
    source_columns: &[TableColumn],
    sink_columns: &[TableColumn],
    written: &[String],
) -> Vec<String> {
    let find = |cols: &[TableColumn], name: &str| {
        cols.iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .cloned()
    };
    written
        .iter()
        .filter_map(|name| {
            let source = find(source_columns, name)?;
            let sink = find(sink_columns, name)?;
            let Err(why) = can_hold(&sink.column_type, &source.column_type) else {
                return None;
            };
            let fix = SinkColumn {
                name: sink.name.clone(),
                doris_type: sink_type(&source.column_type, sink.is_key),
                nullable: sink.nullable,
                is_key: sink.is_key,
                default: None,
            };
            Some(format!(
                "sink column {table}.{} is {} but the source column is {}: {why}; ALTER TABLE {} MODIFY COLUMN {}",
                sink.name,
                display(&sink.column_type),
                display(&source.column_type),
                table.quoted(),
                column_definition(&fix)
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wider_or_equal_types_hold_the_source() {
        let fine = [
            ("bigint", "int(11)"),
            ("bigint(20)", "bigint(20)"),
            ("largeint", "bigint"),
            ("smallint(6)", "tinyint(4)"),
            ("int", "tinyint(1)"),
            ("varchar(30)", "varchar(10)"),
            ("varchar(30)", "char(10)"),
            ("varchar(65533)", "varchar(65533)"),
            ("text", "varchar(100)"),
            ("string", "text"),
            ("string", "json"),
            ("string", "bigint"),
            ("varchar(20)", "bigint"),
            ("decimalv3(12,4)", "decimal(10,2)"),
            ("decimal(12,2)", "int"),
            ("bigint", "decimal(18,0)"),
            ("double", "float"),
            ("double", "int"),
            ("datetimev2(6)", "datetime(3)"),
            ("datetime", "date"),
            ("datev2", "date"),
            ("json", "jsonb"),
            ("array<bigint(20)>", "array<int(11)>"),
            ("map<varchar(10),bigint>", "map<varchar(5),int>"),
            ("struct<a:bigint,b:text>", "struct<a:int,b:varchar(3)>"),
            ("ipv4", "ipv4"),
        ];
        for (sink, source) in fine {
            assert_eq!(can_hold(sink, source), Ok(()), "{sink} holding {source}");
        }
    }

    #[test]
    fn narrower_or_other_types_are_refused_saying_what_would_not_fit() {
        let refused = [
            (
                "int(11)",
                "bigint(20)",
                "values above 2147483647 would not fit",
            ),
            ("tinyint", "smallint", "values above 127 would not fit"),
            (
                "bigint",
                "largeint",
                "values above 9223372036854775807 would not fit",
            ),
            (
                "boolean",
                "tinyint(4)",
                "the types differ, so values would not convert",
            ),
            (
                "varchar(10)",
                "varchar(30)",
                "values longer than 10 bytes would not fit",
            ),
            (
                "char(5)",
                "varchar(6)",
                "values longer than 5 bytes would not fit",
            ),
            (
                "varchar(65533)",
                "text",
                "values longer than 65533 bytes would not fit",
            ),
            (
                "varchar(10)",
                "bigint",
                "values written with more than 10 characters (up to 20) would not fit",
            ),
            (
                "decimal(10,1)",
                "decimal(10,2)",
                "digits beyond 1 after the point would be lost",
            ),
            (
                "decimal(10,2)",
                "decimal(12,2)",
                "values with more than 8 integer digits would not fit",
            ),
            (
                "decimal(10,2)",
                "bigint",
                "values with more than 8 integer digits would not fit",
            ),
            (
                "int",
                "decimal(10,2)",
                "the fractional digits would be lost",
            ),
            (
                "int",
                "decimal(10,0)",
                "values above 2147483647 would not fit",
            ),
            (
                "float",
                "double",
                "values outside FLOAT's range would not fit",
            ),
            (
                "double",
                "bigint",
                "values with more digits than the floating-point type keeps would be rounded",
            ),
            (
                "datetime(0)",
                "datetime(3)",
                "fractional seconds beyond 0 digits would be lost",
            ),
            ("date", "datetime", "the time of day would be lost"),
            (
                "int",
                "varchar(10)",
                "the types differ, so values would not convert",
            ),
            (
                "json",
                "text",
                "the types differ, so values would not convert",
            ),
            (
                "date",
                "int",
                "the types differ, so values would not convert",
            ),
            (
                "array<int>",
                "array<bigint>",
                "elements: values above 2147483647 would not fit",
            ),
            (
                "map<varchar(3),int>",
                "map<varchar(5),int>",
                "keys: values longer than 3 bytes would not fit",
            ),
            (
                "struct<a:int>",
                "struct<a:bigint>",
                "field a: values above 2147483647 would not fit",
            ),
            (
                "ipv4",
                "ipv6",
                "the types differ, so values would not convert",
            ),
        ];
        for (sink, source, reason) in refused {
            assert_eq!(
                can_hold(sink, source),
                Err(Why(reason.to_owned())),
                "{sink} holding {source}"
            );
        }
    }

    fn col(name: &str, t: &str) -> TableColumn {
        TableColumn {
            name: name.into(),
            column_type: t.into(),
            nullable: true,
            is_key: false,
            default: None,
        }
    }

    #[test]
    fn a_narrower_sink_column_is_named_with_both_types_and_the_fix() {
        let table: TableRef = "demo_sink.student".parse().unwrap();
        let source = [
            col("id", "int(11)"),
            col("age", "bigint(20)"),
            col("name", "varchar(10)"),
        ];
        let sink = [
            col("id", "bigint"),
            col("age", "int"),
            col("name", "varchar(30)"),
        ];
        let written = ["id".to_owned(), "age".to_owned(), "name".to_owned()];
        assert_eq!(
            type_problems(&table, &source, &sink, &written),
            [
                "sink column demo_sink.student.age is INT but the source column is BIGINT: values above 2147483647 would not fit; ALTER TABLE `demo_sink`.`student` MODIFY COLUMN `age` BIGINT NULL"
            ]
        );
        assert!(type_problems(&table, &source, &sink, &written[..1]).is_empty());
    }

    #[test]
    fn types_display_as_doris_writes_them() {
        assert_eq!(display("int(11)"), "INT");
        assert_eq!(display("tinyint(1)"), "BOOLEAN");
        assert_eq!(display("decimalv3(10, 2)"), "DECIMAL(10,2)");
        assert_eq!(display("datetimev2(3)"), "DATETIME(3)");
        assert_eq!(display("text"), "STRING");
        assert_eq!(display("array<int(11)>"), "ARRAY<INT>");
    }
}
