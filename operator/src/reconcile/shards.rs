//! A snapshot read by shards (`spec.snapshot.parallelism` above 1; docs/ARCHITECTURE.md §3.13,
//! docs/ARCHITECTURE.md §4.8), its pure decisions: the operator records one T0, runs the shards
//! as an Indexed Job, shows each shard's progress, and hands over to the changelog Deployment
//! once every shard is done. Their ConfigMaps are read and written in `shard_configmaps.rs`;
//! the Indexed Job is built in [`super::build`].
//!
//! - [`aggregate`] gives the plan and the status a view of the whole snapshot as one checkpoint
//!   while the changelog runner has none, so phase, TTL headroom (from T0), counters and a
//!   shard's `OffsetExpired` work as for one runner.
//! - [`decide`]: one runner (parallelism 1, a re-initialised consumer, whose sink rebuild one
//!   runner does, or a sync already streaming without a recorded T0), the shards at T0, or the
//!   hand-over. T0 is the recorded one ([`recorded_t0`]), else a shard checkpoint's, else Doris's
//!   clock now (TSO physical milliseconds, shifted): the config ConfigMap holding it is applied
//!   before the Job is, so no shard reads before T0 is durable, and a recorded T0 is never
//!   replaced.
//! - [`status`] writes `status.snapshot.shards[]` and `shardsDone`.

use dcs_crds::checkpoint::{Counters, FORMAT_VERSION, Stopped};
use dcs_crds::shard::{SNAPSHOT_T0_ANNOTATION, ShardState, shard_consumer_id, shard_state};
use dcs_crds::{DorisChangelogSyncSpec, ShardStatus, StartupMode};
use k8s_openapi::api::core::v1::ConfigMap;

use super::names::CONFIG_KEY;
use super::observed::{
    Observed, RunnerState, ShardsObserved, base_consumer_id, consumer_generation, consumer_id_for,
};
use crate::checkpoint::{Checkpoint, Position};

/// Retries of one shard index before the Job gives it up (its pod's restarts in place count).
pub const BACKOFF_LIMIT_PER_INDEX: i32 = 6;

/// What this pass runs of a sharded snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardRun {
    /// `spec.snapshot.parallelism`.
    pub count: u32,
    /// T0's TSO (an `initial` sync's; a `snapshot`-mode sync reads no changelog and has none).
    pub t0_tso: Option<i64>,
    /// Every shard is done: an `initial` sync's changelog Deployment runs (a `snapshot`-mode
    /// sync is done).
    pub handed_over: bool,
}

/// What a sharded snapshot calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// One runner, as for parallelism 1.
    One,
    /// Nothing can run yet: T0 could not be taken from Doris's clock (`message` says so).
    WithoutT0 {
        /// Why, for the Ready condition.
        message: String,
    },
    /// The shards, or the changelog after them.
    Shards(ShardRun),
}

/// What this pass does about a sharded snapshot (pure).
pub fn decide(observed: &Observed) -> Decision {
    let spec = &observed.spec;
    // Observed only for shards of the active consumer; a re-initialised consumer rebuilds its
    // sink, which one runner does (docs/ARCHITECTURE.md §3.12).
    let Some(shards) = &observed.shards else {
        return Decision::One;
    };
    let count = shards.count;
    if count <= 1 || consumer_generation(observed) > 0 {
        return Decision::One;
    }
    let consumer = active_consumer(observed);
    let initial = spec.startup.mode == StartupMode::Initial;
    let from_shards = || {
        shards.checkpoints.iter().enumerate().find_map(|(i, cp)| {
            let cp = cp.as_ref()?;
            let index = u32::try_from(i).ok()?;
            (cp.consumer_id == shard_consumer_id(&consumer, index, count))
                .then(|| cp.start_point.as_ref().map(|o| o.tso))
                .flatten()
        })
    };
    let known = shards.recorded_t0.or_else(from_shards);
    if shards.own_checkpoint {
        // Streaming (or done) already: keep the manifest it runs with, or, when no T0 was ever
        // recorded (the parallelism was raised afterwards), run as one runner.
        return match (initial, known) {
            (true, Some(t0)) => Decision::Shards(ShardRun {
                count,
                t0_tso: Some(t0),
                handed_over: true,
            }),
            (true, None) => Decision::One,
            (false, _) => Decision::Shards(ShardRun {
                count,
                t0_tso: None,
                handed_over: true,
            }),
        };
    }
    let t0_tso = if initial {
        let now = observed
            .probe
            .as_ref()
            .ok()
            .and_then(|p| p.doris_now_ms)
            .map(|ms| ms << 18);
        match known.or(now) {
            Some(t0) => Some(t0),
            None => {
                return Decision::WithoutT0 {
                    message: format!(
                        "the {count} snapshot shards read at one T0 taken from Doris's clock (GET /api/tso on the source FE), which could not be read; the operator tries again"
                    ),
                };
            }
        }
    } else {
        None
    };
    let handed_over = (0..count).all(|i| {
        let cp = shards.checkpoints.get(i as usize).and_then(Option::as_ref);
        shard_state(cp, &consumer, i, count, t0_tso) == ShardState::Done
    });
    Decision::Shards(ShardRun {
        count,
        t0_tso,
        handed_over,
    })
}

