//! A snapshot read by shards (`spec.snapshot.parallelism` above 1; docs/ARCHITECTURE.md §3.13),
//! as far as the operator goes today: the runner reads one shard (`--shard`, or an Indexed Job's
//! `JOB_COMPLETION_INDEX`) and the changelog after all of them, but the operator does not yet run
//! the Indexed Job, record T0, or hand over to the changelog runner (docs/ARCHITECTURE.md §4.8
//! says how it will). So a sync that would read a sharded snapshot under the operator is blocked,
//! saying so, rather than given one runner that reads the whole table under a TTL divided by the
//! parallelism. Pure.

use dcs_crds::conditions::{reasons, types};

use super::plan::{Blocked, Observed};
use crate::checkpoint::Position;

/// Why the operator does not run this sync, when it would read a sharded snapshot: parallelism
/// above 1 and no checkpoint of the active consumer past its snapshot. A sync streaming (or done)
/// already is not blocked: its runner starts from its checkpoint and reads no snapshot, whatever
/// the parallelism says now.
pub fn blocked(observed: &Observed) -> Option<Blocked> {
    let n = observed.spec.snapshot.parallelism;
    if n <= 1 {
        return None;
    }
    let past_snapshot = observed
        .checkpoint
        .as_ref()
        .is_some_and(|cp| matches!(cp.position, Position::Changelog { .. } | Position::Done));
    if past_snapshot {
        return None;
    }
    Some(Blocked {
        condition: types::READY,
        reason: reasons::SHARDED_SNAPSHOT_NOT_SUPPORTED,
        message: format!(
            "spec.snapshot.parallelism is {n}, but this operator does not run a snapshot in shards yet: set it to 1, or run the {n} shards with dcs-runner run --shard 0..{} and then the changelog (runner/README.md)",
            n - 1
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::super::plan::{Plan, plan};
    use super::super::testing::{observed, streaming_checkpoint};
    use super::*;
    use dcs_crds::SnapshotSpec;

    fn sharded(n: u32) -> Observed {
        let mut o = observed();
        o.spec.snapshot = SnapshotSpec { parallelism: n };
        o
    }

    #[test]
    fn a_sync_that_would_read_a_sharded_snapshot_is_blocked_saying_why() {
        assert_eq!(
            plan(&sharded(4)),
            Plan::Block(Blocked {
                condition: "Ready",
                reason: "ShardedSnapshotNotSupported",
                message: "spec.snapshot.parallelism is 4, but this operator does not run a snapshot in shards yet: set it to 1, or run the 4 shards with dcs-runner run --shard 0..3 and then the changelog (runner/README.md)".into(),
            })
        );
        assert!(matches!(plan(&sharded(1)), Plan::Run(_)));
    }

    #[test]
    fn a_streaming_sync_streams_on_whatever_its_parallelism() {
        let mut o = sharded(4);
        o.checkpoint = Some(streaming_checkpoint("orders", 5));
        assert_eq!(blocked(&o), None);
        assert!(matches!(plan(&o), Plan::Run(_)));
    }
}
