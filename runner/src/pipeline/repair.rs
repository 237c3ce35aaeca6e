//! A pre-committed load that Doris aborted (or forgot) before its commit: what to do (pure).
//!
//! Doris aborts a PRECOMMITTED transaction `stream_load_default_precommit_timeout_second` after its
//! pre-commit (an hour by default), so a runner that is down longer finds the loads of its last
//! checkpoint gone when it commits them again; other loads of the same checkpoint may be
//! committed by then (they were committed before the crash). The checkpoint must not be taken
//! for written. While the changelog still holds what the loads were read from, they are made
//! again, without loss and without duplication:
//!
//! - **upsert sinks** rewind: the sync goes back to the position before the checkpoint and reads
//!   on from there. Every row of the checkpoint is written again, in order, after the loads of it
//!   that were committed: each key ends with its last change, as if nothing had been lost (a
//!   reader may meanwhile see a key at an older version for a moment).
//! - **changelog-mode sinks** append: rows written twice stay twice, so exactly the lost loads'
//!   rows are loaded again. Their indexes among the rows read since the checkpoint before are in
//!   the checkpoint ([`super::ledger`]); the same windows are read again, from the same rows on,
//!   and the rows at those indexes loaded under new labels, recorded in a new checkpoint.
//!
//! Otherwise — the snapshot of a changelog-mode sink (its rows cannot be read again as of T0), or
//! a checkpoint that does not say where its loads came from (written before this was recorded) —
//! the run stops with OffsetExpired: only a re-initialisation brings the sink back in step. Reading
//! again checks the changelog's retention like every read: a window gone means OffsetExpired too.

use dcs_crds::SinkMode;

use crate::checkpoint::{LoadsSource, PendingTxn, Position, RowSpan};

/// What to do about lost loads.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// Go back to this position and read on from there (upsert sinks).
    Rewind(Position),
    /// Read `source` again and load the rows of `spans` (changelog-mode sinks), sorted.
    Reload {
        /// What the checkpoint's loads were read from.
        source: LoadsSource,
        /// The lost loads' rows.
        spans: Vec<RowSpan>,
    },
    /// Nothing can bring them back: why.
    Impossible(String),
}

/// Decide how to make the lost loads `lost` of a checkpoint whose loads are `pending` again:
/// never when it holds a load into the dead-letter table (`sink.doris.deadLetter`), since reading
/// its rows again would write the refused ones twice, or lose them with the lost load; otherwise
/// as [`plan_repair`].
pub fn plan(
    pending: &[PendingTxn],
    source: Option<&LoadsSource>,
    lost: &[PendingTxn],
    mode: SinkMode,
) -> Repair {
    if pending.iter().chain(lost).any(|t| t.dead_letter) {
        return Repair::Impossible(
            "the checkpoint also holds rows written into the dead-letter table, which loading its \
             rows again would write twice"
                .into(),
        );
    }
    plan_repair(source, lost, mode)
}

/// Decide how to make the lost loads `lost` of a checkpoint again.
pub fn plan_repair(source: Option<&LoadsSource>, lost: &[PendingTxn], mode: SinkMode) -> Repair {
    let labels: Vec<&str> = lost.iter().map(|t| t.label.as_str()).collect();
    let Some(source) = source else {
        return Repair::Impossible(format!(
            "the checkpoint does not record where the rows of its loads {} came from",
            labels.join(", ")
        ));
    };
    match mode {
        SinkMode::Upsert => Repair::Rewind(source.from.clone()),
        SinkMode::Changelog => {
            if source.windows.is_empty() {
                return Repair::Impossible(format!(
                    "the loads {} hold snapshot rows, which cannot be read again as they were at T0",
                    labels.join(", ")
                ));
            }
            let mut spans = Vec::with_capacity(lost.len());
            for txn in lost {
                match txn.rows {
                    Some(span) if span.count > 0 => spans.push(span),
                    Some(_) => {}
                    None => {
                        return Repair::Impossible(format!(
                            "the checkpoint does not record which rows load {} held",
                            txn.label
                        ));
                    }
                }
            }
            spans.sort_by_key(|s| s.first);
            Repair::Reload {
                source: source.clone(),
                spans,
            }
        }
    }
}

/// The parts of a batch holding rows `first..first + n` (by index) that fall in `spans` (sorted),
/// as (offset in the batch, length).
pub fn select(spans: &[RowSpan], first: u64, n: u64) -> Vec<(usize, usize)> {
    let end = first + n;
    spans
        .iter()
        .filter_map(|s| {
            let from = s.first.max(first);
            let to = (s.first + s.count).min(end);
            (from < to).then(|| {
                (
                    usize::try_from(from - first).unwrap_or(usize::MAX),
                    usize::try_from(to - from).unwrap_or(usize::MAX),
                )
            })
        })
        .collect()
}

