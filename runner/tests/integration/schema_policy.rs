//! A change of the source's columns under each `spec.sink.doris.schemaChange` policy, through the
//! `dcs-runner` binary against doris-emu (docs/ARCHITECTURE.md §3.5): `fail` stops before a row
//! with the new columns is written and keeps stopping until the policy changes; `ignore` keeps the
//! sink's columns and loses no value of them; `evolve` follows exactly once when the runner is
//! killed after the sink's ALTER was applied but before its checkpoint, or before it was applied;
//! `evolve` on a sink dcs may not change waits for a person to change it.

use crate::source_support;

use std::time::{Duration, Instant};

use dcs_crds::{SchemaChangePolicy, StartupMode};
use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::faults::SqlStall;
use source_support::process::{Files, Runner};
use source_support::{column_names, exec, mysql_rows, student_sync, student_tables};

/// The sink a person made, as the source is but without the changelog.
const HAND_MADE_SINK: &str = "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
     PROPERTIES (\"replication_num\" = \"1\")";

async fn emu_with_source(rows: u32) -> RunningEmulator {
    let emu = source_support::emu().await;
    student_tables(&emu, 4, "CREATE TABLE sink.placeholder (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")", rows).await;
    emu
}

async fn rows(emu: &RunningEmulator, select: &str, table: &str) -> Vec<Vec<String>> {
    mysql_rows(emu, &format!("SELECT {select} FROM {table} ORDER BY id")).await
}

/// Wait (bounded) until the sink holds the source's rows over `select`, with the runner running.
async fn converged(emu: &RunningEmulator, files: &Files, runner: &mut Runner, select: &str) {
    let start = Instant::now();
    loop {
        let (sink, source) = (
            rows(emu, select, "sink.student").await,
            rows(emu, select, "demo.student").await,
        );
        if sink == source {
            return;
        }
        if let Some(status) = runner.exited() {
            panic!("the runner exited ({status}):\n{}", files.logs());
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the sink did not converge:\n{}\n{}",
            source_support::row_diff(&source, &sink),
            files.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGTERM: the runner saves a last checkpoint and exits 0.
async fn stop(mut runner: Runner) {
    runner.sigterm();
    assert_eq!(runner.wait_exit(Duration::from_secs(60)).await, Some(0));
}

/// Start a runner and wait for its changelog phase.
async fn streaming(files: &Files) -> Runner {
    let mut runner = files.start();
    files
        .wait_checkpoint(&mut runner, "the changelog phase", |c| {
            c["position"]["phase"] == "changelog"
        })
        .await;
    runner
}

/// Wait until the emulator has held `n` statements in all.
async fn stalled(emu: &RunningEmulator, n: u64) {
    let start = Instant::now();
    while emu.doris.counters.get("sql_stalled") < n {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing was held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn stall(emu: &RunningEmulator, contains: &str, applied: bool) {
    emu.doris.faults.update(|f| {
        f.sql_stall = Some(SqlStall {
            contains: contains.into(),
            applied,
        });
    });
}

fn release(emu: &RunningEmulator) {
    emu.doris.faults.update(|f| f.sql_stall = None);
}

const ADD_LEVEL: [&str; 3] = [
    "ALTER TABLE demo.student ADD COLUMN level INT",
    "INSERT INTO demo.student VALUES (101, 'added', 2.00, '2026-11-29 11:00:00.000', 7)",
    "UPDATE demo.student SET level = 3, name = 'changed' WHERE id = 5",
];

const FAIL_MESSAGE: &str = "the columns of source table demo.student changed: added `level`; spec.sink.doris.schemaChange is fail, so the sync stopped before writing a row with the new columns into the sink: set schemaChange to evolve to follow the change (a column you added to the sink yourself is kept), or to ignore to keep the sink's columns";

#[tokio::test]
async fn fail_stops_before_the_new_shape_and_until_the_policy_changes() {
    let emu = emu_with_source(50).await;
    let files = Files::new(
        &student_sync(&emu, StartupMode::Initial)
            .schema_change(SchemaChangePolicy::Fail)
            .yaml(),
    );
    let mut runner = streaming(&files).await;
    exec(&emu, &ADD_LEVEL).await;
    assert_eq!(
        runner.wait_exit(Duration::from_secs(60)).await,
        Some(2),
        "{}",
        files.logs()
    );
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["stopped"]["reason"], "SchemaChanged");
    assert_eq!(cp["stopped"]["message"], FAIL_MESSAGE);
    assert_eq!(cp["schema"]["lastChange"]["action"], "Refused");
    assert_eq!(
        cp["schema"]["lastChange"]["added"],
        serde_json::json!(["level"])
    );
    assert_eq!(
        cp["schema"]["columns"],
        serde_json::json!(["id", "name", "score", "updated"])
    );
    // Nothing with the new shape was written.
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated"]
    );
    assert!(
        mysql_rows(&emu, "SELECT id FROM sink.student WHERE id = 101")
            .await
            .is_empty()
    );
    // A restart (a pod restarted by Kubernetes) meets the same change and stops again.
    let mut again = files.start();
    assert_eq!(again.wait_exit(Duration::from_secs(60)).await, Some(2));
    assert_eq!(
        files.checkpoint().unwrap()["stopped"]["message"],
        FAIL_MESSAGE
    );
    // A person sets evolve: the sink follows, and every value arrives.
    std::fs::write(
        &files.manifest,
        student_sync(&emu, StartupMode::Initial)
            .schema_change(SchemaChangePolicy::Evolve)
            .yaml(),
    )
    .unwrap();
    let mut runner = files.start();
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated", "level"]
    );
    files
        .wait_checkpoint(&mut runner, "the change followed", |c| {
            c["schema"]["lastChange"]["action"] == "Followed"
        })
        .await;
    stop(runner).await;
}

#[tokio::test]
async fn ignore_keeps_the_sink_columns_and_every_value_of_them() {
    let emu = emu_with_source(50).await;
    let files = Files::new(
        &student_sync(&emu, StartupMode::Initial)
            .schema_change(SchemaChangePolicy::Ignore)
            .yaml(),
    );
    let mut runner = streaming(&files).await;
    exec(&emu, &ADD_LEVEL).await;
    let score_of_1 = mysql_rows(&emu, "SELECT score FROM demo.student WHERE id = 1").await;
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student DROP COLUMN score",
            "INSERT INTO demo.student VALUES (102, 'after drop', '2026-11-29 12:00:00.000', 9)",
            "DELETE FROM demo.student WHERE id = 6",
        ],
    )
    .await;
    converged(&emu, &files, &mut runner, "id, name, updated").await;
    files
        .wait_checkpoint(&mut runner, "the change ignored", |c| {
            c["schema"]["lastChange"]["action"] == "Ignored"
                && c["schema"]["lastChange"]["dropped"] == serde_json::json!(["score"])
        })
        .await;
    let cp = files.checkpoint().unwrap();
    assert_eq!(cp["schema"]["ignored"], serde_json::json!(["level"]));
    assert_eq!(
        cp["schema"]["columns"],
        serde_json::json!(["id", "name", "updated", "level"])
    );
    // The sink keeps its columns: `score` stays (NULL where written after the drop), `level`
    // never arrives.
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated"]
    );
    assert_eq!(
        mysql_rows(
            &emu,
            "SELECT score FROM sink.student WHERE id IN (1, 102) ORDER BY id"
        )
        .await,
        [score_of_1[0].clone(), vec!["NULL".to_owned()]]
    );
    // A restart goes on ignoring.
    runner.sigkill();
    let mut runner = files.start();
    exec(
        &emu,
        &["INSERT INTO demo.student VALUES (103, 'restarted', '2026-11-29 13:00:00.000', 1)"],
    )
    .await;
    converged(&emu, &files, &mut runner, "id, name, updated").await;
    stop(runner).await;

    // evolve from now on: `level` is added and written for the rows written after; the status
    // says the earlier ones keep NULL until a re-initialisation.
    std::fs::write(
        &files.manifest,
        student_sync(&emu, StartupMode::Initial).yaml(),
    )
    .unwrap();
    let mut runner = files.start();
    files
        .wait_checkpoint(&mut runner, "the ignored column followed", |c| {
            c["schema"]["lastChange"]["action"] == "Followed"
        })
        .await;
    let cp = files.checkpoint().unwrap();
    assert_eq!(
        cp["schema"]["lastChange"]["message"],
        "`level` were ignored until now and are written from now on; the sink's rows written before keep NULL in them until a re-initialisation (spec.reinitNonce) copies the table again"
    );
    assert!(cp["schema"].get("ignored").is_none(), "{cp}");
    exec(
        &emu,
        &["INSERT INTO demo.student VALUES (104, 'evolved', '2026-11-29 14:00:00.000', 11)"],
    )
    .await;
    let start = Instant::now();
    while mysql_rows(&emu, "SELECT level FROM sink.student WHERE id = 104").await != [["11"]] {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{}",
            files.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        mysql_rows(&emu, "SELECT level FROM sink.student WHERE id = 101").await,
        [["NULL"]]
    );
    stop(runner).await;
}

