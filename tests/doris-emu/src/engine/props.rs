//! Table properties: validation at CREATE TABLE / ALTER TABLE SET, and `SHOW CREATE TABLE`.

use std::collections::BTreeMap;

use super::table::Table;
use super::{ChangelogConfig, ChangelogSpelling, KeysType};
use crate::error::{DorisError, Result};
use crate::types::default_type_of;

/// Default retention of the changelog, seconds.
pub const DEFAULT_TTL_SECONDS: i64 = 86_400;
/// `binlog.max_bytes` / `binlog.max_history_nums` default (Long.MAX_VALUE; no effect).
pub const BINLOG_UNLIMITED: &str = "9223372036854775807";
/// `replication_allocation` of a one-BE cluster.
pub const REPLICATION_ALLOCATION: &str = "tag.location.default: 1";

fn bad(detail: impl AsRef<str>) -> DorisError {
    DorisError::analysis(detail)
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(format!("Invalid {key} value: {v}"))),
    }
}

fn prefix(sp: ChangelogSpelling) -> &'static str {
    match sp {
        ChangelogSpelling::Changelog => "changelog",
        ChangelogSpelling::Binlog => "binlog",
    }
}

fn parse_ttl(sp: ChangelogSpelling, v: &str) -> Result<i64> {
    let key = format!("{}.ttl_seconds", prefix(sp));
    let ttl: i64 = v
        .trim()
        .parse()
        .map_err(|_| bad(format!("Invalid {key} value: {v}")))?;
    if ttl <= 0 {
        return Err(bad(match sp {
            ChangelogSpelling::Binlog => {
                "ROW binlog.ttl_seconds must be greater than 0".to_string()
            }
            ChangelogSpelling::Changelog => {
                "changelog.ttl_seconds must be greater than 0".to_string()
            }
        }));
    }
    Ok(ttl)
}

/// The outcome of validating `PROPERTIES (...)` at CREATE TABLE.
pub(crate) struct CreateProps {
    pub mow: bool,
    /// `enable_mow_light_delete`.
    pub light_delete: bool,
    pub changelog: ChangelogConfig,
    pub binlog_max_bytes: String,
    pub binlog_max_history_nums: String,
    /// Remaining properties in print order.
    pub other: Vec<(String, String)>,
}

/// The property that makes a merge-on-write DELETE statement a delete predicate.
const LIGHT_DELETE: &str = "enable_mow_light_delete";
/// Doris's refusal of [`LIGHT_DELETE`] on another model (`ModifyTablePropertiesClause`).
const LIGHT_DELETE_MOW_ONLY: &str =
    "enable_mow_light_delete property is only supported for unique merge-on-write table";

/// [`LIGHT_DELETE`]'s value: `true` or `false` in any case, Doris's text otherwise.
fn parse_light_delete(v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(format!(
            "Property {LIGHT_DELETE} should be set to true or false"
        ))),
    }
}

