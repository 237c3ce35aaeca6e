//! Stream Load bodies (CSV and JSON) → [`RowWrite`]s. Pure: no I/O, never panics on input.
//!
//! Rules (docs/doris-protocols.md §3.5, §4): CSV fields split by the column separator, `\N` is
//! NULL; JSON strings go through the column's text parser, `true`/`false` become `1`/`0`, numbers,
//! objects and arrays pass as their raw JSON text, `null` is NULL, a missing key is NULL/default. A
//! cell that does not convert makes the row filtered under `strict_mode`; without it, it becomes
//! NULL (and is filtered only when the column is NOT NULL), as Doris does.

use crate::engine::{ColumnDef, KeysType, RowWrite};
use crate::types::{DorisType, Value};

use super::stream_load::{DELETE_SIGN, Format, LoadOptions, MergeType, unquote_ident};

/// At most this many refused rows are written to the error log, then one `TOO MUCH ERROR` line (D
/// be `runtime/runtime_state.cpp`: `MAX_ERROR_NUM`).
pub const MAX_ERROR_ROWS: usize = 50;
/// A log line longer than this is cut and marked `error log is too long` (the BE's
/// `load_error_log_limit_bytes`; smaller here, so the emulator keeps little).
pub const MAX_ERROR_LINE_BYTES: usize = 64 << 10;
/// Deepest JSON nesting accepted (deeper documents are a row error, not a stack overflow).
pub const MAX_JSON_DEPTH: usize = 128;

/// Where a body field goes.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    /// A table column (index).
    Column(usize),
    /// `__DORIS_DELETE_SIGN__`.
    DeleteSign,
}

/// The MERGE `delete` condition: `<field> = <literal>` (or `!=`).
#[derive(Debug, Clone, PartialEq)]
struct DeleteCond {
    field: usize,
    literal: String,
    negate: bool,
}

/// How a body maps onto the table, resolved once per load.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    columns: Vec<ColumnDef>,
    /// Body fields (CSV order / JSON keys) and where they go.
    fields: Vec<(String, Target)>,
    /// `jsonpaths`, one per field.
    jsonpaths: Option<Vec<Vec<String>>>,
    json_root: Option<Vec<String>>,
    partial: bool,
    merge: MergeType,
    delete_cond: Option<DeleteCond>,
    strict: bool,
    format: Format,
    column_separator: Vec<u8>,
    line_delimiter: Vec<u8>,
    read_json_by_line: bool,
    strip_outer_array: bool,
}

/// What parsing a body produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BodyOutcome {
    /// Rows to write, in body order.
    pub writes: Vec<RowWrite>,
    /// Rows seen (`NumberTotalRows`).
    pub total: u64,
    /// Rows filtered (`NumberFilteredRows`).
    pub filtered: u64,
    /// Rows dropped by a `where` (always 0: `where` is not supported).
    pub unselected: u64,
    /// Error-log lines (`Reason: ... src line [...]; `), at most [`MAX_ERROR_ROWS`], then one
    /// `TOO MUCH ERROR! …` line.
    pub errors: Vec<String>,
}

fn err2(detail: impl AsRef<str>) -> String {
    format!("errCode = 2, detailMessage = {}", detail.as_ref())
}

fn parse_json_path(p: &str) -> Result<Vec<String>, String> {
    let t = p.trim();
    let rest = t
        .strip_prefix('$')
        .ok_or_else(|| format!("Invalid json path: {p}"))?;
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    let rest = rest
        .strip_prefix('.')
        .ok_or_else(|| format!("Invalid json path: {p}"))?;
    let parts: Vec<String> = rest
        .split('.')
        .map(|s| s.trim_matches('"').to_string())
        .collect();
    if parts
        .iter()
        .any(|s| s.is_empty() || s.contains('[') || s.contains('*'))
    {
        return Err(format!(
            "json path {p} is not supported by the emulator (only $.a.b paths are)"
        ));
    }
    Ok(parts)
}

fn find_column(columns: &[ColumnDef], name: &str) -> Option<usize> {
    columns.iter().position(|c| c.name == name).or_else(|| {
        columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name))
    })
}

