//! What the end-to-end benches share: the runner binary in a child process, its peak memory, and
//! statements run on the emulator in this process.

// Each bench is its own crate and uses a part of this.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dcs_doris_emu::RunningEmulator;
use dcs_doris_emu::sql::{self, Session};
use mysql_async::prelude::Queryable;

/// A field of a `/proc/<pid>/status` line, in KiB.
pub fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// KiB as MiB, for printing.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Run `stmts` on the emulator as root; a failed statement fails the bench.
pub async fn exec(emu: &RunningEmulator, stmts: &[&str]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("statement failed: {stmt}: {e}");
        }
    }
}

/// Rows in `table`, over the emulator's MySQL port.
pub async fn count(emu: &RunningEmulator, table: &str) -> u64 {
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

/// Load rows `ids` into `bench.src` with CSV Stream Loads straight to the BE; `version` goes into
/// the names, so a second load of the same ids is an update.
pub async fn load_source(emu: &RunningEmulator, ids: std::ops::RangeInclusive<u64>, version: u32) {
    const CHUNK: u64 = 100_000;
    let client = dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap();
    let url = format!(
        "http://127.0.0.1:{}/api/bench/src/_stream_load",
        emu.ports().be_http_port
    );
    let (mut first, rows) = (*ids.start(), *ids.end());
    let mut n = 0;
    while first <= rows {
        let last = (first + CHUNK - 1).min(rows);
        let mut body = Vec::with_capacity(((last - first + 1) * 64) as usize);
        for id in first..=last {
            let name = if id % 10 == 0 {
                "\\N".to_owned()
            } else {
                format!("student number {id} v{version}")
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
        stream_load(
            &client,
            &url,
            &format!("bench-source-v{version}-{n}"),
            &[],
            body,
        )
        .await;
        first = last + 1;
        n += 1;
    }
}

/// One Stream Load of `body` to `url` as root under `label` with `headers` besides; a load that
/// does not succeed fails the bench. Returns Doris's answer.
pub async fn stream_load(
    client: &reqwest::Client,
    url: &str,
    label: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> serde_json::Value {
    let mut request = client
        .put(url)
        .basic_auth("root", Some(""))
        .header("Expect", "100-continue")
        .header("label", label);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let answer: serde_json::Value = request
        .body(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["Status"], "Success", "{answer}");
    answer
}

/// Rows of the benches' source table: `DCS_BENCH_ROWS`, else a million when measuring
/// (`--bench`) and 20 000 in the smoke run.
pub fn bench_rows(measuring: bool) -> u64 {
    std::env::var("DCS_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if measuring { 1_000_000 } else { 20_000 })
}

/// User plus system CPU seconds of process `pid` so far (`/proc/<pid>/stat`, in USER_HZ ticks,
/// 100 a second on Linux).
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// The runner's run: wall time, peak RSS (KiB), CPU seconds (user + system, sampled to its last
/// 10 ms) and the rows it read (its last checkpoint's).
pub struct RunnerRun {
    pub wall: Duration,
    pub cpu_s: f64,
    pub peak_kib: u64,
    pub rows_read: u64,
}

/// Runs `dcs-runner run` on `manifest` until it exits, or until `done` says the sink has it all
/// (then it is stopped with SIGTERM, as Kubernetes stops a pod).
pub async fn run_runner(
    emu: &RunningEmulator,
    manifest: &str,
    done: impl AsyncFn(&RunningEmulator) -> bool,
) -> RunnerRun {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sync.yaml");
    std::fs::write(&file, manifest).unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dcs-runner"))
        .args(["run", "--metrics-addr", "127.0.0.1:0", "-f"])
        .arg(&file)
        .arg("--checkpoint-dir")
        .arg(dir.path().join("cp"))
        .env("DCS_SOURCE_USERNAME", "root")
        .env("DCS_SOURCE_PASSWORD", "")
        .env("DCS_SINK_USERNAME", "root")
        .env("DCS_SINK_PASSWORD", "")
        .env("RUST_LOG", "warn")
        .env_remove("DCS_CHECKPOINT_CONFIGMAP")
        .env_remove("DCS_METRICS_ADDR")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut peak_kib = 0;
    let mut cpu_s = 0.0;
    let mut checked = Instant::now();
    let mut wall = None;
    let status = loop {
        if let Some(kib) = proc_status_kib(&pid, "VmHWM:") {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(s) = cpu_seconds(&pid) {
            cpu_s = s;
        }
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if wall.is_none() && checked.elapsed() > Duration::from_millis(500) {
            checked = Instant::now();
            if done(emu).await {
                wall = Some(start.elapsed());
                let _ = Command::new("kill").args(["-TERM", &pid]).status();
            }
        }
        if start.elapsed() > Duration::from_secs(1800) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the sync took more than 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "dcs-runner exited with {status}");
    let checkpoint: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("cp").join("checkpoint.json")).unwrap(),
    )
    .unwrap();
    RunnerRun {
        wall: wall.unwrap_or_else(|| start.elapsed()),
        peak_kib,
        cpu_s,
        rows_read: checkpoint["counters"]["rowsRead"].as_u64().unwrap(),
    }
}
