//! A source table's definition as an FE tells it over MySQL: `SHOW CREATE TABLE`, then the
//! properties from `information_schema.table_properties`, or from the DDL's `PROPERTIES`
//! clause when that table answers nothing or fails (older FEs have none). What they say is
//! decided by `dcs_crds::doris_table`, the one reading runner and operator share.

use std::collections::BTreeMap;

use dcs_crds::doris_table::{
    SourceTableInfo, keys_model_of_ddl, properties_of_ddl, table_info_from,
};
use mysql_async::prelude::Queryable;

use crate::mysql::{decode_all, decode_first};
use crate::sql::{quote_ident, string_literal};

/// A table's DDL and properties.
#[derive(Debug)]
pub struct TableDefinition {
    /// What `SHOW CREATE TABLE` answered.
    pub ddl: String,
    /// `information_schema.table_properties`, or the DDL's `PROPERTIES` when that answered
    /// nothing or failed.
    pub properties: BTreeMap<String, String>,
    /// Why `information_schema.table_properties` could not be read, when it failed (the
    /// properties then are the DDL's).
    pub properties_unavailable: Option<mysql_async::Error>,
}

impl TableDefinition {
    /// The changelog settings and key model these say (`dcs_crds::doris_table`).
    pub fn info(&self) -> SourceTableInfo {
        table_info_from(&self.properties, keys_model_of_ddl(&self.ddl))
    }
}

/// Why [`read_table`] has no definition; each caller words it for its own reader.
#[derive(Debug)]
pub enum TableReadError {
    /// `SHOW CREATE TABLE` failed (an unknown table or database among others).
    Definition(mysql_async::Error),
    /// `SHOW CREATE TABLE` answered a row that does not read as two strings: its shape, as
    /// [`crate::Error::BadRow`]'s `detail` (the caller names what it was reading).
    BadDefinition {
        /// The row's shape.
        detail: String,
    },
    /// `SHOW CREATE TABLE` answered no row.
    NoDefinition,
    /// `information_schema.table_properties` answered rows that do not read as name and value.
    BadProperties(crate::Error),
}

/// `SHOW CREATE TABLE`, quoted ([`quote_ident`]).
fn show_create(db: &str, table: &str) -> String {
    format!(
        "SHOW CREATE TABLE {}.{}",
        quote_ident(db),
        quote_ident(table)
    )
}

/// The properties' read, quoted ([`string_literal`]).
fn select_properties(db: &str, table: &str) -> String {
    format!(
        "SELECT PROPERTY_NAME, PROPERTY_VALUE FROM information_schema.table_properties \
         WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {}",
        string_literal(db),
        string_literal(table)
    )
}

/// The properties from `table_properties`'s answer, else (no row, or the query failed) from
/// the DDL (pure).
fn properties_from(
    listed: Result<Vec<mysql_async::Row>, mysql_async::Error>,
    ddl: &str,
) -> Result<(BTreeMap<String, String>, Option<mysql_async::Error>), TableReadError> {
    match listed {
        Ok(rows) if !rows.is_empty() => {
            let rows: Vec<(String, Option<String>)> =
                decode_all(rows, "information_schema.table_properties")
                    .map_err(TableReadError::BadProperties)?;
            let properties = rows
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect();
            Ok((properties, None))
        }
        Ok(_) => Ok((properties_of_ddl(ddl), None)),
        Err(e) => Ok((properties_of_ddl(ddl), Some(e))),
    }
}

/// `db`.`table`'s DDL as `SHOW CREATE TABLE` answers it on an open connection, `None` when it
/// answers no row: the one place the client issues it ([`read_table`] reads the properties
/// after it).
///
/// # Errors
/// [`TableReadError::Definition`] when the statement fails, [`TableReadError::BadDefinition`]
/// when its row does not read as two strings.
pub async fn ddl(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> Result<Option<String>, TableReadError> {
    let row: Option<mysql_async::Row> = conn
        .query_first(show_create(db, table))
        .await
        .map_err(TableReadError::Definition)?;
    let ddl: Option<(String, String)> =
        decode_first(row, "SHOW CREATE TABLE").map_err(|e| TableReadError::BadDefinition {
            detail: match e {
                crate::Error::BadRow { detail, .. } => detail,
                other => other.to_string(),
            },
        })?;
    Ok(ddl.map(|(_, ddl)| ddl))
}

/// Read `db`.`table`'s DDL and properties on an open connection.
///
/// # Errors
/// A [`TableReadError`] saying which read failed and how.
pub async fn read_table(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> Result<TableDefinition, TableReadError> {
    let Some(ddl) = ddl(conn, db, table).await? else {
        return Err(TableReadError::NoDefinition);
    };
    let listed = conn
        .query::<mysql_async::Row, _>(select_properties(db, table))
        .await;
    let (properties, properties_unavailable) = properties_from(listed, &ddl)?;
    Ok(TableDefinition {
        ddl,
        properties,
        properties_unavailable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::tests::row;
    use mysql_async::Value;

    const DDL: &str = "CREATE TABLE `t` (\n`id` INT\n) ENGINE=OLAP\nUNIQUE KEY(`id`)\nPROPERTIES (\n\"changelog.enable\" = \"true\",\n\"changelog.ttl_seconds\" = \"600\"\n);";

    #[test]
    fn names_are_quoted() {
        let (show, select) = (show_create("d`b", "it's"), select_properties("d`b", "it's"));
        assert_eq!(show, "SHOW CREATE TABLE `d``b`.`it's`");
        assert!(
            select.ends_with("WHERE TABLE_SCHEMA = 'd`b' AND TABLE_NAME = 'it''s'"),
            "{select}"
        );
    }

    #[test]
    fn listed_properties_win_and_a_null_value_reads_empty() {
        let rows = vec![
            row(vec![
                Value::Bytes(b"changelog.enable".to_vec()),
                Value::Bytes(b"false".to_vec()),
            ]),
            row(vec![Value::Bytes(b"x".to_vec()), Value::NULL]),
        ];
        let (p, unavailable) = properties_from(Ok(rows), DDL).unwrap();
        assert_eq!(p["changelog.enable"], "false");
        assert_eq!(p["x"], "");
        assert_eq!(p.len(), 2);
        assert!(unavailable.is_none());
    }

    #[test]
    fn no_row_or_a_failure_falls_back_to_the_ddl() {
        let (p, unavailable) = properties_from(Ok(Vec::new()), DDL).unwrap();
        assert_eq!(p["changelog.ttl_seconds"], "600");
        assert!(unavailable.is_none());
        let failed: mysql_async::Error = std::io::Error::other("no such table").into();
        let (p, unavailable) = properties_from(Err(failed), DDL).unwrap();
        assert_eq!(p["changelog.enable"], "true");
        assert!(unavailable.is_some());
    }

    #[test]
    fn an_odd_property_row_is_an_error() {
        let rows = vec![row(vec![Value::NULL, Value::NULL])];
        let e = properties_from(Ok(rows), DDL).unwrap_err();
        assert!(matches!(e, TableReadError::BadProperties(_)), "{e:?}");
    }

    #[test]
    fn the_info_reads_properties_and_keys() {
        let def = TableDefinition {
            ddl: DDL.to_owned(),
            properties: properties_of_ddl(DDL),
            properties_unavailable: None,
        };
        let info = def.info();
        assert!(info.enabled);
        assert_eq!(info.ttl_seconds, 600);
    }
}
