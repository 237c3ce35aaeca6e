//! No value becomes NULL without a word: a sink column narrower than the source's is refused
//! before anything is loaded (by `run` and by `check`, through the real binary), and a row Doris
//! filters fails the run naming the column and the row, with nothing counted as written.

use crate::source_support;

use std::path::Path;
use std::process::{Command, Output};

use dcs_crds::StartupMode;
use dcs_crds::checkpoint::Position;
use dcs_doris_emu::RunningEmulator;
use dcs_runner::checkpoint::{CheckpointStore, FileStore};
use dcs_runner::error::exit_code;
use dcs_runner::pipeline::{self, Control};
use source_support::{config, exec, mysql_rows, student_sync};

/// `demo.student` with a BIGINT column holding 5,000,000,000, and a hand-made sink whose `big`
/// column is INT.
async fn narrow_sink(emu: &RunningEmulator) {
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE TABLE demo.student (id INT NOT NULL, big BIGINT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\")",
            "INSERT INTO demo.student VALUES (1, 5000000000), (2, 7)",
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, big INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
}

const NARROW: &str = "sink column sink.student.big is INT but the source column is BIGINT: values above 2147483647 would not fit; ALTER TABLE `sink`.`student` MODIFY COLUMN `big` BIGINT NULL";

async fn runner(dir: &Path, verb: &str, yaml: String) -> Output {
    let file = dir.join("sync.yaml");
    std::fs::write(&file, yaml).unwrap();
    let cp = dir.join("cp");
    let verb = verb.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
            .arg(&verb)
            .args(["-f"])
            .arg(&file)
            .arg("--checkpoint-dir")
            .arg(&cp)
            .args(if verb == "run" {
                &["--metrics-addr", "127.0.0.1:0"][..]
            } else {
                &[][..]
            })
            .env("DCS_SOURCE_USERNAME", "root")
            .env("DCS_SOURCE_PASSWORD", "")
            .env("DCS_SINK_USERNAME", "root")
            .env("DCS_SINK_PASSWORD", "")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_column_narrower_than_the_source_is_refused_before_any_load() {
    let emu = source_support::emu().await;
    narrow_sink(&emu).await;
    let dir = tempfile::tempdir().unwrap();

    let out = runner(
        dir.path(),
        "run",
        student_sync(&emu, StartupMode::Snapshot).yaml(),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit_code::CONFIG)),
        "{stderr}"
    );
    assert!(stderr.contains(NARROW), "{stderr}");
    // Refused before the snapshot was read or anything was sent to the sink.
    assert_eq!(emu.doris.counters.get("be_stream_load"), 0);
    assert!(
        mysql_rows(&emu, "SELECT * FROM sink.student")
            .await
            .is_empty()
    );

    let out = runner(
        dir.path(),
        "check",
        student_sync(&emu, StartupMode::Snapshot).yaml(),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains(
            "  1. sink column sink.student.big is INT but the source column is BIGINT: values \
             above 2147483647 would not fit\n     fix: ALTER TABLE `sink`.`student` MODIFY COLUMN \
             `big` BIGINT NULL\n"
        ),
        "{stdout}"
    );

    // Widened as the message says, the same sync runs and the value arrives whole.
    exec(
        &emu,
        &[
            "DROP TABLE sink.student",
            "CREATE TABLE sink.student (id INT NOT NULL, big BIGINT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let out = runner(
        dir.path(),
        "run",
        student_sync(&emu, StartupMode::Snapshot).yaml(),
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        mysql_rows(&emu, "SELECT id, big FROM sink.student ORDER BY id").await,
        [["1", "5000000000"], ["2", "7"]]
    );
}

/// The type check passes (same types) but the sink's `name` is NOT NULL while a source row has
/// NULL there: Doris filters that row and fails the load. The run stops naming the column and
/// the row; neither the good rows of that batch nor a checkpoint past it count as written.
#[tokio::test]
async fn a_row_doris_filters_fails_the_run_naming_the_column_and_the_row() {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(16)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\")",
            "INSERT INTO demo.student VALUES (1, 'ann'), (2, NULL), (3, 'cy')",
            "CREATE DATABASE sink",
            "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(48) NOT NULL) \
             UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 \
             PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, _handle) = Control::new();
    let err = pipeline::run(
        config(&student_sync(&emu, StartupMode::Initial).yaml()),
        &mut store,
        control,
    )
    .await
    .unwrap_err();
    drop(store);
    let msg = err.to_string();
    assert_eq!(err.exit_code(), exit_code::FAILURE, "{msg}");
    assert!(msg.contains("rejected 1 of 3 rows"), "{msg}");
    assert!(msg.contains("; column name;"), "{msg}");
    assert!(msg.contains("first rejected row: 2 NULL 0"), "{msg}");
    assert!(
        mysql_rows(&emu, "SELECT * FROM sink.student")
            .await
            .is_empty(),
        "nothing of the batch is written"
    );
    // A checkpoint, if one was stored, counts nothing as written and no tablet as done.
    if let Some(c) = FileStore::open(dir.path()).unwrap().load().await.unwrap() {
        assert_eq!((c.counters.rows_written, c.counters.loads), (0, 0), "{c:?}");
        assert!(
            matches!(&c.position, Position::Snapshot { tablets_done, tablets_done_ranges, .. }
                if tablets_done.is_empty() && tablets_done_ranges.is_empty()),
            "{c:?}"
        );
    }
}

/// Schema evolution meets a column the sink already has: someone added `level INT` to the sink
/// by hand, then the source gets `level BIGINT` and a row with 5000000000 there. The runner must
/// not add it again nor load into the narrower column: it stops naming it, with nothing of the
/// new row written.
#[tokio::test]
async fn a_followed_column_the_sink_already_has_narrower_stops_the_run() {
    let emu = source_support::emu().await;
    exec(
        &emu,
        &[
            "CREATE DATABASE demo",
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(16)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\")",
            "INSERT INTO demo.student VALUES (1, 'ann')",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let (control, mut handle) = Control::new();
    let cfg = config(&student_sync(&emu, StartupMode::Initial).yaml());
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    let now = emu.doris.clock.now_ms();
    assert!(
        source_support::window_past(&mut handle, now, std::time::Duration::from_secs(30)).await,
        "the changelog caught up"
    );
    exec(
        &emu,
        &[
            "ALTER TABLE sink.student ADD COLUMN level INT",
            "ALTER TABLE demo.student ADD COLUMN level BIGINT",
            "INSERT INTO demo.student VALUES (2, 'bo', 5000000000)",
        ],
    )
    .await;
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), task)
        .await
        .expect("the run stops")
        .unwrap()
        .unwrap_err();
    assert_eq!(err.exit_code(), exit_code::CONFIG, "{err}");
    assert!(
        err.to_string().contains(
            "sink column sink.student.level is INT but the source column is BIGINT: values \
             above 2147483647 would not fit; ALTER TABLE `sink`.`student` MODIFY COLUMN `level` \
             BIGINT NULL"
        ),
        "{err}"
    );
    assert!(
        mysql_rows(&emu, "SELECT id FROM sink.student WHERE id = 2")
            .await
            .is_empty(),
        "the row with the value that does not fit is not written"
    );
}
