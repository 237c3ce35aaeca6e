//! Shared set-up of the source tests: an emulator, settings pointing at it, SQL helpers and a
//! way to turn record batches into comparable rows.
#![allow(dead_code)]

pub mod fe_proxy;
pub mod kube_faults;
pub mod process;

use std::collections::BTreeSet;
use std::time::Duration;

use arrow::util::display::{ArrayFormatter, FormatOptions};
use arrow_array::RecordBatch;
use dcs_crds::StartupMode;
use dcs_crds::testing::SyncBuilder;
use dcs_doris_emu::sql::{self, Session};
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use dcs_runner::checkpoint::{Checkpoint, CheckpointStore, FileStore};
use dcs_runner::pipeline::{self, Control, ControlHandle, Outcome};
use dcs_runner::settings::{Credentials, PipelineConfig};
use dcs_runner::settings::{SourceCredentials, SourceSettings};
use dcs_runner::source::fe_http::FeHttpClient;
use mysql_async::prelude::Queryable;

/// The pipeline running in a task on a checkpoint directory, and the handle that steers it.
pub fn spawn_pipeline(
    cfg: PipelineConfig,
    dir: &std::path::Path,
) -> (
    tokio::task::JoinHandle<dcs_runner::Result<Outcome>>,
    ControlHandle,
) {
    let (control, handle) = Control::new();
    (spawn_pipeline_with(cfg, dir, control), handle)
}

/// [`spawn_pipeline`] with a control made by the caller (hooks set).
pub fn spawn_pipeline_with(
    cfg: PipelineConfig,
    dir: &std::path::Path,
    control: Control,
) -> tokio::task::JoinHandle<dcs_runner::Result<Outcome>> {
    let dir = dir.to_path_buf();
    tokio::spawn(async move {
        let mut store = FileStore::open(&dir).unwrap();
        pipeline::run(cfg, &mut store, control).await
    })
}

/// The checkpoint stored in a directory (it must hold one).
pub async fn stored_checkpoint(dir: &std::path::Path) -> Checkpoint {
    FileStore::open(dir)
        .unwrap()
        .load()
        .await
        .unwrap()
        .expect("a checkpoint is stored")
}

