//! Reconciling a `DorisChangelogSync`, by stage. The [`shell`] sends each pass to its stage:
//! `apply` (observe, then the pure [`plan`], act, write the [`status`]) or `finalize` (a deleted
//! sync's cleanup and its finalizer). `observe` reads the sync's world; `teardown` is the one
//! stop-the-runner-and-clean-Doris sequence of a re-initialisation (`reinit`) and a deletion,
//! with the pure [`stop`] deciding the wait; [`build`] makes the runner objects.

mod access;
mod api;
mod apply;
pub mod build;
mod finalize;
mod observe;
pub mod plan;
mod reinit;
pub mod shards;
pub mod shell;
pub mod status;
pub mod stop;
mod teardown;

pub(crate) use finalize::release_finalizer;
pub use shell::{Context, FIELD_MANAGER, FINALIZER, reconcile};

#[cfg(test)]
pub(crate) mod testing;
