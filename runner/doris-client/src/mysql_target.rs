//! A Doris FE's MySQL endpoint as one client: the hosts tried in turn, the user, TLS, and how long
//! a statement may take ([`MysqlTarget`]). The runner reads and changes tables through it on both
//! sides (the sink table's DDL, the source's columns, `dcs-runner check`).
//!
//! A failure says which side it met ([`Side`]) and what went wrong ([`Failure`]); what to tell the
//! user (which settings to check) is the caller's, since only it knows where they come from.

use std::fmt;
use std::time::Duration;

use dcs_crds::doris_table::{KeysModel, keys_model_of_ddl};
use dcs_crds::spec::TableRef;
use mysql_async::prelude::Queryable;

use crate::mysql::{
    ConnectFailure, connect_first_tls, decode_all, describe_connect_error, login_refused, within,
};
use crate::sql::string_literal;
use crate::table::TableReadError;
use crate::tls::Tls;

/// Which side a MySQL endpoint belongs to, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The source cluster.
    Source,
    /// The sink cluster.
    Sink,
}

impl Side {
    /// `source` or `sink`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Sink => "sink",
        }
    }
}

/// Why a [`MysqlTarget`] call failed, and on which side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The FE refused the login: the credentials are wrong.
    #[error("Doris rejected the {} credentials ({detail})", side.name())]
    LoginRefused {
        /// The side whose credentials were refused.
        side: Side,
        /// What Doris said, never including the password.
        detail: String,
    },
    /// No FE answered.
    #[error("cannot reach the {} FE query port: {reason}", side.name())]
    Unreachable {
        /// The side asked.
        side: Side,
        /// The last connection failure (no FE configured, or the last host's error).
        reason: String,
    },
    /// A statement failed, or its answer could not be read.
    #[error("{context}: {message}")]
    Statement {
        /// The side asked.
        side: Side,
        /// What was being done.
        context: String,
        /// Doris's message, or why its answer could not be read.
        message: String,
    },
}

/// A column of a Doris table as `information_schema.columns` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableColumn {
    /// Column name.
    pub name: String,
    /// `COLUMN_TYPE`, e.g. `varchar(64)`, `decimal(10,2)`, `datetime(3)`.
    pub column_type: String,
    /// `IS_NULLABLE = 'YES'`.
    pub nullable: bool,
    /// Part of the key (`COLUMN_KEY` not empty).
    pub is_key: bool,
    /// `COLUMN_DEFAULT` as Doris shows it (`None`: no default).
    pub default: Option<String>,
}

/// A Doris FE MySQL endpoint and the user to log in as. `Debug` never shows the password.
#[derive(Clone)]
pub struct MysqlTarget {
    /// FE hosts, tried in turn.
    pub hosts: Vec<String>,
    /// The MySQL port.
    pub port: u16,
    /// User.
    pub user: String,
    /// Password.
    pub password: String,
    /// Source or sink.
    pub side: Side,
    /// How long one statement may take before it counts as unanswered (the side's request
    /// timeout).
    pub deadline: Duration,
    /// TLS towards the side's cluster.
    pub tls: Tls,
}

impl fmt::Debug for MysqlTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MysqlTarget")
            .field("hosts", &self.hosts)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

impl MysqlTarget {
    /// Log in to the first FE that answers.
    ///
    /// # Errors
    /// [`Failure::LoginRefused`] at once on a rejected login, else [`Failure::Unreachable`] with
    /// the last connection failure.
    pub async fn connect(&self) -> Result<mysql_async::Conn, Failure> {
        let connected = connect_first_tls(
            &self.hosts,
            self.port,
            &self.user,
            &self.password,
            &self.tls,
        )
        .await;
        let reason = match connected {
            Ok(connected) => return Ok(connected.conn),
            Err(ConnectFailure::LoginRefused { error, .. }) => {
                return Err(Failure::LoginRefused {
                    side: self.side,
                    detail: login_refused(&error).unwrap_or_default().to_owned(),
                });
            }
            Err(ConnectFailure::NoAnswer { host, error }) => {
                describe_connect_error(&host, self.port, &self.tls, &error)
            }
            Err(ConnectFailure::NoNodes) => "no FE node configured".to_owned(),
        };
        Err(Failure::Unreachable {
            side: self.side,
            reason,
        })
    }

