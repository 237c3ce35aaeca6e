//! Where reading starts (docs/ARCHITECTURE.md §3.1): the checkpoint in the store wins, then the
//! offset-table row of the consumer id, then the startup mode. Pure.

use dcs_crds::spec::StartupMode;

use crate::checkpoint::{Checkpoint, Offset, Position};
use crate::source::tso::offset_at;

/// The resolved start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartPlan {
    /// A bounded sync that already finished: nothing to do.
    Done,
    /// Read the snapshot (skipping tablets already written), then the changelog from `then`
    /// (`initial`), or stop (`snapshot`).
    Snapshot {
        /// Tablets already in the sink.
        tablets_done: Vec<i64>,
        /// More tablets already in the sink, as ranges over the snapshot's tablet list.
        done_ranges: Vec<[i64; 2]>,
        /// Where the changelog starts after the snapshot.
        then: Option<Offset>,
    },
    /// `initial` without a checkpoint: take T0 from Doris, then read the snapshot.
    SnapshotFromNow,
    /// Read the changelog from this offset.
    Changelog {
        /// The first window's start.
        from: Offset,
    },
    /// `latest` without a checkpoint: read the changelog from Doris "now".
    ChangelogFromNow,
}

/// Why the plan was chosen, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartSource {
    /// The stored checkpoint.
    Checkpoint,
    /// The consumer's row in the offset table.
    OffsetTable,
    /// `startup.mode`.
    StartupMode,
}

/// Decide where to start without an offset table.
pub fn plan_start(
    checkpoint: Option<&Checkpoint>,
    mode: StartupMode,
    timestamp_ms: Option<i64>,
) -> (StartPlan, StartSource) {
    plan_start_with_offset_row(checkpoint, None, mode, timestamp_ms)
}

/// Decide where to start: the checkpoint, else the offset-table row (the changelog from its
/// timestamp, whatever the mode), else the startup mode.
pub fn plan_start_with_offset_row(
    checkpoint: Option<&Checkpoint>,
    offset_row: Option<&Offset>,
    mode: StartupMode,
    timestamp_ms: Option<i64>,
) -> (StartPlan, StartSource) {
    if checkpoint.is_none()
        && let Some(from) = offset_row
    {
        return (
            StartPlan::Changelog { from: from.clone() },
            StartSource::OffsetTable,
        );
    }
    if let Some(cp) = checkpoint {
        let plan = match &cp.position {
            Position::Done => StartPlan::Done,
            Position::Snapshot {
                tablets_done,
                tablets_done_ranges,
                ..
            } => StartPlan::Snapshot {
                tablets_done: tablets_done.clone(),
                done_ranges: tablets_done_ranges.clone(),
                then: cp.start_point.clone(),
            },
            Position::Changelog { offset } => StartPlan::Changelog {
                from: offset.clone(),
            },
        };
        return (plan, StartSource::Checkpoint);
    }
    let plan = match mode {
        StartupMode::Snapshot => StartPlan::Snapshot {
            tablets_done: Vec::new(),
            done_ranges: Vec::new(),
            then: None,
        },
        StartupMode::Initial => StartPlan::SnapshotFromNow,
        StartupMode::Latest => StartPlan::ChangelogFromNow,
        StartupMode::FromTimestamp => match timestamp_ms {
            Some(ms) => StartPlan::Changelog {
                from: offset_at(ms),
            },
            // Validation requires the timestamp with this mode; be safe anyway.
            None => StartPlan::ChangelogFromNow,
        },
    };
    (plan, StartSource::StartupMode)
}

#[cfg(test)]
mod tests {
    use dcs_crds::testing::CheckpointBuilder;

    use super::*;

    fn cp(position: Position, start_point: Option<Offset>) -> Checkpoint {
        let cp = CheckpointBuilder::new()
            .consumer("c")
            .id(4)
            .position(position)
            .label_scheme(1);
        match start_point {
            Some(t0) => cp.start_point(t0),
            None => cp,
        }
        .build()
    }

    #[test]
    fn the_checkpoint_wins_over_the_startup_mode() {
        let t0 = offset_at(1_795_957_200_000);
        let snap = cp(
            Position::Snapshot {
                tablets_done: vec![3],
                tablets_done_ranges: vec![],
                tablets_done_count: None,
                tablets_total: 4,
                rows_total: None,
            },
            Some(t0.clone()),
        );
        assert_eq!(
            plan_start(Some(&snap), StartupMode::Latest, None),
            (
                StartPlan::Snapshot {
                    tablets_done: vec![3],
                    done_ranges: vec![],
                    then: Some(t0.clone())
                },
                StartSource::Checkpoint
            )
        );
        let log = cp(Position::Changelog { offset: t0.clone() }, None);
        assert_eq!(
            plan_start(Some(&log), StartupMode::Snapshot, None).0,
            StartPlan::Changelog { from: t0 }
        );
        assert_eq!(
            plan_start(Some(&cp(Position::Done, None)), StartupMode::Initial, None).0,
            StartPlan::Done
        );
    }

    #[test]
    fn the_offset_row_comes_between_checkpoint_and_mode() {
        let row = offset_at(1_795_957_200_000);
        assert_eq!(
            plan_start_with_offset_row(None, Some(&row), StartupMode::Initial, None),
            (
                StartPlan::Changelog { from: row.clone() },
                StartSource::OffsetTable
            )
        );
        let log = cp(
            Position::Changelog {
                offset: offset_at(1_795_960_000_000),
            },
            None,
        );
        assert_eq!(
            plan_start_with_offset_row(Some(&log), Some(&row), StartupMode::Initial, None).1,
            StartSource::Checkpoint
        );
        assert_eq!(
            plan_start_with_offset_row(None, None, StartupMode::Latest, None),
            (StartPlan::ChangelogFromNow, StartSource::StartupMode)
        );
    }

    #[test]
    fn startup_modes_without_a_checkpoint() {
        let plan = |m, ts| plan_start(None, m, ts).0;
        assert_eq!(
            plan(StartupMode::Snapshot, None),
            StartPlan::Snapshot {
                tablets_done: vec![],
                done_ranges: vec![],
                then: None
            }
        );
        assert_eq!(plan(StartupMode::Initial, None), StartPlan::SnapshotFromNow);
        assert_eq!(plan(StartupMode::Latest, None), StartPlan::ChangelogFromNow);
        let from = plan(StartupMode::FromTimestamp, Some(1_795_957_200_999));
        assert_eq!(
            from,
            StartPlan::Changelog {
                from: Offset {
                    timestamp: "2026-11-29 13:00:00".into(),
                    epoch_ms: 1_795_957_200_000,
                    tso: 1_795_957_200_000 << 18,
                }
            }
        );
    }
}