/// Validate CREATE TABLE properties (docs/doris-protocols.md §0, §1.1).
pub(crate) fn validate_create(
    keys_type: KeysType,
    given: &[(String, String)],
    feature_changelog: bool,
) -> Result<CreateProps> {
    let get = |k: &str| {
        given
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };

    // merge-on-write
    let mow = match get("enable_unique_key_merge_on_write") {
        Some(v) => {
            let b = parse_bool("enable_unique_key_merge_on_write", v)?;
            if keys_type != KeysType::Unique {
                return Err(bad(
                    "enable_unique_key_merge_on_write property only support unique key table",
                ));
            }
            b
        }
        None => keys_type == KeysType::Unique,
    };

    let light_delete = match get(LIGHT_DELETE) {
        Some(v) => {
            let b = parse_light_delete(v)?;
            if keys_type != KeysType::Unique || !mow {
                return Err(bad(LIGHT_DELETE_MOW_ONLY));
            }
            b
        }
        None => false,
    };

    // which spelling
    let uses_changelog = given.iter().any(|(k, _)| k.starts_with("changelog."));
    let spelling = if uses_changelog {
        ChangelogSpelling::Changelog
    } else {
        ChangelogSpelling::Binlog
    };
    let p = prefix(spelling);

    let enabled = match spelling {
        ChangelogSpelling::Changelog => match get("changelog.enable") {
            Some(v) => parse_bool("changelog.enable", v)?,
            None => false,
        },
        ChangelogSpelling::Binlog => {
            let enable = match get("binlog.enable") {
                Some(v) => parse_bool("binlog.enable", v)?,
                None => false,
            };
            match get("binlog.format") {
                Some("ROW") => enable,
                Some(other) => return Err(bad(format!("Invalid binlog format value: {other}"))),
                // binlog.enable alone is the statement binlog (CCR), not the row changelog
                None => false,
            }
        }
    };
    let need_hist = match get(&format!("{p}.need_historical_value")) {
        Some(v) => parse_bool(&format!("{p}.need_historical_value"), v)?,
        None => false,
    };
    let ttl = match get(&format!("{p}.ttl_seconds")) {
        Some(v) => parse_ttl(spelling, v)?,
        None => DEFAULT_TTL_SECONDS,
    };

    if enabled {
        if !feature_changelog {
            return Err(bad(match spelling {
                ChangelogSpelling::Changelog => {
                    "changelog is not enabled, set enable_feature_changelog=true in fe.conf"
                }
                ChangelogSpelling::Binlog => {
                    "binlog is not enabled, set enable_feature_binlog=true in fe.conf"
                }
            }));
        }
        let supported = keys_type == KeysType::Duplicate || (keys_type == KeysType::Unique && mow);
        if !supported {
            return Err(bad(match spelling {
                ChangelogSpelling::Changelog => {
                    "Only duplicate and mow table model support changelog"
                }
                ChangelogSpelling::Binlog => {
                    "Only duplicate and mow table model support binlog<Row>"
                }
            }));
        }
        if need_hist && keys_type == KeysType::Duplicate {
            return Err(bad(
                "Duplicate table model don't support record historical value",
            ));
        }
    }

    let binlog_max_bytes = get("binlog.max_bytes")
        .unwrap_or(BINLOG_UNLIMITED)
        .to_string();
    let binlog_max_history_nums = get("binlog.max_history_nums")
        .unwrap_or(BINLOG_UNLIMITED)
        .to_string();
    for (k, v) in [
        ("binlog.max_bytes", &binlog_max_bytes),
        ("binlog.max_history_nums", &binlog_max_history_nums),
    ] {
        if v.parse::<i64>().is_err() {
            return Err(bad(format!("Invalid {k} value: {v}")));
        }
    }

    // everything else, in print order, defaults first
    let mut other: Vec<(String, String)> = Vec::new();
    let replication = match (get("replication_allocation"), get("replication_num")) {
        (Some(a), _) => a.to_string(),
        (None, Some(n)) => {
            let n: i64 = n
                .trim()
                .parse()
                .map_err(|_| bad(format!("Invalid replication_num value: {n}")))?;
            if n <= 0 {
                return Err(bad("Replication num should larger than 0. (suggested 3)"));
            }
            format!("tag.location.default: {n}")
        }
        (None, None) => REPLICATION_ALLOCATION.to_string(),
    };
    other.push(("replication_allocation".into(), replication));
    for (k, default) in [
        ("min_load_replica_num", "-1"),
        ("is_being_synced", "false"),
        ("storage_medium", "hdd"),
        ("storage_format", "V2"),
        ("light_schema_change", "true"),
        ("disable_auto_compaction", "false"),
        ("enable_single_replica_compaction", "false"),
    ] {
        other.push((k.to_string(), get(k).unwrap_or(default).to_string()));
    }
    for (k, v) in given {
        let known = k.starts_with("changelog.")
            || k.starts_with("binlog.")
            || k == "replication_num"
            || k == "enable_unique_key_merge_on_write"
            || k == LIGHT_DELETE
            || other.iter().any(|(n, _)| n == k);
        if !known {
            match other.iter_mut().find(|(n, _)| n == k) {
                Some(e) => e.1 = v.clone(),
                None => other.push((k.clone(), v.clone())),
            }
        }
    }

    // A table without the row changelog that used the binlog spelling (statement binlog) keeps its
    // binlog.* keys; record them in `other` so SHOW CREATE prints them.
    if !enabled {
        for (k, v) in given {
            if (k.starts_with("binlog.") || k.starts_with("changelog."))
                && !other.iter().any(|(n, _)| n == k)
            {
                other.push((k.clone(), v.clone()));
            }
        }
    }

    Ok(CreateProps {
        mow,
        light_delete,
        changelog: ChangelogConfig {
            enabled,
            spelling,
            need_historical_value: need_hist && enabled,
            ttl_seconds: ttl,
        },
        binlog_max_bytes,
        binlog_max_history_nums,
        other,
    })
}

