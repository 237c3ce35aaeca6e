//! `dcs-runner check`: what `run` would do with a manifest, and every problem in the way, each
//! with its fix. [`plan_check`] decides from what was read ([`CheckInput`]) and is pure;
//! [`gather`] does the reading (checkpoint, offset table, source properties over MySQL, the sink
//! table).

use std::fmt::Write as _;

use dcs_crds::DorisChangelogSync;
use dcs_crds::doris_table::{KeysModel, LIGHT_DELETE_PROPERTY};
use dcs_crds::preconditions::{Requirements, preconditions};
use dcs_crds::spec::StartupMode;

use crate::Error;
use crate::checkpoint::{Checkpoint, CheckpointStore, Offset};
use crate::pipeline::start::{StartPlan, StartSource, plan_start_with_offset_row};
use crate::settings::{PipelineConfig, Sharding};
use crate::sink::doris::schema::{
    DeadLetterPlan, SinkTablePlan, inspect_dead_letter_table, inspect_sink_table, schema_follow,
};
use crate::source::fe_http::FeHttpClient;
use crate::source::properties::{SourceTableInfo, read_table_info};
use crate::source::snapshot;
use dcs_crds::shard::SNAPSHOT_T0_ANNOTATION;

/// Something that stops `run` (or would make it fail later), and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl Problem {
    fn new(problem: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            problem: problem.into(),
            fix: fix.into(),
        }
    }

    /// A problem from a message written as `what is wrong; what to do`.
    fn from_message(message: &str, default_fix: &str) -> Self {
        match message.split_once("; ") {
            Some((p, f)) => Self::new(p, f),
            None => Self::new(message, default_fix),
        }
    }
}

/// A failed read, with the fix that goes with it.
pub fn problem_of_error(error: &Error) -> Problem {
    let fix = match error {
        Error::SourceCredentials { .. } => {
            "check the user and password of the source (DCS_SOURCE_USERNAME / DCS_SOURCE_PASSWORD, the source Secret)"
        }
        Error::SourceUnavailable { .. } | Error::CurrentTimestamp { .. } => {
            "check source.feNodes / source.queryPort and that the FE is up and reachable from here"
        }
        Error::Doris { .. } => "check source.table names an existing table the user may read",
        _ => "see the message",
    };
    Problem::from_message(&error.to_string(), fix)
}

/// The sink as `check` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkCheck {
    /// `sink.stdout`.
    Stdout,
    /// A Doris table and what to do about it.
    Doris {
        /// `db.table`.
        table: String,
        /// The plan, or why it could not be made.
        plan: std::result::Result<SinkTablePlan, Problem>,
        /// With `deadLetter`: its table (`db.table`) and what it needs, or why that is not known.
        dead_letter: Option<(String, std::result::Result<DeadLetterPlan, Problem>)>,
    },
}

/// What `check` read.
#[derive(Debug, Clone)]
pub struct CheckInput {
    /// `metadata.name`.
    pub sync_name: String,
    /// The consumer id.
    pub consumer_id: String,
    /// `startup.mode`.
    pub startup_mode: StartupMode,
    /// `startup.timestamp` as epoch ms.
    pub startup_timestamp_ms: Option<i64>,
    /// Where the checkpoint was looked for.
    pub checkpoint_location: String,
    /// The stored checkpoint.
    pub checkpoint: std::result::Result<Option<Checkpoint>, Problem>,
    /// `offsets.table` and the consumer's row in it.
    pub offset_table: Option<(String, std::result::Result<Option<Offset>, Problem>)>,
    /// The source table's changelog properties.
    pub source: std::result::Result<SourceTableInfo, Problem>,
    /// What the sync needs of the source table (the operator decides from the same); its
    /// `table` and `increment_type` are the ones `check` shows.
    pub requirements: Requirements,
    /// The sink.
    pub sink: SinkCheck,
    /// How each side is connected to ([`tls_lines`]).
    pub tls: Vec<(String, String)>,
    /// `spec.snapshot.parallelism`, the shard and T0 (docs/ARCHITECTURE.md §3.13).
    pub sharding: Sharding,
}

