//! Stream Load request headers → [`LoadOptions`] (pure; docs/doris-protocols.md §4.1).
//!
//! Header names are matched case-insensitively (HTTP header names are). Values that Doris rejects
//! give the Doris message; features the emulator does not implement give a message that says so,
//! so a client never silently gets a different load than it asked for.

/// Body format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `csv` (default); `skip_lines` header lines are skipped (`csv_with_names[_and_types]`).
    Csv {
        /// Header lines to skip.
        skip_lines: usize,
    },
    /// `json`.
    Json,
}

/// `merge_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeType {
    /// Rows upsert, or delete when their `__DORIS_DELETE_SIGN__` is 1.
    Append,
    /// Every row deletes its key.
    Delete,
    /// Rows matching the `delete` condition delete, the others upsert.
    Merge(String),
}

/// Everything a Stream Load header set asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadOptions {
    /// `label` (`None`: the BE generates one).
    pub label: Option<String>,
    /// `format`.
    pub format: Format,
    /// `column_separator` (bytes; default `\t`).
    pub column_separator: Vec<u8>,
    /// `line_delimiter` (bytes; default `\n`).
    pub line_delimiter: Vec<u8>,
    /// `columns`: the body's fields/keys in order (names only).
    pub columns: Option<Vec<String>>,
    /// `hidden_columns` (only `__DORIS_DELETE_SIGN__` is supported).
    pub hidden_columns: Vec<String>,
    /// `read_json_by_line`.
    pub read_json_by_line: bool,
    /// `strip_outer_array`.
    pub strip_outer_array: bool,
    /// `jsonpaths` (one path per column of the load).
    pub jsonpaths: Option<Vec<String>>,
    /// `json_root`.
    pub json_root: Option<String>,
    /// `merge_type` (+ `delete`).
    pub merge_type: MergeType,
    /// `partial_columns: true` or `unique_key_update_mode: UPDATE_FIXED_COLUMNS`.
    pub partial_columns: bool,
    /// `max_filter_ratio` (default 0).
    pub max_filter_ratio: f64,
    /// `two_phase_commit: true`.
    pub two_phase_commit: bool,
    /// `timeout` in seconds.
    pub timeout_s: Option<i64>,
    /// `strict_mode`.
    pub strict_mode: bool,
    /// `comment` (echoed in the response's `Comment`).
    pub comment: String,
}

/// Hidden delete-sign column name.
pub const DELETE_SIGN: &str = "__DORIS_DELETE_SIGN__";

fn truthy(v: &str) -> bool {
    v.trim().eq_ignore_ascii_case("true")
}

/// Decode a separator header: `\xHH..` hex (Doris's form), `\t`/`\n`/`\r`/`\\` escapes, else the
/// bytes as sent.
pub fn parse_separator(raw: &str, what: &str) -> Result<Vec<u8>, String> {
    if raw.is_empty() {
        return Err(format!(
            "errCode = 2, detailMessage = {what} is null or empty"
        ));
    }
    if raw.len() > 2 && (raw.starts_with("\\x") || raw.starts_with("\\X")) {
        let hex = &raw[2..];
        if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "errCode = 2, detailMessage = {what} in hex should be even and in range [0-9a-fA-F]: {raw}"
            ));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0))
            .collect();
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(raw.len());
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            let esc = match b[i + 1] {
                b't' => Some(b'\t'),
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b'\\' => Some(b'\\'),
                _ => None,
            };
            if let Some(e) = esc {
                out.push(e);
                i += 2;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    Ok(out)
}

/// Split a `columns` header at top-level commas (commas inside parentheses or quotes stay).
pub fn split_columns(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut cur = String::new();
    for c in raw.chars() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '(' => {
                    depth += 1;
                    cur.push(c);
                }
                ')' => {
                    depth -= 1;
                    cur.push(c);
                }
                ',' if depth <= 0 => out.push(std::mem::take(&mut cur)),
                _ => cur.push(c),
            },
        }
    }
    out.push(cur);
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

/// Strip one pair of backquotes.
pub fn unquote_ident(s: &str) -> String {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('`') && t.ends_with('`') {
        t[1..t.len() - 1].to_string()
    } else {
        t.to_string()
    }
}

