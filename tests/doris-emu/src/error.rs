//! The emulator's one error type: what Doris would answer, with the MySQL error number it uses.

/// MySQL error number Doris uses for most analysis and execution errors (`ER_UNKNOWN_ERROR`).
pub const ER_UNKNOWN: u16 = 1105;
/// `ERR_INCR_WINDOW_NOT_READY` (docs/doris-protocols.md §1.6).
pub const ERR_INCR_WINDOW_NOT_READY: u16 = 5100;
/// `ERR_INCR_VISIBLE_WAIT_TIMEOUT` (docs/doris-protocols.md §1.6).
pub const ERR_INCR_VISIBLE_WAIT_TIMEOUT: u16 = 5101;
/// Access denied.
pub const ER_ACCESS_DENIED: u16 = 1045;
/// Unknown database.
pub const ER_BAD_DB: u16 = 1049;
/// Unknown table.
pub const ER_NO_SUCH_TABLE: u16 = 1146;
/// Syntax error.
pub const ER_PARSE: u16 = 1064;

/// An error as Doris reports it: a MySQL error number and the exact message text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DorisError {
    /// MySQL error number (1105 for most Doris errors, 5100/5101 for @incr windows).
    pub code: u16,
    /// The message exactly as Doris words it.
    pub message: String,
}

impl DorisError {
    /// An error with an explicit code.
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The common Doris analysis error: code 1105, `errCode = 2, detailMessage = <detail>`.
    pub fn analysis(detail: impl AsRef<str>) -> Self {
        Self::new(
            ER_UNKNOWN,
            format!("errCode = 2, detailMessage = {}", detail.as_ref()),
        )
    }

    /// A 1105 error whose message is used verbatim.
    pub fn plain(message: impl Into<String>) -> Self {
        Self::new(ER_UNKNOWN, message)
    }

    /// True for the @incr window errors a client retries (5100 / 5101).
    pub fn is_window_not_ready(&self) -> bool {
        matches!(
            self.code,
            ERR_INCR_WINDOW_NOT_READY | ERR_INCR_VISIBLE_WAIT_TIMEOUT
        )
    }

    /// Symbolic name of the window errors, for gRPC `doris-error-name` metadata.
    pub fn error_name(&self) -> Option<&'static str> {
        match self.code {
            ERR_INCR_WINDOW_NOT_READY => Some("ERR_INCR_WINDOW_NOT_READY"),
            ERR_INCR_VISIBLE_WAIT_TIMEOUT => Some("ERR_INCR_VISIBLE_WAIT_TIMEOUT"),
            _ => None,
        }
    }
}

/// Result alias used across the emulator.
pub type Result<T, E = DorisError> = std::result::Result<T, E>;
