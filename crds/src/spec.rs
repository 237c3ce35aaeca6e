//! The desired state: `DorisChangelogSync.spec` and the custom resource itself.
//!
//! Every field's `///` doc becomes its `kubectl explain` text. Defaults live in serde (so the runner's
//! standalone mode sees them) and, through schemars, in the schema (so the API server applies them).

use std::{collections::BTreeMap, fmt, str::FromStr, time::Duration};

use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements, Toleration};
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    duration::{DurationError, parse_duration},
    quantity::{QuantityError, parse_byte_quantity},
    status::DorisChangelogSyncStatus,
};

/// The format of `startup.timestamp`, as the Flink connector's `source.scan.timestamp` takes it.
pub const TIMESTAMP_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// Keeps a Doris changelog table flowing into a sink: a snapshot, then every change.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "dcs.dev",
    version = "v1alpha1",
    kind = "DorisChangelogSync",
    plural = "dorischangelogsyncs",
    shortname = "dcs",
    namespaced,
    status = "DorisChangelogSyncStatus",
    derive = "PartialEq",
    doc = "Keeps a Doris changelog table flowing into a sink: a snapshot, then every change.",
    // The JSON form: clippy's duplicated_attributes lint misreads repeated printcolumn(type_ = ..).
    printcolumn = r#"{"name": "Phase", "type": "string", "description": "Where the sync is in its life cycle", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Shards", "type": "string", "description": "Snapshot shards done of spec.snapshot.parallelism (sharded snapshots only)", "jsonPath": ".status.snapshot.shardsDone"}"#,
    printcolumn = r#"{"name": "Lag", "type": "integer", "description": "Seconds between Doris's now and the last committed offset", "jsonPath": ".status.lagSeconds"}"#,
    printcolumn = r#"{"name": "TTL-Headroom", "type": "integer", "description": "Seconds left before the oldest change still needed expires from the changelog", "jsonPath": ".status.ttlHeadroomSeconds"}"#,
    printcolumn = r#"{"name": "Consumer", "type": "string", "description": "The consumer id the progress is recorded under", "jsonPath": ".status.consumerId"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "description": "Status of the Ready condition", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Restarts", "type": "integer", "priority": 1, "description": "Restarts of the runner pod's container", "jsonPath": ".status.runnerRestarts"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.source.filter) || !has(self.startup) || !has(self.startup.mode) || self.startup.mode == 'snapshot'",
        "message": "source.filter is only allowed with startup.mode snapshot; the changelog cannot be filtered",
        "fieldPath": ".source.filter",
    },
    {
        "rule": "!has(self.offsets) || (has(self.startup) && has(self.startup.mode) && self.startup.mode != 'snapshot')",
        "message": "offsets is only allowed with an incremental startup.mode (initial, latest or fromTimestamp)",
        "fieldPath": ".offsets",
    },
    {
        "rule": "!has(self.snapshot) || !has(self.snapshot.parallelism) || self.snapshot.parallelism == 1 || !has(self.startup) || !has(self.startup.mode) || self.startup.mode == 'snapshot' || self.startup.mode == 'initial'",
        "message": "snapshot.parallelism above 1 is only allowed with startup.mode snapshot or initial, the modes that read a snapshot",
        "fieldPath": ".snapshot.parallelism",
    },
    {
        "rule": "!has(self.source.columns) || !has(self.sink.doris) || !has(self.sink.doris.schemaChange) || self.sink.doris.schemaChange == 'evolve'",
        "message": "sink.doris.schemaChange fail and ignore apply only when every source column is read; remove source.columns, or schemaChange",
        "fieldPath": ".sink.doris.schemaChange",
    },
]))]
pub struct DorisChangelogSyncSpec {
    /// The Doris table to read: its snapshot and its changelog.
    pub source: SourceSpec,
    /// Where reading starts when there is no checkpoint and no offset-table row for the consumer.
    #[serde(default)]
    pub startup: StartupSpec,
    /// How the changelog is polled.
    #[serde(default)]
    pub changelog: ChangelogSpec,
    /// Optional Flink-connector compatible offset table that records the consumer's progress.
    /// Only for incremental startup modes; table and consumerId are set together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offsets: Option<OffsetsSpec>,
    /// How often progress is checkpointed (and, with 2PC, how often loads become visible).
    #[serde(default)]
    pub checkpoint: CheckpointSpec,
    /// Where the rows go: exactly one of doris or stdout.
    pub sink: SinkSpec,
    /// How long the snapshot is expected to take. The operator blocks the sync unless the source's
    /// changelog TTL covers this plus checkpoint.interval, changelog.pollInterval and a margin.
    #[serde(default = "default_expected_snapshot_duration")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 64))]
    pub expected_snapshot_duration: String,
    /// How the snapshot is read: by one runner, or by several at once.
    #[serde(default, skip_serializing_if = "SnapshotSpec::is_default")]
    pub snapshot: SnapshotSpec,
    /// What to do when the offset has expired from the changelog: reinitialize (new consumer id,
    /// fresh snapshot, sink rebuilt) or fail.
    #[serde(default)]
    pub on_offset_expired: OnOffsetExpired,
    /// Stops the runner while true; progress is kept and reading resumes where it stopped.
    #[serde(default)]
    pub suspend: bool,
    /// Change this to force a fresh snapshot under a new consumer id.
    #[serde(default)]
    pub reinit_nonce: String,
    /// How the runner pod is run.
    #[serde(default)]
    pub runner: RunnerSpec,
}

