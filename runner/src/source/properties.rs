//! The source table's changelog properties and key model, read over MySQL
//! (`information_schema.table_properties`, then `SHOW CREATE TABLE` as the fallback) by
//! `dcs_doris_client::table::read_table` and interpreted by `dcs_crds::doris_table`, the same
//! read and rules the operator's probe uses.

use dcs_doris_client::mysql::{
    ConnectFailure, connect_first_tls, describe_connect_error, timed_out, within,
};
use dcs_doris_client::table::{TableReadError, read_table};
use mysql_async::prelude::Queryable;

pub use dcs_crds::doris_table::{
    DEFAULT_TTL_SECONDS, KeysModel, PropertySpelling, SourceTableInfo, keys_model_of_ddl,
    properties_of_ddl, table_info_from, table_info_of_ddl,
};

use crate::settings::SourceSettings;
use crate::{Error, Result};

/// Read the source table's properties and key model over the FE MySQL port.
///
/// # Errors
/// [`Error::SourceCredentials`] for a rejected login, [`Error::Doris`] when the table is unknown,
/// [`Error::SourceUnavailable`] when no FE answers.
pub async fn read_table_info(settings: &SourceSettings) -> Result<SourceTableInfo> {
    let mut conn = connect(settings).await?;
    let result = read_with(&mut conn, settings).await;
    let _ = within(settings.request_timeout, conn.disconnect()).await;
    result
}

/// Read the table's properties and key model on an open connection.
///
/// # Errors
/// As [`read_table_info`].
pub async fn read_with(
    conn: &mut mysql_async::Conn,
    settings: &SourceSettings,
) -> Result<SourceTableInfo> {
    let t = &settings.table;
    let context = format!("reading {t}'s definition");
    // Bounded like every statement: an FE that took it and never answers must not hang the run.
    let deadline = settings.request_timeout;
    let definition = tokio::time::timeout(deadline, read_table(conn, &t.database, &t.table))
        .await
        .unwrap_or_else(|_| Err(TableReadError::Definition(timed_out("answer", deadline))))
        .map_err(|e| match e {
            TableReadError::Definition(e) => mysql_error(&context, e),
            TableReadError::BadDefinition { detail } => Error::Doris {
                context: context.clone(),
                message: dcs_doris_client::Error::BadRow {
                    what: context.clone(),
                    detail,
                }
                .to_string(),
            },
            TableReadError::NoDefinition => Error::Doris {
                context: context.clone(),
                message: format!("SHOW CREATE TABLE {t} returned nothing"),
            },
            TableReadError::BadProperties(e) => Error::Doris {
                context: format!("reading {t}'s properties"),
                message: e.to_string(),
            },
        })?;
    if let Some(e) = &definition.properties_unavailable {
        tracing::debug!(error = %e, "information_schema.table_properties unavailable; using SHOW CREATE TABLE");
    }
    Ok(definition.info())
}

/// A MySQL connection to the first source FE that accepts one; a credentials error stops at
/// once (every FE would refuse the same login).
pub async fn connect(settings: &SourceSettings) -> Result<mysql_async::Conn> {
    let hosts = (0..settings.fe_nodes.len()).map(|i| settings.fe_host(i));
    let mut c = match connect_first_tls(
        hosts,
        settings.query_port,
        &settings.credentials.user,
        &settings.credentials.password,
        &settings.tls,
    )
    .await
    {
        Ok(connected) => connected.conn,
        Err(ConnectFailure::LoginRefused { error, .. }) => {
            return Err(mysql_error("connecting to the FE query port", error));
        }
        Err(ConnectFailure::NoAnswer { host, error }) => {
            if dcs_doris_client::mysql::login_refused(&error).is_some()
                || matches!(error, mysql_async::Error::Server(_))
            {
                return Err(mysql_error("connecting to the FE query port", error));
            }
            return Err(Error::SourceUnavailable {
                context: "connecting to the FE query port".to_owned(),
                reason: describe_connect_error(&host, settings.query_port, &settings.tls, &error),
            });
        }
        Err(ConnectFailure::NoNodes) => {
            return Err(Error::SourceConfig {
                reason: "source.feNodes is empty".into(),
            });
        }
    };
    // Every time the runner sends is UTC (docs/doris-protocols.md §1.3); a session starts in
    // the FE host's zone.
    within(
        settings.request_timeout,
        c.query_drop(super::flight::SESSION_TIME_ZONE_SQL),
    )
    .await
    .map_err(|e| mysql_error("setting the session time zone", e))?;
    Ok(c)
}

