//! The race against the peer (BENCHMARKS.md, "dcs-runner against Flink + the Doris connector"):
//! the same doris-emu build, the same 1,000,000-row `student` table and the same change stream
//! (1,000 changes/s for a minute) through `dcs-runner run` and through the Flink job of
//! `tests/flink-connector` (`RaceJob`), one side after the other in one run, each on a fresh
//! emulator in this process. Prints, per side and as ratios to dcs: snapshot rows/s, peak RSS of
//! the side's processes, change-to-visible latency p50/p95 and CPU seconds.
//!
//! Run by `tests/flink-connector/race.sh`, which builds the binaries and the Flink classpath:
//! `dcs-race <dcs-runner binary> <java classpath> [side …]`, sides `dcs`, `flink-default`,
//! `flink-small` (all three by default). `RACE_ROWS`, `RACE_SECONDS`, `RACE_RATE` and
//! `RACE_FLINK_SMALL_HEAP` (default `160m`) change the shape.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{IncrementType, StartupMode};
use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use mysql_async::prelude::Queryable;

/// The seed `student` shape plus `visits`, `ratio` and `grade` (as tests/flink-connector's
/// `Students`).
const COLUMNS: &str = "id INT NOT NULL, name VARCHAR(64), age SMALLINT, score DECIMAL(8,2), \
     balance DECIMAL(18,4), active BOOLEAN, birthday DATE, updated DATETIME(6), note STRING, \
     visits BIGINT, ratio DOUBLE, grade CHAR(2)";
/// Ticks per second of the change stream; each tick is one INSERT and one DELETE.
const TICKS_PER_SECOND: u64 = 10;
/// How often each sink is polled for the ticks' probe rows.
const POLL: Duration = Duration::from_millis(100);

/// One row of the source as a CSV line (tab separated) or SQL values, `visits` = `v`.
fn row_values(id: u64, v: u64) -> [String; 12] {
    let h = id.wrapping_mul(2_654_435_761) & 0x7fff_ffff;
    let nul = |b: bool, s: String| if b { "\\N".to_owned() } else { s };
    [
        id.to_string(),
        nul(h.is_multiple_of(11), format!("student {id}")),
        nul(h.is_multiple_of(13), (18 + h % 50).to_string()),
        format!("{}.{:02}", h % 10_000, h % 100),
        nul(
            h.is_multiple_of(7),
            format!("{}.{:04}", h * 31 % 100_000_000, h % 10_000),
        ),
        (h % 2).to_string(),
        format!("{:04}-{:02}-{:02}", 1990 + h % 30, 1 + h % 12, 1 + h % 28),
        format!(
            "2026-{:02}-{:02} {:02}:{:02}:{:02}.{:06}",
            1 + h % 12,
            1 + h % 28,
            h % 24,
            h % 60,
            (h / 60) % 60,
            h % 1_000_000
        ),
        nul(h.is_multiple_of(5), format!("note {h}")),
        v.to_string(),
        format!("{}", (h % 1000) as f64 / 8.0),
        format!("{}{}", if h.is_multiple_of(3) { 'A' } else { 'B' }, h % 10),
    ]
}

fn sql_values(id: u64, v: u64) -> String {
    let cells: Vec<String> = row_values(id, v)
        .into_iter()
        .map(|c| {
            if c == "\\N" {
                "NULL".to_owned()
            } else {
                format!("'{c}'")
            }
        })
        .collect();
    format!("({})", cells.join(", "))
}

async fn exec(emu: &RunningEmulator, stmts: &[String]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("statement failed: {stmt}: {e}");
        }
    }
}

async fn load_source(emu: &RunningEmulator, rows: u64) {
    const CHUNK: u64 = 100_000;
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(dcs_doris_emu::tls::plain_client_config())
        .build()
        .expect("HTTP client");
    let url = format!(
        "http://127.0.0.1:{}/api/race/src/_stream_load",
        emu.ports().be_http_port
    );
    let mut first = 1;
    while first <= rows {
        let last = (first + CHUNK - 1).min(rows);
        let mut body = Vec::with_capacity(((last - first + 1) * 160) as usize);
        for id in first..=last {
            writeln!(body, "{}", row_values(id, 0).join("\t")).unwrap();
        }
        let resp: serde_json::Value = client
            .put(&url)
            .basic_auth("root", Some(""))
            .header("Expect", "100-continue")
            .header("label", format!("race-source-{first}"))
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(resp["Status"], "Success", "{resp}");
        first = last + 1;
    }
}