fn default_expected_snapshot_duration() -> String {
    "30m".to_owned()
}

// === impl DorisChangelogSyncSpec ===

impl DorisChangelogSyncSpec {
    /// Whether the startup mode reads the changelog (initial, latest, fromTimestamp).
    pub fn is_incremental(&self) -> bool {
        self.startup.mode.is_incremental()
    }

    /// Whether the source table must keep before-images (`changelog.need_historical_value`):
    /// minDelta needs them, and so does a Doris sink that writes update-before events
    /// (changelog mode, or upsert with ignoreUpdateBefore false).
    pub fn requires_historical_value(&self) -> bool {
        let sink_writes_before_images = self
            .sink
            .doris
            .as_ref()
            .is_some_and(|d| d.mode == SinkMode::Changelog || !d.ignore_update_before);
        self.changelog.increment_type == IncrementType::MinDelta || sink_writes_before_images
    }

    /// The parsed `expectedSnapshotDuration` (default 30m).
    ///
    /// # Errors
    /// When the string is not a duration; [`crate::validate()`] reports it with its path.
    pub fn expected_snapshot_duration(&self) -> Result<Duration, DurationError> {
        parse_duration(&self.expected_snapshot_duration)
    }
}

// === impl DorisChangelogSync ===

impl DorisChangelogSync {
    /// The consumer id progress is recorded under: `offsets.consumerId`, else `metadata.name`.
    ///
    /// The operator adds `-r<generation>` after a reinitialization; that id lives in status.
    pub fn consumer_id(&self) -> String {
        self.spec
            .offsets
            .as_ref()
            .and_then(|o| o.consumer_id.clone())
            .unwrap_or_else(|| self.name_any())
    }
}

/// The Doris table to read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceSpec {
    /// FE HTTP endpoints as host:port (Flink `fenodes`); several give failover.
    #[schemars(length(min = 1))]
    pub fe_nodes: Vec<String>,
    /// The MySQL protocol port on the FE hosts (used for table properties and the offset table).
    #[serde(default = "default_query_port")]
    #[schemars(range(min = 1, max = 65535))]
    pub query_port: i32,
    /// The FE Arrow Flight SQL port; discovered from SHOW FRONTENDS when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub flight_sql_port: Option<i32>,
    /// The table as db.table (Flink `table.identifier`); it must have the changelog enabled.
    pub table: String,
    /// The Secret holding the Doris user and password.
    pub credentials: Credentials,
    /// Columns to read (Flink `doris.read.field`); all columns when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<String>>,
    /// A SQL predicate applied to the snapshot read (Flink `doris.filter.query`), e.g. "age > 18".
    /// Only with startup.mode snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// TLS on every connection to the source cluster: FE HTTP, MySQL, Arrow Flight SQL (FE and
    /// BE). Plaintext when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

