//! The source side's settings: where and how the source table is reached (`spec.source` and its
//! Secret), how its changelog is polled (`spec.changelog`), how a broken result stream is read again.

use std::fmt;
use std::time::Duration;

use dcs_crds::spec::{IncrementType, SourceSpec, TableRef};

use crate::{Error, Result};
use dcs_doris_client::host_of;
use dcs_doris_client::mysql_target::{MysqlTarget, Side};

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
    /// TLS on every connection to the source cluster (`source.tls`; plaintext by default).
    pub tls: dcs_doris_client::tls::Tls,
}

/// The connector's default `request-retries`.
pub const DEFAULT_REQUEST_RETRIES: u32 = 3;

impl SourceSettings {
    /// The source FE's MySQL endpoint (the host of each `feNodes` entry, port `queryPort`).
    pub fn mysql_target(&self) -> MysqlTarget {
        MysqlTarget {
            hosts: self
                .fe_nodes
                .iter()
                .map(|n| host_of(n).to_owned())
                .collect(),
            port: self.query_port,
            user: self.credentials.user.clone(),
            password: self.credentials.password.clone(),
            side: Side::Source,
            deadline: self.request_timeout,
            tls: self.tls.clone(),
        }
    }

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
            tls: dcs_doris_client::tls::Tls::plaintext(),
        })
    }

    /// The host part of an FE node (`host:port` → `host`), used for the MySQL and Flight ports.
    pub fn fe_host(&self, index: usize) -> &str {
        let node = &self.fe_nodes[index % self.fe_nodes.len()];
        host_of(node)
    }
}

/// How the changelog is polled (`spec.changelog`).
#[derive(Debug, Clone)]
pub struct ChangelogOptions {
    /// The increment type.
    pub increment_type: IncrementType,
    /// Time between polls.
    pub poll_interval: Duration,
    /// How long a window is retried after its first visibility error; zero disables retries.
    pub visible_wait_timeout: Duration,
    /// Delay between retries when Doris does not say (`retryAfterMs`).
    pub retry_delay: Duration,
    /// Upper bound of a retry delay, whatever Doris says.
    pub max_retry_delay: Duration,
    /// The snapshot seam of an `initial` sync (T0, epoch ms): the window starting there is read
    /// with DETAIL whatever the increment type, see [`window_increment_type`].
    pub seam_start_ms: Option<i64>,
    /// How often and how soon a window whose result stream broke is read again.
    pub stream_retry: StreamRetry,
}

impl Default for ChangelogOptions {
    fn default() -> Self {
        Self {
            increment_type: IncrementType::Detail,
            poll_interval: Duration::from_secs(10),
            visible_wait_timeout: Duration::from_secs(300),
            retry_delay: Duration::from_secs(1),
            max_retry_delay: Duration::from_secs(30),
            seam_start_ms: None,
            stream_retry: StreamRetry::default(),
        }
    }
}

/// How often and how soon a broken stream is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRetry {
    /// Re-reads after the first read; zero makes a broken stream fatal.
    pub max_retries: u32,
    /// Delay before the first re-read; doubled for each further one.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for StreamRetry {
    fn default() -> Self {
        Self {
            max_retries: 5,
            base: Duration::from_millis(500),
            max: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_spec() {
        let spec = dcs_crds::testing::SyncBuilder::new()
            .source_fe_nodes(&["fe-0:8030", "fe-1:8030"])
            .source_table("test.student")
            .source_secret("doris")
            .spec()
            .source;
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
