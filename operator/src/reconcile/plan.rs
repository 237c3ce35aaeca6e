//! The pure decision: from what was observed to what the operator does (docs/ARCHITECTURE.md §4.3).
//!
//! No I/O and no clock: the caller hands in Doris's time with the probe.

use dcs_crds::preconditions::{Requirements, Unmet, preconditions};
use dcs_crds::{DorisChangelogSyncSpec, OnOffsetExpired, Phase, StartupMode, conditions::reasons};

use super::observed::{
    Observed, RunnerState, base_consumer_id, consumer_generation, consumer_id_for,
};
use super::{shards, stop};
use crate::checkpoint::Checkpoint;
use crate::facts::{ProbeFailure, SourceProbe};

/// Headroom below this share of the TTL makes OffsetHealthy False (NearExpiry).
pub const NEAR_EXPIRY_PERCENT: i64 = 20;

/// What the operator does.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// The object is being deleted: clean up and release the finalizer.
    Cleanup,
    /// A precondition fails: no runner; the condition says why.
    Block(Blocked),
    /// Run (or keep running) the runner under this consumer.
    Run(Run),
    /// spec.suspend: no runner, the checkpoint is kept.
    Suspend,
    /// Stop the runner, clear the checkpoint, start again under a new consumer id.
    Reinitialize(Reinit),
    /// Stop and wait for a person.
    Fail {
        /// A CamelCase reason.
        reason: &'static str,
        /// What happened and what to do.
        message: String,
    },
}

/// A blocked sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The condition that says why (TtlSufficient or Ready).
    pub condition: &'static str,
    /// A CamelCase reason.
    pub reason: &'static str,
    /// The numbers and the fix.
    pub message: String,
}

/// Running the runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The consumer id progress is recorded under.
    pub consumer_id: String,
    /// How many reinitializations came before.
    pub consumer_generation: i64,
    /// Whether the workload must be created (else it exists and is kept, updated in place).
    pub launch: bool,
    /// A Job (startup.mode snapshot) rather than a Deployment.
    pub bounded: bool,
    /// The startup mode the runner is given (initial after a reinitialization).
    pub startup_mode: StartupMode,
    /// The consumer this one re-initialises (generation > 0): the runner rebuilds the sink.
    pub previous_consumer_id: Option<String>,
    /// Why the source probe failed while the runner kept going, if it did.
    pub probe_warning: Option<String>,
    /// A snapshot read by shards: their Indexed Job, or the changelog after them.
    pub shards: Option<shards::ShardRun>,
}

/// A reinitialization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reinit {
    /// OffsetExpired or NonceChanged.
    pub reason: &'static str,
    /// The abandoned consumer id.
    pub previous_consumer_id: String,
    /// The new consumer id, `<base>-r<generation>`.
    pub consumer_id: String,
    /// The new consumer generation.
    pub consumer_generation: i64,
    /// What happened, for the event.
    pub message: String,
    /// While the old runner's pods are still stopping: what the re-initialisation waits for (the
    /// status says it; nothing is changed yet).
    pub waiting: Option<String>,
}

/// Seconds left before the oldest change still needed expires, by Doris's clock.
pub fn headroom_seconds(ttl_seconds: i64, now_ms: i64, checkpoint: &Checkpoint) -> Option<i64> {
    let oldest = checkpoint.oldest_needed_ms()?;
    let ttl_seconds = u64::try_from(ttl_seconds).unwrap_or(0);
    Some(dcs_crds::retention::headroom_seconds(
        oldest,
        now_ms,
        ttl_seconds,
    ))
}

