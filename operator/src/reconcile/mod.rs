//! Reconciling a `DorisChangelogSync`, in three layers (docs/ARCHITECTURE.md §4); a module
//! uses only those of its own layer listed before it and those of lower layers.
//!
//! - The pure decisions, no I/O and no clock: [`names`] and [`stop`] (how long a stop waits);
//!   [`observed`], what a pass read; [`shards`], a sharded snapshot's decisions; [`plan`], what
//!   the operator does; [`status`], what the status says; [`build`], the runner objects.
//! - The I/O stages: [`context`] (what every pass shares), `api` (the few API calls),
//!   `events`, `access` (credentials and TLS), `shard_configmaps`, `observe` (reading a sync's
//!   world), `teardown` (the one stop-the-runner-and-clean-Doris sequence of a re-initialisation
//!   and a deletion), `reinit`, `finalize` (a deleted sync's cleanup and its finalizer) and
//!   `apply` (observe, plan, act, write the status).
//! - The shell: [`reconcile`], which sends each pass to `finalize` or `apply`.

// The pure decisions.
pub mod build;
pub mod names;
pub mod observed;
pub mod plan;
pub mod shards;
pub mod status;
pub mod stop;

// The I/O stages.
mod access;
mod api;
mod apply;
pub mod context;
mod events;
mod finalize;
mod observe;
mod reinit;
mod shard_configmaps;
mod teardown;

// The shell.
mod shell;

pub use context::{Context, FIELD_MANAGER};
pub use finalize::FINALIZER;
pub(crate) use finalize::release_finalizer;
pub use shell::reconcile;

#[cfg(test)]
pub(crate) mod testing;
