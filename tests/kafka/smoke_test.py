"""Smoke tests of the test broker (tests/kafka/broker.sh) with the Python client confluent-kafka
(librdkafka): the transactional behaviour a Kafka sink relies on, seen by real clients.

One broker serves the whole session; test_crash_keeps_committed_hides_open kills and restarts it
and runs last (pytest keeps the file's order). Every wait has a deadline; none sleeps.
"""
import os
import time
import uuid

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kafka_broker import Broker

# Generous: two loaded cores, a JVM that may still be compiling its hot paths.
DEADLINE_S = 60


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    b = Broker(os.environ.get("KAFKA_TEST_DIR") or tmp_path_factory.mktemp("kafka") / "broker")
    b.start()
    yield b
    b.stop()


def new_topic(bootstrap):
    """A fresh topic with one partition; returns its name once the broker created it."""
    name = f"smoke-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(DEADLINE_S)
    return name


def txn_producer(bootstrap, txn_id, **conf):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf})
    p.init_transactions(DEADLINE_S)
    return p


def produce(p, topic, values):
    """Produces values in order and waits for their acks; returns their offsets."""
    offsets = []

    def on_delivery(err, msg):
        if err is not None:
            raise KafkaException(err)
        offsets.append(msg.offset())

    for v in values:
        p.produce(topic, value=v, on_delivery=on_delivery)
    assert p.flush(DEADLINE_S) == 0, "messages still unacknowledged at the deadline"
    assert len(offsets) == len(values)
    return offsets


def read(bootstrap, topic, isolation, end):
    """Every message of partition 0 that a consumer with `isolation` sees, read from the beginning
    until it reports the end of the partition at an offset >= `end`. Returns (values, eof offset)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"smoke-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
    })
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values = []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                values.append(msg.value())
            elif err.code() == KafkaError._PARTITION_EOF:
                if msg.offset() >= end:
                    return values, msg.offset()
            elif err.fatal():
                raise KafkaException(err)
            # Any other error is transient (a broker still loading): the client retries it.
        raise AssertionError(f"{isolation}: no end of partition at >= {end} within {DEADLINE_S}s; "
                             f"read {len(values)} messages")
    finally:
        c.close()


def values(prefix, n):
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_commit_and_abort(broker):
    topic = new_topic(broker.bootstrap)
    p = txn_producer(broker.bootstrap, f"smoke-{uuid.uuid4().hex[:8]}")
    committed1, aborted, committed2 = values("c1", 100), values("a", 20), values("c2", 10)

    p.begin_transaction()
    produce(p, topic, committed1)
    p.commit_transaction(DEADLINE_S)

    p.begin_transaction()
    produce(p, topic, aborted)
    p.abort_transaction(DEADLINE_S)

    p.begin_transaction()
    last = produce(p, topic, committed2)[-1]
    p.commit_transaction(DEADLINE_S)

    got, _ = read(broker.bootstrap, topic, "read_committed", last + 1)
    assert got == committed1 + committed2
    got, _ = read(broker.bootstrap, topic, "read_uncommitted", last + 1)
    assert got == committed1 + aborted + committed2


def test_same_transactional_id_fences_the_first_producer(broker):
    topic = new_topic(broker.bootstrap)
    txn_id = f"smoke-fence-{uuid.uuid4().hex[:8]}"
    zombie = txn_producer(broker.bootstrap, txn_id)
    zombie.begin_transaction()
    produce(zombie, topic, [b"zombie"])

    # A second instance with the same transactional.id: its init bumps the epoch and aborts the
    # first one's open transaction.
    live = txn_producer(broker.bootstrap, txn_id)
    live.begin_transaction()
    last = produce(live, topic, [b"live"])[-1]
    live.commit_transaction(DEADLINE_S)

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(DEADLINE_S)
    err = raised.value.args[0]
    assert err.fatal(), err
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                          KafkaError.INVALID_PRODUCER_EPOCH), err
    with pytest.raises(KafkaException):
        zombie.begin_transaction()

    got, _ = read(broker.bootstrap, topic, "read_committed", last + 1)
    assert got == [b"live"]
    got, _ = read(broker.bootstrap, topic, "read_uncommitted", last + 1)
    assert got == [b"zombie", b"live"]


def test_describe_configs_reads_transaction_max_timeout(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node_ids = list(admin.list_topics(timeout=DEADLINE_S).brokers)
    assert len(node_ids) == 1
    res = ConfigResource(ResourceType.BROKER, str(node_ids[0]))
    configs = admin.describe_configs([res])[res].result(DEADLINE_S)
    assert configs["transaction.max.timeout.ms"].value == "900000"  # Kafka's default, unchanged
    assert configs["transaction.state.log.replication.factor"].value == "1"


def test_crash_keeps_committed_hides_open(broker):
    """SIGKILL with one transaction committed and one open; restart on the same data and port."""
    topic = new_topic(broker.bootstrap)
    committed = values("committed", 50)
    p = txn_producer(broker.bootstrap, f"smoke-crash-c-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    last = produce(p, topic, committed)[-1]
    p.commit_transaction(DEADLINE_S)
    got, _ = read(broker.bootstrap, topic, "read_committed", last + 1)
    assert got == committed
    del p

    open_id = f"smoke-crash-o-{uuid.uuid4().hex[:8]}"
    opened = values("open", 30)
    # A transaction timeout far above the test's length: the coordinator must not abort the
    # open transaction by itself, however slowly the restart goes.
    o = txn_producer(broker.bootstrap, open_id, **{"transaction.timeout.ms": 600000})
    o.begin_transaction()
    open_offsets = produce(o, topic, opened)  # acknowledged: in the log, never committed

    bootstrap = broker.bootstrap
    broker.kill()
    del o  # the writer is gone too
    assert broker.start() == bootstrap

    # The open transaction holds the last stable offset at its first message.
    got, eof = read(broker.bootstrap, topic, "read_committed", open_offsets[0])
    assert got == committed
    assert eof == open_offsets[0]

    # A new instance of the crashed writer aborts its transaction; later writes become visible.
    o2 = txn_producer(broker.bootstrap, open_id)
    o2.begin_transaction()
    after = values("after", 5)
    last = produce(o2, topic, after)[-1]
    o2.commit_transaction(DEADLINE_S)

    got, _ = read(broker.bootstrap, topic, "read_committed", last + 1)
    assert got == committed + after
    got, _ = read(broker.bootstrap, topic, "read_uncommitted", last + 1)
    assert got == committed + opened + after