fn default_query_port() -> i32 {
    9030
}

impl SourceSpec {
    /// The source table split into database and table.
    ///
    /// # Errors
    /// When `table` is not `db.table`; [`crate::validate()`] reports it with its path.
    pub fn table_ref(&self) -> Result<TableRef, TableRefError> {
        self.table.parse()
    }
}

/// A reference to a Secret holding a Doris user name and password.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// Name of the Secret, in the sync's namespace.
    pub secret_name: String,
    /// Key of the user name in the Secret.
    #[serde(default = "default_username_key")]
    pub username_key: String,
    /// Key of the password in the Secret.
    #[serde(default = "default_password_key")]
    pub password_key: String,
}

fn default_username_key() -> String {
    "username".to_owned()
}

fn default_password_key() -> String {
    "password".to_owned()
}

impl Credentials {
    /// Credentials from the named Secret with the default keys `username` and `password`.
    pub fn from_secret(secret_name: impl Into<String>) -> Self {
        Self {
            secret_name: secret_name.into(),
            username_key: default_username_key(),
            password_key: default_password_key(),
        }
    }
}

/// Where reading starts on a fresh start.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.timestamp) == (has(self.mode) && self.mode == 'fromTimestamp')",
        "message": "timestamp is required with mode fromTimestamp and only allowed with it",
    },
]))]
pub struct StartupSpec {
    /// snapshot reads the table once and stops; initial reads a snapshot, then the changelog from
    /// the moment before it; latest reads only changes from now; fromTimestamp reads changes from
    /// timestamp.
    #[serde(default)]
    pub mode: StartupMode,
    /// Start of the changelog for mode fromTimestamp, "yyyy-MM-dd HH:mm:ss" in the FE's time zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$"))]
    pub timestamp: Option<String>,
}

impl StartupSpec {
    /// The parsed `timestamp`, if set.
    ///
    /// # Errors
    /// When the timestamp is not a valid `yyyy-MM-dd HH:mm:ss` date and time.
    pub fn timestamp(&self) -> Result<Option<jiff::civil::DateTime>, TimestampError> {
        self.timestamp.as_deref().map(parse_timestamp).transpose()
    }
}

/// Parses a Doris timestamp `yyyy-MM-dd HH:mm:ss`.
///
/// # Errors
/// When the text has another shape or names a date or time that does not exist.
pub fn parse_timestamp(input: &str) -> Result<jiff::civil::DateTime, TimestampError> {
    let shaped = input.len() == 19
        && input.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == ' ',
            13 | 16 => c == ':',
            _ => c.is_ascii_digit(),
        });
    if !shaped {
        return Err(TimestampError::Format {
            input: input.to_owned(),
        });
    }
    jiff::civil::DateTime::strptime(TIMESTAMP_FORMAT, input).map_err(|_| TimestampError::Invalid {
        input: input.to_owned(),
    })
}

/// Why a startup timestamp could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Not `yyyy-MM-dd HH:mm:ss`.
    #[error("{input:?} is not of the form yyyy-MM-dd HH:mm:ss, e.g. \"2026-01-31 08:00:00\"")]
    Format {
        /// The text as written.
        input: String,
    },
    /// The right shape, but no such date or time (`2026-02-30`, `25:00:00`).
    #[error("{input:?} is not a valid date and time")]
    Invalid {
        /// The text as written.
        input: String,
    },
}

/// The startup modes of the Flink connector's `source.scan.mode`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StartupMode {
    /// Read the table once, then stop.
    #[default]
    Snapshot,
    /// Read a snapshot, then every change since the moment before it.
    Initial,
    /// Read only changes made from now on.
    Latest,
    /// Read changes from startup.timestamp on.
    FromTimestamp,
}

impl StartupMode {
    /// Whether this mode reads the changelog (everything but snapshot).
    pub fn is_incremental(self) -> bool {
        !matches!(self, Self::Snapshot)
    }
}

impl fmt::Display for StartupMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Snapshot => "snapshot",
            Self::Initial => "initial",
            Self::Latest => "latest",
            Self::FromTimestamp => "fromTimestamp",
        })
    }
}

