//! What a run does in a snapshot read by shards (`spec.snapshot.parallelism` above 1;
//! docs/ARCHITECTURE.md §3.13): read one shard, or read the changelog after all of them. The
//! naming and tablet rules are `dcs_crds::shard`'s, shared with the operator.

use dcs_crds::DorisChangelogSync;
use dcs_crds::shard::{SNAPSHOT_T0_ANNOTATION, shard_consumer_id};
use dcs_crds::spec::StartupMode;
use dcs_doris_client::fe_api::tso_to_ms;

use crate::{Error, Result};
use dcs_crds::checkpoint::Offset;

/// How the snapshot of a sync is shared among runners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sharding {
    /// `spec.snapshot.parallelism`: the shards reading the snapshot (1: one runner reads it all,
    /// today's behaviour).
    pub count: u32,
    /// This run's shard (`--shard`, or the Indexed Job's `JOB_COMPLETION_INDEX`); `None` for the
    /// run that reads the changelog after the shards.
    pub index: Option<u32>,
    /// The sharded snapshot's T0, from the manifest's [`SNAPSHOT_T0_ANNOTATION`].
    pub t0: Option<Offset>,
}

impl Default for Sharding {
    fn default() -> Self {
        Self {
            count: 1,
            index: None,
            t0: None,
        }
    }
}

/// What this run does about the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role<'a> {
    /// One runner: the snapshot (if the mode has one) and what follows, as ever.
    Whole,
    /// Read shard `index`'s tablets at `t0` (none in `snapshot` mode), then stop done.
    Shard {
        /// The shard.
        index: u32,
        /// Shards in all.
        count: u32,
        /// T0, with which the changelog starts after the shards.
        t0: Option<&'a Offset>,
    },
    /// Read the changelog from `t0`, once every shard is done.
    AfterShards {
        /// Shards in all.
        count: u32,
        /// T0.
        t0: &'a Offset,
    },
}

impl Sharding {
    /// The parallelism and T0 of a manifest (the shard index comes from the command line).
    ///
    /// # Errors
    /// [`Error::Config`] when the T0 annotation is not a TSO.
    pub fn of(sync: &DorisChangelogSync) -> Result<Self> {
        let t0 = sync
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SNAPSHOT_T0_ANNOTATION))
            .map(|v| parse_t0(v))
            .transpose()?;
        Ok(Self {
            count: sync.spec.snapshot.count(),
            index: None,
            t0,
        })
    }

    /// What this run does, for a sync whose startup mode is `mode`.
    ///
    /// # Errors
    /// [`Error::Config`] for what cannot run: a shard index without shards or beyond them, an
    /// `initial` sync's shards or changelog without T0, a sharded `snapshot`-mode sync run
    /// without a shard index.
    pub fn role(&self, mode: StartupMode) -> Result<Role<'_>> {
        let config = |reason: String| Error::Config { reason };
        let needs_t0 = || {
            config(format!(
                "a sharded initial sync reads every shard at one T0, taken before any shard reads: set the manifest annotation {SNAPSHOT_T0_ANNOTATION} to a Doris TSO (GET /api/tso on the FE; the operator sets it)"
            ))
        };
        match (self.count, self.index) {
            (1, None) => Ok(Role::Whole),
            (1, Some(i)) => Err(config(format!(
                "--shard {i} is set, but spec.snapshot.parallelism is 1: a snapshot read by one runner has no shards"
            ))),
            (n, Some(i)) if i >= n => Err(config(format!(
                "--shard {i} is not a shard of spec.snapshot.parallelism {n}: shards are 0 to {}",
                n - 1
            ))),
            (n, Some(i)) => {
                if mode == StartupMode::Initial && self.t0.is_none() {
                    return Err(needs_t0());
                }
                Ok(Role::Shard {
                    index: i,
                    count: n,
                    t0: self.t0.as_ref(),
                })
            }
            (n, None) => match (mode, &self.t0) {
                (StartupMode::Initial, Some(t0)) => Ok(Role::AfterShards { count: n, t0 }),
                (StartupMode::Initial, None) => Err(needs_t0()),
                _ => Err(config(format!(
                    "spec.snapshot.parallelism is {n}: the snapshot is read by {n} shards, each run with --shard 0 to {} (in a pod, the Indexed Job's {})",
                    n - 1,
                    dcs_crds::shard::JOB_COMPLETION_INDEX_ENV
                ))),
            },
        }
    }

    /// This run's shard and the shard count, when it reads one shard.
    pub fn shard(&self) -> Option<(u32, u32)> {
        self.index
            .filter(|_| self.count > 1)
            .map(|i| (i, self.count))
    }

    /// The consumer id of this run: the shard's own for a shard, else `consumer_id`.
    pub fn consumer_id(&self, consumer_id: &str) -> String {
        match self.index {
            Some(i) if self.count > 1 => shard_consumer_id(consumer_id, i, self.count),
            _ => consumer_id.to_owned(),
        }
    }
}