/// The `tls` line of `check`: plaintext or TLS per side, and a loud warning for each side
/// whose certificates go unchecked (`insecureSkipVerify`).
pub fn tls_lines(config: &PipelineConfig) -> Vec<(String, String)> {
    let mut text = format!("source {}", config.source.tls.describe());
    let mut insecure = Vec::new();
    if config.source.tls.skips_verification() {
        insecure.push("source.tls");
    }
    if let Some(d) = config.doris_sink() {
        text.push_str(&format!("\nsink {}", d.tls.describe()));
        if d.tls.skips_verification() {
            insecure.push("sink.doris.tls");
        }
    }
    for field in insecure {
        text.push_str(&format!(
            "\nWARNING: {field}.insecureSkipVerify is on: the server is not authenticated and \
             the credentials can be read by anyone on the path; give {field}.caBundle instead"
        ));
    }
    vec![("tls".to_owned(), text)]
}

/// What `check` prints and how it exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// `label: text` lines describing what `run` would do.
    pub lines: Vec<(String, String)>,
    /// Everything in the way.
    pub problems: Vec<Problem>,
}

impl CheckReport {
    /// 0 when nothing is in the way, 2 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.problems.is_empty() {
            crate::error::exit_code::DONE
        } else {
            crate::error::exit_code::CONFIG
        }
    }

    /// The text `check` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (label, text) in &self.lines {
            let mut lines = text.lines();
            let _ = writeln!(
                out,
                "{:<11}{}",
                format!("{label}:"),
                lines.next().unwrap_or("")
            );
            for l in lines {
                let _ = writeln!(out, "           {l}");
            }
        }
        if self.problems.is_empty() {
            out.push_str("problems:  none\n");
        } else {
            let _ = writeln!(out, "problems:  {}", self.problems.len());
            for (i, p) in self.problems.iter().enumerate() {
                let _ = writeln!(out, "  {}. {}\n     fix: {}", i + 1, p.problem, p.fix);
            }
        }
        out
    }
}

fn mode_name(mode: StartupMode) -> &'static str {
    match mode {
        StartupMode::Snapshot => "snapshot",
        StartupMode::Initial => "initial",
        StartupMode::Latest => "latest",
        StartupMode::FromTimestamp => "fromTimestamp",
    }
}

fn describe_plan(plan: &StartPlan) -> String {
    match plan {
        StartPlan::Done => "nothing: the snapshot already finished (exit 0)".into(),
        StartPlan::Snapshot {
            tablets_done,
            done_ranges,
            then,
        } => {
            let head = if tablets_done.is_empty() && done_ranges.is_empty() {
                "read the snapshot".to_owned()
            } else if done_ranges.is_empty() {
                format!(
                    "resume the snapshot ({} tablets already written)",
                    tablets_done.len()
                )
            } else {
                "resume the snapshot (some tablets already written)".to_owned()
            };
            match then {
                Some(t0) => format!("{head}, then the changelog from T0 {}", t0.timestamp),
                None => format!("{head}, then stop"),
            }
        }
        StartPlan::SnapshotFromNow => {
            "take T0 from Doris now, read the snapshot, then the changelog from T0".into()
        }
        StartPlan::Changelog { from } => format!(
            "read changelog windows from {} (TSO {})",
            from.timestamp, from.tso
        ),
        StartPlan::ChangelogFromNow => "read changelog windows from Doris now".into(),
    }
}

