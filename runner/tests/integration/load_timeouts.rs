//! Stream Loads that time out (doris-emu's `http_delay_ms` beyond the sink's request timeout): the
//! load is retried with the same label and lands exactly once, even when Doris applied the timed-out
//! attempt after all; a sink that never answers in time stops the sync with a clear message.

use crate::source_support;

use std::time::Duration;

use bytes::Bytes;
use dcs_crds::StartupMode;
use dcs_doris_emu::RunningEmulator;
use dcs_runner::settings::{DorisSinkConfig, SinkConfig};
use dcs_runner::sink::Sink;
use dcs_runner::sink::doris::DorisSink;
use source_support::{config, exec, mysql_rows, student_sync};

const SINK_DDL: &str = "CREATE TABLE sink.student (id INT NOT NULL, name VARCHAR(64), \
     score DECIMAL(10,2), updated DATETIME(3)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 \
     PROPERTIES (\"replication_num\" = \"1\")";

const TIMEOUT: Duration = Duration::from_millis(300);

/// The sink of the student sync, loading straight into the BE (so a timed-out attempt may still
/// be applied by Doris), with a short request timeout.
async fn sink(emu: &RunningEmulator, max_retries: u32) -> DorisSinkConfig {
    exec(emu, &["CREATE DATABASE sink", SINK_DDL]).await;
    let cfg = config(&student_sync(emu, StartupMode::Snapshot).yaml());
    let SinkConfig::Doris(d) = cfg.sink else {
        panic!("a Doris sink")
    };
    let mut d = *d;
    d.be_nodes = vec![format!("127.0.0.1:{}", emu.ports().be_http_port)];
    d.request_timeout = TIMEOUT;
    d.max_retries = max_retries;
    d.backoff.base = Duration::from_millis(20);
    d.backoff.max = Duration::from_millis(100);
    d
}

fn body() -> Bytes {
    Bytes::from(
        (1..=3)
            .map(|i| {
                format!(
                    "{{\"id\":{i},\"name\":\"s{i}\",\"score\":\"1.50\",\"updated\":\"2026-11-29 10:00:00.000\",\"__DORIS_DELETE_SIGN__\":0}}\n"
                )
            })
            .collect::<String>(),
    )
}

#[derive(Debug, serde::Deserialize)]
struct Txn {
    label: String,
    state: String,
}

async fn txns(emu: &RunningEmulator) -> Vec<Txn> {
    source_support::emu_txns(emu).await
}

fn delay_answers(emu: &RunningEmulator, ms: u64) {
    emu.doris.faults.update(|f| f.http_delay_ms = ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_load_is_retried_with_the_same_label_and_lands_once() {
    let emu = source_support::emu().await;
    let writer = DorisSink::new(
        sink(&emu, 20).await,
        "default".into(),
        "student-sync".into(),
    );
    // Every answer comes after the timeout until the delay is lifted: the first attempts time
    // out (the BE may still apply them once the delay is over).
    delay_answers(&emu, 3 * TIMEOUT.as_millis() as u64);
    let lift = {
        let faults = emu.doris.clone();
        tokio::spawn(async move {
            tokio::time::sleep(4 * TIMEOUT).await;
            faults.faults.update(|f| f.http_delay_ms = 0);
        })
    };
    let result = writer.load(body().into(), 7, 0).await.unwrap();
    lift.await.unwrap();
    assert!(result.attempts > 1, "{result:?}");
    assert_eq!(result.label, source_support::label("student-sync", 7, 0));
    let pending = result.pending.clone().expect("pre-committed under 2PC");
    writer.commit(&[pending]).await.unwrap();
    // Every attempt used the one label, and Doris holds one transaction for it.
    let t = txns(&emu).await;
    assert!(t.iter().all(|x| x.label == result.label), "{t:?}");
    let live: Vec<&Txn> = t.iter().filter(|x| x.state != "ABORTED").collect();
    assert_eq!(live.len(), 1, "{t:?}");
    assert_eq!(live[0].state, "VISIBLE");
    let rows = mysql_rows(&emu, "SELECT id, name FROM sink.student ORDER BY id").await;
    assert_eq!(
        rows,
        [["1", "s1"], ["2", "s2"], ["3", "s3"]]
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_never_answers_in_time_fails_after_the_retries_with_a_clear_message() {
    let emu = source_support::emu().await;
    let writer = DorisSink::new(sink(&emu, 2).await, "default".into(), "student-sync".into());
    delay_answers(&emu, 2 * TIMEOUT.as_millis() as u64);
    let err = writer.load(body().into(), 7, 0).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Stream Load of label {} still failing after 3 attempts: Stream Load to the BE timed \
             out: no answer within 300ms",
            source_support::label("student-sync", 7, 0)
        )
    );
    assert!(matches!(err, dcs_runner::Error::Sink { .. }));
    // Nothing was loaded: every attempt's transaction was given up.
    emu.doris.faults.update(|f| f.http_delay_ms = 0);
    assert!(
        mysql_rows(&emu, "SELECT id FROM sink.student")
            .await
            .is_empty()
    );
}
