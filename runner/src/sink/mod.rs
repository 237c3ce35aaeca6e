//! Sinks: Stream Load into Doris (and, later, the stdout sink).

pub mod encode;
pub mod label;
pub mod stream_load;
