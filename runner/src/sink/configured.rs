//! The one place that turns the settings' sink into a [`Sink`]: [`ConfiguredSink`] holds the
//! implementation `spec.sink` names and passes every call to it. A new sink is a new module and
//! one variant here; the pipeline only ever sees the trait.

use std::time::Duration;

use super::LoadBatch;
use arrow_schema::DataType;
use dcs_crds::SinkMode;
use dcs_crds::spec::TableRef;

use super::doris::DorisSink;
use super::doris::schema::schema_follow;
use super::label::LabelScheme;
use super::rebuild::{Planned, Rebuild};
use super::schema_change::{Follow, SchemaChange};
use super::stdout::StdoutSink;
use super::{Encoding, LoadResult, LostLoad, Sink};
use crate::Result;
use crate::checkpoint::{Checkpoint, PendingTxn};
use crate::settings::{BatchLimits, PipelineConfig, SinkConfig, SourceSettings};

/// The sink a run writes to, as its settings say.
#[derive(Debug)]
pub enum ConfiguredSink {
    /// `spec.sink.doris`.
    Doris(Box<DorisSink>),
    /// `spec.sink.stdout`.
    Stdout(StdoutSink),
}

impl ConfiguredSink {
    /// The sink of `config`, loading on behalf of its consumer.
    pub fn new(config: &PipelineConfig) -> Self {
        match &config.sink {
            SinkConfig::Doris(d) => Self::Doris(Box::new(
                DorisSink::new(
                    (**d).clone(),
                    config.namespace.clone(),
                    config.consumer_id.clone(),
                )
                .following(schema_follow(config)),
            )),
            SinkConfig::Stdout => Self::Stdout(StdoutSink),
        }
    }
}

/// `$call` on the implementation, whichever it is.
macro_rules! each {
    ($self:expr, $s:ident => $call:expr) => {
        match $self {
            ConfiguredSink::Doris($s) => $call,
            ConfiguredSink::Stdout($s) => $call,
        }
    };
}

impl Sink for ConfiguredSink {
    fn two_phase(&self) -> bool {
        each!(self, s => s.two_phase())
    }

    fn idempotent(&self) -> bool {
        each!(self, s => s.idempotent())
    }

    fn encoding(&self) -> Encoding {
        each!(self, s => s.encoding())
    }

    fn limits(&self) -> BatchLimits {
        each!(self, s => s.limits())
    }

    fn mode(&self) -> SinkMode {
        each!(self, s => s.mode())
    }

    fn request_timeout(&self) -> Duration {
        each!(self, s => s.request_timeout())
    }

    fn has_table(&self) -> bool {
        each!(self, s => s.has_table())
    }

    fn schema_follow(&self) -> Follow {
        each!(self, s => s.schema_follow())
    }

    async fn table_columns(&self) -> Result<Vec<String>> {
        each!(self, s => s.table_columns().await)
    }

    async fn prepare(&self, source: &SourceSettings, columns: &[String]) -> Result<()> {
        each!(self, s => s.prepare(source, columns).await)
    }

    async fn follow_columns(
        &self,
        source: &SourceSettings,
        change: &SchemaChange,
        current: &[String],
        arrow_types: &[(String, DataType)],
    ) -> Result<Vec<String>> {
        each!(self, s => s.follow_columns(source, change, current, arrow_types).await)
    }

    fn plan_rebuild(
        &self,
        stored: Option<&Checkpoint>,
        directive: Option<&str>,
        snapshot_first: bool,
    ) -> std::result::Result<Planned, String> {
        each!(self, s => s.plan_rebuild(stored, directive, snapshot_first))
    }

    async fn begin_rebuild(
        &mut self,
        rebuild: &Rebuild,
        source: &SourceSettings,
        columns: &[String],
    ) -> Result<()> {
        each!(self, s => s.begin_rebuild(rebuild, source, columns).await)
    }

    async fn swap_rebuilt(&mut self, shadow: &TableRef) -> Result<()> {
        each!(self, s => s.swap_rebuilt(shadow).await)
    }

    async fn load(&self, batch: LoadBatch, checkpoint_id: u64, seq: u32) -> Result<LoadResult> {
        each!(self, s => s.load(batch, checkpoint_id, seq).await)
    }

    async fn commit(&self, txns: &[PendingTxn]) -> Result<Vec<LostLoad>> {
        each!(self, s => s.commit(txns).await)
    }

    async fn abort(&self, scheme: LabelScheme, checkpoint_id: u64) -> Result<u32> {
        each!(self, s => s.abort(scheme, checkpoint_id).await)
    }

    async fn abort_txns(&self, txns: &[PendingTxn]) -> usize {
        each!(self, s => s.abort_txns(txns).await)
    }

    async fn recover(&self, loaded: Option<&Checkpoint>) -> Result<Vec<LostLoad>> {
        each!(self, s => s.recover(loaded).await)
    }
}
