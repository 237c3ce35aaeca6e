//! A transactional Kafka producer (librdkafka through the rdkafka crate): the transport the
//! Kafka sink will send its [`frame`](super::frame)d records with.
//!
//! Opening takes the transactional id: the broker fences every earlier producer with it and
//! aborts the transaction it left open, so a runner that lost its sync can no longer commit
//! ([`Error::KafkaFenced`], exit 4). Records of a body are enqueued in order, one at a time
//! (waiting for room when librdkafka's queue is full, never reordering), and a send returns once
//! every one is acknowledged; with idempotence on (implied by the transactional id) a retried
//! record is written once and in order. Nothing sent is visible to a `read_committed` consumer
//! before [`TransactionalProducer::commit`].

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;

use super::frame;
use crate::{Error, Result};

/// Where and as whom the producer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSettings {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// `transactional.id`: one per consumer id, so that a new run fences the old one.
    pub transactional_id: String,
    /// `transaction.timeout.ms`: the broker aborts a transaction left open this long (a runner
    /// that died between sending and committing). At most the broker's
    /// `transaction.max.timeout.ms`.
    pub transaction_timeout: Duration,
    /// How long a call that waits for the broker (open, commit, abort, a record's acknowledgement)
    /// may take.
    pub request_timeout: Duration,
}

/// A producer holding its transactional id.
pub struct TransactionalProducer {
    producer: FutureProducer,
    settings: ProducerSettings,
}

impl std::fmt::Debug for TransactionalProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionalProducer")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Whether a librdkafka error code says another producer took the transactional id.
pub fn is_fencing(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
    )
}

impl TransactionalProducer {
    /// Connect and take the transactional id: earlier producers with it are fenced, and the
    /// transaction one of them left open is aborted.
    ///
    /// # Errors
    /// A configuration librdkafka refuses, brokers that do not answer within the request
    /// timeout, a fencing.
    pub async fn open(settings: ProducerSettings) -> Result<Self> {
        let millis = |d: Duration| d.as_millis().max(1).to_string();
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("transactional.id", &settings.transactional_id)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set(
                "transaction.timeout.ms",
                millis(settings.transaction_timeout),
            )
            .set("message.timeout.ms", millis(settings.request_timeout))
            .set("socket.timeout.ms", millis(settings.request_timeout))
            .create()
            .map_err(|e| kafka_error(&settings, "creating the Kafka producer", &e))?;
        let this = Self { producer, settings };
        this.blocking("taking the transactional id (init_transactions)", |p, t| {
            p.init_transactions(t)
        })
        .await?;
        Ok(this)
    }

    /// Begin a transaction.
    ///
    /// # Errors
    /// A transaction already open, a fencing.
    pub fn begin(&self) -> Result<()> {
        self.producer
            .begin_transaction()
            .map_err(|e| kafka_error(&self.settings, "beginning a transaction", &e))
    }