/// utime + stime of a process and its reaped children, in clock ticks, from /proc/<pid>/stat.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14-17 of stat (utime, stime, cutime, cstime) are 11-14 after the state field.
    Some(f[11..15].iter().filter_map(|x| x.parse::<u64>().ok()).sum())
}

/// The pids of a process and its descendants.
fn tree(root: u32) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let children =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", out[i], out[i]))
                .unwrap_or_default();
        out.extend(
            children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
        i += 1;
    }
    out
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Peak RSS (sum of each process's VmHWM) and CPU ticks of a process tree, sampled until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(u64, u64)>,
}

impl Sampler {
    fn start(root: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peaks: BTreeMap<u32, u64> = BTreeMap::new();
            let mut cpu: BTreeMap<u32, u64> = BTreeMap::new();
            while !flag.load(Ordering::Relaxed) {
                for pid in tree(root) {
                    let hwm = status_kib(pid, "VmHWM:");
                    let p = peaks.entry(pid).or_default();
                    *p = (*p).max(hwm);
                    if let Some(t) = cpu_ticks(pid) {
                        cpu.insert(pid, t);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (peaks.values().sum(), cpu.values().sum())
        });
        Self { stop, handle }
    }

    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

#[derive(Debug, Clone)]
struct Outcome {
    side: String,
    snapshot_rows_per_s: f64,
    peak_rss_mib: f64,
    p50_ms: f64,
    p95_ms: f64,
    cpu_s: f64,
    rows_equal: bool,
}

fn manifest(emu: &RunningEmulator) -> String {
    let fe = emu.fe_http_addr();
    SyncBuilder::new()
        .name("race")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("race.src")
        .source_secret("s")
        .mode(StartupMode::Initial)
        .increment_type(IncrementType::Detail)
        .poll_interval("1s")
        .checkpoint_interval("1s")
        .sink_fe(&fe)
        .sink_table("race.dst")
        .sink_secret("d")
        .batch_interval("1s")
        .yaml()
}

async fn mysql(emu: &RunningEmulator) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""))
        .prefer_socket(false);
    mysql_async::Conn::new(opts).await.unwrap()
}

