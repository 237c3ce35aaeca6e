//! `/metrics`, `/healthz` and `/readyz` scraped while the pipeline syncs a table of the Doris
//! emulator.

use crate::source_support;

use std::collections::BTreeMap;
use std::time::Duration;

use dcs_runner::checkpoint::FileStore;
use dcs_runner::metrics::{self, Health, Labels};
use dcs_runner::pipeline::{self, Control, Outcome};
use source_support::exec;

/// Parse the exposition text: every sample line is `name{labels} value`; returns name → value.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name, rest) = line
            .split_once('{')
            .unwrap_or_else(|| panic!("no labels: {line}"));
        let (labels, value) = rest
            .rsplit_once("} ")
            .unwrap_or_else(|| panic!("no value: {line}"));
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        assert_eq!(
            labels, "sync=\"student-sync\",consumer=\"student-sync\"",
            "{line}"
        );
        let v: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("bad value in {line}: {e}"));
        out.insert(name.to_owned(), v);
    }
    out
}

async fn get(url: &str) -> (u16, String) {
    let r = dcs_doris_client::tls::plain_get(url).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// `demo.student` (changelog on, `props` added to its properties) with `rows` rows, and its sink
/// table `sink.student`.
async fn student_tables(emu: &dcs_doris_emu::RunningEmulator, props: &str, rows: u32) {
    let mut statements = vec![
        "CREATE DATABASE demo".to_owned(),
        "CREATE DATABASE sink".to_owned(),
        format!(
            "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\"{props})"
        ),
        "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")"
            .to_owned(),
    ];
    if rows > 0 {
        let values: Vec<String> = (1..=rows).map(|i| format!("({i}, 'n{i}')")).collect();
        statements.push(format!(
            "INSERT INTO demo.student VALUES {}",
            values.join(", ")
        ));
    }
    let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
    exec(emu, &statements).await;
}

/// Serves the endpoints for `progress` on a free port: their base URL and the server task.
async fn serve_for(
    progress: &tokio::sync::watch::Receiver<pipeline::Progress>,
    health: &std::sync::Arc<Health>,
) -> (String, tokio::task::JoinHandle<()>) {
    let labels = Labels {
        sync: "student-sync".into(),
        consumer: "student-sync".into(),
    };
    let (addr, server) = metrics::serve(
        "127.0.0.1:0".parse().unwrap(),
        labels,
        progress.clone(),
        health.clone(),
    )
    .await
    .unwrap();
    (format!("http://{addr}"), server)
}

