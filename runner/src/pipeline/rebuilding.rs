//! The pipeline's hooks for the sink rebuild of a re-initialised consumer
//! ([`crate::sink::rebuild`]): decided and prepared before the first load, swapped in when the
//! snapshot is complete.

use super::Flow;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::{Error, Result};

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// Decides the sink rebuild of a re-initialised consumer and prepares its shadow table before
    /// the first load ([`Sink::begin_rebuild`]); loads then go to the shadow until it is swapped in.
    pub(super) async fn begin_rebuild(&mut self, snapshot_first: bool) -> Result<()> {
        let (planned, ignored) = self
            .loads
            .sink
            .plan_rebuild(
                self.saving.last.as_ref(),
                self.config.reinitialized_from.as_deref(),
                snapshot_first,
            )
            .map_err(|reason| Error::Config { reason })?;
        if let Some(note) = ignored {
            tracing::warn!("{note}");
        }
        self.rebuild = planned;
        if self.rebuild.shadow().is_none() {
            if let Some(r) = &self.rebuild.record {
                tracing::info!(previous = %r.previous_consumer_id, "re-initialised consumer: the sink keeps its history, the snapshot rows are marked");
            }
            return Ok(());
        }
        let columns = self.source_columns().await?;
        self.loads
            .sink
            .begin_rebuild(&self.rebuild, &self.config.source, &columns)
            .await
    }

    /// Once the snapshot is complete, its last checkpoint saved and its loads committed: swaps a
    /// rebuild's shadow table in for the sink table and records that in a checkpoint, before
    /// anything else is loaded.
    pub(super) async fn finish_rebuild(&mut self) -> Result<()> {
        let Some(shadow) = self.rebuild.shadow().cloned() else {
            return Ok(());
        };
        self.loads.sink.swap_rebuilt(&shadow).await?;
        self.rebuild.swapped(jiff::Timestamp::now().to_string());
        self.checkpoint(true).await
    }
}
