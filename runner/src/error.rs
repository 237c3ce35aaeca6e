//! The runner's one error type.

use std::path::PathBuf;

use dcs_doris_client::mysql_target::{Failure, Side};

/// Everything that can stop the runner, each with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The checkpoint directory is used by another runner.
    #[error(
        "checkpoint directory {dir} is locked by another dcs-runner; stop that runner or pass a different --checkpoint-dir"
    )]
    CheckpointLocked {
        /// The directory.
        dir: PathBuf,
    },
    /// The stored checkpoint changed under us: another runner owns this sync now, or the
    /// operator fenced it (the sync is deleted or starts again).
    #[error(
        "checkpoint was changed by another runner or the operator (expected {expected}, found {found}); this runner stops without committing"
    )]
    Fenced {
        /// The revision this runner last wrote or read, e.g. `resourceVersion 41`.
        expected: String,
        /// The revision in the store now, e.g. `resourceVersion 57`.
        found: String,
    },
    /// A save whose answer was lost, then the store found changed by someone else (another
    /// runner's claim, the operator's `dcs.dev/fenced`): this runner lost the checkpoint, and
    /// whether its save is what the new owner loaded is unknown, so the loads it lists are neither
    /// committed nor aborted here; the new owner commits them, or the operator's cleanup aborts
    /// them.
    #[error(
        "checkpoint was changed by another runner or the operator after a save whose answer was lost (found {found}); this runner stops without committing or aborting that checkpoint's loads"
    )]
    FencedAfterUnclearSave {
        /// The revision in the store now, and what changed, e.g. `resourceVersion 57 (annotation dcs.dev/fenced)`.
        found: String,
    },
    /// Another producer took this run's Kafka transactional id: a newer runner of the same sync
    /// owns the topic's writes now.
    #[error(
        "Kafka transactional id {transactional_id} was taken by another producer (a newer runner of this sync); this runner stops without committing"
    )]
    KafkaFenced {
        /// The transactional id.
        transactional_id: String,
    },
    /// A label this run sends for the first time is already pre-committed: another runner of the
    /// same consumer is still loading (one the store has fenced, or one that has not noticed yet).
    #[error(
        "Stream Load label {label} is already pre-committed (transaction {txn_id}) by another runner of this sync that is still loading; this runner stops without adopting or aborting it, and its restart takes the checkpoint over again"
    )]
    LabelInUse {
        /// The label.
        label: String,
        /// The other runner's transaction.
        txn_id: i64,
    },
    /// The stored checkpoint cannot be read.
    #[error(
        "checkpoint {location} is unreadable: {reason}; fix or delete it to start from the startup mode"
    )]
    CheckpointCorrupt {
        /// File or ConfigMap it came from.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// The checkpoint was written by a newer runner.
    #[error(
        "checkpoint {location} has format version {found}, this runner reads up to {supported}; run a newer dcs-runner"
    )]
    CheckpointVersion {
        /// File or ConfigMap it came from.
        location: String,
        /// Version found.
        found: u32,
        /// Highest version this build reads.
        supported: u32,
    },
    /// The checkpoint store (a ConfigMap) could not be read or written.
    #[error("checkpoint {location}: {reason}")]
    CheckpointStore {
        /// The store, e.g. `configmap ns/name`.
        location: String,
        /// What went wrong.
        reason: String,
    },
    /// A checkpoint write got no answer and reading the store back got none either: whether the
    /// checkpoint was saved is unknown, so nothing it lists is committed or aborted; the next
    /// start reads the store and settles it.
    #[error(
        "checkpoint {location}: a save got no clear answer and the store could not be read back to find out whether it was applied ({reason}); this runner stops without committing or aborting that checkpoint's loads, and its restart settles them from what was stored"
    )]
    CheckpointSaveUnknown {
        /// The store, e.g. `configmap ns/name`.
        location: String,
        /// What went wrong.
        reason: String,
    },
    /// The offset table cannot be used; the start fails rather than guess
    /// (docs/ARCHITECTURE.md §3.1).
    #[error("offset table {table}: {reason}")]
    OffsetTable {
        /// `db.table`.
        table: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// File-system error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Doris rejected the source user or password.
    #[error(
        "Doris rejected the source credentials ({detail}); check the user and password in the source Secret"
    )]
    SourceCredentials {
        /// What Doris said, never including the password.
        detail: String,
    },
    /// An `@incr` window is not readable yet (Doris 5100/5101); the same window is retried.
    #[error("{message}")]
    WindowNotReady {
        /// The Doris error code, 5100 or 5101.
        code: u16,
        /// Doris's message, verbatim.
        message: String,
    },
    /// Doris answered a source request with an error; its message is kept verbatim.
    #[error("{context}: {message}")]
    Doris {
        /// What the runner was doing.
        context: String,
        /// Doris's message.
        message: String,
    },
    /// Doris no longer knows the Flight SQL session (token expired or evicted); reconnect.
    #[error("Doris dropped the Flight SQL session: {message}")]
    FlightSessionLost {
        /// Doris's message.
        message: String,
    },
    /// A Doris endpoint could not be reached or answered something unreadable.
    #[error("{context}: {reason}; check that the Doris FE/BE is up and reachable from the runner")]
    SourceUnavailable {
        /// What the runner was doing.
        context: String,
        /// The cause.
        reason: String,
    },
    /// Doris "now" could not be read from any FE.
    #[error("Failed to resolve current Doris timestamp after {attempts} attempts: {last}")]
    CurrentTimestamp {
        /// Requests made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// Doris's clock is behind the offset the runner would start from.
    #[error(
        "Current Doris timestamp moved backwards: now {now} is before the changelog offset {start}"
    )]
    TimestampBackwards {
        /// The offset the next window starts at.
        start: String,
        /// Doris "now", floored to seconds.
        now: String,
    },
    /// The changelog no longer holds the changes from the offset on, or is about to drop them
    /// (`source::retention`): reading on would leave a silent gap.
    #[error(
        "Changelog offset {offset} has expired according to {ttl_key} ({ttl_seconds} s): Doris's now is {now}, so changes committed at or before {edge} {}; reading on would leave a silent gap in the sink. Re-initialise the sync (a fresh snapshot under a new consumer id): the operator does it when spec.onOffsetExpired is reinitialize; standalone, remove the checkpoint and start again in initial mode",
        expiry_phrase(*.gone, *.margin_seconds)
    )]
    OffsetExpired {
        /// The offset (`@incr` start) that expired.
        offset: String,
        /// `changelog.ttl_seconds` or `binlog.ttl_seconds`.
        ttl_key: String,
        /// The TTL when checked.
        ttl_seconds: u64,
        /// Doris's now when checked.
        now: String,
        /// The retention edge.
        edge: String,
        /// Past the edge already, not only within the margin of it.
        gone: bool,
        /// The safety margin applied.
        margin_seconds: u64,
    },
    /// Pre-committed loads Doris aborted before their commit cannot be made again: the sink has
    /// a gap that only a re-initialisation closes (treated as an expired offset).
    #[error(
        "Changelog offset cannot be kept: pre-committed loads {labels} were aborted by Doris before their commit ({doris}), and {reason}; re-initialise the sync (a fresh snapshot under a new consumer id): the operator does it when spec.onOffsetExpired is reinitialize"
    )]
    LoadsLost {
        /// The lost loads' labels.
        labels: String,
        /// What Doris said about the first.
        doris: String,
        /// Why they cannot be loaded again.
        reason: String,
    },
    /// The run went back to its stored checkpoint (lost loads of an upsert sink) and reads on from
    /// there; never leaves the pipeline.
    #[error("rewound to the stored checkpoint: {reason}")]
    Rewound {
        /// Why.
        reason: String,
    },
    /// A changelog row carries an operation this runner does not know.
    #[error("Unsupported Doris binlog operation {op}")]
    UnsupportedOperation {
        /// The `__DORIS_BINLOG_OP__` value.
        op: i64,
    },
    /// A changelog or snapshot result is not shaped as expected.
    #[error("unexpected result from Doris ({context}): {reason}")]
    UnexpectedResult {
        /// What was being read, e.g. `changelog of db.t`.
        context: String,
        /// What is wrong.
        reason: String,
    },
    /// The source part of the spec cannot be used.
    #[error("invalid source configuration: {reason}")]
    SourceConfig {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The manifest, the environment or the command line cannot be used.
    #[error("invalid configuration: {reason}")]
    Config {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The sink refused the rows for a reason retrying cannot fix, or retries ran out.
    #[error("{message}")]
    Sink {
        /// Doris's message (and the ErrorURL when there is one), verbatim after a short context.
        message: String,
    },
    /// The changelog after a sharded snapshot cannot start: not every shard is done at T0.
    #[error(
        "the changelog starts from T0 once all {count} snapshot shards are done, and they are not: {reason}"
    )]
    ShardsNotDone {
        /// Shards in all.
        count: u32,
        /// Which shards are not done, and why.
        reason: String,
    },
    /// The table's tablets changed under the snapshot (`dcs_crds::tablets`): what was read
    /// cannot be trusted, so the snapshot is read again under a new consumer (exit 5, which the
    /// operator answers with a re-initialisation).
    #[error("{reason}")]
    SnapshotTabletsChanged {
        /// What changed, and what happens now.
        reason: String,
    },
    /// The source table's columns changed in a way the sync does not follow
    /// (`spec.sink.doris.schemaChange`): it stops before a row with the new columns is written.
    #[error("{message}")]
    SchemaChanged {
        /// The change, and what to do.
        message: String,
    },
    /// The source table fails a precondition the run cannot go on without (one of
    /// `dcs_crds::preconditions`, e.g. deletes that never reach the changelog).
    #[error("{message}")]
    SourcePrecondition {
        /// The condition reason the operator reports it with, e.g. `LightDeleteEnabled`.
        reason: &'static str,
        /// What is wrong and the fix.
        message: String,
    },
    /// A test hook stopped the pipeline at a chosen point (tests only).
    #[error("stopped by a test hook: {point}")]
    Injected {
        /// Where it stopped.
        point: &'static str,
    },
}