    /// Send the records of `body` (frames) to `topic` in the open transaction, in order; returns
    /// how many once every one is acknowledged.
    ///
    /// # Errors
    /// A body that is not frames, a record the broker refused or did not acknowledge within the
    /// request timeout, a fencing. The transaction must then be aborted.
    pub async fn send(&self, topic: &str, body: &[u8]) -> Result<u64> {
        let messages = frame::messages(body).map_err(|e| Error::Sink {
            message: e.to_string(),
        })?;
        let mut pending: std::collections::VecDeque<DeliveryFuture> =
            std::collections::VecDeque::new();
        for m in &messages {
            let mut record = FutureRecord::<[u8], [u8]>::to(topic);
            if let Some(key) = m.key {
                record = record.key(key);
            }
            if let Some(value) = m.value {
                record = record.payload(value);
            }
            loop {
                match self.producer.send_result(record) {
                    Ok(delivery) => {
                        pending.push_back(delivery);
                        break;
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        // Room comes with acknowledgements: wait for the oldest, then enqueue the
                        // same record again (nothing after it was enqueued, so order holds).
                        record = back;
                        match pending.pop_front() {
                            Some(oldest) => self.acknowledged(oldest).await?,
                            None => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                    Err((e, _)) => {
                        return Err(kafka_error(&self.settings, "enqueuing a record", &e));
                    }
                }
            }
        }
        for delivery in pending {
            self.acknowledged(delivery).await?;
        }
        Ok(messages.len() as u64)
    }

    /// Send the run's `position` under `consumer_id` to `offsets_topic` in the open transaction,
    /// so that it is committed exactly when the records it covers are (as Kafka Connect's
    /// exactly-once source connectors keep their offsets, KIP-618); read back with
    /// [`committed_position`].
    ///
    /// # Errors
    /// As [`TransactionalProducer::send`].
    pub async fn send_position(
        &self,
        offsets_topic: &str,
        consumer_id: &str,
        position: &[u8],
    ) -> Result<()> {
        let mut body = Vec::new();
        frame::push(&mut body, Some(consumer_id.as_bytes()), Some(position));
        self.send(offsets_topic, &body).await.map(|_| ())
    }

    /// Commit the open transaction: its records become visible to `read_committed` consumers.
    ///
    /// # Errors
    /// A fencing, or the broker did not confirm within the request timeout (whether it
    /// committed is then unknown: the next open of the id settles it).
    pub async fn commit(&self) -> Result<()> {
        self.blocking("committing the transaction", |p, t| p.commit_transaction(t))
            .await
    }

    /// Abort the open transaction: its records are never visible to `read_committed` consumers.
    ///
    /// # Errors
    /// A fencing, or the broker did not confirm within the request timeout.
    pub async fn abort(&self) -> Result<()> {
        self.blocking("aborting the transaction", |p, t| p.abort_transaction(t))
            .await
    }

    async fn acknowledged(&self, delivery: DeliveryFuture) -> Result<()> {
        match delivery.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(kafka_error(&self.settings, "sending a record", &e)),
            Err(_) => Err(Error::Sink {
                message: format!(
                    "Kafka producer {}: a record's acknowledgement was dropped",
                    self.settings.transactional_id
                ),
            }),
        }
    }

    /// Run one of librdkafka's blocking transaction calls off the async threads.
    async fn blocking(
        &self,
        what: &'static str,
        call: impl FnOnce(&FutureProducer, Timeout) -> rdkafka::error::KafkaResult<()> + Send + 'static,
    ) -> Result<()> {
        let producer = self.producer.clone();
        let timeout = Timeout::After(self.settings.request_timeout);
        let result = tokio::task::spawn_blocking(move || call(&producer, timeout))
            .await
            .map_err(|e| Error::Sink {
                message: format!("Kafka producer: {what}: {e}"),
            })?;
        result.map_err(|e| kafka_error(&self.settings, what, &e))
    }
}

/// The last position committed under `consumer_id` in `offsets_topic`
/// ([`TransactionalProducer::send_position`]), `None` when there is none (or no such topic).
///
/// A `read_committed` reader stops at the first offset of the oldest open transaction (the last
/// stable offset), so a position committed after another producer began a transaction in the
/// topic would not be seen yet, and an older one taken for the last. This waits, within
/// `settings.transaction_timeout` (after which the broker aborts any transaction), until no
/// transaction is open in the topic, then reads every partition to its end. Open the run's own
/// producer first: taking the transactional id aborts the transaction a dead run left open.
///
/// # Errors
/// Brokers that do not answer, or a transaction still open after the wait.
pub async fn committed_position(
    settings: &ProducerSettings,
    offsets_topic: &str,
    consumer_id: &str,
) -> Result<Option<Vec<u8>>> {
    let settings = settings.clone();
    let topic = offsets_topic.to_owned();
    let key = consumer_id.to_owned();
    tokio::task::spawn_blocking(move || read_position(&settings, &topic, &key))
        .await
        .map_err(|e| Error::Sink {
            message: format!("Kafka offsets topic {offsets_topic}: reading the position: {e}"),
        })?
}

fn read_position(settings: &ProducerSettings, topic: &str, key: &str) -> Result<Option<Vec<u8>>> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};

    let fail = |what: &str, e: &dyn std::fmt::Display| Error::Sink {
        message: format!(
            "Kafka offsets topic {topic} at {}: {what}: {e}",
            settings.bootstrap_servers
        ),
    };
    let consumer = |isolation: &str| -> Result<BaseConsumer> {
        ClientConfig::new()
            .set("bootstrap.servers", &settings.bootstrap_servers)
            .set("group.id", "dcs-position-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", isolation)
            .create()
            .map_err(|e| fail("creating a reader", &e))
    };
    let committed = consumer("read_committed")?;
    let uncommitted = consumer("read_uncommitted")?;
    let timeout = settings.request_timeout;
    let metadata = committed
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| fail("reading its partitions", &e))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Ok(None);
    }
    // Until no transaction is open: the last stable offset (what read_committed sees) equals the
    // high watermark everywhere.
    let deadline = std::time::Instant::now() + settings.transaction_timeout + timeout;
    loop {
        let mut stable = true;
        for &p in &partitions {
            let (_, lso) = committed
                .fetch_watermarks(topic, p, timeout)
                .map_err(|e| fail("reading its last stable offset", &e))?;
            let (_, high) = uncommitted
                .fetch_watermarks(topic, p, timeout)
                .map_err(|e| fail("reading its high watermark", &e))?;
            stable &= lso >= high;
        }
        if stable {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Sink {
                message: format!(
                    "Kafka offsets topic {topic}: a transaction stayed open for longer than the transaction timeout ({} s), so the last committed position cannot be read; check for a producer stuck in a transaction",
                    settings.transaction_timeout.as_secs()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut tpl = TopicPartitionList::new();
    for &p in &partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| fail("assigning its partitions", &e))?;
    }
    committed
        .assign(&tpl)
        .map_err(|e| fail("assigning its partitions", &e))?;
    let mut at_end = std::collections::BTreeSet::new();
    let mut last = None;
    let deadline = std::time::Instant::now() + timeout;
    while at_end.len() < partitions.len() {
        if std::time::Instant::now() > deadline {
            return Err(fail(
                "reading to its end",
                &"no end within the request timeout",
            ));
        }
        match committed.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => return Err(fail("reading", &e)),
            // A tombstone for the key: no position.
            Some(Ok(m)) if m.key() == Some(key.as_bytes()) => {
                last = m.payload().map(<[u8]>::to_vec);
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(last)
}

/// The crate's error for a Kafka error: a fencing is [`Error::KafkaFenced`], the rest
/// [`Error::Sink`] with what was being done.
fn kafka_error(settings: &ProducerSettings, what: &str, e: &KafkaError) -> Error {
    match e.rdkafka_error_code() {
        Some(code) if is_fencing(code) => Error::KafkaFenced {
            transactional_id: settings.transactional_id.clone(),
        },
        _ => Error::Sink {
            message: format!(
                "Kafka producer {} at {}: {what}: {e}",
                settings.transactional_id, settings.bootstrap_servers
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_taken_transactional_id_counts_as_fenced() {
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
        ] {
            assert!(is_fencing(code), "{code:?}");
        }
        for code in [
            RDKafkaErrorCode::QueueFull,
            RDKafkaErrorCode::MessageTimedOut,
            RDKafkaErrorCode::TransactionCoordinatorFenced,
            RDKafkaErrorCode::InvalidTransactionTimeout,
        ] {
            assert!(!is_fencing(code), "{code:?}");
        }
    }

    #[test]
    fn errors_name_the_producer_and_what_it_did_and_fencing_exits_as_fenced() {
        let settings = ProducerSettings {
            bootstrap_servers: "127.0.0.1:9092".into(),
            transactional_id: "dcs-c1".into(),
            transaction_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
        };
        let fenced = kafka_error(
            &settings,
            "committing the transaction",
            &KafkaError::MessageProduction(RDKafkaErrorCode::ProducerFenced),
        );
        assert_eq!(
            fenced.to_string(),
            "Kafka transactional id dcs-c1 was taken by another producer (a newer runner of this sync); this runner stops without committing"
        );
        assert_eq!(fenced.exit_code(), crate::error::exit_code::FENCED);
        let other = kafka_error(
            &settings,
            "sending a record",
            &KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge),
        );
        assert!(
            other
                .to_string()
                .starts_with("Kafka producer dcs-c1 at 127.0.0.1:9092: sending a record: "),
            "{other}"
        );
        assert_eq!(other.exit_code(), crate::error::exit_code::FAILURE);
    }
}
