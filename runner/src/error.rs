//! The runner's one error type.

use std::path::PathBuf;

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
    /// The stored checkpoint changed under us: another runner owns this sync now.
    #[error(
        "checkpoint was changed by another runner (expected revision {expected}, found {found}); this runner stops without committing"
    )]
    Fenced {
        /// Revision this runner last wrote or read.
        expected: u64,
        /// Revision found in the store.
        found: u64,
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
}

impl Error {
    /// Whether the failure is a transient "window not ready" that retries the same window.
    pub fn is_window_not_ready(&self) -> bool {
        matches!(self, Self::WindowNotReady { .. })
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
