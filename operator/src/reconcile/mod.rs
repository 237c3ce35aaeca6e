//! Reconciling a `DorisChangelogSync`: pure [`plan`], [`status`], [`build`] and [`stop`], and the
//! I/O [`shell`].

pub mod build;
pub mod plan;
pub mod shell;
pub mod status;
pub mod stop;

pub use shell::{Context, FIELD_MANAGER, FINALIZER, reconcile};

#[cfg(test)]
pub(crate) mod testing;
