//! A snapshot read by shards (`spec.snapshot.parallelism` above 1; docs/ARCHITECTURE.md §3.13):
//! which tablets a shard reads, what its consumer id and checkpoint are called, and when the
//! changelog may start after it. The runner and the operator both follow these rules, so they
//! live here, pure.
//!
//! - **One T0 for all shards**, taken before any shard reads and recorded in the runners'
//!   manifest as the annotation [`SNAPSHOT_T0_ANNOTATION`] (a Doris TSO). Every shard reads the
//!   table after T0 and records T0 in its checkpoint; the changelog starts at T0 once every shard
//!   is done.
//! - **Disjoint tablets**: tablet `t` belongs to shard `t mod N` ([`shard_of_tablet`]). The rule
//!   depends on the tablet alone, not on its place in a list, so shards that plan at different
//!   times (a restarted shard, a partition added meanwhile) still split the table the same way:
//!   every tablet of the table is read by exactly one shard.
//! - **Own labels and checkpoint**: shard `i` of `N` runs as consumer `<consumerId>-s<i>-of-<N>`
//!   ([`shard_consumer_id`]), whose Stream Load labels no other shard (and no other parallelism)
//!   produces, and keeps its checkpoint apart: ConfigMap `<checkpoint ConfigMap>-shard-<i>`
//!   ([`shard_configmap`]) or directory `<dir>/shard-<i>` ([`SHARD_DIR_PREFIX`]). The fencing
//!   of docs/ARCHITECTURE.md §3.7 then works per shard, as for any runner.

use crate::checkpoint::{Checkpoint, Position};

/// The annotation on a runner's manifest holding the sharded snapshot's T0: the Doris TSO (a
/// decimal integer) taken before any shard read. Set by the operator; by hand for standalone
/// shards.
pub const SNAPSHOT_T0_ANNOTATION: &str = "dcs.dev/snapshot-t0";

/// The environment variable Kubernetes sets in the pods of an Indexed Job: the pod's index.
pub const JOB_COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The directory of shard `i`'s checkpoint under a checkpoint directory: `shard-<i>`.
pub const SHARD_DIR_PREFIX: &str = "shard-";

/// The shard that reads tablet `tablet` when `count` shards read the snapshot.
pub fn shard_of_tablet(tablet: i64, count: u32) -> u32 {
    // rem_euclid of a positive modulus is in 0..count.
    u32::try_from(tablet.rem_euclid(i64::from(count.max(1)))).unwrap_or(0)
}

/// The consumer id shard `index` of `count` runs as: `<consumer>-s<index>-of-<count>`.
pub fn shard_consumer_id(consumer_id: &str, index: u32, count: u32) -> String {
    format!("{consumer_id}-s{index}-of-{count}")
}

/// The checkpoint ConfigMap of shard `index`: `<configmap>-shard-<index>`.
pub fn shard_configmap(configmap: &str, index: u32) -> String {
    format!("{configmap}-shard-{index}")
}

/// The checkpoint directory of shard `index` under `dir`'s name: `shard-<index>`.
pub fn shard_dir_name(index: u32) -> String {
    format!("{SHARD_DIR_PREFIX}{index}")
}

/// What one shard's checkpoint says, for the hand-over and for status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardState {
    /// No checkpoint yet: the shard has not started (or not saved).
    NotStarted,
    /// Reading: tablets done of its total.
    Reading {
        /// Tablets of the shard whose rows are all in the sink.
        tablets_done: u64,
        /// The shard's tablets.
        tablets_total: u64,
    },
    /// Every tablet of the shard is read and its last checkpoint saved, but that checkpoint's
    /// loads are not known to be committed yet (the shard commits them, or its restart does), or
    /// the shard stopped on an error after saving it: not done. Handing over now could leave
    /// those rows, older than T0, nowhere.
    Committing {
        /// Pre-committed loads the `Done` checkpoint still lists.
        loads: usize,
        /// The error the shard stopped with, if it recorded one.
        stopped: Option<String>,
    },
    /// Every tablet of the shard is in the sink, committed.
    Done,
    /// The checkpoint is not this shard's: another consumer, or another T0.
    Foreign(String),
}