/// doris-emu's Stream Load transactions (`GET /_emu/txns`), as JSON values or a caller's type.
pub async fn emu_txns<T: serde::de::DeserializeOwned>(emu: &RunningEmulator) -> Vec<T> {
    dcs_doris_client::tls::plain_get(format!("http://{}/_emu/txns", emu.fe_http_addr()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The first rows that differ between two row sets, for a failure message.
pub fn row_diff(expected: &[Vec<String>], actual: &[Vec<String>]) -> String {
    let e: BTreeSet<&Vec<String>> = expected.iter().collect();
    let a: BTreeSet<&Vec<String>> = actual.iter().collect();
    let missing: Vec<_> = e.difference(&a).take(5).collect();
    let extra: Vec<_> = a.difference(&e).take(5).collect();
    format!(
        "expected {} rows, got {}; missing e.g. {missing:?}; unexpected e.g. {extra:?}",
        expected.len(),
        actual.len()
    )
}

/// An emulator on free ports, user root with an empty password.
pub async fn emu() -> RunningEmulator {
    dcs_doris_emu::start(EmuConfig::ephemeral())
        .await
        .expect("emulator starts")
}

/// An emulator with a changed configuration.
pub async fn emu_with(f: impl FnOnce(&mut EmuConfig)) -> RunningEmulator {
    let mut c = EmuConfig::ephemeral();
    f(&mut c);
    dcs_doris_emu::start(c).await.expect("emulator starts")
}

/// Settings for `table` on the emulator, with the Flight port left to discovery.
pub fn settings(emu: &RunningEmulator, table: &str) -> SourceSettings {
    settings_with_password(emu, table, "")
}

/// Settings with a given password.
pub fn settings_with_password(
    emu: &RunningEmulator,
    table: &str,
    password: &str,
) -> SourceSettings {
    SourceSettings {
        fe_nodes: vec![emu.fe_http_addr()],
        query_port: emu.ports().query_port,
        flight_sql_port: None,
        table: table.parse().unwrap(),
        credentials: SourceCredentials {
            user: "root".into(),
            password: password.into(),
        },
        request_retries: 3,
        request_timeout: Duration::from_secs(10),
        tls: Default::default(),
    }
}

/// An FE HTTP client for the settings.
pub fn http(settings: SourceSettings) -> FeHttpClient {
    FeHttpClient::new(settings).unwrap()
}

/// Run statements on the emulator's engine (set-up and scripted writes).
pub async fn exec(emu: &RunningEmulator, stmts: &[&str]) {
    let mut s = Session::new("root");
    for stmt in stmts {
        if let Err(e) = sql::execute(&emu.doris, &mut s, stmt).await {
            panic!("statement failed: {stmt}: {e}");
        }
    }
}

/// A UNIQUE KEY (merge-on-write) table with the changelog and before images on.
pub fn unique_ddl(table: &str, buckets: u32) -> String {
    format!(
        "CREATE TABLE {table} (id INT NOT NULL, name VARCHAR(64), age INT) UNIQUE KEY(id) \
         DISTRIBUTED BY HASH(id) BUCKETS {buckets} PROPERTIES (\"replication_num\" = \"1\", \
         \"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\")"
    )
}

/// Databases `demo` and `sink`, `demo.student` (as [`SOURCE_DDL`], with `buckets` tablets, the
/// changelog and before-images on) holding rows 1..=`rows`, and the sink table `sink_ddl`.
pub async fn student_tables(emu: &RunningEmulator, buckets: u32, sink_ddl: &str, rows: u32) {
    let source = format!(
        "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64), score DECIMAL(10,2), \
         updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS {buckets} \
         PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
         \"changelog.need_historical_value\" = \"true\")"
    );
    exec(
        emu,
        &[
            "CREATE DATABASE demo",
            "CREATE DATABASE sink",
            &source,
            sink_ddl,
        ],
    )
    .await;
    let values: Vec<String> = (1..=rows).map(row_values).collect();
    for chunk in values.chunks(2000) {
        let sql = format!("INSERT INTO demo.student VALUES {}", chunk.join(", "));
        exec(emu, &[&sql]).await;
    }
}

/// The columns of `db.table`, in order.
pub async fn column_names(emu: &RunningEmulator, db: &str, table: &str) -> Vec<String> {
    let mut cols = mysql_rows(
        emu,
        &format!(
            "SELECT ORDINAL_POSITION, COLUMN_NAME FROM information_schema.columns \
             WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = '{table}'"
        ),
    )
    .await;
    cols.sort_by_key(|r| r[0].parse::<u32>().unwrap_or(0));
    cols.into_iter().map(|r| r[1].clone()).collect()
}

/// Rows from the MySQL port, every value as text (`NULL` for NULL).
pub async fn mysql_rows(emu: &RunningEmulator, query: &str) -> Vec<Vec<String>> {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(emu.ports().query_port)
        .user(Some("root"))
        .pass(Some(""))
        .prefer_socket(false);
    let mut conn = mysql_async::Conn::new(opts).await.unwrap();
    let rows: Vec<mysql_async::Row> = conn.query(query).await.unwrap();
    conn.disconnect().await.unwrap();
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i).unwrap() {
                    mysql_async::Value::NULL => "NULL".to_owned(),
                    mysql_async::Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                    v => v.as_sql(true).trim_matches('\'').to_owned(),
                })
                .collect()
        })
        .collect()
}

/// Rows of record batches, every value as text (`NULL` for NULL), optionally only some columns.
pub fn batch_rows(batches: &[RecordBatch], columns: Option<&[&str]>) -> Vec<Vec<String>> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for b in batches {
        let idx: Vec<usize> = match columns {
            None => (0..b.num_columns()).collect(),
            Some(cs) => cs.iter().map(|c| b.schema().index_of(c).unwrap()).collect(),
        };
        let fmts: Vec<ArrayFormatter> = idx
            .iter()
            .map(|i| ArrayFormatter::try_new(b.column(*i).as_ref(), &opts).unwrap())
            .collect();
        for r in 0..b.num_rows() {
            out.push(fmts.iter().map(|f| f.value(r).to_string()).collect());
        }
    }
    out
}

/// Rows as a set, for order-free comparison (duplicates would show up as a count mismatch).
pub fn row_set(rows: &[Vec<String>]) -> BTreeSet<Vec<String>> {
    rows.iter().cloned().collect()
}

// === the student sync shared by the pipeline and sink-table tests ===

/// The source table `demo.student`, changelog on.
pub const SOURCE_DDL: &str = "CREATE TABLE demo.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4 \
     PROPERTIES (\"replication_num\" = \"1\", \"changelog.enable\" = \"true\", \
     \"changelog.need_historical_value\" = \"true\")";

