//! Integration tests of dcs-kube-emu with real clients (kube-rs, kubectl) and its kubelet.
//!
//! One test binary per crate: every file here is a module of it, so the workspace links one
//! executable per crate instead of one per file (link time and disk on CI). Run one file's tests
//! with `cargo test -p dcs-kube-emu --test integration <module>::`.

mod common;
mod kube_rs;
mod kubectl;
mod kubelet;
mod workloads;