/// Decides what to do.
pub fn plan(observed: &Observed) -> Plan {
    if observed.deleting {
        return Plan::Cleanup;
    }
    let spec = &observed.spec;
    if let Err(errors) = dcs_crds::validate(spec) {
        let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        return Plan::Block(Blocked {
            condition: dcs_crds::conditions::types::READY,
            reason: reasons::INVALID_SPEC,
            message: format!("the spec is invalid: {}", list.join("; ")),
        });
    }
    if let Err(message) = &observed.runner_allowed {
        return Plan::Block(Blocked {
            condition: dcs_crds::conditions::types::READY,
            reason: reasons::RUNNER_NOT_ALLOWED,
            message: message.clone(),
        });
    }
    // A Secret (credentials or CA bundle) that does not allow the sync, or pins hosts the sync
    // does not keep to, blocks it even with a runner running: that runner's pod refers to the
    // Secret, which it must not.
    if let Some(failure) = [
        observed.probe.as_ref().err(),
        observed.sink_probe.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .find(|f| {
        [
            reasons::CREDENTIALS_NOT_ALLOWED,
            reasons::CA_BUNDLE_NOT_ALLOWED,
            reasons::CREDENTIALS_HOST_NOT_ALLOWED,
        ]
        .contains(&f.reason)
    }) {
        return Plan::Block(Blocked {
            condition: dcs_crds::conditions::types::READY,
            reason: failure.reason,
            message: failure.message.clone(),
        });
    }
    if spec.suspend {
        return Plan::Suspend;
    }
    let base = base_consumer_id(observed);
    let generation = consumer_generation(observed);
    let current_id = consumer_id_for(&base, generation);
    // A started re-initialisation is finished, whatever is observed now: the runner it stopped
    // may have restarted and cleared its stop record, a probe may fail.
    if let Some(mark) = &observed.stopping
        && mark.reinitializes(&current_id)
        && let (Some(reason), stop::Purpose::Reinit { message, .. }) =
            (mark.reinit_reason(), &mark.purpose)
    {
        return reinit(&base, generation, current_id, reason, message.clone());
    }
    if let Some(applied) = &observed.applied_nonce
        && *applied != spec.reinit_nonce
    {
        return reinit(
            &base,
            generation,
            current_id,
            reasons::NONCE_CHANGED,
            format!(
                "spec.reinitNonce changed from {applied:?} to {:?}: starting again with a fresh snapshot",
                spec.reinit_nonce
            ),
        );
    }
    // Failed on an expired offset: nothing says so any more (the runner is stopped, its stop
    // record may be gone), so the sync stays Failed until a person acts, as its message says:
    // a new reinitNonce (above) or onOffsetExpired: reinitialize.
    if observed.status.phase == Some(Phase::Failed)
        && let Some(error) = &observed.status.last_error
        && error.reason.as_deref() == Some(reasons::OFFSET_EXPIRED)
    {
        let message = error.message.clone().unwrap_or_default();
        return match spec.on_offset_expired {
            OnOffsetExpired::Fail => Plan::Fail {
                reason: reasons::OFFSET_EXPIRED,
                message,
            },
            OnOffsetExpired::Reinitialize => reinit(
                &base,
                generation,
                current_id,
                reasons::OFFSET_EXPIRED,
                format!("onOffsetExpired is now reinitialize; the sync had failed: {message}"),
            ),
        };
    }
    // The runner's own word needs no probe: it stopped because the offset expired.
    if spec.is_incremental()
        && let Some(why) = runner_reports_expiry(observed)
    {
        return on_expired(spec, &base, generation, current_id, why);
    }
    // The table's tablets changed under the snapshot: what was read cannot be trusted, so it is
    // read again under a new consumer (nothing expired: `onOffsetExpired` has no say).
    if let Some(why) = tablets_moved(observed) {
        return reinit(
            &base,
            generation,
            current_id,
            reasons::SNAPSHOT_TABLETS_CHANGED,
            why,
        );
    }
    // The runner stopped on a change of the source's columns that `schemaChange: fail` refuses:
    // Blocked until a person sets another policy (its runner then follows or ignores it).
    if let Some(message) = schema_change_refused(observed) {
        return Plan::Block(Blocked {
            condition: dcs_crds::conditions::types::READY,
            reason: reasons::SCHEMA_CHANGED,
            message,
        });
    }
    // A sharded snapshot without T0 and without Doris's clock (a failed probe says more below).
    if observed.probe.is_ok()
        && let shards::Decision::WithoutT0 { message } = shards::decide(observed)
    {
        return Plan::Block(Blocked {
            condition: dcs_crds::conditions::types::READY,
            reason: reasons::SOURCE_UNREACHABLE,
            message,
        });
    }
    // A failed probe blocks a sync that has no runner yet; a running runner is kept (a source or
    // sink blip must not stop it: it has its own retries) with the failure as its last error.
    let probe_failed = |failure: &ProbeFailure, condition: &'static str| {
        if observed.runner != RunnerState::Absent {
            return Plan::Run(run(
                observed,
                current_id.clone(),
                generation,
                Some(failure.message.clone()),
            ));
        }
        Plan::Block(Blocked {
            condition,
            reason: failure.reason,
            message: failure.message.clone(),
        })
    };
    let probe = match &observed.probe {
        Ok(probe) => probe,
        Err(failure) => return probe_failed(failure, dcs_crds::conditions::types::READY),
    };
    if spec.is_incremental()
        && let Some(blocked) = check_source(&shards::snapshot_spec(observed), probe)
    {
        return Plan::Block(blocked);
    }
    if let Err(failure) = &observed.sink_probe {
        return probe_failed(failure, dcs_crds::conditions::types::SINK_HEALTHY);
    }
    if spec.is_incremental()
        && let Some(why) = headroom_expiry(observed, probe)
    {
        return on_expired(spec, &base, generation, current_id, why);
    }
    Plan::Run(run(observed, current_id, generation, None))
}

