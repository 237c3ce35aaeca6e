//! What a run reads from the source besides the rows: the table's columns, the changelog reader
//! of this sync, and the seam between an `initial` sync's snapshot and its changelog.

use arrow_array::RecordBatch;

use super::Flow;
use crate::Result;
use crate::checkpoint::CheckpointStore;
use crate::sink::Sink;
use crate::source::changelog::{self, ChangelogReader};
use crate::source::fe_http::FeHttpClient;
use crate::source::snapshot;

impl<S: CheckpointStore, K: Sink> Flow<'_, S, K> {
    /// The source columns the sink is written with (`source.columns`, else all).
    pub(super) async fn source_columns(&self) -> Result<Vec<String>> {
        let http = FeHttpClient::new(self.config.source.clone())?;
        self.columns_with(&http).await
    }

    /// As [`Flow::source_columns`], over `http`.
    pub(super) async fn columns_with(&self, http: &FeHttpClient) -> Result<Vec<String>> {
        let schema = snapshot::fetch_schema(http, &self.config.source.table).await?;
        snapshot::projection(&schema, self.config.columns.as_deref())
    }

    /// The changelog reader of this sync: its columns (`*` when the source's columns are watched,
    /// so added and dropped columns show), increment type, and the seam of an `initial` sync (the window at
    /// T0 is read with DETAIL under minDelta).
    pub(super) async fn changelog_reader(
        &self,
        http: FeHttpClient,
        columns: Vec<String>,
    ) -> Result<ChangelogReader> {
        let columns = if self.watches_schema() {
            Vec::new()
        } else {
            columns
        };
        let mut options = self.config.changelog.clone();
        options.stream_retry = self.config.stream_retry;
        options.seam_start_ms = self.reading.start_point.as_ref().map(|t0| t0.epoch_ms);
        ChangelogReader::new(http, columns, options).await
    }
}

/// The rows of a changelog batch that are not in the snapshot already, `seam_tso` being the
/// start point's TSO if there is one (see [`changelog::drop_before_seam`]).
pub(super) fn after_seam(batch: RecordBatch, seam_tso: Option<i64>) -> Result<Option<RecordBatch>> {
    match seam_tso {
        Some(tso) => changelog::drop_before_seam(batch, tso),
        None => Ok(Some(batch)),
    }
}
