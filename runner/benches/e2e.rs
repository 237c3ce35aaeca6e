//! End to end: the real `dcs-runner` binary in a child process against doris-emu (in this
//! process), in the three situations that decide how much memory a runner needs (BENCHMARKS.md,
//! "Runner memory"; `DCS_BENCH_SCENARIOS`, comma separated, default all three):
//!
//! - `snapshot`: a snapshot-mode sync of `DCS_BENCH_ROWS` rows (default 1 000 000) into a Doris
//!   sink table on the same emulator;
//! - `changelog`: one changelog window holding `DCS_BENCH_ROWS` / 2 inserts, then updates of half
//!   of those rows and deletes of a tenth (a sync started `fromTimestamp` before all of them);
//! - `outage`: the snapshot again while the sink answers 503 to eight Stream Loads in a row (three
//!   in the smoke run), so the runner holds its batch through retries backing off towards 10 s
//!   while the source side fills up;
//! - `big_batches`: the snapshot with `batch: {maxRows: 1000000, maxBytes: 64Mi}` instead of the
//!   default 50 000 rows / 10 MiB, to see what the batch limit costs;
//! - `audit_snapshot` and `audit_initial`: the snapshot of a source with the changelog and
//!   before-images on into a changelog-mode (audit) sink, in `snapshot` mode (the current data) and
//!   in `initial` mode (T0 taken, the visibility barrier, every split read `FOR VERSION AS OF` T0),
//!   both timed until the sink holds every row: what the exact seam costs.
//!
//! Each prints rows/s, the runner's peak RSS (VmHWM from /proc, sampled every 10 ms while it runs)
//! and the emulator's memory (this process). `cargo bench -p dcs-runner --bench e2e` measures;
//! without `--bench` (as `cargo test --all-targets` runs it) each runs on 20 000 rows as a smoke
//! test. Sources are loaded with Stream Load (CSV, 100 000 rows per load), not row by row.

use std::time::{Duration, Instant};

use dcs_crds::testing::SyncBuilder;
use dcs_crds::{SinkMode, StartupMode};
use dcs_doris_emu::faults::{FaultState, StreamLoadFault};
use dcs_doris_emu::{EmuConfig, RunningEmulator};

mod support;
use support::{bench_rows, count, exec, load_source, mib, proc_status_kib, run_runner};

const TABLE_COLUMNS: &str = "id BIGINT NOT NULL, name VARCHAR(64), age INT, score DECIMAL(10,2), \
     updated DATETIME(6)";

/// The sync `bench.src` into `bench.dst` on the emulator from `mode`, polled every second,
/// checkpointed every 10 s.
fn sync(emu: &RunningEmulator, mode: StartupMode) -> SyncBuilder {
    let fe = emu.fe_http_addr();
    SyncBuilder::new()
        .name("bench")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("bench.src")
        .source_secret("s")
        .mode(mode)
        .poll_interval("1s")
        .checkpoint_interval("10s")
        .sink_fe(&fe)
        .sink_table("bench.dst")
        .sink_secret("d")
}

/// One measured scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Snapshot,
    Changelog,
    Outage,
    BigBatches,
    AuditSnapshot,
    AuditInitial,
}

