//! Prints the DorisChangelogSync CRD as YAML:
//! `cargo run -p dcs-crds --bin crdgen > charts/dcs-operator/crds/dorischangelogsyncs.yaml`
#![forbid(unsafe_code)]

fn main() {
    print!("{}", dcs_crds::crd_yaml());
}
