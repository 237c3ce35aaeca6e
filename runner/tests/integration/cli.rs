//! The `dcs-runner` binary: exit codes of `run`, and the `demo` end to end.

use crate::source_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dcs_crds::StartupMode;
use dcs_crds::shard::SNAPSHOT_T0_ANNOTATION;
use dcs_crds::testing::SyncBuilder;
use dcs_doris_emu::RunningEmulator;
use source_support::{exec, mysql_rows, unique_ddl};

fn runner() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
}

#[test]
fn run_without_credentials_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("sync.yaml");
    std::fs::write(&manifest, unreachable_sync(StartupMode::Snapshot).yaml()).unwrap();
    let out = runner()
        .args(["run", "-f"])
        .arg(&manifest)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .env_remove("DCS_SOURCE_USERNAME")
        .env_remove("DCS_CHECKPOINT_CONFIGMAP")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DCS_SOURCE_USERNAME"), "{stderr}");
    let missing = runner()
        .args(["run", "-f", "/nonexistent/sync.yaml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = runner().args(["run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "0  done",
        "2  configuration error",
        "3  the changelog offset expired",
        "4  fenced",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[cfg(feature = "demo")]
#[test]
fn demo_syncs_and_reports_identical() {
    let out = runner()
        .args(["demo", "--duration", "5s", "--rows", "2000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("source ") && l.ends_with(": identical")),
        "{stdout}"
    );
}

/// `src.t` on the emulator from `mode`, 1 s polls and checkpoints, into the sample's sink.
fn sync(emu: &RunningEmulator, mode: StartupMode) -> SyncBuilder {
    SyncBuilder::new()
        .name("cli-sync")
        .source_fe(&emu.fe_http_addr())
        .query_port(emu.ports().query_port)
        .source_table("src.t")
        .source_secret("x")
        .mode(mode)
        .poll_interval("1s")
        .checkpoint_interval("1s")
}

/// A sync `s` of `db.t` on an FE nobody listens on, from `mode`, to stdout.
fn unreachable_sync(mode: StartupMode) -> SyncBuilder {
    SyncBuilder::new()
        .name("s")
        .source_fe("127.0.0.1:1")
        .source_table("db.t")
        .source_secret("x")
        .mode(mode)
        .stdout()
}

async fn source_table(emu: &RunningEmulator, rows: u32) {
    exec(emu, &["CREATE DATABASE src", &unique_ddl("src.t", 2)]).await;
    let values: Vec<String> = (1..=rows)
        .map(|i| format!("({i}, 'n{i}', {})", i % 50))
        .collect();
    exec(
        emu,
        &[&format!("INSERT INTO src.t VALUES {}", values.join(", "))],
    )
    .await;
}

fn run_cmd(manifest: &Path, dir: &Path) -> Command {
    let mut c = runner();
    // A port of its own: 9464 on the host is where the test bed's runner pods serve probes.
    c.args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
        .arg(manifest)
        .arg("--checkpoint-dir")
        .arg(dir.join("cp"))
        .env("DCS_SOURCE_USERNAME", "root")
        .env("DCS_SOURCE_PASSWORD", "")
        .env("DCS_SINK_USERNAME", "root")
        .env("DCS_SINK_PASSWORD", "")
        .env_remove("DCS_CHECKPOINT_CONFIGMAP");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn stdout_sink_prints_one_record_per_row_and_exits_0_when_done() {
    let emu = source_support::emu().await;
    source_table(&emu, 20).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yaml");
    std::fs::write(&file, sync(&emu, StartupMode::Snapshot).stdout().yaml()).unwrap();
    let mut cmd = run_cmd(&file, dir.path());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 20);
    assert!(records.iter().all(|r| r["op"] == "+I"));
    let mut ids: Vec<i64> = records
        .iter()
        .map(|r| r["row"]["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    // Logs go to stderr and carry the sync and consumer.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cli-sync"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_the_checkpoint_and_exits_0() {
    let emu = source_support::emu().await;
    source_table(&emu, 300).await;
    exec(
        &emu,
        &[
            "CREATE DATABASE dst",
            "CREATE TABLE dst.t (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yaml");
    let sync = sync(&emu, StartupMode::Initial)
        .sink_fe(&emu.fe_http_addr())
        .sink_table("dst.t")
        .sink_secret("y")
        .batch_interval("1s");
    std::fs::write(&file, sync.yaml()).unwrap();
    let mut child = run_cmd(&file, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let checkpoint = dir.path().join("cp").join("checkpoint.json");
    let start = Instant::now();
    loop {
        let phase = std::fs::read_to_string(&checkpoint)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map(|v| v["position"]["phase"].as_str().unwrap_or("").to_owned());
        if phase.as_deref() == Some("changelog") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no changelog checkpoint"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the runner exited early"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    exec(&emu, &["INSERT INTO src.t VALUES (1000, 'late', 1)"]).await;
    let late = emu.doris.clock.now_ms();
    // Stop once a window past the late row has been read (its checkpoint may still be open).
    loop {
        let offset = std::fs::read_to_string(&checkpoint)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["position"]["offset"]["epochMs"].as_i64());
        if offset.is_some_and(|o| o > late) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the late row was not read"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the runner did not stop"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("stop requested"), "{stderr}");
    let source = mysql_rows(&emu, "SELECT * FROM src.t ORDER BY id").await;
    let sink = mysql_rows(&emu, "SELECT * FROM dst.t ORDER BY id").await;
    assert_eq!(source.len(), 301);
    assert_eq!(sink, source);
}

/// A sharded snapshot's configuration mistakes stop the binary with exit 2 before it connects
/// anywhere, each naming what to set; `JOB_COMPLETION_INDEX` (an Indexed Job's pod) names the
/// shard like `--shard`.
#[test]
fn shard_configuration_errors_exit_2_with_their_fix() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, sync: SyncBuilder| {
        let path = dir.path().join(name);
        std::fs::write(&path, sync.yaml()).unwrap();
        path
    };
    let initial = || unreachable_sync(StartupMode::Initial);
    let sharded = write("sharded.yaml", initial().parallelism(4));
    let with_t0 = write(
        "t0.yaml",
        initial()
            .annotation(SNAPSHOT_T0_ANNOTATION, "470903349657600000")
            .parallelism(4),
    );
    let single = write("single.yaml", initial().parallelism(1));
    let snapshot_mode = write(
        "snapshot.yaml",
        unreachable_sync(StartupMode::Snapshot).parallelism(4),
    );
    let run = |manifest: &Path, args: &[&str], index: Option<&str>| {
        let mut cmd = runner();
        cmd.args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
            .arg(manifest)
            .arg("--checkpoint-dir")
            .arg(dir.path().join("cp"))
            .args(args)
            .env("DCS_SOURCE_USERNAME", "root")
            .env_remove("DCS_CHECKPOINT_CONFIGMAP")
            .env_remove("JOB_COMPLETION_INDEX");
        if let Some(i) = index {
            cmd.env("JOB_COMPLETION_INDEX", i);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cases: Vec<(&Path, &[&str], Option<&str>, &str)> = vec![
        (
            &with_t0,
            &["--shard", "4"],
            None,
            "--shard 4 is not a shard of spec.snapshot.parallelism 4: shards are 0 to 3",
        ),
        (
            &with_t0,
            &[],
            Some("7"),
            "--shard 7 is not a shard of spec.snapshot.parallelism 4: shards are 0 to 3",
        ),
        (
            &with_t0,
            &[],
            Some("x"),
            "JOB_COMPLETION_INDEX is \"x\", not a shard index",
        ),
        (
            &sharded,
            &["--shard", "1"],
            None,
            "set the manifest annotation dcs.dev/snapshot-t0 to a Doris TSO",
        ),
        (
            &single,
            &["--shard", "0"],
            None,
            "--shard 0 is set, but spec.snapshot.parallelism is 1",
        ),
        (
            &snapshot_mode,
            &[],
            None,
            "the snapshot is read by 4 shards, each run with --shard 0 to 3",
        ),
    ];
    for (manifest, args, index, message) in cases {
        let (code, stderr) = run(manifest, args, index);
        assert_eq!(code, Some(2), "{args:?} {index:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?} {index:?}: {stderr}");
    }
    // Where the parallelism is 1, an Indexed Job's index means nothing: the run goes on (and
    // fails later for the unreachable FE, not for its configuration).
    let (code, stderr) = run(&single, &[], Some("3"));
    assert_ne!(code, Some(2), "{stderr}");
}