#[tokio::test]
async fn evolve_follows_once_across_kills_around_the_sinks_alter() {
    let emu = emu_with_source(50).await;
    let files = Files::new(&student_sync(&emu, StartupMode::Initial).yaml());
    let mut runner = streaming(&files).await;

    // ADD: applied on the sink, its answer never arrives, the runner killed before a checkpoint.
    stall(&emu, "ADD COLUMN `level`", true);
    exec(&emu, &ADD_LEVEL).await;
    stalled(&emu, 1).await;
    assert!(
        column_names(&emu, "sink", "student")
            .await
            .contains(&"level".to_owned())
    );
    runner.sigkill();
    release(&emu);
    let mut runner = files.start();
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated", "level"]
    );

    // DROP: held before it runs, the runner killed; the next run drops it from the checkpoint's
    // columns, though the source no longer shows the column at all.
    stall(&emu, "DROP COLUMN `score`", false);
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student DROP COLUMN score",
            "INSERT INTO demo.student VALUES (102, 'after drop', '2026-11-29 12:00:00.000', 9)",
        ],
    )
    .await;
    stalled(&emu, 2).await;
    runner.sigkill();
    release(&emu);
    let mut runner = files.start();
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "updated", "level"]
    );

    // DROP again, applied and unanswered: nothing is dropped twice.
    stall(&emu, "DROP COLUMN `name`", true);
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student DROP COLUMN name",
            "INSERT INTO demo.student VALUES (103, '2026-11-29 13:00:00.000', 4)",
        ],
    )
    .await;
    stalled(&emu, 3).await;
    runner.sigkill();
    release(&emu);
    let mut runner = files.start();
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "updated", "level"]
    );
    stop(runner).await;
}

