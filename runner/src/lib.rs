//! dcs-runner: the data plane of a `DorisChangelogSync` (DESIGN.md §3).
//!
//! Built so far: the source side (Doris time, Flight SQL sessions, the snapshot reader over tablets,
//! the `@incr` changelog reader with visibility retries, table properties), the checkpoint format
//! and its file store, and the sink's pieces (JSON-lines encoder, deterministic labels, the Stream
//! Load and 2PC client). The batcher, the pipeline that joins them and the command line follow.
#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod error;
pub mod sink;
pub mod source;

pub use error::{Error, Result};
