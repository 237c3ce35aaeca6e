//! The sink table's schema: created when missing, checked when it exists, and kept in step with
//! the source's ADD/DROP COLUMN (schema evolution). Decisions are pure functions
//! ([`plan_sink_table`], [`alter_statements`]; which columns changed is
//! [`diff_columns`](crate::sink::schema_change::diff_columns)); the MySQL I/O is
//! [`prepare_sink_table`] and [`apply_schema_change`], over the client's
//! [`MysqlTarget`](dcs_doris_client::mysql_target::MysqlTarget).
//!
//! Schema evolution: the pipeline compares the columns of every record batch with the last
//! known ones. On a change it flushes the open batch, asks the source's
//! `information_schema.columns` for the new columns' types (mapped as in
//! [`super::create_table`]; the Arrow type is the fallback), runs `ALTER TABLE … ADD COLUMN` /
//! `DROP COLUMN` on the sink, and only then encodes the batch. Added columns are nullable; in
//! changelog mode they go before `dcs_op` (`AFTER` the last data column).

use arrow_schema::{DataType, TimeUnit};
use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

use super::create_table::{
    CreateTableInput, ExistingSink, SinkColumn, TableColumn, changelog_columns, check_existing,
    column_definition, create_table_ddl, sink_type,
};
use super::type_fit::type_problems;
use crate::settings::{BodyFormat, DorisSinkConfig, PipelineConfig, SourceSettings};
use crate::sink::schema_change::{Follow, SchemaChange};
use crate::{Error, Result};
use dcs_crds::doris_table::KeysModel;
use dcs_doris_client::sql::quote_ident;

/// What to do about the sink table before the first load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkTablePlan {
    /// It exists and fits.
    Exists,
    /// It exists; schema evolution adds these source columns it lacks (they were added to the
    /// source while no runner was running).
    AddColumns {
        /// The columns to add.
        columns: Vec<String>,
    },
    /// It is missing and will be created with this DDL.
    Create {
        /// The `CREATE TABLE IF NOT EXISTS` statement.
        ddl: String,
    },
    /// It cannot be used (missing with createTable off, no DDL possible, or incompatible); each
    /// problem says what to do.
    Unusable {
        /// The problems.
        problems: Vec<String>,
    },
}

/// The columns the runner writes into the sink: the projection, then (changelog mode)
/// `dcs_op`, `dcs_tso`, `dcs_lsn`.
pub fn written_columns(columns: &[String], mode: SinkMode) -> Vec<String> {
    let mut out = columns.to_vec();
    if mode == SinkMode::Changelog {
        out.extend(changelog_columns().into_iter().map(|c| c.name));
    }
    out
}

/// How the sink's columns follow the source's: a Doris sink with no `source.columns` list meets
/// a change as `schemaChange` says, and may change the table with `createTable.enabled`; a
/// fixed list, or a sink without a table, has nothing to follow.
pub fn schema_follow(config: &PipelineConfig) -> Follow {
    config.doris_sink().map_or(Follow::Fixed, |d| {
        Follow::of(
            d.schema_change,
            config.columns.is_none(),
            d.create_table.enabled,
        )
    })
}