impl LoadPlan {
    /// Resolve the load's columns against the table. `Err` is the load's `Message`.
    pub fn new(
        db: &str,
        table: &str,
        columns: &[ColumnDef],
        keys_type: KeysType,
        opts: &LoadOptions,
    ) -> Result<LoadPlan, String> {
        let unique = keys_type == KeysType::Unique;
        let mut fields: Vec<(String, Target)> = Vec::new();
        match &opts.columns {
            Some(list) => {
                for item in list {
                    if item.contains('=') {
                        return Err(format!(
                            "column expressions in the columns header ({item}) are not supported by the emulator"
                        ));
                    }
                    let name = unquote_ident(item);
                    if name.is_empty() {
                        return Err(err2("Column name is empty in the columns header"));
                    }
                    if name.eq_ignore_ascii_case(DELETE_SIGN) && unique {
                        fields.push((DELETE_SIGN.to_string(), Target::DeleteSign));
                        continue;
                    }
                    match find_column(columns, &name) {
                        Some(i) => fields.push((columns[i].name.clone(), Target::Column(i))),
                        None => {
                            return Err(err2(format!("Unknown column '{name}' in '{db}.{table}'")));
                        }
                    }
                }
            }
            None => {
                for (i, c) in columns.iter().enumerate() {
                    fields.push((c.name.clone(), Target::Column(i)));
                }
            }
        }
        if opts.columns.is_none()
            || opts
                .hidden_columns
                .iter()
                .any(|h| h.eq_ignore_ascii_case(DELETE_SIGN))
        {
            for h in &opts.hidden_columns {
                if h.eq_ignore_ascii_case(DELETE_SIGN)
                    && !fields.iter().any(|(_, t)| *t == Target::DeleteSign)
                {
                    if !unique {
                        return Err(err2(format!(
                            "Unknown column '{DELETE_SIGN}' in '{db}.{table}'"
                        )));
                    }
                    fields.push((DELETE_SIGN.to_string(), Target::DeleteSign));
                }
            }
        }
        // Duplicate targets.
        for (i, (n, t)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|(_, u)| u == t) {
                return Err(err2(format!("Duplicate column: {n}")));
            }
        }
        if !matches!(opts.merge_type, MergeType::Append) && !unique {
            return Err(err2(
                "load by MERGE or DELETE is only supported in unique tables.",
            ));
        }
        if opts.partial_columns {
            if !unique {
                return Err(err2(
                    "Partial update is only allowed on unique table with merge-on-write enabled.",
                ));
            }
            let missing: Vec<&str> = columns
                .iter()
                .enumerate()
                .filter(|(i, c)| c.is_key && !fields.iter().any(|(_, t)| *t == Target::Column(*i)))
                .map(|(_, c)| c.name.as_str())
                .collect();
            if !missing.is_empty() {
                return Err(err2(format!(
                    "Partial update should include all key columns, missing: {}",
                    missing.join(", ")
                )));
            }
        } else {
            for (i, c) in columns.iter().enumerate() {
                let mapped = fields.iter().any(|(_, t)| *t == Target::Column(i));
                if !mapped && !c.nullable && c.default.is_none() {
                    return Err(err2(format!(
                        "Column has no default value. column: {}",
                        c.name
                    )));
                }
            }
        }
        let delete_cond = match &opts.merge_type {
            MergeType::Merge(cond) => Some(parse_delete_cond(cond, &fields)?),
            _ => None,
        };
        let jsonpaths = match &opts.jsonpaths {
            None => None,
            Some(paths) => {
                if paths.len() != fields.len() {
                    return Err(format!(
                        "jsonpaths has {} paths but the load has {} columns",
                        paths.len(),
                        fields.len()
                    ));
                }
                Some(
                    paths
                        .iter()
                        .map(|p| parse_json_path(p))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
        };
        let json_root = opts.json_root.as_deref().map(parse_json_path).transpose()?;
        Ok(LoadPlan {
            columns: columns.to_vec(),
            fields,
            jsonpaths,
            json_root,
            partial: opts.partial_columns,
            merge: opts.merge_type.clone(),
            delete_cond,
            strict: opts.strict_mode,
            format: opts.format,
            column_separator: opts.column_separator.clone(),
            line_delimiter: opts.line_delimiter.clone(),
            read_json_by_line: opts.read_json_by_line,
            strip_outer_array: opts.strip_outer_array,
        })
    }

    /// Parse a whole body.
    pub fn parse(&self, body: &[u8]) -> BodyOutcome {
        let mut out = BodyOutcome::default();
        match self.format {
            Format::Csv { skip_lines } => {
                for line in split_bytes(body, &self.line_delimiter).skip(skip_lines) {
                    if line.is_empty() {
                        continue;
                    }
                    out.total += 1;
                    let res = self.csv_row(line);
                    self.record(&mut out, res, line);
                }
            }
            Format::Json => {
                if self.read_json_by_line {
                    for line in split_bytes(body, &self.line_delimiter) {
                        if line.iter().all(|b| b.is_ascii_whitespace()) {
                            continue;
                        }
                        self.json_doc(line, &mut out);
                    }
                } else if !body.iter().all(|b| b.is_ascii_whitespace()) {
                    self.json_doc(body, &mut out);
                }
            }
        }
        out
    }

    fn record(&self, out: &mut BodyOutcome, res: Result<RowWrite, Filtered>, src: &[u8]) {
        match res {
            Ok(w) => out.writes.push(w),
            Err(Filtered { reason, line }) => {
                out.filtered += 1;
                if out.errors.len() < MAX_ERROR_ROWS {
                    let line = line.unwrap_or_else(|| String::from_utf8_lossy(src).into_owned());
                    let mut entry = format!("Reason: {reason}. src line [{line}]; ");
                    if entry.len() > MAX_ERROR_LINE_BYTES {
                        let mut cut = MAX_ERROR_LINE_BYTES;
                        while !entry.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        entry.truncate(cut);
                        entry.push_str("error log is too long");
                    }
                    out.errors.push(entry);
                } else if out.errors.len() == MAX_ERROR_ROWS {
                    out.errors.push(format!(
                        "TOO MUCH ERROR! already reach {MAX_ERROR_ROWS}. show no more next error."
                    ));
                }
            }
        }
    }

    fn csv_row(&self, line: &[u8]) -> Result<RowWrite, Filtered> {
        let parts: Vec<&[u8]> = split_bytes(line, &self.column_separator).collect();
        if parts.len() != self.fields.len() {
            let cmp = if parts.len() < self.fields.len() {
                "less"
            } else {
                "more"
            };
            return Err(Filtered::reader(format!(
                "actual column number in csv file is {cmp} than schema column number.actual number: {}, schema column number: {}; line delimiter: [{}], column separator: [{}]",
                parts.len(),
                self.fields.len(),
                show_sep(&self.line_delimiter),
                show_sep(&self.column_separator)
            )));
        }
        let mut cells = Vec::with_capacity(parts.len());
        for p in parts {
            if p == b"\\N" {
                cells.push(Cell::Null);
            } else {
                match std::str::from_utf8(p) {
                    Ok(s) => cells.push(Cell::Text(s.to_string())),
                    Err(_) => return Err(Filtered::reader("invalid utf8 data in csv")),
                }
            }
        }
        self.build_row(cells)
    }

    fn json_doc(&self, text: &[u8], out: &mut BodyOutcome) {
        let doc = match std::str::from_utf8(text) {
            Err(_) => Err("invalid utf8 data in json".to_string()),
            Ok(s) => Json::parse(s).map(|j| (s, j)),
        };
        let (src, mut doc) = match doc {
            Ok(d) => d,
            Err(e) => {
                out.total += 1;
                self.record(
                    out,
                    Err(Filtered::reader(format!(
                        "Parse json data for JsonDoc failed. error info: {e}"
                    ))),
                    text,
                );
                return;
            }
        };
        if let Some(root) = &self.json_root {
            match doc.get_path(root) {
                Some(j) => doc = j.clone(),
                None => {
                    out.total += 1;
                    self.record(out, Err(Filtered::reader("JSON Root not found.")), text);
                    return;
                }
            }
        }
        match &doc.kind {
            JKind::Array(items) => {
                if !self.strip_outer_array {
                    out.total += 1;
                    self.record(
                        out,
                        Err(Filtered::reader(
                            "JSON data is array-object, `strip_outer_array` must be TRUE.",
                        )),
                        text,
                    );
                    return;
                }
                for item in items {
                    out.total += 1;
                    let res = self.json_row(src, item);
                    let raw = src.as_bytes().get(item.start..item.end).unwrap_or(b"");
                    self.record(out, res, raw);
                }
            }
            JKind::Object(_) => {
                out.total += 1;
                let res = if self.strip_outer_array {
                    Err(Filtered::reader(
                        "JSON data is not an array-object, `strip_outer_array` must be FALSE.",
                    ))
                } else {
                    self.json_row(src, &doc)
                };
                self.record(out, res, text);
            }
            _ => {
                out.total += 1;
                self.record(
                    out,
                    Err(Filtered::reader("Expected JSON object or array")),
                    text,
                );
            }
        }
    }

    fn json_row(&self, src: &str, obj: &Json) -> Result<RowWrite, Filtered> {
        if !matches!(obj.kind, JKind::Object(_)) {
            return Err(Filtered::reader("Expected JSON object"));
        }
        let mut cells = Vec::with_capacity(self.fields.len());
        for (i, (name, _)) in self.fields.iter().enumerate() {
            let v = match &self.jsonpaths {
                Some(paths) => obj.get_path(&paths[i]),
                None => obj.get_key(name),
            };
            cells.push(match v {
                None => Cell::Missing,
                Some(j) => match &j.kind {
                    JKind::Null => Cell::Null,
                    JKind::Str(s) => Cell::Text(s.clone()),
                    JKind::Bool(b) => Cell::Json {
                        raw: if *b { "true" } else { "false" }.into(),
                        text: if *b { "1" } else { "0" }.into(),
                    },
                    _ => {
                        let raw = src.get(j.start..j.end).unwrap_or("").to_string();
                        Cell::Json {
                            text: raw.clone(),
                            raw,
                        }
                    }
                },
            });
        }
        self.build_row(cells)
    }

    fn convert(&self, col: &ColumnDef, cell: &Cell) -> Result<Value, Refusal> {
        let text = match cell {
            Cell::Missing => return Ok(col.default.clone().unwrap_or(Value::Null)),
            Cell::Null => return Ok(Value::Null),
            Cell::Text(s) => s.as_str(),
            Cell::Json { raw, text } => {
                if col.ty == DorisType::Json {
                    raw.as_str()
                } else {
                    text.as_str()
                }
            }
        };
        match Value::parse_text(&col.ty, text) {
            Ok(v) => Ok(v),
            Err(e) => {
                let too_long = matches!(col.ty, DorisType::Char(_) | DorisType::Varchar(_));
                if too_long {
                    Err(Refusal::Table(format!("column({}) {e}", col.name)))
                } else if !col.nullable && !self.strict {
                    Err(Refusal::Scanner(format!("column({}) {e}", col.name)))
                } else if self.strict {
                    // The scanner's strict check (D be `vec/exec/scan/vfile_scanner.cpp`): a
                    // non-NULL value the cast turned into NULL.
                    Err(Refusal::Scanner(format!(
                        "column({}) value is incorrect while strict mode is true, src value is {text}",
                        col.name
                    )))
                } else {
                    Ok(Value::Null)
                }
            }
        }
    }

    /// The row of `cells`, or why it is filtered with the line Doris quotes for it: the load's
    /// source columns as text, space-separated, NULL as `NULL` (D be `vec/core/block.cpp`
    /// `Block::dump_one_line` over the source block, called by `vfile_scanner.cpp` and the tablet
    /// sink's block convertor; `DataTypeNullable::to_string`), not the body line as sent.
    fn build_row(&self, cells: Vec<Cell>) -> Result<RowWrite, Filtered> {
        self.build_row_values(&cells)
            .map_err(|refusal| match refusal {
                Refusal::Scanner(reason) => Filtered {
                    reason,
                    line: Some(
                        cells
                            .iter()
                            .map(|c| match c {
                                Cell::Missing | Cell::Null => "NULL",
                                Cell::Text(t) | Cell::Json { text: t, .. } => t.as_str(),
                            })
                            .collect::<Vec<_>>()
                            .join(" "),
                    ),
                },
                // The table's own checks quote no row (D be `vec/sink/vtablet_block_convertor.cpp`
                // `_validate_column`: `append_error_msg_to_file([]() { return ""; }, …)`).
                Refusal::Table(reason) => Filtered {
                    reason,
                    line: Some(String::new()),
                },
            })
    }

    fn build_row_values(&self, cells: &[Cell]) -> Result<RowWrite, Refusal> {
        // Delete decision.
        let mut delete = matches!(self.merge, MergeType::Delete);
        for (i, (_, t)) in self.fields.iter().enumerate() {
            if *t == Target::DeleteSign && matches!(self.merge, MergeType::Append) {
                delete = match &cells[i] {
                    Cell::Missing | Cell::Null => false,
                    Cell::Text(s) | Cell::Json { text: s, .. } => match s.trim().parse::<i64>() {
                        Ok(v) => v != 0,
                        Err(_) => {
                            return Err(Refusal::Scanner(format!(
                                "column({DELETE_SIGN}) '{s}' is not a valid TINYINT"
                            )));
                        }
                    },
                };
            }
        }
        if let Some(cond) = &self.delete_cond {
            let v = match &cells[cond.field] {
                Cell::Text(s) | Cell::Json { text: s, .. } => Some(s.as_str()),
                _ => None,
            };
            let eq = v.is_some_and(|v| cond_eq(v, &cond.literal));
            delete = if cond.negate { v.is_some() && !eq } else { eq };
        }
        let n = self.columns.len();
        let mut mapped: Vec<Option<usize>> = vec![None; n];
        for (i, (_, t)) in self.fields.iter().enumerate() {
            if let Target::Column(c) = t {
                mapped[*c] = Some(i);
            }
        }
        if self.partial && !delete {
            let mut idx = Vec::new();
            let mut vals = Vec::new();
            for (c, col) in self.columns.iter().enumerate() {
                if let Some(f) = mapped[c] {
                    let v = self.convert(col, &cells[f])?;
                    check_not_null(col, &cells[f], &v)?;
                    idx.push(c);
                    vals.push(v);
                }
            }
            return Ok(RowWrite::Partial {
                columns: idx,
                values: vals,
            });
        }
        let mut row = Vec::with_capacity(n);
        for (c, col) in self.columns.iter().enumerate() {
            let (v, cell) = match mapped[c] {
                Some(f) => (self.convert(col, &cells[f])?, &cells[f]),
                None => (col.default.clone().unwrap_or(Value::Null), &Cell::Missing),
            };
            if !delete || col.is_key {
                check_not_null(col, cell, &v)?;
            }
            row.push(v);
        }
        Ok(if delete {
            RowWrite::Delete(row)
        } else {
            RowWrite::Upsert(row)
        })
    }
}

/// A NULL for a NOT NULL column: the scanner filters a NULL read from the body (D be
/// `vec/exec/scan/vfile_scanner.cpp` `_convert_to_output_block`), the table's own check a NULL
/// no body value gave (a missing column without a default; `vtablet_block_convertor.cpp`).
fn check_not_null(col: &ColumnDef, cell: &Cell, v: &Value) -> Result<(), Refusal> {
    if !v.is_null() || col.nullable {
        Ok(())
    } else if matches!(cell, Cell::Null) {
        Err(Refusal::Scanner(format!(
            "column({}) values is null while columns is not nullable",
            col.name
        )))
    } else {
        Err(Refusal::Table(format!(
            "null value for not null column, column={}, type={}",
            col.name,
            col.ty.display_name()
        )))
    }
}

/// Why a row is filtered, by who filters it (which decides what the error log quotes).
enum Refusal {
    /// The scanner, converting the body's values: the row is quoted.
    Scanner(String),
    /// The table's own checks (a text too long, a NULL for a NOT NULL column no value gave): no
    /// row is quoted.
    Table(String),
}

fn cond_eq(value: &str, literal: &str) -> bool {
    if value == literal {
        return true;
    }
    match (value.trim().parse::<f64>(), literal.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn parse_delete_cond(cond: &str, fields: &[(String, Target)]) -> Result<DeleteCond, String> {
    let unsupported = || {
        format!(
            "delete condition `{cond}` is not supported by the emulator (only `<column> = <literal>` and `!=`)"
        )
    };
    let (lhs, rhs, negate) = if let Some((l, r)) = cond.split_once("!=") {
        (l, r, true)
    } else if let Some((l, r)) = cond.split_once("<>") {
        (l, r, true)
    } else if let Some((l, r)) = cond.split_once('=') {
        (l, r, false)
    } else {
        return Err(unsupported());
    };
    let name = unquote_ident(lhs);
    let field = fields
        .iter()
        .position(|(n, _)| n.eq_ignore_ascii_case(&name))
        .ok_or_else(|| err2(format!("Unknown column '{name}' in delete condition")))?;
    let r = rhs.trim();
    let literal = if r.len() >= 2
        && ((r.starts_with('\'') && r.ends_with('\'')) || (r.starts_with('"') && r.ends_with('"')))
    {
        r[1..r.len() - 1].to_string()
    } else if r.parse::<f64>().is_ok() {
        r.to_string()
    } else {
        return Err(unsupported());
    };
    Ok(DeleteCond {
        field,
        literal,
        negate,
    })
}

fn show_sep(s: &[u8]) -> String {
    String::from_utf8_lossy(s)
        .replace('\n', "\\n")
        .replace('\t', "\\t")
        .replace('\r', "\\r")
}

/// One body field before conversion.
#[derive(Debug, Clone)]
/// Why a row is filtered, and the line the error log quotes for it.
struct Filtered {
    reason: String,
    /// `None`: the reader's own error, which quotes the body text as read.
    line: Option<String>,
}

impl Filtered {
    /// A reader's error (a line or document it could not split into values).
    fn reader(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            line: None,
        }
    }
}

enum Cell {
    /// Not present (JSON key missing).
    Missing,
    /// NULL (`\N` or JSON `null`).
    Null,
    /// Text (CSV field or JSON string).
    Text(String),
    /// A non-string JSON value: `raw` JSON text (for JSON columns) and `text` for other columns.
    Json { raw: String, text: String },
}

/// Split `data` on every occurrence of `delim` (non-empty); a trailing delimiter yields no extra
/// empty piece.
pub fn split_bytes<'a>(data: &'a [u8], delim: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut pos = 0usize;
    let mut done = data.is_empty();
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        if delim.is_empty() {
            done = true;
            return Some(&data[pos..]);
        }
        let rest = &data[pos..];
        match find(rest, delim) {
            Some(i) => {
                let piece = &rest[..i];
                pos += i + delim.len();
                if pos >= data.len() {
                    done = true;
                }
                Some(piece)
            }
            None => {
                done = true;
                Some(rest)
            }
        }
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.len() == 1 {
        return hay.iter().position(|b| *b == needle[0]);
    }
    if needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

// ------------------------------------------------------------------------------------------------
// A small JSON parser that keeps each value's source span, so numbers, objects and arrays reach
// the column parsers as their exact text (serde_json would round numbers through f64).
// ------------------------------------------------------------------------------------------------

/// A parsed JSON value and its byte span in the source.
#[derive(Debug, Clone, PartialEq)]
pub struct Json {
    /// Start byte.
    pub start: usize,
    /// End byte (exclusive).
    pub end: usize,
    /// The value.
    pub kind: JKind,
}

/// JSON value kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum JKind {
    /// null
    Null,
    /// true / false
    Bool(bool),
    /// A number (its text is the span).
    Num,
    /// A string, unescaped.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, keys in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parse one JSON document (surrounding whitespace allowed).
    pub fn parse(s: &str) -> Result<Json, String> {
        let mut p = JParser {
            b: s.as_bytes(),
            s,
            i: 0,
        };
        p.ws();
        let v = p.value(0)?;
        p.ws();
        if p.i != p.b.len() {
            return Err(format!(
                "The document root must not be followed by other values. offset {}",
                p.i
            ));
        }
        Ok(v)
    }

    /// Value of key `k` (exact match first, then case-insensitive).
    pub fn get_key(&self, k: &str) -> Option<&Json> {
        match &self.kind {
            JKind::Object(kv) => kv
                .iter()
                .find(|(n, _)| n == k)
                .or_else(|| kv.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// Follow a `$.a.b` path (already split).
    pub fn get_path(&self, path: &[String]) -> Option<&Json> {
        let mut cur = self;
        for p in path {
            cur = match &cur.kind {
                JKind::Object(kv) => kv.iter().find(|(n, _)| n == p).map(|(_, v)| v)?,
                _ => return None,
            };
        }
        Some(cur)
    }
}

struct JParser<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
}

impl JParser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at offset {}", self.i))
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_JSON_DEPTH {
            return self.err("Nesting too deep");
        }
        let start = self.i;
        let kind = match self.b.get(self.i) {
            None => return self.err("Unexpected end of input"),
            Some(b'{') => {
                self.i += 1;
                let mut kv = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        if self.b.get(self.i) != Some(&b'"') {
                            return self.err("Missing a name for object member");
                        }
                        let k = self.string()?;
                        self.ws();
                        if self.b.get(self.i) != Some(&b':') {
                            return self.err("Missing a colon after a name of object member");
                        }
                        self.i += 1;
                        self.ws();
                        let v = self.value(depth + 1)?;
                        kv.push((k, v));
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("Missing a comma or '}' after an object member"),
                        }
                    }
                }
                JKind::Object(kv)
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        items.push(self.value(depth + 1)?);
                        self.ws();
                        match self.b.get(self.i) {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return self.err("Missing a comma or ']' after an array element"),
                        }
                    }
                }
                JKind::Array(items)
            }
            Some(b'"') => JKind::Str(self.string()?),
            Some(b't') => self.lit("true", JKind::Bool(true))?,
            Some(b'f') => self.lit("false", JKind::Bool(false))?,
            Some(b'n') => self.lit("null", JKind::Null)?,
            Some(b'-' | b'0'..=b'9') => {
                self.number()?;
                JKind::Num
            }
            Some(_) => return self.err("Invalid value"),
        };
        Ok(Json {
            start,
            end: self.i,
            kind,
        })
    }

    fn lit(&mut self, word: &str, kind: JKind) -> Result<JKind, String> {
        if self.b[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(kind)
        } else {
            self.err("Invalid value")
        }
    }

    fn digits(&mut self) -> usize {
        let s = self.i;
        while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
            self.i += 1;
        }
        self.i - s
    }

    fn number(&mut self) -> Result<(), String> {
        if self.b.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.b.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return self.err("Invalid number"),
        }
        if self.b.get(self.i) == Some(&b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return self.err("Missing fraction part in number");
            }
        }
        if matches!(self.b.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return self.err("Missing exponent in number");
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or_else(|| format!("Incorrect hex digit after \\u escape at offset {}", self.i))?;
        let v = u32::from_str_radix(h, 16)
            .map_err(|_| format!("Incorrect hex digit after \\u escape at offset {}", self.i))?;
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return self.err("Incorrect hex digit after \\u escape");
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            while self.i < self.b.len()
                && !matches!(self.b[self.i], b'"' | b'\\')
                && self.b[self.i] >= 0x20
            {
                self.i += 1;
            }
            // `start..i` are whole UTF-8 sequences: it stops only at ASCII bytes.
            out.push_str(self.s.get(start..self.i).unwrap_or(""));
            match self.b.get(self.i) {
                None => return self.err("Missing a closing quotation mark in string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.b.get(self.i) {
                        Some(c) => *c,
                        None => return self.err("Invalid escape character in string"),
                    };
                    self.i += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                if self.b.get(self.i) == Some(&b'\\')
                                    && self.b.get(self.i + 1) == Some(&b'u')
                                {
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..0xE000).contains(&lo) {
                                        return self.err("The surrogate pair in string is invalid");
                                    }
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    return self.err("The surrogate pair in string is invalid");
                                }
                            } else {
                                hi
                            };
                            match char::from_u32(cp) {
                                Some(ch) => out.push(ch),
                                None => return self.err("The surrogate pair in string is invalid"),
                            }
                        }
                        _ => return self.err("Invalid escape character in string"),
                    }
                }
                Some(_) => return self.err("Invalid control character in string"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::stream_load::parse_options;
    use std::collections::HashMap;

    fn col(name: &str, ty: DorisType, nullable: bool, is_key: bool) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            ty,
            nullable,
            is_key,
            default: None,
            comment: String::new(),
        }
    }

    fn student() -> Vec<ColumnDef> {
        vec![
            col("id", DorisType::Int, false, true),
            col("name", DorisType::Varchar(8), true, false),
            col("age", DorisType::Int, true, false),
            col(
                "score",
                DorisType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                true,
                false,
            ),
            col("doc", DorisType::Json, true, false),
        ]
    }

    fn plan(h: &[(&str, &str)]) -> Result<LoadPlan, String> {
        let m: HashMap<String, String> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let o = parse_options(|k| m.get(k).cloned()).unwrap();
        LoadPlan::new("test", "student", &student(), KeysType::Unique, &o)
    }

    #[test]
    fn csv_basic_null_and_delete_sign() {
        let p = plan(&[
            ("column_separator", ","),
            ("hidden_columns", "__DORIS_DELETE_SIGN__"),
        ])
        .unwrap();
        let out = p.parse(b"1,ann,\\N,12.50,{\"a\":1},0\n2,bob,3,1,[],1\n");
        assert_eq!(out.total, 2);
        assert_eq!(out.filtered, 0, "{:?}", out.errors);
        assert_eq!(
            out.writes[0],
            RowWrite::Upsert(vec![
                Value::Int(1),
                Value::Str("ann".into()),
                Value::Null,
                Value::Decimal(1250, 2),
                Value::Json("{\"a\":1}".into())
            ])
        );
        assert!(matches!(out.writes[1], RowWrite::Delete(_)));
    }

    #[test]
    fn the_error_log_lists_fifty_refused_rows_then_says_so() {
        let p = plan(&[("column_separator", ",")]).unwrap();
        let body: String = (0..60).map(|_| "\\N,a,1,1,1\n").collect();
        let out = p.parse(body.as_bytes());
        assert_eq!(out.filtered, 60);
        assert_eq!(out.errors.len(), 51);
        assert_eq!(
            out.errors[50],
            "TOO MUCH ERROR! already reach 50. show no more next error."
        );
    }

    #[test]
    fn csv_field_count_and_not_null_filtered() {
        let p = plan(&[("column_separator", ",")]).unwrap();
        let out = p.parse(b"1,a\n\\N,a,1,1,1\n3,c,1,1,1");
        assert_eq!((out.total, out.filtered, out.writes.len()), (3, 2, 1));
        assert!(
            out.errors[0].contains("less than schema column number"),
            "{}",
            out.errors[0]
        );
        // A NULL read into a NOT NULL column is the scanner's, which quotes the source columns.
        assert_eq!(
            out.errors[1],
            "Reason: column(id) values is null while columns is not nullable. src line [NULL a 1 1 1]; "
        );
        // A text too long is the table's own check, which quotes no row.
        let long = plan(&[("column_separator", ","), ("columns", "id,name")])
            .unwrap()
            .parse(b"1,abcdefghijk\n");
        assert!(
            long.errors[0].ends_with(". src line []; "),
            "{}",
            long.errors[0]
        );
    }

    #[test]
    fn strict_mode_filters_bad_values_non_strict_nulls_them() {
        let lax = plan(&[("column_separator", ","), ("columns", "id,age")])
            .unwrap()
            .parse(b"1,abc\n");
        assert_eq!(lax.filtered, 0);
        assert_eq!(
            lax.writes[0],
            RowWrite::Upsert(vec![
                Value::Int(1),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null
            ])
        );
        let strict = plan(&[
            ("column_separator", ","),
            ("columns", "id,age"),
            ("strict_mode", "true"),
        ])
        .unwrap()
        .parse(b"1,abc\n");
        assert_eq!(strict.filtered, 1);
        assert_eq!(
            strict.errors,
            [
                "Reason: column(age) value is incorrect while strict mode is true, src value is abc. src line [1 abc]; "
            ]
        );
        // too long strings are filtered even when not strict
        let long = plan(&[("column_separator", ","), ("columns", "id,name")])
            .unwrap()
            .parse(b"1,abcdefghijk\n");
        assert_eq!(long.filtered, 1);
    }

    #[test]
    fn json_rules() {
        let p = plan(&[("format", "json"), ("read_json_by_line", "true")]).unwrap();
        let out = p.parse(
            b"{\"id\":1,\"name\":\"x\",\"age\":\"7\",\"score\":123456.78,\"doc\":{\"k\":[1,2]}}\n{\"id\":2,\"age\":true}\n{\"id\":null}\n",
        );
        assert_eq!((out.total, out.filtered), (3, 1), "{:?}", out.errors);
        assert_eq!(
            out.writes[0],
            RowWrite::Upsert(vec![
                Value::Int(1),
                Value::Str("x".into()),
                Value::Int(7),
                Value::Decimal(12345678, 2),
                Value::Json("{\"k\":[1,2]}".into())
            ])
        );
        assert_eq!(
            out.writes[1],
            RowWrite::Upsert(vec![
                Value::Int(2),
                Value::Null,
                Value::Int(1),
                Value::Null,
                Value::Null
            ])
        );
    }

    #[test]
    fn json_strip_outer_array_and_errors() {
        let p = plan(&[("format", "json"), ("strip_outer_array", "true")]).unwrap();
        let out = p.parse(b"[{\"id\":1},{\"id\":2,\"__DORIS_DELETE_SIGN__\":1}]");
        assert_eq!(out.total, 2);
        assert_eq!(out.filtered, 0);
        let p = plan(&[
            ("format", "json"),
            ("hidden_columns", "__DORIS_DELETE_SIGN__"),
            ("strip_outer_array", "true"),
        ])
        .unwrap();
        let out = p.parse(b"[{\"id\":1},{\"id\":2,\"__DORIS_DELETE_SIGN__\":1}]");
        assert!(matches!(out.writes[1], RowWrite::Delete(_)));
        let p = plan(&[("format", "json")]).unwrap();
        let out = p.parse(b"[{\"id\":1}]");
        assert_eq!(out.filtered, 1);
        assert!(out.errors[0].contains("strip_outer_array"));
        let out = p.parse(b"{\"id\":1");
        assert_eq!(out.filtered, 1);
    }

    #[test]
    fn merge_delete_partial_and_plan_errors() {
        let p = plan(&[
            ("column_separator", ","),
            ("columns", "id"),
            ("merge_type", "DELETE"),
        ])
        .unwrap();
        assert!(matches!(p.parse(b"5\n").writes[0], RowWrite::Delete(_)));
        let p = plan(&[
            ("column_separator", ","),
            ("columns", "id,age"),
            ("merge_type", "MERGE"),
            ("delete", "age=0"),
        ])
        .unwrap();
        let out = p.parse(b"1,0\n2,5\n");
        assert!(matches!(out.writes[0], RowWrite::Delete(_)));
        assert!(matches!(out.writes[1], RowWrite::Upsert(_)));
        let p = plan(&[
            ("column_separator", ","),
            ("columns", "id,age"),
            ("partial_columns", "true"),
        ])
        .unwrap();
        assert_eq!(
            p.parse(b"1,9\n").writes[0],
            RowWrite::Partial {
                columns: vec![0, 2],
                values: vec![Value::Int(1), Value::Int(9)]
            }
        );
        assert!(
            plan(&[("columns", "age"), ("partial_columns", "true")])
                .unwrap_err()
                .contains("missing: id")
        );
        assert!(
            plan(&[("columns", "nope")])
                .unwrap_err()
                .contains("Unknown column 'nope'")
        );
        assert!(
            plan(&[("columns", "age")])
                .unwrap_err()
                .contains("Column has no default value. column: id")
        );
        assert!(
            plan(&[("columns", "id,x=to_bitmap(id)")])
                .unwrap_err()
                .contains("not supported")
        );
        let dup = LoadPlan::new(
            "d",
            "t",
            &student(),
            KeysType::Duplicate,
            &parse_options(|k| (k == "merge_type").then(|| "DELETE".into())).unwrap(),
        );
        assert!(dup.unwrap_err().contains("only supported in unique tables"));
    }

    #[test]
    fn split_and_multichar_separators() {
        let v: Vec<&[u8]> = split_bytes(b"a||b||", b"||").collect();
        assert_eq!(v, vec![&b"a"[..], &b"b"[..]]);
        let v: Vec<&[u8]> = split_bytes(b"a,,b", b",").collect();
        assert_eq!(v, vec![&b"a"[..], &b""[..], &b"b"[..]]);
        assert_eq!(split_bytes(b"", b",").count(), 0);
        let p = plan(&[("column_separator", "\\x01"), ("columns", "id,name")]).unwrap();
        assert_eq!(p.parse(b"1\x01z\n").writes.len(), 1);
    }

    #[test]
    fn json_parser_keeps_number_text() {
        let j = Json::parse(" {\"a\": 1.50e3, \"b\": [1, {\"c\": \"\\u00e9\\ud83d\\ude00\"}]} ")
            .unwrap();
        let a = j.get_key("a").unwrap();
        assert_eq!(
            &" {\"a\": 1.50e3, \"b\": [1, {\"c\": \"\\u00e9\\ud83d\\ude00\"}]} "[a.start..a.end],
            "1.50e3"
        );
        assert!(Json::parse("[1,]").is_err());
        assert!(Json::parse("01").is_err());
        assert!(Json::parse(&"[".repeat(10_000)).is_err());
        assert!(Json::parse("\"\\ud800\"").is_err());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::http::stream_load::parse_options;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn table() -> Vec<ColumnDef> {
        let c = |n: &str, ty, nullable, is_key| ColumnDef {
            name: n.to_string(),
            ty,
            nullable,
            is_key,
            default: None,
            comment: String::new(),
        };
        vec![
            c("k", DorisType::BigInt, false, true),
            c("s", DorisType::Varchar(16), true, false),
            c(
                "d",
                DorisType::Decimal {
                    precision: 20,
                    scale: 4,
                },
                true,
                false,
            ),
            c("t", DorisType::DateTime(6), true, false),
            c("j", DorisType::Json, true, false),
            c("b", DorisType::Boolean, true, false),
            c("l", DorisType::LargeInt, true, false),
        ]
    }

    fn plan_for(h: &[(&str, String)]) -> Option<LoadPlan> {
        let m: HashMap<String, String> =
            h.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let o = parse_options(|k| m.get(k).cloned()).ok()?;
        LoadPlan::new("d", "t", &table(), KeysType::Unique, &o).ok()
    }

    fn check(out: &BodyOutcome) {
        assert_eq!(out.total, out.filtered + out.writes.len() as u64);
        assert!(out.errors.len() as u64 <= out.filtered);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn csv_random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600),
                                        sep in "[,|\\t;]{1,3}", hidden in any::<bool>(), partial in any::<bool>()) {
            let mut h = vec![("column_separator", sep)];
            if hidden { h.push(("hidden_columns", DELETE_SIGN.to_string())); }
            if partial { h.push(("partial_columns", "true".into())); h.push(("columns", "k,s".into())); }
            if let Some(p) = plan_for(&h) { check(&p.parse(&body)); }
        }

        #[test]
        fn csv_structured_rows(rows in proptest::collection::vec(proptest::collection::vec("(\\\\N|-?[0-9]{0,25}(\\.[0-9]{0,6})?|[a-z\"{}\\[\\]:]{0,20}|2024-0[1-9]-[0-3][0-9]( [0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,7})?)?)", 0..9), 0..20)) {
            let body: String = rows.iter().map(|r| r.join(",")).collect::<Vec<_>>().join("\n");
            let p = plan_for(&[("column_separator", ",".into())]).unwrap();
            let out = p.parse(body.as_bytes());
            check(&out);
            let s = plan_for(&[("column_separator", ",".into()), ("strict_mode", "true".into())]).unwrap();
            check(&s.parse(body.as_bytes()));
        }

        #[test]
        fn json_random_text_never_panics(body in "\\PC{0,300}", by_line in any::<bool>(), strip in any::<bool>()) {
            let p = plan_for(&[
                ("format", "json".into()),
                ("read_json_by_line", by_line.to_string()),
                ("strip_outer_array", strip.to_string()),
                ("hidden_columns", DELETE_SIGN.to_string()),
            ]).unwrap();
            check(&p.parse(body.as_bytes()));
        }

        #[test]
        fn json_random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Json::parse(&String::from_utf8_lossy(&body));
            let p = plan_for(&[("format", "json".into()), ("read_json_by_line", "true".into())]).unwrap();
            check(&p.parse(&body));
        }

        #[test]
        fn json_documents_agree_with_serde(v in any_json()) {
            let text = v.to_string();
            let mine = Json::parse(&text);
            prop_assert!(mine.is_ok(), "{text}: {mine:?}");
            let p = plan_for(&[("format", "json".into()), ("strip_outer_array", "true".into())]).unwrap();
            check(&p.parse(format!("[{text}]").as_bytes()));
        }

        #[test]
        fn options_never_panic(vals in proptest::collection::vec("\\PC{0,12}", 12)) {
            let keys = ["format", "column_separator", "line_delimiter", "columns", "hidden_columns", "merge_type",
                        "delete", "max_filter_ratio", "strict_mode", "timeout", "jsonpaths", "partial_columns"];
            let m: HashMap<String, String> = keys.iter().zip(vals).map(|(k, v)| (k.to_string(), v)).collect();
            if let Ok(o) = parse_options(|k| m.get(k).cloned())
                && let Ok(p) = LoadPlan::new("d", "t", &table(), KeysType::Unique, &o)
            {
                check(&p.parse(b"1,a\n{\"k\":1}\n"));
            }
        }
    }

    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|i| serde_json::json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| serde_json::json!(f)),
            "\\PC{0,10}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                proptest::collection::btree_map("[a-z_]{1,6}|k|s|d|t|j|b|l", inner, 0..7)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
