//! The Doris side of a sink rebuild (the decision is `crate::sink::rebuild`, pure): the shadow
//! table created like the sink table, checked before a resumed run loads on, and swapped in with
//! `ALTER TABLE … REPLACE WITH TABLE` once the snapshot in it is complete.

use dcs_crds::spec::TableRef;
use dcs_doris_client::mysql_target::MysqlTarget;

use crate::settings::{DorisSinkConfig, SourceSettings};
use crate::sink::rebuild::{Rebuild, Step};
use crate::sink::schema_change::Follow;
use crate::{Error, Result};

/// Whether `table` exists (it has columns).
async fn exists(
    target: &MysqlTarget,
    conn: &mut mysql_async::Conn,
    table: &TableRef,
) -> Result<bool> {
    Ok(!target.columns(conn, table).await?.is_empty())
}

/// Runs `f` on a connection to the sink FE, disconnecting afterwards.
async fn with_sink<T>(
    sink: &DorisSinkConfig,
    f: impl AsyncFnOnce(&MysqlTarget, &mut mysql_async::Conn) -> Result<T>,
) -> Result<T> {
    let target = sink.mysql_target();
    let mut conn = target.connect().await?;
    let result = f(&target, &mut conn).await;
    let _ = conn.disconnect().await;
    result
}

/// Step 1: drops a leftover `shadow` and creates it like the sink table.
///
/// # Errors
/// [`Error::Sink`] with Doris's message.
pub async fn create_shadow(sink: &DorisSinkConfig, shadow: &TableRef) -> Result<()> {
    with_sink(sink, async |target, conn| {
        target
            .exec(conn, &format!("DROP TABLE IF EXISTS {}", shadow.quoted()))
            .await?;
        target
            .exec(
                conn,
                &format!(
                    "CREATE TABLE {} LIKE {}",
                    shadow.quoted(),
                    sink.table.quoted()
                ),
            )
            .await?;
        Ok(())
    })
    .await?;
    tracing::info!(%shadow, sink = %sink.table, "created the shadow table the snapshot is rebuilt in");
    Ok(())
}

/// Before a resumed run loads on: the shadow must still be there.
///
/// # Errors
/// [`Error::Sink`] when it is gone (the rebuild cannot go on: its earlier rows are lost).
pub async fn prepare_shadow(sink: &DorisSinkConfig, shadow: &TableRef) -> Result<()> {
    with_sink(sink, async |target, conn| {
        if exists(target, conn, shadow).await? {
            return Ok(());
        }
        Err(Error::Sink {
            message: format!(
                "the shadow table {shadow} this consumer rebuilds the sink in is gone while its snapshot is not complete; re-initialise the sync (change spec.reinitNonce) to rebuild it from scratch"
            ),
        })
    })
    .await
}

/// Before the first load of a run that rebuilds: creates the shadow (a fresh rebuild) or checks
/// that it is still there and takes the source's new columns (a resumed one, schema evolution).
///
/// # Errors
/// As [`create_shadow`] and [`prepare_shadow`]; the schema check's errors.
pub async fn begin(
    rebuild: &Rebuild,
    sink: &DorisSinkConfig,
    source: &SourceSettings,
    columns: &[String],
    follow: Follow,
) -> Result<()> {
    let shadow = match &rebuild.step {
        Step::Sink | Step::SwapPending(_) => return Ok(()),
        Step::CreateShadow(shadow) => {
            create_shadow(sink, shadow).await?;
            shadow
        }
        Step::ResumeShadow(shadow) => {
            prepare_shadow(sink, shadow).await?;
            shadow
        }
    };
    let mut into_shadow = sink.clone();
    into_shadow.table = shadow.clone();
    super::schema::prepare_sink_table(&into_shadow, source, columns, follow).await?;
    if follow == Follow::Evolve {
        drop_gone_columns(&into_shadow, source, columns).await?;
    }
    Ok(())
}

/// The shadow is made `LIKE` the sink, so it has the columns the sink has; under `evolve` those
/// the source no longer has are dropped from it (they hold nothing there: the shadow is loaded
/// from the source), so the rebuilt table has the source's columns, as a new consumer that
/// never saw the drop could not otherwise know.
async fn drop_gone_columns(
    shadow: &DorisSinkConfig,
    source: &SourceSettings,
    columns: &[String],
) -> Result<()> {
    let gone = crate::sink::schema_change::missing_from(
        &super::schema::table_columns(shadow).await?,
        columns,
    );
    if gone.is_empty() {
        return Ok(());
    }
    let change = crate::sink::schema_change::SchemaChange {
        added: Vec::new(),
        dropped: gone,
    };
    for s in super::schema::apply_schema_change(shadow, source, &change, columns, &[]).await? {
        tracing::info!(statement = %s, "dropped from the shadow a column the source no longer has");
    }
    Ok(())
}

/// Step 3: swaps `shadow` in for the sink table. A shadow that is already gone was swapped in by
/// an earlier attempt whose answer was lost (only the swap removes it).
///
/// # Errors
/// [`Error::Sink`] when Doris refuses and the shadow is still there.
pub async fn swap(sink: &DorisSinkConfig, shadow: &TableRef) -> Result<()> {
    let sql = format!(
        "ALTER TABLE {} REPLACE WITH TABLE {} PROPERTIES (\"swap\" = \"false\")",
        sink.table.quoted(),
        dcs_doris_client::sql::quote_ident(&shadow.table)
    );
    with_sink(sink, async |target, conn| {
        if !exists(target, conn, shadow).await? {
            tracing::warn!(%shadow, sink = %sink.table, "the shadow table is gone: it was swapped in by an earlier attempt");
            return Ok(());
        }
        match target.exec(conn, &sql).await {
            Ok(()) => Ok(()),
            Err(e) => match exists(target, conn, shadow).await {
                Ok(false) => Ok(()),
                _ => Err(e.into()),
            },
        }
    })
    .await?;
    tracing::info!(%shadow, sink = %sink.table, "swapped the rebuilt table in for the sink table");
    Ok(())
}