/// The spec as far as the snapshot's duration goes: a re-initialised consumer's snapshot is read
/// by one runner ([`decide`]), so the TTL it needs counts the whole expected duration (pure).
pub fn snapshot_spec(observed: &Observed) -> std::borrow::Cow<'_, DorisChangelogSyncSpec> {
    // The shards a snapshot under way keeps ([`shard_count`]), one runner after a
    // re-initialisation.
    let count = match &observed.shards {
        _ if consumer_generation(observed) > 0 => 1,
        Some(shards) => shards.count,
        None => observed.spec.snapshot.count(),
    };
    if count == observed.spec.snapshot.count() {
        return std::borrow::Cow::Borrowed(&observed.spec);
    }
    let mut spec = observed.spec.clone();
    spec.snapshot = dcs_crds::SnapshotSpec {
        parallelism: i32::try_from(count).unwrap_or(1),
    };
    std::borrow::Cow::Owned(spec)
}

/// The consumer the active snapshot runs under.
pub fn active_consumer(observed: &Observed) -> String {
    consumer_id_for(&base_consumer_id(observed), consumer_generation(observed))
}

/// Whether the shards' Job completed while a shard is not done (a shard that exited 0 before
/// its tablets were): the Job is deleted so that the next pass runs it again; done shards end at
/// once, the others resume from their checkpoints (pure). A Job that failed (an index out of
/// retries) is not run again: the status says why, as for one runner's Job.
pub fn rerun(observed: &Observed, run: Option<&ShardRun>) -> bool {
    run.is_some_and(|r| !r.handed_over) && observed.runner == RunnerState::Succeeded
}

/// T0 as a manifest records it: the annotation, if the manifest's consumer is `consumer`.
pub fn recorded_t0(config: Option<&ConfigMap>, consumer: &str) -> Option<i64> {
    recorded_manifest(config, consumer)?
        .get("metadata")?
        .get("annotations")?
        .get(SNAPSHOT_T0_ANNOTATION)?
        .as_str()?
        .parse()
        .ok()
}

/// The shards of the active consumer's snapshot (pure): the parallelism its manifest records once
/// the snapshot started (T0 recorded, or a runner there), else `spec.snapshot.parallelism`. A
/// snapshot under way keeps the parallelism it started with: another would split the tablets
/// otherwise, and tablets read would be read again (twice into a changelog-mode sink); a changed
/// spec takes effect with the next consumer.
pub fn shard_count(observed: &Observed, config: Option<&ConfigMap>) -> u32 {
    let consumer = active_consumer(observed);
    match recorded_count(config, &consumer) {
        Some(n)
            if recorded_t0(config, &consumer).is_some()
                || observed.runner != RunnerState::Absent =>
        {
            n.max(1)
        }
        _ => observed.spec.snapshot.count(),
    }
}

/// The parallelism a manifest records, if the manifest's consumer is `consumer`.
pub fn recorded_count(config: Option<&ConfigMap>, consumer: &str) -> Option<u32> {
    let n = recorded_manifest(config, consumer)?
        .get("spec")?
        .get("snapshot")?
        .get("parallelism")?
        .as_u64()?;
    u32::try_from(n).ok()
}

/// The config ConfigMap's manifest, if its consumer is `consumer`.
fn recorded_manifest(config: Option<&ConfigMap>, consumer: &str) -> Option<serde_yaml::Value> {
    let text = config?.data.as_ref()?.get(CONFIG_KEY)?;
    let manifest: serde_yaml::Value = serde_yaml::from_str(text).ok()?;
    let manifest_consumer = manifest
        .get("spec")
        .and_then(|s| s.get("offsets"))
        .and_then(|o| o.get("consumerId"))
        .or_else(|| manifest.get("metadata").and_then(|m| m.get("name")))
        .and_then(serde_yaml::Value::as_str)?;
    (manifest_consumer == consumer).then_some(manifest)
}

