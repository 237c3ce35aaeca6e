//! Integration tests of the test bed: the process kubelet on the genuine control plane (pods,
//! volumes, service-account tokens, restarts, probes, termination, logs through the API server),
//! the real controllers driving pods on it, and the fault-injecting proxy.
//!
//! One test binary per crate: every file here is a module of it. Run one file's tests with
//! `cargo test -p dcs-kube-bed --test integration <module>::`.

mod common;
mod kubectl;
mod kubelet;
mod proxy;
mod workloads;