/// `spec.onOffsetExpired` for an expired offset.
fn on_expired(
    spec: &DorisChangelogSyncSpec,
    base: &str,
    generation: i64,
    current_id: String,
    why: String,
) -> Plan {
    match spec.on_offset_expired {
        OnOffsetExpired::Reinitialize => {
            reinit(base, generation, current_id, reasons::OFFSET_EXPIRED, why)
        }
        OnOffsetExpired::Fail => Plan::Fail {
            reason: reasons::OFFSET_EXPIRED,
            message: format!(
                "{why}; onOffsetExpired is fail, so nothing was touched: set onOffsetExpired: reinitialize or change spec.reinitNonce to start again"
            ),
        },
    }
}

fn run(observed: &Observed, consumer_id: String, generation: i64, warning: Option<String>) -> Run {
    let mode = observed.spec.startup.mode;
    let shards = match shards::decide(observed) {
        shards::Decision::Shards(s) => Some(s),
        _ => None,
    };
    Run {
        consumer_id,
        consumer_generation: generation,
        launch: observed.runner == RunnerState::Absent,
        // The shards are a Job until every one is done.
        bounded: mode == StartupMode::Snapshot || shards.as_ref().is_some_and(|s| !s.handed_over),
        shards,
        startup_mode: if generation > 0 && mode.is_incremental() {
            StartupMode::Initial
        } else {
            mode
        },
        previous_consumer_id: (generation > 0)
            .then(|| consumer_id_for(&base_consumer_id(observed), generation - 1)),
        probe_warning: warning,
    }
}

fn reinit(
    base: &str,
    generation: i64,
    previous: String,
    reason: &'static str,
    message: String,
) -> Plan {
    Plan::Reinitialize(Reinit {
        reason,
        previous_consumer_id: previous,
        consumer_id: consumer_id_for(base, generation + 1),
        consumer_generation: generation + 1,
        message,
        waiting: None,
    })
}

/// The first source precondition that fails, if any (the same list `dcs-runner check` prints).
fn check_source(spec: &DorisChangelogSyncSpec, probe: &SourceProbe) -> Option<Blocked> {
    use dcs_crds::conditions::types::{READY, TTL_SUFFICIENT};
    let first = preconditions(&Requirements::of(spec), &probe.table)
        .into_iter()
        .next()?;
    Some(Blocked {
        condition: if first.unmet == Unmet::Ttl {
            TTL_SUFFICIENT
        } else {
            READY
        },
        reason: first.unmet.reason(),
        message: first.message(),
    })
}

/// Why the runner says the offset expired, if it does: its checkpoint records a stop or an error
/// with reason OffsetExpired, or a runner container exited with the runner's code for it (a
/// Deployment's pod keeps doing so in CrashLoopBackOff, which is an expiry, not a crash loop).
fn runner_reports_expiry(observed: &Observed) -> Option<String> {
    if let Some(message) = observed
        .checkpoint
        .as_ref()
        .and_then(crate::checkpoint::offset_expired_message)
    {
        return Some(format!("the runner reports the offset expired: {message}"));
    }
    let exit = observed.runner_exit.as_ref()?;
    (exit.code == i32::from(dcs_crds::checkpoint::OFFSET_EXPIRED_EXIT_CODE)).then(|| {
        format!(
            "the runner reports the offset expired: pod {} exited with code {} ({})",
            exit.pod, exit.code, exit.message
        )
    })
}

/// The runner's stop record when it stopped on a change of the source's columns and
/// `spec.sink.doris.schemaChange` is still `fail`.
fn schema_change_refused(observed: &Observed) -> Option<String> {
    let policy = observed.spec.sink.doris.as_ref()?.schema_change;
    let stopped = observed.checkpoint.as_ref()?.stopped.as_ref()?;
    (policy == dcs_crds::SchemaChangePolicy::Fail && stopped.reason == reasons::SCHEMA_CHANGED)
        .then(|| stopped.message.clone())
}

/// Why the snapshot must be read again, if it must: the runner (or a shard) stopped because the
/// table's tablets changed under it (its stop record, or a container's exit code 5), or the
/// shards of a sharded snapshot planned different tablet sets (`dcs_crds::shard::tablets_moved`).
fn tablets_moved(observed: &Observed) -> Option<String> {
    if let Some(stopped) = observed
        .checkpoint
        .as_ref()
        .and_then(|c| c.stopped.as_ref())
        .filter(|s| s.reason == reasons::SNAPSHOT_TABLETS_CHANGED)
    {
        return Some(stopped.message.clone());
    }
    if let Some(exit) = observed
        .runner_exit
        .as_ref()
        .filter(|e| e.code == i32::from(dcs_crds::checkpoint::TABLETS_CHANGED_EXIT_CODE))
    {
        return Some(format!(
            "the runner reports the table's tablets changed under the snapshot: pod {} exited with code {} ({})",
            exit.pod, exit.code, exit.message
        ));
    }
    let shards = observed.shards.as_ref()?;
    let consumer = consumer_id_for(&base_consumer_id(observed), consumer_generation(observed));
    let mine: Vec<Option<crate::checkpoint::Checkpoint>> = shards
        .checkpoints
        .iter()
        .enumerate()
        .map(|(i, cp)| {
            cp.clone().filter(|c| {
                u32::try_from(i).is_ok_and(|i| {
                    c.consumer_id == dcs_crds::shard::shard_consumer_id(&consumer, i, shards.count)
                })
            })
        })
        .collect();
    dcs_crds::shard::tablets_moved(&mine, shards.count)
}

