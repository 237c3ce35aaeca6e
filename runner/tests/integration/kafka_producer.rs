//! The Kafka producer against a real Apache Kafka broker (`tests/kafka`, started once for the
//! test and stopped when it ends), read back by a `read_committed` consumer of librdkafka: records
//! of a committed transaction in order (tombstones included), an aborted one never, a producer
//! fenced by a newer one with its transactional id, and a transaction open when the broker is
//! SIGKILLed never visible after the restart; a run's position committed with its records and
//! read back only once committed, never an older one while another producer's transaction is
//! open in the offsets topic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dcs_runner::Error;
use dcs_runner::sink::kafka::frame;
use dcs_runner::sink::kafka::producer::{
    ProducerSettings, TransactionalProducer, committed_position,
};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// One broker of `tests/kafka/broker.sh`, its data in a temporary directory; stopped on drop.
struct Broker {
    dir: tempfile::TempDir,
    bootstrap: String,
}

fn kafka_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka")
}

fn broker_sh(args: &[&str]) -> String {
    let out = Command::new(kafka_dir().join("broker.sh"))
        .args(args)
        .output()
        .expect("running tests/kafka/broker.sh");
    assert!(
        out.status.success(),
        "tests/kafka/broker.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Broker {
    fn start() -> Self {
        // The broker's jars (Maven Central); instant when they are there.
        let install = Command::new(kafka_dir().join("install.sh"))
            .status()
            .expect("running tests/kafka/install.sh");
        assert!(install.success(), "tests/kafka/install.sh failed");
        let dir = tempfile::tempdir().unwrap();
        // Kafka's own session and heartbeat, not the smoke suite's shorter ones: this test runs
        // beside the others of its binary, and a heartbeat late on a loaded machine must not
        // fence the broker from its own controller in the middle of a transaction.
        let bootstrap = broker_sh(&[
            "start",
            dir.path().to_str().unwrap(),
            "broker.session.timeout.ms=9000",
            "broker.heartbeat.interval.ms=2000",
        ]);
        Self { dir, bootstrap }
    }

    fn kill_and_restart(&self) {
        let dir = self.dir.path().to_str().unwrap();
        broker_sh(&["kill", dir]);
        assert_eq!(broker_sh(&["start", dir]), self.bootstrap, "same address");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = Command::new(kafka_dir().join("broker.sh"))
            .args(["stop", self.dir.path().to_str().unwrap()])
            .status();
    }
}

fn settings(broker: &Broker, id: &str) -> ProducerSettings {
    ProducerSettings {
        bootstrap_servers: broker.bootstrap.clone(),
        transactional_id: id.to_owned(),
        transaction_timeout: Duration::from_secs(120),
        request_timeout: Duration::from_secs(60),
    }
}

type Record = (Option<String>, Option<String>);

fn body(records: &[(&str, Option<&str>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in records {
        frame::push(&mut out, Some(k.as_bytes()), v.map(str::as_bytes));
    }
    out
}

/// What a `read_committed` consumer reads of `topic` up to and including the record whose key
/// is `marker` (a committed record sent last, so everything before it is settled).
fn read_committed_until(broker: &Broker, topic: &str, marker: &str) -> Vec<Record> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", format!("check-{}", topic))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let Some(m) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let m = m.unwrap();
        let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
        let record = (text(m.key()), text(m.payload()));
        let done = record.0.as_deref() == Some(marker);
        seen.push(record);
        if done {
            return seen;
        }
    }
    panic!("marker {marker} not read within the deadline; read {seen:?}");
}

fn rec(k: &str, v: Option<&str>) -> Record {
    (Some(k.to_owned()), v.map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread")]
async fn transactions_reach_read_committed_consumers_exactly_when_committed() {
    let broker = Broker::start();
    let topic = "orders";
    let first = TransactionalProducer::open(settings(&broker, "dcs-c1"))
        .await
        .unwrap();

    // Committed: every record in order, a tombstone as a record without a value.
    first.begin().unwrap();
    let sent = first
        .send(
            topic,
            &body(&[
                ("{\"id\":1}", Some("a")),
                ("{\"id\":2}", Some("b")),
                ("{\"id\":1}", None),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(sent, 3);
    first.commit().await.unwrap();

    // Aborted: never read.
    first.begin().unwrap();
    first
        .send(
            topic,
            &body(&[("aborted-1", Some("x")), ("aborted-2", Some("y"))]),
        )
        .await
        .unwrap();
    first.abort().await.unwrap();
    first.begin().unwrap();
    first
        .send(topic, &body(&[("m1", Some("m"))]))
        .await
        .unwrap();
    first.commit().await.unwrap();
    assert_eq!(
        read_committed_until(&broker, topic, "m1"),
        vec![
            rec("{\"id\":1}", Some("a")),
            rec("{\"id\":2}", Some("b")),
            rec("{\"id\":1}", None),
            rec("m1", Some("m")),
        ]
    );

    // A newer producer with the same id fences the first: its transaction cannot commit.
    first.begin().unwrap();
    first
        .send(topic, &body(&[("zombie", Some("z"))]))
        .await
        .unwrap();
    let second = TransactionalProducer::open(settings(&broker, "dcs-c1"))
        .await
        .unwrap();
    let fenced = first.commit().await.unwrap_err();
    assert!(
        matches!(&fenced, Error::KafkaFenced { transactional_id } if transactional_id == "dcs-c1"),
        "{fenced:?}"
    );
    assert_eq!(fenced.exit_code(), 4);

    // A transaction open when the broker is SIGKILLed: after the restart, the next producer
    // with the id aborts it, and it is never read.
    second.begin().unwrap();
    second
        .send(topic, &body(&[("open-at-kill", Some("o"))]))
        .await
        .unwrap();
    broker.kill_and_restart();
    drop(second);
    let third = TransactionalProducer::open(settings(&broker, "dcs-c1"))
        .await
        .unwrap();
    third.begin().unwrap();
    third
        .send(topic, &body(&[("m2", Some("m"))]))
        .await
        .unwrap();
    third.commit().await.unwrap();
    let all = read_committed_until(&broker, topic, "m2");
    assert_eq!(
        all.iter()
            .filter_map(|(k, _)| k.as_deref())
            .collect::<Vec<_>>(),
        vec!["{\"id\":1}", "{\"id\":2}", "{\"id\":1}", "m1", "m2"],
        "no aborted, fenced or open-at-kill record is read"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_position_is_read_back_exactly_as_last_committed() {
    let broker = Broker::start();
    let offsets = "dcs-offsets";
    let a = settings(&broker, "dcs-a");
    assert_eq!(
        committed_position(&a, offsets, "a").await.unwrap(),
        None,
        "no offsets topic yet"
    );

    let p = TransactionalProducer::open(a.clone()).await.unwrap();
    p.begin().unwrap();
    p.send("orders", &body(&[("{\"id\":1}", Some("a"))]))
        .await
        .unwrap();
    p.send_position(offsets, "a", b"cp-1").await.unwrap();
    p.commit().await.unwrap();
    assert_eq!(
        committed_position(&a, offsets, "a").await.unwrap(),
        Some(b"cp-1".to_vec())
    );
    assert_eq!(committed_position(&a, offsets, "b").await.unwrap(), None);

    // Another sync's producer opens a transaction in the offsets topic, then this one commits
    // cp-2 after it: a read_committed reader sees nothing past the open transaction's start, so
    // a reader that did not wait would take cp-1 for the last position (and write cp-2's records
    // again). The read waits for the open transaction to end.
    let q = TransactionalProducer::open(settings(&broker, "dcs-b"))
        .await
        .unwrap();
    q.begin().unwrap();
    q.send_position(offsets, "b", b"q-1").await.unwrap();
    p.begin().unwrap();
    p.send_position(offsets, "a", b"cp-2").await.unwrap();
    p.commit().await.unwrap();
    let reader = {
        let a = a.clone();
        tokio::spawn(async move { committed_position(&a, offsets, "a").await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !reader.is_finished(),
        "the read must wait while a transaction is open in the offsets topic"
    );
    q.abort().await.unwrap();
    assert_eq!(reader.await.unwrap().unwrap(), Some(b"cp-2".to_vec()));
    assert_eq!(committed_position(&a, offsets, "b").await.unwrap(), None);

    // A run that dies with its position sent and not committed: the next run with the id aborts
    // its transaction, and the position read is the last committed one.
    p.begin().unwrap();
    p.send_position(offsets, "a", b"cp-3").await.unwrap();
    drop(p);
    let next = TransactionalProducer::open(a.clone()).await.unwrap();
    assert_eq!(
        committed_position(&a, offsets, "a").await.unwrap(),
        Some(b"cp-2".to_vec())
    );
    drop(next);
}