    fn error(&self, context: &str, e: mysql_async::Error) -> Failure {
        let message = match e {
            mysql_async::Error::Server(s) => s.message,
            other => other.to_string(),
        };
        self.failure(context, message)
    }

    /// An answer that could not be read ([`crate::mysql::decode`]).
    fn bad_answer(&self, e: &crate::Error) -> Failure {
        self.failure("reading the answer", e.to_string())
    }

    fn failure(&self, context: &str, message: String) -> Failure {
        Failure::Statement {
            side: self.side,
            context: context.to_owned(),
            message,
        }
    }

    /// Run one statement.
    ///
    /// # Errors
    /// Doris's message.
    pub async fn exec(&self, conn: &mut mysql_async::Conn, sql: &str) -> Result<(), Failure> {
        within(self.deadline, conn.query_drop(sql))
            .await
            .map_err(|e| {
                self.error(
                    &format!("{} statement {}", self.side.name(), first_line(sql)),
                    e,
                )
            })
    }

    /// The columns of `table` in table order; empty when the table does not exist.
    ///
    /// # Errors
    /// Doris's message.
    pub async fn columns(
        &self,
        conn: &mut mysql_async::Conn,
        table: &TableRef,
    ) -> Result<Vec<TableColumn>, Failure> {
        let sql = format!(
            "SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, COLUMN_DEFAULT \
             FROM information_schema.columns WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
            string_literal(&table.database),
            string_literal(&table.table)
        );
        let what = format!("reading the columns of {table}");
        let rows: Vec<mysql_async::Row> = within(self.deadline, conn.query(sql))
            .await
            .map_err(|e| self.error(&what, e))?;
        #[allow(clippy::type_complexity)] // the columns of one query, in its order
        let mut rows: Vec<(String, i64, String, String, Option<String>, Option<String>)> =
            decode_all(rows, &what).map_err(|e| self.bad_answer(&e))?;
        rows.sort_by_key(|r| r.1);
        Ok(rows
            .into_iter()
            .map(
                |(name, _, column_type, nullable, key, default)| TableColumn {
                    name,
                    column_type,
                    nullable: nullable.eq_ignore_ascii_case("yes"),
                    is_key: key.is_some_and(|k| !k.trim().is_empty()),
                    default,
                },
            )
            .collect())
    }

    /// The key model of `table` (from `SHOW CREATE TABLE`).
    ///
    /// # Errors
    /// Doris's message.
    pub async fn keys_model(
        &self,
        conn: &mut mysql_async::Conn,
        table: &TableRef,
    ) -> Result<KeysModel, Failure> {
        let what = format!("reading the definition of {table}");
        let ddl = tokio::time::timeout(
            self.deadline,
            crate::table::ddl(conn, &table.database, &table.table),
        )
        .await
        .unwrap_or_else(|_| {
            Err(TableReadError::Definition(crate::mysql::timed_out(
                "answer",
                self.deadline,
            )))
        })
        .map_err(|e| match e {
            TableReadError::Definition(e) => self.error(&what, e),
            TableReadError::BadDefinition { detail } => self.bad_answer(&crate::Error::BadRow {
                what: what.clone(),
                detail,
            }),
            other => self.failure(&what, format!("{other:?}")),
        })?;
        Ok(ddl.map_or(KeysModel::Unknown, |ddl| keys_model_of_ddl(&ddl)))
    }
}

fn first_line(sql: &str) -> &str {
    sql.lines().next().unwrap_or(sql)
}