/// Why the offset counts as expired by Doris's clock, if it does (also while no runner runs).
fn headroom_expiry(observed: &Observed, probe: &SourceProbe) -> Option<String> {
    let checkpoint = observed.checkpoint.as_ref()?;
    let now = probe.doris_now_ms?;
    let headroom = headroom_seconds(probe.ttl_seconds(), now, checkpoint)?;
    (headroom <= 0).then(|| {
        format!(
            "the oldest change still needed is older than the changelog TTL ({}s): headroom {headroom}s",
            probe.ttl_seconds()
        )
    })
}

#[cfg(test)]
mod tests {
    use dcs_crds::doris_table::{KeysModel, PropertySpelling};
    use dcs_crds::{ErrorStatus, conditions::types};

    use super::*;
    use crate::reconcile::observed::{RunnerExit, is_earlier_consumer};
    use crate::reconcile::stop::StopMark;
    use crate::{
        checkpoint::{LastError, Position},
        reconcile::testing::{NOW_MS, fresh_run, observed, streaming_checkpoint},
    };

    /// The run of [`fresh_run`] whose runner exists already: kept, not launched.
    fn kept_run() -> Run {
        Run {
            launch: false,
            ..fresh_run()
        }
    }

    /// A block reported on the Ready condition.
    fn blocked(reason: &'static str, message: &str) -> Plan {
        Plan::Block(Blocked {
            condition: types::READY,
            reason,
            message: message.into(),
        })
    }

    /// A reinitialization that starts at once (waits for nothing).
    fn reinitialize(
        reason: &'static str,
        previous_consumer_id: &str,
        consumer_id: &str,
        consumer_generation: i64,
        message: &str,
    ) -> Plan {
        Plan::Reinitialize(Reinit {
            reason,
            previous_consumer_id: previous_consumer_id.into(),
            consumer_id: consumer_id.into(),
            consumer_generation,
            message: message.into(),
            waiting: None,
        })
    }

    #[test]
    fn a_fresh_good_sync_launches_a_deployment() {
        assert_eq!(plan(&observed()), Plan::Run(fresh_run()));
    }

