//! The sink table follows the source: created when missing and checked otherwise before the
//! first load, and, with schema evolution, its columns added and dropped as the source's change.

use arrow_array::RecordBatch;

use super::Flow;
use crate::Result;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::sink::schema_change::diff_columns;
use crate::source::changelog;

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Before any load or 2PC recovery: prepare the sink ([`Sink::prepare`]: its table created
    /// when missing, checked otherwise), and remember the columns schema evolution starts from.
    pub(super) async fn prepare_sink(&mut self) -> Result<()> {
        if !self.loads.sink.has_table() {
            return Ok(());
        }
        let columns = self.source_columns().await?;
        self.loads
            .sink
            .prepare(&self.config.source, &columns)
            .await?;
        if self.evolves_schema() {
            self.known_columns = Some(columns);
        }
        Ok(())
    }

    /// Whether the runner keeps the sink's columns in step with the source
    /// ([`Sink::evolves_schema`]).
    pub(super) fn evolves_schema(&self) -> bool {
        self.loads.sink.evolves_schema()
    }

    /// Schema evolution: when `batch` has other source columns than the last one, load the open
    /// batch, then ADD/DROP the columns on the sink before any row that needs them is encoded.
    pub(super) async fn follow_schema(&mut self, batch: &RecordBatch) -> Result<()> {
        let Some(known) = &self.known_columns else {
            return Ok(());
        };
        let arrow_schema = batch.schema();
        let current: Vec<(String, arrow_schema::DataType)> = arrow_schema
            .fields()
            .iter()
            .filter(|f| {
                !changelog::HIDDEN_COLUMNS
                    .iter()
                    .any(|h| f.name().eq_ignore_ascii_case(h))
            })
            .map(|f| (f.name().clone(), f.data_type().clone()))
            .collect();
        let names: Vec<String> = current.iter().map(|(n, _)| n.clone()).collect();
        let Some(change) = diff_columns(known, &names) else {
            return Ok(());
        };
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
        self.known_columns = Some(names);
        Ok(())
    }
}