/// What a run of a sharded snapshot (`spec.snapshot.parallelism` above 1) does without a
/// checkpoint, or `None` for one runner (docs/ARCHITECTURE.md §3.13).
fn sharded_start(sharding: &Sharding) -> Option<String> {
    let n = sharding.count;
    if n <= 1 {
        return None;
    }
    let t0 = sharding.t0.as_ref().map_or_else(
        || format!("T0 (annotation {SNAPSHOT_T0_ANNOTATION} is not set)"),
        |t0| format!("T0 {} (TSO {})", t0.timestamp, t0.tso),
    );
    Some(match sharding.shard() {
        Some((i, _)) => format!(
            "read shard {i} of {n} (tablets whose id mod {n} is {i}) at {t0}, then stop done"
        ),
        None => format!(
            "read the changelog from {t0} once all {n} snapshot shards are done (each run with --shard 0 to {})",
            n - 1
        ),
    })
}

/// Decide what `run` would do and what is in the way. Pure.
pub fn plan_check(input: &CheckInput) -> CheckReport {
    let mut lines = Vec::new();
    let mut problems = Vec::new();
    let incremental = input.requirements.incremental;
    lines.push((
        "sync".to_owned(),
        format!(
            "{} (consumer {}), source {}",
            input.sync_name, input.consumer_id, input.requirements.table
        ),
    ));
    lines.extend(input.tls.iter().cloned());

    // Start point: checkpoint → offset table → startup mode.
    let checkpoint = match &input.checkpoint {
        Ok(c) => c.as_ref(),
        Err(p) => {
            problems.push(p.clone());
            None
        }
    };
    let offset_row = match &input.offset_table {
        Some((_, Ok(row))) => row.as_ref(),
        Some((_, Err(p))) => {
            problems.push(p.clone());
            None
        }
        None => None,
    };
    let (plan, source) = plan_start_with_offset_row(
        checkpoint,
        offset_row,
        input.startup_mode,
        input.startup_timestamp_ms,
    );
    let why = match (source, checkpoint) {
        (StartSource::Checkpoint, Some(cp)) => format!(
            "checkpoint {} in {} (saved {})",
            cp.checkpoint_id, input.checkpoint_location, cp.saved_at
        ),
        (StartSource::OffsetTable, _) => format!(
            "no checkpoint in {}; the row of consumer {} in offset table {}",
            input.checkpoint_location,
            input.consumer_id,
            input.offset_table.as_ref().map_or("", |(t, _)| t.as_str())
        ),
        _ => format!(
            "no checkpoint in {}{}; startup.mode {}",
            input.checkpoint_location,
            if input.offset_table.is_some() {
                " and no offset-table row"
            } else {
                ""
            },
            mode_name(input.startup_mode)
        ),
    };
    let what = match (source, sharded_start(&input.sharding)) {
        // The shards' start, or the changelog's after them, replaces the startup mode's.
        (StartSource::StartupMode, Some(what)) => what,
        _ => describe_plan(&plan),
    };
    lines.push(("start".to_owned(), format!("{what}\nbecause: {why}")));
    lines.push((
        "increment".to_owned(),
        if incremental {
            // The spec's spelling (detail, minDelta, appendOnly), then the @incr one.
            let spec = serde_json::to_value(input.requirements.increment_type)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!(
                "{spec} ('incrementType' = '{}')",
                input.requirements.increment_type.as_sql()
            )
        } else {
            "none (snapshot mode reads no changelog)".to_owned()
        },
    ));

    // The source table.
    match &input.source {
        Err(p) => problems.push(p.clone()),
        Ok(info) => {
            let p = info.spelling.prefix();
            let model = info.keys.describe();
            // What becomes of a DELETE on the table: the line says so whatever the sync does.
            let deletes = match info.keys {
                KeysModel::Duplicate => {
                    "; DUPLICATE KEY records inserts only: a DELETE on it reaches no sink"
                        .to_owned()
                }
                KeysModel::Unique { .. } => format!(
                    ", {LIGHT_DELETE_PROPERTY} {}",
                    if info.light_delete { "true" } else { "false" }
                ),
                KeysModel::Aggregate | KeysModel::Unknown => String::new(),
            };
            lines.push((
                "source".to_owned(),
                format!(
                    "{model}, changelog {} ({p}*), {p}need_historical_value {}{deletes}",
                    if info.enabled { "on" } else { "off" },
                    if info.need_historical_value {
                        "true"
                    } else {
                        "false"
                    }
                ),
            ));
            problems.extend(
                preconditions(&input.requirements, info)
                    .into_iter()
                    .map(|p| Problem::new(p.problem, p.fix)),
            );
        }
    }

    // The sink.
    match &input.sink {
        SinkCheck::Stdout => {
            lines.push(("sink".into(), "stdout, one JSON record per change".into()))
        }
        SinkCheck::Doris {
            table,
            plan,
            dead_letter,
        } => {
            sink_lines(table, plan, &mut lines, &mut problems);
            if let Some((table, plan)) = dead_letter {
                dead_letter_lines(table, plan, &mut lines, &mut problems);
            }
        }
    }
    CheckReport { lines, problems }
}

