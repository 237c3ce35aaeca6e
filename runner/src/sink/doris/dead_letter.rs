//! The dead-letter table (`spec.sink.doris.deadLetter`): rows Doris refuses go there instead of
//! stopping the sync (docs/ARCHITECTURE.md §3.6).
//!
//! Doris decides which rows it refuses: a load answered `Fail` with filtered rows and an
//! `ErrorURL`, whose log quotes each refused row as the load's source columns, space-separated
//! (docs/doris-protocols.md §4.2). [`identify`] (pure) matches those quotes to the body lines the
//! runner sent; when they cannot be matched one to one (a log cut at 50 rows, two different lines
//! quoted alike, a CSV body) it says why and the sync stops as without a dead-letter table. The
//! other rows are loaded again under the same label, the refused ones into the dead-letter table
//! under the next label of the same checkpoint, so both are pre-committed, recorded by the same
//! checkpoint and committed with it.

use std::collections::HashMap;
use std::fmt::Write as _;

use dcs_crds::spec::TableRef;
use dcs_doris_client::stream_load::ErrorLogLine;
use serde_json::Value;

use super::create_table::TableColumn;
use crate::sink::RowOrigin;
use crate::sink::encode::{
    DELETE_SIGN_COLUMN, LSN_COLUMN, OP_COLUMN, TSO_COLUMN, changelog_op_text,
};
use dcs_doris_client::sql::quote_ident;

/// The dead-letter table's columns, in order, with their types.
pub const COLUMNS: [(&str, &str); 9] = [
    ("rejected_at", "DATETIME(6) NOT NULL"),
    ("source_table", "VARCHAR(256) NOT NULL"),
    ("sink_table", "VARCHAR(256) NOT NULL"),
    ("tso", "BIGINT NULL"),
    ("lsn", "BIGINT NULL"),
    ("op", "VARCHAR(8) NULL"),
    ("load_label", "VARCHAR(128) NOT NULL"),
    ("reason", "STRING NOT NULL"),
    ("row_json", "STRING NOT NULL"),
];

/// A body line Doris refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Index of the line in the body.
    pub line: usize,
    /// Doris's reason.
    pub reason: String,
}

/// The lines of a JSON-lines body (without their `\n`).
pub fn body_lines(body: &[u8]) -> Vec<&[u8]> {
    body.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

/// How Doris quotes a JSON value read into a source column: strings as they are, numbers as
/// written, booleans as 1/0, NULL (or a missing key) as `NULL` or, in older versions, `\N`.
fn quoted(value: Option<&Value>, null: &str) -> String {
    match value {
        None | Some(Value::Null) => null.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => if *b { "1" } else { "0" }.to_owned(),
        Some(other) => other.to_string(),
    }
}

/// Which lines of `lines` (JSON objects) Doris refused, from its error log `log` (every refused
/// row, `complete` when nothing was left out) and the number it reported (`filtered`);
/// `file_columns` are the load's source columns in order (the table's columns, then the hidden
/// delete sign in upsert mode). Pure.
///
/// # Errors
/// Why the refused rows cannot be told apart for certain; the caller then stops.
pub fn identify(
    lines: &[&[u8]],
    file_columns: &[String],
    log: &[ErrorLogLine],
    complete: bool,
    filtered: u64,
) -> Result<Vec<Refused>, String> {
    if !complete || log.len() as u64 != filtered {
        return Err(format!(
            "Doris's error log lists {} of the {filtered} refused rows",
            log.len()
        ));
    }
    // Each line as Doris would quote it (both spellings of NULL) -> the lines quoted so.
    let mut quotes: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Ok(Value::Object(row)) = serde_json::from_slice::<Value>(line) else {
            return Err(format!(
                "line {} of the body is not a JSON object (the dead-letter table needs JSON-lines bodies)",
                i + 1
            ));
        };
        let mut seen = Vec::new();
        for null in ["NULL", "\\N"] {
            let quote = file_columns
                .iter()
                .map(|c| quoted(row.get(c), null))
                .collect::<Vec<_>>()
                .join(" ");
            if !seen.contains(&quote) {
                quotes.entry(quote.clone()).or_default().push(i);
                seen.push(quote);
            }
        }
    }
    let mut by_quote: Vec<(&str, Vec<&ErrorLogLine>)> = Vec::new();
    for entry in log {
        let src = match entry.src.as_deref() {
            Some(src) if !src.is_empty() => src,
            _ => {
                return Err(format!(
                    "Doris does not quote the row it refused for \"{}\" (a check of the table's \
                     own, such as a text longer than its column, names no row)",
                    entry.reason
                ));
            }
        };
        match by_quote.iter_mut().find(|(q, _)| *q == src) {
            Some((_, entries)) => entries.push(entry),
            None => by_quote.push((src, vec![entry])),
        }
    }
    let mut refused = Vec::new();
    for (quote, entries) in by_quote {
        let candidates = quotes.get(quote).map(Vec::as_slice).unwrap_or_default();
        let alike = candidates.iter().all(|&i| lines[i] == lines[candidates[0]]);
        if candidates.len() != entries.len() || !alike {
            return Err(format!(
                "Doris refused {} row(s) quoted [{quote}], which match {} line(s) of the body{}",
                entries.len(),
                candidates.len(),
                if alike { "" } else { " that differ" }
            ));
        }
        for (&line, entry) in candidates.iter().zip(entries) {
            refused.push(Refused {
                line,
                reason: entry.reason.clone(),
            });
        }
    }
    refused.sort_by_key(|r| r.line);
    Ok(refused)
}

