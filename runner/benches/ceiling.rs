//! The distance to the ceiling, measured in one run (BENCHMARKS.md, "Ceilings"): on one doris-emu
//! in this process holding `DCS_BENCH_ROWS` rows in `bench.src` (default 1 000 000),
//!
//! - write: the snapshot's rows encoded beforehand by dcs's own encoder into the bodies dcs sends
//!   (JSON lines, 50 000 rows a load, the upsert delete sign), then sent one after another by a
//!   plain HTTP client as fast as it can with the same 2PC protocol (each load pre-committed, all
//!   committed after), against `dcs-runner run` of a snapshot-mode sync into the same kind of
//!   table (which reads, encodes, loads and checkpoints as well);
//! - read: a plain Arrow Flight SQL client (arrow-flight) reading `SELECT * FROM bench.src` as
//!   fast as it can, counting rows, against `dcs-runner run` of the same sync into the stdout sink
//!   (records written to /dev/null: the sink discards);
//! - CPU: user + system seconds of the runner per million rows for both runs.
//!
//! Prints each rate and dcs's ratio to its ceiling. `cargo bench -p dcs-runner --bench ceiling`
//! measures; without `--bench` (as `cargo test --all-targets` runs it) it runs on 20 000 rows as a
//! smoke test, which checks that every run moved every row.

use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_flight::sql::client::FlightSqlServiceClient;
use dcs_crds::StartupMode;
use dcs_crds::testing::SyncBuilder;
use dcs_doris_emu::{EmuConfig, RunningEmulator};
use dcs_runner::settings::{BodyFormat, EventPolicy};
use futures::TryStreamExt;
use tonic::transport::Channel;

mod support;
use support::{bench_rows, count, cpu_seconds, exec, load_source, run_runner, stream_load};

/// Rows per load: dcs's default `batch.maxRows`.
const LOAD_ROWS: usize = 50_000;

const TABLE: &str = "(id BIGINT NOT NULL, name VARCHAR(64), age INT, score DECIMAL(10,2), \
     updated DATETIME(6)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 8 \
     PROPERTIES (\"replication_num\" = \"1\")";

/// A snapshot of `bench.src` on the emulator, checkpointed every 10 s, into the sample's sink.
fn sync(emu: &RunningEmulator) -> SyncBuilder {
    SyncBuilder::new()
        .name("ceiling")
        .source_fe(&emu.fe_http_addr())
        .query_port(emu.ports().query_port)
        .source_table("bench.src")
        .source_secret("s")
        .mode(StartupMode::Snapshot)
        .checkpoint_interval("10s")
}

/// Reads `SELECT * FROM bench.src` over Flight SQL with a plain client: the batches and the time
/// the read took.
async fn flight_read(emu: &RunningEmulator) -> (Vec<RecordBatch>, Duration) {
    let start = Instant::now();
    let uri = format!("http://127.0.0.1:{}", emu.ports().fe_flight_port);
    let channel = Channel::from_shared(uri).unwrap().connect().await.unwrap();
    let mut client = FlightSqlServiceClient::new(channel);
    client.handshake("root", "").await.unwrap();
    let info = client
        .execute("SELECT * FROM bench.src".into(), None)
        .await
        .unwrap();
    let mut batches = Vec::new();
    for endpoint in info.endpoint {
        let ticket = endpoint.ticket.expect("an endpoint without a ticket");
        let stream = match endpoint.location.first() {
            Some(location)
                if !location.uri.is_empty() && !location.uri.starts_with("arrow-flight-reuse") =>
            {
                let uri = location
                    .uri
                    .replacen("grpc+tcp://", "http://", 1)
                    .replacen("grpc://", "http://", 1);
                let channel = Channel::from_shared(uri).unwrap().connect().await.unwrap();
                let mut other = FlightSqlServiceClient::new(channel);
                if let Some(token) = client.token() {
                    other.set_token(token.clone());
                }
                other.do_get(ticket).await.unwrap()
            }
            _ => client.do_get(ticket).await.unwrap(),
        };
        batches.extend(stream.try_collect::<Vec<_>>().await.unwrap());
    }
    (batches, start.elapsed())
}

/// `batches` as the Stream Load bodies dcs would send into an upsert sink, [`LOAD_ROWS`] rows each.
fn encode(batches: &[RecordBatch]) -> Vec<Vec<u8>> {
    let policy = EventPolicy {
        mode: dcs_crds::SinkMode::Upsert,
        enable_delete: true,
        ignore_update_before: true,
    };
    let mut bodies = Vec::new();
    let (mut body, mut rows) = (Vec::new(), 0);
    for batch in batches {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let take = (LOAD_ROWS - rows).min(batch.num_rows() - offset);
            BodyFormat::JsonLines
                .encode(&batch.slice(offset, take), None, &policy, &mut body)
                .unwrap();
            offset += take;
            rows += take;
            if rows == LOAD_ROWS {
                bodies.push(std::mem::take(&mut body));
                rows = 0;
            }
        }
    }
    if rows > 0 {
        bodies.push(body);
    }
    bodies
}

