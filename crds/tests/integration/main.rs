//! Integration tests of the API types: the CRD, the examples and validation.
//!
//! One test binary per crate: every file here is a module of it, so the workspace links one
//! executable per crate instead of one per file (link time and disk on CI). Run one file's tests
//! with `cargo test -p dcs-crds --test integration <module>::`.

mod crd;
mod examples;
mod kit;
mod validation;
