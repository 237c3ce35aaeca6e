//! Flight SQL catalog streams (GetCatalogs, GetDbSchemas, GetTables) as the Doris FE answers them
//! (D fe FlightSqlSchemaHelper): one catalog `internal`, databases as schemas, OLAP tables as
//! `BASE TABLE` with the same Arrow types the BE sends and Flight SQL column metadata.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use arrow_flight::sql::{CommandGetCatalogs, CommandGetDbSchemas, CommandGetTables};
use arrow_schema::{Field, Schema};

use super::arrow_convert::arrow_type;
use crate::Doris;
use crate::engine::TableInfo;
use crate::types::DorisType;

/// The one catalog.
pub const INTERNAL_CATALOG: &str = "internal";
/// Table type of OLAP tables (`Table.getMysqlType()`).
pub const BASE_TABLE: &str = "BASE TABLE";

/// The Arrow schema GetTables reports for a table.
pub fn table_schema(t: &TableInfo) -> Schema {
    let fields: Vec<Field> = t
        .columns
        .iter()
        .map(|c| {
            let mut md = HashMap::from([
                ("ARROW:FLIGHT:SQL:SCHEMA_NAME".to_string(), t.db.clone()),
                ("ARROW:FLIGHT:SQL:TABLE_NAME".to_string(), t.name.clone()),
                (
                    "ARROW:FLIGHT:SQL:TYPE_NAME".to_string(),
                    c.ty.primitive_name().to_string(),
                ),
                (
                    "ARROW:FLIGHT:SQL:IS_AUTO_INCREMENT".to_string(),
                    "0".to_string(),
                ),
                (
                    "ARROW:FLIGHT:SQL:IS_CASE_SENSITIVE".to_string(),
                    "0".to_string(),
                ),
                ("ARROW:FLIGHT:SQL:IS_READ_ONLY".to_string(), "1".to_string()),
                (
                    "ARROW:FLIGHT:SQL:IS_SEARCHABLE".to_string(),
                    "1".to_string(),
                ),
            ]);
            match c.ty {
                DorisType::Decimal { precision, scale } => {
                    md.insert("ARROW:FLIGHT:SQL:PRECISION".into(), precision.to_string());
                    md.insert("ARROW:FLIGHT:SQL:SCALE".into(), scale.to_string());
                }
                DorisType::DateTime(p) => {
                    md.insert("ARROW:FLIGHT:SQL:SCALE".into(), p.to_string());
                }
                _ => {}
            }
            Field::new(&c.name, arrow_type(c.ty), c.nullable).with_metadata(md)
        })
        .collect();
    Schema::new(fields)
}

/// GetCatalogs rows.
pub fn catalogs(cmd: CommandGetCatalogs) -> arrow_flight::error::Result<RecordBatch> {
    let mut b = cmd.into_builder();
    b.append(INTERNAL_CATALOG);
    b.build()
}

/// GetDbSchemas rows (Doris filters on `internal` when no catalog is given).
pub fn db_schemas(
    doris: &Doris,
    mut cmd: CommandGetDbSchemas,
) -> arrow_flight::error::Result<RecordBatch> {
    cmd.catalog
        .get_or_insert_with(|| INTERNAL_CATALOG.to_string());
    let mut b = cmd.into_builder();
    for db in doris.engine.databases() {
        b.append(INTERNAL_CATALOG, db);
    }
    b.build()
}

/// GetTables rows, with each table's Arrow schema when asked.
pub fn tables(
    doris: &Doris,
    mut cmd: CommandGetTables,
) -> arrow_flight::error::Result<RecordBatch> {
    cmd.catalog
        .get_or_insert_with(|| INTERNAL_CATALOG.to_string());
    let mut b = cmd.into_builder();
    for db in doris.engine.databases() {
        for table in doris.engine.tables(&db).unwrap_or_default() {
            let schema = match doris.engine.table_info(&db, &table) {
                Ok(info) => table_schema(&info),
                Err(_) => continue,
            };
            b.append(INTERNAL_CATALOG, &db, &table, BASE_TABLE, &schema)?;
        }
    }
    b.build()
}
