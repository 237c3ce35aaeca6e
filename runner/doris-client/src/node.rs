//! FE and BE node addresses as the spec writes them (`host:port`): the one grammar lives in the
//! contract crate (`dcs_crds::node`), which the operator's access rules read too.

pub use dcs_crds::node::{host_of, port_of};
