//! The source preconditions of a sync: the one decision the operator's plan and status and the
//! runner's `check` all show (docs/ARCHITECTURE.md §4.3).
//!
//! A sync that reads the changelog needs a table with a changelog (DUPLICATE KEY, or UNIQUE KEY
//! with merge-on-write), the changelog on, deletes that reach the changelog (no
//! `enable_mow_light_delete`), the before-images kept when the sync uses them, and a TTL long
//! enough for the snapshot and the time between checkpoints. [`preconditions`] lists
//! every one that fails, each with its fix; the operator blocks on the first, `dcs-runner check`
//! prints them all. Pure: the callers read the table ([`SourceTableInfo`]) themselves.

use std::time::Duration;

use crate::conditions::reasons;
use crate::doris_table::{KeysModel, LIGHT_DELETE_PROPERTY, PropertySpelling, SourceTableInfo};
use crate::duration::format_duration;
use crate::spec::{DorisChangelogSyncSpec, IncrementType};

/// Added to the TTL a sync needs, for what the sum does not count (a slow checkpoint save, a
/// restart between two windows).
pub const TTL_MARGIN: Duration = Duration::from_secs(5 * 60);

/// What a sync asks of its source table, from its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirements {
    /// `source.table` as written.
    pub table: String,
    /// The startup mode reads the changelog (everything but `snapshot`).
    pub incremental: bool,
    /// `changelog.incrementType`.
    pub increment_type: IncrementType,
    /// The sync uses before-images ([`DorisChangelogSyncSpec::requires_historical_value`]).
    pub requires_historical_value: bool,
    /// `expectedSnapshotDuration`.
    pub expected_snapshot: Duration,
    /// `snapshot.parallelism`: the snapshot's runners, which share its duration.
    pub snapshot_parallelism: u32,
    /// `checkpoint.interval`.
    pub checkpoint_interval: Duration,
    /// `changelog.pollInterval`.
    pub poll_interval: Duration,
}

impl Requirements {
    /// The requirements of `spec`. A duration that does not parse counts as zero here:
    /// [`crate::validate()`] rejects it, naming the field, before anything runs.
    pub fn of(spec: &DorisChangelogSyncSpec) -> Self {
        Self {
            table: spec.source.table.clone(),
            incremental: spec.is_incremental(),
            increment_type: spec.changelog.increment_type,
            requires_historical_value: spec.requires_historical_value(),
            expected_snapshot: spec.expected_snapshot_duration().unwrap_or_default(),
            snapshot_parallelism: spec.snapshot.count(),
            checkpoint_interval: spec.checkpoint.interval().unwrap_or_default(),
            poll_interval: spec.changelog.poll_interval().unwrap_or_default(),
        }
    }

    /// How long the snapshot is expected to take: expectedSnapshotDuration divided by
    /// `snapshot.parallelism` (its shards read at once, each a share of the tablets).
    pub fn snapshot_duration(&self) -> Duration {
        self.expected_snapshot / self.snapshot_parallelism.max(1)
    }

    /// The TTL the sync needs, in whole seconds (rounded up): expectedSnapshotDuration /
    /// snapshot.parallelism + checkpoint.interval + pollInterval + [`TTL_MARGIN`].
    pub fn required_ttl_seconds(&self) -> u64 {
        let sum: Duration = [
            self.snapshot_duration(),
            self.checkpoint_interval,
            self.poll_interval,
            TTL_MARGIN,
        ]
        .iter()
        .sum();
        sum.as_secs() + u64::from(sum.subsec_nanos() > 0)
    }

    /// How the required TTL is made up, e.g. `expectedSnapshotDuration 30m + checkpoint.interval
    /// 10s + pollInterval 10s + margin 5m`; with shards the snapshot term says it was divided,
    /// `expectedSnapshotDuration 2h / snapshot.parallelism 4 = 30m + …`.
    pub fn ttl_terms(&self) -> String {
        let snapshot = if self.snapshot_parallelism > 1 {
            format!(
                "{} / snapshot.parallelism {} = {}",
                format_duration(self.expected_snapshot),
                self.snapshot_parallelism,
                format_duration(self.snapshot_duration())
            )
        } else {
            format_duration(self.expected_snapshot)
        };
        format!(
            "expectedSnapshotDuration {snapshot} + checkpoint.interval {} + pollInterval {} + margin {}",
            format_duration(self.checkpoint_interval),
            format_duration(self.poll_interval),
            format_duration(TTL_MARGIN),
        )
    }
}