/// How the changelog is polled.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangelogSpec {
    /// Which changes @incr returns: detail (every change), minDelta (the net change per key in each
    /// window) or appendOnly (inserts only).
    #[serde(default)]
    pub increment_type: IncrementType,
    /// How often a new changelog window is read; at least 1s.
    #[serde(default = "default_ten_seconds")]
    #[schemars(
        regex(pattern = r"^([0-9]+(ms|s|m|h))+$"),
        length(max = 64),
        extend("x-kubernetes-validations" = [
            {
                "rule": "!self.matches('^([0-9]+(ms|s|m|h))+$') || duration(self) >= duration('1s')",
                "message": "pollInterval must be at least 1s",
            },
        ])
    )]
    pub poll_interval: String,
    /// How long a window is retried while Doris says its data is not visible yet; 0s disables.
    #[serde(default = "default_five_minutes")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 64))]
    pub visible_wait_timeout: String,
}

fn default_ten_seconds() -> String {
    "10s".to_owned()
}

fn default_five_minutes() -> String {
    "5m".to_owned()
}

impl Default for ChangelogSpec {
    fn default() -> Self {
        Self {
            increment_type: IncrementType::default(),
            poll_interval: default_ten_seconds(),
            visible_wait_timeout: default_five_minutes(),
        }
    }
}

impl ChangelogSpec {
    /// The parsed `pollInterval` (default 10s).
    ///
    /// # Errors
    /// When the string is not a duration.
    pub fn poll_interval(&self) -> Result<Duration, DurationError> {
        parse_duration(&self.poll_interval)
    }

    /// The parsed `visibleWaitTimeout` (default 5m); zero means visibility errors are not retried.
    ///
    /// # Errors
    /// When the string is not a duration.
    pub fn visible_wait_timeout(&self) -> Result<Duration, DurationError> {
        parse_duration(&self.visible_wait_timeout)
    }
}

/// The @incr increment types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum IncrementType {
    /// Every change, with before-images for updates when the table keeps them.
    #[default]
    Detail,
    /// The net change per key in each window.
    MinDelta,
    /// Inserts only.
    AppendOnly,
}

impl IncrementType {
    /// The value @incr takes in its `incrementType` argument (`DETAIL`, `MIN_DELTA`, `APPEND_ONLY`).
    pub fn as_sql(self) -> &'static str {
        match self {
            Self::Detail => "DETAIL",
            Self::MinDelta => "MIN_DELTA",
            Self::AppendOnly => "APPEND_ONLY",
        }
    }
}

/// A Flink-connector compatible offset table (`source.changelog.offset-table` + `consumer-id`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.table) == has(self.consumerId)",
        "message": "offsets.table and offsets.consumerId are set together",
    },
]))]
pub struct OffsetsSpec {
    /// The offset table as db.table, reached over the source's query port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The consumer_id row the progress is written to; also the base of sink labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub consumer_id: Option<String>,
}

/// The most runner pods a snapshot is read by ([`SnapshotSpec::parallelism`]).
pub const MAX_SNAPSHOT_PARALLELISM: i32 = 64;

/// How the snapshot is read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSpec {
    /// Runner pods that read the snapshot at once (1 to 64; default 1). Above 1 the operator
    /// runs the snapshot as an Indexed Job of that many shards, each reading its own tablets
    /// (tablet id mod parallelism) at one T0 with its own labels and checkpoint, and starts the
    /// changelog from T0 once every shard is done. The TTL the sync needs counts
    /// expectedSnapshotDuration divided by it. Only with startup.mode snapshot or initial. A
    /// snapshot keeps the parallelism it started with; a change applies to the next consumer.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 64))]
    pub parallelism: i32,
}

fn default_parallelism() -> i32 {
    1
}

impl Default for SnapshotSpec {
    fn default() -> Self {
        Self {
            parallelism: default_parallelism(),
        }
    }
}

impl SnapshotSpec {
    /// One runner, today's default.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the snapshot is read by shards: parallelism above 1.
    pub fn sharded(&self) -> bool {
        self.parallelism > 1
    }

    /// The shards reading the snapshot: the parallelism, 1 when below 1 (which validation
    /// rejects).
    pub fn count(&self) -> u32 {
        u32::try_from(self.parallelism).unwrap_or(1).max(1)
    }
}

