//! Integration tests of dcs-runner against the Doris and Kubernetes emulators.
//!
//! One test binary per crate: every file here is a module of it, so the workspace links one
//! executable per crate instead of one per file (link time and disk on CI). Run one file's tests
//! with `cargo test -p dcs-runner --test integration <module>::`.

mod adversarial;
mod audit_seam;
mod check_cli;
mod checkpoint_configmap;
mod cli;
mod crash;
mod dead_letter;
mod flight_cut;
#[cfg(feature = "kafka")]
mod kafka_producer;
mod layers;
mod load_timeouts;
mod lost_loads;
mod metrics;
mod offset_table;
mod pipeline;
mod randomized;
mod rebuild;
mod retention;
mod schema_policy;
mod seam;
mod shards;
mod sink_table;
mod sink_types;
mod source_access;
mod source_changelog;
mod source_snapshot;
mod source_support;
mod stream_load;
mod tablets_moved;
mod tls;
mod two_runners;
mod whole_splits;
