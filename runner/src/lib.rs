//! dcs-runner: the data plane of a `DorisChangelogSync` (docs/ARCHITECTURE.md §3).
//!
//! - [`source`]: Doris time, Flight SQL sessions, the snapshot reader over tablets, the `@incr`
//!   changelog reader with visibility retries, table properties.
//! - [`sink`]: the batcher, the JSON-lines and CSV encoders, deterministic labels, the Stream Load
//!   and 2PC client, the sink table's DDL and schema evolution, the stdout sink.
//! - [`checkpoint`]: the checkpoint format, its file and ConfigMap stores, the offset table.
//! - [`metrics`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`pipeline`]: source → batcher → sink → checkpoint, with 2PC aligned to checkpoints.
//! - [`check`]: `dcs-runner check`, what `run` would do and what is in its way.
//! - `demo` (feature `demo`, on by default): the pipeline against an embedded Doris emulator.
#![forbid(unsafe_code)]

pub mod check;
pub mod checkpoint;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod metrics;
pub mod pipeline;
pub mod sink;
pub mod source;

pub use error::{Error, Result};