/// The sink table's line, and its problems.
fn sink_lines(
    table: &str,
    plan: &std::result::Result<SinkTablePlan, Problem>,
    lines: &mut Vec<(String, String)>,
    problems: &mut Vec<Problem>,
) {
    match plan {
        Ok(SinkTablePlan::Exists) => {
            lines.push(("sink".into(), format!("{table} exists and fits")));
        }
        Ok(SinkTablePlan::AddColumns { columns }) => lines.push((
            "sink".into(),
            format!(
                "{table} exists; run will add the source column(s) it lacks: {}",
                columns.join(", ")
            ),
        )),
        Ok(SinkTablePlan::Create { ddl }) => lines.push((
            "sink".into(),
            format!("{table} does not exist; run will create it with:\n{ddl};"),
        )),
        Ok(SinkTablePlan::Unusable { problems: ps }) => {
            lines.push(("sink".into(), format!("{table} cannot be used")));
            for p in ps {
                problems.push(Problem::from_message(p, "see the message"));
            }
        }
        Err(p) => {
            lines.push(("sink".into(), format!("{table}: not checked")));
            problems.push(p.clone());
        }
    }
}

/// The dead-letter table's line, and its problem.
fn dead_letter_lines(
    table: &str,
    plan: &std::result::Result<DeadLetterPlan, Problem>,
    lines: &mut Vec<(String, String)>,
    problems: &mut Vec<Problem>,
) {
    let line = match plan {
        Ok(DeadLetterPlan::Fits) => format!("{table} exists and fits"),
        Ok(DeadLetterPlan::Create { ddl }) => {
            format!("{table} does not exist; run will create it with:\n{ddl};")
        }
        Ok(DeadLetterPlan::Unusable { reason }) => {
            problems.push(Problem::from_message(reason, "see the message"));
            format!("{table} cannot be used")
        }
        Err(p) => {
            problems.push(p.clone());
            format!("{table}: not checked")
        }
    };
    lines.push(("rejected".into(), line));
}

/// The TTL line for the report (kept separate so the numbers show even when covered).
fn ttl_line(input: &CheckInput) -> Option<(String, String)> {
    let info = input.source.as_ref().ok()?;
    if !input.requirements.incremental {
        return Some(("ttl".into(), "not needed in snapshot mode".into()));
    }
    let needed = input.requirements.required_ttl_seconds();
    Some((
        "ttl".into(),
        format!(
            "{}ttl_seconds {}s {} {} = {needed}s{}",
            info.spelling.prefix(),
            info.ttl_seconds,
            if info.ttl_seconds >= needed {
                "covers"
            } else {
                "does NOT cover"
            },
            input.requirements.ttl_terms(),
            if info.ttl_seconds >= needed {
                format!(" (headroom {}s)", info.ttl_seconds - needed)
            } else {
                String::new()
            }
        ),
    ))
}

/// [`plan_check`] with the TTL line placed after the source line.
pub fn check_report(input: &CheckInput) -> CheckReport {
    let mut report = plan_check(input);
    if let Some(line) = ttl_line(input) {
        let at = report
            .lines
            .iter()
            .position(|(l, _)| l == "source")
            .map_or(report.lines.len(), |i| i + 1);
        report.lines.insert(at, line);
    }
    report
}

