//! dcs-runner: the data plane of a `DorisChangelogSync` (DESIGN.md §3).
//!
//! - [`source`]: Doris time, Flight SQL sessions, the snapshot reader over tablets, the `@incr`
//!   changelog reader with visibility retries, table properties.
//! - [`sink`]: the batcher, the JSON-lines encoder, deterministic labels, the Stream Load and 2PC
//!   client, the stdout sink.
//! - [`checkpoint`]: the checkpoint format and its file store.
//! - [`pipeline`]: source → batcher → sink → checkpoint, with 2PC aligned to checkpoints.
//! - `demo` (feature `demo`, on by default): the pipeline against an embedded Doris emulator.
#![forbid(unsafe_code)]

pub mod checkpoint;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod pipeline;
pub mod sink;
pub mod source;

pub use error::{Error, Result};
