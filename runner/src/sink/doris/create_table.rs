//! The sink table's DDL when it is missing (`sink.doris.createTable`), and the check of an
//! existing one. Pure: the I/O is in [`super::schema`].
//!
//! # Type mapping
//!
//! The rules are those of the Flink CDC Doris pipeline sink (`DorisMetadataApplier` /
//! `DorisTypeUtils` in apache/flink-cdc, which call `DorisTypeMapper.toDorisType` of
//! apache/doris-flink-connector), applied to the Doris type a Doris source table column reads as
//! in Flink (`DorisTypeMapper.toFlinkType`):
//!
//! | source (`information_schema.columns.COLUMN_TYPE`) | sink |
//! |---|---|
//! | `boolean` (and `tinyint(1)`) | `BOOLEAN` |
//! | `tinyint`, `smallint`, `int`, `bigint`, `float`, `double` | the same |
//! | `decimal(p,s)` (v2/v3) | `DECIMAL(p,s)` for p ≤ 38, else `STRING` |
//! | `char(n)` | `CHAR(3n)` when 3n ≤ 255, else as `varchar(n)` |
//! | `varchar(n)` | `VARCHAR(3n)` when 3n < 65533, else `STRING` |
//! | `string` / `text` | `STRING` |
//! | `date` (v2) | `DATE` (DATEV2) |
//! | `datetime(p)` (v2) | `DATETIME(min(p, 6))` (DATETIMEV2) |
//!
//! The length rule is Flink CDC's `VARCHAR(n) → VARCHAR(n*3)`, and a result of 65533 or more
//! becomes `STRING` (it is not capped at 65533). Flink applies it because its lengths count
//! characters and Doris's count bytes; a Doris source's length already counts bytes, so the sink
//! column is wider than needed, never narrower.
//!
//! Where the Flink path would lose the type because Flink has no equivalent (`largeint`, `json`,
//! `ipv4`/`ipv6`, `array`/`map`/`struct`, `variant`, …, all `STRING` in Flink), the sink keeps the
//! source's type: both ends are Doris.
//!
//! Key columns that would be `STRING` become `VARCHAR(65533)`, since Doris keys cannot be STRING
//! (the Flink Doris connector's `buildCreateTableDDL` does the same).
//!
//! # Keys and model
//!
//! - upsert mode: `UNIQUE KEY` on the source's key columns (a UNIQUE source's unique key, a
//!   DUPLICATE source's sort-key columns);
//! - changelog mode: `DUPLICATE KEY` on the same columns, plus `dcs_op VARCHAR(2)`,
//!   `dcs_tso BIGINT`, `dcs_lsn BIGINT` at the end.
//!
//! Then `DISTRIBUTED BY HASH(keys) BUCKETS AUTO`, `createTable.properties` verbatim (nothing is
//! added: `replication_num` only when the user set it) and, when asked,
//! `AUTO PARTITION BY RANGE (date_trunc(`key`, 'unit')) ()`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

use crate::sink::encode::{DELETE_SIGN_COLUMN, LSN_COLUMN, OP_COLUMN, TSO_COLUMN};
use dcs_doris_client::sql::quote_ident;

/// Largest VARCHAR length Doris allows.
pub const MAX_VARCHAR: u32 = 65_533;
/// Largest CHAR length Doris allows.
pub const MAX_CHAR: u32 = 255;

pub use dcs_doris_client::mysql_target::TableColumn;

/// What the sink table is created from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTableInput<'a> {
    /// The sink table.
    pub table: &'a TableRef,
    /// The source table's columns, in table order.
    pub source_columns: &'a [TableColumn],
    /// The columns the runner reads (the projection), in the order they are written.
    pub columns: &'a [String],
    /// Upsert or changelog.
    pub mode: SinkMode,
    /// `createTable.properties`.
    pub properties: &'a BTreeMap<String, String>,
    /// `createTable.autoPartition`: the column and the `date_trunc` unit.
    pub auto_partition: Option<(&'a str, &'a str)>,
}

/// A sink column to create: name, Doris type, nullability, key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkColumn {
    /// Column name.
    pub name: String,
    /// The Doris type text, e.g. `VARCHAR(192)`.
    pub doris_type: String,
    /// NULL allowed.
    pub nullable: bool,
    /// Part of the key.
    pub is_key: bool,
    /// `DEFAULT`, as the source's catalog shows it (only for a column added to an existing
    /// table, whose rows then read it as the source's do).
    pub default: Option<String>,
}

