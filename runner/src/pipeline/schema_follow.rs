//! The sink table follows the source: created when missing and checked otherwise before the
//! first load, and each change of the source's columns decided under `schemaChange`
//! ([`decide`]): followed on the sink, kept out of it, or the run stopped before a row with the
//! new columns is written. The columns the sink is in step with are kept in every checkpoint, so
//! a change met by a run that stopped is met again by the next.

use arrow_array::RecordBatch;
use dcs_crds::checkpoint::schema_action::{FOLLOWED, IGNORED, REFUSED};
use dcs_crds::checkpoint::{SchemaChangeNote, SchemaRecord};

use super::Flow;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::sink::schema_change::{Follow, SchemaChange, Step, decide, missing_from};
use crate::source::changelog;
use crate::{Error, Result};

/// The source's columns as the sink follows them: a part of [`Flow`].
#[derive(Debug, Default)]
pub(super) struct SchemaWatch {
    /// The sink's follow; `Fixed` until the sink is prepared, and for a sink without a table.
    follow: Follow,
    /// The source columns the sink is in step with; `None` when nothing is followed.
    known: Option<Vec<String>>,
    /// The sink table's data columns, as last read or changed.
    sink_columns: Vec<String>,
    /// Source columns not written (`ignore`).
    ignored: Vec<String>,
    /// The last change met.
    last_change: Option<SchemaChangeNote>,
    /// A change met at the opening that stops the run once the saved loads are settled.
    stop: Option<String>,
}

impl SchemaWatch {
    /// What a checkpoint records; `None` when nothing is followed.
    pub(super) fn record(&self) -> Option<SchemaRecord> {
        Some(SchemaRecord {
            columns: self.known.clone()?,
            ignored: self.ignored.clone(),
            last_change: self.last_change.clone(),
        })
    }

    /// The stop the opening decided, if any: the run ends with it after recovery.
    pub(super) fn take_stop(&mut self) -> Option<Error> {
        self.stop
            .take()
            .map(|message| Error::SchemaChanged { message })
    }

    fn note(&mut self, change: &SchemaChange, action: &str, message: String) {
        self.last_change = Some(SchemaChangeNote {
            at: jiff::Timestamp::now().to_string(),
            added: change.added.clone(),
            dropped: change.dropped.clone(),
            action: action.to_owned(),
            message,
        });
    }

    /// `batch` without the columns the sink does not take (`ignore`).
    fn project(&self, batch: &RecordBatch) -> Result<Option<RecordBatch>> {
        if self.ignored.is_empty() {
            return Ok(None);
        }
        let schema = batch.schema();
        let keep: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                !self
                    .ignored
                    .iter()
                    .any(|i| i.eq_ignore_ascii_case(f.name()))
            })
            .map(|(i, _)| i)
            .collect();
        batch
            .project(&keep)
            .map(Some)
            .map_err(|e| Error::UnexpectedResult {
                context: "leaving the ignored columns out of a batch".into(),
                reason: e.to_string(),
            })
    }
}