/// The VALUES tuple of student `id` (every seventh name NULL).
pub fn row_values(id: u32) -> String {
    let name = if id.is_multiple_of(7) {
        "NULL".to_owned()
    } else {
        format!("'student-{id}'")
    };
    format!(
        "({id}, {name}, {}.{:02}, '2026-11-{:02} 10:{:02}:{:02}.{:03}')",
        id % 100,
        id % 97,
        1 + id % 28,
        id % 60,
        (id * 7) % 60,
        id % 1000
    )
}

/// The student sync: `demo.student` into `sink.student` on the same emulator from `mode`, with
/// 1 s polls and checkpoints and batches of at most 100 rows or 1 s.
pub fn student_sync(emu: &RunningEmulator, mode: StartupMode) -> SyncBuilder {
    let fe = emu.fe_http_addr();
    SyncBuilder::new()
        .name("student-sync")
        .source_fe(&fe)
        .query_port(emu.ports().query_port)
        .source_table("demo.student")
        .source_secret("src")
        .mode(mode)
        .poll_interval("1s")
        .checkpoint_interval("1s")
        .sink_fe(&fe)
        .sink_table("sink.student")
        .sink_secret("dst")
        .max_rows(100)
        .batch_interval("1s")
}

/// The pipeline configuration of a manifest, with short poll, retry and back-off delays.
pub fn config(yaml: &str) -> PipelineConfig {
    let sync = dcs_crds::from_manifest(yaml).unwrap();
    let creds = Credentials {
        source_user: "root".into(),
        source_password: String::new(),
        sink_user: "root".into(),
        sink_password: String::new(),
    };
    let mut c = PipelineConfig::from_sync(&sync, creds).unwrap();
    c.changelog.poll_interval = Duration::from_millis(200);
    c.changelog.retry_delay = Duration::from_millis(50);
    if let dcs_runner::settings::SinkConfig::Doris(d) = &mut c.sink {
        d.backoff.base = Duration::from_millis(20);
    }
    c
}

/// What a changelog-mode sink of `demo.student` must hold after an `initial` sync whose saved
/// checkpoint is `cp`: the table as the snapshot read it (`snapshot`, no writes during the
/// snapshot) as `+I` rows at T0, then the source's `@incr` DETAIL output over `[T0, offset)`, each
/// row as `id, name, score, updated, dcs_op, dcs_tso, dcs_lsn`, sorted.
pub async fn expected_student_events(
    emu: &RunningEmulator,
    snapshot: Vec<Vec<String>>,
    cp: &dcs_runner::checkpoint::Checkpoint,
) -> Vec<Vec<String>> {
    let t0 = cp.start_point.clone().expect("T0");
    let dcs_runner::checkpoint::Position::Changelog { offset: end } = &cp.position else {
        panic!("not in the changelog phase: {:?}", cp.position);
    };
    let mut expected: Vec<Vec<String>> = snapshot
        .into_iter()
        .map(|mut r| {
            r.extend(["+I".to_owned(), t0.tso.to_string(), "0".to_owned()]);
            r
        })
        .collect();
    let incr = format!(
        "SELECT id, name, score, updated, __DORIS_BINLOG_OP__, __DORIS_BINLOG_TSO__, \
         __DORIS_BINLOG_LSN__ FROM demo.student@incr('startTimestamp' = '{}', \
         'endTimestamp' = '{}', 'incrementType' = 'DETAIL')",
        t0.timestamp, end.timestamp
    );
    for mut r in mysql_rows(emu, &incr).await {
        // Changes at or below T0's TSO are in the snapshot already: not replayed.
        if r[5].parse::<i64>().unwrap() <= t0.tso {
            continue;
        }
        r[4] = ["+I", "-D", "-U", "+U"][r[4].parse::<usize>().unwrap()].to_owned();
        expected.push(r);
    }
    expected.sort();
    expected
}

/// A UNIQUE KEY upsert sink table for `demo.student`.
pub const STUDENT_UPSERT_SINK_DDL: &str = "CREATE TABLE sink.student (id INT NOT NULL, \
     name VARCHAR(64), score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) \
     DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES (\"replication_num\" = \"1\")";