fn expiry_phrase(gone: bool, margin_seconds: u64) -> String {
    if gone {
        "are gone".to_owned()
    } else {
        format!(
            "are about to go (the offset is within the {margin_seconds} s safety margin of that edge)"
        )
    }
}

/// Exit codes of `dcs-runner` (documented in `--help` and runner/README.md).
pub mod exit_code {
    /// The sync finished (snapshot mode) or stopped on request.
    pub const DONE: u8 = 0;
    /// Any other failure.
    pub const FAILURE: u8 = 1;
    /// The manifest, environment or command line is wrong.
    pub const CONFIG: u8 = 2;
    /// The changelog offset has expired: the runner's own retention check, or minDelta's error.
    pub const OFFSET_EXPIRED: u8 = dcs_crds::checkpoint::OFFSET_EXPIRED_EXIT_CODE;
    /// Another runner owns the checkpoint.
    pub const FENCED: u8 = 4;
    /// The table's tablets changed under the snapshot: it must be read again under a new
    /// consumer.
    pub const TABLETS_CHANGED: u8 = dcs_crds::checkpoint::TABLETS_CHANGED_EXIT_CODE;
}

impl From<Failure> for Error {
    /// A MySQL call to an FE that failed, as the side it met reports it, with what to check.
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::LoginRefused {
                side: Side::Source,
                detail,
            } => Self::SourceCredentials { detail },
            Failure::LoginRefused {
                side: Side::Sink,
                detail,
            } => Self::Sink {
                message: format!(
                    "Doris rejected the sink credentials ({detail}); check the user and password in the sink Secret (DCS_SINK_USERNAME / DCS_SINK_PASSWORD)"
                ),
            },
            Failure::Unreachable {
                side: Side::Source,
                reason,
            } => Self::SourceUnavailable {
                context: "connecting to the source FE query port".into(),
                reason: format!("{reason} (check source.feNodes and source.queryPort)"),
            },
            Failure::Unreachable {
                side: Side::Sink,
                reason,
            } => Self::Sink {
                message: format!(
                    "cannot reach the sink FE query port: {reason}; check sink.doris.feNodes; the MySQL port is the source's queryPort when the sink FE is a source FE, else 9030, and that the FE is up"
                ),
            },
            Failure::Statement {
                side: Side::Source,
                context,
                message,
            } => Self::Doris { context, message },
            Failure::Statement {
                side: Side::Sink,
                context,
                message,
            } => Self::Sink {
                message: format!("{context}: {message}"),
            },
        }
    }
}

