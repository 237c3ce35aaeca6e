//! The source side: reading a Doris table's snapshot and its changelog
//! (docs/ARCHITECTURE.md §3.2, §3.3).
//!
//! I/O lives in [`fe_http`] (FE HTTP API), [`flight`] (Arrow Flight SQL), [`properties`] (MySQL)
//! and the readers [`snapshot`] and [`changelog`]; the decisions they take (windows, SQL text,
//! splits, row kinds, property parsing) are pure functions next to them, tested without Doris.

pub mod changelog;
pub mod datetime;
pub mod fe_http;
pub mod flight;
pub mod properties;
pub mod resumable;
pub mod resume;
pub mod retention;
pub mod row_kind;
pub mod snapshot;
pub mod tso;

use std::fmt;
use std::time::Duration;

use dcs_crds::spec::{SourceSpec, TableRef};

use crate::{Error, Result};

/// The Doris user and password from the source Secret. `Debug` never shows the password.
#[derive(Clone)]
pub struct SourceCredentials {
    /// The Doris user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl fmt::Debug for SourceCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceCredentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Where and how the source table is reached, resolved from `spec.source` and its Secret.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    /// FE HTTP endpoints as `host:port`, tried in turn.
    pub fe_nodes: Vec<String>,
    /// The FE MySQL port.
    pub query_port: u16,
    /// The FE Arrow Flight SQL port, or `None` to discover it from `SHOW FRONTENDS`.
    pub flight_sql_port: Option<u16>,
    /// The source table.
    pub table: TableRef,
    /// User and password.
    pub credentials: SourceCredentials,
    /// Attempts per FE HTTP request, rotating through `fe_nodes` (the connector's `request-retries`).
    pub request_retries: u32,
    /// Timeout of one FE HTTP request.
    pub request_timeout: Duration,
}

/// The connector's default `request-retries`.
pub const DEFAULT_REQUEST_RETRIES: u32 = 3;

impl SourceSettings {
    /// Settings from the spec and the credentials read from the source Secret.
    ///
    /// # Errors
    /// When `table` is not `db.table`, there is no FE node or a port is out of range.
    pub fn from_spec(spec: &SourceSpec, credentials: SourceCredentials) -> Result<Self> {
        let table = spec.table_ref().map_err(|e| Error::SourceConfig {
            reason: format!("source.table: {e}"),
        })?;
        if spec.fe_nodes.is_empty() {
            return Err(Error::SourceConfig {
                reason: "source.feNodes is empty; list at least one FE as host:http_port".into(),
            });
        }
        let port = |name: &str, v: i32| {
            u16::try_from(v)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| Error::SourceConfig {
                    reason: format!("source.{name} {v} is not a port (1-65535)"),
                })
        };
        Ok(Self {
            fe_nodes: spec.fe_nodes.clone(),
            query_port: port("queryPort", spec.query_port)?,
            flight_sql_port: spec
                .flight_sql_port
                .map(|p| port("flightSqlPort", p))
                .transpose()?,
            table,
            credentials,
            request_retries: DEFAULT_REQUEST_RETRIES,
            request_timeout: Duration::from_secs(30),
        })
    }

    /// The host part of an FE node (`host:port` → `host`), used for the MySQL and Flight ports.
    pub fn fe_host(&self, index: usize) -> &str {
        let node = &self.fe_nodes[index % self.fe_nodes.len()];
        host_of(node)
    }
}

pub use dcs_doris_client::host_of;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_spec() {
        let spec: SourceSpec = serde_json::from_value(serde_json::json!({
            "feNodes": ["fe-0:8030", "fe-1:8030"],
            "table": "test.student",
            "credentials": {"secretName": "doris"},
        }))
        .unwrap();
        let creds = SourceCredentials {
            user: "u".into(),
            password: "p".into(),
        };
        let s = SourceSettings::from_spec(&spec, creds.clone()).unwrap();
        assert_eq!(s.query_port, 9030);
        assert_eq!(s.flight_sql_port, None);
        assert_eq!(s.table.quoted(), "`test`.`student`");
        assert_eq!(s.fe_host(1), "fe-1");
        assert_eq!(s.request_retries, 3);

        let mut bad = spec.clone();
        bad.flight_sql_port = Some(70000);
        assert!(
            SourceSettings::from_spec(&bad, creds.clone())
                .unwrap_err()
                .to_string()
                .contains("flightSqlPort")
        );
        bad = spec;
        bad.table = "student".into();
        assert!(SourceSettings::from_spec(&bad, creds).is_err());
    }

    #[test]
    fn credentials_debug_hides_the_password() {
        let c = SourceCredentials {
            user: "root".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