/// Decide about the sink table from the source's columns and what the sink has (`existing` is
/// `None` when the table is missing). With [`Follow::Evolve`], source columns the existing table
/// lacks are to be added rather than a problem; with [`Follow::Ignore`] they are not written.
/// Pure.
pub fn plan_sink_table(
    sink: &DorisSinkConfig,
    source_columns: &[TableColumn],
    existing: Option<&ExistingSink<'_>>,
    columns: &[String],
    follow: Follow,
) -> SinkTablePlan {
    let mode = sink.policy.mode;
    match existing {
        Some(e) => {
            let lacking = columns
                .iter()
                .filter(|c| !e.columns.iter().any(|s| s.name.eq_ignore_ascii_case(c)));
            // Not written: the sink keeps its columns.
            let ignored: Vec<&String> = if follow == Follow::Ignore {
                lacking.clone().collect()
            } else {
                Vec::new()
            };
            let missing: Vec<String> = if follow == Follow::Evolve {
                columns
                    .iter()
                    .filter(|c| !e.columns.iter().any(|s| s.name.eq_ignore_ascii_case(c)))
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            let present: Vec<String> = columns
                .iter()
                .filter(|c| !missing.contains(c) && !ignored.contains(c))
                .cloned()
                .collect();
            let written = written_columns(&present, mode);
            let positional = matches!(sink.format, BodyFormat::Csv { .. });
            let mut problems = check_existing(&sink.table, e, &written, mode, positional);
            problems.extend(type_problems(
                &sink.table,
                source_columns,
                e.columns,
                &present,
            ));
            if !problems.is_empty() {
                SinkTablePlan::Unusable { problems }
            } else if missing.is_empty() {
                SinkTablePlan::Exists
            } else {
                SinkTablePlan::AddColumns { columns: missing }
            }
        }
        None if !sink.create_table.enabled => SinkTablePlan::Unusable {
            problems: vec![format!(
                "sink table {} does not exist and sink.doris.createTable.enabled is false; create it, or set createTable.enabled: true to let the runner create it",
                sink.table
            )],
        },
        None => {
            let input = CreateTableInput {
                table: &sink.table,
                source_columns,
                columns,
                mode,
                properties: &sink.create_table.properties,
                auto_partition: sink
                    .create_table
                    .auto_partition
                    .as_ref()
                    .map(|(k, u)| (k.as_str(), u.as_str())),
            };
            match create_table_ddl(&input) {
                Ok(ddl) => SinkTablePlan::Create { ddl },
                Err(e) => SinkTablePlan::Unusable {
                    problems: vec![format!("cannot create sink table {}: {e}", sink.table)],
                },
            }
        }
    }
}

/// Read the source's columns and the sink table's state and plan (no changes made).
///
/// # Errors
/// When either side cannot be reached or read.
pub async fn inspect_sink_table(
    sink: &DorisSinkConfig,
    source: &SourceSettings,
    columns: &[String],
    follow: Follow,
) -> Result<SinkTablePlan> {
    let src = source.mysql_target();
    let mut conn = src.connect().await?;
    let source_columns = src.columns(&mut conn, &source.table).await;
    let _ = conn.disconnect().await;
    let source_columns = source_columns?;
    let dst = sink.mysql_target();
    let mut conn = dst.connect().await?;
    let result = async {
        let existing = dst.columns(&mut conn, &sink.table).await?;
        if existing.is_empty() {
            return Ok(plan_sink_table(
                sink,
                &source_columns,
                None,
                columns,
                follow,
            ));
        }
        let unique = matches!(
            dst.keys_model(&mut conn, &sink.table).await?,
            KeysModel::Unique { .. }
        );
        let e = ExistingSink {
            columns: &existing,
            unique,
        };
        Ok(plan_sink_table(
            sink,
            &source_columns,
            Some(&e),
            columns,
            follow,
        ))
    }
    .await;
    let _ = conn.disconnect().await;
    result
}

/// Make sure the sink table exists and fits before the first load: create it (and its database)
/// when missing, add the source columns it lacks ([`Follow::Evolve`]), fail when it cannot be
/// used.
///
/// # Errors
/// [`Error::Config`] listing the problems of an unusable table; [`Error::Sink`] when the sink
/// refuses the DDL or cannot be reached.
pub async fn prepare_sink_table(
    sink: &DorisSinkConfig,
    source: &SourceSettings,
    columns: &[String],
    follow: Follow,
) -> Result<()> {
    match inspect_sink_table(sink, source, columns, follow).await? {
        SinkTablePlan::AddColumns { columns: added } => {
            let change = SchemaChange {
                added,
                dropped: Vec::new(),
            };
            for s in apply_schema_change(sink, source, &change, columns, &[]).await? {
                tracing::info!(statement = %s, "added a source column the sink table lacked");
            }
            Ok(())
        }
        SinkTablePlan::Exists => {
            tracing::info!(table = %sink.table, "the sink table exists and fits");
            Ok(())
        }
        SinkTablePlan::Create { ddl } => {
            let dst = sink.mysql_target();
            let mut conn = dst.connect().await?;
            let result = async {
                dst.exec(
                    &mut conn,
                    &format!(
                        "CREATE DATABASE IF NOT EXISTS {}",
                        quote_ident(&sink.table.database)
                    ),
                )
                .await?;
                dst.exec(&mut conn, &ddl).await
            }
            .await;
            let _ = conn.disconnect().await;
            result?;
            tracing::info!(table = %sink.table, %ddl, "created the sink table");
            Ok(())
        }
        SinkTablePlan::Unusable { problems } => Err(Error::Config {
            reason: problems.join("; "),
        }),
    }
}

/// The data columns of the sink table (`sink.table`; empty when it is missing), without the
/// changelog mode's `dcs_*` columns.
///
/// # Errors
/// When the sink cannot be reached or read.
pub async fn table_columns(sink: &DorisSinkConfig) -> Result<Vec<String>> {
    let dst = sink.mysql_target();
    let mut conn = dst.connect().await?;
    let cols = dst.columns(&mut conn, &sink.table).await;
    let _ = conn.disconnect().await;
    let meta: Vec<String> = changelog_columns().into_iter().map(|c| c.name).collect();
    Ok(cols?
        .into_iter()
        .map(|c| c.name)
        .filter(|n| !meta.iter().any(|m| m.eq_ignore_ascii_case(n)))
        .collect())
}

/// What the dead-letter table needs before the first load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLetterPlan {
    /// It exists and fits.
    Fits,
    /// It is missing and will be created with this DDL.
    Create {
        /// `CREATE TABLE IF NOT EXISTS …`.
        ddl: String,
    },
    /// It cannot be used: what is wrong, with what to do.
    Unusable {
        /// `sink.doris.deadLetter.table: …`.
        reason: String,
    },
}