/// Which precondition failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmet {
    /// Neither DUPLICATE KEY nor merge-on-write UNIQUE KEY: the table has no changelog.
    TableModel,
    /// The row changelog is off.
    ChangelogOff,
    /// DELETE writes a predicate the changelog does not record (`enable_mow_light_delete`).
    LightDelete,
    /// The sync uses before-images the table does not keep.
    HistoricalValue,
    /// `*.ttl_seconds` shorter than the sync needs.
    Ttl,
}

impl Unmet {
    /// The condition reason the operator reports it with.
    pub fn reason(self) -> &'static str {
        match self {
            Self::TableModel => reasons::UNSUPPORTED_TABLE_MODEL,
            Self::ChangelogOff => reasons::CHANGELOG_DISABLED,
            Self::LightDelete => reasons::LIGHT_DELETE_ENABLED,
            Self::HistoricalValue => reasons::HISTORICAL_VALUE_MISSING,
            Self::Ttl => reasons::TTL_TOO_SHORT,
        }
    }
}

/// A failed precondition: what is wrong and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Which one.
    pub unmet: Unmet,
    /// What is wrong, with the table's and the sync's numbers.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl Problem {
    /// One line for a condition message or an event: `problem: fix`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.problem, self.fix)
    }
}

/// The problem of a source table `t` whose DELETE statements record nothing in its changelog
/// (`enable_mow_light_delete = true`, docs/doris-protocols.md §1.1): a sync of it would lose
/// every such delete without a word. The one rule for it: [`preconditions`] lists it, and the
/// runner checks it before and after every changelog window.
pub fn light_delete_problem(t: &str, table: &SourceTableInfo) -> Option<Problem> {
    table.light_delete.then(|| Problem {
        unmet: Unmet::LightDelete,
        problem: format!(
            "table {t} has \"{LIGHT_DELETE_PROPERTY}\" = \"true\": its DELETE statements write delete predicates that the changelog does not record, so the sync would lose every delete"
        ),
        fix: format!(
            "ALTER TABLE {t} SET (\"{LIGHT_DELETE_PROPERTY}\" = \"false\") (deletes from then on are recorded; a delete made while it was true is in no changelog: re-initialise the sync if there were any)"
        ),
    })
}