    #[test]
    fn an_existing_runner_is_kept_and_snapshot_mode_is_bounded() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.spec.startup.mode = StartupMode::Snapshot;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                launch: false,
                bounded: true,
                startup_mode: StartupMode::Snapshot,
                ..fresh_run()
            })
        );
    }

    #[test]
    fn deletion_wins() {
        let mut o = observed();
        o.deleting = true;
        o.spec.suspend = true;
        assert_eq!(plan(&o), Plan::Cleanup);
    }

    #[test]
    fn suspend_stops_without_probing() {
        let mut o = observed();
        o.spec.suspend = true;
        o.probe = Err(ProbeFailure {
            reason: reasons::SOURCE_UNREACHABLE,
            message: "down".into(),
        });
        assert_eq!(plan(&o), Plan::Suspend);
    }

    #[test]
    fn ttl_one_second_short_blocks_with_the_numbers_and_exactly_enough_runs() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.ttl_seconds = 2119;
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::TTL_SUFFICIENT,
                reason: reasons::TTL_TOO_SHORT,
                message: "changelog.ttl_seconds is 2119s but the sync needs at least 2120s (expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m): ALTER TABLE db.src SET (\"changelog.ttl_seconds\" = \"2120\"), or lower spec.expectedSnapshotDuration".into(),
            })
        );
        o.probe.as_mut().unwrap().table.ttl_seconds = 2120;
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
    }

    #[test]
    fn binlog_spelling_is_named_in_the_fix() {
        let mut o = observed();
        let p = &mut o.probe.as_mut().unwrap().table;
        p.ttl_seconds = 60;
        p.spelling = PropertySpelling::Binlog;
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::TTL_SUFFICIENT,
                reason: reasons::TTL_TOO_SHORT,
                message: "binlog.ttl_seconds is 60s but the sync needs at least 2120s (expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m): ALTER TABLE db.src SET (\"binlog.ttl_seconds\" = \"2120\"), or lower spec.expectedSnapshotDuration".into(),
            })
        );
    }

    #[test]
    fn snapshot_mode_needs_no_changelog() {
        let mut o = observed();
        o.spec.startup.mode = StartupMode::Snapshot;
        let p = &mut o.probe.as_mut().unwrap().table;
        p.enabled = false;
        p.ttl_seconds = 1;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                bounded: true,
                startup_mode: StartupMode::Snapshot,
                ..fresh_run()
            })
        );
    }

    #[test]
    fn changelog_disabled_names_the_property() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.enabled = false;
        assert_eq!(
            plan(&o),
            blocked(
                reasons::CHANGELOG_DISABLED,
                "table db.src has no row changelog, so an incremental startup mode cannot read changes: recreate db.src with PROPERTIES (\"changelog.enable\" = \"true\") (it can only be set at CREATE TABLE; builds before 5.0 spell it \"binlog.enable\" = \"true\", \"binlog.format\" = \"ROW\"), on an FE with enable_feature_changelog = true in fe.conf"
            )
        );
    }

    #[test]
    fn before_images_are_required_only_when_the_sink_needs_them() {
        let mut o = observed();
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
        o.spec.sink.doris.as_mut().unwrap().ignore_update_before = false;
        assert_eq!(
            plan(&o),
            blocked(
                reasons::HISTORICAL_VALUE_MISSING,
                "a sink that writes update-before events (mode changelog, or ignoreUpdateBefore: false) needs the before images, but table db.src does not keep them (changelog.need_historical_value is not true): recreate db.src with \"changelog.need_historical_value\" = \"true\" (merge-on-write only, set at CREATE TABLE), or use incrementType detail with mode upsert and ignoreUpdateBefore: true"
            )
        );
        o.probe.as_mut().unwrap().table.need_historical_value = true;
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
    }

    #[test]
    fn a_duplicate_key_table_needs_no_before_images() {
        // Inserts only: nothing to keep, so the operator runs what `dcs-runner check` passes.
        let mut o = observed();
        o.spec.sink.doris.as_mut().unwrap().ignore_update_before = false;
        o.probe.as_mut().unwrap().table.keys = KeysModel::Duplicate;
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
    }

    #[test]
    fn unsupported_model_blocks() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.keys = KeysModel::Aggregate;
        assert_eq!(
            plan(&o),
            blocked(
                reasons::UNSUPPORTED_TABLE_MODEL,
                "table db.src is AGGREGATE KEY; only DUPLICATE KEY and merge-on-write UNIQUE KEY tables have a changelog (Doris: \"Only duplicate and mow table model support changelog\"): copy the data into a DUPLICATE KEY table or a UNIQUE KEY table with \"enable_unique_key_merge_on_write\" = \"true\" and the changelog on, and sync that"
            )
        );
        o.probe.as_mut().unwrap().table.keys = KeysModel::Duplicate;
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
    }

    #[test]
    fn a_secret_that_does_not_allow_the_sync_blocks_it_even_while_a_runner_runs() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.sink_probe = Err(ProbeFailure {
            reason: reasons::CREDENTIALS_NOT_ALLOWED,
            message: "Secret ns/doris named in spec.sink.doris.credentials does not allow sync orders to use it".into(),
        });
        assert_eq!(
            plan(&o),
            blocked(
                "CredentialsNotAllowed",
                "Secret ns/doris named in spec.sink.doris.credentials does not allow sync orders to use it"
            )
        );
    }

    #[test]
    fn a_host_the_credentials_may_not_reach_blocks_the_sync_even_while_a_runner_runs() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.probe = Err(ProbeFailure {
            reason: reasons::CREDENTIALS_HOST_NOT_ALLOWED,
            message: "spec.source.feNodes[0] names host evil.example, which Secret ns/doris does not let its credentials reach".into(),
        });
        assert_eq!(
            plan(&o),
            blocked(
                "CredentialsHostNotAllowed",
                "spec.source.feNodes[0] names host evil.example, which Secret ns/doris does not let its credentials reach"
            )
        );
    }

    #[test]
    fn a_table_whose_deletes_record_nothing_blocks_naming_the_property() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.light_delete = true;
        assert_eq!(
            plan(&o),
            blocked(
                "LightDeleteEnabled",
                "table db.src has \"enable_mow_light_delete\" = \"true\": its DELETE statements write delete predicates that the changelog does not record, so the sync would lose every delete: ALTER TABLE db.src SET (\"enable_mow_light_delete\" = \"false\") (deletes from then on are recorded; a delete made while it was true is in no changelog: re-initialise the sync if there were any)"
            )
        );
        // A snapshot reads no changelog: nothing to lose.
        o.spec.startup.mode = dcs_crds::spec::StartupMode::Snapshot;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                bounded: true,
                startup_mode: StartupMode::Snapshot,
                ..fresh_run()
            })
        );
    }

    #[test]
    fn a_ca_secret_that_does_not_allow_the_sync_blocks_it_even_while_a_runner_runs() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.spec.source.tls = Some(dcs_crds::testing::tls_ca_secret("doris-ca", "ca.crt"));
        // TLS itself does not stop a sync.
        assert_eq!(plan(&o), Plan::Run(kept_run()));
        o.probe = Err(ProbeFailure {
            reason: reasons::CA_BUNDLE_NOT_ALLOWED,
            message: "Secret ns/doris-ca named in spec.source.tls.caBundle.secretKeyRef does not allow sync orders to use it".into(),
        });
        assert_eq!(
            plan(&o),
            blocked(
                "CaBundleNotAllowed",
                "Secret ns/doris-ca named in spec.source.tls.caBundle.secretKeyRef does not allow sync orders to use it"
            )
        );
    }

    #[test]
    fn a_runner_image_the_operator_does_not_allow_blocks_the_sync() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.runner_allowed = Err("spec.runner.image \"evil\" is not allowed by the operator".into());
        assert_eq!(
            plan(&o),
            blocked(
                "RunnerNotAllowed",
                "spec.runner.image \"evil\" is not allowed by the operator"
            )
        );
    }

    #[test]
    fn probe_failure_blocks_a_new_sync_but_keeps_a_running_one() {
        let mut o = observed();
        o.probe = Err(ProbeFailure {
            reason: reasons::SOURCE_UNREACHABLE,
            message: "cannot reach fe:9030".into(),
        });
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::READY,
                reason: "SourceUnreachable",
                message: "cannot reach fe:9030".into(),
            })
        );
        o.runner = RunnerState::Running;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                probe_warning: Some("cannot reach fe:9030".into()),
                ..kept_run()
            })
        );
    }

    #[test]
    fn an_unreachable_sink_blocks_a_new_sync_but_keeps_a_running_one() {
        let mut o = observed();
        o.sink_probe = Err(ProbeFailure {
            reason: "SinkUnreachable",
            message: "cannot reach the sink FE over HTTP at sink-fe:8030".into(),
        });
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::SINK_HEALTHY,
                reason: "SinkUnreachable",
                message: "cannot reach the sink FE over HTTP at sink-fe:8030".into(),
            })
        );
        // A source problem is reported first.
        o.probe.as_mut().unwrap().table.ttl_seconds = 60;
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::TTL_SUFFICIENT,
                reason: reasons::TTL_TOO_SHORT,
                message: "changelog.ttl_seconds is 60s but the sync needs at least 2120s (expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m): ALTER TABLE db.src SET (\"changelog.ttl_seconds\" = \"2120\"), or lower spec.expectedSnapshotDuration".into(),
            })
        );
        o.probe.as_mut().unwrap().table.ttl_seconds = 86_400;
        o.runner = RunnerState::Running;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                probe_warning: Some("cannot reach the sink FE over HTTP at sink-fe:8030".into()),
                ..kept_run()
            })
        );
    }

    #[test]
    fn invalid_spec_blocks() {
        let mut o = observed();
        o.spec.expected_snapshot_duration = "soon".into();
        assert_eq!(
            plan(&o),
            blocked(
                reasons::INVALID_SPEC,
                "the spec is invalid: spec.expectedSnapshotDuration: \"soon\" is not a duration; write whole numbers with units and nothing else, e.g. \"10s\", \"500ms\" or \"1h30m\""
            )
        );
    }

    #[test]
    fn headroom_edges() {
        let cp = streaming_checkpoint("orders", 86_400);
        assert_eq!(headroom_seconds(86_400, NOW_MS, &cp), Some(0));
        let cp = streaming_checkpoint("orders", 86_399);
        assert_eq!(headroom_seconds(86_400, NOW_MS, &cp), Some(1));
        // A partial second of age does not count yet.
        assert_eq!(headroom_seconds(86_400, NOW_MS + 999, &cp), Some(1));
        assert_eq!(headroom_seconds(86_400, NOW_MS + 1000, &cp), Some(0));
    }

    #[test]
    fn headroom_exactly_zero_reinitializes_and_one_second_keeps_running() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 86_399));
        assert_eq!(plan(&o), Plan::Run(kept_run()));
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400));
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders",
                "orders-r1",
                1,
                "the oldest change still needed is older than the changelog TTL (86400s): headroom 0s"
            )
        );
    }

    #[test]
    fn snapshot_headroom_counts_from_t0() {
        let mut o = observed();
        let mut cp = streaming_checkpoint("orders", 10);
        cp.position = Position::Snapshot {
            tablets_done: vec![],
            tablets_done_ranges: vec![],
            tablets_done_count: None,
            tablets_total: 3,
            rows_total: None,
        };
        cp.start_point = Some(crate::checkpoint::Offset {
            timestamp: "t0".into(),
            epoch_ms: NOW_MS - 86_400_000,
            tso: 0,
        });
        o.checkpoint = Some(cp);
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders",
                "orders-r1",
                1,
                "the oldest change still needed is older than the changelog TTL (86400s): headroom 0s"
            )
        );
    }

    #[test]
    fn a_change_the_runner_refused_blocks_under_fail_and_runs_once_the_policy_changes() {
        let mut o = observed();
        o.runner = RunnerState::CrashLooping {
            restarts: 2,
            message: "exit code 2".into(),
        };
        let mut cp = streaming_checkpoint("orders", 5);
        let message = "the columns of source table src.orders changed: added `c`; spec.sink.doris.schemaChange is fail, so the sync stopped before writing a row with the new columns into the sink: set schemaChange to evolve to follow the change (a column you added to the sink yourself is kept), or to ignore to keep the sink's columns";
        cp.stopped = Some(dcs_crds::checkpoint::Stopped {
            at: "2026-12-07T19:00:00Z".into(),
            reason: "SchemaChanged".into(),
            exit_code: 2,
            message: message.into(),
        });
        o.checkpoint = Some(cp);
        o.spec.sink.doris.as_mut().unwrap().schema_change = dcs_crds::SchemaChangePolicy::Fail;
        assert_eq!(
            plan(&o),
            Plan::Block(Blocked {
                condition: types::READY,
                reason: "SchemaChanged",
                message: message.into(),
            })
        );
        // A person sets evolve (or ignore): the runner runs again and follows.
        for policy in [
            dcs_crds::SchemaChangePolicy::Evolve,
            dcs_crds::SchemaChangePolicy::Ignore,
        ] {
            o.spec.sink.doris.as_mut().unwrap().schema_change = policy;
            assert_eq!(plan(&o), Plan::Run(kept_run()), "{policy:?}");
        }
    }

    #[test]
    fn the_runner_reporting_expiry_reinitializes_or_fails() {
        let mut o = observed();
        o.status.consumer_generation = Some(1);
        let mut cp = streaming_checkpoint("orders-r1", 5);
        cp.last_error = Some(LastError {
            at: "2026-11-29T13:59:00Z".into(),
            reason: "SourceQueryFailed".into(),
            message: "Changelog offset has expired according to changelog.ttl_seconds".into(),
        });
        o.checkpoint = Some(cp);
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders-r1",
                "orders-r2",
                2,
                "the runner reports the offset expired: Changelog offset has expired according to changelog.ttl_seconds"
            )
        );
        o.spec.on_offset_expired = OnOffsetExpired::Fail;
        assert_eq!(
            plan(&o),
            Plan::Fail {
                reason: "OffsetExpired",
                message: "the runner reports the offset expired: Changelog offset has expired according to changelog.ttl_seconds; onOffsetExpired is fail, so nothing was touched: set onOffsetExpired: reinitialize or change spec.reinitNonce to start again".into(),
            }
        );
    }

    #[test]
    fn a_runner_stopped_with_offset_expired_reinitializes_at_once_even_if_the_probe_fails() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        let mut cp = streaming_checkpoint("orders", 5);
        cp.stopped = Some(dcs_crds::checkpoint::Stopped {
            at: "2026-11-29T13:59:00Z".into(),
            reason: reasons::OFFSET_EXPIRED.into(),
            exit_code: 3,
            message: "the window starts within 60s of the changelog TTL".into(),
        });
        o.checkpoint = Some(cp);
        // Full headroom by Doris's clock: only the runner knows (its safety margin).
        o.probe = Err(ProbeFailure {
            reason: reasons::SOURCE_UNREACHABLE,
            message: "down".into(),
        });
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders",
                "orders-r1",
                1,
                "the runner reports the offset expired: the window starts within 60s of the changelog TTL"
            )
        );
        o.spec.on_offset_expired = OnOffsetExpired::Fail;
        assert_eq!(
            plan(&o),
            Plan::Fail {
                reason: "OffsetExpired",
                message: "the runner reports the offset expired: the window starts within 60s of the changelog TTL; onOffsetExpired is fail, so nothing was touched: set onOffsetExpired: reinitialize or change spec.reinitNonce to start again".into(),
            }
        );
    }

    #[test]
    fn a_pod_exiting_with_code_5_reads_the_snapshot_again_even_with_on_offset_expired_fail() {
        let mut o = observed();
        o.spec.on_offset_expired = OnOffsetExpired::Fail;
        o.runner = RunnerState::CrashLooping {
            restarts: 2,
            message: "tablets changed".into(),
        };
        o.runner_exit = Some(RunnerExit {
            pod: "orders-runner-abc".into(),
            code: 5,
            message: "Error".into(),
        });
        assert_eq!(
            plan(&o),
            reinitialize(
                reasons::SNAPSHOT_TABLETS_CHANGED,
                "orders",
                "orders-r1",
                1,
                "the runner reports the table's tablets changed under the snapshot: pod orders-runner-abc exited with code 5 (Error)"
            )
        );
    }

    #[test]
    fn a_pod_exiting_with_code_3_is_an_expiry_not_a_crash_loop() {
        let mut o = observed();
        o.runner = RunnerState::CrashLooping {
            restarts: 3,
            message: "offset expired".into(),
        };
        o.runner_exit = Some(RunnerExit {
            pod: "orders-runner-abc".into(),
            code: 3,
            message: "Error".into(),
        });
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders",
                "orders-r1",
                1,
                "the runner reports the offset expired: pod orders-runner-abc exited with code 3 (Error)"
            )
        );
        // Any other exit code is a crash loop: the runner is kept, its status says so.
        o.runner_exit.as_mut().unwrap().code = 1;
        assert_eq!(plan(&o), Plan::Run(kept_run()));
        // Snapshot mode reads no changelog: nothing can expire.
        o.runner_exit.as_mut().unwrap().code = 3;
        o.spec.startup.mode = StartupMode::Snapshot;
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                bounded: true,
                startup_mode: StartupMode::Snapshot,
                ..kept_run()
            })
        );
    }

    #[test]
    fn a_started_reinit_is_finished_whatever_is_observed_now() {
        let mut o = observed();
        // Nothing says the offset expired any more (a restarted runner cleared its stop record),
        // and the source probe fails: the reinit begun goes on.
        o.probe = Err(ProbeFailure {
            reason: reasons::SOURCE_UNREACHABLE,
            message: "down".into(),
        });
        o.stopping = Some(StopMark {
            since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            purpose: super::stop::Purpose::Reinit {
                consumer: "orders".into(),
                reason: "OffsetExpired".into(),
                message: "headroom -5s".into(),
            },
        });
        assert_eq!(
            plan(&o),
            reinitialize("OffsetExpired", "orders", "orders-r1", 1, "headroom -5s")
        );
        // Once the status holds the new consumer the mark is stale and ignored.
        o.status.consumer_generation = Some(1);
        assert_eq!(plan(&o), blocked("SourceUnreachable", "down"));
        o.probe = Ok(crate::reconcile::testing::probe());
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                consumer_id: "orders-r1".into(),
                consumer_generation: 1,
                previous_consumer_id: Some("orders".into()),
                ..fresh_run()
            })
        );
    }

    #[test]
    fn failed_stays_failed_until_the_nonce_or_on_offset_expired_changes() {
        let mut o = observed();
        o.applied_nonce = Some(String::new());
        o.spec.on_offset_expired = OnOffsetExpired::Fail;
        o.status.phase = Some(Phase::Failed);
        o.status.last_error = Some(ErrorStatus {
            at: None,
            reason: Some("OffsetExpired".into()),
            message: Some("expired".into()),
        });
        // Nothing observed says expired any more: still Failed, with the same message.
        assert_eq!(
            plan(&o),
            Plan::Fail {
                reason: "OffsetExpired",
                message: "expired".into()
            }
        );
        o.spec.on_offset_expired = OnOffsetExpired::Reinitialize;
        assert_eq!(
            plan(&o),
            reinitialize(
                "OffsetExpired",
                "orders",
                "orders-r1",
                1,
                "onOffsetExpired is now reinitialize; the sync had failed: expired"
            )
        );
        o.spec.on_offset_expired = OnOffsetExpired::Fail;
        o.spec.reinit_nonce = "again".into();
        assert_eq!(
            plan(&o),
            reinitialize(
                "NonceChanged",
                "orders",
                "orders-r1",
                1,
                "spec.reinitNonce changed from \"\" to \"again\": starting again with a fresh snapshot"
            )
        );
    }

    #[test]
    fn no_applied_nonce_means_no_reinit() {
        let mut o = observed();
        o.spec.reinit_nonce = "x".into();
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
        o.applied_nonce = Some("x".into());
        assert_eq!(plan(&o), Plan::Run(fresh_run()));
    }

    #[test]
    fn after_a_reinit_the_runner_starts_in_initial_under_the_new_id() {
        let mut o = observed();
        o.spec.startup.mode = StartupMode::Latest;
        o.status.consumer_generation = Some(2);
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                consumer_id: "orders-r2".into(),
                consumer_generation: 2,
                startup_mode: StartupMode::Initial,
                previous_consumer_id: Some("orders-r1".into()),
                ..fresh_run()
            })
        );
    }

    #[test]
    fn earlier_consumers_are_the_earlier_generations_only() {
        let mut o = observed();
        o.status.consumer_generation = Some(2);
        assert!(is_earlier_consumer(&o, "orders"));
        assert!(is_earlier_consumer(&o, "orders-r1"));
        assert!(!is_earlier_consumer(&o, "orders-r2"));
        // A checkpoint of another base (offsets.consumerId changed by hand) is not ours to drop.
        assert!(!is_earlier_consumer(&o, "someone-else"));
    }

    #[test]
    fn offsets_consumer_id_is_the_base() {
        let mut o = observed();
        o.spec.offsets = Some(dcs_crds::OffsetsSpec {
            table: Some("ops.offsets".into()),
            consumer_id: Some("student-sync".into()),
        });
        o.status.consumer_generation = Some(1);
        assert_eq!(
            plan(&o),
            Plan::Run(Run {
                consumer_id: "student-sync-r1".into(),
                consumer_generation: 1,
                previous_consumer_id: Some("student-sync".into()),
                ..fresh_run()
            })
        );
    }
}
