//! Sinks: the batcher, Stream Load into Doris, and the stdout sink.

pub mod batcher;
pub mod encode;
pub mod label;
pub mod stdout;
pub mod stream_load;