/// Parse the Stream Load headers. `get(name)` returns a header's value (names lower-case).
pub fn parse_options(get: impl Fn(&str) -> Option<String>) -> Result<LoadOptions, String> {
    let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
    if nonempty("compress_type").is_some() {
        if nonempty("format").is_some_and(|f| f.eq_ignore_ascii_case("json")) {
            return Err("compress data of JSON format is not supported.".into());
        }
        return Err("compress_type is not supported by the emulator".into());
    }
    let format = match nonempty("format") {
        None => Format::Csv { skip_lines: 0 },
        Some(f) => match f.to_ascii_lowercase().as_str() {
            "csv" => Format::Csv { skip_lines: 0 },
            "csv_with_names" => Format::Csv { skip_lines: 1 },
            "csv_with_names_and_types" => Format::Csv { skip_lines: 2 },
            "json" => Format::Json,
            "arrow" | "parquet" | "orc" => {
                return Err(format!(
                    "format {f} is not supported by the emulator (csv and json are)"
                ));
            }
            _ => return Err(format!("unknown data format, format={f}")),
        },
    };
    if let Some(g) = nonempty("group_commit")
        && !g.eq_ignore_ascii_case("off_mode")
    {
        return Err(format!("group_commit {g} is not supported by the emulator"));
    }
    let timeout_s = match nonempty("timeout") {
        None => None,
        Some(t) => Some(
            t.trim()
                .parse::<i32>()
                .map_err(|_| "Invalid timeout format".to_string())? as i64,
        ),
    };
    let column_separator = match get("column_separator") {
        None => vec![b'\t'],
        Some(s) => parse_separator(&s, "Column separator")?,
    };
    let line_delimiter = match get("line_delimiter") {
        None => vec![b'\n'],
        Some(s) => parse_separator(&s, "Line delimiter")?,
    };
    let columns = nonempty("columns").map(|c| split_columns(&c));
    let hidden_columns: Vec<String> = nonempty("hidden_columns")
        .map(|h| {
            split_columns(&h)
                .into_iter()
                .map(|c| unquote_ident(&c))
                .filter(|c| !c.is_empty())
                .collect()
        })
        .unwrap_or_default();
    for h in &hidden_columns {
        if !h.eq_ignore_ascii_case(DELETE_SIGN) {
            return Err(format!(
                "hidden column {h} is not supported by the emulator (only {DELETE_SIGN} is)"
            ));
        }
    }
    let jsonpaths = match nonempty("jsonpaths") {
        None => None,
        Some(p) => match serde_json::from_str::<Vec<String>>(&p) {
            Ok(v) => Some(v),
            Err(_) => return Err(format!("Invalid json path: {p}")),
        },
    };
    let merge_type = match nonempty("merge_type").map(|m| m.trim().to_ascii_uppercase()) {
        None => MergeType::Append,
        Some(m) => match m.as_str() {
            "APPEND" => MergeType::Append,
            "DELETE" => MergeType::Delete,
            "MERGE" => match nonempty("delete") {
                Some(cond) => MergeType::Merge(cond),
                None => {
                    return Err("errCode = 2, detailMessage = Excepted DELETE ON clause when merge type is MERGE.".into());
                }
            },
            other => {
                return Err(format!(
                    "errCode = 2, detailMessage = unknown merge type {other}"
                ));
            }
        },
    };
    if !matches!(merge_type, MergeType::Merge(_)) && nonempty("delete").is_some() {
        return Err("errCode = 2, detailMessage = not support DELETE ON clause when merge type is not MERGE.".into());
    }
    let mut partial_columns = nonempty("partial_columns").is_some_and(|v| truthy(&v));
    if let Some(mode) = nonempty("unique_key_update_mode") {
        match mode.trim().to_ascii_uppercase().as_str() {
            "UPSERT" => {}
            "UPDATE_FIXED_COLUMNS" => partial_columns = true,
            "UPDATE_FLEXIBLE_COLUMNS" => {
                return Err("unique_key_update_mode UPDATE_FLEXIBLE_COLUMNS is not supported by the emulator".into());
            }
            _ => {
                return Err(format!(
                    "errCode = 2, detailMessage = Invalid unique_key_update_mode: {mode}"
                ));
            }
        }
    }
    let max_filter_ratio = match nonempty("max_filter_ratio") {
        None => 0.0,
        Some(r) => match r.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => v,
            _ => {
                return Err(format!(
                    "errCode = 2, detailMessage = Invalid max_filter_ratio: {r}"
                ));
            }
        },
    };
    let strict_mode = match nonempty("strict_mode") {
        None => false,
        Some(s) if s.trim().eq_ignore_ascii_case("true") => true,
        Some(s) if s.trim().eq_ignore_ascii_case("false") => false,
        Some(_) => {
            return Err(
                "errCode = 2, detailMessage = Invalid strict mode format. Must be bool type".into(),
            );
        }
    };
    if nonempty("where").is_some() {
        return Err("the where header is not supported by the emulator".into());
    }
    if nonempty("function_column.sequence_col").is_some() || nonempty("sequence_col").is_some() {
        return Err("function_column.sequence_col is not supported by the emulator".into());
    }
    Ok(LoadOptions {
        label: nonempty("label"),
        format,
        column_separator,
        line_delimiter,
        columns,
        hidden_columns,
        read_json_by_line: nonempty("read_json_by_line").is_some_and(|v| truthy(&v)),
        strip_outer_array: nonempty("strip_outer_array").is_some_and(|v| truthy(&v)),
        jsonpaths,
        json_root: nonempty("json_root"),
        merge_type,
        partial_columns,
        max_filter_ratio,
        two_phase_commit: get("two_phase_commit").as_deref() == Some("true"),
        timeout_s,
        strict_mode,
        comment: get("comment").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn opts(h: &[(&str, &str)]) -> Result<LoadOptions, String> {
        let m: HashMap<String, String> = h
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_options(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let o = opts(&[]).unwrap();
        assert_eq!(o.format, Format::Csv { skip_lines: 0 });
        assert_eq!(o.column_separator, b"\t");
        assert_eq!(o.line_delimiter, b"\n");
        assert_eq!(o.merge_type, MergeType::Append);
        assert!(!o.two_phase_commit && !o.partial_columns && !o.strict_mode);
        assert_eq!(o.max_filter_ratio, 0.0);
    }

    #[test]
    fn separators() {
        assert_eq!(parse_separator("\\x01", "c").unwrap(), vec![1]);
        assert_eq!(parse_separator("\\x0102", "c").unwrap(), vec![1, 2]);
        assert_eq!(parse_separator("||", "c").unwrap(), b"||");
        assert_eq!(parse_separator("\\t", "c").unwrap(), b"\t");
        assert!(parse_separator("\\x0", "c").is_err());
        assert!(parse_separator("", "c").is_err());
    }

    #[test]
    fn errors() {
        assert_eq!(
            opts(&[("format", "xml")]).unwrap_err(),
            "unknown data format, format=xml"
        );
        assert_eq!(
            opts(&[("timeout", "x")]).unwrap_err(),
            "Invalid timeout format"
        );
        assert!(
            opts(&[("merge_type", "MERGE")])
                .unwrap_err()
                .contains("Excepted DELETE ON clause")
        );
        assert!(
            opts(&[("delete", "a=1")])
                .unwrap_err()
                .contains("not support DELETE ON clause")
        );
        assert!(opts(&[("hidden_columns", "__DORIS_SEQUENCE_COL__")]).is_err());
        assert!(opts(&[("max_filter_ratio", "2")]).is_err());
    }

    #[test]
    fn columns_split() {
        assert_eq!(split_columns("a, b ,`c`"), vec!["a", "b", "`c`"]);
        assert_eq!(split_columns("a,b=f(x,y)"), vec!["a", "b=f(x,y)"]);
        let o = opts(&[
            ("columns", "id,name,__DORIS_DELETE_SIGN__"),
            ("merge_type", "merge"),
            ("delete", "id=1"),
        ])
        .unwrap();
        assert_eq!(o.columns.unwrap().len(), 3);
        assert_eq!(o.merge_type, MergeType::Merge("id=1".into()));
    }
}
