//! The pure status: what the plan and the observation mean for `DorisChangelogSync.status`.

use dcs_crds::preconditions::{Requirements, Unmet, preconditions};
use dcs_crds::status::{MAX_STATUS_MESSAGE, cut_text};
use dcs_crds::{
    Clock, DorisChangelogSyncStatus, ErrorStatus, OffsetStatus, Phase, ReinitStatus, SinkStatus,
    SnapshotStatus, SourceStatus, StartupMode, TlsMode, TlsStatus,
    conditions::{ConditionStatus, reasons, remove_condition, set_condition, types},
};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use super::observed::{
    Observed, RunnerState, base_consumer_id, consumer_generation, consumer_id_for,
};
use super::plan::{NEAR_EXPIRY_PERCENT, Plan, headroom_seconds};
use super::shards;
use crate::checkpoint::{Checkpoint, Position};

/// Lag and headroom moves smaller than this alone do not make a status write.
pub const REFRESH_TOLERANCE_SECONDS: i64 = 5;

/// Computes the new status from the observation and the plan; `now` is the local time, used for
/// transition times and as the clock when Doris's time is unknown.
pub fn compute_status(
    observed: &Observed,
    plan: &Plan,
    now: Timestamp,
) -> DorisChangelogSyncStatus {
    let mut s = observed.status.clone();
    if *plan == Plan::Cleanup {
        return s;
    }
    let generation = observed.generation;
    s.observed_generation = generation;
    s.tls = Some(TlsStatus {
        source: Some(TlsMode::of(observed.spec.source.tls.as_ref())),
        sink: observed
            .spec
            .sink
            .doris
            .as_ref()
            .map(|d| TlsMode::of(d.tls.as_ref())),
    });

    let probe = observed.probe.as_ref().ok();
    if let Some(p) = probe {
        s.source = Some(SourceStatus {
            ttl_seconds: Some(p.ttl_seconds()),
            changelog_enabled: Some(p.table.enabled),
            need_historical_value: Some(p.table.need_historical_value),
            keys_type: Some(p.table.keys.keys_type().to_owned()),
            clock: Some(if p.doris_now_ms.is_some() {
                Clock::Doris
            } else {
                Clock::Local
            }),
        });
    } else if let Some(source) = s.source.as_mut() {
        source.clock = Some(Clock::Local);
    }
    let now_ms = probe
        .and_then(|p| p.doris_now_ms)
        .unwrap_or_else(|| now.as_millisecond());
    let ttl = probe
        .map(|p| p.ttl_seconds())
        .or_else(|| s.source.as_ref().and_then(|x| x.ttl_seconds));

    // A re-initialisation still waiting for the old runner changes nothing yet but the phase and
    // the conditions, which say what it waits for.
    let reinit = match plan {
        Plan::Reinitialize(r) if r.waiting.is_none() => Some(r),
        _ => None,
    };
    match reinit {
        Some(r) => {
            s.consumer_id = Some(r.consumer_id.clone());
            s.consumer_generation = Some(r.consumer_generation);
            s.last_reinit = Some(ReinitStatus {
                at: Some(Time(now)),
                reason: Some(r.reason.to_owned()),
                previous_consumer_id: Some(r.previous_consumer_id.clone()),
            });
            s.offset = None;
            s.lag_seconds = None;
            s.ttl_headroom_seconds = None;
            s.snapshot = None;
            s.sink = None;
        }
        None => {
            let generation = consumer_generation(observed);
            s.consumer_id = Some(consumer_id_for(&base_consumer_id(observed), generation));
            s.consumer_generation = Some(generation);
        }
    }

    let checkpoint = if reinit.is_some() {
        None
    } else {
        observed.checkpoint.as_ref()
    };
    let headroom = match (checkpoint, ttl) {
        (Some(cp), Some(ttl)) => headroom_seconds(ttl, now_ms, cp),
        _ => None,
    };
    if let Some(cp) = checkpoint {
        apply_checkpoint(&mut s, cp, now, now_ms, headroom);
    }
    if reinit.is_none()
        && let Some(snapshot) = s.snapshot.as_mut()
    {
        shards::status(snapshot, observed);
    }

    s.phase = Some(phase(plan, checkpoint));
    s.runner_restarts = observed.runner_restarts;
    set_last_error(&mut s, observed, plan, checkpoint, now);

    let t = || Time(now);
    let conds = &mut s.conditions;
    let (status, ready_reason, ready_message) = ready(observed, plan, checkpoint);
    set_condition(
        conds,
        types::READY,
        status,
        ready_reason,
        &ready_message,
        generation,
        t(),
    );
    let (status, reason, message) = ttl_condition(observed);
    set_condition(
        conds,
        types::TTL_SUFFICIENT,
        status,
        reason,
        &message,
        generation,
        t(),
    );
    let (status, reason, message) = offset_condition(plan, headroom, ttl);
    set_condition(
        conds,
        types::OFFSET_HEALTHY,
        status,
        reason,
        &message,
        generation,
        t(),
    );
    let (status, reason, message) = snapshot_condition(observed, checkpoint);
    set_condition(
        conds,
        types::SNAPSHOT_COMPLETE,
        status,
        reason,
        &message,
        generation,
        t(),
    );
    let (status, reason, message) = sink_condition(observed, plan, checkpoint);
    set_condition(
        conds,
        types::SINK_HEALTHY,
        status,
        reason,
        &message,
        generation,
        t(),
    );
    // kstatus's abnormal-true conditions: only the one that holds is present.
    let progress = kstatus_condition(plan, ready_reason);
    for type_ in [types::RECONCILING, types::STALLED] {
        if progress != Some(type_) {
            remove_condition(conds, type_);
        }
    }
    if let Some(type_) = progress {
        set_condition(
            conds,
            type_,
            ConditionStatus::True,
            ready_reason,
            &ready_message,
            generation,
            t(),
        );
    }
    bound_messages(&mut s);
    s
}

/// Doris's answers reach condition messages: each is cut to [`MAX_STATUS_MESSAGE`] bytes (as
/// `lastError`'s is in [`set_last_error`]).
fn bound_messages(s: &mut DorisChangelogSyncStatus) {
    for c in &mut s.conditions {
        c.message = cut_text(std::mem::take(&mut c.message), MAX_STATUS_MESSAGE);
    }
}

fn parse_time(text: &str) -> Option<Time> {
    text.parse::<Timestamp>().ok().map(Time)
}

