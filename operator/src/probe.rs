//! Probing the source: table properties and model over MySQL, Doris's time from `/api/tso`.

use std::{fmt, time::Duration};

use dcs_crds::{
    SourceSpec,
    conditions::reasons::{self, SINK_UNREACHABLE, SOURCE_AUTH_FAILED, SOURCE_TABLE_MISSING},
};
use dcs_doris_client::table::{TableReadError, read_table};

use crate::facts::{ProbeFailure, SourceProbe};
use dcs_doris_client::fe_api;
use dcs_doris_client::tls::Tls;

/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// A Doris user and password; `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DorisCredentials {
    /// The user.
    pub username: String,
    /// The password.
    pub password: String,
}

impl fmt::Debug for DorisCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DorisCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How to reach one Doris cluster: as whom, and over what TLS (`Debug` shows neither the
/// password nor the CA bundle).
#[derive(Clone, Debug)]
pub struct DorisAccess {
    /// The user and password.
    pub credentials: DorisCredentials,
    /// TLS (or plaintext) for every connection to the cluster.
    pub tls: Tls,
}

impl DorisAccess {
    /// An HTTP client for this cluster that follows no redirect (credentials are re-sent by hand,
    /// to the cluster's own nodes only: `dcs_doris_client::cluster`).
    fn http_client(&self) -> Result<reqwest::Client, String> {
        self.tls.http_client(
            reqwest::Client::builder()
                .timeout(PROBE_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none()),
        )
    }
}

/// Probes the table and Doris's clock. The first FE node that answers MySQL is used.
///
/// # Errors
/// A [`ProbeFailure`] with a reason and a message that says what to fix.
pub async fn probe_source(
    spec: &SourceSpec,
    access: &DorisAccess,
) -> Result<SourceProbe, ProbeFailure> {
    let table = spec.table_ref().map_err(|e| ProbeFailure {
        reason: reasons::INVALID_SPEC,
        message: e.to_string(),
    })?;
    let mut last = None;
    for node in &spec.fe_nodes {
        let host = dcs_doris_client::host_of(node);
        match tokio::time::timeout(
            PROBE_TIMEOUT,
            table_facts(host, spec.query_port, access, &table.database, &table.table),
        )
        .await
        {
            Ok(Ok(facts)) => {
                let doris_now_ms = doris_now_ms(node, access).await;
                return Ok(SourceProbe {
                    doris_now_ms,
                    ..facts
                });
            }
            Ok(Err(failure)) if failure.reason != reasons::SOURCE_UNREACHABLE => {
                return Err(failure);
            }
            Ok(Err(failure)) => last = Some(failure),
            Err(_) => {
                last = Some(ProbeFailure {
                    reason: reasons::SOURCE_UNREACHABLE,
                    message: format!(
                        "the source FE {host}:{} did not answer within {}s; check spec.source.feNodes and queryPort",
                        spec.query_port,
                        PROBE_TIMEOUT.as_secs()
                    ),
                });
            }
        }
    }
    Err(last.unwrap_or(ProbeFailure {
        reason: reasons::SOURCE_UNREACHABLE,
        message: "spec.source.feNodes is empty".into(),
    }))
}

async fn table_facts(
    host: &str,
    port: i32,
    access: &DorisAccess,
    db: &str,
    table: &str,
) -> Result<SourceProbe, ProbeFailure> {
    let credentials = &access.credentials;
    let port = u16::try_from(port).unwrap_or(9030);
    let mut conn = dcs_doris_client::mysql::connect_to_tls(
        host,
        port,
        &credentials.username,
        &credentials.password,
        &access.tls,
    )
    .await
    .map_err(|e| connect_failure(host, port, access, &e))?;
    let result = query_facts(&mut conn, db, table).await;
    let _ = conn.disconnect().await;
    result
}

fn connect_failure(
    host: &str,
    port: u16,
    access: &DorisAccess,
    e: &mysql_async::Error,
) -> ProbeFailure {
    let user = &access.credentials.username;
    if let Some(detail) = dcs_doris_client::mysql::login_refused(e) {
        return ProbeFailure {
            reason: SOURCE_AUTH_FAILED,
            message: format!(
                "the source FE {host}:{port} refused user {user:?}: {detail}; fix the Secret named in spec.source.credentials"
            ),
        };
    }
    let what = dcs_doris_client::mysql::describe_connect_error(host, port, &access.tls, e);
    ProbeFailure {
        reason: reasons::SOURCE_UNREACHABLE,
        message: if what.starts_with("TLS ") {
            format!("cannot reach the source: {what}; check spec.source.tls")
        } else {
            format!(
                "cannot reach the source FE {host}:{port} over MySQL: {e}; check spec.source.feNodes and queryPort"
            )
        },
    }
}

async fn query_facts(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> Result<SourceProbe, ProbeFailure> {
    let unreadable = |text: String| ProbeFailure {
        reason: reasons::SOURCE_UNREACHABLE,
        message: format!("cannot read table {db}.{table} on the source: {text}"),
    };
    let definition = read_table(conn, db, table).await.map_err(|e| match e {
        TableReadError::Definition(e) => {
            let text = e.to_string();
            let missing = text.contains("Unknown table")
                || text.contains("does not exist")
                || text.contains("Unknown database");
            ProbeFailure {
                reason: if missing {
                    SOURCE_TABLE_MISSING
                } else {
                    reasons::SOURCE_UNREACHABLE
                },
                ..unreadable(text)
            }
        }
        TableReadError::BadDefinition { detail } => unreadable(
            dcs_doris_client::Error::BadRow {
                what: "SHOW CREATE TABLE".into(),
                detail,
            }
            .to_string(),
        ),
        TableReadError::NoDefinition => ProbeFailure {
            reason: SOURCE_TABLE_MISSING,
            message: format!(
                "table {db}.{table} does not exist on the source; check spec.source.table"
            ),
        },
        TableReadError::BadProperties(e) => unreadable(e.to_string()),
    })?;
    Ok(SourceProbe {
        table: definition.info(),
        doris_now_ms: None,
    })
}

/// Whether the Doris sink's FE answers: `GET /api/tso` on each of `fe_nodes` in turn; any HTTP
/// answer counts as reachable (the runner checks the credentials and the table itself).
///
/// # Errors
/// [`SINK_UNREACHABLE`] naming every address tried and the fix.
pub async fn probe_sink(fe_nodes: &[String], access: &DorisAccess) -> Result<(), ProbeFailure> {
    let client = access.http_client().map_err(|e| ProbeFailure {
        reason: SINK_UNREACHABLE,
        message: format!("cannot build an HTTP client: {e}"),
    })?;
    let credentials = &access.credentials;
    let mut failures = Vec::new();
    let mut tls_failures = Vec::new();
    for node in fe_nodes {
        match client
            .get(access.tls.url(node, "/api/tso"))
            .basic_auth(&credentials.username, Some(&credentials.password))
            .send()
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) => {
                if let Some(reason) = dcs_doris_client::tls::tls_reason(&e) {
                    tls_failures.push(format!("TLS to FE {node} (HTTP): {reason}"));
                    continue;
                }
                let why = if e.is_timeout() {
                    format!("no answer within {}s", PROBE_TIMEOUT.as_secs())
                } else if e.is_connect() {
                    "connection refused or host unreachable".to_owned()
                } else {
                    "no HTTP answer".to_owned()
                };
                failures.push(format!("{node} ({why})"));
            }
        }
    }
    if !tls_failures.is_empty() {
        return Err(ProbeFailure {
            reason: SINK_UNREACHABLE,
            message: format!(
                "cannot reach the sink: {}; check spec.sink.doris.tls",
                tls_failures
                    .into_iter()
                    .chain(failures)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    Err(ProbeFailure {
        reason: SINK_UNREACHABLE,
        message: if failures.is_empty() {
            "spec.sink.doris.feNodes is empty: list the sink FE HTTP addresses (host:8030)"
                .to_owned()
        } else {
            format!(
                "cannot reach the sink FE over HTTP at {}: check spec.sink.doris.feNodes (the FE HTTP address, host:8030) and that the sink cluster is up and reachable from the operator",
                failures.join(", ")
            )
        },
    })
}

/// Doris's current time from the FE's `/api/tso`, or `None` when it cannot be read.
pub async fn doris_now_ms(fe_node: &str, access: &DorisAccess) -> Option<i64> {
    let client = access.http_client().ok()?;
    let credentials = &access.credentials;
    let resp = client
        .get(access.tls.url(fe_node, "/api/tso"))
        .basic_auth(&credentials.username, Some(&credentials.password))
        .send()
        .await
        .ok()?;
    let text = dcs_doris_client::read_answer(resp).await.ok()?;
    let data = fe_api::unwrap_envelope(&text).ok()?;
    fe_api::parse_tso_data(&data)
        .ok()
        .map(|now| now.physical_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcs_crds::doris_table;
    use dcs_doris_client::table::TableDefinition;
    use std::collections::BTreeMap;

    /// What the probe reads from a table's DDL and properties.
    fn facts_from(
        ddl: &str,
        properties: &BTreeMap<String, String>,
    ) -> doris_table::SourceTableInfo {
        TableDefinition {
            ddl: ddl.to_owned(),
            properties: properties.clone(),
            properties_unavailable: None,
        }
        .info()
    }

    #[test]
    fn facts_from_both_spellings_and_models() {
        use doris_table::{KeysModel, PropertySpelling};
        let props = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        let f = facts_from(
            "CREATE TABLE t (...) UNIQUE KEY(`id`)",
            &props(&[
                ("changelog.enable", "true"),
                ("changelog.ttl_seconds", "600"),
            ]),
        );
        assert_eq!(
            (f.enabled, f.spelling, f.ttl_seconds, f.keys),
            (
                true,
                PropertySpelling::Changelog,
                600,
                KeysModel::Unique {
                    merge_on_write: true
                }
            )
        );
        let f = facts_from(
            "CREATE TABLE t (...) DUPLICATE KEY(`id`)",
            &props(&[
                ("binlog.enable", "true"),
                ("binlog.format", "ROW"),
                ("binlog.ttl_seconds", "7200"),
                ("binlog.need_historical_value", "true"),
            ]),
        );
        assert_eq!(
            (
                f.enabled,
                f.spelling,
                f.ttl_seconds,
                f.need_historical_value,
                f.keys
            ),
            (
                true,
                PropertySpelling::Binlog,
                7200,
                true,
                KeysModel::Duplicate
            )
        );
        let f = facts_from(
            "CREATE TABLE t (...) UNIQUE KEY(`id`)",
            &props(&[("enable_unique_key_merge_on_write", "false")]),
        );
        assert!(!f.enabled);
        assert_eq!(
            f.keys,
            KeysModel::Unique {
                merge_on_write: false
            }
        );
    }

    #[test]
    fn ddl_properties_are_read() {
        let ddl = "CREATE TABLE `t` (\n`id` INT\n) ENGINE=OLAP\nUNIQUE KEY(`id`)\nPROPERTIES (\n\"changelog.enable\" = \"true\",\n\"changelog.ttl_seconds\" = \"600\"\n);";
        let p = doris_table::properties_of_ddl(ddl);
        assert_eq!(p["changelog.enable"], "true");
        assert_eq!(p["changelog.ttl_seconds"], "600");
    }

    #[test]
    fn credentials_debug_hides_the_password() {
        let c = DorisCredentials {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