#[tokio::test]
async fn evolve_on_a_sink_dcs_may_not_change_waits_for_a_person() {
    let emu = emu_with_source(50).await;
    exec(&emu, &[HAND_MADE_SINK]).await;
    let files = Files::new(
        &student_sync(&emu, StartupMode::Initial)
            .create_table(false)
            .yaml(),
    );
    let mut runner = streaming(&files).await;
    exec(&emu, &ADD_LEVEL).await;
    assert_eq!(
        runner.wait_exit(Duration::from_secs(60)).await,
        Some(2),
        "{}",
        files.logs()
    );
    assert_eq!(
        files.checkpoint().unwrap()["stopped"]["message"],
        "the columns of source table demo.student changed: added `level`; spec.sink.doris.createTable.enabled is false, so dcs does not change the sink table, which lacks `level`: add them to it (the sync goes on at its next start), or set createTable.enabled: true to let dcs follow, or schemaChange: ignore to keep the sink's columns"
    );
    assert!(
        mysql_rows(&emu, "SELECT id FROM sink.student WHERE id = 101")
            .await
            .is_empty()
    );
    exec(&emu, &["ALTER TABLE sink.student ADD COLUMN level BIGINT"]).await;
    let mut runner = files.start();
    converged(&emu, &files, &mut runner, "*").await;
    files
        .wait_checkpoint(&mut runner, "the change followed by hand", |c| {
            c["schema"]["lastChange"]["action"] == "Followed"
        })
        .await;
    assert_eq!(
        files.checkpoint().unwrap()["schema"]["lastChange"]["message"],
        "the columns of source table demo.student changed: added `level`; the sink table has the new columns already (createTable.enabled is false: dcs does not change it; a dropped column stays, written as NULL)"
    );
    stop(runner).await;
}

#[tokio::test]
async fn a_rebuilt_sink_has_the_source_columns_after_a_drop_its_consumer_never_saw() {
    let emu = emu_with_source(50).await;
    let yaml = student_sync(&emu, StartupMode::Initial).yaml();
    let files = Files::new(&yaml);
    let mut runner = streaming(&files).await;
    exec(&emu, &ADD_LEVEL).await;
    converged(&emu, &files, &mut runner, "*").await;
    stop(runner).await;
    // While no runner runs, the column goes and another comes; then the sync is re-initialised
    // (its offset expired): the new consumer rebuilds the sink through a shadow made like it.
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student DROP COLUMN level",
            "ALTER TABLE demo.student ADD COLUMN grade INT",
            "UPDATE demo.student SET grade = id WHERE id <= 10",
        ],
    )
    .await;
    let reinitialised = student_sync(&emu, StartupMode::Initial)
        .name("student-sync-r1")
        .annotation(
            dcs_crds::checkpoint::REINITIALIZED_FROM_ANNOTATION,
            "student-sync",
        )
        .yaml();
    let files = Files::new(&reinitialised);
    let mut runner = streaming(&files).await;
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        column_names(&emu, "sink", "student").await,
        ["id", "name", "score", "updated", "grade"]
    );
    stop(runner).await;
}

#[tokio::test]
async fn a_column_added_with_a_default_reads_it_in_the_sink_as_in_the_source() {
    let emu = emu_with_source(50).await;
    let files = Files::new(&student_sync(&emu, StartupMode::Initial).yaml());
    let mut runner = streaming(&files).await;
    // The source's existing rows read the defaults; only row 5 changes afterwards.
    exec(
        &emu,
        &[
            "ALTER TABLE demo.student ADD COLUMN level INT DEFAULT 7",
            "ALTER TABLE demo.student ADD COLUMN tier VARCHAR(16) DEFAULT 'basic'",
            "UPDATE demo.student SET level = 1, tier = 'gold' WHERE id = 5",
        ],
    )
    .await;
    converged(&emu, &files, &mut runner, "*").await;
    assert_eq!(
        mysql_rows(
            &emu,
            "SELECT level, tier FROM sink.student WHERE id IN (4, 5) ORDER BY id"
        )
        .await,
        [["7", "basic"], ["1", "gold"]]
    );
    stop(runner).await;
}