async fn count(c: &mut mysql_async::Conn, table: &str) -> u64 {
    c.query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .unwrap()
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

struct Shape {
    rows: u64,
    seconds: u64,
    rate: u64,
}

async fn run_side(side: &str, shape: &Shape, runner_bin: &str, classpath: &str) -> Outcome {
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    let src = format!(
        "CREATE TABLE race.src ({COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 8 \
         PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
         \"changelog.need_historical_value\" = \"true\")"
    );
    let dst = format!(
        "CREATE TABLE race.dst ({COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 8 \
         PROPERTIES (\"replication_num\" = \"1\")"
    );
    exec(&emu, &["CREATE DATABASE race".into(), src, dst]).await;
    load_source(&emu, shape.rows).await;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut child: Child = match side {
        "dcs" => {
            let file = dir.path().join("sync.yaml");
            std::fs::write(&file, manifest(&emu)).unwrap();
            Command::new(runner_bin)
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
                .unwrap()
        }
        flink => {
            let mut cmd = Command::new("java");
            if flink == "flink-small" {
                let heap = std::env::var("RACE_FLINK_SMALL_HEAP").unwrap_or_else(|_| "160m".into());
                cmd.arg(format!("-Xmx{heap}"))
                    .arg("-XX:MaxDirectMemorySize=128m");
            }
            // The module openings Flink's Kryo serializers need on Java 17 (as the Maven tests'
            // argLine in tests/flink-connector/pom.xml).
            cmd.args([
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "--add-opens=java.base/java.util=ALL-UNNAMED",
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
                "--add-opens=java.base/java.io=ALL-UNNAMED",
                "--add-opens=java.base/java.net=ALL-UNNAMED",
                "--add-opens=java.base/java.time=ALL-UNNAMED",
                "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
                "-Dio.netty.tryReflectionSetAccessible=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                classpath,
                "dev.dcs.flinkconnector.RaceJob",
            ])
            .arg(emu.fe_http_addr())
            .arg(emu.ports().fe_flight_port.to_string())
            .args(["race.src", "race.dst", "1000", "1000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
        }
    };
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("race: flink: {line}");
            }
        });
    }
    let sampler = Sampler::start(child.id());
    let mut c = mysql(&emu).await;

    // Snapshot: until the sink holds every row.
    loop {
        if count(&mut c, "race.dst").await >= shape.rows {
            break;
        }
        if let Some(s) = child.try_wait().unwrap() {
            panic!("{side} exited during the snapshot: {s}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "{side}: snapshot timed out"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let snapshot = started.elapsed();
    eprintln!(
        "race: {side}: snapshot of {} rows in {snapshot:.1?}",
        shape.rows
    );
    // Let the side switch to the changelog (its first windows are empty or replay the snapshot).
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The change stream: per tick one INSERT (updates of existing keys and new keys; the first
    // row is the tick's probe, key `probe`, visits = tick) and one DELETE of earlier new keys.
    let per_tick = shape.rate / TICKS_PER_SECOND;
    let ticks = shape.seconds * TICKS_PER_SECOND;
    // The sink is polled by its own task on its own connection, every POLL whatever the writer's
    // pace: polled in the writer's gaps, a writer that falls behind would poll no more until
    // the end, and every latency would read as the time left in the stream.
    let committed: Arc<std::sync::Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let stop_polling = Arc::new(AtomicBool::new(false));
    let poller = {
        let (committed, stop) = (committed.clone(), stop_polling.clone());
        let mut poll_conn = mysql(&emu).await;
        let patience = Duration::from_secs(300 + shape.seconds * 10);
        tokio::spawn(async move {
            let mut seen: BTreeMap<u64, Instant> = BTreeMap::new();
            let deadline = Instant::now() + patience;
            loop {
                let done = stop.load(Ordering::SeqCst);
                let snapshot = committed.lock().unwrap().clone();
                poll(&mut poll_conn, &snapshot, &mut seen).await;
                if (done && seen.len() >= snapshot.len()) || Instant::now() > deadline {
                    let _ = poll_conn.disconnect().await;
                    return seen;
                }
                tokio::time::sleep(POLL).await;
            }
        })
    };
    let stream_start = Instant::now();
    let mut next_new = shape.rows + 1;
    for tick in 1..=ticks {
        let due = stream_start + Duration::from_millis(tick * 1000 / TICKS_PER_SECOND);
        tokio::time::sleep_until(due.into()).await;
        let probe = 1 + tick % shape.rows;
        let mut values = vec![sql_values(probe, tick)];
        let updates = per_tick * 8 / 10;
        for i in 1..updates {
            values.push(sql_values(
                1 + (tick * 7919 + i * 104_729) % shape.rows,
                tick,
            ));
        }
        let inserts = per_tick - updates - per_tick / 10;
        for _ in 0..inserts {
            values.push(sql_values(next_new, tick));
            next_new += 1;
        }
        c.query_drop(format!("INSERT INTO race.src VALUES {}", values.join(", ")))
            .await
            .unwrap();
        let deletes: Vec<String> = (0..per_tick / 10)
            .map(|i| {
                (shape.rows + 1 + (tick * 3 + i) % (next_new - shape.rows - 1).max(1)).to_string()
            })
            .collect();
        if next_new > shape.rows + 200 {
            c.query_drop(format!(
                "DELETE FROM race.src WHERE id IN ({})",
                deletes.join(", ")
            ))
            .await
            .unwrap();
        }
        committed.lock().unwrap().push((tick, Instant::now()));
    }
    let stream = stream_start.elapsed();
    eprintln!(
        "race: {side}: {ticks} ticks of {per_tick} changes written in {stream:.1?} ({:.0} changes/s)",
        (ticks * per_tick) as f64 / stream.as_secs_f64()
    );
    // A fence after the last DELETE: one more probe, alone in its transaction. Changes reach
    // the sink in commit order, so once it is visible every change before it is in the sink.
    let fence = ticks + 1;
    c.query_drop(format!(
        "INSERT INTO race.src VALUES {}",
        sql_values(1 + fence % shape.rows, fence)
    ))
    .await
    .unwrap();
    committed.lock().unwrap().push((fence, Instant::now()));
    // Catch-up: every probe visible, the fence's included; the fence is not a change measured.
    stop_polling.store(true, Ordering::SeqCst);
    let seen = poller.await.unwrap();
    let mut committed = committed.lock().unwrap().clone();
    let fenced = seen.contains_key(&fence);
    committed.retain(|(t, _)| *t != fence);
    assert!(
        fenced,
        "{side}: the fence after the last change never became visible"
    );
    let rows_equal = same_rows(&mut c).await;
    let _ = child.kill();
    let _ = child.wait();
    let (peak_kib, cpu) = sampler.finish();
    let hz = 100.0; // USER_HZ on Linux
    let mut lat: Vec<f64> = committed
        .iter()
        .filter_map(|(t, at)| {
            seen.get(t)
                .map(|v| v.duration_since(*at).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        lat.len(),
        committed.len(),
        "{side}: changes never became visible"
    );
    let _ = c.disconnect().await;
    Outcome {
        side: side.to_owned(),
        snapshot_rows_per_s: shape.rows as f64 / snapshot.as_secs_f64(),
        peak_rss_mib: peak_kib as f64 / 1024.0,
        p50_ms: percentile(&lat, 0.5),
        p95_ms: percentile(&lat, 0.95),
        cpu_s: cpu as f64 / hz,
        rows_equal,
    }
}

/// Mark the committed ticks whose probe row now carries their `visits` in the sink.
async fn poll(
    c: &mut mysql_async::Conn,
    committed: &[(u64, Instant)],
    seen: &mut BTreeMap<u64, Instant>,
) {
    let open: Vec<u64> = committed
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| !seen.contains_key(t))
        .collect();
    if open.is_empty() {
        return;
    }
    let rows: Vec<(u64, u64)> = c
        .query(format!(
            "SELECT id, visits FROM race.dst WHERE id IN ({})",
            open.iter()
                .map(|t| (1 + t).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .await
        .unwrap();
    // The probe of tick t is key t + 1; a later update of that key carries a later tick.
    let now = Instant::now();
    for (id, visits) in rows {
        let tick = id - 1;
        if visits >= tick {
            seen.entry(tick).or_insert(now);
        }
    }
}

/// Source and sink hold the same rows (id and visits of every row).
async fn same_rows(c: &mut mysql_async::Conn) -> bool {
    let q = |t: &str| format!("SELECT id, visits FROM race.{t} ORDER BY id");
    let a: Vec<(u64, u64)> = c.query(q("src")).await.unwrap();
    let b: Vec<(u64, u64)> = c.query(q("dst")).await.unwrap();
    a == b
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!(
            "usage: race <dcs-runner binary> <java classpath> [dcs|flink-default|flink-small …]"
        );
        std::process::exit(2);
    }
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let shape = Shape {
        rows: env("RACE_ROWS", 1_000_000),
        seconds: env("RACE_SECONDS", 60),
        rate: env("RACE_RATE", 1000),
    };
    let sides: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        vec!["dcs".into(), "flink-default".into(), "flink-small".into()]
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut outcomes = Vec::new();
    for side in &sides {
        let o = runtime.block_on(run_side(side, &shape, &args[0], &args[1]));
        eprintln!("race: {o:?}");
        outcomes.push(o);
    }
    println!(
        "\n{} rows, {} changes/s for {} s, poll 1 s, checkpoint 1 s, 2PC on both sides\n",
        shape.rows, shape.rate, shape.seconds
    );
    println!(
        "| side | snapshot rows/s | peak RSS | latency p50 | latency p95 | CPU s | sink = source |"
    );
    println!("|---|---|---|---|---|---|---|");
    for o in &outcomes {
        println!(
            "| {} | {:.0} | {:.0} MiB | {:.0} ms | {:.0} ms | {:.1} | {} |",
            o.side,
            o.snapshot_rows_per_s,
            o.peak_rss_mib,
            o.p50_ms,
            o.p95_ms,
            o.cpu_s,
            o.rows_equal
        );
    }
    if let Some(base) = outcomes.iter().find(|o| o.side == "dcs") {
        println!("\nratios (side / dcs):\n");
        println!("| side | snapshot rows/s | peak RSS | latency p50 | latency p95 | CPU s |");
        println!("|---|---|---|---|---|---|");
        for o in outcomes.iter().filter(|o| o.side != "dcs") {
            println!(
                "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                o.side,
                o.snapshot_rows_per_s / base.snapshot_rows_per_s,
                o.peak_rss_mib / base.peak_rss_mib,
                o.p50_ms / base.p50_ms,
                o.p95_ms / base.p95_ms,
                o.cpu_s / base.cpu_s
            );
        }
    }
}