/// `"name(args)"` → (`name` lower-cased, args), e.g. `decimalv3(10, 2)` → (`decimalv3`, [10, 2]).
fn split_type(column_type: &str) -> (String, Vec<u32>) {
    let t = column_type.trim();
    match t.split_once('(') {
        Some((base, rest)) if !base.contains('<') => {
            let args = rest
                .trim_end_matches(')')
                .split(',')
                .filter_map(|a| a.trim().parse::<u32>().ok())
                .collect();
            (base.trim().to_ascii_lowercase(), args)
        }
        _ => (t.to_ascii_lowercase(), Vec::new()),
    }
}

fn varchar_of(chars: u32) -> String {
    let bytes = u64::from(chars) * 3;
    if bytes >= u64::from(MAX_VARCHAR) {
        "STRING".to_owned()
    } else {
        format!("VARCHAR({bytes})")
    }
}

/// The sink type of a source column type (see the module docs for the rules).
pub fn sink_type(column_type: &str, is_key: bool) -> String {
    let (base, args) = split_type(column_type);
    let mapped = match (base.as_str(), args.as_slice()) {
        ("boolean" | "bool", _) | ("tinyint", [1]) => "BOOLEAN".to_owned(),
        ("tinyint" | "smallint" | "int" | "integer" | "bigint" | "float" | "double", _) => {
            match base.as_str() {
                "integer" => "INT".to_owned(),
                b => b.to_ascii_uppercase(),
            }
        }
        ("decimal" | "decimalv2" | "decimalv3" | "numeric", a) => {
            let (p, s) = match a {
                [p, s, ..] => (*p, *s),
                [p] => (*p, 0),
                [] => (9, 0),
            };
            if p <= 38 {
                format!("DECIMAL({p},{s})")
            } else {
                "STRING".to_owned()
            }
        }
        ("char" | "character", a) => {
            let n = a.first().copied().unwrap_or(1);
            if n * 3 <= MAX_CHAR {
                format!("CHAR({})", n * 3)
            } else {
                varchar_of(n)
            }
        }
        ("varchar", a) => varchar_of(a.first().copied().unwrap_or(MAX_VARCHAR)),
        ("string" | "text" | "tinytext" | "mediumtext" | "longtext", _) => "STRING".to_owned(),
        ("date" | "datev2" | "datev1", _) => "DATE".to_owned(),
        ("datetime" | "datetimev2" | "datetimev1" | "timestamp", a) => {
            format!("DATETIME({})", a.first().copied().unwrap_or(0).min(6))
        }
        ("json" | "jsonb", _) => "JSON".to_owned(),
        _ => column_type.trim().to_ascii_uppercase(),
    };
    if is_key && mapped == "STRING" {
        format!("VARCHAR({MAX_VARCHAR})")
    } else {
        mapped
    }
}

/// Why the DDL cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CreateTableError {
    /// A projected column is not in the source.
    #[error("column {0} is not in the source table")]
    UnknownColumn(String),
    /// The source has no key columns among the projected ones.
    #[error(
        "the source table has no key column among the columns read, so the sink table's key cannot be derived; create the sink table yourself"
    )]
    NoKeys,
    /// The auto-partition column is not written to the sink.
    #[error("createTable.autoPartition.key {0} is not a column of the sink table")]
    PartitionKey(String),
}

/// The columns of the sink table, keys first (in source order), then the rest, then the
/// changelog-mode columns.
///
/// # Errors
/// [`CreateTableError`] when a column is unknown or no key can be derived.
pub fn sink_columns(input: &CreateTableInput<'_>) -> Result<Vec<SinkColumn>, CreateTableError> {
    let mut picked = Vec::new();
    for name in input.columns {
        let c = input
            .source_columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| CreateTableError::UnknownColumn(name.clone()))?;
        picked.push(c);
    }
    if !picked.iter().any(|c| c.is_key) {
        return Err(CreateTableError::NoKeys);
    }
    let mut out: Vec<SinkColumn> = picked
        .iter()
        .filter(|c| c.is_key)
        .chain(picked.iter().filter(|c| !c.is_key))
        .map(|c| SinkColumn {
            name: c.name.clone(),
            doris_type: sink_type(&c.column_type, c.is_key),
            nullable: c.nullable,
            is_key: c.is_key,
            default: None,
        })
        .collect();
    if input.mode == SinkMode::Changelog {
        out.extend(changelog_columns());
    }
    Ok(out)
}