/// Read everything `check` needs. Never fails: what cannot be read becomes a [`Problem`].
pub async fn gather<S: CheckpointStore>(
    sync: &DorisChangelogSync,
    config: &PipelineConfig,
    store: std::result::Result<(String, S), Problem>,
) -> CheckInput {
    let spec = &sync.spec;
    let (checkpoint_location, checkpoint) = match store {
        Ok((location, mut s)) => {
            let cp = s
                .load()
                .await
                .map_err(|e| Problem::from_message(&e.to_string(), "fix or delete the checkpoint"));
            (location, cp)
        }
        Err(p) => ("(unavailable)".to_owned(), Err(p)),
    };
    let offset_table = match &config.offset_table {
        None => None,
        Some(t) => {
            let row =
                crate::pipeline::offset_table::read_start(&config.source, t, &config.consumer_id)
                    .await
                    .map_err(|e| problem_of_error(&e));
            Some((t.to_string(), row))
        }
    };
    let source = read_table_info(&config.source)
        .await
        .map_err(|e| problem_of_error(&e));
    let sink = match config.doris_sink() {
        None => SinkCheck::Stdout,
        Some(d) => {
            let plan = async {
                let http = FeHttpClient::new(config.source.clone())?;
                let schema = snapshot::fetch_schema(&http, &config.source.table).await?;
                let columns = snapshot::projection(&schema, config.columns.as_deref())?;
                inspect_sink_table(d, &config.source, &columns, schema_follow(config)).await
            }
            .await;
            let plan = match plan {
                Ok(p) => Ok(p),
                Err(e @ Error::Sink { .. }) => Err(Problem::from_message(
                    &e.to_string(),
                    "check sink.doris.feNodes and the sink credentials",
                )),
                Err(e) => {
                    // The source failed (reported above); still tell whether the sink answers.
                    let sink = d.mysql_target();
                    Err(match sink.connect().await {
                        Ok(c) => {
                            let _ = c.disconnect().await;
                            Problem::new(
                                format!("the sink table was not checked: {e}"),
                                "fix the source problem first",
                            )
                        }
                        Err(se) => Problem::from_message(
                            &se.to_string(),
                            "check sink.doris.feNodes and the sink credentials",
                        ),
                    })
                }
            };
            let dead_letter = match &d.dead_letter {
                None => None,
                Some(dl) => {
                    let plan = inspect_dead_letter_table(d, &dl.table).await.map_err(|e| {
                        Problem::from_message(
                            &e.to_string(),
                            "check sink.doris.feNodes and the sink credentials",
                        )
                    });
                    Some((dl.table.to_string(), plan))
                }
            };
            SinkCheck::Doris {
                table: d.table.to_string(),
                plan,
                dead_letter,
            }
        }
    };
    CheckInput {
        sync_name: config.sync_name.clone(),
        consumer_id: config.consumer_id.clone(),
        startup_mode: config.startup_mode,
        startup_timestamp_ms: config.startup_timestamp_ms,
        checkpoint_location,
        checkpoint,
        offset_table,
        source,
        requirements: Requirements::of(spec),
        sink,
        tls: tls_lines(config),
        sharding: config.sharding.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dcs_crds::spec::IncrementType;
    use dcs_crds::testing::CheckpointBuilder;

    use super::*;
    use crate::checkpoint::Position;
    use crate::source::properties::{KeysModel, PropertySpelling};

    fn info() -> SourceTableInfo {
        SourceTableInfo {
            spelling: PropertySpelling::Changelog,
            enabled: true,
            need_historical_value: true,
            ttl_seconds: 86_400,
            keys: KeysModel::Unique {
                merge_on_write: true,
            },
            light_delete: false,
        }
    }

    fn input() -> CheckInput {
        CheckInput {
            sync_name: "s".into(),
            consumer_id: "c".into(),
            startup_mode: StartupMode::Initial,
            startup_timestamp_ms: None,
            checkpoint_location: "/tmp/cp".into(),
            checkpoint: Ok(None),
            offset_table: None,
            source: Ok(info()),
            requirements: Requirements {
                table: "db.src".into(),
                incremental: true,
                increment_type: IncrementType::Detail,
                requires_historical_value: false,
                expected_snapshot: Duration::from_secs(1800),
                snapshot_parallelism: 1,
                checkpoint_interval: Duration::from_secs(10),
                poll_interval: Duration::from_secs(10),
            },
            sink: SinkCheck::Doris {
                table: "db.dst".into(),
                plan: Ok(SinkTablePlan::Create {
                    ddl: "CREATE TABLE IF NOT EXISTS `db`.`dst` (…)".into(),
                }),
                dead_letter: None,
            },
            tls: Vec::new(),
            sharding: Sharding::default(),
        }
    }

    #[test]
    fn a_sharded_snapshot_says_who_reads_what_from_which_t0() {
        let t0 = crate::settings::shard::parse_t0("470903349657600000").unwrap();
        let mut i = input();
        i.sharding = Sharding {
            count: 4,
            index: None,
            t0: Some(t0.clone()),
        };
        let text = check_report(&i).render();
        assert!(
            text.contains(&format!(
                "start:     read the changelog from T0 {} (TSO 470903349657600000) once all 4 snapshot shards are done (each run with --shard 0 to 3)",
                t0.timestamp
            )),
            "{text}"
        );
        i.sharding.index = Some(2);
        i.sharding.t0 = None;
        let text = check_report(&i).render();
        assert!(
            text.contains("start:     read shard 2 of 4 (tablets whose id mod 4 is 2) at T0 (annotation dcs.dev/snapshot-t0 is not set), then stop done"),
            "{text}"
        );
        // A checkpoint wins, as for any run.
        i.checkpoint = Ok(Some(
            CheckpointBuilder::new()
                .consumer("c")
                .position(Position::Done)
                .build(),
        ));
        assert!(
            check_report(&i)
                .render()
                .contains("start:     nothing: the snapshot already finished")
        );
    }

    #[test]
    fn a_good_setup_has_no_problems_and_shows_the_plan() {
        let r = check_report(&input());
        assert_eq!(r.exit_code(), 0, "{}", r.render());
        let text = r.render();
        assert!(
            text.contains("take T0 from Doris now, read the snapshot, then the changelog from T0"),
            "{text}"
        );
        assert!(
            text.contains("no checkpoint in /tmp/cp; startup.mode initial"),
            "{text}"
        );
        assert!(
            text.contains("increment: detail ('incrementType' = 'DETAIL')"),
            "{text}"
        );
        assert!(
            text.contains("changelog.ttl_seconds 86400s covers expectedSnapshotDuration 30m + checkpoint.interval 10s + pollInterval 10s + margin 5m = 2120s (headroom 84280s)"),
            "{text}"
        );
        assert!(text.contains("run will create it with:"), "{text}");
        assert!(text.contains("problems:  none"), "{text}");
    }

    #[test]
    fn a_dead_letter_table_is_checked_as_run_would_prepare_it() {
        let with = |plan| {
            let mut i = input();
            if let SinkCheck::Doris { dead_letter, .. } = &mut i.sink {
                *dead_letter = Some(("db.dst_rejected".into(), plan));
            }
            check_report(&i)
        };
        let r = with(Ok(DeadLetterPlan::Fits));
        assert_eq!(r.exit_code(), 0);
        assert!(
            r.render().contains("db.dst_rejected exists and fits"),
            "{}",
            r.render()
        );
        let r = with(Ok(DeadLetterPlan::Create {
            ddl: "CREATE TABLE IF NOT EXISTS `db`.`dst_rejected` (…)".into(),
        }));
        assert_eq!(r.exit_code(), 0);
        let text = r.render();
        assert!(
            text.contains("rejected:  db.dst_rejected does not exist; run will create it with:")
                && text.contains("CREATE TABLE IF NOT EXISTS `db`.`dst_rejected` (…);"),
            "{text}"
        );
        let r = with(Ok(DeadLetterPlan::Unusable {
            reason: "sink.doris.deadLetter.table: the dead-letter table db.dst_rejected does not exist and createTable.enabled is false; create it or enable createTable".into(),
        }));
        assert_eq!(r.exit_code(), 2);
        let text = r.render();
        for part in [
            "rejected:  db.dst_rejected cannot be used",
            "the dead-letter table db.dst_rejected does not exist and createTable.enabled is false\n     fix: create it or enable createTable",
        ] {
            assert!(text.contains(part), "{part} missing in\n{text}");
        }
        let r = with(Err(Problem::new(
            "the sink answered 1045",
            "check the sink credentials",
        )));
        assert_eq!(r.exit_code(), 2);
        assert!(
            r.render().contains("db.dst_rejected: not checked"),
            "{}",
            r.render()
        );
    }

    #[test]
    fn a_checkpoint_wins_and_says_so() {
        let mut i = input();
        i.checkpoint = Ok(Some(
            CheckpointBuilder::new()
                .consumer("c")
                .changelog_at(crate::source::tso::offset_at(1_795_957_200_000))
                .label_scheme(1)
                .build(),
        ));
        let text = check_report(&i).render();
        assert!(
            text.contains("read changelog windows from 2026-11-29 13:00:00"),
            "{text}"
        );
        assert!(text.contains("because: checkpoint 7 in /tmp/cp"), "{text}");
    }

    #[test]
    fn every_problem_comes_with_its_fix() {
        let mut i = input();
        i.requirements.requires_historical_value = true;
        i.requirements.increment_type = IncrementType::MinDelta;
        i.source = Ok(SourceTableInfo {
            enabled: false,
            need_historical_value: false,
            ttl_seconds: 600,
            keys: KeysModel::Aggregate,
            light_delete: true,
            ..info()
        });
        i.sink = SinkCheck::Doris {
            table: "db.dst".into(),
            plan: Ok(SinkTablePlan::Unusable {
                problems: vec!["sink table db.dst has no column x; add it".into()],
            }),
            dead_letter: None,
        };
        let r = check_report(&i);
        assert_eq!(r.exit_code(), 2);
        let text = r.render();
        for part in [
            "Only duplicate and mow table model support changelog",
            "PROPERTIES (\"changelog.enable\" = \"true\")",
            "minDelta needs the before images",
            "\"changelog.need_historical_value\" = \"true\"",
            "ALTER TABLE db.src SET (\"changelog.ttl_seconds\" = \"2120\"), or lower spec.expectedSnapshotDuration",
            "changelog.ttl_seconds 600s does NOT cover",
            "sink table db.dst has no column x\n     fix: add it",
            "table db.src has \"enable_mow_light_delete\" = \"true\"",
            "ALTER TABLE db.src SET (\"enable_mow_light_delete\" = \"false\")",
        ] {
            assert!(text.contains(part), "{part} missing in\n{text}");
        }
        assert_eq!(r.problems.len(), 6, "{text}");
        // Snapshot mode needs no changelog at all.
        i.startup_mode = StartupMode::Snapshot;
        i.requirements.incremental = false;
        assert_eq!(check_report(&i).problems.len(), 1);
    }

    #[test]
    fn unreadable_sources_name_the_fix() {
        let p = problem_of_error(&Error::SourceCredentials {
            detail: "Access denied".into(),
        });
        assert!(
            p.problem.contains("Doris rejected the source credentials"),
            "{p:?}"
        );
        assert!(p.fix.contains("check the user and password"), "{p:?}");
        let p = problem_of_error(&Error::SourceUnavailable {
            context: "connecting".into(),
            reason: "refused".into(),
        });
        assert!(p.fix.contains("reachable"), "{p:?}");
    }
}
