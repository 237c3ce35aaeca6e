//! What a Doris table's `SHOW CREATE TABLE` text and properties say about its changelog.
//!
//! Doris 5.0 names the feature `changelog.*`; earlier builds `binlog.*` with `binlog.format=ROW`
//! (docs/doris-protocols.md §0). Both are accepted; [`PropertySpelling`] says which the table uses.
//! The runner (before reading) and the operator (when probing) decide from the same functions, so
//! they can never disagree about a table. Pure: the callers read the text over MySQL.

use std::collections::BTreeMap;

/// The table property that makes a merge-on-write DELETE write a delete predicate, which the
/// changelog does not record (docs/doris-protocols.md §1.1).
pub const LIGHT_DELETE_PROPERTY: &str = "enable_mow_light_delete";

/// The default `*.ttl_seconds`.
pub const DEFAULT_TTL_SECONDS: u64 = 86_400;

/// Which property names the table uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropertySpelling {
    /// `changelog.enable`, `changelog.ttl_seconds`, … (Doris 5.0).
    Changelog,
    /// `binlog.enable` + `binlog.format=ROW`, `binlog.ttl_seconds`, … (earlier builds).
    Binlog,
}

impl PropertySpelling {
    /// The property prefix, `changelog.` or `binlog.`.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Changelog => "changelog.",
            Self::Binlog => "binlog.",
        }
    }
}

/// The table's key model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeysModel {
    /// `UNIQUE KEY`; `merge_on_write` from `enable_unique_key_merge_on_write` (default true).
    Unique {
        /// Merge-on-write, the only unique model with a changelog.
        merge_on_write: bool,
    },
    /// `DUPLICATE KEY` (inserts only).
    Duplicate,
    /// `AGGREGATE KEY` (no changelog).
    Aggregate,
    /// Not stated.
    Unknown,
}

impl KeysModel {
    /// The model as Doris names it in `SHOW` output and status (`UNIQUE_KEYS`, `DUP_KEYS`, …).
    pub fn keys_type(self) -> &'static str {
        match self {
            Self::Unique {
                merge_on_write: true,
            } => "UNIQUE_KEYS",
            Self::Unique {
                merge_on_write: false,
            } => "UNIQUE_KEYS (merge-on-read)",
            Self::Duplicate => "DUP_KEYS",
            Self::Aggregate => "AGG_KEYS",
            Self::Unknown => "unknown keys model",
        }
    }

    /// The model in words, as `dcs-runner check` and the preconditions' messages say it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Unique {
                merge_on_write: true,
            } => "UNIQUE KEY (merge-on-write)",
            Self::Unique {
                merge_on_write: false,
            } => "UNIQUE KEY (merge-on-read)",
            Self::Duplicate => "DUPLICATE KEY",
            Self::Aggregate => "AGGREGATE KEY",
            Self::Unknown => "a table of unknown key model",
        }
    }
}

/// What the runner needs to know about the source table before reading its changelog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTableInfo {
    /// The spelling in use; `Changelog` when none is set.
    pub spelling: PropertySpelling,
    /// The row changelog is on (`changelog.enable`, or `binlog.enable` with `binlog.format=ROW`).
    pub enabled: bool,
    /// Before-images are kept (`*.need_historical_value`).
    pub need_historical_value: bool,
    /// `*.ttl_seconds` (default 86400).
    pub ttl_seconds: u64,
    /// The key model.
    pub keys: KeysModel,
    /// [`LIGHT_DELETE_PROPERTY`] is true: a DELETE statement records nothing in the changelog.
    /// Absent counts as false, Doris's default.
    pub light_delete: bool,
}

fn is_true(v: Option<&String>) -> bool {
    v.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Decide the changelog settings from the table's properties and key model.
pub fn table_info_from(properties: &BTreeMap<String, String>, keys: KeysModel) -> SourceTableInfo {
    let get = |k: &str| properties.get(k);
    let spelling = if properties.keys().any(|k| k.starts_with("changelog.")) {
        PropertySpelling::Changelog
    } else if properties.keys().any(|k| k.starts_with("binlog.")) {
        PropertySpelling::Binlog
    } else {
        PropertySpelling::Changelog
    };
    let p = spelling.prefix();
    let enabled = match spelling {
        PropertySpelling::Changelog => is_true(get("changelog.enable")),
        // The format value is case-sensitive in Doris.
        PropertySpelling::Binlog => {
            is_true(get("binlog.enable")) && get("binlog.format").is_some_and(|f| f.trim() == "ROW")
        }
    };
    let ttl_seconds = get(&format!("{p}ttl_seconds"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_TTL_SECONDS);
    let keys = match keys {
        KeysModel::Unique { .. } => KeysModel::Unique {
            merge_on_write: get("enable_unique_key_merge_on_write")
                .is_none_or(|v| v.trim().eq_ignore_ascii_case("true")),
        },
        other => other,
    };
    SourceTableInfo {
        spelling,
        enabled,
        need_historical_value: is_true(get(&format!("{p}need_historical_value"))),
        ttl_seconds,
        keys,
        light_delete: is_true(get(LIGHT_DELETE_PROPERTY)),
    }
}

/// The key model named in a `SHOW CREATE TABLE` text.
pub fn keys_model_of_ddl(ddl: &str) -> KeysModel {
    let upper = ddl.to_ascii_uppercase();
    if upper.contains("UNIQUE KEY(") || upper.contains("UNIQUE KEY (") {
        KeysModel::Unique {
            merge_on_write: true,
        }
    } else if upper.contains("DUPLICATE KEY(") || upper.contains("DUPLICATE KEY (") {
        KeysModel::Duplicate
    } else if upper.contains("AGGREGATE KEY(") || upper.contains("AGGREGATE KEY (") {
        KeysModel::Aggregate
    } else {
        KeysModel::Unknown
    }
}

/// The `PROPERTIES ("k" = "v", …)` of a `SHOW CREATE TABLE` text.
pub fn properties_of_ddl(ddl: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(start) = ddl
        .rfind("PROPERTIES (")
        .or_else(|| ddl.rfind("PROPERTIES("))
    else {
        return out;
    };
    let body = &ddl[start..];
    let mut chars = body.char_indices().peekable();
    let mut strings = Vec::new();
    // Collect every double-quoted string (with backslash escapes), pairing them k, v.
    while let Some((_, c)) = chars.next() {
        if c == ')' && strings.len() % 2 == 0 {
            break;
        }
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        while let Some((_, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        s.push(n);
                    }
                }
                '"' => break,
                c => s.push(c),
            }
        }
        strings.push(s);
    }
    for pair in strings.chunks_exact(2) {
        out.insert(pair[0].clone(), pair[1].clone());
    }
    out
}

/// `SHOW CREATE TABLE` text → [`SourceTableInfo`].
pub fn table_info_of_ddl(ddl: &str) -> SourceTableInfo {
    table_info_from(&properties_of_ddl(ddl), keys_model_of_ddl(ddl))
}
