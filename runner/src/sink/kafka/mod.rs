//! Kafka records from the changelog: the encodings ([`format`]) and their framing in a load body
//! ([`frame`]). The sink that sends them (`spec.sink.kafka`, transactions, the source position in
//! the same transaction) is not built yet (runner/README, "Not built yet").

pub mod format;
pub mod frame;
