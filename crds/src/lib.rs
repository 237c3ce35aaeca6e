//! The `DorisChangelogSync` API (`dcs.dev/v1alpha1`): types, defaults, validation and conditions.
//!
//! Shared by the operator and the runner. Pure: no I/O, no clock, no Kubernetes client.
//!
//! - [`spec`]: the desired state and the custom resource ([`DorisChangelogSync`]).
//! - [`status`]: what the operator observed.
//! - [`validate()`]: every rule the schema cannot express, with field paths.
//! - [`conditions`]: condition names and helpers that keep `lastTransitionTime` honest.
//! - [`duration`] and [`quantity`]: the string formats the spec uses.
//! - [`access`]: what a sync may make the operator do for it (Secrets that opt in, allowed
//!   runner images and service accounts).
//! - [`retention`]: the changelog's retention edge, in milliseconds and as headroom in seconds.
//! - [`doris_table`] and [`preconditions`]: what a source table's properties say, and what a
//!   sync needs of them (the one rule the operator and `dcs-runner check` both apply).
//! - `testing` (feature `testing`, tests only): the test kit, a sample sync and checkpoint
//!   changed field by field.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod checkpoint;
pub mod conditions;
pub mod doris_table;
pub mod duration;
pub mod error;
pub mod label;
pub mod manifest;
pub mod node;
pub mod preconditions;
pub mod quantity;
pub mod retention;
pub mod shard;
pub mod spec;
pub mod status;
pub mod tablets;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod validate;

pub use error::{Error, Result};
pub use manifest::from_manifest;
pub use spec::{
    AutoPartition, BatchSpec, CaBundleRef, ChangelogSpec, CheckpointSpec, CreateTableSpec,
    Credentials, DorisChangelogSync, DorisChangelogSyncSpec, DorisSink, IncrementType, KeyRef,
    OffsetsSpec, OnOffsetExpired, PartitionUnit, RunnerSpec, SchemaChangePolicy, SinkMode,
    SinkSpec, SnapshotSpec, SourceSpec, StartupMode, StartupSpec, StdoutFormat, StdoutSink,
    TableRef, TlsSpec,
};
pub use status::{
    Clock, DorisChangelogSyncStatus, ErrorStatus, OffsetStatus, Phase, ReinitStatus, ShardStatus,
    SinkStatus, SnapshotStatus, SourceStatus, TlsMode, TlsStatus,
};
pub use validate::{FieldError, validate};

/// The CRD as YAML, exactly what `crdgen` prints and the Helm chart ships.
pub fn crd_yaml() -> String {
    use kube::CustomResourceExt;
    serde_yaml::to_string(&DorisChangelogSync::crd()).expect("a CRD always serializes to YAML")
}
