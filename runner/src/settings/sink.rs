//! The sink side's settings: the Doris sink table and its loads (`spec.sink.doris`), the batch
//! limits, which events become which rows, the body format.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;
use dcs_doris_client::host_of;
use dcs_doris_client::mysql_target::{MysqlTarget, Side};
use dcs_doris_client::stream_load::Backoff;

use super::SourceSettings;

/// The Doris sink, resolved.
#[derive(Clone)]
pub struct DorisSinkConfig {
    /// FE HTTP nodes.
    pub fe_nodes: Vec<String>,
    /// BE HTTP nodes (loads go straight there when set).
    pub be_nodes: Vec<String>,
    /// The sink table.
    pub table: TableRef,
    /// Sink user.
    pub user: String,
    /// Sink password.
    pub password: String,
    /// First part of every load label.
    pub label_prefix: String,
    /// Two-phase commit aligned with checkpoints (exactly once).
    pub enable_2pc: bool,
    /// Which events become which rows.
    pub policy: EventPolicy,
    /// When a batch is loaded.
    pub limits: BatchLimits,
    /// Retries of a transient failure, with the same label.
    pub max_retries: u32,
    /// Delays between retries.
    pub backoff: Backoff,
    /// Stream Load headers from `sink.doris.properties`.
    pub properties: BTreeMap<String, String>,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
    /// The Stream Load `timeout` header: longer than a load can wait for its commit.
    pub load_timeout: Duration,
    /// The FE MySQL port of the sink cluster (see [`sink_query_port`]).
    pub query_port: u16,
    /// The body format asked for in `properties` (JSON lines by default).
    pub format: BodyFormat,
    /// `createTable`: whether the runner creates the table and keeps its columns in step.
    pub create_table: CreateTableSettings,
    /// `schemaChange`: what a change of the source's columns does to the sink.
    pub schema_change: dcs_crds::SchemaChangePolicy,
    /// TLS on every connection to the sink cluster (`sink.doris.tls`; plaintext by default).
    pub tls: dcs_doris_client::tls::Tls,
    /// `sink.doris.deadLetter`: where refused rows go instead of stopping the sync.
    pub dead_letter: Option<DeadLetterSettings>,
}

/// `sink.doris.deadLetter`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterSettings {
    /// The dead-letter table (in the sink table's database).
    pub table: TableRef,
    /// The source table, named in each dead-letter row.
    pub source: TableRef,
}

/// `sink.doris.createTable`, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTableSettings {
    /// Create the table when missing and apply source ADD/DROP COLUMN to it.
    pub enabled: bool,
    /// Table properties for CREATE TABLE.
    pub properties: BTreeMap<String, String>,
    /// `AUTO PARTITION BY RANGE (date_trunc(key, unit))`: the key and the unit.
    pub auto_partition: Option<(String, String)>,
}

/// The MySQL port of the sink FE. The sink spec has no query port: when a sink FE node is also a
/// source FE node (the same cluster) the source's `queryPort` is used, otherwise Doris's default
/// 9030.
pub fn sink_query_port(sink_fe_nodes: &[String], source: &SourceSettings) -> u16 {
    let same = sink_fe_nodes.iter().any(|n| {
        source
            .fe_nodes
            .iter()
            .any(|s| s.trim_end_matches('/') == n.trim_end_matches('/'))
    });
    if same { source.query_port } else { 9030 }
}

impl DorisSinkConfig {
    /// The sink FE's MySQL endpoint (the host of each `feNodes` entry, port
    /// [`DorisSinkConfig::query_port`]).
    pub fn mysql_target(&self) -> MysqlTarget {
        MysqlTarget {
            hosts: self
                .fe_nodes
                .iter()
                .map(|n| host_of(n).to_owned())
                .collect(),
            port: self.query_port,
            user: self.user.clone(),
            password: self.password.clone(),
            side: Side::Sink,
            deadline: self.request_timeout,
            tls: self.tls.clone(),
        }
    }
}

impl fmt::Debug for DorisSinkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DorisSinkConfig")
            .field("fe_nodes", &self.fe_nodes)
            .field("be_nodes", &self.be_nodes)
            .field("table", &self.table)
            .field("user", &self.user)
            .field("label_prefix", &self.label_prefix)
            .field("enable_2pc", &self.enable_2pc)
            .field("policy", &self.policy)
            .field("limits", &self.limits)
            .field("query_port", &self.query_port)
            .field("format", &self.format)
            .field("create_table", &self.create_table)
            .field("schema_change", &self.schema_change)
            .field("tls", &self.tls)
            .field("dead_letter", &self.dead_letter)
            .finish_non_exhaustive()
    }
}