/// The whole sharded snapshot as one checkpoint of `consumer` (pure), for what the plan and the
/// status read of a checkpoint: the position (done when every shard is, and for an `initial`
/// sync still the snapshot, its T0 needed until the changelog runner saves), T0, the counters
/// summed, the stop of a shard that stopped on an error (its `OffsetExpired` re-initialises the
/// sync), the last error. `None` before any shard saved.
pub fn aggregate(
    spec: &DorisChangelogSyncSpec,
    consumer: &str,
    shards: &ShardsObserved,
) -> Option<Checkpoint> {
    let count = shards.count;
    let mine: Vec<&Checkpoint> = shards
        .checkpoints
        .iter()
        .enumerate()
        .filter_map(|(i, cp)| {
            let cp = cp.as_ref()?;
            (cp.consumer_id == shard_consumer_id(consumer, u32::try_from(i).ok()?, count))
                .then_some(cp)
        })
        .collect();
    let first = mine.first()?;
    // Done means committed: a `Done` checkpoint still listing loads is not (dcs_crds::shard).
    let all_done = mine.len() == count as usize
        && mine
            .iter()
            .all(|c| c.position == Position::Done && c.pending_txns.is_empty());
    let (mut done, mut total) = (0, 0);
    let mut counters = Counters::default();
    for cp in &mine {
        done += if cp.position == Position::Done {
            shard_tablets(cp).unwrap_or(0)
        } else {
            cp.tablets_done_count()
        };
        total += shard_tablets(cp).unwrap_or(0);
        counters.rows_read += cp.counters.rows_read;
        counters.rows_written += cp.counters.rows_written;
        counters.rows_deleted += cp.counters.rows_deleted;
        counters.rows_rejected += cp.counters.rows_rejected;
        counters.loads += cp.counters.loads;
        counters.bytes += cp.counters.bytes;
    }
    let initial = spec.startup.mode == StartupMode::Initial;
    let position = if all_done && !initial {
        Position::Done
    } else {
        Position::Snapshot {
            tablets_done: Vec::new(),
            tablets_done_ranges: Vec::new(),
            tablets_done_count: Some(done),
            tablets_total: total,
            rows_total: None,
        }
    };
    let failed: Option<&Stopped> = mine
        .iter()
        .filter_map(|c| c.stopped.as_ref())
        .find(|s| s.exit_code != 0);
    Some(Checkpoint {
        format_version: FORMAT_VERSION,
        consumer_id: consumer.to_owned(),
        checkpoint_id: 0,
        saved_at: mine
            .iter()
            .map(|c| c.saved_at.clone())
            .max()
            .unwrap_or_default(),
        position,
        start_point: first.start_point.clone(),
        pending_txns: Vec::new(),
        counters,
        last_error: mine.iter().find_map(|c| c.last_error.clone()),
        stopped: failed.cloned(),
        in_window: None,
        loads_source: None,
        label_scheme: first.label_scheme,
        rebuild: None,
        snapshot_tablets: None,
        // The shard that met a change of the source's columns last says what was done.
        schema: mine
            .iter()
            .filter_map(|c| c.schema.as_ref())
            .max_by_key(|r| r.last_change.as_ref().map(|n| n.at.clone()))
            .cloned(),
    })
}

/// A shard's tablets, as its checkpoints record them while it reads (a done shard's last
/// snapshot checkpoint is gone; its `tablets_total` is not kept in `Done`).
fn shard_tablets(cp: &Checkpoint) -> Option<u64> {
    match &cp.position {
        Position::Snapshot { tablets_total, .. } => Some(*tablets_total),
        _ => None,
    }
}