/// The columns changelog mode adds to every row.
pub fn changelog_columns() -> [SinkColumn; 3] {
    let c = |name: &str, t: &str| SinkColumn {
        name: name.to_owned(),
        doris_type: t.to_owned(),
        nullable: true,
        is_key: false,
        default: None,
    };
    [
        c(OP_COLUMN, "VARCHAR(2)"),
        c(TSO_COLUMN, "BIGINT"),
        c(LSN_COLUMN, "BIGINT"),
    ]
}

fn sql_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The column definition as in CREATE TABLE / ADD COLUMN: `` `name` TYPE [NOT] NULL``.
pub fn column_definition(c: &SinkColumn) -> String {
    let mut out = format!(
        "{} {} {}",
        quote_ident(&c.name),
        c.doris_type,
        if c.nullable { "NULL" } else { "NOT NULL" }
    );
    if let Some(d) = &c.default {
        out.push_str(" DEFAULT ");
        out.push_str(&default_clause(d));
    }
    out
}

/// A default as DDL: the current time as the function Doris names, anything else as a string
/// literal (Doris casts it to the column's type, as its own `SHOW CREATE TABLE` writes it).
fn default_clause(default: &str) -> String {
    let d = default.trim();
    let lower = d.to_ascii_lowercase();
    let is_now = lower == "current_timestamp"
        || (lower.starts_with("current_timestamp(")
            && lower.ends_with(')')
            && lower["current_timestamp(".len()..lower.len() - 1]
                .chars()
                .all(|c| c.is_ascii_digit()));
    if is_now {
        d.to_ascii_uppercase()
    } else {
        dcs_doris_client::sql::string_literal(default)
    }
}

/// The `CREATE TABLE IF NOT EXISTS` statement for the sink.
///
/// # Errors
/// As [`sink_columns`], and when the auto-partition column is not written.
pub fn create_table_ddl(input: &CreateTableInput<'_>) -> Result<String, CreateTableError> {
    let columns = sink_columns(input)?;
    let keys: Vec<String> = columns
        .iter()
        .filter(|c| c.is_key)
        .map(|c| quote_ident(&c.name))
        .collect();
    let keys = keys.join(", ");
    let mut ddl = format!("CREATE TABLE IF NOT EXISTS {} (\n", input.table.quoted());
    let defs: Vec<String> = columns
        .iter()
        .map(|c| format!("  {}", column_definition(c)))
        .collect();
    ddl.push_str(&defs.join(",\n"));
    ddl.push_str("\n) ENGINE=OLAP\n");
    let model = match input.mode {
        SinkMode::Upsert => "UNIQUE",
        SinkMode::Changelog => "DUPLICATE",
    };
    let _ = writeln!(ddl, "{model} KEY({keys})");
    if let Some((key, unit)) = input.auto_partition {
        let column = columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(key))
            .ok_or_else(|| CreateTableError::PartitionKey(key.to_owned()))?;
        let _ = writeln!(
            ddl,
            "AUTO PARTITION BY RANGE (date_trunc({}, '{unit}')) ()",
            quote_ident(&column.name)
        );
    }
    let _ = write!(ddl, "DISTRIBUTED BY HASH({keys}) BUCKETS AUTO");
    if !input.properties.is_empty() {
        let props: Vec<String> = input
            .properties
            .iter()
            .map(|(k, v)| format!("{} = {}", sql_string(k), sql_string(v)))
            .collect();
        let _ = write!(ddl, "\nPROPERTIES (\n{}\n)", props.join(",\n"));
    }
    Ok(ddl)
}

/// What an existing sink table must offer: every column written, and the model the mode needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingSink<'a> {
    /// The sink's columns, in table order.
    pub columns: &'a [TableColumn],
    /// Whether it is a UNIQUE KEY table.
    pub unique: bool,
}

