//! dcs-runner: the data plane of a `DorisChangelogSync` (docs/ARCHITECTURE.md §3).
//!
//! The modules form layers, each using only those below it (checked by
//! `tests/integration/layers.rs`):
//!
//! - [`check`], `demo` (feature `demo`, off by default), [`launch`]: what `run` would do and what
//!   is in its way; the pipeline against an embedded Doris emulator; how `run` starts (its shard,
//!   its checkpoint store, the shards it follows).
//! - [`pipeline`]: source → batcher → sink → checkpoint, with 2PC aligned to checkpoints; the
//!   start point, recovery, lost loads, the offset table.
//! - [`metrics`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`source`]: Doris time, Flight SQL sessions, the snapshot reader over tablets, the `@incr`
//!   changelog reader with visibility retries, the retention guard, table properties.
//! - [`sink`]: the [`sink::Sink`] trait (the pipeline's only door to a sink), the factory that
//!   builds the configured one, its Doris (Stream Load, 2PC, the table's DDL, schema evolution,
//!   rebuild) and stdout implementations, the batcher, the encoders.
//! - [`progress`]: what a run is doing, as it publishes it.
//! - [`checkpoint`]: the checkpoint format, its file and ConfigMap stores, a directory read without
//!   its lock.
//! - [`settings`], [`time_zone`]: what a run needs, resolved once from the manifest.
//! - [`error`]: the one error type and its exit codes.
#![forbid(unsafe_code)]

pub mod check;
pub mod checkpoint;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
pub mod launch;
pub mod metrics;
pub mod pipeline;
pub mod progress;
pub mod settings;
pub mod sink;
pub mod source;
pub mod time_zone;

pub use error::{Error, Result};
