//! What a run is doing, as the pipeline publishes it (a `watch` channel) and `/metrics`,
//! `/readyz` and the demo read it.

use crate::checkpoint::{Counters, Offset};

/// What the pipeline is doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// Resolving the start point.
    #[default]
    Starting,
    /// Reading the snapshot.
    Snapshot,
    /// Reading changelog windows.
    Changelog,
    /// Finished.
    Done,
}

/// Live progress, published after every event that changes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// Phase.
    pub phase: Phase,
    /// Snapshot rows read in this run.
    pub snapshot_rows_read: u64,
    /// Tablets of the snapshot written completely.
    pub tablets_done: usize,
    /// Tablets in the snapshot.
    pub tablets_total: usize,
    /// End of the last changelog window handed to the sink.
    pub window_end: Option<Offset>,
    /// Totals (as in the checkpoint, including loads not yet checkpointed).
    pub counters: Counters,
    /// Id of the last saved checkpoint.
    pub checkpoint_id: u64,
    /// When the last checkpoint was saved (or the loaded one had been), epoch ms.
    pub last_checkpoint_ms: Option<i64>,
    /// The start point is resolved and the first read from the source succeeded.
    pub ready: bool,
    /// Stream Load retries in this run (attempts beyond the first).
    pub load_retries: u64,
    /// Span of the last changelog window handed to the sink (end − start), in seconds.
    pub last_window_seconds: Option<f64>,
    /// Failed offset-table write attempts in this run.
    pub offset_table_write_failures: u64,
}