#[tokio::test]
async fn metrics_move_while_the_sync_runs() {
    let emu = source_support::emu().await;
    student_tables(
        &emu,
        ", \"changelog.need_historical_value\" = \"true\"",
        300,
    )
    .await;
    let yaml = source_support::student_sync(&emu, dcs_crds::StartupMode::Initial).yaml();
    let mut cfg = source_support::config(&yaml);
    cfg.changelog.poll_interval = Duration::from_millis(200);
    cfg.checkpoint_interval = Duration::from_millis(300);

    let (control, mut handle) = Control::new();
    let health = Health::new();
    let (base, _server) = serve_for(&handle.progress, &health).await;
    // Before the run: alive, not ready.
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    assert_eq!(get(&format!("{base}/readyz")).await.0, 503);
    let before = parse(&get(&format!("{base}/metrics")).await.1);
    assert_eq!(before["dcs_rows_read_total"], 0.0);
    assert!(!before.contains_key("dcs_lag_seconds"));

    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    // Snapshot done and a first window read.
    tokio::time::timeout(Duration::from_secs(20), async {
        while handle.progress.borrow_and_update().window_end.is_none() {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    let (status, text) = get(&format!("{base}/metrics")).await;
    assert_eq!(status, 200);
    let first = parse(&text);
    assert!(first["dcs_rows_read_total"] >= 300.0, "{text}");
    assert!(first["dcs_rows_written_total"] >= 300.0, "{text}");
    assert!(first["dcs_loads_total"] >= 3.0, "{text}");
    assert!(first["dcs_load_bytes_total"] > 0.0, "{text}");
    assert!(first["dcs_lag_seconds"] >= 0.0, "{text}");
    assert!(first.contains_key("dcs_checkpoint_age_seconds"), "{text}");
    assert!(first.contains_key("dcs_window_duration_seconds"), "{text}");
    assert_eq!(first["dcs_ready"], 1.0);
    assert_eq!(get(&format!("{base}/readyz")).await.0, 200);

    // Changes move the counters.
    exec(
        &emu,
        &[
            "INSERT INTO demo.student VALUES (1000, 'new')",
            "DELETE FROM demo.student WHERE id = 1",
        ],
    )
    .await;
    let last = emu.doris.clock.now_ms();
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let p = handle.progress.borrow_and_update().clone();
            if p.window_end.as_ref().is_some_and(|w| w.epoch_ms > last)
                && p.counters.rows_deleted > 0
            {
                break;
            }
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    let second = parse(&get(&format!("{base}/metrics")).await.1);
    assert!(second["dcs_rows_read_total"] > first["dcs_rows_read_total"]);
    assert!(second["dcs_rows_deleted_total"] >= 1.0);
    assert!(second["dcs_loads_total"] > first["dcs_loads_total"]);

    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
    // After a fatal error the runner is not ready any more.
    health.mark_failed();
    assert_eq!(get(&format!("{base}/readyz")).await.0, 503);
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
}

/// What the pod's probes rely on (operator/src/reconcile/build.rs): a runner stuck on a window
/// Doris does not make visible (a long visibility wait) is alive (`/healthz` 200, the liveness
/// probe) but not ready (`/readyz` 503) until its first read succeeds.
#[tokio::test]
async fn a_runner_waiting_for_visibility_is_live_but_not_ready() {
    use dcs_doris_emu::faults::{FaultState, IncrFault};
    let emu = source_support::emu().await;
    student_tables(&emu, "", 0).await;
    let yaml = source_support::student_sync(&emu, dcs_crds::StartupMode::Latest).yaml();
    let mut cfg = source_support::config(&yaml);
    cfg.changelog.visible_wait_timeout = Duration::from_secs(600);
    cfg.changelog.poll_interval = Duration::from_millis(200);
    cfg.changelog.retry_delay = Duration::from_millis(100);
    cfg.changelog.max_retry_delay = Duration::from_millis(200);
    emu.doris.faults.set(FaultState {
        incr_error: Some(IncrFault {
            code: 5101,
            count: 1_000_000,
        }),
        ..FaultState::default()
    });

    let (control, mut handle) = Control::new();
    let health = Health::new();
    let (base, _server) = serve_for(&handle.progress, &health).await;
    let dir = tempfile::tempdir().unwrap();
    let mut store = FileStore::open(dir.path()).unwrap();
    let task = tokio::spawn(async move { pipeline::run(cfg, &mut store, control).await });
    // Several refused windows: the runner is in its visibility wait.
    tokio::time::timeout(Duration::from_secs(60), async {
        while emu.doris.counters.get("sql_incr") < 5 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the runner never asked for a window");
    assert!(!task.is_finished());
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    assert_eq!(get(&format!("{base}/readyz")).await.0, 503);
    let text = get(&format!("{base}/metrics")).await.1;
    assert_eq!(parse(&text)["dcs_ready"], 0.0, "{text}");

    // Doris makes the window visible: the first read succeeds and the runner is ready.
    emu.doris.faults.clear();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !handle.progress.borrow_and_update().ready {
            handle.progress.changed().await.unwrap();
        }
    })
    .await
    .expect("the runner never became ready");
    assert_eq!(get(&format!("{base}/readyz")).await.0, 200);
    assert_eq!(get(&format!("{base}/healthz")).await.0, 200);
    handle.shutdown.send(true).unwrap();
    assert_eq!(task.await.unwrap().unwrap(), Outcome::Stopped);
}
