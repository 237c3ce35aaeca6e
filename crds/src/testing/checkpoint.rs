//! [`CheckpointBuilder`]: a valid checkpoint changed with typed methods.

use crate::checkpoint::{
    Checkpoint, Counters, FORMAT_VERSION, LastError, LoadsSource, Offset, PendingTxn, Position,
    Rebuild, Stopped, WindowProgress,
};
use crate::tablets::TabletSet;

/// An offset at `epoch_ms` with the timestamp `timestamp` (Doris's `YYYY-MM-DD HH:MM:SS`, as the
/// test states it) and the TSO Doris gives that millisecond (`epoch_ms << 18`).
pub fn offset(timestamp: &str, epoch_ms: i64) -> Offset {
    Offset {
        timestamp: timestamp.to_owned(),
        epoch_ms,
        tso: epoch_ms << 18,
    }
}

/// A checkpoint of consumer `orders`, id 7, saved at 2026-11-29T14:00:00Z, reading the changelog
/// from 2026-11-29 13:59:50, labelled with the current scheme, nothing else recorded; changed
/// field by field, [`CheckpointBuilder::build`] gives it back.
///
/// ```
/// use dcs_crds::{checkpoint::Position, testing::CheckpointBuilder};
/// let cp = CheckpointBuilder::new().consumer("c").id(3).position(Position::Done).build();
/// assert_eq!((cp.consumer_id.as_str(), cp.checkpoint_id), ("c", 3));
/// ```
#[derive(Clone, Debug)]
pub struct CheckpointBuilder {
    cp: Checkpoint,
}

impl Default for CheckpointBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CheckpointBuilder {
    /// The sample checkpoint.
    pub fn new() -> Self {
        // Parsed, so that a field added to the format gets its default here.
        let sample = serde_json::json!({
            "formatVersion": FORMAT_VERSION,
            "consumerId": "orders",
            "checkpointId": 7,
            "savedAt": "2026-11-29T14:00:00Z",
            "position": {"phase": "changelog", "offset": offset("2026-11-29 13:59:50", 1_795_960_790_000)},
            "labelScheme": crate::label::LabelScheme::V2.number(),
        });
        Self {
            cp: serde_json::from_value(sample).expect("the sample checkpoint parses"),
        }
    }

    /// The checkpoint.
    pub fn build(self) -> Checkpoint {
        self.cp
    }

    /// `consumerId`.
    pub fn consumer(mut self, consumer: &str) -> Self {
        self.cp.consumer_id = consumer.to_owned();
        self
    }

    /// `checkpointId`.
    pub fn id(mut self, id: u64) -> Self {
        self.cp.checkpoint_id = id;
        self
    }

    /// `savedAt` (RFC 3339).
    pub fn saved_at(mut self, at: &str) -> Self {
        self.cp.saved_at = at.to_owned();
        self
    }

    /// `position`.
    pub fn position(mut self, position: Position) -> Self {
        self.cp.position = position;
        self
    }

    /// `position`: reading the changelog from `offset`.
    pub fn changelog_at(self, offset: Offset) -> Self {
        self.position(Position::Changelog { offset })
    }

    /// `position`: reading the snapshot of `tablets_total` tablets, those listed done.
    pub fn snapshot(self, tablets_done: &[i64], tablets_total: u64) -> Self {
        self.position(Position::Snapshot {
            tablets_done: tablets_done.to_vec(),
            tablets_done_ranges: Vec::new(),
            tablets_done_count: None,
            tablets_total,
            rows_total: None,
        })
    }

    /// `startPoint` (T0).
    pub fn start_point(mut self, t0: Offset) -> Self {
        self.cp.start_point = Some(t0);
        self
    }

    /// `pendingTxns`.
    pub fn pending_txns(mut self, txns: Vec<PendingTxn>) -> Self {
        self.cp.pending_txns = txns;
        self
    }

    /// `counters`.
    pub fn counters(mut self, counters: Counters) -> Self {
        self.cp.counters = counters;
        self
    }

    /// `lastError`.
    pub fn last_error(mut self, error: LastError) -> Self {
        self.cp.last_error = Some(error);
        self
    }

    /// `stopped`.
    pub fn stopped(mut self, stopped: Stopped) -> Self {
        self.cp.stopped = Some(stopped);
        self
    }

    /// `inWindow`.
    pub fn in_window(mut self, progress: WindowProgress) -> Self {
        self.cp.in_window = Some(progress);
        self
    }

    /// `loadsSource`.
    pub fn loads_source(mut self, source: LoadsSource) -> Self {
        self.cp.loads_source = Some(source);
        self
    }

    /// `labelScheme` (1 for checkpoints written before scheme 2).
    pub fn label_scheme(mut self, scheme: u32) -> Self {
        self.cp.label_scheme = scheme;
        self
    }

    /// `rebuild`.
    pub fn rebuild(mut self, rebuild: Option<Rebuild>) -> Self {
        self.cp.rebuild = rebuild;
        self
    }

    /// `snapshotTablets`.
    pub fn snapshot_tablets(mut self, tablets: TabletSet) -> Self {
        self.cp.snapshot_tablets = Some(tablets);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_round_trips_through_its_json() {
        let cp = CheckpointBuilder::new()
            .start_point(offset("2026-11-29 13:00:00", 1_795_957_200_000))
            .build();
        assert_eq!(Checkpoint::from_json(&cp.to_json()).unwrap(), cp);
        assert_eq!(cp.format_version, FORMAT_VERSION);
        assert_eq!(cp.counters, Counters::default());
    }
}