/// The last row index any span needs (exclusive): reading can stop there.
pub fn needed_until(spans: &[RowSpan]) -> u64 {
    spans.iter().map(|s| s.first + s.count).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{Offset, WindowRead};

    fn offset(s: i64) -> Offset {
        crate::source::tso::offset_at(s * 1000)
    }

    fn txn(label: &str, rows: Option<(u64, u64)>) -> PendingTxn {
        PendingTxn {
            db: "d".into(),
            label: label.into(),
            txn_id: 1,
            rows: rows.map(|(first, count)| RowSpan { first, count }),
            dead_letter: false,
        }
    }

    fn source(windows: bool) -> LoadsSource {
        LoadsSource {
            from: Position::Changelog { offset: offset(10) },
            windows: if windows {
                vec![WindowRead {
                    start: offset(10),
                    end: offset(20),
                    skip: 0,
                }]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn upsert_sinks_rewind_to_the_position_before_the_checkpoint() {
        assert_eq!(
            plan_repair(Some(&source(true)), &[txn("a", None)], SinkMode::Upsert),
            Repair::Rewind(Position::Changelog { offset: offset(10) })
        );
        // Snapshot loads too: the tablets are read again, the changelog from T0 follows.
        assert!(matches!(
            plan_repair(Some(&source(false)), &[txn("a", None)], SinkMode::Upsert),
            Repair::Rewind(_)
        ));
    }

    #[test]
    fn changelog_sinks_reload_exactly_the_lost_rows() {
        let lost = [txn("b", Some((100, 50))), txn("a", Some((0, 100)))];
        let Repair::Reload { spans, .. } =
            plan_repair(Some(&source(true)), &lost, SinkMode::Changelog)
        else {
            panic!()
        };
        assert_eq!(
            spans,
            vec![
                RowSpan {
                    first: 0,
                    count: 100
                },
                RowSpan {
                    first: 100,
                    count: 50
                }
            ]
        );
        assert_eq!(needed_until(&spans), 150);
    }

    #[test]
    fn a_checkpoint_holding_a_dead_letter_load_is_never_loaded_again() {
        let sink = txn("a", Some((0, 100)));
        let dead = PendingTxn {
            dead_letter: true,
            ..txn("b", Some((0, 100)))
        };
        let why = "the checkpoint also holds rows written into the dead-letter table, which \
                   loading its rows again would write twice";
        for mode in [SinkMode::Upsert, SinkMode::Changelog] {
            // The sink's load lost, the dead-letter load committed; and the other way round.
            let pending = [sink.clone(), dead.clone()];
            for lost in [&sink, &dead] {
                assert_eq!(
                    plan(
                        &pending,
                        Some(&source(true)),
                        std::slice::from_ref(lost),
                        mode
                    ),
                    Repair::Impossible(why.into())
                );
            }
        }
        // Without one, as before.
        assert!(matches!(
            plan(
                std::slice::from_ref(&sink),
                Some(&source(true)),
                std::slice::from_ref(&sink),
                SinkMode::Upsert
            ),
            Repair::Rewind(_)
        ));
    }

    #[test]
    fn what_cannot_be_read_again_is_impossible() {
        let Repair::Impossible(why) = plan_repair(
            Some(&source(false)),
            &[txn("a", Some((0, 1)))],
            SinkMode::Changelog,
        ) else {
            panic!()
        };
        assert!(why.contains("snapshot rows"), "{why}");
        assert!(matches!(
            plan_repair(Some(&source(true)), &[txn("a", None)], SinkMode::Changelog),
            Repair::Impossible(_)
        ));
        assert!(matches!(
            plan_repair(None, &[txn("a", None)], SinkMode::Upsert),
            Repair::Impossible(_)
        ));
    }

    #[test]
    fn batches_are_cut_to_the_spans() {
        let spans = [
            RowSpan {
                first: 5,
                count: 10,
            },
            RowSpan {
                first: 20,
                count: 5,
            },
        ];
        // Rows 0..8: 5..8 of span one.
        assert_eq!(select(&spans, 0, 8), vec![(5, 3)]);
        // Rows 8..30: 8..15 and 20..25.
        assert_eq!(select(&spans, 8, 22), vec![(0, 7), (12, 5)]);
        assert!(select(&spans, 15, 5).is_empty());
        assert!(select(&spans, 100, 5).is_empty());
    }
}