/// The problems that make an existing sink table unusable, each with what to do; empty when it
/// fits. `written` are the columns the runner writes, in order; `positional` says the body is
/// CSV, whose fields map to the table's columns by position.
pub fn check_existing(
    table: &TableRef,
    existing: &ExistingSink<'_>,
    written: &[String],
    mode: SinkMode,
    positional: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    let missing: Vec<&str> = written
        .iter()
        .filter(|w| {
            !existing
                .columns
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(w))
        })
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "sink table {table} has no column {}; add {} to it (ALTER TABLE {} ADD COLUMN …) or drop the table to let the runner create it",
            missing.join(", "),
            if missing.len() == 1 { "it" } else { "them" },
            table.quoted()
        ));
    }
    if mode == SinkMode::Upsert && !existing.unique {
        problems.push(format!(
            "sink table {table} is not a UNIQUE KEY table, which upsert mode needs for updates and {DELETE_SIGN_COLUMN} deletes; recreate it with UNIQUE KEY or use sink.doris.mode: changelog"
        ));
    }
    let extra_not_null: Vec<&str> = existing
        .columns
        .iter()
        .filter(|c| !c.nullable && !written.iter().any(|w| w.eq_ignore_ascii_case(&c.name)))
        .map(|c| c.name.as_str())
        .collect();
    if !extra_not_null.is_empty() {
        problems.push(format!(
            "sink table {table} has NOT NULL column(s) {} the runner does not write, so every row would be rejected; make them nullable or give them a default",
            extra_not_null.join(", ")
        ));
    }
    if positional && missing.is_empty() {
        let order: Vec<&str> = existing.columns.iter().map(|c| c.name.as_str()).collect();
        let same = order.len() == written.len()
            && order
                .iter()
                .zip(written)
                .all(|(a, b)| a.eq_ignore_ascii_case(b));
        if !same {
            problems.push(format!(
                "CSV bodies map fields by position, but sink table {table} has the columns ({}) and the runner writes ({}); use the JSON format (remove sink.doris.properties.format) or give the sink table exactly these columns in this order",
                order.join(", "),
                written.join(", ")
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, t: &str, nullable: bool, key: bool) -> TableColumn {
        TableColumn {
            name: name.into(),
            column_type: t.into(),
            nullable,
            is_key: key,
            default: None,
        }
    }

    #[test]
    fn a_column_definition_carries_the_default_as_doris_reads_it() {
        let c = |default: &str| SinkColumn {
            name: "level".into(),
            doris_type: "INT".into(),
            nullable: true,
            is_key: false,
            default: Some(default.into()),
        };
        assert_eq!(column_definition(&c("7")), "`level` INT NULL DEFAULT '7'");
        assert_eq!(
            column_definition(&c("it's")),
            "`level` INT NULL DEFAULT 'it''s'"
        );
        assert_eq!(
            column_definition(&c("current_timestamp(3)")),
            "`level` INT NULL DEFAULT CURRENT_TIMESTAMP(3)"
        );
        assert_eq!(
            column_definition(&c("CURRENT_TIMESTAMP")),
            "`level` INT NULL DEFAULT CURRENT_TIMESTAMP"
        );
        assert_eq!(
            column_definition(&c("current_timestamp(x)")),
            "`level` INT NULL DEFAULT 'current_timestamp(x)'"
        );
    }

    #[test]
    fn types_follow_the_flink_cdc_rules() {
        assert_eq!(sink_type("varchar(64)", false), "VARCHAR(192)");
        assert_eq!(sink_type("varchar(21844)", false), "VARCHAR(65532)");
        assert_eq!(sink_type("varchar(21845)", false), "STRING");
        assert_eq!(sink_type("varchar(30000)", true), "VARCHAR(65533)");
        assert_eq!(sink_type("char(10)", false), "CHAR(30)");
        assert_eq!(sink_type("char(100)", false), "VARCHAR(300)");
        assert_eq!(sink_type("text", true), "VARCHAR(65533)");
        assert_eq!(sink_type("text", false), "STRING");
        assert_eq!(sink_type("decimalv3(10, 2)", false), "DECIMAL(10,2)");
        assert_eq!(sink_type("decimal(76,2)", false), "STRING");
        assert_eq!(sink_type("datetimev2(3)", false), "DATETIME(3)");
        assert_eq!(sink_type("datetime", false), "DATETIME(0)");
        assert_eq!(sink_type("datev2", false), "DATE");
        assert_eq!(sink_type("tinyint(1)", false), "BOOLEAN");
        assert_eq!(sink_type("tinyint(4)", false), "TINYINT");
        assert_eq!(sink_type("int(11)", false), "INT");
        assert_eq!(sink_type("largeint", false), "LARGEINT");
        assert_eq!(sink_type("json", false), "JSON");
        assert_eq!(sink_type("array<int(11)>", false), "ARRAY<INT(11)>");
    }

    fn source() -> Vec<TableColumn> {
        vec![
            col("id", "int", false, true),
            col("code", "text", false, true),
            col("name", "varchar(20)", true, false),
            col("at", "datetime(6)", false, false),
        ]
    }

    #[test]
    fn upsert_ddl_has_unique_keys_auto_buckets_and_only_the_users_properties() {
        let table: TableRef = "sink.t".parse().unwrap();
        let src = source();
        let cols: Vec<String> = ["id", "code", "name", "at"].map(String::from).to_vec();
        let props: BTreeMap<String, String> = [("replication_num".into(), "1".into())].into();
        let input = CreateTableInput {
            table: &table,
            source_columns: &src,
            columns: &cols,
            mode: SinkMode::Upsert,
            properties: &props,
            auto_partition: Some(("at", "month")),
        };
        assert_eq!(
            create_table_ddl(&input).unwrap(),
            "CREATE TABLE IF NOT EXISTS `sink`.`t` (\n  `id` INT NOT NULL,\n  `code` VARCHAR(65533) NOT NULL,\n  `name` VARCHAR(60) NULL,\n  `at` DATETIME(6) NOT NULL\n) ENGINE=OLAP\nUNIQUE KEY(`id`, `code`)\nAUTO PARTITION BY RANGE (date_trunc(`at`, 'month')) ()\nDISTRIBUTED BY HASH(`id`, `code`) BUCKETS AUTO\nPROPERTIES (\n\"replication_num\" = \"1\"\n)"
        );
        let none = BTreeMap::new();
        let plain = CreateTableInput {
            properties: &none,
            auto_partition: None,
            ..input.clone()
        };
        let ddl = create_table_ddl(&plain).unwrap();
        assert!(
            !ddl.contains("PROPERTIES") && !ddl.contains("replication"),
            "{ddl}"
        );
        let bad = CreateTableInput {
            auto_partition: Some(("nope", "day")),
            ..input
        };
        assert_eq!(
            create_table_ddl(&bad).unwrap_err(),
            CreateTableError::PartitionKey("nope".into())
        );
    }

    #[test]
    fn changelog_ddl_is_duplicate_key_with_the_change_columns() {
        let table: TableRef = "sink.t".parse().unwrap();
        let src = source();
        let cols: Vec<String> = ["id", "code", "name"].map(String::from).to_vec();
        let props = BTreeMap::new();
        let input = CreateTableInput {
            table: &table,
            source_columns: &src,
            columns: &cols,
            mode: SinkMode::Changelog,
            properties: &props,
            auto_partition: None,
        };
        let ddl = create_table_ddl(&input).unwrap();
        assert!(ddl.contains("DUPLICATE KEY(`id`, `code`)"), "{ddl}");
        assert!(
            ddl.contains("`name` VARCHAR(60) NULL,\n  `dcs_op` VARCHAR(2) NULL,\n  `dcs_tso` BIGINT NULL,\n  `dcs_lsn` BIGINT NULL\n)"),
            "{ddl}"
        );
        let no_keys = ["name"].map(String::from).to_vec();
        let input = CreateTableInput {
            columns: &no_keys,
            ..input
        };
        assert_eq!(
            create_table_ddl(&input).unwrap_err(),
            CreateTableError::NoKeys
        );
    }

    #[test]
    fn an_existing_table_is_checked_for_columns_model_and_csv_order() {
        let table: TableRef = "sink.t".parse().unwrap();
        let cols = vec![
            col("id", "int", false, true),
            col("name", "varchar(60)", true, false),
            col("extra", "int", false, false),
        ];
        let existing = ExistingSink {
            columns: &cols,
            unique: false,
        };
        let written: Vec<String> = ["id", "name", "age"].map(String::from).to_vec();
        let p = check_existing(&table, &existing, &written, SinkMode::Upsert, false);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("no column age"), "{}", p[0]);
        assert!(p[1].contains("not a UNIQUE KEY table"), "{}", p[1]);
        assert!(p[2].contains("NOT NULL column(s) extra"), "{}", p[2]);
        let cols = vec![
            col("name", "varchar(60)", true, false),
            col("id", "int", false, true),
        ];
        let existing = ExistingSink {
            columns: &cols,
            unique: true,
        };
        let written: Vec<String> = ["id", "name"].map(String::from).to_vec();
        assert!(check_existing(&table, &existing, &written, SinkMode::Upsert, false).is_empty());
        let p = check_existing(&table, &existing, &written, SinkMode::Upsert, true);
        assert!(p[0].contains("by position"), "{p:?}");
    }
}