/// Sends `bodies` into `bench.ceiling` one after another, each pre-committed, then commits them
/// all: the time it took.
async fn write_ceiling(emu: &RunningEmulator, bodies: Vec<Vec<u8>>) -> Duration {
    let client = dcs_doris_client::tls::plain_http_client(reqwest::Client::builder()).unwrap();
    let load = format!(
        "http://127.0.0.1:{}/api/bench/ceiling/_stream_load",
        emu.ports().be_http_port
    );
    // Straight to the BE, as the loads: a client that follows the FE's redirect would drop the
    // credentials on the way (another port).
    let commit = format!(
        "http://127.0.0.1:{}/api/bench/_stream_load_2pc",
        emu.ports().be_http_port
    );
    let start = Instant::now();
    let mut txns = Vec::new();
    for (n, body) in bodies.into_iter().enumerate() {
        let answer = stream_load(
            &client,
            &load,
            &format!("ceiling-{n}"),
            &[
                ("format", "json"),
                ("read_json_by_line", "true"),
                ("hidden_columns", "__DORIS_DELETE_SIGN__"),
                ("two_phase_commit", "true"),
                ("timeout", "600"),
            ],
            body,
        )
        .await;
        txns.push(answer["TxnId"].as_i64().expect("a TxnId"));
    }
    for txn in txns {
        let answer: serde_json::Value = client
            .put(&commit)
            .basic_auth("root", Some(""))
            .header("txn_id", txn.to_string())
            .header("txn_operation", "commit")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(answer["status"], "Success", "{answer}");
    }
    start.elapsed()
}

fn rate(rows: u64, took: Duration) -> f64 {
    rows as f64 / took.as_secs_f64()
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let rows = bench_rows(measuring);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(rows));
}

async fn bench(rows: u64) {
    let emu = dcs_doris_emu::start(EmuConfig::ephemeral()).await.unwrap();
    exec(
        &emu,
        &[
            "CREATE DATABASE bench",
            &format!("CREATE TABLE bench.src {TABLE}"),
            &format!("CREATE TABLE bench.dst {TABLE}"),
            &format!("CREATE TABLE bench.ceiling {TABLE}"),
        ],
    )
    .await;
    load_source(&emu, 1..=rows, 1).await;

    // The emulator's CPU (this process's) for each step: what bounds the steps on 2 cores.
    let me = std::process::id().to_string();
    let emu_cpu = || cpu_seconds(&me).unwrap_or(0.0);
    let mut cpu = Vec::new();

    // Read: the plain client first, then dcs into a sink that discards.
    let before = emu_cpu();
    let (batches, read_took) = flight_read(&emu).await;
    cpu.push(emu_cpu() - before);
    let before = emu_cpu();
    let read_rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
    assert_eq!(read_rows, rows, "rows the Flight client read");
    let discard = run_runner(
        &emu,
        &sync(&emu).stdout().yaml(),
        async |_: &RunningEmulator| false,
    )
    .await;
    cpu.push(emu_cpu() - before);
    assert_eq!(
        discard.rows_read, rows,
        "rows dcs read into the stdout sink"
    );

    // Write: the pre-encoded bodies by a plain client, then dcs from the source.
    let bodies = encode(&batches);
    drop(batches);
    let before = emu_cpu();
    let write_took = write_ceiling(&emu, bodies).await;
    cpu.push(emu_cpu() - before);
    assert_eq!(
        count(&emu, "bench.ceiling").await,
        rows,
        "rows the plain client loaded"
    );
    let fe = emu.fe_http_addr();
    let before = emu_cpu();
    let sync = run_runner(
        &emu,
        &sync(&emu)
            .sink_fe(&fe)
            .sink_table("bench.dst")
            .sink_secret("d")
            .two_phase(true)
            .yaml(),
        async |_: &RunningEmulator| false,
    )
    .await;
    cpu.push(emu_cpu() - before);
    assert_eq!(count(&emu, "bench.dst").await, rows, "rows dcs loaded");

    let k = |r: f64| format!("{:.0} k rows/s", r / 1000.0);
    let (read_ceiling, dcs_read) = (rate(rows, read_took), rate(rows, discard.wall));
    let (write_ceiling, dcs_write) = (rate(rows, write_took), rate(rows, sync.wall));
    println!("ceilings, {rows} rows (UNIQUE KEY, 8 buckets), on doris-emu in this process:");
    println!(
        "  read:  plain Flight SQL client {} ; dcs-runner into a discarding sink {} (process start to exit) = {:.2}x",
        k(read_ceiling),
        k(dcs_read),
        dcs_read / read_ceiling
    );
    println!(
        "  write: plain client sending dcs's pre-encoded bodies (2PC) {} ; dcs-runner snapshot into Doris (read + encode + load, 2PC) {} = {:.2}x",
        k(write_ceiling),
        k(dcs_write),
        dcs_write / write_ceiling
    );
    println!(
        "  dcs-runner CPU (user + system) per million rows: {:.2} s into the discarding sink, {:.2} s into Doris",
        discard.cpu_s * 1e6 / rows as f64,
        sync.cpu_s * 1e6 / rows as f64
    );
    println!(
        "  doris-emu CPU (this process, user + system): plain read {:.2} s, dcs's read {:.2} s; plain write {:.2} s (and encoding before it, not timed), dcs's snapshot {:.2} s",
        cpu[0], cpu[1], cpu[2], cpu[3]
    );
}