/// All properties in print order (defaults included).
pub(crate) fn all_properties(t: &Table) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = t.props.iter();
    if let Some(first) = rest.next() {
        out.push(first.clone());
    }
    if t.keys_type == KeysType::Unique {
        let mow = t.props_mow();
        out.push(("enable_unique_key_merge_on_write".into(), mow.to_string()));
    }
    out.extend(rest.cloned());
    // Doris prints it for every merge-on-write table, its default (false) included.
    if t.keys_type == KeysType::Unique && t.props_mow() {
        out.push((LIGHT_DELETE.into(), t.light_delete.to_string()));
    }
    let cl = &t.changelog;
    if cl.enabled {
        let f = |b: bool| b.to_string();
        match cl.spelling {
            ChangelogSpelling::Changelog => {
                out.push(("changelog.enable".into(), "true".into()));
                out.push((
                    "changelog.need_historical_value".into(),
                    f(cl.need_historical_value),
                ));
                out.push(("changelog.ttl_seconds".into(), cl.ttl_seconds.to_string()));
            }
            ChangelogSpelling::Binlog => {
                out.push(("binlog.enable".into(), "true".into()));
                out.push(("binlog.format".into(), "ROW".into()));
                out.push((
                    "binlog.need_historical_value".into(),
                    f(cl.need_historical_value),
                ));
                out.push(("binlog.ttl_seconds".into(), cl.ttl_seconds.to_string()));
                out.push(("binlog.max_bytes".into(), t.binlog_max_bytes.clone()));
                out.push((
                    "binlog.max_history_nums".into(),
                    t.binlog_max_history_nums.clone(),
                ));
            }
        }
    }
    out
}

/// The properties as a map (for `TableInfo`).
pub(crate) fn property_map(t: &Table) -> BTreeMap<String, String> {
    all_properties(t).into_iter().collect()
}

/// `ALTER TABLE ... SET (...)`.
pub(crate) fn alter_set(t: &mut Table, props: &[(String, String)]) -> Result<()> {
    // validate everything first, then apply
    let mut new_ttl: Option<i64> = None;
    let mut plain: Vec<(String, String)> = Vec::new();
    let cl = t.changelog.clone();
    let mut max_bytes = None;
    let mut max_hist = None;
    let mut light_delete = None;
    for (k, v) in props {
        let fam = if k.starts_with("changelog.") {
            Some(ChangelogSpelling::Changelog)
        } else if k.starts_with("binlog.") {
            Some(ChangelogSpelling::Binlog)
        } else {
            None
        };
        let Some(sp) = fam else {
            match k.as_str() {
                "enable_unique_key_merge_on_write" => {
                    return Err(bad(
                        "enable_unique_key_merge_on_write can only be set at CREATE TABLE",
                    ));
                }
                LIGHT_DELETE => {
                    let b = parse_light_delete(v)?;
                    if t.keys_type != KeysType::Unique || !t.props_mow() {
                        return Err(bad(LIGHT_DELETE_MOW_ONLY));
                    }
                    light_delete = Some(b);
                }
                "replication_num" => {
                    let n: i64 = v
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("Invalid replication_num value: {v}")))?;
                    plain.push((
                        "replication_allocation".into(),
                        format!("tag.location.default: {n}"),
                    ));
                }
                "bloom_filter_columns" | "bloom_filter_fpp" if cl.enabled => {
                    return Err(bad(super::ROW_BINLOG_NOT_ALLOWED));
                }
                _ => plain.push((k.clone(), v.clone())),
            }
            continue;
        };
        let p = prefix(sp);
        let name = &k[p.len() + 1..];
        match name {
            "ttl_seconds" => new_ttl = Some(parse_ttl(sp, v)?),
            "enable" => {
                let b = parse_bool(k, v)?;
                if b != cl.enabled {
                    return Err(bad(match (sp, b) {
                        (ChangelogSpelling::Binlog, false) => {
                            "can't disable binlog when format is [Row]".to_string()
                        }
                        (ChangelogSpelling::Changelog, false) => {
                            "can't disable changelog once it is enabled".to_string()
                        }
                        _ => format!("{k} can only be set at CREATE TABLE"),
                    }));
                }
            }
            "format" => {
                let current = if cl.enabled {
                    "ROW"
                } else {
                    "STATEMENT_AND_SNAPSHOT"
                };
                if v != current {
                    return Err(bad(format!(
                        "not support change binlog format from {current} to {v}"
                    )));
                }
            }
            "need_historical_value" => {
                let b = parse_bool(k, v)?;
                if b != cl.need_historical_value {
                    return Err(bad(format!(
                        "not support change {k} from {} to {b}",
                        cl.need_historical_value
                    )));
                }
            }
            "max_bytes" | "max_history_nums" if sp == ChangelogSpelling::Binlog => {
                if v.trim().parse::<i64>().is_err() {
                    return Err(bad(format!("Invalid {k} value: {v}")));
                }
                if name == "max_bytes" {
                    max_bytes = Some(v.trim().to_string());
                } else {
                    max_hist = Some(v.trim().to_string());
                }
            }
            _ => return Err(bad(format!("Unknown table property: {k}"))),
        }
    }
    if let Some(ttl) = new_ttl {
        t.changelog.ttl_seconds = ttl;
    }
    if let Some(b) = light_delete {
        t.light_delete = b;
    }
    if let Some(b) = max_bytes {
        t.binlog_max_bytes = b;
    }
    if let Some(h) = max_hist {
        t.binlog_max_history_nums = h;
    }
    for (k, v) in plain {
        match t.props.iter_mut().find(|(n, _)| *n == k) {
            Some(e) => e.1 = v,
            None => t.props.push((k, v)),
        }
    }
    Ok(())
}