/// What the dead-letter `table` needs, from its columns as the sink has them (`existing`, empty
/// when it is missing). Pure.
pub fn plan_dead_letter_table(
    sink: &DorisSinkConfig,
    table: &TableRef,
    existing: &[TableColumn],
) -> DeadLetterPlan {
    if !existing.is_empty() {
        let problems = super::dead_letter::problems(table, existing);
        return if problems.is_empty() {
            DeadLetterPlan::Fits
        } else {
            DeadLetterPlan::Unusable {
                reason: format!("sink.doris.deadLetter.table: {}", problems.join("; ")),
            }
        };
    }
    if !sink.create_table.enabled {
        return DeadLetterPlan::Unusable {
            reason: format!(
                "sink.doris.deadLetter.table: the dead-letter table {table} does not exist and \
                 createTable.enabled is false; create it or enable createTable"
            ),
        };
    }
    DeadLetterPlan::Create {
        ddl: super::dead_letter::create_ddl(table, &sink.create_table.properties),
    }
}

/// Read what the dead-letter `table` needs ([`plan_dead_letter_table`]), changing nothing
/// (`dcs-runner check`).
///
/// # Errors
/// [`Error::Sink`] when the sink cannot be reached or read.
pub async fn inspect_dead_letter_table(
    sink: &DorisSinkConfig,
    table: &TableRef,
) -> Result<DeadLetterPlan> {
    let dst = sink.mysql_target();
    let mut conn = dst.connect().await?;
    let existing = dst.columns(&mut conn, table).await;
    let _ = conn.disconnect().await;
    Ok(plan_dead_letter_table(sink, table, &existing?))
}

/// Make sure the dead-letter table exists and fits before the first load: create it when
/// missing (with `createTable.enabled`), check its columns otherwise
/// ([`plan_dead_letter_table`]).
///
/// # Errors
/// [`Error::Config`] naming what is wrong with the table (exit 2); [`Error::Sink`] when the sink
/// refuses the DDL or cannot be reached.
pub async fn prepare_dead_letter_table(sink: &DorisSinkConfig, table: &TableRef) -> Result<()> {
    let dst = sink.mysql_target();
    let mut conn = dst.connect().await?;
    let result = async {
        let existing = dst.columns(&mut conn, table).await?;
        match plan_dead_letter_table(sink, table, &existing) {
            DeadLetterPlan::Fits => Ok(false),
            DeadLetterPlan::Unusable { reason } => Err(Error::Config { reason }),
            DeadLetterPlan::Create { ddl } => {
                dst.exec(&mut conn, &ddl).await?;
                Ok(true)
            }
        }
    }
    .await;
    let _ = conn.disconnect().await;
    if result? {
        tracing::info!(%table, "created the dead-letter table");
    }
    Ok(())
}

/// A Doris type for an Arrow type (docs/doris-protocols.md §3.5 read backwards), for a new column
/// the source catalog does not describe.
pub fn arrow_sink_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 | DataType::UInt8 => "SMALLINT".into(),
        DataType::Int32 | DataType::UInt16 => "INT".into(),
        DataType::Int64 | DataType::UInt32 => "BIGINT".into(),
        DataType::UInt64 | DataType::FixedSizeBinary(16) => "LARGEINT".into(),
        DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) if *p <= 38 => {
            format!("DECIMAL({p},{})", (*s).max(0))
        }
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Timestamp(unit, _) => format!(
            "DATETIME({})",
            match unit {
                TimeUnit::Second => 0,
                TimeUnit::Millisecond => 3,
                _ => 6,
            }
        ),
        _ => "STRING".into(),
    }
}

/// The ALTER statements for a change: one `ADD COLUMN` per added column (after `after`, in
/// order, when given) and one `DROP COLUMN` per dropped one. Pure.
pub fn alter_statements(
    table: &TableRef,
    added: &[SinkColumn],
    dropped: &[String],
    after: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev = after.map(str::to_owned);
    for c in added {
        let mut s = format!(
            "ALTER TABLE {} ADD COLUMN {}",
            table.quoted(),
            column_definition(c)
        );
        if let Some(p) = &prev {
            s.push_str(&format!(" AFTER {}", quote_ident(p)));
            prev = Some(c.name.clone());
        }
        out.push(s);
    }
    for d in dropped {
        out.push(format!(
            "ALTER TABLE {} DROP COLUMN {}",
            table.quoted(),
            quote_ident(d)
        ));
    }
    out
}