fn apply_checkpoint(
    s: &mut DorisChangelogSyncStatus,
    cp: &Checkpoint,
    now: Timestamp,
    now_ms: i64,
    headroom: Option<i64>,
) {
    let committed_at = parse_time(&cp.saved_at);
    match &cp.position {
        Position::Changelog { offset } => {
            s.offset = Some(OffsetStatus {
                timestamp: Some(offset.timestamp.clone()),
                tso: Some(offset.tso),
                checkpoint_id: Some(i64::try_from(cp.checkpoint_id).unwrap_or(i64::MAX)),
                committed_at: committed_at.clone(),
            });
            s.lag_seconds = Some((now_ms - offset.epoch_ms).div_euclid(1000).max(0));
        }
        Position::Snapshot { .. } | Position::Done => {
            s.offset = None;
            s.lag_seconds = None;
        }
    }
    s.ttl_headroom_seconds = headroom;
    let old = s.snapshot.clone().unwrap_or_default();
    let snapshotting = matches!(cp.position, Position::Snapshot { .. });
    if cp.position == Position::Done {
        // A finished `snapshot`-mode sync: its Job may have ended before any snapshot position
        // was seen, and it has no start point. The Done checkpoint is the snapshot's last one:
        // saved when it completed, its counters are the snapshot's rows.
        let rows_read = i64::try_from(cp.counters.rows_read).ok();
        s.snapshot = Some(SnapshotStatus {
            start_timestamp: cp.start_point.as_ref().map(|o| o.timestamp.clone()),
            started_at: old.started_at,
            completed_at: old.completed_at.or(committed_at).or(Some(Time(now))),
            rows_read,
            rows_total: old.rows_total.or(rows_read),
            ..SnapshotStatus::default()
        });
    } else if cp.start_point.is_some() || snapshotting || old != SnapshotStatus::default() {
        let rows_total = match &cp.position {
            Position::Snapshot { rows_total, .. } => rows_total.and_then(|r| i64::try_from(r).ok()),
            _ => old.rows_total,
        };
        s.snapshot = Some(SnapshotStatus {
            start_timestamp: cp.start_point.as_ref().map(|o| o.timestamp.clone()),
            started_at: old.started_at.or(Some(Time(now))),
            completed_at: if snapshotting {
                None
            } else {
                old.completed_at.or(Some(Time(now)))
            },
            rows_read: if snapshotting {
                i64::try_from(cp.counters.rows_read).ok()
            } else {
                old.rows_read
                    .or_else(|| i64::try_from(cp.counters.rows_read).ok())
            },
            rows_total,
            ..SnapshotStatus::default()
        });
    }
    let to_i64 = |v: u64| i64::try_from(v).ok();
    s.sink = Some(SinkStatus {
        rows_written: to_i64(cp.counters.rows_written),
        rows_deleted: to_i64(cp.counters.rows_deleted),
        rows_rejected: to_i64(cp.counters.rows_rejected),
        loads: to_i64(cp.counters.loads),
        last_label: None,
        last_load_at: None,
        last_schema_change: cp.schema.as_ref().and_then(|r| r.last_change.clone()),
        ignored_columns: cp
            .schema
            .as_ref()
            .map(|r| r.ignored.clone())
            .filter(|i| !i.is_empty()),
    });
}

fn phase(plan: &Plan, checkpoint: Option<&Checkpoint>) -> Phase {
    match plan {
        Plan::Cleanup => Phase::Pending,
        Plan::Block(_) => Phase::Blocked,
        Plan::Suspend => Phase::Suspended,
        Plan::Fail { .. } => Phase::Failed,
        Plan::Reinitialize(_) => Phase::Reinitializing,
        Plan::Run(_) => match checkpoint.map(|c| &c.position) {
            None => Phase::Pending,
            Some(Position::Snapshot { .. } | Position::Done) => Phase::Snapshotting,
            Some(Position::Changelog { .. }) => Phase::Streaming,
        },
    }
}

fn set_last_error(
    s: &mut DorisChangelogSyncStatus,
    observed: &Observed,
    plan: &Plan,
    checkpoint: Option<&Checkpoint>,
    now: Timestamp,
) {
    let (reason, message, at) = match plan {
        Plan::Block(b) => (b.reason.to_owned(), b.message.clone(), None),
        Plan::Fail { reason, message } => ((*reason).to_owned(), message.clone(), None),
        _ => match (
            &observed.runner,
            checkpoint.and_then(|c| c.last_error.as_ref()),
        ) {
            (RunnerState::CrashLooping { message, .. } | RunnerState::Failed { message }, _) => {
                (reasons::RUNNER_FAILED.to_owned(), message.clone(), None)
            }
            (_, Some(e)) => (e.reason.clone(), e.message.clone(), parse_time(&e.at)),
            _ => match &observed.checkpoint_error {
                Some(message) => ("CheckpointUnreadable".to_owned(), message.clone(), None),
                None => return,
            },
        },
    };
    // Compared as stored: cut to the bound.
    let message = cut_text(message, MAX_STATUS_MESSAGE);
    let same = s.last_error.as_ref().is_some_and(|old| {
        old.reason.as_deref() == Some(reason.as_str()) && old.message.as_deref() == Some(&message)
    });
    if !same {
        s.last_error = Some(ErrorStatus {
            at: at.or(Some(Time(now))),
            reason: Some(reason),
            message: Some(message),
        });
    }
}

type Cond = (ConditionStatus, &'static str, String);

fn ready(observed: &Observed, plan: &Plan, checkpoint: Option<&Checkpoint>) -> Cond {
    use ConditionStatus::{False, True};
    match plan {
        Plan::Cleanup => (False, reasons::SUSPENDED, "deleting".into()),
        Plan::Block(b) => (False, b.reason, b.message.clone()),
        Plan::Suspend => (
            False,
            reasons::SUSPENDED,
            "spec.suspend is true: the runner is stopped and the checkpoint kept; set it to false to resume".into(),
        ),
        Plan::Fail { reason, message } => (False, reason, message.clone()),
        Plan::Reinitialize(r) => (
            False,
            reasons::REINITIALIZING,
            match &r.waiting {
                Some(waiting) => waiting.clone(),
                None => format!("{}; starting again as consumer {}", r.message, r.consumer_id),
            },
        ),
        Plan::Run(_) => match &observed.runner {
            RunnerState::CrashLooping { restarts, message } => (
                False,
                reasons::RUNNER_FAILED,
                format!("the runner restarted {restarts} times; last error: {message}"),
            ),
            RunnerState::Failed { message } => (
                False,
                reasons::RUNNER_FAILED,
                format!("the runner failed: {message}"),
            ),
            _ => match checkpoint.map(|c| &c.position) {
                None => (
                    False,
                    reasons::RUNNER_STARTING,
                    "waiting for the runner's first checkpoint".into(),
                ),
                Some(Position::Snapshot { .. }) => {
                    (True, reasons::SNAPSHOTTING, "reading the snapshot".into())
                }
                Some(Position::Done) => (True, reasons::SNAPSHOT_DONE, "the snapshot was copied".into()),
                Some(Position::Changelog { .. }) => {
                    (True, reasons::STREAMING, "reading the changelog".into())
                }
            },
        },
    }
}

/// Which of kstatus's abnormal-true conditions holds, given the plan and Ready's reason: Stalled
/// when the sync needs a person (kstatus Failed), Reconciling while it works towards streaming or
/// a finished snapshot (kstatus InProgress), neither when it streams, finished its snapshot or is
/// suspended (kstatus then reads Ready). Both carry Ready's reason and message.
fn kstatus_condition(plan: &Plan, ready_reason: &str) -> Option<&'static str> {
    match plan {
        Plan::Cleanup | Plan::Suspend => None,
        Plan::Block(_) | Plan::Fail { .. } => Some(types::STALLED),
        Plan::Reinitialize(_) => Some(types::RECONCILING),
        Plan::Run(_) => match ready_reason {
            reasons::RUNNER_FAILED => Some(types::STALLED),
            reasons::RUNNER_STARTING | reasons::SNAPSHOTTING => Some(types::RECONCILING),
            _ => None,
        },
    }
}