fn quote_default(t: &Table, i: usize) -> Option<String> {
    let c = &t.columns[i];
    let d = c.default.as_ref()?;
    let text = crate::types::coerce(&c.ty, d.clone())
        .ok()
        .and_then(|v| v.to_text(&c.ty))
        .or_else(|| d.to_text(&default_type_of(d)));
    Some(match text {
        Some(s) => format!("\"{}\"", s.replace('"', "\\\"")),
        None => "NULL".to_string(),
    })
}

fn backquoted(cols: &[String]) -> String {
    cols.iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `Create Table` text of `SHOW CREATE TABLE`.
pub(crate) fn show_create(t: &Table) -> String {
    let mut s = format!("CREATE TABLE `{}` (\n", t.name);
    let cols: Vec<String> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut line = format!(
                "  `{}` {} {}",
                c.name,
                c.ty.sql_name(),
                if c.nullable { "NULL" } else { "NOT NULL" }
            );
            if let Some(d) = quote_default(t, i) {
                line.push_str(&format!(" DEFAULT {d}"));
            }
            line.push_str(&format!(" COMMENT \"{}\"", c.comment.replace('"', "\\\"")));
            line
        })
        .collect();
    s.push_str(&cols.join(",\n"));
    s.push_str("\n) ENGINE=OLAP\n");
    let model = match t.keys_type {
        KeysType::Unique => "UNIQUE KEY",
        KeysType::Duplicate => "DUPLICATE KEY",
    };
    s.push_str(&format!("{model}({})\n", backquoted(&t.key_columns)));
    s.push_str("COMMENT 'OLAP'\n");
    if let Some(ap) = &t.auto_partition {
        s.push_str(&format!(
            "AUTO PARTITION BY RANGE (date_trunc(`{}`, '{}'))\n()\n",
            ap.column, ap.unit
        ));
    }
    let buckets = match t.distribution.buckets {
        Some(n) => n.to_string(),
        None => "AUTO".to_string(),
    };
    if t.distribution.hash_columns.is_empty() {
        s.push_str(&format!("DISTRIBUTED BY RANDOM BUCKETS {buckets}\n"));
    } else {
        s.push_str(&format!(
            "DISTRIBUTED BY HASH({}) BUCKETS {buckets}\n",
            backquoted(&t.distribution.hash_columns)
        ));
    }
    let props: Vec<String> = all_properties(t)
        .into_iter()
        .map(|(k, v)| format!("\"{k}\" = \"{v}\""))
        .collect();
    s.push_str("PROPERTIES (\n");
    s.push_str(&props.join(",\n"));
    s.push_str("\n);");
    s
}

impl Table {
    /// Merge-on-write flag (UNIQUE tables).
    pub(crate) fn props_mow(&self) -> bool {
        self.mow
    }
}
