//! Kafka records from the changelog: the encodings ([`format`]), their framing in a load body
//! ([`frame`]) and the transactional producer that sends them (`producer`, with the cargo feature
//! `kafka`, which links librdkafka). The sink behind
//! the `Sink` trait (`spec.sink.kafka`, the source position in the same transaction) is not
//! built yet (runner/README, "Not built yet").

pub mod format;
pub mod frame;
#[cfg(feature = "kafka")]
pub mod producer;