/// Every precondition `table` fails for a sync with `req`, in the order they are fixed in
/// (model, changelog, light delete, before-images, TTL). A snapshot-mode sync reads no changelog and has none.
pub fn preconditions(req: &Requirements, table: &SourceTableInfo) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !req.incremental {
        return problems;
    }
    let t = &req.table;
    let p = table.spelling.prefix();
    let mut push = |unmet, problem: String, fix: String| {
        problems.push(Problem {
            unmet,
            problem,
            fix,
        })
    };
    let supported = matches!(
        table.keys,
        KeysModel::Duplicate
            | KeysModel::Unique {
                merge_on_write: true
            }
    );
    if !supported {
        push(
            Unmet::TableModel,
            format!(
                "table {t} is {}; only DUPLICATE KEY and merge-on-write UNIQUE KEY tables have a changelog (Doris: \"Only duplicate and mow table model support changelog\")",
                table.keys.describe()
            ),
            "copy the data into a DUPLICATE KEY table or a UNIQUE KEY table with \"enable_unique_key_merge_on_write\" = \"true\" and the changelog on, and sync that".into(),
        );
    }
    if !table.enabled {
        let fix = match table.spelling {
            PropertySpelling::Changelog => format!(
                "recreate {t} with PROPERTIES (\"changelog.enable\" = \"true\") (it can only be set at CREATE TABLE; builds before 5.0 spell it \"binlog.enable\" = \"true\", \"binlog.format\" = \"ROW\"), on an FE with enable_feature_changelog = true in fe.conf"
            ),
            PropertySpelling::Binlog => format!(
                "recreate {t} with PROPERTIES (\"binlog.enable\" = \"true\", \"binlog.format\" = \"ROW\") (ROW is case-sensitive; only at CREATE TABLE), on an FE with enable_feature_binlog = true in fe.conf"
            ),
        };
        push(
            Unmet::ChangelogOff,
            format!(
                "table {t} has no row changelog, so an incremental startup mode cannot read changes"
            ),
            fix,
        );
    }
    if let Some(light) = light_delete_problem(t, table) {
        push(light.unmet, light.problem, light.fix);
    }
    // A DUPLICATE KEY table only ever inserts: there is no before-image to keep.
    if req.requires_historical_value
        && !table.need_historical_value
        && table.keys != KeysModel::Duplicate
    {
        let who = if req.increment_type == IncrementType::MinDelta {
            "changelog.incrementType minDelta"
        } else {
            "a sink that writes update-before events (mode changelog, or ignoreUpdateBefore: false)"
        };
        push(
            Unmet::HistoricalValue,
            format!(
                "{who} needs the before images, but table {t} does not keep them ({p}need_historical_value is not true)"
            ),
            format!(
                "recreate {t} with \"{p}need_historical_value\" = \"true\" (merge-on-write only, set at CREATE TABLE), or use incrementType detail with mode upsert and ignoreUpdateBefore: true"
            ),
        );
    }
    let required = req.required_ttl_seconds();
    if table.ttl_seconds < required {
        push(
            Unmet::Ttl,
            format!(
                "{p}ttl_seconds is {}s but the sync needs at least {required}s ({})",
                table.ttl_seconds,
                req.ttl_terms()
            ),
            format!(
                "ALTER TABLE {t} SET (\"{p}ttl_seconds\" = \"{required}\"), or lower spec.expectedSnapshotDuration"
            ),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> Requirements {
        Requirements {
            table: "db.src".into(),
            incremental: true,
            increment_type: IncrementType::Detail,
            requires_historical_value: false,
            expected_snapshot: Duration::from_secs(1800),
            snapshot_parallelism: 1,
            checkpoint_interval: Duration::from_secs(10),
            poll_interval: Duration::from_secs(10),
        }
    }

    fn table() -> SourceTableInfo {
        SourceTableInfo {
            spelling: PropertySpelling::Changelog,
            enabled: true,
            need_historical_value: false,
            ttl_seconds: 86_400,
            keys: KeysModel::Unique {
                merge_on_write: true,
            },
            light_delete: false,
        }
    }

    fn unmet(req: &Requirements, table: &SourceTableInfo) -> Vec<Unmet> {
        preconditions(req, table).iter().map(|p| p.unmet).collect()
    }

    #[test]
    fn the_required_ttl_rounds_up_and_shows_its_terms() {
        let mut r = req();
        assert_eq!(r.required_ttl_seconds(), 2120);
        r.poll_interval = Duration::from_millis(500);
        assert_eq!(r.required_ttl_seconds(), 2111);
        assert_eq!(
            req().ttl_terms(),
            "expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m"
        );
    }

    #[test]
    fn shards_divide_the_snapshot_term_and_say_so() {
        let r = Requirements {
            expected_snapshot: Duration::from_secs(7200),
            snapshot_parallelism: 4,
            ..req()
        };
        assert_eq!(r.required_ttl_seconds(), 1800 + 10 + 10 + 300);
        assert_eq!(
            r.ttl_terms(),
            "expectedSnapshotDuration 2h / snapshot.parallelism 4 = 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m"
        );
        let t = SourceTableInfo {
            ttl_seconds: 2119,
            ..table()
        };
        let problems = preconditions(&r, &t);
        assert_eq!(
            problems[0].problem,
            "changelog.ttl_seconds is 2119s but the sync needs at least 2120s (expectedSnapshotDuration 2h / snapshot.parallelism 4 = 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m)"
        );
    }

    #[test]
    fn a_table_one_second_short_fails_on_the_ttl_with_the_numbers_and_the_fix() {
        let t = SourceTableInfo {
            ttl_seconds: 2119,
            ..table()
        };
        let p = preconditions(&req(), &t);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].unmet.reason(), "TtlTooShort");
        assert_eq!(
            p[0].message(),
            "changelog.ttl_seconds is 2119s but the sync needs at least 2120s (expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m): ALTER TABLE db.src SET (\"changelog.ttl_seconds\" = \"2120\"), or lower spec.expectedSnapshotDuration"
        );
        assert!(
            preconditions(
                &req(),
                &SourceTableInfo {
                    ttl_seconds: 2120,
                    ..table()
                }
            )
            .is_empty()
        );
    }

    #[test]
    fn before_images_are_needed_only_where_a_row_can_be_updated() {
        let mut r = req();
        r.requires_historical_value = true;
        assert_eq!(unmet(&r, &table()), [Unmet::HistoricalValue]);
        // A DUPLICATE KEY table only inserts: nothing to keep, so nothing blocks it.
        let dup = SourceTableInfo {
            keys: KeysModel::Duplicate,
            ..table()
        };
        assert_eq!(unmet(&r, &dup), []);
        let kept = SourceTableInfo {
            need_historical_value: true,
            ..table()
        };
        assert_eq!(unmet(&r, &kept), []);
    }

    #[test]
    fn every_failure_is_listed_in_the_order_it_is_fixed_in() {
        let mut r = req();
        r.requires_historical_value = true;
        r.increment_type = IncrementType::MinDelta;
        let t = SourceTableInfo {
            spelling: PropertySpelling::Binlog,
            enabled: false,
            need_historical_value: false,
            ttl_seconds: 60,
            keys: KeysModel::Aggregate,
            light_delete: true,
        };
        let p = preconditions(&r, &t);
        assert_eq!(
            p.iter().map(|p| p.unmet).collect::<Vec<_>>(),
            [
                Unmet::TableModel,
                Unmet::ChangelogOff,
                Unmet::LightDelete,
                Unmet::HistoricalValue,
                Unmet::Ttl
            ]
        );
        assert!(p[0].problem.contains("is AGGREGATE KEY"), "{p:?}");
        assert!(p[1].fix.contains("\"binlog.format\" = \"ROW\""), "{p:?}");
        assert!(p[3].problem.starts_with("changelog.incrementType minDelta"));
        assert!(
            p[3].fix
                .contains("\"binlog.need_historical_value\" = \"true\"")
        );
        assert!(p[4].problem.starts_with("binlog.ttl_seconds is 60s"));
    }

    #[test]
    fn a_table_whose_deletes_record_nothing_is_refused_with_the_alter_that_fixes_it() {
        let light = SourceTableInfo {
            light_delete: true,
            ..table()
        };
        let p = preconditions(&req(), &light);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].unmet.reason(), "LightDeleteEnabled");
        assert_eq!(
            p[0].message(),
            "table db.src has \"enable_mow_light_delete\" = \"true\": its DELETE statements write delete predicates that the changelog does not record, so the sync would lose every delete: ALTER TABLE db.src SET (\"enable_mow_light_delete\" = \"false\") (deletes from then on are recorded; a delete made while it was true is in no changelog: re-initialise the sync if there were any)"
        );
        assert_eq!(light_delete_problem("db.src", &light), p.into_iter().next());
        assert_eq!(light_delete_problem("db.src", &table()), None);
        // A snapshot reads no changelog: nothing to lose.
        let mut r = req();
        r.incremental = false;
        assert!(preconditions(&r, &light).is_empty());
    }

    #[test]
    fn a_snapshot_reads_no_changelog_and_needs_none() {
        let mut r = req();
        r.incremental = false;
        let t = SourceTableInfo {
            enabled: false,
            ttl_seconds: 1,
            keys: KeysModel::Aggregate,
            ..table()
        };
        assert!(preconditions(&r, &t).is_empty());
    }
}