/// Checkpointing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointSpec {
    /// How often progress is saved; with 2PC the sink's loads are committed at each checkpoint.
    #[serde(default = "default_ten_seconds")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 64))]
    pub interval: String,
}

impl Default for CheckpointSpec {
    fn default() -> Self {
        Self {
            interval: default_ten_seconds(),
        }
    }
}

impl CheckpointSpec {
    /// The parsed `interval` (default 10s).
    ///
    /// # Errors
    /// When the string is not a duration.
    pub fn interval(&self) -> Result<Duration, DurationError> {
        parse_duration(&self.interval)
    }
}

/// What to do when the offset has expired from the source's changelog.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnOffsetExpired {
    /// Start again under a new consumer id: fresh snapshot, sink rebuilt.
    #[default]
    Reinitialize,
    /// Stop in phase Failed and wait for a person.
    Fail,
}

/// What a sync does when the source table's columns change (`spec.sink.doris.schemaChange`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SchemaChangePolicy {
    /// Follow what can be followed (ADD/DROP COLUMN on a sink table dcs may change), stop on the
    /// rest.
    #[default]
    Evolve,
    /// Stop on any change, phase Blocked with the change described, until a person acts.
    Fail,
    /// Keep the sink's columns: new source columns are not written, dropped ones are written as
    /// NULL.
    Ignore,
}

impl SchemaChangePolicy {
    /// The word the spec uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evolve => "evolve",
            Self::Fail => "fail",
            Self::Ignore => "ignore",
        }
    }
}

/// The sink: exactly one of doris or stdout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.doris) != has(self.stdout)",
        "message": "set exactly one sink: doris or stdout",
    },
]))]
pub struct SinkSpec {
    /// Write into a Doris table with Stream Load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doris: Option<DorisSink>,
    /// Print one changelog record per line on the runner's standard output (for debugging).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<StdoutSink>,
}

/// A Doris table written with Stream Load (the Flink connector's sink options, camelCased).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.deadLetter) || self.deadLetter.table != self.table",
        "message": "deadLetter.table is the sink table itself; name another table, e.g. db.t_rejected",
        "fieldPath": ".deadLetter.table",
    },
    {
        "rule": "!has(self.deadLetter) || !self.deadLetter.table.matches('^[^.]+[.][^.]+$') || !self.table.matches('^[^.]+[.][^.]+$') || self.deadLetter.table.split('.')[0] == self.table.split('.')[0]",
        "message": "deadLetter.table must be in the sink table's database (its loads share the sink's labels and two-phase commit); write it as <sink database>.<table>",
        "fieldPath": ".deadLetter.table",
    },
]))]
pub struct DorisSink {
    /// FE HTTP endpoints as host:port.
    #[schemars(length(min = 1))]
    pub fe_nodes: Vec<String>,
    /// BE HTTP endpoints as host:port, used directly when autoRedirect is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_nodes: Option<Vec<String>>,
    /// Send Stream Load to the FE and follow its redirect to a BE.
    #[serde(default = "default_true")]
    pub auto_redirect: bool,
    /// The target table as db.table.
    pub table: String,
    /// The Secret holding the Doris user and password.
    pub credentials: Credentials,
    /// Prefix of Stream Load labels, which read labelPrefix-consumerId-checkpointId-seq.
    /// Letters, digits, '_' and '-'.
    #[serde(default = "default_label_prefix")]
    #[schemars(length(min = 1, max = 32))]
    pub label_prefix: String,
    /// Exactly-once with two-phase commit aligned with checkpoints.
    #[serde(default = "default_true")]
    pub enable2pc: bool,
    /// Apply deletes (a delete sign on upsert rows); false drops them.
    #[serde(default = "default_true")]
    pub enable_delete: bool,
    /// Drop update-before events; false sends them as deletes (upsert mode).
    #[serde(default = "default_true")]
    pub ignore_update_before: bool,
    /// upsert keeps the latest row per key; changelog appends every event with dcs_op, dcs_tso and dcs_lsn.
    #[serde(default)]
    pub mode: SinkMode,
    /// When a Stream Load is sent.
    #[serde(default)]
    pub batch: BatchSpec,
    /// Retries of a failed Stream Load before the runner fails.
    #[serde(default = "default_max_retries")]
    #[schemars(range(min = 0))]
    pub max_retries: i32,
    /// Stream Load headers (Flink `sink.properties.*`), e.g. format: json.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// Creating the target table when it does not exist.
    #[serde(default)]
    pub create_table: CreateTableSpec,
    /// What the sync does when the source table's columns change (ADD or DROP COLUMN; Doris
    /// refuses RENAME and MODIFY COLUMN on a table with the changelog). evolve (the default):
    /// the sink table follows (columns added and dropped) when dcs may change it
    /// (createTable.enabled), and the sync stops, phase Blocked naming the columns, on what it
    /// cannot follow; fail: stop on any change, phase Blocked with the change described, until
    /// a person sets evolve or ignore; ignore: keep the sink's columns (new source columns are
    /// not written, a dropped one is written as NULL), the status listing what is ignored.
    /// Applies when every source column is read: fail and ignore are refused with a
    /// source.columns list, whose columns never change.
    #[serde(default)]
    pub schema_change: SchemaChangePolicy,
    /// TLS on every connection to the sink cluster: FE and BE HTTP (Stream Load, 2PC) and MySQL.
    /// Plaintext when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// Rows the sink refuses (a value that does not fit, a constraint) go to this table with the
    /// reason, the source position and the row as JSON, and the sync goes on. Without it a
    /// refused row stops the sync, naming the column and the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterSpec>,
}