/// Map a MySQL error: server errors keep Doris's message, login failures are credentials errors.
pub fn mysql_error(context: &str, e: mysql_async::Error) -> Error {
    if let Some(detail) = dcs_doris_client::mysql::login_refused(&e) {
        return Error::SourceCredentials {
            detail: detail.to_owned(),
        };
    }
    match e {
        mysql_async::Error::Server(s) => Error::Doris {
            context: context.to_owned(),
            message: s.message,
        },
        other => Error::SourceUnavailable {
            context: context.to_owned(),
            reason: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANGELOG_DDL: &str = "CREATE TABLE `t` (\n  `id` int NOT NULL COMMENT \"\",\n  `v` varchar(20) NULL COMMENT \"\"\n) ENGINE=OLAP\nUNIQUE KEY(`id`)\nCOMMENT 'OLAP'\nDISTRIBUTED BY HASH(`id`) BUCKETS 4\nPROPERTIES (\n\"replication_allocation\" = \"tag.location.default: 1\",\n\"enable_unique_key_merge_on_write\" = \"true\",\n\"light_schema_change\" = \"true\",\n\"changelog.enable\" = \"true\",\n\"changelog.need_historical_value\" = \"true\",\n\"changelog.ttl_seconds\" = \"3600\"\n);";

    const BINLOG_DDL: &str = "CREATE TABLE `d` (\n  `id` bigint NOT NULL COMMENT \"\"\n) ENGINE=OLAP\nDUPLICATE KEY(`id`)\nCOMMENT 'OLAP'\nDISTRIBUTED BY RANDOM BUCKETS AUTO\nPROPERTIES (\n\"replication_allocation\" = \"tag.location.default: 1\",\n\"binlog.enable\" = \"true\",\n\"binlog.format\" = \"ROW\",\n\"binlog.max_bytes\" = \"9223372036854775807\",\n\"binlog.max_history_nums\" = \"9223372036854775807\"\n);";

    #[test]
    fn changelog_spelling_is_read_from_show_create_table() {
        let info = table_info_of_ddl(CHANGELOG_DDL);
        assert_eq!(
            info,
            SourceTableInfo {
                spelling: PropertySpelling::Changelog,
                enabled: true,
                need_historical_value: true,
                ttl_seconds: 3600,
                keys: KeysModel::Unique {
                    merge_on_write: true
                },
                light_delete: false,
            }
        );
    }

    #[test]
    fn binlog_spelling_needs_row_format_and_defaults_the_ttl() {
        let info = table_info_of_ddl(BINLOG_DDL);
        assert_eq!(info.spelling, PropertySpelling::Binlog);
        assert!(info.enabled);
        assert!(!info.need_historical_value);
        assert_eq!(info.ttl_seconds, DEFAULT_TTL_SECONDS);
        assert_eq!(info.keys, KeysModel::Duplicate);
        let lower = table_info_of_ddl(&BINLOG_DDL.replace("\"ROW\"", "\"row\""));
        assert!(!lower.enabled, "the format value is case-sensitive");
    }

    #[test]
    fn merge_on_read_and_plain_tables() {
        let mor = CHANGELOG_DDL.replace(
            "\"enable_unique_key_merge_on_write\" = \"true\"",
            "\"enable_unique_key_merge_on_write\" = \"false\"",
        );
        assert_eq!(
            table_info_of_ddl(&mor).keys,
            KeysModel::Unique {
                merge_on_write: false
            }
        );
        let plain = table_info_of_ddl(
            "CREATE TABLE `a` (`k` int) ENGINE=OLAP\nAGGREGATE KEY(`k`)\nPROPERTIES (\"replication_num\" = \"1\");",
        );
        assert!(!plain.enabled);
        assert_eq!(plain.spelling, PropertySpelling::Changelog);
        assert_eq!(plain.keys, KeysModel::Aggregate);
    }

    #[test]
    fn property_values_may_hold_escapes_and_parentheses() {
        let p = properties_of_ddl("PROPERTIES (\n\"a\" = \"x (y)\",\n\"b\" = \"q\\\"r\"\n);");
        assert_eq!(p["a"], "x (y)");
        assert_eq!(p["b"], "q\"r");
    }
}