/// A DUPLICATE KEY changelog-mode sink table for `demo.student`.
pub const STUDENT_EVENTS_SINK_DDL: &str = "CREATE TABLE sink.student (id INT NOT NULL, \
     name VARCHAR(64), score DECIMAL(10,2), updated DATETIME(3), dcs_op VARCHAR(2), \
     dcs_tso BIGINT, dcs_lsn BIGINT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
     PROPERTIES (\"replication_num\" = \"1\")";

/// Waits up to `wait` until a changelog window ending after `after_ms` (emulator clock) was handed
/// to the sink. False when it did not happen in time or the run ended first.
pub async fn window_past(handle: &mut ControlHandle, after_ms: i64, wait: Duration) -> bool {
    tokio::time::timeout(wait, async {
        while handle
            .progress
            .borrow_and_update()
            .window_end
            .as_ref()
            .is_none_or(|w| w.epoch_ms <= after_ms)
        {
            if handle.progress.changed().await.is_err() {
                return false;
            }
        }
        true
    })
    .await
    .unwrap_or(false)
}

/// A client for a fresh namespace of the test bed's control plane (genuine Kubernetes, one per
/// test binary); the namespace is the client's default.
pub async fn kube_bed() -> kube::Client {
    dcs_kube_bed::namespace("runner")
        .await
        .expect("the test bed's control plane starts")
        .client
}

/// SplitMix64: a small, seedable generator (no dependency needed).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 100) < percent
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }
}

/// The seed of a randomized test: `DCS_TEST_SEED`, else the clock; printed so a run can be replayed.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("DCS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("{test}: seed {seed} (replay with DCS_TEST_SEED={seed})");
    seed
}

/// The 2PC label of load `seq` of checkpoint `checkpoint_id` of `consumer_id` (namespace
/// `default`, prefix `dcs`), as the runner makes it.
pub fn label(consumer_id: &str, checkpoint_id: u64, seq: u32) -> String {
    let owner = dcs_crds::label::LabelOwner {
        namespace: "default",
        prefix: "dcs",
        consumer_id,
    };
    dcs_crds::label::load_label(
        &owner,
        dcs_crds::label::LabelScheme::V2,
        None,
        checkpoint_id,
        seq,
    )
}

// === a sync under writes, and sharded ===

/// T0 as the operator takes it: Doris's TSO now.
pub async fn take_t0(emu: &RunningEmulator) -> dcs_runner::checkpoint::Offset {
    use dcs_runner::source::tso::{self, NowOffsets as _};
    tso::current(&http(settings(emu, "demo.student")))
        .await
        .unwrap()
        .start_point()
}

/// [`student_sync`] in `initial` mode, its snapshot sharded in `shards` at `t0`.
pub fn sharded_sync(
    emu: &RunningEmulator,
    t0: &dcs_runner::checkpoint::Offset,
    shards: u32,
) -> SyncBuilder {
    student_sync(emu, StartupMode::Initial)
        .annotation(dcs_crds::shard::SNAPSHOT_T0_ANNOTATION, &t0.tso.to_string())
        .parallelism(i32::try_from(shards).unwrap())
}

/// Changes `demo.student` (holding rows 1..=`rows`) until `stop`: seeded inserts of new ids,
/// updates and deletes of random ids, every few milliseconds, each statement counted in
/// `written`. Returns Doris's clock after the last write.
pub async fn writer(
    emu: std::sync::Arc<RunningEmulator>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seed: u64,
    rows: u32,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> i64 {
    use std::sync::atomic::Ordering;
    let mut rng = Rng(seed ^ 0x5EED);
    let mut next_id = rows + 1;
    let mut version = 0;
    while !stop.load(Ordering::SeqCst) {
        version += 1;
        let stmt = match rng.range(0, 10) {
            0..=2 => {
                next_id += 1;
                format!(
                    "INSERT INTO demo.student VALUES {}",
                    row_values(next_id - 1)
                )
            }
            3..=6 => format!(
                "UPDATE demo.student SET name = 'upd-{version}', score = {}.5 WHERE id = {}",
                version % 1000,
                rng.range(1, u64::from(next_id))
            ),
            _ => format!(
                "DELETE FROM demo.student WHERE id = {}",
                rng.range(1, u64::from(next_id))
            ),
        };
        exec(&emu, &[&stmt]).await;
        written.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(rng.range(5, 25))).await;
    }
    emu.doris.clock.now_ms()
}

/// A JSON file (a checkpoint), `None` while it is missing or half-written.
pub fn read_json(path: &std::path::Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}
