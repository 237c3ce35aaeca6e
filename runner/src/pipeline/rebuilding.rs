//! The pipeline's hooks for the sink rebuild of a re-initialised consumer
//! ([`crate::sink::doris::rebuild`]): decided and prepared before the first load, swapped in when the
//! snapshot is complete.

use super::Flow;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::sink::doris::rebuild;
use crate::{Error, Result};

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Decides the sink rebuild of a re-initialised consumer and prepares its shadow table before
    /// the first load ([`rebuild`]); loads then go to the shadow until it is swapped in.
    pub(super) async fn begin_rebuild(&mut self, snapshot_first: bool) -> Result<()> {
        let sink = self.config.doris_sink();
        let (planned, ignored) = rebuild::plan(
            self.saved.as_ref(),
            self.config.reinitialized_from.as_deref(),
            sink.map(|d| (&d.table, d.policy.mode)),
            snapshot_first,
        )
        .map_err(|reason| Error::Config { reason })?;
        if let Some(note) = ignored {
            tracing::warn!("{note}");
        }
        self.rebuild = planned;
        let (Some(sink), Some(shadow)) = (sink, self.rebuild.shadow().cloned()) else {
            if let Some(r) = &self.rebuild.record {
                tracing::info!(previous = %r.previous_consumer_id, "re-initialised consumer: the sink keeps its history, the snapshot rows are marked");
            }
            return Ok(());
        };
        let columns = self.source_columns().await?;
        rebuild::begin(
            &self.rebuild,
            sink,
            &self.config.source,
            &columns,
            self.evolves_schema(),
        )
        .await?;
        self.loads.sink.set_table(shadow);
        Ok(())
    }

    /// Once the snapshot is complete, its last checkpoint saved and its loads committed: swaps a
    /// rebuild's shadow table in for the sink table and records that in a checkpoint, before
    /// anything else is loaded.
    pub(super) async fn finish_rebuild(&mut self) -> Result<()> {
        let (Some(sink), Some(shadow)) = (self.config.doris_sink(), self.rebuild.shadow().cloned())
        else {
            return Ok(());
        };
        rebuild::swap(sink, &shadow).await?;
        self.rebuild.swapped(jiff::Timestamp::now().to_string());
        self.loads.sink.set_table(sink.table.clone());
        self.checkpoint(true).await
    }
}