/// The source's data columns of `batch` (the changelog's own columns left out), with their
/// Arrow types.
fn data_columns(batch: &RecordBatch) -> Vec<(String, arrow_schema::DataType)> {
    batch
        .schema()
        .fields()
        .iter()
        .filter(|f| {
            !changelog::HIDDEN_COLUMNS
                .iter()
                .any(|h| f.name().eq_ignore_ascii_case(h))
        })
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect()
}

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Before any load or 2PC recovery: prepare the sink ([`Sink::prepare`]: its table created
    /// when missing, checked otherwise), after deciding about a change of the source's columns
    /// since `stored` (the stored checkpoint's record) was saved.
    pub(super) async fn prepare_sink(&mut self, stored: Option<&SchemaRecord>) -> Result<()> {
        if !self.loads.sink.has_table() {
            return Ok(());
        }
        let columns = self.source_columns().await?;
        let follow = self.loads.sink.schema_follow();
        if !follow.watches() {
            return self.loads.sink.prepare(&self.config.source, &columns).await;
        }
        let sink_columns = self.loads.sink.table_columns().await?;
        let known = stored.map_or_else(|| columns.clone(), |r| r.columns.clone());
        self.schema = SchemaWatch {
            follow,
            known: Some(known.clone()),
            sink_columns,
            ignored: stored.map(|r| r.ignored.clone()).unwrap_or_default(),
            last_change: stored.and_then(|r| r.last_change.clone()),
            stop: None,
        };
        match self.decide_columns(&known, &columns) {
            Step::Stop { change, message } => {
                tracing::warn!(%message, "the source's columns changed while no runner ran");
                self.schema.note(&change, REFUSED, message.clone());
                self.schema.stop = Some(message);
                return Ok(());
            }
            Step::Alter(change) if !change.dropped.is_empty() => {
                // Dropped while no runner ran (or by a run that stopped before its checkpoint):
                // dropped here too; the added ones are added by the preparation below.
                let drop = SchemaChange {
                    added: Vec::new(),
                    dropped: change.dropped.clone(),
                };
                for s in self
                    .loads
                    .sink
                    .follow_columns(&self.config.source, &drop, &columns, &[])
                    .await?
                {
                    tracing::info!(statement = %s, "dropped a column the source no longer has");
                }
                self.followed(&change, columns.clone(), FOLLOWED);
            }
            Step::Alter(change) => self.followed(&change, columns.clone(), FOLLOWED),
            Step::Keep { change, ignored } => {
                self.schema.ignored = ignored;
                self.followed(&change, columns.clone(), self.kept());
            }
            Step::Same => {}
        }
        self.loads
            .sink
            .prepare(&self.config.source, &columns)
            .await?;
        self.schema.sink_columns = self.loads.sink.table_columns().await?;
        if self.schema.follow == Follow::Ignore {
            self.schema.ignored = missing_from(&columns, &self.schema.sink_columns);
        } else if !self.schema.ignored.is_empty() {
            // Ignored until now (the policy was ignore): written from now on, which the status
            // says with what it means for the rows written before.
            let now_written = SchemaChange {
                added: std::mem::take(&mut self.schema.ignored),
                dropped: Vec::new(),
            };
            let message = format!(
                "{} were ignored until now and are written from now on; the sink's rows written before keep NULL in them until a re-initialisation (spec.reinitNonce) copies the table again",
                now_written
                    .added
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            tracing::warn!(%message, "columns no longer ignored");
            self.schema.note(&now_written, FOLLOWED, message);
            self.saving.changed();
        }
        Ok(())
    }

    /// Whether the changelog is read with every column, so that a change of them shows
    /// ([`Sink::schema_follow`]).
    pub(super) fn watches_schema(&self) -> bool {
        self.loads.sink.schema_follow().watches()
    }

    fn decide_columns(&self, known: &[String], current: &[String]) -> Step {
        decide(
            self.schema.follow,
            &self.config.source.table.to_string(),
            known,
            current,
            &self.schema.sink_columns,
        )
    }

    /// What keeping the sink's columns is: ignoring the change (`ignore`), or following it where
    /// the sink has the new columns already (`evolve` on a table dcs may not change).
    fn kept(&self) -> &'static str {
        if self.schema.follow == Follow::Ignore {
            IGNORED
        } else {
            FOLLOWED
        }
    }

    /// The sink is in step with `columns` after `change` (`action`: what was done about it).
    fn followed(&mut self, change: &SchemaChange, columns: Vec<String>, action: &str) {
        let message = match (action, self.schema.follow) {
            (IGNORED, _) => format!(
                "{}; schemaChange is ignore: the sink keeps its columns",
                change.describe(&self.config.source.table.to_string())
            ),
            (_, Follow::EvolveByHand) => format!(
                "{}; the sink table has the new columns already (createTable.enabled is false: dcs does not change it; a dropped column stays, written as NULL)",
                change.describe(&self.config.source.table.to_string())
            ),
            _ => format!(
                "{}; the sink table follows",
                change.describe(&self.config.source.table.to_string())
            ),
        };
        self.schema.note(change, action, message);
        self.schema.known = Some(columns);
        self.saving.changed();
    }

    /// Before `batch` is encoded: when its source columns differ from the known ones, decide
    /// ([`decide`]): follow on the sink (the open batch loaded first, then ADD/DROP COLUMN),
    /// keep the sink's columns, or stop. Returns the batch as the sink takes it when it differs
    /// (ignored columns left out).
    pub(super) async fn follow_schema(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<Option<RecordBatch>> {
        let Some(known) = self.schema.known.clone() else {
            return Ok(None);
        };
        let current = data_columns(batch);
        let names: Vec<String> = current.iter().map(|(n, _)| n.clone()).collect();
        match self.decide_columns(&known, &names) {
            Step::Same => {}
            Step::Alter(change) => {
                tracing::info!(added = ?change.added, dropped = ?change.dropped, "the source's columns changed; updating the sink table");
                self.flush().await?;
                let statements = self
                    .loads
                    .sink
                    .follow_columns(&self.config.source, &change, &names, &current)
                    .await?;
                for s in &statements {
                    tracing::info!(statement = %s, "applied to the sink table");
                }
                self.schema.sink_columns = self.loads.sink.table_columns().await?;
                self.followed(&change, names, FOLLOWED);
            }
            Step::Keep { change, ignored } => {
                tracing::warn!(added = ?change.added, dropped = ?change.dropped, ?ignored, "the source's columns changed; the sink keeps its columns");
                self.schema.ignored = ignored;
                self.followed(&change, names, self.kept());
            }
            Step::Stop { change, message } => {
                self.schema.note(&change, REFUSED, message.clone());
                return Err(Error::SchemaChanged { message });
            }
        }
        self.schema.project(batch)
    }
}
