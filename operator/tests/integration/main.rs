//! Integration tests of dcs-operator against the test bed's genuine control plane and doris-emu.
//!
//! One test binary per crate: every file here is a module of it, so the workspace links one
//! executable per crate instead of one per file (link time and disk on CI). Run one file's tests
//! with `cargo test -p dcs-operator --test integration <module>::`.

mod cleanup;
mod common;
mod controller;
mod layers;
mod leader;
mod reconcile;
mod reinit;
mod tls;