/// `status.snapshot.shards[]` and `shardsDone` from what was observed (pure).
pub fn status(snapshot: &mut dcs_crds::SnapshotStatus, observed: &Observed) {
    let Some(shards) = &observed.shards else {
        return;
    };
    let count = shards.count;
    let consumer = active_consumer(observed);
    let t0 = if observed.spec.startup.mode == StartupMode::Initial {
        shards.recorded_t0.or_else(|| {
            shards
                .checkpoints
                .iter()
                .flatten()
                .find_map(|c| c.start_point.as_ref().map(|o| o.tso))
        })
    } else {
        None
    };
    let mut list = Vec::new();
    let mut done = 0;
    for i in 0..count {
        let cp = shards.checkpoints.get(i as usize).and_then(Option::as_ref);
        let to_i64 = |v: u64| i64::try_from(v).ok();
        let mut s = ShardStatus {
            index: i64::from(i),
            rows_read: cp.and_then(|c| to_i64(c.counters.rows_read)),
            message: cp.and_then(|c| c.last_error.as_ref().map(|e| e.message.clone())),
            ..ShardStatus::default()
        };
        s.phase = Some(match shard_state(cp, &consumer, i, count, t0) {
            ShardState::NotStarted => "Pending".to_owned(),
            ShardState::Reading {
                tablets_done,
                tablets_total,
            } => {
                s.tablets_done = to_i64(tablets_done);
                s.tablets_total = to_i64(tablets_total);
                if cp
                    .and_then(|c| c.stopped.as_ref())
                    .is_some_and(|st| st.exit_code != 0)
                {
                    "Failed".to_owned()
                } else {
                    "Snapshotting".to_owned()
                }
            }
            ShardState::Done => {
                done += 1;
                "Done".to_owned()
            }
            ShardState::Committing { loads, stopped } => {
                s.message = Some(dcs_crds::shard::committing(loads, stopped.as_deref()));
                "Committing".to_owned()
            }
            ShardState::Foreign(why) => {
                s.message = Some(why);
                "Failed".to_owned()
            }
        });
        list.push(s);
    }
    snapshot.shards_done = Some(format!("{done}/{count}"));
    snapshot.shards = Some(list);
}

/// Whether sync may have shards to stop and clean: its spec asks for them, or its status shows
/// some (a snapshot that started sharded keeps its parallelism whatever the spec says since).
pub fn may_have_shards(sync: &dcs_crds::DorisChangelogSync) -> bool {
    sync.spec.snapshot.sharded()
        || sync
            .status
            .as_ref()
            .and_then(|s| s.snapshot.as_ref())
            .is_some_and(|s| s.shards.is_some())
}

#[cfg(test)]
mod tests {
    use super::super::build::{
        RunnerDefaults, Workload, adapt, build, effective_manifest, shard_configmaps,
    };
    use super::super::plan::{Blocked, Plan, Reinit, Run, plan};
    use super::super::testing::{NOW_MS, fresh_run, observed, streaming_checkpoint, sync};
    use super::*;
    use dcs_crds::SnapshotSpec;
    use dcs_crds::checkpoint::{LastError, Offset};
    use dcs_crds::conditions::reasons;
    use kube::ResourceExt;

    const T0: i64 = 470_903_349_657_600_000;

    fn t0() -> Offset {
        Offset {
            timestamp: "2026-11-29 13:00:00".into(),
            epoch_ms: T0 >> 18,
            tso: T0,
        }
    }

    fn shard_cp(i: u32, position: Position) -> Checkpoint {
        let mut cp = streaming_checkpoint(&shard_consumer_id("orders", i, 4), 0);
        cp.position = position;
        cp.start_point = Some(t0());
        cp
    }

    fn reading(done: u64) -> Position {
        Position::Snapshot {
            tablets_done: Vec::new(),
            tablets_done_ranges: Vec::new(),
            tablets_done_count: Some(done),
            tablets_total: 2,
            rows_total: None,
        }
    }

    fn sharded(checkpoints: Vec<Option<Checkpoint>>, recorded: Option<i64>) -> Observed {
        let mut o = observed();
        o.spec.snapshot = SnapshotSpec { parallelism: 4 };
        let shards = ShardsObserved {
            count: 4,
            recorded_t0: recorded,
            configmaps: checkpoints.iter().map(Option::is_some).collect(),
            checkpoints,
            own_checkpoint: false,
        };
        o.checkpoint = aggregate(&o.spec, "orders", &shards);
        o.shards = Some(shards);
        o
    }

    /// The run of [`sharded`]'s shards at `t0_tso`: their Indexed Job until `handed_over`, then
    /// the changelog Deployment.
    fn shards_run(t0_tso: i64, handed_over: bool) -> Run {
        Run {
            bounded: !handed_over,
            shards: Some(ShardRun {
                count: 4,
                t0_tso: Some(t0_tso),
                handed_over,
            }),
            ..fresh_run()
        }
    }

    /// `run` with its runner existing already: kept, not launched.
    fn kept(run: Run) -> Run {
        Run {
            launch: false,
            ..run
        }
    }

    /// The re-initialisation of consumer `orders` to `orders-r1`, started at once.
    fn reinit_to_r1(reason: &'static str, message: &str) -> Plan {
        Plan::Reinitialize(Reinit {
            reason,
            previous_consumer_id: "orders".into(),
            consumer_id: "orders-r1".into(),
            consumer_generation: 1,
            message: message.into(),
            waiting: None,
        })
    }