fn ttl_condition(observed: &Observed) -> Cond {
    let spec = &observed.spec;
    let probe = match &observed.probe {
        Ok(probe) => probe,
        Err(failure) => {
            return (
                ConditionStatus::Unknown,
                failure.reason,
                failure.message.clone(),
            );
        }
    };
    if !spec.is_incremental() {
        return (
            ConditionStatus::True,
            reasons::TTL_COVERS_SNAPSHOT,
            "startup.mode snapshot reads no changelog".into(),
        );
    }
    let requirements = Requirements::of(&shards::snapshot_spec(observed));
    match preconditions(&requirements, &probe.table)
        .into_iter()
        .find(|p| p.unmet == Unmet::Ttl)
    {
        Some(short) => (
            ConditionStatus::False,
            short.unmet.reason(),
            short.message(),
        ),
        None => (
            ConditionStatus::True,
            reasons::TTL_COVERS_SNAPSHOT,
            format!(
                "{}ttl_seconds {}s covers the required {}s",
                probe.table.spelling.prefix(),
                probe.table.ttl_seconds,
                requirements.required_ttl_seconds()
            ),
        ),
    }
}

fn offset_condition(plan: &Plan, headroom: Option<i64>, ttl: Option<i64>) -> Cond {
    match plan {
        Plan::Reinitialize(r) if r.reason == reasons::OFFSET_EXPIRED => {
            return (
                ConditionStatus::False,
                reasons::OFFSET_EXPIRED,
                r.message.clone(),
            );
        }
        Plan::Reinitialize(_) => {
            return (
                ConditionStatus::Unknown,
                reasons::REINITIALIZING,
                "starting again under a new consumer id".into(),
            );
        }
        Plan::Fail { reason, message } if *reason == reasons::OFFSET_EXPIRED => {
            return (
                ConditionStatus::False,
                reasons::OFFSET_EXPIRED,
                message.clone(),
            );
        }
        _ => {}
    }
    match (headroom, ttl) {
        (Some(h), Some(ttl)) if h <= 0 => (
            ConditionStatus::False,
            reasons::OFFSET_EXPIRED,
            format!(
                "the oldest change still needed is {}s past the {ttl}s TTL",
                -h
            ),
        ),
        (Some(h), Some(ttl)) if h * 100 < NEAR_EXPIRY_PERCENT * ttl => (
            ConditionStatus::False,
            reasons::NEAR_EXPIRY,
            // No live numbers here: the message must not change on every reconcile.
            format!(
                "less than {NEAR_EXPIRY_PERCENT}% of the {ttl}s TTL left (see ttlHeadroomSeconds): the sync falls behind; it is reinitialized or fails when none is left"
            ),
        ),
        (Some(_), Some(ttl)) => (
            ConditionStatus::True,
            reasons::WITHIN_TTL,
            format!("at least {NEAR_EXPIRY_PERCENT}% of the {ttl}s TTL left"),
        ),
        _ => (
            ConditionStatus::Unknown,
            reasons::RUNNER_STARTING,
            "no offset committed yet".into(),
        ),
    }
}

fn snapshot_condition(observed: &Observed, checkpoint: Option<&Checkpoint>) -> Cond {
    match checkpoint.map(|c| (&c.position, c)) {
        Some((Position::Changelog { .. } | Position::Done, _)) => (
            ConditionStatus::True,
            reasons::SNAPSHOT_DONE,
            "the snapshot was copied".into(),
        ),
        Some((Position::Snapshot { tablets_total, .. }, cp)) => (
            ConditionStatus::False,
            reasons::SNAPSHOTTING,
            format!(
                "{} of {tablets_total} tablets done, {} rows read",
                cp.tablets_done_count(),
                cp.counters.rows_read
            ),
        ),
        None if matches!(
            observed.spec.startup.mode,
            StartupMode::Latest | StartupMode::FromTimestamp
        ) && consumer_generation(observed) == 0 =>
        {
            (
                ConditionStatus::True,
                reasons::SNAPSHOT_DONE,
                format!(
                    "startup.mode {} reads no snapshot",
                    observed.spec.startup.mode
                ),
            )
        }
        None => (
            ConditionStatus::Unknown,
            reasons::RUNNER_STARTING,
            "the snapshot has not started".into(),
        ),
    }
}

fn sink_condition(observed: &Observed, plan: &Plan, checkpoint: Option<&Checkpoint>) -> Cond {
    if let Plan::Block(b) = plan
        && b.condition == types::SINK_HEALTHY
    {
        return (ConditionStatus::False, b.reason, b.message.clone());
    }
    match &observed.runner {
        RunnerState::CrashLooping { restarts, message } => {
            return (
                ConditionStatus::False,
                reasons::RUNNER_FAILED,
                format!("the runner restarted {restarts} times; last error: {message}"),
            );
        }
        RunnerState::Failed { message } => {
            return (
                ConditionStatus::False,
                reasons::RUNNER_FAILED,
                message.clone(),
            );
        }
        _ => {}
    }
    match checkpoint {
        Some(cp) if cp.counters.loads > 0 => (
            ConditionStatus::True,
            reasons::LOADS_COMMITTED,
            format!("{} loads committed", cp.counters.loads),
        ),
        _ => (
            ConditionStatus::Unknown,
            reasons::RUNNER_STARTING,
            "no load committed yet".into(),
        ),
    }
}

/// Something worth a Kubernetes Event: a phase transition or a near expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Warning rather than Normal.
    pub warning: bool,
    /// A CamelCase reason.
    pub reason: String,
    /// What happened, in words.
    pub note: String,
}

