//! The test kit: a valid sync and a valid checkpoint to start every test from, changed field by
//! field with typed methods. Compiled for this crate's tests and, with the `testing` feature,
//! for the other crates' tests (each takes `dcs-crds` with it as a dev-dependency); never in a
//! product build.
//!
//! - [`SyncBuilder`]: a `DorisChangelogSync` (as a typed value, its spec, or manifest YAML).
//! - [`CheckpointBuilder`]: a [`crate::checkpoint::Checkpoint`] sample.
//!
//! Both start from a minimal document parsed with serde, so a field added to the API later gets
//! its default here without a change to the kit; a test that needs a field the builders have no
//! method for reaches it with [`SyncBuilder::with_spec`] or [`SyncBuilder::with_doris`].

mod checkpoint;
mod sync;

pub use checkpoint::{CheckpointBuilder, offset};
pub use sync::{SyncBuilder, tls_ca_config_map, tls_ca_secret};