/// Where rows go.
#[derive(Debug, Clone)]
pub enum SinkConfig {
    /// Stream Load into a Doris table.
    Doris(Box<DorisSinkConfig>),
    /// One JSON record per change on standard output.
    Stdout,
}

/// When a batch is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most rows in one load.
    pub max_rows: u64,
    /// Most body bytes in one load (a batch may pass it by the last slice appended).
    pub max_bytes: u64,
    /// Longest time the first row of a batch waits for its load.
    pub interval: Duration,
}

impl Default for BatchLimits {
    fn default() -> Self {
        Self {
            max_rows: 50_000,
            max_bytes: 10 * 1024 * 1024,
            interval: Duration::from_secs(10),
        }
    }
}

/// How events map to sink rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPolicy {
    /// Upsert or changelog.
    pub mode: SinkMode,
    /// Deletes reach the sink (upsert mode).
    pub enable_delete: bool,
    /// Update-before events are dropped (upsert mode); otherwise they are sent as deletes.
    pub ignore_update_before: bool,
}

/// The Stream Load body format (`sink.doris.properties.format`, JSON lines by default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BodyFormat {
    /// One JSON object per line (`format: json`, `read_json_by_line: true`).
    #[default]
    JsonLines,
    /// CSV (`format: csv`): fields by position, `\N` for NULL, the delete sign as the last field.
    Csv {
        /// `column_separator` as bytes (default `\t`).
        column_separator: Vec<u8>,
        /// `line_delimiter` as bytes (default `\n`).
        line_delimiter: Vec<u8>,
    },
}

/// A `column_separator` / `line_delimiter` value as Doris reads it: `\xHH…` is hex, `\t`, `\n`,
/// `\r` and `\\` are escapes, anything else is taken literally.
///
/// # Errors
/// When it is empty or a `\x` form is not hex.
pub fn parse_separator(value: &str) -> Result<Vec<u8>, String> {
    if value.is_empty() {
        return Err("an empty separator".into());
    }
    if let Some(hex) = value
        .strip_prefix("\\x")
        .or_else(|| value.strip_prefix("\\X"))
    {
        // `\x0102` and `\x01\x02` both spell two bytes.
        let hex = hex.replace("\\x", "").replace("\\X", "");
        if hex.is_empty() || hex.len() % 2 != 0 {
            return Err(format!("{value:?} is not \\x followed by hex byte pairs"));
        }
        return (0..hex.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(&hex[i..i + 2], 16)
                    .map_err(|_| format!("{value:?} is not \\x followed by hex byte pairs"))
            })
            .collect();
    }
    let mut out = Vec::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('t') => out.push(b'\t'),
                Some('n') => out.push(b'\n'),
                Some('r') => out.push(b'\r'),
                Some('\\') | None => out.push(b'\\'),
                Some(other) => {
                    out.push(b'\\');
                    let mut buf = [0; 4];
                    out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                }
            }
        } else {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Ok(out)
}

impl BodyFormat {
    /// The format the Stream Load headers ask for (`format`, `column_separator`,
    /// `line_delimiter`, keys compared case-insensitively).
    ///
    /// # Errors
    /// A format other than json/csv, or a bad separator, with what to write instead.
    pub fn from_properties(
        properties: &std::collections::BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let get = |k: &str| {
            properties
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        match get("format")
            .map(|f| f.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("json") => Ok(Self::JsonLines),
            Some("csv") => {
                let sep = |key: &str, default: &[u8]| match get(key) {
                    None => Ok(default.to_vec()),
                    Some(v) => {
                        parse_separator(v).map_err(|e| format!("sink.doris.properties.{key}: {e}"))
                    }
                };
                let column_separator = sep("column_separator", b"\t")?;
                let line_delimiter = sep("line_delimiter", b"\n")?;
                if column_separator == line_delimiter {
                    return Err(
                        "sink.doris.properties: column_separator and line_delimiter must differ"
                            .into(),
                    );
                }
                Ok(Self::Csv {
                    column_separator,
                    line_delimiter,
                })
            }
            Some(other) => Err(format!(
                "sink.doris.properties.format {other:?} is not supported by dcs-runner; use json (the default) or csv"
            )),
        }
    }
}