/// The events a status change deserves (none when nothing a person cares about changed).
pub fn notices(old: &DorisChangelogSyncStatus, new: &DorisChangelogSyncStatus) -> Vec<Notice> {
    let ready = |s: &DorisChangelogSyncStatus| {
        dcs_crds::conditions::get_condition(&s.conditions, types::READY)
            .map(|c| (c.reason.clone(), c.message.clone()))
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    // A change of the source's columns the runner met: followed, ignored or refused.
    let schema_change =
        |s: &DorisChangelogSyncStatus| s.sink.as_ref().and_then(|k| k.last_schema_change.clone());
    if let Some(change) = schema_change(new)
        && schema_change(old).map(|c| c.at) != Some(change.at.clone())
    {
        out.push(Notice {
            warning: change.action == dcs_crds::checkpoint::schema_action::REFUSED,
            reason: reasons::SCHEMA_CHANGED.to_owned(),
            note: change.message,
        });
    }
    let (reason, message) = ready(new);
    let reinitialized = new.consumer_generation.unwrap_or(0) > old.consumer_generation.unwrap_or(0)
        && new.phase == Some(Phase::Reinitializing);
    if reinitialized {
        out.push(Notice {
            warning: true,
            reason: "Reinitialized".to_owned(),
            note: message.clone(),
        });
    }
    if (old.phase != new.phase || (new.phase == Some(Phase::Blocked) && ready(old).0 != reason))
        && !reinitialized
    {
        let consumer = new.consumer_id.clone().unwrap_or_default();
        let notice = match new.phase {
            Some(Phase::Blocked | Phase::Failed) => Some((true, reason.clone(), message.clone())),
            // Waiting for the old runner's pods: the re-initialisation has begun.
            Some(Phase::Reinitializing) => {
                Some((true, reasons::REINITIALIZING.to_owned(), message.clone()))
            }
            Some(Phase::Pending) => Some((
                false,
                "Launched".to_owned(),
                format!("the runner was started as consumer {consumer}"),
            )),
            Some(Phase::Suspended) => Some((false, reasons::SUSPENDED.to_owned(), message.clone())),
            Some(Phase::Snapshotting) => {
                Some((false, reasons::SNAPSHOTTING.to_owned(), message.clone()))
            }
            Some(Phase::Streaming) => Some((false, reasons::STREAMING.to_owned(), message.clone())),
            None => None,
        };
        if let Some((warning, reason, note)) = notice {
            out.push(Notice {
                warning,
                reason,
                note,
            });
        }
    }
    let offset = |s: &DorisChangelogSyncStatus| {
        dcs_crds::conditions::get_condition(&s.conditions, types::OFFSET_HEALTHY)
            .map(|c| (c.reason.clone(), c.message.clone()))
    };
    if let Some((reason, note)) = offset(new)
        && reason == reasons::NEAR_EXPIRY
        && offset(old).map(|(r, _)| r).as_deref() != Some(reasons::NEAR_EXPIRY)
    {
        out.push(Notice {
            warning: true,
            reason,
            note,
        });
    }
    out
}

/// How soon to look again: sooner as headroom shrinks, so lag and expiry are noticed in time.
pub fn headroom_hint(observed: &Observed) -> Option<std::time::Duration> {
    let probe = observed.probe.as_ref().ok()?;
    let now = probe.doris_now_ms?;
    let headroom = headroom_seconds(probe.ttl_seconds(), now, observed.checkpoint.as_ref()?)?;
    let secs = (headroom / 10).clamp(5, 60);
    Some(std::time::Duration::from_secs(
        u64::try_from(secs).unwrap_or(60),
    ))
}

/// Whether `new` differs from `old` in anything a person acts on: transition and event times are
/// ignored, and so are lag and headroom moves under [`REFRESH_TOLERANCE_SECONDS`], so the shell
/// skips writes that would only restamp the same observation.
pub fn differs(old: &DorisChangelogSyncStatus, new: &DorisChangelogSyncStatus) -> bool {
    fn close(a: Option<i64>, b: Option<i64>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < REFRESH_TOLERANCE_SECONDS,
            (a, b) => a == b,
        }
    }
    fn strip(s: &DorisChangelogSyncStatus) -> DorisChangelogSyncStatus {
        let epoch = || Time(Timestamp::UNIX_EPOCH);
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = epoch();
        }
        s.lag_seconds = None;
        s.ttl_headroom_seconds = None;
        if let Some(e) = s.last_error.as_mut() {
            e.at = None;
        }
        if let Some(r) = s.last_reinit.as_mut() {
            r.at = None;
        }
        if let Some(snap) = s.snapshot.as_mut() {
            snap.started_at = None;
            snap.completed_at = None;
        }
        s
    }
    strip(old) != strip(new)
        || !close(old.lag_seconds, new.lag_seconds)
        || !close(old.ttl_headroom_seconds, new.ttl_headroom_seconds)
}

/// A status this operator wrote, and the resourceVersions known to be older than that write.
#[derive(Clone, Debug)]
pub struct WrittenStatus {
    /// Versions of the object from before the write (the newest last, a few at most).
    older: Vec<String>,
    /// The version the write produced.
    written: Option<String>,
    /// What was written.
    status: DorisChangelogSyncStatus,
}

/// How many superseded resourceVersions a [`WrittenStatus`] remembers.
const OLDER_VERSIONS_KEPT: usize = 8;

/// The status to decide from: the cached object's, unless the watch cache still shows a version
/// from before this operator's last status write, whose status is then the newer one.
///
/// Deciding from a cached status that lags behind the operator's own writes would rewrite the
/// status on every reconcile (each write's event triggering the next, under load), carry stale
/// transition times, and repeat events.
pub fn current_status(
    cached_version: Option<&str>,
    cached: Option<&DorisChangelogSyncStatus>,
    written: Option<&WrittenStatus>,
) -> DorisChangelogSyncStatus {
    match (cached_version, written) {
        (Some(v), Some(w)) if w.older.iter().any(|o| o == v) => w.status.clone(),
        _ => cached.cloned().unwrap_or_default(),
    }
}

/// What to remember after writing `status`, which produced `written_version`, when the cache
/// showed `cached_version` and `previous` was the last write.
pub fn remember_write(
    cached_version: Option<&str>,
    previous: Option<&WrittenStatus>,
    written_version: Option<String>,
    status: DorisChangelogSyncStatus,
) -> WrittenStatus {
    let mut older = Vec::new();
    if let Some(prev) = previous
        && cached_version.is_some_and(|v| prev.older.iter().any(|o| o == v))
    {
        // The cache was behind: everything known older then, and the previous write, still is.
        older.extend(prev.older.iter().cloned());
        older.extend(prev.written.iter().cloned());
    }
    if let Some(v) = cached_version {
        older.retain(|o| o != v);
        older.push(v.to_owned());
    }
    let excess = older.len().saturating_sub(OLDER_VERSIONS_KEPT);
    older.drain(..excess);
    WrittenStatus {
        older,
        written: written_version,
        status,
    }
}

#[cfg(test)]
mod tests {
    use dcs_crds::conditions::{get_condition, types};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;
    use crate::reconcile::{
        plan::{Reinit, plan},
        testing::{NOW_MS, observed, streaming_checkpoint},
    };