/// The load's source columns: the table's, then the delete sign (`hidden_columns` in upsert
/// mode).
pub fn file_columns(table: &[TableColumn], upsert: bool) -> Vec<String> {
    let mut columns: Vec<String> = table.iter().map(|c| c.name.clone()).collect();
    if upsert {
        columns.push(DELETE_SIGN_COLUMN.to_owned());
    }
    columns
}

/// Whether a body line is a delete (upsert mode, delete sign 1).
pub fn is_delete(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| v.get(DELETE_SIGN_COLUMN).and_then(Value::as_i64))
        == Some(1)
}

/// Where the refused rows came from and when they were refused.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The source table.
    pub source: &'a TableRef,
    /// The sink table.
    pub sink: &'a TableRef,
    /// The label of the load that refused them.
    pub label: &'a str,
    /// `yyyy-MM-dd HH:mm:ss.ffffff`, UTC.
    pub at: &'a str,
}

/// The dead-letter load body: one JSON line per refused line, with its reason, where it came
/// from (`origins`, one per line; else the change columns the row carries), and the row as sent.
/// Pure.
pub fn body(
    lines: &[&[u8]],
    origins: &[Option<RowOrigin>],
    refused: &[Refused],
    origin: Origin<'_>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for r in refused {
        let line = lines[r.line];
        let row: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
        let field = |k: &str| row.get(k).cloned().unwrap_or(Value::Null);
        let (tso, lsn, op) = match origins.get(r.line).copied().flatten() {
            Some(o) => (
                Value::from(o.tso),
                Value::from(o.lsn),
                changelog_op_text(o.op).map_or(Value::Null, Value::from),
            ),
            None => (field(TSO_COLUMN), field(LSN_COLUMN), field(OP_COLUMN)),
        };
        let record = serde_json::json!({
            "rejected_at": origin.at,
            "source_table": origin.source.to_string(),
            "sink_table": origin.sink.to_string(),
            "tso": tso,
            "lsn": lsn,
            "op": op,
            "load_label": origin.label,
            "reason": r.reason,
            "row_json": String::from_utf8_lossy(line),
        });
        out.extend_from_slice(record.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The body without the refused lines.
pub fn rest(lines: &[&[u8]], refused: &[Refused]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !refused.iter().any(|r| r.line == i) {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out
}

/// `CREATE TABLE IF NOT EXISTS` for the dead-letter table: a DUPLICATE KEY table (every refused
/// row kept), with the sink's `createTable.properties`.
pub fn create_ddl(
    table: &TableRef,
    properties: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut ddl = format!("CREATE TABLE IF NOT EXISTS {} (\n", table.quoted());
    let defs: Vec<String> = COLUMNS
        .iter()
        .map(|(name, ty)| format!("  {} {ty}", quote_ident(name)))
        .collect();
    ddl.push_str(&defs.join(",\n"));
    let _ = write!(
        ddl,
        "\n) ENGINE=OLAP\nDUPLICATE KEY({}, {})\nDISTRIBUTED BY HASH({}) BUCKETS AUTO",
        quote_ident("rejected_at"),
        quote_ident("source_table"),
        quote_ident("source_table")
    );
    if !properties.is_empty() {
        let props: Vec<String> = properties
            .iter()
            .map(|(k, v)| format!("'{}' = '{}'", k.replace('\'', "''"), v.replace('\'', "''")))
            .collect();
        let _ = write!(ddl, "\nPROPERTIES (\n{}\n)", props.join(",\n"));
    }
    ddl
}

/// What makes an existing table unusable as the dead-letter table (each with what to do); empty
/// when it fits. Pure.
pub fn problems(table: &TableRef, existing: &[TableColumn]) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, ty) in COLUMNS {
        match existing.iter().find(|c| c.name.eq_ignore_ascii_case(name)) {
            None => problems.push(format!(
                "the dead-letter table {table} has no column {name}; add it ({name} {ty}) or drop the table so that it is created"
            )),
            Some(c) if ty.ends_with("NULL") && !ty.ends_with("NOT NULL") && !c.nullable => {
                problems.push(format!(
                    "column {name} of the dead-letter table {table} is NOT NULL, but rows of upsert sinks have none; make it nullable"
                ));
            }
            Some(_) => {}
        }
    }
    for c in existing {
        let ours = COLUMNS.iter().any(|(n, _)| c.name.eq_ignore_ascii_case(n));
        if !ours && !c.nullable {
            problems.push(format!(
                "column {} of the dead-letter table {table} is NOT NULL and not written by dcs; make it nullable or drop it",
                c.name
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(entries: &[(&str, &str)]) -> Vec<ErrorLogLine> {
        entries
            .iter()
            .map(|(reason, src)| ErrorLogLine {
                reason: (*reason).into(),
                src: Some((*src).into()),
            })
            .collect()
    }

    fn columns() -> Vec<String> {
        ["id", "name", DELETE_SIGN_COLUMN]
            .map(String::from)
            .to_vec()
    }

    const BODY: &[u8] = b"{\"id\":1,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":0}\n\
        {\"id\":2,\"name\":null,\"__DORIS_DELETE_SIGN__\":0}\n\
        {\"id\":3,\"name\":\"a b\",\"__DORIS_DELETE_SIGN__\":1}\n";

    #[test]
    fn the_refused_lines_are_those_doris_quotes() {
        let lines = body_lines(BODY);
        let refused = identify(
            &lines,
            &columns(),
            &log(&[("null value", "2 NULL 0"), ("too long", "3 a b 1")]),
            true,
            2,
        )
        .unwrap();
        assert_eq!(
            refused,
            [
                Refused {
                    line: 1,
                    reason: "null value".into()
                },
                Refused {
                    line: 2,
                    reason: "too long".into()
                }
            ]
        );
        assert_eq!(
            rest(&lines, &refused),
            b"{\"id\":1,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":0}\n"
        );
        assert!(is_delete(lines[2]) && !is_delete(lines[1]));
        // An older Doris quotes NULL as \N.
        let old = identify(&lines, &columns(), &log(&[("x", "2 \\N 0")]), true, 1).unwrap();
        assert_eq!(old[0].line, 1);
    }

    #[test]
    fn rows_that_cannot_be_told_apart_for_certain_are_never_guessed() {
        let lines = body_lines(BODY);
        let err = |log: &[ErrorLogLine], complete: bool, filtered: u64| {
            identify(&lines, &columns(), log, complete, filtered).unwrap_err()
        };
        assert_eq!(
            err(&log(&[("x", "2 NULL 0")]), false, 60),
            "Doris's error log lists 1 of the 60 refused rows"
        );
        assert_eq!(
            err(&log(&[("x", "2 NULL 0")]), true, 2),
            "Doris's error log lists 1 of the 2 refused rows"
        );
        assert_eq!(
            err(&log(&[("x", "9 NULL 0")]), true, 1),
            "Doris refused 1 row(s) quoted [9 NULL 0], which match 0 line(s) of the body"
        );
        // "a b" + "1" and "a" + "b 1" are quoted alike.
        let twins = b"{\"id\":3,\"name\":\"a b\",\"__DORIS_DELETE_SIGN__\":1}\n\
            {\"id\":3,\"name\":\"a\",\"__DORIS_DELETE_SIGN__\":\"b 1\"}\n";
        let twins = body_lines(twins);
        assert_eq!(
            identify(&twins, &columns(), &log(&[("x", "3 a b 1")]), true, 1).unwrap_err(),
            "Doris refused 1 row(s) quoted [3 a b 1], which match 2 line(s) of the body that differ"
        );
        // Two identical rows are refused together or not at all.
        let same = body_lines(b"{\"id\":2}\n{\"id\":2}\n");
        let one = ["id".to_owned()];
        assert!(identify(&same, &one, &log(&[("x", "2")]), true, 1).is_err());
        assert_eq!(
            identify(&same, &one, &log(&[("x", "2"), ("x", "2")]), true, 2)
                .unwrap()
                .len(),
            2
        );
        let unquoted = [ErrorLogLine {
            reason: "too long".into(),
            src: Some(String::new()),
        }];
        assert_eq!(
            err(&unquoted, true, 1),
            "Doris does not quote the row it refused for \"too long\" (a check of the table's own, \
             such as a text longer than its column, names no row)"
        );
        let csv = body_lines(b"1,a\n");
        assert_eq!(
            identify(&csv, &one, &log(&[("x", "1 a")]), true, 1).unwrap_err(),
            "line 1 of the body is not a JSON object (the dead-letter table needs JSON-lines bodies)"
        );
    }

    #[test]
    fn a_dead_letter_row_holds_its_reason_position_and_the_row_as_sent() {
        let line: &[u8] =
            b"{\"id\":2,\"v\":\"x\",\"dcs_op\":\"+I\",\"dcs_tso\":1800,\"dcs_lsn\":7}";
        let (source, sink) = ("s.t".parse().unwrap(), "d.t".parse().unwrap());
        let body = body(
            &[line],
            &[],
            &[Refused {
                line: 0,
                reason: "too long".into(),
            }],
            Origin {
                source: &source,
                sink: &sink,
                label: "dcs-c-3-1",
                at: "2026-12-07 19:00:00.000000",
            },
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "rejected_at": "2026-12-07 19:00:00.000000", "source_table": "s.t",
                "sink_table": "d.t", "tso": 1800, "lsn": 7, "op": "+I",
                "load_label": "dcs-c-3-1", "reason": "too long",
                "row_json": String::from_utf8_lossy(line),
            })
        );
    }

    #[test]
    fn an_existing_table_is_checked_naming_what_is_wrong() {
        let table: TableRef = "d.t_rejected".parse().unwrap();
        let col = |name: &str, nullable: bool| TableColumn {
            name: name.into(),
            column_type: "varchar(10)".into(),
            nullable,
            is_key: false,
            default: None,
        };
        let mut fits: Vec<TableColumn> = COLUMNS
            .iter()
            .map(|(n, ty)| col(n, !ty.ends_with("NOT NULL")))
            .collect();
        assert!(problems(&table, &fits).is_empty());
        fits[3].nullable = false;
        fits.remove(8);
        fits.push(col("extra", false));
        assert_eq!(
            problems(&table, &fits),
            [
                "column tso of the dead-letter table d.t_rejected is NOT NULL, but rows of upsert sinks have none; make it nullable",
                "the dead-letter table d.t_rejected has no column row_json; add it (row_json STRING NOT NULL) or drop the table so that it is created",
                "column extra of the dead-letter table d.t_rejected is NOT NULL and not written by dcs; make it nullable or drop it",
            ]
        );
    }
}