/// Apply a source schema change to the sink: look up the new columns' types in the source
/// catalog (the Arrow type in `arrow_types` otherwise), then ADD/DROP them. `current` is the new
/// column list (for the position of added columns in changelog mode). Returns the statements run.
///
/// # Errors
/// When the source or sink cannot be reached, or the sink refuses a statement.
pub async fn apply_schema_change(
    sink: &DorisSinkConfig,
    source: &SourceSettings,
    change: &SchemaChange,
    current: &[String],
    arrow_types: &[(String, DataType)],
) -> Result<Vec<String>> {
    let source_columns = if change.added.is_empty() {
        Vec::new()
    } else {
        let src = source.mysql_target();
        let mut conn = src.connect().await?;
        let cols = src.columns(&mut conn, &source.table).await;
        let _ = conn.disconnect().await;
        cols?
    };
    // A column the sink already has (added there by hand before the source's, or by a run that
    // stopped before its checkpoint) is not added again, but its type must hold the source's; a
    // column it no longer has is not dropped again.
    let existing = if change.added.is_empty() && change.dropped.is_empty() {
        Vec::new()
    } else {
        let dst = sink.mysql_target();
        let mut conn = dst.connect().await?;
        let cols = dst.columns(&mut conn, &sink.table).await;
        let _ = conn.disconnect().await;
        cols?
    };
    let problems = type_problems(&sink.table, &source_columns, &existing, &change.added);
    if !problems.is_empty() {
        return Err(Error::Config {
            reason: problems.join("; "),
        });
    }
    let added: Vec<SinkColumn> = change
        .added
        .iter()
        .filter(|name| !existing.iter().any(|c| c.name.eq_ignore_ascii_case(name)))
        .map(|name| {
            let source_column = source_columns
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(name));
            let doris_type = source_column
                .map(|c| sink_type(&c.column_type, false))
                .or_else(|| {
                    arrow_types
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, t)| arrow_sink_type(t))
                })
                .unwrap_or_else(|| "STRING".into());
            SinkColumn {
                name: name.clone(),
                doris_type,
                nullable: true,
                is_key: false,
                // The sink's rows read the default as the source's do (docs/doris-protocols.md
                // §1.9: a new column's existing rows read its default, else NULL).
                default: source_column.and_then(|c| c.default.clone()),
            }
        })
        .collect();
    // In changelog mode the data columns come before dcs_op: add after the last one kept.
    let after = (sink.policy.mode == SinkMode::Changelog)
        .then(|| {
            current
                .iter()
                .rev()
                .find(|c| !change.added.iter().any(|a| a.eq_ignore_ascii_case(c)))
                .map(String::as_str)
        })
        .flatten();
    let dropped: Vec<String> = change
        .dropped
        .iter()
        .filter(|name| existing.iter().any(|c| c.name.eq_ignore_ascii_case(name)))
        .cloned()
        .collect();
    let statements = alter_statements(&sink.table, &added, &dropped, after);
    let dst = sink.mysql_target();
    let mut conn = dst.connect().await?;
    let result = async {
        for s in &statements {
            dst.exec(&mut conn, s).await?;
        }
        Ok(())
    }
    .await;
    let _ = conn.disconnect().await;
    result.map(|()| statements)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn alter_statements_place_changelog_columns_before_the_change_columns() {
        let t: TableRef = "s.t".parse().unwrap();
        let c = |n: &str| SinkColumn {
            name: n.into(),
            doris_type: "INT".into(),
            nullable: true,
            is_key: false,
            default: None,
        };
        assert_eq!(
            alter_statements(&t, &[c("x"), c("y")], &names(&["old"]), Some("b")),
            [
                "ALTER TABLE `s`.`t` ADD COLUMN `x` INT NULL AFTER `b`",
                "ALTER TABLE `s`.`t` ADD COLUMN `y` INT NULL AFTER `x`",
                "ALTER TABLE `s`.`t` DROP COLUMN `old`",
            ]
        );
        assert_eq!(
            alter_statements(&t, &[c("x")], &[], None),
            ["ALTER TABLE `s`.`t` ADD COLUMN `x` INT NULL"]
        );
    }

    #[test]
    fn arrow_types_have_a_doris_fallback() {
        assert_eq!(
            arrow_sink_type(&DataType::Timestamp(TimeUnit::Millisecond, None)),
            "DATETIME(3)"
        );
        assert_eq!(
            arrow_sink_type(&DataType::Decimal128(10, 2)),
            "DECIMAL(10,2)"
        );
        assert_eq!(arrow_sink_type(&DataType::Utf8), "STRING");
    }
}