/// T0 from the annotation's TSO: the first window starts at its second, and changes at or below
/// the TSO are the snapshot's (as for a T0 the runner takes itself).
///
/// # Errors
/// [`Error::Config`] when the value is not a positive integer.
pub fn parse_t0(value: &str) -> Result<Offset> {
    let tso = value
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|t| *t > 0)
        .ok_or_else(|| Error::Config {
            reason: format!(
                "annotation {SNAPSHOT_T0_ANNOTATION} is {value:?}; it must be a Doris TSO, a positive integer"
            ),
        })?;
    let seconds = tso_to_ms(tso).div_euclid(1000);
    let timestamp = jiff::Timestamp::from_second(seconds)
        .map_err(|e| Error::Config {
            reason: format!("annotation {SNAPSHOT_T0_ANNOTATION} is {value:?}: {e}"),
        })?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .strftime(dcs_crds::spec::TIMESTAMP_FORMAT)
        .to_string();
    Ok(Offset {
        timestamp,
        epoch_ms: seconds * 1000,
        tso,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharding(count: u32, index: Option<u32>, t0: bool) -> Sharding {
        Sharding {
            count,
            index,
            t0: t0.then(|| parse_t0("470903349657600000").unwrap()),
        }
    }

    #[test]
    fn t0_is_a_tso_and_its_second() {
        let t0 = parse_t0(&((1_795_957_200_123_i64 << 18) + 5).to_string()).unwrap();
        assert_eq!(t0.epoch_ms, 1_795_957_200_000);
        assert_eq!(t0.timestamp, "2026-11-29 13:00:00");
        assert_eq!(t0.tso, (1_795_957_200_123_i64 << 18) + 5);
        assert_eq!(
            parse_t0("soon").unwrap_err().to_string(),
            "invalid configuration: annotation dcs.dev/snapshot-t0 is \"soon\"; it must be a Doris TSO, a positive integer"
        );
        assert!(parse_t0("0").is_err());
    }

    #[test]
    fn roles_follow_parallelism_index_and_mode() {
        use StartupMode::{Initial, Snapshot};
        assert_eq!(sharding(1, None, false).role(Initial).unwrap(), Role::Whole);
        let s = sharding(4, Some(2), true);
        assert!(matches!(
            s.role(Initial).unwrap(),
            Role::Shard {
                index: 2,
                count: 4,
                t0: Some(_)
            }
        ));
        assert_eq!(s.consumer_id("c"), "c-s2-of-4");
        let after = sharding(4, None, true);
        assert!(matches!(
            after.role(Initial).unwrap(),
            Role::AfterShards { count: 4, .. }
        ));
        assert_eq!(after.consumer_id("c"), "c");
        // A snapshot-mode sync's shards need no T0.
        assert!(matches!(
            sharding(4, Some(0), false).role(Snapshot).unwrap(),
            Role::Shard { t0: None, .. }
        ));
        let err = |s: Sharding, m| s.role(m).unwrap_err().to_string();
        assert_eq!(
            err(sharding(4, Some(4), true), Initial),
            "invalid configuration: --shard 4 is not a shard of spec.snapshot.parallelism 4: shards are 0 to 3"
        );
        assert_eq!(
            err(sharding(1, Some(0), false), Initial),
            "invalid configuration: --shard 0 is set, but spec.snapshot.parallelism is 1: a snapshot read by one runner has no shards"
        );
        assert!(err(sharding(4, Some(1), false), Initial).contains("dcs.dev/snapshot-t0"));
        assert!(err(sharding(4, None, false), Initial).contains("dcs.dev/snapshot-t0"));
        assert_eq!(
            err(sharding(4, None, false), Snapshot),
            "invalid configuration: spec.snapshot.parallelism is 4: the snapshot is read by 4 shards, each run with --shard 0 to 3 (in a pod, the Indexed Job's JOB_COMPLETION_INDEX)"
        );
    }
}
