//! SQL: lexer, parser and executor for the statements clients send (see the crate README).
//!
//! CONTRACT: [`Session`] and [`execute`] are what the MySQL front end, the HTTP statement API and
//! Flight SQL call. Every statement goes through here, so all three protocols agree.
//!
//! Layout: [`lexer`] → [`parser`] (pure, never panics) → [`ast`] → `exec` (statements against the
//! engine) and `eval` (expressions plus the shared relational steps: filter, aggregate, project,
//! order, limit — tables, `@incr` output and `information_schema` all go through the same path).
//!
//! Emulator choices where Doris's documentation is silent:
//! - the default session `time_zone` is `UTC` (a real FE uses its host zone); `SET time_zone`
//!   accepts offsets (`+08:00`), `UTC`, `CST` and IANA names;
//! - `change_visible_timeout_ms` defaults to [`DEFAULT_CHANGE_VISIBLE_TIMEOUT_MS`];
//! - `DECIMAL` without precision is `DECIMAL(9, 0)`, `VARCHAR` without length `VARCHAR(65533)`;
//! - syntax errors are MySQL error 1064 with
//!   `errCode = 2, detailMessage = Syntax error in line N:\n<line>\n<caret>\nEncountered: <token>\nExpected: <what>`.

pub mod ast;
mod eval;
mod exec;
mod keyed;
pub mod lexer;
pub mod parser;
mod time;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::Doris;
use crate::error::{DorisError, ER_PARSE, Result};
use crate::types::{QueryResult, ResultSet};

pub use exec::hidden;
pub use time::DEFAULT_TIME_ZONE;

/// What `SELECT VERSION()` / `@@version` report (Doris presents itself as MySQL 5.7.99).
pub const MYSQL_VERSION: &str = "5.7.99";
/// `@@version_comment` (the mysql CLI prints it on connect).
pub const VERSION_COMMENT: &str = "Doris version doris-5.0.0-emu";
/// The FE/BE version string of SHOW FRONTENDS / SHOW BACKENDS.
pub const DORIS_VERSION: &str = "doris-5.0.0-emu";
/// Default of the session variable `change_visible_timeout_ms` (the Doris default is not
/// documented; the emulator picks 5 s).
pub const DEFAULT_CHANGE_VISIBLE_TIMEOUT_MS: i64 = 5000;
const DEFAULT_CHANGE_VISIBLE_TIMEOUT_MS_STR: &str = "5000";

static NEXT_CONNECTION_ID: AtomicU32 = AtomicU32::new(1);

/// A client session: current database and session variables.
#[derive(Debug, Clone)]
pub struct Session {
    /// Authenticated user.
    pub user: String,
    /// `USE db`.
    pub current_db: Option<String>,
    /// Session variables set with `SET` (lower-cased names), e.g. `time_zone`,
    /// `show_hidden_columns`, `change_visible_timeout_ms`. User variables (`SET @x = 1`) are kept
    /// under `@x`.
    pub variables: BTreeMap<String, String>,
    /// `CONNECTION_ID()`: unique per session in this process.
    pub connection_id: u32,
}

impl Session {
    /// A fresh session for `user` with Doris's defaults.
    pub fn new(user: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            current_db: None,
            variables: BTreeMap::new(),
            connection_id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A fresh session of one of `doris`'s front ends: `time_zone` starts as the FE host's.
    pub fn on(doris: &crate::Doris, user: impl Into<String>) -> Self {
        let mut session = Self::new(user);
        if doris.config.time_zone != DEFAULT_TIME_ZONE {
            session
                .variables
                .insert("time_zone".into(), doris.config.time_zone.clone());
        }
        session
    }

    /// The session's `time_zone` (set value or the emulator default).
    pub fn time_zone(&self) -> String {
        self.variables
            .get("time_zone")
            .cloned()
            .unwrap_or_else(|| DEFAULT_TIME_ZONE.to_string())
    }
}

/// Receives a SELECT's rows a part at a time ([`execute_streamed`]).
pub type RowSink<'a> = &'a mut (dyn FnMut(ResultSet) -> Result<()> + Send);

/// Parse and run one statement (a trailing `;` and leading `/* comments */` are allowed).
pub async fn execute(doris: &Doris, session: &mut Session, sql: &str) -> Result<QueryResult> {
    execute_streamed(doris, session, sql, None).await
}

/// [`execute`], with a SELECT's rows handed to `sink` in parts as they are made (the parts share
/// one column list; an error from `sink` ends the statement with it). The `Rows` result then
/// holds the columns and no rows. A SELECT of columns from one table's rows runs a part at a
/// time, so a reader of a big table (the Flight SQL path) never holds it whole as values.
pub async fn execute_streamed(
    doris: &Doris,
    session: &mut Session,
    sql: &str,
    sink: Option<RowSink<'_>>,
) -> Result<QueryResult> {
    doris.counters.hit("sql_statement");
    let stmt = parse(sql)?;
    let Some(stall) = doris.faults.sql_stall(sql) else {
        return exec::run(doris, session, stmt, sink).await;
    };
    doris.counters.hit("sql_stalled");
    if stall.applied {
        let result = exec::run(doris, session, stmt, sink).await;
        doris.faults.hold(&stall).await;
        return result;
    }
    doris.faults.hold(&stall).await;
    Err(DorisError::analysis(
        "statement held by the sql_stall fault and not run",
    ))
}

/// Parse one statement into its tree, with Doris's error for bad syntax.
pub fn parse(sql: &str) -> Result<ast::Statement> {
    parser::parse(sql).map_err(|e| parse_error(sql, e))
}

fn parse_error(sql: &str, e: parser::ParseError) -> DorisError {
    match e {
        parser::ParseError::Analysis(m) => DorisError::analysis(m),
        parser::ParseError::Syntax {
            pos,
            found,
            expected,
        } => {
            let pos = pos.min(sql.len());
            let before = sql.get(..pos).unwrap_or("");
            let line_no = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
            let line_end = sql
                .get(pos..)
                .and_then(|r| r.find('\n'))
                .map(|i| pos + i)
                .unwrap_or(sql.len());
            let line = sql.get(line_start..line_end).unwrap_or("");
            let col = sql
                .get(line_start..pos)
                .map(|p| p.chars().count())
                .unwrap_or(0);
            let mut msg = format!(
                "errCode = 2, detailMessage = Syntax error in line {line_no}:\n{line}\n{}^\nEncountered: {found}",
                " ".repeat(col)
            );
            if !expected.is_empty() {
                msg.push_str(&format!("\nExpected: {expected}"));
            }
            DorisError::new(ER_PARSE, msg)
        }
    }
}