    fn local(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str, at: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(local(at)),
        }
    }

    fn status_of(o: &Observed, at: i64) -> DorisChangelogSyncStatus {
        compute_status(o, &plan(o), local(at))
    }

    #[test]
    fn an_unreachable_sink_shows_in_sink_healthy_and_ready() {
        let mut o = observed();
        o.sink_probe = Err(crate::facts::ProbeFailure {
            reason: "SinkUnreachable",
            message: "cannot reach the sink FE over HTTP at sink-fe:8030".into(),
        });
        let s = status_of(&o, 100);
        assert_eq!(s.phase, Some(Phase::Blocked));
        for t in [types::SINK_HEALTHY, types::READY] {
            let c = dcs_crds::conditions::get_condition(&s.conditions, t).unwrap();
            assert_eq!(
                (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
                (
                    "False",
                    "SinkUnreachable",
                    "cannot reach the sink FE over HTTP at sink-fe:8030"
                ),
                "{t}"
            );
        }
        let n = notices(&DorisChangelogSyncStatus::default(), &s);
        assert_eq!(n.len(), 1);
        assert!(n[0].warning);
        assert_eq!(n[0].reason, "SinkUnreachable");
    }

    #[test]
    fn a_fresh_launch_is_pending() {
        let s = status_of(&observed(), 100);
        assert_eq!(
            s,
            DorisChangelogSyncStatus {
                observed_generation: Some(1),
                phase: Some(Phase::Pending),
                conditions: vec![
                    cond(
                        "Ready",
                        "False",
                        "RunnerStarting",
                        "waiting for the runner's first checkpoint",
                        100
                    ),
                    cond(
                        "TtlSufficient",
                        "True",
                        "TtlCoversSnapshot",
                        "changelog.ttl_seconds 86400s covers the required 2120s",
                        100
                    ),
                    cond(
                        "OffsetHealthy",
                        "Unknown",
                        "RunnerStarting",
                        "no offset committed yet",
                        100
                    ),
                    cond(
                        "SnapshotComplete",
                        "Unknown",
                        "RunnerStarting",
                        "the snapshot has not started",
                        100
                    ),
                    cond(
                        "SinkHealthy",
                        "Unknown",
                        "RunnerStarting",
                        "no load committed yet",
                        100
                    ),
                    cond(
                        "Reconciling",
                        "True",
                        "RunnerStarting",
                        "waiting for the runner's first checkpoint",
                        100
                    ),
                ],
                consumer_id: Some("orders".into()),
                consumer_generation: Some(0),
                source: Some(SourceStatus {
                    ttl_seconds: Some(86_400),
                    changelog_enabled: Some(true),
                    need_historical_value: Some(false),
                    keys_type: Some("UNIQUE_KEYS".into()),
                    clock: Some(Clock::Doris),
                }),
                tls: Some(TlsStatus {
                    source: Some(TlsMode::Plaintext),
                    sink: Some(TlsMode::Plaintext),
                }),
                ..Default::default()
            }
        );
    }

    #[test]
    fn the_status_says_how_each_side_is_protected() {
        let mut o = observed();
        o.spec.source.tls = Some(dcs_crds::TlsSpec {
            enabled: true,
            insecure_skip_verify: true,
            ..Default::default()
        });
        o.spec.sink.doris.as_mut().unwrap().tls = Some(dcs_crds::TlsSpec {
            enabled: true,
            ..Default::default()
        });
        let tls = status_of(&o, 100).tls.unwrap();
        assert_eq!(
            (tls.source, tls.sink),
            (Some(TlsMode::InsecureSkipVerify), Some(TlsMode::Verified))
        );
        o.spec.sink.doris = None;
        o.spec.sink.stdout = Some(Default::default());
        let tls = status_of(&o, 100).tls.unwrap();
        assert_eq!(
            (tls.source, tls.sink),
            (Some(TlsMode::InsecureSkipVerify), None)
        );
    }

    #[test]
    fn a_short_ttl_is_blocked_with_the_numbers() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.ttl_seconds = 600;
        let s = status_of(&o, 100);
        assert_eq!(s.phase, Some(Phase::Blocked));
        let ttl = get_condition(&s.conditions, types::TTL_SUFFICIENT).unwrap();
        assert_eq!(
            (ttl.status.as_str(), ttl.reason.as_str()),
            ("False", "TtlTooShort")
        );
        assert!(
            ttl.message
                .starts_with("changelog.ttl_seconds is 600s but the sync needs at least 2120s")
        );
        let ready = get_condition(&s.conditions, types::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "TtlTooShort")
        );
        assert_eq!(
            s.last_error.as_ref().unwrap().reason.as_deref(),
            Some("TtlTooShort")
        );
        assert_eq!(s.last_error.as_ref().unwrap().at, Some(Time(local(100))));
        // The same observation later changes nothing but would restamp nothing either.
        o.status = s.clone();
        let again = status_of(&o, 200);
        assert_eq!(again, s);
        assert!(!differs(&s, &again));
    }

    #[test]
    fn streaming_reports_offset_lag_headroom_and_counters() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 10));
        let s = status_of(&o, 100);
        assert_eq!(s.phase, Some(Phase::Streaming));
        assert_eq!(
            s.offset,
            Some(OffsetStatus {
                timestamp: Some("2026-11-29 13:59:50".into()),
                tso: Some((NOW_MS - 10_000) << 18),
                checkpoint_id: Some(7),
                committed_at: Some(Time("2026-11-29T13:59:55Z".parse().unwrap())),
            })
        );
        assert_eq!(
            (s.lag_seconds, s.ttl_headroom_seconds),
            (Some(10), Some(86_390))
        );
        assert_eq!(
            s.sink,
            Some(SinkStatus {
                rows_written: Some(90),
                rows_deleted: Some(10),
                rows_rejected: Some(4),
                loads: Some(3),
                last_label: None,
                last_load_at: None,
                last_schema_change: None,
                ignored_columns: None,
            })
        );
        for (t, st, reason) in [
            ("Ready", "True", "Streaming"),
            ("OffsetHealthy", "True", "WithinTtl"),
            ("SnapshotComplete", "True", "SnapshotDone"),
            ("SinkHealthy", "True", "LoadsCommitted"),
        ] {
            let c = get_condition(&s.conditions, t).unwrap();
            assert_eq!((c.status.as_str(), c.reason.as_str()), (st, reason), "{t}");
        }
    }

    #[test]
    fn near_expiry_starts_strictly_below_twenty_percent() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        // 20 % of 86400 s is 17280 s of headroom: still healthy.
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400 - 17_280));
        let s = status_of(&o, 100);
        let c = get_condition(&s.conditions, types::OFFSET_HEALTHY).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "WithinTtl")
        );
        o.status = s;
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400 - 17_279));
        let s = status_of(&o, 200);
        let c = get_condition(&s.conditions, types::OFFSET_HEALTHY).unwrap();
        assert_eq!(
            (
                c.status.as_str(),
                c.reason.as_str(),
                c.message.as_str(),
                &c.last_transition_time
            ),
            (
                "False",
                "NearExpiry",
                "less than 20% of the 86400s TTL left (see ttlHeadroomSeconds): the sync falls behind; it is reinitialized or fails when none is left",
                &Time(local(200))
            )
        );
        // Ready keeps its transition time: it did not flip.
        let ready = get_condition(&s.conditions, types::READY).unwrap();
        assert_eq!(ready.last_transition_time, Time(local(100)));
    }

    #[test]
    fn expiry_records_the_reinit_and_clears_progress() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400));
        let s = status_of(&o, 100);
        assert_eq!(s.phase, Some(Phase::Reinitializing));
        assert_eq!(s.consumer_id.as_deref(), Some("orders-r1"));
        assert_eq!(s.consumer_generation, Some(1));
        assert_eq!(
            s.last_reinit,
            Some(ReinitStatus {
                at: Some(Time(local(100))),
                reason: Some("OffsetExpired".into()),
                previous_consumer_id: Some("orders".into()),
            })
        );
        assert_eq!(
            (s.offset.clone(), s.lag_seconds, s.sink.clone()),
            (None, None, None)
        );
        let c = get_condition(&s.conditions, types::OFFSET_HEALTHY).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "OffsetExpired")
        );
    }

    #[test]
    fn a_reinit_waiting_for_the_old_runner_says_so_and_changes_nothing_else() {
        let mut o = observed();
        o.runner = RunnerState::Absent;
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400));
        let streaming = {
            let mut fresh = o.clone();
            fresh.checkpoint = Some(streaming_checkpoint("orders", 10));
            fresh.runner = RunnerState::Running;
            status_of(&fresh, 50)
        };
        o.status = streaming.clone();
        let mut r = Reinit {
            reason: "OffsetExpired",
            previous_consumer_id: "orders".into(),
            consumer_id: "orders-r1".into(),
            consumer_generation: 1,
            message: "the oldest change still needed is older than the changelog TTL (86400s): headroom 0s".into(),
            waiting: None,
        };
        assert_eq!(plan(&o), Plan::Reinitialize(r.clone()));
        r.waiting = Some("waiting for the runner pod(s) orders-runner-x to stop".into());
        let waiting = compute_status(&o, &Plan::Reinitialize(r.clone()), local(100));
        assert_eq!(waiting.phase, Some(Phase::Reinitializing));
        // Still the old consumer, no reinit recorded yet.
        assert_eq!(waiting.consumer_id.as_deref(), Some("orders"));
        assert_eq!(waiting.consumer_generation, Some(0));
        assert_eq!(waiting.last_reinit, None);
        let ready = get_condition(&waiting.conditions, types::READY).unwrap();
        assert_eq!(
            (
                ready.status.as_str(),
                ready.reason.as_str(),
                ready.message.as_str()
            ),
            (
                "False",
                "Reinitializing",
                "waiting for the runner pod(s) orders-runner-x to stop"
            )
        );
        let n = notices(&streaming, &waiting);
        assert_eq!(
            n,
            vec![Notice {
                warning: true,
                reason: "Reinitializing".into(),
                note: "waiting for the runner pod(s) orders-runner-x to stop".into(),
            }]
        );
        // Then the reinit itself: one Reinitialized event, though the phase stays.
        r.waiting = None;
        o.status = waiting.clone();
        let done = compute_status(&o, &Plan::Reinitialize(r), local(110));
        assert_eq!(done.consumer_id.as_deref(), Some("orders-r1"));
        let n = notices(&waiting, &done);
        assert_eq!(n.len(), 1, "{n:?}");
        assert_eq!(n[0].reason, "Reinitialized");
        assert!(
            n[0].note.ends_with("starting again as consumer orders-r1"),
            "{}",
            n[0].note
        );
        // A reinit without a wait: also exactly one event.
        assert_eq!(
            notices(&streaming, &done)
                .into_iter()
                .map(|n| n.reason)
                .collect::<Vec<_>>(),
            ["Reinitialized"]
        );
    }

    #[test]
    fn crash_loops_surface_the_runner_message() {
        let mut o = observed();
        o.runner = RunnerState::CrashLooping {
            restarts: 4,
            message: "Stream Load failed: too many filtered rows".into(),
        };
        o.runner_restarts = Some(4);
        let s = status_of(&o, 100);
        assert_eq!(s.runner_restarts, Some(4));
        let c = get_condition(&s.conditions, types::SINK_HEALTHY).unwrap();
        assert_eq!(
            (c.status.as_str(), c.message.as_str()),
            (
                "False",
                "the runner restarted 4 times; last error: Stream Load failed: too many filtered rows"
            )
        );
        assert_eq!(
            s.last_error.unwrap().reason.as_deref(),
            Some("RunnerFailed")
        );
    }

    #[test]
    fn runner_restarts_are_reported_and_a_new_count_is_written() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 0));
        // No runner pod: no count.
        let none = status_of(&o, 100);
        assert_eq!(none.runner_restarts, None);
        o.runner_restarts = Some(0);
        let zero = status_of(&o, 100);
        assert_eq!(zero.runner_restarts, Some(0));
        o.runner_restarts = Some(1);
        let one = status_of(&o, 100);
        assert_eq!(one.runner_restarts, Some(1));
        assert!(differs(&zero, &one));
        assert!(!differs(&one, &status_of(&o, 100)));
    }

    #[test]
    fn without_doris_time_the_local_clock_is_used_and_said() {
        let mut o = observed();
        o.probe.as_mut().unwrap().doris_now_ms = None;
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 0));
        let s = compute_status(
            &o,
            &plan(&o),
            Timestamp::from_millisecond(NOW_MS + 30_000).unwrap(),
        );
        assert_eq!(s.source.unwrap().clock, Some(Clock::Local));
        assert_eq!(s.lag_seconds, Some(30));
    }

    #[test]
    fn differs_ignores_timestamps_and_small_lag_moves() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 10));
        let a = status_of(&o, 100);
        o.status = a.clone();
        o.probe.as_mut().unwrap().doris_now_ms = Some(NOW_MS + 4_000);
        let b = status_of(&o, 900);
        assert_eq!(b.lag_seconds, Some(14));
        assert!(!differs(&a, &b));
        o.probe.as_mut().unwrap().doris_now_ms = Some(NOW_MS + 5_000);
        assert!(differs(&a, &status_of(&o, 900)));
        o.spec.suspend = true;
        assert!(differs(&a, &status_of(&o, 900)));
    }

    #[test]
    fn the_last_schema_change_shows_in_the_status_and_once_as_an_event() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        let mut cp = streaming_checkpoint("orders", 5);
        let note = dcs_crds::checkpoint::SchemaChangeNote {
            at: "2026-12-07T19:00:00Z".into(),
            added: vec!["c".into()],
            dropped: Vec::new(),
            action: "Ignored".into(),
            message: "the columns of source table src.orders changed: added `c`; schemaChange is ignore: the sink keeps its columns".into(),
        };
        cp.schema = Some(dcs_crds::checkpoint::SchemaRecord {
            columns: vec!["id".into(), "c".into()],
            ignored: vec!["c".into()],
            last_change: Some(note.clone()),
        });
        o.checkpoint = Some(cp);
        let before = status_of(&o, 1);
        let sink = before.sink.clone().unwrap();
        assert_eq!(sink.last_schema_change, Some(note.clone()));
        assert_eq!(sink.ignored_columns, Some(vec!["c".to_owned()]));
        let mut without = before.clone();
        without.sink.as_mut().unwrap().last_schema_change = None;
        let schema_notices = |old: &DorisChangelogSyncStatus, new: &DorisChangelogSyncStatus| {
            notices(old, new)
                .into_iter()
                .filter(|n| n.reason == "SchemaChanged")
                .collect::<Vec<_>>()
        };
        assert_eq!(
            schema_notices(&without, &before),
            vec![Notice {
                warning: false,
                reason: "SchemaChanged".into(),
                note: note.message.clone(),
            }]
        );
        assert!(schema_notices(&before, &before).is_empty());
        // A refused change is a warning.
        let mut refused = before.clone();
        let change = refused
            .sink
            .as_mut()
            .unwrap()
            .last_schema_change
            .as_mut()
            .unwrap();
        change.at = "2026-12-07T19:05:00Z".into();
        change.action = "Refused".into();
        assert!(schema_notices(&before, &refused)[0].warning);
    }

    #[test]
    fn notices_follow_transitions_only() {
        let mut o = observed();
        o.probe.as_mut().unwrap().table.ttl_seconds = 600;
        let blocked = status_of(&o, 1);
        let n = notices(&DorisChangelogSyncStatus::default(), &blocked);
        assert_eq!(n.len(), 1);
        assert!(n[0].warning);
        assert_eq!(n[0].reason, "TtlTooShort");
        assert!(notices(&blocked, &blocked).is_empty());
        o.status = blocked.clone();
        o.probe.as_mut().unwrap().table.ttl_seconds = 86_400;
        let launched = status_of(&o, 2);
        assert_eq!(
            notices(&blocked, &launched),
            vec![Notice {
                warning: false,
                reason: "Launched".into(),
                note: "the runner was started as consumer orders".into(),
            }]
        );
        o.status = launched.clone();
        o.runner = RunnerState::Running;
        o.checkpoint = Some(streaming_checkpoint("orders", 80_000));
        let near = status_of(&o, 3);
        let reasons: Vec<_> = notices(&launched, &near)
            .into_iter()
            .map(|n| n.reason)
            .collect();
        assert_eq!(reasons, ["Streaming", "NearExpiry"]);
    }

    #[test]
    fn an_unreadable_checkpoint_is_reported() {
        let mut o = observed();
        o.runner = RunnerState::Running;
        o.checkpoint_error = Some("the checkpoint is unreadable: eof".into());
        let e = status_of(&o, 5).last_error.unwrap();
        assert_eq!(
            (e.reason.as_deref(), e.message.as_deref()),
            (
                Some("CheckpointUnreadable"),
                Some("the checkpoint is unreadable: eof")
            )
        );
    }

    #[test]
    fn a_finished_snapshot_job_reports_its_snapshot() {
        let mut o = observed();
        o.spec.startup.mode = StartupMode::Snapshot;
        // The Job ended before the operator saw a snapshot position: only the Done checkpoint.
        o.runner = RunnerState::Succeeded;
        let mut cp = streaming_checkpoint("orders", 0);
        cp.position = Position::Done;
        cp.counters.rows_read = 42;
        o.checkpoint = Some(cp);
        let s = status_of(&o, 100);
        assert_eq!(s.phase, Some(Phase::Snapshotting));
        assert_eq!(
            s.snapshot,
            Some(SnapshotStatus {
                start_timestamp: None,
                started_at: None,
                completed_at: Some(Time("2026-11-29T13:59:55Z".parse().unwrap())),
                rows_read: Some(42),
                rows_total: Some(42),
                ..Default::default()
            })
        );
        let c = get_condition(&s.conditions, types::SNAPSHOT_COMPLETE).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "SnapshotDone")
        );
        // Seen mid-snapshot before: the start is kept, the rows are the final ones.
        o.status.snapshot = Some(SnapshotStatus {
            started_at: Some(Time(local(50))),
            rows_read: Some(10),
            ..Default::default()
        });
        let s = status_of(&o, 100);
        let snap = s.snapshot.unwrap();
        assert_eq!(
            (snap.started_at, snap.rows_read, snap.rows_total),
            (Some(Time(local(50))), Some(42), Some(42))
        );
        assert_eq!(
            snap.completed_at,
            Some(Time("2026-11-29T13:59:55Z".parse().unwrap()))
        );
        // And the next pass writes nothing new.
        o.status = status_of(&o, 100);
        assert!(!differs(&o.status, &status_of(&o, 200)));
    }

    #[test]
    fn suspended() {
        let mut o = observed();
        o.spec.suspend = true;
        let s = status_of(&o, 1);
        assert_eq!(s.phase, Some(Phase::Suspended));
        assert!(!dcs_crds::conditions::is_true(&s.conditions, types::READY));
    }

    /// The kstatus conditions present, as (type, status, reason).
    fn kstatus(s: &DorisChangelogSyncStatus) -> Vec<(String, String, String)> {
        s.conditions
            .iter()
            .filter(|c| c.type_ == types::RECONCILING || c.type_ == types::STALLED)
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn one(type_: &str, reason: &str) -> Vec<(String, String, String)> {
        vec![(type_.into(), "True".into(), reason.into())]
    }

    #[test]
    fn reconciling_and_stalled_follow_the_life_of_a_sync_and_go_when_it_recovers() {
        // Each step computes from the previous status, as the operator does: a condition left
        // over from an earlier state would keep kstatus at InProgress or Failed for ever.
        let mut o = observed();
        let pending = status_of(&o, 1);
        assert_eq!(kstatus(&pending), one("Reconciling", "RunnerStarting"));

        o.status = pending;
        o.runner = RunnerState::Running;
        let mut cp = streaming_checkpoint("orders", 10);
        cp.position = Position::Snapshot {
            tablets_done: vec![],
            tablets_done_ranges: vec![],
            tablets_done_count: None,
            tablets_total: 3,
            rows_total: None,
        };
        o.checkpoint = Some(cp);
        let snapshotting = status_of(&o, 2);
        assert_eq!(snapshotting.phase, Some(Phase::Snapshotting));
        assert_eq!(kstatus(&snapshotting), one("Reconciling", "Snapshotting"));

        o.status = snapshotting;
        o.checkpoint = Some(streaming_checkpoint("orders", 10));
        let streaming = status_of(&o, 3);
        assert_eq!(streaming.phase, Some(Phase::Streaming));
        assert_eq!(kstatus(&streaming), vec![]);

        // The TTL shrinks: Blocked, Stalled with Ready's reason and message.
        o.status = streaming.clone();
        o.probe.as_mut().unwrap().table.ttl_seconds = 600;
        let blocked = status_of(&o, 4);
        assert_eq!(blocked.phase, Some(Phase::Blocked));
        assert_eq!(kstatus(&blocked), one("Stalled", "TtlTooShort"));
        let stalled = get_condition(&blocked.conditions, types::STALLED).unwrap();
        let ready = get_condition(&blocked.conditions, types::READY).unwrap();
        assert_eq!(
            (&stalled.message, stalled.observed_generation),
            (&ready.message, Some(1))
        );

        // Fixed: streaming again, Stalled gone.
        o.status = blocked;
        o.probe.as_mut().unwrap().table.ttl_seconds = 86_400;
        let recovered = status_of(&o, 5);
        assert_eq!(kstatus(&recovered), vec![]);

        // A crash-looping runner needs a person too.
        o.status = recovered;
        o.runner = RunnerState::CrashLooping {
            restarts: 5,
            message: "Stream Load failed".into(),
        };
        let crashing = status_of(&o, 6);
        assert_eq!(kstatus(&crashing), one("Stalled", "RunnerFailed"));

        // Suspended: neither (kstatus reads Ready, False).
        o.status = crashing;
        o.runner = RunnerState::Absent;
        o.spec.suspend = true;
        let suspended = status_of(&o, 7);
        assert_eq!(suspended.phase, Some(Phase::Suspended));
        assert_eq!(kstatus(&suspended), vec![]);

        // Resumed after the offset expired, with onOffsetExpired: fail → Failed, Stalled.
        o.status = suspended;
        o.spec.suspend = false;
        o.spec.on_offset_expired = dcs_crds::OnOffsetExpired::Fail;
        o.checkpoint = Some(streaming_checkpoint("orders", 86_400));
        let failed = status_of(&o, 8);
        assert_eq!(failed.phase, Some(Phase::Failed));
        assert_eq!(kstatus(&failed), one("Stalled", "OffsetExpired"));

        // Re-initialised instead: Reconciling, Stalled gone.
        o.status = failed;
        o.spec.on_offset_expired = dcs_crds::OnOffsetExpired::Reinitialize;
        let reinit = status_of(&o, 9);
        assert_eq!(reinit.phase, Some(Phase::Reinitializing));
        assert_eq!(kstatus(&reinit), one("Reconciling", "Reinitializing"));
    }

    #[test]
    fn a_finished_snapshot_mode_sync_is_neither_reconciling_nor_stalled() {
        let mut o = observed();
        o.spec.startup.mode = StartupMode::Snapshot;
        o.runner = RunnerState::Succeeded;
        let mut cp = streaming_checkpoint("orders", 0);
        cp.position = Position::Done;
        o.checkpoint = Some(cp);
        let s = status_of(&o, 100);
        let ready = get_condition(&s.conditions, types::READY).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "SnapshotDone")
        );
        assert_eq!(kstatus(&s), vec![]);
    }

    fn lagging(lag: i64) -> DorisChangelogSyncStatus {
        DorisChangelogSyncStatus {
            lag_seconds: Some(lag),
            ..DorisChangelogSyncStatus::default()
        }
    }

    #[test]
    fn the_written_status_wins_while_the_cache_shows_an_older_version() {
        let cached = lagging(10);
        // Nothing written yet: the cache.
        assert_eq!(current_status(Some("5"), Some(&cached), None), cached);
        // Written on top of version 5, producing 6.
        let w = remember_write(Some("5"), None, Some("6".into()), lagging(20));
        assert_eq!(
            current_status(Some("5"), Some(&cached), Some(&w)),
            lagging(20)
        );
        // The cache caught up (6) or moved past the write (a later change, 9): the cache.
        assert_eq!(
            current_status(Some("6"), Some(&lagging(20)), Some(&w)),
            lagging(20)
        );
        assert_eq!(
            current_status(Some("9"), Some(&lagging(30)), Some(&w)),
            lagging(30)
        );
    }

    #[test]
    fn a_second_write_on_a_stale_cache_keeps_the_first_write_as_older() {
        let first = remember_write(Some("5"), None, Some("6".into()), lagging(20));
        // The cache still shows 5; the second write (producing 7) was based on the first.
        let second = remember_write(Some("5"), Some(&first), Some("7".into()), lagging(30));
        // The cache now shows the first write (6): older than the second, so the second wins.
        assert_eq!(
            current_status(Some("6"), Some(&lagging(20)), Some(&second)),
            lagging(30)
        );
        assert_eq!(
            current_status(Some("5"), Some(&lagging(10)), Some(&second)),
            lagging(30)
        );
        assert_eq!(
            current_status(Some("7"), Some(&lagging(30)), Some(&second)),
            lagging(30)
        );
        // A fresh cache forgets the older versions of earlier writes.
        let third = remember_write(Some("7"), Some(&second), Some("8".into()), lagging(40));
        assert_eq!(
            current_status(Some("6"), Some(&lagging(20)), Some(&third)),
            lagging(20)
        );
    }

    #[test]
    fn older_versions_are_bounded() {
        let mut w = remember_write(Some("0"), None, Some("1".into()), lagging(0));
        for i in 1..40 {
            w = remember_write(Some("0"), Some(&w), Some(format!("{}", i + 1)), lagging(i));
        }
        assert!(w.older.len() <= OLDER_VERSIONS_KEPT, "{:?}", w.older);
        assert_eq!(
            current_status(Some("39"), Some(&lagging(0)), Some(&w)),
            lagging(39)
        );
    }

    #[test]
    fn a_long_answer_from_doris_is_cut_in_conditions_and_last_error() {
        let mut o = observed();
        let long = format!("Doris says: {}", "x".repeat(10_000));
        o.probe = Err(crate::facts::ProbeFailure {
            reason: dcs_crds::conditions::reasons::SOURCE_UNREACHABLE,
            message: long,
        });
        let s = status_of(&o, 100);
        let ready = get_condition(&s.conditions, types::READY).unwrap();
        assert!(
            ready.message.len() <= MAX_STATUS_MESSAGE,
            "{}",
            ready.message.len()
        );
        assert!(ready.message.starts_with("Doris says: xxx") && ready.message.ends_with(" [...]"));
        // Computed again, the status is the same: an unchanged long message makes no write.
        o.status = s.clone();
        assert_eq!(status_of(&o, 200), s);
    }
}
