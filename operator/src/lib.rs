//! The dcs controller: turns each `DorisChangelogSync` into a runner workload and a status. Its
//! modules import each other in layers (docs/ARCHITECTURE.md §4), lowest first:
//!
//! - [`error`]: the one error type.
//! - [`checkpoint`]: the runner's checkpoint JSON as the operator reads it; [`facts`]: what a
//!   probe of Doris found; [`sync_object`]: a watched sync read tolerantly; [`leader`]: leader
//!   election with a Lease; [`shutdown`]: stopping on SIGTERM within a bound.
//! - [`probe`]: the source table's properties and Doris's time.
//! - [`cleanup`]: what is left in Doris when a sync goes or starts again, and removing it.
//! - [`reconcile`]: a pass over a sync ([`reconcile::reconcile`]): the pure decisions
//!   ([`reconcile::plan`], [`reconcile::status`], [`reconcile::build`]) below the I/O stages
//!   below the shell.
//! - [`metrics`]: `/metrics`, `/healthz`, `/readyz`.
//! - [`controller`]: the watch loop.
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