impl Scenario {
    fn audit(self) -> bool {
        matches!(self, Self::AuditSnapshot | Self::AuditInitial)
    }
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let rows = bench_rows(measuring);
    let scenarios: Vec<Scenario> = std::env::var("DCS_BENCH_SCENARIOS")
        .unwrap_or_else(|_| {
            "snapshot,changelog,outage,big_batches,audit_snapshot,audit_initial".into()
        })
        .split(',')
        .map(|s| match s.trim() {
            "snapshot" => Scenario::Snapshot,
            "changelog" => Scenario::Changelog,
            "outage" => Scenario::Outage,
            "big_batches" => Scenario::BigBatches,
            "audit_snapshot" => Scenario::AuditSnapshot,
            "audit_initial" => Scenario::AuditInitial,
            other => panic!(
                "unknown scenario {other:?}: snapshot, changelog, outage, big_batches, \
                 audit_snapshot or audit_initial"
            ),
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // The smoke run keeps the outage short: the back-off alone would take half a minute.
    let refused = if measuring { 8 } else { 3 };
    for scenario in scenarios {
        runtime.block_on(bench(scenario, rows, refused));
    }
}

async fn bench(scenario: Scenario, rows: u64, refused: u32) {
    let me = std::process::id().to_string();
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    let changelog = if scenario == Scenario::Changelog {
        ", \"changelog.enable\" = \"true\""
    } else if scenario.audit() {
        ", \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\""
    } else {
        ""
    };
    let sink_ddl = if scenario.audit() {
        format!(
            "CREATE TABLE bench.dst ({TABLE_COLUMNS}, dcs_op VARCHAR(2), dcs_tso BIGINT, \
             dcs_lsn BIGINT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 8 \
             PROPERTIES (\"replication_num\" = \"1\")"
        )
    } else {
        format!(
            "CREATE TABLE bench.dst ({TABLE_COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
             BUCKETS 8 PROPERTIES (\"replication_num\" = \"1\")"
        )
    };
    exec(
        &emu,
        &[
            "CREATE DATABASE bench",
            &format!(
                "CREATE TABLE bench.src ({TABLE_COLUMNS}) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) \
                 BUCKETS 8 PROPERTIES (\"replication_num\" = \"1\"{changelog})"
            ),
            &sink_ddl,
        ],
    )
    .await;
    let rss_before = proc_status_kib(&me, "VmRSS:").unwrap_or(0);
    let load_start = Instant::now();
    // What the sink must hold at the end, and how many rows (changes) the runner reads.
    let mut start_timestamp = String::new();
    let expected = match scenario {
        Scenario::Snapshot
        | Scenario::Outage
        | Scenario::BigBatches
        | Scenario::AuditSnapshot
        | Scenario::AuditInitial => {
            load_source(&emu, 1..=rows, 1).await;
            rows
        }
        Scenario::Changelog => {
            let inserts = rows / 2;
            let from = emu.doris.clock.now_ms() - 1_000;
            load_source(&emu, 1..=inserts, 1).await;
            load_source(&emu, 1..=inserts / 2, 2).await;
            exec(
                &emu,
                &[&format!(
                    "DELETE FROM bench.src WHERE id <= {}",
                    inserts / 10
                )],
            )
            .await;
            // The window ends at Doris's now floored to the second: let the last change fall in.
            tokio::time::sleep(Duration::from_millis(1_100)).await;
            let timestamp = jiff::Timestamp::from_millisecond(from)
                .unwrap()
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string();
            start_timestamp = timestamp;
            inserts - inserts / 10
        }
    };
    let load_time = load_start.elapsed();
    let rss_loaded = proc_status_kib(&me, "VmRSS:").unwrap_or(0);

    let manifest = match scenario {
        Scenario::Snapshot => sync(&emu, StartupMode::Snapshot).yaml(),
        Scenario::BigBatches => sync(&emu, StartupMode::Snapshot)
            .max_rows(1_000_000)
            .max_bytes("64Mi")
            .yaml(),
        Scenario::Changelog => sync(&emu, StartupMode::FromTimestamp)
            .from_timestamp(&start_timestamp)
            .yaml(),
        Scenario::Outage => {
            // Stream Loads fail once the first one is in: the runner is mid-snapshot with its
            // reader and channels full. Back-off: 0.2 s doubling, jittered, 20-30 s for eight.
            let doris = emu.doris.clone();
            tokio::spawn(async move {
                while doris.counters.get("be_stream_load") == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                doris.faults.set(FaultState {
                    stream_load: Some(StreamLoadFault {
                        count: refused,
                        http_status: Some(503),
                        status: None,
                        message: Some("bench: sink unavailable".into()),
                    }),
                    ..FaultState::default()
                });
            });
            sync(&emu, StartupMode::Snapshot).max_retries(10).yaml()
        }
        Scenario::AuditSnapshot => sync(&emu, StartupMode::Snapshot)
            .sink_mode(SinkMode::Changelog)
            .yaml(),
        Scenario::AuditInitial => sync(&emu, StartupMode::Initial)
            .sink_mode(SinkMode::Changelog)
            .yaml(),
    };
    let done = async |emu: &RunningEmulator| count(emu, "bench.dst").await == expected;
    // Both audit scenarios are timed the same way: until the sink holds every row.
    let run = if scenario == Scenario::Changelog || scenario.audit() {
        run_runner(&emu, &manifest, done).await
    } else {
        run_runner(&emu, &manifest, async |_: &RunningEmulator| false).await
    };
    assert_eq!(count(&emu, "bench.dst").await, expected, "rows in the sink");
    if scenario == Scenario::Outage {
        assert!(
            emu.doris.counters.get("be_stream_load") > u64::from(refused),
            "the outage did not happen: {:?}",
            emu.doris.counters.snapshot()
        );
    }
    let emu_hwm = proc_status_kib(&me, "VmHWM:").unwrap_or(0);
    let emu_rss = proc_status_kib(&me, "VmRSS:").unwrap_or(0);

    let what = match scenario {
        Scenario::Snapshot => format!("snapshot sync, {rows} rows"),
        Scenario::Changelog => format!(
            "changelog sync, one window of {} change rows ({} rows inserted, half updated, a tenth deleted)",
            run.rows_read,
            rows / 2
        ),
        Scenario::Outage => {
            format!("snapshot sync, {rows} rows, {refused} Stream Loads refused with 503")
        }
        Scenario::BigBatches => format!("snapshot sync, {rows} rows, batches of 1M rows / 64 MiB"),
        Scenario::AuditSnapshot => {
            format!("snapshot sync, {rows} rows, changelog-mode sink (current data)")
        }
        Scenario::AuditInitial => format!(
            "initial sync, {rows} rows, changelog-mode sink (read as of T0) until the sink is complete"
        ),
    };
    println!("e2e {what} (dcs-runner binary against doris-emu):");
    println!(
        "  source load (Stream Load, CSV):   {:.2} s",
        load_time.as_secs_f64()
    );
    println!(
        "  sync (process start to {}):{} {:.2} s, {:.0} rows/s",
        if scenario == Scenario::Changelog || scenario.audit() {
            "sink complete"
        } else {
            "exit"
        },
        if scenario == Scenario::Changelog || scenario.audit() {
            ""
        } else {
            "         "
        },
        run.wall.as_secs_f64(),
        run.rows_read as f64 / run.wall.as_secs_f64()
    );
    println!("  dcs-runner peak RSS (VmHWM):      {}", mib(run.peak_kib));
    println!(
        "  dcs-runner CPU (user + system):   {:.2} s, {:.2} s per million rows read",
        run.cpu_s,
        run.cpu_s * 1e6 / run.rows_read.max(1) as f64
    );
    println!(
        "  doris-emu RSS (bench process):    {} before load, {} with the source, {} at the end (peak {})",
        mib(rss_before),
        mib(rss_loaded),
        mib(emu_rss),
        mib(emu_hwm)
    );
}