impl Error {
    /// Whether the failure is a transient "window not ready" that retries the same window.
    pub fn is_window_not_ready(&self) -> bool {
        matches!(self, Self::WindowNotReady { .. })
    }

    /// Whether Doris said the changelog offset has expired (`… offset has expired according to
    /// changelog.ttl_seconds`, or the `binlog.*` spelling).
    pub fn is_offset_expired(&self) -> bool {
        matches!(self, Self::OffsetExpired { .. } | Self::LoadsLost { .. })
            || self
                .to_string()
                .contains(dcs_crds::checkpoint::DORIS_OFFSET_EXPIRED)
    }

    /// The process exit code this error stops `dcs-runner` with (see [`exit_code`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config { .. } | Self::SourceConfig { .. } | Self::SchemaChanged { .. } => {
                exit_code::CONFIG
            }
            Self::Fenced { .. }
            | Self::FencedAfterUnclearSave { .. }
            | Self::KafkaFenced { .. }
            | Self::CheckpointLocked { .. }
            | Self::LabelInUse { .. } => exit_code::FENCED,
            Self::SnapshotTabletsChanged { .. } => exit_code::TABLETS_CHANGED,
            e if e.is_offset_expired() => exit_code::OFFSET_EXPIRED,
            _ => exit_code::FAILURE,
        }
    }

    /// A CamelCase reason for the checkpoint's `lastError` and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Config { .. } | Self::SourceConfig { .. } => "InvalidConfiguration",
            Self::Fenced { .. }
            | Self::FencedAfterUnclearSave { .. }
            | Self::KafkaFenced { .. }
            | Self::CheckpointLocked { .. }
            | Self::LabelInUse { .. } => "Fenced",
            e if e.is_offset_expired() => dcs_crds::conditions::reasons::OFFSET_EXPIRED,
            Self::Sink { .. } => "StreamLoadFailed",
            Self::CheckpointStore { .. } | Self::CheckpointSaveUnknown { .. } => {
                "CheckpointStoreFailed"
            }
            Self::OffsetTable { .. } => "OffsetTableInvalid",
            Self::SourceCredentials { .. } => "SourceCredentials",
            Self::ShardsNotDone { .. } => "SnapshotShardsNotDone",
            Self::SnapshotTabletsChanged { .. } => {
                dcs_crds::conditions::reasons::SNAPSHOT_TABLETS_CHANGED
            }
            Self::SourcePrecondition { reason, .. } => reason,
            Self::SchemaChanged { .. } => dcs_crds::conditions::reasons::SCHEMA_CHANGED,
            _ => "SourceFailed",
        }
    }

    /// Wrap an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for the runner.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_tell_failures_apart() {
        let expired = Error::Doris {
            context: "reading changelog window".into(),
            message: "Changelog offset has expired according to changelog.ttl_seconds".into(),
        };
        assert_eq!(expired.exit_code(), exit_code::OFFSET_EXPIRED);
        assert_eq!(expired.reason(), "OffsetExpired");
        let fenced = Error::Fenced {
            expected: "resourceVersion 41".into(),
            found: "resourceVersion 57".into(),
        };
        assert_eq!(fenced.exit_code(), exit_code::FENCED);
        assert_eq!(
            fenced.to_string(),
            "checkpoint was changed by another runner or the operator (expected resourceVersion 41, found resourceVersion 57); this runner stops without committing"
        );
        let config = Error::Config { reason: "x".into() };
        assert_eq!(config.exit_code(), exit_code::CONFIG);
        let sink = Error::Sink {
            message: "Stream Load of label l failed: bad".into(),
        };
        assert_eq!(sink.exit_code(), exit_code::FAILURE);
    }
}
