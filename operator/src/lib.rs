//! The dcs controller: turns each `DorisChangelogSync` into a runner workload and a status.
//!
//! - [`reconcile::plan`]: the pure decision (docs/ARCHITECTURE.md §4.3).
//! - [`reconcile::status`] and [`reconcile::build`]: the pure status and runner objects.
//! - [`reconcile::shell`]: [`reconcile::reconcile`], which sends each pass through the I/O stages
//!   around them (observe, apply, re-initialise, finalize); [`controller`]: the watch loop.
//! - [`probe`]: the source table's properties and Doris's time.
//! - [`checkpoint`]: the runner's checkpoint JSON as the operator reads it.
//! - [`leader`]: leader election with a Lease; [`metrics`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`cleanup`]: what is left in Doris when a sync goes or starts again, and removing it.
//! - [`shutdown`]: stopping on SIGTERM within a bound.
//! - [`facts`]: what a probe of Doris found; [`sync_object`]: a watched sync read tolerantly.
#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod cleanup;
pub mod controller;
pub mod error;
pub mod facts;
pub mod leader;
pub mod metrics;
pub mod probe;
pub mod reconcile;
pub mod shutdown;
pub mod sync_object;

pub use error::{Error, Result};
