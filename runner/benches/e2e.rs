//! End to end: a snapshot-mode sync of `DCS_BENCH_ROWS` rows (default 1 000 000) from doris-emu
//! into a Doris sink table on the same emulator, run by the real `dcs-runner` binary in a child
//! process. Prints rows/s, the runner's peak RSS (VmHWM from /proc, sampled every 10 ms while it
//! runs) and the emulator's memory (this process: the emulator runs in it).
//!
//! `cargo bench -p dcs-runner --bench e2e` measures; without `--bench` (as `cargo test
//! --all-targets` runs it) it syncs 20 000 rows as a smoke test. The source is loaded with Stream
//! Load (CSV, 100 000 rows per load), not row by row.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use mysql_async::prelude::Queryable;

const TABLE_COLUMNS: &str = "id BIGINT NOT NULL, name VARCHAR(64), age INT, score DECIMAL(10,2), \
     updated DATETIME(6)";

/// A field of a `/proc/<pid>/status` line, in KiB.
fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

async fn exec(emu: &RunningEmulator, stmts: &[&str]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("statement failed: {stmt}: {e}");
        }
    }
}

async fn count(emu: &RunningEmulator, table: &str) -> u64 {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""))
        .prefer_socket(false);
    let mut conn = mysql_async::Conn::new(opts).await.unwrap();
    let n: Option<u64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .unwrap();
    conn.disconnect().await.unwrap();
    n.unwrap()
}

/// Load `rows` rows into `bench.src` with CSV Stream Loads straight to the BE.
async fn load_source(emu: &RunningEmulator, rows: u64) {
    const CHUNK: u64 = 100_000;
    let client = reqwest::Client::new();
    let url = format!(
        "http://127.0.0.1:{}/api/bench/src/_stream_load",
        emu.ports().be_http_port
    );
    let mut first = 1;
    let mut n = 0;
    while first <= rows {
        let last = (first + CHUNK - 1).min(rows);
        let mut body = Vec::with_capacity(((last - first + 1) * 64) as usize);
        for id in first..=last {
            let name = if id % 10 == 0 {
                "\\N".to_owned()
            } else {
                format!("student number {id}")
            };
            writeln!(
                body,
                "{id}\t{name}\t{}\t{}.{:02}\t2026-11-{:02} {:02}:{:02}:{:02}.{:06}",
                18 + id % 30,
                id % 1000,
                id % 100,
                1 + id % 28,
                id % 24,
                id % 60,
                (id / 60) % 60,
                id % 1_000_000
            )
            .unwrap();
        }
        let resp: serde_json::Value = client
            .put(&url)
            .basic_auth("root", Some(""))
            .header("Expect", "100-continue")
            .header("label", format!("bench-source-{n}"))
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(resp["Status"], "Success", "{resp}");
        first = last + 1;
        n += 1;
    }
}

fn manifest(emu: &RunningEmulator) -> String {
    let fe = emu.fe_http_addr();
    let qp = emu.ports().query_port;
    format!(
        r#"apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata: {{name: bench}}
spec:
  source: {{feNodes: ["{fe}"], queryPort: {qp}, table: bench.src, credentials: {{secretName: s}}}}
  startup: {{mode: snapshot}}
  checkpoint: {{interval: 10s}}
  sink:
    doris:
      feNodes: ["{fe}"]
      table: bench.dst
      credentials: {{secretName: d}}
"#
    )
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let rows: u64 = std::env::var("DCS_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 1_000_000 } else { 20_000 });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(rows));
}

async fn bench(rows: u64) {
    let me = std::process::id().to_string();
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    exec(
        &emu,
        &[
            "CREATE DATABASE bench",
            &format!(
                "CREATE TABLE bench.src ({TABLE_COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
                 BUCKETS 8 PROPERTIES (\"replication_num\" = \"1\")"
            ),
            &format!(
                "CREATE TABLE bench.dst ({TABLE_COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
                 BUCKETS 8 PROPERTIES (\"replication_num\" = \"1\")"
            ),
        ],
    )
    .await;
    let rss_before = proc_status_kib(&me, "VmRSS:").unwrap_or(0);
    let load_start = Instant::now();
    load_source(&emu, rows).await;
    let load_time = load_start.elapsed();
    let rss_loaded = proc_status_kib(&me, "VmRSS:").unwrap_or(0);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yaml");
    std::fs::write(&file, manifest(&emu)).unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
        .args(["run", "-f"])
        .arg(&file)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .env("DCS_SOURCE_USERNAME", "root")
        .env("DCS_SOURCE_PASSWORD", "")
        .env("DCS_SINK_USERNAME", "root")
        .env("DCS_SINK_PASSWORD", "")
        .env("RUST_LOG", "warn")
        .env_remove("DCS_CHECKPOINT_CONFIGMAP")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut runner_peak = 0;
    let status = loop {
        if let Some(kib) = proc_status_kib(&pid, "VmHWM:") {
            runner_peak = runner_peak.max(kib);
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(1800) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sync took more than 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let sync_time = start.elapsed();
    assert!(status.success(), "dcs-runner exited with {status}");
    assert_eq!(count(&emu, "bench.dst").await, rows, "rows in the sink");
    let emu_hwm = proc_status_kib(&me, "VmHWM:").unwrap_or(0);
    let emu_rss = proc_status_kib(&me, "VmRSS:").unwrap_or(0);

    println!("e2e snapshot sync, {rows} rows (dcs-runner binary against doris-emu):");
    println!(
        "  source load (Stream Load, CSV):   {:.2} s, {:.0} rows/s",
        load_time.as_secs_f64(),
        rows as f64 / load_time.as_secs_f64()
    );
    println!(
        "  sync (process start to exit):     {:.2} s, {:.0} rows/s",
        sync_time.as_secs_f64(),
        rows as f64 / sync_time.as_secs_f64()
    );
    println!("  dcs-runner peak RSS (VmHWM):      {}", mib(runner_peak));
    println!(
        "  doris-emu RSS (bench process):    {} before load, {} with the source, {} at the end (peak {})",
        mib(rss_before),
        mib(rss_loaded),
        mib(emu_rss),
        mib(emu_hwm)
    );
}