/// The state of shard `index` of `count` of consumer `consumer_id` at T0 `t0_tso` (`None` for a
/// snapshot-mode sync, which has no T0), from its stored checkpoint.
pub fn shard_state(
    checkpoint: Option<&Checkpoint>,
    consumer_id: &str,
    index: u32,
    count: u32,
    t0_tso: Option<i64>,
) -> ShardState {
    let Some(cp) = checkpoint else {
        return ShardState::NotStarted;
    };
    let expected = shard_consumer_id(consumer_id, index, count);
    if cp.consumer_id != expected {
        return ShardState::Foreign(format!(
            "its checkpoint belongs to consumer {}, not {expected}",
            cp.consumer_id
        ));
    }
    let found = cp.start_point.as_ref().map(|o| o.tso);
    if found != t0_tso {
        let show = |t: Option<i64>| t.map_or_else(|| "none".to_owned(), |t| t.to_string());
        return ShardState::Foreign(format!(
            "its checkpoint was read at T0 {}, not at T0 {}",
            show(found),
            show(t0_tso)
        ));
    }
    let failed = cp
        .stopped
        .as_ref()
        .filter(|s| s.exit_code != 0)
        .map(|s| format!("{}: {}", s.reason, s.message));
    match &cp.position {
        Position::Done if cp.pending_txns.is_empty() && failed.is_none() => ShardState::Done,
        Position::Done => ShardState::Committing {
            loads: cp.pending_txns.len(),
            stopped: failed,
        },
        // Every tablet read, the checkpoint of the last split saved with its loads: committing
        // them is all that is left.
        Position::Snapshot { tablets_total, .. }
            if *tablets_total > 0
                && cp.tablets_done_count() >= *tablets_total
                && !cp.pending_txns.is_empty() =>
        {
            ShardState::Committing {
                loads: cp.pending_txns.len(),
                stopped: failed,
            }
        }
        Position::Snapshot { tablets_total, .. } => ShardState::Reading {
            tablets_done: cp.tablets_done_count(),
            tablets_total: *tablets_total,
        },
        Position::Changelog { .. } => {
            ShardState::Foreign("its checkpoint is in the changelog phase".into())
        }
    }
}