/// The dead-letter table of a Doris sink.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterSpec {
    /// The table as db.table, in the sink table's database: created when missing if
    /// createTable.enabled, checked otherwise. Its rows are loaded with the sink's rows, in the
    /// same checkpoint (exactly once under enable2pc).
    #[schemars(regex(pattern = r"^[^.`\s]+\.[^.`\s]+$"))]
    pub table: String,
}

/// Why `spec.sink.doris.deadLetter.table` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadLetterError {
    /// Not `db.table`.
    #[error(transparent)]
    Table(#[from] TableRefError),
    /// The sink table itself.
    #[error("{table} is the sink table itself; name another table, e.g. {database}.t_rejected")]
    SinkTable {
        /// The table.
        table: String,
        /// The sink database.
        database: String,
    },
    /// In another database than the sink table.
    #[error(
        "{table} is not in the sink table's database {database} (its loads share the sink's labels \
         and two-phase commit); write it as {database}.<table>"
    )]
    OtherDatabase {
        /// The table.
        table: String,
        /// The sink database.
        database: String,
    },
}

fn default_true() -> bool {
    true
}

fn default_label_prefix() -> String {
    "dcs".to_owned()
}

fn default_max_retries() -> i32 {
    3
}

impl DorisSink {
    /// The target table split into database and table.
    ///
    /// # Errors
    /// When `table` is not `db.table`.
    pub fn table_ref(&self) -> Result<TableRef, TableRefError> {
        self.table.parse()
    }

    /// The dead-letter table, if one is set: `db.table`, in the sink table's database and not
    /// the sink table (the one rule, used by validation and the runner). A sink table that is not
    /// `db.table` is reported by [`DorisSink::table_ref`], not here.
    ///
    /// # Errors
    /// What is wrong with `deadLetter.table`.
    pub fn dead_letter_ref(&self) -> Result<Option<TableRef>, DeadLetterError> {
        let Some(dead_letter) = &self.dead_letter else {
            return Ok(None);
        };
        let table: TableRef = dead_letter.table.parse()?;
        let Ok(sink) = self.table_ref() else {
            return Ok(Some(table));
        };
        if table == sink {
            return Err(DeadLetterError::SinkTable {
                table: table.to_string(),
                database: sink.database,
            });
        }
        if table.database != sink.database {
            return Err(DeadLetterError::OtherDatabase {
                table: table.to_string(),
                database: sink.database,
            });
        }
        Ok(Some(table))
    }
}

