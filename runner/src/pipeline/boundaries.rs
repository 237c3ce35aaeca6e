//! When the snapshot phase may checkpoint (pure).
//!
//! A snapshot checkpoint records the finished tablets; after a restart the splits it does not
//! record are read again from their first row. Into an upsert sink that is harmless (the rows are
//! upserted again). Into an append-only sink — a changelog-mode DUPLICATE KEY table — every row
//! loaded twice stays twice, so with 2PC such a sync checkpoints only at *split boundaries*: when
//! every split with rows in the open loads has finished. The loads of a half-read split are then
//! always pre-committed under a checkpoint id no saved checkpoint has, and a restart aborts them
//! (`pipeline::recover`) before reading the split again: exactly once.
//!
//! Splits are read a few at a time, so such a point may not come by itself; while a checkpoint is
//! due and splits are open, the pipeline holds the reader (no new split starts) until the open
//! ones finish. Between two checkpoints the loads stay pre-committed, for at most the time the
//! open splits take to finish.

use std::collections::BTreeSet;

/// What to do after an event of the snapshot phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryAction {
    /// Save a checkpoint now (and let the reader go on).
    Checkpoint,
    /// A checkpoint is due but would record half a split: start no new split until it can.
    Hold,
    /// Nothing is due.
    Nothing,
}

/// The splits with rows in the sink's open loads, and whether a checkpoint is due.
#[derive(Debug, Clone, Default)]
pub struct SplitBoundaries {
    whole_splits: bool,
    open: BTreeSet<usize>,
    due: bool,
}

impl SplitBoundaries {
    /// `whole_splits`: checkpoint only when no split is half-delivered.
    pub fn new(whole_splits: bool) -> Self {
        Self {
            whole_splits,
            ..Self::default()
        }
    }

    /// Whether checkpoints wait for split boundaries.
    pub fn enabled(&self) -> bool {
        self.whole_splits
    }

    /// Rows of `split` went to the sink.
    pub fn batch(&mut self, split: usize) {
        self.open.insert(split);
    }

    /// Every row of `split` went to the sink; its tablets are done, worth a checkpoint.
    pub fn split_done(&mut self, split: usize) {
        self.open.remove(&split);
        self.due = true;
    }

    /// The checkpoint interval passed.
    pub fn due(&mut self) {
        self.due = true;
    }

    /// Whether a checkpoint now records whole splits only (always true without whole splits).
    pub fn can_checkpoint(&self) -> bool {
        !self.whole_splits || self.open.is_empty()
    }

    /// What to do now; a checkpoint decided on is no longer due.
    pub fn decide(&mut self) -> BoundaryAction {
        if !self.due {
            BoundaryAction::Nothing
        } else if self.can_checkpoint() {
            self.due = false;
            BoundaryAction::Checkpoint
        } else {
            BoundaryAction::Hold
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_whole_splits_every_split_end_and_interval_checkpoints() {
        let mut b = SplitBoundaries::new(false);
        b.batch(0);
        b.batch(1);
        assert_eq!(b.decide(), BoundaryAction::Nothing);
        b.due();
        assert_eq!(b.decide(), BoundaryAction::Checkpoint, "mid-split is fine");
        b.split_done(0);
        assert_eq!(b.decide(), BoundaryAction::Checkpoint);
        assert_eq!(b.decide(), BoundaryAction::Nothing);
    }

    #[test]
    fn whole_splits_wait_until_no_split_is_half_delivered() {
        let mut b = SplitBoundaries::new(true);
        b.batch(0);
        b.batch(1);
        b.due();
        assert_eq!(b.decide(), BoundaryAction::Hold);
        assert!(!b.can_checkpoint());
        b.split_done(0);
        assert_eq!(b.decide(), BoundaryAction::Hold, "split 1 is still open");
        b.batch(1);
        b.split_done(1);
        assert_eq!(b.decide(), BoundaryAction::Checkpoint);
        assert_eq!(b.decide(), BoundaryAction::Nothing);
        // A split that sent nothing yet is not open.
        b.split_done(2);
        assert_eq!(b.decide(), BoundaryAction::Checkpoint);
    }
}