    #[test]
    fn a_fresh_sharded_sync_takes_t0_from_dorises_clock_and_runs_the_indexed_job() {
        let o = sharded(vec![None, None, None, None], None);
        let run = Run {
            // The shards are a Job.
            bounded: true,
            shards: Some(ShardRun {
                count: 4,
                t0_tso: Some(NOW_MS << 18),
                handed_over: false,
            }),
            ..fresh_run()
        };
        assert_eq!(plan(&o), Plan::Run(run.clone()));
        let mut objects = build(&sync(), &run, &RunnerDefaults::default());
        adapt(&mut objects, "orders", run.shards.as_ref());
        let Workload::Job(job) = &objects.workload else {
            panic!("a Job")
        };
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
        assert_eq!((spec.completions, spec.parallelism), (Some(4), Some(4)));
        assert_eq!(spec.backoff_limit, None);
        assert_eq!(spec.backoff_limit_per_index, Some(BACKOFF_LIMIT_PER_INDEX));
        let role = &objects.rbac.as_ref().unwrap().1;
        assert_eq!(
            role.rules.as_ref().unwrap()[0]
                .resource_names
                .as_ref()
                .unwrap(),
            &[
                "orders-checkpoint",
                "orders-checkpoint-shard-0",
                "orders-checkpoint-shard-1",
                "orders-checkpoint-shard-2",
                "orders-checkpoint-shard-3"
            ]
        );
        let names: Vec<String> = shard_configmaps(&objects, 4)
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(names[3], "orders-checkpoint-shard-3");
        // The manifest every shard and the changelog runner read holds T0 and the parallelism.
        let manifest = effective_manifest(&sync_with(4), &run);
        assert!(
            manifest.contains(&format!("dcs.dev/snapshot-t0: '{}'", NOW_MS << 18)),
            "{manifest}"
        );
        assert!(manifest.contains("parallelism: 4"), "{manifest}");
    }

    fn sync_with(n: i32) -> dcs_crds::DorisChangelogSync {
        let mut s = sync();
        s.spec.snapshot = SnapshotSpec { parallelism: n };
        s
    }

    #[test]
    fn a_job_that_ended_before_every_shard_was_done_runs_again() {
        let mut o = sharded(
            vec![
                Some(shard_cp(0, Position::Done)),
                Some(shard_cp(1, reading(1))),
                None,
                None,
            ],
            Some(T0),
        );
        o.runner = RunnerState::Succeeded;
        let run = kept(shards_run(T0, false));
        assert_eq!(plan(&o), Plan::Run(run.clone()));
        assert!(rerun(&o, run.shards.as_ref()));
        o.runner = RunnerState::Running;
        assert_eq!(plan(&o), Plan::Run(run.clone()));
        assert!(!rerun(&o, run.shards.as_ref()));
        let mut done = sharded(
            (0..4).map(|i| Some(shard_cp(i, Position::Done))).collect(),
            Some(T0),
        );
        done.runner = RunnerState::Succeeded;
        let run = kept(shards_run(T0, true));
        assert_eq!(plan(&done), Plan::Run(run.clone()));
        assert!(!rerun(&done, run.shards.as_ref()));
    }