/// Whether the changelog may start at T0: every one of the `count` shards' checkpoints (in index
/// order) says done at that T0. The error names every shard that is not, e.g. `shard 1 of 4:
/// reading, 3 of 8 tablets done; shard 3 of 4: not started`.
///
/// # Errors
/// The shards that are not done, and why.
pub fn handover(
    checkpoints: &[Option<Checkpoint>],
    consumer_id: &str,
    count: u32,
    t0_tso: i64,
) -> Result<(), String> {
    let mut missing = Vec::new();
    for index in 0..count {
        let cp = checkpoints.get(index as usize).and_then(Option::as_ref);
        let what = match shard_state(cp, consumer_id, index, count, Some(t0_tso)) {
            ShardState::Done => continue,
            ShardState::NotStarted => "not started".to_owned(),
            ShardState::Reading {
                tablets_done,
                tablets_total,
            } => format!("reading, {tablets_done} of {tablets_total} tablets done"),
            ShardState::Committing { loads, stopped } => committing(loads, stopped.as_deref()),
            ShardState::Foreign(why) => why,
        };
        missing.push(format!("shard {index} of {count}: {what}"));
    }
    if !missing.is_empty() {
        return Err(missing.join("; "));
    }
    match tablets_moved(checkpoints, count) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Whether the shards planned different tablet sets (each records every tablet of the table at
/// its first plan, `Checkpoint::snapshot_tablets`): the table's tablets changed between two
/// shards' plans, so some tablets were read by no shard or by two, and the snapshot must be read
/// again (`crate::tablets::moved_message`). Shards without a record (older runners) are not
/// compared.
pub fn tablets_moved(checkpoints: &[Option<Checkpoint>], count: u32) -> Option<String> {
    let sets: Vec<(usize, &crate::tablets::TabletSet)> = checkpoints
        .iter()
        .take(count as usize)
        .enumerate()
        .filter_map(|(i, cp)| Some((i, cp.as_ref()?.snapshot_tablets.as_ref()?)))
        .collect();
    let (first, first_set) = sets.first()?;
    sets.iter().skip(1).find_map(|(i, set)| {
        crate::tablets::differ(first_set, set).map(|what| {
            crate::tablets::moved_message(&format!("shards {first} and {i} of {count}: {what}"))
        })
    })
}

/// How a shard whose last checkpoint is not committed yet is described, e.g. `every tablet read,
/// 3 loads of its last checkpoint not committed yet`.
pub fn committing(loads: usize, stopped: Option<&str>) -> String {
    let mut s =
        format!("every tablet read, {loads} load(s) of its last checkpoint not committed yet");
    if let Some(why) = stopped {
        s += &format!(" (it stopped: {why})");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Offset;
    use crate::testing::CheckpointBuilder;

    fn t0(tso: i64) -> Offset {
        Offset {
            timestamp: "2026-12-07 06:00:00".into(),
            epoch_ms: tso >> 18,
            tso,
        }
    }

    fn cp(consumer: &str, position: Position, tso: i64) -> Checkpoint {
        CheckpointBuilder::new()
            .consumer(consumer)
            .id(3)
            .saved_at("2026-12-07T06:00:00Z")
            .position(position)
            .start_point(t0(tso))
            .build()
    }

    #[test]
    fn every_tablet_has_exactly_one_shard_whatever_the_list() {
        let tablets: Vec<i64> = (10_001..10_041).collect();
        for count in 1..=8 {
            let mut per_shard = vec![0; count as usize];
            for t in &tablets {
                let s = shard_of_tablet(*t, count);
                assert!(s < count);
                per_shard[s as usize] += 1;
            }
            assert_eq!(per_shard.iter().sum::<usize>(), tablets.len());
            // Consecutive ids (a partition's buckets) spread evenly.
            assert!(per_shard.iter().max().unwrap() - per_shard.iter().min().unwrap() <= 1);
        }
        // The owner depends on the tablet only, never on what else is listed.
        assert_eq!(shard_of_tablet(10_007, 4), 3);
        assert_eq!(shard_of_tablet(-5, 4), 3);
        assert_eq!(shard_of_tablet(7, 0), 0);
    }

    #[test]
    fn shards_are_named_apart() {
        assert_eq!(
            shard_consumer_id("student-sync", 2, 4),
            "student-sync-s2-of-4"
        );
        assert_ne!(
            shard_consumer_id("student-sync", 1, 4),
            shard_consumer_id("student-sync", 1, 2)
        );
        assert_eq!(
            shard_configmap("student-sync-checkpoint", 3),
            "student-sync-checkpoint-shard-3"
        );
        assert_eq!(shard_dir_name(0), "shard-0");
    }

    #[test]
    fn the_changelog_waits_for_every_shard_at_the_same_t0() {
        let done = |i: u32| Some(cp(&shard_consumer_id("c", i, 3), Position::Done, 100));
        let all = vec![done(0), done(1), done(2)];
        assert_eq!(handover(&all, "c", 3, 100), Ok(()));
        let reading = Some(cp(
            &shard_consumer_id("c", 1, 3),
            Position::Snapshot {
                tablets_done: vec![4],
                tablets_done_ranges: vec![],
                tablets_done_count: None,
                tablets_total: 3,
                rows_total: None,
            },
            100,
        ));
        assert_eq!(
            handover(&[done(0), reading, None], "c", 3, 100),
            Err("shard 1 of 3: reading, 1 of 3 tablets done; shard 2 of 3: not started".into())
        );
        // Another T0 (an earlier snapshot's shard) or another parallelism is never taken for done.
        let other_t0 = Some(cp(&shard_consumer_id("c", 2, 3), Position::Done, 99));
        assert_eq!(
            handover(&[done(0), done(1), other_t0], "c", 3, 100),
            Err("shard 2 of 3: its checkpoint was read at T0 99, not at T0 100".into())
        );
        let other_n = Some(cp(&shard_consumer_id("c", 2, 4), Position::Done, 100));
        assert_eq!(
            handover(&[done(0), done(1), other_n], "c", 3, 100),
            Err("shard 2 of 3: its checkpoint belongs to consumer c-s2-of-4, not c-s2-of-3".into())
        );
        // Fewer checkpoints than shards: the rest have not started.
        let done_of_2 = Some(cp(&shard_consumer_id("c", 0, 2), Position::Done, 100));
        assert_eq!(
            handover(&[done_of_2], "c", 2, 100),
            Err("shard 1 of 2: not started".into())
        );
    }

    #[test]
    fn a_shard_is_done_only_once_its_last_loads_are_committed() {
        let id = shard_consumer_id("c", 1, 2);
        let done = Some(cp(&shard_consumer_id("c", 0, 2), Position::Done, 100));
        // Saved `Done` with its last loads, killed (or refused by the sink) before committing
        // them: not done, and the hand-over waits.
        let mut saved = cp(&id, Position::Done, 100);
        saved.pending_txns = vec![
            crate::checkpoint::PendingTxn {
                db: "sink".into(),
                label: "l-7".into(),
                txn_id: 7,
                rows: None,
                dead_letter: false,
            };
            3
        ];
        assert_eq!(
            shard_state(Some(&saved), "c", 1, 2, Some(100)),
            ShardState::Committing {
                loads: 3,
                stopped: None
            }
        );
        assert_eq!(
            handover(&[done.clone(), Some(saved.clone())], "c", 2, 100),
            Err("shard 1 of 2: every tablet read, 3 load(s) of its last checkpoint not committed yet".into())
        );
        // It stopped on the commit's error: the stop record says why.
        let mut failed = saved.clone();
        failed.stopped = Some(crate::checkpoint::Stopped {
            at: "2026-12-07T06:01:00Z".into(),
            reason: "StreamLoadFailed".into(),
            exit_code: 1,
            message: "the sink FE is down".into(),
        });
        assert_eq!(
            handover(&[done.clone(), Some(failed.clone())], "c", 2, 100),
            Err("shard 1 of 2: every tablet read, 3 load(s) of its last checkpoint not committed yet (it stopped: StreamLoadFailed: the sink FE is down)".into())
        );
        // The checkpoint of the last split, every tablet read, its loads not committed yet.
        let mut last_split = saved.clone();
        last_split.position = Position::Snapshot {
            tablets_done: vec![5, 6],
            tablets_done_ranges: vec![],
            tablets_done_count: None,
            tablets_total: 2,
            rows_total: None,
        };
        assert_eq!(
            shard_state(Some(&last_split), "c", 1, 2, Some(100)),
            ShardState::Committing {
                loads: 3,
                stopped: None
            }
        );
        last_split.pending_txns.clear();
        assert_eq!(
            shard_state(Some(&last_split), "c", 1, 2, Some(100)),
            ShardState::Reading {
                tablets_done: 2,
                tablets_total: 2
            }
        );
        // A stop record with an error counts even once the loads are off the checkpoint.
        failed.pending_txns.clear();
        assert!(matches!(
            shard_state(Some(&failed), "c", 1, 2, Some(100)),
            ShardState::Committing { loads: 0, .. }
        ));
        // Committed, the checkpoint saved again without them (and the run's own `Done` stop):
        // done.
        let mut settled = cp(&id, Position::Done, 100);
        settled.stopped = Some(crate::checkpoint::Stopped {
            at: "2026-12-07T06:02:00Z".into(),
            reason: "Done".into(),
            exit_code: 0,
            message: "the snapshot is complete".into(),
        });
        assert_eq!(handover(&[done, Some(settled)], "c", 2, 100), Ok(()));
    }

    #[test]
    fn shards_that_planned_different_tablets_never_hand_over() {
        let done = |i: u32, tablets: &[i64]| {
            let mut c = cp(&shard_consumer_id("c", i, 2), Position::Done, 100);
            c.snapshot_tablets = Some(crate::tablets::tablet_set(tablets));
            Some(c)
        };
        let same = [done(0, &[1, 2, 3, 4]), done(1, &[4, 3, 2, 1])];
        assert_eq!(handover(&same, "c", 2, 100), Ok(()));
        assert_eq!(tablets_moved(&same, 2), None);
        // Shard 1 planned after a TRUNCATE gave the table new tablets.
        let moved = [done(0, &[1, 2, 3, 4]), done(1, &[5, 6, 7, 8])];
        let why = handover(&moved, "c", 2, 100).unwrap_err();
        assert_eq!(
            why,
            "the table's tablets changed during the snapshot (shards 0 and 1 of 2: they planned 4 and 4 tablets; tablet 1 is in the first only): a TRUNCATE, INSERT OVERWRITE or partition replace gave it new tablets, and a snapshot that planned the old ones cannot say what it read; the snapshot is read again under a new consumer"
        );
        assert_eq!(tablets_moved(&moved, 2), Some(why));
        // A shard of an older runner, without a record, is not compared.
        let mut old = done(1, &[]);
        old.as_mut().unwrap().snapshot_tablets = None;
        assert_eq!(tablets_moved(&[done(0, &[1, 2]), old], 2), None);
    }
}