/// TLS towards one Doris cluster (one-way: the server proves who it is; no client certificate).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.caBundle) || !has(self.insecureSkipVerify) || !self.insecureSkipVerify",
        "message": "caBundle and insecureSkipVerify contradict each other: keep caBundle to verify the certificates, or remove it to skip verification",
    },
    {
        "rule": "(has(self.enabled) && self.enabled) || (!has(self.caBundle) && !has(self.serverName) && (!has(self.insecureSkipVerify) || !self.insecureSkipVerify))",
        "message": "caBundle, serverName and insecureSkipVerify only apply with enabled: true",
    },
]))]
pub struct TlsSpec {
    /// Connect over TLS (https://, grpc+tls://, the MySQL SSL upgrade); nothing falls back to
    /// plaintext.
    #[serde(default)]
    pub enabled: bool,
    /// The CA certificates (PEM) that sign the cluster's certificates; the public web roots
    /// (Mozilla's, built in) when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundleRef>,
    /// The name the certificates must hold, when it differs from the hosts dialled (e.g. one name
    /// for every node). The host of each address when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub server_name: Option<String>,
    /// Accept any certificate, unverified (testing only: anyone on the path can read the
    /// credentials). Shown by `dcs-runner check` and in the status while on.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl TlsSpec {
    /// Whether TLS is on (the block present with enabled: true).
    pub fn is_enabled(tls: Option<&Self>) -> bool {
        tls.is_some_and(|t| t.enabled)
    }
}

/// Where a CA bundle (PEM) is kept: exactly one of secretKeyRef or configMapKeyRef.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.secretKeyRef) != has(self.configMapKeyRef)",
        "message": "set exactly one of secretKeyRef or configMapKeyRef",
    },
]))]
pub struct CaBundleRef {
    /// A key of a Secret in the sync's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<KeyRef>,
    /// A key of a ConfigMap in the sync's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<KeyRef>,
}

impl CaBundleRef {
    /// `key ca.crt of Secret doris-ca` (or `of ConfigMap`), for messages.
    pub fn describe(&self) -> String {
        match (&self.secret_key_ref, &self.config_map_key_ref) {
            (Some(r), _) => format!("key {} of Secret {}", r.key, r.name),
            (None, Some(r)) => format!("key {} of ConfigMap {}", r.key, r.name),
            (None, None) => "no key".to_owned(),
        }
    }
}

/// The variable naming the file that holds the source's CA bundle (PEM) in the runner's
/// environment; the operator mounts `spec.source.tls.caBundle` there.
pub const SOURCE_CA_FILE_ENV: &str = "DCS_SOURCE_TLS_CA_FILE";
/// The variable naming the file that holds the sink's CA bundle (PEM); the operator mounts
/// `spec.sink.doris.tls.caBundle` there.
pub const SINK_CA_FILE_ENV: &str = "DCS_SINK_TLS_CA_FILE";

/// One key of a Secret or ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// The object's name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The key holding the PEM, e.g. ca.crt.
    #[schemars(length(min = 1))]
    pub key: String,
}

/// How sink rows represent changes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SinkMode {
    /// The latest row per key; deletes set __DORIS_DELETE_SIGN__.
    #[default]
    Upsert,
    /// Every event appended as a row with dcs_op (+I, -U, +U, -D), dcs_tso and dcs_lsn.
    Changelog,
}

/// Stream Load batching: a load is sent when any limit is reached.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchSpec {
    /// Rows per load.
    #[serde(default = "default_max_rows")]
    #[schemars(range(min = 1))]
    pub max_rows: i64,
    /// Bytes per load as a quantity, e.g. 10Mi.
    #[serde(default = "default_max_bytes")]
    #[schemars(length(max = 64))]
    pub max_bytes: String,
    /// Longest time a row waits before its load is sent.
    #[serde(default = "default_ten_seconds")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h))+$"), length(max = 64))]
    pub interval: String,
}

fn default_max_rows() -> i64 {
    50_000
}

fn default_max_bytes() -> String {
    "10Mi".to_owned()
}

impl Default for BatchSpec {
    fn default() -> Self {
        Self {
            max_rows: default_max_rows(),
            max_bytes: default_max_bytes(),
            interval: default_ten_seconds(),
        }
    }
}

