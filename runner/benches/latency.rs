//! Change-to-visible latency (BENCHMARKS.md, "Latency"): the real `dcs-runner` binary in a child
//! process syncs the changelog of `bench.src` into `bench.dst` (2PC on) on doris-emu in this
//! process, while a writer commits a steady `DCS_BENCH_RATE` changes/s (default 1 000) to the
//! source in transactions of 10 rows every 10 ms, and a sampler reads the sink's newest row every
//! 20 ms. A change's latency is from its commit on the source to the first sample that sees it in
//! the sink (so the figures include up to 20 ms of sampling); printed as p50/p95/p99/max for
//! pollInterval/checkpoint.interval 1 s/1 s and 10 s/10 s (`DCS_BENCH_LATENCY`, e.g. `1,10`), with
//! the target max(pollInterval, checkpoint.interval) + 0.5 s.
//!
//! `cargo bench -p dcs-runner --bench latency` measures 30 s of writes per setting (at least three
//! checkpoint intervals); without `--bench` (as `cargo test --all-targets` runs it) it writes for
//! 3 s at 1 s/1 s as a smoke test, which checks that every change arrives.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dcs_crds::StartupMode;
use dcs_crds::testing::SyncBuilder;
use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::types::{QueryResult, Value};
use dcs_doris_emu::{EmuConfig, RunningEmulator};

mod support;
use support::{exec, run_runner};

/// Rows per source transaction.
const ROWS_PER_COMMIT: u64 = 10;
/// How often the sink is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);

fn manifest(emu: &RunningEmulator, interval_s: u64) -> String {
    let fe = emu.fe_http_addr();
    let interval = format!("{interval_s}s");
    SyncBuilder::new()
        .name("latency")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("bench.src")
        .source_secret("s")
        .mode(StartupMode::Latest)
        .poll_interval(&interval)
        .checkpoint_interval(&interval)
        .sink_fe(&fe)
        .sink_table("bench.dst")
        .sink_secret("d")
        .two_phase(true)
        .yaml()
}

/// The newest id in the sink (0 when empty).
async fn newest(emu: &RunningEmulator, session: &mut Session) -> u64 {
    match sql::execute(&emu.doris, session, "SELECT MAX(id) FROM bench.dst").await {
        Ok(QueryResult::Rows(set)) => match set.rows.first().and_then(|r| r.first()) {
            Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        },
        other => panic!("reading the sink: {other:?}"),
    }
}

/// Commits rows `first..` in transactions of [`ROWS_PER_COMMIT`] at `rate` rows/s for `secs`;
/// returns (last id of each commit, when it committed).
async fn write(emu: &RunningEmulator, first: u64, rate: u64, secs: u64) -> Vec<(u64, Instant)> {
    let mut session = Session::new("root");
    let every = Duration::from_secs_f64(ROWS_PER_COMMIT as f64 / rate as f64);
    let commits = rate * secs / ROWS_PER_COMMIT;
    let mut ticker = tokio::time::interval(every);
    let mut out = Vec::with_capacity(commits as usize);
    let mut id = first;
    for _ in 0..commits {
        ticker.tick().await;
        let values: Vec<String> = (id..id + ROWS_PER_COMMIT)
            .map(|i| format!("({i}, 'change {i}')"))
            .collect();
        let stmt = format!(
            "INSERT INTO bench.src (id, name) VALUES {}",
            values.join(", ")
        );
        sql::execute(&emu.doris, &mut session, &stmt)
            .await
            .unwrap_or_else(|e| panic!("writing the source: {e}"));
        id += ROWS_PER_COMMIT;
        out.push((id - 1, Instant::now()));
    }
    out
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

async fn bench(interval_s: u64, rate: u64, secs: u64) {
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    exec(
        &emu,
        &[
            "CREATE DATABASE bench",
            "CREATE TABLE bench.src (id BIGINT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 4 PROPERTIES (\"replication_num\" = \"1\", \
             \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\")",
            "CREATE TABLE bench.dst (id BIGINT NOT NULL, name VARCHAR(64)) UNIQUE KEY(id) \
             DISTRIBUTED BY HASH(id) BUCKETS 4 PROPERTIES (\"replication_num\" = \"1\")",
        ],
    )
    .await;
    let emu = Arc::new(emu);
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let total = rate * secs / ROWS_PER_COMMIT * ROWS_PER_COMMIT;
    let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let commits = {
        let (emu, finished, samples) = (emu.clone(), finished.clone(), samples.clone());
        tokio::spawn(async move {
            let mut session = Session::new("root");
            // Warm-up: one change that the running sync must carry before the clock starts.
            let mut id = 1;
            loop {
                exec(
                    &emu,
                    &[&format!(
                        "INSERT INTO bench.src (id, name) VALUES ({id}, 'warm-up')"
                    )],
                )
                .await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                if newest(&emu, &mut session).await >= 1 {
                    break;
                }
                id += 1;
                if id > 1_000 {
                    panic!("the sync carried no change within 200 s");
                }
            }
            let first = 1_000_001;
            let writer = {
                let emu = emu.clone();
                tokio::spawn(async move { write(&emu, first, rate, secs).await })
            };
            let last = first + total - 1;
            let started = Instant::now();
            loop {
                let seen = newest(&emu, &mut session).await;
                samples.lock().unwrap().push((Instant::now(), seen));
                if seen >= last {
                    break;
                }
                if started.elapsed() > Duration::from_secs(secs + 20 * interval_s + 60) {
                    panic!("the sink holds changes up to {seen}, not {last}");
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            writer.await.unwrap()
        })
    };
    let done = {
        let finished = finished.clone();
        async move |_: &RunningEmulator| finished.load(std::sync::atomic::Ordering::SeqCst)
    };
    let run = run_runner(&emu, &manifest(&emu, interval_s), done).await;
    let commits = commits.await.unwrap();
    let samples = samples.lock().unwrap().clone();
    let mut latencies: Vec<Duration> = commits
        .iter()
        .map(|(id, at)| {
            let seen = samples
                .iter()
                .find(|(t, newest)| newest >= id && t >= at)
                .map_or(Instant::now(), |(t, _)| *t);
            seen - *at
        })
        .collect();
    latencies.sort_unstable();
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
    let target = Duration::from_secs(interval_s) + Duration::from_millis(500);
    println!(
        "latency, pollInterval {interval_s} s / checkpoint.interval {interval_s} s, {rate} changes/s for {secs} s ({} changes, 2PC):",
        commits.len() as u64 * ROWS_PER_COMMIT
    );
    println!(
        "  commit on the source to visible in the sink: p50 {}, p95 {}, p99 {}, max {} (target p95 <= {})",
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.95)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap()),
        ms(target)
    );
    println!(
        "  dcs-runner: {} change rows read in {:.1} s, CPU (user + system) {:.2} s ({:.2} s per million changes), peak RSS {}",
        run.rows_read,
        run.wall.as_secs_f64(),
        run.cpu_s,
        run.cpu_s * 1e6 / run.rows_read.max(1) as f64,
        support::mib(run.peak_kib)
    );
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let rate: u64 = std::env::var("DCS_BENCH_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let settings: Vec<u64> = std::env::var("DCS_BENCH_LATENCY")
        .unwrap_or_else(|_| if measuring { "1,10".into() } else { "1".into() })
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("DCS_BENCH_LATENCY: seconds, e.g. 1,10")
        })
        .collect();
    let secs = if measuring { 30 } else { 3 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for interval_s in settings {
        runtime.block_on(bench(interval_s, rate, secs));
    }
}