    #[test]
    fn a_recorded_t0_is_kept_whatever_dorises_clock_says_and_no_clock_blocks_a_fresh_one() {
        let o = sharded(vec![None, None, None, None], Some(T0));
        assert_eq!(plan(&o), Plan::Run(shards_run(T0, false)));
        // Without a record, a shard's checkpoint says it.
        let o = sharded(vec![None, Some(shard_cp(1, reading(1))), None, None], None);
        assert_eq!(plan(&o), Plan::Run(shards_run(T0, false)));
        // Neither, and Doris's clock unknown: nothing is started.
        let mut o = sharded(vec![None, None, None, None], None);
        if let Ok(p) = o.probe.as_mut() {
            p.doris_now_ms = None;
        }
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: dcs_crds::conditions::types::READY,
                reason: reasons::SOURCE_UNREACHABLE,
                message: "the 4 snapshot shards read at one T0 taken from Doris's clock (GET /api/tso on the source FE), which could not be read; the operator tries again".into(),
            })
        );
    }

    #[test]
    fn a_failed_probe_blocks_a_fresh_sharded_sync_with_its_own_words() {
        use crate::facts::ProbeFailure;
        let mut o = sharded(vec![None, None, None, None], None);
        o.probe = Err(ProbeFailure {
            reason: reasons::SOURCE_UNREACHABLE,
            message: "no FE answered on fe:9030".into(),
        });
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: dcs_crds::conditions::types::READY,
                reason: reasons::SOURCE_UNREACHABLE,
                message: "no FE answered on fe:9030".into(),
            })
        );
    }

    #[test]
    fn the_changelog_deployment_follows_only_once_every_shard_is_done_at_t0() {
        let done = |i| Some(shard_cp(i, Position::Done));
        let mut o = sharded(
            vec![done(0), done(1), Some(shard_cp(2, reading(1))), done(3)],
            Some(T0),
        );
        o.runner = RunnerState::Running;
        assert_eq!(plan(&o), Plan::Run(kept(shards_run(T0, false))));
        // A shard of another T0 is not done.
        let mut other = shard_cp(2, Position::Done);
        other.start_point = Some(Offset {
            tso: T0 - 1,
            ..t0()
        });
        let o = sharded(vec![done(0), done(1), Some(other), done(3)], Some(T0));
        assert_eq!(plan(&o), Plan::Run(shards_run(T0, false)));
        let o = sharded(vec![done(0), done(1), done(2), done(3)], Some(T0));
        let run = Run {
            // The changelog Deployment.
            bounded: false,
            shards: Some(ShardRun {
                count: 4,
                t0_tso: Some(T0),
                handed_over: true,
            }),
            ..fresh_run()
        };
        assert_eq!(plan(&o), Plan::Run(run.clone()));
        // The changelog runner's own checkpoint: streaming with the same manifest.
        let mut o = sharded(vec![done(0), done(1), done(2), done(3)], Some(T0));
        o.checkpoint = Some(streaming_checkpoint("orders", 5));
        o.shards.as_mut().unwrap().own_checkpoint = true;
        assert_eq!(plan(&o), Plan::Run(run));
    }

    #[test]
    fn a_shard_whose_last_loads_are_not_committed_keeps_the_job_and_shows_committing() {
        let done = |i| Some(shard_cp(i, Position::Done));
        // The last shard saved `Done` with its last loads and is committing them (a slow sink),
        // or was killed before, or stopped on the commit's error: the Job stays, no hand-over.
        let mut committing = shard_cp(3, Position::Done);
        committing.pending_txns = vec![
            dcs_crds::checkpoint::PendingTxn {
                db: "sink".into(),
                label: "dcs-orders-s3-of-4-x-5-0".into(),
                txn_id: 41,
                rows: None,
                dead_letter: false,
            };
            2
        ];
        let mut o = sharded(
            vec![done(0), done(1), done(2), Some(committing.clone())],
            Some(T0),
        );
        o.runner = RunnerState::Running;
        // The shards' Job is kept.
        assert_eq!(plan(&o), Plan::Run(kept(shards_run(T0, false))));
        let mut status = dcs_crds::SnapshotStatus::default();
        super::status(&mut status, &o);
        assert_eq!(status.shards_done.as_deref(), Some("3/4"));
        let last = &status.shards.unwrap()[3];
        assert_eq!(last.phase.as_deref(), Some("Committing"));
        assert_eq!(
            last.message.as_deref(),
            Some("every tablet read, 2 load(s) of its last checkpoint not committed yet")
        );
        // A snapshot-mode sync is not complete either.
        let mut spec = o.spec.clone();
        spec.startup.mode = StartupMode::Snapshot;
        let shards = o.shards.clone().unwrap();
        assert_ne!(
            aggregate(&spec, "orders", &shards).map(|c| c.position),
            Some(Position::Done)
        );
        // Committed and saved again without them: handed over.
        let o = sharded(vec![done(0), done(1), done(2), done(3)], Some(T0));
        assert_eq!(plan(&o), Plan::Run(shards_run(T0, true)));
    }

    #[test]
    fn a_reinitialised_consumer_and_a_streaming_sync_without_t0_run_one_runner() {
        let mut o = sharded(vec![None, None, None, None], None);
        o.status.consumer_generation = Some(1);
        let run = Run {
            consumer_id: "orders-r1".into(),
            consumer_generation: 1,
            previous_consumer_id: Some("orders".into()),
            shards: None,
            ..fresh_run()
        };
        assert_eq!(plan(&o), Plan::Run(run.clone()));
        let manifest = effective_manifest(&sync_with(4), &run);
        assert!(!manifest.contains("parallelism"), "one runner: {manifest}");
        let mut o = sharded(vec![None, None, None, None], None);
        o.checkpoint = Some(streaming_checkpoint("orders", 5));
        o.shards.as_mut().unwrap().own_checkpoint = true;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                shards: None,
                ..fresh_run()
            })
        );
    }

    #[test]
    fn a_reinitialised_consumer_needs_the_ttl_of_one_runner() {
        let mut o = sharded(vec![None, None, None, None], None);
        o.spec.expected_snapshot_duration = "4h".into();
        if let Ok(p) = o.probe.as_mut() {
            p.table.ttl_seconds = 4 * 3600; // covers 4h / 4 + …, not 4h + …
        }
        assert_eq!(plan(&o), Plan::Run(shards_run(NOW_MS << 18, false)));
        o.status.consumer_generation = Some(1);
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: dcs_crds::conditions::types::TTL_SUFFICIENT,
                reason: reasons::TTL_TOO_SHORT,
                message: "changelog.ttl_seconds is 14400s but the sync needs at least 14720s (expectedSnapshotDuration 4h + checkpoint.interval 10s + pollInterval 10s + margin 5m): ALTER TABLE db.src SET (\"changelog.ttl_seconds\" = \"14720\"), or lower spec.expectedSnapshotDuration".into(),
            })
        );
    }

    #[test]
    fn the_status_shows_each_shard_and_the_whole() {
        let mut failed = shard_cp(2, reading(0));
        failed.last_error = Some(LastError {
            at: "2026-11-29T13:59:00Z".into(),
            reason: "StreamLoadFailed".into(),
            message: "too many filtered rows".into(),
        });
        failed.counters.rows_read = 7;
        failed.counters.rows_rejected = 3;
        let o = sharded(
            vec![
                Some(shard_cp(0, Position::Done)),
                Some(shard_cp(1, reading(1))),
                Some(failed),
                None,
            ],
            Some(T0),
        );
        let mut snapshot = dcs_crds::SnapshotStatus::default();
        status(&mut snapshot, &o);
        assert_eq!(snapshot.shards_done.as_deref(), Some("1/4"));
        let shards = snapshot.shards.unwrap();
        let phases: Vec<&str> = shards.iter().map(|s| s.phase.as_deref().unwrap()).collect();
        assert_eq!(phases, ["Done", "Snapshotting", "Snapshotting", "Pending"]);
        assert_eq!(
            (shards[1].tablets_done, shards[1].tablets_total),
            (Some(1), Some(2))
        );
        assert_eq!(shards[2].message.as_deref(), Some("too many filtered rows"));
        assert_eq!(shards[2].rows_read, Some(7));
        // The whole: T0 is what the sync still needs, the phase is the snapshot's.
        let whole = o.checkpoint.as_ref().unwrap();
        assert_eq!(whole.start_point, Some(t0()));
        assert_eq!(whole.oldest_needed_ms(), Some(T0 >> 18));
        assert_eq!(whole.counters.rows_read, 100 + 100 + 7);
        // Rows refused into the dead-letter table: 4 in each test checkpoint, 3 in the failed one.
        assert_eq!(whole.counters.rows_rejected, 4 + 4 + 3);
        assert_eq!(
            whole.last_error.as_ref().unwrap().message,
            "too many filtered rows"
        );
    }

    #[test]
    fn a_shard_whose_offset_expired_reinitialises_the_sync() {
        let mut expired = shard_cp(1, reading(0));
        expired.stopped = Some(Stopped {
            at: "2026-11-29T13:59:00Z".into(),
            reason: reasons::OFFSET_EXPIRED.into(),
            exit_code: 3,
            message: "T0 left the changelog".into(),
        });
        let o = sharded(vec![None, Some(expired), None, None], Some(T0));
        assert_eq!(
            plan(&o),
            reinit_to_r1(
                "OffsetExpired",
                "the runner reports the offset expired: T0 left the changelog"
            )
        );
    }

    #[test]
    fn tablets_that_moved_under_the_snapshot_reinitialise_the_sync_whatever_on_offset_expired_says()
    {
        let with_tablets = |i: u32, position: Position, ids: &[i64]| {
            let mut c = shard_cp(i, position);
            c.snapshot_tablets = Some(dcs_crds::tablets::tablet_set(ids));
            Some(c)
        };
        // Shards that planned different sets (a TRUNCATE between their plans).
        let mut o = sharded(
            vec![
                with_tablets(0, Position::Done, &[1, 2, 3, 4]),
                with_tablets(1, reading(1), &[5, 6, 7, 8]),
                None,
                None,
            ],
            Some(T0),
        );
        o.spec.on_offset_expired = dcs_crds::OnOffsetExpired::Fail;
        assert_eq!(
            plan(&o),
            reinit_to_r1(
                reasons::SNAPSHOT_TABLETS_CHANGED,
                "the table's tablets changed during the snapshot (shards 0 and 1 of 4: they planned 4 and 4 tablets; tablet 1 is in the first only): a TRUNCATE, INSERT OVERWRITE or partition replace gave it new tablets, and a snapshot that planned the old ones cannot say what it read; the snapshot is read again under a new consumer"
            )
        );
        // A shard that found its planned tablets gone (its stop record).
        let mut moved = shard_cp(2, reading(1));
        moved.stopped = Some(Stopped {
            at: "2026-11-29T13:59:00Z".into(),
            reason: reasons::SNAPSHOT_TABLETS_CHANGED.into(),
            exit_code: 5,
            message: "the table's tablets changed during the snapshot (2 of the 8 tablets the snapshot planned are gone (7, 8)): …".into(),
        });
        let o = sharded(vec![None, None, Some(moved), None], Some(T0));
        assert_eq!(
            plan(&o),
            reinit_to_r1(
                reasons::SNAPSHOT_TABLETS_CHANGED,
                "the table's tablets changed during the snapshot (2 of the 8 tablets the snapshot planned are gone (7, 8)): …"
            )
        );
        // The same sets: nothing to do.
        let o = sharded(
            vec![
                with_tablets(0, Position::Done, &[1, 2, 3, 4]),
                with_tablets(1, reading(1), &[4, 3, 2, 1]),
                None,
                None,
            ],
            Some(T0),
        );
        assert_eq!(plan(&o), Plan::Run(shards_run(T0, false)));
    }

    #[test]
    fn a_snapshot_under_way_keeps_the_parallelism_it_started_with() {
        let run = shards_run(T0, false);
        assert_eq!(
            plan(&sharded(vec![None, None, None, None], Some(T0))),
            Plan::Run(run.clone())
        );
        let manifest = effective_manifest(&sync_with(4), &run);
        let config = ConfigMap {
            data: Some([(CONFIG_KEY.to_owned(), manifest.clone())].into()),
            ..ConfigMap::default()
        };
        // The spec says 2 now, or 1: the running snapshot stays in 4 shards.
        for n in [2, 1] {
            let mut o = observed();
            o.spec.snapshot = SnapshotSpec { parallelism: n };
            assert_eq!(shard_count(&o, Some(&config)), 4, "spec {n}");
            // And its runners keep their manifest.
            let mut o = sharded(vec![None, None, None, None], Some(T0));
            o.spec.snapshot = SnapshotSpec { parallelism: n };
            assert_eq!(plan(&o), Plan::Run(run.clone()), "spec {n}");
            assert_eq!(effective_manifest(&sync_with(n), &run), manifest);
        }
        // The TTL it needs still counts 4 shards.
        let mut o = sharded(vec![None, None, None, None], Some(T0));
        o.spec.snapshot = SnapshotSpec { parallelism: 1 };
        o.spec.expected_snapshot_duration = "4h".into();
        if let Ok(p) = o.probe.as_mut() {
            p.table.ttl_seconds = 4 * 3600;
        }
        assert_eq!(plan(&o), Plan::Run(run));
        // Before any snapshot started (nothing recorded, no runner), the spec decides.
        let mut o = observed();
        o.spec.snapshot = SnapshotSpec { parallelism: 2 };
        assert_eq!(shard_count(&o, None), 2);
        // The next consumer starts from the spec.
        o.status.consumer_generation = Some(1);
        assert_eq!(shard_count(&o, Some(&config)), 2);
    }

    #[test]
    fn t0_is_read_back_only_for_the_active_consumer() {
        let manifest = |name: &str| {
            ConfigMap {
            data: Some(
                [(
                    CONFIG_KEY.to_owned(),
                    format!(
                        "metadata:\n  name: {name}\n  annotations:\n    dcs.dev/snapshot-t0: '{T0}'\nspec: {{}}\n"
                    ),
                )]
                .into(),
            ),
            ..ConfigMap::default()
        }
        };
        assert_eq!(recorded_t0(Some(&manifest("orders")), "orders"), Some(T0));
        assert_eq!(recorded_t0(Some(&manifest("orders")), "orders-r1"), None);
        assert_eq!(recorded_t0(None, "orders"), None);
    }
}