impl BatchSpec {
    /// The parsed `maxBytes` (default 10Mi) in bytes.
    ///
    /// # Errors
    /// When the string is not a byte quantity.
    pub fn max_bytes(&self) -> Result<u64, QuantityError> {
        parse_byte_quantity(&self.max_bytes)
    }

    /// The parsed `interval` (default 10s).
    ///
    /// # Errors
    /// When the string is not a duration.
    pub fn interval(&self) -> Result<Duration, DurationError> {
        parse_duration(&self.interval)
    }
}

/// Creating the sink table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTableSpec {
    /// Create the target table from the source's schema when it does not exist.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Table properties for CREATE TABLE, e.g. replication_num: "1".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// AUTO PARTITION BY RANGE (date_trunc(key, unit)) for the created table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_partition: Option<AutoPartition>,
}

impl Default for CreateTableSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            properties: BTreeMap::new(),
            auto_partition: None,
        }
    }
}

/// Automatic range partitioning of the created table.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoPartition {
    /// The date or datetime column to partition by.
    pub key: String,
    /// The partition width.
    pub unit: PartitionUnit,
}

/// Partition widths of date_trunc.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PartitionUnit {
    /// One partition per year.
    Year,
    /// One partition per quarter.
    Quarter,
    /// One partition per month.
    Month,
    /// One partition per week.
    Week,
    /// One partition per day.
    Day,
    /// One partition per hour.
    Hour,
}

impl PartitionUnit {
    /// The unit as date_trunc takes it (`year`, `month`, …).
    pub fn as_sql(self) -> &'static str {
        match self {
            Self::Year => "year",
            Self::Quarter => "quarter",
            Self::Month => "month",
            Self::Week => "week",
            Self::Day => "day",
            Self::Hour => "hour",
        }
    }
}

/// The debugging sink.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StdoutSink {
    /// The line format.
    #[serde(default)]
    pub format: StdoutFormat,
}

/// Line formats of the stdout sink.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StdoutFormat {
    /// One JSON object per changelog record.
    #[default]
    Json,
}

/// How the runner pod is run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerSpec {
    /// The runner image; the operator's default when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// CPU and memory requests and limits of the runner container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node labels the runner pod must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the runner pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// The service account of the runner pod; it needs access to its checkpoint ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Annotations added to the runner pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// Extra environment variables of the runner container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

/// A table named as `db.table`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TableRef {
    /// The database.
    pub database: String,
    /// The table.
    pub table: String,
}

impl TableRef {
    /// The reference quoted for SQL: `` `db`.`table` ``, each part by [`quote_ident`].
    pub fn quoted(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }
}

/// A quoted SQL identifier: `` `name` ``, a backtick inside doubled, so a name cannot close the
/// quote. The one rule of dcs (the Doris client re-exports it); it lives here because
/// [`TableRef`] quotes with it and this crate depends on no other.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

impl fmt::Display for TableRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.database, self.table)
    }
}

/// Why a table identifier is not `db.table`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableRefError {
    /// The identifier has no dot, or more than one, or an empty part.
    #[error(
        "{input:?} is not of the form db.table; write the database and the table, e.g. \"test.student\""
    )]
    Shape {
        /// The identifier as written.
        input: String,
    },
    /// A part holds a backtick, white space or a control character (NUL among them), which dcs
    /// would have to quote away or which Doris does not take in a name.
    #[error(
        "{input:?} holds a backtick, white space or a control character; write plain names, e.g. \"test.student\""
    )]
    Characters {
        /// The identifier as written.
        input: String,
    },
}

impl FromStr for TableRef {
    type Err = TableRefError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let shape = || TableRefError::Shape {
            input: input.to_owned(),
        };
        let (database, table) = input.split_once('.').ok_or_else(shape)?;
        if database.is_empty() || table.is_empty() || table.contains('.') {
            return Err(shape());
        }
        if input
            .chars()
            .any(|c| c == '`' || c.is_whitespace() || c.is_control())
        {
            return Err(TableRefError::Characters {
                input: input.to_owned(),
            });
        }
        Ok(Self {
            database: database.to_owned(),
            table: table.to_owned(),
        })
    }
}
